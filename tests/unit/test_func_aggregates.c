// SPDX-License-Identifier: MIT
/*
 * Unit tests for the duration buckets of proto/func_aggregates.h, which the
 * agent fills and the daemon reads percentiles from: agg_bucket() and
 * agg_bucket_low() must agree on every bound, and each bucket must be narrow
 * enough for the percentile error the header promises.
 */
#include <stdint.h>

#include "proto/func_aggregates.h"
#include "tests/unit/unit.h"

/* Every bucket's low bound maps to that bucket, and the tick below it to the one before. */
static void test_bucket_low_bounds_round_trip(void)
{
	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		uint64_t low = agg_bucket_low(b);
		int before = unit_check_failures;

		CHECK_EQ_INT(agg_bucket(low), b);
		if (b > 0)
			CHECK_EQ_INT(agg_bucket(low - 1), b - 1);
		if (unit_check_failures != before) {
			fprintf(stderr, "  at bucket %u (low %" PRIu64 ")\n", b, low);
			return;
		}
	}
}

/* Below 4 ticks a bucket is one duration; from 4 on, buckets of ticks + 4 are wider. */
static void test_bucket_exact_below_four(void)
{
	for (uint64_t t = 0; t < 4; t++) {
		CHECK_EQ_INT(agg_bucket(t), t);
		CHECK_EQ_U64(agg_bucket_low((uint32_t)t), t);
	}
	CHECK_EQ_INT(agg_bucket(4), 4);
	CHECK_EQ_INT(agg_bucket(5), 4);
	CHECK_EQ_INT(agg_bucket(6), 5);
	CHECK_EQ_INT(agg_bucket(12), 8);
	CHECK_EQ_INT(agg_bucket(15), 8);
	CHECK_EQ_INT(agg_bucket(16), 9);
}

/* Low bounds rise strictly; bucket() never goes back and never skips one. */
static void test_bucket_monotonic(void)
{
	uint64_t bad = 0, x = 0x9e3779b97f4a7c15ull;

	for (uint32_t b = 1; b <= AGG_BUCKETS; b++)
		bad += agg_bucket_low(b) <= agg_bucket_low(b - 1);
	for (uint64_t t = 1; t < (1u << 20); t++) {
		uint32_t prev = agg_bucket(t - 1), cur = agg_bucket(t);

		bad += cur < prev || cur > prev + 1;
	}
	/* around every power of two and its quarters, up to 7 * 2^60 */
	for (int k = 0; k <= 60; k++)
		for (uint64_t q = 4; q < 8; q++) {
			uint64_t t = q << k;

			bad += agg_bucket(t) < agg_bucket(t - 1);
			bad += agg_bucket(t + 1) < agg_bucket(t);
		}
	for (int i = 0; i < 100000; i++) { /* random pairs t < u */
		uint64_t t, u;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		t = x >> (x % 64);
		u = t + (x >> 40);
		bad += u >= t && agg_bucket(u) < agg_bucket(t);
	}
	CHECK_EQ_U64(bad, 0);
}

/* A duration lies in [low(b), low(b + 1)) of its bucket b (below the last). */
static void test_bucket_contains_duration(void)
{
	uint64_t bad = 0, x = 0x243f6a8885a308d3ull;

	for (int i = 0; i < 200000; i++) {
		uint64_t t;
		uint32_t b;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		t = x >> (20 + x % 44); /* every magnitude below 2^44 */
		b = agg_bucket(t);
		bad += b >= AGG_BUCKETS - 1 || t < agg_bucket_low(b) || t >= agg_bucket_low(b + 1);
	}
	CHECK_EQ_U64(bad, 0);
}

/*
 * Buckets are of ticks + 4: from bucket 4 on, one is at most 25 % wider than
 * its low bound + 4, so that its middle is within 12.5 % of (duration + 4)
 * for any duration in it. In ticks that is a little more: 25 % at bucket 4
 * (4-5 ticks, middle 5), 12.5 % x (low + 4) / low in general (see
 * test_func_stats.c). Below 4, one tick.
 */
static void test_bucket_width_bound(void)
{
	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		uint64_t low = agg_bucket_low(b), width = agg_bucket_low(b + 1) - low;
		uint64_t mid = low + width / 2;

		if (b < 4) {
			CHECK_EQ_U64(width, 1);
			continue;
		}
		if (width * 4 > low + 4 || (mid - low) * 8 > low + 4) {
			fprintf(stderr, "  bucket %u: low %" PRIu64 ", width %" PRIu64 "\n", b, low,
				width);
			unit_check_failures++;
			return;
		}
	}
}

/* Past the last bucket's low bound every duration, up to 2^64 - 1, lands in it. */
static void test_bucket_clamps_at_top(void)
{
	const uint32_t last = AGG_BUCKETS - 1;
	const uint64_t end = agg_bucket_low(AGG_BUCKETS);

	CHECK_EQ_INT(agg_bucket(agg_bucket_low(last)), last);
	CHECK_EQ_INT(agg_bucket(end - 1), last);
	CHECK_EQ_INT(agg_bucket(end), last);
	CHECK_EQ_INT(agg_bucket(end * 2), last);
	CHECK_EQ_INT(agg_bucket(1ull << 63), last);
	CHECK_EQ_INT(agg_bucket(UINT64_MAX), last);
	/* the header's promise: the buckets reach 2^46 ticks (less the 4 they are shifted by) */
	CHECK_EQ_U64(end, (1ull << 46) - 4);
	CHECK(agg_bucket(1ull << 45) < last);
}

int main(void)
{
	RUN_TEST(test_bucket_low_bounds_round_trip);
	RUN_TEST(test_bucket_exact_below_four);
	RUN_TEST(test_bucket_monotonic);
	RUN_TEST(test_bucket_contains_duration);
	RUN_TEST(test_bucket_width_bound);
	RUN_TEST(test_bucket_clamps_at_top);
	return unit_summary();
}
