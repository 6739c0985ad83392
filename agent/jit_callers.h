/* SPDX-License-Identifier: MIT */
/*
 * Where a runtime's own native code is, so the enter hook can tell a call
 * made by it from one made by the code it generates. A function that V8's
 * generated code calls may have its return address read or rewritten by V8
 * (irregexp's stack check moves it when the regexp's code moved in a GC):
 * such a call is counted but not hijacked. Entries are added while
 * instrumenting, before the patches that need them are written, and never
 * removed (a runtime is not unloaded); the hook reads them lock-free.
 */
#ifndef PROFD_JIT_CALLERS_H
#define PROFD_JIT_CALLERS_H

#include <stdbool.h>
#include <stdint.h>

#define JIT_CALLERS_MAX 8

/*
 * Native code of a runtime: [text_lo, text_hi) holds its compiled C++, except
 * [blob_lo, blob_hi) (V8's embedded builtins, generated code linked into
 * .text; empty when lo == hi). Returns 0, or -ENOSPC when the table is full.
 */
int jit_callers_add(uint64_t text_lo, uint64_t text_hi, uint64_t blob_lo, uint64_t blob_hi);

/*
 * Whether return_address lies in some runtime's compiled C++ (not in its
 * generated code, nor anywhere else): the only calls of a flagged function
 * the hook may hijack. Async-signal-safe.
 */
bool jit_callers_is_native(uint64_t return_address);

#endif
