// SPDX-License-Identifier: MIT
/*
 * A sampling target without frame pointers in its hot paths, for
 * tests/unit/test_dwarf_unwind.c. The Makefile builds targets with frame
 * pointers; the functions here opt out one by one (NOFP), as Debian's libc
 * does as a whole. When its work is done it stops itself (SIGSTOP) so the
 * test can unwind while the process, and its vdso, still exist.
 *   nofp_target spin MS   main -> nofp_level1 -> nofp_level2 -> nofp_level3 (hot loop)
 *   nofp_target sort MS   main -> nofp_sort1 -> nofp_sort2 -> nofp_sort3 -> qsort (libc)
 *                         -> nofp_compare (called back from libc)
 *   nofp_target vdso MS   main -> nofp_clock_loop -> clock_gettime (libc) -> the vdso
 *   nofp_target walk MS   main -> nofp_walk1 -> nofp_walk2 -> backtrace (libc, which the
 *                         agent patches untimed: it restores return addresses first)
 * A third argument "exit" makes it exit instead (profiled under profctl run).
 * Built with -DKEEP_FRAME_POINTERS as fp_target: the same chains, walkable
 * by the kernel's frame-pointer callchains.
 */
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef KEEP_FRAME_POINTERS /* built as fp_target, for frame-pointer callchains */
#define NOFP __attribute__((noinline, noipa, used))
#else
#define NOFP __attribute__((noinline, noipa, used, optimize("omit-frame-pointer")))
#endif
#define SORT_N 50000

volatile uint64_t nofp_sink;

/* Thread CPU time without the vdso, so that nearly no sample lands outside the chain. */
NOFP uint64_t nofp_cpu_ns(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

NOFP uint64_t nofp_level3(uint64_t x)
{
	for (int i = 0; i < 300000; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

NOFP uint64_t nofp_level2(uint64_t x)
{
	x = nofp_level3(x);
	nofp_sink = x; /* work after the call: no tail call */
	return x ^ 1;
}

NOFP void nofp_level1(long ms)
{
	uint64_t end = nofp_cpu_ns() + (uint64_t)ms * 1000000u, x = 1;

	do
		x = nofp_level2(x);
	while (nofp_cpu_ns() < end);
	nofp_sink = x;
}

NOFP int nofp_compare(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

NOFP void nofp_sort3(uint32_t *v, uint64_t *seed)
{
	for (int i = 0; i < SORT_N; i++) {
		*seed = *seed * 6364136223846793005u + 1442695040888963407u;
		v[i] = (uint32_t)(*seed >> 33);
	}
	qsort(v, SORT_N, sizeof(*v), nofp_compare);
	nofp_sink = v[SORT_N / 2];
}

NOFP void nofp_sort2(uint32_t *v, uint64_t *seed)
{
	nofp_sort3(v, seed);
	nofp_sink += v[0];
}

NOFP void nofp_sort1(long ms)
{
	uint64_t end = nofp_cpu_ns() + (uint64_t)ms * 1000000u, seed = 7;
	uint32_t *v = malloc(SORT_N * sizeof(*v));

	if (!v)
		exit(1);
	do
		nofp_sort2(v, &seed);
	while (nofp_cpu_ns() < end);
	free(v);
}

NOFP void nofp_clock_loop(long ms)
{
	uint64_t end = nofp_cpu_ns() + (uint64_t)ms * 1000000u, sum = 0;
	struct timespec ts;

	do {
		for (int i = 0; i < 1000; i++) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sum += (uint64_t)ts.tv_nsec;
		}
	} while (nofp_cpu_ns() < end);
	nofp_sink = sum;
}

NOFP int nofp_walk2(void)
{
	void *frames[32];
	int n = backtrace(frames, 32);

	nofp_sink += (uint64_t)n; /* work after the call: no tail call */
	return n;
}

NOFP void nofp_walk1(long ms)
{
	uint64_t end = nofp_cpu_ns() + (uint64_t)ms * 1000000u;

	do
		for (int i = 0; i < 100; i++)
			nofp_walk2();
	while (nofp_cpu_ns() < end);
}

int main(int argc, char **argv)
{
	long ms = argc > 2 ? atol(argv[2]) : 1000;

	if (argc > 1 && strcmp(argv[1], "spin") == 0)
		nofp_level1(ms);
	else if (argc > 1 && strcmp(argv[1], "sort") == 0)
		nofp_sort1(ms);
	else if (argc > 1 && strcmp(argv[1], "vdso") == 0)
		nofp_clock_loop(ms);
	else if (argc > 1 && strcmp(argv[1], "walk") == 0)
		nofp_walk1(ms);
	else {
		fprintf(stderr, "usage: nofp_target spin|sort|vdso|walk MS\n");
		return 2;
	}
	if (argc > 3 && strcmp(argv[3], "exit") == 0)
		return 0;
	raise(SIGSTOP); /* the test unwinds now, then kills us */
	return 0;
}
