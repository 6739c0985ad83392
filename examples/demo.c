// SPDX-License-Identifier: MIT
/*
 * The bundled example `make demo` profiles: two threads, each running a
 * recursive fib() between stretches of a hot loop. It counts its own fib
 * calls per recursion depth and prints them (deterministic output only), so
 * tests can compare the trace's slices with what really happened.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 20
#define FIB_N 18
#define MAX_DEPTH 32

struct thread_counts {
	const char *label;
	unsigned long calls_at_depth[MAX_DEPTH];
	unsigned depth;
	unsigned long result;
	double spin_result;
};

__attribute__((noinline)) unsigned long fib(struct thread_counts *c, unsigned n)
{
	unsigned long r;

	c->calls_at_depth[c->depth]++;
	if (n < 2)
		return n;
	c->depth++;
	r = fib(c, n - 1) + fib(c, n - 2);
	c->depth--;
	return r;
}

/* Not instrumented by the demo's --funcs: it is where the CPU samples land. */
__attribute__((noinline)) double hot_loop(unsigned iterations)
{
	volatile double x = 1.0;

	for (unsigned i = 0; i < iterations; i++)
		x = x * 1.0000001 + 0.0000001;
	return x;
}

static void run_rounds(struct thread_counts *c)
{
	for (int i = 0; i < ROUNDS; i++) {
		c->result += fib(c, FIB_N);
		c->spin_result += hot_loop(2000000);
	}
}

__attribute__((noinline)) void *worker(void *arg)
{
	run_rounds(arg);
	return NULL;
}

static void print_counts(const struct thread_counts *c)
{
	unsigned long total = 0;

	for (int d = 0; d < MAX_DEPTH; d++)
		total += c->calls_at_depth[d];
	printf("%s fib calls %lu result %lu\n", c->label, total, c->result);
	for (int d = 0; d < MAX_DEPTH; d++)
		if (c->calls_at_depth[d])
			printf("%s depth %d calls %lu\n", c->label, d, c->calls_at_depth[d]);
}

int main(void)
{
	struct thread_counts main_counts = { .label = "main" }, worker_counts = { .label = "worker" };
	pthread_t t;

	if (pthread_create(&t, NULL, worker, &worker_counts) != 0) {
		perror("pthread_create");
		return 1;
	}
	pthread_setname_np(t, "demo-worker");
	run_rounds(&main_counts);
	pthread_join(t, NULL);
	print_counts(&main_counts);
	print_counts(&worker_counts);
	return 0;
}
