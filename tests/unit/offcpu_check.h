/* SPDX-License-Identifier: MIT */
/*
 * CHECK_TIME: one off-CPU clock reading (daemon/sched/offcpu.h) against its
 * expected off and runnable ns, for the tests of the clocks and of the
 * sessions that feed them. The includer includes unit.h first.
 */
#ifndef PROFD_OFFCPU_CHECK_H
#define PROFD_OFFCPU_CHECK_H

#include "daemon/sched/offcpu.h"

#define CHECK_TIME(t, off, runnable)                          \
	do {                                                  \
		struct offcpu_time unit_t = (t);              \
		CHECK_EQ_U64(unit_t.off_ns, (off));           \
		CHECK_EQ_U64(unit_t.runnable_ns, (runnable)); \
	} while (0)

#endif
