/* SPDX-License-Identifier: MIT */
/*
 * trace_model_load: the whole trace in tables, built on the streaming reader
 * (trace_stream.h) with an unbounded reorder window, so slices are matched
 * after one sort of every event by (ts, file order), as the importer does.
 * Collects what the stream delivers, then sorts samples and counter values
 * the same way; keeps at most TRD_MAX_PROBLEMS problem lines. Memory grows
 * with the trace: readers of large traces use the stream itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader_internal.h"

#define TRD_MAX_PROBLEMS 4096

/* The payload first: trd_sorted_copy copies it out. */
struct trd_model_sample {
	struct trace_sample s;
	size_t order;
};

struct trd_model_counter {
	struct trace_counter_value v;
	size_t order;
};

struct trd_model {
	struct trace_model *m;
	struct trd_model_sample *samples;
	struct trd_model_counter *counters;
	size_t n_samples, n_counters;
	size_t cap_samples, cap_counters, cap_slices, cap_totals;
	size_t cap_problems, problems_dropped;
};

/* Grows *arr (elements of `size` bytes) to hold n + 1; -ENOMEM. */
static int trd_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t new_cap;
	void *p;

	if (n < *cap)
		return 0;
	new_cap = *cap ? *cap * 2 : 16;
	while (new_cap <= n)
		new_cap *= 2;
	if (new_cap > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*arr, new_cap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = new_cap;
	return 0;
}

/* ---- what the stream delivers --------------------------------------------------- */

/* Unbounded window: slices open in (ts, file order), so a slice's id is its index. */
static int trd_model_slice(void *ctx, const struct trace_stream_slice *s)
{
	struct trd_model *b = ctx;
	struct trace_model *m = b->m;

	if (trd_grow((void **)&m->slices, &b->cap_slices, s->id, sizeof(*m->slices)) < 0)
		return -ENOMEM;
	m->slices[s->id] = (struct trace_slice){
		.pid = s->pid,
		.tid = s->tid,
		.ts = s->ts,
		.dur = s->dur,
		.depth = s->depth,
		.parent = s->parent,
		.name = (char *)s->name,
		.self_samples = s->self_samples,
		.generation = s->generation,
	};
	if (s->id >= m->n_slices)
		m->n_slices = s->id + 1;
	return 0;
}

static int trd_model_sample(void *ctx, const struct trace_stream_sample *s)
{
	struct trd_model *b = ctx;

	if (trd_grow((void **)&b->samples, &b->cap_samples, b->n_samples, sizeof(*b->samples)) < 0)
		return -ENOMEM;
	b->samples[b->n_samples++] = (struct trd_model_sample){ s->s, s->order };
	return 0;
}

static int trd_model_counter(void *ctx, const struct trace_counter_value *v, size_t order)
{
	struct trd_model *b = ctx;

	if (trd_grow((void **)&b->counters, &b->cap_counters, b->n_counters,
		     sizeof(*b->counters)) < 0)
		return -ENOMEM;
	b->counters[b->n_counters++] = (struct trd_model_counter){ *v, order };
	return 0;
}

static int trd_model_func_total(void *ctx, const struct trace_func_total *t)
{
	struct trd_model *b = ctx;
	struct trace_model *m = b->m;

	if (trd_grow((void **)&m->func_totals, &b->cap_totals, m->n_func_totals,
		     sizeof(*t)) < 0)
		return -ENOMEM;
	m->func_totals[m->n_func_totals++] = *t;
	return 0;
}

static int trd_model_problem(void *ctx, const char *line)
{
	struct trd_model *b = ctx;
	struct trace_model *m = b->m;
	char *copy;

	if (m->n_problems >= TRD_MAX_PROBLEMS) {
		b->problems_dropped++;
		return 0;
	}
	if (trd_grow((void **)&m->problems, &b->cap_problems, m->n_problems, sizeof(char *)) < 0)
		return -ENOMEM;
	copy = strdup(line);
	if (!copy)
		return -ENOMEM;
	m->problems[m->n_problems++] = copy;
	return 0;
}

static const struct trace_stream_ops trd_model_ops = {
	.slice = trd_model_slice,
	.sample = trd_model_sample,
	.counter = trd_model_counter,
	.func_total = trd_model_func_total,
	.problem = trd_model_problem,
};

/* ---- the end: sorted tables -------------------------------------------------------- */

static int trd_cmp_sample(const void *a, const void *b)
{
	const struct trd_model_sample *x = a, *y = b;

	return trd_cmp_ts_order(x->s.ts, x->order, y->s.ts, y->order);
}

static int trd_cmp_counter(const void *a, const void *b)
{
	const struct trd_model_counter *x = a, *y = b;

	return trd_cmp_ts_order(x->v.ts, x->order, y->v.ts, y->order);
}

/*
 * Sorts n entries of `size` bytes (their payload of `out_size` bytes first)
 * and copies the payloads into a new array *out. -ENOMEM.
 */
static int trd_sorted_copy(void *in, size_t n, size_t size, int (*cmp)(const void *, const void *),
			   void **out, size_t out_size)
{
	if (!n)
		return 0;
	qsort(in, n, size, cmp);
	*out = calloc(n, out_size);
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		memcpy((char *)*out + i * out_size, (char *)in + i * size, out_size);
	return 0;
}

static int trd_model_tables(struct trd_model *b, const struct trace_stream_stats *st)
{
	struct trace_model *m = b->m;

	m->n_packets = st->n_packets;
	m->samples_lost = st->samples_lost;
	m->samples_skipped = st->samples_skipped;
	m->sample_freq = st->sample_freq;
	m->has_clock_snapshot = st->has_clock_snapshot;
	m->first_clock_snapshot = st->first_clock_snapshot;
	m->ended = st->ended;
	m->bytes = st->bytes;
	if (trd_sorted_copy(b->samples, b->n_samples, sizeof(*b->samples), trd_cmp_sample,
			    (void **)&m->samples, sizeof(*m->samples)) < 0)
		return -ENOMEM;
	m->n_samples = b->n_samples;
	if (trd_sorted_copy(b->counters, b->n_counters, sizeof(*b->counters), trd_cmp_counter,
			    (void **)&m->counter_values, sizeof(*m->counter_values)) < 0)
		return -ENOMEM;
	m->n_counter_values = b->n_counters;
	if (b->problems_dropped) {
		char *line;

		if (trd_grow((void **)&m->problems, &b->cap_problems, m->n_problems,
			     sizeof(char *)) < 0 ||
		    asprintf(&line, "... and %zu more problems", b->problems_dropped) < 0)
			return -ENOMEM;
		m->problems[m->n_problems++] = line;
	}
	return 0;
}

/* The reader's threads, processes and strings (which the tables point at) move to m. */
static void trd_model_take(struct trace_model *m, struct trd *r)
{
	m->threads = r->threads;
	m->n_threads = r->n_threads;
	m->process_pids = r->process_pids;
	m->process_names = r->process_names;
	m->n_processes = r->n_processes;
	m->priv = r->store;
	r->threads = NULL;
	r->process_pids = NULL;
	r->process_names = NULL;
	r->store = NULL;
}

/* ---- entry points ------------------------------------------------------------------ */

static int trd_model_load(const char *path, const uint8_t *buf, size_t len,
			  struct trace_model **out)
{
	struct trd_model b = { 0 };
	struct trace_stream *ts;
	int ret;

	*out = NULL;
	b.m = calloc(1, sizeof(*b.m));
	if (!b.m)
		return -ENOMEM;
	/* reorder 0: every slice event is held and sorted once, at the end */
	ts = trace_stream_new(&trd_model_ops, &b, &(struct trace_stream_opts){ .reorder = 0 });
	if (!ts) {
		free(b.m);
		return -ENOMEM;
	}
	ret = path ? trace_stream_read_file(ts, path) : trace_stream_read_buffer(ts, buf, len);
	if (!ret)
		ret = trd_model_tables(&b, trace_stream_get_stats(ts));
	trd_model_take(b.m, (struct trd *)ts);
	trace_stream_free(ts);
	free(b.samples);
	free(b.counters);
	if (ret) {
		trace_model_free(b.m);
		return ret < 0 ? ret : -EIO;
	}
	*out = b.m;
	return 0;
}

int trace_model_load_buffer(const uint8_t *buf, size_t len, struct trace_model **out)
{
	return trd_model_load(NULL, buf, len, out);
}

int trace_model_load(const char *path, struct trace_model **out)
{
	return trd_model_load(path, NULL, 0, out);
}

const char *trace_sample_overhead(const struct trace_sample *s)
{
	if (s->n_frames < 2 || strcmp(s->frames[0], PERFETTO_OVERHEAD_ROOT) != 0 ||
	    !s->frame_mappings[0] || strcmp(s->frame_mappings[0], PERFETTO_OVERHEAD_MAPPING) != 0)
		return NULL;
	return s->frames[1];
}

void trace_model_free(struct trace_model *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n_problems; i++)
		free(m->problems[i]);
	free(m->problems);
	free(m->threads);
	free(m->slices);
	free(m->samples);
	free(m->counter_values);
	free(m->func_totals);
	free(m->process_names);
	free(m->process_pids);
	trd_store_free(m->priv);
	free(m);
}
