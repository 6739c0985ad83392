// SPDX-License-Identifier: MIT
/*
 * Stops every other thread of the process from inside it (see
 * world_stop.h), for the agent to rewrite code when nobody outside will.
 * Never with a signal, which the program could see. Allocates nothing but
 * its one mapping and takes no lock a target thread may hold.
 */
#define PR_FMT "profagent: "

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/world_stop.h"
#include "common/mono_clock.h"

/*
 * When the daemon is gone the agent puts the original code back itself, and
 * code may only be rewritten while no thread can execute it. A signal to
 * every thread would stop them, but it is visible to the program: a handler
 * cuts nanosleep, poll, epoll_wait and select short with EINTR whatever
 * SA_RESTART says (signal(7)), a thread that blocks all signals is never
 * reached, and the number may be the program's own. So a helper process
 * sharing our memory (CLONE_VM, no SIGCHLD, every signal blocked, as the
 * calling agent thread) stops the threads with PTRACE_SEIZE/INTERRUPT, as
 * `profctl attach` does from outside: no mask blocks that, and the kernel
 * restarts whatever syscall it interrupted. The helper runs on a stack of
 * its own with the calling thread's TLS (the agent guard is set there) and
 * calls no function that may take a lock: threads stopped anywhere may hold
 * malloc's or stdio's.
 */
#define STOP_MAX_THREADS 4096
#define STOP_STACK_SIZE (256u << 10)
#define STOP_TIMEOUT_NS (1000ull * 1000 * 1000)  /* a thread not stopped by then: D state, vfork */
#define STOP_SCAN_ROUNDS 64
#define STOP_POLL_NS (50 * 1000)
#define STOP_HOLD_CHECK_NS (20 * 1000 * 1000)

enum stop_phase {
	STOP_STARTING,  /* the helper is seizing */
	STOP_HELD,      /* every other thread is stopped */
	STOP_FAILED,    /* the helper gave up (err), and let every thread go */
	STOP_RELEASED,  /* the caller is done: detach and exit */
};

struct stopped_thread {
	pid_t tid;
	int stopped;    /* in a ptrace-stop we collected */
	int gone;       /* exited, or its stop could not be collected */
	int sig;        /* signal of its signal-delivery-stop: given back at detach */
};

/* Shared by the calling thread and the helper; mapped for one stop only. */
struct world_stop {
	_Atomic int phase;      /* enum stop_phase; futex word */
	int err;
	pid_t pid, self, helper;
	char task_dir[32];
	size_t n;
	struct stopped_thread threads[STOP_MAX_THREADS];
	_Alignas(64) uint8_t stack[STOP_STACK_SIZE];
};

static struct world_stop *world; /* the flusher thread's, between stop and resume */

static void pause_ns(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

static void futex_wait_ns(_Atomic int *word, int val, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* No snprintf in the helper: "/proc/<pid>/task" built by hand. */
static char *put_decimal(char *p, unsigned v)
{
	char digits[12];
	int n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = digits[--n];
	return p;
}

static pid_t parse_decimal(const char *s)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > INT_MAX / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return (pid_t)v;
}

/* A zombie (an exited thread, a leader after pthread_exit) cannot be seized and needs no stop. */
static int task_is_zombie(const struct world_stop *w, pid_t tid)
{
	char path[64], buf[512], *p = path;
	ssize_t n;
	int fd;

	for (const char *s = w->task_dir; *s; s++)
		*p++ = *s;
	*p++ = '/';
	p = put_decimal(p, (unsigned)tid);
	memcpy(p, "/stat", sizeof("/stat"));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1; /* gone altogether */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static int world_knows(const struct world_stop *w, pid_t tid)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->threads[i].tid == tid)
			return 1;
	return 0;
}

/* 1: tid is ours now (an interrupt on its way); 0: it needs none; or a negative errno. */
static int world_seize(struct world_stop *w, pid_t tid)
{
	if (w->n == STOP_MAX_THREADS)
		return -E2BIG;
	/* TRACEEXEC: an exec shows as an event, not as a SIGTRAP we would have to give back */
	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACEEXEC) == 0) {
		w->threads[w->n++] = (struct stopped_thread){ .tid = tid };
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		return 1;
	}
	if (errno == ESRCH || (errno == EPERM && task_is_zombie(w, tid)))
		return 0;
	return -errno; /* EPERM: traced by another (a debugger, profctl), or not allowed */
}

/* Seizes every thread of /proc/PID/task not yet ours; returns how many, or a negative errno. */
static int world_scan(struct world_stop *w)
{
	_Alignas(8) char buf[4096];
	int fd = open(w->task_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int added = 0, err = 0;
	long n;

	if (fd < 0)
		return -errno;
	while (err >= 0 && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && err >= 0;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);
			pid_t tid = parse_decimal(d->d_name);

			off += d->d_reclen;
			if (tid <= 0 || tid == w->self || world_knows(w, tid))
				continue;
			err = world_seize(w, tid);
			added += err > 0;
		}
	}
	close(fd);
	return err < 0 ? err : added;
}

/* Waits for the stop of every seized thread; 0, -ETIMEDOUT, or -ECANCELED after an exec. */
static int world_collect(struct world_stop *w, uint64_t deadline)
{
	for (;;) {
		size_t running = 0;

		for (size_t i = 0; i < w->n; i++) {
			struct stopped_thread *t = &w->threads[i];
			int status, event;
			pid_t r;

			if (t->stopped || t->gone)
				continue;
			r = waitpid(t->tid, &status, __WALL | WNOHANG);
			if (r == 0 || (r < 0 && errno == EINTR)) {
				running++;
				continue;
			}
			if (r < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
				t->gone = 1;
				continue;
			}
			t->stopped = 1;
			event = status >> 16;
			if (event == PTRACE_EVENT_EXEC)
				return -ECANCELED; /* another program now: nothing to patch */
			if (event == 0) /* signal-delivery-stop: held until the detach */
				t->sig = WSTOPSIG(status);
		}
		if (!running)
			return 0;
		if (mono_clock_ns() > deadline)
			return -ETIMEDOUT;
		pause_ns(STOP_POLL_NS);
	}
}

static int world_stop_all(struct world_stop *w)
{
	uint64_t deadline = mono_clock_ns() + STOP_TIMEOUT_NS;

	for (int round = 0; round < STOP_SCAN_ROUNDS; round++) {
		/* a scan made while every known thread is stopped sees every thread there is */
		int added = world_scan(w);

		if (added < 0)
			return added;
		if (round > 0 && added == 0)
			break;
		added = world_collect(w, deadline);
		if (added < 0)
			return added;
		if (round == STOP_SCAN_ROUNDS - 1)
			return -EAGAIN; /* threads keep appearing faster than they stop */
	}
	return 0;
}

/*
 * Lets every thread go with the signal it was stopped for. A thread seized
 * but not stopped yet cannot be detached: the helper's exit releases it
 * (the kernel detaches a dead tracer's tracees), its pending interrupt too.
 */
static void world_detach_all(struct world_stop *w)
{
	for (size_t i = 0; i < w->n; i++) {
		struct stopped_thread *t = &w->threads[i];

		if (t->stopped && !t->gone)
			ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)t->sig);
	}
}

static int world_helper(void *arg)
{
	struct world_stop *w = arg;
	int err = world_stop_all(w);

	if (err) {
		world_detach_all(w);
		w->err = err;
		atomic_compare_exchange_strong(&w->phase, &(int){ STOP_STARTING }, STOP_FAILED);
		futex_wake(&w->phase);
		return 0;
	}
	if (!atomic_compare_exchange_strong(&w->phase, &(int){ STOP_STARTING }, STOP_HELD)) {
		world_detach_all(w); /* the caller stopped waiting */
		return 0;
	}
	futex_wake(&w->phase);
	/* until released, or until the calling thread is gone (exec, exit_group) */
	while (atomic_load(&w->phase) == STOP_HELD &&
	       syscall(SYS_tgkill, w->pid, w->self, 0) == 0)
		futex_wait_ns(&w->phase, STOP_HELD, STOP_HOLD_CHECK_NS);
	world_detach_all(w);
	return 0;
}

/* Reaps the helper (it exits once released), killing it if it does not. */
static void world_reap(struct world_stop *w)
{
	uint64_t deadline = mono_clock_ns() + STOP_TIMEOUT_NS;
	pid_t r;

	while ((r = waitpid(w->helper, NULL, __WALL | WNOHANG)) == 0 && mono_clock_ns() < deadline)
		pause_ns(STOP_POLL_NS);
	if (r == 0) {
		kill(w->helper, SIGKILL);
		waitpid(w->helper, NULL, __WALL);
	}
}

static int read_small_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

/*
 * Whether a helper of ours may trace this process without changing any of
 * its settings: nobody traces it already, no seccomp filter (one could kill
 * it for a ptrace or clone), dumpable, and Yama lets a child trace its
 * parent without PR_SET_PTRACER (the program may have set that for its own
 * crash handler, and there is no way to read it back).
 */
static int world_may_trace(void)
{
	char buf[4096];
	const char *tracer, *seccomp;

	if (prctl(PR_GET_DUMPABLE) != 1)
		return 0;
	if (read_small_file("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) == 0 &&
	    buf[0] != '0')
		return 0;
	if (read_small_file("/proc/self/status", buf, sizeof(buf)))
		return 0;
	tracer = strstr(buf, "\nTracerPid:\t");
	seccomp = strstr(buf, "\nSeccomp:\t");
	return tracer && tracer[12] == '0' && (!seccomp || seccomp[10] == '0');
}

int world_stop_others(void)
{
	struct world_stop *w;
	uint64_t deadline;
	char *p;
	int err, phase;

	if (world)
		return -EBUSY;
	if (!world_may_trace())
		return -EPERM;
	w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w == MAP_FAILED)
		return -ENOMEM;
	w->pid = getpid();
	w->self = gettid();
	memcpy(w->task_dir, "/proc/", 6);
	p = put_decimal(w->task_dir + 6, (unsigned)w->pid);
	memcpy(p, "/task", sizeof("/task"));
	/* no CSIGNAL: its exit sends no SIGCHLD, and only __WALL waits for it */
	w->helper = clone(world_helper, w->stack + sizeof(w->stack),
			  CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED, w);
	if (w->helper < 0) {
		err = -errno;
		goto err_unmap;
	}
	deadline = mono_clock_ns() + 2 * STOP_TIMEOUT_NS;
	while (atomic_load(&w->phase) == STOP_STARTING && mono_clock_ns() < deadline)
		futex_wait_ns(&w->phase, STOP_STARTING, STOP_HOLD_CHECK_NS);
	phase = STOP_STARTING;
	if (atomic_compare_exchange_strong(&w->phase, &phase, STOP_RELEASED)) {
		err = -ETIMEDOUT; /* the helper lets go of what it holds when it sees this */
	} else if (phase == STOP_HELD) {
		world = w;
		return 0;
	} else {
		err = w->err;
	}
	world_reap(w);
err_unmap:
	munmap(w, sizeof(*w));
	return err;
}

void world_resume_others(void)
{
	struct world_stop *w = world;

	if (!w)
		return;
	atomic_store(&w->phase, STOP_RELEASED);
	futex_wake(&w->phase);
	world_reap(w);
	world = NULL;
	munmap(w, sizeof(*w));
}
