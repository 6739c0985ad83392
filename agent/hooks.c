// SPDX-License-Identifier: MIT
/*
 * The enter/exit hooks: the only C the trampolines reach on every call
 * (x86-64: every call their own fast paths do not take; x86_64.S does the
 * plainest enter and exit itself, the same stores in the same order, so a
 * change to profagent_enter_hook's or profagent_exit_hook's fast path, or
 * to what they store, goes there too).
 * Compiled with -mgeneral-regs-only (the trampolines do not save vector
 * state), no stack protector, no calls out of this file: timestamp, append
 * to this thread's ring, push/pop the shadow stack, add the call to its
 * function's aggregates. Never blocks, never allocates, never enters the
 * kernel: what needs memory (a ring segment, an aggregates page) is asked of
 * the trampoline's slow path. Every call is timed and counted, whether or
 * not the ring has room for its events; when the budget is spent the call
 * stays off the timeline, counted by reason and by function.
 *
 * Signals. A handler may run at any instruction of a hook, call instrumented
 * functions there, and never come back (siglongjmp). So:
 * - every hook runs under the thread's guard, set and cleared with signal
 *   fences so that no access to the ring or the shadow stack moves out of
 *   it: a handler's calls inside pass through, counted as dropped (a handler
 *   writing the ring there would collide with the writes still to come);
 * - a hook writes its records and its shadow entry beyond the committed state
 *   (ring head and shadow depth in one word), where nobody reads, and
 *   publishes them with one store: whatever instruction a handler leaves it
 *   at, the committed state is whole, and no entry is ever moved;
 * - the guard is the hooked call's return slot, one word: a hook that finds
 *   the guard of a hook a siglongjmp left (called from above that slot on its
 *   stack, or returning through us) takes it back (guard_recover).
 *
 * The shadow stack survives frames that leave without returning: longjmp
 * and exceptions are noticed when a later call or return finds entries
 * whose stack slot is gone, and unwinders (exceptions, backtrace(),
 * pthread_exit) get the real return addresses back before they walk.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "agent/agent_thread.h"
#include "agent/arg_capture.h"
#include "agent/cpu_ticks.h"
#include "agent/jit_callers.h"
#include "trampolines/trampoline_layout.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define COLD __attribute__((noinline, cold))

/* TLS read on every call: initial-exec, no lazy allocation. */
__thread struct agent_thread *agent_current_thread __attribute__((tls_model("initial-exec")));
__thread uintptr_t agent_thread_guard __attribute__((tls_model("initial-exec")));
/* Global because every hook reads it; written only at start, stop and fork. */
_Atomic int agent_recording;
_Atomic uint32_t agent_exit_request;
/* Frames the flusher has sent: a stop waits while it grows (go_exit_flush, flusher_join). */
_Atomic uint32_t agent_flush_progress;
/*
 * The session's timeline filters (agent.c sets them before recording starts;
 * never changed while hooks run), global because every call reads them.
 * agent_min_ticks: calls shorter stay off the timeline (0: none); their
 * ENTER waits in the shadow entry (SHADOW_PENDING), so a call needs room for
 * its ENTER, its EXIT and its late-written parents': agent_units_per_call.
 * agent_depth_limit: calls with that many instrumented frames open below
 * them stay off the timeline (--max-depth; default: the shadow capacity).
 */
uint64_t agent_min_ticks;
uint32_t agent_units_per_call = 1;
uint32_t agent_depth_limit = AGENT_SHADOW_CAPACITY;

#define SAME_STACK_WINDOW (256u << 10)

#if defined(__x86_64__)
/* What trampolines/x86_64.S's fast paths take of these structs (trampoline_layout.h). */
#define HOT_AT(type, field, off) _Static_assert(offsetof(type, field) == (off), "x86_64.S: " #field)
HOT_AT(struct agent_thread, committed, HOT_THREAD_COMMITTED);
HOT_AT(struct agent_thread, ring_base, HOT_THREAD_RING_BASE);
HOT_AT(struct agent_thread, ring_end, HOT_THREAD_RING_END);
HOT_AT(struct agent_thread, returns_restored, HOT_THREAD_RETURNS_RESTORED);
HOT_AT(struct agent_thread, agg_pages, HOT_THREAD_AGG_PAGES);
HOT_AT(struct agent_thread, shadow, HOT_THREAD_SHADOW);
HOT_AT(struct agent_thread, shadow_floor, HOT_THREAD_SHADOW - 64); /* shadow[-1] */
HOT_AT(struct agent_thread, landing, HOT_THREAD_LANDING);
HOT_AT(struct shadow_entry, return_address, HOT_SHADOW_RETURN_ADDRESS);
HOT_AT(struct shadow_entry, return_slot, HOT_SHADOW_RETURN_SLOT);
HOT_AT(struct shadow_entry, func_id, HOT_SHADOW_FUNC_ID);
HOT_AT(struct shadow_entry, flags, HOT_SHADOW_FLAGS);
HOT_AT(struct shadow_entry, exit_head, HOT_SHADOW_EXIT_HEAD);
HOT_AT(struct shadow_entry, enter_tsc, HOT_SHADOW_ENTER_TSC);
HOT_AT(struct shadow_entry, child_ticks, HOT_SHADOW_CHILD_TICKS);
HOT_AT(struct shadow_entry, agg, HOT_SHADOW_AGG);
HOT_AT(struct func_agg, exited, HOT_AGG_EXITED);
HOT_AT(struct func_agg, total_ticks, HOT_AGG_TOTAL_TICKS);
HOT_AT(struct func_agg, self_ticks, HOT_AGG_SELF_TICKS);
HOT_AT(struct func_agg, max_ticks, HOT_AGG_MAX_TICKS);
HOT_AT(struct event_record, tsc, 0);
HOT_AT(struct event_record, func_id, 8);
HOT_AT(struct event_record, kind, 12);
HOT_AT(struct event_enter_frame, return_address, 0);
HOT_AT(struct event_enter_frame, return_slot, 8);
#undef HOT_AT
_Static_assert(sizeof(struct shadow_entry) == 1u << HOT_SHADOW_SIZE_SHIFT, "x86_64.S: entry size");
_Static_assert(sizeof(struct func_agg) == HOT_AGG_SIZE, "x86_64.S: figures size");
_Static_assert(AGG_PAGE_FUNCS == 1u << HOT_AGG_PAGE_SHIFT, "x86_64.S: page");
_Static_assert(AGG_PAGE_FUNCS * AGG_PAGES == HOT_AGG_FUNCS_MAX, "x86_64.S: pages");
_Static_assert(STATE_DEPTH_BITS == HOT_STATE_DEPTH_BITS && SHADOW_RECORDED == HOT_SHADOW_RECORDED,
	       "x86_64.S: state");
_Static_assert(EVENT_ENTER == HOT_EVENT_ENTER && EVENT_EXIT == HOT_EVENT_EXIT &&
		       SHADOW_ALIVE == UINT64_MAX,
	       "x86_64.S: records");
_Static_assert(AGENT_SHADOW_CAPACITY < 1u << HOT_STATE_DEPTH_BITS, "x86_64.S: a depth + 1 fits");
_Static_assert(AGENT_RECORDING_PLAIN == HOT_RECORDING_PLAIN, "x86_64.S: recording");
#endif

/*
 * Stub flags the hooks' fast paths take: aarch64's return-address signing,
 * copied into the shadow entry's flags (the same bits).
 */
#define ENTER_FAST_FLAGS (STUB_FLAG_SIGNS_RA_A | STUB_FLAG_SIGNS_RA_B)
_Static_assert(SHADOW_SIGNS_RA_A == STUB_FLAG_SIGNS_RA_A && SHADOW_SIGNS_RA_B == STUB_FLAG_SIGNS_RA_B,
	       "one bit for both");

/*
 * What a hijacked return slot holds. x86-64: the function's exit landing,
 * the address its stub's call pushed (slot+5, STUB_RETURN_TO_DESC before
 * the descriptor), which jumps to the exit trampoline; the return stack
 * buffer predicts the function's ret there (trampolines/x86_64.S).
 * aarch64: the exit trampoline itself.
 */
static inline uintptr_t hijack_address(const struct stub_desc *desc)
{
#if defined(__x86_64__)
	return (uintptr_t)desc - STUB_RETURN_TO_DESC;
#else
	(void)desc;
	return (uintptr_t)profagent_exit_trampoline;
#endif
}

/* What the enter hook wrote into entry i's return slot (hijack_address). */
static inline uintptr_t entry_hijack_address(const struct agent_thread *t, uint32_t i)
{
#if defined(__x86_64__)
	return t->landing[i];
#else
	(void)t;
	(void)i;
	return (uintptr_t)profagent_exit_trampoline;
#endif
}

/* Only this thread writes it (under the guard). */
static inline uint64_t state_load(struct agent_thread *t)
{
	return atomic_load_explicit(&t->committed, memory_order_relaxed);
}

/*
 * Publishes the records and the shadow change a hook made: one store, so a
 * siglongjmp out of the hook leaves all of it or none. Release: pairs with
 * the acquire in flusher_drain_thread().
 */
static inline void state_publish(struct agent_thread *t, uint64_t next)
{
	atomic_store_explicit(&t->committed, next, memory_order_release);
}

static inline struct event_record *ring_at(struct agent_thread *t, uint64_t pos)
{
	return (struct event_record *)(t->ring_base + pos * sizeof(struct event_record));
}

/*
 * Room in the current segment for this event plus the exits of every open
 * call, so that an exit never finds the ring full: a recorded BEGIN always
 * gets its END. An enter takes two units (record + frame) and reserves its
 * own exit. Only the enter hook moves to another segment.
 */
static inline int ring_has_room(const struct agent_thread *t, uint64_t head, uint32_t need)
{
	return head + need <= t->ring_end;
}

/*
 * The same up to the segment's capacity, past its populated part: for the
 * values of --args and --retval, which may not wait for the slow path.
 */
COLD static int ring_has_segment_room(const struct agent_thread *t, uint64_t head, uint32_t need)
{
	const struct seg_extent *x = &t->seg_extent[(head / SEGMENT_SPAN) % SEGMENT_SLOTS];

	return t->ring_end && head + need <= head - head % SEGMENT_SPAN + x->units - 1;
}

/* An enter record of `kind` (EVENT_ENTER, maybe with values after it) and its frame at head, head + 1. */
static inline __attribute__((always_inline)) void
ring_put_enter_kind(struct agent_thread *t, uint64_t head, uint32_t func_id, uint32_t kind,
		    uint64_t tsc, uintptr_t return_address, uintptr_t *return_slot)
{
	struct event_record *rec = ring_at(t, head);
	struct event_enter_frame *frame = (struct event_enter_frame *)ring_at(t, head + 1);

	rec->tsc = tsc;
	rec->func_id = func_id;
	rec->kind = kind;
	frame->return_address = return_address;
	frame->return_slot = (uintptr_t)return_slot;
}

/* An enter record and its frame at head, head + 1: visible once published. */
static inline void ring_put_enter(struct agent_thread *t, uint64_t head, uint32_t func_id,
				  uint64_t tsc, uintptr_t return_address, uintptr_t *return_slot)
{
	ring_put_enter_kind(t, head, func_id, EVENT_ENTER, tsc, return_address, return_slot);
}

static inline void ring_put(struct agent_thread *t, uint64_t head, uint32_t func_id, uint32_t kind,
			    uint64_t tsc)
{
	struct event_record *rec = ring_at(t, head);

	rec->tsc = tsc;
	rec->func_id = func_id;
	rec->kind = kind;
}

/*
 * The cached segment from the committed head: the segment its slot holds
 * (the one the owner switched into), or none before the first.
 */
COLD static void ring_resync(struct agent_thread *t, uint64_t head)
{
	uint32_t slot = (uint32_t)((head / SEGMENT_SPAN) % SEGMENT_SLOTS);
	struct event_record *seg = atomic_load_explicit(&t->seg_map[slot], memory_order_relaxed);
	uint64_t start = head - head % SEGMENT_SPAN;

	t->ring_base = seg ? (uintptr_t)seg - start * sizeof(struct event_record) : 0;
	t->ring_end = seg ? start + t->seg_extent[slot].ready - 1 : 0;
}

/*
 * Ends the current span (if any) where the head is and moves the head to
 * the start of the next span, in seg (units long): one publish, which makes
 * the span's end and the next slot visible too. 1 when switched, 0 when the
 * next span's slot is still the flusher's.
 */
COLD static int ring_switch_to(struct agent_thread *t, uint64_t *head, uint32_t depth,
			       struct event_record *seg, struct seg_extent extent)
{
	struct event_record *cur = atomic_load_explicit(
		&t->seg_map[(*head / SEGMENT_SPAN) % SEGMENT_SLOTS], memory_order_relaxed);
	/* none yet: the head is at a span's start (rounded up, so it never moves back) */
	uint64_t next = cur ? *head / SEGMENT_SPAN + 1 : (*head + SEGMENT_SPAN - 1) / SEGMENT_SPAN;
	struct event_record *in_slot =
		atomic_load_explicit(&t->seg_map[next % SEGMENT_SLOTS], memory_order_acquire);

	if (in_slot && in_slot != seg) /* seg there: a switch cut short before its publish */
		return 0;
	if (cur)
		atomic_store_explicit(&t->span_end[(*head / SEGMENT_SPAN) % SEGMENT_SLOTS], *head + 1,
				      memory_order_relaxed);
	atomic_store_explicit(&t->span_end[next % SEGMENT_SLOTS], 0, memory_order_relaxed);
	t->seg_extent[next % SEGMENT_SLOTS] = extent;
	atomic_store_explicit(&t->seg_map[next % SEGMENT_SLOTS], seg, memory_order_relaxed);
	*head = next * SEGMENT_SPAN;
	state_publish(t, state_make(*head, depth));
	ring_resync(t, *head);
	return 1;
}

/*
 * After ring_resync: 1 when the populated part has the room, else
 * HOOK_SLOW_MEMORY when the rest of the segment has it (the slow path
 * populates up to want_ready: segments_populate), else 0.
 */
COLD static int ring_room_or_populate(struct agent_thread *t, uint64_t head, uint32_t need)
{
	const uint32_t slot = (uint32_t)((head / SEGMENT_SPAN) % SEGMENT_SLOTS);
	const uint64_t start = head - head % SEGMENT_SPAN;
	const struct seg_extent *x = &t->seg_extent[slot];

	if (ring_has_room(t, head, need))
		return 1;
	if (!t->ring_end || x->ready >= x->units || head + need > start + x->units - 1)
		return 0;
	t->want_ready = (uint32_t)(head + need + 1 - start);
	return HOOK_SLOW_MEMORY;
}

/*
 * The current segment's populated part is full: when its capacity has the
 * room, HOOK_SLOW_MEMORY to have the slow path populate more of it. Else
 * ends its span and moves the head to the start of the next span, in the
 * spare segment (one publish, then the cache follows). Returns 1 when there
 * is room now, 0 when the call must stay off the timeline (the budget is
 * spent, or the flusher still holds the slot), HOOK_SLOW_MEMORY to have the
 * slow path fetch a spare segment or populate more of one first (then the
 * hook asks again).
 */
COLD static int ring_switch(struct agent_thread *t, uint64_t *head, uint32_t depth, uint32_t need)
{
	const uint32_t slot = (uint32_t)((*head / SEGMENT_SPAN) % SEGMENT_SLOTS);
	struct event_record *cur;
	uint32_t gen;
	int r;

	ring_resync(t, *head); /* a switch a siglongjmp cut short after its publish */
	r = ring_room_or_populate(t, *head, need);
	if (r)
		return r;
	cur = atomic_load_explicit(&t->seg_map[slot], memory_order_relaxed);
	if (t->spare == cur)
		t->spare = NULL; /* stale: the cut-short switch used it */
	/* pairs with the release in segments_release(): read before the slot */
	gen = atomic_load_explicit(&agent_segments_generation, memory_order_acquire);
	if (!t->spare && t->denied_gen != gen) {
		t->want_spare = 1;
		return HOOK_SLOW_MEMORY;
	}
	/*
	 * No other segment within the budget: the current one again, once the
	 * flusher has read it all (pairs with the release in
	 * flusher_drain_thread()); it stays in the next span's slot when the
	 * flusher releases this one (segments_release). The span's end is not
	 * in the segment: the records overwrite it.
	 */
	if (!t->spare && cur && atomic_load_explicit(&t->tail, memory_order_acquire) == *head)
		return ring_switch_to(t, head, depth, cur, t->seg_extent[slot]) ?
			       ring_room_or_populate(t, *head, need) :
			       0;
	if (!t->spare)
		return 0;
	if (!ring_switch_to(t, head, depth, t->spare, t->spare_extent)) {
		t->denied_gen = gen; /* the flusher is a whole ring behind */
		return 0;
	}
	t->spare = NULL;
	return ring_room_or_populate(t, *head, need);
}

/* ---- aggregates ----------------------------------------------------------------------- */

/* Only the owner writes a figure: a plain add, no locked instruction (see struct func_agg). */
static inline void agg_add(uint64_t *v, uint64_t n)
{
	*v += n;
}

/* A thread-wide drop counter the flusher reads while the owner writes it. */
static inline void count_add(_Atomic uint64_t *v, uint64_t n)
{
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline struct func_agg *agg_get(struct agent_thread *t, uint32_t func_id)
{
	struct func_agg *page;

	if (unlikely(func_id >= AGG_PAGE_FUNCS * AGG_PAGES))
		return NULL;
	page = atomic_load_explicit(&t->agg_pages[func_id / AGG_PAGE_FUNCS], memory_order_relaxed);
	return page ? &page[func_id % AGG_PAGE_FUNCS] : NULL;
}

/* A call that runs untimed: counted for its function (when it has figures) and its reason. */
COLD static void count_untimed(struct agent_thread *t, uint32_t func_id, int reason)
{
	struct func_agg *a = agg_get(t, func_id);

	count_add(&t->drop_reasons[reason], 1);
	if (a)
		agg_add(&a->untimed, 1);
	else
		count_add(&t->unattributed, 1);
}

/*
 * The call of entry e ended at tsc: into its function's figures a (its agg,
 * not NULL) and into its caller's child time for the caller's self time.
 * `parent`: the entry below e, NULL at the bottom. The figures pointer is
 * cleared first: a siglongjmp from here never counts the call twice.
 * Returns the call's ticks. The duration histogram is not here: a call whose
 * EXIT is in the ring has its bucket counted by profd, from its events (one
 * cache line and a dependent chain less per call, bench/README.md, issue
 * 28); agg_count_bucket counts the others.
 */
static inline __attribute__((always_inline)) uint64_t agg_close_figures(struct shadow_entry *e,
									 struct shadow_entry *parent,
									 struct func_agg *a,
									 uint64_t tsc)
{
	uint64_t ticks = tsc > e->enter_tsc ? tsc - e->enter_tsc : 0;
	uint64_t self = ticks > e->child_ticks ? ticks - e->child_ticks : 0;
	uint64_t max;

	e->agg = NULL;
	if (parent)
		parent->child_ticks += ticks;
	a->exited++;
	a->total_ticks += ticks;
	a->self_ticks += self;
	/* no branch on a duration: the path stays the same whatever the timing */
	max = a->max_ticks;
	__asm__("" : "+r"(max)); /* keep it a conditional move, not a conditional store */
	a->max_ticks = ticks > max ? ticks : max;
	return ticks;
}

/* The bucket of a call that left no EXIT in the ring (profd counts the others'). */
static inline void agg_count_bucket(struct func_agg *a, uint64_t ticks)
{
	if (a)
		a->hist[agg_bucket(ticks)]++;
}

static int on_thread_stack(const struct agent_thread *t, uintptr_t addr)
{
	return addr >= t->stack_lo && addr < t->stack_hi;
}

/*
 * Whether two return slots lie on one stack, where their order is their age:
 * both on the thread's own stack, or both off it and close together (one
 * sigaltstack or coroutine stack). Across stacks nothing is certain.
 */
static int same_stack(const struct agent_thread *t, uintptr_t a, uintptr_t b)
{
	int a_on = on_thread_stack(t, a), b_on = on_thread_stack(t, b);

	if (a_on || b_on)
		return a_on && b_on;
	return (a > b ? a - b : b - a) < SAME_STACK_WINDOW;
}

/* Closed below the top by a publish up to `head` (shadow_stack_close_matched). */
static inline int entry_is_dead(const struct shadow_entry *e, uint64_t head)
{
	return e->exit_head < head;
}

/* Its ENTER is in the ring (or goes with this hook's publish): its EXIT must be too. */
static inline int entry_written(const struct shadow_entry *e)
{
	return (e->flags & SHADOW_RECORDED) ||
	       ((e->flags & SHADOW_PENDING) && e->enter_pos < ENTER_FILTERED);
}

/* A live call whose ENTER still waits (--min-duration). */
static inline int entry_waiting(const struct shadow_entry *e)
{
	return (e->flags & SHADOW_PENDING) && e->enter_pos == ENTER_UNWRITTEN &&
	       e->exit_head == SHADOW_ALIVE;
}

/*
 * A call goes on the timeline without its values: the segment had no room
 * for them beyond the records owed (only the enter hook moves to another
 * segment). Counted for its function, as the drops are.
 */
COLD static void values_dropped(struct agent_thread *t, uint32_t func_id)
{
	struct func_agg *a = agg_get(t, func_id);

	if (a)
		agg_add(&a->values_dropped, 1);
}

/*
 * The values entry i's call was entered with (--args), saved while its
 * ENTER waited, after that ENTER (just written, at head - 2): when the
 * segment has room for them beyond what every open call still needs, else
 * the call goes on the timeline without them. Returns the new head.
 */
COLD static uint64_t pending_write_values(struct agent_thread *t, uint64_t head, uint32_t i)
{
	uint32_t n = t->arg_saved[i];
	uint64_t reserve = (uint64_t)(state_depth(state_load(t)) + 1) * agent_units_per_call + 2;

	if (!n)
		return head;
	if (!ring_has_segment_room(t, head, n + reserve)) {
		values_dropped(t, t->shadow[i].func_id);
		return head;
	}
	arg_units_copy(ring_at(t, head), t->arg_save[i], n);
	ring_at(t, head - 2)->kind |= n << ARG_KIND_UNITS_SHIFT;
	return head + n;
}

/*
 * Writes from `head` the waiting ENTERs of entry k and of the calls it runs
 * in, oldest first, down to the first entry already written: a call on the
 * timeline needs its parents there. Nothing was written while they waited
 * (it would have written them), so the records stay in time order. Room was
 * reserved at their enters (agent_units_per_call). Returns the new head;
 * the records go out with the caller's publish. Inlined, like every helper
 * of more than one hook path: each path keeps its own instructions, so that
 * tests/targets/sigstep_tracer.c can tell one path's visits from another's.
 */
static inline __attribute__((always_inline)) uint64_t
pending_write_enters(struct agent_thread *t, uint64_t head, uint32_t k)
{
	uint32_t i = k;

	while (i > 0 && !entry_written(&t->shadow[i - 1]))
		i--;
	for (; i <= k; i++) {
		struct shadow_entry *e = &t->shadow[i];

		if (!entry_waiting(e) || !e->func_id)
			continue;
		ring_put_enter(t, head, e->func_id, e->enter_tsc, e->return_address, e->return_slot);
		e->enter_pos = head;
		head += 2;
		if (unlikely(e->flags & SHADOW_ARGS))
			head = pending_write_values(t, head, i);
	}
	return head;
}

/* A call kept off the timeline by a filter: for its function and the thread. */
static inline void count_filtered(struct agent_thread *t, struct func_agg *a, int reason)
{
	count_add(&t->filtered_by[reason], 1);
	if (a)
		agg_add(&a->filtered, 1);
}

/*
 * The exit of entry k (at tsc) while its ENTER waits or was written late:
 * its EXIT at head if it is on the timeline now, else counted as too short.
 * `a`: its figures as they were before agg_close_figures. Returns the new head.
 */
static inline uint64_t pending_exit(struct agent_thread *t, struct shadow_entry *e, uint32_t k,
				    uint64_t head, uint64_t tsc, struct func_agg *a)
{
	if (e->enter_pos == ENTER_UNWRITTEN) {
		if (tsc - e->enter_tsc < agent_min_ticks || tsc < e->enter_tsc) {
			/* first: an exit cut short here is never also written by a cold path */
			e->enter_pos = ENTER_FILTERED;
			count_filtered(t, a, AGG_FILTER_SHORT);
			return head;
		}
		head = pending_write_enters(t, head, k);
	}
	ring_put(t, head, e->func_id, EVENT_EXIT, tsc);
	return head + 1;
}

/* ---- the guard ------------------------------------------------------------------------ */

/* A hook's guard: its call's return slot (never 0 or AGENT_GUARD_AGENT). */
static inline int guard_is_hook(uintptr_t guard)
{
	return guard > AGENT_GUARD_AGENT;
}

static inline void guard_take(uintptr_t *slot)
{
	atomic_signal_fence(memory_order_seq_cst); /* nothing it covers moves above */
	agent_thread_guard = (uintptr_t)slot;
	atomic_signal_fence(memory_order_seq_cst); /* the guard is set before what it covers */
}

/* `restore`: the guard the hook found, NONE or AGENT (agent code runs below us). */
static inline void guard_release(uintptr_t restore)
{
	atomic_signal_fence(memory_order_seq_cst); /* all it covers is done before */
	agent_thread_guard = restore;
}

/*
 * Whether a call from `slot` can be a signal handler's, nested in the hook
 * that holds the guard: handler frames lie below the interrupted hook on its
 * stack, or on a sigaltstack when the hook ran on the thread's stack; a
 * handler interrupting code off the thread's stack stays off it.
 */
static int nested_in_guarded_hook(const struct agent_thread *t, uintptr_t *slot)
{
	uintptr_t g = agent_thread_guard, s = (uintptr_t)slot;

	if (same_stack(t, g, s))
		return s < g;
	return on_thread_stack(t, g); /* a handler on a sigaltstack, or we left g's stack */
}

/*
 * The guard of a hook is still set, but the hook is gone: a handler left it
 * by siglongjmp. Every publish is one store, so the committed state is
 * whole: a call whose enter was left before its publish is simply not
 * recorded (its body never ran), and closing marks and late ENTERs made
 * without their publish are undone.
 */
COLD static void guard_recover(struct agent_thread *t)
{
	uint64_t s = state_load(t), head = state_head(s);

	for (uint32_t i = 0; i < state_depth(s); i++) {
		struct shadow_entry *e = &t->shadow[i];

		if (e->exit_head != SHADOW_ALIVE && e->exit_head >= head)
			e->exit_head = SHADOW_ALIVE;
		if ((e->flags & SHADOW_PENDING) && e->enter_pos < ENTER_FILTERED &&
		    e->enter_pos >= head)
			e->enter_pos = ENTER_UNWRITTEN; /* written late, never published */
	}
	t->guard_recoveries++;
	guard_release(AGENT_GUARD_NONE);
}

/* An enter while the guard is set: 1 to pass through, 0 when the guard was taken back. */
COLD static int enter_while_guarded(struct agent_thread *t, uint32_t func_id,
				    uintptr_t *return_slot)
{
	if (!guard_is_hook(agent_thread_guard) || !t)
		return 1; /* agent code runs on this thread */
	if (nested_in_guarded_hook(t, return_slot)) {
		if (func_id) /* not a stub patched only for its flags (backtrace, the loader's hook) */
			count_untimed(t, func_id, AGG_DROP_IN_HOOK);
		return 1;
	}
	guard_recover(t);
	return 0;
}

/* ---- shadow-stack repair (cold) ------------------------------------------------------ */

/*
 * Whether the frame of entry e, recorded more recently than the frame now
 * returning from `slot`, is certainly gone: it lay deeper on the same stack.
 * Frames on another stack (a coroutine that is only suspended, a signal
 * handler's sigaltstack) stay: they may still return.
 */
static int frame_is_gone(const struct agent_thread *t, const struct shadow_entry *e,
			 uintptr_t *slot)
{
	uintptr_t a = (uintptr_t)e->return_slot, b = (uintptr_t)slot;

	return a < b && same_stack(t, a, b);
}

/*
 * Before a cold path closes live entries lo..hi-1 at tsc (all of them, or
 * with `slot`: entry lo and those above whose frames are gone), the waiting
 * ENTERs of the ones long enough are written, oldest first, so that every
 * record keeps its time order whatever order the EXITs then take.
 */
static inline __attribute__((always_inline)) uint64_t
pending_write_closing(struct agent_thread *t, uint64_t head, uint32_t lo, uint32_t hi, uint64_t tsc,
		      uintptr_t *slot)
{
	for (uint32_t i = hi; i-- > lo;) {
		const struct shadow_entry *e = &t->shadow[i];

		if (slot && i != lo && !frame_is_gone(t, e, slot))
			continue;
		if (entry_waiting(e) && e->func_id && tsc >= e->enter_tsc &&
		    tsc - e->enter_tsc >= agent_min_ticks)
			return pending_write_enters(t, head, i);
	}
	return head;
}

/*
 * Closes entry i at tsc in a cold path: its figures, and its EXIT at *head
 * when its ENTER is in the ring (pending ones long enough were written by
 * pending_write_closing). Returns 1 when it wrote an EXIT.
 */
static inline __attribute__((always_inline)) int close_entry(struct agent_thread *t, uint32_t i,
								  uint64_t *head, uint64_t tsc)
{
	struct shadow_entry *e = &t->shadow[i];
	struct func_agg *a = e->agg;
	uint64_t ticks;

	if (!e->func_id)
		return 0;
	/* a NULL `a`: counted already, by an exit a siglongjmp cut short (or no figures) */
	ticks = a ? agg_close_figures(e, i ? &t->shadow[i - 1] : NULL, a, tsc) : 0;
	if (entry_written(e)) {
		ring_put(t, (*head)++, e->func_id, EVENT_EXIT, tsc);
		return 1;
	}
	agg_count_bucket(a, ticks);
	if ((e->flags & SHADOW_PENDING) && a)
		count_filtered(t, a, AGG_FILTER_SHORT);
	return 0;
}

/*
 * Pops the entries on top whose frames a new call at new_slot proves gone
 * (at or below it on the same stack: longjmp, exceptions, a handler that
 * left a sigaltstack), each closed now (an EXIT when it was recorded), and
 * any entry closed earlier below the top; one publish. Entries on another
 * stack wait for the exact match at exit.
 */
COLD static void shadow_stack_drop_stale(struct agent_thread *t, uintptr_t *new_slot)
{
	uint64_t s = state_load(t), head = state_head(s), tsc = cpu_ticks(), pos;
	uint32_t depth = state_depth(s), k = depth;

	while (k > 0) {
		struct shadow_entry *e = &t->shadow[k - 1];

		if (!entry_is_dead(e, head)) {
			if (e->return_slot > new_slot ||
			    !same_stack(t, (uintptr_t)e->return_slot, (uintptr_t)new_slot))
				break; /* a live frame above the new call, or not comparable */
			if (e->return_slot == new_slot &&
			    *new_slot == entry_hijack_address(t, k - 1))
				break; /* a tail call: the hijacked caller jumped here, still live */
		}
		k--;
	}
	if (k == depth)
		return;
	pos = pending_write_closing(t, head, k, depth, tsc, NULL);
	for (uint32_t i = depth; i-- > k;)
		if (!entry_is_dead(&t->shadow[i], head))
			close_entry(t, i, &pos, tsc);
	state_publish(t, state_make(pos, k));
}

/*
 * The exit of the frame at `slot` when its entry is not the live top: the
 * entries above it whose frames are gone and the entry itself are closed
 * (EXITs for the recorded ones); those still live (other stacks) stay where
 * they are, and the closed ones below them are marked with the position of
 * their EXIT, dead once it is published (no entry moves: a siglongjmp could
 * tear a compaction). One publish. Returns the real return address.
 */
COLD static uintptr_t shadow_stack_close_matched(struct agent_thread *t, uintptr_t *slot,
						 uint64_t tsc)
{
	uint64_t s = state_load(t), head = state_head(s), pos;
	uint32_t depth = state_depth(s), m = depth;
	uintptr_t return_address;

	if (!depth)
		return 0; /* cannot happen: a hijacked return always has its entry */
	while (m > 0 && (t->shadow[m - 1].return_slot != slot ||
			 entry_is_dead(&t->shadow[m - 1], head)))
		m--;
	m = m ? m - 1 : depth - 1; /* no entry at all cannot happen: take the top */
	pos = pending_write_closing(t, head, m, depth, tsc, slot);
	for (uint32_t i = m; i < depth; i++) {
		struct shadow_entry *e = &t->shadow[i];
		uint64_t at = pos;

		if (entry_is_dead(e, head) || (i != m && !frame_is_gone(t, e, slot)))
			continue;
		/* closed at once when there is nothing to record (SHADOW_CLOSED) */
		e->exit_head = close_entry(t, i, &pos, tsc) ? at : SHADOW_CLOSED;
	}
	return_address = t->shadow[m].return_address;
	while (depth > 0 && t->shadow[depth - 1].exit_head < pos)
		depth--; /* closed entries on top (dead before or now) are popped */
	state_publish(t, state_make(pos, depth));
	return return_address;
}

#if defined(__x86_64__)
/* Entry i's return address is where the call pushed it: its return slot. */
static void restore_return_homes(struct agent_thread *t, uint32_t i, uintptr_t *below)
{
	struct shadow_entry *e = &t->shadow[i];

	(void)below;
	if (*e->return_slot == entry_hijack_address(t, i))
		*e->return_slot = e->return_address;
}

static void rehijack_return_homes(struct agent_thread *t, uint64_t state)
{
	for (uint32_t i = 0; i < state_depth(state); i++) {
		struct shadow_entry *e = &t->shadow[i];

		if (!entry_is_dead(e, state_head(state)) && *e->return_slot == e->return_address)
			*e->return_slot = entry_hijack_address(t, i);
	}
}
#else
/* x30 without its pointer-authentication code (xpaclri: a NOP without PAuth). */
static inline uintptr_t pac_strip(uintptr_t v)
{
	register uintptr_t lr __asm__("x30") = v;

	__asm__("hint #7" : "+r"(lr));
	return lr;
}

/*
 * pacia1716/pacib1716 v, modifier: hint-space instructions, so v comes back
 * unsigned where the CPU has no PAuth (paciasp was a NOP there too).
 */
static inline uintptr_t pac_sign(uintptr_t v, uintptr_t modifier, int key_b)
{
	register uintptr_t x17 __asm__("x17") = v;
	register uintptr_t x16 __asm__("x16") = modifier;

	if (key_b)
		__asm__("hint #10" : "+r"(x17) : "r"(x16)); /* pacib1716 */
	else
		__asm__("hint #8" : "+r"(x17) : "r"(x16)); /* pacia1716 */
	return x17;
}

/*
 * What a home of entry e holding w (the exit trampoline's address, plain or
 * signed by the function's paciasp/pacibsp with its entry SP) must hold for
 * the unwinder and for the function's own autiasp: the real return address,
 * signed the same way. 0 when w is something else. The function's own key
 * comes first: its signature of the exit trampoline can equal the plain
 * address (a PAC of 0), and the unwinder authenticates what it reads. Only
 * the flags tell that case from a function that does not sign: they must
 * name every signer (agent/stub_slot_aarch64.c, return_signing_flags).
 */
static uintptr_t restored_return(const struct shadow_entry *e, uintptr_t w)
{
	const uintptr_t exit = (uintptr_t)profagent_exit_trampoline;
	uintptr_t sp_entry = (uintptr_t)(e->return_slot + 1);
	int own_key = (e->flags & SHADOW_SIGNS_RA_B) ? 1 : 0;

	if ((e->flags & (SHADOW_SIGNS_RA_A | SHADOW_SIGNS_RA_B)) &&
	    pac_sign(exit, sp_entry, own_key) == w)
		return pac_sign(e->return_address, sp_entry, own_key);
	if (w == exit) /* a plain copy: the function does not sign, or a stale one */
		return e->return_address;
	if (pac_strip(w) != exit)
		return 0;
	for (int key_b = 0; key_b < 2; key_b++) /* signed later than at the entry */
		if (pac_sign(exit, sp_entry, key_b) == w)
			return pac_sign(e->return_address, sp_entry, key_b);
	return 0; /* another modifier: leave it */
}

/*
 * aarch64: the return slot (sp_entry - 8, where the trampoline saved x30)
 * only names the call; the prologue then saves x30 wherever its frame layout
 * says (GCC: below its locals; clang: above them). Without unwinding the
 * frame by its CFI, the home cannot be told from stale copies in
 * uninitialized locals or dead frames, so every word between the entry SP
 * and `below` (the next deeper frame's return slot, or the unwinder's) that
 * holds the exit trampoline's address gets the real return address: stale
 * copies are dead data, and a live copy (a __builtin_return_address kept)
 * is better off real. Each word is remembered to be hijacked again.
 */
static void restore_return_homes(struct agent_thread *t, uint32_t i, uintptr_t *below)
{
	struct shadow_entry *e = &t->shadow[i];
	uintptr_t *slot = e->return_slot;

	if (below >= slot || !same_stack(t, (uintptr_t)slot, (uintptr_t)below))
		return; /* another stack: no telling what lies between */
	for (uintptr_t *p = slot; p > below && t->n_lr_homes < LR_HOMES_MAX; p--) {
		uintptr_t w = *p, real = restored_return(e, w);

		if (!real)
			continue;
		t->lr_homes[t->n_lr_homes++] = (struct lr_home){ p, slot, w, real, i };
		*p = real;
	}
}

/* Words of live calls still as the restore left them get the exit trampoline back. */
static void rehijack_return_homes(struct agent_thread *t, uint64_t state)
{
	for (uint32_t k = 0; k < t->n_lr_homes; k++) {
		struct lr_home *h = &t->lr_homes[k];
		struct shadow_entry *e = &t->shadow[h->index];

		if (h->index < state_depth(state) && e->return_slot == h->for_slot &&
		    !entry_is_dead(e, state_head(state)) && *h->home == h->restored)
			*h->home = h->hijacked;
	}
	t->n_lr_homes = 0;
}
#endif

/* A return address as the code it returns to sits: without a PAC on aarch64. */
static inline uintptr_t return_address_plain(uintptr_t v)
{
#if defined(__x86_64__)
	return v;
#else
	return pac_strip(v);
#endif
}

/*
 * After an unwinder ran: entries whose frames are gone are closed, the live
 * ones get their hijack back (only where their return address's home
 * still holds the real one we restored).
 */
COLD static void shadow_stack_rehijack(struct agent_thread *t, uintptr_t *new_slot)
{
	shadow_stack_drop_stale(t, new_slot);
	rehijack_return_homes(t, state_load(t));
	t->returns_restored = 0;
}

/* Before an unwinder walks this thread's stack: every return address back in place. */
COLD static void shadow_stack_restore_returns(struct agent_thread *t, uintptr_t *unwinder_slot)
{
	uint64_t s = state_load(t);
	uintptr_t *below = unwinder_slot;

	t->unwind_slot = unwinder_slot;
	t->returns_restored = 1; /* first: a siglongjmp halfway leaves it to be re-hijacked */
	for (uint32_t i = state_depth(s); i-- > 0;) {
		if (entry_is_dead(&t->shadow[i], state_head(s)))
			continue;
		restore_return_homes(t, i, below);
		below = t->shadow[i].return_slot;
	}
}

/* ---- Go's exit ------------------------------------------------------------------------ */

/* A raw system call: libc's wrappers may be instrumented, and the hooks call nothing. */
static long raw_syscall4(long nr, long a0, long a1, long a2, long a3)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a3;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a0), "S"(a1), "d"(a2), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
#else
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a0;
	register long x1 __asm__("x1") = a1;
	register long x2 __asm__("x2") = a2;
	register long x3 __asm__("x3") = a3;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	return x0;
#endif
}

/*
 * CLOCK_MONOTONIC in ns, or 0 when the kernel refuses (a seccomp filter
 * that expects the vDSO): the caller then counts its waits instead.
 */
static uint64_t raw_monotonic_ns(void)
{
	struct timespec ts;

	if (raw_syscall4(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define GO_EXIT_IDLE_NS (3ull * 1000000000u) /* the flusher sent nothing for this long */
#define GO_EXIT_MAX_NS (30ull * 1000000000u)

/*
 * Go's runtime.exit is about to exit_group: no destructor will run, so the
 * flusher (which looks at the word every tick) sends the final figures and
 * the goodbye now, while this thread waits. It waits as long as the flusher
 * makes progress, 3 s without progress or 30 s in all at most, by the clock:
 * the futex wait returns early with EINTR whenever a signal arrives, and
 * Go's sysmon sends this thread SIGURG every ~10 ms (to Go it is a goroutine
 * running on, to be preempted), so counting waits as seconds gave up after
 * ~30 ms and lost the final figures of 1 run in ~40 on a loaded machine,
 * where the flusher may not run that soon. It waits on whatever stack Go
 * called from, a goroutine's maybe, with ~800 bytes Go guarantees below it:
 * hence no slow path (vector state), no libc, raw system calls. Once: a
 * second exit, or one after the flusher ended, goes on.
 */
COLD static void go_exit_flush(void)
{
	const struct timespec second = { 1, 0 };
	uint32_t none = AGENT_EXIT_NONE, seen, progress;
	uint64_t start, progress_at, now;

	if (!atomic_load_explicit(&agent_recording, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong(&agent_exit_request, &none, AGENT_EXIT_REQUESTED))
		return;
	seen = atomic_load(&agent_flush_progress);
	start = progress_at = raw_monotonic_ns();
	/* without a clock, each wait counts as the full second it may last */
	for (uint64_t waits = 0; atomic_load(&agent_exit_request) == AGENT_EXIT_REQUESTED;
	     waits++) {
		now = start ? raw_monotonic_ns() : waits * 1000000000u;
		progress = atomic_load(&agent_flush_progress);
		if (progress != seen) {
			seen = progress;
			progress_at = now;
		}
		if (now - progress_at >= GO_EXIT_IDLE_NS || now - start >= GO_EXIT_MAX_NS)
			break;
		raw_syscall4(SYS_futex, (long)&agent_exit_request, FUTEX_WAIT_PRIVATE,
			     AGENT_EXIT_REQUESTED, (long)&second);
	}
}

/* _exit's and exec's hooks: the slow path sends what the agent holds first; 0 for the others. */
static inline int process_end_slow(const struct stub_desc *desc)
{
	if (desc->flags & STUB_FLAG_PROCESS_EXIT)
		return HOOK_SLOW_EXIT;
	return desc->flags & STUB_FLAG_PROCESS_EXEC ? HOOK_SLOW_EXEC : 0;
}

/* An enter on a thread without state yet: set it up, or Go's exit (which needs none). */
COLD static int enter_without_thread(const struct stub_desc *desc)
{
	if (desc->flags & STUB_FLAG_GO_EXIT) {
		go_exit_flush();
		return 0;
	}
	if (process_end_slow(desc))
		return process_end_slow(desc);
	return atomic_load_explicit(&agent_recording, memory_order_relaxed) ? HOOK_SLOW_THREAD : 0;
}

/*
 * The function has no figures on this thread yet: HOOK_SLOW_MEMORY to have
 * the slow path map them, or 0 when it could not (the call runs unattributed).
 */
COLD static int agg_missing(struct agent_thread *t, uint32_t func_id)
{
	if (func_id < AGG_PAGE_FUNCS * AGG_PAGES && !t->memory_failed) {
		t->want_agg_page = func_id / AGG_PAGE_FUNCS + 1;
		return HOOK_SLOW_MEMORY;
	}
	count_add(&t->unattributed, 1);
	return 0;
}

/*
 * The unusual cases of an enter (the caller holds the guard): 0 to go on and
 * hijack, 1 when the call must not be hijacked, HOOK_SLOW_MODULES to have
 * the trampoline's slow path look for new modules.
 */
COLD static int enter_slow_cases(struct agent_thread *t, const struct stub_desc *desc,
				 uintptr_t *return_slot)
{
	/*
	 * First, the shadow stack untouched: posix_spawn's child runs exec (and
	 * _exit when it fails) in its parent's memory, on a stack of its own but
	 * with the parent thread's state, whose entries it must not drop.
	 */
	if (process_end_slow(desc))
		return process_end_slow(desc);
	if ((desc->flags & STUB_FLAG_JIT_CALLERS) && !jit_callers_is_native(return_address_plain(*return_slot))) {
		/* from generated code, which may read or move this return address */
		int r = 0;

		if (atomic_load_explicit(&agent_recording, memory_order_relaxed) &&
		    (agg_get(t, desc->func_id) || !(r = agg_missing(t, desc->func_id))))
			count_untimed(t, desc->func_id, AGG_DROP_FROM_GENERATED_CODE);
		return r ? r : 1;
	}
	if (t->returns_restored && return_slot < t->unwind_slot && !(desc->flags & STUB_FLAG_UNWINDER)) {
		/*
		 * Called by an unwinder that walks (its personality routine, FDE
		 * lookup, a backtrace callback) or a handler there: the unwinder
		 * reads only the frames above its own, which stay restored, never
		 * those of its callees, so the call is hijacked and timed as any.
		 */
		return desc->flags & ~(STUB_FLAG_JIT_CALLERS | STUB_FLAG_ARGS) ? 1 : desc->func_id == 0;
	}
	if (t->returns_restored)
		shadow_stack_rehijack(t, return_slot);
	else
		shadow_stack_drop_stale(t, return_slot);
	if (desc->flags & STUB_FLAG_UNWINDER) {
		/* its own frame stays unhijacked: it is about to walk from it */
		shadow_stack_restore_returns(t, return_slot);
		return 1;
	}
	if (desc->flags & STUB_FLAG_GO_EXIT) {
		go_exit_flush();
		return 1;
	}
	if (desc->flags & STUB_FLAG_MODULES) /* timed never: the loader calls it mid-dlopen */
		return atomic_load_explicit(&agent_recording, memory_order_relaxed) ?
			       HOOK_SLOW_MODULES :
			       1;
	/* patched only for its flag (the catch above re-hijacked): not timed */
	return desc->func_id == 0;
}

/* ---- the hooks ----------------------------------------------------------------------- */

/*
 * The stub's flags where STUB_FLAG_ARGS leads to its capture entry: with
 * acquire, as --auto-args may set the flag of a function already running
 * (a module loaded later: agent/arg_auto.c, arg_auto_late), after filling
 * the entry; pairs with the release fence in stub_flag_set(). The fast path
 * reads the flags plainly: it only leaves for here when one is set.
 */
static inline uint32_t stub_flags_acquire(const struct stub_desc *desc)
{
	return __atomic_load_n(&desc->flags, __ATOMIC_ACQUIRE);
}

/*
 * A call that stays off the timeline: the buffer budget is spent (or the
 * flusher is a ring behind), or it is nested deeper than --max-depth.
 */
COLD static void count_off_timeline(struct agent_thread *t, struct func_agg *a, int too_deep)
{
	if (too_deep) {
		count_filtered(t, a, AGG_FILTER_DEEP);
		return;
	}
	count_add(&t->drop_reasons[AGG_DROP_BUFFER_FULL], 1);
	if (a)
		a->unrecorded++;
}

/*
 * The call's shadow entry at depth, as both enters fill it: flags
 * (SHADOW_*) and, on aarch64, how the function signs its return address.
 * Not published: the caller's state_publish does that.
 */
static inline __attribute__((always_inline)) struct shadow_entry *
shadow_push(struct agent_thread *t, uint32_t depth, const struct stub_desc *desc, uint32_t flags,
	    struct func_agg *a, uint64_t tsc, uintptr_t *return_slot)
{
	struct shadow_entry *e = &t->shadow[depth];

	e->return_address = *return_slot;
	e->return_slot = return_slot;
	e->func_id = desc->func_id;
	e->flags = flags | (desc->flags & ENTER_FAST_FLAGS);
	e->exit_head = SHADOW_ALIVE;
	e->enter_tsc = tsc;
	e->child_ticks = 0;
	e->agg = a; /* counted as open by the flusher until its exit */
#if defined(__x86_64__)
	t->landing[depth] = hijack_address(desc);
#endif
	return e;
}

/*
 * --args: the values of the call just recorded (its ENTER and frame end at
 * head), after them in the ring; the record's kind says how many units
 * follow. Its entry takes the slow exit when a return value is wanted.
 * Room was reserved (enter_slow's need). Returns the new head.
 */
COLD static uint64_t enter_values(struct agent_thread *t, struct shadow_entry *e,
				  const struct arg_func *af, uint64_t head, uintptr_t *return_slot)
{
	uint32_t n = arg_capture_enter(af, return_slot, (struct arg_unit *)ring_at(t, head), t->tid);

	ring_at(t, head - 2)->kind |= n << ARG_KIND_UNITS_SHIFT;
	if (af->n_exit)
		e->flags |= SHADOW_ARGS;
	return head + n;
}

/* --args with --min-duration: the values wait with the entry (pending_write_values). */
COLD static void enter_values_save(struct agent_thread *t, struct shadow_entry *e,
				   const struct arg_func *af, uint32_t depth, uintptr_t *return_slot)
{
	t->arg_saved[depth] = (uint8_t)arg_capture_enter(
		af, return_slot, (struct arg_unit *)t->arg_save[depth], t->tid);
	e->flags |= SHADOW_ARGS;
}

/*
 * --retval: the EXIT just put at head - 1 gets the return value after it,
 * when the segment has room beyond what the calls still open need (their
 * EXITs are reserved; a return value is not: then it is left off, counted).
 * Returns the new head.
 */
COLD static uint64_t exit_values(struct agent_thread *t, const struct shadow_entry *e,
				 uint64_t head, uint32_t depth, uintptr_t *slot)
{
	const struct arg_func *af = arg_func_get(e->func_id);
	uint64_t reserve = (uint64_t)depth * agent_units_per_call + 2;

	if (!af || !af->n_exit)
		return head;
	if (!ring_has_segment_room(t, head, af->exit_units + reserve)) {
		values_dropped(t, e->func_id);
		return head;
	}
	uint32_t n = arg_capture_exit(af, slot, (struct arg_unit *)ring_at(t, head), t->tid);

	ring_at(t, head - 1)->kind |= n << ARG_KIND_UNITS_SHIFT;
	return head + n;
}

/*
 * Every enter but the plainest (profagent_enter_hook's fast path) and
 * enter_args': flags, filters, a full segment, stale entries, no figures
 * yet. Runs under the guard the hook took and releases it. Returns as the
 * hook does.
 */
COLD static int enter_slow_general(struct agent_thread *t, const struct stub_desc *desc,
				   uintptr_t *return_slot)
{
	struct shadow_entry *e;
	struct func_agg *a;
	uint64_t s, head, tsc;
	uint32_t depth, flags = agent_min_ticks ? SHADOW_PENDING : SHADOW_RECORDED, need;
	const struct arg_func *af = NULL;
	int r = 0;

	/* before the recording check: frames hijacked earlier still need this */
	if (unlikely((desc->flags & ~STUB_FLAG_ARGS) | t->returns_restored) &&
	    (r = enter_slow_cases(t, desc, return_slot)))
		goto out;
	s = state_load(t);
	depth = state_depth(s);
	if (unlikely(depth && return_slot >= t->shadow[depth - 1].return_slot)) {
		shadow_stack_drop_stale(t, return_slot);
		s = state_load(t);
		depth = state_depth(s);
	}
	if (unlikely(!atomic_load_explicit(&agent_recording, memory_order_relaxed)))
		goto out;
	if (unlikely(depth >= AGENT_SHADOW_CAPACITY)) {
		count_untimed(t, desc->func_id, AGG_DROP_SHADOW_FULL);
		goto out;
	}
	a = agg_get(t, desc->func_id);
	if (unlikely(!a) && (r = agg_missing(t, desc->func_id)))
		goto out;
	head = state_head(s);
	if (unlikely(stub_flags_acquire(desc) & STUB_FLAG_ARGS))
		af = arg_func_get(desc->func_id);
	/* its ENTER (or its late ENTER), its EXIT, and as much for every call open; its values */
	need = (depth + 1) * agent_units_per_call + 2 + (af ? af->enter_units : 0);
	if (unlikely(depth >= agent_depth_limit)) {
		flags = 0;
	} else if (unlikely(!ring_has_room(t, head, need))) {
		r = ring_switch(t, &head, depth, need);
		if (r == HOOK_SLOW_MEMORY)
			goto out;
		flags = r ? flags : 0;
		r = 0;
	}
	tsc = cpu_ticks();
	e = shadow_push(t, depth, desc, flags, a, tsc, return_slot);
	e->enter_pos = ENTER_UNWRITTEN;
	if (likely(flags == SHADOW_RECORDED)) {
		ring_put_enter(t, head, desc->func_id, tsc, e->return_address, return_slot);
		head += 2;
		if (unlikely(af))
			head = enter_values(t, e, af, head, return_slot);
	} else if (flags && unlikely(af)) {
		enter_values_save(t, e, af, depth, return_slot);
	} else if (!flags) {
		count_off_timeline(t, a, depth >= agent_depth_limit);
	}
	state_publish(t, state_make(head, depth + 1));
	*return_slot = hijack_address(desc);
out:
	guard_release(AGENT_GUARD_NONE);
	if (r == HOOK_SLOW_MODULES || r == HOOK_SLOW_MEMORY || r == HOOK_SLOW_EXIT || r == HOOK_SLOW_EXEC)
		return r;
	return 0;
}

/*
 * --args on an otherwise plain enter: profagent_enter_hook's fast path, and
 * the call's values after its ENTER, in the one publish. Every call of a
 * function with a spec comes here: not COLD, and integers are copied
 * inline (arg_capture_ints; bench/README.md, issue 29). Returns 1, having
 * done nothing, when any other case applies: enter_slow_general's.
 */
static inline __attribute__((always_inline)) int enter_args(struct agent_thread *t,
							    const struct stub_desc *desc,
							    uintptr_t *return_slot)
{
	const struct arg_func *af = arg_func_get(desc->func_id);
	struct func_agg *a = agg_get(t, desc->func_id);
	uint64_t s = state_load(t), head = state_head(s), tsc;
	uint32_t depth = state_depth(s), n;
	struct arg_unit *values;
	struct shadow_entry *e;

	/* the fast path's conditions; room as enter_slow_general's need, unfiltered */
	if (unlikely(!af) || unlikely(!a) || unlikely(t->returns_restored) ||
	    unlikely(agent_min_ticks) || unlikely(depth >= agent_depth_limit) ||
	    unlikely(!atomic_load_explicit(&agent_recording, memory_order_relaxed)) ||
	    unlikely(depth && return_slot >= t->shadow[depth - 1].return_slot) ||
	    unlikely(!ring_has_room(t, head, depth + 3 + af->enter_units)))
		return 1;
	tsc = cpu_ticks();
	e = shadow_push(t, depth, desc, SHADOW_RECORDED, a, tsc, return_slot);
	values = (struct arg_unit *)ring_at(t, head + 2);
	if (likely(af->ints_only)) { /* one unit each: the ENTER's kind written once, with their count */
		ring_put_enter_kind(t, head, desc->func_id,
				    EVENT_ENTER | (uint32_t)af->n_enter << ARG_KIND_UNITS_SHIFT, tsc,
				    e->return_address, return_slot);
		n = arg_capture_ints(af, return_slot, values);
	} else {
		ring_put_enter(t, head, desc->func_id, tsc, e->return_address, return_slot);
		n = arg_capture_enter(af, return_slot, values, t->tid);
		ring_at(t, head)->kind |= n << ARG_KIND_UNITS_SHIFT;
	}
	if (af->n_exit)
		e->flags |= SHADOW_ARGS; /* its exit takes exit_slow, for the return value */
	state_publish(t, state_make(head + 2 + n, depth + 1));
	*return_slot = hijack_address(desc);
	guard_release(AGENT_GUARD_NONE);
	return 0;
}

/*
 * A function with a spec, and no other flag: enter_args, else every other
 * case. `hot`: called only from the cold enter_slow, it would be built for
 * size and placed with the cold code (arg1's cost beyond no spec: +7 to +12
 * ns hot, +14 to +16 cold in the same sittings, bench/README.md).
 */
static __attribute__((noinline, hot)) int enter_with_args(struct agent_thread *t,
						     const struct stub_desc *desc,
						     uintptr_t *return_slot)
{
	if (!enter_args(t, desc, return_slot))
		return 0;
	return enter_slow_general(t, desc, return_slot);
}

/*
 * The hook's way out of its fast path. COLD, as the hook must see it: a
 * hot callee there moves the hook's own code about (its fast path is kept
 * as it is, instruction for instruction, when a spec is added: issue 29).
 */
COLD static int enter_slow(struct agent_thread *t, const struct stub_desc *desc,
			   uintptr_t *return_slot)
{
	if (stub_flags_acquire(desc) == STUB_FLAG_ARGS)
		return enter_with_args(t, desc, return_slot);
	return enter_slow_general(t, desc, return_slot);
}

/*
 * Returns HOOK_SLOW_* when the trampoline must run its slow path (and maybe
 * ask again). Here only the plainest enter (on x86-64 the entry trampoline
 * does it first: the same conditions, stores and order), every other case is
 * enter_slow's: a function with figures and no flags, recording on, no
 * filter, room in the segment, no stale entry on top (about 12 % fewer
 * instructions on this path, 1.5-2 ns per call: bench/README.md, issue 28).
 */
int profagent_enter_hook(const struct stub_desc *desc, uintptr_t *return_slot)
{
	struct agent_thread *t = agent_current_thread;
	struct shadow_entry *e;
	struct func_agg *a;
	uint64_t s, head, tsc;
	uint32_t depth;

	if (unlikely(agent_thread_guard) && enter_while_guarded(t, desc->func_id, return_slot))
		return 0;
	if (unlikely(!t))
		return enter_without_thread(desc);
	guard_take(return_slot);
	s = state_load(t);
	depth = state_depth(s);
	head = state_head(s);
	a = agg_get(t, desc->func_id);
	/* --max-depth's limit is at most the shadow stack's capacity: one compare for both */
	if (unlikely((desc->flags & ~ENTER_FAST_FLAGS) | t->returns_restored) || unlikely(!a) ||
	    unlikely(agent_min_ticks) || unlikely(depth >= agent_depth_limit) ||
	    unlikely(!atomic_load_explicit(&agent_recording, memory_order_relaxed)) ||
	    unlikely(depth && return_slot >= t->shadow[depth - 1].return_slot) ||
	    unlikely(!ring_has_room(t, head, depth + 3))) /* as enter_slow's need, unfiltered */
		return enter_slow(t, desc, return_slot);
	tsc = cpu_ticks();
	/* enter_pos: read only for SHADOW_PENDING entries */
	e = shadow_push(t, depth, desc, SHADOW_RECORDED, a, tsc, return_slot);
	ring_put_enter(t, head, desc->func_id, tsc, e->return_address, return_slot);
	state_publish(t, state_make(head + 2, depth + 1));
	*return_slot = hijack_address(desc);
	guard_release(AGENT_GUARD_NONE);
	return 0;
}

/*
 * Every exit but the plainest (profagent_exit_hook's fast path), at tsc,
 * under the guard the hook took: restores found_guard. Returns the real
 * return address.
 */
COLD static uintptr_t exit_slow(struct agent_thread *t, uintptr_t *slot, uint64_t tsc,
				uintptr_t found_guard)
{
	uint64_t s = state_load(t), head = state_head(s);
	uint32_t depth = state_depth(s);
	struct shadow_entry *e = &t->shadow[depth - 1];
	uintptr_t return_address;

	if (unlikely(!depth || e->return_slot != slot)) {
		return_address = shadow_stack_close_matched(t, slot, tsc);
	} else {
		return_address = e->return_address;
		if (likely(e->func_id)) {
			struct func_agg *a = e->agg; /* agg_close_figures clears it */
			uint64_t ticks = a ? agg_close_figures(e, depth > 1 ? e - 1 : NULL, a, tsc) : 0;

			if (likely(e->flags & SHADOW_RECORDED))
				ring_put(t, head++, e->func_id, EVENT_EXIT, tsc);
			else if (e->flags & SHADOW_PENDING)
				head = pending_exit(t, e, depth - 1, head, tsc, a);
			if (head == state_head(s)) /* no EXIT: off the timeline, its bucket is ours */
				agg_count_bucket(a, ticks);
			if (unlikely(e->flags & SHADOW_ARGS) && head != state_head(s))
				head = exit_values(t, e, head, depth - 1, slot);
		}
		state_publish(t, state_make(head, depth - 1));
	}
	guard_release(found_guard);
	return return_address;
}

/*
 * stack_pointer is rsp as the instrumented function returned: its return
 * slot is just below. Here only the plainest exit (on x86-64 the exit
 * trampoline does it first, as the enter's), every other case is
 * exit_slow's: the top entry's, recorded, with figures.
 */
uintptr_t profagent_exit_hook(uintptr_t stack_pointer)
{
	struct agent_thread *t = agent_current_thread;
	uintptr_t *slot = (uintptr_t *)(stack_pointer - sizeof(uintptr_t));
	uintptr_t found_guard = agent_thread_guard; /* AGENT when agent code runs below (exit) */
	uintptr_t return_address;
	struct shadow_entry *e;
	struct func_agg *a;
	uint64_t s, head, tsc;
	uint32_t depth;

	/* no handler nested in a hook returns through us: a siglongjmp left the guard */
	if (unlikely(guard_is_hook(found_guard))) {
		guard_recover(t);
		found_guard = AGENT_GUARD_NONE;
	}
	guard_take(slot);
	tsc = cpu_ticks();
	s = state_load(t);
	head = state_head(s);
	depth = state_depth(s);
	e = &t->shadow[depth - 1];
	if (unlikely(!depth || e->return_slot != slot || !e->func_id ||
		     (e->flags & ~ENTER_FAST_FLAGS) != SHADOW_RECORDED || !e->agg))
		return exit_slow(t, slot, tsc, found_guard);
	a = e->agg;
	return_address = e->return_address; /* before the guard goes: e is popped */
	agg_close_figures(e, depth > 1 ? e - 1 : NULL, a, tsc);
	ring_put(t, head, e->func_id, EVENT_EXIT, tsc);
	state_publish(t, state_make(head + 1, depth - 1));
	guard_release(found_guard);
	return return_address;
}

void hooks_set_filters(uint64_t min_ticks, uint32_t max_depth)
{
	agent_min_ticks = min_ticks;
	agent_units_per_call = min_ticks ? 3 : 1;
	agent_depth_limit = max_depth && max_depth < AGENT_SHADOW_CAPACITY ? max_depth :
									     AGENT_SHADOW_CAPACITY;
}

/*
 * On: AGENT_RECORDING_PLAIN, or AGENT_RECORDING_FILTERED with --min-duration
 * (set before: hooks_set_filters), so that trampolines/x86_64.S's enter fast
 * path checks both in one compare (bench/README.md, "Instructions per call").
 */
void hooks_set_recording(int on)
{
	atomic_store(&agent_recording,
		     !on ? 0 : agent_min_ticks ? AGENT_RECORDING_FILTERED : AGENT_RECORDING_PLAIN);
}

/* Thread exit with frames still open (pthread_exit, cancellation): they are all gone. */
void hooks_close_all(struct agent_thread *t)
{
	uint64_t s = state_load(t), head = state_head(s), tsc = cpu_ticks(), pos;

	pos = pending_write_closing(t, head, 0, state_depth(s), tsc, NULL);
	for (uint32_t i = state_depth(s); i-- > 0;)
		if (!entry_is_dead(&t->shadow[i], head))
			close_entry(t, i, &pos, tsc);
	state_publish(t, state_make(pos, 0));
}
