/* SPDX-License-Identifier: MIT */
/*
 * The TSC's rate against CLOCK_MONOTONIC, measured once by the daemon: the
 * agents' hooks compare durations in ticks (--min-duration), and the rate
 * is the machine's, the same in every process.
 */
#ifndef PROFD_TSC_RATE_H
#define PROFD_TSC_RATE_H

/* Ticks per nanosecond, within about 1e-5; measured on first use (2 ms), then cached. */
double tsc_ticks_per_ns(void);

#endif
