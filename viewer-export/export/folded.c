// SPDX-License-Identifier: MIT
/*
 * Folded stacks (flamegraph.pl, speedscope, inferno): one line per distinct
 * sampled stack, `frame;frame;frame COUNT`, root first, identical stacks
 * summed. With --with-calls, the instrumented calls' chains follow under a
 * root frame "[calls ns]", weighted by their self time in nanoseconds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "viewer-export/export/export.h"

#define FOLDED_UNKNOWN "[unknown]"
#define FOLDED_CALLS_ROOT "[calls ns]"

struct folded {
	struct export_base base;
	struct export_names names;
	struct export_stacks samples, calls;
	struct export_calls *chains;
	uint32_t *buf;
	size_t buf_cap;
};

static int folded_sample(void *ctx, const struct trace_stream_sample *smp)
{
	struct folded *f = ctx;
	size_t n = smp->s.n_frames ? smp->s.n_frames : 1;
	int64_t one[EXPORT_VALUES] = { 1 };

	if (n > f->buf_cap) {
		uint32_t *b = realloc(f->buf, n * sizeof(*b));

		if (!b)
			return -ENOMEM;
		f->buf = b;
		f->buf_cap = n;
	}
	for (size_t i = 0; i < n; i++) {
		int64_t id = export_names_id(&f->names, smp->s.n_frames ? smp->s.frames[i]
								       : FOLDED_UNKNOWN);

		if (id < 0)
			return (int)id;
		f->buf[i] = (uint32_t)id;
	}
	return export_stacks_add(&f->samples, f->buf, n, one);
}

static int folded_chain(void *ctx, const uint32_t *ids, size_t n, int64_t calls, int64_t ns)
{
	struct folded *f = ctx;
	int64_t v[EXPORT_VALUES] = { ns, calls };

	return export_stacks_add(&f->calls, ids, n, v);
}

static int folded_slice(void *ctx, const struct trace_stream_slice *s)
{
	return export_calls_slice(((struct folded *)ctx)->chains, s);
}

/* A frame name as one field: ';' separates frames and a newline ends the line. */
static void put_frame(FILE *out, const char *name)
{
	for (const char *p = name; *p; p++)
		fputc(*p == ';' ? ':' : (*p == '\n' || *p == '\r') ? ' ' : *p, out);
}

static void put_stacks(FILE *out, const struct folded *f, const struct export_stacks *t,
		       const char *root)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct export_stack *s = &t->items[i];
		const uint32_t *ids = export_stack_ids(t, s);

		if (root)
			fprintf(out, "%s;", root);
		for (size_t k = 0; k < s->n; k++) {
			if (k)
				fputc(';', out);
			put_frame(out, f->names.names[ids[k]]);
		}
		fprintf(out, " %" PRId64 "\n", s->v[0]);
	}
}

int export_folded(const char *path, FILE *out, const struct export_opts *o, char *err)
{
	static const struct trace_stream_ops ops = { .sample = folded_sample };
	static const struct trace_stream_ops ops_calls = {
		.sample = folded_sample, .slice = folded_slice,
	};
	struct folded f = { .base.err = err };
	int rc;

	err[0] = 0;
	if (o->with_calls) {
		f.chains = export_calls_new(&f.names, folded_chain, &f);
		if (!f.chains)
			return export_fail(&f.base, ENOMEM, "out of memory");
	}
	rc = export_stream_run(path, o->with_calls ? &ops_calls : &ops, &f.base, o, false);
	if (!rc) {
		put_stacks(out, &f, &f.samples, NULL);
		put_stacks(out, &f, &f.calls, FOLDED_CALLS_ROOT);
	}
	export_stream_done(&f.base);
	export_calls_free(f.chains);
	export_stacks_free(&f.samples);
	export_stacks_free(&f.calls);
	export_names_free(&f.names);
	free(f.buf);
	return rc;
}
