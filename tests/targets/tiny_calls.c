// SPDX-License-Identifier: MIT
/*
 * A target where instrumented calls are as frequent as they get, for
 * tests/integration/test_overhead.sh: main -> spin_calls calls tiny_step
 * (a short loop) flat out for MS milliseconds of CPU time, so that
 * under --funcs 'tiny*' a large share of the samples lands in the agent.
 *   tiny_calls MS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noipa, used))

volatile uint64_t tiny_sink;

/* About as long as the hooks around it (~25 ns): both the agent and the program get samples. */
NOINLINE uint64_t tiny_step(uint64_t x)
{
	for (int i = 0; i < 24; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

NOINLINE uint64_t spin_calls(long ms)
{
	uint64_t end = cpu_ns() + (uint64_t)ms * 1000000u, x = 1, calls = 0;

	do {
		for (int i = 0; i < 4096; i++)
			x = tiny_step(x);
		calls += 4096;
	} while (cpu_ns() < end);
	tiny_sink = x;
	return calls;
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 1000;

	printf("%llu calls\n", (unsigned long long)spin_calls(ms));
	return 0;
}
