// SPDX-License-Identifier: MIT
/*
 * A burst from a fresh thread: one new thread calls three instrumented
 * functions N, N / 4 and 7 times as fast as it can (burst_outer calls
 * burst_leaf twice per call, so burst_leaf gets 2 N + N / 4 calls in all),
 * then prints every function's exact call count for the tests to compare
 * with profd's figures: "count NAME CALLS" lines, then "total CALLS".
 * Usage: burst_target [N] (default 1,000,000).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct burst_counts {
	uint64_t leaf, outer, rare;
	long sum;
};

/* noipa: no inlining, cloning or folding, so every call goes through the patched entry. */
__attribute__((noipa)) long burst_leaf(struct burst_counts *c, long x)
{
	c->leaf++;
	return x ^ (x >> 3);
}

__attribute__((noipa)) long burst_outer(struct burst_counts *c, long x)
{
	c->outer++;
	return burst_leaf(c, x) + burst_leaf(c, x + 1);
}

__attribute__((noipa)) long burst_rare(struct burst_counts *c, long x)
{
	c->rare++;
	return x + 1;
}

static long n_calls = 1000000;

static void *burst_run(void *arg)
{
	struct burst_counts *c = arg;

	for (long i = 0; i < n_calls; i++)
		c->sum += burst_outer(c, i);
	for (long i = 0; i < n_calls / 4; i++)
		c->sum += burst_leaf(c, i);
	for (long i = 0; i < 7; i++)
		c->sum += burst_rare(c, i);
	return NULL;
}

int main(int argc, char **argv)
{
	struct burst_counts counts = { 0 };
	pthread_t thread;

	if (argc > 1) {
		n_calls = strtol(argv[1], NULL, 10);
		if (n_calls <= 0 || n_calls > 1000000000) {
			fprintf(stderr, "usage: %s [CALLS 1-1000000000]\n", argv[0]);
			return 2;
		}
	}
	if (pthread_create(&thread, NULL, burst_run, &counts) || pthread_join(thread, NULL)) {
		fprintf(stderr, "burst_target: cannot run the burst thread\n");
		return 1;
	}
	printf("count burst_outer %llu\ncount burst_leaf %llu\ncount burst_rare %llu\n",
	       (unsigned long long)counts.outer, (unsigned long long)counts.leaf,
	       (unsigned long long)counts.rare);
	printf("total %llu\n", (unsigned long long)(counts.outer + counts.leaf + counts.rare));
	return counts.sum == 42; /* uses the sum: the calls cannot be dropped */
}
