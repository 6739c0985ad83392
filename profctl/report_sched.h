/* SPDX-License-Identifier: MIT */
/*
 * `profctl report`'s scheduler part: the threads' states (Running, Runnable,
 * Sleeping, ...) as trace processor derives them (viewer-export/thread_states.h),
 * per thread with its most frequent wakers, and `--dump`'s lines for them:
 *   sched KIND TS CPU COMMON_PID PREV_TID PREV_STATE TID
 *                 KIND switch|waking|newtask|free; PREV_* 0 but for switches
 *   state TID STATE TS DUR WAKER CPU
 *                 one closed state interval; STATE Running, Runnable, Preempted,
 *                 Sleeping, Uninterruptible, Idle, Other; WAKER 0: none
 */
#ifndef PROFCTL_REPORT_SCHED_H
#define PROFCTL_REPORT_SCHED_H

#include <stdio.h>

#include "viewer-export/thread_states.h"
#include "viewer-export/trace_stream.h"

struct report_sched {
	FILE *out;
	bool dump;
	struct thread_states *states;
	uint64_t events;
};

int report_sched_init(struct report_sched *rs, FILE *out, bool dump);
/* A trace_stream_ops.sched callback (ctx: the struct report_sched). */
int report_sched_event(struct report_sched *rs, const struct trace_sched_event *e);
/* The per-thread table; nothing when the trace has no scheduler events. */
void report_sched_print(struct report_sched *rs, const struct trace_stream *ts);
void report_sched_free(struct report_sched *rs);

#endif
