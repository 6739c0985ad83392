// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/events/func_stats.c: cumulative figures replace each other,
 * 32-bit bucket counters are added up across their wrap, threads add up into
 * a function's totals, percentiles come out of the merged buckets, a new
 * agent (exec) keeps what the last one reported, and the summary's calls
 * add up (made = recorded + dropped).
 */
#include <stdlib.h>

#include "daemon/events/func_stats.h"
#include "proto/func_aggregates.h"
#include "tests/unit/unit.h"

/* A function's figures as the decoder delivers them (durations already in ns). */
static struct decoded_func_agg agg(uint64_t entered, uint64_t exited, uint64_t untimed,
				   uint64_t unrecorded, uint64_t total, uint64_t self,
				   uint64_t max)
{
	struct decoded_func_agg fa = { .entered = entered, .exited = exited, .untimed = untimed,
				       .unrecorded = unrecorded, .total_ns = total,
				       .self_ns = self, .max_ns = max };

	return fa;
}

/* All rows of func_stats_totals(); *n their count (checked >= 0). */
static struct func_totals *totals(const struct func_stats *fs, int per_thread, long *n)
{
	struct func_totals *t = NULL;

	*n = func_stats_totals(fs, per_thread, &t);
	CHECK(*n >= 0);
	return t;
}

/* The one row of func_stats_totals() over threads into *row; 0 (a failed check) if not one. */
static int only_total(const struct func_stats *fs, struct func_totals *row)
{
	struct func_totals *t;
	long n;

	t = totals(fs, 0, &n);
	CHECK_EQ_INT(n, 1);
	if (n == 1)
		*row = t[0];
	free(t);
	return n == 1;
}

/* The middle of bucket b in ns, as func_stats reads percentiles. */
static uint64_t bucket_middle_ns(uint32_t b, double ns_per_tick)
{
	uint64_t lo = agg_bucket_low(b), hi = agg_bucket_low(b + 1);

	return (uint64_t)((double)(lo + (hi > lo + 1 ? (hi - lo) / 2 : 0)) * ns_per_tick);
}

static void check_row(const struct func_totals *t, uint32_t func_id, uint32_t tid, uint64_t calls,
		      uint64_t exited, uint64_t open, uint64_t dropped, uint64_t total,
		      uint64_t self, uint64_t max)
{
	int before = unit_check_failures;

	CHECK_EQ_INT(t->func_id, func_id);
	CHECK_EQ_INT(t->tid, tid);
	CHECK_EQ_U64(t->calls, calls);
	CHECK_EQ_U64(t->exited, exited);
	CHECK_EQ_U64(t->open, open);
	CHECK_EQ_U64(t->dropped, dropped);
	CHECK_EQ_U64(t->total_ns, total);
	CHECK_EQ_U64(t->self_ns, self);
	CHECK_EQ_U64(t->max_ns, max);
	if (unit_check_failures != before)
		fprintf(stderr, "  in the row of function %u, thread %u\n", func_id, tid);
}

/* The agent sends cumulative figures: the latest replaces the earlier, never adds to it. */
static void test_cumulative_updates(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(5, 4, 1, 2, 1000, 800, 400);
	struct func_totals row;

	a.hist[agg_bucket(200)] = 4;
	CHECK_EQ_INT(func_stats_update(fs, 10, 3, &a, 1.0), 0);
	if (only_total(fs, &row))
		check_row(&row, 3, 0, 6, 4, 1, 3, 1000, 800, 400);
	a = agg(9, 9, 1, 2, 3000, 2500, 900);
	a.hist[agg_bucket(200)] = 4;
	a.hist[agg_bucket(600)] = 5;
	CHECK_EQ_INT(func_stats_update(fs, 10, 3, &a, 1.0), 0);
	if (only_total(fs, &row)) {
		check_row(&row, 3, 0, 10, 9, 0, 3, 3000, 2500, 900);
		/* 4 + 5 calls, not 4 + 4 + 5: the first bucket's count did not change */
		CHECK_EQ_U64(row.p50_ns, bucket_middle_ns(agg_bucket(600), 1.0));
		CHECK_EQ_U64(row.p90_ns, bucket_middle_ns(agg_bucket(600), 1.0));
	}
	func_stats_free(fs);
}

/*
 * The buckets of calls on the timeline come from profd's replay, added to
 * the agent's (which holds only the calls off it); percentiles read over the
 * histogram's own count, which the events may put ahead of the figures.
 */
static void test_buckets_from_events(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(10, 10, 0, 0, 10000, 10000, 5000);
	uint64_t counted[AGG_BUCKETS] = { 0 };
	struct func_totals row;

	a.hist[agg_bucket(5000)] = 1; /* one call off the timeline, the agent's */
	CHECK_EQ_INT(func_stats_update(fs, 10, 3, &a, 1.0), 0);
	counted[agg_bucket(100)] = 9; /* nine on it, from their events */
	CHECK_EQ_INT(func_stats_add_buckets(fs, 10, 3, a.func_id, counted), 0);
	if (only_total(fs, &row)) {
		check_row(&row, 3, 0, 10, 10, 0, 0, 10000, 10000, 5000);
		CHECK_EQ_U64(row.p50_ns, bucket_middle_ns(agg_bucket(100), 1.0));
		CHECK_EQ_U64(row.p99_ns, bucket_middle_ns(agg_bucket(5000), 1.0));
	}
	/* 20 more counted from events before the figures that count them arrive */
	counted[agg_bucket(100)] = 0;
	counted[agg_bucket(3000)] = 20;
	CHECK_EQ_INT(func_stats_add_buckets(fs, 10, 3, a.func_id, counted), 0);
	if (only_total(fs, &row)) /* 30 in the histogram: p50 is the 15th, among the 20 */
		CHECK_EQ_U64(row.p50_ns, bucket_middle_ns(agg_bucket(3000), 1.0));
	func_stats_free(fs);
}

/* The p90 row the ranks fall on, as func_stats computes them. */
static uint64_t p90_rank(uint64_t n)
{
	return (uint64_t)(0.90 * (double)n);
}

/* The call count whose p90 rank is `rank` (the smallest such). */
static uint64_t calls_with_p90_rank(uint64_t rank)
{
	uint64_t n = (uint64_t)((double)rank / 0.90) - 16;

	while (p90_rank(n) < rank)
		n++;
	return n;
}

/*
 * One function's bucket A wraps: its counter goes 0xfffffff0 -> 0x10 between
 * two updates, so it holds want_a = 0xfffffff0 + 0x20 calls; bucket B gets
 * the rest of `exited`. Returns the p90 the stats give.
 */
static uint64_t p90_after_wrap(uint32_t bucket_a, uint32_t bucket_b, uint64_t exited)
{
	const uint64_t want_a = 0xfffffff0ull + 0x20;
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(0xfffffff0, 0xfffffff0, 0, 0, 0, 0, 1ull << 50);
	struct func_totals row;
	uint64_t p90 = 0;

	a.hist[bucket_a] = 0xfffffff0u;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	a = agg(exited, exited, 0, 0, 0, 0, 1ull << 50);
	a.hist[bucket_a] = 0x10;
	CHECK(exited - want_a <= UINT32_MAX);
	a.hist[bucket_b] = (uint32_t)(exited - want_a);
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	if (only_total(fs, &row)) {
		CHECK_EQ_U64(row.exited, exited);
		CHECK_EQ_U64(row.p50_ns, bucket_middle_ns(bucket_a, 1.0));
		p90 = row.p90_ns;
	}
	func_stats_free(fs);
	return p90;
}

/*
 * A bucket counter that goes 0xfffffff0 -> 0x10 adds 0x20 calls: exactly, as
 * the p90 rank shows from both sides (it lands on the wrapped bucket's last
 * call, then on the first call after it).
 */
static void test_histogram_counter_wrap(void)
{
	const uint64_t want_a = 0xfffffff0ull + 0x20;
	const uint32_t bucket_a = 20, bucket_b = 100;

	/* rank want_a - 1: still in A only if A holds at least want_a */
	CHECK_EQ_U64(p90_after_wrap(bucket_a, bucket_b, calls_with_p90_rank(want_a - 1)),
		     bucket_middle_ns(bucket_a, 1.0));
	/* rank want_a: past A only if A holds at most want_a */
	CHECK_EQ_U64(p90_after_wrap(bucket_a, bucket_b, calls_with_p90_rank(want_a)),
		     bucket_middle_ns(bucket_b, 1.0));
}

/* Per (thread, function) rows, and per function over its threads: sums, max of maxima. */
static void test_per_thread_and_total_sums(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a11 = agg(10, 10, 0, 0, 5000, 4000, 900);
	struct decoded_func_agg a21 = agg(4, 3, 2, 1, 2000, 2000, 1200);
	struct decoded_func_agg a12 = agg(1, 1, 0, 0, 100, 100, 100);
	struct func_totals *t;
	long n;

	a11.hist[agg_bucket(500)] = 10;
	a21.hist[agg_bucket(666)] = 3;
	a12.hist[agg_bucket(100)] = 1;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a11, 1.0), 0);
	CHECK_EQ_INT(func_stats_update(fs, 2, 1, &a21, 1.0), 0);
	CHECK_EQ_INT(func_stats_update(fs, 1, 2, &a12, 1.0), 0);
	t = totals(fs, 1, &n);
	CHECK_EQ_INT(n, 3);
	if (n == 3) { /* most total time first */
		check_row(&t[0], 1, 1, 10, 10, 0, 0, 5000, 4000, 900);
		check_row(&t[1], 1, 2, 6, 3, 1, 3, 2000, 2000, 1200);
		check_row(&t[2], 2, 1, 1, 1, 0, 0, 100, 100, 100);
		CHECK_EQ_U64(t[1].p50_ns, bucket_middle_ns(agg_bucket(666), 1.0));
	}
	free(t);
	t = totals(fs, 0, &n);
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		check_row(&t[0], 1, 0, 16, 13, 1, 3, 7000, 6000, 1200);
		check_row(&t[1], 2, 0, 1, 1, 0, 0, 100, 100, 100);
		/* 13 exited: 10 in 500's bucket, 3 in 666's (rank 11 of 13 for p90) */
		CHECK_EQ_U64(t[0].p50_ns, bucket_middle_ns(agg_bucket(500), 1.0));
		CHECK_EQ_U64(t[0].p90_ns, bucket_middle_ns(agg_bucket(666), 1.0));
	}
	free(t);
	func_stats_free(fs);
}

/* The duration of rank fraction * n among sorted[0..n), as func_stats ranks it. */
static uint64_t true_percentile(const uint64_t *sorted, size_t n, double fraction)
{
	uint64_t rank = (uint64_t)(fraction * (double)n);

	return sorted[rank < n ? rank : n - 1];
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* |estimate - truth| <= limit * truth, both in ns. */
static void check_close(uint64_t estimate, double truth, double limit, const char *what)
{
	double err = ((double)estimate - truth) / truth;

	if (err > limit || err < -limit) {
		fprintf(stderr, "  %s: %" PRIu64 " ns for %.1f ns (%.2f %%)\n", what, estimate,
			truth, 100 * err);
		unit_check_failures++;
	}
}

/* Feeds the durations (ticks) as one function's figures; returns its row over threads. */
static struct func_totals stats_of(const uint64_t *ticks, size_t n, double ns_per_tick)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(n, n, 0, 0, 0, 0, 0);
	struct func_totals row = { 0 };

	for (size_t i = 0; i < n; i++) {
		a.hist[agg_bucket(ticks[i])]++;
		if (ticks[i] * ns_per_tick > a.max_ns)
			a.max_ns = (uint64_t)(ticks[i] * ns_per_tick);
	}
	CHECK_EQ_INT(func_stats_update(fs, 7, 1, &a, ns_per_tick), 0);
	only_total(fs, &row);
	func_stats_free(fs);
	return row;
}

/* Uniform durations 1,000..100,999 ticks at 0.25 ns a tick: percentiles within 12 %. */
static void test_percentiles_known_distribution(void)
{
	const size_t n = 100000;
	uint64_t *ticks = malloc(n * sizeof(*ticks));
	struct func_totals row;

	for (size_t i = 0; i < n; i++)
		ticks[i] = 1000 + i;
	row = stats_of(ticks, n, 0.25);
	check_close(row.p50_ns, 0.25 * 51000, 0.12, "p50");
	check_close(row.p90_ns, 0.25 * 91000, 0.12, "p90");
	check_close(row.p99_ns, 0.25 * 100000, 0.12, "p99");
	free(ticks);
}

/*
 * A percentile of true duration v ticks read at its bucket's middle: within
 * 12.5 % of v + 4 (buckets are of ticks + 4, each at most 25 % wider than
 * its low bound there), so 12.5 % x (v + 4) / v of v: about the 12 % the
 * header promises for calls of a few hundred ticks and more, up to 25 % for
 * the shortest. Plus the ns truncation.
 */
static void check_percentile(uint64_t estimate, uint64_t v, double ns_per_tick, const char *what)
{
	double limit = 0.125 * (double)(v + 4) / (double)v + 1 / (ns_per_tick * (double)v);

	check_close(estimate, ns_per_tick * (double)v, limit, what);
}

/* Random durations over many magnitudes, from 8 ticks; never above the max. */
static void test_percentiles_random_durations(void)
{
	const size_t n = 5001;
	uint64_t *ticks = malloc(n * sizeof(*ticks)), x = 0x853c49e6748fea9bull;

	for (int round = 0; round < 20; round++) {
		struct func_totals row;

		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			ticks[i] = 8 + (x >> (24 + x % 36)); /* 8 .. 2^40 */
		}
		row = stats_of(ticks, n, 0.3);
		qsort(ticks, n, sizeof(*ticks), by_value);
		check_percentile(row.p50_ns, true_percentile(ticks, n, 0.50), 0.3, "p50");
		check_percentile(row.p90_ns, true_percentile(ticks, n, 0.90), 0.3, "p90");
		check_percentile(row.p99_ns, true_percentile(ticks, n, 0.99), 0.3, "p99");
		CHECK(row.p99_ns <= row.max_ns);
	}
	free(ticks);
}

/* A bucket's middle past the longest call in it: the percentiles stop at the max. */
static void test_percentiles_never_above_max(void)
{
	const uint32_t b = agg_bucket(5000);
	uint64_t *ticks = malloc(100 * sizeof(*ticks));
	struct func_totals row;

	for (int i = 0; i < 100; i++) /* every call at its bucket's low bound */
		ticks[i] = agg_bucket_low(b);
	row = stats_of(ticks, 100, 1.0);
	CHECK(bucket_middle_ns(b, 1.0) > agg_bucket_low(b));
	CHECK_EQ_U64(row.max_ns, agg_bucket_low(b));
	CHECK_EQ_U64(row.p50_ns, agg_bucket_low(b));
	CHECK_EQ_U64(row.p99_ns, agg_bucket_low(b));
	free(ticks);
}

static void set_drops(struct decoded_thread_drops *td, uint64_t full, uint64_t shadow,
		      uint64_t in_hook, uint64_t unwinder, uint64_t unattributed)
{
	memset(td, 0, sizeof(*td));
	td->by_reason[AGG_DROP_BUFFER_FULL] = full;
	td->by_reason[AGG_DROP_SHADOW_FULL] = shadow;
	td->by_reason[AGG_DROP_IN_HOOK] = in_hook;
	td->by_reason[AGG_DROP_UNDER_UNWINDER] = unwinder;
	td->unattributed = unattributed;
	td->filtered_by[AGG_FILTER_SHORT] = 0;
	td->filtered_by[AGG_FILTER_DEEP] = 0;
}

static void check_reasons(const struct func_stats_summary *sum, uint64_t full, uint64_t shadow,
			  uint64_t in_hook, uint64_t unwinder)
{
	CHECK_EQ_U64(sum->dropped_by_reason[AGG_DROP_BUFFER_FULL], full);
	CHECK_EQ_U64(sum->dropped_by_reason[AGG_DROP_SHADOW_FULL], shadow);
	CHECK_EQ_U64(sum->dropped_by_reason[AGG_DROP_IN_HOOK], in_hook);
	CHECK_EQ_U64(sum->dropped_by_reason[AGG_DROP_UNDER_UNWINDER], unwinder);
}

/*
 * After an exec the new agent counts from zero: what the old one reported
 * stays (its open calls stay open, its max too), the new figures add to it,
 * and its bucket counters start again from zero rather than from the old
 * ones (3 calls in a bucket where the old agent had 7: 10, not 7 + 3 - 7
 * modulo 2^32).
 */
static void test_new_agent_keeps_earlier_figures(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(10, 8, 1, 2, 5700, 5000, 5000);
	struct decoded_thread_drops td;
	struct func_stats_summary sum;
	struct func_totals row;

	a.hist[agg_bucket(100)] = 7;
	a.hist[agg_bucket(5000)] = 1;
	CHECK_EQ_INT(func_stats_update(fs, 5, 1, &a, 1.0), 0);
	set_drops(&td, 2, 1, 0, 0, 1);
	func_stats_thread_drops(fs, 5, &td);
	func_stats_new_agent(fs);
	func_stats_new_agent(fs); /* twice in a row: nothing counted twice */
	a = agg(4, 4, 0, 0, 2300, 2300, 2000);
	a.hist[agg_bucket(100)] = 3;
	a.hist[agg_bucket(2000)] = 1;
	CHECK_EQ_INT(func_stats_update(fs, 5, 1, &a, 1.0), 0);
	set_drops(&td, 0, 0, 1, 0, 0);
	func_stats_thread_drops(fs, 5, &td);
	if (only_total(fs, &row)) {
		check_row(&row, 1, 0, 15, 12, 2, 3, 8000, 7300, 5000);
		/* 12 exited: 10 in 100's bucket, then 2000's, then 5000's */
		CHECK_EQ_U64(row.p50_ns, bucket_middle_ns(agg_bucket(100), 1.0));
		CHECK_EQ_U64(row.p90_ns, bucket_middle_ns(agg_bucket(2000), 1.0));
		CHECK_EQ_U64(row.p99_ns, bucket_middle_ns(agg_bucket(5000), 1.0));
	}
	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.made, 16); /* 15 calls of the function, 1 unattributed */
	CHECK_EQ_U64(sum.dropped, 4);
	CHECK_EQ_U64(sum.recorded, 12);
	CHECK_EQ_U64(sum.open, 2);
	check_reasons(&sum, 2, 1, 1, 0);
	CHECK_EQ_U64(sum.unattributed, 1);
	func_stats_free(fs);
}

/*
 * The session's calls in one unit: made (every function's timed and untimed
 * calls, and the unattributed ones) = recorded + dropped, dropped being the
 * threads' counters by reason, latest report of each thread.
 */
static void test_summary_made_is_recorded_plus_dropped(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a;
	struct decoded_thread_drops td;
	struct func_stats_summary sum;

	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.made + sum.recorded + sum.dropped + sum.open + sum.unattributed, 0);
	/* thread 1: 100 calls of f1 (7 off the timeline for want of buffer), 5 of f2 untimed */
	a = agg(100, 99, 0, 7, 5000, 5000, 90);
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	a = agg(0, 0, 5, 0, 0, 0, 0);
	CHECK_EQ_INT(func_stats_update(fs, 1, 2, &a, 1.0), 0);
	set_drops(&td, 3, 0, 0, 0, 0);
	func_stats_thread_drops(fs, 1, &td);
	set_drops(&td, 7, 5, 0, 0, 0); /* the latest report replaces the earlier */
	func_stats_thread_drops(fs, 1, &td);
	/* thread 2: 20 calls of f1, 2 made under an unwinder, 4 calls in no function's figures */
	a = agg(20, 20, 2, 0, 800, 800, 60);
	CHECK_EQ_INT(func_stats_update(fs, 2, 1, &a, 1.0), 0);
	set_drops(&td, 0, 0, 4, 2, 4);
	func_stats_thread_drops(fs, 2, &td);
	/* thread 3: drops only, in no function */
	set_drops(&td, 0, 0, 1, 0, 1);
	func_stats_thread_drops(fs, 3, &td);
	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.made, 100 + 5 + 22 + 4 + 1);
	CHECK_EQ_U64(sum.dropped, 7 + 5 + 4 + 2 + 1);
	CHECK_EQ_U64(sum.made, sum.recorded + sum.dropped);
	CHECK_EQ_U64(sum.open, 1);
	CHECK_EQ_U64(sum.unattributed, 5);
	check_reasons(&sum, 7, 5, 5, 2);
	func_stats_free(fs);
}

/*
 * Filtered calls (--min-duration, --max-depth) are neither recorded nor
 * dropped: made = recorded + dropped + filtered, per function and in all;
 * a new agent's counters add to the earlier one's.
 */
static void test_filtered_apart_from_dropped(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_thread_drops td;
	struct decoded_func_agg a = agg(1000, 1000, 0, 10, 50000, 50000, 900);
	struct func_stats_summary sum;
	struct func_totals *rows;
	long n;

	a.filtered = 600;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	set_drops(&td, 10, 0, 0, 0, 0);
	td.filtered_by[AGG_FILTER_SHORT] = 550;
	td.filtered_by[AGG_FILTER_DEEP] = 50;
	func_stats_thread_drops(fs, 1, &td);
	func_stats_new_agent(fs); /* an exec: the next agent counts from zero */
	a = agg(100, 100, 0, 0, 5000, 5000, 90);
	a.filtered = 30;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	set_drops(&td, 0, 0, 0, 0, 0);
	td.filtered_by[AGG_FILTER_SHORT] = 30;
	func_stats_thread_drops(fs, 1, &td);
	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.made, 1100);
	CHECK_EQ_U64(sum.dropped, 10);
	CHECK_EQ_U64(sum.filtered, 630);
	CHECK_EQ_U64(sum.filtered_by_reason[AGG_FILTER_SHORT], 580);
	CHECK_EQ_U64(sum.filtered_by_reason[AGG_FILTER_DEEP], 50);
	CHECK_EQ_U64(sum.recorded, 1100 - 10 - 630);
	rows = totals(fs, 0, &n);
	CHECK_EQ_INT(n, 1);
	if (n == 1) {
		CHECK_EQ_U64(rows[0].filtered, 630);
		CHECK_EQ_U64(rows[0].dropped, 10);
	}
	free(rows);
	func_stats_free(fs);
}

/*
 * Calls recorded without their values (no room for a return value): per
 * function over threads and agents (an exec's counts from zero), and in the
 * session's sum, apart from the drops.
 */
static void test_values_dropped_per_function(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(100, 100, 0, 0, 5000, 5000, 90);
	struct func_stats_summary sum;
	struct func_totals row;

	a.values_dropped = 3;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	a.values_dropped = 2;
	CHECK_EQ_INT(func_stats_update(fs, 2, 1, &a, 1.0), 0);
	func_stats_new_agent(fs);
	a.values_dropped = 1;
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	a.values_dropped = 4; /* the same agent's later report: cumulative */
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 1.0), 0);
	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.values_dropped, 9);
	CHECK_EQ_U64(sum.dropped, 0);
	if (only_total(fs, &row))
		CHECK_EQ_U64(row.values_dropped, 9);
	func_stats_free(fs);
}

/*
 * The --min-duration suggestion: the lowest bucket bound that keeps at most
 * the limit of the longest calls, from the histograms of every thread.
 */
static void test_min_duration_suggestion(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(1000, 1000, 0, 0, 0, 0, 0);

	a.hist[agg_bucket(10)] = 900;   /* 900 calls of 10 ticks */
	a.hist[agg_bucket(1000)] = 90;  /* 90 of 1000 */
	a.hist[agg_bucket(100000)] = 10; /* 10 of 100000 */
	CHECK_EQ_INT(func_stats_update(fs, 1, 1, &a, 2.0), 0);
	CHECK_EQ_INT(func_stats_update(fs, 2, 1, &a, 2.0), 0); /* as much on another thread */
	CHECK_EQ_U64(func_stats_min_duration_for(fs, 2000), 0);          /* all fit */
	/* just past the bucket of the calls that must go: the lowest bound that leaves them out */
	CHECK_EQ_U64(func_stats_min_duration_for(fs, 200), 2 * agg_bucket_low(agg_bucket(10) + 1));
	CHECK_EQ_U64(func_stats_min_duration_for(fs, 199), 2 * agg_bucket_low(agg_bucket(1000) + 1));
	CHECK_EQ_U64(func_stats_min_duration_for(fs, 20), 2 * agg_bucket_low(agg_bucket(1000) + 1));
	CHECK_EQ_U64(func_stats_min_duration_for(fs, 19),
		     2 * agg_bucket_low(agg_bucket(100000) + 1));
	/* the bound keeps the calls above it: 10-tick calls are under the one for 200 */
	CHECK(2 * agg_bucket_low(agg_bucket(10) + 1) > 2 * 10);
	CHECK(2 * agg_bucket_low(agg_bucket(10) + 1) <= 2 * 1000);
	func_stats_free(fs);
}

/* Many (thread, function) pairs: the table grows and loses none. */
static void test_many_entries(void)
{
	struct func_stats *fs = func_stats_new();
	struct func_totals *t;
	long n;

	for (uint32_t tid = 1; tid <= 40; tid++)
		for (uint32_t f = 1; f <= 50; f++) {
			struct decoded_func_agg a = agg(f, f, 0, 0, 10ull * f, f, 10);

			CHECK_EQ_INT(func_stats_update(fs, 1000 + tid, f, &a, 1.0), 0);
		}
	t = totals(fs, 1, &n);
	CHECK_EQ_INT(n, 40 * 50);
	free(t);
	t = totals(fs, 0, &n);
	CHECK_EQ_INT(n, 50);
	for (long i = 0; i < n && n == 50; i++) /* most total time first: f = 50 .. 1 */
		check_row(&t[i], 50 - (uint32_t)i, 0, 40ull * (50 - i), 40ull * (50 - i), 0, 0,
			  400ull * (50 - i), 40ull * (50 - i), 10);
	free(t);
	func_stats_free(fs);
}

struct each_sum {
	uint64_t calls, total, hist_calls;
	uint32_t entries;
	uint64_t stamp_of[3]; /* by tid 10, 11, 12 */
};

static void sum_entry(void *ctx, const struct func_stats_view *v)
{
	struct each_sum *s = ctx;

	s->entries++;
	s->calls += v->t.calls;
	s->total += v->t.total_ns;
	for (int b = 0; b < AGG_BUCKETS; b++)
		s->hist_calls += v->hist[b];
}

static void note_stamp(void *ctx, uint32_t tid, uint64_t stamp_ns)
{
	struct each_sum *s = ctx;

	if (tid >= 10 && tid <= 12)
		s->stamp_of[tid - 10] = stamp_ns;
}

/*
 * profctl top's view: every (thread, function) entry with its histogram,
 * adding up to the totals, and each thread stamped when its aggregates
 * (their drops part first) last came, not when another thread's did.
 */
static void test_each_entry_and_thread_stamps(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_thread_drops td = { 0 };
	struct decoded_func_agg a = agg(4, 4, 0, 0, 400, 400, 150);
	struct each_sum s = { 0 };

	a.hist[agg_bucket(100)] = 4;
	func_stats_stamp(fs, 1000);
	func_stats_thread_drops(fs, 10, &td);
	CHECK_EQ_INT(func_stats_update(fs, 10, 1, &a, 1.0), 0);
	func_stats_stamp(fs, 2000);
	func_stats_thread_drops(fs, 11, &td);
	CHECK_EQ_INT(func_stats_update(fs, 11, 1, &a, 1.0), 0);
	CHECK_EQ_INT(func_stats_update(fs, 11, 2, &a, 1.0), 0);
	func_stats_each(fs, sum_entry, &s);
	func_stats_each_thread(fs, note_stamp, &s);
	CHECK_EQ_INT(s.entries, 3);
	CHECK_EQ_U64(s.calls, 12);
	CHECK_EQ_U64(s.total, 1200);
	CHECK_EQ_U64(s.hist_calls, 12);
	CHECK_EQ_U64(s.stamp_of[0], 1000);
	CHECK_EQ_U64(s.stamp_of[1], 2000);
	func_stats_free(fs);
}

/*
 * Two ids of the agent's for one function of the trace (a library loaded
 * again after dlclose): each id's figures are cumulative on their own, and
 * the function's rows add both, one row per thread, one view per thread.
 */
static void test_two_agent_ids_one_function(void)
{
	struct func_stats *fs = func_stats_new();
	struct decoded_func_agg a = agg(1000, 1000, 0, 0, 5000, 5000, 90);
	struct func_stats_summary sum;
	struct each_sum s = { 0 };
	struct func_totals *rows;
	long n;

	a.func_id = 7; /* the first load's id */
	a.values_dropped = 2;
	a.hist[agg_bucket(5)] = 1000;
	CHECK_EQ_INT(func_stats_update(fs, 10, 1, &a, 1.0), 0);
	a.func_id = 12; /* loaded again: its id counts from zero */
	a.entered = a.exited = 400;
	a.values_dropped = 1;
	a.hist[agg_bucket(5)] = 400;
	CHECK_EQ_INT(func_stats_update(fs, 10, 1, &a, 1.0), 0);
	a.entered = a.exited = 600; /* the second id's later report: cumulative */
	a.hist[agg_bucket(5)] = 600;
	CHECK_EQ_INT(func_stats_update(fs, 10, 1, &a, 1.0), 0);
	func_stats_summarize(fs, &sum);
	CHECK_EQ_U64(sum.made, 1600);
	CHECK_EQ_U64(sum.values_dropped, 3);
	for (int per_thread = 0; per_thread <= 1; per_thread++) {
		rows = totals(fs, per_thread, &n);
		CHECK_EQ_INT(n, 1);
		if (n == 1) {
			CHECK_EQ_U64(rows[0].calls, 1600);
			CHECK_EQ_U64(rows[0].exited, 1600);
			CHECK_EQ_U64(rows[0].total_ns, 10000);
			CHECK_EQ_U64(rows[0].values_dropped, 3);
			CHECK_EQ_INT(rows[0].tid, per_thread ? 10 : 0);
		}
		free(rows);
	}
	func_stats_each(fs, sum_entry, &s);
	CHECK_EQ_INT(s.entries, 1);
	CHECK_EQ_U64(s.calls, 1600);
	CHECK_EQ_U64(s.hist_calls, 1600);
	func_stats_free(fs);
}

/*
 * Many entries, made and updated in an interleaved order, each found again
 * through the table as it grows (its slots rehashed, its entries moved):
 * every (thread, function) row holds its own figures.
 */
static void test_many_entries_found_again(void)
{
	struct func_stats *fs = func_stats_new();
	struct func_totals *t;
	long n, wrong = 0;

	for (int round = 1; round <= 2; round++)
		for (uint32_t k = 0; k < 64 * 9; k++) {
			uint32_t tid = 1000 + k % 64, func = 1 + k / 64;
			uint64_t calls = (uint64_t)round * (tid * 100 + func);
			struct decoded_func_agg a = agg(calls, calls, 0, 0, calls * 10, calls, 7);

			a.func_id = func;
			CHECK_EQ_INT(func_stats_update(fs, tid, func, &a, 1.0), 0);
		}
	t = totals(fs, 1, &n);
	CHECK_EQ_INT(n, 64 * 9);
	for (long i = 0; i < n; i++)
		wrong += t[i].calls != 2ull * (t[i].tid * 100 + t[i].func_id) ||
			 t[i].total_ns != 10 * t[i].calls;
	CHECK_EQ_INT(wrong, 0);
	free(t);
	func_stats_free(fs);
}

int main(void)
{
	RUN_TEST(test_cumulative_updates);
	RUN_TEST(test_buckets_from_events);
	RUN_TEST(test_histogram_counter_wrap);
	RUN_TEST(test_per_thread_and_total_sums);
	RUN_TEST(test_percentiles_known_distribution);
	RUN_TEST(test_percentiles_random_durations);
	RUN_TEST(test_percentiles_never_above_max);
	RUN_TEST(test_new_agent_keeps_earlier_figures);
	RUN_TEST(test_summary_made_is_recorded_plus_dropped);
	RUN_TEST(test_many_entries);
	RUN_TEST(test_filtered_apart_from_dropped);
	RUN_TEST(test_values_dropped_per_function);
	RUN_TEST(test_min_duration_suggestion);
	RUN_TEST(test_each_entry_and_thread_stamps);
	RUN_TEST(test_two_agent_ids_one_function);
	RUN_TEST(test_many_entries_found_again);
	return unit_summary();
}
