// SPDX-License-Identifier: MIT
/*
 * The writer's scheduler events (perfetto_writer.h, "Scheduler events"):
 * ftrace sched_switch / sched_waking / task_newtask / sched_process_free
 * events, gathered per CPU and written as one FtraceEventBundle per CPU at
 * each flush, with the SystemInfo packet trace processor needs first.
 * Field numbers: protos/perfetto/trace/ftrace/{ftrace_event_bundle,
 * ftrace_event,sched,task}.proto and system_info.proto.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "viewer-export/perfetto_writer_internal.h"

enum {
	PW_F_FTRACE_EVENTS = 1,  /* TracePacket.ftrace_events */
	PW_F_SYSTEM_INFO = 45,   /* TracePacket.system_info */
	FB_CPU = 1, FB_EVENT = 2, FB_LOST_EVENTS = 3, /* FtraceEventBundle */
	FE_TIMESTAMP = 1, FE_PID = 2,                 /* FtraceEvent */
	FE_SCHED_SWITCH = 4, FE_SCHED_WAKING = 20,
	FE_SCHED_PROCESS_FREE = 240,
};
/* prev_state of a task's last switch: EXIT_DEAD, 'X' in the importer's decoding */
#define PW_SCHED_STATE_DEAD 0x10u
/* A CPU's events go out once they fill this much, or at the next flush. */
#define PW_SCHED_BUNDLE_BYTES (16u << 10)

struct pw_sched_cpu {
	struct pwb events;     /* FtraceEvent records, each as field FB_EVENT */
	bool has_last;         /* last_next names the task running since the last switch */
	int32_t last_tid, last_prio;
	uint64_t last_ts;      /* that switch's time */
	char last_comm[32];
	bool end_pending;      /* the last task ended at end_ts (pw_sched_end_task) */
	uint64_t end_ts;
};

struct pw_sched {
	struct pw_sched_cpu *cpus;
	uint32_t n_cpus;
	bool system_info_written;
	bool lost_pending;
	int64_t boot_minus_mono; /* boot_offset_refresh()ed at every flush: it grows only across suspend */
};

static int64_t clock_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * BOOTTIME - MONOTONIC, never less than the last one. BOOTTIME read first,
 * MONOTONIC after: each sample falls short of the true offset by the time
 * between the two reads (tens of ns, a time slice when the thread is
 * preempted there), so the best of three is kept. The true offset only grows
 * (across a suspend): a smaller sample is noise, and taking it would move
 * this flush's events before the last flush's (the importer then sees a
 * CPU's switches out of order: mismatched_sched_switch_tids).
 */
static int64_t boot_offset_refresh(int64_t last)
{
	int64_t best = last;

	for (int i = 0; i < 3; i++) {
		int64_t boot = clock_ns(CLOCK_BOOTTIME), sample = boot - clock_ns(CLOCK_MONOTONIC);

		if (sample > best)
			best = sample;
	}
	return best;
}

/* The writer's scheduler state, made at its first use. */
static struct pw_sched *pw_sched_state(struct perfetto_writer *w)
{
	struct pw_sched *s = w->sched;

	if (!s && (s = w->sched = calloc(1, sizeof(*s))))
		s->boot_minus_mono = boot_offset_refresh(INT64_MIN);
	return s;
}

static struct pw_sched_cpu *pw_sched_cpu(struct perfetto_writer *w, uint32_t cpu)
{
	struct pw_sched *s;

	pw_chunk_check(w);
	if (cpu >= PERFETTO_SCHED_MAX_CPUS || !(s = pw_sched_state(w)))
		return NULL;
	if (cpu >= s->n_cpus) {
		uint32_t n = cpu + 1;
		struct pw_sched_cpu *c = realloc(s->cpus, n * sizeof(*c));

		if (!c)
			return NULL;
		memset(c + s->n_cpus, 0, (n - s->n_cpus) * sizeof(*c));
		s->cpus = c;
		s->n_cpus = n;
	}
	return &s->cpus[cpu];
}

/* The SystemInfo packet: trace processor decodes prev_state by the kernel's version. */
static size_t pw_build_system_info(struct perfetto_writer *w)
{
	struct utsname u;
	size_t mark = pw_packet_open(w), si, un;

	pwb_uint(&w->pkt, PW_F_SEQ_ID, PW_SEQ_TRACK);
	si = pwb_open(&w->pkt, PW_F_SYSTEM_INFO);
	un = pwb_open(&w->pkt, 1); /* utsname */
	if (uname(&u) == 0) {
		pwb_str(&w->pkt, 1, "Linux"); /* exactly: anything else and the version is ignored */
		pwb_str(&w->pkt, 2, u.version);
		pwb_str(&w->pkt, 3, u.release);
		pwb_str(&w->pkt, 4, u.machine);
	}
	pwb_close(&w->pkt, un);
	pwb_close(&w->pkt, si);
	return mark;
}

size_t pw_sched_system_info(struct perfetto_writer *w)
{
	return pw_build_system_info(w);
}

static void pw_sched_put_bundle(struct perfetto_writer *w, uint32_t cpu, struct pw_sched_cpu *c)
{
	size_t mark = pw_packet_begin(w, PW_SEQ_TRACK, 0, false), b;

	b = pwb_open(&w->pkt, PW_F_FTRACE_EVENTS);
	pwb_uint(&w->pkt, FB_CPU, cpu);
	if (w->sched->lost_pending)
		pwb_uint(&w->pkt, FB_LOST_EVENTS, 1);
	pwb_raw(&w->pkt, c->events.p, c->events.len);
	pwb_close(&w->pkt, b);
	pw_packet_end(w, mark);
	c->events.len = 0;
}

void pw_sched_flush(struct perfetto_writer *w)
{
	struct pw_sched *s = w->sched;

	if (!s)
		return;
	if (!s->system_info_written) {
		bool any = false;

		for (uint32_t i = 0; i < s->n_cpus; i++)
			any |= s->cpus[i].events.len > 0;
		if (!any)
			return;
		s->system_info_written = pw_packet_end(w, pw_build_system_info(w)) == 0;
	}
	for (uint32_t i = 0; i < s->n_cpus; i++)
		if (s->cpus[i].events.len)
			pw_sched_put_bundle(w, i, &s->cpus[i]);
	s->lost_pending = false;
	s->boot_minus_mono = boot_offset_refresh(s->boot_minus_mono);
}

void pw_sched_end_task(struct perfetto_writer *w, int32_t tid, uint64_t end)
{
	for (uint32_t i = 0; w->sched && i < w->sched->n_cpus; i++) {
		struct pw_sched_cpu *c = &w->sched->cpus[i];

		if (c->has_last && c->last_tid == tid && c->last_ts < end) {
			c->end_pending = true;
			c->end_ts = end;
		}
	}
}

int64_t pw_sched_boot_offset(struct perfetto_writer *w)
{
	/* one offset for the processes' starts and ends and the CPUs' events */
	struct pw_sched *s = pw_sched_state(w);

	return s ? s->boot_minus_mono : boot_offset_refresh(INT64_MIN);
}

void pw_sched_free(struct perfetto_writer *w)
{
	if (!w->sched)
		return;
	for (uint32_t i = 0; i < w->sched->n_cpus; i++)
		pwb_free(&w->sched->cpus[i].events);
	free(w->sched->cpus);
	free(w->sched);
	w->sched = NULL;
}

/* One FtraceEvent being written: its mark and its payload's (field `kind`). */
struct pw_sched_ev {
	size_t ev, payload;
};

/* Opens FtraceEvent { timestamp, pid, kind { ... } } on c. */
static struct pw_sched_ev pw_sched_event(struct perfetto_writer *w, struct pw_sched_cpu *c,
					 uint64_t ts, int32_t common_pid, uint32_t kind)
{
	struct pw_sched_ev e = { .ev = pwb_open(&c->events, FB_EVENT) };

	pwb_uint(&c->events, FE_TIMESTAMP, (uint64_t)((int64_t)ts + w->sched->boot_minus_mono));
	pwb_uint(&c->events, FE_PID, (uint32_t)common_pid);
	e.payload = pwb_open(&c->events, kind);
	return e;
}

static int pw_sched_event_end(struct perfetto_writer *w, uint32_t cpu, struct pw_sched_cpu *c,
			      struct pw_sched_ev e)
{
	pwb_close(&c->events, e.payload);
	pwb_close(&c->events, e.ev);
	if (c->events.oom) {
		c->events.len = 0;
		c->events.oom = false;
		return -ENOMEM;
	}
	w->st.sched_events++;
	if (c->events.len >= PW_SCHED_BUNDLE_BYTES && w->sched->system_info_written)
		pw_sched_put_bundle(w, cpu, c);
	return 0;
}

/* A signed int32 field: negative values (deadline priorities) as the 10-byte varint they are. */
static void pw_int(struct pwb *b, uint32_t field, int32_t v)
{
	pwb_uint(b, field, (uint64_t)(int64_t)v);
}

/* One sched_switch event into c's bundle; c then runs next. */
static int pw_sched_put_switch(struct perfetto_writer *w, uint32_t cpu, struct pw_sched_cpu *c,
			       uint64_t ts, const struct perfetto_sched_task *from,
			       uint32_t prev_state, const struct perfetto_sched_task *next)
{
	struct pw_sched_ev e = pw_sched_event(w, c, ts, from->tid, FE_SCHED_SWITCH);

	pwb_str(&c->events, 1, from->comm);
	pw_int(&c->events, 2, from->tid);
	pw_int(&c->events, 3, from->prio);
	if (prev_state)
		pwb_uint(&c->events, 4, prev_state);
	pwb_str(&c->events, 5, next->comm);
	pw_int(&c->events, 6, next->tid);
	pw_int(&c->events, 7, next->prio);
	c->has_last = true;
	c->last_ts = ts;
	c->last_tid = next->tid;
	c->last_prio = next->prio;
	snprintf(c->last_comm, sizeof(c->last_comm), "%s", next->comm);
	return pw_sched_event_end(w, cpu, c, e);
}

/* The task c's last switch put on it. */
static struct perfetto_sched_task pw_sched_last(const struct pw_sched_cpu *c)
{
	return (struct perfetto_sched_task){ .tid = c->last_tid, .comm = c->last_comm,
					     .prio = c->last_prio };
}

/*
 * The CPU's last task ended (pw_sched_end_task) and this switch at ts is the
 * CPU's next: unless it is that task's own last switch out, the task hands
 * over at its end (ts if earlier: the CPU's events stay in order), dead, to
 * the task this switch names as leaving, which then ran since.
 */
static int pw_sched_put_end(struct perfetto_writer *w, uint32_t cpu, struct pw_sched_cpu *c,
			    uint64_t ts, const struct perfetto_sched_task *prev)
{
	struct perfetto_sched_task last = pw_sched_last(c);

	c->end_pending = false;
	if (prev->tid == c->last_tid)
		return 0;
	w->st.sched_repaired++;
	return pw_sched_put_switch(w, cpu, c, c->end_ts < ts ? c->end_ts : ts, &last,
				   PW_SCHED_STATE_DEAD, prev);
}

int perfetto_writer_sched_switch(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 const struct perfetto_sched_task *prev, uint32_t prev_state,
				 const struct perfetto_sched_task *next)
{
	struct pw_sched_cpu *c;
	struct perfetto_sched_task from = *prev, last;
	int err;

	if (!(c = pw_sched_cpu(w, cpu)))
		return -ENOMEM;
	if (c->end_pending && (err = pw_sched_put_end(w, cpu, c, ts, prev)))
		return err;
	/* who ran since a traced thread left this CPU: the task it handed it to */
	if (!prev->traced && c->has_last) {
		from = pw_sched_last(c);
	} else if (c->has_last && c->last_tid != prev->tid) {
		/*
		 * A traced thread leaves a CPU we never saw it take (its switch in
		 * came before it was followed, or was lost): the importer would
		 * count the switch's prev as a contradiction
		 * (mismatched_sched_switch_tids) and leave the last task running.
		 * What is known: prev ran at ts. So the last task hands over at
		 * ts, in an unknown state (written as R), and prev runs 0 ns.
		 */
		last = pw_sched_last(c);
		w->st.sched_repaired++;
		err = pw_sched_put_switch(w, cpu, c, ts, &last, 0, prev);
		if (err)
			return err;
	}
	return pw_sched_put_switch(w, cpu, c, ts, &from, prev_state, next);
}

int perfetto_writer_sched_waking(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 const struct perfetto_sched_task *waker,
				 const struct perfetto_sched_task *woken, uint32_t target_cpu)
{
	struct pw_sched_cpu *c;
	struct pw_sched_ev e;

	if (!(c = pw_sched_cpu(w, cpu)))
		return -ENOMEM;
	/* the waker as the running task: trace processor's waker_utid */
	e = pw_sched_event(w, c, ts, waker->tid, FE_SCHED_WAKING);
	pwb_str(&c->events, 1, woken->comm);
	pw_int(&c->events, 2, woken->tid);
	pw_int(&c->events, 3, woken->prio);
	pwb_uint(&c->events, 4, 1); /* success */
	pwb_uint(&c->events, 5, target_cpu);
	return pw_sched_event_end(w, cpu, c, e);
}

int perfetto_writer_sched_task_free(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				    const struct perfetto_sched_task *task)
{
	struct pw_sched_cpu *c;
	struct pw_sched_ev e;

	if (!(c = pw_sched_cpu(w, cpu)))
		return -ENOMEM;
	e = pw_sched_event(w, c, ts, c->has_last ? c->last_tid : 0, FE_SCHED_PROCESS_FREE);
	pwb_str(&c->events, 1, task->comm);
	pw_int(&c->events, 2, task->tid);
	pw_int(&c->events, 3, task->prio);
	return pw_sched_event_end(w, cpu, c, e);
}

void perfetto_writer_sched_lost(struct perfetto_writer *w)
{
	if (w->sched)
		w->sched->lost_pending = true;
}
