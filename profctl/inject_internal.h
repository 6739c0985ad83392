/* SPDX-License-Identifier: MIT */
/*
 * What the parts of the ptrace injection share (inject.c: attach, detach and
 * /proc reading; inject_threads.c: stopping and resuming threads;
 * inject_call.c: calling into the target; inject_symbols.c: finding symbols
 * in its modules). Internal to profctl/inject*.c: the contract is inject.h.
 */
#ifndef PROFD_INJECT_INTERNAL_H
#define PROFD_INJECT_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

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
	char *module_file;     /* local copy of a module loaded from a memfd (inject_module_file) */
	bool exited;
	bool execed;           /* a thread called execve since: addresses are stale */
};

struct map_entry {
	uint64_t start, end, offset;
	char perms[5];
	const char *path;      /* points into the maps buffer; "" when anonymous */
	bool deleted;          /* the file was replaced or removed since it was mapped */
};

/* Signed: the deadlines below are compared and subtracted as int64_t. */
static inline int64_t mono_ns(void)
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

static inline uint64_t sig_bit(int sig)
{
	return sig > 0 && sig <= 64 ? 1ULL << (sig - 1) : 0;
}

/* inject.c */
__attribute__((format(printf, 4, 5)))
int inject_fail(char *err, size_t errlen, int code, const char *fmt, ...);
void inject_pace_wait(struct pace *p);
const char *inject_status_value(const char *status, const char *name);
long inject_status_long(const char *status, const char *name, long dflt);
bool inject_maps_next(char **cursor, struct map_entry *m);
bool inject_matches_any(const char *path, const char *const *globs, size_t n);
int inject_read_maps(pid_t pid, char **maps);

/* inject_threads.c */
struct inject_thread *inject_thread_find(const struct inject_target *t, pid_t tid);
struct inject_thread *inject_thread_add(struct inject_target *t, pid_t tid);
void inject_thread_add_born(struct inject_target *t, pid_t tid);
void inject_thread_interrupt(struct inject_thread *th);
void inject_thread_hold_signal(struct inject_thread *th, int sig, const siginfo_t *si);
int inject_thread_note(struct inject_target *t, struct inject_thread *th, int status);
void inject_thread_resume(struct inject_target *t, struct inject_thread *th, int request);
bool inject_thread_poll(struct inject_target *t, struct inject_thread *th, bool hold);
void inject_poll_others(struct inject_target *t, const struct inject_thread *except);
void inject_resume_others(struct inject_target *t, const struct inject_thread *except);
bool inject_task_exiting(pid_t pid, pid_t tid);
int inject_stop_all(struct inject_target *t, char *err, size_t errlen);

#endif
