/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of viewer-export/: the streaming Perfetto writer, read back with
 * the trace reader (which applies the importer's rules), plus the reader on
 * hand-made bad traces, truncated traces and garbage. Files are memfds.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>

#include "perfetto_trace_subset.pb-c.h"
#include "tests/unit/unit.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader.h"

#define T0 1000000000000ull /* CLOCK_MONOTONIC ns, as the daemon gives them */
#define PID 4242

typedef Perfetto__Protos__TracePacket packet_t;

#include "tests/unit/trace_hand.h"

/* ---- helpers ----------------------------------------------------------------- */

static int new_fd(void)
{
	int fd = memfd_create("perfetto-test", MFD_CLOEXEC);

	CHECK(fd >= 0);
	return fd;
}

static struct trace_model *load_fd(int fd)
{
	struct trace_model *m = NULL;
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ret = trace_model_load(path, &m);
	CHECK_EQ_INT(ret, 0);
	return m;
}

static uint8_t *read_fd(int fd, size_t *len)
{
	struct stat st;
	uint8_t *buf;

	CHECK_EQ_INT(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	buf = malloc(*len + 1);
	CHECK(buf != NULL);
	CHECK_EQ_INT(pread(fd, buf, *len, 0), (long long)*len);
	return buf;
}

static void check_no_problems(const struct trace_model *m)
{
	size_t i;

	for (i = 0; m && i < m->n_problems; i++)
		fprintf(stderr, "  problem: %s\n", m->problems[i]);
	CHECK(m != NULL);
	if (m)
		CHECK_EQ_INT(m->n_problems, 0);
}

static bool has_problem(const struct trace_model *m, const char *needle)
{
	size_t i;

	for (i = 0; i < m->n_problems; i++)
		if (strstr(m->problems[i], needle))
			return true;
	return false;
}

/* Calls fn(record, len, ctx) on every packet record of buf; returns the count. */
static size_t for_each_record(const uint8_t *buf, size_t len,
			      void (*fn)(const packet_t *p, void *ctx), void *ctx)
{
	size_t off = 0, n = 0;

	while (off < len) {
		uint64_t plen = 0;
		unsigned shift = 0;
		packet_t *p;

		CHECK_EQ_INT(buf[off++], 0x0a);
		do {
			plen |= (uint64_t)(buf[off] & 0x7f) << shift;
			shift += 7;
		} while (buf[off++] & 0x80);
		p = perfetto__protos__trace_packet__unpack(NULL, plen, buf + off);
		CHECK(p != NULL);
		if (p && fn)
			fn(p, ctx);
		perfetto__protos__trace_packet__free_unpacked(p, NULL);
		off += plen;
		n++;
	}
	return n;
}

static const struct trace_slice *find_slice(const struct trace_model *m, const char *name)
{
	size_t i;

	for (i = 0; i < m->n_slices; i++)
		if (m->slices[i].name && strcmp(m->slices[i].name, name) == 0)
			return &m->slices[i];
	return NULL;
}

static const struct perfetto_frame demo_frames[3] = {
	{ "main", 0x1a30, "/usr/bin/demo-app", (const uint8_t *)"\x11\x22\x33\x44", 4,
	  0x555555555000, 0x55555555d000, 0x1000, 0 },
	{ "run_loop", 0x1c44, "/usr/bin/demo-app", (const uint8_t *)"\x11\x22\x33\x44", 4,
	  0x555555555000, 0x55555555d000, 0x1000, 0 },
	{ NULL, 0x1e00, "/usr/lib/libc.so.6", NULL, 0, 0x7ffff7c00000, 0x7ffff7d00000, 0x28000,
	  0 },
};

/* ---- writer: metadata ------------------------------------------------------------ */

static void snapshot_first_cb(const packet_t *p, void *ctx)
{
	int *index = ctx;
	Perfetto__Protos__ClockSnapshot *cs;

	if ((*index)++ != 0)
		return;
	CHECK_EQ_INT(p->data_case, PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT);
	if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT)
		return;
	cs = p->clock_snapshot;
	CHECK_EQ_INT(cs->n_clocks, 3);
	CHECK_EQ_INT(cs->primary_trace_clock, 6);
	if (cs->n_clocks == 3) {
		CHECK_EQ_INT(cs->clocks[0]->clock_id, 6);
		CHECK_EQ_INT(cs->clocks[1]->clock_id, 3);
		CHECK_EQ_INT(cs->clocks[2]->clock_id, 1);
		/* read back to back: MONOTONIC (read second) <= BOOTTIME + a little */
		CHECK(cs->clocks[1]->timestamp <= cs->clocks[0]->timestamp + 10000000);
	}
}

static void test_first_packet_is_clock_snapshot(void)
{
	int fd = new_fd(), index = 0;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;
	uint8_t *buf;
	size_t len;

	CHECK_EQ_INT(perfetto_writer_process(w, PID, "demo-app"), 0);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK(m->has_clock_snapshot);
	CHECK_EQ_INT(m->first_clock_snapshot, 0);
	buf = read_fd(fd, &len);
	CHECK(len > 0 && buf[0] == 0x0a);
	CHECK_EQ_INT(for_each_record(buf, len, snapshot_first_cb, &index), 3); /* + the closing one */
	free(buf);
	trace_model_free(m);
	close(fd);
}

static void test_process_and_thread_names(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_process(w, PID, "demo-app");
	perfetto_writer_thread(w, PID, PID, "main");
	perfetto_writer_thread(w, PID, PID + 1, "worker");
	perfetto_writer_thread(w, PID, PID + 1, "worker-2"); /* renamed: same uuid */
	perfetto_writer_thread(w, PID, PID + 1, "worker-2"); /* unchanged: not re-emitted */
	perfetto_writer_slice_begin(w, PID, PID + 2, T0, 1); /* implicit, unnamed thread */
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_processes, 1);
	CHECK_EQ_INT(m->process_pids[0], PID);
	CHECK_EQ_STR(m->process_names[0], "demo-app");
	CHECK_EQ_INT(m->n_threads, 3);
	if (m->n_threads == 3) {
		CHECK_EQ_INT(m->threads[0].tid, PID);
		CHECK_EQ_STR(m->threads[0].name, "main");
		CHECK_EQ_INT(m->threads[1].tid, PID + 1);
		CHECK_EQ_STR(m->threads[1].name, "worker-2");
		CHECK_EQ_INT(m->threads[2].tid, PID + 2);
		CHECK(m->threads[2].name == NULL);
		CHECK(m->threads[0].track_uuid < 128 && m->threads[1].track_uuid < 128);
		CHECK(m->threads[0].track_uuid != m->threads[1].track_uuid);
	}
	trace_model_free(m);
	close(fd);
}

/* ---- writer: slices --------------------------------------------------------------- */

static void test_nested_slices(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	const struct trace_slice *outer, *inner;
	struct trace_model *m;

	perfetto_writer_thread(w, PID, PID, "main");
	perfetto_writer_function(w, 1, "outer");
	perfetto_writer_function(w, 2, "inner");
	perfetto_writer_slice_begin(w, PID, PID, T0 + 100000, 1);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 200000, 2);
	perfetto_writer_slice_end(w, PID, PID, T0 + 700000);
	perfetto_writer_slice_end(w, PID, PID, T0 + 900000);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 2);
	outer = find_slice(m, "outer");
	inner = find_slice(m, "inner");
	CHECK(outer && inner);
	if (outer && inner) {
		CHECK_EQ_U64(outer->ts, T0 + 100000);
		CHECK_EQ_INT(outer->dur, 800000);
		CHECK_EQ_INT(outer->depth, 0);
		CHECK_EQ_INT(outer->parent, -1);
		CHECK_EQ_INT(outer->tid, PID);
		CHECK_EQ_U64(inner->ts, T0 + 200000);
		CHECK_EQ_INT(inner->dur, 500000);
		CHECK_EQ_INT(inner->depth, 1);
		CHECK_EQ_INT(inner->parent, outer - m->slices);
	}
	trace_model_free(m);
	close(fd);
}

static void end_has_no_name_cb(const packet_t *p, void *ctx)
{
	int *ends = ctx;

	if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT ||
	    p->track_event->type != PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END)
		return;
	(*ends)++;
	CHECK_EQ_INT(p->track_event->name_field_case,
		     PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD__NOT_SET);
	/* its track from the thread sequence's TrackEventDefaults, its time a delta */
	CHECK(p->has_timestamp && !p->track_event->has_track_uuid);
	CHECK(p->trusted_packet_sequence_id >= 3);
}

static void test_end_closes_innermost(void)
{
	int fd = new_fd(), ends = 0;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;
	uint8_t *buf;
	size_t len;

	perfetto_writer_function(w, 1, "a");
	perfetto_writer_function(w, 2, "b");
	perfetto_writer_slice_begin(w, PID, PID, T0 + 10, 1);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 20, 2);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 30, 1); /* recursion: a inside b inside a */
	perfetto_writer_slice_end(w, PID, PID, T0 + 40);
	perfetto_writer_slice_end(w, PID, PID, T0 + 50);
	perfetto_writer_slice_end(w, PID, PID, T0 + 60);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 3);
	if (m->n_slices == 3) {
		CHECK_EQ_INT(m->slices[2].depth, 2);
		CHECK_EQ_INT(m->slices[2].dur, 10);
		CHECK_EQ_INT(m->slices[1].dur, 30);
		CHECK_EQ_INT(m->slices[0].dur, 50);
		CHECK(m->slices[0].name == m->slices[2].name); /* one interned name */
	}
	buf = read_fd(fd, &len);
	for_each_record(buf, len, end_has_no_name_cb, &ends);
	CHECK_EQ_INT(ends, 3);
	free(buf);
	trace_model_free(m);
	close(fd);
}

static void test_depth_clamp(void)
{
	int fd = new_fd(), i;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_writer_stats st;
	struct trace_model *m;
	uint32_t max_depth = 0;
	size_t k;

	perfetto_writer_function(w, 7, "recurse");
	for (i = 0; i < 600; i++)
		perfetto_writer_slice_begin(w, PID, PID, T0 + (uint64_t)i, 7);
	for (i = 0; i < 600; i++)
		perfetto_writer_slice_end(w, PID, PID, T0 + 1000 + (uint64_t)i);
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_U64(st.slices_clamped, 600 - PERFETTO_MAX_SLICE_DEPTH);
	CHECK_EQ_U64(st.ends_unmatched, 0);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, PERFETTO_MAX_SLICE_DEPTH);
	for (k = 0; k < m->n_slices; k++) {
		if (m->slices[k].depth > max_depth)
			max_depth = m->slices[k].depth;
		CHECK(m->slices[k].dur > 0);
	}
	CHECK_EQ_INT(max_depth, PERFETTO_MAX_SLICE_DEPTH - 1);
	/* the innermost written slice is closed by the first END past the clamped ones */
	if (m->n_slices == PERFETTO_MAX_SLICE_DEPTH)
		CHECK_EQ_INT(m->slices[PERFETTO_MAX_SLICE_DEPTH - 1].dur,
			     1000 + (600 - PERFETTO_MAX_SLICE_DEPTH) - (PERFETTO_MAX_SLICE_DEPTH - 1));
	trace_model_free(m);
	close(fd);
}

static void test_unmatched_end_ignored(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_writer_stats st;
	struct trace_model *m;

	perfetto_writer_function(w, 1, "f");
	perfetto_writer_slice_end(w, PID, PID, T0); /* entered before tracing started */
	perfetto_writer_slice_begin(w, PID, PID, T0 + 10, 1);
	perfetto_writer_slice_end(w, PID, PID, T0 + 20);
	perfetto_writer_slice_end(w, PID, PID, T0 + 30);
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_U64(st.ends_unmatched, 2);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 1);
	if (m->n_slices == 1)
		CHECK_EQ_INT(m->slices[0].dur, 10);
	trace_model_free(m);
	close(fd);
}

static void test_function_names(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_function(w, 1, "before");
	perfetto_writer_slice_begin(w, PID, PID, T0 + 10, 1);
	perfetto_writer_slice_end(w, PID, PID, T0 + 20);
	perfetto_writer_function(w, 1, "after"); /* renamed: a new iid */
	perfetto_writer_function(w, 2, "before"); /* same name: the same iid */
	perfetto_writer_slice_begin(w, PID, PID, T0 + 30, 1);
	perfetto_writer_slice_end(w, PID, PID, T0 + 40);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 50, 2);
	perfetto_writer_slice_end(w, PID, PID, T0 + 60);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 70, 99); /* never registered */
	perfetto_writer_slice_end(w, PID, PID, T0 + 80);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 4);
	if (m->n_slices == 4) {
		CHECK_EQ_STR(m->slices[0].name, "before");
		CHECK_EQ_STR(m->slices[1].name, "after");
		CHECK_EQ_STR(m->slices[2].name, "before");
		CHECK_EQ_STR(m->slices[3].name, "func_99");
	}
	trace_model_free(m);
	close(fd);
}

/* ---- writer: counters and samples -------------------------------------------------- */

static void test_counters(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_process(w, PID, "demo-app");
	perfetto_writer_counter(w, PID, "dropped events", T0 + 2000000, 3);
	perfetto_writer_counter(w, PID, "dropped events", T0, 0); /* out of order: reader sorts */
	perfetto_writer_counter(w, PID + 1, "dropped events", T0 + 5, -7); /* another process */
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_counter_values, 3);
	CHECK_EQ_INT(m->n_processes, 2);
	if (m->n_counter_values == 3) {
		CHECK_EQ_STR(m->counter_values[0].track_name, "dropped events");
		CHECK_EQ_INT(m->counter_values[0].pid, PID);
		CHECK_EQ_U64(m->counter_values[0].ts, T0);
		CHECK(m->counter_values[0].value == 0.0);
		CHECK_EQ_INT(m->counter_values[1].pid, PID + 1);
		CHECK(m->counter_values[1].value == -7.0);
		CHECK_EQ_U64(m->counter_values[2].ts, T0 + 2000000);
		CHECK(m->counter_values[2].value == 3.0);
	}
	trace_model_free(m);
	close(fd);
}

static void test_samples_root_first(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_writer_stats st;
	const struct trace_sample *s;
	struct trace_model *m;

	perfetto_writer_set_sample_freq(w, 1000);
	perfetto_writer_thread(w, PID, PID, "main");
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 150000, 1, PID, PID, demo_frames, 3), 0);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 50000, 0, PID, PID + 1, demo_frames, 2), 0);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 60000, 0, PID, PID + 1, NULL, 0), 0);
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_U64(st.samples, 3);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_samples, 3);
	if (m->n_samples != 3)
		goto out;
	s = &m->samples[2]; /* sorted by ts */
	CHECK_EQ_U64(s->ts, T0 + 150000);
	CHECK_EQ_INT(s->cpu, 1);
	CHECK_EQ_INT(s->pid, PID);
	CHECK_EQ_INT(s->tid, PID);
	CHECK_EQ_INT(s->n_frames, 3);
	if (s->n_frames == 3) {
		CHECK_EQ_STR(s->frames[0], "main");
		CHECK_EQ_STR(s->frames[1], "run_loop");
		CHECK_EQ_STR(s->frames[2], "libc.so.6+0x1e00");
		CHECK_EQ_STR(s->frame_mappings[0], "/usr/bin/demo-app");
		CHECK_EQ_STR(s->frame_mappings[2], "/usr/lib/libc.so.6");
	}
	s = &m->samples[0];
	CHECK_EQ_INT(s->tid, PID + 1);
	CHECK_EQ_INT(s->n_frames, 2);
	if (s->n_frames == 2)
		CHECK_EQ_STR(s->frames[1], "run_loop");
	CHECK_EQ_INT(m->samples[1].n_frames, 0);
out:
	trace_model_free(m);
	close(fd);
}

/* An overhead mark as profd writes it (daemon/sampling/sample_pipeline.c): its own mapping and pc. */
static struct perfetto_frame overhead_mark(const char *name, uint64_t rel_pc)
{
	return (struct perfetto_frame){ .function = name, .rel_pc = rel_pc,
					.mapping_path = PERFETTO_OVERHEAD_MAPPING, .map_end = 4 };
}

/* Overhead samples read back as such, with their kind; the sampling frequency too. */
static void test_overhead_marks_read_back(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_frame marked[5] = { overhead_mark(PERFETTO_OVERHEAD_ROOT, 0),
					    overhead_mark(PERFETTO_OVERHEAD_HOOKS, 1),
					    demo_frames[0], demo_frames[1], demo_frames[2] };
	struct perfetto_frame impostor[2] = { demo_frames[0], demo_frames[1] };
	struct trace_model *m;

	impostor[0].function = PERFETTO_OVERHEAD_ROOT; /* the name, in the program's mapping */
	perfetto_writer_set_sample_freq(w, 4999);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 1000, 0, PID, PID, marked, 5), 0);
	marked[1] = overhead_mark(PERFETTO_OVERHEAD_FLUSHER, 2);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 2000, 0, PID, PID + 1, marked, 4), 0);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 3000, 0, PID, PID, demo_frames, 3), 0);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 4000, 0, PID, PID, impostor, 2), 0);
	CHECK_EQ_INT(perfetto_writer_sample(w, T0 + 5000, 0, PID, PID, marked, 1), 0);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_U64(m->sample_freq, 4999);
	CHECK_EQ_INT(m->n_samples, 5);
	if (m->n_samples == 5) {
		CHECK_EQ_STR(trace_sample_overhead(&m->samples[0]), PERFETTO_OVERHEAD_HOOKS);
		CHECK_EQ_INT(m->samples[0].n_frames, 5);
		CHECK_EQ_STR(m->samples[0].frames[4], "libc.so.6+0x1e00");
		CHECK_EQ_STR(trace_sample_overhead(&m->samples[1]), PERFETTO_OVERHEAD_FLUSHER);
		CHECK(trace_sample_overhead(&m->samples[2]) == NULL);
		CHECK(trace_sample_overhead(&m->samples[3]) == NULL);
		CHECK(trace_sample_overhead(&m->samples[4]) == NULL); /* the root alone: no kind */
	}
	trace_model_free(m);
	close(fd);
}

static uint64_t flushed_bytes(struct perfetto_writer *w)
{
	struct perfetto_writer_stats st;

	CHECK_EQ_INT(perfetto_writer_flush(w), 0);
	perfetto_writer_get_stats(w, &st);
	return st.bytes;
}

static void test_sample_interning_reused(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	uint64_t b0, b1, b2, b3;
	struct trace_model *m;

	perfetto_writer_thread(w, PID, PID, "main");
	b0 = flushed_bytes(w);
	perfetto_writer_sample(w, T0 + 1000, 0, PID, PID, demo_frames, 3);
	b1 = flushed_bytes(w);
	perfetto_writer_sample(w, T0 + 2000, 0, PID, PID, demo_frames, 3);
	b2 = flushed_bytes(w);
	/* a new stack of known frames */
	perfetto_writer_sample(w, T0 + 3000, 0, PID, PID, demo_frames, 2);
	b3 = flushed_bytes(w);
	printf("sample bytes: first %llu, repeated %llu, new stack of known frames %llu\n",
	       (unsigned long long)(b1 - b0), (unsigned long long)(b2 - b1),
	       (unsigned long long)(b3 - b2));
	CHECK(b2 - b1 < 40);
	CHECK(b1 - b0 > 3 * (b2 - b1));
	CHECK(b3 - b2 < 50);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_samples, 3);
	if (m->n_samples == 3) {
		CHECK(m->samples[0].frames == m->samples[1].frames); /* one callstack */
		CHECK_EQ_INT(m->samples[2].n_frames, 2);
	}
	trace_model_free(m);
	close(fd);
}

static void test_many_distinct_callstacks(void)
{
	enum { N = 100000 };
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_frame fr[4];
	struct trace_model *m;
	char name[32];
	int i;

	memcpy(fr, demo_frames, sizeof(demo_frames));
	fr[3] = demo_frames[2];
	for (i = 0; i < N; i++) {
		fr[3].rel_pc = 0x100000 + (uint64_t)i; /* a new leaf frame, a new stack */
		fr[1].rel_pc = 0x1c44 + (uint64_t)(i % 1000);
		snprintf(name, sizeof(name), "fn_%d", i % 5000);
		fr[3].function = name;
		CHECK_EQ_INT(perfetto_writer_sample(w, T0 + (uint64_t)i, 0, PID, PID, fr, 4), 0);
	}
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_samples, N);
	if (m->n_samples == N && m->samples[N - 1].n_frames == 4) {
		snprintf(name, sizeof(name), "fn_%d", (N - 1) % 5000);
		CHECK_EQ_STR(m->samples[N - 1].frames[3], name);
		CHECK_EQ_STR(m->samples[N - 1].frames[0], "main");
	}
	trace_model_free(m);
	close(fd);
}

static void test_samples_lost_summed(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_samples_lost(w, T0, 0, 5);
	perfetto_writer_sample(w, T0 + 1, 0, PID, PID, demo_frames, 3);
	perfetto_writer_samples_lost(w, T0 + 2, 1, 7);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_U64(m->samples_lost, 12);
	CHECK_EQ_INT(m->n_samples, 1);
	trace_model_free(m);
	close(fd);
}

/* A sample nothing could be unwound for: a skip record, counted, never a sample. */
static void test_sample_skipped_counted(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_sample(w, T0, 0, PID, PID, demo_frames, 3);
	perfetto_writer_sample_skipped(w, T0 + 1, 1, PID, PID);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_U64(m->samples_skipped, 1);
	CHECK_EQ_INT(m->n_samples, 1);
	trace_model_free(m);
	close(fd);
}

/* An END's self_samples argument lands on the slice it closes. */
static void test_end_argument_on_slice(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;

	perfetto_writer_function(w, 1, "outer");
	perfetto_writer_function(w, 2, "inner");
	perfetto_writer_slice_begin(w, PID, PID, T0, 1);
	perfetto_writer_slice_begin(w, PID, PID, T0 + 10, 2);
	perfetto_writer_slice_end_args(w, PID, PID, T0 + 20,
				       &(struct perfetto_arg){ "self_samples", 7 }, 1);
	perfetto_writer_slice_end(w, PID, PID, T0 + 30);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 2);
	for (size_t i = 0; i < m->n_slices; i++) {
		int inner = strcmp(m->slices[i].name, "inner") == 0;

		CHECK_EQ_INT(m->slices[i].self_samples, inner ? 7 : -1);
		CHECK_EQ_INT(m->slices[i].dur, inner ? 10 : 30);
	}
	trace_model_free(m);
	close(fd);
}

/* Debug annotations named inline, by iid, and the names defined per sequence. */
struct arg_names_seen {
	unsigned inline_names, by_iid;
	unsigned defined[8][3]; /* [sequence % 8][arg1, arg2, retval] */
};

static void arg_names_cb(const packet_t *p, void *ctx)
{
	static const char *const names[3] = { "arg1", "arg2", "retval" };
	struct arg_names_seen *seen = ctx;
	const Perfetto__Protos__InternedData *d = p->interned_data;

	if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
		for (size_t i = 0; i < p->track_event->n_debug_annotations; i++) {
			const Perfetto__Protos__DebugAnnotation *a = p->track_event->debug_annotations[i];

			if (a->name_field_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME)
				seen->inline_names++;
			else
				seen->by_iid++;
		}
	for (size_t i = 0; d && i < d->n_debug_annotation_names; i++)
		for (int k = 0; k < 3; k++)
			if (strcmp(d->debug_annotation_names[i]->name, names[k]) == 0)
				seen->defined[p->trusted_packet_sequence_id % 8][k]++;
}

/* Slice arguments are named by iid, each name defined once on each thread's sequence. */
static void test_argument_names_interned(void)
{
	const struct perfetto_arg args[2] = { { "arg1", 5, PERFETTO_ARG_INT },
					      { "arg2", 0, PERFETTO_ARG_STRING, 2, "hi" } };
	const struct perfetto_arg retval = { "retval", 9, PERFETTO_ARG_INT };
	struct perfetto_slice_op ops[2] = { { 0, 1, 2 }, { 0, 0, 0 } };
	struct arg_names_seen seen = { 0 };
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;
	unsigned seqs = 0;
	uint8_t *buf;
	size_t len;

	perfetto_writer_function(w, 1, "f");
	for (int i = 0; i < 4; i++) {
		pid_t tid = i < 3 ? PID : PID + 1;

		ops[0].ts = T0 + 10 * i;
		ops[1].ts = T0 + 10 * i + 5;
		perfetto_writer_slices(w, PID, tid, ops, 1, args);
		perfetto_writer_slice_end_args(w, PID, tid, ops[1].ts, &retval, 1);
	}
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_INT(m->n_slices, 4);
	trace_model_free(m);
	buf = read_fd(fd, &len);
	for_each_record(buf, len, arg_names_cb, &seen);
	CHECK_EQ_INT(seen.inline_names, 0);
	CHECK_EQ_INT(seen.by_iid, 4 * 3);
	for (int q = 0; q < 8; q++) {
		if (!seen.defined[q][0])
			continue;
		seqs++;
		for (int k = 0; k < 3; k++)
			CHECK_EQ_INT(seen.defined[q][k], 1);
	}
	CHECK_EQ_INT(seqs, 2);
	free(buf);
	close(fd);
}

/*
 * A flight recorder restarts every sequence in each chunk: the annotation
 * names are defined again there, so every slice of the window keeps its
 * argument (an undefined iid is a problem, and the slice loses it).
 */
static void test_argument_names_in_ring_chunks(void)
{
	struct perfetto_writer_options o = { .ring_bytes = PERFETTO_RING_MIN_BYTES };
	const struct perfetto_arg arg = { "self_samples", 7 };
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new_opts(fd, &o);
	struct trace_model *m;
	size_t ended = 0;

	perfetto_writer_function(w, 1, "f");
	for (uint64_t i = 0; i < 200000; i++) {
		perfetto_writer_slice_begin(w, PID, PID, T0 + 10 * i, 1);
		perfetto_writer_slice_end_args(w, PID, PID, T0 + 10 * i + 5, &arg, 1);
	}
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	for (size_t i = 0; m && i < m->n_slices; i++)
		if (m->slices[i].dur >= 0) {
			ended++;
			CHECK_EQ_INT(m->slices[i].self_samples, 7);
		}
	/* the window: several chunks (of about 450 slices each), not the whole run */
	CHECK(ended > 2000 && ended < 20000);
	trace_model_free(m);
	close(fd);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One random writer call; *begins counts the BEGINs it asked for. */
static void random_call(struct perfetto_writer *w, uint64_t *seed, uint64_t ts, uint64_t *begins)
{
	uint64_t r = rng_next(seed);
	pid_t pid = 100 + (pid_t)(r % 3), tid = pid + (pid_t)((r >> 8) % 4);
	struct perfetto_frame fr[3];
	char name[32];

	snprintf(name, sizeof(name), "n%u", (unsigned)((r >> 16) % 50));
	switch ((r >> 32) % 16) {
	case 0:
		perfetto_writer_thread(w, pid, tid, name);
		break;
	case 1:
		perfetto_writer_process(w, pid, name);
		break;
	case 2:
		perfetto_writer_function(w, (uint32_t)(r >> 40) % 64, name);
		break;
	case 3:
		perfetto_writer_counter(w, pid, name, ts, (int64_t)(r % 1000) - 500);
		break;
	case 4:
	case 5:
		memcpy(fr, demo_frames, sizeof(fr));
		fr[2].rel_pc = (r >> 20) % 300;
		fr[2].function = (r & 1) ? NULL : name;
		perfetto_writer_sample(w, ts, (uint32_t)(r % 4), pid, tid, fr + (r >> 50) % 2,
				       1 + (r >> 52) % 2);
		break;
	case 6:
		perfetto_writer_samples_lost(w, ts, 0, 1);
		break;
	case 7:
	case 8:
	case 9:
	case 10:
		perfetto_writer_slice_begin(w, pid, tid, ts, (uint32_t)(r >> 40) % 64);
		(*begins)++;
		break;
	default:
		perfetto_writer_slice_end(w, pid, tid, ts);
		break;
	}
}

static void test_random_calls_obey_importer_rules(void)
{
	uint64_t seed = 0x2545f4914f6cdd1dull, begins = 0;
	int fd = new_fd(), i;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_writer_stats st;
	struct trace_model *m;

	for (i = 0; i < 50000; i++) {
		random_call(w, &seed, T0 + (uint64_t)i * 7, &begins);
		if (i % 10000 == 9999)
			perfetto_writer_clock_snapshot(w);
	}
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK_EQ_U64(m->n_slices, begins - st.slices_clamped);
	CHECK_EQ_U64(m->n_samples, st.samples);
	CHECK_EQ_U64(m->n_packets, st.packets + 1); /* the closing packet */
	CHECK(m->ended);
	trace_model_free(m);
	close(fd);
}

/* ---- writer: output ---------------------------------------------------------------- */

/* One random op of a thread: mostly calls 1-3 deep, some 600 deep, stray ENDs, args, gaps. */
static struct perfetto_slice_op random_op(uint64_t *seed, uint64_t *ts, uint32_t *depth,
					  uint32_t *n_args)
{
	uint64_t r = rng_next(seed);
	struct perfetto_slice_op op = { 0 };

	*ts += r % 16 == 0 ? 20000 + r % 100000 : r % 4 == 0 ? 200 + r % 300 : r % 100;
	/* now and then behind the last op (a step under 50; r % 64 == 0 was a long one): clamped */
	op.ts = r % 64 == 1 ? *ts - 50 : *ts;
	if ((*depth < 600 && (r >> 8) % 3 == 0) || (*depth < 3 && (r >> 8) % 5 != 0) ||
	    (*depth > 3 && *depth < 600 && (r >> 12) % 8 != 0 && (r >> 20) % 50 == 0)) {
		op.func_id = 1 + (uint32_t)((r >> 24) % 300); /* iids past 127 too; some unnamed */
		(*depth)++;
		return op;
	}
	if (*depth)
		(*depth)--;
	op.n_args = (r >> 32) % 10 == 0 ? 1 + (uint32_t)((r >> 36) % 4) : 0;
	*n_args += op.n_args;
	return op;
}

/* The file after its first packet (the clock snapshot: read at the time). */
static const uint8_t *after_first(const uint8_t *buf, size_t len, size_t *rest)
{
	size_t i = 1;

	while (i < len && buf[i] & 0x80)
		i++;
	i += 1 + buf[1]; /* a snapshot is under 128 bytes: its length is one byte */
	CHECK(i <= len);
	*rest = len - i;
	return buf + i;
}

/* perfetto_writer_slices writes exactly what the calls one by one write. */
/*
 * A run of ops through the cursor, as profd's replay writes them: the usual
 * BEGIN and END inline (perfetto_slice_begin/end), anything they refuse
 * by perfetto_slice_cursor_op. Returns how many went inline.
 */
static size_t cursor_run(struct perfetto_writer *w, pid_t tid, const struct perfetto_slice_op *ops,
			 size_t n, const struct perfetto_arg *args)
{
	struct perfetto_slice_cursor c;
	struct perfetto_slice_pos at;
	size_t inline_ops = 0;

	CHECK_EQ_INT(perfetto_slice_cursor_open(w, PID, tid, &c, &at), 0);
	for (size_t i = 0; i < n; args += ops[i++].n_args) {
		if (!ops[i].n_args && (ops[i].func_id ?
					       perfetto_slice_begin(&c, &at, ops[i].ts, ops[i].func_id) :
					       perfetto_slice_end(&c, &at, ops[i].ts))) {
			inline_ops++;
			continue;
		}
		CHECK_EQ_INT(perfetto_slice_cursor_op(&c, &at, &ops[i], args), 0);
	}
	perfetto_slice_cursor_close(&c, &at);
	return inline_ops;
}

/* The file's bytes after its clock snapshot, as the other's: one check. */
static void check_same_trace(int fd1, int fd2)
{
	uint8_t *b1, *b2;
	size_t l1, l2, r1, r2;

	b1 = read_fd(fd1, &l1);
	b2 = read_fd(fd2, &l2);
	const uint8_t *p1 = after_first(b1, l1, &r1), *p2 = after_first(b2, l2, &r2);
	CHECK_EQ_U64(r1, r2);
	CHECK(r1 == r2 && memcmp(p1, p2, r1) == 0);
	CHECK(l1 > 100000);
	free(b1);
	free(b2);
}

/*
 * The same random runs of one call per op, of perfetto_writer_slices, and
 * through the cursor: the same bytes (times behind the sequence's clock,
 * long deltas, depths past the limit, iids past 127, arguments included).
 */
static void test_slices_run_as_calls(void)
{
	static const struct perfetto_arg args[4] = { { "a", 1 }, { "b", 1000 }, { "c", 1u << 20 },
						     { "d", 7 } };
	int fd1 = new_fd(), fd2 = new_fd(), fd3 = new_fd();
	struct perfetto_writer *w1 = perfetto_writer_new(fd1), *w2 = perfetto_writer_new(fd2),
			       *w3 = perfetto_writer_new(fd3);
	struct perfetto_slice_op ops[64];
	struct perfetto_arg run_args[64 * 4];
	uint64_t seed = 42, ts[2] = { 1000000, 1000000 };
	uint32_t depth[2] = { 0, 0 };
	size_t total = 0, inline_ops = 0;

	for (uint32_t f = 1; f <= 250; f++) {
		char name[32];

		snprintf(name, sizeof(name), "fn_%u", f);
		CHECK_EQ_INT(perfetto_writer_function(w1, f, name), 0);
		CHECK_EQ_INT(perfetto_writer_function(w2, f, name), 0);
		CHECK_EQ_INT(perfetto_writer_function(w3, f, name), 0);
	}
	for (int round = 0; round < 3000; round++) {
		int th = round % 2;
		size_t n = 1 + rng_next(&seed) % 64;
		uint32_t n_args = 0;

		for (size_t i = 0; i < n; i++) {
			uint32_t before = n_args;

			ops[i] = random_op(&seed, &ts[th], &depth[th], &n_args);
			for (uint32_t a = 0; a < ops[i].n_args; a++)
				run_args[before + a] = args[a];
			if (ops[i].func_id)
				perfetto_writer_slice_begin(w1, PID, 100 + th, ops[i].ts, ops[i].func_id);
			else
				perfetto_writer_slice_end_args(w1, PID, 100 + th, ops[i].ts,
							       &run_args[before], ops[i].n_args);
		}
		CHECK_EQ_INT(perfetto_writer_slices(w2, PID, 100 + th, ops, n, run_args), 0);
		inline_ops += cursor_run(w3, 100 + th, ops, n, run_args);
		total += n;
	}
	CHECK_EQ_INT(perfetto_writer_free(w1), 0);
	CHECK_EQ_INT(perfetto_writer_free(w2), 0);
	CHECK_EQ_INT(perfetto_writer_free(w3), 0);
	check_same_trace(fd1, fd2);
	check_same_trace(fd1, fd3);
	/* the cursor wrote most inline, and left some to the op (the test's point) */
	CHECK(inline_ops > total / 4 && inline_ops < total);
	close(fd1);
	close(fd2);
	close(fd3);
}

static void write_some(struct perfetto_writer *w, int n)
{
	int i;

	perfetto_writer_process(w, PID, "demo-app");
	perfetto_writer_function(w, 1, "f");
	for (i = 0; i < n; i++) {
		perfetto_writer_slice_begin(w, PID, PID, T0 + 10 * (uint64_t)i, 1);
		perfetto_writer_slice_end(w, PID, PID, T0 + 10 * (uint64_t)i + 5);
	}
	perfetto_writer_sample(w, T0, 0, PID, PID, demo_frames, 3);
	perfetto_writer_counter(w, PID, "dropped events", T0, 1);
}

static void test_write_error_broken_pipe(void)
{
	struct perfetto_writer_stats st;
	struct perfetto_writer *w;
	int p[2];

	signal(SIGPIPE, SIG_IGN);
	CHECK_EQ_INT(pipe(p), 0);
	close(p[0]);
	w = perfetto_writer_new(p[1]);
	write_some(w, 10);
	CHECK_EQ_INT(perfetto_writer_flush(w), -EPIPE);
	write_some(w, 5000); /* more than a buffer: counted, not written */
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_INT(st.write_error, EPIPE);
	CHECK_EQ_U64(st.bytes, 0);
	CHECK(st.packets > 10000);
	CHECK_EQ_INT(perfetto_writer_free(w), -EPIPE);
	close(p[1]);
}

static void test_write_error_dev_full(void)
{
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	struct perfetto_writer *w;

	if (fd < 0) {
		printf("skip test_write_error_dev_full: /dev/full: %s\n", strerror(errno));
		return;
	}
	w = perfetto_writer_new(fd);
	write_some(w, 100);
	CHECK_EQ_INT(perfetto_writer_free(w), -ENOSPC);
	close(fd);
}

/*
 * A file that fills up mid-write (RLIMIT_FSIZE: a short write, then EFBIG)
 * at limit bytes: it ends at its last whole packet, without the closing one.
 * Returns the bytes kept.
 */
static uint64_t write_until_file_full(rlim_t limit)
{
	struct rlimit old, small = { limit, RLIM_INFINITY };
	struct perfetto_writer_stats st;
	struct perfetto_writer *w;
	struct trace_model *m;
	int fd = new_fd();

	signal(SIGXFSZ, SIG_IGN);
	CHECK_EQ_INT(getrlimit(RLIMIT_FSIZE, &old), 0);
	small.rlim_max = old.rlim_max;
	CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &small), 0);
	w = perfetto_writer_new(fd);
	write_some(w, 20000);
	perfetto_writer_get_stats(w, &st);
	CHECK_EQ_INT(st.write_error, EFBIG);
	CHECK(st.bytes > 0 && st.bytes <= limit);
	CHECK(st.cut_ns > 0);
	CHECK_EQ_INT(perfetto_writer_free(w), -EFBIG);
	CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &old), 0);
	CHECK_EQ_U64((uint64_t)lseek(fd, 0, SEEK_END), st.bytes);
	m = load_fd(fd);
	check_no_problems(m); /* no packet cut in two */
	CHECK(m->n_packets > 100);
	CHECK(!m->ended);     /* the reader knows it was cut */
	CHECK_EQ_U64(m->bytes, st.bytes);
	trace_model_free(m);
	close(fd);
	return st.bytes;
}

/* Limits a byte apart: the file fills at a packet boundary and inside packets of every size. */
static void test_write_error_file_full(void)
{
	unsigned inside = 0;

	for (rlim_t limit = 50000; limit < 50016; limit++)
		inside += write_until_file_full(limit) < limit;
	CHECK(inside > 0); /* some short writes ended inside a packet, and were cut back */
}

/* A trace written to its end says so; one read back from a buffer cut anywhere does not. */
static void test_closing_packet(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;
	uint8_t *buf;
	size_t len;

	write_some(w, 100);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	check_no_problems(m);
	CHECK(m->ended);
	CHECK_EQ_U64(m->bytes, (uint64_t)lseek(fd, 0, SEEK_END));
	trace_model_free(m);
	buf = read_fd(fd, &len);
	CHECK(trace_model_load_buffer(buf, len - 30, &m) == 0);
	CHECK(!m->ended);
	trace_model_free(m);
	free(buf);
	close(fd);
}

static void test_valid_at_every_flush(void)
{
	int fd = new_fd(), i;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct perfetto_writer_stats st;
	struct trace_model *m;
	size_t last = 0;

	for (i = 0; i < 5; i++) {
		write_some(w, 3000 * i); /* some rounds overflow the 64 KiB buffer */
		CHECK_EQ_INT(perfetto_writer_flush(w), 0);
		perfetto_writer_get_stats(w, &st);
		m = load_fd(fd);
		check_no_problems(m);
		CHECK(m->n_packets > last);
		CHECK_EQ_U64(m->n_packets, st.packets);
		last = m->n_packets;
		trace_model_free(m);
	}
	perfetto_writer_free(w);
	close(fd);
}

/* ---- reader: damaged input ------------------------------------------------------------ */

/* Offsets where records start (and the end), from the writer's output. */
static size_t record_starts(const uint8_t *buf, size_t len, size_t *starts, size_t max)
{
	size_t off = 0, n = 0;

	while (off < len && n < max) {
		uint64_t plen = 0;
		unsigned shift = 0;

		starts[n++] = off++;
		do {
			plen |= (uint64_t)(buf[off] & 0x7f) << shift;
			shift += 7;
		} while (buf[off++] & 0x80);
		off += plen;
	}
	return n;
}

static bool is_start(const size_t *starts, size_t n, size_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (starts[i] == off)
			return true;
	return false;
}

static void test_truncated_trace(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);
	size_t len, cut, n_starts, starts[256], last = 0;
	struct trace_model *m;
	uint8_t *buf;

	write_some(w, 20);
	perfetto_writer_free(w);
	buf = read_fd(fd, &len);
	n_starts = record_starts(buf, len, starts, 256);
	CHECK(n_starts < 256);
	for (cut = 1; cut < len; cut++) {
		m = NULL;
		CHECK_EQ_INT(trace_model_load_buffer(buf, cut, &m), 0);
		if (!m)
			continue;
		CHECK(m->n_packets >= last);
		last = m->n_packets;
		CHECK_EQ_INT(has_problem(m, "truncated packet at offset"),
			     !is_start(starts, n_starts, cut));
		trace_model_free(m);
	}
	free(buf);
	close(fd);
}

static void test_garbage_does_not_crash(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t *buf = malloc(4096);
	struct trace_model *m;
	int i;
	size_t len, k;

	for (i = 0; i < 3000; i++) {
		len = rng_next(&seed) % 4096;
		for (k = 0; k < len; k++)
			buf[k] = (uint8_t)rng_next(&seed);
		if (i % 3 == 0 && len) /* look like a trace for a while */
			buf[0] = 0x0a;
		m = NULL;
		CHECK_EQ_INT(trace_model_load_buffer(buf, len, &m), 0);
		trace_model_free(m);
	}
	free(buf);
}

static void test_mutated_trace_does_not_crash(void)
{
	uint64_t seed = 0x243f6a8885a308d3ull;
	int fd = new_fd(), i, j;
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct trace_model *m;
	uint8_t *buf, *copy;
	size_t len;

	write_some(w, 30);
	perfetto_writer_sample(w, T0 + 5, 1, PID, PID + 1, demo_frames + 1, 2);
	perfetto_writer_free(w);
	buf = read_fd(fd, &len);
	copy = malloc(len);
	for (i = 0; i < 3000; i++) {
		memcpy(copy, buf, len);
		for (j = 0; j < 1 + i % 8; j++)
			copy[rng_next(&seed) % len] = (uint8_t)rng_next(&seed);
		m = NULL;
		CHECK_EQ_INT(trace_model_load_buffer(copy, len, &m), 0);
		trace_model_free(m);
	}
	free(copy);
	free(buf);
	close(fd);
}

/* ---- reader: the importer's rules on hand-made packets ------------------------------ */

/* A track event on uuid 5; seq 0 = no sequence id, name_iid 0 = none. */
static void hand_event(struct hand *h, uint32_t seq, bool has_ts, int type, uint64_t name_iid)
{
	hand_track_event(h, seq, has_ts, T0 + h->len, type, NULL, name_iid);
}

static struct trace_model *hand_load(const struct hand *h)
{
	struct trace_model *m = NULL;

	CHECK_EQ_INT(trace_model_load_buffer(h->buf, h->len, &m), 0);
	return m;
}

static void test_reader_missing_sequence_id(void)
{
	struct hand h = { .len = 0 };
	struct trace_model *m;

	hand_thread(&h);
	hand_event(&h, 0, true, 1, 0);
	m = hand_load(&h);
	CHECK(has_problem(m, "without trusted_packet_sequence_id"));
	CHECK_EQ_INT(m->n_slices, 0);
	trace_model_free(m);
}

static void test_reader_missing_timestamp(void)
{
	struct hand h = { .len = 0 };
	struct trace_model *m;

	hand_thread(&h);
	hand_event(&h, 1, false, 1, 0);
	m = hand_load(&h);
	CHECK(has_problem(m, "without timestamp"));
	CHECK_EQ_INT(m->n_slices, 0);
	trace_model_free(m);
}

static void test_reader_interning_needs_cleared(void)
{
	Perfetto__Protos__EventName en = PERFETTO__PROTOS__EVENT_NAME__INIT, *ens[1] = { &en };
	Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	packet_t p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	struct hand h = { .len = 0 };
	struct trace_model *m;

	en.has_iid = 1;
	en.iid = 1;
	en.name = "lost";
	in.n_event_names = 1;
	in.event_names = ens;
	hand_seq(&p, 2); /* sequence 2 is never cleared */
	p.interned_data = &in;
	hand_put(&h, &p);
	hand_thread(&h);
	hand_event(&h, 2, true, 1, 1);
	hand_event(&h, 1, true, 1, 3); /* sequence 1 is valid, but iid 3 is not defined */
	m = hand_load(&h);
	CHECK(has_problem(m, "before its SEQ_INCREMENTAL_STATE_CLEARED"));
	CHECK(has_problem(m, "event name iid 1 undefined on sequence 2"));
	CHECK(has_problem(m, "event name iid 3 undefined on sequence 1"));
	CHECK_EQ_INT(m->n_slices, 2);
	if (m->n_slices == 2)
		CHECK(m->slices[0].name == NULL && m->slices[1].depth == 1);
	trace_model_free(m);
}

static void test_reader_counter_before_descriptor(void)
{
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	packet_t p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	struct hand h = { .len = 0 };
	struct trace_model *m;

	te.has_type = 1;
	te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;
	te.has_track_uuid = 1;
	te.track_uuid = 9;
	te.counter_value_field_case =
		PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE;
	te.counter_value = 3;
	hand_seq(&p, 1);
	p.has_timestamp = 1;
	p.timestamp = T0;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &te;
	hand_put(&h, &p);
	m = hand_load(&h);
	CHECK(has_problem(m, "before its counter descriptor"));
	CHECK_EQ_INT(m->n_counter_values, 0);
	trace_model_free(m);
}

static void test_reader_unmatched_end_and_depth(void)
{
	struct hand *h = calloc(1, sizeof(*h));
	struct trace_model *m;
	int i;

	hand_thread(h);
	hand_event(h, 1, true, 2, 0); /* END with nothing open */
	for (i = 0; i < 513; i++)
		hand_event(h, 1, true, 1, 0);
	m = hand_load(h);
	CHECK(has_problem(m, "unmatched END"));
	CHECK(has_problem(m, "slice_max_depth_exceeded"));
	CHECK_EQ_INT(m->n_slices, 512);
	trace_model_free(m);
	free(h);
}

/* ---- structural check with protoc ----------------------------------------------------- */

static void test_protoc_decodes_trace(void)
{
	const char *proto = "proto/perfetto_trace_subset.proto";
	char cmd[512], path[64], line[256];
	int fd, status, n_events = 0, n_samples = 0;
	struct perfetto_writer *w;
	FILE *out;

	if (system("command -v protoc >/dev/null 2>&1") != 0) {
		printf("skip test_protoc_decodes_trace: protoc is not installed\n");
		return;
	}
	if (access(proto, R_OK) != 0) {
		printf("skip test_protoc_decodes_trace: %s not found (run from the repo root)\n",
		       proto);
		return;
	}
	fd = new_fd();
	w = perfetto_writer_new(fd);
	write_some(w, 3);
	perfetto_writer_samples_lost(w, T0, 0, 2);
	perfetto_writer_free(w);
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
	snprintf(cmd, sizeof(cmd), "protoc --proto_path=proto --decode=perfetto.protos.Trace %s"
		 " < %s 2>&1", proto, path);
	out = popen(cmd, "r");
	CHECK(out != NULL);
	if (!out)
		return;
	while (fgets(line, sizeof(line), out)) {
		n_events += strstr(line, "track_event {") != NULL;
		n_samples += strstr(line, "perf_sample {") != NULL;
	}
	status = pclose(out);
	CHECK_EQ_INT(status, 0);
	CHECK_EQ_INT(n_events, 3 * 2 + 1);
	CHECK_EQ_INT(n_samples, 2);
	close(fd);
}

int main(void)
{
	RUN_TEST(test_first_packet_is_clock_snapshot);
	RUN_TEST(test_process_and_thread_names);
	RUN_TEST(test_nested_slices);
	RUN_TEST(test_end_closes_innermost);
	RUN_TEST(test_depth_clamp);
	RUN_TEST(test_unmatched_end_ignored);
	RUN_TEST(test_function_names);
	RUN_TEST(test_counters);
	RUN_TEST(test_samples_root_first);
	RUN_TEST(test_overhead_marks_read_back);
	RUN_TEST(test_sample_interning_reused);
	RUN_TEST(test_many_distinct_callstacks);
	RUN_TEST(test_samples_lost_summed);
	RUN_TEST(test_sample_skipped_counted);
	RUN_TEST(test_end_argument_on_slice);
	RUN_TEST(test_argument_names_interned);
	RUN_TEST(test_argument_names_in_ring_chunks);
	RUN_TEST(test_random_calls_obey_importer_rules);
	RUN_TEST(test_write_error_broken_pipe);
	RUN_TEST(test_write_error_dev_full);
	RUN_TEST(test_write_error_file_full);
	RUN_TEST(test_closing_packet);
	RUN_TEST(test_valid_at_every_flush);
	RUN_TEST(test_truncated_trace);
	RUN_TEST(test_garbage_does_not_crash);
	RUN_TEST(test_mutated_trace_does_not_crash);
	RUN_TEST(test_reader_missing_sequence_id);
	RUN_TEST(test_reader_missing_timestamp);
	RUN_TEST(test_reader_interning_needs_cleared);
	RUN_TEST(test_reader_counter_before_descriptor);
	RUN_TEST(test_reader_unmatched_end_and_depth);
	RUN_TEST(test_protoc_decodes_trace);
	RUN_TEST(test_slices_run_as_calls);
	return unit_summary();
}
