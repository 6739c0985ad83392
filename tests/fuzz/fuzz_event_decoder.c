// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for daemon/events/event_decoder.c. Input: one mode byte, then
 * frames, each a 2-byte little-endian length and that many bytes. Mode bit 0
 * clear: the frames are fed as they are (compressed bytes). Set: they are the
 * decompressed chunks, compressed here like agent/flusher.c does, so that the
 * chunk parser sees well-formed zstd. Mode bits 1-2: events come one by one
 * (0), in batches (1, the `events` callback) or read by the callback (2 and
 * 3, the `chunk` callback: profd's event_reader_plain, event_reader_calls
 * with 3, else _next). Checks
 * the decoder's promises (events of a known kind, aggregates that add up,
 * nothing delivered by a frame refused before its bodies are decoded), never
 * exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "daemon/events/event_decoder.h"
#include "proto/event_wire.h"
#include "proto/func_aggregates.h"

#define MAX_FRAMES 16
#define CHECK(cond) ((cond) ? (void)0 : abort())

static void on_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)tid;
	CHECK(ev->kind == EVENT_ENTER || ev->kind == EVENT_EXIT);
	CHECK(ev->kind == EVENT_ENTER || (ev->return_address == 0 && ev->return_slot == 0));
	++*(size_t *)ctx;
}

static void on_events(void *ctx, uint32_t tid, const struct decoded_event *ev, size_t n)
{
	CHECK(n > 0);
	for (size_t i = 0; i < n; i++)
		on_record(ctx, tid, &ev[i]);
}

static void on_thread_name(void *ctx, uint32_t tid, const char *name)
{
	(void)tid;
	++*(size_t *)ctx;
	CHECK(strlen(name) <= EVENT_THREAD_NAME_LEN);
}

static void on_thread_exit(void *ctx, uint32_t tid)
{
	(void)tid;
	++*(size_t *)ctx;
}

static void on_drops(void *ctx, uint32_t tid, uint64_t drops, uint64_t mono)
{
	(void)tid, (void)mono;
	++*(size_t *)ctx;
	CHECK(drops != 0);
}

static void on_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	(void)tid, (void)td;
	++*(size_t *)ctx;
}

static void on_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	(void)tid;
	CHECK(fa->func_id != 0);
	CHECK(fa->exited <= fa->entered && fa->unrecorded <= fa->entered);
	++*(size_t *)ctx;
}

/*
 * profd's path: events through event_reader_plain (calls: event_reader_calls)
 * a few at a time while it takes them, else _next.
 */
static int read_chunk(void *ctx, uint32_t tid, struct event_reader *r, bool calls)
{
	struct decoded_value values[EVENT_VALUES_MAX];
	struct event_plain some[4];
	struct decoded_event ev;
	size_t n;
	int got;

	for (;;) {
		if ((n = calls ? event_reader_calls(r, some, 4) : event_reader_plain(r, some, 4)) > 0) {
			for (size_t i = 0; i < n; i++)
				CHECK(some[i].kind == EVENT_ENTER || some[i].kind == EVENT_EXIT);
			*(size_t *)ctx += n;
			continue;
		}
		if ((got = event_reader_next(r, &ev, values)) <= 0)
			return got;
		CHECK(ev.n_values <= EVENT_VALUES_MAX);
		on_record(ctx, tid, &ev);
	}
}

static int on_chunk(void *ctx, uint32_t tid, struct event_reader *r)
{
	return read_chunk(ctx, tid, r, false);
}

static int on_chunk_calls(void *ctx, uint32_t tid, struct event_reader *r)
{
	return read_chunk(ctx, tid, r, true);
}

static const struct event_decoder_callbacks callbacks[4] = {
	{
		.record = on_record,
		.thread_name = on_thread_name,
		.thread_exit = on_thread_exit,
		.drops = on_drops,
		.thread_drops = on_thread_drops,
		.func_agg = on_func_agg,
	},
	{
		.events = on_events,
		.thread_name = on_thread_name,
		.thread_exit = on_thread_exit,
		.drops = on_drops,
		.thread_drops = on_thread_drops,
		.func_agg = on_func_agg,
	},
	{
		.chunk = on_chunk,
		.thread_name = on_thread_name,
		.thread_exit = on_thread_exit,
		.drops = on_drops,
		.thread_drops = on_thread_drops,
		.func_agg = on_func_agg,
	},
	{
		.chunk = on_chunk_calls,
		.thread_name = on_thread_name,
		.thread_exit = on_thread_exit,
		.drops = on_drops,
		.thread_drops = on_thread_drops,
		.func_agg = on_func_agg,
	},
};

/* Compresses src as one flushed frame of the connection's stream; 0 bytes on failure. */
static size_t compress_frame(ZSTD_CCtx *cctx, const uint8_t *src, size_t len, uint8_t **out)
{
	size_t cap = ZSTD_compressBound(len) + 64, remaining;
	ZSTD_inBuffer in = { src, len, 0 };
	ZSTD_outBuffer o;

	*out = malloc(cap);
	o = (ZSTD_outBuffer){ *out, cap, 0 };
	do {
		remaining = ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_flush);
	} while (!ZSTD_isError(remaining) && remaining != 0 && o.pos < o.size);
	return ZSTD_isError(remaining) ? 0 : o.pos;
}

/* Conversions must be monotonic (tsc to time, ticks to ns) whatever pairs were accepted. */
static void check_monotonic(const struct event_decoder *d, const uint8_t *data, size_t size)
{
	uint64_t t[8] = { 0, UINT64_MAX, UINT64_MAX / 2 }, prev = 0;

	for (size_t i = 3; i < 8 && (i - 3) * 8 + 8 <= size; i++)
		memcpy(&t[i], data + (i - 3) * 8, 8);
	for (size_t i = 1; i < 8; i++) /* insertion sort: t[] ascending */
		for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
			uint64_t x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	for (size_t i = 0; i < 8; i++) {
		uint64_t m = event_decoder_convert(d, t[i]);

		CHECK(m >= prev);
		prev = m;
	}
	prev = 0;
	for (size_t i = 0; i < 8; i++) {
		uint64_t ns = event_decoder_ticks_to_ns(d, t[i]);

		CHECK(ns >= prev);
		prev = ns;
	}
}

static ZSTD_CCtx *shared_cctx(void)
{
	static ZSTD_CCtx *cctx;

	if (!cctx) {
		cctx = ZSTD_createCCtx();
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
		/* a small window keeps the decoder's buffers small: ASan makes big ones slow */
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 10);
	}
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	return cctx;
}

/* Feeds one frame; returns the decoder's result. */
static int feed_one(struct event_decoder *d, ZSTD_CCtx *cctx, const uint8_t *p, size_t len,
		    const struct event_decoder_callbacks *cb)
{
	char err[160] = "";
	uint8_t *packed = NULL;
	size_t calls = 0;
	int ret;

	if (cctx) {
		len = compress_frame(cctx, p, len, &packed);
		p = packed;
	}
	ret = event_decoder_feed(d, p, len, cb, &calls, err, sizeof(err));
	free(packed);
	CHECK(ret == 0 || ret == -EBADMSG || ret == -EMSGSIZE || ret == -ENOMEM);
	CHECK(ret == 0 || err[0] != '\0');
	/* only a body that does not decode may come after deliveries (event_decoder.h) */
	CHECK(ret == 0 || calls == 0 || strstr(err, "does not decode") != NULL);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct event_decoder *d;
	ZSTD_CCtx *cctx;
	size_t off = 1;

	if (size < 1)
		return 0;
	cctx = data[0] & 1 ? shared_cctx() : NULL;
	d = event_decoder_new();
	CHECK(d != NULL);
	for (int f = 0; f < MAX_FRAMES && off + 2 <= size; f++) {
		size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		if (len > size - off)
			len = size - off;
		if (feed_one(d, cctx, data + off, len, &callbacks[data[0] >> 1 & 3]) < 0)
			break;
		off += len;
	}
	check_monotonic(d, data, size);
	event_decoder_free(d);
	return 0;
}
