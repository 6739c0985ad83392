// SPDX-License-Identifier: MIT
/*
 * Writes the seed corpus of the event decoder, frame reader, control message
 * and trace reader targets (run by make-seeds.sh, not built by run.sh). The
 * inputs come from the project's own writers and wire structs, in each
 * target's input format; every valid event seed is decoded here with
 * daemon/events/event_decoder.c, so a wire change that breaks a seed fails the run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "daemon/events/event_decoder.h"
#include "common/arg_spec.h"
#include "proto/event_wire.h"
#include "proto/func_aggregates.h"
#include "proto/frame.h"
#include "profd.pb-c.h"
#include "viewer-export/perfetto_writer.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static uint8_t raw[4096], seed[1 << 16];
static size_t raw_len, seed_len;

static void die(const char *what)
{
	fprintf(stderr, "seed_gen: %s\n", what);
	exit(1);
}

static void put(const void *p, size_t n)
{
	if (n > sizeof(raw) - raw_len)
		die("raw buffer full");
	memcpy(raw + raw_len, p, n);
	raw_len += n;
}

static void seed_put(const void *p, size_t n)
{
	if (n > sizeof(seed) - seed_len)
		die("seed buffer full");
	memcpy(seed + seed_len, p, n);
	seed_len += n;
}

static void seed_write(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(seed, 1, seed_len, f) != seed_len || fclose(f))
		die(path);
	seed_len = 0;
}

/* ---- event decoder: {mode byte, then frames of 2-byte length + bytes} ------------------ */

static void chunk(uint32_t kind, uint32_t tid, uint32_t count, uint32_t len, uint64_t drops,
		  const void *b, size_t n)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .len = len,
					.drops = drops };

	put(&h, sizeof(h));
	if (n)
		put(b, n);
}

static void pair(uint64_t tsc, uint64_t mono)
{
	struct event_clock_pair p = { tsc, mono };

	chunk(EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, 0, &p, sizeof(p));
}

/* One value of each kind of payload (--args/--retval: proto/event_wire.h EVENT_VALUES). */
static uint8_t *values(struct event_encoder *enc, uint8_t *p, int exit)
{
	struct arg_item str = { .source = ARG_SRC_INT, .index = 1, .cls = ARG_CLASS_STR, .size = 8 };
	struct arg_item i32 = { .source = ARG_SRC_INT, .index = 2, .cls = ARG_CLASS_INT, .size = 4 };
	struct arg_item f64 = { .source = exit ? ARG_SRC_FPRET : ARG_SRC_FP, .index = !exit,
				.cls = ARG_CLASS_FLOAT, .size = 8 };
	double d = 2.5;

	p = event_encode_values_tag(enc, p, exit ? 1 : 3);
	if (!exit) {
		p = event_put_varint(event_put_varint(p, arg_item_desc(&i32)), event_zigzag(-7));
		p = event_put_varint(event_put_varint(p, arg_item_desc(&str)), 5 << 2 | EVENT_STR_CUT);
		memcpy(p, "hello", 5);
		p += 5;
	}
	p = event_put_varint(p, arg_item_desc(&f64));
	memcpy(p, &d, 8);
	return p + 8;
}

/*
 * n_calls calls of functions 1..n_calls, each nested in the one before:
 * enters then exits; the outermost with arguments and a return value.
 */
static void events(uint32_t tid, uint64_t tsc, uint32_t n_calls, uint64_t drops)
{
	uint8_t body[8 * 2 * EVENT_WORST + 128], *p = body;
	struct event_encoder enc = { 0 };

	for (uint32_t i = 0; i < n_calls; i++) {
		p = event_encode(&enc, p, tsc + 100 * i, 1 + i, EVENT_ENTER,
				 0x555555555139 + 16 * i, 0x7fffffffe000 - 32 * i);
		if (i == 0)
			p = values(&enc, p, 0);
	}
	for (uint32_t i = n_calls; i-- > 0;) {
		p = event_encode(&enc, p, tsc + 100 * (2 * n_calls - i), 1 + i, EVENT_EXIT, 0, 0);
		if (i == 0)
			p = values(&enc, p, 1);
	}
	chunk(EVENT_CHUNK_EVENTS, tid, enc.count, (uint32_t)(p - body), drops, body,
	      (size_t)(p - body));
}

/*
 * The same calls as the retired RECORDS chunk wrote them (16-byte ring units:
 * each enter then its frame, then the exits), which the decoder must refuse.
 */
static void retired_records(uint32_t tid, uint64_t tsc, uint32_t n_calls)
{
	struct event_record u[3 * 8];
	uint32_t n = 0;

	for (uint32_t i = 0; i < n_calls; i++) {
		struct event_enter_frame f = { 0x555555555139 + 16 * i,
					       (0x7fffffffe000 - 32 * i) | EVENT_FRAME_TAG };

		u[n++] = (struct event_record){ tsc + 100 * i, 1 + i, EVENT_ENTER };
		memcpy(&u[n++], &f, sizeof(f));
	}
	for (uint32_t i = n_calls; i-- > 0;)
		u[n++] = (struct event_record){ tsc + 100 * (2 * n_calls - i), 1 + i, EVENT_EXIT };
	chunk(EVENT_CHUNK_RECORDS, tid, n, 0, 0, u, n * sizeof(u[0]));
}

/*
 * The thread's aggregates after frame f (proto/func_aggregates.h): its drop
 * counters, then functions 1..3, each with a few sparse buckets, as the
 * flusher writes them.
 */
static void aggregates(uint32_t tid, int f)
{
	uint8_t body[1024], *p = body;
	uint32_t n_funcs = 3;

	for (int r = 0; r < AGG_DROP_REASONS; r++)
		p = event_put_varint(p, r == AGG_DROP_BUFFER_FULL ? (uint64_t)f : 0);
	p = event_put_varint(p, 0); /* unattributed */
	for (int r = 0; r < AGG_FILTER_REASONS; r++)
		p = event_put_varint(p, r == AGG_FILTER_SHORT ? (uint64_t)f : 0);
	for (uint32_t fn = 1; fn <= n_funcs; fn++) {
		uint64_t calls = (uint64_t)(f + 1) * fn;
		const uint64_t fixed[AGG_WIRE_FIELDS] = {
			fn, calls, calls, 0, (uint64_t)f, 0, 250 * calls, 200 * calls, 100 + 20 * fn
		};
		uint32_t buckets[2] = { agg_bucket(90), agg_bucket(100 + 20 * fn) };

		for (int i = 0; i < AGG_WIRE_FIELDS; i++)
			p = event_put_varint(p, fixed[i]);
		p = event_put_varint(p, 2);              /* buckets used */
		p = event_put_varint(p, buckets[0]);     /* the first: its index */
		p = event_put_varint(p, calls - 1);
		p = event_put_varint(p, buckets[1] - buckets[0] - 1);
		p = event_put_varint(p, 1);
	}
	chunk(EVENT_CHUNK_AGGREGATES, tid, n_funcs, (uint32_t)(p - body), 0, body,
	      (size_t)(p - body));
}

/* Frame f of a small session: the agent's chunk order (flusher_cycle). */
static void session_frame(int f, int retired)
{
	uint64_t tsc = 1000000 + 3000 * f + 10;
	uint32_t n_calls = f == 2 ? 0 : 3 - f;

	raw_len = 0;
	if (f == 0) {
		pair(1000000, 5000000);
		chunk(EVENT_CHUNK_THREAD_NAME, 42, 0, 0, 0, "demo-main-thread", 16);
	}
	if (retired)
		retired_records(42, tsc, n_calls);
	else
		events(42, tsc, n_calls, f == 2 ? 3 : 0);
	aggregates(42, f);
	if (f == 2)
		chunk(EVENT_CHUNK_THREAD_EXIT, 42, 0, 0, 3, NULL, 0);
	pair(1000000 + 3000 * (f + 1), 5000000 + 1000 * (f + 1));
}

static void seed_frame(const void *p, size_t n)
{
	uint8_t len[2] = { (uint8_t)n, (uint8_t)(n >> 8) };

	if (n > 0xffff)
		die("event frame too big for a seed");
	seed_put(len, 2);
	seed_put(p, n);
}

/* Compresses raw[] as one flushed frame of c's stream into out; returns its size. */
static size_t compress_frame(ZSTD_CCtx *c, uint8_t *out, size_t cap)
{
	ZSTD_inBuffer in = { raw, raw_len, 0 };
	ZSTD_outBuffer o = { out, cap, 0 };
	size_t left;

	do
		left = ZSTD_compressStream2(c, &o, &in, ZSTD_e_flush);
	while (left != 0 && !ZSTD_isError(left) && o.pos < o.size);
	if (left)
		die("zstd");
	return o.pos;
}

static void count_record(void *ctx, uint32_t tid, const struct decoded_event *ev)
{
	(void)tid, (void)ev;
	++*(size_t *)ctx;
}

static void count_name(void *ctx, uint32_t tid, const char *name)
{
	(void)tid, (void)name;
	++*(size_t *)ctx;
}

static void count_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	(void)tid, (void)td;
	++*(size_t *)ctx;
}

static void count_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	(void)tid, (void)fa;
	++*(size_t *)ctx;
}

static const struct event_decoder_callbacks count_cb = {
	.record = count_record,
	.thread_name = count_name,
	.thread_drops = count_thread_drops,
	.func_agg = count_func_agg,
};

/*
 * The session in the target's two modes (zstd frames as sent, or chunks the
 * target compresses), plus the same session with the retired RECORDS chunks,
 * which the decoder must refuse. Returns the events, thread names and
 * aggregates the decoder delivered.
 */
static size_t event_seeds(const char *dir)
{
	static const char *const names[] = { "session-zstd", "session-raw",
					     "retired-records-zstd" };
	size_t delivered = 0;

	for (int mode = 0; mode < 3; mode++) {
		ZSTD_CCtx *c = ZSTD_createCCtx();
		struct event_decoder *d = event_decoder_new();
		int retired = mode == 2, refused = 0;

		if (!c || !d)
			die("out of memory");
		ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
		seed_put(&(uint8_t){ mode == 1 }, 1);
		for (int f = 0; f < 3; f++) {
			uint8_t packed[8192];
			size_t n, before = delivered;
			char err[160] = "";
			int ret;

			session_frame(f, retired);
			n = compress_frame(c, packed, sizeof(packed));
			if (mode == 1)
				seed_frame(raw, raw_len);
			else
				seed_frame(packed, n);
			if (refused)
				continue;
			ret = event_decoder_feed(d, packed, n, &count_cb, &delivered, err, sizeof(err));
			if (ret && !retired) {
				fprintf(stderr, "seed_gen: %s frame %d: %s\n", names[mode], f, err);
				exit(1);
			}
			if (ret && retired && delivered > before)
				die("the decoder delivered part of a frame with a RECORDS chunk");
			refused = ret != 0;
		}
		if (retired && !refused)
			die("the decoder took a RECORDS chunk");
		seed_write(dir, names[mode]);
		event_decoder_free(d);
		ZSTD_freeCCtx(c);
	}
	return delivered;
}

/* ---- frame reader: {8-byte piece-size seed, then frames} ------------------------------- */

static void frame_seeds(const char *dir)
{
	static const uint32_t types[] = { FRAME_AGENT_HELLO, FRAME_EVENTS, FRAME_ERROR,
					  FRAME_AGENT_GOODBYE };
	uint8_t hdr[FRAME_HEADER_SIZE], body[300];

	for (int s = 0; s < 2; s++) {
		seed_put("\x15\xcd\x5b\x07\x3a\x11\x90\x42" + s, 8);
		for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
			size_t n = s ? 7 * i : 100 * i;

			memset(body, 'a' + (int)i, n);
			frame_header_encode(hdr, types[i], (uint32_t)n);
			seed_put(hdr, sizeof(hdr));
			seed_put(body, n);
		}
		if (s) { /* ends with a header announcing more than there is */
			frame_header_encode(hdr, FRAME_EVENTS, 5000);
			seed_put(hdr, sizeof(hdr));
		}
		seed_write(dir, s ? "stream-1" : "stream-0");
	}
}

/* ---- control messages: a connection's bytes, frames of packed messages ----------------- */

/* Appends a frame of type carrying m packed (m NULL: an empty payload). */
static void msg_frame(uint32_t type, const ProtobufCMessage *m)
{
	uint8_t hdr[FRAME_HEADER_SIZE], buf[4096];
	size_t n = m ? protobuf_c_message_get_packed_size(m) : 0;

	if (n > sizeof(buf))
		die("control message too big for a seed");
	if (m && protobuf_c_message_pack(m, buf) != n)
		die("protobuf-c pack");
	frame_header_encode(hdr, type, (uint32_t)n);
	seed_put(hdr, sizeof(hdr));
	seed_put(buf, n);
}

static void client_seeds(const char *dir)
{
	char *patterns[] = { "main", "compute*", "!*_cold", "libz*:inflate*" };
	char *argv[] = { "demo", "-n", "3" };
	Profd__RunRequest run = PROFD__RUN_REQUEST__INIT;
	Profd__TargetForked forked = PROFD__TARGET_FORKED__INIT;
	Profd__TargetExited exited = PROFD__TARGET_EXITED__INIT;
	Profd__StatusRequest status = PROFD__STATUS_REQUEST__INIT;
	Profd__StopRequest stop = PROFD__STOP_REQUEST__INIT;

	run.n_func_patterns = ARRAY_SIZE(patterns);
	run.func_patterns = patterns;
	run.sample_freq = 99;
	run.target_comm = "demo";
	run.output_name = "demo.pftrace";
	run.n_argv = ARRAY_SIZE(argv);
	run.argv = argv;
	run.call_graph = 2;
	run.stack_bytes = 8192;
	run.ring_pages = 64;
	run.buffer_size = 16u << 20;
	forked.pid = 4242;
	exited.wait_status = 0x100;
	msg_frame(FRAME_RUN_REQUEST, &run.base);
	msg_frame(FRAME_TARGET_FORKED, &forked.base);
	msg_frame(FRAME_TARGET_EXITED, &exited.base);
	seed_write(dir, "client-run");

	run.attach_pid = 4242;
	run.n_argv = 0;
	run.stack_bytes = 0;
	run.ring_pages = 0;
	msg_frame(FRAME_RUN_REQUEST, &run.base);
	msg_frame(FRAME_TARGET_EXITED, &exited.base);
	seed_write(dir, "client-attach");

	msg_frame(FRAME_STATUS_REQUEST, &status.base);
	seed_write(dir, "client-status");
	stop.session_id = 1;
	msg_frame(FRAME_STOP_REQUEST, &stop.base);
	seed_write(dir, "client-stop");
}

/* A table of functions first..last, with one skipped function and one warning. */
static void table_frame(uint32_t first, uint32_t last)
{
	static char *const fn_names[] = { "main", "compute", "helper", "_Z6squarei", "plugin_run" };
	Profd__InstrumentedFunction fns[8], *fn_ptrs[8];
	Profd__SkippedFunction skipped = PROFD__SKIPPED_FUNCTION__INIT, *sk_ptr = &skipped;
	Profd__FunctionTable t = PROFD__FUNCTION_TABLE__INIT;
	Profd__InstrumentedFunction untimed, *untimed_ptr = &untimed;
	char *warning = "/usr/lib/libgone.so: cannot read its symbols";

	for (uint32_t id = first; id <= last; id++) {
		Profd__InstrumentedFunction *f = &fns[id - first];

		profd__instrumented_function__init(f);
		f->id = id;
		f->name = fn_names[(id - 1) % ARRAY_SIZE(fn_names)];
		f->module = "/usr/bin/demo";
		f->address = 0x555555555000 + 0x40 * id;
		f->size = 0x30;
		f->stub = 0x7ffff7fb0000 + 0x100 * id;
		f->stub_same_offsets = id % 2 ? 4 : 0;
		fn_ptrs[id - first] = f;
	}
	skipped.name = "tiny_leaf";
	skipped.module = "/usr/bin/demo";
	skipped.reason = "too short to patch";
	t.n_functions = last - first + 1;
	t.functions = fn_ptrs;
	t.n_skipped = 1;
	t.skipped = &sk_ptr;
	t.matched = t.n_functions + 1;
	t.patch_time_ns = 123456;
	t.n_warnings = 1;
	t.warnings = &warning;
	t.modules_scanned = 3;
	t.exit_trampoline = 0x7ffff7fa1000;
	profd__instrumented_function__init(&untimed); /* _exit's, patched for its flag */
	untimed.address = 0x7ffff7e4e6b0;
	untimed.stub = 0x7ffff7fb0000 + 0x100 * (last + 1);
	untimed.stub_same_offsets = 4;
	t.n_untimed_stubs = 1;
	t.untimed_stubs = &untimed_ptr;
	msg_frame(FRAME_FUNCTION_TABLE, &t.base);
}

static void agent_seeds(const char *dir)
{
	Profd__AgentHello hello = PROFD__AGENT_HELLO__INIT;
	Profd__AgentGoodbye bye = PROFD__AGENT_GOODBYE__INIT;
	uint8_t hdr[FRAME_HEADER_SIZE];

	hello.agent_token = "00112233445566778899aabbccddeeff";
	hello.pid = 4242;
	hello.protocol_version = 1;
	bye.events = 12;
	bye.dropped = 3;
	bye.reason = "target exiting";
	bye.buffer_budget = 64u << 20;
	bye.buffer_peak = 3u << 20;
	/* an agent, a module loaded later (dlopen), then a new agent after an exec */
	msg_frame(FRAME_AGENT_HELLO, &hello.base);
	table_frame(1, 3);
	frame_header_encode(hdr, FRAME_EVENTS, 4);
	seed_put(hdr, sizeof(hdr));
	seed_put("\x28\xb5\x2f\xfd", 4);
	table_frame(4, 5);
	msg_frame(FRAME_AGENT_GOODBYE, &bye.base);
	msg_frame(FRAME_AGENT_HELLO, &hello.base);
	table_frame(1, 2);
	seed_write(dir, "agent-exec");

	/* refused: id 0, then a table that adds nothing, then a bad header */
	msg_frame(FRAME_AGENT_HELLO, &hello.base);
	table_frame(0, 1);
	msg_frame(FRAME_AGENT_HELLO, &hello.base);
	table_frame(1, 2);
	table_frame(1, 2);
	frame_header_encode(hdr, FRAME_TYPE_MAX, 0);
	seed_put(hdr, sizeof(hdr));
	seed_write(dir, "agent-refused");
}

static void daemon_seeds(const char *dir)
{
	char *patterns[] = { "main", "compute*" }, *warnings[] = { "sampling off: perf_event_paranoid" };
	Profd__SessionStarted started = PROFD__SESSION_STARTED__INIT;
	Profd__SamplingReady ready = PROFD__SAMPLING_READY__INIT;
	Profd__SessionSummary sum = PROFD__SESSION_SUMMARY__INIT;
	Profd__SkippedFunction sk = PROFD__SKIPPED_FUNCTION__INIT, *sk_ptr = &sk;
	Profd__FunctionSelfSamples self = PROFD__FUNCTION_SELF_SAMPLES__INIT, *self_ptr = &self;
	Profd__ErrorReply error = PROFD__ERROR_REPLY__INIT;
	Profd__SessionStatus st[2], *st_ptrs[2] = { &st[0], &st[1] };
	Profd__StatusReply status = PROFD__STATUS_REPLY__INIT;
	Profd__StopReply stop = PROFD__STOP_REPLY__INIT;
	Profd__AgentConfig cfg = PROFD__AGENT_CONFIG__INIT;
	Profd__FunctionTotals top = PROFD__FUNCTION_TOTALS__INIT, *top_ptr = &top;

	started.session_id = 1;
	started.agent_token = "00112233445566778899aabbccddeeff";
	ready.sampling = 1;
	sk.name = "tiny_leaf";
	sk.module = "/usr/bin/demo";
	sk.reason = "too short to patch";
	self.name = "compute";
	self.samples = 17;
	sum.functions_matched = 4;
	sum.functions_instrumented = 3;
	sum.n_skipped = 1;
	sum.skipped = &sk_ptr;
	sum.events = 12;
	sum.events_dropped = 3;
	sum.samples = 40;
	sum.trace_bytes = 4096;
	sum.agent_connected = 1;
	sum.n_warnings = 1;
	sum.warnings = warnings;
	sum.threads = 2;
	sum.n_self_samples = 1;
	sum.self_samples = &self_ptr;
	sum.sample_freq = 99;
	sum.samples_in_calls = 30;
	sum.returns_repaired = 5;
	sum.calls_made = 9;
	sum.calls_recorded = 6;
	sum.calls_dropped = 3;
	sum.dropped_buffer_full = 2;
	sum.dropped_in_hook = 1;
	sum.calls_open = 1;
	sum.buffer_budget = 64u << 20;
	sum.buffer_peak = 3u << 20;
	top.name = "compute";
	top.calls = 6;
	top.exited = 5;
	top.total_ns = 12000;
	top.self_ns = 9000;
	top.max_ns = 4000;
	top.p50_ns = 2000;
	top.p99_ns = 3900;
	top.dropped = 1;
	sum.n_top_functions = 1;
	sum.top_functions = &top_ptr;
	sum.functions_called = 2;
	error.message = "malformed run request";
	for (int i = 0; i < 2; i++) {
		profd__session_status__init(&st[i]);
		st[i].id = 1 + i;
		st[i].owner_uid = 1000 * i;
		st[i].details_hidden = i;
	}
	st[0].target_pid = 4242;
	st[0].target = "demo";
	st[0].functions = 3;
	st[0].events = 12;
	st[0].output = "demo.pftrace";
	st[0].running_ms = 1500;
	status.n_sessions = 2;
	status.sessions = st_ptrs;
	status.profd_pid = 100;
	stop.message = "session 1 stopped; its trace is finalized";
	cfg.session_id = 1;
	cfg.n_func_patterns = 2;
	cfg.func_patterns = patterns;
	cfg.buffer_size = 16u << 20;

	msg_frame(FRAME_SESSION_STARTED, &started.base);
	msg_frame(FRAME_SAMPLING_READY, &ready.base);
	msg_frame(FRAME_AGENT_GONE, NULL);
	msg_frame(FRAME_SESSION_SUMMARY, &sum.base);
	seed_write(dir, "daemon-run");
	msg_frame(FRAME_ERROR, &error.base);
	msg_frame(FRAME_STATUS_REPLY, &status.base);
	msg_frame(FRAME_STOP_REPLY, &stop.base);
	msg_frame(FRAME_STOP_NOTICE, NULL);
	msg_frame(FRAME_AGENT_CONFIG, &cfg.base);
	seed_write(dir, "daemon-replies");
}

/* ---- trace reader: a small trace from the project's writer ------------------------------ */

static void trace_seed(const char *path)
{
	struct perfetto_frame frames[2] = {
		{ .function = "main", .rel_pc = 0x1139, .mapping_path = "/usr/bin/demo",
		  .map_start = 0x555555554000, .map_end = 0x555555556000 },
		{ .function = NULL, .rel_pc = 0x2a3c0, .mapping_path = "/usr/lib/libc.so.6",
		  .map_start = 0x7ffff7c00000, .map_end = 0x7ffff7d00000, .map_pgoff = 0x28000 },
	};
	const struct perfetto_arg args[3] = {
		{ "arg1", (uint64_t)-5, PERFETTO_ARG_INT },
		{ "arg2", 0, PERFETTO_ARG_STRING, 5, "hello" },
		{ "retval", 0x4004000000000000, PERFETTO_ARG_DOUBLE }, /* 2.5 */
	};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct perfetto_writer *w = perfetto_writer_new(fd);

	if (!w)
		die(path);
	perfetto_writer_process(w, 100, "demo");
	perfetto_writer_thread(w, 100, 101, "worker");
	perfetto_writer_function(w, 1, "compute");
	perfetto_writer_function(w, 2, "helper");
	perfetto_writer_slice_begin(w, 100, 101, 1000, 1);
	perfetto_writer_slice_begin(w, 100, 101, 1100, 2);
	perfetto_writer_slice_end(w, 100, 101, 1200);
	perfetto_writer_sample(w, 1150, 0, 100, 101, frames, 2);
	perfetto_writer_counter(w, 100, "dropped events", 1160, 3);
	perfetto_writer_samples_lost(w, 1170, 0, 2);
	perfetto_writer_slice_end(w, 100, 101, 1300);
	/* --args/--retval values: annotation names interned (name_iid), an END's too */
	perfetto_writer_slices(w, 100, 101, &(struct perfetto_slice_op){ 1310, 2, 2 }, 1, args);
	perfetto_writer_slice_end_args(w, 100, 101, 1320, args + 2, 1);
	perfetto_writer_slice_begin(w, 100, 101, 1400, 1); /* never ended */
	if (perfetto_writer_free(w) != 0)
		die(path);
}

/* argv: event decoder dir, frame reader dir, control messages dir, trace file. */
int main(int argc, char **argv)
{
	size_t events;

	if (argc != 5)
		die("usage: seed_gen EVENT_DIR FRAME_DIR CONTROL_DIR TRACE_FILE");
	events = event_seeds(argv[1]);
	frame_seeds(argv[2]);
	client_seeds(argv[3]);
	agent_seeds(argv[3]);
	daemon_seeds(argv[3]);
	trace_seed(argv[4]);
	printf("event seeds: %zu events, names and aggregates decoded\n", events);
	return 0;
}
