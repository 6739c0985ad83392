// SPDX-License-Identifier: MIT
/* viewer-export/thread_states.c: trace processor's thread_state rules, event by event. */
#include "tests/unit/unit.h"
#include "viewer-export/thread_states.h"

#define MAX_IV 64

struct seen {
	struct thread_state_interval iv[MAX_IV];
	int n;
};

static int keep(void *ctx, const struct thread_state_interval *iv)
{
	struct seen *s = ctx;

	if (s->n < MAX_IV)
		s->iv[s->n++] = *iv;
	return 0;
}

static struct trace_sched_event sw(uint64_t ts, uint32_t cpu, int32_t prev, int64_t state,
				   int32_t next)
{
	return (struct trace_sched_event){ .kind = TRACE_SCHED_SWITCH, .ts = ts, .cpu = cpu,
					   .common_pid = prev, .prev_tid = prev,
					   .prev_state = state, .tid = next };
}

static struct trace_sched_event wake(uint64_t ts, int32_t waker, int32_t tid)
{
	return (struct trace_sched_event){ .kind = TRACE_SCHED_WAKING, .ts = ts, .cpu = 1,
					   .common_pid = waker, .tid = tid, .target_cpu = 0 };
}

static const struct thread_state_totals *totals_of(struct thread_states *ts, int32_t tid)
{
	size_t n;
	const struct thread_state_totals *t = thread_states_totals(ts, &n);

	for (size_t i = 0; i < n; i++)
		if (t[i].tid == tid)
			return &t[i];
	return NULL;
}

/* run 100, sleep 100..150, woken by 7, runnable until 170, run again, preempted at 300 */
static void test_sleep_wake_run(void)
{
	struct seen s = { 0 };
	struct thread_states *ts = thread_states_new(keep, &s);
	const struct thread_state_totals *t;
	struct trace_sched_event ev[] = {
		sw(0, 0, 0, 0, 5), sw(100, 0, 5, 0x1, 0), wake(150, 7, 5), sw(170, 0, 0, 0, 5),
		sw(300, 0, 5, 0x100, 9),
	};

	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_EQ_INT(thread_states_event(ts, &ev[i]), 0);
	CHECK_EQ_INT(s.n, 4); /* Running, Sleeping, Runnable, Running; Preempted still open */
	CHECK_EQ_INT(s.iv[1].state, THREAD_SLEEPING);
	CHECK_EQ_U64(s.iv[1].ts, 100);
	CHECK_EQ_U64(s.iv[1].dur, 50);
	CHECK_EQ_INT(s.iv[2].state, THREAD_RUNNABLE);
	CHECK_EQ_INT(s.iv[2].waker, 7);
	CHECK_EQ_U64(s.iv[2].dur, 20);
	t = totals_of(ts, 5);
	CHECK(t != NULL);
	if (t) {
		CHECK_EQ_U64(t->ns[THREAD_RUNNING], 100 + 130);
		CHECK_EQ_U64(t->ns[THREAD_SLEEPING], 50);
		CHECK_EQ_U64(t->ns[THREAD_RUNNABLE], 20);
		CHECK_EQ_U64(t->ns[THREAD_PREEMPTED], 0); /* open: no duration yet */
		CHECK_EQ_INT(t->wakeups, 1);
		CHECK_EQ_INT(t->wakers[0].tid, 7);
	}
	CHECK(totals_of(ts, 0) == NULL); /* the idle task has no states */
	thread_states_free(ts);
}

/* A wakeup of a thread that runs (or is runnable) is spurious: nothing changes. */
static void test_spurious_wakeups(void)
{
	struct seen s = { 0 };
	struct thread_states *ts = thread_states_new(keep, &s);
	struct trace_sched_event a = sw(0, 0, 0, 0, 5), b = wake(10, 7, 5),
				 c = sw(20, 0, 5, 0, 0), d = wake(30, 8, 5);

	thread_states_event(ts, &a);
	thread_states_event(ts, &b); /* running */
	thread_states_event(ts, &c); /* switched out runnable (R) */
	thread_states_event(ts, &d); /* runnable already */
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_INT(s.iv[0].state, THREAD_RUNNING);
	CHECK_EQ_U64(s.iv[0].dur, 20);
	CHECK_EQ_INT(totals_of(ts, 5)->wakeups, 0);
	thread_states_free(ts);
}

/* R+ is not "R" to trace processor: a wakeup of a preempted thread takes it to R. */
static void test_preempted_then_woken(void)
{
	struct seen s = { 0 };
	struct thread_states *ts = thread_states_new(keep, &s);
	struct trace_sched_event a = sw(0, 0, 0, 0, 5), b = sw(10, 0, 5, 0x100, 0),
				 c = wake(15, 7, 5);

	thread_states_event(ts, &a);
	thread_states_event(ts, &b);
	thread_states_event(ts, &c);
	CHECK_EQ_INT(s.n, 2);
	CHECK_EQ_INT(s.iv[1].state, THREAD_PREEMPTED);
	CHECK_EQ_U64(s.iv[1].dur, 5);
	thread_states_free(ts);
}

static void test_prev_state_decoding(void)
{
	CHECK_EQ_INT(thread_state_of_prev(0), THREAD_RUNNABLE);
	CHECK_EQ_INT(thread_state_of_prev(0x1), THREAD_SLEEPING);
	CHECK_EQ_INT(thread_state_of_prev(0x2), THREAD_UNINTERRUPTIBLE);
	CHECK_EQ_INT(thread_state_of_prev(0x80), THREAD_IDLE);
	CHECK_EQ_INT(thread_state_of_prev(0x100), THREAD_PREEMPTED);
	CHECK_EQ_INT(thread_state_of_prev(0x10), THREAD_OTHER); /* X */
	CHECK_EQ_STR(thread_state_name(THREAD_PREEMPTED), "Runnable (Preempted)");
}

/* A new task starts Runnable, woken by its parent; a freed one ends. */
static void test_new_task_and_free(void)
{
	struct seen s = { 0 };
	struct thread_states *ts = thread_states_new(keep, &s);
	struct trace_sched_event n = { .kind = TRACE_SCHED_NEW_TASK, .ts = 5, .common_pid = 3,
				       .tid = 6 };
	struct trace_sched_event a = sw(9, 1, 0, 0, 6), b = sw(40, 1, 6, 0x10, 0);
	struct trace_sched_event f = { .kind = TRACE_SCHED_FREE, .ts = 40, .tid = 6 };

	thread_states_event(ts, &n);
	thread_states_event(ts, &a);
	thread_states_event(ts, &b);
	thread_states_event(ts, &f);
	CHECK_EQ_INT(s.n, 3); /* Runnable (woken by 3), Running, Other (X) closed by the free */
	CHECK_EQ_INT(s.iv[0].state, THREAD_RUNNABLE);
	CHECK_EQ_INT(s.iv[0].waker, 3);
	CHECK_EQ_U64(s.iv[0].dur, 4);
	CHECK_EQ_INT(s.iv[1].state, THREAD_RUNNING);
	CHECK_EQ_U64(s.iv[1].dur, 31);
	CHECK_EQ_INT(s.iv[2].state, THREAD_OTHER);
	CHECK_EQ_U64(s.iv[2].dur, 0);
	thread_states_free(ts);
}

int main(void)
{
	RUN_TEST(test_sleep_wake_run);
	RUN_TEST(test_spurious_wakeups);
	RUN_TEST(test_preempted_then_woken);
	RUN_TEST(test_prev_state_decoding);
	RUN_TEST(test_new_task_and_free);
	return unit_summary();
}
