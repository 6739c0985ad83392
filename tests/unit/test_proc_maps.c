// SPDX-License-Identifier: MIT
/*
 * Unit tests for agent/proc_maps.c's proc_maps_main_stack: the main
 * thread's stack as glibc's pthread_getattr_np finds it, from a snapshot
 * (the rlimit's cut, the mapping below's, a stack end in no mapping), and
 * equal to pthread_getattr_np's in this process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/proc_maps.h"
#include "tests/unit/unit.h"

#define PAGE 4096ull

extern void *__libc_stack_end;

static struct proc_map fake[] = {
	{ 0x555555554000, 0x555555556000, 5 },
	{ 0x7ffff7fc3000, 0x7ffff7fff000, 5 },   /* the highest mapping below the stack */
	{ 0x7ffffffde000, 0x7ffffffff000, 3 },   /* [stack] */
};
static const struct proc_maps fake_maps = { fake, 3 };

static void test_rlimit_cuts(void)
{
	uint64_t lo = 0, hi = 0, end = 0x7fffffffe123;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, end, 8ull << 20, PAGE, &lo, &hi), 0);
	CHECK_EQ_U64(hi, 0x7ffffffff000);
	/* rlimit less what lies above the stack end, page-aligned */
	CHECK_EQ_U64(lo, hi - (((8ull << 20) - (0x7ffffffff000 - hi)) & -PAGE));
}

static void test_mapping_below_cuts(void)
{
	uint64_t lo = 0, hi = 0;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, 0x7fffffffe123, RLIM_INFINITY, PAGE, &lo, &hi),
		     0);
	CHECK_EQ_U64(hi, 0x7ffffffff000);
	CHECK_EQ_U64(lo, 0x7ffff7fff000);
}

static void test_no_mapping(void)
{
	uint64_t lo = 1, hi = 1;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, 0x1000, 8ull << 20, PAGE, &lo, &hi), -ENOENT);
	CHECK_EQ_U64(lo, 1);
}

static void test_as_glibc_finds_it(void)
{
	struct proc_maps m = { 0 };
	pthread_attr_t attr;
	struct rlimit rl;
	uint64_t lo = 0, hi = 0;
	void *addr = NULL;
	size_t size = 0;

	CHECK_EQ_INT(proc_maps_load(&m), 0);
	CHECK_EQ_INT(getrlimit(RLIMIT_STACK, &rl), 0);
	CHECK_EQ_INT(pthread_getattr_np(pthread_self(), &attr), 0);
	CHECK_EQ_INT(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	CHECK_EQ_INT(proc_maps_main_stack(&m, (uint64_t)(uintptr_t)__libc_stack_end, rl.rlim_cur,
					  (uint64_t)sysconf(_SC_PAGESIZE), &lo, &hi), 0);
	CHECK_EQ_U64(lo, (uintptr_t)addr);
	CHECK_EQ_U64(hi, (uintptr_t)addr + size);
	proc_maps_free(&m);
}

int main(void)
{
	RUN_TEST(test_rlimit_cuts);
	RUN_TEST(test_mapping_below_cuts);
	RUN_TEST(test_no_mapping);
	RUN_TEST(test_as_glibc_finds_it);
	return unit_summary();
}
