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

struct pw_proc {
	int32_t pid; /* key */
	bool described;
	uint64_t uuid;
	uint64_t totals_uuid; /* its PERFETTO_FUNC_TOTALS_TRACK, 0 until used */
	char *name;
};

struct pw_thread_key {
	int32_t pid, tid;
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
};

struct pw_func {
	uint32_t func_id; /* key */
	uint32_t name_iid; /* event-name iid whose definition is written, 0 = not yet */
	char *name;
};

/* A slice packet: 0A len 40 delta 50 seq 5A len {48 type [50 iid]}. */
#define PW_SLICE_MAX (2 + 1 + 10 + 1 + 5 + 2 + 2 + 11)
_Static_assert(PW_SLICE_MAX - 2 < 128, "slice packets use a one-byte length");

/* ---- output ------------------------------------------------------------- */

/* Bytes of p[0..done) that form whole TracePacket records (tag 0x0A, varint length, body). */
static size_t pw_whole_packets(const uint8_t *p, size_t n, size_t done)
{
	size_t off = 0;

	while (off < n) {
		uint64_t len = 0;
		size_t i = off + 1;
		unsigned shift = 0;

		while (i < n && shift < 64) {
			len |= (uint64_t)(p[i] & 0x7f) << shift;
			shift += 7;
			if (!(p[i++] & 0x80))
				break;
		}
		if (len > n - i || i + len > done)
			break;
		off = i + len;
	}
	return off;
}

/*
 * A write failed after `done` of n bytes: the file ends inside a packet,
 * which no reader could load past. Cut it back to the last whole packet
 * (a pipe cannot be cut: its reader sees the end of the stream there).
 */
static void pw_cut_partial_packet(struct perfetto_writer *w, const uint8_t *p, size_t n,
				  size_t done)
{
	size_t extra = done - pw_whole_packets(p, n, done);
	off_t end;

	if (!extra)
		return;
	end = lseek(w->fd, 0, SEEK_CUR);
	if (end < (off_t)extra || ftruncate(w->fd, end - (off_t)extra) ||
	    lseek(w->fd, end - (off_t)extra, SEEK_SET) < 0)
		return;
	w->st.bytes -= extra;
}

/* p holds whole packets only. */
static int pw_write_all(struct perfetto_writer *w, const uint8_t *p, size_t n)
{
	size_t done = 0;

	while (done < n && !w->write_error) {
		ssize_t r = write(w->fd, p + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->write_error = r < 0 ? errno : EIO;
			pw_cut_partial_packet(w, p, n, done);
			break;
		}
		done += (size_t)r;
		w->st.bytes += (uint64_t)r;
	}
	return w->write_error ? -w->write_error : 0;
}

int perfetto_writer_flush(struct perfetto_writer *w)
{
	int ret = 0;

	if (w->buf_len && !w->write_error)
		ret = pw_write_all(w, w->buf, w->buf_len);
	w->buf_len = 0; /* after a write error packets are counted, not kept */
	return ret ? ret : (w->write_error ? -w->write_error : 0);
}

/* Queues one whole packet record; a record larger than the buffer goes out alone. */
static void pw_append(struct perfetto_writer *w, const uint8_t *p, size_t n)
{
	w->st.packets++;
	if (PW_BUF_SIZE - w->buf_len < n)
		perfetto_writer_flush(w);
	if (n > PW_BUF_SIZE) {
		if (!w->write_error)
			pw_write_all(w, p, n);
		return;
	}
	if (!w->write_error) {
		memcpy(w->buf + w->buf_len, p, n);
		w->buf_len += n;
	}
}

/* ---- packets built in the scratch buffer ---------------------------------- */

static size_t pw_packet_open(struct perfetto_writer *w)
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

int perfetto_writer_clock_snapshot(struct perfetto_writer *w)
{
	struct timespec boot, mono, real;
	size_t mark, cs;
	int ret;

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
	if (!w->snapshot_written)
		pwb_uint(&w->pkt, 2, PW_CLOCK_BOOTTIME); /* primary_trace_clock */
	pwb_close(&w->pkt, cs);
	ret = pw_packet_end(w, mark);
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

static int pw_describe_process(struct perfetto_writer *w, struct pw_proc *p)
{
	size_t mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false), d, pd;
	int ret;

	d = pwb_open(&w->pkt, PW_F_TRACK_DESCRIPTOR);
	pwb_uint(&w->pkt, 1, p->uuid);
	pd = pwb_open(&w->pkt, 3); /* process */
	pwb_uint(&w->pkt, 1, (uint64_t)(int64_t)p->pid);
	if (p->name)
		pwb_str(&w->pkt, 6, p->name); /* process_name */
	pwb_close(&w->pkt, pd);
	pwb_close(&w->pkt, d);
	ret = pw_packet_end(w, mark);
	p->described = !ret;
	return ret;
}

/* The process's entry (uuid assigned on first use); NULL with errno on ENOMEM. */
static struct pw_proc *pw_proc_get(struct perfetto_writer *w, pid_t pid)
{
	int32_t key = pid;
	struct pw_proc *p;
	bool is_new;

	p = pw_table_get(&w->procs, &key, &is_new);
	if (p && is_new)
		p->uuid = w->next_uuid++;
	return p;
}

static struct pw_proc *pw_proc_use(struct perfetto_writer *w, pid_t pid)
{
	struct pw_proc *p = pw_proc_get(w, pid);

	if (p && !p->described)
		pw_describe_process(w, p); /* retried on next use if it failed */
	return p;
}

int perfetto_writer_process(struct perfetto_writer *w, pid_t pid, const char *name)
{
	struct pw_proc *p = pw_proc_get(w, pid);
	int err = 0;

	if (!p)
		return -ENOMEM;
	if (pw_rename(&p->name, name, &err))
		p->described = false; /* same uuid, new name: the importer renames */
	if (err)
		return err;
	return p->described ? 0 : pw_describe_process(w, p);
}

static int pw_describe_thread(struct perfetto_writer *w, struct pw_thread *t)
{
	size_t mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false), d, td;
	int ret;

	d = pwb_open(&w->pkt, PW_F_TRACK_DESCRIPTOR);
	pwb_uint(&w->pkt, 1, t->uuid);
	td = pwb_open(&w->pkt, 4); /* thread */
	pwb_uint(&w->pkt, 1, (uint64_t)(int64_t)t->key.pid);
	pwb_uint(&w->pkt, 2, (uint64_t)(int64_t)t->key.tid);
	if (t->name)
		pwb_str(&w->pkt, 5, t->name); /* thread_name */
	pwb_close(&w->pkt, td);
	pwb_close(&w->pkt, d);
	ret = pw_packet_end(w, mark);
	t->described = !ret;
	return ret;
}

/*
 * The thread's entry; on first use its process track is described first and
 * the thread gets the next uuid. NULL with errno on ENOMEM.
 */
static struct pw_thread *pw_thread_get(struct perfetto_writer *w, pid_t pid, pid_t tid)
{
	struct pw_thread_key key = { pid, tid };
	struct pw_thread *t;
	bool is_new;

	t = pw_table_get(&w->threads, &key, &is_new);
	if (t && is_new) {
		pw_proc_use(w, pid); /* different table: t stays valid */
		t->uuid = w->next_uuid++;
		t->seq = w->next_thread_seq++;
	}
	return t;
}

/* Hot: the thread an event is on, described; remembers the last one. */
static struct pw_thread *pw_thread_use(struct perfetto_writer *w, pid_t pid, pid_t tid)
{
	struct pw_thread *t;

	if (w->last_thread) {
		t = pw_table_at(&w->threads, w->last_thread - 1);
		if (t->key.pid == pid && t->key.tid == tid && t->described)
			return t;
	}
	t = pw_thread_get(w, pid, tid);
	if (!t || (!t->described && pw_describe_thread(w, t) < 0))
		return NULL;
	w->last_thread = pw_table_index(&w->threads, t) + 1;
	return t;
}

int perfetto_writer_thread(struct perfetto_writer *w, pid_t pid, pid_t tid, const char *name)
{
	struct pw_thread *t = pw_thread_get(w, pid, tid);
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
 * Its first packets, before its first event: CLEARED with the defaults (its
 * track, the incremental clock), then a snapshot that starts that clock at ts
 * in CLOCK_MONOTONIC (perfetto-format.md §3.4.4).
 */
static int pw_thread_seq_start(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts)
{
	size_t mark, d, ted, cs, c;

	if (!w->snapshot_written)
		perfetto_writer_clock_snapshot(w);
	mark = pw_packet_open(w);
	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	pwb_uint(&w->pkt, PW_F_SEQ_FLAGS, PW_SEQ_INCREMENTAL_STATE_CLEARED);
	d = pwb_open(&w->pkt, PW_F_DEFAULTS);
	pwb_uint(&w->pkt, PW_F_CLOCK_ID, PW_CLOCK_INCREMENTAL);
	ted = pwb_open(&w->pkt, 11); /* track_event_defaults */
	pwb_uint(&w->pkt, 11, t->uuid); /* track_uuid */
	pwb_close(&w->pkt, ted);
	pwb_close(&w->pkt, d);
	if (pw_packet_end(w, mark) < 0)
		return -ENOMEM;
	mark = pw_packet_open(w);
	pwb_uint(&w->pkt, PW_F_SEQ_ID, t->seq);
	cs = pwb_open(&w->pkt, PW_F_CLOCK_SNAPSHOT);
	pw_clock(&w->pkt, PW_CLOCK_MONOTONIC, ts);
	c = pwb_open(&w->pkt, 1); /* clocks */
	pwb_uint(&w->pkt, 1, PW_CLOCK_INCREMENTAL);
	pwb_uint(&w->pkt, 2, ts);
	pwb_uint(&w->pkt, 3, 1); /* is_incremental */
	pwb_close(&w->pkt, c);
	pwb_close(&w->pkt, cs);
	if (pw_packet_end(w, mark) < 0)
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

static bool pw_thread_defined(const struct pw_thread *t, uint64_t iid)
{
	return iid / 8 < t->defined_bytes && (t->defined[iid / 8] >> (iid % 8) & 1);
}

static int pw_thread_define(struct pw_thread *t, uint64_t iid)
{
	if (iid / 8 >= t->defined_bytes) {
		size_t n = iid / 8 * 2 + 16;
		uint8_t *grown = realloc(t->defined, n);

		if (!grown)
			return -ENOMEM;
		memset(grown + t->defined_bytes, 0, n - t->defined_bytes);
		t->defined = grown;
		t->defined_bytes = n;
	}
	t->defined[iid / 8] |= (uint8_t)(1u << (iid % 8));
	return 0;
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
		perfetto_writer_flush(w);
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
	if (!w->write_error) /* else counted, not kept */
		w->buf_len = (size_t)(p - w->buf);
}

/* Cold: a BEGIN that also defines its event name (its first use on t's sequence). */
static int pw_emit_begin_defining(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
				  uint64_t iid)
{
	size_t mark = pw_thread_packet_begin(w, t, ts), ev, in, en;

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
	if (pw_packet_end(w, mark) < 0)
		return -ENOMEM;
	return pw_thread_define(t, iid);
}

int perfetto_writer_slice_begin(struct perfetto_writer *w, pid_t pid, pid_t tid, uint64_t ts,
				uint32_t func_id)
{
	struct pw_thread *t = pw_thread_use(w, pid, tid);
	int64_t iid;

	if (!t)
		return -ENOMEM;
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
	if (pw_thread_defined(t, (uint64_t)iid))
		pw_emit_slice(w, t, ts, PW_TYPE_SLICE_BEGIN, (uint64_t)iid);
	else if (pw_emit_begin_defining(w, t, ts, (uint64_t)iid) < 0)
		return -ENOMEM;
	t->depth++;
	return 0;
}

/* An END carrying one unsigned debug annotation: trace processor adds it to the slice's args. */
static int pw_emit_end_with_arg(struct perfetto_writer *w, struct pw_thread *t, uint64_t ts,
				const char *arg_name, uint64_t value)
{
	size_t mark = pw_thread_packet_begin(w, t, ts), ev, da;

	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_SLICE_END);
	da = pwb_open(&w->pkt, 4); /* debug_annotations */
	pwb_str(&w->pkt, 10, arg_name);
	pwb_uint(&w->pkt, 3, value); /* uint_value */
	pwb_close(&w->pkt, da);
	pwb_close(&w->pkt, ev);
	return pw_packet_end(w, mark);
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

int perfetto_writer_slice_end(struct perfetto_writer *w, pid_t pid, pid_t tid, uint64_t ts)
{
	struct pw_thread *t = pw_thread_use(w, pid, tid);

	if (!t)
		return -ENOMEM;
	if (pw_slice_end_due(w, t))
		pw_emit_slice(w, t, ts, PW_TYPE_SLICE_END, 0);
	return 0;
}

int perfetto_writer_slice_end_arg(struct perfetto_writer *w, pid_t pid, pid_t tid, uint64_t ts,
				  const char *arg_name, uint64_t value)
{
	struct pw_thread *t = pw_thread_use(w, pid, tid);

	if (!t)
		return -ENOMEM;
	if (!pw_slice_end_due(w, t))
		return 0;
	return pw_emit_end_with_arg(w, t, ts, arg_name, value);
}

/* ---- function totals ------------------------------------------------------- */

/* The totals track of pid, described before its first event; 0 on ENOMEM. */
static uint64_t pw_totals_uuid(struct perfetto_writer *w, pid_t pid)
{
	struct pw_proc *p = pw_proc_use(w, pid);
	size_t mark, d;

	if (!p)
		return 0;
	if (p->totals_uuid)
		return p->totals_uuid;
	mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false);
	d = pwb_open(&w->pkt, PW_F_TRACK_DESCRIPTOR);
	pwb_uint(&w->pkt, 1, w->next_uuid);
	pwb_uint(&w->pkt, 5, p->uuid); /* parent_uuid */
	pwb_str(&w->pkt, 2, PERFETTO_FUNC_TOTALS_TRACK);
	pwb_close(&w->pkt, d);
	if (pw_packet_end(w, mark) < 0)
		return 0;
	p->totals_uuid = w->next_uuid++;
	return p->totals_uuid;
}

static void pw_uint_arg(struct pwb *b, const char *name, uint64_t value)
{
	size_t da = pwb_open(b, 4); /* debug_annotations */

	pwb_str(b, 10, name);
	pwb_uint(b, 3, value); /* uint_value */
	pwb_close(b, da);
}

int perfetto_writer_func_totals(struct perfetto_writer *w, pid_t pid, uint64_t ts,
				const struct perfetto_func_totals *t)
{
	uint64_t uuid = pw_totals_uuid(w, pid);
	size_t mark, ev;

	if (!uuid)
		return -ENOMEM;
	mark = pw_packet_begin(w, PW_SEQ_TRACK, ts, true);
	ev = pwb_open(&w->pkt, PW_F_TRACK_EVENT);
	pwb_uint(&w->pkt, 9, PW_TYPE_INSTANT);
	pwb_uint(&w->pkt, 11, uuid);
	pwb_str(&w->pkt, 23, t->name); /* name, not interned: one event per function */
	pw_uint_arg(&w->pkt, "tid", t->tid);
	pw_uint_arg(&w->pkt, "calls", t->calls);
	pw_uint_arg(&w->pkt, "returned", t->exited);
	pw_uint_arg(&w->pkt, "not_on_timeline", t->dropped + t->filtered);
	pw_uint_arg(&w->pkt, "filtered", t->filtered);
	pw_uint_arg(&w->pkt, "total_ns", t->total_ns);
	pw_uint_arg(&w->pkt, "self_ns", t->self_ns);
	pw_uint_arg(&w->pkt, "avg_ns", t->exited ? t->total_ns / t->exited : 0);
	pw_uint_arg(&w->pkt, "p50_ns_estimate", t->p50_ns);
	pw_uint_arg(&w->pkt, "p90_ns_estimate", t->p90_ns);
	pw_uint_arg(&w->pkt, "p99_ns_estimate", t->p99_ns);
	pw_uint_arg(&w->pkt, "max_ns", t->max_ns);
	pwb_close(&w->pkt, ev);
	return pw_packet_end(w, mark);
}

/* ---- counters ------------------------------------------------------------ */

static int pw_describe_counter(struct perfetto_writer *w, uint64_t uuid, uint64_t parent,
			       const char *name)
{
	size_t mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false), d, cd;

	d = pwb_open(&w->pkt, PW_F_TRACK_DESCRIPTOR);
	pwb_uint(&w->pkt, 1, uuid);
	pwb_uint(&w->pkt, 5, parent); /* parent_uuid */
	pwb_str(&w->pkt, 2, name);
	cd = pwb_open(&w->pkt, 8); /* counter */
	pwb_uint(&w->pkt, 3, PW_UNIT_COUNT);
	pwb_close(&w->pkt, cd);
	pwb_close(&w->pkt, d);
	return pw_packet_end(w, mark);
}

/* The counter's uuid, its descriptor written before first use; 0 on ENOMEM. */
static uint64_t pw_counter_uuid(struct perfetto_writer *w, pid_t pid, const char *name)
{
	size_t len = strlen(name);
	struct pw_proc *p;
	uint64_t uuid;
	int32_t key_pid = pid;
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
	p = pw_proc_use(w, pid);
	if (!p)
		return 0;
	uuid = w->next_uuid++;
	if (pw_describe_counter(w, uuid, p->uuid, name) < 0)
		return 0;
	w->counters.ents[idx].aux = uuid;
	return uuid;
}

int perfetto_writer_counter(struct perfetto_writer *w, pid_t pid, const char *name, uint64_t ts,
			    int64_t value)
{
	uint64_t uuid;
	size_t mark, ev;

	if (!name)
		return -EINVAL;
	uuid = pw_counter_uuid(w, pid, name);
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

/* ---- lifetime ------------------------------------------------------------ */

struct perfetto_writer *perfetto_writer_new(int fd)
{
	struct perfetto_writer *w;

	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		goto err;
	w->buf = malloc(PW_BUF_SIZE);
	if (!w->buf)
		goto err_free_writer;
	w->fd = fd;
	w->next_uuid = 1;
	w->next_thread_seq = PW_NSEQ;
	pw_table_init(&w->procs, sizeof(struct pw_proc), sizeof(int32_t));
	pw_table_init(&w->threads, sizeof(struct pw_thread), sizeof(struct pw_thread_key));
	pw_table_init(&w->funcs, sizeof(struct pw_func), sizeof(uint32_t));
	pw_symbols_init(&w->sym);
	return w;

err_free_writer:
	free(w);
err:
	errno = ENOMEM;
	return NULL;
}

void perfetto_writer_get_stats(const struct perfetto_writer *w, struct perfetto_writer_stats *st)
{
	*st = w->st;
	st->write_error = w->write_error;
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

int perfetto_writer_free(struct perfetto_writer *w)
{
	int ret;

	if (!w)
		return 0;
	perfetto_writer_flush(w);
	ret = w->write_error ? -w->write_error : 0;
	pw_free_names(&w->procs, offsetof(struct pw_proc, name));
	pw_free_names(&w->threads, offsetof(struct pw_thread, name));
	pw_free_names(&w->threads, offsetof(struct pw_thread, defined));
	pw_free_names(&w->funcs, offsetof(struct pw_func, name));
	pw_strtab_free(&w->counters);
	pw_strtab_free(&w->event_names);
	free(w->func_iid_cache);
	pw_symbols_free(&w->sym);
	pwb_free(&w->pkt);
	free(w->buf);
	free(w);
	return ret;
}
