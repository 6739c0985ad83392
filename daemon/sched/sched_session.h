/* SPDX-License-Identifier: MIT */
/*
 * One session's view of the scheduler: the probe's records for its target
 * (daemon/sched/sched_tracer.h) written to its trace as sched_switch and
 * sched_waking events, with every other process's tasks shown as "another
 * task" to a client that may not see them (daemon/access.h); the target's
 * threads' off-CPU clocks (daemon/sched/offcpu.h) that give each
 * instrumented call its on-CPU and off-CPU time, and their sums per function.
 */
#ifndef PROFD_SCHED_SESSION_H
#define PROFD_SCHED_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/sched/offcpu.h"
#include "daemon/sched/sched_record.h"

struct perfetto_writer;
struct sched_session;

struct sched_session_config {
	pid_t target;
	/* set: the session's processes are those it says (a tree), else target alone */
	bool (*is_target)(void *ctx, uint32_t tgid);
	void *is_target_ctx;
	struct perfetto_writer *writer;
	bool see_other_tasks; /* else their pid, name and priority are hidden */
};

struct sched_session_stats {
	uint64_t switches, wakeups;        /* written to the trace (wakeups: of new tasks too) */
	uint64_t lost;                     /* the ring had no room (set by the caller) */
	uint64_t hidden;                   /* events whose other task was anonymized */
};

/*
 * Per instrumented function, over its recorded calls that returned, each
 * with its own inclusive time, as the exact totals count them (a recursive
 * call's time is in its own and its caller's): on-CPU = total - off-CPU.
 */
struct sched_func_time {
	uint64_t calls;       /* recorded calls that returned */
	uint64_t off_ns;
	uint64_t runnable_ns; /* of off_ns: waiting for a CPU */
};

struct sched_session *sched_session_new(const struct sched_session_config *cfg);
void sched_session_free(struct sched_session *ss);

/* A probe record naming the target as prev or next. */
void sched_session_record(struct sched_session *ss, const struct sched_record *r);

/* The thread's clock for a batch of its events (offcpu_thread; NULL: never switched). */
struct offcpu_thread *sched_session_clock(struct sched_session *ss, uint32_t tid);
void sched_session_watermark(struct sched_session *ss, uint64_t ts);
void sched_session_thread_gone(struct sched_session *ss, uint32_t tid);

/* A recorded call of func_id returned after dur_ns, in_call of it switched out. */
void sched_session_call(struct sched_session *ss, uint32_t func_id, uint64_t dur_ns,
			const struct offcpu_time *in_call);

/*
 * The same inline, for profd's per-event path: the sums by function id,
 * looked up once per batch of events (sched_session_sums), and added to in
 * place; a function past them goes through sched_session_call, which grows
 * them (look them up again after it). The fields are sched_session.c's.
 */
struct sched_func_sums {
	struct sched_func_time *funcs; /* by session function id */
	uint32_t n_funcs;
};
const struct sched_func_sums *sched_session_sums(struct sched_session *ss);

/* Adds a call to funcs[func_id] (func_id < n_funcs), its times as sched_session_call clamps them. */
static inline void sched_func_add(struct sched_func_time *f, uint64_t dur_ns,
				  const struct offcpu_time *in_call)
{
	uint64_t off_ns = in_call->off_ns, runnable_ns = in_call->runnable_ns;

	if (off_ns > dur_ns)
		off_ns = dur_ns;
	if (runnable_ns > off_ns)
		runnable_ns = off_ns;
	f->calls++;
	f->off_ns += off_ns;
	f->runnable_ns += runnable_ns;
}
/* func_id's sums; false when none of its calls was recorded returning. */
bool sched_session_func_time(const struct sched_session *ss, uint32_t func_id,
			     struct sched_func_time *out);

/* The probe's loss count for the target so far: a rise marks the trace (lost_events). */
void sched_session_set_lost(struct sched_session *ss, uint64_t lost);
void sched_session_get_stats(const struct sched_session *ss, struct sched_session_stats *st);

#endif
