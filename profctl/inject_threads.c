// SPDX-License-Identifier: MIT
/*
 * Stopping and resuming the target's threads for the injection (contract in
 * profctl/inject.h): the bookkeeping of each traced thread, its stops and
 * the signals held meanwhile. Never swallows a signal of the target's or
 * leaves a thread stopped.
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

#include "common/proc_text.h"
#include "profctl/inject_internal.h"

/* ---- threads ---------------------------------------------------------- */

struct inject_thread *inject_thread_find(const struct inject_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->n_threads; i++)
		if (t->threads[i]->tid == tid)
			return t->threads[i];
	return NULL;
}

struct inject_thread *inject_thread_add(struct inject_target *t, pid_t tid)
{
	struct inject_thread **grown, *th;

	if (t->n_threads == t->cap_threads) {
		size_t cap = t->cap_threads ? t->cap_threads * 2 : 16;

		grown = realloc(t->threads, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		t->threads = grown;
		t->cap_threads = cap;
	}
	th = calloc(1, sizeof(*th));
	if (!th)
		return NULL;
	th->tid = tid;
	th->state = TH_RUNNING;
	t->threads[t->n_threads++] = th;
	return th;
}

/* A thread born traced (PTRACE_O_TRACECLONE): its first stop comes by itself. */
void inject_thread_add_born(struct inject_target *t, pid_t tid)
{
	struct inject_thread *th;

	if (inject_thread_find(t, tid))
		return;
	th = inject_thread_add(t, tid);
	/* Out of memory: the thread stays traced and stopped until we exit. */
	if (th)
		th->interrupt_sent = true;
}

void inject_thread_interrupt(struct inject_thread *th)
{
	if (th->state != TH_RUNNING || th->interrupt_sent)
		return;
	/*
	 * Sent to a thread already stopped but not yet collected, this leaves a
	 * trap pending that shows as one more PTRACE_EVENT_STOP after its next
	 * resume; every loop below continues through such stops.
	 */
	ptrace(PTRACE_INTERRUPT, th->tid, 0, 0);
	th->interrupt_sent = true;
}

/* Keeps a real signal for delivery at th's next resume (older ones are re-sent then). */
void inject_thread_hold_signal(struct inject_thread *th, int sig, const siginfo_t *si)
{
	if (th->pending_sig)
		th->requeue_mask |= sig_bit(th->pending_sig);
	th->pending_sig = sig;
	th->siginfo_dirty = si != NULL;
	if (si)
		th->pending_info = *si;
}

/*
 * Records a waitpid report of th: returns the signal of a
 * signal-delivery-stop, 0 for any other stop, -1 when th is gone.
 */
int inject_thread_note(struct inject_target *t, struct inject_thread *th, int status)
{
	unsigned long msg = 0;
	int event = (unsigned)status >> 16;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		th->state = TH_GONE;
		if (th->tid == t->pid)
			t->exited = true;
		return -1;
	}
	th->state = TH_STOPPED;
	th->interrupt_sent = false;
	th->sig_stop = false;
	if (event == PTRACE_EVENT_CLONE) {
		if (ptrace(PTRACE_GETEVENTMSG, th->tid, 0, &msg) == 0)
			inject_thread_add_born(t, (pid_t)msg);
		return 0;
	}
	if (event == PTRACE_EVENT_EXEC)
		t->execed = true;
	if (event != 0)
		return 0; /* PTRACE_EVENT_STOP: interrupt, group-stop, a new thread's first stop */
	th->sig_stop = true;
	return WSTOPSIG(status);
}

/*
 * Resumes th (PTRACE_CONT or PTRACE_DETACH) and delivers the signals held
 * for it: the main one through the signal-delivery-stop it is in, with its
 * original siginfo; any other with tgkill (the kernel queues it until th runs).
 */
void inject_thread_resume(struct inject_target *t, struct inject_thread *th, int request)
{
	int sig = 0;

	if (th->state != TH_STOPPED)
		return;
	if (th->pending_sig && th->sig_stop) {
		if (th->siginfo_dirty)
			ptrace(PTRACE_SETSIGINFO, th->tid, 0, &th->pending_info);
		sig = th->pending_sig;
	} else {
		th->requeue_mask |= sig_bit(th->pending_sig);
	}
	for (int s = 1; s <= 64; s++)
		if (th->requeue_mask & sig_bit(s))
			syscall(SYS_tgkill, t->pid, th->tid, s);
	th->pending_sig = 0;
	th->requeue_mask = 0;
	th->siginfo_dirty = false;
	th->sig_stop = false;
	if (ptrace(request, th->tid, 0, (void *)(long)sig) < 0 && errno == ESRCH)
		th->state = TH_DEAD; /* SIGKILLed (exit_group) while stopped */
	else
		th->state = request == PTRACE_DETACH ? TH_GONE : TH_RUNNING;
}

/*
 * Collects th's report if one is there. hold: keep th stopped (its signal
 * held); else pass the stop through and let th run on. Returns true while
 * th runs.
 */
bool inject_thread_poll(struct inject_target *t, struct inject_thread *th, bool hold)
{
	int status, sig;
	pid_t r = waitpid(th->tid, &status, __WALL | WNOHANG);

	if (r == 0 || (r < 0 && errno == EINTR))
		return true;
	if (r < 0) { /* ECHILD: reaped elsewhere */
		th->state = TH_GONE;
		return false;
	}
	sig = inject_thread_note(t, th, status);
	if (sig < 0)
		return false;
	if (sig > 0)
		inject_thread_hold_signal(th, sig, NULL);
	if (hold)
		return false;
	inject_thread_resume(t, th, PTRACE_CONT);
	return th->state == TH_RUNNING;
}

/* Lets every running thread but except pass its stops through (signals delivered at once). */
void inject_poll_others(struct inject_target *t, const struct inject_thread *except)
{
	for (size_t i = 0; i < t->n_threads; i++) /* n_threads grows on clone events */
		if (t->threads[i] != except && t->threads[i]->state == TH_RUNNING)
			inject_thread_poll(t, t->threads[i], false);
}

void inject_resume_others(struct inject_target *t, const struct inject_thread *except)
{
	for (size_t i = 0; i < t->n_threads; i++)
		if (t->threads[i] != except)
			inject_thread_resume(t, t->threads[i], PTRACE_CONT);
}

/* State letter of a thread in /proc/PID/task/TID/stat ('X' if gone), and its flags. */
static char task_state(pid_t pid, pid_t tid, unsigned *flags)
{
	char path[80], *stat, *paren, state = 'X';
	unsigned f = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (proc_text_read(path, &stat, NULL) == 0) {
		paren = strrchr(stat, ')');
		if (!paren || sscanf(paren + 1, " %c %*d %*d %*d %*d %*d %u", &state, &f) != 2)
			state = '?';
		free(stat);
	}
	if (flags)
		*flags = f;
	return state;
}

/* The thread is a zombie or already exiting (PF_EXITING): it will never stop again. */
bool inject_task_exiting(pid_t pid, pid_t tid)
{
	unsigned flags;
	char state = task_state(pid, tid, &flags);

	return state == 'Z' || state == 'X' || (flags & PF_EXITING);
}

/* After the stop timeout: dying threads are dead for good, anything else is stuck. */
static int stop_stuck(struct inject_target *t, char *err, size_t errlen)
{
	int rc = 0;

	for (size_t i = 0; i < t->n_threads; i++) {
		struct inject_thread *th = t->threads[i];

		if (th->state != TH_RUNNING)
			continue;
		if (inject_task_exiting(t->pid, th->tid))
			th->state = TH_DEAD;
		else
			rc = inject_fail(err, errlen, -ETIMEDOUT, "thread %d of PID %d did not stop "
				  "within %d ms (state %c)", th->tid, t->pid, STOP_TIMEOUT_MS,
				  task_state(t->pid, th->tid, NULL));
	}
	return rc;
}

/* Interrupts every running thread and waits until each has stopped or is gone. */
int inject_stop_all(struct inject_target *t, char *err, size_t errlen)
{
	int64_t deadline = mono_ns() + STOP_TIMEOUT_MS * 1000000LL;
	struct pace pace = { 0 };
	size_t running;
	int rc;

	for (size_t i = 0; i < t->n_threads; i++)
		inject_thread_interrupt(t->threads[i]);
	for (;;) {
		running = 0;
		for (size_t i = 0; i < t->n_threads; i++) { /* grows on clone events */
			struct inject_thread *th = t->threads[i];

			/* Dead ones are reaped as we go: the leader's exit is reported last. */
			if (th->state == TH_DEAD)
				inject_thread_poll(t, th, true);
			else if (th->state == TH_RUNNING && inject_thread_poll(t, th, true))
				running++;
		}
		if (t->exited)
			return inject_fail(err, errlen, -ESRCH, "process %d exited", t->pid);
		if (!running)
			return 0;
		if (mono_ns() > deadline) {
			rc = stop_stuck(t, err, errlen);
			if (rc)
				return rc;
			deadline = mono_ns() + STOP_TIMEOUT_MS * 1000000LL;
		}
		inject_pace_wait(&pace);
	}
}

int inject_thread_ips(struct inject_target *t, uint64_t **ips, size_t *n)
{
	struct user_regs_struct r;
	uint64_t *v = calloc(t->n_threads ? t->n_threads : 1, sizeof(*v));
	size_t k = 0;

	*ips = NULL;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_threads; i++)
		if (t->threads[i]->state == TH_STOPPED &&
		    ptrace(PTRACE_GETREGS, t->threads[i]->tid, 0, &r) == 0)
			v[k++] = r.rip;
	*ips = v;
	*n = k;
	return 0;
}
