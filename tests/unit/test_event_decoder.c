// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/event_decoder.c. Streams are built the way
 * agent/flusher.c builds them (one ZSTD_CCtx at level 1, ZSTD_e_flush per
 * frame); expected times are computed here, independently, with __int128.
 * Hostile streams must fail with a reason and deliver nothing of the bad frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <zstd.h>

#include "daemon/event_decoder.h"
#include "proto/event_wire.h"
#include "tests/unit/unit.h"

/* ---- stream builder: the agent's side ------------------------------------------ */

struct builder {
	ZSTD_CCtx *cctx;
	uint8_t *raw;      /* chunks of the frame being built */
	size_t raw_len, raw_cap;
	uint8_t *out;      /* the last compressed frame */
	size_t out_len, out_cap;
};

static void builder_init(struct builder *b, int window_log)
{
	memset(b, 0, sizeof(*b));
	b->cctx = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_compressionLevel, 1);
	if (window_log)
		ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_windowLog, window_log);
}

static void builder_fini(struct builder *b)
{
	ZSTD_freeCCtx(b->cctx);
	free(b->raw);
	free(b->out);
}

static void builder_put(struct builder *b, const void *p, size_t len)
{
	if (b->raw_len + len > b->raw_cap) {
		b->raw_cap = (b->raw_len + len) * 2;
		b->raw = realloc(b->raw, b->raw_cap);
	}
	memcpy(b->raw + b->raw_len, p, len);
	b->raw_len += len;
}

static void put_chunk(struct builder *b, uint32_t kind, uint32_t tid, uint32_t count,
		      uint64_t drops, const void *body, size_t body_len)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .drops = drops };

	builder_put(b, &h, sizeof(h));
	if (body_len)
		builder_put(b, body, body_len);
}

static void put_pair(struct builder *b, uint64_t tsc, uint64_t mono)
{
	struct event_clock_pair p = { .tsc = tsc, .mono_ns = mono };

	put_chunk(b, EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, &p, sizeof(p));
}

/* The frame the tests give an enter of func: a return address and slot derived from it. */
static uint64_t test_return_address(uint32_t func) { return 0x400000u + func; }
static uint64_t test_return_slot(uint32_t func) { return 0x7ffc00000000ull + 8ull * func; }

/*
 * The agent's ring units for recs: each enter followed by its frame. Returns
 * the units written to out (room for 2 * n).
 */
static uint32_t encode_units(const struct event_record *recs, uint32_t n, struct event_record *out)
{
	uint32_t units = 0;

	for (uint32_t i = 0; i < n; i++) {
		out[units++] = recs[i];
		if (recs[i].kind == EVENT_ENTER) {
			struct event_enter_frame f = {
				.return_address = test_return_address(recs[i].func_id),
				.tagged_slot = test_return_slot(recs[i].func_id) | EVENT_FRAME_TAG,
			};

			memcpy(&out[units++], &f, sizeof(f));
		}
	}
	return units;
}

static void put_record(struct builder *b, uint32_t tid, uint64_t tsc, uint32_t func, uint32_t kind)
{
	struct event_record r = { .tsc = tsc, .func_id = func, .kind = kind }, units[2];
	uint32_t n = encode_units(&r, 1, units);

	put_chunk(b, EVENT_CHUNK_RECORDS, tid, n, 0, units, n * sizeof(units[0]));
}

/* Compresses the pending chunks as one frame, exactly like flusher_send_stage(). */
static void builder_flush(struct builder *b)
{
	ZSTD_inBuffer in = { b->raw, b->raw_len, 0 };
	ZSTD_outBuffer out;
	size_t remaining;

	b->out_cap = ZSTD_compressBound(b->raw_len) + 1024;
	b->out = realloc(b->out, b->out_cap);
	out = (ZSTD_outBuffer){ b->out, b->out_cap, 0 };
	do {
		remaining = ZSTD_compressStream2(b->cctx, &out, &in, ZSTD_e_flush);
		CHECK(!ZSTD_isError(remaining));
	} while (!ZSTD_isError(remaining) && remaining != 0);
	b->out_len = out.pos;
	b->raw_len = 0;
}

/* ---- recorder: what the decoder delivered -------------------------------------- */

struct delivered_record {
	uint32_t tid, func, kind;
	uint64_t mono, return_address, return_slot;
};

struct recorder {
	struct delivered_record *recs;
	size_t n_recs, cap;
	char names[4][EVENT_THREAD_NAME_LEN + 8];
	uint32_t name_tids[4];
	size_t n_names, n_exits, n_drops, n_watermarks;
	uint64_t last_watermark;
	size_t recs_at_watermark;  /* records delivered before the last watermark */
	uint32_t exit_tid, drops_tid;
	uint64_t last_drops, last_drops_mono;
};

static void on_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	struct recorder *r = ctx;

	if (r->n_recs == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->recs = realloc(r->recs, r->cap * sizeof(*r->recs));
	}
	r->recs[r->n_recs++] = (struct delivered_record){ tid, ev->func_id, ev->kind, ev->mono_ns,
							  ev->return_address, ev->return_slot };
}

static void on_thread_name(void *ctx, uint32_t tid, const char *name)
{
	struct recorder *r = ctx;

	if (r->n_names < 4) {
		snprintf(r->names[r->n_names], sizeof(r->names[0]), "%s", name);
		r->name_tids[r->n_names] = tid;
	}
	r->n_names++;
}

static void on_thread_exit(void *ctx, uint32_t tid)
{
	struct recorder *r = ctx;

	r->n_exits++;
	r->exit_tid = tid;
}

static void on_drops(void *ctx, uint32_t tid, uint64_t drops, uint64_t mono)
{
	struct recorder *r = ctx;

	r->n_drops++;
	r->drops_tid = tid;
	r->last_drops = drops;
	r->last_drops_mono = mono;
}

static void on_watermark(void *ctx, uint64_t mono)
{
	struct recorder *r = ctx;

	r->n_watermarks++;
	r->last_watermark = mono;
	r->recs_at_watermark = r->n_recs;
}

static const struct event_decoder_callbacks record_cb = {
	.record = on_record,
	.watermark = on_watermark,
	.thread_name = on_thread_name,
	.thread_exit = on_thread_exit,
	.drops = on_drops,
};

static size_t delivered_total(const struct recorder *r)
{
	return r->n_recs + r->n_names + r->n_exits + r->n_drops;
}

static char last_err[256];

/* Feeds the builder's pending chunks as one frame. */
static int feed_frame(struct event_decoder *d, struct builder *b, struct recorder *r)
{
	builder_flush(b);
	last_err[0] = '\0';
	return event_decoder_feed(d, b->out, b->out_len, &record_cb, r, last_err, sizeof(last_err));
}

static int feed_bytes(struct event_decoder *d, const uint8_t *p, size_t len, struct recorder *r)
{
	last_err[0] = '\0';
	return event_decoder_feed(d, p, len, &record_cb, r, last_err, sizeof(last_err));
}

/* ---- expected values, computed independently ------------------------------------ */

struct pair {
	uint64_t tsc, mono;
};

/* The point on the line through a and b at tsc, rounded toward a. */
static uint64_t expect_on_line(struct pair a, struct pair b, uint64_t tsc)
{
	__int128 num = ((__int128)tsc - (__int128)a.tsc) * ((__int128)b.mono - (__int128)a.mono);
	__int128 v = (__int128)a.mono + num / ((__int128)b.tsc - (__int128)a.tsc);

	return v < 0 ? 0 : (uint64_t)v;
}

static uint64_t test_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

#define BASE_TSC 1000000000000ull  /* about 5 minutes of uptime at 3.3 GHz */
#define BASE_MONO 300000000000ull

/* ---- round trip ------------------------------------------------------------------ */

static void put_records(struct builder *b, uint32_t tid, uint64_t drops,
			const struct event_record *recs, uint32_t n)
{
	struct event_record *units = malloc((2 * (size_t)n + 1) * sizeof(*units));
	uint32_t n_units = encode_units(recs, n, units);

	put_chunk(b, EVENT_CHUNK_RECORDS, tid, n_units, drops, units, (size_t)n_units * sizeof(*units));
	free(units);
}

/* Compares what was delivered with recs[0..n) of tid, all converted on the line a-b. */
static void check_records(const struct recorder *r, size_t first, uint32_t tid,
			  const struct event_record *recs, size_t n, struct pair a, struct pair b)
{
	CHECK(r->n_recs >= first + n);
	for (size_t i = 0; i < n && first + i < r->n_recs; i++) {
		const struct delivered_record *got = &r->recs[first + i];
		int before = unit_check_failures;

		CHECK_EQ_INT(got->tid, tid);
		CHECK_EQ_INT(got->func, recs[i].func_id);
		CHECK_EQ_INT(got->kind, recs[i].kind);
		CHECK_EQ_U64(got->mono, expect_on_line(a, b, recs[i].tsc));
		if (recs[i].kind == EVENT_ENTER) {
			CHECK_EQ_U64(got->return_address, test_return_address(recs[i].func_id));
			CHECK_EQ_U64(got->return_slot, test_return_slot(recs[i].func_id));
		}
		if (unit_check_failures != before) {
			fprintf(stderr, "  at record %zu\n", first + i);
			return;
		}
	}
}

static void fill_records(struct event_record *recs, uint32_t n, uint64_t tsc0, uint64_t step,
			 uint32_t func0)
{
	for (uint32_t i = 0; i < n; i++)
		recs[i] = (struct event_record){ .tsc = tsc0 + i * step, .func_id = func0 + i,
						 .kind = i % 2 ? EVENT_EXIT : EVENT_ENTER };
}

static void test_round_trip(void)
{
	const struct pair p0 = { BASE_TSC, BASE_MONO };
	const struct pair p1 = { BASE_TSC + 33333337, BASE_MONO + 10000019 };
	struct event_record a[600], b[400];
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder bld;

	builder_init(&bld, 0);
	fill_records(a, 600, p0.tsc, 33331, 1);
	fill_records(b, 400, p0.tsc + 20000011, 33329, 1000);
	put_pair(&bld, p0.tsc, p0.mono);
	put_chunk(&bld, EVENT_CHUNK_THREAD_NAME, 101, 0, 0, "abcdefghijklmnop", 16);
	put_chunk(&bld, EVENT_CHUNK_THREAD_NAME, 202, 0, 0, "worker\0\0\0\0\0\0\0\0\0\0", 16);
	put_records(&bld, 101, 0, a, 600);
	put_records(&bld, 202, 0, b, 400);
	put_chunk(&bld, EVENT_CHUNK_THREAD_EXIT, 202, 0, 0, NULL, 0);
	put_pair(&bld, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &bld, &r), 0);
	CHECK_EQ_STR(last_err, "");
	CHECK_EQ_INT(r.n_recs, 1000);
	check_records(&r, 0, 101, a, 600, p0, p1);
	check_records(&r, 600, 202, b, 400, p0, p1);
	CHECK_EQ_INT(r.n_names, 2);
	CHECK_EQ_INT(r.name_tids[0], 101);
	CHECK_EQ_STR(r.names[0], "abcdefghijklmnop");
	CHECK_EQ_INT(r.name_tids[1], 202);
	CHECK_EQ_STR(r.names[1], "worker");
	CHECK_EQ_INT(r.n_exits, 1);
	CHECK_EQ_INT(r.exit_tid, 202);
	CHECK_EQ_INT(r.n_drops, 0);
	builder_fini(&bld);
	event_decoder_free(d);
	free(r.recs);
}

/* ---- several frames, segment choice, extrapolation --------------------------------- */

/* Four pairs with different slopes, so that the wrong segment shows. */
static const struct pair seg_pairs[4] = {
	{ BASE_TSC, BASE_MONO },
	{ BASE_TSC + 3000000, BASE_MONO + 1000000 },
	{ BASE_TSC + 5000000, BASE_MONO + 2000000 },
	{ BASE_TSC + 9000000, BASE_MONO + 3000000 },
};

struct placed {
	uint64_t tsc;
	int seg; /* the segment (pairs seg, seg+1) that must convert it */
};

static const struct placed seg_records[] = {
	{ BASE_TSC + 1000001, 0 },           /* frame 1 */
	{ BASE_TSC + 3000000 - 5, 0 },       /* frame 2: below frame 1's closing pair */
	{ BASE_TSC + 3000000 + 777777, 1 },
	{ BASE_TSC + 5000000 + 123457, 2 },  /* frame 3 */
	{ BASE_TSC + 9000000 + 1000003, 2 }, /* after the last pair */
	{ BASE_TSC - 3000001, 0 },           /* before the first pair */
	{ BASE_TSC + 9000000 + 10000000, 2 },/* frame 4, which has no pair */
};

/* Frame i holds records [first[i], first[i+1]) and closes with pair i + 1 (not frame 4). */
static const size_t seg_first[5] = { 0, 1, 3, 6, 7 };

static void build_segment_frame(struct builder *b, int frame)
{
	if (frame == 0)
		put_pair(b, seg_pairs[0].tsc, seg_pairs[0].mono);
	for (size_t i = seg_first[frame]; i < seg_first[frame + 1]; i++)
		put_record(b, 7, seg_records[i].tsc, (uint32_t)i + 1, EVENT_ENTER);
	if (frame < 3)
		put_pair(b, seg_pairs[frame + 1].tsc, seg_pairs[frame + 1].mono);
}

static void test_frames_share_stream_and_segments(void)
{
	struct event_decoder *d = event_decoder_new(), *fresh = event_decoder_new();
	struct recorder r = { 0 }, none = { 0 };
	struct builder b;

	builder_init(&b, 0);
	for (int f = 0; f < 4; f++) {
		build_segment_frame(&b, f);
		CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
		CHECK_EQ_STR(last_err, "");
		if (f == 1) /* no frame header of its own: needs the stream's context */
			CHECK_EQ_INT(feed_bytes(fresh, b.out, b.out_len, &none), -EBADMSG);
	}
	CHECK_EQ_INT(r.n_recs, 7);
	for (size_t i = 0; i < 7 && i < r.n_recs; i++) {
		int s = seg_records[i].seg;

		CHECK_EQ_INT(r.recs[i].func, i + 1);
		CHECK_EQ_U64(r.recs[i].mono,
			     expect_on_line(seg_pairs[s], seg_pairs[s + 1], seg_records[i].tsc));
	}
	CHECK_EQ_INT(delivered_total(&none), 0);
	builder_fini(&b);
	event_decoder_free(d);
	event_decoder_free(fresh);
	free(r.recs);
}

/* ---- monotonic ------------------------------------------------------------------- */

/* Feeds one frame of n random pairs (steep, shallow and flat segments); returns them. */
static void feed_random_pairs(struct event_decoder *d, struct pair *p, size_t n, uint64_t *seed)
{
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	p[0] = (struct pair){ BASE_TSC, BASE_MONO };
	for (size_t i = 1; i < n; i++) {
		uint64_t dm = test_rand(seed) % 4 == 0 ? 0 : test_rand(seed) % 3000000;

		p[i].tsc = p[i - 1].tsc + 1 + test_rand(seed) % 1000000;
		p[i].mono = p[i - 1].mono + dm;
	}
	for (size_t i = 0; i < n; i++)
		put_pair(&b, p[i].tsc, p[i].mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	builder_fini(&b);
}

static void test_monotonic_across_segments(void)
{
	struct event_decoder *d = event_decoder_new();
	uint64_t seed = 0x5eedf00dull, prev = 0, bad = 0;
	struct pair p[24];

	feed_random_pairs(d, p, 24, &seed);
	for (size_t i = 0; i < 24; i++)
		CHECK_EQ_U64(event_decoder_convert(d, p[i].tsc), p[i].mono);
	for (uint64_t t = p[0].tsc - 2000000; t < p[23].tsc + 2000000; t += 97) {
		uint64_t m = event_decoder_convert(d, t);

		bad += m < prev;
		prev = m;
	}
	for (size_t i = 0; i < 24; i++) /* each boundary, one tick at a time */
		for (uint64_t t = p[i].tsc - 3; t <= p[i].tsc + 3; t++)
			bad += event_decoder_convert(d, t) < event_decoder_convert(d, t - 1);
	CHECK_EQ_U64(bad, 0);
	event_decoder_free(d);
}

static struct event_decoder *decoder_with_pairs(struct pair a, struct pair b)
{
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder bld;

	builder_init(&bld, 0);
	put_pair(&bld, a.tsc, a.mono);
	put_pair(&bld, b.tsc, b.mono);
	CHECK_EQ_INT(feed_frame(d, &bld, &r), 0);
	builder_fini(&bld);
	return d;
}

/* Hostile pairs at the ends of the range: saturates, never wraps, stays monotonic. */
static void test_monotonic_extreme_pairs(void)
{
	const struct pair lo = { UINT64_MAX / 2, 1 }, hi = { UINT64_MAX / 2 + 1, UINT64_MAX - 1 };
	struct event_decoder *d = decoder_with_pairs(lo, hi);

	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX / 2), 1);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX / 2 + 1), UINT64_MAX - 1);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX / 2 + 2), UINT64_MAX);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX), UINT64_MAX);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX / 2 - 1), 0);
	CHECK_EQ_U64(event_decoder_convert(d, 0), 0);
	event_decoder_free(d);
	/* |dt| * dm near 2^128: past what a signed __int128 holds */
	d = decoder_with_pairs((struct pair){ 0, 0 }, (struct pair){ 1, UINT64_MAX });
	CHECK_EQ_U64(event_decoder_convert(d, 1), UINT64_MAX);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX), UINT64_MAX);
	event_decoder_free(d);
	d = decoder_with_pairs((struct pair){ UINT64_MAX - 1, UINT64_MAX - 1 },
			       (struct pair){ UINT64_MAX, UINT64_MAX });
	CHECK_EQ_U64(event_decoder_convert(d, 0), 0);
	CHECK_EQ_U64(event_decoder_convert(d, UINT64_MAX - 2), UINT64_MAX - 2);
	event_decoder_free(d);
	d = decoder_with_pairs((struct pair){ UINT64_MAX - 1, 0 },
			       (struct pair){ UINT64_MAX, UINT64_MAX });
	CHECK_EQ_U64(event_decoder_convert(d, 0), 0);
	event_decoder_free(d);
}

/* ---- drops ------------------------------------------------------------------------ */

static void test_drops_cumulative(void)
{
	const struct pair p0 = { BASE_TSC, BASE_MONO }, p1 = { BASE_TSC + 3000, BASE_MONO + 1000 };
	const struct pair p2 = { BASE_TSC + 6000, BASE_MONO + 2000 };
	struct event_decoder *d = event_decoder_new();
	struct event_record recs[2];
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	fill_records(recs, 2, BASE_TSC + 300, 300, 1);
	put_pair(&b, p0.tsc, p0.mono);
	put_records(&b, 9, 0, recs, 2); /* no drops yet: no call */
	put_records(&b, 9, 5, recs, 2);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 1);
	CHECK_EQ_INT(r.drops_tid, 9);
	CHECK_EQ_U64(r.last_drops, 5);
	CHECK_EQ_U64(r.last_drops_mono, expect_on_line(p0, p1, recs[1].tsc));
	/* the agent's drops-only chunk: no record, dated by the frame's closing pair */
	put_records(&b, 9, 12, NULL, 0);
	put_pair(&b, p2.tsc, p2.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 2);
	CHECK_EQ_U64(r.last_drops, 12);
	CHECK_EQ_U64(r.last_drops_mono, p2.mono);
	CHECK_EQ_INT(r.n_recs, 4);
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

/* The thread-exit chunk carries the thread's final drop total: it counts too. */
static void test_drops_on_thread_exit(void)
{
	const struct pair p0 = { BASE_TSC, BASE_MONO }, p1 = { BASE_TSC + 3000, BASE_MONO + 1000 };
	struct event_decoder *d = event_decoder_new();
	struct event_record recs[2];
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	fill_records(recs, 2, BASE_TSC + 300, 300, 1);
	put_pair(&b, p0.tsc, p0.mono);
	put_records(&b, 9, 4, recs, 2);
	put_chunk(&b, EVENT_CHUNK_THREAD_EXIT, 9, 0, 7, NULL, 0);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 2);
	CHECK_EQ_U64(r.last_drops, 7);
	CHECK_EQ_INT(r.n_exits, 1);
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

/* ---- hostile streams --------------------------------------------------------------- */

/* A valid start of frame (name, pairs, records), so a bad chunk after it must also hide these. */
static void put_valid_prefix(struct builder *b)
{
	struct event_record recs[10];

	fill_records(recs, 10, BASE_TSC + 10, 10, 1);
	put_pair(b, BASE_TSC, BASE_MONO);
	put_chunk(b, EVENT_CHUNK_THREAD_NAME, 5, 0, 0, "main\0\0\0\0\0\0\0\0\0\0\0\0", 16);
	put_records(b, 5, 3, recs, 10);
	put_chunk(b, EVENT_CHUNK_THREAD_EXIT, 6, 0, 0, NULL, 0);
	put_pair(b, BASE_TSC + 1000, BASE_MONO + 500);
}

/* Feeds the frame in b; expects -EBADMSG, a reason containing `why`, nothing delivered. */
static void expect_bad_frame(struct event_decoder *d, struct builder *b, const char *why)
{
	struct recorder r = { 0 };

	CHECK_EQ_INT(feed_frame(d, b, &r), -EBADMSG);
	if (!strstr(last_err, why))
		fprintf(stderr, "  reason \"%s\" lacks \"%s\"\n", last_err, why);
	CHECK(strstr(last_err, why) != NULL);
	CHECK_EQ_INT(delivered_total(&r), 0);
	free(r.recs);
}

static void test_hostile_records_before_two_pairs(void)
{
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	builder_init(&b, 0);
	put_record(&b, 5, BASE_TSC, 1, EVENT_ENTER);
	expect_bad_frame(d, &b, "before two clock pairs");
	event_decoder_free(d);
	builder_fini(&b);

	d = event_decoder_new();
	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_record(&b, 5, BASE_TSC + 1, 1, EVENT_ENTER);
	expect_bad_frame(d, &b, "before two clock pairs");
	event_decoder_free(d);
	builder_fini(&b);
}

/* Second frame's pair against the first frame's closing pair (BASE_TSC+1000, BASE_MONO+500). */
static void check_pair_rejected(uint64_t tsc, uint64_t mono)
{
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	put_record(&b, 5, BASE_TSC + 900, 1, EVENT_ENTER);
	put_pair(&b, tsc, mono);
	expect_bad_frame(d, &b, "backwards");
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

static void test_hostile_clock_pair_backwards(void)
{
	check_pair_rejected(BASE_TSC + 999, BASE_MONO + 600);  /* tsc goes back */
	check_pair_rejected(BASE_TSC + 1000, BASE_MONO + 600); /* tsc stands still */
	check_pair_rejected(BASE_TSC + 2000, BASE_MONO + 499); /* monotonic time goes back */
}

static void test_hostile_unknown_chunk_kind(void)
{
	static const uint32_t kinds[] = { 0, 5, 0x80000001u, UINT32_MAX };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct event_decoder *d = event_decoder_new();
		struct builder b;

		builder_init(&b, 0);
		put_valid_prefix(&b);
		put_chunk(&b, kinds[i], 5, 0, 0, NULL, 0);
		expect_bad_frame(d, &b, "unknown event chunk kind");
		builder_fini(&b);
		event_decoder_free(d);
	}
}

/* An enter without its frame, or a frame on its own, cannot be delivered. */
static void test_hostile_unpaired_enter_frame(void)
{
	struct event_record enter = { .tsc = BASE_TSC + 1, .func_id = 1, .kind = EVENT_ENTER };
	struct event_record exit_rec = { .tsc = BASE_TSC + 2, .func_id = 1, .kind = EVENT_EXIT };
	struct event_enter_frame frame = { 0x401000, 0x7ffc1000 | EVENT_FRAME_TAG };
	struct event_record units[3];
	const struct { size_t n; const void *u[3]; } cases[] = {
		{ 1, { &enter } },                    /* enter last in its chunk */
		{ 2, { &enter, &exit_rec } },         /* enter followed by a record */
		{ 1, { &frame } },                    /* frame alone */
		{ 2, { &exit_rec, &frame } },         /* frame after an exit */
		{ 3, { &enter, &frame, &frame } },    /* one frame too many */
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct event_decoder *d = event_decoder_new();
		struct builder b;

		for (size_t i = 0; i < cases[c].n; i++)
			memcpy(&units[i], cases[c].u[i], sizeof(units[i]));
		builder_init(&b, 0);
		put_valid_prefix(&b);
		put_chunk(&b, EVENT_CHUNK_RECORDS, 5, (uint32_t)cases[c].n, 0, units,
			  cases[c].n * sizeof(units[0]));
		expect_bad_frame(d, &b, "without its");
		builder_fini(&b);
		event_decoder_free(d);
	}
}

/* Each clock pair is a watermark, delivered after the records that precede it. */
static void test_watermark_follows_records(void)
{
	const struct pair p0 = { BASE_TSC, BASE_MONO }, p1 = { BASE_TSC + 3000, BASE_MONO + 1000 };
	struct event_decoder *d = event_decoder_new();
	struct event_record recs[4];
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	fill_records(recs, 4, BASE_TSC + 300, 300, 1);
	put_pair(&b, p0.tsc, p0.mono);
	put_records(&b, 9, 0, recs, 4);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_watermarks, 2);
	CHECK_EQ_U64(r.last_watermark, p1.mono);
	CHECK_EQ_INT(r.recs_at_watermark, 4);
	for (size_t i = 0; i < r.n_recs; i++)
		CHECK(r.recs[i].mono <= r.last_watermark);
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

static void test_hostile_truncated_chunk_header(void)
{
	static const uint8_t partial[23] = { EVENT_CHUNK_THREAD_EXIT };

	for (size_t n = 1; n < sizeof(partial); n += 7) {
		struct event_decoder *d = event_decoder_new();
		struct builder b;

		builder_init(&b, 0);
		put_valid_prefix(&b);
		builder_put(&b, partial, n);
		expect_bad_frame(d, &b, "truncated event chunk");
		builder_fini(&b);
		event_decoder_free(d);
	}
}

static void check_body_overrun(uint32_t kind, uint32_t count, size_t body_len)
{
	struct event_decoder *d = event_decoder_new();
	uint8_t body[16 * 10] = { 0 };
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_chunk(&b, kind, 5, count, 0, body, body_len);
	expect_bad_frame(d, &b, "truncated event chunk");
	builder_fini(&b);
	event_decoder_free(d);
}

static void test_hostile_chunk_body_overruns_frame(void)
{
	check_body_overrun(EVENT_CHUNK_RECORDS, 11, 10 * 16);
	check_body_overrun(EVENT_CHUNK_RECORDS, 100, 10 * 16);
	check_body_overrun(EVENT_CHUNK_RECORDS, UINT32_MAX, 16);
	check_body_overrun(EVENT_CHUNK_RECORDS, UINT32_MAX, 0);
	check_body_overrun(EVENT_CHUNK_RECORDS, 1, 15);
	check_body_overrun(EVENT_CHUNK_CLOCK_PAIR, 0, 15);
	check_body_overrun(EVENT_CHUNK_THREAD_NAME, 0, 15);
}

static void test_hostile_not_zstd(void)
{
	static const uint8_t garbage[] = "FRAME_EVENTS but plainly not zstd at all";
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	CHECK_EQ_INT(feed_bytes(d, garbage, sizeof(garbage), &r), -EBADMSG);
	CHECK(strstr(last_err, "corrupt event stream") != NULL);
	event_decoder_free(d);
	/* the same after a good frame: the stream does not resynchronise */
	d = event_decoder_new();
	builder_init(&b, 0);
	put_valid_prefix(&b);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(feed_bytes(d, garbage, sizeof(garbage), &r), -EBADMSG);
	CHECK(strstr(last_err, "corrupt event stream") != NULL);
	CHECK_EQ_INT(r.n_recs, 10);
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

/* ---- size bounds ------------------------------------------------------------------- */

static void test_hostile_zip_bomb(void)
{
	const size_t len = 20u << 20;
	uint8_t *zeros = calloc(1, len);
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	builder_put(&b, zeros, len);
	CHECK_EQ_INT(feed_frame(d, &b, &r), -EMSGSIZE);
	CHECK(b.out_len < 64 * 1024);
	CHECK(strstr(last_err, "decompresses past") != NULL);
	CHECK_EQ_INT(delivered_total(&r), 0);
	builder_fini(&b);
	event_decoder_free(d);
	free(zeros);
}

/* A well-formed frame of exactly `size` bytes: two pairs, one records chunk, maybe an exit. */
static size_t put_frame_of_size(struct builder *b, size_t size)
{
	const size_t hdr = sizeof(struct event_chunk_header);
	const size_t fixed = 2 * (hdr + sizeof(struct event_clock_pair)) + hdr;
	/* a 24-byte exit chunk takes up a remainder of 8 */
	size_t exits = (size - fixed) % 16 == 8;
	size_t count = (size - fixed - exits * hdr) / sizeof(struct event_record);
	struct event_record *recs = calloc(count, sizeof(*recs));

	CHECK_EQ_INT((size - fixed - exits * hdr) % sizeof(struct event_record), 0);
	put_pair(b, 0, 0);
	put_pair(b, 1000, 1000);
	for (size_t i = 0; i < count; i++)
		recs[i] = (struct event_record){ .tsc = 500, .func_id = 1, .kind = EVENT_EXIT };
	put_records(b, 1, 0, recs, (uint32_t)count);
	if (exits)
		put_chunk(b, EVENT_CHUNK_THREAD_EXIT, 1, 0, 0, NULL, 0);
	free(recs);
	return count;
}

static void count_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)tid, (void)ev;
	++*(size_t *)ctx;
}

static void ignore_tid(void *ctx, uint32_t tid)
{
	(void)ctx, (void)tid;
}

/* The bound is inclusive: EVENT_FRAME_DECOMPRESSED_MAX bytes decode, one record more does not. */
static void test_frame_at_size_bound(void)
{
	const struct event_decoder_callbacks cb = { .record = count_record,
						    .thread_exit = ignore_tid };
	static const size_t sizes[2] = { EVENT_FRAME_DECOMPRESSED_MAX,
					 EVENT_FRAME_DECOMPRESSED_MAX + 16 };

	for (int i = 0; i < 2; i++) {
		struct event_decoder *d = event_decoder_new();
		size_t n = 0, count, want_n;
		struct builder b;
		int ret, want_ret = i == 0 ? 0 : -EMSGSIZE;

		builder_init(&b, 0);
		count = put_frame_of_size(&b, sizes[i]);
		want_n = i == 0 ? count : 0;
		CHECK_EQ_INT(b.raw_len, sizes[i]);
		builder_flush(&b);
		ret = event_decoder_feed(d, b.out, b.out_len, &cb, &n, last_err, sizeof(last_err));
		CHECK_EQ_INT(ret, want_ret);
		CHECK_EQ_INT(n, want_n);
		builder_fini(&b);
		event_decoder_free(d);
	}
}

/* One valid frame of the shape of b's content, after a window-log-sized repeat. */
static void put_long_distance_frame(struct builder *b)
{
	const uint32_t n = (1u << 20) / sizeof(struct event_record);
	struct event_record *recs = malloc((size_t)n * 4 * sizeof(*recs));
	uint64_t seed = 42;

	for (uint32_t i = 0; i < n; i++)
		recs[i] = (struct event_record){ .tsc = BASE_TSC + test_rand(&seed) % 1000,
						 .func_id = (uint32_t)test_rand(&seed),
						 .kind = EVENT_ENTER };
	for (int copy = 1; copy < 4; copy++)
		memcpy(recs + (size_t)copy * n, recs, (size_t)n * sizeof(*recs));
	put_valid_prefix(b);
	put_records(b, 5, 0, recs, n * 4);
	free(recs);
}

static void test_hostile_window_too_large(void)
{
	static const int logs[2] = { 27, 24 };

	for (int i = 0; i < 2; i++) {
		struct event_decoder *d = event_decoder_new();
		struct recorder r = { 0 };
		struct builder b;
		int ret;

		builder_init(&b, logs[i]);
		ZSTD_CCtx_setParameter(b.cctx, ZSTD_c_enableLongDistanceMatching, 1);
		put_long_distance_frame(&b);
		ret = feed_frame(d, &b, &r);
		if (logs[i] > 24) { /* the decoder's limit */
			CHECK_EQ_INT(ret, -EBADMSG);
			CHECK(strstr(last_err, "memory") != NULL);
			CHECK_EQ_INT(delivered_total(&r), 0);
		} else {
			CHECK_EQ_INT(ret, 0);
			CHECK_EQ_INT(r.n_recs, 10 + (4u << 20) / 16);
		}
		builder_fini(&b);
		event_decoder_free(d);
		free(r.recs);
	}
}

static void test_empty_frames(void)
{
	static const uint8_t nothing[1];
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	CHECK_EQ_INT(feed_bytes(d, nothing, 0, &r), 0);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0); /* an empty stage: frame header only */
	CHECK_EQ_INT(delivered_total(&r), 0);
	put_valid_prefix(&b);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0); /* nothing pending in the compressor */
	CHECK_EQ_INT(feed_bytes(d, nothing, 0, &r), 0);
	put_record(&b, 5, BASE_TSC + 2000, 1, EVENT_EXIT);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_recs, 11);
	CHECK_EQ_U64(r.recs[10].mono, BASE_MONO + 1000);
	builder_fini(&b);
	event_decoder_free(d);
	free(r.recs);
}

/* ---- random fuzz ------------------------------------------------------------------- */

#define FUZZ_ITERATIONS 2000

static void fuzz_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)tid;
	CHECK(ev->return_slot < EVENT_FRAME_TAG);
	++*(size_t *)ctx;
}

static void fuzz_name(void *ctx, uint32_t tid, const char *name)
{
	(void)tid;
	++*(size_t *)ctx;
	CHECK(strlen(name) <= EVENT_THREAD_NAME_LEN);
}

static void fuzz_drops(void *ctx, uint32_t tid, uint64_t drops, uint64_t mono)
{
	(void)tid, (void)mono;
	++*(size_t *)ctx;
	CHECK(drops != 0);
}

static const struct event_decoder_callbacks fuzz_cb = {
	.record = fuzz_record,
	.thread_name = fuzz_name,
	.thread_exit = ignore_tid,
	.drops = fuzz_drops,
};

/* Feeds hostile bytes: 0, or a negative errno with a reason. */
static int fuzz_feed(struct event_decoder *d, const uint8_t *p, size_t len)
{
	size_t calls = 0;
	int ret;

	last_err[0] = '\0';
	ret = event_decoder_feed(d, p, len, &fuzz_cb, &calls, last_err, sizeof(last_err));
	CHECK(ret <= 0);
	if (ret < 0)
		CHECK(last_err[0] != '\0');
	return ret;
}

static void fill_random(uint8_t *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)test_rand(seed);
}

/* Random chunks, some well-formed, compressed properly so the chunk parser sees them. */
static void put_random_chunks(struct builder *b, uint64_t *seed)
{
	uint8_t body[64];
	int n = 1 + (int)(test_rand(seed) % 6);

	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(test_rand(seed) % 6);
		uint32_t count = test_rand(seed) % 8 == 0 ? (uint32_t)test_rand(seed)
							  : (uint32_t)(test_rand(seed) % 4);

		fill_random(body, sizeof(body), seed);
		put_chunk(b, kind, (uint32_t)test_rand(seed) % 4, count,
			  test_rand(seed) % 2 ? 0 : test_rand(seed), body, test_rand(seed) % 65);
	}
}

static void test_fuzz_random_bytes(void)
{
	static const uint8_t magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	uint64_t seed = 0xdecaf;
	uint8_t buf[600];

	for (int it = 0; it < FUZZ_ITERATIONS; it++) {
		struct event_decoder *d = event_decoder_new();
		size_t len = test_rand(&seed) % sizeof(buf);
		struct builder b;

		fill_random(buf, len, &seed);
		if (it % 3 == 1 && len >= 4)
			memcpy(buf, magic, 4);
		if (it % 3 == 2) {
			builder_init(&b, 0);
			put_random_chunks(&b, &seed);
			builder_flush(&b);
			fuzz_feed(d, b.out, b.out_len);
			builder_fini(&b);
		} else {
			fuzz_feed(d, buf, len);
		}
		event_decoder_free(d);
	}
}

/* Flips 1-4 random bits of frame f of a valid three-frame stream, feeds it all. */
static void fuzz_flip_one(uint8_t *frames[3], const size_t lens[3], uint64_t *seed)
{
	struct event_decoder *d = event_decoder_new();
	int victim = (int)(test_rand(seed) % 3), flips = 1 + (int)(test_rand(seed) % 4);

	for (int f = 0; f < 3; f++) {
		uint8_t *copy = malloc(lens[f]);
		int ret;

		memcpy(copy, frames[f], lens[f]);
		for (int i = 0; f == victim && i < flips; i++) {
			size_t bit = test_rand(seed) % (lens[f] * 8);

			copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		ret = fuzz_feed(d, copy, lens[f]);
		free(copy);
		if (ret < 0)
			break;
	}
	event_decoder_free(d);
}

static void test_fuzz_bit_flips(void)
{
	struct event_record recs[40];
	uint8_t *frames[3];
	size_t lens[3];
	uint64_t seed = 0xb17f11b5;
	struct builder b;

	builder_init(&b, 0);
	fill_records(recs, 40, BASE_TSC + 1100, 25, 1);
	for (int f = 0; f < 3; f++) {
		if (f == 0)
			put_valid_prefix(&b);
		put_records(&b, 5, (uint64_t)f, recs, 40);
		put_pair(&b, BASE_TSC + 3000 * (f + 1), BASE_MONO + 1000 * (f + 1));
		builder_flush(&b);
		frames[f] = malloc(b.out_len);
		memcpy(frames[f], b.out, b.out_len);
		lens[f] = b.out_len;
	}
	for (int it = 0; it < FUZZ_ITERATIONS; it++)
		fuzz_flip_one(frames, lens, &seed);
	for (int f = 0; f < 3; f++)
		free(frames[f]);
	builder_fini(&b);
}

int main(void)
{
	RUN_TEST(test_round_trip);
	RUN_TEST(test_frames_share_stream_and_segments);
	RUN_TEST(test_monotonic_across_segments);
	RUN_TEST(test_monotonic_extreme_pairs);
	RUN_TEST(test_drops_cumulative);
	RUN_TEST(test_drops_on_thread_exit);
	RUN_TEST(test_hostile_records_before_two_pairs);
	RUN_TEST(test_hostile_clock_pair_backwards);
	RUN_TEST(test_hostile_unknown_chunk_kind);
	RUN_TEST(test_hostile_unpaired_enter_frame);
	RUN_TEST(test_watermark_follows_records);
	RUN_TEST(test_hostile_truncated_chunk_header);
	RUN_TEST(test_hostile_chunk_body_overruns_frame);
	RUN_TEST(test_hostile_not_zstd);
	RUN_TEST(test_hostile_zip_bomb);
	RUN_TEST(test_frame_at_size_bound);
	RUN_TEST(test_hostile_window_too_large);
	RUN_TEST(test_empty_frames);
	RUN_TEST(test_fuzz_random_bytes);
	RUN_TEST(test_fuzz_bit_flips);
	return unit_summary();
}
