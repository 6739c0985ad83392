// SPDX-License-Identifier: MIT
/*
 * The enter/exit hooks: the only C the trampolines reach on every call.
 * Compiled with -mgeneral-regs-only (the trampolines do not save vector
 * state), no stack protector, no calls out of this file: timestamp, append
 * to this thread's ring, push/pop the shadow stack. Never blocks, never
 * allocates, never enters the kernel; when the ring is full the event is
 * dropped and counted.
 *
 * The shadow stack survives frames that leave without returning: longjmp
 * and exceptions are noticed when a later call or return finds entries
 * whose stack slot is gone, and unwinders (exceptions, backtrace(),
 * pthread_exit) get the real return addresses back before they walk.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent_thread.h"
#include "trampolines/trampoline_layout.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define COLD __attribute__((noinline, cold))

/* TLS read on every call: initial-exec, no lazy allocation. */
__thread struct agent_thread *agent_current_thread __attribute__((tls_model("initial-exec")));
__thread unsigned agent_thread_guard __attribute__((tls_model("initial-exec")));
/* Global because every hook reads it; written only at start, stop and fork. */
_Atomic int agent_recording;

static inline uint64_t read_tsc(void)
{
	return __builtin_ia32_rdtsc();
}

/*
 * Room for this event plus the exits of every open call, so that an exit
 * never finds the ring full: a recorded BEGIN always gets its END.
 * An enter takes two units (record + frame) and reserves its own exit.
 */
static inline int hooks_ring_has_room(struct agent_thread *t, uint64_t head, uint32_t reserve)
{
	uint64_t tail = atomic_load_explicit(&t->tail, memory_order_acquire);

	return AGENT_RING_RECORDS - (head - tail) >= reserve;
}

/* The enter record and its frame, published together so the flusher never splits them. */
static inline void hooks_append_enter(struct agent_thread *t, uint32_t func_id,
				      uintptr_t return_address, uintptr_t *return_slot)
{
	uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
	struct event_record *rec = &t->records[head & (AGENT_RING_RECORDS - 1)];
	struct event_enter_frame *frame =
		(struct event_enter_frame *)&t->records[(head + 1) & (AGENT_RING_RECORDS - 1)];

	rec->tsc = read_tsc();
	rec->func_id = func_id;
	rec->kind = EVENT_ENTER;
	frame->return_address = return_address;
	frame->tagged_slot = (uintptr_t)return_slot | EVENT_FRAME_TAG;
	/* pairs with the acquire in flusher_drain_thread() */
	atomic_store_explicit(&t->head, head + 2, memory_order_release);
}

static inline void hooks_append(struct agent_thread *t, uint32_t func_id, uint32_t kind)
{
	uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
	struct event_record *rec = &t->records[head & (AGENT_RING_RECORDS - 1)];

	rec->tsc = read_tsc();
	rec->func_id = func_id;
	rec->kind = kind;
	/* pairs with the acquire in flusher_drain_thread() */
	atomic_store_explicit(&t->head, head + 1, memory_order_release);
}

/* Closes the top entry without a return through us (its frame is gone). */
static void shadow_stack_drop_top(struct agent_thread *t)
{
	struct shadow_entry *e = &t->shadow[--t->depth];

	if (e->func_id)
		hooks_append(t, e->func_id, EVENT_EXIT);
}

static int on_thread_stack(const struct agent_thread *t, uintptr_t addr)
{
	return addr >= t->stack_lo && addr < t->stack_hi;
}

/*
 * A new call's return slot at or above an entry's slot on the same stack
 * means that entry's frame is gone (longjmp, exception). Across stacks
 * (sigaltstack) nothing is certain: such entries wait for the exact match
 * at exit.
 */
COLD static void shadow_stack_drop_stale(struct agent_thread *t, uintptr_t *new_slot)
{
	if (!on_thread_stack(t, (uintptr_t)new_slot))
		return;
	while (t->depth > 0) {
		uintptr_t *slot = t->shadow[t->depth - 1].return_slot;

		if (slot > new_slot || !on_thread_stack(t, (uintptr_t)slot))
			break; /* a live frame above the new call */
		if (slot == new_slot && *new_slot == (uintptr_t)profagent_exit_trampoline)
			break; /* a tail call: the hijacked caller jumped here, still live */
		shadow_stack_drop_top(t);
	}
}

/*
 * After an unwinder ran: entries whose frames are gone are closed, the live
 * ones get the exit trampoline back (only where the slot still holds the
 * real return address we restored).
 */
COLD static void shadow_stack_rehijack(struct agent_thread *t, uintptr_t *new_slot)
{
	shadow_stack_drop_stale(t, new_slot);
	for (uint32_t i = 0; i < t->depth; i++) {
		struct shadow_entry *e = &t->shadow[i];

		if (*e->return_slot == e->return_address)
			*e->return_slot = (uintptr_t)profagent_exit_trampoline;
	}
	t->returns_restored = 0;
}

/* Before an unwinder walks this thread's stack: every return address back in place. */
COLD static void shadow_stack_restore_returns(struct agent_thread *t, uintptr_t *unwinder_slot)
{
	t->unwind_slot = unwinder_slot;
	for (uint32_t i = 0; i < t->depth; i++) {
		struct shadow_entry *e = &t->shadow[i];

		if (*e->return_slot == (uintptr_t)profagent_exit_trampoline)
			*e->return_slot = e->return_address;
	}
	t->returns_restored = 1;
}

/*
 * The unusual cases of an enter: 0 to go on and hijack, 1 when the call must
 * not be hijacked, HOOK_SLOW_MODULES to have the trampoline's slow path look
 * for new modules.
 */
COLD static int enter_slow_cases(struct agent_thread *t, const struct stub_desc *desc,
				 uintptr_t *return_slot)
{
	if (t->returns_restored && return_slot < t->unwind_slot && !(desc->flags & STUB_FLAG_UNWINDER))
		return 1; /* called by the unwinder while it walks: no hijack, or it would see it */
	if (t->returns_restored)
		shadow_stack_rehijack(t, return_slot);
	else if (t->depth && return_slot >= t->shadow[t->depth - 1].return_slot)
		shadow_stack_drop_stale(t, return_slot);
	if (desc->flags & STUB_FLAG_UNWINDER) {
		/* its own frame stays unhijacked: it is about to walk from it */
		shadow_stack_restore_returns(t, return_slot);
		return 1;
	}
	if (desc->flags & STUB_FLAG_MODULES) /* timed never: the loader calls it mid-dlopen */
		return atomic_load_explicit(&agent_recording, memory_order_relaxed) ?
			       HOOK_SLOW_MODULES :
			       1;
	/* patched only for its flag (the catch above re-hijacked): not timed */
	return desc->func_id == 0;
}

/* Returns 1 when the thread has no state yet: the trampoline runs the slow path and retries. */
int profagent_enter_hook(const struct stub_desc *desc, uintptr_t *return_slot)
{
	struct agent_thread *t = agent_current_thread;
	uint64_t head;

	if (unlikely(agent_thread_guard)) {
		/* a signal handler called in while this thread was inside a hook */
		if (agent_thread_guard == AGENT_GUARD_HOOK && t)
			atomic_fetch_add_explicit(&t->drops, 1, memory_order_relaxed);
		return 0;
	}
	if (unlikely(!t))
		return atomic_load_explicit(&agent_recording, memory_order_relaxed) ?
			       HOOK_SLOW_THREAD :
			       0;

	agent_thread_guard = AGENT_GUARD_HOOK; /* a signal handler arriving now passes through */
	/* before the recording check: frames hijacked earlier still need this */
	if (unlikely(desc->flags | t->returns_restored) ||
	    unlikely(t->depth && return_slot >= t->shadow[t->depth - 1].return_slot)) {
		int r = enter_slow_cases(t, desc, return_slot);

		if (r) {
			agent_thread_guard = 0;
			return r == HOOK_SLOW_MODULES ? HOOK_SLOW_MODULES : 0;
		}
	}
	if (unlikely(!atomic_load_explicit(&agent_recording, memory_order_relaxed)))
		goto out;
	head = atomic_load_explicit(&t->head, memory_order_relaxed);
	if (unlikely(t->depth >= AGENT_SHADOW_CAPACITY)) {
		atomic_fetch_add_explicit(&t->overflows, 1, memory_order_relaxed);
	} else if (unlikely(!hooks_ring_has_room(t, head, t->depth + 3))) {
		atomic_fetch_add_explicit(&t->drops, 1, memory_order_relaxed);
	} else {
		struct shadow_entry *e = &t->shadow[t->depth++];

		e->return_address = *return_slot;
		e->return_slot = return_slot;
		e->func_id = desc->func_id;
		hooks_append_enter(t, desc->func_id, e->return_address, return_slot);
		*return_slot = (uintptr_t)profagent_exit_trampoline;
	}
out:
	agent_thread_guard = 0;
	return 0;
}

#define SAME_STACK_WINDOW (256u << 10)

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

	if (a >= b)
		return 0;
	if (on_thread_stack(t, a) && on_thread_stack(t, b))
		return 1;
	return !on_thread_stack(t, a) && !on_thread_stack(t, b) && b - a < SAME_STACK_WINDOW;
}

/*
 * The returning frame's entry is not on top: entries above it whose frames
 * are gone (longjmp, exceptions) are closed; the others keep their order and
 * the returning entry moves to the top. Returns 0 if no entry has this slot.
 */
COLD static int shadow_stack_bring_to_top(struct agent_thread *t, uintptr_t *slot)
{
	uint32_t m = t->depth, kept;
	struct shadow_entry match;

	while (m > 0 && t->shadow[m - 1].return_slot != slot)
		m--;
	if (m-- == 0)
		return 0;
	match = t->shadow[m];
	kept = m;
	for (uint32_t i = m + 1; i < t->depth; i++) {
		if (frame_is_gone(t, &t->shadow[i], slot)) {
			if (t->shadow[i].func_id)
				hooks_append(t, t->shadow[i].func_id, EVENT_EXIT);
		} else {
			t->shadow[kept++] = t->shadow[i];
		}
	}
	t->shadow[kept] = match;
	t->depth = kept + 1;
	return 1;
}

/* stack_pointer is rsp as the instrumented function returned: its return slot is just below. */
uintptr_t profagent_exit_hook(uintptr_t stack_pointer)
{
	struct agent_thread *t = agent_current_thread;
	uintptr_t *slot = (uintptr_t *)(stack_pointer - sizeof(uintptr_t));
	unsigned saved_guard = agent_thread_guard;
	struct shadow_entry *e;

	agent_thread_guard = AGENT_GUARD_HOOK;
	if (unlikely(t->shadow[t->depth - 1].return_slot != slot))
		shadow_stack_bring_to_top(t, slot); /* no entry at all cannot happen: take the top */
	e = &t->shadow[--t->depth];
	if (likely(e->func_id))
		hooks_append(t, e->func_id, EVENT_EXIT);
	agent_thread_guard = saved_guard;
	return e->return_address;
}

/* Thread exit with frames still open (pthread_exit, cancellation): they are all gone. */
void hooks_close_all(struct agent_thread *t)
{
	while (t->depth > 0)
		shadow_stack_drop_top(t);
}
