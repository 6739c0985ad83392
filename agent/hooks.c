// SPDX-License-Identifier: MIT
/*
 * The enter/exit hooks: the only C the trampolines reach on every call.
 * Compiled with -mgeneral-regs-only (the trampolines do not save vector
 * state), no stack protector, no calls: timestamp, append to this thread's
 * ring, push/pop the shadow stack. Never blocks, never allocates, never
 * enters the kernel; when the ring is full the event is dropped and counted.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent_thread.h"
#include "trampolines/trampoline_layout.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* TLS read by the trampolines' callers on every call: initial-exec, no lazy allocation. */
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
 */
static inline int hooks_ring_has_room(struct agent_thread *t, uint64_t head, uint32_t reserve)
{
	uint64_t tail = atomic_load_explicit(&t->tail, memory_order_acquire);

	return AGENT_RING_RECORDS - (head - tail) >= reserve;
}

static inline void hooks_append(struct agent_thread *t, uint64_t head, uint32_t func_id,
				uint32_t kind)
{
	struct event_record *rec = &t->records[head & (AGENT_RING_RECORDS - 1)];

	rec->tsc = read_tsc();
	rec->func_id = func_id;
	rec->kind = kind;
	/* pairs with the acquire in flusher_drain_thread() */
	atomic_store_explicit(&t->head, head + 1, memory_order_release);
}

/* Returns 1 when the thread has no state yet: the trampoline runs the slow path and retries. */
int profagent_enter_hook(const struct stub_desc *desc, uintptr_t *return_slot)
{
	struct agent_thread *t = agent_current_thread;
	uint64_t head;

	if (unlikely(agent_thread_guard))
		return 0;
	if (unlikely(!atomic_load_explicit(&agent_recording, memory_order_relaxed)))
		return 0;
	if (unlikely(!t))
		return 1;

	agent_thread_guard = 1; /* a signal handler arriving now passes through */
	head = atomic_load_explicit(&t->head, memory_order_relaxed);
	if (unlikely(t->depth >= AGENT_SHADOW_CAPACITY)) {
		atomic_fetch_add_explicit(&t->overflows, 1, memory_order_relaxed);
	} else if (unlikely(!hooks_ring_has_room(t, head, t->depth + 2))) {
		atomic_fetch_add_explicit(&t->drops, 1, memory_order_relaxed);
	} else {
		struct shadow_entry *e = &t->shadow[t->depth++];

		e->return_address = *return_slot;
		e->return_slot = return_slot;
		e->func_id = desc->func_id;
		hooks_append(t, head, desc->func_id, EVENT_ENTER);
		*return_slot = (uintptr_t)profagent_exit_trampoline;
	}
	agent_thread_guard = 0;
	return 0;
}

/*
 * stack_pointer is rsp as the instrumented function returned: its return
 * slot was just below. Entries whose slot lies below that belong to frames a
 * longjmp or an exception skipped; they are closed here.
 */
uintptr_t profagent_exit_hook(uintptr_t stack_pointer)
{
	struct agent_thread *t = agent_current_thread;
	uintptr_t *slot = (uintptr_t *)(stack_pointer - sizeof(uintptr_t));
	unsigned saved_guard = agent_thread_guard;
	struct shadow_entry *e;
	uint64_t head;

	agent_thread_guard = 1;
	head = atomic_load_explicit(&t->head, memory_order_relaxed);
	while (t->depth > 1 && t->shadow[t->depth - 1].return_slot < slot) {
		e = &t->shadow[--t->depth];
		hooks_append(t, head++, e->func_id, EVENT_EXIT);
	}
	e = &t->shadow[--t->depth];
	hooks_append(t, head, e->func_id, EVENT_EXIT);
	agent_thread_guard = saved_guard;
	return e->return_address;
}
