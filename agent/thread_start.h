/* SPDX-License-Identifier: MIT */
/*
 * When a hook's slow path may start a thread (pthread_create) where it runs:
 * the flusher of a process whose start deferred it (agent/flusher.c
 * flusher_start_deferred). Never called from the fast path.
 */
#ifndef PROFD_THREAD_START_H
#define PROFD_THREAD_START_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/instrument.h"

/*
 * Whether the plan lets any slow path start a thread: malloc is libc's and
 * no function it times lives in libc, the loader, libpthread or malloc's
 * module (whose callers may hold the locks pthread_create takes). Reads the
 * loaded modules (dladdr); call it from the constructor, not a hook.
 */
bool thread_start_plan_allows(const struct instrument_report *report);

/*
 * Whether this thread, in a hook's slow path entered with signal mask
 * entry_mask (bit sig - 1), may call pthread_create now: it is the agent's
 * process (not a vfork child), not on a signal stack, and no signal with a
 * handler of the program's is blocked in entry_mask or set up with
 * SA_NODEFER, unless on a signal stack this thread has (so no handler is
 * running: one could have interrupted malloc).
 * A few dozen system calls; async-signal-safe.
 */
bool thread_start_safe_here(uint64_t entry_mask, int owner_pid);

#endif
