// SPDX-License-Identifier: MIT
/*
 * `profctl report`: streams a trace (viewer-export/trace_stream.h) and
 * prints per-function call counts and times, threads, the profiler's own
 * cost (profiling overhead), the hottest sampled functions of the program
 * and any rule the trace breaks, aggregating as it reads: memory follows the
 * distinct names and threads, never the trace's size. `--dump` prints one
 * line per item as the stream delivers it, for scripts and tests:
 *   process PID NAME            when its descriptor is read (again if renamed)
 *   thread PID TID NAME         likewise
 *   slice TID DEPTH NAME TS DUR PARENT [SELF_SAMPLES]
 *                               when the slice ends; those never ended (DUR -1)
 *                               at the end, innermost first. Slices are numbered
 *                               from 0 in the order they begin; PARENT is the
 *                               enclosing slice's number (-1 at depth 0), so a
 *                               parent's line comes after its children's.
 *   sample TID CPU FRAMES       file order, frames root first, ';'-separated
 *   total TID NAME CALLS RETURNED OFF_TIMELINE TOTAL_NS SELF_NS P50 P99 MAX
 *         SCHED_CALLS OFF_CPU_NS RUNNABLE_NS   (0 0 0 without scheduler states)
 *   args TID TS NAME=VALUE...   after the slice line of a call with --args/--retval
 *                               values (TS: the slice's start); strings quoted,
 *                               bytes outside printable ASCII, space, quote and
 *                               backslash as \xNN
 *   offcpu TID TS ON_CPU_NS OFF_CPU_NS RUNNABLE_NS
 *                               after the slice line of a call its thread was
 *                               switched out during (TS: the slice's start)
 *   counter NAME TS VALUE
 *   problem TEXT
 *   cut BYTES                   the trace has no closing packet: cut short after BYTES
 *   sched ..., state ...        scheduler events and thread states (report_sched.h)
 * Order between kinds is the file's: consumers that need an order sort.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/func_filter.h"
#include "profctl/profctl.h"
#include "profctl/report_callers.h"
#include "profctl/report_names.h"
#include "profctl/report_options.h"
#include "profctl/report_procs.h"
#include "profctl/report_sched.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_stream.h"

#define REPORT_PROBLEMS_SHOWN 20
#define REPORT_REORDER 1024 /* slice events per track put back in order (profd writes them in order) */

/* ---- the report's state ---------------------------------------------------------- */

struct report {
	FILE *out;
	const struct profctl_report_opts *opt;
	size_t n_slices, n_samples;
	struct name_table funcs;   /* slices by name */
	struct name_table leaves;  /* the program's samples by leaf frame */
	struct trace_func_total *totals; /* the tid-0 rows: over all threads */
	size_t n_totals, cap_totals;
	struct trace_func_total *thread_totals; /* --threads: tid != 0 rows */
	size_t n_thread_totals, cap_thread_totals;
	struct report_callers callers;   /* --callers */
	struct profctl_overhead overhead;
	char *problems[REPORT_PROBLEMS_SHOWN];
	uint64_t n_problems;
	struct report_sched sched;
	struct report_procs procs;       /* a process tree's processes */
	bool oom;
};

static const char *or_unnamed(const char *name)
{
	return name ? name : "?";
}

static int report_slice(void *ctx, const struct trace_stream_slice *s)
{
	struct report *rp = ctx;
	struct name_stat *st = name_table_get(&rp->funcs, or_unnamed(s->name));

	if (!st)
		return -ENOMEM;
	if (rp->opt->callers && report_callers_slice(&rp->callers, s))
		return -ENOMEM;
	rp->n_slices++;
	st->count++;
	if (s->dur > 0)
		st->total_ns += s->dur;
	return 0;
}

/* Overhead by part; the program's samples by leaf and by innermost call. */
static int report_sample(void *ctx, const struct trace_stream_sample *smp)
{
	struct report *rp = ctx;
	const struct trace_sample *s = &smp->s;
	const char *kind = trace_sample_overhead(s);
	struct name_stat *st;

	rp->n_samples++;
	if (report_procs_sample(&rp->procs, s->pid, s->generation))
		return -ENOMEM;
	if (kind) { /* the profiler's cost: no call's self time (as profd counts) */
		rp->overhead.samples++;
		rp->overhead.hooks += strcmp(kind, PERFETTO_OVERHEAD_HOOKS) == 0;
		rp->overhead.flusher += strcmp(kind, PERFETTO_OVERHEAD_FLUSHER) == 0;
		rp->overhead.agent += strcmp(kind, PERFETTO_OVERHEAD_AGENT) == 0;
		return 0;
	}
	if (smp->where == TRACE_STREAM_IN_SLICE) {
		st = name_table_get(&rp->funcs, or_unnamed(smp->slice_name));
		if (!st)
			return -ENOMEM;
		st->self_samples++;
	}
	if (s->n_frames == 0)
		return 0;
	st = name_table_get(&rp->leaves, s->frames[s->n_frames - 1]);
	if (!st)
		return -ENOMEM;
	st->count++;
	return 0;
}

static int report_process(void *ctx, size_t index, int32_t pid, uint32_t generation,
			  const char *name, bool is_new)
{
	(void)index;
	(void)is_new;
	return report_procs_named(&((struct report *)ctx)->procs, pid, generation, name);
}

static int report_func_total(void *ctx, const struct trace_func_total *t)
{
	struct report *rp = ctx;

	if (report_procs_total(&rp->procs, t))
		return -ENOMEM;

	if (t->tid != 0 && rp->opt->threads) {
		if (!report_grow((void **)&rp->thread_totals, &rp->cap_thread_totals,
				 rp->n_thread_totals, sizeof(*t)))
			return -ENOMEM;
		rp->thread_totals[rp->n_thread_totals++] = *t;
	}
	if (t->tid != 0)
		return 0;
	if (!report_grow((void **)&rp->totals, &rp->cap_totals, rp->n_totals, sizeof(*t)))
		return -ENOMEM;
	rp->totals[rp->n_totals++] = *t;
	return 0;
}

static int report_sched(void *ctx, const struct trace_sched_event *e)
{
	return report_sched_event(&((struct report *)ctx)->sched, e);
}

static int report_problem(void *ctx, const char *line)
{
	struct report *rp = ctx;

	if (rp->n_problems < REPORT_PROBLEMS_SHOWN &&
	    !(rp->problems[rp->n_problems] = strdup(line)))
		return -ENOMEM;
	rp->n_problems++;
	return 0;
}

/* ---- the human report --------------------------------------------------------------- */

static int desc(uint64_t x, uint64_t y)
{
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The --sort key of a row of the fallback table (no exact totals: no p99, sorted by total). */
static uint64_t name_key(const struct name_stat *n, enum profctl_report_sort sort)
{
	switch (sort) {
	case PROFCTL_SORT_CALLS:
		return n->count;
	case PROFCTL_SORT_SELF:
		return n->self_samples;
	case PROFCTL_SORT_AVG:
		return n->count ? (uint64_t)n->total_ns / n->count : 0;
	default:
		return (uint64_t)n->total_ns;
	}
}

static int names_by_key(const void *a, const void *b, void *sort)
{
	return desc(name_key(a, *(enum profctl_report_sort *)sort),
		    name_key(b, *(enum profctl_report_sort *)sort));
}

static uint64_t total_key(const struct trace_func_total *t, enum profctl_report_sort sort)
{
	switch (sort) {
	case PROFCTL_SORT_CALLS:
		return t->calls;
	case PROFCTL_SORT_SELF:
		return t->self_ns;
	case PROFCTL_SORT_AVG:
		return t->avg_ns;
	case PROFCTL_SORT_P99:
		return t->p99_ns;
	default:
		return t->total_ns;
	}
}

static int totals_by_key(const void *a, const void *b, void *sort)
{
	return desc(total_key(a, *(enum profctl_report_sort *)sort),
		    total_key(b, *(enum profctl_report_sort *)sort));
}

/* --threads: by thread, then by the key within each thread. */
static int threads_by_key(const void *a, const void *b, void *sort)
{
	const struct trace_func_total *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return totals_by_key(a, b, sort);
}

/* --funcs: whether name's rows are shown (the trace has no module: MODULE:GLOB never matches). */
static bool report_selects(const struct report *rp, const char *name)
{
	return !rp->opt->funcs || func_filter_match(rp->opt->funcs, NULL, or_unnamed(name));
}

/* --top: whether one more row may be printed after shown of them. */
static bool report_room(const struct report *rp, size_t shown)
{
	return !rp->opt->top || shown < rp->opt->top;
}

static int by_count_desc(const void *a, const void *b)
{
	const struct name_stat *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static void print_ns(FILE *out, uint64_t ns)
{
	if (ns < 10000)
		fprintf(out, " %8" PRIu64 "ns", ns);
	else if (ns < 10000000)
		fprintf(out, " %8.1fus", (double)ns / 1e3);
	else if (ns < 10000000000ull)
		fprintf(out, " %8.1fms", (double)ns / 1e6);
	else
		fprintf(out, " %8.2fs ", (double)ns / 1e9);
}

/* Off-CPU time of a function's recorded calls, and of it runnable ('-': no scheduler data). */
static void print_off_cpu(FILE *out, const struct trace_func_total *t)
{
	if (!t->sched_calls) {
		fprintf(out, " %10s %10s", "-", "-");
		return;
	}
	print_ns(out, t->off_cpu_ns);
	print_ns(out, t->runnable_ns);
	if (t->sched_calls < t->returned)
		fputc('*', out);
}

/*
 * The exact figures profd wrote (every call, on the timeline or not), over
 * all threads; the sampled self time beside them. 0 when the trace has none.
 */
static int report_exact_functions(struct report *rp)
{
	FILE *out = rp->out;
	bool per_process = rp->procs.n > 1; /* a row per function and process: the pid says which */
	bool sched = false, values = false;

	if (!rp->n_totals)
		return 0;
	for (size_t i = 0; i < rp->n_totals; i++) {
		sched |= rp->totals[i].sched_calls > 0;
		values |= rp->totals[i].values_dropped > 0;
	}
	qsort_r(rp->totals, rp->n_totals, sizeof(*rp->totals), totals_by_key,
		(void *)&rp->opt->sort);
	fprintf(out, "\ninstrumented functions (%zu called; exact, every call; p50/p99 estimated "
		"within 12 %%; self samples: CPU samples taken while it was the innermost call%s%s):\n"
		"%12s %10s %10s %10s %10s %10s %10s %12s%s%s %12s%s  %s\n", rp->n_totals,
		sched ? "; off-CPU: switched out inside its recorded calls, of it runnable, "
			"* when some calls were not recorded" : "",
		values ? "; no values: recorded without their --args/--retval values, for want "
			 "of buffer room" : "",
		"calls", "total", "self", "avg", "p50~", "p99~", "max", "off timeline",
		values ? "    no values" : "", sched ? "    off-CPU   runnable" : "", "self samples",
		per_process ? "        pid" : "", "name");
	for (size_t i = 0, shown = 0; i < rp->n_totals && report_room(rp, shown); i++) {
		const struct trace_func_total *t = &rp->totals[i];
		const struct name_stat *st = t->name ? name_table_find(&rp->funcs, t->name) : NULL;

		if (!report_selects(rp, t->name))
			continue;
		shown++;
		fprintf(out, "%12" PRIu64, t->calls);
		print_ns(out, t->total_ns);
		print_ns(out, t->self_ns);
		print_ns(out, t->avg_ns);
		print_ns(out, t->p50_ns);
		print_ns(out, t->p99_ns);
		print_ns(out, t->max_ns);
		fprintf(out, " %12" PRIu64, t->not_on_timeline);
		if (values)
			fprintf(out, " %12" PRIu64, t->values_dropped);
		if (sched)
			print_off_cpu(out, t);
		fprintf(out, " %12" PRIu64, st ? st->self_samples : 0);
		if (per_process) {
			char pid[REPORT_PID_LEN];

			fprintf(out, " %10s", report_pid(pid, t->pid, t->generation));
		}
		fprintf(out, "  %s\n", or_unnamed(t->name));
	}
	return 1;
}

static void report_functions(struct report *rp)
{
	struct name_table *t = &rp->funcs;

	if (report_exact_functions(rp))
		return;
	/* the table's order changes: its index is of no use after this */
	if (t->n)
		qsort_r(t->items, t->n, sizeof(*t->items), names_by_key, (void *)&rp->opt->sort);
	fprintf(rp->out, "\ninstrumented functions (%zu; self samples: CPU samples taken while it "
		"was the innermost instrumented call, profiling overhead apart):\n"
		"%12s %14s %12s %12s  %s\n", t->n, "calls", "total ms", "avg us", "self samples",
		"name");
	for (size_t i = 0, shown = 0; i < t->n && report_room(rp, shown); i++) {
		if (!report_selects(rp, t->items[i].name))
			continue;
		shown++;
		fprintf(rp->out, "%12" PRIu64 " %14.3f %12.3f %12" PRIu64 "  %s\n",
			t->items[i].count, t->items[i].total_ns / 1e6,
			t->items[i].total_ns / 1e3 / (double)t->items[i].count,
			t->items[i].self_samples, t->items[i].name);
	}
}

/* --percentiles: the exact aggregates' distribution per function, in --sort order. */
static void report_percentiles(struct report *rp)
{
	FILE *out = rp->out;

	if (!rp->n_totals) {
		fprintf(out, "\npercentiles: the trace has no exact totals (profd writes them at the end)\n");
		return;
	}
	fprintf(out, "\npercentiles (from profd's exact aggregates over every call; p50/p90/p99 "
		"estimated within 12 %%):\n%12s %10s %10s %10s %10s %10s  %s\n", "calls", "avg",
		"p50~", "p90~", "p99~", "max", "name");
	for (size_t i = 0, shown = 0; i < rp->n_totals && report_room(rp, shown); i++) {
		const struct trace_func_total *t = &rp->totals[i];

		if (!report_selects(rp, t->name))
			continue;
		shown++;
		fprintf(out, "%12" PRIu64, t->calls);
		print_ns(out, t->avg_ns);
		print_ns(out, t->p50_ns);
		print_ns(out, t->p90_ns);
		print_ns(out, t->p99_ns);
		print_ns(out, t->max_ns);
		fprintf(out, "  %s\n", or_unnamed(t->name));
	}
}

/* --threads: each thread's exact rows (--top of them per thread), in --sort order. */
static void report_threads(struct report *rp)
{
	FILE *out = rp->out;
	size_t shown = 0;

	if (rp->n_thread_totals)
		qsort_r(rp->thread_totals, rp->n_thread_totals, sizeof(*rp->thread_totals),
			threads_by_key, (void *)&rp->opt->sort);
	fprintf(out, "\nper thread (exact, every call; %zu rows):\n%8s %12s %10s %10s %10s %10s  %s\n",
		rp->n_thread_totals, "tid", "calls", "total", "self", "avg", "p99~", "name");
	for (size_t i = 0; i < rp->n_thread_totals; i++) {
		const struct trace_func_total *t = &rp->thread_totals[i];

		if (i && t->tid != rp->thread_totals[i - 1].tid)
			shown = 0;
		if (!report_selects(rp, t->name) || !report_room(rp, shown))
			continue;
		shown++;
		fprintf(out, "%8u %12" PRIu64, t->tid, t->calls);
		print_ns(out, t->total_ns);
		print_ns(out, t->self_ns);
		print_ns(out, t->avg_ns);
		print_ns(out, t->p99_ns);
		fprintf(out, "  %s\n", or_unnamed(t->name));
	}
}

/* By leaf frame, over the program's own samples (profiling overhead apart). */
static void report_samples(struct report *rp, const struct trace_stream_stats *st)
{
	size_t program = rp->n_samples - rp->overhead.samples, shown;
	struct name_table *t = &rp->leaves;

	if (t->n)
		qsort(t->items, t->n, sizeof(*t->items), by_count_desc);
	shown = rp->opt->top ? rp->opt->top : 15;
	fprintf(rp->out, "\nhottest sampled functions (the program's own: %zu of %zu samples, "
		"%" PRIu64 " lost, %" PRIu64 " not unwound):\n", program, rp->n_samples,
		st->samples_lost, st->samples_skipped);
	for (size_t i = 0, n = 0; i < t->n && n < shown; i++) {
		if (!report_selects(rp, t->items[i].name))
			continue;
		n++;
		fprintf(rp->out, "%8" PRIu64 " %5.1f%%  %s\n", t->items[i].count,
			100.0 * (double)t->items[i].count / (double)program, t->items[i].name);
	}
	if (st->samples_too_late)
		fprintf(rp->out, "(%" PRIu64 " samples came too long after their thread's calls "
			"to tell the innermost one: in no function's self samples)\n",
			st->samples_too_late);
}

static void report_human(struct report *rp, const char *path, const struct trace_stream *ts)
{
	const struct trace_stream_stats *st = trace_stream_get_stats(ts);
	FILE *out = rp->out;
	size_t n_threads;
	const struct trace_thread *th = trace_stream_threads(ts, &n_threads);
	char cut[TRACE_STREAM_CUT_LINE];

	fprintf(out, "%s: %zu packets, %zu threads, %zu slices, %zu samples\n", path,
		st->n_packets, n_threads, rp->n_slices, rp->n_samples);
	if (!st->ended)
		fprintf(out, "%s\n", trace_stream_cut_line(st, cut, sizeof(cut)));
	if (rp->opt->callers) {
		report_callers_print(&rp->callers, out, rp->opt->top);
		return;
	}
	fprintf(out, "\nthreads:\n");
	for (size_t i = 0; i < n_threads; i++)
		fprintf(out, "  %d/%d %s\n", th[i].pid, th[i].tid, th[i].name ? th[i].name : "");
	report_procs_print(&rp->procs, out);
	report_functions(rp);
	if (rp->opt->percentiles)
		report_percentiles(rp);
	if (rp->opt->threads)
		report_threads(rp);
	rp->overhead.of_samples = rp->n_samples;
	rp->overhead.freq_hz = st->sample_freq;
	profctl_print_overhead(out, "\n", &rp->overhead);
	report_samples(rp, st);
	report_sched_print(&rp->sched, ts);
	if (rp->n_problems) {
		fprintf(out, "\nproblems (%" PRIu64 "):\n", rp->n_problems);
		for (size_t i = 0; i < rp->n_problems && i < REPORT_PROBLEMS_SHOWN; i++)
			fprintf(out, "  %s\n", rp->problems[i]);
	}
}

static const struct trace_stream_ops report_ops = {
	.process = report_process,
	.slice = report_slice,
	.sample = report_sample,
	.func_total = report_func_total,
	.problem = report_problem,
	.sched = report_sched,
};

/* ---- --dump: one line per item, as it comes ----------------------------------------- */

struct dump {
	FILE *out;
	struct report_sched sched;
};

static FILE *dump_out(void *ctx)
{
	return ((struct dump *)ctx)->out;
}

/*
 * A reused pid's later processes (trace_reader.h, generation) show their
 * pid, and their threads' tids, as ID.GENERATION: the lines keep their
 * fields, and the first process of a pid (nearly all) shows as before.
 */
static int dump_process(void *ctx, size_t index, int32_t pid, uint32_t generation,
			const char *name, bool is_new)
{
	char id[REPORT_PID_LEN];

	(void)index;
	(void)is_new;
	fprintf(dump_out(ctx), "process %s %s\n", report_pid(id, pid, generation), name ? name : "");
	return 0;
}

static int dump_process_label(void *ctx, size_t index, int32_t pid, uint32_t generation,
			      const char *label)
{
	char id[REPORT_PID_LEN];

	(void)index;
	fprintf(dump_out(ctx), "label %s %s\n", report_pid(id, pid, generation), label ? label : "");
	return 0;
}

static int dump_thread(void *ctx, size_t index, const struct trace_thread *t, bool is_new)
{
	(void)index;
	(void)is_new;
	char pid[REPORT_PID_LEN], tid[REPORT_PID_LEN];

	fprintf(dump_out(ctx), "thread %s %s %s\n", report_pid(pid, t->pid, t->generation),
		report_pid(tid, t->tid, t->generation), t->name ? t->name : "");
	return 0;
}

/*
 * "args TID TS NAME=VALUE ...": a slice's --args/--retval values on a line
 * of their own after it (slice lines keep their fields). Strings in double
 * quotes with space, quote, backslash and other bytes outside the printable
 * ASCII escaped as \xNN: one field per value whatever it holds.
 */
static void dump_values(FILE *out, const struct trace_stream_slice *s)
{
	const char *p = s->args.values;
	struct trace_value v;

	fprintf(out, "args %d %" PRIu64, s->tid, s->ts);
	while (trace_values_next(&p, &v)) {
		fprintf(out, " %.*s=", (int)v.name_len, v.name);
		if (v.type != 's') {
			fprintf(out, "%.*s", (int)v.value_len, v.value);
			continue;
		}
		fputc('"', out);
		for (size_t i = 0; i < v.value_len; i++) {
			unsigned char c = (unsigned char)v.value[i];

			if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\')
				fprintf(out, "\\x%02x", c);
			else
				fputc(c, out);
		}
		fputc('"', out);
	}
	fputc('\n', out);
}

static int dump_slice(void *ctx, const struct trace_stream_slice *s)
{
	char tid[REPORT_PID_LEN];

	fprintf(dump_out(ctx), "slice %s %u %s %" PRIu64 " %" PRId64 " %" PRId64,
		report_pid(tid, s->tid, s->generation), s->depth, or_unnamed(s->name), s->ts, s->dur,
		s->parent);
	if (s->self_samples >= 0) /* samples taken while it was the innermost call */
		fprintf(dump_out(ctx), " %" PRId64, s->self_samples);
	fputc('\n', dump_out(ctx));
	if (s->args.values)
		dump_values(dump_out(ctx), s);
	if (s->args.off_cpu_ns >= 0) /* switched out during it: its on/off-CPU split */
		fprintf(dump_out(ctx), "offcpu %s %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 "\n",
			tid, s->ts, s->args.on_cpu_ns, s->args.off_cpu_ns, s->args.runnable_ns);
	return 0;
}

static int dump_sample(void *ctx, const struct trace_stream_sample *smp)
{
	const struct trace_sample *s = &smp->s;

	char tid[REPORT_PID_LEN];

	fprintf(dump_out(ctx), "sample %s %u ", report_pid(tid, s->tid, s->generation), s->cpu);
	for (size_t k = 0; k < s->n_frames; k++)
		fprintf(dump_out(ctx), "%s%s", k ? ";" : "", s->frames[k]);
	fputc('\n', dump_out(ctx));
	return 0;
}

static int dump_func_total(void *ctx, const struct trace_func_total *t)
{
	fprintf(dump_out(ctx), "total %u %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		" %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
		t->tid, or_unnamed(t->name), t->calls, t->returned, t->not_on_timeline, t->total_ns,
		t->self_ns, t->p50_ns, t->p99_ns, t->max_ns, t->sched_calls, t->off_cpu_ns,
		t->runnable_ns, t->values_dropped);
	return 0;
}

static int dump_counter(void *ctx, const struct trace_counter_value *v, size_t order)
{
	(void)order;
	fprintf(dump_out(ctx), "counter %s %" PRIu64 " %.0f\n", v->track_name ? v->track_name : "(null)",
		v->ts, v->value);
	return 0;
}

static int dump_problem(void *ctx, const char *line)
{
	fprintf(dump_out(ctx), "problem %s\n", line);
	return 0;
}

static int dump_sched(void *ctx, const struct trace_sched_event *e)
{
	return report_sched_event(&((struct dump *)ctx)->sched, e);
}

static const struct trace_stream_ops dump_ops = {
	.process = dump_process,
	.process_label = dump_process_label,
	.thread = dump_thread,
	.slice = dump_slice,
	.sample = dump_sample,
	.counter = dump_counter,
	.func_total = dump_func_total,
	.problem = dump_problem,
	.sched = dump_sched,
};

/* ---- entry points ---------------------------------------------------------------------- */

static void report_free(struct report *rp)
{
	for (size_t i = 0; i < rp->n_problems && i < REPORT_PROBLEMS_SHOWN; i++)
		free(rp->problems[i]);
	free(rp->totals);
	free(rp->thread_totals);
	report_callers_free(&rp->callers);
	report_sched_free(&rp->sched);
	report_procs_free(&rp->procs);
	name_table_free(&rp->funcs);
	name_table_free(&rp->leaves);
}

int profctl_report(const char *path, FILE *out, const struct profctl_report_opts *o)
{
	struct trace_stream_opts so = {
		.window = o->window,
		.reorder = REPORT_REORDER,
		.attribute_samples = !o->dump, /* self samples per innermost call */
	};
	struct report rp = { .out = out, .opt = o };
	struct dump dump = { .out = out };
	struct trace_stream *ts;
	int err;

	report_callers_init(&rp.callers, o->callers);
	if (report_sched_init(o->dump ? &dump.sched : &rp.sched, out, o->dump))
		return -ENOMEM;
	ts = trace_stream_new(o->dump ? &dump_ops : &report_ops, o->dump ? (void *)&dump : &rp, &so);
	if (!ts) {
		report_sched_free(o->dump ? &dump.sched : &rp.sched);
		return -ENOMEM;
	}
	err = trace_stream_read_file(ts, path);
	if (!err && !o->dump)
		report_human(&rp, path, ts);
	if (!err && o->dump && !trace_stream_get_stats(ts)->ended)
		fprintf(out, "cut %" PRIu64 "\n", trace_stream_get_stats(ts)->bytes);
	if (o->stats)
		*o->stats = *trace_stream_get_stats(ts);
	trace_stream_free(ts);
	report_sched_free(&dump.sched);
	report_free(&rp);
	return err;
}

int cmd_report(int argc, char **argv)
{
	struct profctl_report_opts o = { 0 };
	struct func_filter *filter = NULL;
	const char *path = NULL;
	int err;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		fputs(profctl_report_usage, stdout);
		return 0;
	}
	if (profctl_report_parse(argc, argv, &o, &path, &filter)) {
		func_filter_free(filter);
		return 2;
	}
	err = profctl_report(path, stdout, &o);
	func_filter_free(filter);
	if (err) {
		fflush(stdout);
		fprintf(stderr, "profctl: cannot read trace %s: %s\n", path,
			err < 0 ? strerror(-err) : "stopped");
		return 1;
	}
	return 0;
}
