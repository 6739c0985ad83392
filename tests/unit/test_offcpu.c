// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/sched/offcpu.c: per-thread off-CPU clocks read at
 * any instant between transitions, wakeups that matter to blocked threads
 * only, switches queued ahead of the calls that reach them (and the bound on
 * that queue), threads that go and come back under the same tid, and the
 * open-addressed table as it grows and loses entries out of colliding runs.
 */
#include <malloc.h>
#include <stdlib.h>

#include "daemon/sched/offcpu.h"
#include "tests/unit/unit.h"
#include "tests/unit/offcpu_check.h"

static struct offcpu_clocks *clocks(void)
{
	struct offcpu_clocks *oc = offcpu_clocks_new();

	CHECK(oc != NULL);
	return oc;
}

/* tid switched out at `out` in `state` and back in at `in`. */
static void out_in(struct offcpu_clocks *oc, uint32_t tid, uint64_t out, enum offcpu_state state,
		   uint64_t in)
{
	CHECK_EQ_INT(offcpu_transition(oc, tid, out, state), 0);
	CHECK_EQ_INT(offcpu_transition(oc, tid, in, OFFCPU_RUNNING), 0);
}

static void test_unknown_thread_reads_zero(void)
{
	struct offcpu_clocks *oc = clocks();

	CHECK_TIME(offcpu_before(oc, 42, 1000), 0, 0);
	out_in(oc, 7, 100, OFFCPU_BLOCKED, 200);
	CHECK_TIME(offcpu_before(oc, 42, 1000), 0, 0); /* another thread's switches are not its */
	/* tid 0 (the idle task) never gets a clock */
	CHECK_EQ_INT(offcpu_transition(oc, 0, 100, OFFCPU_BLOCKED), 0);
	CHECK_TIME(offcpu_before(oc, 0, 1000), 0, 0);
	offcpu_clocks_free(oc);
}

/* Blocked at 100, woken at 150, running at 170; read between and after. */
static void test_blocked_woken_running(void)
{
	struct offcpu_clocks *oc = clocks();

	CHECK_EQ_INT(offcpu_transition(oc, 5, 100, OFFCPU_BLOCKED), 0);
	CHECK_EQ_INT(offcpu_transition(oc, 5, 150, OFFCPU_WOKEN), 0);
	CHECK_EQ_INT(offcpu_transition(oc, 5, 170, OFFCPU_RUNNING), 0);
	CHECK_TIME(offcpu_before(oc, 5, 120), 20, 0);
	CHECK_TIME(offcpu_before(oc, 5, 150), 50, 0);
	CHECK_TIME(offcpu_before(oc, 5, 160), 60, 10);
	CHECK_TIME(offcpu_before(oc, 5, 170), 70, 20);
	CHECK_TIME(offcpu_before(oc, 5, 200), 70, 20);
	CHECK_TIME(offcpu_before(oc, 5, 5000), 70, 20); /* running since: the clock stands */
	offcpu_clocks_free(oc);
}

/* The same switches read once, at 200, with nothing read before. */
static void test_blocked_woken_running_one_read(void)
{
	struct offcpu_clocks *oc = clocks();

	offcpu_transition(oc, 5, 100, OFFCPU_BLOCKED);
	offcpu_transition(oc, 5, 150, OFFCPU_WOKEN);
	offcpu_transition(oc, 5, 170, OFFCPU_RUNNING);
	CHECK_TIME(offcpu_before(oc, 5, 200), 70, 20);
	offcpu_clocks_free(oc);
}

/* A wakeup of a thread that is running (it raced its own switch-out) changes nothing. */
static void test_woken_while_running_ignored(void)
{
	struct offcpu_clocks *oc = clocks();

	offcpu_transition(oc, 8, 50, OFFCPU_WOKEN); /* never seen switching: running */
	CHECK_TIME(offcpu_before(oc, 8, 60), 0, 0);
	out_in(oc, 8, 100, OFFCPU_BLOCKED, 170);
	offcpu_transition(oc, 8, 180, OFFCPU_WOKEN);
	CHECK_TIME(offcpu_before(oc, 8, 200), 70, 0);
	CHECK_TIME(offcpu_before(oc, 8, 250), 70, 0);
	offcpu_clocks_free(oc);
}

/* Preempted: switched out while still runnable, all of it waiting for a CPU. */
static void test_preempted_counts_runnable(void)
{
	struct offcpu_clocks *oc = clocks();

	out_in(oc, 9, 100, OFFCPU_RUNNABLE, 130);
	CHECK_TIME(offcpu_before(oc, 9, 115), 15, 15);
	CHECK_TIME(offcpu_before(oc, 9, 200), 30, 30);
	/* then blocked, woken: only the wait after the wakeup is runnable */
	offcpu_transition(oc, 9, 300, OFFCPU_BLOCKED);
	offcpu_transition(oc, 9, 340, OFFCPU_WOKEN);
	offcpu_transition(oc, 9, 345, OFFCPU_RUNNING);
	CHECK_TIME(offcpu_before(oc, 9, 400), 75, 35);
	offcpu_clocks_free(oc);
}

/* Switches known ahead of the calls count only once the query time passes them. */
static void test_queued_ahead_not_counted_early(void)
{
	struct offcpu_clocks *oc = clocks();

	out_in(oc, 11, 100, OFFCPU_BLOCKED, 170);
	out_in(oc, 11, 300, OFFCPU_RUNNABLE, 310);
	CHECK_TIME(offcpu_before(oc, 11, 50), 0, 0);
	CHECK_TIME(offcpu_before(oc, 11, 100), 0, 0);
	CHECK_TIME(offcpu_before(oc, 11, 130), 30, 0);
	CHECK_TIME(offcpu_before(oc, 11, 250), 70, 0);
	CHECK_TIME(offcpu_before(oc, 11, 305), 75, 5);
	CHECK_TIME(offcpu_before(oc, 11, 400), 80, 10);
	offcpu_clocks_free(oc);
}

/*
 * The watermark applies the switches before it: a later read of an instant
 * before them (which the contract says will not come) sees them applied,
 * where without the watermark it would not.
 */
static void test_watermark_applies(void)
{
	struct offcpu_clocks *oc = clocks();

	offcpu_transition(oc, 12, 100, OFFCPU_BLOCKED);
	offcpu_transition(oc, 12, 150, OFFCPU_WOKEN);
	offcpu_transition(oc, 12, 170, OFFCPU_RUNNING);
	offcpu_transition(oc, 12, 300, OFFCPU_BLOCKED);
	offcpu_transition(oc, 13, 100, OFFCPU_BLOCKED);
	offcpu_watermark(oc, 200);
	CHECK_TIME(offcpu_before(oc, 12, 150), 70, 20); /* 100..170 applied: the clock reads its total */
	CHECK_TIME(offcpu_before(oc, 12, 250), 70, 20); /* the switch at 300 still waits */
	CHECK_TIME(offcpu_before(oc, 12, 400), 170, 20);
	CHECK_TIME(offcpu_before(oc, 13, 120), 20, 0);  /* every thread's queue */
	offcpu_clocks_free(oc);
}

static uint64_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/*
 * Calls lagging far behind the switches: past OFFCPU_QUEUE_MAX queued, the
 * oldest apply at once, so memory stays bounded, and a late read sees them
 * applied (a read at 1005, after the first out/in pairs were forced, reads
 * what those pairs added, not 5 ns).
 */
static void test_queue_bound(void)
{
	const uint32_t pairs = 4 * OFFCPU_QUEUE_MAX; /* 8 x the bound in transitions */
	uint64_t before = heap_in_use(), grown;
	struct offcpu_clocks *oc = clocks();
	uint64_t forced_pairs = (2 * (uint64_t)pairs - OFFCPU_QUEUE_MAX) / 2;

	for (uint32_t k = 0; k < pairs; k++)
		out_in(oc, 21, 1000 + 20 * (uint64_t)k, OFFCPU_BLOCKED, 1000 + 20 * (uint64_t)k + 10);
	grown = heap_in_use() - before;
	/* a full queue is OFFCPU_QUEUE_MAX * 16 bytes (1 MiB); the unbounded one 8 MiB */
	CHECK(grown < 3u * OFFCPU_QUEUE_MAX * 16);
	CHECK_TIME(offcpu_before(oc, 21, 1005), 10 * forced_pairs, 0);
	CHECK_TIME(offcpu_before(oc, 21, 1000 + 20 * (uint64_t)pairs), 10 * (uint64_t)pairs, 0);
	offcpu_clocks_free(oc);
}

/*
 * A record older than the clock's last transition (records of different
 * CPUs can reach the ring out of time order) counts from that transition:
 * no instant counts twice, the clock never exceeds the time that passed.
 */
static void test_late_record_not_counted_twice(void)
{
	struct offcpu_clocks *oc = clocks();

	out_in(oc, 14, 100, OFFCPU_BLOCKED, 170);
	out_in(oc, 14, 160, OFFCPU_BLOCKED, 250); /* its switch-out older than the switch-in */
	CHECK_TIME(offcpu_before(oc, 14, 300), 150, 0);
	offcpu_clocks_free(oc);
}

/* A thread gone: its clock and queued switches go; a new thread with its tid starts at 0. */
static void test_thread_gone_then_reused_tid(void)
{
	struct offcpu_clocks *oc = clocks();

	out_in(oc, 33, 100, OFFCPU_BLOCKED, 150);
	offcpu_transition(oc, 33, 500, OFFCPU_BLOCKED); /* queued, never reached */
	CHECK_TIME(offcpu_before(oc, 33, 200), 50, 0);
	offcpu_thread_gone(oc, 33);
	CHECK_TIME(offcpu_before(oc, 33, 600), 0, 0);
	out_in(oc, 33, 700, OFFCPU_RUNNABLE, 710);
	CHECK_TIME(offcpu_before(oc, 33, 800), 10, 10);
	offcpu_thread_gone(oc, 34); /* never seen: nothing to do */
	CHECK_TIME(offcpu_before(oc, 33, 900), 10, 10);
	offcpu_clocks_free(oc);
}

/* A thread's last switch: its clock reads on until the watermark passes it, then is forgotten. */
static void test_gone_forgotten_after_watermark(void)
{
	struct offcpu_clocks *oc = clocks();

	out_in(oc, 40, 100, OFFCPU_BLOCKED, 130);
	CHECK_EQ_INT(offcpu_transition(oc, 40, 200, OFFCPU_GONE), 0);
	CHECK_TIME(offcpu_before(oc, 40, 150), 30, 0);
	offcpu_watermark(oc, 190);
	CHECK_TIME(offcpu_before(oc, 40, 195), 30, 0);
	CHECK_TIME(offcpu_before(oc, 40, 210), 30, 0); /* gone, not yet passed: its calls may come */
	offcpu_watermark(oc, 250);
	CHECK_TIME(offcpu_before(oc, 40, 300), 0, 0);
	out_in(oc, 40, 400, OFFCPU_RUNNABLE, 405); /* a new thread with the tid: from 0 */
	CHECK_TIME(offcpu_before(oc, 40, 500), 5, 5);
	offcpu_clocks_free(oc);
}

/*
 * The kernel's tids wrap: a new thread may take a gone thread's tid before
 * the watermark passes the gone one's last switch. Its clock must survive
 * that watermark, or a call spanning it loses the thread's off-CPU time.
 */
static void test_tid_reused_before_watermark_kept(void)
{
	struct offcpu_clocks *oc = clocks();
	struct offcpu_time at_enter, at_exit;

	out_in(oc, 41, 100, OFFCPU_BLOCKED, 130);    /* the old thread */
	offcpu_transition(oc, 41, 200, OFFCPU_GONE);
	offcpu_transition(oc, 41, 250, OFFCPU_RUNNING); /* the new one, first run */
	out_in(oc, 41, 300, OFFCPU_BLOCKED, 350);
	at_enter = offcpu_before(oc, 41, 260);        /* a call of the new thread */
	offcpu_watermark(oc, 400);
	at_exit = offcpu_before(oc, 41, 450);
	CHECK(at_exit.off_ns >= at_enter.off_ns);
	CHECK_EQ_U64(at_exit.off_ns - at_enter.off_ns, 50);
	offcpu_clocks_free(oc);
}

/* Each test thread's off time is its own: 3 * tid + 1 ns (runnable when tid is odd). */
static void give_clock(struct offcpu_clocks *oc, uint32_t tid)
{
	out_in(oc, tid, 100, tid & 1 ? OFFCPU_RUNNABLE : OFFCPU_BLOCKED, 100 + 3 * (uint64_t)tid + 1);
}

static void check_clock(struct offcpu_clocks *oc, uint32_t tid)
{
	uint64_t off = 3 * (uint64_t)tid + 1;

	CHECK_TIME(offcpu_before(oc, tid, 1u << 30), off, tid & 1 ? off : 0);
}

/*
 * The table's home slot as offcpu.c computes it (Fibonacci hashing, low
 * bits): tids equal modulo the table size share a home. Only used to place
 * entries; a new hash keeps these tests right, if less pointed.
 */
static uint32_t home_slot(uint32_t tid, uint32_t cap)
{
	return (tid * 2654435761u) & (cap - 1);
}

static uint32_t tid_with_home(uint32_t home, uint32_t cap)
{
	for (uint32_t tid = 1; tid <= cap; tid++)
		if (home_slot(tid, cap) == home)
			return tid;
	return 0;
}

/*
 * In the first table (64 slots): a run that wraps from the last slot to the
 * first, with an entry at its own home inside it. Removing the run's head
 * must move the later entries back across the wrap, around the one that
 * must stay, or lookups past the hole stop early.
 */
static void test_remove_from_wrapping_run(void)
{
	struct offcpu_clocks *oc = clocks();
	uint32_t a = tid_with_home(63, 64), z = tid_with_home(1, 64);
	uint32_t b = a + 64, w = a + 128, v = 64; /* homes 63, 63, 0 */

	CHECK(a != 0 && z != 0 && home_slot(v, 64) == 0);
	/* slots: a 63, b 0, z 1, w 2, v 3 */
	give_clock(oc, a);
	give_clock(oc, b);
	give_clock(oc, z);
	give_clock(oc, w);
	give_clock(oc, v);
	offcpu_thread_gone(oc, a);
	CHECK_TIME(offcpu_before(oc, a, 1u << 30), 0, 0);
	check_clock(oc, b);
	check_clock(oc, z);
	check_clock(oc, w);
	check_clock(oc, v);
	offcpu_thread_gone(oc, b);
	check_clock(oc, z);
	check_clock(oc, w);
	check_clock(oc, v);
	offcpu_thread_gone(oc, z);
	check_clock(oc, w);
	check_clock(oc, v);
	give_clock(oc, a); /* back, in a table with holes */
	check_clock(oc, a);
	check_clock(oc, w);
	offcpu_clocks_free(oc);
}

/*
 * One watermark forgets several gone threads of one colliding, wrapping
 * run: each removal moves later entries back, none is skipped or lost.
 */
static void test_watermark_forgets_across_a_run(void)
{
	struct offcpu_clocks *oc = clocks();
	uint32_t a = tid_with_home(63, 64), z = tid_with_home(1, 64);
	uint32_t b = a + 64, w = a + 128, v = 64, x = a + 192;

	/* slots: a 63, b 0, z 1, w 2, v 3, x 4 */
	give_clock(oc, a);
	give_clock(oc, b);
	give_clock(oc, z);
	give_clock(oc, w);
	give_clock(oc, v);
	give_clock(oc, x);
	offcpu_transition(oc, a, 500, OFFCPU_GONE);
	offcpu_transition(oc, b, 500, OFFCPU_GONE);
	offcpu_transition(oc, w, 500, OFFCPU_GONE);
	offcpu_watermark(oc, 1000);
	CHECK_TIME(offcpu_before(oc, a, 1u << 30), 0, 0);
	CHECK_TIME(offcpu_before(oc, b, 1u << 30), 0, 0);
	CHECK_TIME(offcpu_before(oc, w, 1u << 30), 0, 0);
	check_clock(oc, z);
	check_clock(oc, v);
	check_clock(oc, x);
	offcpu_clocks_free(oc);
}

/* Hundreds of tids (the table grows past 64 twice over), colliding ones among them; some go. */
static void test_many_tids(void)
{
	struct offcpu_clocks *oc = clocks();
	uint32_t tids[400];
	size_t n = 0;

	for (uint32_t t = 1; t <= 300; t++)
		tids[n++] = t;
	for (uint32_t k = 1; k <= 100; k++) /* same home as tid 5 in tables up to 1024 slots */
		tids[n++] = 5 + 1024 * k;
	for (size_t i = 0; i < n; i++)
		give_clock(oc, tids[i]);
	for (size_t i = 0; i < n; i++)
		check_clock(oc, tids[i]);
	for (size_t i = 0; i < n; i += 3)
		offcpu_thread_gone(oc, tids[i]);
	for (size_t i = 0; i < n; i++) {
		if (i % 3 == 0)
			CHECK_TIME(offcpu_before(oc, tids[i], 1u << 30), 0, 0);
		else
			check_clock(oc, tids[i]);
	}
	for (size_t i = 0; i < n; i += 6) /* half of them come back: fresh clocks */
		out_in(oc, tids[i], 2000, OFFCPU_BLOCKED, 2007);
	for (size_t i = 0; i < n; i++) {
		if (i % 6 == 0)
			CHECK_TIME(offcpu_before(oc, tids[i], 1u << 30), 7, 0);
		else if (i % 3 == 0)
			CHECK_TIME(offcpu_before(oc, tids[i], 1u << 30), 0, 0);
		else
			check_clock(oc, tids[i]);
	}
	offcpu_clocks_free(oc);
}

/* Half of hundreds of threads gone at once: one watermark forgets exactly those. */
static void test_watermark_forgets_many(void)
{
	struct offcpu_clocks *oc = clocks();

	for (uint32_t tid = 1; tid <= 400; tid++) {
		give_clock(oc, tid);
		if (tid % 2)
			offcpu_transition(oc, tid, 5000, OFFCPU_GONE);
	}
	offcpu_watermark(oc, 6000);
	for (uint32_t tid = 1; tid <= 400; tid++) {
		if (tid % 2)
			CHECK_TIME(offcpu_before(oc, tid, 1u << 30), 0, 0);
		else
			check_clock(oc, tid);
	}
	offcpu_clocks_free(oc);
}

/* A long run's threads come and go, each under a new tid: removed slots are reused, not leaked. */
static void test_churn_of_threads(void)
{
	struct offcpu_clocks *oc = clocks();

	for (uint32_t tid = 1; tid <= 200000; tid++) {
		give_clock(oc, tid);
		if (tid > 10) {
			check_clock(oc, tid - 10);
			offcpu_thread_gone(oc, tid - 10);
		}
	}
	for (uint32_t tid = 200000 - 9; tid <= 200000; tid++)
		check_clock(oc, tid);
	offcpu_clocks_free(oc);
}

int main(void)
{
	RUN_TEST(test_unknown_thread_reads_zero);
	RUN_TEST(test_blocked_woken_running);
	RUN_TEST(test_blocked_woken_running_one_read);
	RUN_TEST(test_woken_while_running_ignored);
	RUN_TEST(test_preempted_counts_runnable);
	RUN_TEST(test_queued_ahead_not_counted_early);
	RUN_TEST(test_watermark_applies);
	RUN_TEST(test_late_record_not_counted_twice);
	RUN_TEST(test_queue_bound);
	RUN_TEST(test_thread_gone_then_reused_tid);
	RUN_TEST(test_gone_forgotten_after_watermark);
	RUN_TEST(test_tid_reused_before_watermark_kept);
	RUN_TEST(test_remove_from_wrapping_run);
	RUN_TEST(test_watermark_forgets_across_a_run);
	RUN_TEST(test_many_tids);
	RUN_TEST(test_watermark_forgets_many);
	RUN_TEST(test_churn_of_threads);
	return unit_summary();
}
