// SPDX-License-Identifier: MIT
/*
 * Calling functions inside the target (contract in profctl/inject.h): a
 * thread at a safe point, its registers and extended state saved, the call
 * run and its stop collected, everything put back. The thread resumes with
 * the registers it had, whatever happened to the call.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/mono_clock.h"

#include "profctl/inject_internal.h"

/* A remote call in progress: what to put back. */
struct call_frame {
	struct inject_thread *th;
	struct user_regs_struct saved;
	uint8_t *fpu;          /* saved extended state, then a scratch copy of it */
	size_t fpu_size;
	bool fpu_saved;
	uint64_t return_sp;    /* rsp once the callee has returned to address 0 */
};

/* Syscalls a thread blocks in while holding no libc or loader lock. */
static const long blocking_syscalls[] = {
	SYS_read, SYS_readv, SYS_pread64, SYS_write, SYS_writev, SYS_poll, SYS_ppoll,
	SYS_select, SYS_pselect6, SYS_epoll_wait, SYS_epoll_pwait, SYS_futex, SYS_nanosleep,
	SYS_clock_nanosleep, SYS_accept, SYS_accept4, SYS_connect, SYS_recvfrom, SYS_recvmsg,
	SYS_recvmmsg, SYS_sendto, SYS_sendmsg, SYS_wait4, SYS_waitid, SYS_pause,
	SYS_rt_sigsuspend, SYS_rt_sigtimedwait, SYS_msgrcv, SYS_semtimedop, SYS_io_getevents,
#ifdef SYS_epoll_pwait2
	SYS_epoll_pwait2,
#endif
#ifdef SYS_futex_waitv
	SYS_futex_waitv,
#endif
};

/* ---- remote calls ------------------------------------------------------ */

static bool syscall_is_blocking(long nr)
{
	for (size_t i = 0; i < sizeof(blocking_syscalls) / sizeof(blocking_syscalls[0]); i++)
		if (blocking_syscalls[i] == nr)
			return true;
	return false;
}

/* Outside lock-holding code, or inside it but blocked in a syscall that holds none. */
static bool thread_at_safe_point(const struct inject_target *t, const struct user_regs_struct *r)
{
	for (size_t i = 0; i < t->n_lockers; i++)
		if (r->rip >= t->lockers[i].start && r->rip < t->lockers[i].end)
			return (long long)r->orig_rax >= 0 && syscall_is_blocking(r->orig_rax);
	return true;
}

/* Resumes every thread for a moment (their stops passed through), then stops them all. */
int inject_run_briefly(struct inject_target *t, char *err, size_t errlen)
{
	int64_t until = mono_ns() + SAFE_POINT_RUN_MS * 1000000LL;
	struct pace pace = { 0 };

	inject_resume_others(t, NULL);
	while (mono_ns() < until && !t->exited) {
		inject_poll_others(t, NULL);
		inject_pace_wait(&pace);
	}
	return inject_stop_all(t, err, errlen);
}

/*
 * A thread stopped in nanosleep, clock_nanosleep, poll or a timed futex wait
 * resumes through current->restart_block, which the injected code overwrites
 * if it is interrupted in such a syscall itself (timeout, held signal).
 */
static bool thread_needs_restart_block(const struct user_regs_struct *r)
{
	return (long long)r->orig_rax >= 0 && (long long)r->rax == -ERESTART_RESTARTBLOCK;
}

/* A stopped thread at a safe point (regs saved in cf); pass 0 spares restart_block users. */
static struct inject_thread *pick_stopped(struct inject_target *t, struct call_frame *cf,
					  int pass)
{
	for (size_t i = 0; i < t->n_threads; i++) {
		struct inject_thread *th = t->threads[i];

		/* A thread holding a signal keeps its stop: that is how the signal is put back. */
		if (th->state != TH_STOPPED || th->pending_sig || th->requeue_mask ||
		    ptrace(PTRACE_GETREGS, th->tid, 0, &cf->saved))
			continue;
		if (thread_at_safe_point(t, &cf->saved) &&
		    (pass || !thread_needs_restart_block(&cf->saved)))
			return th;
	}
	return NULL;
}

/* Picks the calling thread, letting all threads run briefly between tries. */
static int call_pick_thread(struct inject_target *t, struct call_frame *cf, char *err,
			    size_t errlen)
{
	for (int attempt = 0;; attempt++) {
		size_t live = 0;
		int rc;

		for (size_t i = 0; i < t->n_threads; i++)
			live += t->threads[i]->state == TH_STOPPED;
		if (!live || t->exited)
			return inject_fail(err, errlen, -ESRCH, "process %d exited", t->pid);
		if (t->execed) /* while the threads ran: func belongs to the old image */
			return inject_fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach "
				    "again", t->pid);
		cf->th = pick_stopped(t, cf, 0);
		if (!cf->th)
			cf->th = pick_stopped(t, cf, 1);
		if (cf->th)
			return 0;
		if (attempt == SAFE_POINT_TRIES)
			break;
		rc = inject_run_briefly(t, err, errlen);
		if (rc)
			return rc;
	}
	return inject_fail(err, errlen, -EAGAIN, "no thread of PID %d stopped at a safe point in %d tries "
		    "(all inside libc/ld.so code or holding a signal)", t->pid, SAFE_POINT_TRIES);
}

/* Gets or sets the extended state: all of XSAVE (AVX-512 too), else the FXSAVE area. */
static int fpu_xfer(const struct inject_target *t, pid_t tid, void *buf, size_t size, bool set)
{
	struct iovec iov = { buf, size };
	long rc = !t->xstate_size ?
		ptrace(set ? PTRACE_SETFPREGS : PTRACE_GETFPREGS, tid, 0, buf) :
		ptrace(set ? PTRACE_SETREGSET : PTRACE_GETREGSET, tid, NT_X86_XSTATE, &iov);

	return rc ? -errno : 0;
}

/*
 * The ABI promises the callee an empty x87 stack; a thread stopped in the
 * middle of long double code may have values on it. Empties it (FSW.TOP and
 * the abridged tag word of the FXSAVE area, the first bytes of XSAVE too).
 */
static int fpu_prepare(const struct inject_target *t, struct call_frame *cf)
{
	uint8_t *scratch = cf->fpu + cf->fpu_size;
	uint16_t fsw;

	memcpy(scratch, cf->fpu, cf->fpu_size);
	memcpy(&fsw, scratch + 2, 2);
	if (!(fsw & 0x3800) && !scratch[4])
		return 0;
	fsw &= ~0x3800;
	memcpy(scratch + 2, &fsw, 2);
	scratch[4] = 0;
	return fpu_xfer(t, cf->th->tid, scratch, cf->fpu_size, true);
}

/*
 * Builds the call: below the red zone, the data (16-aligned) and under it a
 * return address 0, so that rsp % 16 == 8 at entry as after a call; rip =
 * func, args in rdi..r9, al = 0 vector args, orig_rax = -1 so that the kernel
 * does not restart the syscall the thread was stopped in, DF and TF clear.
 */
static int call_prepare(struct inject_target *t, struct call_frame *cf, uint64_t func,
			const uint64_t *args, int nargs, const void *data, size_t data_len,
			char *err, size_t errlen)
{
	struct user_regs_struct r = cf->saved;
	unsigned long long *slot[6] = { &r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9 };
	uint64_t data_addr = (r.rsp - RED_ZONE - data_len) & ~15ULL, sp = data_addr - 8;
	pid_t tid = cf->th->tid;
	uint8_t *frame = calloc(1, 8 + data_len);
	ssize_t n;
	int rc = fpu_xfer(t, tid, cf->fpu, cf->fpu_size, false);

	if (rc || !frame) {
		free(frame);
		return inject_fail(err, errlen, rc ? rc : -ENOMEM, "cannot save the FPU state of "
			    "thread %d", tid);
	}
	cf->fpu_saved = true;
	if (data_len)
		memcpy(frame + 8, data, data_len);
	n = pwrite(t->mem_fd, frame, 8 + data_len, (off_t)sp);
	free(frame);
	if (n != (ssize_t)(8 + data_len) && inject_task_exiting(t->pid, t->pid))
		return inject_fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	if (n != (ssize_t)(8 + data_len))
		return inject_fail(err, errlen, n < 0 ? -errno : -EIO, "cannot write the call frame "
			    "at 0x%" PRIx64 " in thread %d: %s", sp, tid,
			    strerror(n < 0 ? errno : EIO));
	for (int i = 0; i < nargs; i++)
		*slot[i] = data && args[i] == INJECT_DATA_ADDR ? data_addr : args[i];
	r.rip = func;
	r.rsp = sp;
	r.rax = 0;
	r.orig_rax = -1ULL;
	r.eflags &= ~(unsigned long long)(EFLAGS_DF | EFLAGS_TF);
	cf->return_sp = sp + 8;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r))
		return inject_fail(err, errlen, -errno, "PTRACE_SETREGS of thread %d: %s", tid,
			    strerror(errno));
	rc = fpu_prepare(t, cf);
	return rc ? inject_fail(err, errlen, rc, "cannot reset the x87 stack of thread %d", tid) : 0;
}

enum call_stop {
	CALL_RETURNED,   /* SIGSEGV on the fetch at the return address 0 */
	CALL_FAULTED,    /* a synchronous fault inside the called code */
	CALL_SIGNALLED,  /* a real signal for the thread: held, re-delivered later */
};

static enum call_stop call_classify(const struct call_frame *cf, int sig, const siginfo_t *si,
				    const struct user_regs_struct *r)
{
	if (sig == SIGSEGV && r->rip == 0 && r->rsp == cf->return_sp)
		return CALL_RETURNED;
	if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) &&
	    si->si_code > 0)
		return CALL_FAULTED;
	return CALL_SIGNALLED;
}

/*
 * One look at the calling thread: 1 while the call runs, 0 once it returned
 * (hold: or stopped at all), or an error. A real signal is held for later:
 * the thread runs injected code and must not see it now.
 */
static int call_poll(struct inject_target *t, struct call_frame *cf, bool hold, uint64_t *ret,
		     char *err, size_t errlen)
{
	struct inject_thread *th = cf->th;
	struct user_regs_struct r;
	siginfo_t si = { 0 };
	enum call_stop what = CALL_SIGNALLED;
	int status, sig;
	pid_t got = waitpid(th->tid, &status, __WALL | WNOHANG);

	if (got == 0 || (got < 0 && errno == EINTR))
		return 1;
	sig = got < 0 ? -1 : inject_thread_note(t, th, status);
	if (sig < 0) {
		th->state = TH_GONE;
		if (t->execed)
			return inject_fail(err, errlen, -ESTALE, "PID %d called execve during the call",
				    t->pid);
		return inject_fail(err, errlen, -ESRCH, "PID %d or its thread %d exited during the call",
			    t->pid, th->tid);
	}
	if (sig > 0) {
		if (ptrace(PTRACE_GETREGS, th->tid, 0, &r) ||
		    ptrace(PTRACE_GETSIGINFO, th->tid, 0, &si)) {
			if (errno != ESRCH)
				return inject_fail(err, errlen, -errno, "cannot read thread %d: %s",
					    th->tid, strerror(errno));
			th->state = TH_DEAD; /* SIGKILLed in its stop */
			return inject_fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
		}
		what = call_classify(cf, sig, &si, &r);
	}
	if (sig > 0 && what == CALL_RETURNED) {
		*ret = r.rax;
		return 0;
	}
	if (sig > 0 && what == CALL_FAULTED)
		return inject_fail(err, errlen, -EFAULT, "the call faulted in thread %d: signal %d "
			    "(%s) at rip 0x%llx, address %p", th->tid, sig, strsignal(sig),
			    r.rip, si.si_addr);
	if (hold) {
		if (sig > 0)
			inject_thread_hold_signal(th, sig, NULL); /* delivered through this very stop */
		return 0;
	}
	if (sig > 0)
		inject_thread_hold_signal(th, sig, &si); /* this stop goes away: keep its siginfo */
	th->sig_stop = false;
	th->state = ptrace(PTRACE_CONT, th->tid, 0, 0) ? TH_STOPPED : TH_RUNNING;
	return 1;
}

/*
 * A dying leader reports its exit only after all other threads are reaped:
 * look at its state instead of waiting for the timeout.
 */
static bool thread_is_dying(const struct inject_target *t, struct inject_thread *th)
{
	if (th->state != TH_RUNNING || !inject_task_exiting(t->pid, th->tid))
		return false;
	th->state = TH_DEAD;
	return true;
}

/* Interrupts the call after its timeout; the thread's registers are restored afterwards. */
static int call_timeout(struct inject_target *t, struct call_frame *cf, int timeout_ms,
			char *err, size_t errlen)
{
	struct inject_thread *th = cf->th;
	int64_t deadline = mono_ns() + STOP_TIMEOUT_MS * 1000000LL;
	struct pace pace = { 0 };
	uint64_t ignored;

	inject_thread_interrupt(th);
	while (th->state == TH_RUNNING && mono_ns() < deadline &&
	       call_poll(t, cf, true, &ignored, err, errlen) > 0)
		inject_pace_wait(&pace);
	if (thread_is_dying(t, th))
		return inject_fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	if (th->state == TH_RUNNING)
		return inject_fail(err, errlen, -ETIMEDOUT, "call in thread %d timed out after %d ms and "
			    "the thread does not stop: left running the injected code", th->tid,
			    timeout_ms);
	return inject_fail(err, errlen, -ETIMEDOUT, "call in thread %d timed out after %d ms "
		    "(interrupted, registers put back; locks it took may still be held)",
		    th->tid, timeout_ms);
}

static int call_run(struct inject_target *t, struct call_frame *cf, bool others_run,
		    int timeout_ms, uint64_t *ret, char *err, size_t errlen)
{
	struct inject_thread *th = cf->th;
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
	int64_t next_check = mono_ns() + ZOMBIE_CHECK_NS;
	struct pace pace = { 0 };
	int rc;

	if (others_run)
		inject_resume_others(t, th);
	if (ptrace(PTRACE_CONT, th->tid, 0, 0)) {
		if (errno != ESRCH)
			return inject_fail(err, errlen, -errno, "PTRACE_CONT of thread %d: %s", th->tid,
				    strerror(errno));
		th->state = TH_DEAD;
		return inject_fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	}
	th->state = TH_RUNNING;
	th->sig_stop = false;
	for (;;) {
		rc = call_poll(t, cf, false, ret, err, errlen);
		if (rc <= 0)
			return rc;
		if (others_run)
			inject_poll_others(t, th);
		if (mono_ns() >= next_check && thread_is_dying(t, th))
			return inject_fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
		if (mono_ns() >= next_check)
			next_check = mono_ns() + ZOMBIE_CHECK_NS;
		if (mono_ns() >= deadline)
			return call_timeout(t, cf, timeout_ms, err, errlen);
		inject_pace_wait(&pace);
	}
}

static int call_restore(struct inject_target *t, struct call_frame *cf)
{
	pid_t tid = cf->th->tid;

	if (cf->th->state != TH_STOPPED)
		return -ESRCH;
	if (ptrace(PTRACE_SETREGS, tid, 0, &cf->saved))
		return -errno;
	return cf->fpu_saved ? fpu_xfer(t, tid, cf->fpu, cf->fpu_size, true) : 0;
}

int inject_call(struct inject_target *t, uint64_t func, const uint64_t *args, int nargs,
		const void *data, size_t data_len, bool others_run, int timeout_ms,
		uint64_t *ret, char *err, size_t errlen)
{
	struct call_frame cf = { 0 };
	char later[256];
	int rc, rc2;

	if (!t || !ret || nargs < 0 || nargs > 6 || (nargs && !args) || (data_len && !data) ||
	    data_len > MAX_CALL_DATA || timeout_ms <= 0)
		return inject_fail(err, errlen, -EINVAL, "invalid call arguments");
	if (t->exited)
		return inject_fail(err, errlen, -ESRCH, "process %d exited", t->pid);
	if (t->execed)
		return inject_fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach again",
			    t->pid);
	cf.fpu_size = t->xstate_size ? t->xstate_size : sizeof(struct user_fpregs_struct);
	cf.fpu = malloc(2 * cf.fpu_size);
	if (!cf.fpu)
		return inject_fail(err, errlen, -ENOMEM, "out of memory");
	rc = call_pick_thread(t, &cf, err, errlen);
	if (rc)
		goto out;
	rc = call_prepare(t, &cf, func, args, nargs, data, data_len, err, errlen);
	if (!rc)
		rc = call_run(t, &cf, others_run, timeout_ms, ret, err, errlen);
	rc2 = call_restore(t, &cf);
	if (rc2 && !rc)
		rc = inject_fail(err, errlen, rc2, "cannot restore the registers of thread %d: %s",
			  cf.th->tid, strerror(-rc2));
	/* Others that ran, and threads the call created, stop again. */
	rc2 = inject_stop_all(t, later, sizeof(later));
	if (rc2 && !rc)
		rc = inject_fail(err, errlen, rc2, "%s", later);
out:
	free(cf.fpu);
	return rc;
}
