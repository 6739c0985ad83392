// SPDX-License-Identifier: MIT
/*
 * The ring segments' pool (agent/segments.c): a segment given back stays
 * resident while a thread recording in bursts may take it again (its pages
 * faulted in anew at each burst cost more than the hooks), and goes back to
 * the kernel once unused for the trim window.
 */
#include <stdlib.h>

#include "agent/agent_thread.h"
#include "common/mono_clock.h"
#include "unit.h"

#define SECOND_NS (1000ull * 1000 * 1000)

static uint64_t resident_bytes(void)
{
	struct segment_pool_stats st;

	segments_stats(&st);
	return st.resident_bytes;
}

/*
 * A thread's first segment, taken and given back (seg: which one, if asked):
 * what the pool then holds resident.
 */
static uint64_t take_and_give_back(struct agent_thread *t, struct event_record **seg)
{
	segments_refill_spare(t);
	CHECK(t->spare != NULL);
	if (seg)
		*seg = t->spare;
	segments_release_all(t); /* a thread recycled: its spare goes back too */
	CHECK(t->spare == NULL);
	return resident_bytes();
}

static void test_resident_between_bursts(void)
{
	struct agent_thread *t = calloc(1, sizeof(*t));
	uint64_t held, freed_at;

	CHECK(t != NULL);
	if (!t)
		return;
	held = take_and_give_back(t, NULL);
	freed_at = mono_clock_ns();
	CHECK(held >= 8192); /* its populated part, at least the first 8 KiB */
	/* a burst every few seconds finds its ring as it left it */
	segments_trim(freed_at + 2 * SECOND_NS);
	CHECK_EQ_U64(resident_bytes(), held);
	segments_trim(freed_at + 9 * SECOND_NS);
	CHECK_EQ_U64(resident_bytes(), held);
	/* unused past the window: all but the page that holds the free list's header */
	segments_trim(freed_at + 11 * SECOND_NS);
	CHECK(resident_bytes() < held);
	CHECK_EQ_U64(resident_bytes(), (uint64_t)sysconf(_SC_PAGESIZE));
	free(t);
}

/*
 * Taken again from the pool within the window, the segment given back last
 * (its pages in memory) comes back with its populated part, not a new one.
 */
static void test_taken_again_keeps_pages(void)
{
	struct agent_thread *t = calloc(1, sizeof(*t));
	struct event_record *given = NULL;
	uint64_t held;

	CHECK(t != NULL);
	if (!t)
		return;
	held = take_and_give_back(t, &given);
	segments_refill_spare(t);
	CHECK(t->spare == given);
	CHECK_EQ_U64(t->spare_extent.ready * sizeof(struct event_record), held);
	segments_release_all(t);
	CHECK_EQ_U64(resident_bytes(), held);
	free(t);
}

int main(void)
{
	RUN_TEST(test_resident_between_bursts);
	RUN_TEST(test_taken_again_keeps_pages);
	return unit_summary();
}
