// SPDX-License-Identifier: MIT
/*
 * A thread that records in bursts: BURSTS bursts of CALLS calls to one
 * function, GAP_MS of idleness between them (a service between requests).
 * Prints, per burst, the thread's CPU ns per call and the page faults it
 * took: under profctl, a burst whose ring memory went back to the kernel in
 * the gap pays a fault per 4 KiB of ring (agent/segments.c, TRIM_AFTER_NS).
 * Usage: bursts [BURSTS [CALLS [GAP_MS]]]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Long enough to be patched: a few instructions past the entry jump. */
__attribute__((noinline)) int burst_step(int x)
{
	__asm__ volatile("nop; nop; nop; nop; nop; nop" : "+r"(x));
	return x + 1;
}

static volatile int sink;

static double thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	int bursts = argc > 1 ? atoi(argv[1]) : 6;
	long calls = argc > 2 ? atol(argv[2]) : 20000;
	int gap_ms = argc > 3 ? atoi(argv[3]) : 1500;

	if (bursts <= 0 || calls <= 0 || gap_ms < 0) {
		fprintf(stderr, "usage: %s [BURSTS [CALLS [GAP_MS]]]\n", argv[0]);
		return 2;
	}
	for (int b = 0; b < bursts; b++) {
		struct rusage r0, r1;
		double t0, t1;

		getrusage(RUSAGE_THREAD, &r0);
		t0 = thread_cpu_ns();
		for (long i = 0; i < calls; i++)
			sink = burst_step((int)i);
		t1 = thread_cpu_ns();
		getrusage(RUSAGE_THREAD, &r1);
		printf("burst %d: %.1f ns/call, %ld page faults\n", b, (t1 - t0) / (double)calls,
		       r1.ru_minflt - r0.ru_minflt);
		fflush(stdout);
		if (b + 1 < bursts)
			usleep((useconds_t)gap_ms * 1000);
	}
	return 0;
}
