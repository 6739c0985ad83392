/* SPDX-License-Identifier: MIT */
/*
 * Functions that read their own return address (x86-64): the agent does not
 * hijack them, or they would see the exit trampoline (a caller's module
 * looked up with dladdr would be libprofagent.so).
 */
#ifndef PROFD_RETURN_SLOT_X86_64_H
#define PROFD_RETURN_SLOT_X86_64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Whether the function at code (size bytes readable) loads, stores or takes
 * the address of its return slot in its first straight-line instructions,
 * through rsp or rbp set from rsp. Reads after the first branch or call, or
 * through another register, are not seen: a function that keeps
 * __builtin_return_address(0) for a later branch is still hijacked.
 * Returns 1 if it does, 0 if not seen, -ELIBACC if an instruction needs
 * libZydis and it cannot be loaded (nothing is known then).
 */
int return_slot_read_early(const uint8_t *code, size_t size);

#endif
