/* SPDX-License-Identifier: MIT */
/*
 * CLOCK_MONOTONIC in nanoseconds, for deadlines and rates (libc only: the
 * agent, the daemon and profctl all use it). Never for event timestamps:
 * those are the agent's TSC readings.
 */
#ifndef PROFD_MONO_CLOCK_H
#define PROFD_MONO_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
