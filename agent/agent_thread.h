/* SPDX-License-Identifier: MIT */
/*
 * Per-thread state of the agent: the single-producer event ring the thread
 * fills from the hooks, the shadow stack of hijacked return addresses, and
 * the registry the flusher walks. The owning thread writes the producer
 * fields; the flusher writes only `tail` and the registry links.
 */
#ifndef PROFD_AGENT_THREAD_H
#define PROFD_AGENT_THREAD_H

#include <stdatomic.h>
#include <stdint.h>

#include "proto/event_wire.h"

/* Power of two. 256 Ki records = 4 MiB (touched as used): ~8 ms of a thread calling flat out. */
#define AGENT_RING_RECORDS (1u << 18)
/* Deeper than Perfetto's 512-slice limit; past it calls run unrecorded. */
#define AGENT_SHADOW_CAPACITY 1024

struct shadow_entry {
	uintptr_t return_address;  /* the caller's, restored on exit */
	uintptr_t *return_slot;    /* where it lived on the stack: stale once below sp */
	uint32_t func_id;
	uint32_t reserved;
	/*
	 * SHADOW_ALIVE, or the ring position of the EXIT that closed this entry
	 * below the top (agent/hooks.c, shadow_stack_close_matched): the entry is
	 * dead once that position is committed, and popped silently when it
	 * reaches the top.
	 */
	uint64_t exit_head;
};

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
	uint32_t tid;
	uint32_t guard_recoveries;   /* hooks abandoned by a siglongjmp (see hooks.c) */
	/*
	 * Set when an unwinder put the real return addresses back. Calls deeper
	 * than the unwinder's frame (unwind_slot: the walk is in progress) run
	 * unrecorded; the first call back at its level or above re-hijacks.
	 */
	uint32_t returns_restored;
	uint32_t reserved;
	uintptr_t *unwind_slot;
	uintptr_t stack_lo, stack_hi; /* the thread's own stack (not a sigaltstack) */
	_Atomic uint64_t drops;      /* events not recorded because the ring was full */
	struct event_record *records;

	/* consumer side: written only by the flusher */
	_Alignas(64) _Atomic uint64_t tail; /* release: pairs with the acquire in hooks_ring_has_room() */
	uint64_t drops_reported;
	int flusher_stage;           /* enum flusher_stage */

	/* registry */
	struct agent_thread *next;
	_Atomic int state;
	char name[EVENT_THREAD_NAME_LEN];

	struct shadow_entry shadow[AGENT_SHADOW_CAPACITY];
};

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

/* Read on every call: 0 before patching completes, after stop, in a forked child. */
extern _Atomic int agent_recording;

/* agent/threads.c */
int threads_init(void);
/* Calls fn for every registered thread (flusher only); recycles drained exited ones. */
void threads_for_each(void (*fn)(struct agent_thread *t, void *ctx), void *ctx);
void threads_recycle_drained(void);
/* Live threads with a shadow-stack entry, i.e. a call whose exit is still to come. */
unsigned threads_with_open_calls(void);
/* threads_for_each without the registry lock: only while every other thread is stopped. */
void threads_for_each_stopped(void (*fn)(struct agent_thread *t, void *ctx), void *ctx);
/* agent/hooks.c: closes every open call of t (its frames are gone). */
void hooks_close_all(struct agent_thread *t);
/* Marks the calling thread as agent-internal: its calls are never recorded. */
void threads_guard_forever(void);

#endif
