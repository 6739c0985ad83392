/* SPDX-License-Identifier: MIT */
/*
 * The writer's state, shared by perfetto_writer.c (buffer, clocks, tracks,
 * slices, counters) and perfetto_samples.c (sequence 2: perf samples and
 * their interned symbols). Internal to viewer-export/.
 */
#ifndef PROFD_PERFETTO_WRITER_INTERNAL_H
#define PROFD_PERFETTO_WRITER_INTERNAL_H

#include "viewer-export/perfetto_intern.h"
#include "viewer-export/perfetto_writer.h"

#define PW_BUF_SIZE PERFETTO_BLOCK_BYTES

/*
 * Sequence 1: clock snapshots, descriptors, counters, totals. Sequence 2: perf
 * samples. From PW_NSEQ on: one per thread, its slices (perfetto_writer.c).
 */
enum { PW_SEQ_TRACK = 1, PW_SEQ_PERF = 2, PW_NSEQ = 3 };
/* A sequence-scoped clock (ids 64-127): each thread sequence's delta timestamps. */
#define PW_CLOCK_INCREMENTAL 64

/* Perfetto enum values (perfetto-format.md §3) used by both files. */
enum {
	PW_SEQ_INCREMENTAL_STATE_CLEARED = 1,
	PW_CLOCK_REALTIME = 1,
	PW_CLOCK_MONOTONIC = 3,
	PW_CLOCK_BOOTTIME = 6,
	PW_TYPE_SLICE_BEGIN = 1,
	PW_TYPE_SLICE_END = 2,
	PW_TYPE_INSTANT = 3,
	PW_TYPE_COUNTER = 4,
	PW_UNIT_COUNT = 2,
	PW_MODE_USER = 2,
	PW_SW_CPU_CLOCK = 1,
};

/* TracePacket field numbers. */
enum {
	PW_F_CLOCK_SNAPSHOT = 6,
	PW_F_TIMESTAMP = 8,
	PW_F_SEQ_ID = 10,
	PW_F_TRACK_EVENT = 11,
	PW_F_INTERNED_DATA = 12,
	PW_F_SEQ_FLAGS = 13,
	PW_F_CLOCK_ID = 58,
	PW_F_DEFAULTS = 59,
	PW_F_TRACK_DESCRIPTOR = 60,
	PW_F_PERF_SAMPLE = 66,
	PW_F_TRACE_ATTRIBUTES = 126,
};

/* Symbol dictionaries of sequence 2; every iid is its table index + 1. */
struct pw_symbols {
	struct pw_strtab functions, paths, build_ids;
	struct pw_table mappings;   /* struct pw_mapping_key */
	struct pw_table frames;     /* struct pw_frame_ent */
	struct pw_strtab callstacks; /* key: the frame iids (u32, root first) */
	/* iids first defined by the packet being built, per InternedData field */
	struct pw_vec new_functions, new_paths, new_build_ids, new_mappings, new_frames;
	struct pw_vec stack; /* frame iids of the sample being built */
	/* the last frame's mapping: consecutive frames mostly share one */
	struct {
		uint64_t start, end, pgoff, load_bias;
		uint32_t path_iid, build_id_iid, mapping_iid; /* 0: cache empty */
	} last_map;
	uint32_t freq_hz;
};

struct trace_sink;
struct pw_sched; /* perfetto_sched.c */

struct perfetto_writer {
	int fd;
	struct trace_sink *sink; /* where full buffers go (trace_sink.h) */
	bool ring;               /* a flight recorder: chunks restart every sequence */
	bool finished;           /* perfetto_writer_finish ran: nothing more is written */
	bool chunk_due;          /* ring: restart at the next event (not inside a packet) */
	bool compressed;
	uint64_t handed_ns;      /* when the buffer last went to the sink */
	struct pwb side;         /* ring: a chunk's prologue or a snapshot's header */
	/*
	 * func_id -> its defined event-name iid (0: ask the funcs table): every
	 * BEGIN needs it, and hashing was 4% of profd's time under load.
	 */
	uint32_t *func_iid_cache;
	size_t n_func_iid_cache;
	int write_error;      /* first errno of a failed write (the sink's); writing stops */
	uint8_t *buf;         /* PW_BUF_SIZE bytes of whole packets */
	size_t buf_len;
	struct pwb pkt;        /* scratch for packets not built by the hot path */
	struct perfetto_writer_stats st;
	bool snapshot_written;
	bool seq_started[PW_NSEQ];
	uint32_t next_thread_seq;  /* the next thread's sequence id */
	uint32_t starting_seq; /* sequence the packet being built clears, 0 = none */
	uint64_t next_uuid;
	uint64_t latest_ts;        /* the newest timestamp of sequences 1 and 2 (MONOTONIC) */
	struct pw_table procs;     /* struct pw_proc */
	struct pw_table threads;   /* struct pw_thread */
	struct pw_table funcs;     /* struct pw_func */
	struct pw_strtab counters; /* key: PERFETTO_PROC (8 bytes) + name; aux = uuid */
	struct pw_strtab event_names;
	struct pw_strtab arg_names; /* debug-annotation names (slice arguments) */
	uint32_t *arg_iids;         /* scratch: the annotation-name iids of one event's args */
	size_t arg_iids_cap;
	uint32_t last_thread;      /* index + 1 of the last thread used, 0 = none */
	struct pw_symbols sym;
	struct pw_sched *sched;    /* NULL until the first scheduler event */
};

/* perfetto_writer.c */
/* Starts a bare packet in w->pkt (no sequence, no timestamp); returns its mark. */
size_t pw_packet_open(struct perfetto_writer *w);
/*
 * Starts a packet in w->pkt on `seq` (a ClockSnapshot first if none was
 * written; CLEARED + defaults if it is the sequence's first packet); returns
 * the mark for pw_packet_end.
 */
size_t pw_packet_begin(struct perfetto_writer *w, uint32_t seq, uint64_t ts, bool has_ts);
/* Closes the packet and queues it. 0, or -ENOMEM (the packet is dropped). */
int pw_packet_end(struct perfetto_writer *w, size_t mark);

/* Ring: restarts every sequence (a new chunk) once the sink asked for it. */
void pw_chunk_start(struct perfetto_writer *w);
static inline void pw_chunk_check(struct perfetto_writer *w)
{
	if (__builtin_expect(w->chunk_due, 0))
		pw_chunk_start(w);
}

/* perfetto_sched.c */
/* Writes every CPU's pending events (the SystemInfo packet first, once). */
void pw_sched_flush(struct perfetto_writer *w);
/* Builds the SystemInfo packet in w->pkt (a ring window's header repeats it); its mark. */
size_t pw_sched_system_info(struct perfetto_writer *w);
void pw_sched_free(struct perfetto_writer *w);
/*
 * BOOTTIME - MONOTONIC as the scheduler events written now convert theirs:
 * what is placed against one of them (perfetto_writer_process_start) uses
 * the very same offset, not a second reading of the clocks.
 */
int64_t pw_sched_boot_offset(struct perfetto_writer *w);
/*
 * tid is gone at `end` (its process ended): no CPU's chain names it as the
 * task running after that. Its last switch out may never come (records of a
 * process profd no longer follows are not routed), and a later switch would
 * make it run again after its end (a second thread of its tid in the
 * importer). A CPU where it was switched in before the end hands over at the
 * end, to the task its next switch names as leaving (the importer's chain
 * stays whole: its prev is always the last switch's next); a later switch
 * in of the tid is another thread's.
 */
void pw_sched_end_task(struct perfetto_writer *w, int32_t tid, uint64_t end);

/* perfetto_samples.c */
void pw_symbols_init(struct pw_symbols *s);
void pw_symbols_free(struct pw_symbols *s);
/* Forgets every definition: the next packet on sequence 2 starts it afresh. */
void pw_symbols_restart(struct perfetto_writer *w);

#endif
