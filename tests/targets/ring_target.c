// SPDX-License-Identifier: MIT
/*
 * Flight-recorder target (tests/integration/test_ring.sh): ring_main runs
 * for the whole program and calls ring_work (-> 2 x ring_leaf) as fast as it
 * can, in steps the test drives through files in DIR: after PHASE_CALLS
 * calls it creates DIR/ready1; once DIR/go2 exists, PHASE_CALLS more and
 * DIR/ready2; once DIR/stop exists, it leaves the loop, pauses 0.2 s (the
 * agent's buffers drain) and makes its last instrumented call, ring_last. Prints "calls N" (ring_work's).
 * Usage: ring_target DIR [PHASE_CALLS] (default 3,000,000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long phase_calls = 3000000;
static char path[4096];

/* noipa: no inlining, cloning or folding, so every call goes through the patched entry. */
__attribute__((noipa)) long ring_leaf(long x)
{
	return x ^ (x >> 3);
}

__attribute__((noipa)) long ring_work(long x)
{
	return ring_leaf(x) + ring_leaf(x + 1);
}

__attribute__((noipa)) long ring_last(long x)
{
	return x + 1;
}

static int exists(const char *dir, const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void touch(const char *dir, const char *name)
{
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

/* Calls ring_work n times; returns the running sum. */
static long work(long n, long sum)
{
	for (long i = 0; i < n; i++)
		sum += ring_work(sum + i);
	return sum;
}

__attribute__((noipa)) long ring_main(const char *dir, uint64_t *calls)
{
	long sum = work(phase_calls, 0);

	*calls = (uint64_t)phase_calls;
	touch(dir, "ready1");
	while (!exists(dir, "go2")) {
		sum = work(4096, sum);
		*calls += 4096;
	}
	sum = work(phase_calls, sum);
	*calls += (uint64_t)phase_calls;
	touch(dir, "ready2");
	while (!exists(dir, "stop")) {
		sum = work(4096, sum);
		*calls += 4096;
	}
	/* a pause for the agent to drain its buffers: the last call finds room in them */
	usleep(200 * 1000);
	return ring_last(sum);
}

int main(int argc, char **argv)
{
	uint64_t calls = 0;
	long sum;

	if (argc < 2) {
		fprintf(stderr, "usage: ring_target DIR [PHASE_CALLS]\n");
		return 2;
	}
	if (argc > 2)
		phase_calls = atol(argv[2]);
	sum = ring_main(argv[1], &calls);
	printf("calls %llu\n", (unsigned long long)calls);
	return sum == 42 ? 3 : 0; /* keeps sum */
}
