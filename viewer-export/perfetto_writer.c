/* SPDX-License-Identifier: MIT */
/*
 * Streaming Perfetto writer, sequence 1 and the output buffer: clock
 * snapshots, process/thread/counter descriptors, slices and counter values.
 * Owns the fd's contents: only whole packets ever reach write(), and a write
 * that fails midway (disk full) has its partial packet cut off again, so the
 * file is a valid trace after every flush. Never logs; never exits; returns
 * negative errno. Perf samples (sequence 2) live in perfetto_samples.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "viewer-export/perfetto_writer_internal.h"
#include "viewer-export/trace_sink.h"

/*
 * One process of the trace (perfetto_writer.h, PERFETTO_PROC): a pid reused
 * within the trace is another entry, with its own uuid. A generation that
 * ends or follows another of its pid is "timed": its descriptor packets
 * carry a timestamp inside its life (pw_proc_when), since the importer
 * applies names, parents and command lines to whichever process has the
 * pid at the packet's time.
 */
struct pw_proc {
	uint64_t proc; /* key: PERFETTO_PROC(pid, generation) */
	int32_t pid;
	bool described;
	bool timed;           /* after another of its pid: descriptors at start_boot + 1 */
	bool ended;           /* another of its pid followed: descriptors at end_boot - 1 */
	uint64_t start_boot;  /* its start in BOOTTIME (trace time); 0: not known */
	uint64_t end_boot;    /* its main thread's sched_process_free, as written */
	uint64_t uuid;
	uint64_t totals_uuid; /* its PERFETTO_FUNC_TOTALS_TRACK, 0 until used */
	uint64_t totals_ts;   /* the last event's there: each is 1 ns after it (see func_totals) */
	char *name;
	int32_t ppid;         /* 0: not given */
	int32_t ns_pid;       /* its pid in its own PID namespace; 0: the same as ours */
	char *cmdline;        /* NUL-separated arguments, cmdline_len bytes (+ a NUL); NULL: none */
	size_t cmdline_len;
};

struct pw_thread_key {
	uint64_t proc; /* its process: PERFETTO_PROC */
	int32_t tid;
	int32_t zero;  /* hashed with the rest: always 0 */
};

/*
 * A thread's slices go on its own sequence (perfetto-format.md §6.1): its
 * track from TrackEventDefaults, delta timestamps in the incremental clock
 * PW_CLOCK_INCREMENTAL, event names interned per sequence. 9-11 bytes per
 * BEGIN or END instead of 18-20, and fewer to encode.
 */
struct pw_thread {
	struct pw_thread_key key;
	uint64_t uuid;
	char *name;
	uint32_t depth;   /* BEGINs written and not yet ended */
	uint32_t clamped; /* BEGINs dropped above PERFETTO_MAX_SLICE_DEPTH, not yet ended */
	bool described;
	bool seq_started; /* its sequence was cleared and its clock snapshotted */
	uint32_t seq;     /* trusted_packet_sequence_id */
	uint64_t seq_ts;  /* the sequence's clock: the last timestamp written on it */
	uint8_t *defined; /* bit per event-name iid defined on its sequence */
	size_t defined_bytes;
	uint8_t *arg_names_defined; /* bit per annotation-name iid defined on its sequence */
	size_t arg_names_defined_bytes;
	uint32_t *open;   /* ring: the event-name iid of each open slice, outermost first */
	uint64_t floor;   /* ring: its events go no earlier than its last prologue */
};

struct pw_func {
	uint32_t func_id; /* key */
	uint32_t name_iid; /* event-name iid whose definition is written, 0 = not yet */
	char *name;
};

/* A slice packet: 0A len 40 delta 50 seq 5A len {48 type [50 iid]}. */
#define PW_SLICE_MAX (2 + 1 + 10 + 1 + 5 + 2 + 2 + 11)
_Static_assert(PW_SLICE_MAX - 2 < 128, "slice packets use a one-byte length");
_Static_assert(PW_SLICE_MAX >= 16, "perfetto_slice_emit stores 16 bytes");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "perfetto_slice_emit builds LE words");

/* ---- output ------------------------------------------------------------- */

static uint64_t pw_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Whether packets still go out: not after a write error, nor after the closing packet. */
static inline bool pw_keeps(const struct perfetto_writer *w)
{
	return !w->write_error && !w->finished;
}

/* The buffer goes to the sink (never waits); a ring may ask for a new chunk. */
static void pw_handover(struct perfetto_writer *w)
{
	if (w->buf_len && pw_keeps(w))
		trace_sink_put(w->sink, w->buf, w->buf_len);
	w->buf_len = 0; /* after a write error packets are counted, not kept */
	w->write_error = trace_sink_write_error(w->sink);
	w->handed_ns = pw_now_ns();
	if (w->ring && trace_sink_chunk_due(w->sink))
		w->chunk_due = true;
}

int perfetto_writer_flush(struct perfetto_writer *w)
{
	int ret;

	pw_sched_flush(w);
	pw_handover(w);
	ret = trace_sink_drain(w->sink);
	w->write_error = trace_sink_write_error(w->sink);
	return ret;
}

void perfetto_writer_poll(struct perfetto_writer *w)
{
	pw_sched_flush(w); /* every tick: scheduler events wait at most that long */
	if (!w->compressed && !w->ring) {
		perfetto_writer_flush(w); /* plain writes: as cheap now as later */
		return;
	}
	if (w->buf_len && pw_now_ns() - w->handed_ns >= 1000000000u)
		pw_handover(w);
	trace_sink_poll(w->sink);
	w->write_error = trace_sink_write_error(w->sink);
}

/* Queues one whole packet record; a record larger than the buffer goes out alone. */
static void pw_append(struct perfetto_writer *w, const uint8_t *p, size_t n)
{
	w->st.packets++;
	if (PW_BUF_SIZE - w->buf_len < n)
		pw_handover(w);
	if (n > PW_BUF_SIZE) {
		if (pw_keeps(w))
			trace_sink_put(w->sink, p, n);
		return;
	}
	if (pw_keeps(w)) {
		memcpy(w->buf + w->buf_len, p, n);
		w->buf_len += n;
	}
}

/* ---- packets built in the scratch buffer ---------------------------------- */

size_t pw_packet_open(struct perfetto_writer *w)
{
	w->pkt.len = 0;
	w->pkt.oom = false;
	w->starting_seq = 0;
	return pwb_open(&w->pkt, 1); /* Trace.packet */
}

static void pw_seq_defaults(struct perfetto_writer *w, uint32_t seq)
{
	struct pwb *b = &w->pkt;
	size_t d = pwb_open(b, PW_F_DEFAULTS), ps, tb;

	pwb_uint(b, PW_F_CLOCK_ID, PW_CLOCK_MONOTONIC);
	if (seq == PW_SEQ_PERF) {
		ps = pwb_open(b, 12); /* perf_sample_defaults */
		tb = pwb_open(b, 1);  /* timebase */
		if (w->sym.freq_hz)
			pwb_uint(b, 2, w->sym.freq_hz); /* frequency */
		pwb_uint(b, 4, PW_SW_CPU_CLOCK);      /* counter */
		pwb_close(b, tb);
		pwb_close(b, ps);
	}
	pwb_close(b, d);
}

size_t pw_packet_begin(struct perfetto_writer *w, uint32_t seq, uint64_t ts, bool has_ts)
{
	size_t mark;

	if (!w->snapshot_written)
		perfetto_writer_clock_snapshot(w); /* on failure the next packet retries */
	mark = pw_packet_open(w);
	if (has_ts)
		pwb_uint(&w->pkt, PW_F_TIMESTAMP, ts);
	if (has_ts && ts > w->latest_ts)
		w->latest_ts = ts;
	pwb_uint(&w->pkt, PW_F_SEQ_ID, seq);
	if (!w->seq_started[seq]) {
		/* the sequence's first packet: clear, then install the defaults */
		pwb_uint(&w->pkt, PW_F_SEQ_FLAGS, PW_SEQ_INCREMENTAL_STATE_CLEARED);
		pw_seq_defaults(w, seq);
		w->starting_seq = seq;
	}
	return mark;
}

int pw_packet_end(struct perfetto_writer *w, size_t mark)
{
	pwb_close(&w->pkt, mark);
	if (w->pkt.oom)
		return -ENOMEM;
	if (w->starting_seq)
		w->seq_started[w->starting_seq] = true;
	pw_append(w, w->pkt.p, w->pkt.len);
	return 0;
}

/* ---- clocks ------------------------------------------------------------- */

static uint64_t pw_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

static void pw_clock(struct pwb *b, uint32_t id, uint64_t ts)
{
	size_t c = pwb_open(b, 1); /* ClockSnapshot.clocks */

	pwb_uint(b, 1, id);
	pwb_uint(b, 2, ts);
	pwb_close(b, c);
}

/* A ClockSnapshot packet on sequence 1 in w->pkt; returns its mark. */
static size_t pw_build_clock_snapshot(struct perfetto_writer *w, bool primary)
{
	struct timespec boot, mono, real;
	size_t mark, cs;

	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	/*
	 * Not through pw_packet_begin: a snapshot never clears a sequence. Its
	 * clock id is explicit so later defaults (MONOTONIC) cannot apply to it.
	 */
	mark = pw_packet_open(w);
	pwb_uint(&w->pkt, PW_F_TIMESTAMP, pw_ns(&boot));
	pwb_uint(&w->pkt, PW_F_CLOCK_ID, PW_CLOCK_BOOTTIME);
	pwb_uint(&w->pkt, PW_F_SEQ_ID, PW_SEQ_TRACK);
	cs = pwb_open(&w->pkt, PW_F_CLOCK_SNAPSHOT);
	pw_clock(&w->pkt, PW_CLOCK_BOOTTIME, pw_ns(&boot));
	pw_clock(&w->pkt, PW_CLOCK_MONOTONIC, pw_ns(&mono));
	pw_clock(&w->pkt, PW_CLOCK_REALTIME, pw_ns(&real));
	if (primary)
		pwb_uint(&w->pkt, 2, PW_CLOCK_BOOTTIME); /* primary_trace_clock */
	pwb_close(&w->pkt, cs);
	return mark;
}

int perfetto_writer_clock_snapshot(struct perfetto_writer *w)
{
	int ret = pw_packet_end(w, pw_build_clock_snapshot(w, !w->snapshot_written));

	if (!ret)
		w->snapshot_written = true;
	return ret;
}

/* ---- descriptors -------------------------------------------------------- */

/* Replaces *slot by a copy of name; false (and *slot kept) if equal or on ENOMEM. */
static bool pw_rename(char **slot, const char *name, int *err)
{
	char *copy;

	if (!name || (*slot && strcmp(*slot, name) == 0))
		return false;
	copy = strdup(name);
	if (!copy) {
		*err = -ENOMEM;
		return false;
	}
	free(*slot);
	*slot = copy;
	return true;
}

/* Its arguments, each a field of number field. */
static void pw_put_cmdline(struct pwb *b, uint32_t field, const struct pw_proc *p)
{
	for (size_t off = 0; p->cmdline && off < p->cmdline_len; off += strlen(p->cmdline + off) + 1)
		pwb_str(b, field, p->cmdline + off);
}

/* The TrackDescriptor of a process, into the packet being built. */
static void pw_put_process(struct pwb *b, const struct pw_proc *p)
{
	size_t d = pwb_open(b, PW_F_TRACK_DESCRIPTOR), pd;

	pwb_uint(b, 1, p->uuid);
	pd = pwb_open(b, 3); /* process */
	pwb_uint(b, 1, (uint64_t)(int64_t)p->pid);
	if (p->name)
		pwb_str(b, 6, p->name); /* process_name */
	if (p->start_boot)
		pwb_uint(b, 7, p->start_boot); /* start_timestamp_ns, trace time */
	if (p->ns_pid) { /* process_labels: the importer keeps them as the process's args */
		char label[64];

		snprintf(label, sizeof(label), "pid %d in its PID namespace", (int)p->ns_pid);
		pwb_str(b, 8, label);
	}
	pwb_close(b, pd);
	pwb_close(b, d);
}

/*
 * Its parent and command line, as a ProcessTree entry (TracePacket.
 * process_tree = 2; the importer skips an entry without cmdline and takes
 * argv[0] for the name, perfetto-format.md §3.1). Not in its descriptor:
 * one descriptor per process, rewritten only for a new name.
 */
static void pw_put_process_tree(struct pwb *b, const struct pw_proc *p)
{
	size_t t = pwb_open(b, 2), e = pwb_open(b, 1); /* process_tree, processes */

	pwb_uint(b, 1, (uint64_t)(int64_t)p->pid);
	pwb_uint(b, 2, (uint64_t)(int64_t)p->ppid);
	pw_put_cmdline(b, 3, p);
	pwb_close(b, e);
	pwb_close(b, t);
}

/*
 * When a descriptor packet of p goes: inside its life in the importer's
 * order. A live first process of its pid: no timestamp (the importer takes
 * the latest seen). After another of its pid: just after that one's end.
 * Ended: just before its own end, however late the packet is written.
 */
static bool pw_proc_when(const struct pw_proc *p, uint64_t *ts)
{
	if (p->ended) {
		*ts = p->end_boot - 1;
		if (p->timed && *ts <= p->start_boot)
			*ts = p->start_boot + 1;
		return true;
	}
	*ts = p->start_boot + 1;
	return p->timed;
}

/* The newest time written so far (MONOTONIC), 0: none. */
static uint64_t pw_latest_ts(const struct perfetto_writer *w)
{
	uint64_t ts = w->latest_ts;

	for (uint32_t i = 0; i < w->threads.n; i++) {
		const struct pw_thread *t = pw_table_at(&w->threads, i);

		if (t->seq_ts > ts)
			ts = t->seq_ts;
	}
	return ts;
}

/*
 * Starts a packet on sequence 1 about p, at the time pw_proc_when says: in
 * BOOTTIME, as the sched_process_free it is placed against was written, so
 * that 1 ns apart is apart (a MONOTONIC time would be converted through the
 * clock snapshot's offset, read at another moment than the free's). Untimed
 * in a flight recorder: at the newest time written, since the importer would
 * take the newest it read before, and the window's header (read first)
 * holds a reused pid's later process at its start.
 */
static size_t pw_proc_packet_begin(struct perfetto_writer *w, const struct pw_proc *p)
{
	uint64_t ts = 0, latest;
	size_t mark;

	if (!p || !pw_proc_when(p, &ts)) {
		ts = w->ring ? pw_latest_ts(w) : 0;
		return pw_packet_begin(w, PW_SEQ_TRACK, ts, ts != 0);
	}
	latest = w->latest_ts; /* kept in MONOTONIC */
	mark = pw_packet_begin(w, PW_SEQ_TRACK, ts, true);
	w->latest_ts = latest;
	pwb_uint(&w->pkt, PW_F_CLOCK_ID, PW_CLOCK_BOOTTIME);
	return mark;
}

static int pw_describe_process(struct perfetto_writer *w, struct pw_proc *p)
{
	size_t mark = pw_proc_packet_begin(w, p);
	int ret;

	pw_put_process(&w->pkt, p);
	ret = pw_packet_end(w, mark);
	p->described = !ret;
	return ret;
}

/* The process's entry (uuid assigned on first use); NULL with errno on ENOMEM. */
static struct pw_proc *pw_proc_get(struct perfetto_writer *w, uint64_t proc)
{
	struct pw_proc *p;
	bool is_new;

	p = pw_table_get(&w->procs, &proc, &is_new);
	if (p && is_new) {
		p->uuid = w->next_uuid++;
		p->pid = perfetto_proc_pid(proc);
	}
	return p;
}

static struct pw_proc *pw_proc_use(struct perfetto_writer *w, uint64_t proc)
{
	struct pw_proc *p = pw_proc_get(w, proc);

	if (p && !p->described)
		pw_describe_process(w, p); /* retried on next use if it failed */
	return p;
}

/*
 * The pid's process before proc (the newest generation below its own that
 * the writer has), if it has not ended yet: it ends at ts. The importer
 * ends a process at its main thread's sched_process_free (ProcessTracker::
 * EndThread: tid == pid ends the process too).
 */
static int pw_proc_end_previous(struct perfetto_writer *w, uint64_t proc, uint64_t ts)
{
	pid_t pid = perfetto_proc_pid(proc);
	struct perfetto_sched_task gone = { .tid = pid, .comm = "" };
	struct pw_proc *q = NULL;
	int err;

	for (uint32_t g = perfetto_proc_generation(proc); g-- > 0 && !q;)
		q = pw_table_find(&w->procs, &(uint64_t){ PERFETTO_PROC(pid, g) });
	if (!q || q->ended)
		return 0;
	err = perfetto_writer_sched_task_free(w, ts, 0, &gone);
	for (uint32_t i = 0; i < w->threads.n; i++) {
		const struct pw_thread *t = pw_table_at(&w->threads, i);

		/*
		 * Not a CPU where the tid runs again since ts: the newer process's
		 * thread of the same tid (a main thread's tid is the pid), whose
		 * switches may be written before its process starts here.
		 */
		if (t->key.proc == q->proc)
			pw_sched_end_task(w, t->key.tid, ts);
	}
	q->ended = true;
	q->end_boot = (uint64_t)((int64_t)ts + pw_sched_boot_offset(w));
	return err;
}

int perfetto_writer_process_start(struct perfetto_writer *w, uint64_t proc, uint64_t ts)
{
	struct pw_proc *p = pw_proc_get(w, proc);
	int err;

	if (!p)
		return -ENOMEM;
	if (perfetto_proc_generation(proc) == 0) {
		p->start_boot = (uint64_t)((int64_t)ts + pw_sched_boot_offset(w));
		return p->described ? pw_describe_process(w, p) : 0;
	}
	err = pw_proc_end_previous(w, proc, ts);
	p->start_boot = (uint64_t)((int64_t)ts + pw_sched_boot_offset(w));
	p->timed = true;
	if (p->described) /* named already: again, now at its time */
		return pw_describe_process(w, p);
	return err;
}

int perfetto_writer_process(struct perfetto_writer *w, uint64_t proc, const char *name)
{
	struct pw_proc *p = pw_proc_get(w, proc);
	int err = 0;

	if (!p)
		return -ENOMEM;
	if (pw_rename(&p->name, name, &err))
		p->described = false; /* same uuid, new name: the importer renames */
	if (err)
		return err;
	return p->described ? 0 : pw_describe_process(w, p);
}

int perfetto_writer_process_ns_pid(struct perfetto_writer *w, uint64_t proc, pid_t ns_pid)
{
	struct pw_proc *p = pw_proc_get(w, proc);

	if (!p)
		return -ENOMEM;
	if (p->ns_pid == ns_pid)
		return 0;
	p->ns_pid = ns_pid;
	return pw_describe_process(w, p);
}

int perfetto_writer_process_detail(struct perfetto_writer *w, uint64_t proc, pid_t ppid,
				   const char *cmdline, size_t len)
{
	struct pw_proc *p = pw_proc_get(w, proc);
	char *copy = len ? malloc(len + 1) : NULL;
	size_t mark;

	if (!p || (len && !copy)) {
		free(copy);
		return -ENOMEM;
	}
	if (!len || (p->ppid == ppid && p->cmdline_len == len && !memcmp(p->cmdline, cmdline, len))) {
		free(copy); /* nothing new, or no arguments (a kernel thread, or gone) */
		return 0;
	}
	memcpy(copy, cmdline, len);
	copy[len] = '\0';
	free(p->cmdline);
	p->cmdline = copy;
	p->cmdline_len = len;
	p->ppid = ppid;
	if (!p->described && pw_describe_process(w, p))
		return -ENOMEM;
	mark = pw_proc_packet_begin(w, p);
	pw_put_process_tree(&w->pkt, p);
	return pw_packet_end(w, mark);
}

static void pw_put_thread(struct pwb *b, const struct pw_thread *t)
{
	size_t d = pwb_open(b, PW_F_TRACK_DESCRIPTOR), td;

	pwb_uint(b, 1, t->uuid);
	td = pwb_open(b, 4); /* thread */
	pwb_uint(b, 1, (uint64_t)(int64_t)perfetto_proc_pid(t->key.proc));
	pwb_uint(b, 2, (uint64_t)(int64_t)t->key.tid);
	if (t->name)
		pwb_str(b, 5, t->name); /* thread_name */
	pwb_close(b, td);
	pwb_close(b, d);
}

static int pw_describe_thread(struct perfetto_writer *w, struct pw_thread *t)
{
	size_t mark = pw_proc_packet_begin(w, pw_table_find(&w->procs, &t->key.proc));
	int ret;

	pw_put_thread(&w->pkt, t);
	ret = pw_packet_end(w, mark);
	t->described = !ret;
	return ret;
}

/*
 * The thread's entry; on first use its process track is described first and
 * the thread gets the next uuid. NULL with errno on ENOMEM.
 */
static struct pw_thread *pw_thread_get(struct perfetto_writer *w, uint64_t proc, pid_t tid)
{
	struct pw_thread_key key = { proc, tid, 0 };
	struct pw_thread *t;
	bool is_new;

	t = pw_table_get(&w->threads, &key, &is_new);
	if (t && is_new) {
		pw_proc_use(w, proc); /* different table: t stays valid */
		t->uuid = w->next_uuid++;
		t->seq = w->next_thread_seq++;
	}
	return t;
}

/* Hot: the thread an event is on, described; remembers the last one. */
static struct pw_thread *pw_thread_use(struct perfetto_writer *w, uint64_t proc, pid_t tid)
{
	struct pw_thread *t;

	if (w->last_thread) {
		t = pw_table_at(&w->threads, w->last_thread - 1);
		if (t->key.proc == proc && t->key.tid == tid && t->described)
			return t;
	}
	t = pw_thread_get(w, proc, tid);
	if (!t || (!t->described && pw_describe_thread(w, t) < 0))
		return NULL;
	w->last_thread = pw_table_index(&w->threads, t) + 1;
	return t;
}

int perfetto_writer_thread(struct perfetto_writer *w, uint64_t proc, pid_t tid, const char *name)
{
	struct pw_thread *t = pw_thread_get(w, proc, tid);
	int err = 0;

	if (!t)
		return -ENOMEM;
	if (pw_rename(&t->name, name, &err))
		t->described = false;
	if (err)
		return err;
	return t->described ? 0 : pw_describe_thread(w, t);
}

/* ---- slices ------------------------------------------------------------- */

int perfetto_writer_function(struct perfetto_writer *w, uint32_t func_id, const char *name)
{
	struct pw_func *f;
	bool is_new;
	int err = 0;

	f = pw_table_get(&w->funcs, &func_id, &is_new);
	if (!f)
		return -ENOMEM;
	if (pw_rename(&f->name, name, &err)) {
		f->name_iid = 0; /* interned again (by string) on next use */
		if (func_id < w->n_func_iid_cache)
			w->func_iid_cache[func_id] = 0;
	}
	return err;
}

#define PW_FUNC_IID_CACHE_MAX (1u << 22) /* ids above go through the table */

static void pw_cache_func_iid(struct perfetto_writer *w, uint32_t func_id, uint32_t iid)
{
	if (func_id >= PW_FUNC_IID_CACHE_MAX)
		return;
	if (func_id >= w->n_func_iid_cache) {
		size_t n = (size_t)func_id * 2 + 64;
		uint32_t *grown;

		n = n > PW_FUNC_IID_CACHE_MAX ? PW_FUNC_IID_CACHE_MAX : n;
		grown = realloc(w->func_iid_cache, n * sizeof(*grown));
		if (!grown)
			return; /* the table still answers */
		memset(grown + w->n_func_iid_cache, 0, (n - w->n_func_iid_cache) * sizeof(*grown));
		w->func_iid_cache = grown;
		w->n_func_iid_cache = n;
	}
	w->func_iid_cache[func_id] = iid;
}

/*
 * Resolves func_id to an event-name iid. *def is NULL when the name is
 * already defined on sequence 1, else the name to define in this packet.
 */
/* The event-name iid of func_id (assigned on first use, shared by equal names), or <0. */
static int64_t pw_func_iid(struct perfetto_writer *w, uint32_t func_id)
{
	struct pw_func *f;
	const char *name;
	char tmp[32];
	int64_t idx;
	bool is_new;

	if (func_id < w->n_func_iid_cache && w->func_iid_cache[func_id])
		return w->func_iid_cache[func_id];
	f = pw_table_get(&w->funcs, &func_id, &is_new);
	if (!f)
		return -ENOMEM;
	if (!f->name_iid) {
		name = f->name;
		if (!name) {
			snprintf(tmp, sizeof(tmp), "func_%" PRIu32, func_id);
			name = tmp;
		}
		idx = pw_strtab_intern(&w->event_names, name, strlen(name), &is_new);
		if (idx < 0)
			return idx;
		f->name_iid = (uint32_t)idx + 1;
	}
	pw_cache_func_iid(w, func_id, f->name_iid);
	return f->name_iid;
}

/* ---- a thread's sequence ---------------------------------------------------- */

/*
 * A thread sequence's first packets, before its first event (and again in
 * each flight-recorder chunk): CLEARED with the defaults (its track, the
 * incremental clock), then a snapshot that starts that clock at ts in
 * CLOCK_MONOTONIC (perfetto-format.md §3.4.4). Built in w->pkt; the marks go
 * to pw_packet_end or to a prologue.
 */
static size_t pw_build_seq_clear(struct perfetto_writer *w, const struct pw_thread *t)
{
	size_t mark = pw_packet_open(w), d, ted;

	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	pwb_uint(&w->pkt, PW_F_SEQ_FLAGS, PW_SEQ_INCREMENTAL_STATE_CLEARED);
	d = pwb_open(&w->pkt, PW_F_DEFAULTS);
	pwb_uint(&w->pkt, PW_F_CLOCK_ID, PW_CLOCK_INCREMENTAL);
	ted = pwb_open(&w->pkt, 11); /* track_event_defaults */
	pwb_uint(&w->pkt, 11, t->uuid); /* track_uuid */
	pwb_close(&w->pkt, ted);
	pwb_close(&w->pkt, d);
	return mark;
}

static size_t pw_build_seq_clock(struct perfetto_writer *w, const struct pw_thread *t,
				 uint64_t ts)
{
	size_t mark = pw_packet_open(w), cs, c;

	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	cs = pwb_open(&w->pkt, PW_F_CLOCK_SNAPSHOT);
	pw_clock(&w->pkt, PW_CLOCK_MONOTONIC, ts);
	c = pwb_open(&w->pkt, 1); /* clocks */
	pwb_uint(&w->pkt, 1, PW_CLOCK_INCREMENTAL);
	pwb_uint(&w->pkt, 2, ts);
	pwb_uint(&w->pkt, 3, 1); /* is_incremental */
	pwb_close(&w->pkt, c);
	pwb_close(&w->pkt, cs);
	return mark;
}

static int pw_thread_seq_start(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts)
{
	if (ts < t->floor) /* after a prologue's BEGINs, never before them */
		ts = t->floor;
	if (!w->snapshot_written)
		perfetto_writer_clock_snapshot(w);
	if (pw_packet_end(w, pw_build_seq_clear(w, t)) < 0 ||
	    pw_packet_end(w, pw_build_seq_clock(w, t, ts)) < 0)
		return -ENOMEM;
	t->seq_ts = ts;
	t->seq_started = true;
	return 0;
}

/* ts as the delta the thread's sequence needs (never negative: the clock only goes on). */
static uint64_t pw_thread_delta(struct pw_thread *t, uint64_t ts)
{
	uint64_t delta = ts > t->seq_ts ? ts - t->seq_ts : 0;

	t->seq_ts += delta;
	return delta;
}

/* A packet on t's sequence, timestamped ts (as a delta); returns the mark for pw_packet_end. */
static size_t pw_thread_packet_begin(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts)
{
	size_t mark = pw_packet_open(w);

	pwb_uint(&w->pkt, PW_F_TIMESTAMP, pw_thread_delta(t, ts));
	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	return mark;
}

/* Bit sets of iids defined on a sequence (event names, annotation names). */
static inline bool pw_bit_test(const uint8_t *bits, size_t n_bytes, uint64_t iid)
{
	return iid / 8 < n_bytes && (bits[iid / 8] >> (iid % 8) & 1);
}

static int pw_bit_set(uint8_t **bits, size_t *n_bytes, uint64_t iid)
{
	if (iid / 8 >= *n_bytes) {
		size_t n = iid / 8 * 2 + 16;
		uint8_t *grown = realloc(*bits, n);

		if (!grown)
			return -ENOMEM;
		memset(grown + *n_bytes, 0, n - *n_bytes);
		*bits = grown;
		*n_bytes = n;
	}
	(*bits)[iid / 8] |= (uint8_t)(1u << (iid % 8));
	return 0;
}

static bool pw_thread_defined(const struct pw_thread *t, uint64_t iid)
{
	return pw_bit_test(t->defined, t->defined_bytes, iid);
}

static int pw_thread_define(struct pw_thread *t, uint64_t iid)
{
	return pw_bit_set(&t->defined, &t->defined_bytes, iid);
}

/* The hot path: a BEGIN/END on t's sequence whose name (if any) is defined there. */
static void pw_emit_slice(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
			  unsigned type, uint64_t name_iid)
{
	uint64_t delta = pw_thread_delta(t, ts);
	unsigned ev = 2, len;
	uint8_t *p;

	if (name_iid)
		ev += 1 + pwb_varint_size(name_iid);
	len = 1 + pwb_varint_size(delta) + 1 + pwb_varint_size(t->seq) + 2 + ev;
	if (PW_BUF_SIZE - w->buf_len < len + 2)
		pw_handover(w);
	p = w->buf + w->buf_len;
	*p++ = 0x0a; /* Trace.packet */
	*p++ = (uint8_t)len;
	*p++ = 0x40; /* timestamp: the delta (clock PW_CLOCK_INCREMENTAL from the defaults) */
	p = pwb_put_varint(p, delta);
	*p++ = 0x50; /* trusted_packet_sequence_id */
	p = pwb_put_varint(p, t->seq);
	*p++ = 0x5a; /* track_event; its track from the defaults */
	*p++ = (uint8_t)ev;
	*p++ = 0x48; /* type */
	*p++ = (uint8_t)type;
	if (name_iid) {
		*p++ = 0x50; /* name_iid */
		p = pwb_put_varint(p, name_iid);
	}
	w->st.packets++;
	if (pw_keeps(w)) /* else counted, not kept */
		w->buf_len = (size_t)(p - w->buf);
}

/* The fields of a BEGIN that also defines its event name, into the packet being built. */
static void pw_put_begin_defining(struct perfetto_writer *w, uint64_t iid)
{
	size_t ev, in, en;

	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_SLICE_BEGIN);
	pwb_uint(&w->pkt, 10, iid);
	pwb_close(&w->pkt, ev);
	in = pwb_open(&w->pkt, PW_F_INTERNED_DATA);
	en = pwb_open(&w->pkt, 2); /* event_names */
	pwb_uint(&w->pkt, 1, iid);
	pwb_str(&w->pkt, 2, (const char *)pw_strtab_data(&w->event_names, (uint32_t)iid - 1));
	pwb_close(&w->pkt, en);
	pwb_close(&w->pkt, in);
}

/* Cold: a BEGIN that also defines its event name (its first use on t's sequence). */
static int pw_emit_begin_defining(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
				  uint64_t iid)
{
	size_t mark = pw_thread_packet_begin(w, t, ts);

	pw_put_begin_defining(w, iid);
	if (pw_packet_end(w, mark) < 0)
		return -ENOMEM;
	return pw_thread_define(t, iid);
}

/* Ring: remembers the slice opened (for the next chunk's prologue). */
static int pw_thread_push(struct pw_thread *t, uint32_t iid)
{
	if (!t->open && !(t->open = malloc(PERFETTO_MAX_SLICE_DEPTH * sizeof(*t->open))))
		return -ENOMEM;
	t->open[t->depth] = iid;
	return 0;
}

/*
 * The annotation-name iid of each of the n args, in w->arg_iids, or NULL
 * when memory ran out (the names then go inline). Names are interned per
 * writer and defined on a sequence by the first packet there that uses
 * them (InternedData.debug_annotation_names), as event names are: "arg1"
 * is written once per sequence, then 1-2 bytes per value (bench/README.md).
 * An iid 0: that name goes inline.
 */
static const uint32_t *pw_arg_iids(struct perfetto_writer *w, const struct perfetto_arg *args,
				   size_t n)
{
	if (n > w->arg_iids_cap) {
		uint32_t *grown = realloc(w->arg_iids, 2 * n * sizeof(*grown));

		if (!grown)
			return NULL;
		w->arg_iids = grown;
		w->arg_iids_cap = 2 * n;
	}
	for (size_t i = 0; i < n; i++) {
		bool is_new;
		int64_t idx = pw_strtab_intern(&w->arg_names, args[i].name, strlen(args[i].name),
					       &is_new);

		w->arg_iids[i] = idx < 0 || idx >= UINT32_MAX - 1 ? 0 : (uint32_t)idx + 1;
	}
	return w->arg_iids;
}

/*
 * DebugAnnotations of a slice event: trace processor adds them to the
 * slice's args, named by iids[i] (pw_arg_iids) or inline when 0 or NULL.
 */
static void pw_put_args(struct pwb *b, const struct perfetto_arg *args, size_t n,
			const uint32_t *iids)
{
	for (size_t i = 0; i < n; i++) {
		const struct perfetto_arg *a = &args[i];
		size_t da = pwb_open(b, 4); /* debug_annotations */

		if (iids && iids[i])
			pwb_uint(b, 1, iids[i]); /* name_iid */
		else
			pwb_str(b, 10, a->name); /* name */
		switch (a->type) {
		case PERFETTO_ARG_INT: pwb_uint(b, 4, a->value); break;     /* int_value (varint) */
		case PERFETTO_ARG_DOUBLE:
			pwb_tag(b, 5, 1); /* double_value, fixed64 */
			pwb_raw(b, &a->value, 8);
			break;
		case PERFETTO_ARG_POINTER: pwb_uint(b, 7, a->value); break; /* pointer_value */
		case PERFETTO_ARG_STRING: pwb_bytes(b, 6, a->str, a->str_len); break; /* string_value */
		case PERFETTO_ARG_BOOL: pwb_uint(b, 2, a->value != 0); break; /* bool_value */
		default: pwb_uint(b, 3, a->value); break; /* uint_value */
		}
		pwb_close(b, da);
	}
}

/* Whether annotation-name iid is defined on t's sequence, or earlier in this event's iids. */
static bool pw_arg_name_known(const struct pw_thread *t, const uint32_t *iids, size_t i)
{
	if (pw_bit_test(t->arg_names_defined, t->arg_names_defined_bytes, iids[i]))
		return true;
	for (size_t k = 0; k < i; k++)
		if (iids[k] == iids[i])
			return true;
	return false;
}

/*
 * The packet's InternedData, when it defines anything on t's sequence: the
 * event's name (event_iid; 0: none) and the annotation names of iids new
 * there. pw_args_defined marks them once the packet is out.
 */
static void pw_put_interned(struct perfetto_writer *w, const struct pw_thread *t,
			    uint64_t event_iid, const uint32_t *iids, size_t n)
{
	size_t in = 0, en;

	if (event_iid) {
		in = pwb_open(&w->pkt, PW_F_INTERNED_DATA);
		en = pwb_open(&w->pkt, 2); /* event_names */
		pwb_uint(&w->pkt, 1, event_iid);
		pwb_str(&w->pkt, 2,
			(const char *)pw_strtab_data(&w->event_names, (uint32_t)event_iid - 1));
		pwb_close(&w->pkt, en);
	}
	for (size_t i = 0; iids && i < n; i++) {
		if (!iids[i] || pw_arg_name_known(t, iids, i))
			continue;
		if (!in)
			in = pwb_open(&w->pkt, PW_F_INTERNED_DATA);
		en = pwb_open(&w->pkt, 3); /* debug_annotation_names */
		pwb_uint(&w->pkt, 1, iids[i]);
		pwb_str(&w->pkt, 2, (const char *)pw_strtab_data(&w->arg_names, iids[i] - 1));
		pwb_close(&w->pkt, en);
	}
	if (in)
		pwb_close(&w->pkt, in);
}

/* The annotation names of a packet just written are defined on t's sequence. */
static int pw_args_defined(struct pw_thread *t, const uint32_t *iids, size_t n)
{
	for (size_t i = 0; iids && i < n; i++)
		if (iids[i] && pw_bit_set(&t->arg_names_defined, &t->arg_names_defined_bytes,
					  iids[i]) < 0)
			return -ENOMEM; /* defined again by the next packet that uses it */
	return 0;
}

/* An END carrying debug annotations. */
static int pw_emit_end_with_args(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
				 const struct perfetto_arg *args, size_t n)
{
	const uint32_t *iids = pw_arg_iids(w, args, n);
	size_t mark = pw_thread_packet_begin(w, t, ts), ev;

	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_SLICE_END);
	pw_put_args(&w->pkt, args, n, iids);
	pwb_close(&w->pkt, ev);
	pw_put_interned(w, t, 0, iids, n);
	if (pw_packet_end(w, mark) < 0)
		return -ENOMEM;
	return pw_args_defined(t, iids, n);
}

/* A BEGIN with the call's --args values; its name defined with it when new on t's sequence. */
static int pw_emit_begin_with_args(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
				   uint64_t iid, const struct perfetto_arg *args, size_t n)
{
	const uint32_t *iids = pw_arg_iids(w, args, n);
	size_t mark = pw_thread_packet_begin(w, t, ts), ev;
	bool defining = !pw_thread_defined(t, iid);

	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_SLICE_BEGIN);
	pwb_uint(&w->pkt, 10, iid);
	pw_put_args(&w->pkt, args, n, iids);
	pwb_close(&w->pkt, ev);
	pw_put_interned(w, t, defining ? iid : 0, iids, n);
	if (pw_packet_end(w, mark) < 0)
		return -ENOMEM;
	if (defining && pw_thread_define(t, iid) < 0)
		return -ENOMEM;
	return pw_args_defined(t, iids, n);
}

/* A BEGIN on t, described and current (the chunk checked); args: its n --args values. */
static int pw_begin_on(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
		       uint32_t func_id, const struct perfetto_arg *args, size_t n)
{
	int64_t iid;

	if (t->depth >= PERFETTO_MAX_SLICE_DEPTH) {
		t->clamped++;
		w->st.slices_clamped++;
		return 0;
	}
	iid = pw_func_iid(w, func_id);
	if (iid < 0)
		return (int)iid;
	if (!t->seq_started && pw_thread_seq_start(w, t, ts) < 0)
		return -ENOMEM;
	if (n) {
		if (pw_emit_begin_with_args(w, t, ts, (uint64_t)iid, args, n) < 0)
			return -ENOMEM;
	} else if (pw_thread_defined(t, (uint64_t)iid)) {
		pw_emit_slice(w, t, ts, PW_TYPE_SLICE_BEGIN, (uint64_t)iid);
	} else if (pw_emit_begin_defining(w, t, ts, (uint64_t)iid) < 0) {
		return -ENOMEM;
	}
	if (w->ring && pw_thread_push(t, (uint32_t)iid) < 0)
		return -ENOMEM; /* the prologue will lack it: the next BEGIN retries */
	t->depth++;
	return 0;
}

int perfetto_writer_slice_begin(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts,
				uint32_t func_id)
{
	struct pw_thread *t;

	pw_chunk_check(w);
	t = pw_thread_use(w, proc, tid);
	if (!t)
		return -ENOMEM;
	return pw_begin_on(w, t, ts, func_id, NULL, 0);
}

/* Pops the thread's depth; 1 when an END must be written to its track. */
static int pw_slice_end_due(struct perfetto_writer *w, struct pw_thread *t)
{
	if (t->clamped) {
		t->clamped--; /* its BEGIN was not written */
		return 0;
	}
	if (!t->depth) {
		w->st.ends_unmatched++;
		return 0;
	}
	t->depth--;
	return 1;
}

/* An END on t, described and current (the chunk checked). */
static int pw_end_on(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
		     const struct perfetto_arg *args, size_t n)
{
	if (!pw_slice_end_due(w, t))
		return 0;
	/* a new chunk: the thread's sequence restarts with its next event, an END too */
	if (!t->seq_started && pw_thread_seq_start(w, t, ts) < 0)
		return -ENOMEM;
	if (!n) {
		pw_emit_slice(w, t, ts, PW_TYPE_SLICE_END, 0);
		return 0;
	}
	return pw_emit_end_with_args(w, t, ts, args, n);
}

int perfetto_writer_slice_end(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts)
{
	struct pw_thread *t;

	pw_chunk_check(w);
	t = pw_thread_use(w, proc, tid);
	if (!t)
		return -ENOMEM;
	return pw_end_on(w, t, ts, NULL, 0);
}

int perfetto_writer_slice_end_args(struct perfetto_writer *w, uint64_t proc, pid_t tid, uint64_t ts,
				   const struct perfetto_arg *args, size_t n)
{
	struct pw_thread *t;

	pw_chunk_check(w);
	t = pw_thread_use(w, proc, tid);
	if (!t)
		return -ENOMEM;
	return pw_end_on(w, t, ts, args, n);
}

/*
 * A cursor's copy of the writer's state (perfetto_writer.h). The thread's
 * entry cannot move while the cursor is open: only a new thread's insertion
 * moves entries, and a cursor's ops are all on its own thread. A ring's new
 * chunk (pw_chunk_check) restarts sequences in place: with a ring every op
 * goes through perfetto_slice_cursor_op.
 */
static void pw_cursor_load(struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at)
{
	struct perfetto_writer *w = c->w;
	struct pw_thread *t = c->thread;
	bool inline_ok = pw_keeps(w) && !w->ring && t->seq_started && t->seq < 128;

	c->out = w->buf;
	c->lim = inline_ok ? PW_BUF_SIZE - PW_SLICE_MAX + 1 : 0;
	c->tail_end = 0x50 | (uint64_t)t->seq << 8 | 0x5aull << 16 | 2ull << 24 | 0x48ull << 32 |
		      (uint64_t)PW_TYPE_SLICE_END << 40;
	c->tail_begin = 0x50 | (uint64_t)t->seq << 8 | 0x5aull << 16 | 4ull << 24 | 0x48ull << 32 |
			(uint64_t)PW_TYPE_SLICE_BEGIN << 40 | 0x50ull << 48;
	c->clamped = t->clamped;
	c->defined = t->defined;
	c->defined_bytes = t->defined_bytes;
	c->func_iid = w->func_iid_cache;
	c->n_func_iid = w->n_func_iid_cache;
	*at = (struct perfetto_slice_pos){ w->buf_len, t->seq_ts, t->depth, 0 };
}

void perfetto_slice_cursor_close(struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at)
{
	struct perfetto_writer *w = c->w;
	struct pw_thread *t = c->thread;

	w->buf_len = at->len;
	w->st.packets += at->packets;
	at->packets = 0;
	t->seq_ts = at->seq_ts;
	t->depth = at->depth;
}

int perfetto_slice_cursor_open(struct perfetto_writer *w, uint64_t proc, pid_t tid,
			       struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at)
{
	pw_chunk_check(w);
	/* nothing inline until loaded */
	*c = (struct perfetto_slice_cursor){ .w = w };
	*at = (struct perfetto_slice_pos){ 0 };
	c->thread = pw_thread_use(w, proc, tid);
	if (!c->thread)
		return -ENOMEM;
	pw_cursor_load(c, at);
	return 0;
}

int perfetto_slice_cursor_op(struct perfetto_slice_cursor *c, struct perfetto_slice_pos *at,
			     const struct perfetto_slice_op *op, const struct perfetto_arg *args)
{
	struct perfetto_writer *w = c->w;
	struct pw_thread *t = c->thread;
	int r;

	perfetto_slice_cursor_close(c, at);
	pw_chunk_check(w);
	r = op->func_id ? pw_begin_on(w, t, op->ts, op->func_id, args, op->n_args) :
			  pw_end_on(w, t, op->ts, args, op->n_args);
	pw_cursor_load(c, at);
	return r;
}

int perfetto_writer_slices(struct perfetto_writer *w, uint64_t proc, pid_t tid,
			   const struct perfetto_slice_op *ops, size_t n,
			   const struct perfetto_arg *args)
{
	struct perfetto_slice_cursor c;
	struct perfetto_slice_pos at;
	int ret, r;

	ret = perfetto_slice_cursor_open(w, proc, tid, &c, &at);
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		const struct perfetto_slice_op *op = &ops[i];

		if (!op->n_args && (op->func_id ? perfetto_slice_begin(&c, &at, op->ts, op->func_id) :
						  perfetto_slice_end(&c, &at, op->ts)))
			continue;
		r = perfetto_slice_cursor_op(&c, &at, op, args);
		args += op->n_args;
		if (r && !ret)
			ret = r; /* as the calls one by one: the others still go */
	}
	perfetto_slice_cursor_close(&c, &at);
	return ret;
}

/* ---- function totals ------------------------------------------------------- */

/* The TrackDescriptor of a named track under a process: a counter or the totals track. */
static void pw_put_named_track(struct pwb *b, uint64_t uuid, uint64_t parent, const char *name,
			       bool counter)
{
	size_t d = pwb_open(b, PW_F_TRACK_DESCRIPTOR), cd;

	pwb_uint(b, 1, uuid);
	pwb_uint(b, 5, parent); /* parent_uuid */
	pwb_str(b, 2, name);
	if (counter) {
		cd = pwb_open(b, 8); /* counter */
		pwb_uint(b, 3, PW_UNIT_COUNT);
		pwb_close(b, cd);
	}
	pwb_close(b, d);
}

/* The totals track of pid, described before its first event; 0 on ENOMEM. */
static uint64_t pw_totals_uuid(struct perfetto_writer *w, uint64_t proc)
{
	struct pw_proc *p = pw_proc_use(w, proc);
	size_t mark;

	if (!p)
		return 0;
	if (p->totals_uuid)
		return p->totals_uuid;
	mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false);
	pw_put_named_track(&w->pkt, w->next_uuid, p->uuid, PERFETTO_FUNC_TOTALS_TRACK, false);
	if (pw_packet_end(w, mark) < 0)
		return 0;
	p->totals_uuid = w->next_uuid++;
	return p->totals_uuid;
}

static void pw_str_arg(struct pwb *b, const char *name, const char *value)
{
	size_t da = pwb_open(b, 4); /* debug_annotations */

	pwb_str(b, 10, name);
	pwb_str(b, 6, value); /* string_value */
	pwb_close(b, da);
}

static void pw_uint_arg(struct pwb *b, const char *name, uint64_t value)
{
	size_t da = pwb_open(b, 4); /* debug_annotations */

	pwb_str(b, 10, name);
	pwb_uint(b, 3, value); /* uint_value */
	pwb_close(b, da);
}

int perfetto_writer_func_totals(struct perfetto_writer *w, uint64_t proc, uint64_t ts,
				const struct perfetto_func_totals *t)
{
	struct pw_proc *p;
	uint64_t uuid;
	size_t mark, ev;

	pw_chunk_check(w);
	uuid = pw_totals_uuid(w, proc);
	if (!uuid)
		return -ENOMEM;
	/*
	 * Instants at one timestamp nest in the importer (a 0 ns slice is still
	 * open at its own end): thousands of functions' figures at one send
	 * went past its depth limit (slice_max_depth_exceeded). 1 ns apart each
	 * closes the one before.
	 */
	p = pw_proc_get(w, proc);
	if (p && ts <= p->totals_ts)
		ts = p->totals_ts + 1;
	if (p)
		p->totals_ts = ts;
	mark = pw_packet_begin(w, PW_SEQ_TRACK, ts, true);
	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_INSTANT);
	pwb_uint(&w->pkt, 11, uuid);
	/*
	 * Named for the track, the function in an argument: a slice named after
	 * a function is a call of it (`select name, count(*) from slice` counts
	 * calls), so these must not be.
	 */
	pwb_str(&w->pkt, 23, PERFETTO_FUNC_TOTALS_EVENT);
	pw_str_arg(&w->pkt, "function", t->name);
	pw_uint_arg(&w->pkt, "tid", t->tid);
	pw_uint_arg(&w->pkt, "calls", t->calls);
	pw_uint_arg(&w->pkt, "returned", t->exited);
	pw_uint_arg(&w->pkt, "not_on_timeline", t->dropped + t->filtered);
	pw_uint_arg(&w->pkt, "filtered", t->filtered);
	if (t->values_dropped) /* only --args/--retval have values to lose */
		pw_uint_arg(&w->pkt, "values_dropped", t->values_dropped);
	pw_uint_arg(&w->pkt, "total_ns", t->total_ns);
	pw_uint_arg(&w->pkt, "self_ns", t->self_ns);
	pw_uint_arg(&w->pkt, "avg_ns", t->exited ? t->total_ns / t->exited : 0);
	pw_uint_arg(&w->pkt, "p50_ns_estimate", t->p50_ns);
	pw_uint_arg(&w->pkt, "p90_ns_estimate", t->p90_ns);
	pw_uint_arg(&w->pkt, "p99_ns_estimate", t->p99_ns);
	pw_uint_arg(&w->pkt, "max_ns", t->max_ns);
	if (t->sched_calls) { /* scheduler states: over the recorded calls that returned */
		pw_uint_arg(&w->pkt, "sched_calls", t->sched_calls);
		pw_uint_arg(&w->pkt, "on_cpu_ns", t->on_cpu_ns);
		pw_uint_arg(&w->pkt, "off_cpu_ns", t->off_cpu_ns);
		pw_uint_arg(&w->pkt, "runnable_ns", t->runnable_ns);
	}
	pwb_close(&w->pkt, ev);
	return pw_packet_end(w, mark);
}

/* ---- counters ------------------------------------------------------------ */

static int pw_describe_counter(struct perfetto_writer *w, uint64_t uuid, uint64_t parent,
			       const char *name)
{
	size_t mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false);

	pw_put_named_track(&w->pkt, uuid, parent, name, true);
	return pw_packet_end(w, mark);
}

/* The counter's uuid, its descriptor written before first use; 0 on ENOMEM. */
static uint64_t pw_counter_uuid(struct perfetto_writer *w, uint64_t proc, const char *name)
{
	size_t len = strlen(name);
	struct pw_proc *p;
	uint64_t uuid;
	uint64_t key_pid = proc;
	uint8_t *key;
	int64_t idx;
	bool is_new;

	key = malloc(sizeof(key_pid) + len);
	if (!key)
		return 0;
	memcpy(key, &key_pid, sizeof(key_pid));
	memcpy(key + sizeof(key_pid), name, len);
	idx = pw_strtab_intern(&w->counters, key, sizeof(key_pid) + len, &is_new);
	free(key);
	if (idx < 0)
		return 0;
	if (w->counters.ents[idx].aux)
		return w->counters.ents[idx].aux;
	p = pw_proc_use(w, proc);
	if (!p)
		return 0;
	uuid = w->next_uuid++;
	if (pw_describe_counter(w, uuid, p->uuid, name) < 0)
		return 0;
	w->counters.ents[idx].aux = uuid;
	return uuid;
}

int perfetto_writer_counter(struct perfetto_writer *w, uint64_t proc, const char *name, uint64_t ts,
			    int64_t value)
{
	uint64_t uuid;
	size_t mark, ev;

	if (!name)
		return -EINVAL;
	pw_chunk_check(w);
	uuid = pw_counter_uuid(w, proc, name);
	if (!uuid)
		return -ENOMEM;
	mark = pw_packet_begin(w, PW_SEQ_TRACK, ts, true);
	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_COUNTER);
	pwb_uint(&w->pkt, 11, uuid);
	pwb_uint(&w->pkt, 30, (uint64_t)value); /* counter_value, int64 */
	pwb_close(&w->pkt, ev);
	return pw_packet_end(w, mark);
}

/* ---- flight recorder ------------------------------------------------------- */

/* Appends the packet built in w->pkt (from mark) to w->side. */
static void pw_side_take(struct perfetto_writer *w, size_t mark)
{
	pwb_close(&w->pkt, mark);
	if (w->pkt.oom || (w->side.cap - w->side.len < w->pkt.len &&
			   !pwb_grow(&w->side, w->pkt.len))) {
		w->side.oom = true;
		return;
	}
	memcpy(w->side.p + w->side.len, w->pkt.p, w->pkt.len);
	w->side.len += w->pkt.len;
}

/* A BEGIN at the sequence clock's time (delta 0) that defines its name. */
static size_t pw_build_open_begin(struct perfetto_writer *w, const struct pw_thread *t,
				  uint32_t iid)
{
	size_t mark = pw_packet_open(w);

	pwb_uint(&w->pkt, PW_F_TIMESTAMP, 0);
	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	pw_put_begin_defining(w, iid);
	return mark;
}

/*
 * The prologue of a chunk: on each thread with open slices, a fresh sequence
 * whose clock starts at the chunk's start, the latest time written on any
 * thread, and BEGINs of those slices there: they began earlier (their true
 * start may be gone with older chunks), so the window shows them from its
 * start. The thread's later events are kept from going before it (an event
 * still in flight from the agent moves up to it; a thread's events are
 * otherwise in time order already).
 */
static void pw_build_prologue(struct perfetto_writer *w)
{
	uint64_t start = 0;
	uint32_t i;

	for (i = 0; i < w->threads.n; i++) {
		const struct pw_thread *t = pw_table_at(&w->threads, i);

		if (t->seq_ts > start)
			start = t->seq_ts;
	}
	w->side.len = 0;
	w->side.oom = false;
	/*
	 * The window's first clock snapshot when this chunk is the oldest: the
	 * header has none, since one taken when the window is written is newer
	 * than every chunk's and the importer then sees the trace clock go back
	 * at each of them (invalid_clock_snapshots, one per chunk).
	 */
	pw_side_take(w, pw_build_clock_snapshot(w, true));
	for (i = 0; i < w->threads.n; i++) {
		struct pw_thread *t = pw_table_at(&w->threads, i);

		if (!t->depth || !t->open)
			continue; /* (a thread silent for a whole chunk keeps its calls open too) */
		t->floor = start;
		pw_side_take(w, pw_build_seq_clear(w, t));
		pw_side_take(w, pw_build_seq_clock(w, t, start));
		for (uint32_t d = 0; d < t->depth; d++)
			pw_side_take(w, pw_build_open_begin(w, t, t->open[d]));
	}
}

void pw_chunk_start(struct perfetto_writer *w)
{
	w->chunk_due = false;
	pw_handover(w); /* the packets of the chunk that ends */
	w->chunk_due = false;
	pw_build_prologue(w);
	if (w->side.oom || trace_sink_chunk_begin(w->sink, w->side.p, w->side.len) < 0)
		return; /* no new chunk: the current one grows; tried again at the next block */
	for (uint32_t i = 0; i < w->threads.n; i++) {
		struct pw_thread *t = pw_table_at(&w->threads, i);

		t->seq_started = false;
		if (t->defined)
			memset(t->defined, 0, t->defined_bytes);
		if (t->arg_names_defined)
			memset(t->arg_names_defined, 0, t->arg_names_defined_bytes);
	}
	w->seq_started[PW_SEQ_TRACK] = false;
	pw_symbols_restart(w);
	perfetto_writer_clock_snapshot(w);
}

/* Every track's descriptor, after a clock snapshot: what a window needs first. */
/*
 * The closing packet, built in w->pkt: TracePacket.trace_attributes {
 * PERFETTO_TRACE_END_KEY: packets before it (0: not counted) }. Written last
 * and only when everything before it was: a reader that does not find it
 * knows the trace was cut (a full disk, a file-size limit, profd ended
 * before finishing). The importer keeps it as a metadata row; nothing else.
 */
static void pw_build_closing(struct perfetto_writer *w, uint64_t packets_before)
{
	size_t mark = pw_packet_open(w), attrs, attr;

	attrs = pwb_open(&w->pkt, PW_F_TRACE_ATTRIBUTES);
	attr = pwb_open(&w->pkt, 1); /* TraceAttributes.attribute */
	pwb_str(&w->pkt, 1, PERFETTO_TRACE_END_KEY);
	pwb_uint(&w->pkt, 2, packets_before); /* long_value */
	pwb_close(&w->pkt, attr);
	pwb_close(&w->pkt, attrs);
	pwb_close(&w->pkt, mark);
}

/*
 * A header packet about p (NULL: none): on sequence 1, not clearing it; a
 * reused pid's processes at their times in BOOTTIME, as in the stream
 * (pw_proc_packet_begin), so the window's importer tells them apart too.
 */
static size_t pw_header_packet(struct perfetto_writer *w, const struct pw_proc *p)
{
	size_t mark = pw_packet_open(w);
	uint64_t ts;

	if (p && pw_proc_when(p, &ts)) {
		pwb_uint(&w->pkt, PW_F_TIMESTAMP, ts);
		pwb_uint(&w->pkt, PW_F_CLOCK_ID, PW_CLOCK_BOOTTIME);
	}
	pwb_uint(&w->pkt, PW_F_SEQ_ID, PW_SEQ_TRACK);
	return mark;
}

static int pw_build_header(struct perfetto_writer *w)
{
	uint32_t i;
	size_t mark;

	w->side.len = 0;
	w->side.oom = false;
	/* no clock snapshot: the oldest chunk starts with its own (pw_build_prologue) */
	if (w->sched)
		pw_side_take(w, pw_sched_system_info(w));
	for (i = 0; i < w->procs.n; i++) {
		const struct pw_proc *p = pw_table_at(&w->procs, i);

		mark = pw_header_packet(w, p);
		pw_put_process(&w->pkt, p);
		pw_side_take(w, mark);
		if (p->ppid && p->cmdline) {
			mark = pw_header_packet(w, p);
			pw_put_process_tree(&w->pkt, p);
			pw_side_take(w, mark);
		}
		if (!p->totals_uuid)
			continue;
		mark = pw_packet_open(w);
		pwb_uint(&w->pkt, PW_F_SEQ_ID, PW_SEQ_TRACK);
		pw_put_named_track(&w->pkt, p->totals_uuid, p->uuid, PERFETTO_FUNC_TOTALS_TRACK, false);
		pw_side_take(w, mark);
	}
	for (i = 0; i < w->threads.n; i++) {
		const struct pw_thread *t = pw_table_at(&w->threads, i);

		mark = pw_header_packet(w, pw_table_find(&w->procs, &t->key.proc));
		pw_put_thread(&w->pkt, t);
		pw_side_take(w, mark);
	}
	for (i = 0; i < w->counters.n; i++) {
		const struct pw_str *c = &w->counters.ents[i];
		const uint8_t *key = pw_strtab_data(&w->counters, i);
		const struct pw_proc *p;
		uint64_t pid;

		memcpy(&pid, key, sizeof(pid));
		p = pw_table_find(&w->procs, &pid);
		if (!c->aux || !p)
			continue;
		mark = pw_packet_open(w);
		pwb_uint(&w->pkt, PW_F_SEQ_ID, PW_SEQ_TRACK);
		pw_put_named_track(&w->pkt, c->aux, p->uuid, (const char *)key + sizeof(pid), true);
		pw_side_take(w, mark);
	}
	return w->side.oom ? -ENOMEM : 0;
}

int64_t perfetto_writer_snapshot(struct perfetto_writer *w, int fd)
{
	int err;

	if (!w->ring)
		return -EINVAL;
	pw_handover(w); /* what compression finishes by now goes in; nothing waits */
	trace_sink_poll(w->sink);
	err = pw_build_header(w);
	if (err)
		return err;
	pw_build_closing(w, 0); /* in w->pkt: a window's packet count is not known here */
	if (w->pkt.oom)
		return -ENOMEM;
	return trace_sink_write_ring(w->sink, fd, w->side.p, w->side.len, w->pkt.p, w->pkt.len);
}

bool perfetto_writer_is_ring(const struct perfetto_writer *w)
{
	return w->ring;
}

/* ---- lifetime ------------------------------------------------------------ */

struct perfetto_writer *perfetto_writer_new_opts(int fd, const struct perfetto_writer_options *o)
{
	struct perfetto_writer *w;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		goto err;
	w->sink = trace_sink_new(fd, o->compression, o->ring_bytes);
	if (!w->sink) {
		free(w);
		return NULL; /* errno from trace_sink_new */
	}
	w->buf = malloc(PW_BUF_SIZE);
	if (!w->buf)
		goto err_free_sink;
	w->fd = fd;
	w->ring = o->ring_bytes != 0;
	w->compressed = o->compression != PERFETTO_COMPRESSION_NONE;
	w->handed_ns = pw_now_ns();
	w->next_uuid = 1;
	w->next_thread_seq = PW_NSEQ;
	pw_table_init(&w->procs, sizeof(struct pw_proc), sizeof(uint64_t));
	pw_table_init(&w->threads, sizeof(struct pw_thread), sizeof(struct pw_thread_key));
	pw_table_init(&w->funcs, sizeof(struct pw_func), sizeof(uint32_t));
	pw_symbols_init(&w->sym);
	return w;

err_free_sink:
	trace_sink_free(w->sink);
	free(w);
err:
	errno = ENOMEM;
	return NULL;
}

struct perfetto_writer *perfetto_writer_new(int fd)
{
	static const struct perfetto_writer_options plain = { 0 };

	return perfetto_writer_new_opts(fd, &plain);
}

void perfetto_writer_get_stats(const struct perfetto_writer *w, struct perfetto_writer_stats *st)
{
	struct trace_sink_stats ss;

	trace_sink_get_stats(w->sink, &ss);
	*st = w->st;
	st->bytes = ss.bytes_written + w->st.bytes; /* ring: the window written at the end */
	st->raw_bytes = ss.raw_bytes;
	st->ring_bytes = ss.ring_bytes_held;
	st->write_error = w->write_error;
	st->cut_ns = ss.cut_ns;
}

static void pw_free_threads(struct pw_table *t)
{
	for (uint32_t i = 0; i < t->n; i++) {
		struct pw_thread *th = pw_table_at(t, i);

		free(th->name);
		free(th->defined);
		free(th->arg_names_defined);
		free(th->open);
	}
	pw_table_free(t);
}

static void pw_free_names(struct pw_table *t, size_t name_off)
{
	uint32_t i;

	for (i = 0; i < t->n; i++) {
		char *name;

		memcpy(&name, (uint8_t *)pw_table_at(t, i) + name_off, sizeof(name));
		free(name);
	}
	pw_table_free(t);
}

/* Ring: the window goes to fd, after its header, and its closing packet after it. */
static int pw_write_window(struct perfetto_writer *w)
{
	int64_t r = perfetto_writer_snapshot(w, w->fd);

	if (r < 0)
		return (int)r;
	w->st.bytes = (uint64_t)r;
	return 0;
}

int perfetto_writer_finish(struct perfetto_writer *w)
{
	int ret;

	if (w->finished)
		return w->write_error ? -w->write_error : 0;
	if (!w->ring && !w->write_error) {
		uint64_t before = w->st.packets;

		pw_build_closing(w, before);
		if (!w->pkt.oom)
			pw_append(w, w->pkt.p, w->pkt.len);
		w->st.packets = before; /* the closing packet is not one of the trace's */
	}
	ret = perfetto_writer_flush(w);
	if (!ret && w->ring)
		ret = pw_write_window(w);
	w->finished = true; /* from now on packets are counted, not written */
	return ret;
}

int perfetto_writer_free(struct perfetto_writer *w)
{
	int ret;

	if (!w)
		return 0;
	ret = perfetto_writer_finish(w);
	if (trace_sink_free(w->sink) < 0 && !ret)
		ret = -trace_sink_write_error(w->sink);
	for (uint32_t i = 0; i < w->procs.n; i++)
		free(((struct pw_proc *)pw_table_at(&w->procs, i))->cmdline);
	pw_free_names(&w->procs, offsetof(struct pw_proc, name));
	pw_free_threads(&w->threads);
	pw_free_names(&w->funcs, offsetof(struct pw_func, name));
	pw_strtab_free(&w->counters);
	pw_strtab_free(&w->event_names);
	pw_strtab_free(&w->arg_names);
	free(w->arg_iids);
	free(w->func_iid_cache);
	pw_symbols_free(&w->sym);
	pw_sched_free(w);
	pwb_free(&w->pkt);
	pwb_free(&w->side);
	free(w->buf);
	free(w);
	return ret;
}
