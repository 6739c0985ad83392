// SPDX-License-Identifier: MIT
/*
 * Flusher thread: every few milliseconds (and when a thread fills a ring
 * segment) drains all thread rings into a staging buffer of compact event
 * chunks and sends it, as is (FRAME_EVENTS_RAW; or compressed, see
 * EVENTS_COMPRESSED). If the daemon stops reading, sends fail after a
 * timeout, recording stops, and target threads only ever see full buffers
 * (drops counted), never a blocked call. When the daemon is gone the flusher
 * has the agent unpatch, closes the socket and exits.
 */
#define PR_FMT "profagent: "

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/arg_capture.h"
#include "agent/cpu_ticks.h"
#include "agent/flusher.h"
#include "agent/thread_start.h"
#include "common/mono_clock.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define unlikely(x) __builtin_expect(!!(x), 0)

#define FLUSH_INTERVAL_NS (5 * 1000 * 1000)
/* How often a thread's aggregates go out while it runs (and always at its exit and at stop). */
#define AGGREGATES_INTERVAL_NS (250ull * 1000 * 1000)
#define TRIM_INTERVAL_NS (250ull * 1000 * 1000)
/*
 * A frame's most: profd holds the frame being read whole (2 MiB, kept while
 * the agent streams: frame_reader_keep), and the worst chunk is a quarter.
 */
#define STAGE_CAPACITY (2u << 20)
/*
 * The events go to a daemon on the same machine, already delta-encoded (about 4
 * bytes each), as they are: zstd took 62 % of the flusher's CPU on the python
 * json round trip (10.3 ns per event, 5.4 without) and about 15 % of profd's,
 * to save socket copies that cost far less. (profd still reads the zstd
 * stream, FRAME_EVENTS, that earlier agents sent.)
 */
/*
 * A stop waits for the flusher as long as it sends a frame at least every
 * STOP_IDLE_S (a large final drain on a loaded machine outlasts any fixed
 * wait), STOP_MAX_S in all: a stuck daemon must not hold the target's exit,
 * and a detach runs this in a call profctl gives up on after 15 s.
 */
#define STOP_IDLE_S 3
/* Each send of the flusher thread's (flusher_setup says why so long). */
#define SEND_TIMEOUT_S 30
#define STOP_MAX_S 12
/* A run commits right after the flusher starts; an attach may stop between the two. */
#define RELEASE_WAIT_NS (2000ull * 1000 * 1000)
/* At detach: how long calls already entered get to return (and record their exit). */
#define RETURN_WAIT_NS (100ull * 1000 * 1000)
#define RETURN_POLL_NS (1000 * 1000)
/*
 * A deferred start found the slow path unsafe (a handler may run): the next
 * try after this, twice as long after each refusal up to the last (a
 * process where it never is safe pays 64 sigaction calls a second).
 */
#define DEFERRED_RETRY_FIRST_NS (5 * 1000 * 1000)
#define DEFERRED_RETRY_LAST_NS (1000 * 1000 * 1000)

enum { FLUSHER_NOT_DEFERRED, FLUSHER_DEFERRED, FLUSHER_STARTING };

/* One flusher per process: the agent is a per-process singleton. */
static struct flusher {
	pid_t owner; /* the process that started it: a vfork child shares this memory */
	int sock;
	uint8_t *stage;
	size_t stage_len;
	pthread_t thread;
	pthread_mutex_t lock;
	_Atomic uint32_t pokes;  /* futex word: moves when a thread wants a drain now */
	int running;
	int stop_requested;
	int failed;
	const char *stop_reason;
	bool let_calls_return; /* detach: calls entered before the unpatch may still return */
	_Atomic uint64_t events;
	_Atomic uint64_t dropped;
	int final_cycle;         /* the last drain: every thread's aggregates go out */
	/*
	 * Held by whoever drains: the flusher thread for each cycle and its
	 * last one, the exiting thread for the process's final drain
	 * (flusher_exit_drain). exit_drained: that drain is done, the flusher
	 * thread has nothing more to do.
	 */
	pthread_mutex_t cycle_lock;
	int exit_drained;
	int threadless;            /* no thread (yet): the exit drain sends */
	/*
	 * flusher_start_deferred: the thread is started by a hook's slow path
	 * (flusher_start_if_due), once start_after_ns has passed or the rings
	 * fill, where starting one is safe. FLUSHER_STARTING while one tries.
	 */
	_Atomic int deferred;
	_Atomic uint64_t start_after_ns;
	uint64_t retry_ns; /* after the next refusal; the thread in FLUSHER_STARTING writes it */
	uint64_t exit_deadline_ns; /* the exit drain's: past it, its sends give up */
	uint64_t trimmed_ns;     /* when unused ring segments were last handed back */
	struct event_clock_pair initial_pair;
	int initial_pair_pending;
	/* set once the functions are patched: no lock, the patching thread may be alone */
	_Atomic int released;
	_Atomic int exited;      /* the flusher thread has returned */
	_Atomic int table_pending; /* more functions were instrumented (a module was loaded) */
	/*
	 * Held while new functions are patched (by a thread in dlopen) and while
	 * the flusher sends the table and drains: no event reaches the daemon
	 * before the table that names its function.
	 */
	pthread_mutex_t table_lock;
	int table_sent;
	const struct flusher_ops *ops;
	void *table_ctx;
	/* the exit drain's frames, written at its end in one send (flusher_send_frame) */
	struct frame_batch exit_batch;
	int batching;
} flusher = { .sock = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
	       .table_lock = PTHREAD_MUTEX_INITIALIZER, .cycle_lock = PTHREAD_MUTEX_INITIALIZER };

/* The exit drain's frames: a short process's table, events and goodbye fit. */
static uint8_t exit_batch_buf[64 << 10];

int flusher_send_frame(int fd, uint32_t type, const void *payload, size_t len)
{
	if (flusher.batching && fd == flusher.sock)
		return frame_batch_add(&flusher.exit_batch, type, payload, len);
	return frame_send(fd, type, payload, len, -1);
}

void flusher_read_clock_pair(struct event_clock_pair *pair)
{
	uint64_t best_span = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		struct timespec ts;
		uint64_t before = cpu_ticks();

		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t after = cpu_ticks();

		if (after - before < best_span) {
			best_span = after - before;
			pair->tsc = before + (after - before) / 2;
			pair->mono_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
	}
}

static int flusher_send_stage(void)
{
	/* the exit drain's sends are bounded (SO_SNDTIMEO each) and so is their sum */
	if (flusher.exit_deadline_ns && !flusher.failed && mono_clock_ns() > flusher.exit_deadline_ns)
		flusher.failed = -ETIMEDOUT;
	if (flusher.stage_len && !flusher.failed &&
	    flusher_send_frame(flusher.sock, FRAME_EVENTS_RAW, flusher.stage,
			       flusher.stage_len) < 0)
		flusher.failed = -EPIPE;
	flusher.stage_len = 0;
	/* a stop waits while it moves (flusher_join, go_exit_flush) */
	atomic_fetch_add(&agent_flush_progress, 1);
	return flusher.failed;
}

#define CLOCK_PAIR_CHUNK_LEN (sizeof(struct event_chunk_header) + sizeof(struct event_clock_pair))

/*
 * Ends the frame with a clock pair read now: every record staged before it
 * was written earlier, so the daemon can place all of them in time.
 */
static void flusher_end_frame(void)
{
	struct event_chunk_header h = { .kind = EVENT_CHUNK_CLOCK_PAIR };
	struct event_clock_pair pair;

	flusher_read_clock_pair(&pair);
	memcpy(flusher.stage + flusher.stage_len, &h, sizeof(h));
	memcpy(flusher.stage + flusher.stage_len + sizeof(h), &pair, sizeof(pair));
	flusher.stage_len += CLOCK_PAIR_CHUNK_LEN;
	flusher_send_stage();
}

/*
 * Stage room for up to `worst` bytes, always leaving room for the frame's
 * closing clock pair: a variable-length chunk's end is set by stage_commit().
 * Never more than STAGE_CAPACITY / 4 at a time.
 */
static uint8_t *stage_open(size_t worst)
{
	if (flusher.stage_len + worst + CLOCK_PAIR_CHUNK_LEN > STAGE_CAPACITY)
		flusher_end_frame();
	return flusher.stage + flusher.stage_len;
}

/* Room for exactly len bytes. */
static void *flusher_reserve(size_t len)
{
	uint8_t *p = stage_open(len);

	flusher.stage_len += len;
	return p;
}

static void flusher_put_chunk(uint32_t kind, uint32_t tid, uint32_t count, uint64_t drops,
			      const void *body, size_t body_len)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .drops = drops };
	uint8_t *p = flusher_reserve(sizeof(h) + body_len);

	memcpy(p, &h, sizeof(h));
	if (body_len)
		memcpy(p + sizeof(h), body, body_len);
}

static void stage_commit(const uint8_t *end)
{
	flusher.stage_len = (size_t)(end - flusher.stage);
}

#define EVENTS_PER_CHUNK 8192u

/* Where the drain of one thread stands: ring position and the deltas' bases. */
struct event_cursor {
	struct agent_thread *t;
	uint64_t pos, head;
	uint64_t events;
};

/* The segment of a span: published by the owner before the head that covers it (the drain's acquire). */
static const struct event_record *span_segment(struct agent_thread *t, uint64_t span)
{
	return atomic_load_explicit(&t->seg_map[span % SEGMENT_SLOTS], memory_order_relaxed);
}

/*
 * An ENTER or EXIT whose kind says values follow it (agent/arg_capture.h):
 * the event, then its VALUES item; *pos moves past its units (same segment).
 */
static uint8_t *encode_with_values(struct event_encoder *enc, uint8_t *p,
				   const struct event_record *seg, uint64_t *pos,
				   const struct event_record *r)
{
	uint32_t kind = r->kind & ((1u << ARG_KIND_UNITS_SHIFT) - 1), n = r->kind >> ARG_KIND_UNITS_SHIFT;
	uint64_t at = *pos + 1;

	if (kind == EVENT_ENTER) {
		const struct event_enter_frame *f = (const void *)&seg[at % SEGMENT_SPAN];

		p = event_encode(enc, p, r->tsc, r->func_id, kind, f->return_address,
				 f->return_slot);
		at++;
	} else {
		p = event_encode(enc, p, r->tsc, r->func_id, kind, 0, 0);
	}
	p = arg_encode_values(enc, p, (const struct arg_unit *)&seg[at % SEGMENT_SPAN], n);
	*pos = at + n;
	return p;
}

/* A varint, the one- and two-byte ones (nearly all a chunk has) without a loop. */
static inline uint8_t *put_varint_short(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {
		*p = (uint8_t)v;
		return p + 1;
	}
	if (v < 0x4000) {
		p[0] = (uint8_t)(v | 0x80);
		p[1] = (uint8_t)(v >> 7);
		return p + 2;
	}
	return event_put_varint(p, v);
}

/*
 * The events of one segment from *pos_io up to limit, while the chunk has
 * room, into p: event_encode's bytes for an EVENT_CHUNK_EVENTS32 (the unit
 * tests' encoder), written here with its state in locals: a byte store may
 * alias the cursor and the encoder, and GCC reloaded and stored them around
 * every byte (and did not inline event_encode once it looked frames up).
 * Not inlined: in flusher_drain_thread GCC kept the loop's state on the
 * stack (66.6 instructions an event; 61.0 apart, 55.7 with the count bound
 * folded into the end: bench/hot_instructions.sh).
 */
static __attribute__((noinline)) uint8_t *
encode_span(const struct event_record *seg, uint64_t *pos_io, uint64_t limit,
	    struct event_encoder *enc_io, uint8_t *p, const uint8_t *p_stop)
{
	uint64_t pos = *pos_io, prev_tsc = enc_io->prev_tsc, prev_ret, prev_slot;
	struct event_frames *frames = enc_io->frames;
	uint32_t count = enc_io->count;

	prev_ret = enc_io->prev_ret;
	prev_slot = enc_io->prev_slot;
	/*
	 * The chunk's count bound folded into the end: an event takes a unit or
	 * more, an event with values (counted twice: the VALUES item is one of
	 * the chunk's events) two or more, so count - its start never passes pos
	 * - its start. The caller calls again for what is left of the chunk.
	 */
	if (limit - pos > EVENTS_PER_CHUNK - 1 - count)
		limit = pos + (EVENTS_PER_CHUNK - 1 - count);
	while (pos < limit && p < p_stop) {
		const struct event_record *r = &seg[pos % SEGMENT_SPAN];
		const struct event_enter_frame *f;
		uint64_t tsc = r->tsc, ret, slot, delta;
		uint32_t func_id = r->func_id, kind = r->kind;
		int way;

		if (unlikely(kind >> ARG_KIND_UNITS_SHIFT)) {
			struct event_encoder enc = { prev_tsc, prev_ret, prev_slot, count, frames, true };

			p = encode_with_values(&enc, p, seg, &pos, r);
			prev_tsc = enc.prev_tsc;
			prev_ret = enc.prev_ret;
			prev_slot = enc.prev_slot;
			count = enc.count;
			continue;
		}
		if (unlikely(count == 0)) { /* the chunk's base: its first event's time */
			prev_tsc = tsc;
			p = event_put_varint(p, tsc);
		}
		/* a TSC a few ticks behind after a migration: the thread's order holds */
		tsc = tsc < prev_tsc ? prev_tsc : tsc;
		delta = tsc - prev_tsc;
		prev_tsc = tsc;
		count++;
		if (kind != EVENT_ENTER) {
			p = event_put_word(p, kind, delta, func_id);
			pos++;
			continue;
		}
		f = (const void *)&seg[(pos + 1) % SEGMENT_SPAN]; /* its frame: same segment */
		ret = f->return_address;
		slot = f->return_slot;
		pos += 2;
		way = event_frames_find(frames, func_id, ret, slot);
		if (way >= 0) {
			p = event_put_word(p, EVENT_ENTER_SEEN, delta, (uint64_t)func_id << 2 | (uint64_t)way);
		} else {
			p = event_put_word(p, EVENT_ENTER, delta, func_id);
			p = put_varint_short(p, event_zigzag((int64_t)(ret - prev_ret)));
			p = put_varint_short(p, event_zigzag((int64_t)(slot - prev_slot)));
			event_frames_put(frames, func_id, ret, slot);
		}
		prev_ret = ret;
		prev_slot = slot;
	}
	*pos_io = pos;
	*enc_io = (struct event_encoder){ prev_tsc, prev_ret, prev_slot, count, frames, true };
	return p;
}

/*
 * Encodes up to EVENTS_PER_CHUNK events from c->pos as one EVENTS chunk
 * (proto/event_wire.h), releasing every segment it leaves behind.
 */
static void flusher_put_event_chunk(struct event_cursor *c, uint64_t drops)
{
	uint8_t *start = stage_open(sizeof(struct event_chunk_header) +
				    (size_t)EVENTS_PER_CHUNK * EVENT_WORST);
	uint8_t *p = start + sizeof(struct event_chunk_header);
	/* past it, one more event and its values might not fit what was staged */
	const uint8_t *p_stop = p + (size_t)EVENTS_PER_CHUNK * EVENT_WORST - EVENT_WORST -
				EVENT_VALUES_WORST;
	struct event_chunk_header h = { .kind = EVENT_CHUNK_EVENTS32, .tid = c->t->tid,
					.drops = drops };
	static struct event_frames frames; /* the flusher thread's */
	struct event_encoder enc = { .frames = &frames, .words = true };
	const struct event_record *seg;

	event_frames_reset(&frames);

	/* encode_span's own bounds: with any weaker one, a full chunk loops here forever */
	while (c->pos < c->head && enc.count < EVENTS_PER_CHUNK - 1 && p < p_stop) {
		uint64_t span = c->pos / SEGMENT_SPAN;
		uint64_t limit = span_read_limit(span, c->head, atomic_load_explicit(
			&c->t->span_end[span % SEGMENT_SLOTS], memory_order_relaxed));

		if (c->pos >= limit && limit < c->head) { /* the owner moved to the next span */
			segments_release(c->t, span);
			c->pos = (span + 1) * SEGMENT_SPAN;
			continue;
		}
		seg = span_segment(c->t, span); /* once per span, not per event */
		p = encode_span(seg, &c->pos, limit, &enc, p, p_stop);
	}
	h.count = enc.count;
	h.len = (uint32_t)(p - start - sizeof(h));
	memcpy(start, &h, sizeof(h));
	stage_commit(p);
	c->events += h.count;
}

/* Everything committed since the last drain, in chunks; an empty one still carries drops. */
static uint64_t flusher_put_events(struct agent_thread *t, uint64_t tail, uint64_t head,
				   uint64_t drops)
{
	struct event_cursor c = { .t = t, .pos = tail, .head = head };

	do
		flusher_put_event_chunk(&c, drops);
	while (c.pos < c.head);
	return c.events;
}

/* Worst case of one function's aggregates: the fixed figures and every bucket. */
#define AGG_WORST ((AGG_WIRE_FIELDS + 2) * EVENT_VARINT_MAX + AGG_BUCKETS * 2 * 5)
#define AGG_PER_CHUNK 256u

/*
 * a's histogram as t's owner counts it: the calls that left no EXIT in the
 * ring (profd counts the others' buckets from their events).
 */
static void read_histogram(struct func_agg *a, uint32_t *hist)
{
	for (uint32_t b = 0; b < AGG_BUCKETS; b++)
		hist[b] = __atomic_load_n(&a->hist[b], __ATOMIC_RELAXED);
}

static uint8_t *put_one_aggregate(uint8_t *p, uint32_t func_id, struct func_agg *a)
{
	uint32_t hist[AGG_BUCKETS], used = 0, prev = 0;

	uint64_t exited = __atomic_load_n(&a->exited, __ATOMIC_RELAXED);

	p = event_put_varint(p, func_id);
	p = event_put_varint(p, exited + a->open); /* entered */
	p = event_put_varint(p, exited);
	p = event_put_varint(p, __atomic_load_n(&a->untimed, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->unrecorded, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->filtered, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->total_ticks, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->self_ticks, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->max_ticks, __ATOMIC_RELAXED));
	p = event_put_varint(p, __atomic_load_n(&a->values_dropped, __ATOMIC_RELAXED));
	read_histogram(a, hist);
	for (uint32_t b = 0; b < AGG_BUCKETS; b++)
		used += hist[b] != 0;
	p = event_put_varint(p, used);
	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		if (!hist[b])
			continue;
		p = event_put_varint(p, b - prev);
		p = event_put_varint(p, hist[b]);
		prev = b + 1;
	}
	return p;
}

/*
 * What makes a function's figures worth sending again: it grows with every
 * call that enters, returns or runs untimed. A call that was open at the last
 * send and has returned since moves one from open to exited, so exited
 * weighs twice (open + exited alone would stay the same, and that call's
 * time would never be sent).
 */
static uint64_t agg_change_key(struct func_agg *a)
{
	return a->open + 2 * (__atomic_load_n(&a->exited, __ATOMIC_RELAXED) +
			      __atomic_load_n(&a->untimed, __ATOMIC_RELAXED));
}

/*
 * The thread's aggregates that changed since they were last sent, in
 * AGGREGATES chunks (proto/func_aggregates.h); the first chunk of a round
 * always goes, with the thread's drop counters.
 */
/*
 * t's open calls, counted into their functions' `open` for one send and
 * uncounted after it, exactly those. The owner pushes and pops meanwhile: an
 * entry read a moment stale points to one of t's pages all the same (they
 * live as long as t), and the next send corrects a call counted open as it
 * returned.
 */
static struct func_agg *open_counted[AGENT_SHADOW_CAPACITY]; /* flusher thread only */
static uint32_t n_open_counted;

static void count_open_calls(struct agent_thread *t)
{
	uint32_t depth = state_depth(atomic_load_explicit(&t->committed, memory_order_acquire));

	n_open_counted = 0;
	for (uint32_t i = 0; i < depth && i < AGENT_SHADOW_CAPACITY; i++) {
		struct func_agg *a = __atomic_load_n(&t->shadow[i].agg, __ATOMIC_RELAXED);

		if (a) {
			a->open++;
			open_counted[n_open_counted++] = a;
		}
	}
}

static void uncount_open_calls(void)
{
	for (uint32_t i = 0; i < n_open_counted; i++)
		open_counted[i]->open--;
	n_open_counted = 0;
}

/*
 * How many aggregate slots can hold figures: ids are 1 .. n, so a page's
 * slots past n were never written. Reading them anyway touched every page
 * of a thread's first page of figures (64 functions, 13 pages), a page
 * fault each in every short process's exit drain.
 */
static uint32_t aggregate_slots(void)
{
	if (!flusher.ops->functions)
		return (uint32_t)AGG_PAGES * AGG_PAGE_FUNCS;
	return flusher.ops->functions(flusher.table_ctx) + 1;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static void flusher_put_aggregates(struct agent_thread *t, uint64_t drops)
{
	uint32_t slots = aggregate_slots();
	/* pairs with the release in threads_map_agg_page(): pages below it are published */
	uint32_t end = min_u32(atomic_load_explicit(&t->agg_pages_end, memory_order_acquire),
			       (slots + AGG_PAGE_FUNCS - 1) / AGG_PAGE_FUNCS);
	uint32_t page = 0, slot = 0;
	int first = 1;

	count_open_calls(t);
	while (first || page < end) {
		uint8_t *start = stage_open(sizeof(struct event_chunk_header) +
					    (AGG_DROP_REASONS + 1 + AGG_FILTER_REASONS) *
						    EVENT_VARINT_MAX +
					    (size_t)AGG_PER_CHUNK * AGG_WORST);
		uint8_t *p = start + sizeof(struct event_chunk_header);
		struct event_chunk_header h = { .kind = EVENT_CHUNK_AGGREGATES, .tid = t->tid,
						.drops = drops };

		for (int i = 0; i < AGG_DROP_REASONS; i++)
			p = event_put_varint(p, atomic_load_explicit(&t->drop_reasons[i],
								     memory_order_relaxed));
		p = event_put_varint(p, atomic_load_explicit(&t->unattributed, memory_order_relaxed));
		for (int i = 0; i < AGG_FILTER_REASONS; i++)
			p = event_put_varint(p, atomic_load_explicit(&t->filtered_by[i],
								     memory_order_relaxed));
		for (; page < end && h.count < AGG_PER_CHUNK; page++, slot = 0) {
			/* pairs with the release in threads_map_agg_page() */
			struct func_agg *funcs =
				atomic_load_explicit(&t->agg_pages[page], memory_order_acquire);
			uint32_t in_page = min_u32(AGG_PAGE_FUNCS, slots - page * AGG_PAGE_FUNCS);

			for (; funcs && slot < in_page && h.count < AGG_PER_CHUNK; slot++) {
				struct func_agg *a = &funcs[slot];
				uint64_t key = agg_change_key(a);

				if (key == a->sent)
					continue;
				a->sent = key;
				p = put_one_aggregate(p, page * AGG_PAGE_FUNCS + slot, a);
				h.count++;
			}
			if (funcs && slot < in_page)
				break; /* the chunk is full: go on from this slot */
		}
		if (h.count || first) {
			h.len = (uint32_t)(p - start - sizeof(h));
			memcpy(start, &h, sizeof(h));
			stage_commit(p);
		}
		first = 0;
	}
	uncount_open_calls();
}

static void flusher_drain_thread(struct agent_thread *t, void *ctx)
{
	/* pairs with the release in state_publish() (agent/hooks.c) */
	uint64_t head = state_head(atomic_load_explicit(&t->committed, memory_order_acquire));
	uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
	uint64_t drops = thread_drops(t);
	int exited = atomic_load_explicit(&t->state, memory_order_acquire) == AGENT_THREAD_EXITED;
	const uint64_t *now = ctx;

	if (t->flusher_stage == FLUSHER_STAGE_NEW) {
		flusher_put_chunk(EVENT_CHUNK_THREAD_NAME, t->tid, 0, drops, t->name, sizeof(t->name));
		t->flusher_stage = FLUSHER_STAGE_NAMED;
		t->aggregates_sent_ns = *now;
	}
	if (head != tail || drops != t->drops_reported) {
		uint64_t events = flusher_put_events(t, tail, head, drops);

		atomic_fetch_add_explicit(&flusher.events, events, memory_order_relaxed);
		atomic_fetch_add_explicit(&flusher.dropped, drops - t->drops_reported,
					  memory_order_relaxed);
		t->drops_reported = drops;
		/* the records up to head are read: pairs with the acquire in ring_switch() */
		atomic_store_explicit(&t->tail, head, memory_order_release);
	}
	if (exited || flusher.final_cycle || *now - t->aggregates_sent_ns >= AGGREGATES_INTERVAL_NS) {
		flusher_put_aggregates(t, drops);
		t->aggregates_sent_ns = *now;
	}
	if (exited && t->flusher_stage == FLUSHER_STAGE_NAMED &&
	    state_head(atomic_load_explicit(&t->committed, memory_order_acquire)) == head) {
		flusher_put_chunk(EVENT_CHUNK_THREAD_EXIT, t->tid, 0, drops, NULL, 0);
		t->flusher_stage = FLUSHER_STAGE_EXIT_SENT;
	}
}

/*
 * What the daemon's end holds: -1 when it closed our connection (it exited
 * or ended the session: nobody listens), 1 when a frame of its waits, 0
 * when nothing does.
 */
static int daemon_readable(void)
{
	char byte;
	ssize_t n = recv(flusher.sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0)
		return 1;
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ? -1 : 0;
}

/*
 * The daemon's frames that wait (answers to what send_table asked), a few
 * per cycle, each handed to ops->frame under the table lock. Its first
 * byte is there: the rest of a frame the daemon wrote at once follows
 * within FRAME_WAIT_MS, or the stream is broken and the session with it.
 * Only the flusher waits here, never a target thread.
 */
#define FRAMES_PER_CYCLE 4
#define FRAME_WAIT_MS 1000

static void flusher_take_frames(void)
{
	struct frame_header hdr;
	uint8_t *payload;
	int r = 0;

	for (int i = 0; i < FRAMES_PER_CYCLE && !flusher.failed && (r = daemon_readable()) > 0;
	     i++) {
		if (frame_recv(flusher.sock, &hdr, &payload, NULL, FRAME_WAIT_MS) < 0) {
			flusher.failed = -EPROTO;
			return;
		}
		pthread_mutex_lock(&flusher.table_lock);
		if (flusher.ops->frame)
			flusher.ops->frame(flusher.table_ctx, flusher.sock, hdr.type, payload,
					   hdr.length);
		pthread_mutex_unlock(&flusher.table_lock);
		free(payload);
	}
	if (r < 0 && !flusher.failed)
		flusher.failed = -ECONNRESET;
}

static void flusher_cycle(void)
{
	uint64_t now;

	/* the daemon's answers only once the setup thread is done with the plan */
	if (!atomic_load_explicit(&flusher.released, memory_order_acquire)) {
		if (!flusher.failed && daemon_readable() < 0)
			flusher.failed = -ECONNRESET;
		return;
	}
	flusher_take_frames();
	if (flusher.failed)
		return;
	pthread_mutex_lock(&flusher.table_lock);
	if (!flusher.table_sent || atomic_exchange(&flusher.table_pending, 0)) {
		/* the daemon needs the names before any event */
		if (flusher.ops->send_table(flusher.table_ctx, flusher.sock) < 0)
			flusher.failed = -EPIPE;
		flusher.table_sent = 1;
	}
	if (flusher.initial_pair_pending) {
		flusher_put_chunk(EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, &flusher.initial_pair,
				  sizeof(flusher.initial_pair));
		flusher.initial_pair_pending = 0;
	}
	now = mono_clock_ns();
	threads_for_each(flusher_drain_thread, &now);
	pthread_mutex_unlock(&flusher.table_lock);
	/* Taken after the drain: every record above was written before it. */
	flusher_end_frame();
	threads_recycle_drained();
	if (now - flusher.trimmed_ns >= TRIM_INTERVAL_NS) {
		segments_trim(now);
		flusher.trimmed_ns = now;
	}
}

static void flusher_send_goodbye(const char *reason)
{
	Profd__AgentGoodbye bye = PROFD__AGENT_GOODBYE__INIT;
	uint8_t buf[256];
	size_t len;

	struct segment_pool_stats st;

	segments_stats(&st);
	bye.events = atomic_load(&flusher.events);
	bye.dropped = atomic_load(&flusher.dropped);
	bye.buffer_budget = st.budget_bytes;
	bye.buffer_peak = st.peak_bytes;
	bye.reason = (char *)(reason ? reason : "");
	if (profd__agent_goodbye__get_packed_size(&bye) > sizeof(buf))
		bye.reason = "";
	len = profd__agent_goodbye__pack(&bye, buf);
	flusher_send_frame(flusher.sock, FRAME_AGENT_GOODBYE, buf, len);
}

static int flusher_stopping(void)
{
	int stop;

	pthread_mutex_lock(&flusher.lock);
	stop = flusher.stop_requested;
	pthread_mutex_unlock(&flusher.lock);
	return stop;
}

/*
 * Nobody listens and nobody will detach from outside: once the patches are
 * in (released), recording goes off for good and the agent puts the code
 * back (lost); then the socket goes. Its number is forgotten before it is
 * closed: a fork in between must not close a descriptor reusing it.
 */
static void flusher_give_up(void)
{
	uint64_t deadline = mono_clock_ns() + RELEASE_WAIT_NS;
	int sock = flusher.sock;

	while (!atomic_load_explicit(&flusher.released, memory_order_acquire) &&
	       !flusher_stopping() && mono_clock_ns() < deadline)
		nanosleep(&(struct timespec){ 0, FLUSH_INTERVAL_NS }, NULL);
	/* after the release: the commit turns recording on just before it */
	hooks_set_recording(0);
	if (!atomic_load_explicit(&flusher.released, memory_order_acquire) || !flusher.ops->lost)
		return;
	flusher.ops->lost(flusher.table_ctx);
	flusher.sock = -1;
	close(sock);
}

/*
 * Detach: the calls entered before the unpatch still return through the exit
 * trampoline and record their exit. Give them a moment, draining meanwhile,
 * so their slices close in this trace rather than after the goodbye. A call
 * that runs on (main, a worker's loop) stays open in the trace: it was.
 */
static void flusher_let_calls_return(void)
{
	uint64_t deadline = mono_clock_ns() + RETURN_WAIT_NS;

	while (threads_with_open_calls() && mono_clock_ns() < deadline && !flusher.failed) {
		flusher_cycle();
		nanosleep(&(struct timespec){ 0, RETURN_POLL_NS }, NULL);
	}
}

/*
 * Sleeps until the next tick, or until a thread pokes (a ring segment
 * filled) or a stop is requested. A futex, not a condition variable: a
 * poking thread must never wait for a lock the flusher holds.
 */
static void flusher_sleep_until(uint64_t deadline_ns)
{
	uint32_t seen = atomic_load_explicit(&flusher.pokes, memory_order_acquire);
	uint64_t now = mono_clock_ns();
	struct timespec ts;

	if (now >= deadline_ns || flusher_stopping())
		return;
	ts.tv_sec = (time_t)((deadline_ns - now) / 1000000000u);
	ts.tv_nsec = (long)((deadline_ns - now) % 1000000000u);
	syscall(SYS_futex, &flusher.pokes, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

void flusher_poke(void)
{
	if (flusher_deferred()) /* the rings fill: its thread is due now */
		atomic_store(&flusher.start_after_ns, 0);
	atomic_fetch_add_explicit(&flusher.pokes, 1, memory_order_release);
	syscall(SYS_futex, &flusher.pokes, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * Go's runtime.exit waits in its hook (agent/hooks.c go_exit_flush): the
 * process ends without destructors, so this is the session's end.
 */
static int go_exit_requested(void)
{
	if (atomic_load(&agent_exit_request) != AGENT_EXIT_REQUESTED)
		return 0;
	pthread_mutex_lock(&flusher.lock);
	if (!flusher.stop_reason)
		flusher.stop_reason = "process exit (Go runtime.exit)";
	pthread_mutex_unlock(&flusher.lock);
	return 1;
}

/* The flusher is done, whatever ended it: a Go exit, now or later, waits no more. */
static void go_exit_release(void)
{
	atomic_store(&agent_exit_request, AGENT_EXIT_FLUSHED);
	syscall(SYS_futex, &agent_exit_request, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void *flusher_main(void *arg)
{
	(void)arg;
	threads_guard_forever();
	/*
	 * Named by itself: pthread_setname_np on another thread writes
	 * /proc/self/task/TID/comm, and the dentries that leaves under
	 * /proc/PID cost the parent ~1.5 ms to reap us (d_walk), per process
	 * of a tree. profd reads the name from perf COMM records (overhead).
	 */
	prctl(PR_SET_NAME, "profd-flusher", 0, 0, 0);
	while (!flusher_stopping() && !flusher.failed && !go_exit_requested()) {
		flusher_sleep_until(mono_clock_ns() + FLUSH_INTERVAL_NS);
		pthread_mutex_lock(&flusher.cycle_lock);
		if (flusher.exit_drained)
			goto out_unlock; /* the exiting thread drained: the process is going */
		flusher_cycle();
		pthread_mutex_unlock(&flusher.cycle_lock);
	}
	pthread_mutex_lock(&flusher.cycle_lock);
	if (flusher.exit_drained)
		goto out_unlock;
	if (flusher.failed)
		hooks_set_recording(0); /* nobody listens: stop paying for events */
	else if (flusher.let_calls_return)
		flusher_let_calls_return();
	flusher.final_cycle = 1;
	flusher_cycle();
	if (!flusher.failed)
		flusher_send_goodbye(flusher.stop_reason);
	if (flusher.failed) /* detach will not reach us: leave a usable state */
		flusher_give_up();
	atomic_store(&flusher.exited, 1);
	go_exit_release();
out_unlock:
	pthread_mutex_unlock(&flusher.cycle_lock);
	return NULL;
}

static int flusher_alloc(void)
{
	if (!flusher.stage)
		flusher.stage = malloc(STAGE_CAPACITY);
	return flusher.stage ? 0 : -ENOMEM;
}

/* The state a flusher sends with, its thread or not; 0 or a negative errno. */
static int flusher_setup(int sock, const struct flusher_ops *ops, void *ctx)
{
	/*
	 * Long enough for a daemon that is only slow (a loaded machine, a BPF
	 * program being verified, another session's trace being finished): at 2 s
	 * an agent of 8 sessions at once gave up mid-run under load and its
	 * figures were lost. Meanwhile the rings fill and calls drop, counted;
	 * the exit's wait for us is bounded on its own (flusher_join).
	 */
	struct timeval send_timeout = { .tv_sec = SEND_TIMEOUT_S };
	int err;

	if (flusher.running)
		return -EBUSY;
	err = flusher_alloc();
	if (err)
		return err;
	flusher.sock = sock;
	flusher.owner = (pid_t)syscall(SYS_getpid);
	flusher.ops = ops;
	flusher.table_ctx = ctx;
	flusher.table_sent = 0;
	flusher.stage_len = 0;
	flusher.stop_requested = 0;
	flusher.failed = 0;
	flusher.stop_reason = NULL;
	flusher.let_calls_return = false;
	flusher.exit_drained = 0;
	flusher.exit_deadline_ns = 0;
	flusher.threadless = 0;
	atomic_store(&flusher.deferred, FLUSHER_NOT_DEFERRED);
	atomic_store(&flusher.released, 0);
	atomic_store(&flusher.exited, 0);
	atomic_store(&agent_exit_request, AGENT_EXIT_NONE);
	/* A daemon that stops reading makes sends fail instead of hanging the flusher. */
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
	return 0;
}

static int flusher_spawn(void)
{
	sigset_t all, old;
	int err;

	/* The target's signals must never be delivered to our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&flusher.thread, NULL, flusher_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

int flusher_start(int sock, const struct flusher_ops *ops, void *ctx)
{
	int err = flusher_setup(sock, ops, ctx);

	if (!err)
		err = flusher_spawn();
	if (err)
		return err;
	flusher.running = 1;
	return 0;
}

int flusher_start_deferred(int sock, const struct flusher_ops *ops, void *ctx, uint64_t delay_ns)
{
	int err = flusher_setup(sock, ops, ctx);

	if (err)
		return err;
	flusher.threadless = 1;
	flusher.running = 1;
	atomic_store(&flusher.start_after_ns, mono_clock_ns() + delay_ns);
	flusher.retry_ns = DEFERRED_RETRY_FIRST_NS;
	atomic_store(&flusher.deferred, FLUSHER_DEFERRED);
	return 0;
}

bool flusher_deferred(void)
{
	return atomic_load_explicit(&flusher.deferred, memory_order_relaxed) == FLUSHER_DEFERRED;
}

bool flusher_start_due(void)
{
	return flusher_deferred() &&
	       mono_clock_ns() >= atomic_load_explicit(&flusher.start_after_ns, memory_order_relaxed);
}

void flusher_start_if_due(uint64_t entry_mask)
{
	int expected = FLUSHER_DEFERRED;
	uint64_t now = mono_clock_ns();

	if (now < atomic_load(&flusher.start_after_ns) ||
	    !atomic_compare_exchange_strong(&flusher.deferred, &expected, FLUSHER_STARTING))
		return;
	/* an exit drain that began has the rings: nothing left for a thread */
	if (!atomic_load(&flusher.exited) && thread_start_safe_here(entry_mask, flusher.owner)) {
		flusher.threadless = 0; /* before the thread: flusher_stop joins it from here on */
		if (flusher_spawn() == 0) {
			atomic_store(&flusher.deferred, FLUSHER_NOT_DEFERRED);
			return;
		}
		flusher.threadless = 1;
	}
	atomic_store(&flusher.start_after_ns, now + flusher.retry_ns);
	if (flusher.retry_ns < DEFERRED_RETRY_LAST_NS)
		flusher.retry_ns *= 2;
	atomic_store(&flusher.deferred, FLUSHER_DEFERRED);
}

int flusher_start_at_exit(int sock, const struct flusher_ops *ops, void *ctx)
{
	int err = flusher_setup(sock, ops, ctx);

	if (err)
		return err;
	flusher.threadless = 1;
	flusher.running = 1;
	return 0;
}

void flusher_release(const struct event_clock_pair *initial)
{
	flusher.initial_pair = *initial;
	flusher.initial_pair_pending = 1;
	/* pairs with the acquire in flusher_cycle() */
	atomic_store_explicit(&flusher.released, 1, memory_order_release);
}

/*
 * Waits for until(deadline) to succeed while the flusher makes progress (a
 * frame at least every STOP_IDLE_S, STOP_MAX_S in all): a flusher stuck in
 * a send to a daemon that stopped reading must not hold the process for
 * long. until's deadline is absolute and it waits on through signals, so
 * each round lasts its full second unless until succeeds.
 */
static int wait_while_progress(int (*until)(const struct timespec *deadline))
{
	uint32_t seen = atomic_load(&agent_flush_progress), now;
	struct timespec deadline;

	for (int waited = 0, idle = 0; waited < STOP_MAX_S && idle < STOP_IDLE_S; waited++) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 1;
		if (until(&deadline) == 0)
			return 0;
		now = atomic_load(&agent_flush_progress);
		idle = now == seen ? idle + 1 : 0;
		seen = now;
	}
	return -ETIMEDOUT;
}

static int joined(const struct timespec *deadline)
{
	return pthread_timedjoin_np(flusher.thread, NULL, deadline);
}

/* The flusher thread's return, while it makes progress. */
static int flusher_join(void)
{
	return wait_while_progress(joined);
}

int flusher_stop(const char *reason, bool let_calls_return)
{
	if (!flusher.running)
		return 0;
	if (flusher.threadless) { /* only an exit drain sends for it */
		flusher.running = 0;
		return 0;
	}
	pthread_mutex_lock(&flusher.lock);
	flusher.stop_requested = 1;
	flusher.stop_reason = reason;
	flusher.let_calls_return = let_calls_return;
	pthread_mutex_unlock(&flusher.lock);
	flusher_poke();
	if (flusher_join())
		return -ETIMEDOUT;
	flusher.running = 0;
	return 0;
}

static int cycle_locked(const struct timespec *deadline)
{
	return pthread_mutex_timedlock(&flusher.cycle_lock, deadline);
}

/*
 * Under cycle_lock, by a thread of the target (its exit, its exec):
 * everything recorded, the figures of every thread included, then a
 * goodbye with reason, in one write (one wake of the daemon, see struct
 * frame_batch). Each send is bounded as a stop's wait for a silent flusher,
 * all of them by STOP_MAX_S; the flusher thread's own timeout comes back.
 */
static void final_drain(const char *reason)
{
	struct timeval bounded = { .tv_sec = STOP_IDLE_S }, usual = { .tv_sec = SEND_TIMEOUT_S };

	setsockopt(flusher.sock, SOL_SOCKET, SO_SNDTIMEO, &bounded, sizeof(bounded));
	flusher.exit_deadline_ns = mono_clock_ns() + STOP_MAX_S * 1000000000ull;
	flusher.exit_batch = (struct frame_batch){ flusher.sock, exit_batch_buf, 0,
						   sizeof(exit_batch_buf) };
	flusher.batching = 1;
	flusher.final_cycle = 1;
	flusher_cycle();
	flusher.final_cycle = 0;
	if (!flusher.failed)
		flusher_send_goodbye(reason);
	flusher.batching = 0;
	if (frame_batch_flush(&flusher.exit_batch) < 0 && !flusher.failed)
		flusher.failed = -EPIPE;
	flusher.exit_deadline_ns = 0;
	setsockopt(flusher.sock, SOL_SOCKET, SO_SNDTIMEO, &usual, sizeof(usual));
}

int flusher_exit_drain(const char *reason)
{
	sigset_t all, old;

	if (!flusher.running || flusher.owner != (pid_t)syscall(SYS_getpid))
		return 0;
	/*
	 * Signals as they are while waiting: a flusher thread that lost its
	 * daemon stops the other threads (world_stop) before it lets go.
	 */
	if (wait_while_progress(cycle_locked))
		return -ETIMEDOUT; /* its thread keeps the socket: the process ends without its goodbye */
	/* a handler must not leave the drain (siglongjmp) holding its lock */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (atomic_load(&flusher.exited)) /* its thread ended it (daemon gone, Go's exit) */
		goto out_unlock;
	flusher.exit_drained = 1;
	pthread_mutex_lock(&flusher.lock);
	flusher.stop_requested = 1;
	flusher.stop_reason = reason;
	pthread_mutex_unlock(&flusher.lock);
	if (!flusher.failed && atomic_load_explicit(&flusher.released, memory_order_acquire))
		final_drain(reason);
	atomic_store(&flusher.exited, 1);
	go_exit_release();
out_unlock:
	pthread_mutex_unlock(&flusher.cycle_lock);
	flusher.running = 0; /* its thread dies with the process, never joined */
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

int flusher_exec_flush(void)
{
	sigset_t all, old;

	if (!flusher.running || flusher.owner != (pid_t)syscall(SYS_getpid))
		return 0; /* a vfork child's exec: its parent's agent goes on */
	if (wait_while_progress(cycle_locked))
		return -ETIMEDOUT;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* a daemon that stopped reading does not hold the exec for long */
	if (!atomic_load(&flusher.exited) && !flusher.failed &&
	    atomic_load_explicit(&flusher.released, memory_order_acquire))
		final_drain("exec");
	pthread_mutex_unlock(&flusher.cycle_lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

void flusher_table_lock(void)
{
	pthread_mutex_lock(&flusher.table_lock);
}

void flusher_table_unlock(int added)
{
	if (added)
		atomic_store(&flusher.table_pending, 1);
	pthread_mutex_unlock(&flusher.table_lock);
}

int flusher_lost(void)
{
	if (flusher.running && flusher_deferred()) /* no thread reads: look for ourselves */
		return daemon_readable() < 0;
	return !flusher.running || atomic_load(&flusher.exited);
}

void flusher_forget_after_fork(void)
{
	if (flusher.sock >= 0)
		close(flusher.sock); /* the child's copy only: the parent's stream is untouched */
	flusher.sock = -1;
	flusher.running = 0;
	/* the parent's flusher may have held them: it does not exist here */
	flusher.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	flusher.table_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	flusher.cycle_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	flusher.stage_len = 0;
	atomic_store(&flusher.pokes, 0);
	atomic_store(&flusher.table_pending, 0);
	atomic_store(&flusher.released, 0);
	atomic_store(&flusher.exited, 0);
	atomic_store(&flusher.deferred, FLUSHER_NOT_DEFERRED); /* the child decides anew */
}

