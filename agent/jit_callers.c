/* SPDX-License-Identifier: MIT */
/*
 * The table of runtimes' native code ranges (see jit_callers.h). A fixed
 * array: the hook may read it from a signal handler, so no allocation and no
 * lock; an entry is filled before the count that publishes it.
 */
#include "agent/jit_callers.h"

#include <errno.h>
#include <stdatomic.h>

struct native_range {
	uint64_t text_lo, text_hi, blob_lo, blob_hi;
};

/* Global: the enter hook reads it on the calls of every flagged function. */
static struct native_range ranges[JIT_CALLERS_MAX];
static _Atomic uint32_t n_ranges;

int jit_callers_add(uint64_t text_lo, uint64_t text_hi, uint64_t blob_lo, uint64_t blob_hi)
{
	uint32_t n = atomic_load_explicit(&n_ranges, memory_order_relaxed);

	for (uint32_t i = 0; i < n; i++)
		if (ranges[i].text_lo == text_lo && ranges[i].text_hi == text_hi)
			return 0; /* the same module, instrumented again (a later dlopen's look) */
	if (n == JIT_CALLERS_MAX)
		return -ENOSPC;
	ranges[n] = (struct native_range){ text_lo, text_hi, blob_lo, blob_hi };
	atomic_store_explicit(&n_ranges, n + 1, memory_order_release);
	return 0;
}

bool jit_callers_is_native(uint64_t return_address)
{
	uint32_t n = atomic_load_explicit(&n_ranges, memory_order_acquire);

	for (uint32_t i = 0; i < n; i++) {
		const struct native_range *r = &ranges[i];

		if (return_address >= r->text_lo && return_address < r->text_hi)
			return return_address < r->blob_lo || return_address >= r->blob_hi;
	}
	return false;
}
