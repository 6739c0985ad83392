// SPDX-License-Identifier: MIT
/*
 * The callers/callees view of `profctl report --callers F` (see
 * report_callers.h). Each ended slice waits, aggregated by (parent, name),
 * until its parent ends: then the parent's name is known, and the slice
 * counts as F's callee (the parent is F) or the parent as F's caller (the
 * slice is F). Slices at depth 0 have no caller: "(no caller)".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/report_callers.h"
#include "profctl/report_names.h"

#define NO_CALLER "(no caller)"

struct callers_pending {
	int64_t parent;   /* the parent slice's id */
	const char *name; /* the child's name */
	uint64_t count;
	int64_t total_ns;
};

void report_callers_init(struct report_callers *c, const char *func)
{
	memset(c, 0, sizeof(*c));
	c->func = func;
}

/* Adds count and time to name's row (rows are few: a linear scan). */
static int rows_add(struct callers_row **rows, size_t *n, size_t *cap, const char *name,
		    uint64_t count, int64_t total_ns)
{
	for (size_t i = 0; i < *n; i++)
		if ((*rows)[i].name == name || strcmp((*rows)[i].name, name) == 0) {
			(*rows)[i].count += count;
			(*rows)[i].total_ns += total_ns;
			return 0;
		}
	if (!report_grow((void **)rows, cap, *n, sizeof(**rows)))
		return -ENOMEM;
	(*rows)[(*n)++] = (struct callers_row){ name, count, total_ns };
	return 0;
}

static int pending_add(struct report_callers *c, int64_t parent, const char *name, int64_t dur)
{
	for (size_t i = c->n_pending; i-- > 0;) /* siblings are usually the latest entries */
		if (c->pending[i].parent == parent && c->pending[i].name == name) {
			c->pending[i].count++;
			c->pending[i].total_ns += dur;
			return 0;
		}
	if (!report_grow((void **)&c->pending, &c->cap_pending, c->n_pending, sizeof(*c->pending)))
		return -ENOMEM;
	c->pending[c->n_pending++] = (struct callers_pending){ parent, name, 1, dur };
	if (c->n_pending > c->pending_peak)
		c->pending_peak = c->n_pending;
	return 0;
}

/* s ended: its waiting children are F's callees (s is F), or s is a caller of its F children. */
static int settle_children(struct report_callers *c, const struct trace_stream_slice *s,
			   const char *name, bool is_func)
{
	int err = 0;

	for (size_t i = 0; i < c->n_pending && !err;) {
		struct callers_pending *p = &c->pending[i];

		if (p->parent != (int64_t)s->id) {
			i++;
			continue;
		}
		if (is_func)
			err = rows_add(&c->callees, &c->n_callees, &c->cap_callees, p->name,
				       p->count, p->total_ns);
		if (!err && strcmp(p->name, c->func) == 0)
			err = rows_add(&c->callers, &c->n_callers, &c->cap_callers, name, p->count,
				       p->total_ns);
		*p = c->pending[--c->n_pending]; /* order does not matter */
	}
	return err;
}

int report_callers_slice(struct report_callers *c, const struct trace_stream_slice *s)
{
	const char *name = s->name ? s->name : "?";
	bool is_func = strcmp(name, c->func) == 0;
	int64_t dur = s->dur > 0 ? s->dur : 0;
	int err = settle_children(c, s, name, is_func);

	if (err)
		return err;
	if (is_func) {
		c->slices++;
		c->total_ns += dur;
	}
	if (s->parent >= 0)
		return pending_add(c, s->parent, name, dur);
	if (is_func)
		return rows_add(&c->callers, &c->n_callers, &c->cap_callers, NO_CALLER, 1, dur);
	return 0;
}

static int by_count_desc(const void *a, const void *b)
{
	const struct callers_row *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static void print_rows(FILE *out, const char *title, struct callers_row *rows, size_t n,
		       size_t top)
{
	size_t shown = top && top < n ? top : n;

	if (n)
		qsort(rows, n, sizeof(*rows), by_count_desc);
	fprintf(out, "\n%s (%zu):\n%12s %14s  %s\n", title, n, "calls", "total ms", "name");
	for (size_t i = 0; i < shown; i++)
		fprintf(out, "%12" PRIu64 " %14.3f  %s\n", rows[i].count, rows[i].total_ns / 1e6,
			rows[i].name);
}

void report_callers_print(struct report_callers *c, FILE *out, size_t top)
{
	fprintf(out, "\n%s: %" PRIu64 " slices, %.3f ms (calls: slices of it on the timeline; "
		"callers: the enclosing slice of each, with its time; callees: slices directly "
		"inside it, with theirs)\n", c->func, c->slices, c->total_ns / 1e6);
	print_rows(out, "callers", c->callers, c->n_callers, top);
	print_rows(out, "callees", c->callees, c->n_callees, top);
}

void report_callers_free(struct report_callers *c)
{
	free(c->callers);
	free(c->callees);
	free(c->pending);
	memset(c, 0, sizeof(*c));
}
