// SPDX-License-Identifier: MIT
/*
 * The session's summary for profctl (SessionSummary): the calls, samples
 * and scheduler figures over every process of the session (their exact
 * figures merged), the top functions, and one row per process saying what
 * it was and whether it could be instrumented. Reads the session; changes
 * nothing in it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/func_stats.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sched/sched_session.h"
#include "daemon/session_internal.h"
#include "daemon/symbols/demangle.h"
#include "viewer-export/perfetto_writer.h"

/*
 * About what the Perfetto UI in a browser loads (../shared/perfetto-format.md
 * §6.3: its memory grows with the slice count): past it, the summary names
 * the --min-duration that would have kept the timeline under.
 */
#define UI_SLICE_LIMIT 10000000ull
/* Rows of processes in the summary, at most (the count of all is there too). */
#define MAX_PROCESS_ROWS 512

static void free_row(Profd__ProcessSummary *row)
{
	if (row)
		free(row->why_not);
	free(row);
}

/* Why a process had no agent, in one line; NULL when it had one. */
static char *why_no_agent(const struct session *s, const struct session_process *p)
{
	char buf[160];

	if (p->agent_seen)
		return NULL;
	if (p->why_not[0])
		snprintf(buf, sizeof(buf), "%s", p->why_not);
	else if (!s->n_patterns)
		snprintf(buf, sizeof(buf), "no --funcs: sampled only");
	else if (p->exited)
		snprintf(buf, sizeof(buf), "exited before its agent connected");
	else
		snprintf(buf, sizeof(buf), "its agent never connected");
	return strdup(buf);
}

static Profd__ProcessSummary *process_row(const struct session *s, const struct session_process *p)
{
	Profd__ProcessSummary *row = calloc(1, sizeof(*row));
	struct func_stats_summary calls;

	if (!row)
		return NULL;
	profd__process_summary__init(row);
	func_stats_summarize(p->stats, &calls);
	row->pid = p->pid;
	row->ppid = p->ppid;
	row->name = (char *)p->comm;
	row->instrumented = p->agent_seen;
	row->why_not = why_no_agent(s, p);
	row->calls_made = calls.made;
	row->calls_recorded = calls.recorded;
	row->samples = session_process_samples(p);
	row->functions = session_process_functions(p);
	row->execs = p->execs;
	return row;
}

/*
 * A process's tables count once per program: a forked worker sends its
 * parent's table again, and the same program run 500 times has one list of
 * skipped functions. True for the first process (oldest) of its name.
 */
static bool first_of_its_program(const struct session_process *p)
{
	if (p->table_inherited) /* its comm may be unknown (gone before profd read it) */
		return false;
	for (const struct session_process *q = p->next; q; q = q->next)
		if (q->agent_seen && strcmp(q->comm, p->comm) == 0)
			return false;
	return p->agent_seen;
}

/* Counters every process adds to. */
static void fill_summary_processes_sum(const struct session *s, Profd__SessionSummary *sum)
{
	for (const struct session_process *p = s->procs; p; p = p->next) {
		sum->agent_connected |= p->agent_seen;
		sum->events += p->events;
		sum->events_dropped += p->drops;
		sum->buffer_budget = p->buffer_budget > sum->buffer_budget ? p->buffer_budget :
									  sum->buffer_budget;
		sum->buffer_peak = p->buffer_peak > sum->buffer_peak ? p->buffer_peak :
								    sum->buffer_peak;
	}
}

/*
 * One line for the processes whose agent stopped before its goodbye: what
 * they did after is not in the figures. "" when none did.
 */
static void agents_cut_line(const struct session *s, char *buf, size_t len)
{
	const struct session_process *first = NULL;
	uint32_t n = 0;

	buf[0] = '\0';
	for (const struct session_process *p = s->procs; p; p = p->next)
		if (p->agent_cut && n++ == 0)
			first = p;
	if (!first)
		return;
	snprintf(buf, len,
		 "the agent of PID %d stopped before its goodbye, after %" PRIu64 " events (the "
		 "process was killed, or its agent lost profd): its calls after that are not in the "
		 "figures%s",
		 (int)first->pid, first->events_at_cut, n > 1 ? " (and so for more processes)" : "");
}

/*
 * The late --auto-args functions the summary names: the texts are the
 * session's, the pointers live here until the summary is packed (profd's
 * one thread sends one summary at a time).
 */
static void fill_auto_args_late(const struct session *s, Profd__SessionSummary *sum)
{
	static char *named[AUTO_ARGS_LATE_NAMED];
	const char *text;

	while (sum->n_auto_args_late_named < AUTO_ARGS_LATE_NAMED &&
	       (text = auto_args_late_named(s->auto_args, (uint32_t)sum->n_auto_args_late_named)))
		named[sum->n_auto_args_late_named++] = (char *)text;
	sum->auto_args_late_named = named;
}

/* The tables of each program once; skipped and warnings are allocated. */
static int fill_summary_tables(const struct session *s, Profd__SessionSummary *sum)
{
	size_t n_skipped = 0, n_warnings = (s->warning[0] ? 1 : 0) + 1;

	for (const struct session_process *p = s->procs; p; p = p->next) {
		for (size_t i = 0; first_of_its_program(p) && i < p->funcs.n_tables; i++) {
			n_skipped += p->funcs.tables[i]->n_skipped;
			n_warnings += p->funcs.tables[i]->n_warnings;
		}
	}
	sum->warnings = calloc(n_warnings + 1, sizeof(char *));
	sum->skipped = calloc(n_skipped + 1, sizeof(*sum->skipped));
	if (!sum->warnings || !sum->skipped)
		return -ENOMEM;
	if (s->warning[0])
		sum->warnings[sum->n_warnings++] = (char *)s->warning;
	if (s->agents_cut_warning[0])
		sum->warnings[sum->n_warnings++] = (char *)s->agents_cut_warning;
	for (const struct session_process *p = s->procs; p; p = p->next) {
		for (size_t i = 0; first_of_its_program(p) && i < p->funcs.n_tables; i++) {
			const Profd__FunctionTable *t = p->funcs.tables[i];

			for (size_t k = 0; k < t->n_warnings; k++)
				sum->warnings[sum->n_warnings++] = t->warnings[k];
			sum->functions_matched += t->matched;
			sum->functions_instrumented += (uint32_t)t->n_functions;
			for (size_t k = 0; k < t->n_skipped; k++)
				sum->skipped[sum->n_skipped++] = t->skipped[k];
		}
	}
	return 0;
}

/* Over every process (all: their figures merged); skipped is allocated. */
static int fill_summary(struct session *s, Profd__SessionSummary *sum,
			const struct perfetto_writer_stats *st,
			const struct sample_pipeline_stats *samples, const struct func_stats *all)
{
	struct func_stats_summary calls;

	func_stats_summarize(all, &calls);
	fill_summary_processes_sum(s, sum);
	sum->calls_made = calls.made;
	sum->calls_recorded = calls.recorded;
	for (const struct session_process *p = s->procs; p; p = p->next) {
		sum->calls_with_args += p->calls_with_args;
		sum->args_recorded += p->args_recorded;
	}
	if (s->auto_args) {
		struct auto_args_stats aa;

		auto_args_get_stats(s->auto_args, &aa);
		sum->auto_args = true;
		sum->auto_args_functions = aa.functions;
		sum->auto_args_described = aa.described;
		sum->auto_args_explicit = aa.explicit;
		sum->auto_args_unplaced = aa.unplaced;
		sum->auto_args_ns = aa.ns;
		sum->auto_args_capped = aa.capped;
		sum->auto_args_late = aa.late;
		sum->auto_args_late_calls = aa.late_calls;
		fill_auto_args_late(s, sum);
	}
	sum->calls_dropped = calls.dropped;
	sum->values_dropped = calls.values_dropped;
	sum->dropped_buffer_full = calls.dropped_by_reason[AGG_DROP_BUFFER_FULL];
	sum->dropped_shadow_full = calls.dropped_by_reason[AGG_DROP_SHADOW_FULL];
	sum->dropped_in_hook = calls.dropped_by_reason[AGG_DROP_IN_HOOK];
	sum->dropped_under_unwinder = calls.dropped_by_reason[AGG_DROP_UNDER_UNWINDER];
	sum->dropped_from_generated_code = calls.dropped_by_reason[AGG_DROP_FROM_GENERATED_CODE];
	sum->calls_unattributed = calls.unattributed;
	sum->calls_filtered = calls.filtered;
	sum->filtered_short = calls.filtered_by_reason[AGG_FILTER_SHORT];
	sum->filtered_deep = calls.filtered_by_reason[AGG_FILTER_DEEP];
	sum->min_duration_ns = s->min_duration_ns;
	/* the viewer's limit applies whatever was asked: say it when it kept calls off */
	sum->max_depth = s->max_depth || sum->filtered_deep ? session_timeline_depth(s) : 0;
	if (calls.recorded > UI_SLICE_LIMIT)
		sum->suggested_min_duration_ns =
			func_stats_min_duration_for(all, UI_SLICE_LIMIT);
	sum->calls_open = calls.open;
	if (s->sched) {
		struct sched_session_stats ss;

		sched_session_get_stats(s->sched, &ss);
		sum->sched_switches = ss.switches;
		sum->sched_wakeups = ss.wakeups;
		sum->sched_lost = ss.lost;
		sum->sched_hidden = ss.hidden;
	} else if (s->sched_why[0]) {
		sum->sched_unavailable = s->sched_why;
	}
	sum->samples = samples->written;
	sum->sample_freq = s->freq;
	sum->samples_in_calls = samples->in_calls;
	sum->returns_repaired = samples->returns_repaired;
	sum->samples_empty = samples->empty;
	sum->samples_lost = s->samples_lost;
	sum->trace_bytes = st->bytes;
	sum->error = s->error;
	return fill_summary_tables(s, sum);
}

/* Samples that are the profiler's own cost, by part (see daemon/sampling/overhead.h). */
static void fill_summary_overhead(Profd__SessionSummary *sum,
				  const struct sample_pipeline_stats *samples)
{
	sum->overhead_samples_hooks = samples->by_kind[OVERHEAD_HOOKS];
	sum->overhead_samples_flusher = samples->by_kind[OVERHEAD_FLUSHER];
	sum->overhead_samples_agent = samples->by_kind[OVERHEAD_AGENT];
	sum->overhead_samples = sum->overhead_samples_hooks + sum->overhead_samples_flusher +
				sum->overhead_samples_agent;
}

#define SUMMARY_SELF_FUNCTIONS 10

/* The functions with the most self samples, most first (entries allocated in *list). */
static size_t top_self_samples(const struct session *s, Profd__FunctionSelfSamples *list,
			       Profd__FunctionSelfSamples **ptrs)
{
	size_t n = 0;

	for (uint32_t id = 1; id <= s->n_func_names; id++) {
		uint64_t k = 0;
		size_t at;

		for (const struct session_process *p = s->procs; p; p = p->next)
			k += p->samples_out ? sample_pipeline_self_samples(p->samples_out, id) : 0;
		if (k == 0)
			continue;
		if (n == SUMMARY_SELF_FUNCTIONS && k <= list[n - 1].samples)
			continue;
		at = n < SUMMARY_SELF_FUNCTIONS ? n++ : n - 1;
		for (; at > 0 && list[at - 1].samples < k; at--)
			list[at] = list[at - 1];
		profd__function_self_samples__init(&list[at]);
		list[at].name = (char *)demangle_cached(s->demangled, session_func_name(s, id));
		list[at].samples = k;
	}
	for (size_t i = 0; i < n; i++)
		ptrs[i] = &list[i];
	return n;
}

#define SUMMARY_TOP_FUNCTIONS 10

static void fill_sched_time(const struct session *s, uint32_t func_id, Profd__FunctionTotals *f)
{
	struct sched_func_time t;

	if (!s->sched || !sched_session_func_time(s->sched, func_id, &t))
		return;
	f->sched_calls = t.calls;
	f->on_cpu_ns = f->total_ns > t.off_ns ? f->total_ns - t.off_ns : 0;
	f->off_cpu_ns = t.off_ns;
	f->runnable_ns = t.runnable_ns;
}

static size_t fill_top_functions(struct session *s, const struct func_totals *totals, size_t n,
				 Profd__FunctionTotals *top, Profd__FunctionTotals **ptrs)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < SUMMARY_TOP_FUNCTIONS; i++) {
		const char *name = session_func_name(s, totals[i].func_id);

		if (!name)
			continue;
		profd__function_totals__init(&top[k]);
		top[k].name = (char *)demangle_cached(s->demangled, name);
		top[k].calls = totals[i].calls;
		top[k].exited = totals[i].exited;
		top[k].total_ns = totals[i].total_ns;
		top[k].self_ns = totals[i].self_ns;
		top[k].max_ns = totals[i].max_ns;
		top[k].p50_ns = totals[i].p50_ns;
		top[k].p99_ns = totals[i].p99_ns;
		top[k].dropped = totals[i].dropped;
		top[k].filtered = totals[i].filtered;
		top[k].values_dropped = totals[i].values_dropped;
		fill_sched_time(s, totals[i].func_id, &top[k]);
		ptrs[k] = &top[k];
		k++;
	}
	return k;
}

/* One row per process, the first one first (at most MAX_PROCESS_ROWS); allocated. */
static int fill_process_rows(const struct session *s, Profd__SessionSummary *sum)
{
	size_t total = 0, n, at;

	for (const struct session_process *p = s->procs; p; p = p->next)
		total++;
	n = total < MAX_PROCESS_ROWS ? total : MAX_PROCESS_ROWS;
	sum->processes = calloc(n + 1, sizeof(*sum->processes));
	if (!sum->processes)
		return -ENOMEM;
	sum->n_processes = n;
	at = total; /* the list is newest first: the oldest rows are the ones kept */
	for (const struct session_process *p = s->procs; p; p = p->next) {
		if (--at >= n)
			continue;
		if (!(sum->processes[at] = process_row(s, p)))
			return -ENOMEM;
	}
	sum->processes_seen = s->n_procs;
	sum->processes_not_followed = s->not_followed;
	return 0;
}

static void send_summary_packed(struct session *s, Profd__SessionSummary *sum)
{
	size_t len = profd__session_summary__get_packed_size(sum);
	uint8_t *buf;

	while (len > FRAME_PAYLOAD_MAX && (sum->n_skipped > 0 || sum->n_processes > 1)) {
		sum->n_skipped /= 2;
		if (!sum->n_skipped)
			sum->n_processes /= 2;
		len = profd__session_summary__get_packed_size(sum);
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return;
	profd__session_summary__pack(sum, buf);
	conn_send(s->client, FRAME_SESSION_SUMMARY, buf, len);
	free(buf);
}

void session_send_summary(struct session *s, const struct perfetto_writer_stats *st,
			  const struct sample_pipeline_stats *samples)
{
	Profd__SessionSummary sum = PROFD__SESSION_SUMMARY__INIT;
	Profd__FunctionSelfSamples self[SUMMARY_SELF_FUNCTIONS], *self_ptrs[SUMMARY_SELF_FUNCTIONS];
	Profd__FunctionTotals top[SUMMARY_TOP_FUNCTIONS], *top_ptrs[SUMMARY_TOP_FUNCTIONS];
	struct func_totals *totals = NULL;
	struct func_stats *all = func_stats_new();
	long n_totals;

	agents_cut_line(s, s->agents_cut_warning, sizeof(s->agents_cut_warning));
	for (const struct session_process *p = s->procs; all && p; p = p->next)
		if (func_stats_merge(all, p->stats))
			session_error(s, "%s", "out of memory for the per-function figures");
	if (!all || fill_summary(s, &sum, st, samples, all) || fill_process_rows(s, &sum))
		goto out;
	fill_summary_overhead(&sum, samples);
	sum.n_self_samples = top_self_samples(s, self, self_ptrs);
	sum.self_samples = self_ptrs;
	n_totals = func_stats_totals(all, 0, &totals);
	if (n_totals > 0) {
		sum.functions_called = (uint32_t)n_totals;
		sum.n_top_functions = fill_top_functions(s, totals, (size_t)n_totals, top, top_ptrs);
		sum.top_functions = top_ptrs;
	}
	send_summary_packed(s, &sum);
out:
	for (size_t i = 0; sum.processes && i < sum.n_processes; i++)
		free_row(sum.processes[i]);
	free(sum.processes);
	func_stats_free(all);
	free(totals);
	free(sum.skipped);
	free(sum.warnings);
}

