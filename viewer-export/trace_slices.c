/* SPDX-License-Identifier: MIT */
/*
 * Slices while streaming: each track ("lane") holds its slice events in a
 * reorder window (kept sorted by timestamp and file order, as the importer's
 * sorter would order them: appending is the usual case, since writers put a
 * track's events in order), matches BEGIN/END on its stack as events leave
 * the window, and delivers each slice when it ends (open ones at the end of
 * the file). With attribution on, samples wait on their thread's lane until
 * its events pass their timestamp, or look back in its history of recent
 * timestamps when they come after them; either way a sample learns the
 * innermost slice open at its ts. Memory: the window, the open slices, the
 * history and the waiting samples of each lane, never the whole trace.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "viewer-export/trace_reader_internal.h"

#define TRD_HISTORY_DEFAULT 4096

struct trd_open {
	uint64_t id;
	uint64_t ts;
	size_t order;
	const char *name;
	struct trace_slice_args args;
};

/*
 * What a sample at exactly ts sees (`at`: the last slice begun at ts, else
 * what was open before ts) and what one after ts, before the next event,
 * sees (`after`). -1: no slice.
 */
struct trd_hist {
	uint64_t ts;
	int64_t at_id, after_id;
	const char *at_name, *after_name;
};

/* Samples waiting for their thread's slices: a min-heap by (ts, file order). */
struct trd_sample_heap {
	struct trace_stream_sample *v;
	size_t n, cap;
};

struct trd_lane {
	uint64_t uuid;
	struct trd_event *win;     /* the reorder window: win[head..tail), sorted */
	size_t head, tail, cap_win;
	bool released;             /* an event left the window: last_ts is set */
	uint64_t last_ts;
	int32_t pid, tid;          /* of its track, for the slices it delivers */
	uint32_t generation;
	struct trd_open *stack;
	size_t depth, cap;
	struct trd_sample_heap pending; /* samples at or after last_ts */
	struct trd_hist *hist;     /* a ring of the newest hist_n timestamps */
	size_t hist_cap, hist_head, hist_n;
	bool hist_dropped;         /* older timestamps were forgotten */
};

struct trd_lane_ent {
	uint64_t uuid;
	struct trd_lane *lane;
};

static int trd_cmp_event(const void *a, const void *b)
{
	const struct trd_event *x = a, *y = b;

	return trd_cmp_ts_order(x->ts, x->order, y->ts, y->order);
}

/* ---- the reorder window ---------------------------------------------------------- */

/*
 * Puts ev in l's window at its place: after every event of the same ts or
 * earlier (ev came later in the file). Room is made by sliding the window
 * back to the start of its array, so each event moves O(1) times on average.
 */
static bool trd_win_insert(struct trd *r, struct trd_lane *l, const struct trd_event *ev)
{
	size_t lo = l->head, hi = l->tail;

	if (l->tail == l->cap_win) {
		if (l->head && l->head >= l->tail - l->head) { /* as many dead as live: slide */
			memmove(l->win, l->win + l->head, (l->tail - l->head) * sizeof(*l->win));
			l->tail -= l->head;
			l->head = 0;
		} else if (!trd_reserve(r, (void **)&l->win, &l->cap_win, l->tail,
					sizeof(*l->win))) {
			return false;
		}
		lo = l->head;
		hi = l->tail;
	}
	if (lo < hi && l->win[hi - 1].ts > ev->ts) { /* out of order: find its place */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (l->win[mid].ts <= ev->ts)
				lo = mid + 1;
			else
				hi = mid;
		}
		memmove(l->win + lo + 1, l->win + lo, (l->tail - lo) * sizeof(*l->win));
	} else {
		lo = l->tail;
	}
	l->win[lo] = *ev;
	l->tail++;
	return true;
}

static bool trd_smp_less(const struct trace_stream_sample *a, const struct trace_stream_sample *b)
{
	return trd_cmp_ts_order(a->s.ts, a->order, b->s.ts, b->order) < 0;
}

static bool trd_smp_push(struct trd *r, struct trd_sample_heap *h,
			 const struct trace_stream_sample *smp)
{
	size_t i;

	if (!trd_reserve(r, (void **)&h->v, &h->cap, h->n, sizeof(*h->v)))
		return false;
	for (i = h->n++; i > 0 && trd_smp_less(smp, &h->v[(i - 1) / 2]); i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = *smp;
	if (++r->samples_held > r->st.samples_held_peak)
		r->st.samples_held_peak = r->samples_held;
	return true;
}

static void trd_smp_pop(struct trd *r, struct trd_sample_heap *h, struct trace_stream_sample *out)
{
	struct trace_stream_sample last = h->v[h->n - 1];
	size_t i = 0, c, n = --h->n;

	*out = h->v[0];
	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && trd_smp_less(&h->v[c + 1], &h->v[c]))
			c++;
		if (!trd_smp_less(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (n)
		h->v[i] = last;
	r->samples_held--;
}

/* ---- lanes ----------------------------------------------------------------- */

static struct trd_lane *trd_lane_get(struct trd *r, uint64_t uuid)
{
	struct trd_lane_ent *e;
	bool is_new;

	if (r->last_lane && r->last_lane->uuid == uuid)
		return r->last_lane;
	e = pw_table_get(&r->lanes, &uuid, &is_new);
	if (!e) {
		r->oom = true;
		return NULL;
	}
	if (is_new) {
		e->lane = calloc(1, sizeof(*e->lane));
		if (!e->lane) {
			r->oom = true;
			return NULL;
		}
		e->lane->uuid = uuid;
	}
	r->last_lane = e->lane;
	return e->lane;
}

static void trd_lane_free(struct trd_lane *l)
{
	free(l->win);
	free(l->stack);
	free(l->pending.v);
	free(l->hist);
	free(l);
}

/* ---- history and sample attribution ---------------------------------------- */

static struct trd_hist *trd_hist_at(const struct trd_lane *l, size_t i)
{
	return &l->hist[(l->hist_head + i) % l->hist_cap];
}

/* Doubles the ring up to opts.history; false when full (or on ENOMEM). */
static bool trd_hist_grow(struct trd *r, struct trd_lane *l)
{
	size_t max = r->opts.history ? r->opts.history : TRD_HISTORY_DEFAULT;
	size_t cap = l->hist_cap ? l->hist_cap * 2 : 64;
	struct trd_hist *h;

	if (l->hist_cap >= max)
		return true; /* the ring turns: the oldest goes */
	cap = cap < max ? cap : max;
	h = malloc(cap * sizeof(*h));
	if (!h) {
		r->oom = true;
		return false;
	}
	for (size_t i = 0; i < l->hist_n; i++)
		h[i] = *trd_hist_at(l, i);
	free(l->hist);
	l->hist = h;
	l->hist_cap = cap;
	l->hist_head = 0;
	return true;
}

/* After an event at ts: `begun` is the slice it opened (BEGIN, INSTANT), else NULL. */
static void trd_hist_note(struct trd *r, struct trd_lane *l, uint64_t ts,
			  const struct trd_open *begun)
{
	const struct trd_open *top = l->depth ? &l->stack[l->depth - 1] : NULL;
	struct trd_hist *h = l->hist_n ? trd_hist_at(l, l->hist_n - 1) : NULL;

	if (!r->opts.attribute_samples)
		return;
	if (!h || h->ts != ts) {
		struct trd_hist prev = h ? *h : (struct trd_hist){ .after_id = -1 };

		if (l->hist_n == l->hist_cap && !trd_hist_grow(r, l))
			return;
		if (l->hist_n == l->hist_cap) {
			l->hist_head = (l->hist_head + 1) % l->hist_cap;
			l->hist_n--;
			l->hist_dropped = true;
		}
		h = trd_hist_at(l, l->hist_n++);
		h->ts = ts;
		h->at_id = prev.after_id;
		h->at_name = prev.after_name;
	}
	if (begun) {
		h->at_id = (int64_t)begun->id;
		h->at_name = begun->name;
	}
	h->after_id = top ? (int64_t)top->id : -1;
	h->after_name = top ? top->name : NULL;
}

/* The innermost slice of lane l open at smp's ts, from its history. */
static void trd_attribute(struct trd *r, struct trd_lane *l, struct trace_stream_sample *smp)
{
	size_t lo = 0, hi = l->hist_n;
	const struct trd_hist *h;

	while (lo < hi) { /* the first entry after ts */
		size_t mid = lo + (hi - lo) / 2;

		if (trd_hist_at(l, mid)->ts <= smp->s.ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	smp->slice_id = -1;
	smp->slice_name = NULL;
	if (lo == 0) { /* before every timestamp kept */
		smp->where = l->hist_dropped ? TRACE_STREAM_TOO_LATE : TRACE_STREAM_OUTSIDE;
		r->st.samples_too_late += l->hist_dropped;
		return;
	}
	h = trd_hist_at(l, lo - 1);
	smp->slice_id = h->ts == smp->s.ts ? h->at_id : h->after_id;
	smp->slice_name = h->ts == smp->s.ts ? h->at_name : h->after_name;
	smp->where = smp->slice_id >= 0 ? TRACE_STREAM_IN_SLICE : TRACE_STREAM_OUTSIDE;
}

static void trd_deliver_sample(struct trd *r, const struct trace_stream_sample *smp)
{
	if (r->ops->sample)
		trd_emitted(r, r->ops->sample(r->ctx, smp));
}

/* Samples of l before ts: its events up to theirs have all been matched. */
static void trd_release_samples(struct trd *r, struct trd_lane *l, uint64_t ts, bool all)
{
	struct trace_stream_sample smp;

	while (l->pending.n && (all || l->pending.v[0].s.ts < ts)) {
		trd_smp_pop(r, &l->pending, &smp);
		trd_attribute(r, l, &smp);
		trd_deliver_sample(r, &smp);
	}
}

void trd_sample_event(struct trd *r, struct trace_stream_sample *smp)
{
	struct trd_lane *l;
	uint64_t uuid;

	smp->where = TRACE_STREAM_NOT_ATTRIBUTED;
	smp->slice_id = -1;
	if (!r->opts.attribute_samples) {
		trd_deliver_sample(r, smp);
		return;
	}
	uuid = trd_thread_uuid(r, smp->s.pid, smp->s.tid, smp->s.generation);
	if (!uuid) { /* its thread may be described later */
		trd_smp_push(r, r->orphans, smp);
		return;
	}
	l = trd_lane_get(r, uuid);
	if (!l)
		return;
	if (l->released && smp->s.ts < l->last_ts) { /* its slices went by: look back */
		r->st.samples_late++;
		trd_attribute(r, l, smp);
		trd_deliver_sample(r, smp);
		return;
	}
	trd_smp_push(r, &l->pending, smp);
}

void trd_slices_thread_described(struct trd *r, int32_t pid, int32_t tid, uint32_t generation)
{
	struct trd_sample_heap *o = r->orphans;
	struct trace_stream_sample smp;
	size_t i = 0;

	while (i < o->n) { /* rare: samples before their thread's descriptor */
		if (o->v[i].s.pid != pid || o->v[i].s.tid != tid ||
		    o->v[i].s.generation != generation) {
			i++;
			continue;
		}
		smp = o->v[i];
		o->v[i] = o->v[--o->n];
		r->samples_held--;
		trd_sample_event(r, &smp);
	}
}

/* ---- matching (SliceTracker) ------------------------------------------------- */

static void trd_deliver_slice(struct trd *r, struct trd_lane *l, size_t pos,
			      const struct trd_open *o, int64_t dur)
{
	struct trace_stream_slice s = {
		.id = o->id,
		.parent = pos ? (int64_t)l->stack[pos - 1].id : -1,
		.track_uuid = l->uuid,
		.pid = l->pid,
		.tid = l->tid,
		.generation = l->generation,
		.ts = o->ts,
		.dur = dur,
		.depth = (uint32_t)pos,
		.name = o->name,
		.self_samples = o->args.self_samples,
		.args = o->args,
		.order = o->order,
	};

	if (r->ops->slice)
		trd_emitted(r, r->ops->slice(r->ctx, &s));
}

static struct trd_open trd_open_of(struct trd *r, const struct trd_event *ev)
{
	struct trd_open o = { r->next_slice_id++, ev->ts, ev->order, ev->name,
			      TRACE_SLICE_ARGS_NONE };

	o.args.values = ev->args.values; /* a BEGIN's --args values */
	return o;
}

/* The END's args for the slice it closes (o's), with o's BEGIN values kept before its own. */
static struct trace_slice_args trd_end_args(struct trd *r, const struct trd_open *o,
					    const struct trace_slice_args *end)
{
	struct trace_slice_args a = *end;
	size_t n1, n2;
	char *joined;

	if (!o->args.values || !end->values) {
		a.values = o->args.values ? o->args.values : end->values;
		return a;
	}
	n1 = strlen(o->args.values);
	n2 = strlen(end->values);
	if (!(joined = malloc(n1 + n2 + 2)))
		return a;
	memcpy(joined, o->args.values, n1);
	joined[n1] = TRACE_VALUE_SEP;
	memcpy(joined + n1 + 1, end->values, n2 + 1);
	a.values = trd_str(r, joined, n1 + 1 + n2);
	free(joined);
	return a;
}

static void trd_match_begin(struct trd *r, struct trd_lane *l, const struct trd_event *ev)
{
	if (l->depth >= TRD_MAX_DEPTH) {
		trd_problem_at(r, "track %" PRIu64 ": BEGIN at ts %" PRIu64 " would be at "
			       "depth %zu (>= %d): the importer drops it and its END closes "
			       "the parent (slice_max_depth_exceeded)", l->uuid, ev->ts, l->depth,
			       TRD_MAX_DEPTH);
		trd_hist_note(r, l, ev->ts, NULL);
		return;
	}
	if (!trd_reserve(r, (void **)&l->stack, &l->cap, l->depth, sizeof(*l->stack)))
		return;
	l->stack[l->depth++] = trd_open_of(r, ev);
	trd_hist_note(r, l, ev->ts, &l->stack[l->depth - 1]);
}

static void trd_close_top(struct trd *r, struct trd_lane *l, uint64_t ts)
{
	struct trd_open o = l->stack[--l->depth];

	/* an END that came behind the reorder window may precede its BEGIN */
	trd_deliver_slice(r, l, l->depth, &o, ts >= o.ts ? (int64_t)(ts - o.ts) : 0);
}

static void trd_match_end(struct trd *r, struct trd_lane *l, const struct trd_event *ev)
{
	size_t k;

	if (!l->depth) {
		trd_problem_at(r, "track %" PRIu64 ": unmatched END at ts %" PRIu64
			       " (nothing open; the importer ignores it)", l->uuid, ev->ts);
		return;
	}
	/* a NULL name matches anything; a name closes the top-most slice of that name */
	for (k = l->depth; ev->name && k > 0; k--)
		if (l->stack[k - 1].name == ev->name)
			break;
	if (ev->name && k == 0) {
		trd_problem_at(r, "track %" PRIu64 ": END \"%s\" at ts %" PRIu64
			       " matches no open slice", l->uuid, ev->name, ev->ts);
		return;
	}
	if (ev->name && k != l->depth)
		trd_problem_at(r, "track %" PRIu64 ": END \"%s\" at ts %" PRIu64 " closes a slice "
			       "that is not the innermost (misplaced_end_event)", l->uuid, ev->name,
			       ev->ts);
	/* the END's args go to the slice it closes (trace processor's SliceTracker::End) */
	l->stack[(ev->name ? k : l->depth) - 1].args =
		trd_end_args(r, &l->stack[(ev->name ? k : l->depth) - 1], &ev->args);
	for (k = ev->name ? k : l->depth; l->depth >= k && l->depth > 0 && !r->stop;)
		trd_close_top(r, l, ev->ts);
	trd_hist_note(r, l, ev->ts, NULL);
}

static void trd_match_instant(struct trd *r, struct trd_lane *l, const struct trd_event *ev)
{
	struct trd_open o;

	if (l->depth >= TRD_MAX_DEPTH)
		return;
	o = trd_open_of(r, ev);
	trd_deliver_slice(r, l, l->depth, &o, 0);
	trd_hist_note(r, l, ev->ts, &o);
}

/* One event leaves the window, in (ts, file order) for its track. */
static void trd_dispatch(struct trd *r, struct trd_lane *l, const struct trd_event *ev)
{
	const struct trd_track *t = pw_table_find(&r->tracks, &ev->uuid);

	trd_release_samples(r, l, ev->ts, false);
	if (!l->released || ev->ts > l->last_ts)
		l->last_ts = ev->ts;
	l->released = true;
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
	l->pid = t->kind == TRD_TRACK_OTHER ? 0 : t->pid;
	l->tid = t->kind == TRD_TRACK_THREAD ? t->tid : 0;
	l->generation = t->kind == TRD_TRACK_OTHER ? 0 : t->generation;
	if (ev->type == TRD_BEGIN)
		trd_match_begin(r, l, ev);
	else if (ev->type == TRD_END)
		trd_match_end(r, l, ev);
	else
		trd_match_instant(r, l, ev);
}

/* ---- entry points --------------------------------------------------------------- */

void trd_slices_init(struct trd *r)
{
	pw_table_init(&r->lanes, sizeof(struct trd_lane_ent), sizeof(uint64_t));
	r->orphans = calloc(1, sizeof(*r->orphans));
	if (!r->orphans)
		r->oom = true;
}

static void trd_note_held(struct trd *r, ssize_t delta)
{
	r->events_held += (size_t)delta;
	if (r->events_held > r->st.events_held_peak)
		r->st.events_held_peak = r->events_held;
}

void trd_slice_event(struct trd *r, const struct trd_event *ev)
{
	struct trd_event out;
	struct trd_lane *l;

	if (!r->opts.reorder) { /* everything to the end, as the importer sorts a file */
		if (!trd_reserve(r, (void **)&r->events, &r->cap_events, r->n_events,
				 sizeof(*r->events)))
			return;
		r->events[r->n_events++] = *ev;
		trd_note_held(r, 1);
		return;
	}
	l = trd_lane_get(r, ev->uuid);
	if (!l)
		return;
	if (l->released && ev->ts < l->last_ts) {
		r->st.late_events++;
		trd_problem(r, "track %" PRIu64 ": event at ts %" PRIu64 " comes after this track's "
			    "events up to ts %" PRIu64 " were matched (more than %zu events out of "
			    "order): matched late", ev->uuid, ev->ts, l->last_ts, r->opts.reorder);
		trd_dispatch(r, l, ev);
		return;
	}
	if (!trd_win_insert(r, l, ev))
		return;
	trd_note_held(r, 1);
	if (l->tail - l->head <= r->opts.reorder)
		return;
	out = l->win[l->head++];
	trd_note_held(r, -1);
	trd_dispatch(r, l, &out);
}

/* Every event still held, in (ts, file order) over all tracks, as the importer's sorter. */
static void trd_drain_events(struct trd *r)
{
	struct trd_lane *l;
	uint32_t i;
	size_t k;

	for (i = 0; i < r->lanes.n && !r->oom; i++) {
		l = ((struct trd_lane_ent *)pw_table_at(&r->lanes, i))->lane;
		for (k = l->head; k < l->tail; k++) {
			if (!trd_reserve(r, (void **)&r->events, &r->cap_events, r->n_events,
					 sizeof(*r->events)))
				return;
			r->events[r->n_events++] = l->win[k];
		}
		l->head = l->tail = 0;
	}
	if (r->n_events)
		qsort(r->events, r->n_events, sizeof(*r->events), trd_cmp_event);
	for (k = 0; k < r->n_events && !r->oom && !r->stop; k++) {
		l = trd_lane_get(r, r->events[k].uuid);
		if (l)
			trd_dispatch(r, l, &r->events[k]);
	}
	r->events_held = 0;
}

void trd_slices_finish(struct trd *r)
{
	struct trace_stream_sample smp;
	struct trd_lane *l;
	uint32_t i;

	trd_drain_events(r);
	for (size_t k = 0; r->orphans && k < r->orphans->n && !r->stop; k++) {
		smp = r->orphans->v[k]; /* no thread track: no slice */
		smp.where = TRACE_STREAM_OUTSIDE;
		trd_deliver_sample(r, &smp);
	}
	if (r->orphans) {
		r->samples_held -= r->orphans->n;
		r->orphans->n = 0;
	}
	for (i = 0; i < r->lanes.n && !r->oom && !r->stop; i++) {
		l = ((struct trd_lane_ent *)pw_table_at(&r->lanes, i))->lane;
		trd_release_samples(r, l, 0, true);
		while (l->depth && !r->stop) { /* never ended: innermost first */
			struct trd_open o = l->stack[--l->depth];

			trd_deliver_slice(r, l, l->depth, &o, -1);
		}
	}
}

void trd_slices_free(struct trd *r)
{
	for (uint32_t i = 0; i < r->lanes.n; i++)
		trd_lane_free(((struct trd_lane_ent *)pw_table_at(&r->lanes, i))->lane);
	pw_table_free(&r->lanes);
	free(r->events);
	if (r->orphans)
		free(r->orphans->v);
	free(r->orphans);
}
