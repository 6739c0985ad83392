/* SPDX-License-Identifier: MIT */
/*
 * The agent's clock: the CPU's own counter, read in a few cycles without the
 * kernel, on every hook. The flusher pairs it with CLOCK_MONOTONIC now and
 * then (flusher_read_clock_pair) and profd converts with those pairs, so
 * the counter's rate never needs to be known here.
 *   x86-64: the TSC (rdtsc; invariant on every CPU we run on).
 *   aarch64: the generic timer's virtual count, cntvct_el0 (constant rate,
 *            typically 1 GHz on Armv8.6+ or 24-100 MHz before; 62.5 MHz
 *            under qemu-user). Read without an isb, as rdtsc is without a
 *            fence: the hooks' reads may run a few instructions early.
 */
#ifndef PROFD_CPU_TICKS_H
#define PROFD_CPU_TICKS_H

#include <stdint.h>

static inline uint64_t cpu_ticks(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
#error "no tick counter for this architecture"
#endif
}

#endif
