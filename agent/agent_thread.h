/* SPDX-License-Identifier: MIT */
/*
 * Per-thread state of the agent: the single-producer event ring the thread
 * fills from the hooks, the shadow stack of hijacked return addresses, the
 * per-function aggregates, and the registry the flusher walks. The owning
 * thread writes the producer fields; the flusher writes only its own fields,
 * the registry links and (clearing) segment slots.
 */
#ifndef PROFD_AGENT_THREAD_H
#define PROFD_AGENT_THREAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "proto/event_wire.h"
#include "proto/func_aggregates.h"

/*
 * A thread's ring is a chain of segments taken from the session's pool
 * (agent/segments.c), returned as the flusher drains them; the budget bounds
 * what all threads hold together. Positions (in 16-byte units, counting from
 * the thread's first record) are laid out in spans of SEGMENT_SPAN: segment k
 * holds positions from k * SEGMENT_SPAN on, as many as its capacity, and is
 * found at seg_map[k % SEGMENT_SLOTS]. A thread's first segment is small
 * (idle threads cost little); each next one is twice the last, up to a span,
 * so a busy thread switches rarely. A new segment's pages are populated a
 * part at a time, by the slow path, as the ring reaches them (see struct
 * seg_extent): a process that records a few calls never faults in more.
 */
#define SEGMENT_SPAN (1u << 16)      /* units: 1 MiB, the largest segment */
#define SEGMENT_FIRST (1u << 11)     /* units: 32 KiB */
#define SEGMENT_SLOTS 1024
/* Deeper than Perfetto's 512-slice limit; past it calls run untimed (counted). */
#define AGENT_SHADOW_CAPACITY 1024
/* Any segment holds an enter and the exits of every call open (hooks.c ring_has_room). */
_Static_assert(AGENT_SHADOW_CAPACITY + 3 < SEGMENT_FIRST, "a segment fits the deepest stack");
/* aarch64: stack words an unwinder's restore may rewrite (see lr_homes). */
#define LR_HOMES_MAX 2048
/* Ring units one call's captured values take at most (agent/arg_capture.h ARG_UNITS_MAX). */
#define ARG_SAVE_UNITS 48
/* Per-function aggregates, in pages of AGG_PAGE_FUNCS allocated on a function's first call. */
#define AGG_PAGE_FUNCS 64
#define AGG_PAGES (1u << 14)

/*
 * One function's figures on one thread (proto/func_aggregates.h). Only the
 * owner writes them, with plain stores (atomics kept GCC from keeping them in
 * registers: 2-3 ns per call); the flusher reads them with relaxed atomic
 * loads, as the kernel's READ_ONCE does: aligned words never tear on the
 * architectures we build for, and a figure a moment old is sent again later.
 */
struct func_agg {
	/*
	 * A line of its own for the first eight words: an exit's figures
	 * (exited .. max_ticks) are one cache line, not two (issue 28).
	 */
	_Alignas(64) uint64_t open;  /* flusher's: calls open on the shadow stack, counted per send */
	uint64_t exited;
	uint64_t untimed;
	uint64_t unrecorded;
	uint64_t filtered;           /* kept off the timeline by --min-duration/--max-depth */
	uint64_t total_ticks;
	uint64_t self_ticks;
	uint64_t max_ticks;
	uint64_t sent;               /* flusher's: the change key when last sent */
	uint64_t values_dropped;     /* on the timeline without its --args/--retval values: no room */
	uint32_t hist[AGG_BUCKETS];
};

struct shadow_entry {
	uintptr_t return_address;  /* the caller's, restored on exit */
	uintptr_t *return_slot;    /* where it lived on the stack: stale once below sp */
	uint32_t func_id;
	uint32_t flags;            /* SHADOW_RECORDED or SHADOW_PENDING, or neither */
	/*
	 * SHADOW_ALIVE, or the ring position of the EXIT that closed this entry
	 * below the top (agent/hooks.c, shadow_stack_close_matched): the entry is
	 * dead once that position is committed, and popped silently when it
	 * reaches the top.
	 */
	uint64_t exit_head;
	uint64_t enter_tsc;
	uint64_t child_ticks;      /* time of the timed calls it made, for its self time */
	/*
	 * Its function's figures on this thread; NULL once its exit is in them
	 * (cleared first: a siglongjmp never counts it twice), or when it has none.
	 */
	struct func_agg *agg;
	/*
	 * SHADOW_PENDING: the ring position its ENTER was written at, late
	 * (hooks.c, pending_write_enters), ENTER_UNWRITTEN or ENTER_FILTERED. A
	 * position at or past the committed head was never published:
	 * guard_recover undoes it.
	 */
	uint64_t enter_pos;        /* 64 bytes in all: an index is a shift */
};

/* Its ENTER is in the ring: its EXIT must be too. */
#define SHADOW_RECORDED 1u
/*
 * --min-duration: its ENTER waits in the entry until the call proves long
 * enough or a call inside it is written (a recorded call needs its parents);
 * once written (enter_pos), it is recorded like SHADOW_RECORDED.
 */
#define SHADOW_PENDING 2u
/* aarch64: the function signs its return address (STUB_FLAG_SIGNS_RA_*, same bits). */
#define SHADOW_SIGNS_RA_A 8u
#define SHADOW_SIGNS_RA_B 16u
/*
 * Its function has an --args/--retval spec (agent/arg_capture.h): its exit
 * takes the slow path (the return value), and while SHADOW_PENDING its
 * arguments wait in arg_save[depth] (arg_saved[depth] units).
 */
#define SHADOW_ARGS 32u
#define ENTER_UNWRITTEN UINT64_MAX
/* Its exit found it too short: off the timeline for good, counted as filtered. */
#define ENTER_FILTERED (UINT64_MAX - 1)

#define SHADOW_ALIVE UINT64_MAX
/* Closed with nothing to record (func_id 0): dead at once, whatever the head (an EXIT's
   position is never 0: an ENTER came first). */
#define SHADOW_CLOSED 0

/*
 * The producer's committed state in one word: ring head (units written) above,
 * shadow-stack depth below. One word so that a hook publishes its ring records
 * and its shadow-stack change with one instruction, which a signal cannot split.
 */
#define STATE_DEPTH_BITS 16
_Static_assert(AGENT_SHADOW_CAPACITY < (1u << STATE_DEPTH_BITS), "depth fits the state word");

static inline uint64_t state_make(uint64_t head, uint32_t depth)
{
	return head << STATE_DEPTH_BITS | depth;
}

static inline uint64_t state_head(uint64_t state)
{
	return state >> STATE_DEPTH_BITS;
}

static inline uint32_t state_depth(uint64_t state)
{
	return (uint32_t)(state & ((1u << STATE_DEPTH_BITS) - 1));
}

enum agent_thread_state {
	AGENT_THREAD_LIVE = 0,
	AGENT_THREAD_EXITED = 1,    /* the thread is gone; drain then recycle */
};

/*
 * A segment's capacity and how much of it, from its start, has its pages
 * populated (agent/segments.c), in units. The hooks write no further than
 * ready (hooks.c ring_resync), so they never fault a page in; the slow path
 * populates more (segments_populate) before ready moves. Values past it
 * (--args, --retval) may be written up to the capacity, in cold paths.
 */
struct seg_extent {
	uint32_t units;
	uint32_t ready;
};

/* How far the flusher has announced a thread to the daemon. */
enum flusher_stage {
	FLUSHER_STAGE_NEW = 0,
	FLUSHER_STAGE_NAMED = 1,
	FLUSHER_STAGE_EXIT_SENT = 2,
};

struct agent_thread {
	/* producer side: written only by the owning thread */
	_Atomic uint64_t committed;  /* state_make(head, depth); release: pairs with the
					acquire in flusher_drain_thread() */
	/*
	 * The current segment, cached from seg_map for the fast path: position p
	 * is at ring_base + p * 16 while p < ring_end. Only ever moved after
	 * the head has been published into the new segment, so a cache left
	 * behind by a siglongjmp can only fail the room check (hooks.c).
	 */
	uintptr_t ring_base;
	uint64_t ring_end;           /* records may take positions below it: 0 = no segment */
	uint32_t tid;
	uint32_t guard_recoveries;   /* hooks abandoned by a siglongjmp (see hooks.c) */
	/*
	 * Set when an unwinder put the real return addresses back. Calls deeper
	 * than the unwinder's frame (unwind_slot: the walk is in progress) run
	 * untimed; the first call back at its level or above re-hijacks.
	 */
	uint32_t returns_restored;
	uint32_t want_agg_page;      /* for the slow path: the page a call needs, + 1 */
	uintptr_t *unwind_slot;
	uintptr_t stack_lo, stack_hi; /* the thread's own stack (not a sigaltstack) */
	struct event_record *spare;  /* the next segment, from the slow path (segments.c) */
	struct seg_extent spare_extent;
	uint32_t want_spare;         /* for the slow path: the ring needs its next segment */
	uint32_t want_ready;         /* for the slow path: the current segment's ready, at least */
	uint32_t denied_gen;         /* agent_segments_generation when the pool had none for us */
	uint32_t memory_failed;      /* an aggregates page could not be mapped: calls unattributed */
	/* calls kept off the timeline, by enum agg_drop_reason; read by the flusher */
	_Atomic uint64_t drop_reasons[AGG_DROP_REASONS];
	_Atomic uint64_t unattributed; /* of those, calls no function's figures hold */
	/* calls the session's filters kept off the timeline, by enum agg_filter_reason */
	_Atomic uint64_t filtered_by[AGG_FILTER_REASONS];

	/* consumer side: written only by the flusher */
	/* drained up to here; release: pairs with the acquire in hooks.c ring_switch() */
	_Alignas(64) _Atomic uint64_t tail;
	uint64_t drops_reported;
	uint64_t aggregates_sent_ns; /* when this thread's aggregates last went out */
	int flusher_stage;           /* enum flusher_stage */

	/* registry */
	struct agent_thread *next;
	_Atomic int state;
	char name[EVENT_THREAD_NAME_LEN];

	/* segments by position (above); the owner sets a slot, the flusher clears it */
	struct event_record *_Atomic seg_map[SEGMENT_SLOTS];
	struct seg_extent seg_extent[SEGMENT_SLOTS]; /* written before they are published */
	/*
	 * Where each span's records end, + 1 (0: the owner writes on in it), set
	 * by the owner before it publishes a head in the next span; the flusher
	 * reads nothing past it. No marker in the segment itself: the owner may
	 * take the same segment again for the next span once it is read.
	 */
	_Atomic uint64_t span_end[SEGMENT_SLOTS];
	/*
	 * agg_pages[agg_pages_end..] are all NULL: what walks them stops there
	 * (16,384 of them, 128 KiB that a new thread's state would fault in
	 * to find empty). Raised by the owner after it publishes a page.
	 */
	_Atomic uint32_t agg_pages_end;
	struct func_agg *_Atomic agg_pages[AGG_PAGES];
	/*
	 * shadow[-1] for the x86-64 fast paths (trampolines/x86_64.S), which read
	 * and write the entry below the top without testing the depth first: a
	 * return slot above every other (a new call at depth 0 is never stale)
	 * and child time nobody reads (a call at depth 1 adds its ticks there).
	 * Set by threads.c; the C hooks never touch it.
	 */
	_Alignas(64) struct shadow_entry shadow_floor;
	struct shadow_entry shadow[AGENT_SHADOW_CAPACITY]; /* an entry a line */
	/*
	 * --min-duration with --args: the values of a waiting call, captured at
	 * its enter, written with its late ENTER (hooks.c pending_write_enters).
	 * Pages are touched only when used.
	 */
	uint8_t arg_saved[AGENT_SHADOW_CAPACITY];
	struct event_record arg_save[AGENT_SHADOW_CAPACITY][ARG_SAVE_UNITS];
#if defined(__x86_64__)
	/*
	 * What the enter hook wrote into entry i's return slot: its function's
	 * exit landing (trampolines/trampoline_layout.h), written with the entry.
	 * Read where a slot is told hijacked or not (agent/hooks.c: a tail call,
	 * an unwinder's restore and the hijack after). Beside the entries, not
	 * in them: an entry stays 64 bytes.
	 */
	uintptr_t landing[AGENT_SHADOW_CAPACITY];
#elif defined(__aarch64__)
	/*
	 * The stack words an unwinder's restore rewrote (agent/hooks.c,
	 * restore_return_homes) for entry `index` while it was the call of
	 * `for_slot`, what they held (the exit trampoline's address, maybe
	 * signed) and what they got. Cold paths only; emptied when the returns
	 * are hijacked again.
	 */
	struct lr_home {
		uintptr_t *home, *for_slot, hijacked, restored;
		uint32_t index;
	} lr_homes[LR_HOMES_MAX];
	uint32_t n_lr_homes;
#endif
};

static inline uint64_t thread_drops(struct agent_thread *t)
{
	uint64_t n = 0;

	for (int i = 0; i < AGG_DROP_REASONS; i++)
		n += atomic_load_explicit(&t->drop_reasons[i], memory_order_relaxed);
	return n;
}

/* The calling thread's state; NULL before its first instrumented call. */
extern __thread struct agent_thread *agent_current_thread
	__attribute__((tls_model("initial-exec")));
/*
 * Non-zero while the thread runs agent code: instrumented calls pass through.
 * AGENT_GUARD_AGENT in the agent's own code; inside a hook, the return slot
 * of the hooked call (one word, so that a signal never sees the guard and its
 * slot disagree): only a signal handler can make a call there, counted as
 * dropped (agent/hooks.c).
 */
enum agent_guard { AGENT_GUARD_NONE = 0, AGENT_GUARD_AGENT = 1 };
extern __thread uintptr_t agent_thread_guard __attribute__((tls_model("initial-exec")));

/*
 * Read on every call: 0 before patching completes, after stop, in a forked
 * child; else AGENT_RECORDING_PLAIN, or _FILTERED with --min-duration
 * (hooks_set_recording).
 */
enum { AGENT_RECORDING_PLAIN = 1, AGENT_RECORDING_FILTERED = 2 };
extern _Atomic int agent_recording;

/*
 * A Go program's runtime.exit (STUB_FLAG_GO_EXIT) asks the flusher for its
 * final drain and goodbye, then waits (a futex on this word) until it is done.
 */
enum agent_exit_state { AGENT_EXIT_NONE = 0, AGENT_EXIT_REQUESTED = 1, AGENT_EXIT_FLUSHED = 2 };
extern _Atomic uint32_t agent_exit_request;
extern _Atomic uint32_t agent_flush_progress;

/* agent/threads.c */
int threads_init(void);
/*
 * The main thread's stack, found by the caller (agent/proc_maps.h
 * proc_maps_main_stack): its first call takes it instead of asking
 * pthread_getattr_np, which reads /proc/self/maps for that thread alone.
 */
void threads_set_main_stack(uintptr_t lo, uintptr_t hi);
/* Calls fn for every registered thread (flusher only); recycles drained exited ones. */
void threads_for_each(void (*fn)(struct agent_thread *t, void *ctx), void *ctx);
void threads_recycle_drained(void);
/* Live threads with a shadow-stack entry, i.e. a call whose exit is still to come. */
unsigned threads_with_open_calls(void);
/* threads_for_each without the registry lock: only while every other thread is stopped. */
void threads_for_each_stopped(void (*fn)(struct agent_thread *t, void *ctx), void *ctx);
/* agent/hooks.c: closes every open call of t (its frames are gone). */
void hooks_close_all(struct agent_thread *t);
/*
 * agent/hooks.c: the session's timeline filters, before recording starts:
 * calls shorter than min_ticks (0: none) or with max_depth instrumented
 * calls open below them (0: no limit) stay off the timeline, counted.
 */
void hooks_set_filters(uint64_t min_ticks, uint32_t max_depth);
/*
 * agent/hooks.c: recording on or off (agent_recording, and what the x86-64
 * fast path reads of it). Async-signal-safe: plain stores.
 */
void hooks_set_recording(int on);

/*
 * Flusher: how far span `span` of a ring may be read, given the committed
 * head (the drain's acquire) and the span's stored end (1 + its last
 * position, 0 for none). Below the head always; when the owner has moved on,
 * the span's end, and a reader there is done with the span (it may release
 * its segment). The end is the owner's word only once the head has left the
 * span: it is stored before the publish that leaves it, and a siglongjmp out
 * of a handler between the two (hooks.c ring_switch_to) leaves an end set
 * while the owner writes on in the span. Taken then, the span's later records
 * were skipped and its segment released while still written (a stream that
 * no longer decoded, under signal_storm's longjmp storm).
 */
static inline uint64_t span_read_limit(uint64_t span, uint64_t head, uint64_t stored_end)
{
	if (head < (span + 1) * SEGMENT_SPAN || stored_end == 0 || stored_end - 1 > head)
		return head;
	return stored_end - 1;
}

/* agent/segments.c: the session's pool of ring segments, bounded by its budget. */
struct segment_pool_stats {
	uint64_t budget_bytes, peak_bytes, in_use_bytes, resident_bytes; /* resident: about */
};
/* Sets the budget (rounded to whole segments, at least one). */
void segments_set_budget(uint64_t bytes);
/* Slow path (signals blocked): gives t a spare segment, or records the denial. */
void segments_refill_spare(struct agent_thread *t);
/* Slow path (signals blocked): populates t's current segment up to want_ready at least. */
void segments_populate(struct agent_thread *t);
/* Flusher: segment k of t is drained and the owner has moved past it (or t is stopped). */
void segments_release(struct agent_thread *t, uint64_t k);
/* Thread recycle: every segment t holds goes back. */
void segments_release_all(struct agent_thread *t);
void segments_stats(struct segment_pool_stats *st);
/* Flusher, now and then: free segments unused for a while go back to the kernel. */
void segments_trim(uint64_t now_ns);
/* Moves when a segment comes back to the pool: a thread denied one may ask again. */
extern _Atomic uint32_t agent_segments_generation;
/* agent/threads.c, slow path: maps t's aggregates page `index`; sets memory_failed if it cannot. */
void threads_map_agg_page(struct agent_thread *t, uint32_t index);
/* Zeroes t's aggregates and drop counters (a new owner, or a new session). */
void threads_clear_aggregates(struct agent_thread *t);
/* agent/threads.c: in a forked child's atfork handler (async-signal-safe; see there). */
void threads_after_fork(void);
/* agent/segments.c: the same for the pool: the parent's segments are forgotten. */
void segments_after_fork(void);
/* Marks the calling thread as agent-internal: its calls are never recorded. */
void threads_guard_forever(void);

#endif
