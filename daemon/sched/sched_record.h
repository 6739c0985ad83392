/* SPDX-License-Identifier: MIT */
/*
 * The one record daemon/sched/sched.bpf.c sends profd per scheduler event of
 * a target's thread, through a BPF ring buffer. Included by the BPF program
 * (types from vmlinux.h) and by profd (types from <linux/types.h>): plain
 * fixed-size fields only, laid out without padding.
 */
#ifndef PROFD_SCHED_RECORD_H
#define PROFD_SCHED_RECORD_H

#ifndef __bpf__
#include <linux/types.h>
#endif

enum sched_record_kind {
	SCHED_RECORD_SWITCH = 1,     /* prev stops running on cpu, next starts */
	SCHED_RECORD_WAKING = 2,     /* prev (the waker, current) wakes next */
	SCHED_RECORD_WAKEUP_NEW = 3, /* prev (the creator, current) starts new task next */
};

/*
 * prev_state of a switch, as the kernel's sched_switch tracepoint reports it
 * (__trace_sched_switch_state): 0 runnable, one TASK_REPORT bit
 * (1 S, 2 D, 4 T, 8 t, 0x10 X, 0x20 Z, 0x40 P, 0x80 I), or
 * SCHED_STATE_PREEMPTED when the task was preempted (still runnable).
 */
#define SCHED_STATE_PREEMPTED 0x100u

#define SCHED_COMM_LEN 16

struct sched_record {
	__u64 ts;               /* CLOCK_MONOTONIC ns (bpf_ktime_get_ns) */
	__u32 kind;             /* enum sched_record_kind */
	__u32 cpu;              /* where it happened */
	__u32 prev_tid, prev_tgid;
	__u32 next_tid, next_tgid;
	__s32 prev_prio, next_prio;
	__u32 prev_state;       /* SWITCH only */
	__u32 target_cpu;       /* WAKING, WAKEUP_NEW: where next will run */
	char prev_comm[SCHED_COMM_LEN];
	char next_comm[SCHED_COMM_LEN];
};

/* The probe's first filter: targets per tgid % SCHED_HINT_SLOTS (a power of two). */
#define SCHED_HINT_SLOTS 4096

/* A target's entry in the BPF program's filter (key: tgid). */
struct sched_target {
	__u64 lost;             /* records the ring had no room for */
};

#endif
