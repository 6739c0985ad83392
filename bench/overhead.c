// SPDX-License-Identifier: MIT
/*
 * Per-call overhead of instrumentation: two identical empty noinline
 * functions, `bench_plain` and `bench_instrumented`; run under
 * `profctl run --funcs bench_instrumented` (bench/run.sh does) and both are
 * timed in the same process, interleaved, so the difference is what one
 * instrumented call (enter + exit) costs. Prints the median of the rounds.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 21
#define WARMUP_ROUNDS 3

/*
 * The shape of an empty function built with frame pointers, written in
 * assembly so the compiler cannot shrink it below the 5-byte patch.
 */
#define EMPTY_FUNCTION(name)                                                   \
	__asm__(".text\n.globl " #name "\n.type " #name ", @function\n"       \
		".p2align 4\n" #name ":\n\tpush %rbp\n\tmov %rsp, %rbp\n"          \
		"\tpop %rbp\n\tret\n.size " #name ", .-" #name "\n");          \
	void name(void)

EMPTY_FUNCTION(bench_plain);
EMPTY_FUNCTION(bench_instrumented);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double time_calls(void (*fn)(void), unsigned long calls)
{
	uint64_t start = now_ns();

	for (unsigned long i = 0; i < calls; i++)
		fn();
	return (double)(now_ns() - start) / (double)calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	/* 20k calls per round: 40k events, inside one thread's 64k-record ring */
	unsigned long calls = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	double plain[ROUNDS], instr[ROUNDS];
	struct timespec pause = { 0, 20 * 1000 * 1000 }; /* let the flusher drain */

	for (int r = 0; r < ROUNDS + WARMUP_ROUNDS; r++) {
		double p = time_calls(bench_plain, calls);
		double i = time_calls(bench_instrumented, calls);

		if (r >= WARMUP_ROUNDS) {
			plain[r - WARMUP_ROUNDS] = p;
			instr[r - WARMUP_ROUNDS] = i;
		}
		nanosleep(&pause, NULL);
	}
	qsort(plain, ROUNDS, sizeof(double), cmp_double);
	qsort(instr, ROUNDS, sizeof(double), cmp_double);
	printf("plain call:        %6.2f ns/call (median of %d rounds of %lu calls)\n",
	       plain[ROUNDS / 2], ROUNDS, calls);
	printf("instrumented call: %6.2f ns/call\n", instr[ROUNDS / 2]);
	printf("overhead:          %6.2f ns/call (enter + exit)\n",
	       instr[ROUNDS / 2] - plain[ROUNDS / 2]);
	return 0;
}
