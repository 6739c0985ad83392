// SPDX-License-Identifier: MIT
/* Unit tests for daemon/sampling/overhead.c: which samples are the profiler's own cost. */
#include "daemon/sampling/overhead.h"
#include "tests/unit/unit.h"

#define AGENT "/usr/lib/profd/libprofagent.so"

#define P OVERHEAD_FRAME_PROGRAM
#define A OVERHEAD_FRAME_AGENT
#define H OVERHEAD_FRAME_HOOK
#define S OVERHEAD_FRAME_SLOW

static void test_frame_of_agent_file_only(void)
{
	CHECK_EQ_INT(overhead_frame_of(AGENT, "flusher_main"), A);
	CHECK_EQ_INT(overhead_frame_of(AGENT, NULL), A);
	CHECK_EQ_INT(overhead_frame_of("libprofagent.so", "agent_start"), A);
	CHECK_EQ_INT(overhead_frame_of(AGENT " (deleted)", "agent_start"), A);
	CHECK_EQ_INT(overhead_frame_of("/usr/lib/x86_64-linux-gnu/libzstd.so.1.5.4", NULL), P);
	CHECK_EQ_INT(overhead_frame_of("/tmp/libprofagent.so.old", "x"), P);
	CHECK_EQ_INT(overhead_frame_of("/tmp/mylibprofagent.so", "x"), P);
	CHECK_EQ_INT(overhead_frame_of("[anon]", "profagent_enter_hook"), P);
	CHECK_EQ_INT(overhead_frame_of(NULL, "profagent_enter_hook"), P);
}

static void test_frame_of_hooks_and_slow_path(void)
{
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_enter_hook"), H);
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_exit_hook"), H);
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_entry_trampoline"), H);
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_exit_trampoline"), H);
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_enter_slow"), S);
	CHECK_EQ_INT(overhead_frame_of(AGENT, "profagent_enter_hook_helper"), A);
}

static void test_agent_thread_is_the_flusher(void)
{
	const enum overhead_frame program[] = { P, P, P };

	CHECK(overhead_thread_is_agent("profd-flusher"));
	CHECK(!overhead_thread_is_agent("profd-flusher2"));
	CHECK(!overhead_thread_is_agent("python3"));
	CHECK(!overhead_thread_is_agent(NULL));
	/* whatever its frames (libzstd, memcpy, the kernel, or none unwound) */
	CHECK_EQ_INT(overhead_classify(true, program, 3), OVERHEAD_FLUSHER);
	CHECK_EQ_INT(overhead_classify(true, NULL, 0), OVERHEAD_FLUSHER);
}

static void test_program_samples(void)
{
	const enum overhead_frame program[] = { P, P, P };

	CHECK_EQ_INT(overhead_classify(false, program, 3), OVERHEAD_NONE);
	CHECK_EQ_INT(overhead_classify(false, NULL, 0), OVERHEAD_NONE);
}

static void test_hooks_leaf_or_below(void)
{
	const enum overhead_frame in_hook[] = { P, P, H, H };     /* trampoline, enter hook */
	const enum overhead_frame in_helper[] = { P, H, H, A };   /* a hooks.c helper */
	const enum overhead_frame in_stub[] = { P, P, H };         /* leaf in a stub */

	CHECK_EQ_INT(overhead_classify(false, in_hook, 4), OVERHEAD_HOOKS);
	CHECK_EQ_INT(overhead_classify(false, in_helper, 4), OVERHEAD_HOOKS);
	CHECK_EQ_INT(overhead_classify(false, in_stub, 3), OVERHEAD_HOOKS);
}

static void test_slow_path_and_start_up_are_agent(void)
{
	/* trampoline -> profagent_enter_slow -> thread attach -> mmap in libc */
	const enum overhead_frame slow[] = { P, P, H, S, A, P };
	/* _dl_init -> agent_start -> ... -> fnmatch (libc) */
	const enum overhead_frame start_up[] = { P, P, A, A, P, P };

	CHECK_EQ_INT(overhead_classify(false, slow, 6), OVERHEAD_AGENT);
	CHECK_EQ_INT(overhead_classify(false, start_up, 6), OVERHEAD_AGENT);
}

static void test_innermost_decides(void)
{
	/* a hook run below a slow path (an instrumented call made from it) */
	const enum overhead_frame hook_over_slow[] = { P, H, S, A, H };

	CHECK_EQ_INT(overhead_classify(false, hook_over_slow, 5), OVERHEAD_HOOKS);
}

static void test_kind_names(void)
{
	CHECK_EQ_STR(overhead_kind_name(OVERHEAD_HOOKS), "hooks");
	CHECK_EQ_STR(overhead_kind_name(OVERHEAD_FLUSHER), "flusher");
	CHECK_EQ_STR(overhead_kind_name(OVERHEAD_AGENT), "agent");
	CHECK(overhead_kind_name(OVERHEAD_NONE) == NULL);
}

int main(void)
{
	RUN_TEST(test_frame_of_agent_file_only);
	RUN_TEST(test_frame_of_hooks_and_slow_path);
	RUN_TEST(test_agent_thread_is_the_flusher);
	RUN_TEST(test_program_samples);
	RUN_TEST(test_hooks_leaf_or_below);
	RUN_TEST(test_slow_path_and_start_up_are_agent);
	RUN_TEST(test_innermost_decides);
	RUN_TEST(test_kind_names);
	return unit_summary();
}
