// SPDX-License-Identifier: MIT
/*
 * `profctl report`: reads a trace back (viewer-export/trace_reader.c) and
 * prints per-function call counts and times, threads, the hottest sampled
 * functions and any rule the trace breaks. `--dump` prints one line per
 * thread, slice, sample and counter value for scripts and tests.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/profctl.h"
#include "viewer-export/trace_reader.h"

struct name_stat {
	const char *name;
	uint64_t count;
	int64_t total_ns;
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
	qsort(t.items, t.n, sizeof(*t.items), by_total_desc);
	printf("\ninstrumented functions (%zu):\n%12s %14s %12s  %s\n", t.n, "calls", "total ms",
	       "avg us", "name");
	for (size_t i = 0; i < t.n; i++)
		printf("%12" PRIu64 " %14.3f %12.3f  %s\n", t.items[i].count,
		       t.items[i].total_ns / 1e6, t.items[i].total_ns / 1e3 / (double)t.items[i].count,
		       t.items[i].name);
	free(t.items);
}

static void report_samples(const struct trace_model *m)
{
	struct name_table t = { 0 };
	size_t shown;

	for (size_t i = 0; i < m->n_samples; i++) {
		const struct trace_sample *s = &m->samples[i];
		struct name_stat *st;

		if (s->n_frames == 0)
			continue;
		st = name_table_get(&t, s->frames[s->n_frames - 1]);
		if (st)
			st->count++;
	}
	qsort(t.items, t.n, sizeof(*t.items), by_count_desc);
	shown = t.n < 15 ? t.n : 15;
	printf("\nhottest sampled functions (%zu samples, %" PRIu64 " lost):\n", m->n_samples,
	       m->samples_lost);
	for (size_t i = 0; i < shown; i++)
		printf("%8" PRIu64 " %5.1f%%  %s\n", t.items[i].count,
		       100.0 * (double)t.items[i].count / (double)m->n_samples, t.items[i].name);
	free(t.items);
}

static void report_human(const char *path, const struct trace_model *m)
{
	printf("%s: %zu packets, %zu threads, %zu slices, %zu samples\n", path, m->n_packets,
	       m->n_threads, m->n_slices, m->n_samples);
	printf("\nthreads:\n");
	for (size_t i = 0; i < m->n_threads; i++)
		printf("  %d/%d %s\n", m->threads[i].pid, m->threads[i].tid,
		       m->threads[i].name ? m->threads[i].name : "");
	report_functions(m);
	report_samples(m);
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

		printf("slice %d %u %s %" PRIu64 " %" PRId64 " %" PRId64 "\n", s->tid, s->depth,
		       s->name ? s->name : "?", s->ts, s->dur, s->parent);
	}
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct trace_sample *s = &m->samples[i];

		printf("sample %d %u ", s->tid, s->cpu);
		for (size_t k = 0; k < s->n_frames; k++)
			printf("%s%s", k ? ";" : "", s->frames[k]);
		printf("\n");
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
