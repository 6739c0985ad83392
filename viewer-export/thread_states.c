// SPDX-License-Identifier: MIT
/* Threads' scheduler states by trace processor's rules (see thread_states.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/thread_states.h"

struct ts_thread {
	struct thread_state_totals t;
	bool open;                 /* a state is open since `since` */
	enum thread_state state;
	uint64_t since;
	int32_t waker;
	uint32_t cpu;
};

struct thread_states {
	thread_state_fn interval;
	void *ctx;
	struct ts_thread *threads;
	struct thread_state_totals *totals; /* thread_states_totals' copy */
	size_t n, cap;
};

static const char *const names[THREAD_STATES] = {
	"Running", "Runnable", "Runnable (Preempted)", "Sleeping", "Uninterruptible Sleep",
	"Idle", "Other",
};

const char *thread_state_name(enum thread_state s)
{
	return s < THREAD_STATES ? names[s] : "?";
}

enum thread_state thread_state_of_prev(int64_t prev_state)
{
	switch (prev_state) {
	case 0: return THREAD_RUNNABLE;
	case 0x1: return THREAD_SLEEPING;
	case 0x2: return THREAD_UNINTERRUPTIBLE;
	case 0x80: return THREAD_IDLE;
	case 0x100: return THREAD_PREEMPTED;
	default: return THREAD_OTHER;
	}
}

struct thread_states *thread_states_new(thread_state_fn interval, void *ctx)
{
	struct thread_states *ts = calloc(1, sizeof(*ts));

	if (ts) {
		ts->interval = interval;
		ts->ctx = ctx;
	}
	return ts;
}

void thread_states_free(struct thread_states *ts)
{
	if (!ts)
		return;
	free(ts->threads);
	free(ts->totals);
	free(ts);
}

/* Linear: a profile follows one process's threads, dozens, not thousands. */
static struct ts_thread *ts_thread(struct thread_states *ts, int32_t tid, const char *comm)
{
	for (size_t i = ts->n; i-- > 0;)
		if (ts->threads[i].t.tid == tid) {
			if (comm)
				ts->threads[i].t.comm = comm;
			return &ts->threads[i];
		}
	if (ts->n == ts->cap) {
		size_t cap = ts->cap ? 2 * ts->cap : 16;
		struct ts_thread *t = realloc(ts->threads, cap * sizeof(*t));

		if (!t)
			return NULL;
		ts->threads = t;
		ts->cap = cap;
	}
	memset(&ts->threads[ts->n], 0, sizeof(ts->threads[ts->n]));
	ts->threads[ts->n].t.tid = tid;
	ts->threads[ts->n].t.comm = comm;
	return &ts->threads[ts->n++];
}

static int ts_close(struct thread_states *ts, struct ts_thread *t, uint64_t at)
{
	struct thread_state_interval iv;

	if (!t->open)
		return 0;
	t->open = false;
	iv = (struct thread_state_interval){ t->t.tid, t->state, t->since,
					     at > t->since ? at - t->since : 0, t->waker, t->cpu };
	t->t.ns[t->state] += iv.dur;
	return ts->interval ? ts->interval(ts->ctx, &iv) : 0;
}

static int ts_open(struct thread_states *ts, struct ts_thread *t, uint64_t at,
		   enum thread_state s, int32_t waker, uint32_t cpu)
{
	int rc = ts_close(ts, t, at);

	t->open = true;
	t->state = s;
	t->since = at;
	t->waker = waker;
	t->cpu = cpu;
	return rc;
}

static void ts_count_waker(struct thread_states *ts, struct ts_thread *t, int32_t waker)
{
	struct thread_state_totals *tt = &t->t;
	const char *comm = NULL;
	size_t i, min = 0;

	for (i = 0; i < ts->n; i++)
		if (ts->threads[i].t.tid == waker)
			comm = ts->threads[i].t.comm;
	tt->wakeups++;
	for (i = 0; i < THREAD_STATES_WAKERS; i++) {
		if (tt->wakers[i].count && tt->wakers[i].tid == waker) {
			tt->wakers[i].count++;
			return;
		}
		if (tt->wakers[i].count < tt->wakers[min].count)
			min = i;
	}
	if (tt->wakers[min].count <= 1) /* keep the frequent ones: a newcomer takes a rare slot */
		tt->wakers[min] = (typeof(tt->wakers[min])){ waker, comm, 1 };
}

/* trace processor's IsRunnable matches "R" alone: R+ counts as blocked for a wakeup. */
static bool ts_wakeable(const struct ts_thread *t)
{
	return !t->open || (t->state != THREAD_RUNNING && t->state != THREAD_RUNNABLE);
}

int thread_states_event(struct thread_states *ts, const struct trace_sched_event *e)
{
	struct ts_thread *t, *prev;
	int rc = 0;

	switch (e->kind) {
	case TRACE_SCHED_SWITCH:
		if (e->prev_tid) {
			if (!(prev = ts_thread(ts, e->prev_tid, e->prev_comm)))
				return -ENOMEM;
			rc = ts_open(ts, prev, e->ts, thread_state_of_prev(e->prev_state), 0, e->cpu);
		}
		if (!rc && e->tid) {
			if (!(t = ts_thread(ts, e->tid, e->comm)))
				return -ENOMEM;
			rc = ts_open(ts, t, e->ts, THREAD_RUNNING, 0, e->cpu);
		}
		return rc;
	case TRACE_SCHED_WAKING:
	case TRACE_SCHED_NEW_TASK:
		if (!e->tid)
			return 0;
		if (!(t = ts_thread(ts, e->tid, e->comm)))
			return -ENOMEM;
		if (e->kind == TRACE_SCHED_WAKING && !ts_wakeable(t))
			return 0; /* spurious: trace processor keeps it apart */
		ts_count_waker(ts, t, e->common_pid);
		return ts_open(ts, t, e->ts, THREAD_RUNNABLE, e->common_pid, e->target_cpu);
	case TRACE_SCHED_FREE:
		for (size_t i = 0; i < ts->n; i++)
			if (ts->threads[i].t.tid == e->tid)
				rc = ts_close(ts, &ts->threads[i], e->ts);
		return rc;
	}
	return 0;
}

const struct thread_state_totals *thread_states_totals(const struct thread_states *ts, size_t *n)
{
	struct thread_states *w = (struct thread_states *)ts;
	struct thread_state_totals *out = realloc(w->totals, (ts->n ? ts->n : 1) * sizeof(*out));

	*n = 0;
	if (!out)
		return NULL;
	w->totals = out;
	for (size_t i = 0; i < ts->n; i++)
		out[i] = ts->threads[i].t;
	*n = ts->n;
	return out;
}
