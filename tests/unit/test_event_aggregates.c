// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/events/event_decoder.c's AGGREGATES chunks: bodies
 * written here from the layout proto/func_aggregates.h documents, round
 * trips, tick-to-ns conversion, limits and hostile bodies (split from
 * test_event_decoder.c; the fixture is tests/unit/event_stream_fixture.h).
 */
#include "tests/unit/event_stream_fixture.h"

/* ---- aggregates -------------------------------------------------------------------- */

/* floor(ticks * dm / dt) over the stream's first and last pairs, saturated. */
static uint64_t expect_ticks_to_ns(struct pair first, struct pair last, uint64_t ticks)
{
	unsigned __int128 q = (unsigned __int128)ticks * (last.mono - first.mono) /
			      (last.tsc - first.tsc);

	return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
}

/* Compares a delivered function with what was sent, durations converted at first..last. */
static void check_agg(const struct delivered_agg *got, uint32_t tid, const struct test_agg *want,
		      const struct event_decoder *d, struct pair first, struct pair last)
{
	int before = unit_check_failures;

	CHECK_EQ_INT(got->tid, tid);
	CHECK_EQ_U64(got->fa.func_id, want->func_id);
	CHECK_EQ_U64(got->fa.entered, want->entered);
	CHECK_EQ_U64(got->fa.exited, want->exited);
	CHECK_EQ_U64(got->fa.untimed, want->untimed);
	CHECK_EQ_U64(got->fa.unrecorded, want->unrecorded);
	CHECK_EQ_U64(got->fa.filtered, want->filtered);
	CHECK_EQ_U64(got->fa.total_ns, event_decoder_ticks_to_ns(d, want->total));
	CHECK_EQ_U64(got->fa.self_ns, event_decoder_ticks_to_ns(d, want->self));
	CHECK_EQ_U64(got->fa.max_ns, event_decoder_ticks_to_ns(d, want->max));
	CHECK_EQ_U64(got->fa.total_ns, expect_ticks_to_ns(first, last, want->total));
	CHECK_EQ_U64(got->fa.self_ns, expect_ticks_to_ns(first, last, want->self));
	CHECK_EQ_U64(got->fa.max_ns, expect_ticks_to_ns(first, last, want->max));
	for (int i = 0; i < AGG_BUCKETS; i++)
		if (got->fa.hist[i] != want->hist[i]) {
			fprintf(stderr, "  bucket %d: %u != %u\n", i, got->fa.hist[i],
				want->hist[i]);
			unit_check_failures++;
		}
	if (unit_check_failures != before)
		fprintf(stderr, "  at function %" PRIu64 "\n", want->func_id);
}

/*
 * Thread drops, then functions with sparse histograms (bucket 0, the last
 * bucket, gaps, 32-bit counts), none and every field at its limits; a
 * drops-only chunk of another thread. Durations come in ticks and go out in
 * ns at the rate over the stream's pairs, the pair after the chunk included.
 */
static void test_aggregates_round_trip(void)
{
	/* three pairs, each segment at its own slope: only first..last gives the rate */
	const struct pair p0 = { BASE_TSC, BASE_MONO };
	const struct pair p1 = { BASE_TSC + 3000000, BASE_MONO + 1000000 };
	const struct pair p2 = { BASE_TSC + 9000000, BASE_MONO + 5000000 };
	const struct test_thread_drops td = { { 1, 2, UINT64_MAX, 4 }, 5, { 6, 1ull << 40 } },
				       none = { { 0 }, 0, { 0 } };
	static struct test_agg aggs[4] = {
		{ .func_id = 1, .entered = 10, .exited = 7, .untimed = 2, .unrecorded = 3,
		  .total = 123456789, .self = 100000000, .max = 99999999, .filtered = 4 },
		{ .func_id = 42, .untimed = 5 }, /* never timed: no bucket */
		{ .func_id = UINT32_MAX, .entered = 1ull << 40, .exited = 1ull << 40,
		  .total = UINT64_MAX / 2, .self = UINT64_MAX / 3, .max = 1ull << 44 },
		{ .func_id = 7, .entered = UINT64_MAX, .exited = UINT64_MAX,
		  .unrecorded = UINT64_MAX, .total = UINT64_MAX, .self = 1, .max = 0 },
	};
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	aggs[0].hist[0] = 1;
	aggs[0].hist[3] = 2;
	aggs[0].hist[4] = 4;
	aggs[2].hist[57] = UINT32_MAX;
	aggs[2].hist[174] = 1;
	aggs[2].hist[AGG_BUCKETS - 1] = 0x80000000u;
	for (int i = 0; i < AGG_BUCKETS; i++) /* every bucket used */
		aggs[3].hist[i] = (uint32_t)i + 1;
	builder_init(&b, 0);
	put_pair(&b, p0.tsc, p0.mono);
	put_pair(&b, p1.tsc, p1.mono);
	put_aggregates(&b, 8, &td, aggs, 4);
	put_aggregates(&b, 9, &none, NULL, 0);
	put_pair(&b, p2.tsc, p2.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_STR(last_err, "");
	CHECK_EQ_INT(r.n_thread_drops, 2);
	CHECK_EQ_INT(r.n_aggs, 4);
	CHECK_EQ_INT(r.n_recs + r.n_drops, 0);
	if (r.n_thread_drops != 2 || r.n_aggs != 4)
		goto out;
	CHECK_EQ_INT(r.thread_drops_tids[0], 8);
	CHECK_EQ_INT(r.aggs_at_thread_drops[0], 0); /* the thread's drops come first */
	for (int i = 0; i < AGG_DROP_REASONS; i++)
		CHECK_EQ_U64(r.thread_drops[0].by_reason[i], td.by_reason[i]);
	CHECK_EQ_U64(r.thread_drops[0].unattributed, 5);
	CHECK_EQ_U64(r.thread_drops[0].filtered_by[AGG_FILTER_SHORT], 6);
	CHECK_EQ_U64(r.thread_drops[0].filtered_by[AGG_FILTER_DEEP], 1ull << 40);
	CHECK_EQ_INT(r.thread_drops_tids[1], 9);
	CHECK_EQ_INT(r.aggs_at_thread_drops[1], 4);
	for (int i = 0; i < AGG_DROP_REASONS; i++)
		CHECK_EQ_U64(r.thread_drops[1].by_reason[i], 0);
	CHECK_EQ_U64(r.thread_drops[1].unattributed, 0);
	for (int i = 0; i < 4; i++)
		check_agg(&r.aggs[i], 8, &aggs[i], d, p0, p2);
	/* the rate is that of p0..p2: neither segment's own */
	CHECK_EQ_U64(event_decoder_ticks_to_ns(d, 9000000), 5000000);
out:
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

/* Durations at the stream's overall rate, saturated; nothing before two pairs. */
static void test_aggregates_ticks_to_ns(void)
{
	const struct pair a = { BASE_TSC, BASE_MONO }, b = { BASE_TSC + 3000, BASE_MONO + 7000 };
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder bld;
	static const uint64_t ticks[] = { 0, 1, 2, 3, 2999, 3000, 1ull << 32, 1ull << 62,
					  UINT64_MAX / 7 * 3, UINT64_MAX / 7 * 3 + 1, UINT64_MAX };

	CHECK_EQ_U64(event_decoder_ticks_to_ns(d, 1000), 0); /* no pair yet */
	builder_init(&bld, 0);
	put_pair(&bld, a.tsc, a.mono);
	put_pair(&bld, b.tsc, b.mono);
	CHECK_EQ_INT(feed_frame(d, &bld, &r), 0);
	for (size_t i = 0; i < sizeof(ticks) / sizeof(ticks[0]); i++)
		CHECK_EQ_U64(event_decoder_ticks_to_ns(d, ticks[i]),
			     expect_ticks_to_ns(a, b, ticks[i]));
	CHECK_EQ_U64(event_decoder_ticks_to_ns(d, UINT64_MAX), UINT64_MAX); /* 7/3 ns a tick */
	builder_fini(&bld);
	event_decoder_free(d);
	recorder_free(&r);
}

/* An aggregates chunk needs the rate: refused before two pairs, like events. */
static void test_hostile_aggregates_before_two_pairs(void)
{
	const struct test_thread_drops none = { { 0 }, 0 };
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_aggregates(&b, 5, &none, NULL, 0);
	expect_refused_frame(d, &b, "before two clock pairs");
	builder_fini(&b);
	event_decoder_free(d);
}

#define DROPS0 0, 0, 0, 0, 0, 0, 0, 0 /* the thread's drop counters, unattributed, filter counters */
#define FUNC1 1, 10, 7, 0, 3, 1, 1000, 900, 400, 0 /* func_id .. values_dropped: AGG_WIRE_FIELDS */

struct varint_case {
	const char *what;
	uint32_t count;
	size_t n;
	uint64_t v[24];
};

static void test_hostile_aggregates(void)
{
	static const struct varint_case cases[] = {
		{ "bucket index past the last", 1, 21, { DROPS0, FUNC1, 1, AGG_BUCKETS, 1 } },
		{ "second bucket past the last", 1, 23,
		  { DROPS0, FUNC1, 2, AGG_BUCKETS - 1, 1, 0, 1 } },
		{ "more buckets used than there are", 1, 19, { DROPS0, FUNC1, AGG_BUCKETS + 1 } },
		{ "exited > entered", 1, 19, { DROPS0, 1, 7, 8, 0, 0, 0, 1000, 900, 400, 0, 0 } },
		{ "func id 0", 1, 19, { DROPS0, 0, 10, 7, 0, 3, 0, 1000, 900, 400, 0, 0 } },
		{ "func id past 32 bits", 1, 19,
		  { DROPS0, 1ull << 32, 10, 7, 0, 3, 0, 1000, 900, 400, 0, 0 } },
		{ "bucket count past 32 bits", 1, 21, { DROPS0, FUNC1, 1, 3, 1ull << 32 } },
		{ "count 2 of one function", 2, 19, { DROPS0, FUNC1, 0 } },
		{ "a byte after the functions", 1, 20, { DROPS0, FUNC1, 0, 0 } },
		{ "count 0 before a function", 0, 19, { DROPS0, FUNC1, 0 } },
		{ "drop counters cut short", 0, 4, { 0, 0, 0, 0 } },
		{ "filter counters cut short", 0, 7, { 0, 0, 0, 0, 0, 0, 0 } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_bad_varints(EVENT_CHUNK_AGGREGATES, cases[i].count, cases[i].v, cases[i].n,
				  cases[i].what);
}

/* Every proper prefix of a valid two-function body is cut inside a varint or a function. */
static void test_hostile_aggregates_truncated(void)
{
	const struct test_thread_drops td = { { 1, 300, 0, 4 }, 70000 };
	static struct test_agg aggs[2] = {
		{ .func_id = 3, .entered = 500, .exited = 499, .total = 1u << 20, .self = 1000,
		  .max = 70000 },
		{ .func_id = 200, .untimed = 1 },
	};
	uint8_t body[AGG_BODY_MAX(2)];
	size_t len;

	aggs[0].hist[5] = 300;
	aggs[0].hist[60] = 199;
	len = encode_aggregates(body, &td, aggs, 2);
	for (size_t cut = 0; cut < len; cut++)
		check_bad_body(EVENT_CHUNK_AGGREGATES, 2, body, cut, "truncated aggregates");
}

/*
 * The limits that still decode: the last bucket, every bucket, exited =
 * unrecorded = entered, and unrecorded past entered (a running thread's
 * figures read one after the other: clamped to entered since 0ef0aeb).
 */
static void test_aggregates_at_limits(void)
{
	uint64_t v[AGG_DROP_REASONS + 1 + AGG_FILTER_REASONS + AGG_WIRE_FIELDS + 1 +
		   2 * AGG_BUCKETS] = { 0 };
	static const uint64_t fixed[AGG_WIRE_FIELDS] = { 9, 7, 7, 0, 7, 0, 1000, 900, 400, 2 };
	const size_t start = AGG_DROP_REASONS + 1 + AGG_FILTER_REASONS;
	const size_t head = start + AGG_WIRE_FIELDS;
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	memcpy(v + start, fixed, sizeof(fixed));
	builder_init(&b, 0);
	put_valid_prefix(&b);
	/* one bucket, the last, reached by its skip alone */
	v[head] = 1;
	v[head + 1] = AGG_BUCKETS - 1;
	v[head + 2] = 3;
	put_varint_chunk(&b, EVENT_CHUNK_AGGREGATES, 1, v, head + 3);
	/* every bucket: skips of 0 */
	v[head] = AGG_BUCKETS;
	for (int i = 0; i < AGG_BUCKETS; i++) {
		v[head + 1 + 2 * i] = 0;
		v[head + 2 + 2 * i] = (uint64_t)i + 100;
	}
	put_varint_chunk(&b, EVENT_CHUNK_AGGREGATES, 1, v, head + 1 + 2 * AGG_BUCKETS);
	/* unrecorded 9 and values dropped 99 of 7 entered, no bucket */
	v[start + 4] = 9;
	v[start + 9] = 99;
	v[head] = 0;
	put_varint_chunk(&b, EVENT_CHUNK_AGGREGATES, 1, v, head + 1);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_aggs, 3);
	if (r.n_aggs == 3) {
		CHECK_EQ_U64(r.aggs[2].fa.entered, 7);
		CHECK_EQ_U64(r.aggs[2].fa.unrecorded, 7);
		CHECK_EQ_U64(r.aggs[2].fa.values_dropped, 7);
		CHECK_EQ_U64(r.aggs[0].fa.unrecorded, 7);
		CHECK_EQ_U64(r.aggs[0].fa.values_dropped, 2);
		CHECK_EQ_INT(r.aggs[0].fa.hist[AGG_BUCKETS - 1], 3);
		CHECK_EQ_INT(r.aggs[0].fa.hist[AGG_BUCKETS - 2], 0);
		CHECK_EQ_INT(r.aggs[0].fa.hist[0], 0);
		for (int i = 0; i < AGG_BUCKETS; i++)
			CHECK_EQ_INT(r.aggs[1].fa.hist[i], i + 100);
	}
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

int main(void)
{
	RUN_TEST(test_aggregates_round_trip);
	RUN_TEST(test_aggregates_ticks_to_ns);
	RUN_TEST(test_aggregates_at_limits);
	RUN_TEST(test_hostile_aggregates_before_two_pairs);
	RUN_TEST(test_hostile_aggregates);
	RUN_TEST(test_hostile_aggregates_truncated);
	return unit_summary();
}
