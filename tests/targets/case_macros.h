/* SPDX-License-Identifier: MIT */
/*
 * What the test targets built of cases share (abi_torture, signal_storm): a
 * call the compiler cannot see through, and a case's way to fail with why.
 */
#ifndef PROFD_TEST_CASE_MACROS_H
#define PROFD_TEST_CASE_MACROS_H

#include <stdio.h>

/* A volatile pointer to fn: every call is a real call through the patched entry. */
#define VIA(fn) static __typeof__(fn) *volatile vp_##fn = fn
#define WHY_LEN 256

/* Each case returns 0, or 1 with the details in why (WHY_LEN bytes). */
#define FAIL_IF(cond, ...)                                  \
	do {                                                \
		if (cond) {                                 \
			snprintf(why, WHY_LEN, __VA_ARGS__); \
			return 1;                           \
		}                                           \
	} while (0)

#endif
