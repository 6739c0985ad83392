// SPDX-License-Identifier: MIT
/* A library loaded with dlopen by tests/targets/plugin_host.c, after profiling began. */
#include <time.h>
__attribute__((noinline)) long plug_inner(long x)
{
	long r = x * 3 + 1;

	__asm__ volatile("" : "+r"(r));
	return r;
}

long plug_work(long x)
{
	long r = plug_inner(x) + 2;

	__asm__ volatile("" : "+r"(r));
	return r;
}

/* CPU time, not wall time: on a loaded machine the samples of a spin still add up to it. */
static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Burns CPU for ms milliseconds: samples that land in a library mapped late. */
__attribute__((noinline)) long plug_spin(long ms)
{
	struct timespec t0;
	long r = 0;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			r = r * 31 + i;
		__asm__ volatile("" : "+r"(r));
	} while (elapsed_ms(&t0) < ms);
	return r;
}
