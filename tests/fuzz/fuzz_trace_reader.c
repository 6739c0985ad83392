// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for viewer-export/trace_reader.c trace_model_load_buffer:
 * the input is a (damaged) Perfetto trace. A damaged trace is not an error,
 * so every input must load (or fail with -ENOMEM) into a model whose indexes
 * and strings hold together. The same bytes then go through the streaming
 * reader as `profctl report` uses it (small reorder window, sample
 * attribution, a short history). Never exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/trace_reader.h"
#include "viewer-export/trace_stream.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())
#define PROBLEMS_MAX 4096

static void check_slices(const struct trace_model *m)
{
	for (size_t i = 0; i < m->n_slices; i++) {
		const struct trace_slice *s = &m->slices[i];

		if (s->name) /* NULL: the event had no usable name */
			(void)strlen(s->name);
		CHECK(s->dur >= -1);
		if (s->parent < 0) {
			CHECK(s->depth == 0);
			continue;
		}
		CHECK((size_t)s->parent < i); /* opened before its child */
		CHECK(m->slices[s->parent].depth + 1 == s->depth);
	}
}

static void check_samples(const struct trace_model *m)
{
	for (size_t i = 0; i < m->n_samples; i++) {
		const struct trace_sample *s = &m->samples[i];

		for (size_t f = 0; f < s->n_frames; f++) {
			CHECK(s->frames[f] != NULL);
			(void)strlen(s->frames[f]);
			if (s->frame_mappings && s->frame_mappings[f])
				(void)strlen(s->frame_mappings[f]);
		}
	}
}

static void check_model(const struct trace_model *m)
{
	CHECK(m->n_problems <= PROBLEMS_MAX + 1);
	for (size_t i = 0; i < m->n_problems; i++)
		CHECK(m->problems[i] != NULL && m->problems[i][0] != '\0');
	for (size_t i = 0; i < m->n_threads; i++)
		if (m->threads[i].name)
			(void)strlen(m->threads[i].name);
	for (size_t i = 0; i < m->n_processes; i++)
		if (m->process_names[i])
			(void)strlen(m->process_names[i]);
	for (size_t i = 0; i < m->n_counter_values; i++)
		if (m->counter_values[i].track_name)
			(void)strlen(m->counter_values[i].track_name);
	check_slices(m);
	check_samples(m);
}

/* What a stream delivered, folded into one number (FNV-1a). */
static void fold(uint64_t *h, const void *data, size_t len)
{
	for (size_t i = 0; i < len; i++)
		*h = (*h ^ ((const uint8_t *)data)[i]) * 0x100000001b3ull;
}

static int stream_slice(void *ctx, const struct trace_stream_slice *s)
{
	const char *name = s->name ? s->name : "";

	fold(ctx, &s->ts, sizeof(s->ts));
	fold(ctx, &s->dur, sizeof(s->dur));
	fold(ctx, &s->parent, sizeof(s->parent));
	fold(ctx, &s->depth, sizeof(s->depth));
	fold(ctx, name, strlen(name) + 1);
	CHECK(s->dur >= -1);
	CHECK((s->parent < 0) == (s->depth == 0));
	CHECK(s->parent < 0 || (uint64_t)s->parent < s->id);
	if (s->name)
		(void)strlen(s->name);
	return 0;
}

static int stream_sample(void *ctx, const struct trace_stream_sample *s)
{
	fold(ctx, &s->s.ts, sizeof(s->s.ts));
	fold(ctx, &s->slice_id, sizeof(s->slice_id));
	CHECK((s->where == TRACE_STREAM_IN_SLICE) == (s->slice_id >= 0));
	for (size_t f = 0; f < s->s.n_frames; f++)
		(void)strlen(s->s.frames[f]);
	return 0;
}

static int stream_problem(void *ctx, const char *line)
{
	fold(ctx, line, strlen(line) + 1);
	CHECK(line[0] != '\0');
	return 0;
}

/* The stream's deliveries, folded; *ret its return. */
static uint64_t stream(const uint8_t *data, size_t size, bool no_fast_decode, int *ret)
{
	static const struct trace_stream_ops ops = {
		.slice = stream_slice,
		.sample = stream_sample,
		.problem = stream_problem,
	};
	struct trace_stream_opts o = { .reorder = 4, .attribute_samples = true, .history = 8,
				       .no_fast_decode = no_fast_decode };
	uint64_t h = 0xcbf29ce484222325ull;
	struct trace_stream *ts = trace_stream_new(&ops, &h, &o);

	*ret = -ENOMEM;
	if (!ts)
		return 0;
	*ret = trace_stream_read_buffer(ts, data, size);
	CHECK(*ret == 0 || *ret == -ENOMEM);
	trace_stream_free(ts);
	return h;
}

/* The hot-packet decoder must deliver exactly what protobuf-c's decoding does. */
static void check_stream(const uint8_t *data, size_t size)
{
	int ret_fast, ret_slow;
	uint64_t fast = stream(data, size, false, &ret_fast);
	uint64_t slow = stream(data, size, true, &ret_slow);

	if (ret_fast == 0 && ret_slow == 0)
		CHECK(fast == slow);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_model *m = NULL;
	int ret = trace_model_load_buffer(data, size, &m);

	CHECK(ret == 0 || ret == -ENOMEM);
	CHECK((ret == 0) == (m != NULL));
	if (m)
		check_model(m);
	trace_model_free(m);
	check_stream(data, size);
	return 0;
}
