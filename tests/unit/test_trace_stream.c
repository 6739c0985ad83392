/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of viewer-export/trace_stream.c and trace_slices.c: slices
 * delivered with the model's dur, depth and parent when the file is read
 * through a tiny window; slices still open at the end; the reorder window;
 * problems identical to trace_model_load's on damaged traces; samples told
 * their innermost slice whether they come before or after it; and
 * `profctl report` staying within a heap budget far below the trace's size
 * (malloc is counted here, so the budget is the real allocation high-water
 * mark), and so do the exports (viewer-export/export/), whose instrumented
 * call chains must also sum to the root calls' time. Traces come from the
 * writer, into memfds.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "perfetto_trace_subset.pb-c.h"
#include "profctl/profctl.h"
#include "tests/unit/unit.h"
#include "viewer-export/export/export.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader.h"
#include "viewer-export/trace_stream.h"

#define T0 1000000000000ull
#define PID 4242

#include "tests/unit/trace_hand.h"

/* ---- the heap's high-water mark (every malloc of this binary passes here) ------- */

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_COUNTED 0 /* ASan owns malloc */
static long long heap_live, heap_peak;
#else
#define HEAP_COUNTED 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
/* signed: blocks libc allocated by other means (memalign) may be freed here */
static long long heap_live, heap_peak;

static void *heap_note(void *p)
{
	if (p) {
		heap_live += (long long)malloc_usable_size(p);
		if (heap_live > heap_peak)
			heap_peak = heap_live;
	}
	return p;
}

void *malloc(size_t n)
{
	return heap_note(__libc_malloc(n));
}

void *calloc(size_t n, size_t size)
{
	return heap_note(__libc_calloc(n, size));
}

void *realloc(void *p, size_t n)
{
	long long old = p ? (long long)malloc_usable_size(p) : 0;
	void *q = __libc_realloc(p, n);

	if (q || !n)
		heap_live -= old;
	return q ? heap_note(q) : NULL;
}

void free(void *p)
{
	if (p)
		heap_live -= (long long)malloc_usable_size(p);
	__libc_free(p);
}
#endif

/* ---- helpers -------------------------------------------------------------------- */

static int new_fd(void)
{
	int fd = memfd_create("trace-stream-test", MFD_CLOEXEC);

	CHECK(fd >= 0);
	return fd;
}

static const char *fd_path(int fd)
{
	static char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return path;
}

static size_t fd_size(int fd)
{
	struct stat st;

	CHECK_EQ_INT(fstat(fd, &st), 0);
	return (size_t)st.st_size;
}

static uint8_t *fd_bytes(int fd, size_t *len)
{
	uint8_t *buf;

	*len = fd_size(fd);
	buf = malloc(*len + 1);
	CHECK(buf != NULL);
	CHECK_EQ_INT(pread(fd, buf, *len, 0), (long long)*len);
	return buf;
}

/* What a stream delivered, kept for comparison with the model. */
struct got {
	struct trace_stream_slice *slices;
	size_t n_slices;
	struct trace_stream_sample *samples;
	size_t n_samples;
	char **problems;
	size_t n_problems;
};

static int got_slice(void *ctx, const struct trace_stream_slice *s)
{
	struct got *g = ctx;

	g->slices = realloc(g->slices, (g->n_slices + 1) * sizeof(*s));
	g->slices[g->n_slices++] = *s;
	return 0;
}

static int got_sample(void *ctx, const struct trace_stream_sample *s)
{
	struct got *g = ctx;

	g->samples = realloc(g->samples, (g->n_samples + 1) * sizeof(*s));
	g->samples[g->n_samples++] = *s;
	return 0;
}

static int got_problem(void *ctx, const char *line)
{
	struct got *g = ctx;

	g->problems = realloc(g->problems, (g->n_problems + 1) * sizeof(char *));
	g->problems[g->n_problems++] = strdup(line);
	return 0;
}

static const struct trace_stream_ops got_ops = {
	.slice = got_slice,
	.sample = got_sample,
	.problem = got_problem,
};

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n_problems; i++)
		free(g->problems[i]);
	free(g->problems);
	free(g->slices);
	free(g->samples);
	memset(g, 0, sizeof(*g));
}

/* Streams path (or buf when path is NULL) into g; returns the reader for its stats. */
static struct trace_stream *stream(const char *path, const uint8_t *buf, size_t len,
				   const struct trace_stream_opts *o, struct got *g)
{
	struct trace_stream *ts = trace_stream_new(&got_ops, g, o);

	CHECK(ts != NULL);
	CHECK_EQ_INT(path ? trace_stream_read_file(ts, path) : trace_stream_read_buffer(ts, buf, len),
		     0);
	return ts;
}

static int by_ts_order(const void *a, const void *b)
{
	const struct trace_stream_slice *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* The stream's slices, put in the model's order, are the model's slices. */
static void check_same_slices(const struct trace_model *m, struct got *g)
{
	int64_t *index_of = calloc(g->n_slices + 1, sizeof(*index_of));

	CHECK_EQ_INT(g->n_slices, m->n_slices);
	if (g->n_slices != m->n_slices)
		goto out;
	qsort(g->slices, g->n_slices, sizeof(*g->slices), by_ts_order);
	for (size_t i = 0; i < g->n_slices; i++) {
		CHECK(g->slices[i].id < g->n_slices);
		if (g->slices[i].id < g->n_slices)
			index_of[g->slices[i].id] = (int64_t)i;
	}
	for (size_t i = 0; i < g->n_slices; i++) {
		const struct trace_stream_slice *s = &g->slices[i];
		const struct trace_slice *want = &m->slices[i];

		CHECK_EQ_U64(s->ts, want->ts);
		CHECK_EQ_INT(s->dur, want->dur);
		CHECK_EQ_INT(s->depth, want->depth);
		CHECK_EQ_INT(s->tid, want->tid);
		CHECK_EQ_INT(s->pid, want->pid);
		CHECK(s->name == want->name || (s->name && want->name &&
						 strcmp(s->name, want->name) == 0));
		CHECK_EQ_INT(s->self_samples, want->self_samples);
		CHECK_EQ_INT(s->parent < 0 ? -1 : index_of[s->parent], want->parent);
	}
out:
	free(index_of);
}

/* Nested calls on two threads, some ends with a self_samples argument. */
static void write_nested(int fd, int calls)
{
	struct perfetto_writer *w = perfetto_writer_new(fd);
	uint64_t ts = T0;

	perfetto_writer_process(w, PID, "app");
	perfetto_writer_thread(w, PID, PID, "main");
	perfetto_writer_thread(w, PID, PID + 1, "worker");
	for (uint32_t f = 1; f <= 6; f++) {
		char name[16];

		snprintf(name, sizeof(name), "fn%u", f);
		perfetto_writer_function(w, f, name);
	}
	for (int i = 0; i < calls; i++) {
		pid_t tid = PID + (i & 1);
		int depth = 1 + i % 5;

		for (int d = 0; d < depth; d++)
			perfetto_writer_slice_begin(w, PID, tid, ts += 7, (uint32_t)(1 + d));
		for (int d = 0; d < depth; d++) {
			if (d == 0 && i % 3 == 0)
				perfetto_writer_slice_end_args(w, PID, tid, ts += 5,
					&(struct perfetto_arg){ "self_samples", (uint64_t)i }, 1);
			else
				perfetto_writer_slice_end(w, PID, tid, ts += 5);
		}
	}
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
}

/* ---- slices ------------------------------------------------------------------------- */

static void test_slices_across_tiny_windows(void)
{
	int fd = new_fd();
	struct trace_model *m = NULL;
	struct got g = { 0 };
	struct trace_stream *ts;
	const struct trace_stream_stats *st;

	write_nested(fd, 3000);
	CHECK_EQ_INT(trace_model_load(fd_path(fd), &m), 0);
	/* 32 bytes at a time: nearly every record straddles two windows */
	ts = stream(fd_path(fd), NULL, 0, &(struct trace_stream_opts){ .window = 32, .reorder = 3 },
		    &g);
	st = trace_stream_get_stats(ts);
	CHECK(fd_size(fd) > 50000);
	CHECK(st->window_peak < 1024); /* grown only for the odd long packet */
	CHECK(st->events_held_peak <= 2 * 3 + 1); /* two tracks, three events each (+ one passing) */
	CHECK_EQ_INT(st->problems, 0);
	CHECK_EQ_INT(st->n_packets, m->n_packets);
	CHECK(m->n_slices >= 9000);
	check_same_slices(m, &g);
	trace_stream_free(ts);
	got_free(&g);
	trace_model_free(m);
	close(fd);
}

static void test_slices_open_at_the_end(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m = NULL;
	struct got g = { 0 };
	struct trace_stream *ts;

	perfetto_writer_function(w, 1, "outer");
	perfetto_writer_function(w, 2, "inner");
	perfetto_writer_function(w, 3, "running");
	perfetto_writer_slice_begin(w, PID, PID, T0, 1);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 10, 2);
	perfetto_writer_slice_end(w, PID, PID, T0 + 20);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 30, 3); /* neither ends */
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	ts = stream(fd_path(fd), NULL, 0, &(struct trace_stream_opts){ .window = 64, .reorder = 1 },
		    &g);
	CHECK_EQ_INT(g.n_slices, 3);
	if (g.n_slices == 3) {
		/* as they end: inner, then the open ones, innermost first */
		CHECK_EQ_STR(g.slices[0].name, "inner");
		CHECK_EQ_INT(g.slices[0].dur, 10);
		CHECK_EQ_STR(g.slices[1].name, "running");
		CHECK_EQ_INT(g.slices[1].dur, -1);
		CHECK_EQ_INT(g.slices[1].depth, 1);
		CHECK_EQ_STR(g.slices[2].name, "outer");
		CHECK_EQ_INT(g.slices[2].dur, -1);
		CHECK_EQ_INT(g.slices[2].depth, 0);
		CHECK_EQ_INT(g.slices[2].parent, -1);
		CHECK_EQ_INT(g.slices[1].parent, (int64_t)g.slices[2].id);
		CHECK_EQ_INT(g.slices[0].parent, (int64_t)g.slices[2].id);
	}
	CHECK_EQ_INT(trace_model_load(fd_path(fd), &m), 0);
	check_same_slices(m, &g);
	trace_stream_free(ts);
	got_free(&g);
	trace_model_free(m);
	close(fd);
}

/* ---- hand-made packets ------------------------------------------------------------- */

/* A BEGIN (with a name) or END on track 5 at ts. */
static void hand_event(struct hand *h, int type, uint64_t ts, const char *name)
{
	hand_track_event(h, 1, true, ts, type, name, 0);
}

enum { B = 1, E = 2 };

/* a [10, 40] holding b [20, 30], written out of order: B@20, E@30, B@10, E@40 */
static void hand_shuffled(struct hand *h)
{
	hand_thread(h);
	hand_event(h, B, 20, "b");
	hand_event(h, E, 30, NULL);
	hand_event(h, B, 10, "a");
	hand_event(h, E, 40, NULL);
}

static void test_reorder_window_sorts_a_track(void)
{
	struct hand *h = calloc(1, sizeof(*h));
	struct trace_model *m = NULL;
	struct got g = { 0 };
	struct trace_stream *ts;

	hand_shuffled(h);
	CHECK_EQ_INT(trace_model_load_buffer(h->buf, h->len, &m), 0);
	CHECK_EQ_INT(m->n_problems, 0);
	ts = stream(NULL, h->buf, h->len, &(struct trace_stream_opts){ .reorder = 2 }, &g);
	CHECK_EQ_INT(trace_stream_get_stats(ts)->problems, 0);
	check_same_slices(m, &g);
	if (g.n_slices == 2) {
		CHECK_EQ_STR(g.slices[0].name, "a");
		CHECK_EQ_INT(g.slices[0].dur, 30);
		CHECK_EQ_STR(g.slices[1].name, "b");
		CHECK_EQ_INT(g.slices[1].dur, 10);
		CHECK_EQ_INT(g.slices[1].depth, 1);
	}
	trace_stream_free(ts);
	got_free(&g);
	trace_model_free(m);
	free(h);
}

static void test_reorder_window_too_small_is_a_problem(void)
{
	struct hand *h = calloc(1, sizeof(*h));
	struct got g = { 0 };
	struct trace_stream *ts;

	hand_shuffled(h);
	/* one event held: B@10 comes after B@20 left the window */
	ts = stream(NULL, h->buf, h->len, &(struct trace_stream_opts){ .reorder = 1 }, &g);
	CHECK(trace_stream_get_stats(ts)->late_events >= 1);
	CHECK(g.n_problems >= 1);
	if (g.n_problems)
		CHECK(strstr(g.problems[0], "matched late") != NULL);
	for (size_t i = 0; i < g.n_slices; i++)
		CHECK(g.slices[i].dur >= -1);
	trace_stream_free(ts);
	got_free(&g);
	free(h);
}

/* ---- problems: the stream's are the model's ----------------------------------------------- */

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* 1 when compared, 0 when the damage put events out of the window's reach */
static int check_same_problems(const uint8_t *buf, size_t len)
{
	struct trace_model *m = NULL;
	struct got g = { 0 };
	struct trace_stream *ts;
	char **want;
	int compared = 0;

	CHECK_EQ_INT(trace_model_load_buffer(buf, len, &m), 0);
	ts = stream(NULL, buf, len, &(struct trace_stream_opts){ .window = 32, .reorder = 8 }, &g);
	if (!m || trace_stream_get_stats(ts)->late_events)
		goto out;
	compared = 1;
	CHECK(m->n_problems <= 4096); /* no "... more problems" line to tell apart */
	CHECK_EQ_INT(g.n_problems, m->n_problems);
	if (g.n_problems != m->n_problems)
		goto out;
	if (!g.n_problems)
		goto out;
	want = calloc(m->n_problems, sizeof(*want));
	memcpy(want, m->problems, m->n_problems * sizeof(*want));
	qsort(want, m->n_problems, sizeof(*want), by_str);
	qsort(g.problems, g.n_problems, sizeof(*g.problems), by_str);
	for (size_t i = 0; i < g.n_problems; i++)
		CHECK_EQ_STR(g.problems[i], want[i]);
	free(want);
out:
	trace_stream_free(ts);
	got_free(&g);
	trace_model_free(m);
	return compared;
}

static void test_problems_match_the_model_on_damage(void)
{
	int fd = new_fd(), compared = 0, cases = 0;
	uint8_t *good, *bad;
	uint32_t seed = 12345;
	size_t len;

	write_nested(fd, 200);
	good = fd_bytes(fd, &len);
	bad = malloc(len);
	for (size_t cut = 1; cut < len; cut += len / 37 + 1) { /* truncated anywhere */
		compared += check_same_problems(good, cut);
		cases++;
	}
	for (int i = 0; i < 200; i++) { /* bytes flipped: framing, fields, iids, timestamps */
		memcpy(bad, good, len);
		for (int k = 0; k < 1 + i % 4; k++) {
			seed = seed * 1103515245 + 12345;
			bad[(seed >> 8) % len] ^= (uint8_t)(1u << (seed % 8));
		}
		compared += check_same_problems(bad, len);
		cases++;
	}
	fprintf(stderr, "damaged traces: %d of %d compared\n", compared, cases);
	CHECK(compared >= cases * 3 / 4);
	free(bad);
	free(good);
	close(fd);
}

static void test_problems_unmatched_and_named_ends(void)
{
	struct hand *h = calloc(1, sizeof(*h));

	hand_thread(h);
	hand_event(h, E, 5, NULL);          /* nothing open */
	hand_event(h, B, 10, "a");
	hand_event(h, B, 20, "b");
	hand_event(h, E, 30, "a");          /* not the innermost */
	hand_event(h, E, 40, "zzz");        /* matches nothing */
	for (int i = 0; i < 513; i++)       /* deeper than the importer goes */
		hand_event(h, B, 50 + (uint64_t)i, "deep");
	CHECK_EQ_INT(check_same_problems(h->buf, h->len), 1);
	free(h);
}

/* ---- samples ---------------------------------------------------------------------------- */

static const struct perfetto_frame frame = { .function = "leaf", .rel_pc = 0x10,
					     .mapping_path = "/bin/app", .map_end = 0x1000 };

/*
 * a [100, 200] holds b [120, 150]; c [200, 260] begins where a ends.
 * Samples at ts: want the slice named, or NULL for none open.
 */
static const struct {
	uint64_t ts;
	const char *want;
} sample_at[] = {
	{ 50, NULL }, { 100, "a" }, { 130, "b" }, { 150, "b" }, { 170, "a" },
	{ 200, "c" }, { 230, "c" }, { 300, NULL },
};
#define N_SAMPLES (sizeof(sample_at) / sizeof(sample_at[0]))

static void write_samples(struct perfetto_writer *w)
{
	for (size_t i = 0; i < N_SAMPLES; i++)
		perfetto_writer_sample(w, T0 + sample_at[i].ts, 0, PID, PID, &frame, 1);
}

static void write_abc(int fd, bool samples_first)
{
	struct perfetto_writer *w = perfetto_writer_new(fd);

	perfetto_writer_thread(w, PID, PID, "main");
	perfetto_writer_function(w, 1, "a");
	perfetto_writer_function(w, 2, "b");
	perfetto_writer_function(w, 3, "c");
	if (samples_first)
		write_samples(w);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 100, 1);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 120, 2);
	perfetto_writer_slice_end(w, PID, PID, T0 + 150);
	perfetto_writer_slice_end(w, PID, PID, T0 + 200);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 200, 3);
	perfetto_writer_slice_end(w, PID, PID, T0 + 260);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 400, 1); /* moves the thread on */
	perfetto_writer_slice_end(w, PID, PID, T0 + 410);
	if (!samples_first)
		write_samples(w);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
}

static void check_attribution(bool samples_first, size_t history)
{
	int fd = new_fd();
	struct got g = { 0 };
	struct trace_stream *ts;

	write_abc(fd, samples_first);
	ts = stream(fd_path(fd), NULL, 0,
		    &(struct trace_stream_opts){ .reorder = 2, .attribute_samples = true,
						 .history = history }, &g);
	CHECK_EQ_INT(g.n_samples, N_SAMPLES);
	/* written last, all but the one at 300 come after their thread's events went by */
	CHECK_EQ_INT(trace_stream_get_stats(ts)->samples_late, samples_first ? 0 : N_SAMPLES - 1);
	for (size_t i = 0; i < g.n_samples; i++) {
		const struct trace_stream_sample *s = &g.samples[i];
		size_t k = 0;

		while (k < N_SAMPLES && T0 + sample_at[k].ts != s->s.ts)
			k++;
		CHECK(k < N_SAMPLES);
		if (k == N_SAMPLES)
			continue;
		if (history == 2 && !samples_first && sample_at[k].ts < 200) {
			/* the history kept 200 and 260 only */
			CHECK_EQ_INT(s->where, TRACE_STREAM_TOO_LATE);
			continue;
		}
		if (!sample_at[k].want) {
			CHECK_EQ_INT(s->where, TRACE_STREAM_OUTSIDE);
			continue;
		}
		CHECK_EQ_INT(s->where, TRACE_STREAM_IN_SLICE);
		CHECK_EQ_STR(s->slice_name, sample_at[k].want);
	}
	trace_stream_free(ts);
	got_free(&g);
	close(fd);
}

static void test_samples_before_their_slices(void)
{
	check_attribution(true, 0);
}

static void test_samples_after_their_slices(void)
{
	check_attribution(false, 0);
}

static void test_samples_older_than_the_history(void)
{
	check_attribution(false, 2);
}

/* ---- profctl report: bounded memory -------------------------------------------------------- */

static void test_report_heap_stays_bounded(void)
{
	int fd = new_fd();
	FILE *out = fopen("/dev/null", "w");
	struct trace_stream_stats st;
	struct trace_model *m = NULL;
	long long base, report_peak, model_peak;
	size_t size;

	write_nested(fd, 60000); /* ~180,000 slices */
	size = fd_size(fd);
	CHECK(size > 2000000);
	base = heap_live;
	heap_peak = heap_live;
	CHECK_EQ_INT(profctl_report(fd_path(fd), out,
				    &(struct profctl_report_opts){ .window = 4096, .stats = &st }), 0);
	report_peak = heap_peak - base;
	CHECK(st.window_peak <= 4096); /* profd's packets are far smaller */
	CHECK_EQ_INT(st.problems, 0);
	heap_peak = heap_live;
	CHECK_EQ_INT(profctl_report(fd_path(fd), out,
				    &(struct profctl_report_opts){ .dump = true, .window = 4096 }), 0);
	if (HEAP_COUNTED) {
		fprintf(stderr, "heap peak: dump %lld KiB\n", (heap_peak - base) / 1024);
		/* held slice events carry every END argument (self samples, on/off-CPU): 72 bytes */
		CHECK(heap_peak - base < 640 * 1024);
	}
	/* the probe sees a reader that holds the trace: the model does */
	heap_peak = heap_live;
	CHECK_EQ_INT(trace_model_load(fd_path(fd), &m), 0);
	model_peak = heap_peak - base;
	trace_model_free(m);
	if (HEAP_COUNTED) {
		fprintf(stderr, "heap peak: report %lld KiB, model %lld KiB, trace %zu KiB\n",
			report_peak / 1024, model_peak / 1024, size / 1024);
		CHECK(report_peak < 1024 * 1024);
		CHECK(report_peak < (long long)size / 4);
		CHECK(model_peak > (long long)size);
	}
	fclose(out);
	close(fd);
}

/* ---- exports: bounded memory, call chains' self time ---------------------------------------- */

static void test_exports_heap_stays_bounded(void)
{
	int (*const run[])(const char *, FILE *, const struct export_opts *, char *) = {
		export_pprof, export_chrome, export_folded,
	};
	struct export_opts o = { .with_calls = true, .window = 4096 };
	int fd = new_fd(), calls = 60000;
	FILE *out = tmpfile();
	char err[EXPORT_ERR_LEN], line[256];
	long long base, chain_ns = 0, want_ns = 0;
	size_t size, lines = 0;

	write_nested(fd, calls); /* ~180,000 slices, depth 1-5 */
	size = fd_size(fd);
	for (int i = 0; i < calls; i++) /* the depth-0 call: 12 x depth - 7 ns */
		want_ns += 12 * (1 + i % 5) - 7;
	for (size_t k = 0; k < sizeof(run) / sizeof(run[0]); k++) {
		fflush(out);
		CHECK(ftruncate(fileno(out), 0) == 0);
		rewind(out);
		base = heap_live;
		heap_peak = heap_live;
		CHECK_EQ_INT(run[k](fd_path(fd), out, &o, err), 0);
		if (HEAP_COUNTED) {
			fprintf(stderr, "heap peak: export %zu: %lld KiB (trace %zu KiB)\n", k,
				(heap_peak - base) / 1024, size / 1024);
			CHECK(heap_peak - base < 1024 * 1024);
			CHECK(heap_peak - base < (long long)size / 4);
		}
	}
	/* folded (last): the 5 distinct chains, their self times adding up to the roots' time */
	fflush(out);
	rewind(out);
	while (fgets(line, sizeof(line), out)) {
		const char *sp = strrchr(line, ' ');

		CHECK(strncmp(line, "[calls ns];fn1", 14) == 0);
		chain_ns += sp ? atoll(sp + 1) : 0;
		lines++;
	}
	CHECK_EQ_INT(lines, 5);
	CHECK_EQ_INT(chain_ns, want_ns);
	fclose(out);
	close(fd);
}

struct sched_seen {
	struct trace_sched_event ev[8];
	int n;
	struct trace_stream_slice last_slice;
};

static int on_sched(void *ctx, const struct trace_sched_event *e)
{
	struct sched_seen *s = ctx;

	if (s->n < 8)
		s->ev[s->n++] = *e;
	return 0;
}

static int on_slice_args(void *ctx, const struct trace_stream_slice *sl)
{
	((struct sched_seen *)ctx)->last_slice = *sl;
	return 0;
}

static uint64_t abs_diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/*
 * The writer's scheduler events read back: BOOTTIME on the wire, the trace
 * clock (MONOTONIC) again after the reader places them through the clock
 * snapshot; delivered in time order although CPU 1's bundle comes first;
 * the kernel release from SystemInfo; an END's on/off-CPU arguments.
 */
/* ---- process labels --------------------------------------------------------------- */

struct labels {
	int32_t pid[4];
	char text[4][64];
	size_t n;
};

static int got_label(void *ctx, size_t index, int32_t pid, uint32_t generation, const char *label)
{
	struct labels *l = ctx;

	(void)index;
	CHECK_EQ_INT(generation, 0);
	if (l->n < 4) {
		l->pid[l->n] = pid;
		snprintf(l->text[l->n++], sizeof(l->text[0]), "%s", label ? label : "(null)");
	}
	return 0;
}

/* A process in another PID namespace carries its own pid as a label; others none. */
static void test_namespace_pid_label(void)
{
	static const struct trace_stream_ops ops = { .process_label = got_label };
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct labels l = { 0 };
	struct trace_stream *ts;

	perfetto_writer_process(w, PID, "server");
	perfetto_writer_process(w, PID + 1, "client");
	CHECK_EQ_INT(perfetto_writer_process_ns_pid(w, PID, 1), 0);
	CHECK_EQ_INT(perfetto_writer_process_ns_pid(w, PID, 1), 0); /* unchanged: not rewritten */
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	ts = trace_stream_new(&ops, &l, NULL);
	CHECK(ts != NULL);
	CHECK_EQ_INT(trace_stream_read_file(ts, fd_path(fd)), 0);
	CHECK_EQ_INT(l.n, 1);
	CHECK_EQ_INT(l.pid[0], PID);
	CHECK_EQ_STR(l.text[0], "pid 1 in its PID namespace");
	trace_stream_free(ts);
	close(fd);
}

static void test_sched_events_round_trip(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_sched_task a = { .tid = PID, .comm = "main", .prio = 120, .traced = true };
	struct perfetto_sched_task b = { .tid = PID + 1, .comm = "worker", .prio = 120,
					 .traced = true };
	struct perfetto_sched_task idle = { .tid = 0, .comm = "swapper/0" };
	struct perfetto_arg args[] = { { "on_cpu_ns", 30 }, { "off_cpu_ns", 70 },
				       { "runnable_ns", 20 } };
	struct sched_seen seen = { 0 };
	struct trace_stream_ops ops = { .sched = on_sched, .slice = on_slice_args };
	struct trace_stream *ts = trace_stream_new(&ops, &seen, NULL);
	struct utsname u;

	perfetto_writer_thread(w, PID, PID, "main");
	perfetto_writer_slice_begin(w, PID, PID, T0, 1);
	perfetto_writer_sched_switch(w, T0 + 200, 1, &b, 0x1, &idle);
	perfetto_writer_sched_switch(w, T0 + 100, 0, &a, 0x100, &b);
	perfetto_writer_sched_waking(w, T0 + 150, 0, &idle, &a, 1);
	perfetto_writer_slice_end_args(w, PID, PID, T0 + 100, args, 3);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	CHECK_EQ_INT(trace_stream_read_file(ts, fd_path(fd)), 0);
	CHECK_EQ_INT(seen.n, 3);
	CHECK_EQ_INT(seen.ev[0].kind, TRACE_SCHED_SWITCH);
	CHECK(abs_diff(seen.ev[0].ts, T0 + 100) < 10000); /* two clocks read apart: within 10 us */
	CHECK_EQ_INT(seen.ev[0].prev_tid, PID);
	CHECK_EQ_INT(seen.ev[0].prev_state, 0x100);
	CHECK_EQ_INT(seen.ev[0].tid, PID + 1);
	CHECK_EQ_STR(seen.ev[0].comm, "worker");
	CHECK_EQ_INT(seen.ev[1].kind, TRACE_SCHED_WAKING);
	CHECK_EQ_INT(seen.ev[1].common_pid, 0);
	CHECK_EQ_INT(seen.ev[1].tid, PID);
	CHECK_EQ_INT(seen.ev[1].target_cpu, 1);
	CHECK_EQ_INT(seen.ev[2].cpu, 1);
	CHECK_EQ_U64(seen.ev[2].ts - seen.ev[0].ts, 100); /* one offset for all */
	CHECK(uname(&u) == 0 && trace_stream_get_stats(ts)->kernel_release &&
	      strcmp(trace_stream_get_stats(ts)->kernel_release, u.release) == 0);
	CHECK_EQ_INT(seen.last_slice.args.on_cpu_ns, 30);
	CHECK_EQ_INT(seen.last_slice.args.off_cpu_ns, 70);
	CHECK_EQ_INT(seen.last_slice.args.runnable_ns, 20);
	CHECK_EQ_INT(seen.last_slice.self_samples, -1);
	CHECK_EQ_INT(trace_stream_get_stats(ts)->problems, 0);
	trace_stream_free(ts);
	close(fd);
}

/* What the reader makes of a reused pid: per process, and what landed where. */
struct reuse_seen {
	uint32_t gens[4];      /* generation of each process callback, first sight */
	size_t n_procs;
	size_t slices[2];      /* by generation */
	size_t samples[2];
	size_t threads[2];
	size_t frees;          /* sched_process_free of the pid */
};

static int reuse_process(void *ctx, size_t index, int32_t pid, uint32_t generation,
			 const char *name, bool is_new)
{
	struct reuse_seen *r = ctx;

	(void)name;
	CHECK_EQ_INT(pid, PID);
	if (is_new && r->n_procs < 4) {
		CHECK_EQ_INT(index, r->n_procs);
		r->gens[r->n_procs++] = generation;
	}
	return 0;
}

static int reuse_thread(void *ctx, size_t index, const struct trace_thread *t, bool is_new)
{
	struct reuse_seen *r = ctx;

	(void)index;
	if (is_new && t->generation < 2)
		r->threads[t->generation]++;
	return 0;
}

static int reuse_slice(void *ctx, const struct trace_stream_slice *s)
{
	struct reuse_seen *r = ctx;

	if (s->generation < 2)
		r->slices[s->generation]++;
	return 0;
}

static int reuse_sched(void *ctx, const struct trace_sched_event *e)
{
	struct reuse_seen *r = ctx;

	r->frees += e->kind == TRACE_SCHED_FREE && e->tid == PID;
	return 0;
}

static int reuse_sample(void *ctx, const struct trace_stream_sample *smp)
{
	struct reuse_seen *r = ctx;

	if (smp->s.generation < 2)
		r->samples[smp->s.generation]++;
	return 0;
}

/*
 * A pid reused: two processes, each its own threads and slices; a sample of
 * the first written after the second began is still the first's (by time);
 * nothing of it is a problem, and the first ends with a free of its pid.
 */
static void test_reused_pid_is_two_processes(void)
{
	static const struct trace_stream_ops ops = { .process = reuse_process,
		.thread = reuse_thread, .slice = reuse_slice, .sample = reuse_sample,
		.sched = reuse_sched };
	struct perfetto_frame f = { .function = "fibf", .mapping_path = "/bin/x",
				    .map_start = 0x1000, .map_end = 0x2000 };
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_stream_opts o = { .attribute_samples = true };
	struct reuse_seen seen = { 0 };
	struct trace_stream *ts;
	uint64_t again = PERFETTO_PROC(PID, 1);

	perfetto_writer_process(w, PID, "first");
	perfetto_writer_thread(w, PID, PID, "first");
	perfetto_writer_slice_begin(w, PID, PID, T0, 1);
	perfetto_writer_slice_end(w, PID, PID, T0 + 10);
	CHECK_EQ_INT(perfetto_writer_process_start(w, again, T0 + 100), 0);
	perfetto_writer_process(w, again, "second");
	perfetto_writer_thread(w, again, PID, "second");
	for (int i = 0; i < 3; i++) {
		perfetto_writer_slice_begin(w, again, PID, T0 + 200 + 10 * i, 1);
		perfetto_writer_slice_end(w, again, PID, T0 + 205 + 10 * i);
	}
	perfetto_writer_sample(w, T0 + 5, 0, PID, PID, &f, 1);   /* the first's, written late */
	perfetto_writer_sample(w, T0 + 201, 0, PID, PID, &f, 1); /* the second's */
	perfetto_writer_process(w, PID, "first-renamed");         /* late: still the first */
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	ts = trace_stream_new(&ops, &seen, &o);
	CHECK(ts != NULL);
	CHECK_EQ_INT(trace_stream_read_file(ts, fd_path(fd)), 0);
	CHECK_EQ_INT(seen.n_procs, 2);
	CHECK_EQ_INT(seen.gens[0], 0);
	CHECK_EQ_INT(seen.gens[1], 1);
	CHECK_EQ_INT(seen.threads[0], 1);
	CHECK_EQ_INT(seen.threads[1], 1);
	CHECK_EQ_INT(seen.slices[0], 1);
	CHECK_EQ_INT(seen.slices[1], 3);
	CHECK_EQ_INT(seen.samples[0], 1);
	CHECK_EQ_INT(seen.samples[1], 1);
	CHECK_EQ_INT(seen.frees, 1); /* the first ended, once */
	CHECK_EQ_INT(trace_stream_get_stats(ts)->problems, 0);
	trace_stream_free(ts);
	close(fd);
}

int main(void)
{
	RUN_TEST(test_slices_across_tiny_windows);
	RUN_TEST(test_slices_open_at_the_end);
	RUN_TEST(test_reorder_window_sorts_a_track);
	RUN_TEST(test_reorder_window_too_small_is_a_problem);
	RUN_TEST(test_problems_match_the_model_on_damage);
	RUN_TEST(test_problems_unmatched_and_named_ends);
	RUN_TEST(test_samples_before_their_slices);
	RUN_TEST(test_samples_after_their_slices);
	RUN_TEST(test_samples_older_than_the_history);
	RUN_TEST(test_report_heap_stays_bounded);
	RUN_TEST(test_exports_heap_stays_bounded);
	RUN_TEST(test_sched_events_round_trip);
	RUN_TEST(test_namespace_pid_label);
	RUN_TEST(test_reused_pid_is_two_processes);
	printf("%d passed, %d failed\n", unit_cases_passed, unit_cases_failed);
	return unit_cases_failed ? 1 : 0;
}
