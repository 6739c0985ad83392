// SPDX-License-Identifier: MIT
/*
 * profctl top's live figures (see session_live.h). One answer is built from
 * every process's exact figures (daemon/events/func_stats.h): per function,
 * the sums over its threads, its merged duration histogram and each thread's
 * calls, total and self, with the time each thread last reported, so that
 * the client's per-second rates divide by the time the figures cover.
 * A request within LIVE_REUSE_NS of the last answer gets that answer again:
 * whatever a client sends, profd builds at most one per LIVE_REUSE_NS per
 * session.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mono_clock.h"
#include "daemon/events/func_stats.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sched/sched_session.h"
#include "daemon/session_internal.h"
#include "daemon/session_live.h"
#include "daemon/symbols/demangle.h"
#include "profd.pb-c.h"

#define LIVE_REUSE_NS (50ull * 1000 * 1000)
/* The functions listed stop here, well under FRAME_PAYLOAD_MAX; the rest are counted. */
#define LIVE_FRAME_MAX (4u << 20)

struct session_live {
	uint8_t *packed; /* the last answer, as sent */
	size_t len;
	uint64_t at_ns;
};

/* One function over the session while the answer is built. */
struct live_func {
	Profd__LiveFunction msg;
	uint64_t hist[AGG_BUCKETS]; /* merged; then compacted to the buckets used */
	uint32_t bucket[AGG_BUCKETS];
	size_t rows_at;             /* its first row in live_build.rows */
};

/* A (thread, function) row: where the function's per-thread fields point. */
struct live_rows {
	uint32_t *thread_index;
	uint64_t *calls, *total, *self;
};

struct live_thread_key {
	uint32_t tid, index;
};

struct live_build {
	struct session *s;
	Profd__LiveFigures *out;
	int32_t *slot;             /* function id -> index in funcs, -1: none yet */
	uint32_t *row_count;       /* by index in funcs: its rows (threads) */
	uint32_t n_ids;            /* slot's size: the session's function ids + 1 */
	struct live_func *funcs;
	size_t n_funcs;
	struct live_rows rows;
	size_t n_rows;
	/* this process's threads, by tid, for the rows' thread index */
	struct live_thread_key *keys;
	size_t n_keys;
	Profd__LiveThread *threads;
	size_t n_threads, cap_threads;
	double ns_per_tick;
	int err;
};

void session_live_free(struct session_live *l)
{
	if (l)
		free(l->packed);
	free(l);
}

/* ---- per function ---------------------------------------------------------------------- */

/* The first pass: which functions were called, and how many rows each has. */
static void count_entry(void *ctx, const struct func_stats_view *v)
{
	struct live_build *b = ctx;

	if (v->t.func_id >= b->n_ids)
		return;
	if (b->slot[v->t.func_id] < 0)
		b->slot[v->t.func_id] = (int32_t)b->n_funcs++;
	b->row_count[b->slot[v->t.func_id]]++;
	b->n_rows++;
}

static uint32_t thread_index_of(const struct live_build *b, uint32_t tid)
{
	size_t lo = 0, hi = b->n_keys;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->keys[mid].tid == tid)
			return b->keys[mid].index;
		if (b->keys[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return UINT32_MAX; /* entries come after their thread's drops: never, but say so */
}

static void add_entry(void *ctx, const struct func_stats_view *v)
{
	struct live_build *b = ctx;
	struct live_func *f;
	Profd__LiveFunction *m;
	size_t row;

	if (v->t.func_id >= b->n_ids || b->slot[v->t.func_id] < 0)
		return;
	f = &b->funcs[b->slot[v->t.func_id]];
	m = &f->msg;
	m->calls += v->t.calls;
	m->exited += v->t.exited;
	m->total_ns += v->t.total_ns;
	m->self_ns += v->t.self_ns;
	m->max_ns = v->t.max_ns > m->max_ns ? v->t.max_ns : m->max_ns;
	for (int k = 0; k < AGG_BUCKETS; k++)
		f->hist[k] += v->hist[k];
	if (v->ns_per_tick > 0)
		b->ns_per_tick = v->ns_per_tick;
	row = f->rows_at + m->n_thread_index++;
	b->rows.thread_index[row] = thread_index_of(b, v->t.tid);
	b->rows.calls[row] = v->t.calls;
	b->rows.total[row] = v->t.total_ns;
	b->rows.self[row] = v->t.self_ns;
}

static void add_thread(void *ctx, uint32_t tid, uint64_t stamp_ns)
{
	struct live_build *b = ctx;

	if (b->n_threads == b->cap_threads) {
		size_t ncap = b->cap_threads ? b->cap_threads * 2 : 64;
		Profd__LiveThread *n = realloc(b->threads, ncap * sizeof(*n));
		struct live_thread_key *k;

		if (!n) {
			b->err = -ENOMEM;
			return;
		}
		b->threads = n;
		k = realloc(b->keys, ncap * sizeof(*k));
		if (!k) {
			b->err = -ENOMEM;
			return;
		}
		b->keys = k;
		b->cap_threads = ncap;
	}
	profd__live_thread__init(&b->threads[b->n_threads]);
	b->threads[b->n_threads].tid = tid;
	b->threads[b->n_threads].as_of_ns = stamp_ns;
	b->keys[b->n_keys++] = (struct live_thread_key){ tid, (uint32_t)b->n_threads++ };
}

static int key_by_tid(const void *x, const void *y)
{
	const struct live_thread_key *a = x, *b = y;

	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* Every row of one process: its threads first (their index), then its entries. */
static void add_process(struct live_build *b, const struct session_process *p)
{
	b->n_keys = 0;
	func_stats_each_thread(p->stats, add_thread, b);
	if (b->err)
		return;
	qsort(b->keys, b->n_keys, sizeof(*b->keys), key_by_tid);
	func_stats_each(p->stats, add_entry, b);
}

/* Room for the rows, each function's run of them after the one before. */
static int place_rows(struct live_build *b)
{
	size_t at = 0, n = b->n_rows ? b->n_rows : 1;

	b->funcs = calloc(b->n_funcs ? b->n_funcs : 1, sizeof(*b->funcs));
	b->rows.thread_index = malloc(n * sizeof(uint32_t));
	b->rows.calls = malloc(n * sizeof(uint64_t));
	b->rows.total = malloc(n * sizeof(uint64_t));
	b->rows.self = malloc(n * sizeof(uint64_t));
	if (!b->funcs || !b->rows.thread_index || !b->rows.calls || !b->rows.total ||
	    !b->rows.self)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_funcs; i++) {
		profd__live_function__init(&b->funcs[i].msg);
		b->funcs[i].rows_at = at; /* add_entry counts n_thread_index up as it fills */
		at += b->row_count[i];
	}
	return 0;
}

/* Name, sparse histogram, per-thread fields and scheduler sums, once the sums are in. */
static void finish_func(struct live_build *b, struct live_func *f, uint32_t id)
{
	Profd__LiveFunction *m = &f->msg;
	struct sched_func_time st;
	const char *name = session_func_name(b->s, id);
	size_t used = 0;

	m->id = id;
	m->name = (char *)(name ? demangle_cached(b->s->demangled, name) : "?");
	for (uint32_t k = 0; k < AGG_BUCKETS; k++) {
		if (!f->hist[k])
			continue;
		f->bucket[used] = k;
		f->hist[used++] = f->hist[k]; /* in place: used <= k */
	}
	m->n_hist_bucket = m->n_hist_count = used;
	m->hist_bucket = f->bucket;
	m->hist_count = f->hist;
	m->n_thread_calls = m->n_thread_total_ns = m->n_thread_self_ns = m->n_thread_index;
	m->thread_index = b->rows.thread_index + f->rows_at;
	m->thread_calls = b->rows.calls + f->rows_at;
	m->thread_total_ns = b->rows.total + f->rows_at;
	m->thread_self_ns = b->rows.self + f->rows_at;
	if (b->s->sched && sched_session_func_time(b->s->sched, id, &st)) {
		m->sched_calls = st.calls;
		m->off_cpu_ns = st.off_ns;
		m->runnable_ns = st.runnable_ns;
	}
}

static int by_total_desc(const void *x, const void *y)
{
	const Profd__LiveFunction *a = *(Profd__LiveFunction *const *)x;
	const Profd__LiveFunction *b = *(Profd__LiveFunction *const *)y;

	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* At least the packed size of one listed function (varints at their longest). */
static size_t live_function_bound(const Profd__LiveFunction *m)
{
	return 128 + strlen(m->name) + m->n_hist_bucket * 16 + m->n_thread_index * 40;
}

/* The functions, by total time, as many as LIVE_FRAME_MAX holds; allocated in out. */
static int list_functions(struct live_build *b)
{
	Profd__LiveFigures *out = b->out;
	size_t bytes = 0, bound = 0, k;

	for (uint32_t id = 1; id < b->n_ids; id++)
		if (b->slot[id] >= 0)
			finish_func(b, &b->funcs[b->slot[id]], id);
	out->functions = malloc((b->n_funcs ? b->n_funcs : 1) * sizeof(*out->functions));
	if (!out->functions)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_funcs; i++)
		out->functions[i] = &b->funcs[i].msg;
	qsort(out->functions, b->n_funcs, sizeof(*out->functions), by_total_desc);
	/* sized exactly only when a cheap bound says they may not fit: sizing costs as packing */
	for (k = 0; k < b->n_funcs; k++)
		bound += live_function_bound(out->functions[k]);
	for (k = 0; bound > LIVE_FRAME_MAX && k < b->n_funcs; k++) {
		bytes += profd__live_function__get_packed_size(out->functions[k]) + 8;
		if (bytes > LIVE_FRAME_MAX)
			break;
	}
	out->n_functions = bound > LIVE_FRAME_MAX ? k : b->n_funcs;
	out->functions_left_out = (uint32_t)(b->n_funcs - out->n_functions);
	return 0;
}

static int build_functions(struct live_build *b)
{
	struct session *s = b->s;

	b->n_ids = s->n_func_names + 1;
	b->slot = malloc(b->n_ids * sizeof(*b->slot));
	b->row_count = calloc(b->n_ids, sizeof(*b->row_count));
	if (!b->slot || !b->row_count)
		return -ENOMEM;
	memset(b->slot, 0xff, b->n_ids * sizeof(*b->slot));
	for (const struct session_process *p = s->procs; p; p = p->next)
		func_stats_each(p->stats, count_entry, b);
	if (place_rows(b))
		return -ENOMEM;
	for (const struct session_process *p = s->procs; p && !b->err; p = p->next)
		add_process(b, p);
	if (b->err)
		return b->err;
	b->out->n_threads = b->n_threads;
	b->out->threads = malloc((b->n_threads ? b->n_threads : 1) * sizeof(*b->out->threads));
	if (!b->out->threads)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_threads; i++)
		b->out->threads[i] = &b->threads[i];
	b->out->ns_per_tick = b->ns_per_tick;
	return list_functions(b);
}

/* ---- the session's part ---------------------------------------------------------------- */

/* The function table's counts: the first process that sent one (forks send the same again). */
static void fill_tables(const struct session *s, Profd__LiveFigures *out)
{
	const struct session_process *first = NULL;

	for (const struct session_process *p = s->procs; p; p = p->next) {
		out->agent_connected |= p->agent_seen != 0;
		if (p->funcs.n_tables)
			first = p; /* newest first: the last one seen is the oldest */
	}
	if (!first)
		return;
	out->tables_received = 1;
	for (size_t i = 0; i < first->funcs.n_tables; i++) {
		const Profd__FunctionTable *t = first->funcs.tables[i];

		out->functions_matched += t->matched;
		out->functions_instrumented += (uint32_t)t->n_functions;
		out->functions_skipped += (uint32_t)t->n_skipped;
	}
}

static void fill_session(struct session *s, Profd__LiveFigures *out, uint64_t now)
{
	out->session_id = s->id;
	out->now_ns = now;
	out->target_pid = s->target;
	out->target = s->comm;
	out->processes = s->n_live;
	out->sample_freq = s->freq;
	out->sched = s->sched != NULL;
	for (const struct session_process *p = s->procs; p; p = p->next) {
		struct func_stats_summary calls;
		struct sample_pipeline_stats smp = { 0 };

		out->events += p->events;
		out->events_dropped += p->drops;
		func_stats_summarize(p->stats, &calls);
		out->calls_made += calls.made;
		out->calls_dropped += calls.dropped;
		if (p->samples_out)
			sample_pipeline_get_stats(p->samples_out, &smp);
		out->samples += smp.written;
		for (int k = 0; k < OVERHEAD_KINDS; k++)
			out->overhead_samples += k == OVERHEAD_NONE ? 0 : smp.by_kind[k];
		if (p->pid == s->target)
			out->target_exited = p->exited;
	}
	fill_tables(s, out);
}

static void live_build_free(struct live_build *b)
{
	free(b->slot);
	free(b->row_count);
	free(b->funcs);
	free(b->rows.thread_index);
	free(b->rows.calls);
	free(b->rows.total);
	free(b->rows.self);
	free(b->keys);
	free(b->threads);
	free(b->out->functions);
	free(b->out->threads);
}

/* This thread's CPU time: what an answer costs profd, whoever else has the CPUs. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Builds and packs the answer into l (replacing the last one). 0 or -ENOMEM. */
static int live_compute(struct session *s, struct session_live *l, uint64_t now)
{
	uint64_t cpu0 = thread_cpu_ns();
	Profd__LiveFigures out = PROFD__LIVE_FIGURES__INIT;
	struct live_build b = { .s = s, .out = &out };
	uint8_t *packed;
	size_t len;
	int err;

	fill_session(s, &out, now);
	err = build_functions(&b);
	if (!err) {
		out.compute_ns = thread_cpu_ns() - cpu0;
		len = profd__live_figures__get_packed_size(&out);
		packed = malloc(len ? len : 1);
		if (packed) {
			profd__live_figures__pack(&out, packed);
			free(l->packed);
			l->packed = packed;
			l->len = len;
			l->at_ns = now;
		}
		err = packed ? 0 : -ENOMEM;
	}
	live_build_free(&b);
	return err;
}

/* ---- requests -------------------------------------------------------------------------- */

static void live_answer(struct session *s, struct conn *c)
{
	uint64_t now = mono_clock_ns();

	if (!s->live && !(s->live = calloc(1, sizeof(*s->live)))) {
		session_send_error(c, "out of memory for the live figures");
		return;
	}
	if ((!s->live->packed || now - s->live->at_ns >= LIVE_REUSE_NS) &&
	    live_compute(s, s->live, now)) {
		session_send_error(c, "out of memory for the live figures");
		return;
	}
	conn_send(c, FRAME_LIVE_FIGURES, s->live->packed, s->live->len);
}

void session_live_request(struct server *srv, struct conn *c, const uint8_t *payload, size_t len)
{
	Profd__LiveRequest *req = profd__live_request__unpack(NULL, len, payload);
	struct session *s = c->session;
	char msg[160];

	if (!req) {
		session_send_error(c, "malformed live request");
		if (!s)
			conn_close_later(c);
		return;
	}
	if (s) { /* the session's own client: it may name none, or its own */
		if (req->session_id && req->session_id != s->id)
			session_send_error(c, "a live request names its own session or none");
		else
			live_answer(s, c);
		profd__live_request__free_unpacked(req, NULL);
		return;
	}
	s = session_by_id(srv, req->session_id);
	if (!s || !session_may_see(s, c)) {
		/* another user's session is refused exactly like a missing one */
		snprintf(msg, sizeof(msg), "no session %" PRIu64 " of yours", req->session_id);
		session_send_error(c, msg);
	} else {
		live_answer(s, c);
	}
	conn_close_later(c);
	profd__live_request__free_unpacked(req, NULL);
}
