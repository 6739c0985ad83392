// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/events/event_hist.c: counters per (thread, agent
 * function id) that stay where they are as the table grows, taken once, and
 * the bucket of a duration in ns as the agent would count it in ticks.
 */
#include <string.h>

#include "daemon/events/event_hist.h"
#include "tests/unit/unit.h"

/* Pointers handed out stay valid and distinct while hundreds more are made. */
static void test_counters_stay(void)
{
	struct event_hists *h = event_hists_new();
	uint32_t *first = event_hists_get(h, 7, 1), *again;

	CHECK(first != NULL);
	first[3] = 5;
	for (uint32_t i = 2; i < 600; i++) {
		uint32_t *c = event_hists_get(h, 7 + i % 3, i);

		CHECK(c != NULL && c != first);
		if (c)
			c[0] = i;
	}
	again = event_hists_get(h, 7, 1);
	CHECK(again == first);
	CHECK_EQ_U64(again[3], 5);
	CHECK_EQ_U64(event_hists_get(h, 7 + 599 % 3, 599)[0], 599);
	event_hists_free(h);
}

/* A take adds the counts to what it is given, zeroes them, and finds nothing twice. */
static void test_take_once(void)
{
	struct event_hists *h = event_hists_new();
	uint64_t into[AGG_BUCKETS] = { 0 };
	uint32_t *c = event_hists_get(h, 1, 2);

	into[4] = 10;
	c[4] = 3;
	c[AGG_BUCKETS - 1] = 1;
	CHECK(event_hists_take(h, 1, 2, into));
	CHECK_EQ_U64(into[4], 13);
	CHECK_EQ_U64(into[AGG_BUCKETS - 1], 1);
	CHECK_EQ_U64(c[4], 0);
	CHECK(!event_hists_take(h, 1, 2, into));
	CHECK(!event_hists_take(h, 1, 3, into)); /* never counted */
	CHECK(!event_hists_take(h, 2, 2, into)); /* another thread */
	CHECK_EQ_U64(into[4], 13);
	event_hists_free(h);
}

struct seen {
	unsigned calls;
	uint64_t sum;
};

static void count_seen(void *ctx, uint32_t tid, uint32_t agent_id, const uint64_t *counts)
{
	struct seen *s = ctx;

	s->calls++;
	for (uint32_t b = 0; b < AGG_BUCKETS; b++)
		s->sum += counts[b] * (tid * 1000 + agent_id);
}

/* take_all hands over what no take took, each (thread, id) once. */
static void test_take_all(void)
{
	struct event_hists *h = event_hists_new();
	uint64_t into[AGG_BUCKETS] = { 0 };
	struct seen s = { 0 };

	event_hists_get(h, 1, 1)[0] = 2;
	event_hists_get(h, 2, 5)[9] = 1;
	event_hists_get(h, 3, 3); /* nothing counted */
	event_hists_take(h, 1, 1, into);
	event_hists_take_all(h, count_seen, &s);
	CHECK_EQ_U64(s.calls, 1);
	CHECK_EQ_U64(s.sum, 2005);
	s = (struct seen){ 0 };
	event_hists_take_all(h, count_seen, &s);
	CHECK_EQ_U64(s.calls, 0);
	event_hists_free(h);
}

/* A duration in ns falls in the bucket of its ticks, at 1 and at 2.5 ticks a ns. */
static void test_bucket_in_ticks(void)
{
	uint64_t one = event_hists_ticks_per_ns_q32(1ull << 32); /* 2^32 ticks in 2^32 ns */
	uint64_t fast = event_hists_ticks_per_ns_q32((uint64_t)((double)(1ull << 32) / 2.5));

	CHECK_EQ_U64(one, 1ull << 32);
	CHECK_EQ_U64(event_hists_ticks_per_ns_q32(0), 1ull << 32);
	for (uint64_t ns = 0; ns < 5000000; ns = ns * 3 + 1) {
		CHECK_EQ_U64(event_hist_bucket(ns, one), agg_bucket(ns));
		/* within a tick of ns * 2.5: the same bucket or the one next to it */
		uint32_t b = event_hist_bucket(ns, fast), want = agg_bucket(ns * 5 / 2);

		CHECK(b == want || b + 1 == want || b == want + 1);
	}
	/* days: no overflow, the last bucket (past 2^46 ticks) */
	CHECK_EQ_U64(event_hist_bucket(100ull * 3600 * 1000000000, fast), AGG_BUCKETS - 1);
}

int main(void)
{
	RUN_TEST(test_counters_stay);
	RUN_TEST(test_take_once);
	RUN_TEST(test_take_all);
	RUN_TEST(test_bucket_in_ticks);
	return unit_summary();
}
