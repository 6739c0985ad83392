// SPDX-License-Identifier: MIT
/*
 * Measures the TSC rate (tsc_rate.h): a (TSC, CLOCK_MONOTONIC) pair now and
 * one 2 ms later, each the reading with the least TSC time around its
 * clock_gettime, so a preemption in between costs nothing but a retry.
 */
#include <time.h>
#include <stdint.h>

#include "common/mono_clock.h"
#include "daemon/events/tsc_rate.h"

#define PAIR_TRIES 16
#define SPAN_NS 2000000L

struct clock_pair {
	uint64_t tsc, ns;
};

static struct clock_pair tight_pair(void)
{
	struct clock_pair best = { 0, 0 };
	uint64_t best_width = UINT64_MAX;

	for (int i = 0; i < PAIR_TRIES; i++) {
		uint64_t before = __builtin_ia32_rdtsc(), ns = mono_clock_ns();
		uint64_t after = __builtin_ia32_rdtsc();

		if (after - before < best_width) {
			best_width = after - before;
			best = (struct clock_pair){ before + (after - before) / 2, ns };
		}
	}
	return best;
}

double tsc_ticks_per_ns(void)
{
	/* a machine constant: measured once for the daemon's life */
	static double rate;
	struct clock_pair a, b;
	struct timespec span = { 0, SPAN_NS };

	if (rate > 0)
		return rate;
	a = tight_pair();
	while (nanosleep(&span, &span))
		;
	b = tight_pair();
	if (b.ns > a.ns && b.tsc > a.tsc)
		rate = (double)(b.tsc - a.tsc) / (double)(b.ns - a.ns);
	return rate > 0 ? rate : 1.0;
}
