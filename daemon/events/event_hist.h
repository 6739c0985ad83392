/* SPDX-License-Identifier: MIT */
/*
 * The duration histograms of the calls on the timeline, counted by profd
 * from their events, per (thread, agent function id): the agent's hooks
 * count only the buckets of calls that left no EXIT in the ring (issue 28:
 * the bucket's increment was a cache line and a dependent chain on every
 * call). The replay counts here; func_stats takes the counts with the
 * agent's next aggregates of that function (func_stats_update), or at the
 * process's end (event_hist_each). Owns its tables; not thread-safe.
 */
#ifndef PROFD_EVENT_HIST_H
#define PROFD_EVENT_HIST_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/func_aggregates.h"

struct event_hists;

struct event_hists *event_hists_new(void);
void event_hists_free(struct event_hists *h);

/*
 * The AGG_BUCKETS counters of (tid, agent_id), made (zero) if new; they stay
 * where they are until the table is freed. NULL when out of memory. 32 bits:
 * they count the calls of one function on one thread between two of its
 * agent's figures (250 ms), at most a few million.
 */
uint32_t *event_hists_get(struct event_hists *h, uint32_t tid, uint32_t agent_id);

/*
 * Adds (tid, agent_id)'s counts since the last take into `into` and zeroes
 * them; false when there are none (into unchanged).
 */
bool event_hists_take(struct event_hists *h, uint32_t tid, uint32_t agent_id, uint64_t *into);

/* Calls fn for each (tid, agent_id) with counts not taken yet (then zeroed). */
void event_hists_take_all(struct event_hists *h,
			  void (*fn)(void *ctx, uint32_t tid, uint32_t agent_id,
				     const uint64_t *counts),
			  void *ctx);

/*
 * The bucket of a call of dur_ns, in the agent's ticks: ticks_per_ns_q32 is
 * the ticks in 2^32 ns (event_hists_ticks_per_ns_q32).
 */
static inline uint32_t event_hist_bucket(uint64_t dur_ns, uint64_t ticks_per_ns_q32)
{
	return agg_bucket((uint64_t)(((unsigned __int128)dur_ns * ticks_per_ns_q32) >> 32));
}

/* ns_per_2_32_ticks: the ns of 2^32 ticks (event_decoder_ticks_to_ns); 0: one tick a ns. */
static inline uint64_t event_hists_ticks_per_ns_q32(uint64_t ns_per_2_32_ticks)
{
	if (!ns_per_2_32_ticks)
		return 1ull << 32;
	return (uint64_t)(((unsigned __int128)1 << 64) / ns_per_2_32_ticks);
}

#endif
