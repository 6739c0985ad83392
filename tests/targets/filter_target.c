// SPDX-License-Identifier: MIT
/*
 * Calls of known lengths for the timeline filters (--min-duration,
 * --max-depth): a million tiny calls, a thousand ~5 us calls (half inside a
 * long parent that also makes tiny calls), a recursion 12 deep whose every
 * level lasts > 5 us, and long calls left by longjmp. Prints every
 * function's exact call count ("count NAME CALLS"), the count of calls that
 * last at least 5 us by construction ("long NAME CALLS"), then "total CALLS".
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define TINY_CALLS 1000000
#define SLOW_CALLS 1000
#define PARENT_CALLS 500
#define TINY_PER_PARENT 10
#define RECURSIONS 100
#define RECURSION_DEPTH 12
#define JUMPS 50
#define SLOW_NS 5000

static uint64_t n_tiny, n_slow, n_parent, n_recurse, n_jumper, n_jump_outer;
static jmp_buf jump_back;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

/* noipa: no inlining, cloning or folding, so every call goes through the patched entry. */
__attribute__((noipa)) long ft_tiny(long x)
{
	n_tiny++;
	return x ^ (x >> 3);
}

__attribute__((noipa)) void ft_slow(void)
{
	n_slow++;
	spin_ns(SLOW_NS);
}

__attribute__((noipa)) long ft_parent(long x)
{
	long sum = 0;

	n_parent++;
	for (int i = 0; i < TINY_PER_PARENT; i++)
		sum += ft_tiny(x + i);
	ft_slow();
	return sum;
}

long ft_recurse(int depth);
/* through a pointer the compiler cannot see: no recursion turned into a loop */
static long (*volatile recurse_again)(int) = ft_recurse;

__attribute__((noipa)) long ft_recurse(int depth)
{
	n_recurse++;
	if (depth <= 1) {
		spin_ns(SLOW_NS);
		return 1;
	}
	return recurse_again(depth - 1) + 1;
}

__attribute__((noipa)) void ft_jumper(void)
{
	n_jumper++;
	spin_ns(SLOW_NS);
	longjmp(jump_back, 1);
}

__attribute__((noipa)) void ft_jump_outer(void)
{
	n_jump_outer++;
	if (!setjmp(jump_back))
		ft_jumper();
}

int main(void)
{
	long sum = 0;

	for (long i = 0; i < TINY_CALLS - PARENT_CALLS * TINY_PER_PARENT; i++)
		sum += ft_tiny(i);
	for (long i = 0; i < PARENT_CALLS; i++)
		sum += ft_parent(i);
	for (long i = 0; i < SLOW_CALLS - PARENT_CALLS; i++)
		ft_slow();
	for (int i = 0; i < RECURSIONS; i++)
		sum += ft_recurse(RECURSION_DEPTH);
	for (int i = 0; i < JUMPS; i++)
		ft_jump_outer();
	printf("count ft_tiny %llu\ncount ft_slow %llu\ncount ft_parent %llu\n"
	       "count ft_recurse %llu\ncount ft_jumper %llu\ncount ft_jump_outer %llu\n",
	       (unsigned long long)n_tiny, (unsigned long long)n_slow,
	       (unsigned long long)n_parent, (unsigned long long)n_recurse,
	       (unsigned long long)n_jumper, (unsigned long long)n_jump_outer);
	printf("long ft_slow %d\nlong ft_parent %d\nlong ft_recurse %d\nlong ft_jumper %d\n"
	       "long ft_jump_outer %d\n", SLOW_CALLS, PARENT_CALLS, RECURSIONS * RECURSION_DEPTH,
	       JUMPS, JUMPS);
	printf("total %llu\nsum %ld\n",
	       (unsigned long long)(n_tiny + n_slow + n_parent + n_recurse + n_jumper +
				    n_jump_outer), sum);
	return 0;
}
