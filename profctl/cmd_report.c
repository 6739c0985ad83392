// SPDX-License-Identifier: MIT
/*
 * `profctl report`: reads a trace back (viewer-export/trace_reader.c) and
 * prints per-function call counts and times, threads, the profiler's own
 * cost (profiling overhead), the hottest sampled functions of the program
 * and any rule the trace breaks. `--dump` prints one line per thread, slice,
 * sample, function total and counter value for scripts and tests
 * (`total TID NAME CALLS RETURNED OFF_TIMELINE TOTAL_NS SELF_NS P50 P99 MAX`).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/profctl.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader.h"

struct name_stat {
	const char *name;
	uint64_t count;
	int64_t total_ns;
	uint64_t self_samples; /* CPU samples taken while this was the innermost call */
};

struct name_table {
	struct name_stat *items;
	size_t n, cap;
};

static struct name_stat *name_table_get(struct name_table *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->items[i].name, name) == 0)
			return &t->items[i];
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct name_stat *n = realloc(t->items, ncap * sizeof(*n));

		if (!n)
			return NULL;
		t->items = n;
		t->cap = ncap;
	}
	t->items[t->n] = (struct name_stat){ .name = name };
	return &t->items[t->n++];
}

static int by_total_desc(const void *a, const void *b)
{
	const struct name_stat *x = a, *y = b;

	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static int by_count_desc(const void *a, const void *b)
{
	const struct name_stat *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

/* Slice indexes ordered by (tid, ts): the slices come sorted by ts. */
static int by_thread_then_index(const void *a, const void *b, void *ctx)
{
	const struct trace_model *m = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int32_t tx = m->slices[x].tid, ty = m->slices[y].tid;

	if (tx != ty)
		return tx < ty ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The innermost slice of thread tid open at ts, or -1. */
static int64_t innermost_slice(const struct trace_model *m, const size_t *idx, size_t n,
			       int32_t tid, uint64_t ts)
{
	size_t lo = 0, hi = n;
	int64_t c;

	while (lo < hi) { /* last slice of tid starting at or before ts */
		size_t mid = lo + (hi - lo) / 2;
		const struct trace_slice *sl = &m->slices[idx[mid]];

		if (sl->tid < tid || (sl->tid == tid && sl->ts <= ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || m->slices[idx[lo - 1]].tid != tid)
		return -1;
	for (c = (int64_t)idx[lo - 1]; c >= 0; c = m->slices[c].parent)
		if (m->slices[c].dur < 0 || m->slices[c].ts + (uint64_t)m->slices[c].dur >= ts)
			return c;
	return -1;
}

static void count_self_samples(const struct trace_model *m, struct name_table *t)
{
	size_t *idx = malloc((m->n_slices + 1) * sizeof(*idx));

	if (!idx)
		return;
	for (size_t i = 0; i < m->n_slices; i++)
		idx[i] = i;
	qsort_r(idx, m->n_slices, sizeof(*idx), by_thread_then_index, (void *)m);
	for (size_t i = 0; i < m->n_samples; i++) {
		int64_t c = innermost_slice(m, idx, m->n_slices, m->samples[i].tid, m->samples[i].ts);
		struct name_stat *st;

		if (trace_sample_overhead(&m->samples[i]))
			continue; /* the profiler's cost: no call's self time (as profd counts) */
		if (c >= 0 && (st = name_table_get(t, m->slices[c].name ? m->slices[c].name : "?")))
			st->self_samples++;
	}
	free(idx);
}

static int totals_by_total_desc(const void *a, const void *b)
{
	const struct trace_func_total *x = *(const struct trace_func_total *const *)a;
	const struct trace_func_total *y = *(const struct trace_func_total *const *)b;

	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static void print_ns(uint64_t ns)
{
	if (ns < 10000)
		printf(" %8" PRIu64 "ns", ns);
	else if (ns < 10000000)
		printf(" %8.1fus", (double)ns / 1e3);
	else if (ns < 10000000000ull)
		printf(" %8.1fms", (double)ns / 1e6);
	else
		printf(" %8.2fs ", (double)ns / 1e9);
}

/*
 * The exact figures profd wrote (every call, on the timeline or not), over
 * all threads; the sampled self time beside them. 0 when the trace has none.
 */
static int report_exact_functions(const struct trace_model *m, struct name_table *samples)
{
	const struct trace_func_total **rows = calloc(m->n_func_totals + 1, sizeof(*rows));
	size_t n = 0;

	if (!rows)
		return 0;
	for (size_t i = 0; i < m->n_func_totals; i++)
		if (m->func_totals[i].tid == 0)
			rows[n++] = &m->func_totals[i];
	qsort(rows, n, sizeof(*rows), totals_by_total_desc);
	printf("\ninstrumented functions (%zu called; exact, every call; p50/p99 estimated within "
	       "12 %%; self samples: CPU samples taken while it was the innermost call):\n"
	       "%12s %10s %10s %10s %10s %10s %10s %12s %12s  %s\n", n, "calls", "total", "self",
	       "avg", "p50~", "p99~", "max", "off timeline", "self samples", "name");
	for (size_t i = 0; i < n; i++) {
		const struct name_stat *st = NULL;

		for (size_t k = 0; k < samples->n; k++)
			if (rows[i]->name && strcmp(samples->items[k].name, rows[i]->name) == 0)
				st = &samples->items[k];
		printf("%12" PRIu64, rows[i]->calls);
		print_ns(rows[i]->total_ns);
		print_ns(rows[i]->self_ns);
		print_ns(rows[i]->avg_ns);
		print_ns(rows[i]->p50_ns);
		print_ns(rows[i]->p99_ns);
		print_ns(rows[i]->max_ns);
		printf(" %12" PRIu64 " %12" PRIu64 "  %s\n", rows[i]->not_on_timeline,
		       st ? st->self_samples : 0, rows[i]->name ? rows[i]->name : "?");
	}
	free(rows);
	return n > 0;
}

static void report_functions(const struct trace_model *m)
{
	struct name_table t = { 0 };

	for (size_t i = 0; i < m->n_slices; i++) {
		struct name_stat *st = name_table_get(&t, m->slices[i].name ? m->slices[i].name : "?");

		if (!st)
			break;
		st->count++;
		if (m->slices[i].dur > 0)
			st->total_ns += m->slices[i].dur;
	}
	count_self_samples(m, &t);
	if (report_exact_functions(m, &t)) {
		free(t.items);
		return;
	}
	qsort(t.items, t.n, sizeof(*t.items), by_total_desc);
	printf("\ninstrumented functions (%zu; self samples: CPU samples taken while it was the "
	       "innermost instrumented call, profiling overhead apart):\n%12s %14s %12s %12s  %s\n",
	       t.n, "calls", "total ms", "avg us", "self samples", "name");
	for (size_t i = 0; i < t.n; i++)
		printf("%12" PRIu64 " %14.3f %12.3f %12" PRIu64 "  %s\n", t.items[i].count,
		       t.items[i].total_ns / 1e6, t.items[i].total_ns / 1e3 / (double)t.items[i].count,
		       t.items[i].self_samples, t.items[i].name);
	free(t.items);
}

/* Samples that are the profiler's own cost, as the summary of profctl run prints them. */
static size_t report_overhead(const struct trace_model *m)
{
	struct profctl_overhead o = { .of_samples = m->n_samples, .freq_hz = m->sample_freq };

	for (size_t i = 0; i < m->n_samples; i++) {
		const char *kind = trace_sample_overhead(&m->samples[i]);

		if (!kind)
			continue;
		o.samples++;
		o.hooks += strcmp(kind, PERFETTO_OVERHEAD_HOOKS) == 0;
		o.flusher += strcmp(kind, PERFETTO_OVERHEAD_FLUSHER) == 0;
		o.agent += strcmp(kind, PERFETTO_OVERHEAD_AGENT) == 0;
	}
	profctl_print_overhead(stdout, "\n", &o);
	return o.samples;
}

/* By leaf frame, over the program's own samples (profiling overhead apart). */
static void report_samples(const struct trace_model *m, size_t overhead)
{
	size_t program = m->n_samples - overhead, shown;
	struct name_table t = { 0 };

	for (size_t i = 0; i < m->n_samples; i++) {
		const struct trace_sample *s = &m->samples[i];
		struct name_stat *st;

		if (s->n_frames == 0 || trace_sample_overhead(s))
			continue;
		st = name_table_get(&t, s->frames[s->n_frames - 1]);
		if (st)
			st->count++;
	}
	qsort(t.items, t.n, sizeof(*t.items), by_count_desc);
	shown = t.n < 15 ? t.n : 15;
	printf("\nhottest sampled functions (the program's own: %zu of %zu samples, %" PRIu64
	       " lost, %" PRIu64 " not unwound):\n", program, m->n_samples, m->samples_lost,
	       m->samples_skipped);
	for (size_t i = 0; i < shown; i++)
		printf("%8" PRIu64 " %5.1f%%  %s\n", t.items[i].count,
		       100.0 * (double)t.items[i].count / (double)program, t.items[i].name);
	free(t.items);
}

static void report_human(const char *path, const struct trace_model *m)
{
	size_t overhead;

	printf("%s: %zu packets, %zu threads, %zu slices, %zu samples\n", path, m->n_packets,
	       m->n_threads, m->n_slices, m->n_samples);
	printf("\nthreads:\n");
	for (size_t i = 0; i < m->n_threads; i++)
		printf("  %d/%d %s\n", m->threads[i].pid, m->threads[i].tid,
		       m->threads[i].name ? m->threads[i].name : "");
	report_functions(m);
	overhead = report_overhead(m);
	report_samples(m, overhead);
	if (m->n_problems) {
		printf("\nproblems (%zu):\n", m->n_problems);
		for (size_t i = 0; i < m->n_problems && i < 20; i++)
			printf("  %s\n", m->problems[i]);
	}
}

static void report_dump(const struct trace_model *m)
{
	for (size_t i = 0; i < m->n_processes; i++)
		printf("process %d %s\n", m->process_pids[i],
		       m->process_names[i] ? m->process_names[i] : "");
	for (size_t i = 0; i < m->n_threads; i++)
		printf("thread %d %d %s\n", m->threads[i].pid, m->threads[i].tid,
		       m->threads[i].name ? m->threads[i].name : "");
	for (size_t i = 0; i < m->n_slices; i++) {
		const struct trace_slice *s = &m->slices[i];

		printf("slice %d %u %s %" PRIu64 " %" PRId64 " %" PRId64, s->tid, s->depth,
		       s->name ? s->name : "?", s->ts, s->dur, s->parent);
		if (s->self_samples >= 0) /* samples taken while it was the innermost call */
			printf(" %" PRId64, s->self_samples);
		printf("\n");
	}
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct trace_sample *s = &m->samples[i];

		printf("sample %d %u ", s->tid, s->cpu);
		for (size_t k = 0; k < s->n_frames; k++)
			printf("%s%s", k ? ";" : "", s->frames[k]);
		printf("\n");
	}
	for (size_t i = 0; i < m->n_func_totals; i++) {
		const struct trace_func_total *t = &m->func_totals[i];

		printf("total %u %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		       " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", t->tid, t->name ? t->name : "?",
		       t->calls, t->returned, t->not_on_timeline, t->total_ns, t->self_ns,
		       t->p50_ns, t->p99_ns, t->max_ns);
	}
	for (size_t i = 0; i < m->n_counter_values; i++)
		printf("counter %s %" PRIu64 " %.0f\n", m->counter_values[i].track_name,
		       m->counter_values[i].ts, m->counter_values[i].value);
	for (size_t i = 0; i < m->n_problems; i++)
		printf("problem %s\n", m->problems[i]);
}

int cmd_report(int argc, char **argv)
{
	struct trace_model *m = NULL;
	const char *path = NULL;
	int dump = 0, err;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dump") == 0)
			dump = 1;
		else if (!path)
			path = argv[i];
	}
	if (!path) {
		fprintf(stderr, "usage: profctl report [--dump] FILE\n");
		return 2;
	}
	err = trace_model_load(path, &m);
	if (err) {
		fprintf(stderr, "profctl: cannot read trace %s: %s\n", path, strerror(-err));
		return 1;
	}
	if (dump)
		report_dump(m);
	else
		report_human(path, m);
	trace_model_free(m);
	return 0;
}
