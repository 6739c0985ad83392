// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/events/event_decoder.c. Streams are built the way
 * agent/flusher.c builds them (one ZSTD_CCtx at level 1, ZSTD_e_flush per
 * frame, events through the shared event_encode()); aggregates bodies are
 * written here from the layout proto/func_aggregates.h documents; expected
 * times are computed here, independently, with __int128. A hostile frame
 * must fail with a reason: one whose chunks do not frame delivers nothing; a
 * body that does not decode stops delivery there (what came before it in the
 * frame may have been delivered, as event_decoder.h allows).
 */
#include "tests/unit/event_stream_fixture.h"

/* ---- --args/--retval values (EVENT_VALUES) -------------------------------------------- */

/* An item's descriptor for the hand-made bodies below. */
static uint64_t desc_of(uint8_t source, uint8_t index, uint8_t cls, uint8_t size)
{
	struct arg_item it = { .source = source, .index = index, .cls = cls, .size = size };

	return arg_item_desc(&it);
}

/* An ENTER of function 3 with an int, a string and a double, its EXIT with a return value. */
static size_t values_body(uint8_t *body)
{
	struct event_encoder enc = { 0 };
	uint8_t *p = body;
	double d = 2.5;

	p = event_encode(&enc, p, 1000, 3, EVENT_ENTER, 0x50, 0x100);
	p = event_encode_values_tag(&enc, p, 3);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 2, ARG_CLASS_INT, 4));
	p = event_put_varint(p, event_zigzag(-70000));
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, ARG_CLASS_STR, 8));
	p = event_put_varint(p, 5 << 2 | EVENT_STR_CUT);
	memcpy(p, "hello", 5);
	p += 5;
	p = event_put_varint(p, desc_of(ARG_SRC_FP, 1, ARG_CLASS_FLOAT, 8));
	memcpy(p, &d, 8);
	p += 8;
	p = event_encode(&enc, p, 1010, 3, EVENT_EXIT, 0, 0);
	p = event_encode_values_tag(&enc, p, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_RET, 0, ARG_CLASS_STR, 8));
	p = event_put_varint(p, EVENT_STR_INVALID);
	p = event_put_varint(p, 1);
	return (size_t)(p - body);
}

/* Feeds one EVENTS chunk of `count` items and body bytes (after two clock pairs). */
static int feed_events(struct event_decoder *d, struct recorder *r, uint32_t count,
		       const uint8_t *body, size_t len)
{
	struct builder b;
	int ret;

	builder_init(&b, 0);
	put_pair(&b, 0, 0);
	put_pair(&b, 4000, 2000);
	put_chunk(&b, EVENT_CHUNK_EVENTS, 3, count, 0, body, len);
	ret = feed_frame(d, &b, r);
	builder_fini(&b);
	return ret;
}

static void test_values_decode(void)
{
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	uint8_t body[256];
	size_t len = values_body(body);

	CHECK_EQ_INT(feed_events(d, &r, 4, body, len), 0);
	CHECK_EQ_INT(r.n_recs, 2);
	if (r.n_recs == 2) {
		CHECK_EQ_INT(r.recs[0].n_values, 3);
		CHECK_EQ_U64(r.recs[0].return_slot, 0x100);
		CHECK_EQ_STR(r.recs[0].values, "arg2:1:-70000;arg1:s1:hello;fparg1:5:4612811918334230528;");
		CHECK_EQ_INT(r.recs[1].kind, EVENT_EXIT);
		CHECK_EQ_STR(r.recs[1].values, "retval:s2:;");
	}
	event_decoder_free(d);
	recorder_free(&r);
}

/* Values on the batch's last event: delivered with it, not lost at the batch's end. */
static void test_values_at_batch_end(void)
{
	struct event_decoder *d = event_decoder_new();
	struct event_encoder enc = { 0 };
	static uint8_t body[EVENT_DECODER_BATCH_MAX * 2 * EVENT_WORST];
	struct recorder r = { 0 };
	uint8_t *p = body;

	for (uint32_t i = 0; i < EVENT_DECODER_BATCH_MAX; i++)
		p = event_encode(&enc, p, 1000 + i, 1, i % 2 ? EVENT_EXIT : EVENT_ENTER, 0, 0);
	p = event_encode_values_tag(&enc, p, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_RET, 0, ARG_CLASS_UINT, 1));
	p = event_put_varint(p, 200);
	p = event_encode(&enc, p, 2000, 1, EVENT_ENTER, 0, 0);
	CHECK_EQ_INT(feed_events(d, &r, enc.count, body, (size_t)(p - body)), 0);
	CHECK_EQ_INT(r.n_recs, EVENT_DECODER_BATCH_MAX + 1);
	if (r.n_recs == EVENT_DECODER_BATCH_MAX + 1) {
		CHECK_EQ_STR(r.recs[EVENT_DECODER_BATCH_MAX - 1].values, "retval:2:200;");
		CHECK_EQ_INT(r.recs[EVENT_DECODER_BATCH_MAX].n_values, 0);
	}
	event_decoder_free(d);
	recorder_free(&r);
}

/* One hostile VALUES body: refused as a whole chunk. */
static void check_values_refused(const char *what, const uint8_t *body, size_t len, uint32_t count)
{
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };

	int ret = feed_events(d, &r, count, body, len);

	if (ret != -EBADMSG)
		fprintf(stderr, "not refused: %s\n", what);
	CHECK_EQ_INT(ret, -EBADMSG);
	event_decoder_free(d);
	recorder_free(&r);
}

static void test_values_hostile(void)
{
	uint8_t good[256], b[256];
	size_t len = values_body(good), at = 0;
	struct event_encoder enc = { 0 };
	uint8_t *p;

	/* values first in the chunk: no event to belong to */
	p = event_encode_values_tag(&enc, b, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, ARG_CLASS_UINT, 8));
	p = event_put_varint(p, 1);
	check_values_refused("values first", b, (size_t)(p - b), 1);
	/* the ENTER's prefix, then variations of its VALUES item */
	while (good[at] != (3u << 2 | EVENT_VALUES))
		at++;
	memcpy(b, good, at);
	b[at] = 0 << 2 | EVENT_VALUES; /* no value */
	check_values_refused("zero values", b, at + 1, 2);
	b[at] = 10 << 2 | EVENT_VALUES; /* more than EVENT_VALUES_MAX */
	check_values_refused("ten values", b, at + 1, 2);
	p = event_encode_values_tag(&enc, b + at, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, 0, 8)); /* no class */
	p = event_put_varint(p, 1);
	check_values_refused("no class", b, (size_t)(p - b), 2);
	p = event_encode_values_tag(&enc, b + at, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, ARG_CLASS_UINT, 1));
	p = event_put_varint(p, 300); /* wider than a u8 */
	check_values_refused("wider than its size", b, (size_t)(p - b), 2);
	p = event_encode_values_tag(&enc, b + at, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, ARG_CLASS_STR, 8));
	p = event_put_varint(p, 40 << 2); /* 40 bytes, 2 there */
	*p++ = 'a';
	*p++ = 'b';
	check_values_refused("string past the end", b, (size_t)(p - b), 2);
	p = event_encode_values_tag(&enc, b + at, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_INT, 1, ARG_CLASS_STR, 8));
	p = event_put_varint(p, 3 << 2 | EVENT_STR_INVALID); /* invalid with bytes */
	check_values_refused("invalid with bytes", b, (size_t)(p - b), 2);
	p = event_encode_values_tag(&enc, b + at, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_FP, 1, ARG_CLASS_FLOAT, 8));
	*p++ = 1; /* 1 byte of 8 */
	check_values_refused("double cut short", b, (size_t)(p - b), 2);
	memcpy(b, good, len); /* a second VALUES item for the same EXIT */
	p = event_encode_values_tag(&enc, b + len, 1);
	p = event_put_varint(p, desc_of(ARG_SRC_RET, 0, ARG_CLASS_UINT, 8));
	p = event_put_varint(p, 1);
	check_values_refused("values twice", b, (size_t)(p - b), 5);
}

/* ---- round trip ------------------------------------------------------------------ */

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
	put_events(&bld, 101, 0, a, 600);
	put_events(&bld, 202, 0, b, 400);
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
	recorder_free(&r);
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
		put_event(b, 7, seg_records[i].tsc, (uint32_t)i + 1, EVENT_ENTER);
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
	recorder_free(&r);
}

/* ---- one chunk across clock segments, delivered in batches ----------------------- */

/*
 * Pairs whose segments take every conversion path: a gentle one, a steep one
 * (dm >= 2^32, more than a ns a tick), a long one with dm >= 2^32 too but
 * less than a ns a tick (dt > 2^32: events deep in it are 2^32 ticks past its
 * start, and x * dm passes 2^64 from x = 2^31), and a gentle last one that
 * events overrun by up to 2^40 ticks (x * the Q32 rate passes 2^64).
 */
#define PATH_PAIRS 5
#define PATH_MONO3 (BASE_MONO + 1000000 + (5ull << 32) + (1ull << 33) + 12345)
static const struct pair path_pairs[PATH_PAIRS] = {
	{ BASE_TSC, BASE_MONO },
	{ BASE_TSC + 3000000, BASE_MONO + 1000000 },
	{ BASE_TSC + 5000000, BASE_MONO + 1000000 + (5ull << 32) },
	{ BASE_TSC + (6ull << 32), PATH_MONO3 },
	{ BASE_TSC + (6ull << 32) + 3000000, PATH_MONO3 + 1000000 },
};

/* The segment event_decoder_convert() puts tsc in: the edge ones extend. */
static int path_segment(uint64_t tsc)
{
	int s = 0;

	while (s < PATH_PAIRS - 2 && tsc >= path_pairs[s + 1].tsc)
		s++;
	return s;
}

/* Non-decreasing tscs through every segment, its bounds and past both ends; returns n. */
static uint32_t fill_path_events(struct event_record *recs, uint32_t max)
{
	const uint64_t p0 = path_pairs[0].tsc, p1 = path_pairs[1].tsc, p2 = path_pairs[2].tsc;
	const uint64_t p3 = path_pairs[3].tsc, p4 = path_pairs[4].tsc;
	const uint64_t marks[] = { p0 - 5000, p0 - 1, p0, p1 - 1, p1, p1 + 7, p2 - 1, p2, p2 + 1,
				   p2 + (1ull << 31) + 77, p2 + (1ull << 32) + 5, p3 - 1, p3,
				   p3 + 10, p4 - 1, p4, p4 + (1ull << 31) + 9,
				   p4 + (1ull << 32) + 3, p4 + (1ull << 40) };
	uint32_t n = 0;

	/*
	 * One exit in three: an exit lands where an enter was in the batch
	 * before, so that nothing of an enter's frame stays with it.
	 */
	for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]) && n < max; m++) {
		recs[n++] = (struct event_record){ .tsc = marks[m], .func_id = 1 + n % 50,
						   .kind = n % 3 ? EVENT_ENTER : EVENT_EXIT };
		/* a run in the gentle segment, past a batch: the batches end mid-segment */
		for (uint32_t i = 0; m == 2 && i < 1500 && n < max; i++)
			recs[n++] = (struct event_record){ .tsc = p0 + 1 + 1999 * i,
							   .func_id = 1 + n % 50,
							   .kind = n % 3 ? EVENT_ENTER : EVENT_EXIT };
	}
	return n;
}

/* Every event of one chunk through the decoder's conversion fast path = the reference. */
static void test_events_across_segments_in_one_chunk(void)
{
	struct event_record recs[1600];
	uint32_t n = fill_path_events(recs, 1600);
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	for (int i = 0; i < PATH_PAIRS; i++)
		put_pair(&b, path_pairs[i].tsc, path_pairs[i].mono);
	put_events(&b, 5, 0, recs, n);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_recs, n);
	for (uint32_t i = 0; i < n && i < r.n_recs; i++) {
		int seg = path_segment(recs[i].tsc), before = unit_check_failures;

		CHECK_EQ_U64(r.recs[i].mono, event_decoder_convert(d, recs[i].tsc));
		CHECK_EQ_U64(r.recs[i].mono,
			     expect_on_line(path_pairs[seg], path_pairs[seg + 1], recs[i].tsc));
		if (recs[i].kind == EVENT_ENTER) {
			CHECK_EQ_U64(r.recs[i].return_address, test_return_address(recs[i].func_id));
			CHECK_EQ_U64(r.recs[i].return_slot, test_return_slot(recs[i].func_id));
		} else {
			CHECK_EQ_U64(r.recs[i].return_address | r.recs[i].return_slot, 0);
		}
		if (unit_check_failures != before) {
			fprintf(stderr, "  event %u, tsc base + %" PRId64 "\n", i,
				(int64_t)(recs[i].tsc - BASE_TSC));
			break;
		}
	}
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

struct batches {
	struct delivered_record *recs;
	size_t n, calls, empty;
};

static void on_events(void *ctx, uint32_t tid, const struct decoded_event *ev, size_t n)
{
	struct batches *bt = ctx;

	bt->calls++;
	bt->empty += n == 0;
	bt->recs = realloc(bt->recs, (bt->n + n) * sizeof(*bt->recs));
	for (size_t i = 0; i < n; i++)
		bt->recs[bt->n++] = (struct delivered_record){ tid, ev[i].func_id, ev[i].kind,
								ev[i].mono_ns, ev[i].return_address,
								ev[i].return_slot };
}

static size_t record_calls_beside_events;

static void count_record_beside_events(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)ctx, (void)tid, (void)ev;
	record_calls_beside_events++;
}

static int same_record(const struct delivered_record *x, const struct delivered_record *y)
{
	return x->tid == y->tid && x->func == y->func && x->kind == y->kind && x->mono == y->mono &&
	       x->return_address == y->return_address && x->return_slot == y->return_slot;
}

/*
 * With an `events` callback, the same events in the same order, a thread's
 * at a time, in batches (no empty one); `record` is then never called.
 */
static void test_events_in_batches(void)
{
	const struct event_decoder_callbacks cb = { .events = on_events,
						    .record = count_record_beside_events };
	struct event_record a[3000], c[3];
	struct event_decoder *d1 = event_decoder_new(), *d2 = event_decoder_new();
	struct batches bt = { 0 };
	struct recorder r = { 0 };
	struct builder b;

	fill_records(a, 3000, BASE_TSC + 10, 3, 1);
	fill_records(c, 3, BASE_TSC + 20, 5, 7);
	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_events(&b, 11, 0, a, 3000);
	put_events(&b, 12, 0, c, 3);
	put_pair(&b, BASE_TSC + 10000, BASE_MONO + 7777);
	builder_flush(&b);
	CHECK_EQ_INT(event_decoder_feed(d1, b.out, b.out_len, &record_cb, &r, last_err,
					sizeof(last_err)), 0);
	CHECK_EQ_INT(event_decoder_feed(d2, b.out, b.out_len, &cb, &bt, last_err,
					sizeof(last_err)), 0);
	CHECK_EQ_INT(r.n_recs, 3003);
	CHECK_EQ_INT(bt.n, 3003);
	CHECK_EQ_INT(record_calls_beside_events, 0);
	CHECK(bt.calls >= 2);
	CHECK_EQ_INT(bt.empty, 0);
	for (size_t i = 0; i < bt.n && i < r.n_recs; i++)
		if (!same_record(&bt.recs[i], &r.recs[i])) {
			fprintf(stderr, "  event %zu differs\n", i);
			unit_check_failures++;
			break;
		}
	builder_fini(&b);
	event_decoder_free(d1);
	event_decoder_free(d2);
	recorder_free(&r);
	free(bt.recs);
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
		uint64_t dm = unit_rand(seed) % 4 == 0 ? 0 : unit_rand(seed) % 3000000;

		p[i].tsc = p[i - 1].tsc + 1 + unit_rand(seed) % 1000000;
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
	put_events(&b, 9, 0, recs, 2); /* no drops yet: no call */
	put_events(&b, 9, 5, recs, 2);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 1);
	CHECK_EQ_INT(r.drops_tid, 9);
	CHECK_EQ_U64(r.last_drops, 5);
	CHECK_EQ_U64(r.last_drops_mono, expect_on_line(p0, p1, recs[1].tsc));
	/* the agent's drops-only chunk: no record, dated by the frame's closing pair */
	put_events(&b, 9, 12, NULL, 0);
	put_pair(&b, p2.tsc, p2.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 2);
	CHECK_EQ_U64(r.last_drops, 12);
	CHECK_EQ_U64(r.last_drops_mono, p2.mono);
	CHECK_EQ_INT(r.n_recs, 4);
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
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
	put_events(&b, 9, 4, recs, 2);
	put_chunk(&b, EVENT_CHUNK_THREAD_EXIT, 9, 0, 7, NULL, 0);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_drops, 2);
	CHECK_EQ_U64(r.last_drops, 7);
	CHECK_EQ_INT(r.n_exits, 1);
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

/* ---- hostile streams --------------------------------------------------------------- */

static void test_hostile_records_before_two_pairs(void)
{
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	builder_init(&b, 0);
	put_event(&b, 5, BASE_TSC, 1, EVENT_ENTER);
	expect_refused_frame(d, &b, "before two clock pairs");
	event_decoder_free(d);
	builder_fini(&b);

	d = event_decoder_new();
	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_event(&b, 5, BASE_TSC + 1, 1, EVENT_ENTER);
	expect_refused_frame(d, &b, "before two clock pairs");
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
	put_event(&b, 5, BASE_TSC + 900, 1, EVENT_ENTER);
	put_pair(&b, tsc, mono);
	expect_refused_frame(d, &b, "backwards");
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

static void test_hostile_clock_pair_backwards(void)
{
	check_pair_rejected(BASE_TSC + 999, BASE_MONO + 600);  /* tsc goes back */
	check_pair_rejected(BASE_TSC + 1000, BASE_MONO + 600); /* tsc stands still */
	check_pair_rejected(BASE_TSC + 2000, BASE_MONO + 499); /* monotonic time goes back */
}

static void test_hostile_unknown_chunk_kind(void)
{
	static const uint32_t kinds[] = { 0, 8, 0x80000001u, UINT32_MAX };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct event_decoder *d = event_decoder_new();
		struct builder b;

		builder_init(&b, 0);
		put_valid_prefix(&b);
		put_chunk(&b, kinds[i], 5, 0, 0, NULL, 0);
		expect_refused_frame(d, &b, "unknown event chunk kind");
		builder_fini(&b);
		event_decoder_free(d);
	}
}

/* The retired RECORDS chunk (raw ring units: an enter, its frame, an exit) is refused whole. */
static void test_hostile_records_chunk_retired(void)
{
	struct event_record units[3] = {
		{ .tsc = BASE_TSC + 100, .func_id = 1, .kind = EVENT_ENTER },
		{ 0 },
		{ .tsc = BASE_TSC + 200, .func_id = 1, .kind = EVENT_EXIT },
	};
	struct event_enter_frame frame = { 0x401000, 0x7ffc1000 | EVENT_FRAME_TAG };
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	memcpy(&units[1], &frame, sizeof(frame));
	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_chunk(&b, EVENT_CHUNK_RECORDS, 5, 3, 0, units, sizeof(units));
	expect_refused_frame(d, &b, "unknown event chunk kind");
	builder_fini(&b);
	event_decoder_free(d);
}

/* Every proper prefix of a valid body ends inside a varint, or before `count` events. */
static void test_hostile_events_truncated_varint(void)
{
	static const struct event_record recs[2] = {
		{ .tsc = BASE_TSC + 100, .func_id = 300, .kind = EVENT_ENTER },
		{ .tsc = BASE_TSC + 100000, .func_id = 300, .kind = EVENT_EXIT },
	};
	uint8_t body[2 * EVENT_WORST], too_long[EVENT_VARINT_MAX + 3];
	size_t len = encode_events(recs, 2, body);

	for (size_t cut = 0; cut < len; cut++)
		check_bad_body(EVENT_CHUNK_EVENTS, 2, body, cut, "truncated events body");
	/* an 11-byte varint for the base: longer than any 64-bit value */
	memset(too_long, 0x80, EVENT_VARINT_MAX + 1);
	too_long[EVENT_VARINT_MAX + 1] = 0x01;
	too_long[EVENT_VARINT_MAX + 2] = EVENT_EXIT;
	check_bad_body(EVENT_CHUNK_EVENTS, 1, too_long, sizeof(too_long), "11-byte varint");
}

/* A tag whose kind is neither ENTER nor EXIT (0 or 3: two bits hold four), after a valid enter. */
static void test_hostile_events_bad_kind(void)
{
	static const uint32_t kinds[] = { 0, 3 };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct event_encoder enc = { 0 };
		uint8_t body[2 * EVENT_WORST], *p = body;

		p = event_encode(&enc, p, BASE_TSC + 100, 1, EVENT_ENTER, 0x401000, 0x7ffc1000);
		p = event_encode(&enc, p, BASE_TSC + 200, 1, kinds[i], 0, 0);
		check_bad_body(EVENT_CHUNK_EVENTS, 2, body, (size_t)(p - body), "bad kind");
	}
}

/* A fresh decoder fed a valid prefix, then one chunk of the varints v, which must decode. */
static struct event_decoder *feed_good_varints(uint32_t kind, uint32_t count, const uint64_t *v,
					       size_t n, struct recorder *r)
{
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_varint_chunk(&b, kind, count, v, n);
	CHECK_EQ_INT(feed_frame(d, &b, r), 0);
	builder_fini(&b);
	return d;
}

/* Function ids are 32-bit: UINT32_MAX decodes, one more does not. */
static void test_hostile_events_func_id_too_big(void)
{
	const uint64_t ok[] = { BASE_TSC + 100, EVENT_EXIT, UINT32_MAX };
	const uint64_t bad[] = { BASE_TSC + 100, EVENT_EXIT, (uint64_t)UINT32_MAX + 1 };
	struct recorder r = { 0 };

	event_decoder_free(feed_good_varints(EVENT_CHUNK_EVENTS, 1, ok, 3, &r));
	CHECK_EQ_INT(r.n_recs, 11);
	if (r.n_recs == 11)
		CHECK_EQ_U64(r.recs[10].func, UINT32_MAX);
	recorder_free(&r);
	check_bad_varints(EVENT_CHUNK_EVENTS, 1, bad, 3, "func id past 32 bits");
}

/* A tsc delta that carries the timestamp past 2^64 - 1; one that lands on it decodes. */
static void test_hostile_events_tsc_overflow(void)
{
	const uint64_t tag_exit = EVENT_EXIT, base = UINT64_MAX - 5;
	const uint64_t ok[] = { base, tag_exit, 1, (5 << EVENT_TAG_KIND_BITS) | tag_exit, 1 };
	const uint64_t bad[] = { base, tag_exit, 1, (6 << EVENT_TAG_KIND_BITS) | tag_exit, 1 };
	const uint64_t huge[] = { base, (UINT64_MAX << EVENT_TAG_KIND_BITS) | tag_exit, 1 };
	struct recorder r = { 0 };
	struct event_decoder *d = feed_good_varints(EVENT_CHUNK_EVENTS, 2, ok, 5, &r);

	CHECK_EQ_INT(r.n_recs, 12);
	if (r.n_recs == 12)
		CHECK_EQ_U64(r.recs[11].mono, event_decoder_convert(d, UINT64_MAX));
	event_decoder_free(d);
	recorder_free(&r);
	check_bad_varints(EVENT_CHUNK_EVENTS, 2, bad, 5, "tsc past 2^64 - 1");
	check_bad_varints(EVENT_CHUNK_EVENTS, 1, huge, 3, "the largest delta");
}

/* `count` larger than the events the body holds. */
static void test_hostile_events_count_past_body(void)
{
	struct event_record recs[3];
	uint8_t body[3 * EVENT_WORST];
	size_t len;

	fill_records(recs, 3, BASE_TSC + 100, 10, 1);
	len = encode_events(recs, 3, body);
	check_bad_body(EVENT_CHUNK_EVENTS, 4, body, len, "count 4 of 3 events");
	check_bad_body(EVENT_CHUNK_EVENTS, UINT32_MAX, body, len, "count UINT32_MAX of 3 events");
}

/* Bytes left in the body after `count` events. */
static void test_hostile_events_trailing_bytes(void)
{
	struct event_record recs[3];
	uint8_t body[3 * EVENT_WORST + 1];
	size_t len;

	fill_records(recs, 3, BASE_TSC + 100, 10, 1);
	len = encode_events(recs, 3, body);
	check_bad_body(EVENT_CHUNK_EVENTS, 2, body, len, "count 2 of 3 events");
	check_bad_body(EVENT_CHUNK_EVENTS, 0, body, len, "count 0 of 3 events");
	body[len] = 0;
	check_bad_body(EVENT_CHUNK_EVENTS, 3, body, len + 1, "a byte after the events");
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
	put_events(&b, 9, 0, recs, 4);
	put_pair(&b, p1.tsc, p1.mono);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_watermarks, 2);
	CHECK_EQ_U64(r.last_watermark, p1.mono);
	CHECK_EQ_INT(r.recs_at_watermark, 4);
	for (size_t i = 0; i < r.n_recs; i++)
		CHECK(r.recs[i].mono <= r.last_watermark);
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
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
		expect_refused_frame(d, &b, "truncated event chunk");
		builder_fini(&b);
		event_decoder_free(d);
	}
}

/* A chunk whose body (`len`, or the kind's fixed size) runs past the end of the frame. */
static void check_body_overrun(uint32_t kind, uint32_t len, size_t body_len)
{
	struct event_decoder *d = event_decoder_new();
	uint8_t body[64] = { 0 };
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_chunk_len(&b, kind, 5, 1, len, 0, body, body_len);
	expect_refused_frame(d, &b, "truncated event chunk");
	builder_fini(&b);
	event_decoder_free(d);
}

static void test_hostile_chunk_body_overruns_frame(void)
{
	check_body_overrun(EVENT_CHUNK_EVENTS, 11, 10);
	check_body_overrun(EVENT_CHUNK_EVENTS, 64, 0);
	check_body_overrun(EVENT_CHUNK_EVENTS, UINT32_MAX, 64);
	check_body_overrun(EVENT_CHUNK_AGGREGATES, 11, 10);
	check_body_overrun(EVENT_CHUNK_AGGREGATES, UINT32_MAX, 0);
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
	recorder_free(&r);
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

/*
 * A well-formed frame of exactly `size` bytes: two pairs, one EVENTS chunk of
 * exits at the same tsc (the base then 2 bytes an event, one of 3 bytes for an
 * odd length). Returns the events.
 */
static size_t put_frame_of_size(struct builder *b, size_t size)
{
	const size_t hdr = sizeof(struct event_chunk_header);
	const size_t body_len = size - 2 * (hdr + sizeof(struct event_clock_pair)) - hdr;
	uint8_t *body = malloc(body_len + EVENT_WORST), *p = body;
	struct event_encoder enc = { 0 };
	size_t count = 1;

	put_pair(b, 0, 0);
	put_pair(b, 1000, 1000);
	p = event_encode(&enc, p, 500, 1, EVENT_EXIT, 0, 0); /* base 500: 2 bytes, then 2 */
	if ((body_len - (size_t)(p - body)) % 2) {
		p = event_encode(&enc, p, 500, 200, EVENT_EXIT, 0, 0); /* func 200: 2 bytes */
		count++;
	}
	while ((size_t)(p - body) < body_len) {
		p = event_encode(&enc, p, 500, 1, EVENT_EXIT, 0, 0);
		count++;
	}
	CHECK_EQ_INT(p - body, body_len);
	put_chunk(b, EVENT_CHUNK_EVENTS, 1, (uint32_t)count, 0, body, body_len);
	free(body);
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

/* The bound is inclusive: EVENT_FRAME_DECOMPRESSED_MAX bytes decode, one byte more does not. */
static void test_frame_at_size_bound(void)
{
	const struct event_decoder_callbacks cb = { .record = count_record,
						    .thread_exit = ignore_tid };
	static const size_t sizes[2] = { EVENT_FRAME_DECOMPRESSED_MAX,
					 EVENT_FRAME_DECOMPRESSED_MAX + 1 };

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

#define LONG_DISTANCE_EVENTS (1u << 16)

/*
 * One valid frame whose events repeat a block of LONG_DISTANCE_EVENTS four
 * times (the same tsc deltas, functions and frames), so that zstd matches
 * across the window; time still only goes forward.
 */
static void put_long_distance_frame(struct builder *b)
{
	const uint32_t n = LONG_DISTANCE_EVENTS;
	struct event_record *recs = malloc((size_t)n * 4 * sizeof(*recs));
	uint64_t seed = 42, tsc = BASE_TSC + 1000;

	for (uint32_t i = 0; i < n; i++) /* tsc: the delta for now */
		recs[i] = (struct event_record){ .tsc = unit_rand(&seed) % 1000,
						 .func_id = (uint32_t)unit_rand(&seed),
						 .kind = EVENT_ENTER };
	for (int copy = 1; copy < 4; copy++)
		memcpy(recs + (size_t)copy * n, recs, (size_t)n * sizeof(*recs));
	for (uint32_t i = 0; i < 4 * n; i++) {
		tsc += recs[i].tsc;
		recs[i].tsc = tsc;
	}
	put_valid_prefix(b);
	put_events(b, 5, 0, recs, n * 4);
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
			CHECK_EQ_INT(r.n_recs, 10 + 4 * LONG_DISTANCE_EVENTS);
		}
		builder_fini(&b);
		event_decoder_free(d);
		recorder_free(&r);
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
	put_event(&b, 5, BASE_TSC + 2000, 1, EVENT_EXIT);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_recs, 11);
	if (r.n_recs == 11)
		CHECK_EQ_U64(r.recs[10].mono, BASE_MONO + 1000);
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

/* ---- random fuzz ------------------------------------------------------------------- */

#define FUZZ_ITERATIONS 2000

static void fuzz_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)tid;
	CHECK(ev->kind == EVENT_ENTER || ev->kind == EVENT_EXIT);
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

static void fuzz_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	(void)tid, (void)td;
	++*(size_t *)ctx;
}

static void fuzz_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	(void)tid;
	++*(size_t *)ctx;
	CHECK(fa->func_id != 0);
	CHECK(fa->exited <= fa->entered && fa->unrecorded <= fa->entered);
}

static const struct event_decoder_callbacks fuzz_cb = {
	.record = fuzz_record,
	.thread_name = fuzz_name,
	.thread_exit = ignore_tid,
	.drops = fuzz_drops,
	.thread_drops = fuzz_thread_drops,
	.func_agg = fuzz_func_agg,
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
	/* only a body that does not decode comes after deliveries */
	if (ret < 0 && !strstr(last_err, "does not decode"))
		CHECK_EQ_INT(calls, 0);
	return ret;
}

static void fill_random(uint8_t *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)unit_rand(seed);
}

/*
 * Random chunks of every kind and one past them, compressed properly so the
 * chunk parser sees them; bodies are random bytes, or valid events and
 * aggregates with a byte changed.
 */
static void put_random_chunks(struct builder *b, uint64_t *seed)
{
	uint8_t body[AGG_BODY_MAX(1)];
	int n = 1 + (int)(unit_rand(seed) % 6);

	for (int i = 0; i < n; i++) {
		uint32_t kind = (uint32_t)(unit_rand(seed) % 8);
		uint32_t count = unit_rand(seed) % 8 == 0 ? (uint32_t)unit_rand(seed)
							  : (uint32_t)(unit_rand(seed) % 4);
		size_t len = unit_rand(seed) % 65;

		fill_random(body, sizeof(body), seed);
		if (kind == EVENT_CHUNK_EVENTS && unit_rand(seed) % 2) {
			struct event_record recs[3];

			fill_records(recs, 3, BASE_TSC + unit_rand(seed) % 2000, 7, 1);
			len = encode_events(recs, 3, body);
			count = 3;
		} else if (kind == EVENT_CHUNK_AGGREGATES && unit_rand(seed) % 2) {
			struct test_thread_drops td = { { 1, 2, 3, 4 }, 5 };
			struct test_agg a = { .func_id = 1 + unit_rand(seed) % 9, .entered = 9,
					      .exited = 8, .total = 1000, .self = 10, .max = 900 };

			a.hist[unit_rand(seed) % AGG_BUCKETS] = 8;
			len = encode_aggregates(body, &td, &a, 1);
			count = 1;
		}
		if (len && unit_rand(seed) % 2)
			body[unit_rand(seed) % len] = (uint8_t)unit_rand(seed);
		put_chunk(b, kind, (uint32_t)unit_rand(seed) % 4, count,
			  unit_rand(seed) % 2 ? 0 : unit_rand(seed), body, len);
	}
}

static void test_fuzz_random_bytes(void)
{
	static const uint8_t magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	uint64_t seed = 0xdecaf;
	uint8_t buf[600];

	for (int it = 0; it < FUZZ_ITERATIONS; it++) {
		struct event_decoder *d = event_decoder_new();
		size_t len = unit_rand(&seed) % sizeof(buf);
		struct builder b;

		fill_random(buf, len, &seed);
		if (it % 3 == 1 && len >= 4)
			memcpy(buf, magic, 4);
		if (it % 3 == 2) {
			builder_init(&b, 0);
			if (it % 2) /* past the two pairs, so that bodies get decoded */
				put_valid_prefix(&b);
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
	int victim = (int)(unit_rand(seed) % 3), flips = 1 + (int)(unit_rand(seed) % 4);

	for (int f = 0; f < 3; f++) {
		uint8_t *copy = malloc(lens[f]);
		int ret;

		memcpy(copy, frames[f], lens[f]);
		for (int i = 0; f == victim && i < flips; i++) {
			size_t bit = unit_rand(seed) % (lens[f] * 8);

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
	const struct test_thread_drops td = { { 0, 1, 0, 0 }, 0 };
	static struct test_agg aggs[2] = {
		{ .func_id = 1, .entered = 20, .exited = 20, .total = 5000, .self = 4000,
		  .max = 30 },
		{ .func_id = 2, .entered = 20, .exited = 19, .unrecorded = 1, .total = 900,
		  .self = 900, .max = 70 },
	};
	struct event_record recs[40];
	uint8_t *frames[3];
	size_t lens[3];
	uint64_t seed = 0xb17f11b5;
	struct builder b;

	aggs[0].hist[agg_bucket(25)] = 20;
	aggs[1].hist[agg_bucket(45)] = 18;
	aggs[1].hist[agg_bucket(70)] = 1;
	builder_init(&b, 0);
	for (int f = 0; f < 3; f++) {
		fill_records(recs, 40, BASE_TSC + 1100 + 3000 * f, 25, 1);
		if (f == 0)
			put_valid_prefix(&b);
		put_events(&b, 5, (uint64_t)f, recs, 40);
		put_aggregates(&b, 5, &td, aggs, 2);
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
	RUN_TEST(test_events_wire_layout);
	RUN_TEST(test_values_decode);
	RUN_TEST(test_values_at_batch_end);
	RUN_TEST(test_values_hostile);
	RUN_TEST(test_round_trip);
	RUN_TEST(test_frames_share_stream_and_segments);
	RUN_TEST(test_events_across_segments_in_one_chunk);
	RUN_TEST(test_events_in_batches);
	RUN_TEST(test_monotonic_across_segments);
	RUN_TEST(test_monotonic_extreme_pairs);
	RUN_TEST(test_drops_cumulative);
	RUN_TEST(test_drops_on_thread_exit);
	RUN_TEST(test_hostile_records_before_two_pairs);
	RUN_TEST(test_hostile_clock_pair_backwards);
	RUN_TEST(test_hostile_unknown_chunk_kind);
	RUN_TEST(test_hostile_records_chunk_retired);
	RUN_TEST(test_hostile_events_truncated_varint);
	RUN_TEST(test_hostile_events_bad_kind);
	RUN_TEST(test_hostile_events_func_id_too_big);
	RUN_TEST(test_hostile_events_tsc_overflow);
	RUN_TEST(test_hostile_events_count_past_body);
	RUN_TEST(test_hostile_events_trailing_bytes);
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
