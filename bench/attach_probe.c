// SPDX-License-Identifier: MIT
/*
 * Per-call cost of one function over time, for bench/attach.sh: prints the
 * nanoseconds per call of `probe_fn` for every window of 1M calls, with the
 * window's start time, so the script can compare before attach, while
 * attached and after detach (which must equal before: zero overhead left).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* An empty function with a frame, in asm: at least the 5 bytes a patch needs. */
__asm__(".text\n.globl probe_fn\n.type probe_fn, @function\n.p2align 4\nprobe_fn:\n"
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tpop %rbp\n\tret\n.size probe_fn, .-probe_fn\n");
void probe_fn(void);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double start = now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (argc < 2 || access(argv[1], F_OK) != 0) {
		double t0 = now_s();

		for (int i = 0; i < 1000000; i++)
			probe_fn();
		printf("window %.3f %.2f\n", t0 - start, (now_s() - t0) * 1e3);
		usleep(20000);
	}
	return 0;
}
