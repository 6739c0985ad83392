// SPDX-License-Identifier: MIT
/*
 * The streaming reader's scheduler events: FtraceEventBundles decoded into
 * trace_sched_event (the sched_switch, sched_waking, task_newtask and
 * sched_process_free profd writes; other ftrace events are counted as not
 * read), their BOOTTIME timestamps placed on the trace clock through the
 * clock snapshot, held in a min-heap and delivered in (ts, file order) once
 * they fall opts.sched_reorder_ns behind the newest.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_trace_subset.pb-c.h"
#include "viewer-export/trace_reader_internal.h"

#define TRD_SCHED_REORDER_DEFAULT (2000000000ull)
#define TRD_CLOCK_MONOTONIC 3

static bool trd_sched_less(const struct trace_sched_event *a, const struct trace_sched_event *b)
{
	return trd_cmp_ts_order(a->ts, a->order, b->ts, b->order) < 0;
}

static void trd_sched_push(struct trd *r, const struct trace_sched_event *e)
{
	struct trace_sched_event *h;
	size_t i;

	if (!trd_reserve(r, (void **)&r->sched_heap, &r->cap_sched, r->n_sched, sizeof(*e)))
		return;
	h = r->sched_heap;
	for (i = r->n_sched++; i > 0 && trd_sched_less(e, &h[(i - 1) / 2]); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = *e;
}

static struct trace_sched_event trd_sched_pop(struct trd *r)
{
	struct trace_sched_event *h = r->sched_heap, top = h[0], last = h[--r->n_sched];
	size_t i = 0, n = r->n_sched;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && trd_sched_less(&h[c + 1], &h[c]))
			c++;
		if (!trd_sched_less(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n)
		h[i] = last;
	return top;
}

static void trd_sched_deliver(struct trd *r, const struct trace_sched_event *e)
{
	if (r->sched_delivered && e->ts < r->sched_last_ts)
		r->st.sched_late++;
	r->sched_delivered = true;
	r->sched_last_ts = e->ts;
	r->st.sched_events++;
	if (r->ops->sched)
		trd_emitted(r, r->ops->sched(r->ctx, e));
}

/* Everything held behind the newest by the window goes out (all at the end). */
static void trd_sched_release(struct trd *r, bool all)
{
	uint64_t window = r->opts.sched_reorder_ns ? r->opts.sched_reorder_ns :
						     TRD_SCHED_REORDER_DEFAULT;

	while (r->n_sched && !r->stop &&
	       (all || r->sched_heap[0].ts + window < r->sched_newest)) {
		struct trace_sched_event e = trd_sched_pop(r);

		trd_sched_deliver(r, &e);
	}
}

/* A snapshot naming BOOTTIME and MONOTONIC: ftrace's clock placed on profd's trace clock. */
void trd_sched_clock_snapshot(struct trd *r, const Perfetto__Protos__ClockSnapshot *cs)
{
	bool boot = false, mono = false;
	uint64_t b = 0, m = 0;

	for (size_t i = 0; i < cs->n_clocks; i++) {
		if (cs->clocks[i]->clock_id == TRD_CLOCK_BOOTTIME)
			boot = true, b = cs->clocks[i]->timestamp;
		else if (cs->clocks[i]->clock_id == TRD_CLOCK_MONOTONIC)
			mono = true, m = cs->clocks[i]->timestamp;
	}
	if (boot && mono) {
		r->boot_to_trace = (int64_t)(m - b);
		r->has_boot_to_trace = true;
	}
}

static const char *trd_comm(struct trd *r, const char *s)
{
	return s ? trd_str(r, s, strlen(s)) : NULL;
}

/* One FtraceEvent as a trace_sched_event; false for kinds profd does not write. */
static bool trd_sched_decode(struct trd *r, const Perfetto__Protos__FtraceEvent *fe,
			     struct trace_sched_event *e)
{
	switch (fe->event_case) {
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH:
		e->kind = TRACE_SCHED_SWITCH;
		e->prev_tid = fe->sched_switch->prev_pid;
		e->prev_prio = fe->sched_switch->prev_prio;
		e->prev_comm = trd_comm(r, fe->sched_switch->prev_comm);
		e->prev_state = fe->sched_switch->prev_state;
		e->tid = fe->sched_switch->next_pid;
		e->prio = fe->sched_switch->next_prio;
		e->comm = trd_comm(r, fe->sched_switch->next_comm);
		return true;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING:
		e->kind = TRACE_SCHED_WAKING;
		e->tid = fe->sched_waking->pid;
		e->prio = fe->sched_waking->prio;
		e->comm = trd_comm(r, fe->sched_waking->comm);
		e->target_cpu = fe->sched_waking->target_cpu;
		return true;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_NEWTASK:
		e->kind = TRACE_SCHED_NEW_TASK;
		e->tid = fe->task_newtask->pid;
		e->comm = trd_comm(r, fe->task_newtask->comm);
		e->clone_flags = fe->task_newtask->clone_flags;
		return true;
	case PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FREE:
		e->kind = TRACE_SCHED_FREE;
		e->tid = fe->sched_process_free->pid;
		e->prio = fe->sched_process_free->prio;
		e->comm = trd_comm(r, fe->sched_process_free->comm);
		return true;
	default:
		return false;
	}
}

void trd_ftrace_bundle(struct trd *r, const Perfetto__Protos__FtraceEventBundle *b)
{
	if (!b->has_cpu || b->cpu >= 1024) {
		trd_problem(r, "FtraceEventBundle without a cpu below 1024 (dropped: "
			    "ftrace_bundle_tokenizer_errors)");
		return;
	}
	if (b->lost_events)
		r->st.sched_lost = true;
	if (b->n_event && !r->has_boot_to_trace)
		trd_problem(r, "ftrace events before a clock snapshot with BOOTTIME and the trace "
			    "clock (placed as if the clocks were equal)");
	for (size_t i = 0; i < b->n_event; i++) {
		const Perfetto__Protos__FtraceEvent *fe = b->event[i];
		struct trace_sched_event e = { .cpu = b->cpu, .order = r->pkt_index,
					       .lost_before = b->lost_events && i == 0 };

		if (!fe->has_timestamp || !fe->has_pid) {
			trd_problem(r, "ftrace event without timestamp or pid (dropped)");
			continue;
		}
		if (!trd_sched_decode(r, fe, &e))
			continue;
		e.ts = fe->timestamp + (uint64_t)r->boot_to_trace;
		e.common_pid = (int32_t)fe->pid;
		if (e.ts > r->sched_newest)
			r->sched_newest = e.ts;
		trd_sched_push(r, &e);
	}
	trd_sched_release(r, false);
}

void trd_system_info(struct trd *r, const Perfetto__Protos__SystemInfo *si)
{
	if (si->utsname && si->utsname->release)
		r->st.kernel_release = trd_str(r, si->utsname->release,
					       strlen(si->utsname->release));
}

void trd_sched_finish(struct trd *r)
{
	trd_sched_release(r, true);
}

void trd_sched_free(struct trd *r)
{
	free(r->sched_heap);
	r->sched_heap = NULL;
}
