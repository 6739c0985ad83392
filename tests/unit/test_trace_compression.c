/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the writer's output stage (viewer-export/trace_sink.c) and
 * the reader's unwrapping (packet_decompress.c): the same calls written
 * plain, deflate and zstd read back identically; damaged compressed blocks
 * are one clear problem each; the flight recorder keeps about its size, and
 * its windows (snapshots and the final trace) load alone under the
 * importer's rules, with calls open before the window shown from its start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/unit/unit.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader.h"

#define T0 2000000000000ull
#define PID 777

static int new_fd(void)
{
	int fd = memfd_create("trace-compression-test", MFD_CLOEXEC);

	CHECK(fd >= 0);
	return fd;
}

static struct trace_model *load_fd(int fd)
{
	struct trace_model *m = NULL;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	CHECK_EQ_INT(trace_model_load(path, &m), 0);
	return m;
}

static size_t show_problems(const struct trace_model *m)
{
	for (size_t i = 0; m && i < m->n_problems && i < 10; i++)
		fprintf(stderr, "  problem: %s\n", m->problems[i]);
	return m ? m->n_problems : 1;
}

static bool has_problem(const struct trace_model *m, const char *needle)
{
	for (size_t i = 0; i < m->n_problems; i++)
		if (strstr(m->problems[i], needle))
			return true;
	return false;
}

static uint64_t file_size(int fd)
{
	struct stat st;

	CHECK_EQ_INT(fstat(fd, &st), 0);
	return (uint64_t)st.st_size;
}

/*
 * A program's worth of calls: three threads, a call on the first that
 * stays open from the start to `end_outer` events, nested calls, a
 * counter, CPU samples. Event i is at T0 + 10 i ns. Returns the next i.
 */
static uint64_t write_calls(struct perfetto_writer *w, uint64_t from, uint64_t n,
			    uint64_t end_outer)
{
	static const struct perfetto_frame frames[2] = {
		{ .function = "main", .rel_pc = 0x10, .mapping_path = "/bin/prog",
		  .map_start = 0x1000, .map_end = 0x9000 },
		{ .function = "work", .rel_pc = 0x40, .mapping_path = "/bin/prog",
		  .map_start = 0x1000, .map_end = 0x9000 },
	};
	uint64_t i;

	if (from == 0) {
		perfetto_writer_process(w, PID, "prog");
		for (uint32_t f = 0; f < 40; f++) {
			char name[32];

			snprintf(name, sizeof(name), "fn_%u", f);
			perfetto_writer_function(w, f, name);
		}
		perfetto_writer_slice_begin(w, PID, PID, T0, 39); /* the outer call */
		perfetto_writer_slice_begin(w, PID, PID + 5, T0, 38); /* on a thread silent after */
	}
	for (i = from; i < from + n; i++) {
		uint64_t ts = T0 + 10 * i;
		pid_t tid = PID + (pid_t)(i % 3);

		if (i == end_outer)
			perfetto_writer_slice_end(w, PID, PID, ts);
		perfetto_writer_slice_begin(w, PID, tid, ts, (uint32_t)(i % 7));
		perfetto_writer_slice_begin(w, PID, tid, ts + 1, (uint32_t)(7 + i % 31));
		perfetto_writer_slice_end(w, PID, tid, ts + 2);
		if (i % 5 == 0)
			perfetto_writer_slice_end_args(w, PID, tid, ts + 3,
						       &(struct perfetto_arg){ "self_samples", 1 }, 1);
		else
			perfetto_writer_slice_end(w, PID, tid, ts + 3);
		if (i % 1000 == 0)
			perfetto_writer_counter(w, PID, "dropped events", ts, (int64_t)(i / 1000));
		if (i % 500 == 0)
			perfetto_writer_sample(w, ts + 4, 0, PID, tid, frames, 1 + i % 2);
	}
	return i;
}

static struct trace_model *write_and_load(enum perfetto_compression c, uint64_t *size)
{
	int fd = new_fd();
	struct perfetto_writer *w =
		perfetto_writer_new_opts(fd, &(struct perfetto_writer_options){ .compression = c });
	struct trace_model *m;

	CHECK(w != NULL);
	write_calls(w, 0, 200000, 150000);
	perfetto_writer_func_totals(w, PID, T0 + 3000000, &(struct perfetto_func_totals){
		.name = "fn_1", .calls = 5, .exited = 5, .total_ns = 50 });
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	*size = file_size(fd);
	m = load_fd(fd);
	close(fd);
	return m;
}

static void check_same_model(const struct trace_model *a, const struct trace_model *b)
{
	CHECK_EQ_U64(a->n_slices, b->n_slices);
	CHECK_EQ_U64(a->n_samples, b->n_samples);
	CHECK_EQ_U64(a->n_counter_values, b->n_counter_values);
	CHECK_EQ_U64(a->n_func_totals, b->n_func_totals);
	CHECK_EQ_U64(a->n_threads, b->n_threads);
	for (size_t i = 0; i < a->n_slices && i < b->n_slices; i++) {
		const struct trace_slice *x = &a->slices[i], *y = &b->slices[i];

		if (x->ts != y->ts || x->dur != y->dur || x->depth != y->depth ||
		    x->tid != y->tid || strcmp(x->name, y->name) != 0 ||
		    x->self_samples != y->self_samples) {
			fprintf(stderr, "slice %zu differs: %s@%llu vs %s@%llu\n", i, x->name,
				(unsigned long long)x->ts, y->name, (unsigned long long)y->ts);
			CHECK(false);
			break;
		}
	}
	for (size_t i = 0; i < a->n_samples && i < b->n_samples; i++)
		CHECK_EQ_U64(a->samples[i].n_frames, b->samples[i].n_frames);
}

static void test_round_trip_each_compression(void)
{
	uint64_t plain_size, deflate_size, zstd_size;
	struct trace_model *plain = write_and_load(PERFETTO_COMPRESSION_NONE, &plain_size);
	struct trace_model *deflated = write_and_load(PERFETTO_COMPRESSION_DEFLATE, &deflate_size);
	struct trace_model *zstd = write_and_load(PERFETTO_COMPRESSION_ZSTD, &zstd_size);

	CHECK_EQ_INT(show_problems(plain), 0);
	CHECK_EQ_INT(show_problems(deflated), 0);
	CHECK_EQ_INT(show_problems(zstd), 0);
	CHECK_EQ_U64(plain->n_slices, 2 + 2 * 200000);
	check_same_model(plain, deflated);
	check_same_model(plain, zstd);
	CHECK_EQ_U64(plain->n_packets, deflated->n_packets); /* the wrappers are not counted */
	CHECK(deflate_size * 4 < plain_size);
	CHECK(zstd_size * 4 < plain_size);
	fprintf(stderr, "round trip: plain %llu, deflate %llu, zstd %llu bytes\n",
		(unsigned long long)plain_size, (unsigned long long)deflate_size,
		(unsigned long long)zstd_size);
	trace_model_free(plain);
	trace_model_free(deflated);
	trace_model_free(zstd);
}

/* The first record of a deflate trace is one compressed_packets wrapper (tag 50 = 0x92 0x03). */
static void test_deflate_blocks_are_wrappers(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new_opts(
		fd, &(struct perfetto_writer_options){ .compression = PERFETTO_COMPRESSION_DEFLATE });
	uint8_t head[8];
	size_t i = 1;

	write_calls(w, 0, 50000, 1);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	CHECK_EQ_INT(pread(fd, head, sizeof(head), 0), (long long)sizeof(head));
	CHECK_EQ_INT(head[0], 0x0a);
	while (i < sizeof(head) && (head[i] & 0x80))
		i++;
	CHECK_EQ_INT(head[i + 1], 0x92);
	CHECK_EQ_INT(head[i + 2], 0x03);
	close(fd);
}

/* A hand-made wrapper packet around `data`, for field 50 or 133. */
static size_t wrap(uint8_t *out, unsigned field, const uint8_t *data, size_t n)
{
	uint8_t *p = out;
	unsigned tag = field << 3 | 2;
	size_t body = 2 + (n < 128 ? 1 : 2) + n;

	*p++ = 0x0a;
	*p++ = (uint8_t)(body | 0x80);
	*p++ = (uint8_t)(body >> 7);
	*p++ = (uint8_t)(tag | 0x80);
	*p++ = (uint8_t)(tag >> 7);
	if (n < 128) {
		*p++ = (uint8_t)n;
	} else {
		*p++ = (uint8_t)(n | 0x80);
		*p++ = (uint8_t)(n >> 7);
	}
	memcpy(p, data, n);
	return (size_t)(p - out) + n;
}

static struct trace_model *load_bytes(const uint8_t *p, size_t n)
{
	struct trace_model *m = NULL;

	CHECK_EQ_INT(trace_model_load_buffer(p, n, &m), 0);
	return m;
}

static void test_damaged_blocks_rejected(void)
{
	static const uint8_t inner[] = { 0x0a, 0x02, 0x50, 0x01 }; /* one packet: seq id 1 */
	uint8_t z[64], buf[256];
	uLongf zlen = sizeof(z);
	struct trace_model *m;
	size_t n;

	CHECK_EQ_INT(compress2(z, &zlen, inner, sizeof(inner), 6), Z_OK);
	/* intact: one packet inside */
	m = load_bytes(buf, wrap(buf, 50, z, zlen));
	CHECK_EQ_INT(show_problems(m), 0);
	CHECK_EQ_U64(m->n_packets, 1);
	trace_model_free(m);
	/* truncated */
	m = load_bytes(buf, wrap(buf, 50, z, zlen - 3));
	CHECK_EQ_U64(m->n_packets, 0);
	CHECK_EQ_INT(m->n_problems, 1);
	CHECK(has_problem(m, "compressed_packets (deflate) of"));
	CHECK(has_problem(m, "do not decompress: truncated"));
	trace_model_free(m);
	/* corrupt */
	memcpy(buf, z, zlen);
	buf[0] ^= 0x55;
	n = wrap(buf + 128, 50, buf, zlen);
	m = load_bytes(buf + 128, n);
	CHECK_EQ_INT(m->n_problems, 1);
	CHECK(has_problem(m, "do not decompress"));
	trace_model_free(m);
	/* zstd field holding garbage */
	m = load_bytes(buf, wrap(buf, 133, (const uint8_t *)"not zstd at all", 15));
	CHECK_EQ_INT(m->n_problems, 1);
	CHECK(has_problem(m, "zstd_compressed_packets of 15 bytes do not decompress"));
	trace_model_free(m);
}

/* Compressed packets inside compressed packets: the importer does not unwrap twice. */
static void test_nested_wrapper_flagged(void)
{
	static const uint8_t inner[] = { 0x0a, 0x02, 0x50, 0x01 };
	uint8_t z[64], level1[128], z2[192], buf[256];
	uLongf zlen = sizeof(z), z2len = sizeof(z2);
	struct trace_model *m;
	size_t n;

	CHECK_EQ_INT(compress2(z, &zlen, inner, sizeof(inner), 6), Z_OK);
	n = wrap(level1, 50, z, zlen);
	CHECK_EQ_INT(compress2(z2, &z2len, level1, n, 6), Z_OK);
	m = load_bytes(buf, wrap(buf, 50, z2, z2len));
	CHECK(has_problem(m, "compressed packets inside compressed packets"));
	CHECK_EQ_U64(m->n_packets, 0);
	trace_model_free(m);
}

/* ---- flight recorder ------------------------------------------------------------ */

#define RING (1u << 20)

static struct perfetto_writer *ring_writer(int fd, enum perfetto_compression c)
{
	struct perfetto_writer *w = perfetto_writer_new_opts(
		fd, &(struct perfetto_writer_options){ .compression = c, .ring_bytes = RING });

	CHECK(w != NULL);
	return w;
}

static const struct trace_slice *last_slice(const struct trace_model *m)
{
	return m->n_slices ? &m->slices[m->n_slices - 1] : NULL;
}

static const struct trace_slice *slice_named(const struct trace_model *m, const char *name)
{
	for (size_t i = 0; i < m->n_slices; i++)
		if (strcmp(m->slices[i].name, name) == 0)
			return &m->slices[i];
	return NULL;
}

/* A window: loads alone, ends with the last call written, starts after T0. */
static void check_window(const struct trace_model *m, uint64_t next_i, bool outer_open)
{
	const struct trace_slice *last = last_slice(m), *outer = slice_named(m, "fn_39");

	CHECK_EQ_INT(show_problems(m), 0);
	CHECK(m->n_slices > 1000);
	CHECK(last != NULL);
	if (!last || !outer)
		return;
	/* the last BEGIN written: event next_i - 1, its inner call at ts + 1 */
	CHECK_EQ_U64(last->ts, T0 + 10 * (next_i - 1) + 1);
	CHECK(m->slices[0].ts > T0 + 10 * 1000); /* old chunks were dropped */
	/* the outer call began at T0: the window shows it from its start, not earlier */
	CHECK(outer->ts >= m->slices[0].ts && outer->ts > T0);
	CHECK_EQ_INT(outer->depth, 0);
	/* a call open on a thread that made no event since: still there, from the window's start */
	CHECK(slice_named(m, "fn_38") != NULL);
	CHECK(slice_named(m, "fn_38") && slice_named(m, "fn_38")->ts > T0 + 10 * 1000 &&
	      slice_named(m, "fn_38")->ts >= m->slices[0].ts);
	if (outer_open)
		CHECK_EQ_INT(outer->dur, -1);
	else
		CHECK(outer->dur > 0);
}

static void ring_case(enum perfetto_compression c)
{
	int fd = new_fd(), snap1 = new_fd(), snap2 = new_fd();
	struct perfetto_writer *w = ring_writer(fd, c);
	struct perfetto_writer_stats st;
	struct trace_model *m1, *m2, *m;
	const struct trace_slice *outer;
	uint64_t i;

	i = write_calls(w, 0, 400000, 1500000);
	perfetto_writer_poll(w);
	CHECK(perfetto_writer_snapshot(w, snap1) > 0);
	CHECK_EQ_U64(file_size(fd), 0); /* the ring stays in memory until the end */
	i = write_calls(w, i, 400000, 1500000);
	CHECK_EQ_INT(perfetto_writer_flush(w), 0); /* all compressed: the snapshot has it all */
	CHECK(perfetto_writer_snapshot(w, snap2) > 0);
	m1 = load_fd(snap1);
	m2 = load_fd(snap2);
	check_window(m2, i, true);
	CHECK(last_slice(m2)->ts > last_slice(m1)->ts);
	CHECK_EQ_INT(show_problems(m1), 0);
	i = write_calls(w, i, 800000, 1500000); /* the outer call ends in this part */
	perfetto_writer_get_stats(w, &st);
	CHECK(st.raw_bytes > 4 * RING); /* much more was recorded than kept */
	CHECK(st.ring_bytes <= RING + RING / 8);
	CHECK_EQ_INT(perfetto_writer_free(w), 0);
	m = load_fd(fd);
	CHECK_EQ_INT(show_problems(m), 0);
	CHECK(file_size(fd) <= RING + RING / 8);
	CHECK(file_size(fd) >= RING / 2);
	CHECK(last_slice(m) && last_slice(m)->ts == T0 + 10 * (i - 1) + 1);
	CHECK(m->slices[0].ts > T0 + 10 * 1000);
	/* the outer call ended at event 1.5 M: in the window if it reaches back that far */
	outer = slice_named(m, "fn_39");
	if (m->slices[0].ts <= T0 + 10 * 1500000)
		CHECK(outer && outer->ts > T0 && outer->dur > 0);
	else
		CHECK(outer == NULL);
	CHECK(slice_named(m, "fn_38") && slice_named(m, "fn_38")->dur == -1);
	fprintf(stderr, "ring (%s): file %llu bytes of %llu recorded, %zu slices kept\n",
		c == PERFETTO_COMPRESSION_NONE ? "none" : c == PERFETTO_COMPRESSION_ZSTD ? "zstd" :
											 "deflate",
		(unsigned long long)file_size(fd), (unsigned long long)st.raw_bytes, m->n_slices);
	trace_model_free(m1);
	trace_model_free(m2);
	trace_model_free(m);
	close(fd);
	close(snap1);
	close(snap2);
}

static void test_ring_deflate(void)
{
	ring_case(PERFETTO_COMPRESSION_DEFLATE);
}

static void test_ring_plain(void)
{
	ring_case(PERFETTO_COMPRESSION_NONE);
}

static void test_ring_zstd(void)
{
	ring_case(PERFETTO_COMPRESSION_ZSTD);
}

/* Snapshots only exist for rings; rings smaller than a block are refused. */
static void test_ring_refusals(void)
{
	int fd = new_fd();
	struct perfetto_writer *w = perfetto_writer_new(fd);

	CHECK_EQ_INT(perfetto_writer_snapshot(w, fd), -EINVAL);
	CHECK(!perfetto_writer_is_ring(w));
	perfetto_writer_free(w);
	errno = 0;
	CHECK(perfetto_writer_new_opts(fd, &(struct perfetto_writer_options){
		      .ring_bytes = PERFETTO_RING_MIN_BYTES - 1 }) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
	close(fd);
}

int main(void)
{
	RUN_TEST(test_round_trip_each_compression);
	RUN_TEST(test_deflate_blocks_are_wrappers);
	RUN_TEST(test_damaged_blocks_rejected);
	RUN_TEST(test_nested_wrapper_flagged);
	RUN_TEST(test_ring_deflate);
	RUN_TEST(test_ring_plain);
	RUN_TEST(test_ring_zstd);
	RUN_TEST(test_ring_refusals);
	return unit_summary();
}
