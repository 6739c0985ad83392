// SPDX-License-Identifier: MIT
/*
 * Per-function exact figures of a session (see func_stats.h): one entry per
 * (thread, function, agent's id), kept in a dense array and found through an
 * open-addressing table of their indices (an entry is ~3 KiB: a table of
 * entries was mostly empty ones, 24 KiB for a process of a tree with two
 * functions, kept until the session's end). The agent sends
 * cumulative figures per id of its own, so an entry keeps the latest; its
 * histogram buckets arrive as 32-bit counters that wrap, so it adds up their
 * differences. Two ids of an agent can be one function of the trace (a
 * library loaded again after dlclose, the same name in two libraries): each
 * keeps its own entry, and the rows per thread add them up.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/func_stats.h"

struct stat_entry {
	uint32_t tid, func_id; /* func_id never 0: the session's ids start at 1 */
	uint32_t agent_id;     /* the agent's id of it (its figures are per id); 0 once merged */
	uint64_t base_entered, base_exited, base_untimed, base_unrecorded, base_filtered; /* earlier agents' */
	uint64_t base_values_dropped;
	uint64_t base_total, base_self, base_max;
	struct decoded_func_agg last;  /* the current agent's latest (ns already) */
	uint32_t last_raw[AGG_BUCKETS];
	uint64_t hist[AGG_BUCKETS];
	double ns_per_tick;
};

struct thread_drops {
	uint32_t tid;
	struct decoded_thread_drops base, last;
	uint64_t stamp_ns; /* func_stats_stamp's value at its last aggregates */
};

struct func_stats {
	struct stat_entry *entries; /* n of them, room for entries_cap */
	uint32_t *slots;            /* n_slots of them (a power of two): an entry's index + 1, 0 empty */
	size_t n_slots, n, entries_cap;
	struct thread_drops *threads;
	size_t n_threads, cap_threads;
	uint64_t stamp_ns; /* func_stats_stamp: given to the threads reporting from now on */
	bool split;        /* some (thread, function) has entries of two agent ids */
};

struct func_stats *func_stats_new(void)
{
	return calloc(1, sizeof(struct func_stats));
}

void func_stats_free(struct func_stats *fs)
{
	if (!fs)
		return;
	free(fs->entries);
	free(fs->slots);
	free(fs->threads);
	free(fs);
}

static size_t slot_of(uint32_t tid, uint32_t func_id, size_t cap)
{
	uint64_t h = ((uint64_t)tid << 32 | func_id) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (cap - 1);
}

#define FUNC_STATS_FIRST_SLOTS 8
#define FUNC_STATS_FIRST_ENTRIES 2

/* Twice the slots, every entry placed again. */
static int grow_slots(struct func_stats *fs)
{
	size_t ncap = fs->n_slots ? fs->n_slots * 2 : FUNC_STATS_FIRST_SLOTS;
	uint32_t *slots = ncap <= UINT32_MAX ? calloc(ncap, sizeof(*slots)) : NULL;

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < fs->n; i++) {
		const struct stat_entry *e = &fs->entries[i];
		size_t k;

		for (k = slot_of(e->tid, e->func_id, ncap); slots[k]; k = (k + 1) & (ncap - 1))
			;
		slots[k] = (uint32_t)i + 1;
	}
	free(fs->slots);
	fs->slots = slots;
	fs->n_slots = ncap;
	return 0;
}

/* Room for one more entry (entries move: no pointer into them is kept across this). */
static int entries_room(struct func_stats *fs)
{
	size_t ncap;
	struct stat_entry *v;

	if (fs->n < fs->entries_cap)
		return 0;
	ncap = fs->entries_cap ? fs->entries_cap * 2 : FUNC_STATS_FIRST_ENTRIES;
	v = realloc(fs->entries, ncap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	fs->entries = v;
	fs->entries_cap = ncap;
	return 0;
}

/*
 * The entry of (tid, func_id, agent_id), made if new. The slot is by thread
 * and function only: one function's entries of several ids share a probe
 * chain, where a new one finds the others (fs->split).
 */
static struct stat_entry *entry_get(struct func_stats *fs, uint32_t tid, uint32_t func_id,
				    uint32_t agent_id)
{
	bool other = false;
	struct stat_entry *e;
	size_t k;

	if ((fs->n + 1) * 2 > fs->n_slots && grow_slots(fs))
		return NULL;
	for (k = slot_of(tid, func_id, fs->n_slots); fs->slots[k]; k = (k + 1) & (fs->n_slots - 1)) {
		e = &fs->entries[fs->slots[k] - 1];
		if (e->tid != tid || e->func_id != func_id)
			continue;
		if (e->agent_id == agent_id)
			return e;
		other = true;
	}
	if (entries_room(fs))
		return NULL;
	e = &fs->entries[fs->n];
	memset(e, 0, sizeof(*e));
	e->tid = tid;
	e->func_id = func_id;
	e->agent_id = agent_id;
	fs->split |= other;
	fs->slots[k] = (uint32_t)++fs->n;
	return e;
}

int func_stats_update(struct func_stats *fs, uint32_t tid, uint32_t func_id,
		      const struct decoded_func_agg *fa, double ns_per_tick)
{
	struct stat_entry *e = entry_get(fs, tid, func_id, fa->func_id);

	if (!e)
		return -ENOMEM;
	for (int b = 0; b < AGG_BUCKETS; b++) {
		e->hist[b] += (uint32_t)(fa->hist[b] - e->last_raw[b]); /* modulo 2^32 */
		e->last_raw[b] = fa->hist[b];
	}
	e->last = *fa;
	e->last.func_id = func_id;
	if (ns_per_tick > 0)
		e->ns_per_tick = ns_per_tick;
	return 0;
}

int func_stats_add_buckets(struct func_stats *fs, uint32_t tid, uint32_t func_id,
			   uint32_t agent_id, const uint64_t *counts)
{
	struct stat_entry *e = entry_get(fs, tid, func_id, agent_id);

	if (!e)
		return -ENOMEM;
	for (int b = 0; b < AGG_BUCKETS; b++)
		e->hist[b] += counts[b];
	return 0;
}

void func_stats_new_agent(struct func_stats *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		struct stat_entry *e = &fs->entries[i];

		e->base_entered += e->last.entered;
		e->base_exited += e->last.exited;
		e->base_untimed += e->last.untimed;
		e->base_unrecorded += e->last.unrecorded;
		e->base_filtered += e->last.filtered;
		e->base_values_dropped += e->last.values_dropped;
		e->base_total += e->last.total_ns;
		e->base_self += e->last.self_ns;
		if (e->last.max_ns > e->base_max)
			e->base_max = e->last.max_ns;
		memset(&e->last, 0, sizeof(e->last));
		memset(e->last_raw, 0, sizeof(e->last_raw));
	}
	for (size_t i = 0; i < fs->n_threads; i++) {
		struct thread_drops *t = &fs->threads[i];

		for (int r = 0; r < AGG_DROP_REASONS; r++)
			t->base.by_reason[r] += t->last.by_reason[r];
		t->base.unattributed += t->last.unattributed;
		for (int r = 0; r < AGG_FILTER_REASONS; r++)
			t->base.filtered_by[r] += t->last.filtered_by[r];
		memset(&t->last, 0, sizeof(t->last));
	}
}

static void drops_add(struct decoded_thread_drops *d, const struct decoded_thread_drops *a)
{
	for (int r = 0; r < AGG_DROP_REASONS; r++)
		d->by_reason[r] += a->by_reason[r];
	d->unattributed += a->unattributed;
	for (int r = 0; r < AGG_FILTER_REASONS; r++)
		d->filtered_by[r] += a->filtered_by[r];
}

/* Into dst's earlier-agents figures (base): what src holds is final for the merge. */
static void entry_merge(struct stat_entry *d, const struct stat_entry *e)
{
	d->base_entered += e->base_entered + e->last.entered;
	d->base_exited += e->base_exited + e->last.exited;
	d->base_untimed += e->base_untimed + e->last.untimed;
	d->base_unrecorded += e->base_unrecorded + e->last.unrecorded;
	d->base_filtered += e->base_filtered + e->last.filtered;
	d->base_values_dropped += e->base_values_dropped + e->last.values_dropped;
	d->base_total += e->base_total + e->last.total_ns;
	d->base_self += e->base_self + e->last.self_ns;
	if (e->base_max > d->base_max)
		d->base_max = e->base_max;
	if (e->last.max_ns > d->base_max)
		d->base_max = e->last.max_ns;
	for (int b = 0; b < AGG_BUCKETS; b++)
		d->hist[b] += e->hist[b];
	if (e->ns_per_tick > 0)
		d->ns_per_tick = e->ns_per_tick;
}

int func_stats_merge(struct func_stats *dst, const struct func_stats *src)
{
	for (size_t i = 0; i < src->n; i++) {
		const struct stat_entry *e = &src->entries[i];
		struct stat_entry *d;

		d = entry_get(dst, e->tid, e->func_id, 0); /* what src holds is final: one entry */
		if (!d)
			return -ENOMEM;
		entry_merge(d, e);
	}
	for (size_t i = 0; i < src->n_threads; i++) {
		const struct thread_drops *t = &src->threads[i];
		struct decoded_thread_drops sum = t->base;

		drops_add(&sum, &t->last);
		func_stats_thread_drops(dst, t->tid, &(struct decoded_thread_drops){ 0 });
		for (size_t k = 0; k < dst->n_threads; k++)
			if (dst->threads[k].tid == t->tid)
				drops_add(&dst->threads[k].base, &sum);
	}
	return 0;
}

void func_stats_thread_drops(struct func_stats *fs, uint32_t tid,
			     const struct decoded_thread_drops *td)
{
	size_t i;

	for (i = 0; i < fs->n_threads && fs->threads[i].tid != tid; i++)
		;
	if (i == fs->n_threads) {
		if (fs->n_threads == fs->cap_threads) {
			size_t ncap = fs->cap_threads ? fs->cap_threads * 2 : 16;
			struct thread_drops *n = realloc(fs->threads, ncap * sizeof(*n));

			if (!n)
				return;
			fs->threads = n;
			fs->cap_threads = ncap;
		}
		fs->threads[fs->n_threads++] = (struct thread_drops){ .tid = tid };
	}
	fs->threads[i].last = *td;
	fs->threads[i].stamp_ns = fs->stamp_ns;
}

/*
 * The duration below which `fraction` of the calls in hist fall: the middle
 * of its bucket, in ns. Over the histogram's own count: the buckets of calls
 * on the timeline come from their events, which may be a moment ahead of, or
 * behind, the agent's count of calls.
 */
static uint64_t percentile_ns(const uint64_t *hist, double fraction, double ns_per_tick)
{
	uint64_t n = 0, rank, seen = 0;

	for (uint32_t b = 0; b < AGG_BUCKETS; b++)
		n += hist[b];
	rank = (uint64_t)(fraction * (double)n);
	if (!n)
		return 0;
	if (rank >= n)
		rank = n - 1;
	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		seen += hist[b];
		if (seen > rank) {
			uint64_t lo = agg_bucket_low(b), hi = agg_bucket_low(b + 1);

			return (uint64_t)((double)(lo + (hi > lo + 1 ? (hi - lo) / 2 : 0)) * ns_per_tick);
		}
	}
	return 0;
}

struct totals_acc {
	struct func_totals t;
	uint64_t hist[AGG_BUCKETS];
	double ns_per_tick;
};

static void acc_add(struct totals_acc *a, const struct stat_entry *e)
{
	uint64_t entered = e->base_entered + e->last.entered;
	uint64_t exited = e->base_exited + e->last.exited;
	uint64_t untimed = e->base_untimed + e->last.untimed;

	a->t.calls += entered + untimed;
	a->t.exited += exited;
	a->t.open += entered - exited;
	a->t.dropped += untimed + e->base_unrecorded + e->last.unrecorded;
	a->t.filtered += e->base_filtered + e->last.filtered;
	a->t.values_dropped += e->base_values_dropped + e->last.values_dropped;
	a->t.total_ns += e->base_total + e->last.total_ns;
	a->t.self_ns += e->base_self + e->last.self_ns;
	if (e->last.max_ns > a->t.max_ns)
		a->t.max_ns = e->last.max_ns;
	if (e->base_max > a->t.max_ns)
		a->t.max_ns = e->base_max;
	for (int b = 0; b < AGG_BUCKETS; b++)
		a->hist[b] += e->hist[b];
	if (e->ns_per_tick > 0)
		a->ns_per_tick = e->ns_per_tick;
}

static int by_total_desc(const void *x, const void *y)
{
	const struct func_totals *a = x, *b = y;

	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	return a->func_id != b->func_id ? (a->func_id < b->func_id ? -1 : 1) :
					  (a->tid < b->tid ? -1 : a->tid > b->tid);
}

/* acc index + 1 of each function id (ids are dense), for the totals over threads. */
static long *index_by_func(const struct func_stats *fs)
{
	uint32_t max_id = 0;

	for (size_t i = 0; i < fs->n; i++)
		if (fs->entries[i].func_id > max_id)
			max_id = fs->entries[i].func_id;
	return calloc((size_t)max_id + 1, sizeof(long));
}

/*
 * fs with each (thread, function)'s entries of several agent ids made one
 * (merged figures are base + last, as every view sums them), for what shows
 * one row per thread and function; NULL when fs needs none, or memory is
 * short (then such a function's rows come once per id).
 */
static struct func_stats *collapsed(const struct func_stats *fs)
{
	struct func_stats *c;

	if (!fs->split || !(c = func_stats_new()))
		return NULL;
	if (func_stats_merge(c, fs)) {
		func_stats_free(c);
		return NULL;
	}
	return c;
}

long func_stats_totals(const struct func_stats *fs, int per_thread, struct func_totals **out)
{
	struct func_stats *one = per_thread ? collapsed(fs) : NULL;
	struct totals_acc *acc;
	long *index, n = 0;
	struct func_totals *res = NULL;

	if (one) {
		n = func_stats_totals(one, per_thread, out);
		func_stats_free(one);
		return n;
	}
	acc = calloc(fs->n ? fs->n : 1, sizeof(*acc));
	index = per_thread ? NULL : index_by_func(fs);
	if (!acc || (!per_thread && !index))
		goto fail;
	for (size_t i = 0; i < fs->n; i++) {
		const struct stat_entry *e = &fs->entries[i];
		long k;

		k = per_thread ? 0 : index[e->func_id];
		if (!k) {
			k = ++n;
			acc[k - 1].t.func_id = e->func_id;
			acc[k - 1].t.tid = per_thread ? e->tid : 0;
			if (!per_thread)
				index[e->func_id] = k;
		}
		acc_add(&acc[k - 1], e);
	}
	res = malloc((size_t)(n ? n : 1) * sizeof(*res));
	if (!res)
		goto fail;
	for (long i = 0; i < n; i++) {
		struct totals_acc *a = &acc[i];

		a->t.p50_ns = percentile_ns(a->hist, 0.50, a->ns_per_tick);
		a->t.p90_ns = percentile_ns(a->hist, 0.90, a->ns_per_tick);
		a->t.p99_ns = percentile_ns(a->hist, 0.99, a->ns_per_tick);
		/* a bucket's middle can lie past the longest call in it: never above the max */
		a->t.p50_ns = a->t.p50_ns < a->t.max_ns ? a->t.p50_ns : a->t.max_ns;
		a->t.p90_ns = a->t.p90_ns < a->t.max_ns ? a->t.p90_ns : a->t.max_ns;
		a->t.p99_ns = a->t.p99_ns < a->t.max_ns ? a->t.p99_ns : a->t.max_ns;
		res[i] = a->t;
	}
	free(acc);
	free(index);
	qsort(res, (size_t)n, sizeof(*res), by_total_desc);
	*out = res;
	return n;
fail:
	free(acc);
	free(index);
	return -ENOMEM;
}

void func_stats_summarize(const struct func_stats *fs, struct func_stats_summary *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (size_t i = 0; i < fs->n; i++) {
		const struct stat_entry *e = &fs->entries[i];

		sum->made += e->base_entered + e->last.entered + e->base_untimed + e->last.untimed;
		sum->open += e->base_entered + e->last.entered - e->base_exited - e->last.exited;
		sum->values_dropped += e->base_values_dropped + e->last.values_dropped;
	}
	for (size_t i = 0; i < fs->n_threads; i++) {
		const struct thread_drops *t = &fs->threads[i];

		for (int r = 0; r < AGG_DROP_REASONS; r++) {
			sum->dropped_by_reason[r] += t->base.by_reason[r] + t->last.by_reason[r];
			sum->dropped += t->base.by_reason[r] + t->last.by_reason[r];
		}
		sum->unattributed += t->base.unattributed + t->last.unattributed;
		for (int r = 0; r < AGG_FILTER_REASONS; r++) {
			sum->filtered_by_reason[r] += t->base.filtered_by[r] + t->last.filtered_by[r];
			sum->filtered += t->base.filtered_by[r] + t->last.filtered_by[r];
		}
	}
	sum->made += sum->unattributed;
	/* a running thread's counters are read a moment apart: never below 0 */
	sum->recorded = sum->made > sum->dropped + sum->filtered ?
				sum->made - sum->dropped - sum->filtered :
				0;
}

uint64_t func_stats_min_duration_for(const struct func_stats *fs, uint64_t max_calls)
{
	uint64_t hist[AGG_BUCKETS] = { 0 }, kept = 0;
	double ns_per_tick = 0;
	uint32_t b;

	for (size_t i = 0; i < fs->n; i++) {
		const struct stat_entry *e = &fs->entries[i];

		for (b = 0; b < AGG_BUCKETS; b++)
			hist[b] += e->hist[b];
		if (e->ns_per_tick > 0)
			ns_per_tick = e->ns_per_tick;
	}
	/* the longest calls first: the lowest bucket whose calls and all longer ones still fit */
	for (b = AGG_BUCKETS; b > 0 && kept + hist[b - 1] <= max_calls; b--)
		kept += hist[b - 1];
	if (b == 0 || ns_per_tick <= 0)
		return 0;
	return (uint64_t)((double)agg_bucket_low(b) * ns_per_tick + 0.999);
}

void func_stats_stamp(struct func_stats *fs, uint64_t now_ns)
{
	fs->stamp_ns = now_ns;
}

void func_stats_each(const struct func_stats *fs,
		     void (*fn)(void *ctx, const struct func_stats_view *v), void *ctx)
{
	struct func_stats *one = collapsed(fs);

	if (one) {
		func_stats_each(one, fn, ctx);
		func_stats_free(one);
		return;
	}
	for (size_t i = 0; i < fs->n; i++) {
		const struct stat_entry *e = &fs->entries[i];
		struct func_stats_view v = { .hist = e->hist, .ns_per_tick = e->ns_per_tick };
		uint64_t entered = e->base_entered + e->last.entered;

		v.t.func_id = e->func_id;
		v.t.tid = e->tid;
		v.t.exited = e->base_exited + e->last.exited;
		v.t.calls = entered + e->base_untimed + e->last.untimed;
		v.t.open = entered - v.t.exited;
		v.t.dropped = e->base_untimed + e->last.untimed + e->base_unrecorded +
			      e->last.unrecorded;
		v.t.filtered = e->base_filtered + e->last.filtered;
		v.t.values_dropped = e->base_values_dropped + e->last.values_dropped;
		v.t.total_ns = e->base_total + e->last.total_ns;
		v.t.self_ns = e->base_self + e->last.self_ns;
		v.t.max_ns = e->base_max > e->last.max_ns ? e->base_max : e->last.max_ns;
		fn(ctx, &v);
	}
}

void func_stats_each_thread(const struct func_stats *fs,
			    void (*fn)(void *ctx, uint32_t tid, uint64_t stamp_ns), void *ctx)
{
	for (size_t i = 0; i < fs->n_threads; i++)
		fn(ctx, fs->threads[i].tid, fs->threads[i].stamp_ns);
}
