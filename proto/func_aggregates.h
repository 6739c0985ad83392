/* SPDX-License-Identifier: MIT */
/*
 * Exact per-function aggregates: what the agent's hooks count for every
 * call, recorded on the timeline or not, and the wire form of
 * EVENT_CHUNK_AGGREGATES (proto/event_wire.h) that carries them to the
 * daemon. The duration histogram's bucket math lives here so that the agent
 * and the daemon, which both fill buckets (the agent those of calls that
 * left no EXIT in the ring, profd those of the others, from their events:
 * daemon/events/event_hist.h) and the daemon reads percentiles out of, can
 * never disagree.
 */
#ifndef PROFD_FUNC_AGGREGATES_H
#define PROFD_FUNC_AGGREGATES_H

#include <stdint.h>

/*
 * Log-linear buckets of a duration in TSC ticks: of ticks + 4, four per
 * power of two, so that the first four hold 0-3 exactly and each later one
 * is at most 25 % wider than its lower bound (a percentile read at a
 * bucket's middle is within 12 % of the truth). 176 buckets reach 2^46 ticks
 * (hours at any TSC rate); longer calls share the last one (the maximum is
 * kept exactly beside them). No branch: the hooks' path must not depend on
 * how long a call took (tests/targets/sigstep_tracer.c replays it exactly).
 */
#define AGG_SUB_BITS 2
#define AGG_BUCKETS 176

static inline uint32_t agg_bucket(uint64_t ticks)
{
	uint64_t x = ticks + (1u << AGG_SUB_BITS);
	uint32_t octave = 63u - (uint32_t)__builtin_clzll(x);
	uint32_t index = ((octave - AGG_SUB_BITS) << AGG_SUB_BITS) |
			 (uint32_t)((x >> (octave - AGG_SUB_BITS)) & ((1u << AGG_SUB_BITS) - 1));

	return index < AGG_BUCKETS ? index : AGG_BUCKETS - 1;
}

/* The smallest duration in bucket `index` (index <= AGG_BUCKETS: the end of the last). */
static inline uint64_t agg_bucket_low(uint32_t index)
{
	uint32_t octave = (index >> AGG_SUB_BITS) + AGG_SUB_BITS;
	uint64_t sub = index & ((1u << AGG_SUB_BITS) - 1);

	return (((1u << AGG_SUB_BITS) | sub) << (octave - AGG_SUB_BITS)) - (1u << AGG_SUB_BITS);
}

/*
 * The bucket of the call of rank n * permille / 1000 among the n durations
 * counted in hist[AGG_BUCKETS]; AGG_BUCKETS when n is 0 or hist holds
 * fewer. Percentiles are read at the bucket's middle (agg_bucket_middle),
 * within 12 % of the truth. Integers only: the agent's hot-path files,
 * which include this header, are built without floating point.
 */
static inline uint32_t agg_percentile_bucket(const uint64_t *hist, uint64_t n, uint32_t permille)
{
	uint64_t rank = n / 1000 * permille + n % 1000 * permille / 1000, seen = 0;

	if (!n)
		return AGG_BUCKETS;
	if (rank >= n)
		rank = n - 1;
	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		seen += hist[b];
		if (seen > rank)
			return b;
	}
	return AGG_BUCKETS;
}

/* The middle of bucket index (< AGG_BUCKETS), in ticks. */
static inline uint64_t agg_bucket_middle(uint32_t index)
{
	uint64_t lo = agg_bucket_low(index), hi = agg_bucket_low(index + 1);

	return lo + (hi > lo + 1 ? (hi - lo) / 2 : 0);
}

/*
 * Why a call is missing from the timeline. Every call is counted in its
 * function's aggregates whatever the reason; these say why its slice is not
 * in the trace.
 */
enum agg_drop_reason {
	AGG_DROP_BUFFER_FULL = 0,    /* timed, but the session's buffer budget was spent */
	AGG_DROP_SHADOW_FULL = 1,    /* nested deeper than the shadow stack: not timed */
	AGG_DROP_IN_HOOK = 2,        /* a signal handler's call while a hook ran: not timed */
	AGG_DROP_UNDER_UNWINDER = 3, /* made while an unwinder walked the stack: not timed */
	AGG_DROP_FROM_GENERATED_CODE = 4, /* called by a runtime's generated code: not timed */
	AGG_DROP_REASONS
};

/*
 * Why a call was kept off the timeline on purpose (the session's filters):
 * counted apart from the drops, and like them in its function's figures.
 */
enum agg_filter_reason {
	AGG_FILTER_SHORT = 0, /* ended (returned, or left by longjmp) before --min-duration */
	AGG_FILTER_DEEP = 1,  /* nested deeper than --max-depth instrumented frames */
	AGG_FILTER_REASONS
};

/*
 * EVENT_CHUNK_AGGREGATES body, all varints: AGG_DROP_REASONS counters of the
 * thread's calls missing from the timeline (by reason), the count of its
 * calls that are in no function's figures (`unattributed`: the agent had no
 * memory for them; rare, but counted so that no total is short),
 * AGG_FILTER_REASONS counters of its calls the filters kept off the
 * timeline, then `count` functions, each:
 *   func_id, entered, exited, untimed, unrecorded, filtered, total, self,
 *   max, values_dropped, buckets used, then per used bucket: index -
 *   previous index - 1 (the first: index), count.
 * Every figure is cumulative since the thread's first call: `entered` calls
 * were timed from their enter (exited of them returned, the rest are open),
 * `untimed` calls ran without being timed, `unrecorded` of the entered ones
 * are not on the timeline for want of buffer room, `filtered` of them were
 * kept off it by the filters; total and self are ticks of the exited calls
 * (self: less the instrumented calls made inside them), max their longest;
 * `values_dropped` of the recorded ones are on the timeline without (some
 * of) their --args/--retval values, for want of room in the ring.
 * Bucket counts are the low 32 bits of each bucket's cumulative count: the
 * agent sends each thread's figures far more often than 2^32 calls of one
 * function can happen, so the daemon adds up the differences modulo 2^32.
 */
#define AGG_WIRE_FIELDS 10

#endif
