/* SPDX-License-Identifier: MIT */
/*
 * State of one streaming read (trace_stream.h), shared by trace_stream.c
 * (windows, framing, stable strings, problems, entry points),
 * trace_reader.c (packet tokenization in file order: sequences, interning,
 * descriptors, payloads) and trace_slices.c (per-track reorder window,
 * BEGIN/END matching, sample attribution, end of file). Internal to
 * viewer-export/.
 */
#ifndef PROFD_TRACE_READER_INTERNAL_H
#define PROFD_TRACE_READER_INTERNAL_H

#include <stdarg.h>

#include "viewer-export/perfetto_intern.h"
#include "viewer-export/trace_reader.h"
#include "viewer-export/trace_stream.h"

#define TRD_MAX_DEPTH 512       /* the importer's SliceTracker kMaxDepth */
#define TRD_CLOCK_BOOTTIME 6

enum { TRD_TRACK_OTHER, TRD_TRACK_PROCESS, TRD_TRACK_THREAD, TRD_TRACK_COUNTER };
enum { TRD_BEGIN = 1, TRD_END = 2, TRD_INSTANT = 3, TRD_COUNTER = 4 };

/*
 * Storage that outlives the read: interned, stable, NUL-terminated strings
 * (equal strings share one pointer) and the frames arrays samples share.
 * trace_model_load hands it to the model (trace_model.priv).
 */
struct trace_model_priv {
	struct pw_index str_ix;
	char **strs;
	uint32_t *lens;
	uint32_t n_strs, cap_strs;
	struct trd_chunk *chunks;
	void **allocs;
	size_t n_allocs, cap_allocs;
};

/* A track as its descriptor declares it (file order). */
struct trd_track {
	uint64_t uuid; /* key */
	int kind;
	bool usable;   /* a thread track needs pid and tid, a process track a pid */
	int32_t pid, tid;
	uint64_t parent_uuid;
	const char *name;
	size_t thread_index; /* thread tracks: the index the thread callback got */
	size_t process_index; /* process tracks: the index the process callback got */
	uint32_t generation;  /* thread and process tracks: of the process (trace_reader.h) */
};

/* A slice event between tokenization and matching. */
struct trd_event {
	uint64_t ts;
	size_t order;  /* packet index: ties keep file order */
	uint64_t uuid;
	const char *name;
	int type;
	struct trace_slice_args args; /* END: its profd debug annotations */
};

struct trd {
	const struct trace_stream_ops *ops;
	void *ctx;
	struct trace_stream_opts opts;
	struct trace_stream_stats st;
	struct trace_model_priv *store;
	bool used;                 /* a trace was read: the reader is spent */
	bool oom;
	int stop;                  /* a callback's non-zero return: reading stops */
	size_t pkt_index;          /* current packet (file order) */
	size_t pkt_offset;         /* its record's offset in the file */
	uint64_t latest_ts;
	struct pw_table seqs;      /* struct trd_seq */
	struct pw_table tracks;    /* struct trd_track */
	struct pw_table thread_ids; /* (pid, tid) -> uuid */
	struct pw_table process_ids; /* pid -> its newest process: uuid, index, generation */
	struct pw_table generations; /* (pid, generation) -> where that process begins */
	struct pw_table clocks_used; /* clock id -> packets */
	struct pw_table clocks_snapshotted; /* clock id */
	struct trace_thread *threads; /* described so far, file order, latest names */
	size_t n_threads, cap_threads;
	int32_t *process_pids;     /* likewise, with process_names beside */
	char **process_names;
	size_t n_processes, cap_processes;
	struct trd_fast *fast;     /* trace_reader.c: the decoded form of profd's hot packets */
	uint32_t last_seq_id, last_seq_ix;     /* the last sequence looked up (index + 1) */
	uint32_t last_clock_id, last_clock_ix; /* the last clock noted (index + 1) */
	uint64_t totals_uuids[8];  /* tracks named PERFETTO_FUNC_TOTALS_TRACK */
	size_t n_totals_uuids;
	/* trace_slices.c */
	struct pw_table lanes;     /* uuid -> struct trd_lane * */
	struct trd_lane *last_lane; /* the last one looked up */
	struct trd_event *events;  /* held until the end (opts.reorder 0), then the final merge */
	size_t n_events, cap_events;
	size_t events_held;
	uint64_t next_slice_id;
	struct trd_sample_heap *orphans; /* samples of threads not described yet */
	size_t samples_held;
	/* trace_sched.c */
	struct trace_sched_event *sched_heap; /* held for order, a min-heap on (ts, order) */
	size_t n_sched, cap_sched;
	uint64_t sched_newest, sched_last_ts;
	bool sched_delivered;
	int64_t boot_to_trace;     /* trace clock - BOOTTIME, from the clock snapshot */
	bool has_boot_to_trace;
};

/* The importer's order: timestamp, then file order. */
static inline int trd_cmp_ts_order(uint64_t ts_a, size_t ord_a, uint64_t ts_b, size_t ord_b)
{
	if (ts_a != ts_b)
		return ts_a < ts_b ? -1 : 1;
	return ord_a < ord_b ? -1 : ord_a > ord_b;
}

/* trace_stream.c */
/* Grows *arr (elements of `size` bytes) to hold n + 1; false (r->oom set) on ENOMEM. */
bool trd_reserve(struct trd *r, void **arr, size_t *cap, size_t n, size_t size);
/* The stable copy of data[0..len) (NUL added), shared by equal strings; NULL on ENOMEM. */
const char *trd_str(struct trd *r, const void *data, size_t len);
/* Reports a problem, prefixed with the current packet's index and offset. */
__attribute__((format(printf, 2, 3))) void trd_problem(struct trd *r, const char *fmt, ...);
/* Reports a problem about the file or the end-of-file pass, without the packet prefix. */
__attribute__((format(printf, 2, 3))) void trd_problem_at(struct trd *r, const char *fmt, ...);
/* Takes ownership of p (freed with the strings); false on ENOMEM (p is freed). */
bool trd_keep(struct trd *r, void *p);
/* Records a callback's return: the first non-zero one stops the read. */
static inline void trd_emitted(struct trd *r, int rc)
{
	if (rc && !r->stop)
		r->stop = rc;
}
/* The records of an inflated compressed packet, in order (problem offsets stay the wrapper's). */
void trd_split_buffer(struct trd *r, const uint8_t *buf, size_t len, bool nested);
/* Frees the strings and the arrays trd_keep took. */
void trd_store_free(struct trace_model_priv *pv);
/* A varint at buf[*off] (len bytes in all): 1 read, 0 ran out of bytes, -1 over-long. */
int trd_varint(const uint8_t *buf, size_t len, size_t *off, uint64_t *v);

/* trace_reader.c */
void trd_reader_init(struct trd *r);
/* Every TracePacket (data[0..len), the record's payload) passes here; nested: unwrapped. */
void trd_packet_record(struct trd *r, const uint8_t *data, size_t len, bool nested);
/* End of file: the clock checks. */
void trd_reader_finish(struct trd *r);
void trd_reader_free(struct trd *r);
/* The thread track uuid of (pid, tid) in the pid's generation-th process, 0 if none was described. */
uint64_t trd_thread_uuid(const struct trd *r, int32_t pid, int32_t tid, uint32_t generation);
/* The generation of pid's process alive at boot_ts (BOOTTIME): the newest begun by then. */
uint32_t trd_generation_at(const struct trd *r, int32_t pid, uint64_t boot_ts);

/* trace_slices.c */
void trd_slices_init(struct trd *r);
/* A BEGIN, END or INSTANT in file order: held, sorted, matched on its track. */
void trd_slice_event(struct trd *r, const struct trd_event *ev);
/* A sample in file order: delivered now, or once its thread's slices reach its ts. */
void trd_sample_event(struct trd *r, struct trace_stream_sample *smp);
/* A thread track was described: samples waiting for it can go to its lane. */
void trd_slices_thread_described(struct trd *r, int32_t pid, int32_t tid, uint32_t generation);
/* End of file: everything held is matched; open slices go out with dur -1. */
void trd_slices_finish(struct trd *r);
void trd_slices_free(struct trd *r);

/* trace_sched.c */
struct Perfetto__Protos__ClockSnapshot;
struct Perfetto__Protos__FtraceEventBundle;
struct Perfetto__Protos__SystemInfo;
void trd_sched_clock_snapshot(struct trd *r, const struct Perfetto__Protos__ClockSnapshot *cs);
void trd_ftrace_bundle(struct trd *r, const struct Perfetto__Protos__FtraceEventBundle *b);
void trd_system_info(struct trd *r, const struct Perfetto__Protos__SystemInfo *si);
/* End of file: every held event goes out. */
void trd_sched_finish(struct trd *r);
void trd_sched_free(struct trd *r);

#endif
