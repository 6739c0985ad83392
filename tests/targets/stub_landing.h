/* SPDX-License-Identifier: MIT */
/*
 * The agent's x86-64 stubs as test targets see them from outside (they
 * include no agent header; trampolines/trampoline_layout.h has the layout):
 * a patched entry jumps to a 64-byte slot whose call returns to slot+5, the
 * exit landing a hijacked return slot holds; the landing jumps to the exit
 * trampoline.
 */
#ifndef PROFD_TEST_STUB_LANDING_H
#define PROFD_TEST_STUB_LANDING_H

#include <stdint.h>
#include <string.h>

#define STUB_SLOT_SIZE 64
#define STUB_LANDING_OFFSET 5
#define STUB_LANDING_LEN 6 /* jmp *rel32(%rip) */

/*
 * A patched function's landing: STUB_LANDING_OFFSET into the stub its entry
 * jumps to (`jmp rel32`, or `jmp *0(%rip)` and the address); 1, which no
 * return slot holds, when the entry is not patched.
 */
static inline uintptr_t stub_landing_of(const void *entry)
{
	const uint8_t *p = entry;
	uint64_t stub;
	int32_t rel;

	memcpy(&rel, p + (p[0] == 0xe9 ? 1 : 2), sizeof(rel));
	if (p[0] == 0xe9)
		return (uintptr_t)p + 5 + rel + STUB_LANDING_OFFSET;
	if (p[0] != 0xff || p[1] != 0x25 || rel != 0)
		return 1;
	memcpy(&stub, p + 6, sizeof(stub));
	return stub + STUB_LANDING_OFFSET;
}

#endif
