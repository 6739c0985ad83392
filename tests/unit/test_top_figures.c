// SPDX-License-Identifier: MIT
/*
 * Unit tests for profctl/top_figures.c: rates divide each thread's
 * difference by that thread's own time between reports, percentiles and
 * the interval's max come from the histograms' differences, session totals
 * are the cumulative figures, an answer that does not hold together is
 * refused whole, profd's cached answer changes nothing, and the sort keys
 * order the rows.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "profctl/top_figures.h"
#include "proto/func_aggregates.h"
#include "tests/unit/unit.h"

#define SEC 1000000000ull

/* A hand-made answer: up to 4 functions over up to 4 threads. */
struct answer {
	Profd__LiveFigures m;
	Profd__LiveFunction fn[4], *fns[4];
	Profd__LiveThread th[4], *ths[4];
	uint32_t bucket[4][4], index[4][4];
	uint64_t count[4][4], calls[4][4], total[4][4], self[4][4];
};

static void answer_init(struct answer *a, uint64_t now_ns, size_t n_threads)
{
	memset(a, 0, sizeof(*a));
	profd__live_figures__init(&a->m);
	a->m.now_ns = now_ns;
	a->m.target_pid = 42;
	a->m.target = "svc";
	a->m.ns_per_tick = 1.0;
	a->m.threads = a->ths;
	a->m.n_threads = n_threads;
	a->m.functions = a->fns;
	for (size_t t = 0; t < 4; t++) {
		profd__live_thread__init(&a->th[t]);
		a->th[t].tid = 100 + (uint32_t)t;
		a->ths[t] = &a->th[t];
	}
}

/* Function `id` (named "fN") with its totals and one histogram bucket. */
static Profd__LiveFunction *add_fn(struct answer *a, uint32_t id, uint64_t exited,
				   uint64_t total_ns, uint64_t max_ns, uint32_t bucket)
{
	size_t k = a->m.n_functions++;
	Profd__LiveFunction *f = &a->fn[k];
	static char names[4][8];

	profd__live_function__init(f);
	snprintf(names[id % 4], sizeof(names[0]), "f%u", id);
	f->id = id;
	f->name = names[id % 4];
	f->calls = f->exited = exited;
	f->total_ns = f->self_ns = total_ns;
	f->max_ns = max_ns;
	a->bucket[k][0] = bucket;
	a->count[k][0] = exited;
	f->hist_bucket = a->bucket[k];
	f->hist_count = a->count[k];
	f->n_hist_bucket = f->n_hist_count = exited ? 1 : 0;
	f->thread_index = a->index[k];
	f->thread_calls = a->calls[k];
	f->thread_total_ns = a->total[k];
	f->thread_self_ns = a->self[k];
	a->fns[k] = f;
	return f;
}

/* The function's figures on thread t (index into the answer's threads). */
static void add_part(struct answer *a, Profd__LiveFunction *f, uint32_t t, uint64_t calls,
		     uint64_t total_ns)
{
	size_t k = (size_t)(f - a->fn), i = f->n_thread_index++;

	a->index[k][i] = t;
	a->calls[k][i] = calls;
	a->total[k][i] = a->self[k][i] = total_ns;
	f->n_thread_calls = f->n_thread_total_ns = f->n_thread_self_ns = f->n_thread_index;
}

static const struct top_row *row_named(struct top_figures *f, bool totals, const char *name)
{
	const struct top_row *rows;
	struct top_header h;
	size_t n = top_figures_rows(f, totals, TOP_SORT_TOTAL, &rows, &h);

	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	return NULL;
}

#define CHECK_NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

/*
 * Thread 0 reported 1 s apart, thread 1 only 0.75 s apart (its phase): both
 * ran 1000 calls/s, which is what a per-thread division gives; dividing by
 * the request interval would say 1750.
 */
static void test_rates_per_thread_time(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	Profd__LiveFunction *fn;
	const struct top_row *r;

	answer_init(&a, 10 * SEC, 2);
	a.th[0].as_of_ns = 10 * SEC;
	a.th[1].as_of_ns = 10 * SEC;
	fn = add_fn(&a, 1, 2000, 2000000, 5000, 40);
	add_part(&a, fn, 0, 1000, 1000000);
	add_part(&a, fn, 1, 1000, 1000000);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);
	CHECK(!top_figures_ready(f));

	answer_init(&b, 11 * SEC, 2);
	b.th[0].as_of_ns = 11 * SEC;
	b.th[1].as_of_ns = 10 * SEC + 750000000ull;
	fn = add_fn(&b, 1, 3750, 3750000, 5000, 40);
	add_part(&b, fn, 0, 2000, 2000000);
	add_part(&b, fn, 1, 1750, 1750000);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	CHECK(top_figures_ready(f));
	r = row_named(f, false, "f1");
	CHECK(r != NULL);
	if (!r)
		goto out;
	CHECK_NEAR(r->calls, 2000, 1e-6);
	CHECK_NEAR(r->total_ns, 2000000, 1e-3); /* 1 ms per call, 2000 calls/s */
	CHECK_EQ_U64(r->avg_ns, 1000);
	r = row_named(f, true, "f1");
	CHECK(r && r->calls == 3750);
out:
	top_figures_free(f);
}

/* A thread not in the last answer counts from that answer's time. */
static void test_new_thread_counts_from_last_answer(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	Profd__LiveFunction *fn;
	const struct top_row *r;

	answer_init(&a, 10 * SEC, 1);
	a.th[0].as_of_ns = 10 * SEC;
	fn = add_fn(&a, 1, 100, 100000, 1000, 30);
	add_part(&a, fn, 0, 100, 100000);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);
	answer_init(&b, 12 * SEC, 2);
	b.th[0].as_of_ns = 10 * SEC; /* not reported since: unchanged, no rate of its own */
	b.th[1].as_of_ns = 11 * SEC;
	fn = add_fn(&b, 1, 600, 600000, 1000, 30);
	add_part(&b, fn, 0, 100, 100000);
	add_part(&b, fn, 1, 500, 500000); /* 500 calls in the 1 s since the last answer */
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	r = row_named(f, false, "f1");
	CHECK(r && fabs(r->calls - 500) < 1e-6);
	top_figures_free(f);
}

/* p50/p99 over the interval only: the calls before it do not weigh. */
static void test_percentiles_from_differences(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	Profd__LiveFunction *fn;
	const struct top_row *r;
	uint64_t slow = agg_bucket_middle(60);

	answer_init(&a, 10 * SEC, 1);
	a.th[0].as_of_ns = 10 * SEC;
	fn = add_fn(&a, 1, 1000, 1000 * 100, 1u << 20, 20); /* 1000 fast calls before */
	add_part(&a, fn, 0, 1000, 1000 * 100);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);

	answer_init(&b, 11 * SEC, 1);
	b.th[0].as_of_ns = 11 * SEC;
	fn = add_fn(&b, 1, 1010, 1000 * 100 + 10 * slow, 1u << 20, 20);
	b.bucket[0][1] = 60; /* and 10 slow ones in the interval */
	b.count[0][1] = 10;
	fn->n_hist_bucket = fn->n_hist_count = 2;
	add_part(&b, fn, 0, 1010, 1000 * 100 + 10 * slow);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	r = row_named(f, false, "f1");
	CHECK(r != NULL);
	if (r) {
		CHECK_EQ_U64(r->p50_ns, slow);
		CHECK_EQ_U64(r->p99_ns, slow);
		CHECK(r->max_estimated); /* the session's max did not rise: read off the bucket */
		CHECK(r->max_ns <= agg_bucket_low(61) && r->max_ns >= agg_bucket_low(60));
	}
	r = row_named(f, true, "f1"); /* over the session the fast ones are the median */
	CHECK(r && r->p50_ns == agg_bucket_middle(20));
	top_figures_free(f);
}

/* A rise of the session's max is the interval's max, exactly. */
static void test_max_exact_when_it_rose(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	Profd__LiveFunction *fn;
	const struct top_row *r;

	answer_init(&a, 10 * SEC, 1);
	fn = add_fn(&a, 1, 10, 1000, 200, 30);
	add_part(&a, fn, 0, 10, 1000);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);
	answer_init(&b, 11 * SEC, 1);
	b.th[0].as_of_ns = 11 * SEC;
	fn = add_fn(&b, 1, 20, 20000, 98765, 30);
	add_part(&b, fn, 0, 20, 20000);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	r = row_named(f, false, "f1");
	CHECK(r && r->max_ns == 98765 && !r->max_estimated);
	top_figures_free(f);
}

/* Each way an answer can fail to hold together refuses it whole. */
static void test_bad_answers_refused(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a;
	Profd__LiveFunction *fn;

	answer_init(&a, SEC, 1);
	fn = add_fn(&a, 1, 10, 1000, 200, 30);
	add_part(&a, fn, 0, 10, 1000);
	a.index[0][0] = 1; /* thread index out of range */
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	a.index[0][0] = 0;
	a.bucket[0][0] = AGG_BUCKETS;
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	a.bucket[0][0] = 30;
	fn->n_hist_count = 0; /* buckets and counts of different lengths */
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	fn->n_hist_count = 1;
	fn->n_thread_self_ns = 0;
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	fn->n_thread_self_ns = 1;
	fn->id = 0;
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	fn->id = 1u << 30;
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	fn->id = 1;
	fn->name = NULL;
	CHECK_EQ_INT(top_figures_update(f, &a.m), -EBADMSG);
	fn->name = "f1";
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0); /* whole again */
	top_figures_free(f);
}

/* The same answer again (profd's cache) is not an interval: the last rows stay. */
static void test_cached_answer_changes_nothing(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	Profd__LiveFunction *fn;
	const struct top_row *r;

	answer_init(&a, 10 * SEC, 1);
	a.th[0].as_of_ns = 10 * SEC;
	fn = add_fn(&a, 1, 0, 0, 0, 0);
	add_part(&a, fn, 0, 0, 0);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);
	answer_init(&b, 11 * SEC, 1);
	b.th[0].as_of_ns = 11 * SEC;
	fn = add_fn(&b, 1, 300, 3000, 20, 10);
	add_part(&b, fn, 0, 300, 3000);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	r = row_named(f, false, "f1");
	CHECK(r && fabs(r->calls - 300) < 1e-6);
	top_figures_free(f);
}

static void test_sort_keys(void)
{
	struct top_figures *f = top_figures_new();
	struct answer a, b;
	const struct top_row *rows;
	struct top_header h;
	Profd__LiveFunction *fn;

	answer_init(&a, 10 * SEC, 1);
	CHECK_EQ_INT(top_figures_update(f, &a.m), 0);
	answer_init(&b, 11 * SEC, 1);
	b.th[0].as_of_ns = 11 * SEC;
	fn = add_fn(&b, 1, 1000, 1000000, 2000, 30); /* many short calls */
	add_part(&b, fn, 0, 1000, 1000000);
	fn = add_fn(&b, 2, 10, 5000000, 600000, 70); /* few long ones: most time */
	add_part(&b, fn, 0, 10, 5000000);
	CHECK_EQ_INT(top_figures_update(f, &b.m), 0);
	CHECK_EQ_INT(top_figures_rows(f, false, TOP_SORT_TOTAL, &rows, &h), 2);
	CHECK_EQ_STR(rows[0].name, "f2");
	top_figures_rows(f, false, TOP_SORT_CALLS, &rows, &h);
	CHECK_EQ_STR(rows[0].name, "f1");
	top_figures_rows(f, false, TOP_SORT_AVG, &rows, &h);
	CHECK_EQ_STR(rows[0].name, "f2");
	CHECK_EQ_INT(h.pid, 42);
	CHECK_EQ_INT(top_sort_parse("p99"), TOP_SORT_P99);
	CHECK_EQ_INT(top_sort_parse("off-cpu"), TOP_SORT_OFF_CPU);
	CHECK_EQ_INT(top_sort_parse("nope"), -EINVAL);
	CHECK_EQ_STR(top_sort_name(TOP_SORT_SELF), "self");
	top_figures_free(f);
}

int main(void)
{
	RUN_TEST(test_rates_per_thread_time);
	RUN_TEST(test_new_thread_counts_from_last_answer);
	RUN_TEST(test_percentiles_from_differences);
	RUN_TEST(test_max_exact_when_it_rose);
	RUN_TEST(test_bad_answers_refused);
	RUN_TEST(test_cached_answer_changes_nothing);
	RUN_TEST(test_sort_keys);
	return unit_summary();
}
