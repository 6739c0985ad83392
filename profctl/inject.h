/* SPDX-License-Identifier: MIT */
/*
 * ptrace injection for `profctl attach`: stops every thread of a running
 * process with the caller's own ptrace rights (like gdb), runs function calls
 * inside it on a thread chosen at a safe point, and puts everything back.
 * Owns the ptrace state of the target from inject_attach to inject_detach;
 * whatever fails, the target is left running with the registers it had.
 */
#ifndef PROFD_INJECT_H
#define PROFD_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inject_target;

/*
 * Seizes and stops every thread of pid (threads born meanwhile included:
 * /proc/PID/task is rescanned until stable, PTRACE_O_TRACECLONE catches the
 * rest). On failure returns a negative errno and a one-line reason in err,
 * naming the cause: "no such process", "not permitted: ... (ptrace_scope=N;
 * needs the same user or CAP_SYS_PTRACE)", "already traced by PID N",
 * "process exited during attach", "statically linked: no dynamic loader".
 */
int inject_attach(pid_t pid, struct inject_target **out, char *err, size_t errlen);

/* Address of symbol in the first loaded module whose file name matches module_glob. */
int inject_resolve(struct inject_target *t, const char *module_glob, const char *symbol,
		   uint64_t *addr, char *err, size_t errlen);

/* True when a module whose file name matches module_glob is mapped in the target. */
bool inject_has_module(struct inject_target *t, const char *module_glob);

/*
 * Calls func(args[0..nargs)) (at most 6 integer args) on a thread stopped
 * at a safe point (outside libc/ld.so code, or blocked in a syscall), with
 * the full register and extended state (NT_X86_XSTATE) saved and restored,
 * syscall restart neutralised, red zone skipped, stack aligned, direction
 * flag clear. `data` (may be NULL) is copied onto that thread's stack first;
 * an argument equal to INJECT_DATA_ADDR is replaced by its address there.
 * When others_run is true the other threads run during the call (needed for
 * calls that may take locks, e.g. dlopen) and are stopped again afterwards.
 * Returns 0 with *ret = rax, or a negative errno (-ETIMEDOUT after
 * timeout_ms: the thread is interrupted and its registers put back).
 */
#define INJECT_DATA_ADDR UINT64_MAX
int inject_call(struct inject_target *t, uint64_t func, const uint64_t *args, int nargs,
		const void *data, size_t data_len, bool others_run, int timeout_ms,
		uint64_t *ret, char *err, size_t errlen);

/* Instruction pointers of every stopped thread (for "do not patch under a thread"). */
int inject_thread_ips(struct inject_target *t, uint64_t **ips, size_t *n);

/* Resumes every thread and detaches; the target runs on as if nothing happened. */
void inject_detach(struct inject_target *t);

#endif
