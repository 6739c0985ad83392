// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for viewer-export/trace_reader.c trace_model_load_buffer:
 * the input is a (damaged) Perfetto trace. A damaged trace is not an error,
 * so every input must load (or fail with -ENOMEM) into a model whose indexes
 * and strings hold together. Never exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/trace_reader.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_model *m = NULL;
	int ret = trace_model_load_buffer(data, size, &m);

	CHECK(ret == 0 || ret == -ENOMEM);
	CHECK((ret == 0) == (m != NULL));
	if (m)
		check_model(m);
	trace_model_free(m);
	return 0;
}
