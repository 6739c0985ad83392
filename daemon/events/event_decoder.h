/* SPDX-License-Identifier: MIT */
/*
 * Decodes an agent's FRAME_EVENTS payloads: one zstd stream per connection,
 * each frame decompressed under a hard output bound, then its chunks
 * (proto/event_wire.h) validated field by field and delivered with TSC
 * timestamps converted to CLOCK_MONOTONIC by piecewise-linear interpolation
 * between the agent's clock pairs. Every byte is hostile.
 */
#ifndef PROFD_EVENT_DECODER_H
#define PROFD_EVENT_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arg_spec.h"
#include "proto/event_wire.h"
#include "proto/func_aggregates.h"

struct event_decoder;

/*
 * One captured value (--args/--retval, proto/event_wire.h EVENT_VALUES):
 * where it lived and how to show it (item, from its checked descriptor),
 * the value cut to its size (sign-extended for ARG_CLASS_INT, the bits of
 * an f32/f64 for ARG_CLASS_FLOAT, the pointer of an invalid string), and a
 * string's bytes: in the frame being fed, valid during the callback only.
 */
struct decoded_value {
	struct arg_item item;
	uint64_t value;
	const uint8_t *str;
	uint32_t str_len;
	uint32_t str_flags;        /* EVENT_STR_CUT, EVENT_STR_INVALID */
};

/* One record as delivered: an enter carries the frame it hijacked. */
struct decoded_event {
	uint64_t mono_ns;
	uint32_t func_id;
	uint32_t kind;             /* EVENT_ENTER, EVENT_EXIT, or any other value (unchecked) */
	uint64_t return_address;   /* EVENT_ENTER only: the caller's return address */
	uint64_t return_slot;      /* EVENT_ENTER only: where it lived on the stack */
	/* an ENTER's arguments or an EXIT's return value (n_values 0: none) */
	const struct decoded_value *values;
	uint32_t n_values;
};

/* One function's figures on one thread, cumulative (proto/func_aggregates.h). */
struct decoded_func_agg {
	uint32_t func_id;
	uint64_t entered, exited, untimed, unrecorded, filtered;
	uint64_t total_ns, self_ns, max_ns;
	uint64_t values_dropped;         /* recorded without their values: no room */
	uint32_t hist[AGG_BUCKETS];      /* low 32 bits of each bucket's cumulative count */
};

/* The thread-wide part of an aggregates chunk. */
struct decoded_thread_drops {
	uint64_t by_reason[AGG_DROP_REASONS]; /* enum agg_drop_reason, cumulative */
	uint64_t unattributed;
	uint64_t filtered_by[AGG_FILTER_REASONS]; /* enum agg_filter_reason, cumulative */
};

/* The most events the events callback gets at once. */
#define EVENT_DECODER_BATCH_MAX 256

/*
 * profd's per-event path: one EVENTS chunk read in the caller's own loop,
 * an event at a time, with no array of decoded events in between (the
 * batch callback's records were written, then read again: a third of the
 * decoder's time). event_reader_plain decodes the usual events a few at a
 * time, event_reader_next any item. The fields are event_decoder.c's.
 */
/*
 * The clock segment of the last TSC converted, where one multiply converts
 * exactly: tsc - lo < span (0: nowhere), mono = a_mono + (x * q64) >> 64
 * with x = tsc - lo and q64 = ceil(2^64 * dm / dt) (event_decoder.c).
 */
struct event_convert {
	uint64_t lo, span, a_mono, q64;
};
struct event_reader {
	const uint8_t *p, *end;
	uint64_t tsc, ret, slot;  /* the deltas' bases */
	uint64_t last_ts;         /* the last event's mono_ns: the chunk's drops are dated by it */
	uint32_t left;            /* items (events and their VALUES) not read yet */
	bool words;               /* an EVENT_CHUNK_EVENTS32 (proto/event_wire.h) */
	struct event_convert cc;
	struct event_frames *frames; /* the chunk's (proto/event_wire.h) */
	struct event_decoder *d;
};

/* An ENTER (with the frame it hijacked) or an EXIT, without values. */
struct event_plain {
	uint64_t mono_ns;
	uint64_t return_address, return_slot; /* EVENT_ENTER only */
	uint32_t func_id, kind;
};

struct event_decoder_callbacks {
	/*
	 * One EVENTS chunk of a thread (set this, events or record): the
	 * callback reads every item of r, in order; 0, or a negative errno
	 * (what event_reader_next returned).
	 */
	int (*chunk)(void *ctx, uint32_t tid, struct event_reader *r);
	/* one thread's events in stream order, n at a time (set this or record) */
	void (*events)(void *ctx, uint32_t tid, const struct decoded_event *ev, size_t n);
	void (*record)(void *ctx, uint32_t tid, const struct decoded_event *ev);
	/* every record delivered before it has mono_ns <= this (may be NULL) */
	void (*watermark)(void *ctx, uint64_t mono_ns);
	void (*thread_name)(void *ctx, uint32_t tid, const char *name);
	void (*thread_exit)(void *ctx, uint32_t tid); /* may be NULL, like drops */
	/* cumulative drops of tid, reported when they change */
	void (*drops)(void *ctx, uint32_t tid, uint64_t drops, uint64_t mono_ns);
	/* an aggregates chunk: the thread's drop counters, then each function's figures */
	void (*thread_drops)(void *ctx, uint32_t tid, const struct decoded_thread_drops *td);
	void (*func_agg)(void *ctx, uint32_t tid, const struct decoded_func_agg *fa);
	/* the tid every callback above gets for the agent's tid (may be NULL: unchanged) */
	uint32_t (*map_tid)(void *ctx, uint32_t agent_tid);
};

struct event_decoder *event_decoder_new(void);
void event_decoder_free(struct event_decoder *d);

/*
 * Feeds one frame. Returns 0, or a negative errno with a one-line reason in
 * err: -EMSGSIZE (decompresses past EVENT_FRAME_DECOMPRESSED_MAX), -EBADMSG
 * (corrupt zstd data, truncated or unknown chunk, an event or aggregate that
 * does not decode, time going backwards). Events of the frame before a
 * malformed chunk may have been delivered.
 * After an error the stream cannot continue: drop the connection.
 */
int event_decoder_feed(struct event_decoder *d, const uint8_t *payload, size_t len,
		       const struct event_decoder_callbacks *cb, void *ctx, char *err,
		       size_t errlen);

/*
 * Feeds one FRAME_EVENTS_RAW payload: the same chunks, not compressed (the
 * agent's choice; both kinds may follow each other). Same returns.
 */
int event_decoder_feed_raw(struct event_decoder *d, const uint8_t *payload, size_t len,
			   const struct event_decoder_callbacks *cb, void *ctx, char *err,
			   size_t errlen);

/*
 * The next item of r, whatever it is: an event and the values after it (in
 * values: room for EVENT_VALUES_MAX, valid until the next frame is fed).
 * Returns 1, 0 when the chunk has no item left, or -EBADMSG (malformed:
 * the stream cannot go on).
 */
int event_reader_next(struct event_reader *r, struct decoded_event *ev,
		      struct decoded_value *values);

/*
 * Up to max of r's next items, as long as each is a plain event whose
 * varints are one or two bytes each (a word without a wide tail in an
 * EVENT_CHUNK_EVENTS32), no VALUES follow it and its time is in the cached
 * clock segment (nearly all), decoded into out; r moves past them. Returns
 * how many: fewer than max (0 too) when the next item is not one of those:
 * ask event_reader_next for it.
 */
size_t event_reader_plain(struct event_reader *r, struct event_plain *out, size_t max);

/*
 * As event_reader_plain, for a caller that does not read the enters'
 * frames: out's return_address and return_slot are left unset (fewer
 * loads and stores per event). r moves on exactly as with event_reader_plain.
 */
size_t event_reader_calls(struct event_reader *r, struct event_plain *out, size_t max);

/* TSC -> CLOCK_MONOTONIC with the pairs seen so far; 0 if fewer than two. */
uint64_t event_decoder_convert(const struct event_decoder *d, uint64_t tsc);

/* A duration in TSC ticks in ns, at the rate over all pairs seen; 0 if fewer than two. */
uint64_t event_decoder_ticks_to_ns(const struct event_decoder *d, uint64_t ticks);

#endif
