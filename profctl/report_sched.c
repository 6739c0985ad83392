// SPDX-License-Identifier: MIT
/* `profctl report`'s scheduler part (see report_sched.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "profctl/report_sched.h"

static const char *const kind_names[] = { "?", "switch", "waking", "newtask", "free" };
static const char *const short_names[THREAD_STATES] = {
	"Running", "Runnable", "Preempted", "Sleeping", "Uninterruptible", "Idle", "Other",
};

static int dump_interval(void *ctx, const struct thread_state_interval *iv)
{
	struct report_sched *rs = ctx;

	fprintf(rs->out, "state %d %s %" PRIu64 " %" PRIu64 " %d %u\n", iv->tid,
		short_names[iv->state], iv->ts, iv->dur, iv->waker, iv->cpu);
	return 0;
}

int report_sched_init(struct report_sched *rs, FILE *out, bool dump)
{
	*rs = (struct report_sched){ .out = out, .dump = dump };
	rs->states = thread_states_new(dump ? dump_interval : NULL, rs);
	return rs->states ? 0 : -ENOMEM;
}

void report_sched_free(struct report_sched *rs)
{
	thread_states_free(rs->states);
	rs->states = NULL;
}

int report_sched_event(struct report_sched *rs, const struct trace_sched_event *e)
{
	rs->events++;
	if (rs->dump)
		fprintf(rs->out, "sched %s %" PRIu64 " %u %d %d %" PRId64 " %d\n",
			kind_names[e->kind <= TRACE_SCHED_FREE ? e->kind : 0], e->ts, e->cpu,
			e->common_pid, e->prev_tid, e->prev_state, e->tid);
	return thread_states_event(rs->states, e);
}

static void print_ms(FILE *out, uint64_t ns)
{
	fprintf(out, " %10.1f", (double)ns / 1e6);
}

/* pid 0 wakes from interrupts on an idle CPU (timers, I/O): trace processor's swapper. */
static const char *waker_name(int32_t tid, const char *comm)
{
	if (!tid)
		return "idle/irq";
	return comm ? comm : "?";
}

/* The traced process's threads only: the others are whoever shared their CPUs. */
static bool described(const struct trace_thread *th, size_t n, int32_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (th[i].tid == tid)
			return true;
	return false;
}

void report_sched_print(struct report_sched *rs, const struct trace_stream *ts)
{
	const struct trace_stream_stats *st = trace_stream_get_stats(ts);
	size_t n_threads, n;
	const struct trace_thread *th = trace_stream_threads(ts, &n_threads);
	const struct thread_state_totals *t = thread_states_totals(rs->states, &n);

	if (!rs->events || !t)
		return;
	fprintf(rs->out, "\nthread states (ms; %" PRIu64 " scheduler events%s%s%s):\n"
		"%8s %10s %10s %10s %10s %10s %10s  %s\n", rs->events,
		st->sched_lost ? ", some lost: figures are lower bounds" : "",
		st->kernel_release ? ", kernel " : "",
		st->kernel_release ? st->kernel_release : "", "tid", "running", "runnable",
		"preempted", "sleeping", "uninterr.", "other", "woken by (times)");
	for (size_t i = 0; i < n; i++) {
		if (!described(th, n_threads, t[i].tid))
			continue;
		fprintf(rs->out, "%8d", t[i].tid);
		print_ms(rs->out, t[i].ns[THREAD_RUNNING]);
		print_ms(rs->out, t[i].ns[THREAD_RUNNABLE]);
		print_ms(rs->out, t[i].ns[THREAD_PREEMPTED]);
		print_ms(rs->out, t[i].ns[THREAD_SLEEPING]);
		print_ms(rs->out, t[i].ns[THREAD_UNINTERRUPTIBLE]);
		print_ms(rs->out, t[i].ns[THREAD_IDLE] + t[i].ns[THREAD_OTHER]);
		fprintf(rs->out, " ");
		for (size_t k = 0; k < THREAD_STATES_WAKERS; k++)
			if (t[i].wakers[k].count)
				fprintf(rs->out, " %d:%s(%" PRIu64 ")", t[i].wakers[k].tid,
					waker_name(t[i].wakers[k].tid, t[i].wakers[k].comm),
					t[i].wakers[k].count);
		fprintf(rs->out, "  [%s]\n", t[i].comm ? t[i].comm : "");
	}
}
