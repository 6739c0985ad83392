/* SPDX-License-Identifier: MIT */
/*
 * A session's exact per-function figures: the agents' cumulative aggregates
 * (proto/func_aggregates.h) per thread and function, kept as they arrive
 * and added up on demand, with duration percentiles read from the merged
 * histograms (the agents' buckets of calls off the timeline, profd's of the
 * calls on it, func_stats_add_buckets). Counts every call the hooks saw, on
 * the timeline or not.
 */
#ifndef PROFD_FUNC_STATS_H
#define PROFD_FUNC_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/events/event_decoder.h"

struct func_stats;

/* One function's figures, on one thread (tid != 0) or over all of them (tid 0). */
struct func_totals {
	uint32_t func_id;  /* session id (daemon/events/func_registry.h) */
	uint32_t tid;
	uint64_t calls;    /* made: timed from their enter, or untimed */
	uint64_t exited;   /* timed calls that returned: total, self and the durations are theirs */
	uint64_t open;     /* timed calls that had not returned when last reported */
	uint64_t dropped;  /* calls not on the timeline for want of room (untimed or unrecorded) */
	uint64_t filtered; /* calls the filters kept off the timeline (--min-duration, --max-depth) */
	uint64_t values_dropped; /* recorded without their --args/--retval values: no room */
	uint64_t total_ns, self_ns, max_ns;
	/* duration percentiles, estimates within 12 % (bucket middles); 0 without calls */
	uint64_t p50_ns, p90_ns, p99_ns;
};

/* Calls of the whole session, in one unit. */
struct func_stats_summary {
	uint64_t made, recorded, dropped, filtered, open;
	uint64_t dropped_by_reason[AGG_DROP_REASONS];
	uint64_t filtered_by_reason[AGG_FILTER_REASONS];
	uint64_t unattributed; /* in `made` but in no function's figures */
	uint64_t values_dropped; /* recorded calls without their values (no room) */
};

struct func_stats *func_stats_new(void);
void func_stats_free(struct func_stats *fs);

/*
 * An agent's aggregates of one function, func_id already mapped to the
 * session's id; fa->func_id, the agent's own, keeps its figures apart from
 * another id of the agent's that maps to the same function (a library
 * loaded again, one name in two libraries). 0 or -ENOMEM.
 */
int func_stats_update(struct func_stats *fs, uint32_t tid, uint32_t func_id,
		      const struct decoded_func_agg *fa, double ns_per_tick);
/*
 * Duration buckets of (tid, func_id, agent's id) that profd counted from
 * events (daemon/events/event_hist.h: the calls on the timeline, whose
 * buckets the agent leaves out), added to the agent's. 0 or -ENOMEM.
 */
int func_stats_add_buckets(struct func_stats *fs, uint32_t tid, uint32_t func_id,
			   uint32_t agent_id, const uint64_t *counts);
void func_stats_thread_drops(struct func_stats *fs, uint32_t tid,
			     const struct decoded_thread_drops *td);
/* A new agent (exec) counts from zero: what the last one reported stays, its raw counters go. */
void func_stats_new_agent(struct func_stats *fs);

/*
 * Adds src's figures to dst (a session's total over its processes: func ids
 * must be the same space in both). 0 or -ENOMEM (dst then holds part).
 */
int func_stats_merge(struct func_stats *dst, const struct func_stats *src);

/*
 * Every function over all threads (per_thread 0) or every (thread, function)
 * pair (per_thread 1), sorted by total time, most first. Returns the count
 * and sets *out (malloc'd; free it), or -ENOMEM.
 */
long func_stats_totals(const struct func_stats *fs, int per_thread, struct func_totals **out);
void func_stats_summarize(const struct func_stats *fs, struct func_stats_summary *sum);

/*
 * The shortest --min-duration (ns, rounded up) that keeps at most max_calls
 * of the returned calls, read off the merged duration histograms: an
 * estimate, within a bucket's width (25 %). 0 when every call fits anyway.
 */
uint64_t func_stats_min_duration_for(const struct func_stats *fs, uint64_t max_calls);

/*
 * When the aggregates decoded from now on were reported (profd's
 * CLOCK_MONOTONIC ns, read as their frame arrives). A thread's figures are
 * all as of its last aggregates (the agent sends only what changed, so an
 * entry it left out is unchanged): func_stats_thread_drops, which starts
 * every thread's aggregates, takes the stamp for the thread. Live rates
 * (daemon/session_live.c) divide by the time between two of them.
 */
void func_stats_stamp(struct func_stats *fs, uint64_t now_ns);

/* One (thread, function) entry as func_stats_each shows it: cumulative, read-only. */
struct func_stats_view {
	struct func_totals t;   /* tid != 0; the percentiles are not filled */
	const uint64_t *hist;   /* AGG_BUCKETS cumulative counts of durations in ticks */
	double ns_per_tick;     /* 0: not known yet */
};

/* Calls fn for every (thread, function) entry, in no particular order. */
void func_stats_each(const struct func_stats *fs,
		     void (*fn)(void *ctx, const struct func_stats_view *v), void *ctx);
/* Calls fn for every thread that sent aggregates, with the stamp of its last ones. */
void func_stats_each_thread(const struct func_stats *fs,
			    void (*fn)(void *ctx, uint32_t tid, uint64_t stamp_ns), void *ctx);

#endif
