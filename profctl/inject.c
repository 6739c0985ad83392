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

#include "common/lock_modules.h"
#include "common/mono_clock.h"
#include "common/proc_text.h"
#include "profctl/inject_internal.h"

__attribute__((format(printf, 4, 5)))
int inject_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

void inject_pace_wait(struct pace *p)
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

/* Value of field "name:" in a /proc status text, or NULL. */
const char *inject_status_value(const char *status, const char *name)
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

long inject_status_long(const char *status, const char *name, long dflt)
{
	const char *v = inject_status_value(status, name);

	return v ? strtol(v, NULL, 10) : dflt;
}

/* ---- /proc/PID/maps ------------------------------------------------------ */

/* Parses the next line of a maps buffer, NUL-terminating it in place. */
bool inject_maps_next(char **cursor, struct map_entry *m)
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
bool inject_matches_any(const char *path, const char *const *globs, size_t n)
{
	const char *slash = strrchr(path, '/');

	for (size_t i = 0; i < n; i++)
		if (fnmatch(globs[i], slash ? slash + 1 : path, 0) == 0)
			return true;
	return false;
}

int inject_read_maps(pid_t pid, char **maps)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	return proc_text_read(path, maps, NULL);
}

/* Records the code of lock-holding modules; returns 1 if a dynamic loader or libc is mapped. */
static int load_lockers(struct inject_target *t, char *maps)
{
	static const char *const dynamic_globs[] = { "ld-*.so*", "ld64.so*", "libc.so*" };
	struct addr_range *grown;
	struct map_entry m;
	int dynamic = 0;

	while (inject_maps_next(&maps, &m)) {
		if (m.path[0] != '/')
			continue;
		if (inject_matches_any(m.path, dynamic_globs, 3))
			dynamic = 1;
		/* code that may hold a lock a remote call takes again */
		if (m.perms[2] != 'x' || !lock_module_path(m.path))
			continue;
		grown = realloc(t->lockers, (t->n_lockers + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		t->lockers = grown;
		t->lockers[t->n_lockers++] = (struct addr_range){ m.start, m.end };
	}
	return dynamic;
}

/* ---- attach ------------------------------------------------------------ */

static int permission_error(pid_t pid, char *err, size_t errlen)
{
	char *scope = NULL;
	int rc;

	if (proc_text_read("/proc/sys/kernel/yama/ptrace_scope", &scope, NULL) == 0)
		scope[strcspn(scope, "\n")] = '\0';
	rc = inject_fail(err, errlen, -EPERM, "not permitted: cannot trace PID %d (ptrace_scope=%s; "
		  "needs the same user or CAP_SYS_PTRACE)", pid, scope ? scope : "n/a, no Yama");
	free(scope);
	return rc;
}

/* Refusals that /proc/PID/status explains before any thread is touched. */
static int status_checks(pid_t pid, const char *status, char *err, size_t errlen)
{
	const char *state = inject_status_value(status, "State");
	long tgid = inject_status_long(status, "Tgid", pid);
	long tracer = inject_status_long(status, "TracerPid", 0);

	if (tgid != pid)
		return inject_fail(err, errlen, -EINVAL, "PID %d is a thread of process %ld: attach to "
			    "the process", pid, tgid);
	if (state && (*state == 'Z' || *state == 'X'))
		return inject_fail(err, errlen, -ESRCH, "no such process: PID %d has exited (zombie)",
			    pid);
	if (tracer)
		return inject_fail(err, errlen, -EBUSY, "already traced by PID %ld", tracer);
	if (inject_status_long(status, "Seccomp", 0) == 2)
		return inject_fail(err, errlen, -ENOTSUP, "PID %d runs under a seccomp filter: an "
			    "injected dlopen (openat, mmap) could kill it", pid);
	return 0;
}

/* Refusals that /proc/PID/maps explains: not ours to read, no memory, no ld.so. */
static int maps_checks(struct inject_target *t, const char *status, char *err, size_t errlen)
{
	char *maps;
	int rc = inject_read_maps(t->pid, &maps);

	if (rc == -EACCES || rc == -EPERM)
		return permission_error(t->pid, err, errlen);
	if (rc == -ENOENT || rc == -ESRCH)
		return inject_fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	if (rc)
		return inject_fail(err, errlen, rc, "cannot read the maps of PID %d: %s", t->pid,
			    strerror(-rc));
	if (!maps[0] && inject_status_long(status, "Kthread", 0) == 1)
		rc = inject_fail(err, errlen, -EPERM, "PID %d is a kernel thread", t->pid);
	else if (!maps[0]) /* the memory of an exiting process is gone first */
		rc = inject_fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	else if ((rc = load_lockers(t, maps)) == 0)
		rc = inject_fail(err, errlen, -ENOEXEC, "statically linked: no dynamic loader in PID %d",
			  t->pid);
	else if (rc < 0)
		rc = inject_fail(err, errlen, rc, "out of memory");
	free(maps);
	return rc < 0 ? rc : 0;
}

static int attach_precheck(struct inject_target *t, char *err, size_t errlen)
{
	char path[64], *status;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/status", t->pid);
	rc = proc_text_read(path, &status, NULL);
	if (rc == -ENOENT || rc == -ESRCH)
		return inject_fail(err, errlen, -ESRCH, "no such process: PID %d", t->pid);
	if (rc)
		return inject_fail(err, errlen, rc, "cannot read %s: %s", path, strerror(-rc));
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
	if (proc_text_read(path, &text, NULL))
		return tid == t->pid ? inject_fail(err, errlen, -ESRCH, "process exited during attach: "
					    "PID %d", t->pid) : 0;
	state = inject_status_value(text, "State") ? *inject_status_value(text, "State") : '?';
	tracer = inject_status_long(text, "TracerPid", 0);
	free(text);
	if (tracer == t->tracer) {
		inject_thread_add_born(t, tid);
		return 1;
	}
	if (state == 'Z' || state == 'X')
		return 0; /* an exited thread, or a leader that called pthread_exit */
	if (!tracer && inject_task_exiting(t->pid, t->pid))
		return inject_fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	if (tracer)
		return inject_fail(err, errlen, -EBUSY, "already traced by PID %ld", tracer);
	return permission_error(t->pid, err, errlen);
}

/* Seizes and interrupts tid; returns 1 if it is now ours, 0 if it is gone. */
static int seize_thread(struct inject_target *t, pid_t tid, char *err, size_t errlen)
{
	struct inject_thread *th;
	int e;

	if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)(PTRACE_O_TRACECLONE |
						       PTRACE_O_TRACEEXEC)) == 0) {
		th = inject_thread_add(t, tid);
		if (!th) {
			ptrace(PTRACE_DETACH, tid, 0, 0); /* fails unless stopped: we exit then */
			return inject_fail(err, errlen, -ENOMEM, "out of memory");
		}
		inject_thread_interrupt(th);
		return 1;
	}
	e = errno;
	if (e == ESRCH)
		return tid == t->pid ? inject_fail(err, errlen, -ESRCH, "process exited during attach: "
					    "PID %d", t->pid) : 0;
	if (e == EPERM)
		return seize_refused(t, tid, err, errlen);
	return inject_fail(err, errlen, -e, "PTRACE_SEIZE of thread %d: %s", tid, strerror(e));
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
		return inject_fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	while (rc >= 0 && (de = readdir(dir))) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

		if (tid <= 0 || inject_thread_find(t, tid))
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
		rc = inject_stop_all(t, err, errlen);
		if (rc == -ESRCH)
			return inject_fail(err, errlen, rc, "process exited during attach: PID %d",
				    t->pid);
		if (rc)
			return rc;
		if (!added)
			return 0;
	}
	return inject_fail(err, errlen, -EAGAIN, "threads of PID %d kept appearing during attach",
		    t->pid);
}

/*
 * The maps again, now that no thread runs: an execve may have replaced the
 * image the pre-checks saw (the interrupt stop comes after it).
 */
static int reload_lockers(struct inject_target *t, char *err, size_t errlen)
{
	char *maps;
	int rc = inject_read_maps(t->pid, &maps);

	if (rc)
		return inject_fail(err, errlen, -ESRCH, "process exited during attach: PID %d", t->pid);
	free(t->lockers);
	t->lockers = NULL;
	t->n_lockers = 0;
	t->execed = false;
	rc = load_lockers(t, maps);
	free(maps);
	if (rc == 0)
		return inject_fail(err, errlen, -ENOEXEC, "statically linked: no dynamic loader in PID %d",
			    t->pid);
	return rc < 0 ? inject_fail(err, errlen, rc, "out of memory") : 0;
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
		return inject_fail(err, errlen, -ESRCH, "no such process: PID %d", pid);
	t = calloc(1, sizeof(*t));
	if (!t)
		return inject_fail(err, errlen, -ENOMEM, "out of memory");
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
		rc = inject_fail(err, errlen, -errno, "cannot open %s: %s", path, strerror(errno));
		goto err_detach;
	}
	rc = probe_xstate(t);
	if (rc) {
		inject_fail(err, errlen, rc, "out of memory");
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

		if (tid <= 0 || inject_thread_find(t, tid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", t->pid, tid);
		if (proc_text_read(path, &status, NULL))
			continue;
		if (inject_status_long(status, "TracerPid", 0) == t->tracer) {
			inject_thread_add_born(t, tid);
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

			inject_thread_interrupt(th);
			if (th->state == TH_RUNNING || th->state == TH_DEAD)
				inject_thread_poll(t, th, true);
			inject_thread_resume(t, th, PTRACE_DETACH);
			left += th->state != TH_GONE;
		}
		/* Each pass: a dying leader's exit waits for such threads to be reaped. */
		left += adopt_unknown_threads(t);
		if (left)
			inject_pace_wait(&pace);
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
	free(t->module_file);
	free(t);
}

int inject_module_file(struct inject_target *t, const char *path)
{
	char *copy = strdup(path);

	if (!copy)
		return -ENOMEM;
	free(t->module_file);
	t->module_file = copy;
	return 0;
}

int inject_take_fd(struct inject_target *t, int remote_fd, char *err, size_t errlen)
{
	int pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0), fd, e;

	if (pidfd < 0)
		return inject_fail(err, errlen, -errno, "pidfd_open(%d): %s", t->pid,
				   strerror(errno));
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0);
	e = errno;
	close(pidfd);
	if (fd < 0)
		return inject_fail(err, errlen, -e, "cannot take descriptor %d of PID %d: %s",
				   remote_fd, t->pid, strerror(e));
	return fd;
}
