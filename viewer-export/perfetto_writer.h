/* SPDX-License-Identifier: MIT */
/*
 * Streaming Perfetto protobuf writer: turns profd's sessions into
 * length-delimited TracePackets on an already open descriptor, as they come,
 * never holding the trace. Follows ../shared/perfetto-format.md: clock
 * snapshot first, one small uuid per process/thread/counter, interned names,
 * END without name, slices clamped below depth 512, PerfSamples with interned
 * callstacks whose frames always reference a mapping. Not thread-safe.
 */
#ifndef PROFD_PERFETTO_WRITER_H
#define PROFD_PERFETTO_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct perfetto_writer;

/* Where one sampled pc lies: filled by the daemon's symbolizer. */
struct perfetto_frame {
	const char *function;      /* NULL when unknown: named "<file>+0x<rel_pc>" */
	uint64_t rel_pc;           /* address in the ELF's own vaddr space */
	/* the mapping (one executable mapping of a file, or an anonymous region) */
	const char *mapping_path;  /* "/usr/lib/.../libc.so.6", "[anon]", "[vdso]" */
	const uint8_t *build_id;   /* raw bytes, NULL when none */
	size_t build_id_len;
	uint64_t map_start, map_end, map_pgoff, load_bias;
};

/* Trace time base of every timestamp given to the writer: CLOCK_MONOTONIC ns. */

/*
 * How packets reach the file: as they are, or in blocks of PERFETTO_BLOCK_BYTES
 * each wrapped in one TracePacket: compressed_packets (field 50, zlib deflate;
 * every trace_processor and ui.perfetto.dev read it) or zstd_compressed_packets
 * (field 133; only trace_processor v58+ built with zstd). Compression runs on a
 * thread of the writer's own (viewer-export/trace_sink.h).
 */
enum perfetto_compression {
	PERFETTO_COMPRESSION_NONE = 0,
	PERFETTO_COMPRESSION_DEFLATE = 1,
	PERFETTO_COMPRESSION_ZSTD = 2,
};
#define PERFETTO_BLOCK_BYTES (256u * 1024u)
/* The smallest flight recorder: one block. */
#define PERFETTO_RING_MIN_BYTES PERFETTO_BLOCK_BYTES

struct perfetto_writer_options {
	enum perfetto_compression compression;
	/*
	 * 0: stream to fd. Else a flight recorder: only the newest ring_bytes of
	 * trace data (as stored: compressed) are kept in memory, in chunks of
	 * about ring_bytes / 16 that each restart every sequence (clock snapshot,
	 * CLEARED, defaults, interned names, symbol dictionaries), so any run of
	 * newest chunks loads alone after a header of descriptors. The oldest
	 * chunk kept is preceded by a prologue that opens, at its start, the
	 * slices open then (never invented: they began before the window). The
	 * whole window goes to fd when the writer is freed, or to another fd with
	 * perfetto_writer_snapshot.
	 */
	uint64_t ring_bytes;
};

/*
 * Returns NULL with errno set (EBADF, ENOMEM, EINVAL). Writes nothing until
 * the first call below; the first packet is always a ClockSnapshot (taken
 * then if perfetto_writer_clock_snapshot was not called first).
 * perfetto_writer_new: no compression, no ring.
 *
 * Errors: calls that emit events return 0, -EINVAL or -ENOMEM. A failed
 * write() is not returned by them: the first one is remembered, nothing more
 * is written, packets are still counted, and the error is reported (as a
 * negative errno) by perfetto_writer_flush and perfetto_writer_free and in
 * perfetto_writer_stats.write_error.
 */
struct perfetto_writer *perfetto_writer_new(int fd);
struct perfetto_writer *perfetto_writer_new_opts(int fd, const struct perfetto_writer_options *o);

/*
 * Reads BOOTTIME, MONOTONIC and REALTIME back to back and writes a
 * ClockSnapshot (the first one also sets primary_trace_clock = BOOTTIME).
 */
int perfetto_writer_clock_snapshot(struct perfetto_writer *w);

/*
 * A process of the trace: its pid and its generation, how many processes of
 * that pid came before it within the trace (the kernel reuses pids: a long
 * build, thousands of short processes). Every call below that takes `proc`
 * takes one; a plain pid is generation 0. The importer keeps processes of
 * one pid apart by their track uuids, one per generation (trace processor's
 * TrackEventTracker::ResolveDescriptorTrackImpl starts a new process for a
 * pid whose process has another uuid), so their threads, slices, counters
 * and figures stay apart; PerfSamples and scheduler events carry only pids
 * and tids and go, by time, to the process alive then.
 */
#define PERFETTO_PROC(pid, generation) \
	(((uint64_t)(uint32_t)(generation) << 32) | (uint32_t)(pid))
static inline pid_t perfetto_proc_pid(uint64_t proc)
{
	return (pid_t)(uint32_t)proc;
}
static inline uint32_t perfetto_proc_generation(uint64_t proc)
{
	return (uint32_t)(proc >> 32);
}

/*
 * proc began at ts (its fork, as near as known): its descriptor carries it
 * (ProcessDescriptor.start_timestamp_ns, the importer's process.start_ts).
 * For a generation above 0, call it before anything else names proc: the
 * pid's previous process ends at ts (a sched_process_free of its main
 * thread, the importer's process.end_ts), and proc's descriptors are
 * written at ts + 1 on, so the importer sees the old one end before the new
 * one begins; the old one's descriptors written later (a late name, its
 * figures) go at its end - 1, inside its life. ts must not precede the old
 * process's last sample or scheduler event. Once per proc; 0 or -ENOMEM.
 */
int perfetto_writer_process_start(struct perfetto_writer *w, uint64_t proc, uint64_t ts);

/* Process descriptor (once per process; a second call with a new name updates it). */
int perfetto_writer_process(struct perfetto_writer *w, uint64_t proc, const char *name);

/*
 * pid is ns_pid in its own PID namespace (0: the same as ours): a label of
 * its descriptor ("pid N in its PID namespace"; the importer's process args,
 * chrome.process_label[0]), rewritten when it changes.
 */
int perfetto_writer_process_ns_pid(struct perfetto_writer *w, uint64_t proc, pid_t ns_pid);

/*
 * pid's parent and command line (cmdline: len bytes of NUL-separated
 * arguments, as /proc/PID/cmdline has them): a ProcessTree entry, the
 * importer's parent link, written when either is new (after an exec).
 * len 0 changes nothing.
 */
int perfetto_writer_process_detail(struct perfetto_writer *w, uint64_t proc, pid_t ppid,
				   const char *cmdline, size_t len);

/*
 * Thread descriptor; emitted on first use of (pid, tid) or when the name
 * changes (NULL keeps the current name). The first use of a pid by a thread
 * or a counter also describes its process, unnamed until
 * perfetto_writer_process names it.
 */
int perfetto_writer_thread(struct perfetto_writer *w, uint64_t proc, pid_t tid, const char *name);

/*
 * Registers the name of instrumented function `func_id` (interned on first
 * use; a later new name applies to later slices). Slices of a func_id never
 * registered are named "func_<id>".
 */
int perfetto_writer_function(struct perfetto_writer *w, uint32_t func_id, const char *name);

/*
 * Slice begin/end on the thread's track (described on first use with a NULL
 * name if perfetto_writer_thread was not called). Depth is tracked per
 * thread: BEGINs at depth >= PERFETTO_MAX_SLICE_DEPTH and their ENDs are not
 * written and are counted in perfetto_writer_stats.slices_clamped. An END on a
 * thread with nothing open is ignored and counted in ends_unmatched.
 * PERFETTO_MAX_SLICE_DEPTH is the importer's own limit (trace processor's
 * SliceTracker::kMaxDepth, v58): deeper slices it drops, counting
 * slice_max_depth_exceeded; profd keeps such calls off the timeline before
 * (the agent's depth filter), counted per function as filtered.
 */
#define PERFETTO_MAX_SLICE_DEPTH 512
int perfetto_writer_slice_begin(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts,
				uint32_t func_id);
int perfetto_writer_slice_end(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts);
/*
 * An END that also gives its slice n unsigned arguments (DebugAnnotations on
 * the END event, which trace processor adds to the slice's args): e.g.
 * "self_samples" = samples taken while the call was the innermost one, or
 * the call's on/off-CPU split. n 0: a plain END. Names are not copied: literals.
 */
enum perfetto_arg_type {
	PERFETTO_ARG_UINT = 0, /* the default: figures */
	PERFETTO_ARG_INT,      /* value as int64_t */
	PERFETTO_ARG_DOUBLE,   /* value holds the double's bits */
	PERFETTO_ARG_POINTER,  /* shown in hex */
	PERFETTO_ARG_STRING,   /* str, str_len bytes (not copied: valid for the call) */
	PERFETTO_ARG_BOOL,
};

struct perfetto_arg {
	const char *name;
	uint64_t value;
	uint32_t type;         /* enum perfetto_arg_type */
	uint32_t str_len;
	const char *str;
};
int perfetto_writer_slice_end_args(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts,
				   const struct perfetto_arg *args, size_t n);

/*
 * A run of one thread's BEGINs and ENDs, in order: the same as calling
 * perfetto_writer_slice_begin (func_id != 0) or perfetto_writer_slice_end_args
 * (func_id 0, with the next n_args of args) for each op, the thread looked up
 * once. Returns 0 or the first error; the ops after a failed one still go.
 */
struct perfetto_slice_op {
	uint64_t ts;
	uint32_t func_id; /* BEGIN of this function; 0: END */
	uint32_t n_args;  /* its arguments (a BEGIN's: --args values), the next n_args of the run's */
};
int perfetto_writer_slices(struct perfetto_writer *w, uint64_t proc, pid_t tid,
			   const struct perfetto_slice_op *ops, size_t n,
			   const struct perfetto_arg *args);

/*
 * profd's per-event path: one thread's slices written from the caller's
 * loop, event by event. perfetto_slice_begin and perfetto_slice_end write
 * the usual packet (a time not before the sequence's clock, a delta under
 * 2^14 ns; the sequence and the name's iid under 128, the name defined on
 * the thread's sequence; no arguments; no flight-recorder ring) from the
 * cursor (the writer's state as the cursor was loaded) and the position
 * (what they change: the caller keeps it in locals, in registers), and
 * return false, having done nothing, otherwise: then
 * perfetto_slice_cursor_op writes the op as perfetto_writer_slices would.
 * Between open and close nothing else may write to the writer
 * (close, write, open again). The fields are perfetto_writer.c's.
 */
struct perfetto_slice_cursor {
	uint8_t *out;            /* the writer's buffer */
	size_t lim;              /* inline while the position's len < lim (0: never) */
	/* the packets' bytes after their timestamp: 50 seq 5A 04 48 01 50 (iid), 50 seq 5A 02 48 02 */
	uint64_t tail_begin, tail_end;
	uint32_t clamped;        /* BEGINs left out past the depth limit, not yet ended */
	const uint8_t *defined;  /* bit per event-name iid defined on the thread's sequence */
	size_t defined_bytes;
	const uint32_t *func_iid; /* func_id -> its event-name iid, 0: not known yet */
	size_t n_func_iid;
	struct perfetto_writer *w;
	void *thread;
};
struct perfetto_slice_pos {
	size_t len;              /* the next packet goes at out + len */
	uint64_t seq_ts;         /* the thread sequence's clock: its last timestamp */
	uint32_t depth;          /* slices open on the track */
	uint32_t packets;        /* written inline since the cursor was loaded */
};

/* Opens a cursor on tid's slices (the thread described if new). 0, or -ENOMEM. */
int perfetto_slice_cursor_open(struct perfetto_writer *w, uint64_t proc, pid_t tid,
			       struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at);
/* One op the inline calls did not write (args: its n_args arguments); as perfetto_writer_slices. */
int perfetto_slice_cursor_op(struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at,
			     const struct perfetto_slice_op *op, const struct perfetto_arg *args);
/* The writer's state back from the cursor: the writer may be used again. */
void perfetto_slice_cursor_close(struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at);

/*
 * A BEGIN or END packet (0A len 40 delta 50 seq 5A len {48 type [50 iid]}):
 * its head and its tail (tail_len bytes of tail, the cursor's template) in
 * two 8-byte stores, the second where the delta ends. Byte stores may alias
 * anything: the compiler reloaded every field after each. The buffer has
 * room for 16 bytes past len whenever len < lim.
 */
static inline bool perfetto_slice_emit(const struct perfetto_slice_cursor *c,
				       struct perfetto_slice_pos *at, uint64_t ts, uint64_t tail,
				       unsigned tail_len)
{
	/* ts before the sequence's clock wraps delta past 2^14: the op's slow path clamps it */
	uint64_t seq_ts = at->seq_ts, delta = ts - seq_ts, head;
	uint64_t high = delta & ~0x7full; /* delta's bits past the first byte */
	size_t len = at->len;
	unsigned two = high != 0; /* a delta of two bytes */

	if (delta >= 1u << 14 || len >= c->lim)
		return false;
	/*
	 * The delta's varint is delta + high + 0x80 when two, else delta
	 * ((delta & 0x7f) | 0x80 | high << 1); the length byte is one more
	 * when two: both in one add of two's bits, without a select.
	 */
	head = (0x0a | (uint64_t)(2 + tail_len) << 8 | 0x40ull << 16) + ((delta + high) << 24) +
	       (-(uint64_t)two & (0x80ull << 24 | 1ull << 8));
	__builtin_memcpy(c->out + len, &head, 8);
	__builtin_memcpy(c->out + len + 4 + two, &tail, 8);
	at->seq_ts = seq_ts + delta;
	at->len = len + 4 + two + tail_len;
	at->packets++;
	return true;
}

/*
 * The tail of func_id's usual BEGIN (for perfetto_slice_emit, 8 bytes), or
 * 0 when its BEGIN cannot go inline (its name not defined on the thread's
 * sequence yet, or an iid of two bytes). Valid while the cursor is: a
 * caller may keep it for a run of one function's BEGINs.
 */
static inline uint64_t perfetto_slice_begin_tail(const struct perfetto_slice_cursor *c,
						 uint32_t func_id)
{
	uint32_t iid;

	if (func_id >= c->n_func_iid || !(iid = c->func_iid[func_id]) || iid >= 128 ||
	    iid / 8 >= c->defined_bytes || !(c->defined[iid / 8] >> (iid % 8) & 1))
		return 0;
	return c->tail_begin | (uint64_t)iid << 56;
}

/* The usual BEGIN of func_id at ts; false: nothing written (perfetto_slice_cursor_op). */
static inline bool perfetto_slice_begin(const struct perfetto_slice_cursor *c,
					struct perfetto_slice_pos *at, uint64_t ts, uint32_t func_id)
{
	uint64_t tail;

	if (at->depth >= PERFETTO_MAX_SLICE_DEPTH || !(tail = perfetto_slice_begin_tail(c, func_id)) ||
	    !perfetto_slice_emit(c, at, ts, tail, 8))
		return false;
	at->depth++;
	return true;
}

/* The usual END at ts (no argument); false: nothing written (perfetto_slice_cursor_op). */
static inline bool perfetto_slice_end(const struct perfetto_slice_cursor *c,
				      struct perfetto_slice_pos *at, uint64_t ts)
{
	if (c->clamped || !at->depth || !perfetto_slice_emit(c, at, ts, c->tail_end, 6))
		return false;
	at->depth--;
	return true;
}

/*
 * Process-scoped counter track named `name` (e.g. "dropped events"), created
 * on first use under the process's track; value is absolute (cumulative).
 */
int perfetto_writer_counter(struct perfetto_writer *w, uint64_t proc, const char *name, uint64_t ts,
			    int64_t value);

/*
 * One CPU sample; frames[0] is the outermost (root) frame, frames[n-1] the leaf
 * (n_frames 0: a sample without callstack). Strings and build ids are copied.
 * Recorded as user mode (MODE_USER). On -ENOMEM the symbol dictionaries are
 * dropped and re-sent from the next sample on, so no iid is ever dangling.
 */
int perfetto_writer_sample(struct perfetto_writer *w, uint64_t ts, uint32_t cpu, pid_t pid,
			   pid_t tid, const struct perfetto_frame *frames, size_t n_frames);

/*
 * Samples that are the profiler's own cost (profiling overhead) keep their
 * stacks under two outermost frames of mapping PERFETTO_OVERHEAD_MAPPING:
 * PERFETTO_OVERHEAD_ROOT, then the part of the profiler (one of the
 * PERFETTO_OVERHEAD_* names below). Flame graphs show the overhead as one
 * tree beside the program's; readers tell the samples apart by frame 0.
 */
#define PERFETTO_OVERHEAD_MAPPING "[profd]"
#define PERFETTO_OVERHEAD_ROOT "[profiling-overhead]"
#define PERFETTO_OVERHEAD_HOOKS "hooks"     /* stubs, trampolines, enter/exit hooks */
#define PERFETTO_OVERHEAD_FLUSHER "flusher" /* the agent's flusher thread */
#define PERFETTO_OVERHEAD_AGENT "agent"     /* its start-up, slow paths, the rest */
/* The one frame of a sample no frame of which could be unwound (in PERFETTO_OVERHEAD_MAPPING). */
#define PERFETTO_NOT_UNWOUND "[not unwound]"

/*
 * A sample that could not be unwound into any frame: a PerfSample with
 * sample_skipped_reason PROFILER_SKIP_UNWIND_STAGE (counted by trace
 * processor as perf_samples_skipped), so the loss is visible.
 */
int perfetto_writer_sample_skipped(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				   pid_t pid, pid_t tid);

/* Perf ring loss on cpu (PerfSample.kernel_records_lost, pid 0). */
int perfetto_writer_samples_lost(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 uint64_t lost);

/*
 * Sampling frequency written in the perf sequence's timebase (cpu-clock).
 * Call it before the first sample or loss record: the timebase is written
 * once, with that sequence's first packet (0 = frequency not written).
 */
void perfetto_writer_set_sample_freq(struct perfetto_writer *w, uint32_t freq_hz);

/*
 * The key of the trace's closing packet (TracePacket.trace_attributes; the
 * importer's metadata row trace_attribute.profd.trace_end). Its value: the
 * packets before it, 0 in a flight-recorder window. Written last, only when
 * everything before it was written: a trace without it was cut short.
 */
#define PERFETTO_TRACE_END_KEY "profd.trace_end"

/*
 * One function's exact figures (every call, recorded on the timeline or not),
 * for the track PERFETTO_FUNC_TOTALS_TRACK of its process: one instant event
 * named PERFETTO_FUNC_TOTALS_EVENT at `ts`, the function's name in its
 * argument "function" and the figures in the others (the UI shows them when
 * the event is selected; trace processor puts them in args as debug.NAME).
 * tid 0: over all threads; else that thread's.
 */
#define PERFETTO_FUNC_TOTALS_TRACK "profd: function totals (exact, every call)"
#define PERFETTO_FUNC_TOTALS_EVENT "function totals"
struct perfetto_func_totals {
	const char *name;
	uint32_t tid;
	uint64_t calls, exited, dropped, total_ns, self_ns, max_ns, p50_ns, p90_ns, p99_ns;
	uint64_t filtered; /* off the timeline by --min-duration/--max-depth (not in dropped) */
	uint64_t values_dropped; /* on it without their --args/--retval values: no room */
	/* scheduler states, over sched_calls recorded calls that returned (0: none) */
	uint64_t sched_calls, on_cpu_ns, off_cpu_ns, runnable_ns;
};
int perfetto_writer_func_totals(struct perfetto_writer *w, uint64_t proc, uint64_t ts,
				const struct perfetto_func_totals *t);

/*
 * Scheduler events (daemon/sched), written as ftrace events in
 * FtraceEventBundles, one per CPU per flush (timestamps given in
 * CLOCK_MONOTONIC, written in BOOTTIME as ftrace's must be), with one
 * SystemInfo packet naming the running kernel before them, which trace
 * processor needs to decode prev_state. Trace processor then fills `sched`
 * and `thread_state`, and the UI draws each thread's state under its slices.
 *
 * Only switches that involve a traced thread are given: on each CPU the
 * writer chains them, naming the task a traced thread handed the CPU to as
 * the prev of the next switch to a traced thread, so the CPU tracks show
 * who ran between them without a mismatch. Tasks a client may not see are
 * given as PERFETTO_SCHED_HIDDEN_TID + cpu (above any pid, one per CPU so that
 * one placeholder never runs on two CPUs) named PERFETTO_SCHED_HIDDEN_NAME.
 */
#define PERFETTO_SCHED_HIDDEN_TID 4194304 /* PID_MAX_LIMIT */
#define PERFETTO_SCHED_HIDDEN_NAME "another task"
#define PERFETTO_SCHED_MAX_CPUS 1024      /* trace processor's limit */
struct perfetto_sched_task {
	int32_t tid;        /* 0: the CPU's idle task */
	const char *comm;
	int32_t prio;
	bool traced;        /* one of the target's threads: every switch of it is given */
};
/* prev_state: the kernel tracepoint's encoding (daemon/sched/sched_record.h). */
int perfetto_writer_sched_switch(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 const struct perfetto_sched_task *prev, uint32_t prev_state,
				 const struct perfetto_sched_task *next);
/* waker (running on cpu) makes woken runnable on target_cpu. */
int perfetto_writer_sched_waking(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 const struct perfetto_sched_task *waker,
				 const struct perfetto_sched_task *woken, uint32_t target_cpu);
/*
 * (No task_newtask: a new task is written as a waking by its creator. The
 * importer would start a second thread beside the track descriptor's.)
 */
/* task is gone for good (after its last switch): later events of its tid are another thread. */
int perfetto_writer_sched_task_free(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				    const struct perfetto_sched_task *task);
/* The ring lost records: the CPUs' next bundles say so (lost_events). */
void perfetto_writer_sched_lost(struct perfetto_writer *w);

struct perfetto_writer_stats {
	uint64_t bytes;          /* written to fd so far (after the last flush) */
	uint64_t raw_bytes;      /* packets produced, before compression */
	uint64_t ring_bytes;     /* held by the flight recorder now */
	uint64_t packets;        /* produced, including those dropped after a write error */
	uint64_t slices_clamped;
	uint64_t ends_unmatched;
	uint64_t samples;
	uint64_t sched_events;
	uint64_t sched_repaired;  /* switches written before a traced prev the CPU was not known to run */
	int write_error;         /* first errno of a failed write, 0 if none */
	uint64_t cut_ns;         /* CLOCK_MONOTONIC of that failure: the file ends at bytes */
};
void perfetto_writer_get_stats(const struct perfetto_writer *w, struct perfetto_writer_stats *st);

/*
 * Writes buffered packets (whole packets only, looping on short writes and
 * EINTR), waiting for compression: the file is a valid trace after every
 * flush. The writer hands a block over by itself whenever its buffer fills
 * (PERFETTO_BLOCK_BYTES). Ring: the window stays in memory. Returns 0 or the
 * first write error (negative errno).
 */
int perfetto_writer_flush(struct perfetto_writer *w);

/*
 * Called now and then (profd: every tick). Never waits: hands over a block
 * that has waited a second, writes what compression finished. Without
 * compression or ring, the same as perfetto_writer_flush.
 */
void perfetto_writer_poll(struct perfetto_writer *w);

/*
 * Flight recorder only: writes the window as it is now (what compression has
 * finished) to fd, a complete trace: header of descriptors, the oldest
 * chunk's prologue, the chunks. Recording goes on. Returns the bytes written,
 * -EINVAL when the writer is no ring, or a negative errno of write().
 */
int64_t perfetto_writer_snapshot(struct perfetto_writer *w, int fd);
bool perfetto_writer_is_ring(const struct perfetto_writer *w);

/*
 * Ends the trace: the closing packet (PERFETTO_TRACE_END_KEY) after
 * everything else, then a flush (ring: the window goes to fd). Packets after
 * it are counted, not written. Returns the first write error (negative
 * errno) seen over the writer's life, else 0; the stats then say where the
 * file was cut. Once; perfetto_writer_free calls it if nobody did.
 */
int perfetto_writer_finish(struct perfetto_writer *w);

/*
 * Finishes (if not yet), then frees. Slices still open are left open (dur -1
 * in Perfetto): the writer never invents an end. Does not close fd. Returns
 * the first write error (negative errno) seen over the writer's life, else 0.
 */
int perfetto_writer_free(struct perfetto_writer *w);

#endif
