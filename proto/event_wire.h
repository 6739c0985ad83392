/* SPDX-License-Identifier: MIT */
/*
 * The decompressed content of FRAME_EVENTS frames: a sequence of chunks,
 * each a fixed 24-byte header then its body. The agent writes it, the daemon
 * decodes it (daemon/events/event_decoder.c) treating every field as hostile.
 * One zstd stream per connection; each frame ends at a ZSTD_e_flush boundary,
 * so each frame decompresses to whole chunks.
 */
#ifndef PROFD_EVENT_WIRE_H
#define PROFD_EVENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wire values: never renumber. */
enum event_chunk_kind {
	EVENT_CHUNK_RECORDS = 1,     /* retired (raw ring units); never reused */
	EVENT_CHUNK_CLOCK_PAIR = 2,  /* body: struct event_clock_pair; every record before it has tsc <= pair.tsc */
	EVENT_CHUNK_THREAD_NAME = 3, /* body: 16 bytes, NUL-padded comm of tid */
	EVENT_CHUNK_THREAD_EXIT = 4, /* no body: tid will send no more records */
	EVENT_CHUNK_EVENTS = 5,      /* body: `count` events of tid, compact (below), `len` bytes */
	EVENT_CHUNK_AGGREGATES = 6,  /* body: tid's per-function aggregates (proto/func_aggregates.h) */
	EVENT_CHUNK_EVENTS32 = 7,    /* body: `count` events of tid in words (below), `len` bytes */
};

enum event_kind {
	EVENT_ENTER = 1,
	EVENT_EXIT = 2,
	EVENT_VALUES = 3, /* EVENTS chunks only: the values of the event before it (below) */
	EVENT_ENTER_SEEN = 0, /* EVENTS chunks only: an ENTER whose frame the chunk had (below) */
};

struct event_chunk_header {
	uint32_t kind;
	uint32_t tid;
	uint32_t count;      /* records (RECORDS), events (EVENTS) or functions (AGGREGATES), else 0 */
	uint32_t len;        /* body bytes of EVENTS and AGGREGATES chunks, else 0 */
	uint64_t drops;      /* cumulative calls of this thread kept off the timeline so far */
};

/*
 * One instrumented event: raw TSC, converted to CLOCK_MONOTONIC by the daemon.
 * An EVENT_ENTER record is always followed, in the same chunk, by a struct
 * event_enter_frame: the 16-byte units of a chunk's body are records and
 * frames, told apart by the top bit of their last 32-bit word.
 */
struct event_record {
	uint64_t tsc;
	uint32_t func_id;
	uint32_t kind;       /* enum event_kind; top bit clear */
};

/*
 * Where the entered call's return address lived and what it was before the
 * agent hijacked it: the daemon puts it back into sampled stacks (a sample
 * inside the call otherwise sees the exit trampoline instead of its caller).
 */
struct event_enter_frame {
	uint64_t return_address;
	uint64_t return_slot;
};

/*
 * The retired RECORDS chunk's frames had this bit set in their slot (the
 * tests' hostile streams still write them); the ring's frames no longer do:
 * the flusher knows an ENTER's frame is the unit after it (two instructions
 * less per call in the hooks, bench/README.md "Instructions per call").
 */
#define EVENT_FRAME_TAG (1ull << 63)

/*
 * EVENT_CHUNK_EVENTS: the ring's records, compacted by the flusher so that
 * the stream costs a few bytes per event before zstd. The body starts with
 * the chunk's base TSC (varint); then per event a tag varint
 * (tsc - previous tsc) << 2 | kind, where kind is EVENT_ENTER or EVENT_EXIT,
 * then the function id (varint); an enter adds its frame: the return
 * address and the return slot, each as a zigzag varint of the difference
 * from the thread's previous enter in this chunk (0 before the first).
 * Timestamps never go backwards within a thread.
 *
 * The frames an ENTER gave are remembered for the rest of its chunk (struct
 * event_frames, both ends alike): EVENT_FRAME_WAYS per set, the set
 * func_id % EVENT_FRAME_SETS, each ENTER's frame stored at its set's next
 * way in turn. An enter whose frame its set holds is an EVENT_ENTER_SEEN
 * instead: its tag, then the varint func_id << 2 | way, and no frame (a
 * loop's calls cost 2-3 bytes instead of 5-7, and its frames are neither
 * encoded nor decoded again). A SEEN naming a way that holds another
 * function's frame is malformed. Streams without it decode alike.
 */
#define EVENT_TAG_KIND_BITS 2
#define EVENT_VARINT_MAX 10
#define EVENT_FRAME_SETS 64
#define EVENT_FRAME_WAYS 4 /* the 2 low bits of a SEEN's varint */

/* The frames of a chunk's ENTERs, by function: func and next zeroed for each chunk. */
struct event_frames {
	uint32_t func[EVENT_FRAME_SETS * EVENT_FRAME_WAYS]; /* func_id + 1; 0: empty */
	uint8_t next[EVENT_FRAME_SETS];                     /* the way the next ENTER takes */
	uint64_t ret[EVENT_FRAME_SETS * EVENT_FRAME_WAYS], slot[EVENT_FRAME_SETS * EVENT_FRAME_WAYS];
};

/* An ENTER's frame goes into its function's set. */
static inline void event_frames_reset(struct event_frames *f)
{
	__builtin_memset(f->func, 0, sizeof(f->func));
	__builtin_memset(f->next, 0, sizeof(f->next));
}

static inline void event_frames_put(struct event_frames *f, uint32_t func_id, uint64_t ret,
				    uint64_t slot)
{
	uint32_t set = func_id % EVENT_FRAME_SETS;
	uint32_t i = set * EVENT_FRAME_WAYS + f->next[set]++ % EVENT_FRAME_WAYS;

	f->func[i] = func_id + 1;
	f->ret[i] = ret;
	f->slot[i] = slot;
}

static inline uint8_t *event_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads a varint below end; NULL when it is truncated or longer than 10 bytes. */
static inline const uint8_t *event_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
		uint8_t b = *p++;

		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return p;
		}
	}
	return NULL;
}

static inline uint64_t event_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t event_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/*
 * EVENT_CHUNK_EVENTS32: the same items, but each event's tag and function
 * id in one little-endian 32-bit word instead of two varints (a decoder
 * takes it at once, where each varint's place waited on the length of the
 * one before): kind | delta << 3 | id << 18, with delta (tsc - previous
 * tsc) under 2^15 and id (the function id, a SEEN's func_id << 2 | way)
 * under 2^14. A wider one is the word kind | EVENT_WORD_WIDE, then delta
 * and id as varints. An ENTER's frame and a VALUES item (its varint tag's
 * low bits are its kind, as a word's) follow as in EVENT_CHUNK_EVENTS.
 */
#define EVENT_WORD_WIDE 4u
#define EVENT_WORD_DELTA_MAX (1u << 15)
#define EVENT_WORD_ID_MAX (1u << 14)

static inline uint8_t *event_put_word(uint8_t *p, uint32_t kind, uint64_t delta, uint64_t id)
{
	uint32_t w;

	if (delta < EVENT_WORD_DELTA_MAX && id < EVENT_WORD_ID_MAX) {
		w = kind | (uint32_t)delta << 3 | (uint32_t)id << 18;
		__builtin_memcpy(p, &w, sizeof(w));
		return p + sizeof(w);
	}
	w = kind | EVENT_WORD_WIDE;
	__builtin_memcpy(p, &w, sizeof(w));
	return event_put_varint(event_put_varint(p + sizeof(w), delta), id);
}

/*
 * The deltas' bases of one EVENTS chunk being written: zero it for each
 * chunk, and its frames (NULL: every ENTER goes whole). words: the chunk
 * is an EVENT_CHUNK_EVENTS32.
 */
struct event_encoder {
	uint64_t prev_tsc, prev_ret, prev_slot;
	uint32_t count;
	struct event_frames *frames;
	bool words;
};

/* An event's tag and id, as the chunk's kind has them. */
static inline uint8_t *event_put_tag(const struct event_encoder *e, uint8_t *p, uint32_t kind,
				     uint64_t delta, uint64_t id)
{
	if (e->words)
		return event_put_word(p, kind, delta, id);
	return event_put_varint(event_put_varint(p, delta << EVENT_TAG_KIND_BITS | kind), id);
}

/* The way of func_id's set that holds this frame, or -1. */
static inline int event_frames_find(const struct event_frames *f, uint32_t func_id, uint64_t ret,
				    uint64_t slot)
{
	uint32_t i = func_id % EVENT_FRAME_SETS * EVENT_FRAME_WAYS;

	for (int w = 0; w < EVENT_FRAME_WAYS; w++, i++)
		if (f->func[i] == func_id + 1 && f->ret[i] == ret && f->slot[i] == slot)
			return w;
	return -1;
}

/*
 * Appends one event (ret and slot: an enter's frame, ignored otherwise); p
 * has EVENT_WORST. kind EVENT_ENTER may go out as an EVENT_ENTER_SEEN.
 */
static inline uint8_t *event_encode(struct event_encoder *e, uint8_t *p, uint64_t tsc,
				    uint32_t func_id, uint32_t kind, uint64_t ret, uint64_t slot)
{
	int way;

	if (e->count++ == 0) {
		e->prev_tsc = tsc;
		p = event_put_varint(p, tsc);
	}
	if (tsc < e->prev_tsc) /* a TSC a few ticks behind after a migration: the thread's order holds */
		tsc = e->prev_tsc;
	if (kind == EVENT_ENTER && e->frames &&
	    (way = event_frames_find(e->frames, func_id, ret, slot)) >= 0) {
		p = event_put_tag(e, p, EVENT_ENTER_SEEN, tsc - e->prev_tsc,
				  (uint64_t)func_id << 2 | (uint64_t)way);
		e->prev_tsc = tsc;
		e->prev_ret = ret;
		e->prev_slot = slot;
		return p;
	}
	p = event_put_tag(e, p, kind, tsc - e->prev_tsc, func_id);
	e->prev_tsc = tsc;
	if (kind == EVENT_ENTER) {
		p = event_put_varint(p, event_zigzag((int64_t)(ret - e->prev_ret)));
		p = event_put_varint(p, event_zigzag((int64_t)(slot - e->prev_slot)));
		e->prev_ret = ret;
		e->prev_slot = slot;
		if (e->frames)
			event_frames_put(e->frames, func_id, ret, slot);
	}
	return p;
}

/* Worst case of one encoded event (its first: the base too), in either kind of chunk. */
#define EVENT_WORST (4 + 5 * EVENT_VARINT_MAX)

/*
 * EVENT_VALUES (--args/--retval, issue 29): the arguments of the ENTER, or
 * the return value of the EXIT, just before it in the same chunk; counted
 * in the chunk's `count` like an event. Its tag is n << 2 | EVENT_VALUES:
 * n values (1 to EVENT_VALUES_MAX), no time passes and no function id
 * follows. Then per value its descriptor varint (common/arg_spec.h,
 * arg_item_desc: where it lived, its class and size) and its payload by
 * class: ARG_CLASS_INT a zigzag varint; ARG_CLASS_FLOAT 4 or 8 bytes
 * little-endian (its size); ARG_CLASS_STR a varint len << 2 | EVENT_STR_*
 * then len bytes (no NUL), or with EVENT_STR_INVALID the pointer as a
 * varint and no bytes; every other class a varint of the value cut to its
 * size. Streams without values are as before: an old stream decodes alike.
 */
#define EVENT_VALUES_MAX 9
#define EVENT_STR_CUT 1u     /* the string went on past the copy limit (or into unreadable memory) */
#define EVENT_STR_INVALID 2u /* the pointer could not be read at all */
#define EVENT_STR_BYTES_MAX 1024u
/* Worst case of one value, and of one VALUES item */
#define EVENT_VALUE_WORST (3 * EVENT_VARINT_MAX + EVENT_STR_BYTES_MAX)
#define EVENT_VALUES_WORST (EVENT_VARINT_MAX + EVENT_VALUES_MAX * EVENT_VALUE_WORST)

/* Starts a VALUES item of n values (the caller then puts each one). */
static inline uint8_t *event_encode_values_tag(struct event_encoder *e, uint8_t *p, uint32_t n)
{
	e->count++;
	return event_put_varint(p, (uint64_t)n << EVENT_TAG_KIND_BITS | EVENT_VALUES);
}

/* A TSC reading and the CLOCK_MONOTONIC time taken at the same instant. */
struct event_clock_pair {
	uint64_t tsc;
	uint64_t mono_ns;
};

#define EVENT_THREAD_NAME_LEN 16
/* One frame's decompressed size is at most this (zip-bomb bound for the daemon). */
#define EVENT_FRAME_DECOMPRESSED_MAX (16u << 20)

_Static_assert(sizeof(struct event_chunk_header) == 24, "wire layout");
_Static_assert(sizeof(struct event_record) == 16, "wire layout");
_Static_assert(sizeof(struct event_enter_frame) == 16, "wire layout");
_Static_assert(sizeof(struct event_clock_pair) == 16, "wire layout");

#endif
