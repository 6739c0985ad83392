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
 * Thread safety: ptrace serves only the thread that attached, so every call
 * on a target must come from the thread that called inject_attach. Targets
 * share nothing; different threads may each hold their own.
 */

/*
 * Seizes and stops every thread of pid (threads born meanwhile included:
 * /proc/PID/task is rescanned until stable, PTRACE_O_TRACECLONE catches the
 * rest). On failure returns a negative errno and a one-line reason in err,
 * naming the cause: -ESRCH "no such process", -EPERM "not permitted: ...
 * (ptrace_scope=N; needs the same user or CAP_SYS_PTRACE)", -EBUSY "already
 * traced by PID N", -ESRCH "process exited during attach", -ENOEXEC
 * "statically linked: no dynamic loader", -ENOTSUP "... runs under a seccomp
 * filter" (refused: an injected openat/mmap could kill it), -EINVAL for a
 * thread id, -ETIMEDOUT for a thread that does not stop (D state).
 */
int inject_attach(pid_t pid, struct inject_target **out, char *err, size_t errlen);

/*
 * Address of symbol in the first loaded module whose file name matches
 * module_glob (fnmatch on the basename, e.g. "libc.so.6", "libfoo*.so*").
 * The file is read through /proc/PID/root (map_files once deleted): .dynsym
 * and .symtab, a global default-version definition preferred. An IFUNC is
 * resolved by calling its resolver in the target. -ENOENT: no such module
 * or symbol; -ESTALE: the target called execve since inject_attach.
 */
int inject_resolve(struct inject_target *t, const char *module_glob, const char *symbol,
		   uint64_t *addr, char *err, size_t errlen);

/* True when a module whose file name matches module_glob is mapped in the target. */
bool inject_has_module(struct inject_target *t, const char *module_glob);

/*
 * Calls func(args[0..nargs)) (at most 6 integer args) on a thread stopped
 * at a safe point (outside libc/ld.so code, or blocked in a syscall), with
 * the full register and extended state (NT_X86_XSTATE) saved and restored,
 * syscall restart neutralised, red zone skipped, stack aligned, direction
 * flag clear. `data` (may be NULL, at most 64 KiB) is copied onto that
 * thread's stack first; when data is given, an argument equal to
 * INJECT_DATA_ADDR is replaced by its address there (without data, such an
 * argument is passed as is, so -1 stays passable).
 * When others_run is true the other threads run during the call (needed for
 * calls that may take locks, e.g. dlopen) and are stopped again afterwards;
 * their signals are delivered at once. A real signal for the calling thread
 * is held and delivered after the call, at that thread's next resume.
 * Returns 0 with *ret = rax, or a negative errno (-ETIMEDOUT after
 * timeout_ms: the thread is interrupted and its registers put back, but
 * locks the call took stay taken; -EFAULT: the call faulted, the fault
 * signal is discarded; -EAGAIN: no thread at a safe point after 50 tries;
 * -ESRCH: the process exited; -ESTALE: it called execve).
 */
#define INJECT_DATA_ADDR UINT64_MAX
int inject_call(struct inject_target *t, uint64_t func, const uint64_t *args, int nargs,
		const void *data, size_t data_len, bool others_run, int timeout_ms,
		uint64_t *ret, char *err, size_t errlen);

/*
 * Names path, a local file, as the copy of a module the target loaded from a
 * memfd: symbols of such a mapping (deleted from the start, readable through
 * map_files only with CAP_SYS_ADMIN) are then read from path, once its first
 * segment is proven identical to the mapped one. 0 or -ENOMEM.
 */
int inject_module_file(struct inject_target *t, const char *path);

/*
 * A duplicate, in this process (close-on-exec), of the target's descriptor
 * remote_fd (pidfd_getfd, kernel 5.6: the ptrace rights inject_attach
 * proved). Returns it, or a negative errno with a reason in err (-ENOSYS:
 * older kernel; -EBADF: no such descriptor).
 */
int inject_take_fd(struct inject_target *t, int remote_fd, char *err, size_t errlen);

/*
 * Instruction pointers of every stopped thread (for "do not patch under a
 * thread"): *ips is malloc'ed, the caller frees it. 0 or -ENOMEM.
 */
int inject_thread_ips(struct inject_target *t, uint64_t **ips, size_t *n);

/*
 * Lets every thread run for a moment (2 ms), then stops them all again: for a
 * retry that needs them somewhere else. 0, or a negative errno with a reason in
 * err (-ESRCH: the process exited).
 */
int inject_run_briefly(struct inject_target *t, char *err, size_t errlen);

/*
 * Resumes every thread and detaches, delivering the signals held meanwhile
 * (with their siginfo); the target runs on as if nothing happened. Waits
 * for threads that died meanwhile, so that the target's parent can reap
 * it. Frees t (NULL is a no-op). Bounded: a few seconds at worst.
 */
void inject_detach(struct inject_target *t);

#endif
