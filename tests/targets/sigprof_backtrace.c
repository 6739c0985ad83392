// SPDX-License-Identifier: MIT
/*
 * A SIGPROF handler that calls backtrace(), as sampling profilers and crash
 * reporters do, every 50 us of CPU while the main thread calls the
 * instrumented sb_work() for a second. backtrace() is patched for its flag
 * only (the agent puts return addresses back before it walks), so handlers
 * that land inside a hook call a stub with no function id: it must pass
 * through without harm. Prints "calls N" (sb_work's exact count).
 * (Found by a helper: the agent counted such calls under function id 0,
 * which the daemon refuses, and the session died.)
 */
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile long sink, handled;

__attribute__((noinline, noipa)) long sb_work(long x)
{
	sink += x;
	return x * 3;
}

static void on_prof(int sig)
{
	void *frames[8];

	(void)sig;
	handled += backtrace(frames, 8) > 0;
}

int main(void)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	struct timespec t0, t;
	void *first[2];
	long calls = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	backtrace(first, 2); /* loads libgcc_s before the timer starts */
	setitimer(ITIMER_PROF, &it, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++, calls++)
			sb_work(i);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 1);
	printf("calls %ld\n", calls);
	return handled == 0; /* the handler must have run */
}
