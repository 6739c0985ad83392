// SPDX-License-Identifier: MIT
/*
 * ptrace injection for `profctl attach` (contract in profctl/inject.h). Owns
 * every ptrace request made on the target between inject_attach and
 * inject_detach. Must never kill the target (no PTRACE_O_EXITKILL), swallow
 * one of its signals, or leave a thread stopped or with changed registers.
 * No global state: everything lives in struct inject_target.
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
#include "profctl/inject.h"

#define RED_ZONE 128
#define MAX_CALL_DATA (64 * 1024)
#define STOP_TIMEOUT_MS 2000     /* a thread not stopped by then is stuck (D state) */
#define SCAN_ROUNDS 100          /* /proc/PID/task rescans before giving up */
#define SAFE_POINT_TRIES 50
#define BUSY_POLL_NS 10000
#define ZOMBIE_CHECK_NS (10 * 1000000LL)
#define SAFE_POINT_RUN_MS 2      /* how long the threads run between two tries */
#define RESOLVER_TIMEOUT_MS 1000
#define XSTATE_PROBE_SIZE (64 * 1024)
#define EFLAGS_TF 0x100
#define EFLAGS_DF 0x400
#define DELETED_SUFFIX " (deleted)"
#define ERESTART_RESTARTBLOCK 516 /* kernel-internal, include/linux/errno.h */
#define VERSYM_HIDDEN 0x8000     /* in .gnu.version: not the default version */
#define PF_EXITING 0x4            /* include/linux/sched.h, in /proc/PID/stat flags */

enum thread_state {
	TH_RUNNING, /* resumed, or seized: a report is on its way */
	TH_STOPPED, /* in a ptrace-stop we have collected */
	TH_DEAD,    /* died while traced: a zombie until we wait for it */
	TH_GONE,    /* reaped or detached: no longer ours */
};

struct inject_thread {
	pid_t tid;
	enum thread_state state;
	bool interrupt_sent;   /* PTRACE_INTERRUPT sent since it last stopped */
	bool sig_stop;         /* the current stop is a signal-delivery-stop */
	int pending_sig;       /* real signal to deliver at the next resume, 0 if none */
	bool siginfo_dirty;    /* the current stop's siginfo is not pending_info */
	siginfo_t pending_info;
	uint64_t requeue_mask; /* further held signals (bit sig-1), re-sent with tgkill */
};

struct addr_range {
	uint64_t start, end;
};

struct inject_target {
	pid_t pid;
	pid_t tracer;          /* the thread that attached: TracerPid of our tracees */
	int mem_fd;            /* /proc/PID/mem, writes read-only pages too */
	struct inject_thread **threads; /* pointers stay valid while the array grows */
	size_t n_threads, cap_threads;
	struct addr_range *lockers; /* code of libc, ld.so, allocators: not a safe point */
	size_t n_lockers;
	size_t xstate_size;    /* NT_X86_XSTATE size; 0: only PTRACE_GETFPREGS works */
	bool exited;
	bool execed;           /* a thread called execve since: addresses are stale */
};

/* A remote call in progress: what to put back. */
struct call_frame {
	struct inject_thread *th;
	struct user_regs_struct saved;
	uint8_t *fpu;          /* saved extended state, then a scratch copy of it */
	size_t fpu_size;
	bool fpu_saved;
	uint64_t return_sp;    /* rsp once the callee has returned to address 0 */
};

/* Modules whose code may hold a lock that a remote call takes again. */
static const char *const locker_globs[] = {
	"libc.so*", "libc-*.so", "ld-*.so*", "ld64.so*", "libpthread.so*", "libpthread-*.so",
	"libdl.so*", "libjemalloc*.so*", "libtcmalloc*.so*", "libmimalloc*.so*",
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

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* Signed: the deadlines below are compared and subtracted as int64_t. */
static int64_t mono_ns(void)
{
	return (int64_t)mono_clock_ns();
}

/*
 * Polling pace: spin for the first BUSY_POLL_NS (most stops arrive within
 * microseconds, and a sleep costs at least the 50 us timer slack), then
 * short sleeps growing to 0.64 ms. No sched_yield: with the target's threads
 * busy on every CPU, one yield can cost a whole time slice.
 */
struct pace {
	int64_t start;
	unsigned sleeps;
};

static void pace_wait(struct pace *p)
{
	struct timespec ts = { 0, 5000L << (p->sleeps < 7 ? p->sleeps : 7) };

	if (!p->start)
		p->start = mono_ns();
	if (mono_ns() - p->start < BUSY_POLL_NS) {
		__builtin_ia32_pause();
		return;
	}
	nanosleep(&ts, NULL);
	p->sleeps++;
}

static uint64_t sig_bit(int sig)
{
	return sig > 0 && sig <= 64 ? 1ULL << (sig - 1) : 0;
}

/* Reads a whole /proc file into a NUL-terminated malloc'ed buffer. */
static int read_whole(const char *path, char **out)
{
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap), *bigger;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n;

	if (fd < 0 || !buf) {
		rc = fd < 0 ? -errno : -ENOMEM;
		goto err_free;
	}
	for (;;) {
		if (len + 1 >= cap) {
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				rc = -ENOMEM;
				goto err_free;
			}
			buf = bigger;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto err_free;
		}
		if (n == 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	return 0;
err_free:
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* Value of field "name:" in a /proc status text, or NULL. */
static const char *status_value(const char *status, const char *name)
{
	size_t len = strlen(name);
	const char *p = status;

	while (p && *p) {
		if (strncmp(p, name, len) == 0 && p[len] == ':')
			return p + len + 1 + strspn(p + len + 1, " \t");
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return NULL;
}

static long status_long(const char *status, const char *name, long dflt)
{
	const char *v = status_value(status, name);

	return v ? strtol(v, NULL, 10) : dflt;
}

/* ---- /proc/PID/maps ------------------------------------------------------ */

struct map_entry {
	uint64_t start, end, offset;
	char perms[5];
	const char *path;      /* points into the maps buffer; "" when anonymous */
	bool deleted;          /* the file was replaced or removed since it was mapped */
};

/* Parses the next line of a maps buffer, NUL-terminating it in place. */
static bool maps_next(char **cursor, struct map_entry *m)
{
	while (**cursor) {
		char *line = *cursor, *nl = strchr(line, '\n');
		size_t len, dlen = strlen(DELETED_SUFFIX);
		int pos = 0;

		*cursor = nl ? nl + 1 : line + strlen(line);
		if (nl)
			*nl = '\0';
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*s %*u %n", &m->start,
			   &m->end, m->perms, &m->offset, &pos) != 4 || pos == 0)
			continue;
		m->path = line + pos;
		len = strlen(m->path);
		m->deleted = len > dlen && strcmp(line + pos + len - dlen, DELETED_SUFFIX) == 0;
		if (m->deleted)
			line[pos + len - dlen] = '\0';
		return true;
	}
	return false;
}

/* The file name of a mapping matches one of the globs (fnmatch). */
static bool matches_any(const char *path, const char *const *globs, size_t n)
{
	const char *slash = strrchr(path, '/');

	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], slash ? slash + 1 : path, 0) == 0)
			return true;
	return false;
}

static int read_maps(pid_t pid, char **maps)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	return read_whole(path, maps);
}

/* Records the code of lock-holding modules; returns 1 if a dynamic loader or libc is mapped. */
static int load_lockers(struct inject_target *t, char *maps)
{
	static const char *const dynamic_globs[] = { "ld-*.so*", "ld64.so*", "libc.so*" };
	size_t n = sizeof(locker_globs) / sizeof(locker_globs[0]);
	struct addr_range *grown;
	struct map_entry m;
	int dynamic = 0;

	while (maps_next(&maps, &m)) {
		if (m.path[0] != '/')
			continue;
		if (matches_any(m.path, dynamic_globs, 3))
			dynamic = 1;
		if (m.perms[2] != 'x' || !matches_any(m.path, locker_globs, n))
			continue;
		grown = realloc(t->lockers, (t->n_lockers + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		t->lockers = grown;
		t->lockers[t->n_lockers++] = (struct addr_range){ m.start, m.end };
	}
	return dynamic;
}

/* ---- threads ---------------------------------------------------------- */

static struct inject_thread *thread_find(const struct inject_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->n_threads; i++)
		if (t->threads[i]->tid == tid)
			return t->threads[i];
	return NULL;
}

static struct inject_thread *thread_add(struct inject_target *t, pid_t tid)
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
static void thread_add_born(struct inject_target *t, pid_t tid)
{
	struct inject_thread *th;

	if (thread_find(t, tid))
		return;
	th = thread_add(t, tid);
	/* Out of memory: the thread stays traced and stopped until we exit. */
	if (th)
		th->interrupt_sent = true;
}

static void thread_interrupt(struct inject_thread *th)
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
static void thread_hold_signal(struct inject_thread *th, int sig, const siginfo_t *si)
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
static int thread_note(struct inject_target *t, struct inject_thread *th, int status)
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
			thread_add_born(t, (pid_t)msg);
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
static void thread_resume(struct inject_target *t, struct inject_thread *th, int request)
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
static bool thread_poll(struct inject_target *t, struct inject_thread *th, bool hold)
{
	int status, sig;
	pid_t r = waitpid(th->tid, &status, __WALL | WNOHANG);

	if (r == 0 || (r < 0 && errno == EINTR))
		return true;
	if (r < 0) { /* ECHILD: reaped elsewhere */
		th->state = TH_GONE;
		return false;
	}
	sig = thread_note(t, th, status);
	if (sig < 0)
		return false;
	if (sig > 0)
		thread_hold_signal(th, sig, NULL);
	if (hold)
		return false;
	thread_resume(t, th, PTRACE_CONT);
	return th->state == TH_RUNNING;
}

/* Lets every running thread but except pass its stops through (signals delivered at once). */
static void poll_others(struct inject_target *t, const struct inject_thread *except)
{
	for (size_t i = 0; i < t->n_threads; i++) /* n_threads grows on clone events */
		if (t->threads[i] != except && t->threads[i]->state == TH_RUNNING)
			thread_poll(t, t->threads[i], false);
}

static void resume_others(struct inject_target *t, const struct inject_thread *except)
{
	for (size_t i = 0; i < t->n_threads; i++)
		if (t->threads[i] != except)
			thread_resume(t, t->threads[i], PTRACE_CONT);
}

/* State letter of a thread in /proc/PID/task/TID/stat ('X' if gone), and its flags. */
static char task_state(pid_t pid, pid_t tid, unsigned *flags)
{
	char path[80], *stat, *paren, state = 'X';
	unsigned f = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (read_whole(path, &stat) == 0) {
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
static bool task_exiting(pid_t pid, pid_t tid)
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
		if (task_exiting(t->pid, th->tid))
			th->state = TH_DEAD;
		else
			rc = fail(err, errlen, -ETIMEDOUT, "thread %d of PID %d did not stop "
				  "within %d ms (state %c)", th->tid, t->pid, STOP_TIMEOUT_MS,
				  task_state(t->pid, th->tid, NULL));
	}
	return rc;
}

/* Interrupts every running thread and waits until each has stopped or is gone. */
static int stop_all(struct inject_target *t, char *err, size_t errlen)
{
	int64_t deadline = mono_ns() + STOP_TIMEOUT_MS * 1000000LL;
	struct pace pace = { 0 };
	size_t running;
	int rc;

	for (size_t i = 0; i < t->n_threads; i++)
		thread_interrupt(t->threads[i]);
	for (;;) {
		running = 0;
		for (size_t i = 0; i < t->n_threads; i++) { /* grows on clone events */
			struct inject_thread *th = t->threads[i];

			/* Dead ones are reaped as we go: the leader's exit is reported last. */
			if (th->state == TH_DEAD)
				thread_poll(t, th, true);
			else if (th->state == TH_RUNNING && thread_poll(t, th, true))
				running++;
		}
		if (t->exited)
			return fail(err, errlen, -ESRCH, "process %d exited", t->pid);
		if (!running)
			return 0;
		if (mono_ns() > deadline) {
			rc = stop_stuck(t, err, errlen);
			if (rc)
				return rc;
			deadline = mono_ns() + STOP_TIMEOUT_MS * 1000000LL;
		}
		pace_wait(&pace);
	}
}

/* ---- attach ------------------------------------------------------------ */

static int permission_error(pid_t pid, char *err, size_t errlen)
{
	char *scope = NULL;
	int rc;

	if (read_whole("/proc/sys/kernel/yama/ptrace_scope", &scope) == 0)
		scope[strcspn(scope, "\n")] = '\0';
	rc = fail(err, errlen, -EPERM, "not permitted: cannot trace PID %d (ptrace_scope=%s; "
		  "needs the same user or CAP_SYS_PTRACE)", pid, scope ? scope : "n/a, no Yama");
	free(scope);
	return rc;
}

/* Refusals that /proc/PID/status explains before any thread is touched. */
static int status_checks(pid_t pid, const char *status, char *err, size_t errlen)
{
	const char *state = status_value(status, "State");
	long tgid = status_long(status, "Tgid", pid);
	long tracer = status_long(status, "TracerPid", 0);

	if (tgid != pid)
		return fail(err, errlen, -EINVAL, "PID %d is a thread of process %ld: attach to "
			    "the process", pid, tgid);
	if (state && (*state == 'Z' || *state == 'X'))
		return fail(err, errlen, -ESRCH, "no such process: PID %d has exited (zombie)",
			    pid);
	if (tracer)
		return fail(err, errlen, -EBUSY, "already traced by PID %ld", tracer);
	if (status_long(status, "Seccomp", 0) == 2)
		return fail(err, errlen, -ENOTSUP, "PID %d runs under a seccomp filter: an "
			    "injected dlopen (openat, mmap) could kill it", pid);
	return 0;
}

/* Refusals that /proc/PID/maps explains: not ours to read, no memory, no ld.so. */
static int maps_checks(struct inject_target *t, const char *status, char *err, size_t errlen)
{
	char *maps;
	int rc = read_maps(t->pid, &maps);

	if (rc == -EACCES || rc == -EPERM)
		return permission_error(t->pid, err, errlen);
	if (rc == -ENOENT || rc == -ESRCH)
		return fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	if (rc)
		return fail(err, errlen, rc, "cannot read the maps of PID %d: %s", t->pid,
			    strerror(-rc));
	if (!maps[0] && status_long(status, "Kthread", 0) == 1)
		rc = fail(err, errlen, -EPERM, "PID %d is a kernel thread", t->pid);
	else if (!maps[0]) /* the memory of an exiting process is gone first */
		rc = fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	else if ((rc = load_lockers(t, maps)) == 0)
		rc = fail(err, errlen, -ENOEXEC, "statically linked: no dynamic loader in PID %d",
			  t->pid);
	else if (rc < 0)
		rc = fail(err, errlen, rc, "out of memory");
	free(maps);
	return rc < 0 ? rc : 0;
}

static int attach_precheck(struct inject_target *t, char *err, size_t errlen)
{
	char path[64], *status;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/status", t->pid);
	rc = read_whole(path, &status);
	if (rc == -ENOENT || rc == -ESRCH)
		return fail(err, errlen, -ESRCH, "no such process: PID %d", t->pid);
	if (rc)
		return fail(err, errlen, rc, "cannot read %s: %s", path, strerror(-rc));
	rc = status_checks(t->pid, status, err, errlen);
	if (!rc)
		rc = maps_checks(t, status, err, errlen);
	free(status);
	return rc;
}

/* EPERM from PTRACE_SEIZE: born traced by us, exiting, traced by another, or denied. */
static int seize_refused(struct inject_target *t, pid_t tid, char *err, size_t errlen)
{
	char path[80], *text, state;
	long tracer;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", t->pid, tid);
	if (read_whole(path, &text))
		return tid == t->pid ? fail(err, errlen, -ESRCH, "process exited during attach: "
					    "PID %d", t->pid) : 0;
	state = status_value(text, "State") ? *status_value(text, "State") : '?';
	tracer = status_long(text, "TracerPid", 0);
	free(text);
	if (tracer == t->tracer) {
		thread_add_born(t, tid);
		return 1;
	}
	if (state == 'Z' || state == 'X')
		return 0; /* an exited thread, or a leader that called pthread_exit */
	if (!tracer && task_exiting(t->pid, t->pid))
		return fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	if (tracer)
		return fail(err, errlen, -EBUSY, "already traced by PID %ld", tracer);
	return permission_error(t->pid, err, errlen);
}

/* Seizes and interrupts tid; returns 1 if it is now ours, 0 if it is gone. */
static int seize_thread(struct inject_target *t, pid_t tid, char *err, size_t errlen)
{
	struct inject_thread *th;
	int e;

	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)(PTRACE_O_TRACECLONE |
						       PTRACE_O_TRACEEXEC)) == 0) {
		th = thread_add(t, tid);
		if (!th) {
			ptrace(PTRACE_DETACH, tid, 0, 0); /* fails unless stopped: we exit then */
			return fail(err, errlen, -ENOMEM, "out of memory");
		}
		thread_interrupt(th);
		return 1;
	}
	e = errno;
	if (e == ESRCH)
		return tid == t->pid ? fail(err, errlen, -ESRCH, "process exited during attach: "
					    "PID %d", t->pid) : 0;
	if (e == EPERM)
		return seize_refused(t, tid, err, errlen);
	return fail(err, errlen, -e, "PTRACE_SEIZE of thread %d: %s", tid, strerror(e));
}

/* Seizes every thread in /proc/PID/task not yet ours; returns how many. */
static int seize_new_threads(struct inject_target *t, char *err, size_t errlen)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int added = 0, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	dir = opendir(path);
	if (!dir)
		return fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	while (rc >= 0 && (de = readdir(dir))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

		if (tid <= 0 || thread_find(t, tid))
			continue;
		rc = seize_thread(t, tid, err, errlen);
		added += rc > 0;
	}
	closedir(dir);
	return rc < 0 ? rc : added;
}

/* Rescans /proc/PID/task until a scan finds no new thread, all stopped. */
static int seize_all(struct inject_target *t, char *err, size_t errlen)
{
	for (int round = 0; round < SCAN_ROUNDS; round++) {
		int added = seize_new_threads(t, err, errlen), rc;

		if (added < 0)
			return added;
		rc = stop_all(t, err, errlen);
		if (rc == -ESRCH)
			return fail(err, errlen, rc, "process exited during attach: PID %d",
				    t->pid);
		if (rc)
			return rc;
		if (!added)
			return 0;
	}
	return fail(err, errlen, -EAGAIN, "threads of PID %d kept appearing during attach",
		    t->pid);
}

/*
 * The maps again, now that no thread runs: an execve may have replaced the
 * image the pre-checks saw (the interrupt stop comes after it).
 */
static int reload_lockers(struct inject_target *t, char *err, size_t errlen)
{
	char *maps;
	int rc = read_maps(t->pid, &maps);

	if (rc)
		return fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	free(t->lockers);
	t->lockers = NULL;
	t->n_lockers = 0;
	t->execed = false;
	rc = load_lockers(t, maps);
	free(maps);
	if (rc == 0)
		return fail(err, errlen, -ENOEXEC, "statically linked: no dynamic loader in PID %d",
			    t->pid);
	return rc < 0 ? fail(err, errlen, rc, "out of memory") : 0;
}

/* Size of NT_X86_XSTATE as the kernel reports it (0: no XSAVE, FPREGS only). */
static int probe_xstate(struct inject_target *t)
{
	struct iovec iov;
	void *buf = malloc(XSTATE_PROBE_SIZE);

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_threads; i++) {
		if (t->threads[i]->state != TH_STOPPED)
			continue;
		iov = (struct iovec){ buf, XSTATE_PROBE_SIZE };
		if (ptrace(PTRACE_GETREGSET, t->threads[i]->tid, NT_X86_XSTATE, &iov) == 0)
			t->xstate_size = iov.iov_len;
		break;
	}
	free(buf);
	return 0;
}

int inject_attach(pid_t pid, struct inject_target **out, char *err, size_t errlen)
{
	char path[64];
	struct inject_target *t;
	int rc;

	*out = NULL;
	if (pid <= 0)
		return fail(err, errlen, -ESRCH, "no such process: PID %d", pid);
	t = calloc(1, sizeof(*t));
	if (!t)
		return fail(err, errlen, -ENOMEM, "out of memory");
	t->pid = pid;
	t->tracer = gettid();
	t->mem_fd = -1;
	rc = attach_precheck(t, err, errlen);
	if (rc)
		goto err_free;
	rc = seize_all(t, err, errlen);
	if (!rc)
		rc = reload_lockers(t, err, errlen);
	if (rc)
		goto err_detach;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	t->mem_fd = open(path, O_RDWR | O_CLOEXEC);
	if (t->mem_fd < 0) {
		rc = fail(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
		goto err_detach;
	}
	rc = probe_xstate(t);
	if (rc) {
		fail(err, errlen, rc, "out of memory");
		goto err_detach;
	}
	*out = t;
	return 0;
err_detach:
	inject_detach(t);
	return rc;
err_free:
	free(t->lockers);
	free(t);
	return rc;
}

/*
 * Threads traced by us that we never heard of: born just as the process was
 * killed (the fatal signal skips the parent's PTRACE_EVENT_CLONE stop).
 * Returns how many were adopted.
 */
static int adopt_unknown_threads(struct inject_target *t)
{
	char path[80], *status;
	struct dirent *de;
	DIR *dir;
	int adopted = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	dir = opendir(path);
	while (dir && (de = readdir(dir))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

		if (tid <= 0 || thread_find(t, tid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", t->pid, tid);
		if (read_whole(path, &status))
			continue;
		if (status_long(status, "TracerPid", 0) == t->tracer) {
			thread_add_born(t, tid);
			adopted++;
		}
		free(status);
	}
	if (dir)
		closedir(dir);
	return adopted;
}

/*
 * Detaches every thread, stopping running ones first, and waits for the
 * dead: a traced thread that died stays a zombie until its tracer waits for
 * it, and its process cannot be reaped before (the leader's exit is reported
 * last). Bounded: a thread stuck in D state stays traced until we exit.
 */
static void detach_all(struct inject_target *t)
{
	int64_t deadline = mono_ns() + 2 * STOP_TIMEOUT_MS * 1000000LL;
	struct pace pace = { 0 };
	size_t left;

	do {
		left = 0;
		for (size_t i = 0; i < t->n_threads; i++) {
			struct inject_thread *th = t->threads[i];

			thread_interrupt(th);
			if (th->state == TH_RUNNING || th->state == TH_DEAD)
				thread_poll(t, th, true);
			thread_resume(t, th, PTRACE_DETACH);
			left += th->state != TH_GONE;
		}
		/* Each pass: a dying leader's exit waits for such threads to be reaped. */
		left += adopt_unknown_threads(t);
		if (left)
			pace_wait(&pace);
	} while (left && mono_ns() < deadline);
}

void inject_detach(struct inject_target *t)
{
	if (!t)
		return;
	detach_all(t);
	for (size_t i = 0; i < t->n_threads; i++)
		free(t->threads[i]);
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	free(t->threads);
	free(t->lockers);
	free(t);
}

/* ---- symbols ----------------------------------------------------------- */

/* [off, off + size) inside a buffer of len bytes, or NULL; no overflow possible. */
static const uint8_t *elf_range(const uint8_t *p, size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off ? p + off : NULL;
}

struct elf_hit {
	uint64_t value;
	unsigned type;
	uint16_t shndx;
	int score;
};

/* Load-base-relative address that file offset off is mapped at (through its PT_LOAD). */
static int elf_vaddr_of_offset(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, uint64_t off,
			       uint64_t *vaddr)
{
	Elf64_Phdr ph;

	if (eh->e_phentsize != sizeof(ph))
		return -ENOEXEC;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const uint8_t *src = elf_range(p, len, eh->e_phoff + (uint64_t)i * sizeof(ph),
					       sizeof(ph));

		if (!src)
			return -ENOEXEC;
		memcpy(&ph, src, sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_filesz || ph.p_offset > UINT64_MAX - ph.p_filesz)
			continue;
		/* The page mapped at off overlaps the segment: the mapping is linear. */
		if (off < ph.p_offset + ph.p_filesz && off + 4096 > ph.p_offset) {
			*vaddr = ph.p_vaddr - ph.p_offset + off;
			return 0;
		}
	}
	return -ENOENT;
}

/* Version index of symbol i (bit 15: hidden, i.e. not the default version), or 0. */
static uint16_t elf_versym(const uint8_t *p, size_t len, const Elf64_Shdr *sh, size_t shnum,
			   size_t table, size_t i)
{
	uint16_t v;

	for (size_t k = 0; k < shnum; k++) {
		const uint8_t *src;

		if (sh[k].sh_type != SHT_GNU_versym || sh[k].sh_link != table)
			continue;
		src = elf_range(p, len, sh[k].sh_offset, sh[k].sh_size);
		if (!src || i >= sh[k].sh_size / 2)
			return 0;
		memcpy(&v, src + 2 * i, 2);
		return v;
	}
	return 0;
}

/* Best definition of name in symbol table sh[table]: global, default version, .dynsym. */
static void elf_scan_table(const uint8_t *p, size_t len, const Elf64_Shdr *sh, size_t shnum,
			   size_t table, const char *name, struct elf_hit *best)
{
	const Elf64_Shdr *tab = &sh[table], *strs;
	const uint8_t *syms;
	const char *str;
	size_t nlen = strlen(name);
	Elf64_Sym s;

	if (tab->sh_entsize != sizeof(s) || tab->sh_link >= shnum)
		return;
	strs = &sh[tab->sh_link];
	syms = elf_range(p, len, tab->sh_offset, tab->sh_size);
	str = (const char *)elf_range(p, len, strs->sh_offset, strs->sh_size);
	if (!syms || !str)
		return;
	for (size_t i = 1; i < tab->sh_size / sizeof(s); i++) {
		int score = tab->sh_type == SHT_DYNSYM ? 1 : 0, bind;

		memcpy(&s, syms + i * sizeof(s), sizeof(s));
		if (s.st_shndx == SHN_UNDEF || s.st_name >= strs->sh_size ||
		    strs->sh_size - s.st_name <= nlen || memcmp(str + s.st_name, name, nlen) ||
		    str[s.st_name + nlen])
			continue;
		bind = ELF64_ST_BIND(s.st_info);
		if (bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE)
			score += 4;
		/* VERSYM_HIDDEN: dlopen@GLIBC_2.2.5 loses to dlopen@@GLIBC_2.34 */
		if (tab->sh_type != SHT_DYNSYM || !(elf_versym(p, len, sh, shnum, table, i) &
						    VERSYM_HIDDEN))
			score += 2;
		if (score > best->score)
			*best = (struct elf_hit){ s.st_value, ELF64_ST_TYPE(s.st_info), s.st_shndx,
						  score };
	}
}

static int elf_lookup(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, const char *name,
		      struct elf_hit *hit)
{
	size_t shnum = eh->e_shnum;
	const uint8_t *src = elf_range(p, len, eh->e_shoff, shnum * sizeof(Elf64_Shdr));
	Elf64_Shdr *sh;

	if (eh->e_shentsize != sizeof(Elf64_Shdr) || !src || !shnum)
		return -ENODATA;
	sh = malloc(shnum * sizeof(*sh)); /* copied: the table need not be aligned */
	if (!sh)
		return -ENOMEM;
	memcpy(sh, src, shnum * sizeof(*sh));
	hit->score = 0;
	for (size_t i = 0; i < shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM || sh[i].sh_type == SHT_SYMTAB)
			elf_scan_table(p, len, sh, shnum, i, name, hit);
	free(sh);
	return hit->score ? 0 : -ENOENT;
}

/*
 * The file behind a mapping, through the target's root; once replaced (a
 * package upgrade), only map_files has the mapped version (CAP_SYS_ADMIN).
 */
static int open_mapped_file(pid_t pid, const struct map_entry *m)
{
	char path[PATH_MAX + 64];
	int fd;

	if (m->deleted)
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid,
			 m->start, m->end);
	else
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	/* O_NONBLOCK: the target's owner may have put a FIFO there meanwhile. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

/* Address of symbol in the module mapped by m (the module's first mapping). */
static int resolve_in_file(pid_t pid, const struct map_entry *m, const char *symbol,
			   uint64_t *addr, bool *ifunc, char *err, size_t errlen)
{
	struct elf_hit hit = { 0 };
	uint64_t vaddr = 0;
	Elf64_Ehdr eh;
	struct stat st;
	uint8_t *p;
	int fd = open_mapped_file(pid, m), rc;

	if (fd < 0)
		return fail(err, errlen, fd, "cannot open %s: %s", m->path, strerror(-fd));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(eh)) {
		close(fd);
		return fail(err, errlen, -ENOEXEC, "%s: not an ELF file", m->path);
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return fail(err, errlen, -errno, "cannot map %s: %s", m->path, strerror(errno));
	memcpy(&eh, p, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64)
		rc = fail(err, errlen, -ENOEXEC, "%s: not an x86-64 ELF64 file", m->path);
	else if (elf_vaddr_of_offset(p, st.st_size, &eh, m->offset, &vaddr))
		rc = fail(err, errlen, -ENOEXEC, "%s: no PT_LOAD maps offset 0x%" PRIx64, m->path,
			  m->offset);
	else if ((rc = elf_lookup(p, st.st_size, &eh, symbol, &hit)))
		rc = fail(err, errlen, rc, "symbol %s not found in %s", symbol, m->path);
	munmap(p, st.st_size);
	if (rc)
		return rc;
	*ifunc = hit.type == STT_GNU_IFUNC;
	*addr = hit.shndx == SHN_ABS ? hit.value : m->start - vaddr + hit.value;
	return 0;
}

/* First mapping of a file whose name matches glob; m points into *maps (free it). */
static int find_module(pid_t pid, const char *glob, char **maps, struct map_entry *m)
{
	char *cursor;
	int rc = read_maps(pid, maps);

	for (cursor = rc ? NULL : *maps; cursor && maps_next(&cursor, m);)
		if (m->path[0] == '/' && matches_any(m->path, &glob, 1))
			return 0;
	return rc ? rc : -ENOENT;
}

int inject_resolve(struct inject_target *t, const char *module_glob, const char *symbol,
		   uint64_t *addr, char *err, size_t errlen)
{
	struct map_entry m;
	bool ifunc = false;
	char *maps = NULL;
	int rc;

	if (t->execed)
		return fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach again",
			    t->pid);
	rc = find_module(t->pid, module_glob, &maps, &m);
	if (!rc)
		rc = resolve_in_file(t->pid, &m, symbol, addr, &ifunc, err, errlen);
	else if (rc == -ENOENT)
		fail(err, errlen, rc, "no module matching %s in PID %d", module_glob, t->pid);
	else
		fail(err, errlen, rc, "cannot read the maps of PID %d: %s", t->pid, strerror(-rc));
	free(maps);
	if (rc || !ifunc)
		return rc;
	/* x86-64 IFUNC resolvers take no arguments and lock nothing: ask the target's. */
	return inject_call(t, *addr, NULL, 0, NULL, 0, false, RESOLVER_TIMEOUT_MS, addr, err,
			   errlen);
}

bool inject_has_module(struct inject_target *t, const char *module_glob)
{
	struct map_entry m;
	char *maps = NULL;
	int rc = find_module(t->pid, module_glob, &maps, &m);

	free(maps);
	return rc == 0;
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
static int run_all_briefly(struct inject_target *t, char *err, size_t errlen)
{
	int64_t until = mono_ns() + SAFE_POINT_RUN_MS * 1000000LL;
	struct pace pace = { 0 };

	resume_others(t, NULL);
	while (mono_ns() < until && !t->exited) {
		poll_others(t, NULL);
		pace_wait(&pace);
	}
	return stop_all(t, err, errlen);
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
			return fail(err, errlen, -ESRCH, "process %d exited", t->pid);
		if (t->execed) /* while the threads ran: func belongs to the old image */
			return fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach "
				    "again", t->pid);
		cf->th = pick_stopped(t, cf, 0);
		if (!cf->th)
			cf->th = pick_stopped(t, cf, 1);
		if (cf->th)
			return 0;
		if (attempt == SAFE_POINT_TRIES)
			break;
		rc = run_all_briefly(t, err, errlen);
		if (rc)
			return rc;
	}
	return fail(err, errlen, -EAGAIN, "no thread of PID %d stopped at a safe point in %d tries "
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
		return fail(err, errlen, rc ? rc : -ENOMEM, "cannot save the FPU state of "
			    "thread %d", tid);
	}
	cf->fpu_saved = true;
	if (data_len)
		memcpy(frame + 8, data, data_len);
	n = pwrite(t->mem_fd, frame, 8 + data_len, (off_t)sp);
	free(frame);
	if (n != (ssize_t)(8 + data_len) && task_exiting(t->pid, t->pid))
		return fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	if (n != (ssize_t)(8 + data_len))
		return fail(err, errlen, n < 0 ? -errno : -EIO, "cannot write the call frame "
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
		return fail(err, errlen, -errno, "PTRACE_SETREGS of thread %d: %s", tid,
			    strerror(errno));
	rc = fpu_prepare(t, cf);
	return rc ? fail(err, errlen, rc, "cannot reset the x87 stack of thread %d", tid) : 0;
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
	sig = got < 0 ? -1 : thread_note(t, th, status);
	if (sig < 0) {
		th->state = TH_GONE;
		if (t->execed)
			return fail(err, errlen, -ESTALE, "PID %d called execve during the call",
				    t->pid);
		return fail(err, errlen, -ESRCH, "PID %d or its thread %d exited during the call",
			    t->pid, th->tid);
	}
	if (sig > 0) {
		if (ptrace(PTRACE_GETREGS, th->tid, 0, &r) ||
		    ptrace(PTRACE_GETSIGINFO, th->tid, 0, &si)) {
			if (errno != ESRCH)
				return fail(err, errlen, -errno, "cannot read thread %d: %s",
					    th->tid, strerror(errno));
			th->state = TH_DEAD; /* SIGKILLed in its stop */
			return fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
		}
		what = call_classify(cf, sig, &si, &r);
	}
	if (sig > 0 && what == CALL_RETURNED) {
		*ret = r.rax;
		return 0;
	}
	if (sig > 0 && what == CALL_FAULTED)
		return fail(err, errlen, -EFAULT, "the call faulted in thread %d: signal %d "
			    "(%s) at rip 0x%llx, address %p", th->tid, sig, strsignal(sig),
			    r.rip, si.si_addr);
	if (hold) {
		if (sig > 0)
			thread_hold_signal(th, sig, NULL); /* delivered through this very stop */
		return 0;
	}
	if (sig > 0)
		thread_hold_signal(th, sig, &si); /* this stop goes away: keep its siginfo */
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
	if (th->state != TH_RUNNING || !task_exiting(t->pid, th->tid))
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

	thread_interrupt(th);
	while (th->state == TH_RUNNING && mono_ns() < deadline &&
	       call_poll(t, cf, true, &ignored, err, errlen) > 0)
		pace_wait(&pace);
	if (thread_is_dying(t, th))
		return fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	if (th->state == TH_RUNNING)
		return fail(err, errlen, -ETIMEDOUT, "call in thread %d timed out after %d ms and "
			    "the thread does not stop: left running the injected code", th->tid,
			    timeout_ms);
	return fail(err, errlen, -ETIMEDOUT, "call in thread %d timed out after %d ms "
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
		resume_others(t, th);
	if (ptrace(PTRACE_CONT, th->tid, 0, 0)) {
		if (errno != ESRCH)
			return fail(err, errlen, -errno, "PTRACE_CONT of thread %d: %s", th->tid,
				    strerror(errno));
		th->state = TH_DEAD;
		return fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
	}
	th->state = TH_RUNNING;
	th->sig_stop = false;
	for (;;) {
		rc = call_poll(t, cf, false, ret, err, errlen);
		if (rc <= 0)
			return rc;
		if (others_run)
			poll_others(t, th);
		if (mono_ns() >= next_check && thread_is_dying(t, th))
			return fail(err, errlen, -ESRCH, "PID %d exited during the call", t->pid);
		if (mono_ns() >= next_check)
			next_check = mono_ns() + ZOMBIE_CHECK_NS;
		if (mono_ns() >= deadline)
			return call_timeout(t, cf, timeout_ms, err, errlen);
		pace_wait(&pace);
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
		return fail(err, errlen, -EINVAL, "invalid call arguments");
	if (t->exited)
		return fail(err, errlen, -ESRCH, "process %d exited", t->pid);
	if (t->execed)
		return fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach again",
			    t->pid);
	cf.fpu_size = t->xstate_size ? t->xstate_size : sizeof(struct user_fpregs_struct);
	cf.fpu = malloc(2 * cf.fpu_size);
	if (!cf.fpu)
		return fail(err, errlen, -ENOMEM, "out of memory");
	rc = call_pick_thread(t, &cf, err, errlen);
	if (rc)
		goto out;
	rc = call_prepare(t, &cf, func, args, nargs, data, data_len, err, errlen);
	if (!rc)
		rc = call_run(t, &cf, others_run, timeout_ms, ret, err, errlen);
	rc2 = call_restore(t, &cf);
	if (rc2 && !rc)
		rc = fail(err, errlen, rc2, "cannot restore the registers of thread %d: %s",
			  cf.th->tid, strerror(-rc2));
	/* Others that ran, and threads the call created, stop again. */
	rc2 = stop_all(t, later, sizeof(later));
	if (rc2 && !rc)
		rc = fail(err, errlen, rc2, "%s", later);
out:
	free(cf.fpu);
	return rc;
}
