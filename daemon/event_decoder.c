// SPDX-License-Identifier: MIT
/*
 * Agent event stream decoding (see event_decoder.h). A frame is decoded in
 * two passes: clock pairs first, so that every record of the frame is
 * converted with the pairs that bracket it, then records in stream order.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "daemon/event_decoder.h"
#include "proto/event_wire.h"

#define CLOCK_PAIRS_KEPT 64
#define ZSTD_WINDOW_LOG_MAX 24
/* One byte past the bound tells a frame of exactly the bound from a bigger one. */
#define OUTPUT_CAP_MAX ((size_t)EVENT_FRAME_DECOMPRESSED_MAX + 1)

struct event_decoder {
	ZSTD_DStream *dstream;
	uint8_t *buf;
	size_t cap;
	struct event_clock_pair pairs[CLOCK_PAIRS_KEPT];
	/* per segment [i-1, i]: floor(2^32 * dmono / dtsc), 0 when it does not fit */
	uint64_t ns_per_tick_q32[CLOCK_PAIRS_KEPT];
	size_t n_pairs;
};

struct event_decoder *event_decoder_new(void)
{
	struct event_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->dstream = ZSTD_createDStream();
	if (!d->dstream) {
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	/* bounds the decoder's own memory whatever the frame headers claim */
	ZSTD_DCtx_setParameter(d->dstream, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX);
	return d;
}

void event_decoder_free(struct event_decoder *d)
{
	if (!d)
		return;
	ZSTD_freeDStream(d->dstream);
	free(d->buf);
	free(d);
}

static int grow_output(struct event_decoder *d, char *err, size_t errlen)
{
	size_t ncap = d->cap ? d->cap * 2 : (256u << 10);
	uint8_t *n;

	if (d->cap >= OUTPUT_CAP_MAX) {
		snprintf(err, errlen, "event frame decompresses past %u bytes",
			 EVENT_FRAME_DECOMPRESSED_MAX);
		return -EMSGSIZE;
	}
	if (ncap > OUTPUT_CAP_MAX)
		ncap = OUTPUT_CAP_MAX;
	n = realloc(d->buf, ncap);
	if (!n) {
		snprintf(err, errlen, "out of memory for a %zu-byte event frame", ncap);
		return -ENOMEM;
	}
	d->buf = n;
	d->cap = ncap;
	return 0;
}

static int decompress_frame(struct event_decoder *d, const uint8_t *payload, size_t len,
			    size_t *out_len, char *err, size_t errlen)
{
	ZSTD_inBuffer in = { payload, len, 0 };
	ZSTD_outBuffer out = { d->buf, d->cap, 0 };

	for (;;) {
		size_t ret;
		int e;

		if (out.pos == d->cap) {
			e = grow_output(d, err, errlen);
			if (e)
				return e;
			out.dst = d->buf;
			out.size = d->cap;
		}
		ret = ZSTD_decompressStream(d->dstream, &out, &in);
		if (ZSTD_isError(ret)) {
			snprintf(err, errlen, "corrupt event stream: %s", ZSTD_getErrorName(ret));
			return -EBADMSG;
		}
		/* all input taken and room left: the decoder has flushed what it can */
		if (in.pos == in.size && out.pos < out.size)
			break;
	}
	*out_len = out.pos;
	return 0;
}

static int add_clock_pair(struct event_decoder *d, const struct event_clock_pair *p)
{
	if (d->n_pairs > 0) {
		const struct event_clock_pair *last = &d->pairs[d->n_pairs - 1];

		if (p->tsc <= last->tsc || p->mono_ns < last->mono_ns)
			return -EBADMSG;
	}
	if (d->n_pairs == CLOCK_PAIRS_KEPT) {
		memmove(d->pairs, d->pairs + 1, (CLOCK_PAIRS_KEPT - 1) * sizeof(d->pairs[0]));
		memmove(d->ns_per_tick_q32, d->ns_per_tick_q32 + 1,
			(CLOCK_PAIRS_KEPT - 1) * sizeof(d->ns_per_tick_q32[0]));
		d->n_pairs--;
	}
	d->ns_per_tick_q32[d->n_pairs] = 0;
	if (d->n_pairs > 0) {
		const struct event_clock_pair *a = &d->pairs[d->n_pairs - 1];
		unsigned __int128 q32 = ((unsigned __int128)(p->mono_ns - a->mono_ns) << 32) /
					(p->tsc - a->tsc);

		if (q32 <= UINT32_MAX) /* x * q32 below 2^64 for x < 2^32 */
			d->ns_per_tick_q32[d->n_pairs] = (uint64_t)q32;
	}
	d->pairs[d->n_pairs++] = *p;
	return 0;
}

/*
 * floor(x * dm / dt) for x, dm < 2^32, without a division: the Q32 estimate
 * is the exact quotient or one below it, and the remainder says which.
 */
static uint64_t scale_exact(uint64_t x, uint64_t dm, uint64_t dt, uint64_t q32)
{
	uint64_t q = (x * q32) >> 32;

	if (x * dm - q * dt >= dt)
		q++;
	return q;
}

uint64_t event_decoder_convert(const struct event_decoder *d, uint64_t tsc)
{
	const struct event_clock_pair *a, *b;
	unsigned __int128 q;
	size_t i;
	uint64_t dm;

	if (d->n_pairs < 2)
		return 0;
	/*
	 * The segment containing tsc; before the first or after the last, extend
	 * the edge one. Searched from the newest: a frame's records lie before its
	 * closing pair, nearly all of them in the last segment.
	 */
	i = d->n_pairs - 1;
	while (i > 1 && tsc < d->pairs[i - 1].tsc)
		i--;
	a = &d->pairs[i - 1];
	b = &d->pairs[i];
	/*
	 * add_clock_pair() keeps b->tsc > a->tsc and b->mono_ns >= a->mono_ns. |dt| * dm
	 * is below 2^128, which a signed __int128 cannot hold: work on magnitudes and
	 * saturate at both ends so that the result stays monotonic in tsc.
	 */
	dm = b->mono_ns - a->mono_ns;
	/* the common case, a few ms into the segment: the product fits, no 128-bit division */
	if (tsc >= a->tsc && tsc - a->tsc < (1ull << 32) && dm < (1ull << 32)) {
		uint64_t q64 = d->ns_per_tick_q32[i] ?
				       scale_exact(tsc - a->tsc, dm, b->tsc - a->tsc,
						   d->ns_per_tick_q32[i]) :
				       (tsc - a->tsc) * dm / (b->tsc - a->tsc);

		return q64 > UINT64_MAX - a->mono_ns ? UINT64_MAX : a->mono_ns + q64;
	}
	if (tsc >= a->tsc) {
		q = (unsigned __int128)(tsc - a->tsc) * dm / (b->tsc - a->tsc);
		return q > UINT64_MAX - a->mono_ns ? UINT64_MAX : a->mono_ns + (uint64_t)q;
	}
	q = (unsigned __int128)(a->tsc - tsc) * dm / (b->tsc - a->tsc);
	return q > a->mono_ns ? 0 : a->mono_ns - (uint64_t)q;
}

struct chunk_cursor {
	const uint8_t *p, *end;
};

/* Next chunk header and body, bounds-checked. 1 = got one, 0 = end, <0 = malformed. */
static int next_chunk(struct chunk_cursor *c, struct event_chunk_header *h, const uint8_t **body,
		      size_t *body_len)
{
	size_t need;

	if (c->p == c->end)
		return 0;
	if ((size_t)(c->end - c->p) < sizeof(*h))
		return -EBADMSG;
	memcpy(h, c->p, sizeof(*h));
	switch (h->kind) {
	case EVENT_CHUNK_RECORDS:
		need = (size_t)h->count * sizeof(struct event_record);
		break;
	case EVENT_CHUNK_CLOCK_PAIR:
		need = sizeof(struct event_clock_pair);
		break;
	case EVENT_CHUNK_THREAD_NAME:
		need = EVENT_THREAD_NAME_LEN;
		break;
	case EVENT_CHUNK_THREAD_EXIT:
		need = 0;
		break;
	default:
		return -EPROTO;
	}
	if ((size_t)(c->end - c->p) - sizeof(*h) < need)
		return -EBADMSG;
	*body = c->p + sizeof(*h);
	*body_len = need;
	c->p += sizeof(*h) + need;
	return 1;
}

/* Every enter record is followed by its frame, and a frame follows only an enter. */
static int records_well_formed(const struct event_chunk_header *h, const uint8_t *body)
{
	for (uint32_t i = 0; i < h->count; i++) {
		const uint8_t *unit = body + (size_t)i * sizeof(struct event_record);
		struct event_record rec;

		if (event_unit_is_frame(unit))
			return 0; /* a frame not consumed by the enter before it */
		memcpy(&rec, unit, sizeof(rec));
		if (rec.kind != EVENT_ENTER)
			continue;
		if (++i == h->count || !event_unit_is_frame(unit + sizeof(rec)))
			return 0;
	}
	return 1;
}

/* The first pass: clock pairs collected, record chunks checked for shape. */
static int collect_pairs(struct event_decoder *d, const uint8_t *buf, size_t len)
{
	struct chunk_cursor c = { buf, buf + len };
	struct event_chunk_header h;
	const uint8_t *body;
	size_t body_len;
	int r;

	while ((r = next_chunk(&c, &h, &body, &body_len)) > 0) {
		struct event_clock_pair pair;

		if (h.kind == EVENT_CHUNK_RECORDS && !records_well_formed(&h, body))
			return -EILSEQ;
		if (h.kind != EVENT_CHUNK_CLOCK_PAIR)
			continue;
		memcpy(&pair, body, sizeof(pair));
		if (add_clock_pair(d, &pair))
			return -ERANGE;
	}
	return r;
}

static void deliver_records(const struct event_decoder *d, const struct event_chunk_header *h,
			    const uint8_t *body, const struct event_decoder_callbacks *cb,
			    void *ctx)
{
	/* a drops-only chunk (count 0) is dated by the latest pair, taken after the drain */
	uint64_t last_ts = d->pairs[d->n_pairs - 1].mono_ns;

	assert(d->n_pairs >= 2); /* event_decoder_feed() refuses chunks before two pairs */
	for (uint32_t i = 0; i < h->count; i++) {
		struct event_record rec;
		struct event_enter_frame frame;
		struct decoded_event ev = { 0 };

		memcpy(&rec, body + (size_t)i * sizeof(rec), sizeof(rec));
		last_ts = event_decoder_convert(d, rec.tsc);
		ev.mono_ns = last_ts;
		ev.func_id = rec.func_id;
		ev.kind = rec.kind;
		if (rec.kind == EVENT_ENTER) { /* records_well_formed(): its frame is next */
			memcpy(&frame, body + (size_t)++i * sizeof(rec), sizeof(frame));
			ev.return_address = frame.return_address;
			ev.return_slot = frame.tagged_slot & ~EVENT_FRAME_TAG;
		}
		cb->record(ctx, h->tid, &ev);
	}
	if (cb->drops && h->drops)
		cb->drops(ctx, h->tid, h->drops, last_ts);
}

static int deliver_chunks(const struct event_decoder *d, const uint8_t *buf, size_t len,
			  const struct event_decoder_callbacks *cb, void *ctx)
{
	struct chunk_cursor c = { buf, buf + len };
	struct event_chunk_header h;
	const uint8_t *body;
	size_t body_len;
	int r;

	while ((r = next_chunk(&c, &h, &body, &body_len)) > 0) {
		char name[EVENT_THREAD_NAME_LEN + 1];

		struct event_clock_pair pair;

		switch (h.kind) {
		case EVENT_CHUNK_RECORDS:
			deliver_records(d, &h, body, cb, ctx);
			break;
		case EVENT_CHUNK_CLOCK_PAIR:
			memcpy(&pair, body, sizeof(pair));
			if (cb->watermark)
				cb->watermark(ctx, pair.mono_ns);
			break;
		case EVENT_CHUNK_THREAD_NAME:
			memcpy(name, body, EVENT_THREAD_NAME_LEN);
			name[EVENT_THREAD_NAME_LEN] = '\0';
			cb->thread_name(ctx, h.tid, name);
			break;
		case EVENT_CHUNK_THREAD_EXIT:
			/* its drop total is final: counted even if no records chunk carried it */
			if (cb->drops && h.drops)
				cb->drops(ctx, h.tid, h.drops, d->pairs[d->n_pairs - 1].mono_ns);
			if (cb->thread_exit)
				cb->thread_exit(ctx, h.tid);
			break;
		}
	}
	return r;
}

int event_decoder_feed(struct event_decoder *d, const uint8_t *payload, size_t len,
		       const struct event_decoder_callbacks *cb, void *ctx, char *err,
		       size_t errlen)
{
	size_t out_len = 0;
	int r = decompress_frame(d, payload, len, &out_len, err, errlen);

	if (r)
		return r;
	r = collect_pairs(d, d->buf, out_len);
	if (r == -ERANGE) {
		snprintf(err, errlen, "event stream clock pair goes backwards");
		return -EBADMSG;
	}
	if (r == -EILSEQ) {
		snprintf(err, errlen, "enter record without its frame, or a frame without its enter");
		return -EBADMSG;
	}
	if (r < 0) {
		snprintf(err, errlen, r == -EPROTO ? "unknown event chunk kind"
						   : "truncated event chunk");
		return -EBADMSG;
	}
	if (d->n_pairs < 2 && out_len > 0) {
		/* Records cannot be placed in time yet; the agent always sends two pairs first. */
		snprintf(err, errlen, "event records before two clock pairs");
		return -EBADMSG;
	}
	return deliver_chunks(d, d->buf, out_len, cb, ctx);
}
