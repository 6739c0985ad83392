/* SPDX-License-Identifier: MIT */
/*
 * Threads' scheduler states from the reader's scheduler events
 * (trace_stream.h), built by trace processor's rules (ThreadStateTracker):
 * a switch ends prev's state and opens the one its prev_state names, and
 * opens Running for next; a wakeup of a thread that is not Running or
 * Runnable opens Runnable with its waker; a new task starts Runnable, woken
 * by its parent; a freed task ends. Gives each state interval as it closes,
 * and the totals per thread. A state still open at the end has no duration
 * (trace processor's dur -1) and is in no total.
 */
#ifndef PROFD_THREAD_STATES_H
#define PROFD_THREAD_STATES_H

#include <stddef.h>
#include <stdint.h>

#include "viewer-export/trace_stream.h"

enum thread_state {
	THREAD_RUNNING,
	THREAD_RUNNABLE,          /* R: woken, waiting for a CPU */
	THREAD_PREEMPTED,         /* R+: Runnable (Preempted) */
	THREAD_SLEEPING,          /* S */
	THREAD_UNINTERRUPTIBLE,   /* D */
	THREAD_IDLE,              /* I: an idle kernel thread's sleep */
	THREAD_OTHER,             /* T, t, X, Z, P, or a state the reader does not know */
	THREAD_STATES
};
const char *thread_state_name(enum thread_state s);
/* The state a switch's prev_state (kernel >= 4.14 encoding) leaves prev in. */
enum thread_state thread_state_of_prev(int64_t prev_state);

struct thread_state_interval {
	int32_t tid;
	enum thread_state state;
	uint64_t ts, dur;
	int32_t waker;   /* RUNNABLE after a wakeup or a new task: who; 0 none */
	uint32_t cpu;    /* RUNNING: where */
};

#define THREAD_STATES_WAKERS 4
struct thread_state_totals {
	int32_t tid;
	const char *comm;               /* from the scheduler events, NULL if none */
	uint64_t ns[THREAD_STATES];
	uint64_t wakeups;
	struct { int32_t tid; const char *comm; uint64_t count; } wakers[THREAD_STATES_WAKERS];
};

struct thread_states;
typedef int (*thread_state_fn)(void *ctx, const struct thread_state_interval *iv);

/* interval may be NULL. NULL on ENOMEM. */
struct thread_states *thread_states_new(thread_state_fn interval, void *ctx);
/* One event, in time order. Returns interval's non-zero return, or 0 (-ENOMEM). */
int thread_states_event(struct thread_states *ts, const struct trace_sched_event *e);
/* Every thread seen (idle excluded), in first-seen order; valid until the next event. */
const struct thread_state_totals *thread_states_totals(const struct thread_states *ts, size_t *n);
void thread_states_free(struct thread_states *ts);

#endif
