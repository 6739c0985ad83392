// SPDX-License-Identifier: MIT
/*
 * Agent event stream decoding (see event_decoder.h). A frame is decoded in
 * two passes: clock pairs first, so that every event of the frame is
 * converted with the pairs that bracket it, then chunks in stream order.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "daemon/events/event_decoder.h"
#include "proto/event_wire.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

#define CLOCK_PAIRS_KEPT 64
#define ZSTD_WINDOW_LOG_MAX 24
/* One byte past the bound tells a frame of exactly the bound from a bigger one. */
#define OUTPUT_CAP_MAX ((size_t)EVENT_FRAME_DECOMPRESSED_MAX + 1)

/* 8 KiB of decoded events: still in L1 when the callback reads them */
#define EVENTS_PER_BATCH EVENT_DECODER_BATCH_MAX

/*
 * One per agent of a process of a tree: what only some streams use (the
 * zstd context of compressed frames, the values of --args, ~200 KiB
 * together) is allocated at its first use, not for every process.
 */
struct event_decoder {
	ZSTD_DStream *dstream;
	struct decoded_event batch[EVENTS_PER_BATCH];
	struct decoded_value *values; /* the batch's: EVENTS_PER_BATCH * EVENT_VALUES_MAX */
	uint8_t *buf;
	size_t cap;
	struct event_clock_pair pairs[CLOCK_PAIRS_KEPT];
	/* per segment [i-1, i]: floor(2^32 * dmono / dtsc), 0 when it does not fit */
	uint64_t ns_per_tick_q32[CLOCK_PAIRS_KEPT];
	size_t n_pairs;
	struct event_clock_pair first_pair; /* the stream's first: the rate of durations */
	struct event_frames frames; /* the EVENTS chunk being decoded's */
};

struct event_decoder *event_decoder_new(void)
{
	return calloc(1, sizeof(struct event_decoder));
}

static int dstream_get(struct event_decoder *d, char *err, size_t errlen)
{
	if (d->dstream)
		return 0;
	d->dstream = ZSTD_createDStream();
	if (!d->dstream) {
		snprintf(err, errlen, "out of memory for the event stream's decompression");
		return -ENOMEM;
	}
	/* bounds the decoder's own memory whatever the frame headers claim */
	ZSTD_DCtx_setParameter(d->dstream, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX);
	return 0;
}

void event_decoder_free(struct event_decoder *d)
{
	if (!d)
		return;
	ZSTD_freeDStream(d->dstream);
	free(d->values);
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
	int r = dstream_get(d, err, errlen);

	if (r)
		return r;
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
	if (d->n_pairs == 0)
		d->first_pair = *p;
	d->pairs[d->n_pairs++] = *p;
	return 0;
}

uint64_t event_decoder_ticks_to_ns(const struct event_decoder *d, uint64_t ticks)
{
	const struct event_clock_pair *last;
	unsigned __int128 q;

	if (d->n_pairs < 2)
		return 0; /* before the check, pairs[n_pairs - 1] would be pairs[-1] */
	last = &d->pairs[d->n_pairs - 1];
	if (last->tsc == d->first_pair.tsc)
		return 0;
	q = (unsigned __int128)ticks * (last->mono_ns - d->first_pair.mono_ns) /
	    (last->tsc - d->first_pair.tsc);
	return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
}

/*
 * floor(x * dm / dt) for x, dm < 2^32, without a division: the Q32 estimate
 * is the exact quotient or one below it, and the remainder says which.
 */
static uint64_t scale_exact(uint64_t x, uint64_t dm, uint64_t dt, uint64_t q32)
{
	uint64_t q = (x * q32) >> 32;

	return q + (uint64_t)(x * dm - q * dt >= dt);
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

/*
 * The clock segment of tsc, for the events after it (nearly all in the
 * same segment): event_decoder_convert's common case, without its search,
 * in one multiply. With q64 = ceil(2^64 dm / dt), x q64 / 2^64 exceeds
 * x dm / dt by less than x / 2^64 < 2^-32 for x < 2^32, and x dm / dt is at
 * least 1/dt > 2^-32 below the next integer when dt < 2^32: the floors are
 * equal. Same results: the unit tests compare every event.
 */
static void convert_cache_set(const struct event_decoder *d, uint64_t tsc,
			      struct event_convert *c)
{
	size_t i = d->n_pairs - 1;
	uint64_t hi, dt, dm;

	while (i > 1 && tsc < d->pairs[i - 1].tsc)
		i--;
	c->lo = d->pairs[i - 1].tsc;
	hi = i == d->n_pairs - 1 ? UINT64_MAX : d->pairs[i].tsc;
	c->a_mono = d->pairs[i - 1].mono_ns;
	dt = d->pairs[i].tsc - d->pairs[i - 1].tsc;
	dm = d->pairs[i].mono_ns - d->pairs[i - 1].mono_ns;
	c->span = hi - c->lo < (1ull << 32) ? hi - c->lo : 1ull << 32;
	/* a slower clock than the mono one, long segments, the end of time: no fast path */
	if (dm >= dt || dt >= (1ull << 32) || c->a_mono >= UINT64_MAX - (1ull << 32)) {
		c->span = 0;
		return;
	}
	c->q64 = (uint64_t)((((unsigned __int128)dm << 64) + dt - 1) / dt);
}

/* Whether c, the cached segment, converts tsc. */
static inline bool convert_has(const struct event_convert *c, uint64_t tsc)
{
	return tsc - c->lo < c->span; /* below lo: wraps, never under span */
}

/* event_decoder_convert's result for a tsc in c (convert_has). */
static inline uint64_t convert_in(const struct event_convert *c, uint64_t tsc)
{
	return c->a_mono + (uint64_t)((unsigned __int128)(tsc - c->lo) * c->q64 >> 64);
}

/* tsc in CLOCK_MONOTONIC, from r's cached segment, which moves to tsc's when tsc is out of it. */
static uint64_t reader_convert(struct event_reader *r, uint64_t tsc)
{
	if (convert_has(&r->cc, tsc))
		return convert_in(&r->cc, tsc);
	convert_cache_set(r->d, tsc, &r->cc);
	if (!convert_has(&r->cc, tsc))
		return event_decoder_convert(r->d, tsc);
	return convert_in(&r->cc, tsc);
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
	case EVENT_CHUNK_EVENTS:
	case EVENT_CHUNK_EVENTS32:
	case EVENT_CHUNK_AGGREGATES:
		need = h->len;
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

/* The first pass: clock pairs collected, so that every event is placed by the pairs around it. */
static int collect_pairs(struct event_decoder *d, const uint8_t *buf, size_t len)
{
	struct chunk_cursor c = { buf, buf + len };
	struct event_chunk_header h;
	const uint8_t *body;
	size_t body_len;
	int r;

	while ((r = next_chunk(&c, &h, &body, &body_len)) > 0) {
		struct event_clock_pair pair;

		if (h.kind != EVENT_CHUNK_CLOCK_PAIR)
			continue;
		memcpy(&pair, body, sizeof(pair));
		if (add_clock_pair(d, &pair))
			return -ERANGE;
	}
	return r;
}

static void deliver_batch(const struct event_decoder *d, uint32_t tid, size_t n,
			  const struct event_decoder_callbacks *cb, void *ctx)
{
	if (cb->events) {
		cb->events(ctx, tid, d->batch, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		cb->record(ctx, tid, &d->batch[i]);
}

/*
 * A varint of one or two bytes inline and without a branch on which (nearly
 * all of them, and the sizes of the tags mix: a branch mispredicted often);
 * longer ones out of line.
 */
static inline const uint8_t *get_varint_fast(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	if (end - p >= 2) {
		uint64_t two = p[0] >> 7; /* 1: a second byte follows */

		if (!(two & (p[1] >> 7))) {
			*v = (uint64_t)(p[0] & 0x7f) | ((uint64_t)p[1] << 7 & -two);
			return p + 1 + two;
		}
	}
	return event_get_varint(p, end, v);
}

/* One value's payload (proto/event_wire.h EVENT_VALUES) after its descriptor; NULL if malformed. */
static const uint8_t *get_value(const uint8_t *p, const uint8_t *end, struct decoded_value *v)
{
	uint64_t x;

	v->str = NULL;
	v->str_len = v->str_flags = 0;
	switch (v->item.cls) {
	case ARG_CLASS_FLOAT:
		if ((size_t)(end - p) < v->item.size)
			return NULL;
		x = 0;
		memcpy(&x, p, v->item.size);
		v->value = x;
		return p + v->item.size;
	case ARG_CLASS_STR:
		if (!(p = event_get_varint(p, end, &x)) || (x & 3) == 3)
			return NULL;
		v->str_flags = (uint32_t)(x & 3);
		if (v->str_flags & EVENT_STR_INVALID)
			return x >> 2 ? NULL : event_get_varint(p, end, &v->value);
		if (x >> 2 > EVENT_STR_BYTES_MAX || (uint64_t)(end - p) < x >> 2)
			return NULL;
		v->value = 0;
		v->str = p;
		v->str_len = (uint32_t)(x >> 2);
		return p + v->str_len;
	default:
		if (!(p = event_get_varint(p, end, &x)))
			return NULL;
		v->value = v->item.cls == ARG_CLASS_INT ? (uint64_t)event_unzigzag(x) : x;
		/* as the agent cut it: a wider value is malformed */
		return arg_item_value(&v->item, v->value) == v->value ? p : NULL;
	}
}

/*
 * A VALUES item (tag: n << 2 | EVENT_VALUES) for ev, the event decoded just
 * before it, into out (room: EVENT_VALUES_MAX); NULL if malformed.
 */
static const uint8_t *get_values(const uint8_t *p, const uint8_t *end, uint64_t tag,
				 struct decoded_event *ev, struct decoded_value *out)
{
	uint64_t n = tag >> EVENT_TAG_KIND_BITS, desc;

	if (ev->n_values || n == 0 || n > EVENT_VALUES_MAX)
		return NULL;
	for (uint64_t i = 0; i < n; i++) {
		if (!(p = event_get_varint(p, end, &desc)) || arg_desc_decode(desc, &out[i].item))
			return NULL;
		if (!(p = get_value(p, end, &out[i])))
			return NULL;
	}
	ev->values = out;
	ev->n_values = (uint32_t)n;
	return p;
}

int event_reader_next(struct event_reader *r, struct decoded_event *ev,
		      struct decoded_value *values)
{
	const uint8_t *p = r->p, *end = r->end;
	uint64_t tag, func_id, v, tsc;

	if (!r->left)
		return 0;
	if (r->words) { /* proto/event_wire.h EVENT_CHUNK_EVENTS32 */
		uint32_t w;

		if (end - p < (ptrdiff_t)sizeof(w))
			return -EBADMSG;
		memcpy(&w, p, sizeof(w));
		p += sizeof(w);
		if (!(w & EVENT_WORD_WIDE)) {
			tag = (uint64_t)(w >> 3 & (EVENT_WORD_DELTA_MAX - 1)) << 2 | (w & 3);
			func_id = w >> 18;
		} else if (!(p = get_varint_fast(p, end, &tag)) ||
			   tag > UINT64_MAX >> EVENT_TAG_KIND_BITS ||
			   !(p = get_varint_fast(p, end, &func_id))) {
			return -EBADMSG;
		} else {
			tag = tag << EVENT_TAG_KIND_BITS | (w & 3);
		}
		if ((tag & 3) == EVENT_VALUES)
			return -EBADMSG; /* VALUES here follow no event */
	} else if (!(p = get_varint_fast(p, end, &tag)) || (tag & 3) == EVENT_VALUES ||
		   !(p = get_varint_fast(p, end, &func_id))) {
		return -EBADMSG; /* VALUES here follow no event */
	}
	tsc = r->tsc + (tag >> EVENT_TAG_KIND_BITS);
	ev->kind = (uint32_t)(tag & ((1u << EVENT_TAG_KIND_BITS) - 1));
	if (ev->kind == EVENT_ENTER_SEEN) { /* func_id << 2 | way: a frame the chunk had */
		uint32_t i = (uint32_t)((func_id >> 2) % EVENT_FRAME_SETS * EVENT_FRAME_WAYS +
					(func_id & 3));

		func_id >>= 2;
		if (func_id > UINT32_MAX || r->frames->func[i] != func_id + 1)
			return -EBADMSG;
		r->ret = r->frames->ret[i];
		r->slot = r->frames->slot[i];
		ev->kind = EVENT_ENTER;
	}
	if (func_id > UINT32_MAX || tsc < r->tsc)
		return -EBADMSG;
	ev->func_id = (uint32_t)func_id;
	ev->n_values = 0;
	ev->values = NULL;
	ev->return_address = ev->return_slot = 0;
	if ((tag & 3) == EVENT_ENTER) {
		if (!(p = get_varint_fast(p, end, &v)))
			return -EBADMSG;
		r->ret += (uint64_t)event_unzigzag(v);
		if (!(p = get_varint_fast(p, end, &v)))
			return -EBADMSG;
		r->slot += (uint64_t)event_unzigzag(v);
		event_frames_put(r->frames, ev->func_id, r->ret, r->slot);
	} else if (ev->kind != EVENT_ENTER && ev->kind != EVENT_EXIT) {
		return -EBADMSG;
	}
	if (ev->kind == EVENT_ENTER) {
		ev->return_address = r->ret;
		ev->return_slot = r->slot;
	}
	r->tsc = tsc;
	r->left--;
	/* its values, when the next item is a VALUES one */
	if (r->left && p < end && (p[0] & 3) == EVENT_VALUES) {
		if (!(p = get_varint_fast(p, end, &tag)) || !(p = get_values(p, end, tag, ev, values)))
			return -EBADMSG;
		r->left--;
	}
	r->p = p;
	ev->mono_ns = r->last_ts = reader_convert(r, tsc);
	return 1;
}

/* A varint of one or two bytes (two readable at p), without a branch on which; false when longer. */
static inline bool varint2(const uint8_t **pp, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t two = p[0] >> 7; /* 1: a second byte follows */

	if (two & (p[1] >> 7))
		return false;
	*v = (uint64_t)(p[0] & 0x7f) | ((uint64_t)p[1] << 7 & -two);
	*pp = p + 1 + two;
	return true;
}

/*
 * event_reader_plain for one kind of chunk (words: a constant): the
 * reader's state in locals, only what the loop needs live (profd's hot
 * path: the decoder's state did not fit the registers, and the spills and
 * reloads were half of its instructions). Without out_frames (event_reader_calls),
 * the enters' frames are not written out, and a SEEN's is not even read:
 * the bases keep the index of the chunk's frame that holds it (base_way),
 * read only when an ENTER with a frame of its own needs it as its base
 * (no ENTER came between: nothing put a frame over it).
 */
static inline __attribute__((always_inline)) size_t
plain_events(struct event_reader *r, struct event_plain *out, size_t max, const bool words,
	     const bool out_frames)
{
	const uint8_t *p = r->p;
	/*
	 * The longest event read here is 8 bytes, and the next item's first
	 * byte is read with it: the first `room` events of the chunk's bytes
	 * left start at least 9 bytes before its end (one bound for the batch,
	 * not a test per event). The chunk's last item ends closer: it is
	 * never read here, so a next item's first byte is always the chunk's.
	 */
	const size_t room = r->end - p >= 9 ? (size_t)(r->end - 9 - p) / 8 + 1 : 0;
	/*
	 * The time as x = tsc - lo, the offset into the clock segment: under
	 * span, tsc = lo + x is below the segment's end, so no delta took it
	 * past 2^64 either (one that did comes out at or above span).
	 */
	uint64_t x = r->tsc - r->cc.lo, ret = r->ret, slot = r->slot;
	const uint64_t span = r->cc.span, a_mono = r->cc.a_mono, q64 = r->cc.q64;
	struct event_frames *frames = r->frames;
	struct event_plain *o = out, *o_end;
	int32_t base_way = -1; /* !out_frames: the frame's index that holds ret and slot, or -1 */

	if (max > r->left)
		max = r->left;
	o_end = out + (max < room ? max : room);
	while (o < o_end) {
		const uint8_t *q = p;
		uint64_t delta, id, v, ev_ret = ret, ev_slot = slot;
		int32_t ev_way = base_way;
		uint32_t wire, kind, w;

		if (words) {
			__builtin_memcpy(&w, q, sizeof(w));
			if (w & EVENT_WORD_WIDE)
				break;
			q += sizeof(w);
			wire = w & 3;
			delta = w >> 3 & (EVENT_WORD_DELTA_MAX - 1);
			id = w >> 18;
		} else {
			if (!varint2(&q, &delta) || !varint2(&q, &id))
				break;
			wire = (uint32_t)(delta & 3);
			delta >>= 2;
		}
		if (x + delta >= span) /* a new clock segment (or past 2^64: malformed) */
			break;
		kind = wire;
		if (wire == EVENT_ENTER_SEEN) {
			uint32_t i = (uint32_t)(id >> 2) % EVENT_FRAME_SETS * EVENT_FRAME_WAYS +
				     (uint32_t)(id & 3);

			id >>= 2;
			if (frames->func[i] != id + 1)
				break;
			if (out_frames) {
				ev_ret = frames->ret[i];
				ev_slot = frames->slot[i];
			} else {
				ev_way = (int32_t)i;
			}
			kind = EVENT_ENTER;
		} else if (wire == EVENT_ENTER) {
			if (!out_frames && ev_way >= 0) {
				ev_ret = frames->ret[ev_way];
				ev_slot = frames->slot[ev_way];
				ev_way = -1;
			}
			if (!varint2(&q, &v))
				break;
			ev_ret += (uint64_t)event_unzigzag(v);
			if (!varint2(&q, &v))
				break;
			ev_slot += (uint64_t)event_unzigzag(v);
		} else if (wire != EVENT_EXIT) {
			break;
		}
		if ((q[0] & 3) == EVENT_VALUES)
			break; /* its values come with it (event_reader_next) */
		if (wire == EVENT_ENTER)
			event_frames_put(frames, (uint32_t)id, ev_ret, ev_slot);
		x += delta;
		o->mono_ns = a_mono + (uint64_t)((unsigned __int128)x * q64 >> 64);
		if (out_frames) {
			o->return_address = ev_ret;
			o->return_slot = ev_slot;
		}
		o->func_id = (uint32_t)id;
		o->kind = kind;
		o++;
		p = q;
		ret = ev_ret;
		slot = ev_slot;
		base_way = ev_way;
	}
	if (!out_frames && base_way >= 0) {
		ret = frames->ret[base_way];
		slot = frames->slot[base_way];
	}
	if (o > out) {
		r->p = p;
		r->tsc = r->cc.lo + x;
		r->ret = ret;
		r->slot = slot;
		r->left -= (uint32_t)(o - out);
		r->last_ts = o[-1].mono_ns;
	}
	return (size_t)(o - out);
}

size_t event_reader_plain(struct event_reader *r, struct event_plain *out, size_t max)
{
	return r->words ? plain_events(r, out, max, true, true) :
			  plain_events(r, out, max, false, true);
}

size_t event_reader_calls(struct event_reader *r, struct event_plain *out, size_t max)
{
	return r->words ? plain_events(r, out, max, true, false) :
			  plain_events(r, out, max, false, false);
}

/* An EVENTS chunk (proto/event_wire.h), decoded and delivered; -EBADMSG if it does not decode. */
static int deliver_events(struct event_decoder *d, const struct event_chunk_header *h,
			  const uint8_t *body, const struct event_decoder_callbacks *cb, void *ctx)
{
	/* a drops-only chunk (count 0) is dated by the latest pair, taken after the drain */
	struct event_reader r = { .p = body, .end = body + h->len, .left = h->count,
				  .words = h->kind == EVENT_CHUNK_EVENTS32,
				  .last_ts = d->pairs[d->n_pairs - 1].mono_ns, .frames = &d->frames,
				  .d = d };
	size_t n = 0;
	int got;

	/* a chunk's frames start empty (what a SEEN names must be set in its chunk) */
	event_frames_reset(&d->frames);

	assert(d->n_pairs >= 2); /* event_decoder_feed() refuses chunks before two pairs */
	if (h->count && !(r.p = event_get_varint(r.p, r.end, &r.tsc)))
		return -EBADMSG;
	if (cb->chunk) {
		if (cb->chunk(ctx, h->tid, &r) || r.left)
			return -EBADMSG;
	} else {
		/* the batch path's values, allocated at its first use (see struct event_decoder) */
		if (!d->values &&
		    !(d->values = calloc(EVENTS_PER_BATCH * EVENT_VALUES_MAX, sizeof(*d->values))))
			return -ENOMEM;
		while ((got = event_reader_next(&r, &d->batch[n], &d->values[n * EVENT_VALUES_MAX])) > 0)
			if (++n == EVENTS_PER_BATCH) {
				deliver_batch(d, h->tid, n, cb, ctx);
				n = 0;
			}
		if (n)
			deliver_batch(d, h->tid, n, cb, ctx);
		if (got < 0)
			return -EBADMSG;
	}
	if (r.p != r.end)
		return -EBADMSG;
	if (cb->drops && h->drops)
		cb->drops(ctx, h->tid, h->drops, r.last_ts);
	return 0;
}

/* `n` varints into out; NULL when the body ends first. */
static const uint8_t *get_varints(const uint8_t *p, const uint8_t *end, uint64_t *out, int n)
{
	for (int i = 0; i < n && p; i++)
		p = event_get_varint(p, end, &out[i]);
	return p;
}

static const uint8_t *get_func_agg(const struct event_decoder *d, const uint8_t *p,
				   const uint8_t *end, struct decoded_func_agg *fa)
{
	uint64_t f[AGG_WIRE_FIELDS], used, index = 0, v;

	p = get_varints(p, end, f, AGG_WIRE_FIELDS);
	if (!p || f[0] == 0 || f[0] > UINT32_MAX || f[2] > f[1])
		return NULL;
	/*
	 * The agent reads a running thread's figures one after the other: calls
	 * entered (and dropped) after it counted the open ones can make
	 * `unrecorded` pass `entered` for a moment. Not malformed: clamped.
	 */
	if (f[4] > f[1])
		f[4] = f[1];
	if (f[5] > f[1] - f[4])
		f[5] = f[1] - f[4];
	memset(fa->hist, 0, sizeof(fa->hist));
	fa->func_id = (uint32_t)f[0];
	fa->entered = f[1];
	fa->exited = f[2];
	fa->untimed = f[3];
	fa->unrecorded = f[4];
	fa->filtered = f[5];
	fa->total_ns = event_decoder_ticks_to_ns(d, f[6]);
	fa->self_ns = event_decoder_ticks_to_ns(d, f[7]);
	fa->max_ns = event_decoder_ticks_to_ns(d, f[8]);
	fa->values_dropped = f[9] > f[1] ? f[1] : f[9];
	if (!(p = event_get_varint(p, end, &used)) || used > AGG_BUCKETS)
		return NULL;
	for (uint64_t b = 0; b < used; b++) {
		if (!(p = event_get_varint(p, end, &v)) || v >= AGG_BUCKETS - index)
			return NULL;
		index += v;
		if (!(p = event_get_varint(p, end, &v)) || v > UINT32_MAX)
			return NULL;
		fa->hist[index++] = (uint32_t)v;
	}
	return p;
}

/* An AGGREGATES chunk (proto/func_aggregates.h); -EBADMSG if it does not decode. */
static int deliver_aggregates(const struct event_decoder *d, const struct event_chunk_header *h,
			      const uint8_t *body, const struct event_decoder_callbacks *cb,
			      void *ctx)
{
	const uint8_t *p = body, *end = body + h->len;
	struct decoded_thread_drops td;
	struct decoded_func_agg fa;

	p = get_varints(p, end, td.by_reason, AGG_DROP_REASONS);
	if (!p || !(p = event_get_varint(p, end, &td.unattributed)))
		return -EBADMSG;
	if (!(p = get_varints(p, end, td.filtered_by, AGG_FILTER_REASONS)))
		return -EBADMSG;
	if (cb->thread_drops)
		cb->thread_drops(ctx, h->tid, &td);
	for (uint32_t i = 0; i < h->count; i++) {
		if (!(p = get_func_agg(d, p, end, &fa)))
			return -EBADMSG;
		if (cb->func_agg)
			cb->func_agg(ctx, h->tid, &fa);
	}
	return p == end ? 0 : -EBADMSG;
}

static int deliver_chunks(struct event_decoder *d, const uint8_t *buf, size_t len,
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

		if (cb->map_tid) /* another PID namespace: the agent numbers threads its way */
			h.tid = cb->map_tid(ctx, h.tid);

		switch (h.kind) {
		case EVENT_CHUNK_EVENTS:
		case EVENT_CHUNK_EVENTS32:
			if (deliver_events(d, &h, body, cb, ctx))
				return -EILSEQ;
			break;
		case EVENT_CHUNK_AGGREGATES:
			if (deliver_aggregates(d, &h, body, cb, ctx))
				return -EILSEQ;
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

/* Both kinds of frame, once their chunks are in buf. */
static int decode_chunks(struct event_decoder *d, const uint8_t *buf, size_t len,
			 const struct event_decoder_callbacks *cb, void *ctx, char *err,
			 size_t errlen)
{
	int r = collect_pairs(d, buf, len);

	if (r == -ERANGE) {
		snprintf(err, errlen, "event stream clock pair goes backwards");
		return -EBADMSG;
	}
	if (r < 0) {
		snprintf(err, errlen, r == -EPROTO ? "unknown event chunk kind"
						   : "truncated event chunk");
		return -EBADMSG;
	}
	if (d->n_pairs < 2 && len > 0) {
		/* Records cannot be placed in time yet; the agent always sends two pairs first. */
		snprintf(err, errlen, "event records before two clock pairs");
		return -EBADMSG;
	}
	r = deliver_chunks(d, buf, len, cb, ctx);
	if (r == -EILSEQ) {
		snprintf(err, errlen, "an event or aggregates chunk does not decode");
		return -EBADMSG;
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
	return decode_chunks(d, d->buf, out_len, cb, ctx, err, errlen);
}

int event_decoder_feed_raw(struct event_decoder *d, const uint8_t *payload, size_t len,
			   const struct event_decoder_callbacks *cb, void *ctx, char *err,
			   size_t errlen)
{
	if (len > EVENT_FRAME_DECOMPRESSED_MAX) {
		snprintf(err, errlen, "event frame of %zu bytes, past %u", len,
			 EVENT_FRAME_DECOMPRESSED_MAX);
		return -EMSGSIZE;
	}
	return decode_chunks(d, payload, len, cb, ctx, err, errlen);
}
