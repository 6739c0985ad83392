/* SPDX-License-Identifier: MIT */
/*
 * State of one trace_model_load: shared by trace_reader.c (framing, packet
 * tokenization in file order, sequences and interning) and trace_model.c
 * (stable strings, problems, and the end-of-file pass: sorting, BEGIN/END
 * matching, model tables). Internal to viewer-export/.
 */
#ifndef PROFD_TRACE_READER_INTERNAL_H
#define PROFD_TRACE_READER_INTERNAL_H

#include <stdarg.h>

#include "viewer-export/perfetto_intern.h"
#include "viewer-export/trace_reader.h"

#define TRD_MAX_DEPTH 512       /* the importer's SliceTracker kMaxDepth */
#define TRD_MAX_PROBLEMS 4096
#define TRD_CLOCK_BOOTTIME 6

enum { TRD_TRACK_OTHER, TRD_TRACK_PROCESS, TRD_TRACK_THREAD, TRD_TRACK_COUNTER };
enum { TRD_BEGIN = 1, TRD_END = 2, TRD_INSTANT = 3, TRD_COUNTER = 4 };

struct trace_model_priv {
	/* interned, stable, NUL-terminated strings */
	struct pw_index str_ix;
	char **strs;
	uint32_t *lens;
	uint32_t n_strs, cap_strs;
	struct trd_chunk *chunks;
	/* frames/frame_mappings arrays shared by samples */
	void **allocs;
	size_t n_allocs, cap_allocs;
	size_t cap_problems, problems_dropped;
};

struct trd_track {
	uint64_t uuid; /* key */
	int kind;
	bool usable;   /* a thread track needs pid and tid, a process track a pid */
	int32_t pid, tid;
	uint64_t parent_uuid;
	const char *name;
	size_t model_index; /* thread tracks: index into the model's threads */
	size_t *stack; /* open slices (indexes into the slices array) at EOF */
	size_t depth, cap;
};

/* A slice event kept for the end-of-file pass (the importer sorts first). */
struct trd_event {
	uint64_t ts;
	size_t order;  /* packet index: ties keep file order */
	uint64_t uuid;
	const char *name;
	int type;
	int64_t self_samples; /* END: its "self_samples" debug annotation, else -1 */
};

struct trd_sample {
	struct trace_sample s;
	size_t order;
};

struct trd_counter {
	struct trace_counter_value v;
	size_t order;
};

struct trd {
	struct trace_model *m;
	bool oom;
	size_t pkt_index;          /* current packet (file order) */
	size_t pkt_offset;         /* its record's offset in the file */
	uint64_t latest_ts;
	struct pw_table seqs;      /* struct trd_seq */
	struct pw_table tracks;    /* struct trd_track */
	struct pw_table thread_ids; /* (pid, tid) -> uuid */
	struct pw_table process_ids; /* pid -> uuid, model index */
	struct pw_table clocks_used; /* clock id -> packets */
	struct pw_table clocks_snapshotted; /* clock id */
	struct trd_event *events;
	size_t n_events, cap_events;
	struct trd_sample *samples;
	size_t n_samples, cap_samples;
	struct trd_counter *counters;
	size_t n_counters, cap_counters;
	size_t cap_threads, cap_processes, cap_slices, cap_func_totals;
	uint64_t totals_uuids[8];  /* tracks named PERFETTO_FUNC_TOTALS_TRACK */
	size_t n_totals_uuids;
};

/* trace_model.c */
/* Grows *arr (elements of `size` bytes) to hold n + 1; false (r->oom set) on ENOMEM. */
bool trd_reserve(struct trd *r, void **arr, size_t *cap, size_t n, size_t size);
/* The stable copy of data[0..len) (NUL added), shared by equal strings; NULL on ENOMEM. */
const char *trd_str(struct trd *r, const void *data, size_t len);
/* Records a problem, prefixed with the current packet's index and offset. */
__attribute__((format(printf, 2, 3))) void trd_problem(struct trd *r, const char *fmt, ...);
/* Records a problem about the file, without the packet prefix. */
__attribute__((format(printf, 2, 3))) void trd_problem_at(struct trd *r, const char *fmt, ...);
/* Takes ownership of p (freed by trace_model_free); false on ENOMEM (p is freed). */
bool trd_keep(struct trd *r, void *p);
/* End of file: clock checks, sorting, BEGIN/END matching, final tables. */
void trd_finish(struct trd *r);

#endif
