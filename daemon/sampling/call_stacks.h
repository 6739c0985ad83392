/* SPDX-License-Identifier: MIT */
/*
 * The daemon's replay of each target thread's shadow stack: the
 * instrumented calls open on it, rebuilt from the agent's enter/exit
 * records, with the return address and stack slot each one hijacked. Samples
 * ask it which calls were open when they were taken (to put the callers'
 * return addresses back and to charge self time); it trusts nothing and
 * stays bounded whatever the records say.
 */
#ifndef PROFD_CALL_STACKS_H
#define PROFD_CALL_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/sched/offcpu.h"

struct call_stacks;

struct call_frame {
	uint32_t func_id;         /* session-wide function id */
	uint32_t self_samples;    /* samples taken while this was the innermost open call */
	uint64_t return_address;  /* the caller's, as the agent found it */
	uint64_t return_slot;     /* where it lived on the thread's stack */
	uint64_t enter_ts;        /* CLOCK_MONOTONIC ns */
	struct offcpu_time off_at_enter; /* the thread's off-CPU clock then (daemon/sched/offcpu.h) */
};

/* Deeper than the agent's shadow stack (1024): past it enters are refused. */
#define CALL_STACKS_MAX_DEPTH 2048

struct call_stacks *call_stacks_new(void);
void call_stacks_free(struct call_stacks *cs);

/* A call entered on tid. Returns 0, -E2BIG past CALL_STACKS_MAX_DEPTH, -ENOMEM. */
int call_stacks_enter(struct call_stacks *cs, uint32_t tid, const struct call_frame *frame);

/*
 * A call of func_id returned (or the agent found its frame gone): the
 * innermost open frame of func_id is removed, whatever lies above it (the
 * agent closes gone frames before the returning one, and frames on other
 * stacks may stay open above it), and copied to *out. It stays known as
 * the thread's last exited frame until the next exit. Returns 0, or -ENOENT
 * when no open frame of tid has func_id (*out untouched).
 */
int call_stacks_exit(struct call_stacks *cs, uint32_t tid, uint32_t func_id,
		     struct call_frame *out);

/*
 * The open frames of tid, outermost first (NULL and 0 when none). Valid
 * until the next call that changes tid; the caller may update self_samples.
 */
struct call_frame *call_stacks_open(struct call_stacks *cs, uint32_t tid, size_t *depth);

/* The frame tid exited last (NULL if none since it started). */
const struct call_frame *call_stacks_last_exited(struct call_stacks *cs, uint32_t tid);

/*
 * The return address the agent found in `slot` of tid's stack: from the
 * open frame with that slot (innermost first), else the last exited frame,
 * else the most recent enter at that slot (recent enough: the thread's last
 * CALL_STACKS_RECENT_SLOTS distinct slots). Samples are placed in time with
 * a clock error of about a microsecond, many calls on a hot path: the slot
 * still names the caller exactly, and one call site's return address is the
 * same every time. Returns false when the slot is unknown.
 */
#define CALL_STACKS_RECENT_SLOTS 256
bool call_stacks_return_at(struct call_stacks *cs, uint32_t tid, uint64_t slot,
			   uint64_t *return_address);

/*
 * profd's per-event path: one thread looked up once for a run of its events
 * (call_stacks_thread), then entered and exited inline. The fields are
 * call_stacks.c's. The pointer is valid until another thread is added or
 * any thread is forgotten (neither happens while a run of events is replayed).
 */
struct slot_return {
	uint64_t slot, return_address;
};
struct call_thread {
	uint32_t tid;              /* 0: empty slot */
	bool has_last_exited;
	uint32_t depth, capacity;
	struct call_frame *frames; /* [0] outermost */
	struct call_frame last_exited;
	struct slot_return *recent; /* CALL_STACKS_RECENT_SLOTS, direct-mapped by slot */
};

/* tid's stack, created if new; NULL on -ENOMEM. */
struct call_thread *call_stacks_thread(struct call_stacks *cs, uint32_t tid);

/* The slow paths of the inline calls below (growth, refusal, an exit below the top). */
struct call_frame *call_thread_push_slow(struct call_thread *t);
const struct call_frame *call_thread_exit_slow(struct call_thread *t, uint32_t func_id);

/* Slots are 8-aligned and neighbours differ in low bits. */
static inline size_t call_stacks_recent_index(uint64_t slot)
{
	return (size_t)((slot >> 3) * 0x9E3779B97F4A7C15ull >> 56) % CALL_STACKS_RECENT_SLOTS;
}

/*
 * As call_stacks_enter, in two steps: the new innermost frame, for the
 * caller to fill in place (a frame built on the stack and copied stalled on
 * store forwarding: 20 % of profd's per-event path), then
 * call_thread_pushed once its return slot and address are in. NULL when
 * refused (past CALL_STACKS_MAX_DEPTH, out of memory).
 */
static inline struct call_frame *call_thread_push(struct call_thread *t)
{
	if (__builtin_expect(t->depth >= t->capacity || !t->recent, 0))
		return call_thread_push_slow(t);
	return &t->frames[t->depth++];
}

static inline void call_thread_pushed(struct call_thread *t, const struct call_frame *f)
{
	t->recent[call_stacks_recent_index(f->return_slot)] =
		(struct slot_return){ f->return_slot, f->return_address };
}

/*
 * As call_stacks_exit, without the copy out: the frame removed, valid until
 * the thread's next enter or exit (it is also kept as the thread's last
 * exited frame); NULL when no open frame has func_id.
 */
/* f, the innermost frame, returned: kept as the thread's last exited frame (read only by samples). */
static inline void call_thread_exited(struct call_thread *t, const struct call_frame *f)
{
	t->last_exited = *f;
	t->has_last_exited = true;
}

static inline const struct call_frame *call_thread_exit(struct call_thread *t, uint32_t func_id)
{
	const struct call_frame *f;

	if (__builtin_expect(!t->depth || t->frames[t->depth - 1].func_id != func_id, 0))
		return call_thread_exit_slow(t, func_id);
	f = &t->frames[--t->depth];
	call_thread_exited(t, f);
	return f;
}

/*
 * A process nobody samples: its frames serve only its calls' ends (their
 * function, time and off-CPU clock at enter), and the return addresses and
 * slots, the recent slots and the last exited frame, which only samples
 * read (call_stacks_return_at), are left as they are: the push fills in
 * what it likes (a slot of 0, which no sample's stack has, if sampling may
 * start meanwhile), the exit returns the frame in place (valid until the
 * next enter).
 */
static inline struct call_frame *call_thread_push_unsampled(struct call_thread *t)
{
	if (__builtin_expect(t->depth >= t->capacity, 0))
		return call_thread_push_slow(t);
	return &t->frames[t->depth++];
}

static inline const struct call_frame *call_thread_exit_unsampled(struct call_thread *t,
								  uint32_t func_id)
{
	if (__builtin_expect(!t->depth || t->frames[t->depth - 1].func_id != func_id, 0))
		return call_thread_exit_slow(t, func_id);
	return &t->frames[--t->depth];
}

/* Every thread forgotten (a new agent after exec starts from nothing). */
void call_stacks_clear(struct call_stacks *cs);

/* The thread is gone: its state is forgotten (open frames included). */
void call_stacks_thread_gone(struct call_stacks *cs, uint32_t tid);

#endif
