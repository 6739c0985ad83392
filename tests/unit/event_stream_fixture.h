/* SPDX-License-Identifier: MIT */
/*
 * The event decoder tests' fixture (tests/unit/test_event_decoder.c,
 * test_event_aggregates.c): streams built the way agent/flusher.c builds
 * them, aggregates bodies from proto/func_aggregates.h's layout, a recorder
 * of what the decoder delivered, expected times computed independently.
 * Static helpers: each test file uses its part (hence the pragma).
 */
#ifndef PROFD_TESTS_EVENT_STREAM_FIXTURE_H
#define PROFD_TESTS_EVENT_STREAM_FIXTURE_H

#include <errno.h>
#include <stdlib.h>
#include <zstd.h>

#include "daemon/events/event_decoder.h"
#include "proto/event_wire.h"
#include "proto/func_aggregates.h"
#include "tests/unit/unit.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

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

static void put_chunk_len(struct builder *b, uint32_t kind, uint32_t tid, uint32_t count,
			  uint32_t len, uint64_t drops, const void *body, size_t body_len)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .len = len,
					.drops = drops };

	builder_put(b, &h, sizeof(h));
	if (body_len)
		builder_put(b, body, body_len);
}

/* A chunk whose header gives its body's length where its kind has one. */
static void put_chunk(struct builder *b, uint32_t kind, uint32_t tid, uint32_t count,
		      uint64_t drops, const void *body, size_t body_len)
{
	int sized = kind == EVENT_CHUNK_EVENTS || kind == EVENT_CHUNK_EVENTS32 ||
		    kind == EVENT_CHUNK_AGGREGATES;

	put_chunk_len(b, kind, tid, count, sized ? (uint32_t)body_len : 0, drops, body, body_len);
}

static void put_pair(struct builder *b, uint64_t tsc, uint64_t mono)
{
	struct event_clock_pair p = { .tsc = tsc, .mono_ns = mono };

	put_chunk(b, EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, &p, sizeof(p));
}

/*
 * The frame the tests give an enter of func: a return address and slot
 * derived from it, not monotonic in func, so that the encoder's deltas from
 * one enter to the next go both ways.
 */
static uint64_t test_return_address(uint32_t func)
{
	return 0x555555554000ull + (func * 0x9e3779b1ull) % 0x100000u;
}

static uint64_t test_return_slot(uint32_t func)
{
	return 0x7ffc00000000ull - 8ull * (func % 509);
}

/* recs as one EVENTS body, through the agent's encoder; out has n * EVENT_WORST. */
static size_t encode_events(const struct event_record *recs, uint32_t n, uint8_t *out)
{
	static struct event_frames frames;
	struct event_encoder enc = { .frames = &frames };
	uint8_t *p = out;

	event_frames_reset(&frames);
	for (uint32_t i = 0; i < n; i++)
		p = event_encode(&enc, p, recs[i].tsc, recs[i].func_id, recs[i].kind,
				 test_return_address(recs[i].func_id),
				 test_return_slot(recs[i].func_id));
	return (size_t)(p - out);
}

/* One EVENTS chunk of recs (none: the agent's drops-only chunk). */
static void put_events(struct builder *b, uint32_t tid, uint64_t drops,
		       const struct event_record *recs, uint32_t n)
{
	uint8_t *body = malloc((size_t)n * EVENT_WORST + 1);
	size_t len = encode_events(recs, n, body);

	put_chunk(b, EVENT_CHUNK_EVENTS, tid, n, drops, body, len);
	free(body);
}

static void put_event(struct builder *b, uint32_t tid, uint64_t tsc, uint32_t func, uint32_t kind)
{
	struct event_record r = { .tsc = tsc, .func_id = func, .kind = kind };

	put_events(b, tid, 0, &r, 1);
}

/* A chunk whose body is the varints v[0..n), for bodies no encoder writes. */
static void put_varint_chunk(struct builder *b, uint32_t kind, uint32_t count, const uint64_t *v,
			     size_t n)
{
	uint8_t *body = malloc(n * EVENT_VARINT_MAX + 1), *p = body;

	for (size_t i = 0; i < n; i++)
		p = event_put_varint(p, v[i]);
	put_chunk(b, kind, 5, count, 0, body, (size_t)(p - body));
	free(body);
}

/* ---- aggregates, written from the layout proto/func_aggregates.h documents ------- */

/* One function's figures as the agent keeps them, in ticks. */
struct test_agg {
	uint64_t func_id, entered, exited, untimed, unrecorded, total, self, max, filtered;
	uint64_t values_dropped;
	uint32_t hist[AGG_BUCKETS];
};

struct test_thread_drops {
	uint64_t by_reason[AGG_DROP_REASONS], unattributed, filtered_by[AGG_FILTER_REASONS];
};

/* Room for an aggregates body of n functions. */
#define AGG_BODY_MAX(n)                                                                  \
	((AGG_DROP_REASONS + 1 + AGG_FILTER_REASONS +                                     \
	  (size_t)(n) * (AGG_WIRE_FIELDS + 1 + 2 * AGG_BUCKETS)) *                         \
	 EVENT_VARINT_MAX)

static uint8_t *encode_agg(uint8_t *p, const struct test_agg *a)
{
	const uint64_t fixed[AGG_WIRE_FIELDS] = { a->func_id, a->entered, a->exited,
						  a->untimed, a->unrecorded, a->filtered,
						  a->total, a->self, a->max, a->values_dropped };
	uint32_t used = 0, next = 0;

	for (int i = 0; i < AGG_WIRE_FIELDS; i++)
		p = event_put_varint(p, fixed[i]);
	for (uint32_t i = 0; i < AGG_BUCKETS; i++)
		used += a->hist[i] != 0;
	p = event_put_varint(p, used);
	for (uint32_t i = 0; i < AGG_BUCKETS; i++) {
		if (!a->hist[i])
			continue;
		p = event_put_varint(p, i - next); /* index - previous index - 1 */
		p = event_put_varint(p, a->hist[i]);
		next = i + 1;
	}
	return p;
}

static size_t encode_aggregates(uint8_t *out, const struct test_thread_drops *td,
				const struct test_agg *aggs, uint32_t n)
{
	uint8_t *p = out;

	for (int i = 0; i < AGG_DROP_REASONS; i++)
		p = event_put_varint(p, td->by_reason[i]);
	p = event_put_varint(p, td->unattributed);
	for (int i = 0; i < AGG_FILTER_REASONS; i++)
		p = event_put_varint(p, td->filtered_by[i]);
	for (uint32_t i = 0; i < n; i++)
		p = encode_agg(p, &aggs[i]);
	return (size_t)(p - out);
}

static void put_aggregates(struct builder *b, uint32_t tid, const struct test_thread_drops *td,
			   const struct test_agg *aggs, uint32_t n)
{
	uint8_t *body = malloc(AGG_BODY_MAX(n));
	size_t len = encode_aggregates(body, td, aggs, n);

	put_chunk(b, EVENT_CHUNK_AGGREGATES, tid, n, 0, body, len);
	free(body);
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
	uint32_t n_values;
	char values[200]; /* "name:class:value;" per value (strings with their flags) */
};

struct delivered_agg {
	uint32_t tid;
	struct decoded_func_agg fa;
};

/* A thread name chunk put after a bad one: the decoder must never get that far. */
#define SENTINEL_TID 77

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
	int sentinel_seen;
	struct delivered_agg *aggs;
	size_t n_aggs, cap_aggs;
	struct decoded_thread_drops thread_drops[4];
	uint32_t thread_drops_tids[4];
	size_t aggs_at_thread_drops[4]; /* functions delivered before each */
	size_t n_thread_drops;
};

static void recorder_free(struct recorder *r)
{
	free(r->recs);
	free(r->aggs);
}

static void on_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	struct recorder *r = ctx;

	if (r->n_recs == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->recs = realloc(r->recs, r->cap * sizeof(*r->recs));
	}
	r->recs[r->n_recs++] = (struct delivered_record){ tid, ev->func_id, ev->kind, ev->mono_ns,
							  ev->return_address, ev->return_slot,
							  ev->n_values, "" };
	for (uint32_t i = 0; i < ev->n_values; i++) {
		const struct decoded_value *v = &ev->values[i];
		char *out = r->recs[r->n_recs - 1].values, name[16];
		size_t len = strlen(out);

		if (v->item.cls == ARG_CLASS_STR)
			snprintf(out + len, 200 - len, "%s:s%u:%.*s;", arg_item_name(&v->item, name, 16),
				 v->str_flags, (int)v->str_len, (const char *)v->str);
		else
			snprintf(out + len, 200 - len, "%s:%u:%" PRId64 ";",
				 arg_item_name(&v->item, name, 16), v->item.cls, (int64_t)v->value);
	}
}

static void on_thread_name(void *ctx, uint32_t tid, const char *name)
{
	struct recorder *r = ctx;

	if (tid == SENTINEL_TID)
		r->sentinel_seen = 1;
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

static void on_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	struct recorder *r = ctx;

	if (r->n_thread_drops < 4) {
		r->thread_drops[r->n_thread_drops] = *td;
		r->thread_drops_tids[r->n_thread_drops] = tid;
		r->aggs_at_thread_drops[r->n_thread_drops] = r->n_aggs;
	}
	r->n_thread_drops++;
}

static void on_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	struct recorder *r = ctx;

	if (r->n_aggs == r->cap_aggs) {
		r->cap_aggs = r->cap_aggs ? r->cap_aggs * 2 : 16;
		r->aggs = realloc(r->aggs, r->cap_aggs * sizeof(*r->aggs));
	}
	r->aggs[r->n_aggs].tid = tid;
	r->aggs[r->n_aggs++].fa = *fa;
}

static const struct event_decoder_callbacks record_cb = {
	.record = on_record,
	.watermark = on_watermark,
	.thread_name = on_thread_name,
	.thread_exit = on_thread_exit,
	.drops = on_drops,
	.thread_drops = on_thread_drops,
	.func_agg = on_func_agg,
};

static size_t delivered_total(const struct recorder *r)
{
	return r->n_recs + r->n_names + r->n_exits + r->n_drops + r->n_thread_drops + r->n_aggs;
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

#define BASE_TSC 1000000000000ull  /* about 5 minutes of uptime at 3.3 GHz */
#define BASE_MONO 300000000000ull

/* ---- the events' wire form ----------------------------------------------------- */

/*
 * The bytes event_encode() writes are the ones proto/event_wire.h documents
 * (base tsc, tag = delta << 2 | kind, function, an enter's zigzag frame
 * deltas), and they decode to what was encoded, backwards deltas included.
 */
static void test_events_wire_layout(void)
{
	static const uint8_t want[] = {
		0xe8, 0x07, /* base tsc 1000 */
		0x01, 0x05, /* tag 0 << 2 | ENTER, function 5 */
		0xa0, 0x01, /* return address +0x50: zigzag 0xa0 */
		0x80, 0x04, /* return slot +0x100: zigzag 0x200 */
		0x0e, 0x05, /* tag 3 << 2 | EXIT, function 5 */
		0x81, 0x01, /* tag 32 << 2 | ENTER */
		0x87, 0x01, /* function 135 */
		0x1f,       /* return address -0x10: zigzag 0x1f */
		0x0f,       /* return slot -8: zigzag 0x0f */
	};
	const struct pair p0 = { 0, 0 }, p1 = { 4000, 2000 };
	struct event_decoder *d = event_decoder_new();
	struct event_encoder enc = { 0 };
	uint8_t body[3 * EVENT_WORST], *p = body;
	struct recorder r = { 0 };
	struct builder b;

	p = event_encode(&enc, p, 1000, 5, EVENT_ENTER, 0x50, 0x100);
	p = event_encode(&enc, p, 1003, 5, EVENT_EXIT, 0x1234, 0x5678); /* an exit has no frame */
	p = event_encode(&enc, p, 1035, 135, EVENT_ENTER, 0x40, 0xf8);
	CHECK_EQ_INT(enc.count, 3);
	CHECK_EQ_INT(p - body, sizeof(want));
	CHECK_MEM_EQ(body, want, sizeof(want));
	builder_init(&b, 0);
	put_pair(&b, p0.tsc, p0.mono);
	put_pair(&b, p1.tsc, p1.mono);
	put_chunk(&b, EVENT_CHUNK_EVENTS, 3, 3, 0, body, (size_t)(p - body));
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	CHECK_EQ_INT(r.n_recs, 3);
	if (r.n_recs == 3) {
		CHECK_EQ_U64(r.recs[0].mono, 500);
		CHECK_EQ_U64(r.recs[0].return_address, 0x50);
		CHECK_EQ_U64(r.recs[0].return_slot, 0x100);
		CHECK_EQ_INT(r.recs[1].kind, EVENT_EXIT);
		CHECK_EQ_U64(r.recs[1].mono, 501);
		CHECK_EQ_U64(r.recs[1].return_address, 0);
		CHECK_EQ_INT(r.recs[2].func, 135);
		CHECK_EQ_U64(r.recs[2].mono, 517);
		CHECK_EQ_U64(r.recs[2].return_address, 0x40);
		CHECK_EQ_U64(r.recs[2].return_slot, 0xf8);
	}
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

static void fill_records(struct event_record *recs, uint32_t n, uint64_t tsc0, uint64_t step,
			 uint32_t func0)
{
	for (uint32_t i = 0; i < n; i++)
		recs[i] = (struct event_record){ .tsc = tsc0 + i * step, .func_id = func0 + i,
						 .kind = i % 2 ? EVENT_EXIT : EVENT_ENTER };
}

/* ---- hostile streams: a valid prefix, then what must be refused ------------------ */

/* A valid start of frame (name, pairs, events), so a bad chunk after it must also hide these. */
static void put_valid_prefix(struct builder *b)
{
	struct event_record recs[10];

	fill_records(recs, 10, BASE_TSC + 10, 10, 1);
	put_pair(b, BASE_TSC, BASE_MONO);
	put_chunk(b, EVENT_CHUNK_THREAD_NAME, 5, 0, 0, "main\0\0\0\0\0\0\0\0\0\0\0\0", 16);
	put_events(b, 5, 3, recs, 10);
	put_chunk(b, EVENT_CHUNK_THREAD_EXIT, 6, 0, 0, NULL, 0);
	put_pair(b, BASE_TSC + 1000, BASE_MONO + 500);
}

/*
 * Feeds the frame in b, whose chunks do not frame (found before anything is
 * delivered): expects -EBADMSG, a reason containing `why`, nothing delivered.
 */
static void expect_refused_frame(struct event_decoder *d, struct builder *b, const char *why)
{
	struct recorder r = { 0 };

	CHECK_EQ_INT(feed_frame(d, b, &r), -EBADMSG);
	if (!strstr(last_err, why))
		fprintf(stderr, "  reason \"%s\" lacks \"%s\"\n", last_err, why);
	CHECK(strstr(last_err, why) != NULL);
	CHECK_EQ_INT(delivered_total(&r), 0);
	recorder_free(&r);
}

/*
 * Feeds the frame in b, whose last chunk's body does not decode, with a
 * thread name after it: -EBADMSG with the reason, and nothing after the bad
 * chunk delivered (what came before it may have been: event_decoder.h).
 */
static void expect_bad_chunk(struct event_decoder *d, struct builder *b, const char *what)
{
	struct recorder r = { 0 };
	int before = unit_check_failures;

	put_chunk(b, EVENT_CHUNK_THREAD_NAME, SENTINEL_TID, 0, 0, "after-bad-chunk", 16);
	CHECK_EQ_INT(feed_frame(d, b, &r), -EBADMSG);
	CHECK(strstr(last_err, "does not decode") != NULL);
	CHECK(!r.sentinel_seen);
	if (unit_check_failures != before)
		fprintf(stderr, "  case: %s (reason \"%s\")\n", what, last_err);
	recorder_free(&r);
}

/* A fresh decoder fed a valid prefix, then one chunk with `body`: it must not decode. */
static void check_bad_body(uint32_t kind, uint32_t count, const uint8_t *body, size_t len,
			   const char *what)
{
	struct event_decoder *d = event_decoder_new();
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_chunk(&b, kind, 5, count, 0, body, len);
	expect_bad_chunk(d, &b, what);
	builder_fini(&b);
	event_decoder_free(d);
}

static void check_bad_varints(uint32_t kind, uint32_t count, const uint64_t *v, size_t n,
			      const char *what)
{
	uint8_t *body = malloc(n * EVENT_VARINT_MAX + 1), *p = body;

	for (size_t i = 0; i < n; i++)
		p = event_put_varint(p, v[i]);
	check_bad_body(kind, count, body, (size_t)(p - body), what);
	free(body);
}

#pragma GCC diagnostic pop

#endif
