// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * profd's scheduler probe (CO-RE, BTF tracepoints): sched_switch,
 * sched_waking and sched_wakeup_new, for the threads of
 * the processes in `targets` only (filtered here by tgid, so threads created
 * later are followed), one struct sched_record each into `events`. Costs one
 * load and a branch per event while no target is set; otherwise two direct
 * loads and two loads of a hint table, and a hash lookup only for a task whose
 * tgid shares a hint slot with a target (no helper call before the filter). The
 * consumer polls; a wakeup is sent only when the ring fills up.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "daemon/sched/sched_record.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_TARGETS 1024
#define RING_BYTES (4u << 20)
/* Wake the consumer only past this much unread data: it polls every 20 ms. */
#define WAKEUP_BYTES (RING_BYTES / 4)

#define TASK_REPORT 0x7fu
#define TASK_REPORT_IDLE 0x80u
#define TASK_IDLE 0x402u /* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct sched_target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} events SEC(".maps");

/* Set by profd: with no target the probe returns at once. */
volatile __u32 n_targets;
/*
 * Set by profd: how many targets have tgid % SCHED_HINT_SLOTS in each slot.
 * A plain load (global data needs no map lookup) that lets nearly every task
 * of the machine through without the hash lookup.
 */
volatile __u16 hint[SCHED_HINT_SLOTS];

/* Before 5.14 the field was `state`. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return (__u32)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* What the sched_switch tracepoint prints as prev_state (__trace_sched_switch_state). */
static __always_inline __u32 reported_state(bool preempt, struct task_struct *prev)
{
	__u32 st, bits;

	if (preempt)
		return SCHED_STATE_PREEMPTED;
	st = task_state(prev);
	bits = (st | (__u32)prev->exit_state) & TASK_REPORT;
	if ((st & TASK_IDLE) == TASK_IDLE) /* as __task_state_index tests it */
		bits = TASK_REPORT_IDLE;
	/* the highest bit, as fls() picks (BPF has no count-leading-zeros) */
	for (__u32 bit = TASK_REPORT_IDLE; bit; bit >>= 1)
		if (bits & bit)
			return bit;
	return 0;
}

static __always_inline struct sched_target *target_of(struct task_struct *t)
{
	__u32 tgid = t->tgid;

	if (!hint[tgid & (SCHED_HINT_SLOTS - 1)])
		return NULL;
	return bpf_map_lookup_elem(&targets, &tgid);
}

static __always_inline void fill_task(struct task_struct *t, __u32 *tid, __u32 *tgid, __s32 *prio,
				      char *comm)
{
	*tid = t->pid;
	*tgid = t->tgid;
	*prio = t->prio;
	/* comm is NUL-padded to its 16 bytes: two direct loads, no helper call */
	__builtin_memcpy(comm, t->comm, SCHED_COMM_LEN);
}

static __always_inline struct sched_record *reserve(struct sched_target *a, struct sched_target *b)
{
	struct sched_record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (r)
		return r;
	if (a)
		__sync_fetch_and_add(&a->lost, 1);
	if (b && b != a)
		__sync_fetch_and_add(&b->lost, 1);
	return NULL;
}

static __always_inline void submit(struct sched_record *r)
{
	__u64 unread = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);

	bpf_ringbuf_submit(r, unread > WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/*
 * Two tasks: prev (current, or the one switched out) and next. Everything
 * past the filter is read only for a followed task: every context switch of
 * the machine runs the part before it.
 */
static __always_inline int emit(__u32 kind, struct task_struct *prev, struct task_struct *next,
				bool preempt)
{
	__u32 prev_state = 0, target_cpu = 0;
	struct sched_target *a, *b = NULL;
	struct sched_record *r;

	if (!n_targets)
		return 0;
	a = target_of(prev);
	if (next)
		b = target_of(next);
	/* not `!a && !b`: clang ORs the two pointers, which the verifier refuses */
	if (!a) {
		barrier_var(b);
		if (!b)
			return 0;
	}
	if (kind == SCHED_RECORD_SWITCH)
		prev_state = reported_state(preempt, prev);
	else
		target_cpu = next->wake_cpu;
	r = reserve(a, b);
	if (!r)
		return 0;
	r->ts = bpf_ktime_get_ns();
	r->kind = kind;
	r->cpu = bpf_get_smp_processor_id();
	r->prev_state = prev_state;
	r->target_cpu = target_cpu;
	fill_task(prev, &r->prev_tid, &r->prev_tgid, &r->prev_prio, r->prev_comm);
	if (next) {
		fill_task(next, &r->next_tid, &r->next_tgid, &r->next_prio, r->next_comm);
	} else {
		r->next_tid = r->next_tgid = 0;
		r->next_prio = 0;
		r->next_comm[0] = '\0';
	}
	submit(r);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(profd_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (!n_targets)
		return 0;
	return emit(SCHED_RECORD_SWITCH, prev, next, preempt);
}

/* In the waker's context; the woken task will run on wake_cpu. */
SEC("tp_btf/sched_waking")
int BPF_PROG(profd_sched_waking, struct task_struct *p)
{
	if (!n_targets)
		return 0;
	return emit(SCHED_RECORD_WAKING, bpf_get_current_task_btf(), p, false);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(profd_sched_wakeup_new, struct task_struct *p)
{
	if (!n_targets)
		return 0;
	return emit(SCHED_RECORD_WAKEUP_NEW, bpf_get_current_task_btf(), p, false);
}
