/* SPDX-License-Identifier: MIT */
/*
 * Exports of a profd trace to other tools' formats (`profctl export`): pprof
 * (pprof.c), Chrome's Trace Event Format JSON (chrome_json.c) and folded
 * stacks (folded.c), each streaming the trace once through trace_stream.h.
 * Shared here: the stream run with its policy on damage (export_stream.c) and
 * the aggregation of identical stacks, sampled or instrumented (stacks.c), so
 * memory follows distinct names and stacks, never the number of events.
 */
#ifndef PROFD_EXPORT_H
#define PROFD_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "viewer-export/trace_stream.h"

struct export_opts {
	bool with_calls; /* folded: add the instrumented calls' chains, weighted in ns */
	size_t window;   /* the reader's window in bytes, 0: its default */
};

#define EXPORT_ERR_LEN 640

/*
 * Each writes the trace at path to out. 0, or a negative errno with a
 * one-line reason in err (the trace cannot be read, is not ours or is
 * truncated, out cannot be written). A failed export leaves out partial:
 * the caller discards it.
 */
int export_pprof(const char *path, FILE *out, const struct export_opts *o, char *err);
int export_chrome(const char *path, FILE *out, const struct export_opts *o, char *err);
int export_folded(const char *path, FILE *out, const struct export_opts *o, char *err);

/* ---- the stream run (export_stream.c) --------------------------------------- */

/* The first member of every exporter's context: the run's shared state. */
struct export_base {
	char *err;               /* EXPORT_ERR_LEN bytes */
	uint64_t problems;       /* importer-rule problems: warned about, not fatal */
	char first_problem[256];
	uint64_t sample_freq;    /* Hz, from the stats once read (0: none) */
	/*
	 * The stream read, kept until export_stream_done: the names and frames
	 * it gave out point into it, and exporters write them after the read.
	 */
	struct trace_stream *stream;
};

/*
 * Streams path through ops (their ctx: base, inside the exporter's context);
 * ops->problem must be NULL (the run's own policy applies: damage to the
 * file's framing, a packet that does not decode or a file that is not a
 * Perfetto trace is fatal; a broken importer rule is counted and warned
 * about once on stderr). 0, or a negative errno with err set.
 */
int export_stream_run(const char *path, const struct trace_stream_ops *ops,
		      struct export_base *base, const struct export_opts *o, bool attribute);
/* Frees the stream export_stream_run kept (its names die with it): after the output is written. */
void export_stream_done(struct export_base *base);

/* An exporter's own failure: formats err and returns -e (e > 0). */
int export_fail(struct export_base *base, int e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- stacks (stacks.c) -------------------------------------------------------- */

/* Names by the stream's interned pointer: ids from 0 in first-seen order. */
struct export_names {
	const char **names;
	size_t n, cap;
	uint32_t *slots; /* id + 1 */
	size_t mask;
};
/* The id of name; -ENOMEM. */
int64_t export_names_id(struct export_names *t, const char *name);
void export_names_free(struct export_names *t);

#define EXPORT_VALUES 4
/* Identical stacks (vectors of name ids, in the order given) aggregated. */
struct export_stack {
	uint32_t off, n;                /* ids in the table's pool */
	int64_t v[EXPORT_VALUES];
};
struct export_stacks {
	struct export_stack *items;
	size_t n, cap;
	uint32_t *pool;
	size_t pool_n, pool_cap;
	uint32_t *slots;
	size_t mask;
};
/* Adds v to the stack ids[0..n) (created at zero); -ENOMEM. */
int export_stacks_add(struct export_stacks *t, const uint32_t *ids, size_t n,
		      const int64_t v[EXPORT_VALUES]);
/* The entry of ids[0..n), NULL if none. */
const struct export_stack *export_stacks_find(const struct export_stacks *t, const uint32_t *ids,
					      size_t n);
static inline const uint32_t *export_stack_ids(const struct export_stacks *t,
					       const struct export_stack *s)
{
	return t->pool + s->off;
}
void export_stacks_free(struct export_stacks *t);

/*
 * Instrumented call chains: slices arrive as they end, children before their
 * parent, so each still-open parent collects its finished subtree's chains
 * (leaf first) until it ends; a depth-0 call hands its chains, root first,
 * to `done` with the calls made along that chain and their self time in ns
 * (their time less their direct instrumented callees'; a call still open at
 * the end counts 0 ns): self times add up without counting a nested call
 * twice, as pprof and flame graphs sum a stack's values into its callers.
 * Memory follows the open calls and their distinct sub-chains.
 */
struct export_calls;
typedef int (*export_chain_fn)(void *ctx, const uint32_t *ids, size_t n, int64_t calls,
			       int64_t ns);
struct export_calls *export_calls_new(struct export_names *names, export_chain_fn done,
				      void *ctx);
int export_calls_slice(struct export_calls *c, const struct trace_stream_slice *s);
void export_calls_free(struct export_calls *c);

#endif
