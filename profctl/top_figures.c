// SPDX-License-Identifier: MIT
/*
 * profctl top's figures (see top_figures.h). Keeps, per function, what the
 * last answer said (cumulative sums, histogram, each thread's part) and, per
 * thread, when its figures were reported; the next answer's differences
 * give the rows. A thread's difference is divided by the time between its
 * own two reports, not by the time between the requests: threads report
 * every 250 ms on their own phase, so a 1 s window holds 3 or 4 of a
 * thread's reports and the request times alone would be 25 % off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/top_figures.h"
#include "proto/func_aggregates.h"

/* Function ids are the session's dense ids: anything past this is not an answer from profd. */
#define TOP_ID_MAX (1u << 22)

struct thread_mark {
	uint32_t tid;
	uint64_t as_of_ns;
};

/* A function's figures on one thread, as of that thread's report. */
struct thread_part {
	uint32_t tid;
	uint64_t calls, total_ns, self_ns;
};

struct func_state {
	uint32_t id;
	char *name;
	uint64_t calls, exited, total_ns, self_ns, max_ns, off_cpu_ns;
	uint64_t hist[AGG_BUCKETS];
	struct thread_part *parts; /* sorted by tid */
	size_t n_parts;
	struct top_row rate, total;
	unsigned answer;           /* the answer it was last in */
};

struct top_figures {
	struct func_state **by_id; /* index: function id */
	uint32_t id_cap;
	struct func_state **list;  /* every function seen, for the rows */
	size_t n_list, cap_list;
	struct thread_mark *threads; /* the last answer's, sorted by tid */
	size_t n_threads;
	unsigned answers;
	uint64_t first_ns, now_ns;
	uint64_t events, drops, samples, overhead_samples;
	struct top_header rate_h, total_h;
	char *target;
	struct top_row *rows;
	size_t cap_rows;
};

struct top_figures *top_figures_new(void)
{
	return calloc(1, sizeof(struct top_figures));
}

void top_figures_free(struct top_figures *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_list; i++) {
		free(f->list[i]->name);
		free(f->list[i]->parts);
		free(f->list[i]);
	}
	free(f->list);
	free(f->by_id);
	free(f->threads);
	free(f->target);
	free(f->rows);
	free(f);
}

/* ---- checks: profd's answer is used only once it holds together ------------------------ */

static bool function_valid(const Profd__LiveFunction *fn, size_t n_threads)
{
	if (!fn->id || fn->id >= TOP_ID_MAX || !fn->name || fn->n_hist_bucket != fn->n_hist_count)
		return false;
	for (size_t k = 0; k < fn->n_hist_bucket; k++)
		if (fn->hist_bucket[k] >= AGG_BUCKETS || (k && fn->hist_bucket[k] <= fn->hist_bucket[k - 1]))
			return false;
	if (fn->n_thread_calls != fn->n_thread_index || fn->n_thread_total_ns != fn->n_thread_index ||
	    fn->n_thread_self_ns != fn->n_thread_index)
		return false;
	for (size_t k = 0; k < fn->n_thread_index; k++)
		if (fn->thread_index[k] >= n_threads)
			return false;
	return true;
}

static bool answer_valid(const Profd__LiveFigures *m)
{
	for (size_t i = 0; i < m->n_functions; i++)
		if (!function_valid(m->functions[i], m->n_threads))
			return false;
	return !(m->ns_per_tick < 0) && m->ns_per_tick < 1e6;
}

/* ---- lookups ---------------------------------------------------------------------------- */

static int by_tid(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* Both thread_mark and thread_part start with their tid. */
static const void *find_tid(const void *base, size_t n, size_t size, uint32_t tid)
{
	return n ? bsearch(&tid, base, n, size, by_tid) : NULL;
}

static struct func_state *func_get(struct top_figures *f, const Profd__LiveFunction *fn)
{
	struct func_state *s;

	if (fn->id >= f->id_cap) {
		uint32_t ncap = f->id_cap ? f->id_cap : 256;
		struct func_state **n;

		while (ncap <= fn->id)
			ncap *= 2;
		n = realloc(f->by_id, ncap * sizeof(*n));
		if (!n)
			return NULL;
		memset(n + f->id_cap, 0, (ncap - f->id_cap) * sizeof(*n));
		f->by_id = n;
		f->id_cap = ncap;
	}
	if (f->by_id[fn->id])
		return f->by_id[fn->id];
	if (f->n_list == f->cap_list) {
		size_t ncap = f->cap_list ? f->cap_list * 2 : 64;
		struct func_state **n = realloc(f->list, ncap * sizeof(*n));

		if (!n)
			return NULL;
		f->list = n;
		f->cap_list = ncap;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(fn->name))) {
		free(s);
		return NULL;
	}
	s->id = fn->id;
	f->list[f->n_list++] = s;
	f->by_id[fn->id] = s;
	return s;
}

/* ---- one function's rows ---------------------------------------------------------------- */

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Per second: each thread's difference over the time between its two reports. */
static void thread_rates(const struct top_figures *f, const struct func_state *s,
			 const Profd__LiveFunction *fn, const Profd__LiveFigures *m,
			 struct top_row *r)
{
	for (size_t k = 0; k < fn->n_thread_index; k++) {
		const Profd__LiveThread *t = m->threads[fn->thread_index[k]];
		const struct thread_mark *was = find_tid(f->threads, f->n_threads, sizeof(*was), t->tid);
		const struct thread_part *p = find_tid(s->parts, s->n_parts, sizeof(*p), t->tid);
		/* a thread new since the last answer: its figures cover the time since then */
		uint64_t from = was ? was->as_of_ns : f->now_ns;
		double dt;

		if (t->as_of_ns <= from)
			continue; /* not reported since: unchanged */
		dt = (double)(t->as_of_ns - from) / 1e9;
		r->calls += (double)sub0(fn->thread_calls[k], p ? p->calls : 0) / dt;
		r->total_ns += (double)sub0(fn->thread_total_ns[k], p ? p->total_ns : 0) / dt;
		r->self_ns += (double)sub0(fn->thread_self_ns[k], p ? p->self_ns : 0) / dt;
	}
}

/*
 * p50 and p99 of the durations counted in hist, the average of n calls of
 * total ns. The percentiles are over the histogram's own count: the buckets
 * of calls on the timeline come from profd's replay of their events, a
 * moment apart from the agent's count of calls.
 */
static void durations(struct top_row *r, const uint64_t *hist, uint64_t n, uint64_t total_ns,
		      double ns_per_tick)
{
	uint64_t in_hist = 0;
	uint32_t b50, b99;

	for (int b = 0; b < AGG_BUCKETS; b++)
		in_hist += hist[b];
	b50 = agg_percentile_bucket(hist, in_hist, 500);
	b99 = agg_percentile_bucket(hist, in_hist, 990);
	r->avg_ns = n ? total_ns / n : 0;
	r->p50_ns = b50 < AGG_BUCKETS ? (uint64_t)((double)agg_bucket_middle(b50) * ns_per_tick) : 0;
	r->p99_ns = b99 < AGG_BUCKETS ? (uint64_t)((double)agg_bucket_middle(b99) * ns_per_tick) : 0;
}

/* A bucket's middle can lie past the longest call in it: never above the max. */
static void cap_at_max(struct top_row *r)
{
	r->p50_ns = r->p50_ns < r->max_ns ? r->p50_ns : r->max_ns;
	r->p99_ns = r->p99_ns < r->max_ns ? r->p99_ns : r->max_ns;
	r->avg_ns = r->avg_ns < r->max_ns ? r->avg_ns : r->max_ns;
}

static double share(double part, double whole)
{
	if (whole <= 0)
		return -1;
	return part >= whole ? 1.0 : part / whole;
}

/*
 * The interval's longest call: exact when the session's maximum rose in it,
 * else at most the top of the highest bucket that gained calls.
 */
static void interval_max(struct top_row *r, const struct func_state *s,
			 const Profd__LiveFunction *fn, const uint64_t *delta, double ns_per_tick)
{
	int top = -1;

	for (int b = AGG_BUCKETS - 1; b >= 0 && top < 0; b--)
		if (delta[b])
			top = b;
	r->max_estimated = false;
	if (fn->max_ns > s->max_ns) {
		r->max_ns = fn->max_ns;
	} else if (top >= 0) {
		uint64_t hi = (uint64_t)((double)agg_bucket_low((uint32_t)top + 1) * ns_per_tick);

		r->max_ns = hi < fn->max_ns ? hi : fn->max_ns;
		r->max_estimated = true;
	} else {
		r->max_ns = 0;
	}
}

static void rate_row(const struct top_figures *f, struct func_state *s,
		     const Profd__LiveFunction *fn, const uint64_t *hist,
		     const Profd__LiveFigures *m)
{
	struct top_row *r = &s->rate;
	uint64_t delta[AGG_BUCKETS], n = 0, total = sub0(fn->total_ns, s->total_ns);

	memset(r, 0, sizeof(*r));
	thread_rates(f, s, fn, m, r);
	for (int b = 0; b < AGG_BUCKETS; b++)
		n += delta[b] = sub0(hist[b], s->hist[b]);
	durations(r, delta, n, total, m->ns_per_tick);
	interval_max(r, s, fn, delta, m->ns_per_tick);
	cap_at_max(r);
	r->off_cpu = m->sched ? share((double)sub0(fn->off_cpu_ns, s->off_cpu_ns), (double)total) : -1;
}

static void total_row(struct func_state *s, const Profd__LiveFunction *fn, const uint64_t *hist,
		      const Profd__LiveFigures *m)
{
	struct top_row *r = &s->total;

	memset(r, 0, sizeof(*r));
	r->calls = (double)fn->calls;
	r->total_ns = (double)fn->total_ns;
	r->self_ns = (double)fn->self_ns;
	r->max_ns = fn->max_ns;
	durations(r, hist, fn->exited, fn->total_ns, m->ns_per_tick);
	cap_at_max(r);
	r->off_cpu = m->sched ? share((double)fn->off_cpu_ns, (double)fn->total_ns) : -1;
}

/* Takes one function of the answer: its rows, then its state for the next one. */
static int take_function(struct top_figures *f, const Profd__LiveFunction *fn,
			 const Profd__LiveFigures *m)
{
	struct func_state *s = func_get(f, fn);
	uint64_t hist[AGG_BUCKETS] = { 0 };
	struct thread_part *parts;

	if (!s)
		return -ENOMEM;
	parts = malloc((fn->n_thread_index ? fn->n_thread_index : 1) * sizeof(*parts));
	if (!parts)
		return -ENOMEM;
	for (size_t k = 0; k < fn->n_hist_bucket; k++)
		hist[fn->hist_bucket[k]] = fn->hist_count[k];
	if (f->answers)
		rate_row(f, s, fn, hist, m);
	total_row(s, fn, hist, m);
	for (size_t k = 0; k < fn->n_thread_index; k++)
		parts[k] = (struct thread_part){ m->threads[fn->thread_index[k]]->tid,
						 fn->thread_calls[k], fn->thread_total_ns[k],
						 fn->thread_self_ns[k] };
	qsort(parts, fn->n_thread_index, sizeof(*parts), by_tid);
	free(s->parts);
	s->parts = parts;
	s->n_parts = fn->n_thread_index;
	s->calls = fn->calls;
	s->exited = fn->exited;
	s->total_ns = fn->total_ns;
	s->self_ns = fn->self_ns;
	s->max_ns = fn->max_ns;
	s->off_cpu_ns = fn->off_cpu_ns;
	memcpy(s->hist, hist, sizeof(hist));
	s->answer = f->answers + 1;
	s->rate.id = s->total.id = s->id;
	s->rate.name = s->total.name = s->name;
	return 0;
}

/* ---- the answer ------------------------------------------------------------------------- */

static void take_header(struct top_figures *f, const Profd__LiveFigures *m)
{
	double dt = f->answers && m->now_ns > f->now_ns ? (double)(m->now_ns - f->now_ns) / 1e9 : 0;
	double since = m->now_ns > f->first_ns ? (double)(m->now_ns - f->first_ns) / 1e9 : 0;
	struct top_header *h = &f->rate_h;

	h->pid = m->target_pid;
	h->target = f->target;
	h->processes = m->processes;
	h->interval_s = dt;
	h->events_per_s = dt > 0 ? (double)sub0(m->events, f->events) / dt : 0;
	h->drops_per_s = dt > 0 ? (double)sub0(m->events_dropped, f->drops) / dt : 0;
	h->drops = m->events_dropped;
	h->overhead = share((double)sub0(m->overhead_samples, f->overhead_samples),
			    (double)sub0(m->samples, f->samples));
	h->compute_ns = m->compute_ns;
	h->functions_called = (uint32_t)m->n_functions + m->functions_left_out;
	h->functions_left_out = m->functions_left_out;
	h->sched = m->sched;
	h->target_exited = m->target_exited;
	f->total_h = *h;
	f->total_h.interval_s = since;
	f->total_h.events_per_s = since > 0 ? (double)m->events / since : 0;
	f->total_h.drops_per_s = since > 0 ? (double)m->events_dropped / since : 0;
	f->total_h.overhead = share((double)m->overhead_samples, (double)m->samples);
}

static int take_threads(struct top_figures *f, const Profd__LiveFigures *m)
{
	struct thread_mark *t = malloc((m->n_threads ? m->n_threads : 1) * sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_threads; i++)
		t[i] = (struct thread_mark){ m->threads[i]->tid, m->threads[i]->as_of_ns };
	qsort(t, m->n_threads, sizeof(*t), by_tid);
	free(f->threads);
	f->threads = t;
	f->n_threads = m->n_threads;
	return 0;
}

int top_figures_update(struct top_figures *f, const Profd__LiveFigures *m)
{
	char *target;

	if (!answer_valid(m))
		return -EBADMSG;
	if (f->answers && m->now_ns <= f->now_ns)
		return 0; /* profd's last answer again (asked twice within its reuse time): nothing new */
	target = strdup(m->target ? m->target : "?");
	if (!target)
		return -ENOMEM;
	free(f->target);
	f->target = target;
	if (!f->answers)
		f->first_ns = m->now_ns;
	take_header(f, m);
	/* the thread marks are the last answer's until every function has its rows */
	for (size_t i = 0; i < m->n_functions; i++)
		if (take_function(f, m->functions[i], m))
			return -ENOMEM;
	if (take_threads(f, m))
		return -ENOMEM;
	f->answers++;
	f->now_ns = m->now_ns;
	f->events = m->events;
	f->drops = m->events_dropped;
	f->samples = m->samples;
	f->overhead_samples = m->overhead_samples;
	return 0;
}

bool top_figures_ready(const struct top_figures *f)
{
	return f->answers >= 2;
}

/* ---- rows ------------------------------------------------------------------------------- */

static double sort_value(const struct top_row *r, enum top_sort key)
{
	switch (key) {
	case TOP_SORT_CALLS: return r->calls;
	case TOP_SORT_SELF: return r->self_ns;
	case TOP_SORT_AVG: return (double)r->avg_ns;
	case TOP_SORT_P99: return (double)r->p99_ns;
	case TOP_SORT_OFF_CPU: return r->off_cpu > 0 ? r->off_cpu * r->total_ns : 0;
	default: return r->total_ns;
	}
}

static enum top_sort sort_key; /* for qsort's comparison; top_figures is not thread-safe anyway */

static int by_key_desc(const void *x, const void *y)
{
	const struct top_row *a = x, *b = y;
	double va = sort_value(a, sort_key), vb = sort_value(b, sort_key);

	if (va != vb)
		return va < vb ? 1 : -1;
	return strcmp(a->name, b->name);
}

size_t top_figures_rows(struct top_figures *f, bool totals, enum top_sort key,
			const struct top_row **rows, struct top_header *h)
{
	size_t n = 0;

	*h = totals ? f->total_h : f->rate_h;
	if (f->cap_rows < f->n_list) {
		struct top_row *r = realloc(f->rows, f->n_list * sizeof(*r));

		if (!r) {
			*rows = f->rows;
			return 0;
		}
		f->rows = r;
		f->cap_rows = f->n_list;
	}
	for (size_t i = 0; i < f->n_list; i++)
		if (f->list[i]->answer == f->answers)
			f->rows[n++] = totals ? f->list[i]->total : f->list[i]->rate;
	sort_key = key;
	qsort(f->rows, n, sizeof(*f->rows), by_key_desc);
	*rows = f->rows;
	return n;
}

static const char *const sort_names[TOP_SORTS] = {
	[TOP_SORT_TOTAL] = "total", [TOP_SORT_CALLS] = "calls", [TOP_SORT_SELF] = "self",
	[TOP_SORT_AVG] = "avg",     [TOP_SORT_P99] = "p99",     [TOP_SORT_OFF_CPU] = "off-cpu",
};

const char *top_sort_name(enum top_sort key)
{
	return key < TOP_SORTS ? sort_names[key] : "?";
}

int top_sort_parse(const char *name)
{
	for (int k = 0; k < TOP_SORTS; k++)
		if (strcmp(name, sort_names[k]) == 0)
			return k;
	return -EINVAL;
}
