// SPDX-License-Identifier: MIT
/* Unit tests for daemon/sampling/call_stacks.c: the daemon's replay of shadow stacks. */
#include <errno.h>
#include <stdlib.h>

#include "daemon/sampling/call_stacks.h"
#include "tests/unit/unit.h"

static struct call_frame frame(uint32_t func, uint64_t slot)
{
	return (struct call_frame){ .func_id = func, .return_address = 0x400000 + func,
				    .return_slot = slot };
}

static void test_nesting(void)
{
	struct call_stacks *cs = call_stacks_new();
	struct call_frame f1 = frame(1, 0x7000), f2 = frame(2, 0x6f00), out;
	struct call_frame *open;
	size_t depth;

	CHECK_EQ_INT(call_stacks_enter(cs, 10, &f1), 0);
	CHECK_EQ_INT(call_stacks_enter(cs, 10, &f2), 0);
	open = call_stacks_open(cs, 10, &depth);
	CHECK_EQ_INT(depth, 2);
	CHECK_EQ_INT(open[0].func_id, 1);
	CHECK_EQ_U64(open[1].return_slot, 0x6f00);
	CHECK_EQ_INT(call_stacks_exit(cs, 10, 2, &out), 0);
	CHECK_EQ_U64(out.return_address, 0x400002);
	CHECK_EQ_INT(call_stacks_last_exited(cs, 10)->func_id, 2);
	call_stacks_open(cs, 10, &depth);
	CHECK_EQ_INT(depth, 1);
	CHECK_EQ_INT(call_stacks_exit(cs, 10, 1, &out), 0);
	CHECK(call_stacks_open(cs, 10, &depth) == NULL);
	CHECK_EQ_INT(depth, 0);
	call_stacks_free(cs);
}

/* The agent closes frames it found gone before the returning one; other-stack frames stay. */
static void test_exit_out_of_order(void)
{
	struct call_stacks *cs = call_stacks_new();
	struct call_frame a = frame(1, 0x7000), b = frame(2, 0x6000), c = frame(3, 0x9000), out;
	struct call_frame *open;
	size_t depth;

	call_stacks_enter(cs, 5, &a);
	call_stacks_enter(cs, 5, &b);
	call_stacks_enter(cs, 5, &c);
	CHECK_EQ_INT(call_stacks_exit(cs, 5, 2, &out), 0); /* b returns under c */
	CHECK_EQ_U64(out.return_slot, 0x6000);
	open = call_stacks_open(cs, 5, &depth);
	CHECK_EQ_INT(depth, 2);
	CHECK_EQ_INT(open[0].func_id, 1);
	CHECK_EQ_INT(open[1].func_id, 3);
	CHECK_EQ_INT(call_stacks_exit(cs, 5, 7, &out), -ENOENT);
	CHECK_EQ_INT(call_stacks_exit(cs, 99, 1, &out), -ENOENT);
	call_stacks_free(cs);
}

/* Recursion: the innermost frame of the function is the one that returns. */
static void test_recursion_pops_innermost(void)
{
	struct call_stacks *cs = call_stacks_new();
	struct call_frame outer = frame(4, 0x7000), inner = frame(4, 0x6000), out;

	call_stacks_enter(cs, 1, &outer);
	call_stacks_enter(cs, 1, &inner);
	CHECK_EQ_INT(call_stacks_exit(cs, 1, 4, &out), 0);
	CHECK_EQ_U64(out.return_slot, 0x6000);
	call_stacks_free(cs);
}

static void test_depth_bound(void)
{
	struct call_stacks *cs = call_stacks_new();
	struct call_frame f = frame(1, 0x7000);
	int r = 0;

	for (int i = 0; i < CALL_STACKS_MAX_DEPTH && r == 0; i++)
		r = call_stacks_enter(cs, 3, &f);
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(call_stacks_enter(cs, 3, &f), -E2BIG);
	call_stacks_free(cs);
}

/* Many threads (table growth), then half of them gone: the others keep their frames. */
static void test_many_threads_and_removal(void)
{
	struct call_stacks *cs = call_stacks_new();
	size_t depth;
	int wrong = 0;

	for (uint32_t tid = 1; tid <= 5000; tid++) {
		struct call_frame f = frame(tid, tid * 16);

		CHECK_EQ_INT(call_stacks_enter(cs, tid, &f), 0);
	}
	for (uint32_t tid = 1; tid <= 5000; tid += 2)
		call_stacks_thread_gone(cs, tid);
	for (uint32_t tid = 1; tid <= 5000; tid++) {
		struct call_frame *open = call_stacks_open(cs, tid, &depth);

		if (tid % 2 ? depth != 0 : (depth != 1 || open[0].func_id != tid))
			wrong++;
	}
	CHECK_EQ_INT(wrong, 0);
	call_stacks_free(cs);
}

/*
 * profd's per-event path: a thread in hand, frames filled in place, exits
 * without a copy; the same stack and last exited frame as the calls by tid.
 */
static void test_thread_in_hand(void)
{
	struct call_stacks *cs = call_stacks_new();
	struct call_thread *t = call_stacks_thread(cs, 20);
	const struct call_frame *done;
	struct call_frame *f;
	uint64_t ret = 0;
	size_t depth;

	CHECK(t != NULL);
	for (uint32_t i = 1; i <= 3; i++) {
		f = call_thread_push(t);
		CHECK(f != NULL);
		*f = frame(i, 0x8000 - 0x100 * i);
		call_thread_pushed(t, f);
	}
	call_stacks_open(cs, 20, &depth);
	CHECK_EQ_INT(depth, 3);
	CHECK(call_stacks_return_at(cs, 20, 0x7e00, &ret));
	CHECK_EQ_U64(ret, frame(2, 0x7e00).return_address);
	done = call_thread_exit(t, 3); /* the top */
	CHECK(done != NULL);
	CHECK_EQ_INT(done->func_id, 3);
	CHECK_EQ_INT(call_stacks_last_exited(cs, 20)->func_id, 3);
	done = call_thread_exit(t, 1); /* below the top: frame 2 stays open */
	CHECK(done != NULL);
	CHECK_EQ_INT(done->func_id, 1);
	CHECK(call_thread_exit(t, 9) == NULL); /* none open */
	CHECK_EQ_INT(call_stacks_open(cs, 20, &depth)[0].func_id, 2);
	CHECK_EQ_INT(depth, 1);
	for (uint32_t i = 1; i < CALL_STACKS_MAX_DEPTH; i++) /* up to the bound, then refused */
		CHECK(call_thread_push(t) != NULL);
	CHECK(call_thread_push(t) == NULL);
	call_stacks_free(cs);
}

int main(void)
{
	RUN_TEST(test_nesting);
	RUN_TEST(test_exit_out_of_order);
	RUN_TEST(test_recursion_pops_innermost);
	RUN_TEST(test_depth_bound);
	RUN_TEST(test_many_threads_and_removal);
	RUN_TEST(test_thread_in_hand);
	return unit_summary();
}
