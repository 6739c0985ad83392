/* SPDX-License-Identifier: MIT */
/*
 * Reads a Perfetto protobuf trace (the subset profd writes) back into tables,
 * applying the importer's rules (sequences, CLEARED, interning per sequence,
 * BEGIN/END stack matching per track, callstacks root first). Built on the
 * streaming reader (trace_stream.h), holding what it delivers: memory grows
 * with the trace, so `profctl report` streams instead; the tests and the
 * fuzzer use the tables. Every violation of a rule the real importer
 * enforces is recorded in `problems` instead of being papered over.
 */
#ifndef PROFD_TRACE_READER_H
#define PROFD_TRACE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * generation, here and below: how many processes of the same pid the trace
 * held before this one's (a pid the kernel reused within the trace: the
 * importer's second process of that pid, started by a new track uuid). 0 for
 * most; samples (pid and tid only) go to the one alive at their time.
 */
struct trace_thread {
	int32_t pid, tid;
	char *name;          /* may be NULL */
	uint64_t track_uuid;
	uint32_t generation; /* of its process */
};

struct trace_slice {
	int32_t pid, tid;
	uint64_t ts;         /* trace clock as written (CLOCK_MONOTONIC ns for profd) */
	int64_t dur;         /* -1: never ended */
	uint32_t depth;
	int64_t parent;      /* index into slices, -1 at depth 0 */
	char *name;
	int64_t self_samples; /* the END's "self_samples" argument (profd), -1 if none */
	uint32_t generation;
};

struct trace_sample {
	uint64_t ts;
	int32_t pid, tid;
	uint32_t generation;
	uint32_t cpu;
	size_t n_frames;
	char **frames;       /* function names, root first; "?" when unnamed */
	char **frame_mappings; /* mapping path per frame */
	char **frame_build_ids; /* its mapping's build id (lowercase hex) per frame, NULL: none */
};

struct trace_counter_value {
	char *track_name;
	int32_t pid;
	uint32_t generation;
	uint64_t ts;
	double value;
};

/*
 * profd's exact per-function figures (every call, on the timeline or not):
 * the events of its PERFETTO_FUNC_TOTALS_TRACK, not slices.
 */
struct trace_func_total {
	int32_t pid;
	uint32_t generation;
	uint32_t tid;        /* 0: over all threads */
	char *name;
	uint64_t calls, returned, not_on_timeline, total_ns, self_ns, avg_ns;
	uint64_t p50_ns, p90_ns, p99_ns; /* estimates (within 12 %) */
	uint64_t max_ns;
	uint64_t values_dropped; /* recorded without their --args/--retval values (no room) */
	/* scheduler states over sched_calls recorded calls that returned (0: none) */
	uint64_t sched_calls, on_cpu_ns, off_cpu_ns, runnable_ns;
};

struct trace_model_priv;

struct trace_model {
	size_t n_packets;
	size_t n_threads, n_slices, n_samples, n_counter_values, n_problems;
	struct trace_thread *threads;
	struct trace_slice *slices;     /* sorted by (ts, file order) */
	struct trace_sample *samples;
	struct trace_counter_value *counter_values;
	struct trace_func_total *func_totals; /* file order */
	size_t n_func_totals;
	char **problems;                /* human-readable, one per violation */
	char **process_names;           /* parallel to process_pids */
	int32_t *process_pids;
	size_t n_processes;
	uint64_t samples_lost;          /* sum of kernel_records_lost */
	uint64_t samples_skipped;       /* not unwound (trace_stream_stats) */
	uint64_t sample_freq;           /* Hz of the perf timebase (PerfSampleDefaults), 0: none */
	int has_clock_snapshot;
	size_t first_clock_snapshot;    /* packet index (file order) of the first one, if any */
	bool ended;                     /* profd's closing packet was read (trace_stream_stats) */
	uint64_t bytes;                 /* the trace's size */
	/*
	 * Reader-owned storage: every name, frame and problem string above
	 * points into it or is freed by trace_model_free; identical names
	 * share one pointer. Do not touch.
	 */
	struct trace_model_priv *priv;
};

/*
 * Parses the file at path into *out. Returns 0, or negative errno for I/O
 * errors and -ENOMEM. A damaged trace (bad framing, truncated last packet,
 * undecodable packets, broken importer rules) is not an error: what could be
 * parsed is returned and each damage is listed in problems (at most 4096,
 * then one "... more problems" line). Safe on hostile input. Samples that
 * share a callstack share their frames arrays. Thread-safe for distinct models.
 */
int trace_model_load(const char *path, struct trace_model **out);
int trace_model_load_buffer(const uint8_t *buf, size_t len, struct trace_model **out);
void trace_model_free(struct trace_model *m);

/*
 * NULL for the program's own samples; for profiling overhead (the marks
 * viewer-export/perfetto_writer.h describes) the part of the profiler it
 * cost: PERFETTO_OVERHEAD_HOOKS, _FLUSHER, _AGENT (or a name a later profd
 * wrote). The marks stay the sample's first two frames.
 */
const char *trace_sample_overhead(const struct trace_sample *s);

#endif
