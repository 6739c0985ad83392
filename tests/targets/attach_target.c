// SPDX-License-Identifier: MIT
/*
 * A long-running process to attach to (tests/integration/test_attach.sh):
 * 8 threads call a few instrumented-looking functions in tight loops and
 * check every result against the same arithmetic done inline, so a broken
 * patch or trampoline shows up as a wrong result, not just a crash. Runs
 * until the file named by argv[1] exists, then prints its verdict.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define THREADS 8

static _Atomic int stop;
static _Atomic long wrong, calls;

__attribute__((noinline, used)) long at_mix(long a, long b, long c)
{
	long r = a * 31 + (b ^ c);

	__asm__ volatile("" : "+r"(r));
	return r - (c >> 3);
}

__attribute__((noinline, used)) double at_scale(double x, long k, double y)
{
	double r = x * (double)k + y;

	__asm__ volatile("" : "+x"(r));
	return r;
}

__attribute__((noinline, used)) long at_outer(long i)
{
	long r = at_mix(i, i * 3, 7) + (long)at_scale(1.5, i & 1023, 0.25);

	__asm__ volatile("" : "+r"(r));
	return r;
}

static long expected(long i)
{
	long a = i * 31 + ((i * 3) ^ 7) - (7 >> 3);

	return a + (long)(1.5 * (double)(i & 1023) + 0.25);
}

static void *worker(void *arg)
{
	long base = (long)arg * 1000003L, local_calls = 0;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (long i = base; i < base + 1000; i++) {
			if (at_outer(i) != expected(i))
				atomic_fetch_add(&wrong, 1);
			local_calls++;
		}
		usleep(200); /* leave the 2-vCPU test machines some room for profctl and profd */
	}
	atomic_fetch_add(&calls, local_calls);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[THREADS];
	const char *stop_file = argc > 1 ? argv[1] : "/nonexistent";

	for (long t = 0; t < THREADS; t++)
		pthread_create(&threads[t], NULL, worker, (void *)t);
	printf("running %d threads\n", THREADS);
	fflush(stdout);
	while (access(stop_file, F_OK) != 0)
		usleep(10000);
	atomic_store(&stop, 1);
	for (int t = 0; t < THREADS; t++)
		pthread_join(threads[t], NULL);
	printf("wrong results %ld\n", (long)wrong);
	fprintf(stderr, "calls %ld\n", (long)calls);
	return wrong != 0;
}
