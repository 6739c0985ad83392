/* SPDX-License-Identifier: MIT */
/*
 * Streaming Perfetto trace reader: reads a trace (the subset profd writes) in
 * fixed-size windows, applies the importer's rules (sequences, CLEARED,
 * per-sequence interning, incremental clocks, BEGIN/END matching per track)
 * and hands each completed item to a callback: a process or thread when a
 * descriptor names it, a slice when its END arrives (or at the end, still
 * open), a sample, a counter value, a function-totals event, a problem.
 * Memory follows what is live (open slices and a reorder window per track,
 * interned tables per sequence, distinct names and stacks), never the number
 * of events. trace_model_load (trace_reader.h) and `profctl report` are built
 * on it; so are exports that must not hold the trace.
 */
#ifndef PROFD_TRACE_STREAM_H
#define PROFD_TRACE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewer-export/trace_reader.h"

struct trace_stream;

/* profd's arguments on a slice's END, as trace processor adds them to its args; -1: absent. */
struct trace_slice_args {
	int64_t self_samples; /* samples while it was the innermost call */
	/* scheduler states, on slices whose thread was switched out during them */
	int64_t on_cpu_ns, off_cpu_ns, runnable_ns;
	/*
	 * --args/--retval values (arg1..., fparg1..., retval) of its BEGIN and
	 * END, NULL when none: items separated by TRACE_VALUE_SEP, each a type
	 * ('s' string, 'n' number: decimal, 0x-hex pointer or %g double), the
	 * name, TRACE_VALUE_EQ, the value as text (strings raw). Walk it with
	 * trace_values_next().
	 */
	const char *values;
};
#define TRACE_SLICE_ARGS_NONE ((struct trace_slice_args){ -1, -1, -1, -1, NULL })
#define TRACE_VALUE_SEP '\x1e'
#define TRACE_VALUE_EQ '\x1f'

struct trace_value {
	char type;                /* 's' or 'n' */
	const char *name, *value; /* not NUL-terminated: name_len, value_len */
	size_t name_len, value_len;
};

/* The next value of a slice's values text from *p (moved on); false at the end. */
static inline bool trace_values_next(const char **p, struct trace_value *v)
{
	const char *s = *p, *eq, *end;

	if (!s || !*s)
		return false;
	end = s;
	while (*end && *end != TRACE_VALUE_SEP)
		end++;
	for (eq = s + 1; eq < end && *eq != TRACE_VALUE_EQ; eq++)
		;
	v->type = s[0];
	v->name = s + 1;
	v->name_len = (size_t)(eq - s - 1);
	v->value = eq < end ? eq + 1 : end;
	v->value_len = (size_t)(end - v->value);
	*p = *end ? end + 1 : end;
	return true;
}

struct trace_stream_slice {
	uint64_t id;          /* slices are numbered from 0 in the order they open */
	int64_t parent;       /* id of the enclosing slice, -1 at depth 0 */
	uint64_t track_uuid;
	int32_t pid, tid;     /* tid 0 off thread tracks, pid 0 on global tracks */
	uint32_t generation;  /* of its process (trace_reader.h) */
	uint64_t ts;          /* trace clock (CLOCK_MONOTONIC ns for profd) */
	int64_t dur;          /* -1: still open at the end of the trace */
	uint32_t depth;
	const char *name;     /* NULL: the event had no usable name */
	int64_t self_samples; /* the END's "self_samples" argument (profd), -1 if none */
	struct trace_slice_args args; /* all of the END's profd arguments */
	size_t order;         /* packet index of its BEGIN: (ts, order) sorts as the importer does */
};

enum trace_stream_where {
	TRACE_STREAM_NOT_ATTRIBUTED, /* attribution off, or no thread track to look at */
	TRACE_STREAM_OUTSIDE,        /* no slice open on its thread then */
	TRACE_STREAM_IN_SLICE,       /* slice_id / slice_name say which */
	TRACE_STREAM_TOO_LATE,       /* behind the thread's history: cannot tell */
};

struct trace_stream_sample {
	struct trace_sample s; /* frames shared by samples of one callstack */
	size_t order;          /* packet index */
	/*
	 * With opts.attribute_samples: the innermost slice open on the sample's
	 * thread track at its ts (the importer's view: a slice that begins or
	 * ends at exactly ts counts as open).
	 */
	enum trace_stream_where where;
	int64_t slice_id;
	const char *slice_name;
};

/*
 * A scheduler event (ftrace events in FtraceEventBundles), in the importer's
 * terms. Delivered in (ts, file order) within opts.sched_reorder_ns.
 */
enum trace_sched_kind {
	TRACE_SCHED_SWITCH = 1, /* prev stops, tid starts running on cpu */
	TRACE_SCHED_WAKING,     /* common_pid (the waker) makes tid runnable */
	TRACE_SCHED_NEW_TASK,   /* common_pid (the parent) started tid, runnable */
	TRACE_SCHED_FREE,       /* tid is gone: a later tid of that number is another task */
};
struct trace_sched_event {
	enum trace_sched_kind kind;
	uint64_t ts;            /* trace clock: ftrace's BOOTTIME placed by the clock snapshot */
	uint32_t cpu;
	int32_t common_pid;     /* the task running on cpu when it happened */
	int32_t prev_tid, prev_prio; /* SWITCH */
	const char *prev_comm;
	int64_t prev_state;     /* the kernel's encoding (0 R, 1 S, 2 D, ..., 0x100 R+) */
	int32_t tid, prio;      /* SWITCH: next; else the task woken, started or freed */
	const char *comm;
	int32_t target_cpu;     /* WAKING */
	uint64_t clone_flags;   /* NEW_TASK */
	bool lost_before;       /* its bundle says the CPU lost events before it */
	size_t order;           /* packet index */
};

/*
 * Callbacks, each optional. Pointers they get (names, frames) stay valid
 * until trace_stream_free. A non-zero return stops the read, which returns
 * it. Called on the reading thread, never concurrently.
 */
struct trace_stream_ops {
	/*
	 * a process descriptor: first sight (is_new) or a later one; name NULL:
	 * none given. index counts processes from 0, a reused pid's again
	 * (generation, trace_reader.h).
	 */
	int (*process)(void *ctx, size_t index, int32_t pid, uint32_t generation, const char *name,
		       bool is_new);
	/* one of a process descriptor's labels (profd: its pid in its own PID namespace) */
	int (*process_label)(void *ctx, size_t index, int32_t pid, uint32_t generation,
			     const char *label);
	/* a thread descriptor, as process; index counts threads from 0 in file order */
	int (*thread)(void *ctx, size_t index, const struct trace_thread *t, bool is_new);
	int (*slice)(void *ctx, const struct trace_stream_slice *s);
	int (*sample)(void *ctx, const struct trace_stream_sample *s);
	int (*counter)(void *ctx, const struct trace_counter_value *v, size_t order);
	int (*func_total)(void *ctx, const struct trace_func_total *t);
	int (*sched)(void *ctx, const struct trace_sched_event *e);
	/* one line per violation of an importer rule or damage to the file */
	int (*problem)(void *ctx, const char *line);
};

struct trace_stream_opts {
	/* bytes read from the file at a time; 0: 1 MiB. A larger packet grows it to fit. */
	size_t window;
	/*
	 * Slice events held per track to put them in (ts, file order) before
	 * matching, as the importer's sorter does. 0: hold every event until the
	 * end (exact for any order; memory grows with the trace). An event that
	 * arrives after later ones of its track left the window is matched late
	 * and reported as a problem.
	 */
	size_t reorder;
	/* tell each sample the innermost slice open on its thread (see above) */
	bool attribute_samples;
	/* per thread track: timestamps kept for samples that come after their slices; 0: 4096 */
	size_t history;
	/*
	 * Scheduler events are held this long (trace ns) to deliver them in
	 * time order across CPUs: a writer flushes each CPU's bundle apart. 0: 2 s.
	 */
	uint64_t sched_reorder_ns;
	/* tests: decode every packet with protobuf-c, none by the hot-packet decoder */
	bool no_fast_decode;
};

struct trace_stream_stats {
	size_t n_packets;          /* decoded TracePackets */
	uint64_t samples_lost;     /* sum of kernel_records_lost */
	uint64_t samples_skipped;  /* not unwound: PERFETTO_NOT_UNWOUND samples, or skip records (older) */
	uint64_t sample_freq;      /* Hz of the perf timebase, 0: none */
	bool has_clock_snapshot;
	size_t first_clock_snapshot; /* packet index of the first one */
	uint64_t problems;         /* problem lines reported */
	uint64_t late_events;      /* slice events that arrived behind the reorder window */
	uint64_t samples_late;     /* samples placed from a thread's history */
	uint64_t samples_too_late; /* ... or not: older than it */
	size_t window_peak;        /* largest read window held (bytes) */
	size_t events_held_peak;   /* most slice events held at once, all tracks */
	size_t samples_held_peak;  /* most samples waiting for their thread's slices */
	uint64_t sched_events;     /* scheduler events delivered */
	uint64_t sched_late;       /* ... of them behind the reorder window (out of order) */
	bool sched_lost;           /* a bundle said events were lost */
	const char *kernel_release; /* SystemInfo's utsname.release, NULL: none */
	/*
	 * profd's closing packet (PERFETTO_TRACE_END_KEY) was read: the trace is
	 * whole. False: cut short (a full disk, a file-size limit, profd ended
	 * before finishing), or not written by profd; what it holds is read.
	 */
	bool ended;
	uint64_t bytes;            /* read from the file or buffer */
};

/*
 * A reader delivering to ops (ctx passed back). opts NULL: defaults. NULL
 * with errno = ENOMEM. Reads one trace, then only its stats and strings stay.
 */
struct trace_stream *trace_stream_new(const struct trace_stream_ops *ops, void *ctx,
				      const struct trace_stream_opts *opts);
/*
 * Reads the file at path (never whole: window by window) or a buffer to the
 * end. A damaged trace is not an error: what can be read is delivered and
 * each damage is a problem. Returns 0, a negative errno (open/read errors,
 * -ENOMEM, -EINVAL when the reader was used already), or a callback's
 * non-zero return.
 */
int trace_stream_read_file(struct trace_stream *ts, const char *path);
int trace_stream_read_buffer(struct trace_stream *ts, const uint8_t *buf, size_t len);
const struct trace_stream_stats *trace_stream_get_stats(const struct trace_stream *ts);

/* The one line that says a trace without its closing packet was cut (st->ended false); returns buf. */
#define TRACE_STREAM_CUT_LINE 200
const char *trace_stream_cut_line(const struct trace_stream_stats *st, char *buf, size_t len);
/* The threads described so far, in file order, each with its latest name. */
const struct trace_thread *trace_stream_threads(const struct trace_stream *ts, size_t *n);
void trace_stream_free(struct trace_stream *ts);

#endif
