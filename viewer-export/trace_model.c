/* SPDX-License-Identifier: MIT */
/*
 * The trace model's storage and the reader's end-of-file pass: stable shared
 * strings, the problems list, then (as the importer does after sorting by
 * timestamp and file order) BEGIN/END matching per track, slice depth and
 * parents, sorted samples and counter values. Never trusts the data: every
 * size was bounded by the reader, every lookup may miss.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/trace_reader_internal.h"

#define TRD_CHUNK_SIZE (64 * 1024)

struct trd_chunk {
	struct trd_chunk *next;
	size_t used, cap;
	char data[];
};

/* ---- allocation helpers -------------------------------------------------- */

bool trd_reserve(struct trd *r, void **arr, size_t *cap, size_t n, size_t size)
{
	size_t new_cap;
	void *p;

	if (n < *cap)
		return true;
	new_cap = *cap ? *cap * 2 : 16;
	if (new_cap > SIZE_MAX / size)
		goto err_oom;
	p = realloc(*arr, new_cap * size);
	if (!p)
		goto err_oom;
	*arr = p;
	*cap = new_cap;
	return true;
err_oom:
	r->oom = true;
	return false;
}

bool trd_keep(struct trd *r, void *p)
{
	struct trace_model_priv *pv = r->m->priv;

	if (!trd_reserve(r, (void **)&pv->allocs, &pv->cap_allocs, pv->n_allocs, sizeof(void *))) {
		free(p);
		return false;
	}
	pv->allocs[pv->n_allocs++] = p;
	return true;
}

/* ---- stable strings ------------------------------------------------------ */

struct trd_strkey {
	const void *data;
	size_t len;
};

static bool trd_str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct trace_model_priv *pv = ctx;
	const struct trd_strkey *k = key;

	return pv->lens[idx] == k->len && memcmp(pv->strs[idx], k->data, k->len) == 0;
}

static char *trd_chunk_alloc(struct trace_model_priv *pv, size_t n)
{
	struct trd_chunk *c = pv->chunks;

	if (!c || c->cap - c->used < n) {
		size_t cap = n > TRD_CHUNK_SIZE / 4 ? n : TRD_CHUNK_SIZE;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (cap == TRD_CHUNK_SIZE || !pv->chunks) {
			c->next = pv->chunks;
			pv->chunks = c;
		} else { /* a big string gets its own chunk, behind the current one */
			c->next = pv->chunks->next;
			pv->chunks->next = c;
			c->used = n;
			return c->data;
		}
	}
	c->used += n;
	return c->data + c->used - n;
}

const char *trd_str(struct trd *r, const void *data, size_t len)
{
	struct trace_model_priv *pv = r->m->priv;
	struct trd_strkey key = { data, len };
	uint32_t hash;
	struct pw_slot *slot;
	char *s;

	if (len >= UINT32_MAX || pw_index_reserve(&pv->str_ix) < 0)
		goto err_oom;
	hash = pw_hash(data, len);
	slot = pw_index_lookup(&pv->str_ix, hash, trd_str_eq, pv, &key);
	if (slot->ref)
		return pv->strs[slot->ref - 1];
	if (pv->n_strs == pv->cap_strs) {
		size_t cap = pv->cap_strs;

		if (!trd_reserve(r, (void **)&pv->strs, &cap, pv->n_strs, sizeof(char *)))
			return NULL;
		cap = pv->cap_strs;
		if (!trd_reserve(r, (void **)&pv->lens, &cap, pv->n_strs, sizeof(uint32_t)))
			return NULL;
		pv->cap_strs = (uint32_t)cap;
	}
	s = trd_chunk_alloc(pv, len + 1);
	if (!s)
		goto err_oom;
	if (len)
		memcpy(s, data, len);
	s[len] = 0;
	pv->strs[pv->n_strs] = s;
	pv->lens[pv->n_strs] = (uint32_t)len;
	pw_index_fill(&pv->str_ix, slot, hash, pv->n_strs++);
	return s;
err_oom:
	r->oom = true;
	return NULL;
}

/* ---- problems ------------------------------------------------------------ */

static void trd_problem_add(struct trd *r, const char *prefix, const char *fmt, va_list ap)
{
	struct trace_model_priv *pv = r->m->priv;
	struct trace_model *m = r->m;
	char *body, *line;

	if (m->n_problems >= TRD_MAX_PROBLEMS) {
		pv->problems_dropped++;
		return;
	}
	if (vasprintf(&body, fmt, ap) < 0)
		goto err_oom;
	if (asprintf(&line, "%s%s", prefix, body) < 0) {
		free(body);
		goto err_oom;
	}
	free(body);
	if (!trd_reserve(r, (void **)&m->problems, &pv->cap_problems, m->n_problems,
			 sizeof(char *))) {
		free(line);
		return;
	}
	m->problems[m->n_problems++] = line;
	return;
err_oom:
	r->oom = true;
}

void trd_problem(struct trd *r, const char *fmt, ...)
{
	char prefix[64];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "packet %zu at offset %zu: ", r->pkt_index,
		 r->pkt_offset);
	va_start(ap, fmt);
	trd_problem_add(r, prefix, fmt, ap);
	va_end(ap);
}

void trd_problem_at(struct trd *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	trd_problem_add(r, "", fmt, ap);
	va_end(ap);
}

/* ---- end of file --------------------------------------------------------- */

static void trd_check_clocks(struct trd *r)
{
	uint32_t i;

	for (i = 0; i < r->clocks_used.n; i++) {
		const uint32_t *e = pw_table_at(&r->clocks_used, i);

		if (e[0] == TRD_CLOCK_BOOTTIME || pw_table_find(&r->clocks_snapshotted, &e[0]))
			continue;
		trd_problem_at(r, "%" PRIu32 " packets use clock %" PRIu32 ", which no "
			       "ClockSnapshot contains: the importer drops them "
			       "(clock_sync_failure)", e[1], e[0]);
	}
}

static int trd_cmp_ts_order(uint64_t ts_a, size_t ord_a, uint64_t ts_b, size_t ord_b)
{
	if (ts_a != ts_b)
		return ts_a < ts_b ? -1 : 1;
	return ord_a < ord_b ? -1 : ord_a > ord_b;
}

static int trd_cmp_event(const void *a, const void *b)
{
	const struct trd_event *x = a, *y = b;

	return trd_cmp_ts_order(x->ts, x->order, y->ts, y->order);
}

static int trd_cmp_sample(const void *a, const void *b)
{
	const struct trd_sample *x = a, *y = b;

	return trd_cmp_ts_order(x->s.ts, x->order, y->s.ts, y->order);
}

static int trd_cmp_counter(const void *a, const void *b)
{
	const struct trd_counter *x = a, *y = b;

	return trd_cmp_ts_order(x->v.ts, x->order, y->v.ts, y->order);
}

/* Appends a slice at the track's current depth; returns its index or -1. */
static int64_t trd_slice_open(struct trd *r, struct trd_track *t, const struct trd_event *ev)
{
	struct trace_model *m = r->m;
	struct trace_slice *s;

	if (!trd_reserve(r, (void **)&m->slices, &r->cap_slices, m->n_slices, sizeof(*s)))
		return -1;
	s = &m->slices[m->n_slices];
	s->pid = t->kind == TRD_TRACK_OTHER ? 0 : t->pid;
	s->tid = t->kind == TRD_TRACK_THREAD ? t->tid : 0;
	s->ts = ev->ts;
	s->dur = ev->type == TRD_INSTANT ? 0 : -1;
	s->depth = (uint32_t)t->depth;
	s->parent = t->depth ? (int64_t)t->stack[t->depth - 1] : -1;
	s->name = (char *)ev->name;
	s->self_samples = -1;
	return (int64_t)m->n_slices++;
}

static void trd_match_begin(struct trd *r, struct trd_track *t, const struct trd_event *ev)
{
	int64_t idx;

	if (t->depth >= TRD_MAX_DEPTH) {
		trd_problem_at(r, "track %" PRIu64 ": BEGIN at ts %" PRIu64 " would be at "
			       "depth %zu (>= %d): the importer drops it and its END closes "
			       "the parent (slice_max_depth_exceeded)", t->uuid, ev->ts, t->depth,
			       TRD_MAX_DEPTH);
		return;
	}
	if (!trd_reserve(r, (void **)&t->stack, &t->cap, t->depth, sizeof(size_t)))
		return;
	idx = trd_slice_open(r, t, ev);
	if (idx >= 0)
		t->stack[t->depth++] = (size_t)idx;
}

static void trd_close_top(struct trd *r, struct trd_track *t, uint64_t ts)
{
	struct trace_slice *s = &r->m->slices[t->stack[--t->depth]];

	s->dur = (int64_t)(ts - s->ts);
}

static void trd_match_end(struct trd *r, struct trd_track *t, const struct trd_event *ev)
{
	size_t k;

	if (!t->depth) {
		trd_problem_at(r, "track %" PRIu64 ": unmatched END at ts %" PRIu64
			       " (nothing open; the importer ignores it)", t->uuid, ev->ts);
		return;
	}
	/* a NULL name matches anything; a name closes the top-most slice of that name */
	for (k = t->depth; ev->name && k > 0; k--)
		if (r->m->slices[t->stack[k - 1]].name == ev->name)
			break;
	if (ev->name && k == 0) {
		trd_problem_at(r, "track %" PRIu64 ": END \"%s\" at ts %" PRIu64
			       " matches no open slice", t->uuid, ev->name, ev->ts);
		return;
	}
	if (ev->name && k != t->depth)
		trd_problem_at(r, "track %" PRIu64 ": END \"%s\" at ts %" PRIu64 " closes a slice "
			       "that is not the innermost (misplaced_end_event)", t->uuid, ev->name,
			       ev->ts);
	/* the END's args go to the slice it closes (trace processor's SliceTracker::End) */
	if (ev->self_samples >= 0)
		r->m->slices[t->stack[(ev->name ? k : t->depth) - 1]].self_samples = ev->self_samples;
	for (k = ev->name ? k : t->depth; t->depth >= k && t->depth > 0;)
		trd_close_top(r, t, ev->ts);
}

static void trd_match_event(struct trd *r, const struct trd_event *ev)
{
	struct trd_track *t = pw_table_find(&r->tracks, &ev->uuid);

	if (!t) {
		trd_problem_at(r, "slice event at ts %" PRIu64 " on track %" PRIu64
			       " which no TrackDescriptor defines (dropped)", ev->ts, ev->uuid);
		return;
	}
	if (!t->usable)
		return; /* reported with its descriptor */
	if (t->kind == TRD_TRACK_COUNTER) {
		trd_problem_at(r, "slice event at ts %" PRIu64 " on counter track %" PRIu64
			       " (dropped)", ev->ts, ev->uuid);
		return;
	}
	if (ev->type == TRD_BEGIN)
		trd_match_begin(r, t, ev);
	else if (ev->type == TRD_END)
		trd_match_end(r, t, ev);
	else if (t->depth < TRD_MAX_DEPTH)
		trd_slice_open(r, t, ev);
}

static void trd_match_slices(struct trd *r)
{
	size_t i;

	if (r->n_events)
		qsort(r->events, r->n_events, sizeof(*r->events), trd_cmp_event);
	for (i = 0; i < r->n_events && !r->oom; i++)
		trd_match_event(r, &r->events[i]);
}

static void trd_final_tables(struct trd *r)
{
	struct trace_model *m = r->m;
	size_t i;

	if (r->n_samples) {
		qsort(r->samples, r->n_samples, sizeof(*r->samples), trd_cmp_sample);
		m->samples = calloc(r->n_samples, sizeof(*m->samples));
		if (!m->samples)
			goto err_oom;
		for (i = 0; i < r->n_samples; i++)
			m->samples[i] = r->samples[i].s;
		m->n_samples = r->n_samples;
	}
	if (r->n_counters) {
		qsort(r->counters, r->n_counters, sizeof(*r->counters), trd_cmp_counter);
		m->counter_values = calloc(r->n_counters, sizeof(*m->counter_values));
		if (!m->counter_values)
			goto err_oom;
		for (i = 0; i < r->n_counters; i++)
			m->counter_values[i] = r->counters[i].v;
		m->n_counter_values = r->n_counters;
	}
	return;
err_oom:
	r->oom = true;
}

void trd_finish(struct trd *r)
{
	struct trace_model_priv *pv = r->m->priv;

	trd_check_clocks(r);
	trd_match_slices(r);
	trd_final_tables(r);
	if (pv->problems_dropped) {
		struct trace_model *m = r->m;
		char *line;

		if (asprintf(&line, "... and %zu more problems", pv->problems_dropped) < 0) {
			r->oom = true;
			return;
		}
		if (!trd_reserve(r, (void **)&m->problems, &pv->cap_problems, m->n_problems,
				 sizeof(char *))) {
			free(line);
			return;
		}
		m->problems[m->n_problems++] = line;
	}
}

/* ---- freeing -------------------------------------------------------------- */

static void trd_priv_free(struct trace_model_priv *pv)
{
	struct trd_chunk *c, *next;
	size_t i;

	if (!pv)
		return;
	for (c = pv->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	for (i = 0; i < pv->n_allocs; i++)
		free(pv->allocs[i]);
	free(pv->allocs);
	free(pv->strs);
	free(pv->lens);
	pw_index_free(&pv->str_ix);
	free(pv);
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
	trd_priv_free(m->priv);
	free(m);
}
