/* SPDX-License-Identifier: MIT */
/*
 * Per-thread off-CPU clocks: how long each target thread has spent switched
 * out, and how much of that runnable (waiting for a CPU, not for an event),
 * read at any instant of its instrumented calls, so that each call gets its
 * on-CPU and off-CPU time exactly (off = clock at exit - clock at enter). Switches come from the BPF ring in real time, calls from the agent
 * a flush later: switches wait in a per-thread queue until the thread's
 * calls reach their time. Queries of one thread must not go back in time.
 */
#ifndef PROFD_OFFCPU_H
#define PROFD_OFFCPU_H

#include <stdbool.h>
#include <stdint.h>

struct offcpu_clocks;

enum offcpu_state {
	OFFCPU_RUNNING = 0,
	OFFCPU_RUNNABLE,  /* preempted, or woken and not yet running */
	OFFCPU_BLOCKED,   /* sleeping, waiting on a lock, I/O, stopped ... */
	OFFCPU_WOKEN,     /* a transition only: BLOCKED -> RUNNABLE */
	OFFCPU_GONE,      /* a transition only: its last switch; forgotten once the watermark
			   * passes, unless switched in since (a new thread under the tid) */
};

/* A thread's clock at some instant: time spent switched out since profd knew it. */
struct offcpu_time {
	uint64_t off_ns;
	uint64_t runnable_ns; /* of off_ns */
};

/* Switches a thread may hold for calls that have not reached them; past it the oldest apply. */
#define OFFCPU_QUEUE_MAX 65536

struct offcpu_clocks *offcpu_clocks_new(void);
void offcpu_clocks_free(struct offcpu_clocks *oc);

/*
 * tid entered `state` at ts: switched in (RUNNING), switched out (RUNNABLE
 * when preempted, else BLOCKED), or woken (WOKEN: a wakeup of a thread not
 * blocked changes nothing). 0 or -ENOMEM.
 */
int offcpu_transition(struct offcpu_clocks *oc, uint32_t tid, uint64_t ts,
		      enum offcpu_state state);

/*
 * The time tid spent switched out before ts, as far as the switches up
 * to ts are known (a thread never seen switching was running). Switches at
 * or before ts are applied and forgotten.
 */
struct offcpu_time offcpu_before(struct offcpu_clocks *oc, uint32_t tid, uint64_t ts);

/*
 * One thread's clock, for profd's per-event path: looked up once per batch of
 * the thread's events, read inline. Valid until the next offcpu_transition,
 * offcpu_watermark or offcpu_thread_gone (none runs while a batch is decoded).
 * The fields are offcpu.c's.
 */
struct pending_switch {
	uint64_t ts;
	enum offcpu_state state;
};
struct offcpu_thread {
	uint32_t tid;                  /* 0: free slot */
	enum offcpu_state state;       /* since `since` */
	bool gone;                     /* its last switch applied */
	uint64_t since;
	struct offcpu_time total;      /* up to `since` */
	struct pending_switch *queue;  /* ring, oldest at head */
	uint32_t head, count, cap;
};
/* NULL: tid never switched (it has been running since profd knew it). */
struct offcpu_thread *offcpu_thread(struct offcpu_clocks *oc, uint32_t tid);
/* Applies its switches up to ts (out of line: most reads have none due). */
void offcpu_thread_apply(struct offcpu_thread *c, uint64_t ts);

/* The clock read at ts >= since, in its current state. */
static inline struct offcpu_time offcpu_thread_read(const struct offcpu_thread *c, uint64_t ts)
{
	struct offcpu_time t = c->total;
	uint64_t d = ts > c->since ? ts - c->since : 0;

	if (c->state != OFFCPU_RUNNING)
		t.off_ns += d;
	if (c->state == OFFCPU_RUNNABLE)
		t.runnable_ns += d;
	return t;
}

/* offcpu_before for a thread already looked up (c NULL: 0). */
static inline struct offcpu_time offcpu_thread_before(struct offcpu_thread *c, uint64_t ts)
{
	if (!c)
		return (struct offcpu_time){ 0 };
	if (c->count && c->queue[c->head].ts <= ts)
		offcpu_thread_apply(c, ts);
	return offcpu_thread_read(c, ts);
}

/*
 * Switches before ts will never be asked about (the agent's stream passed
 * ts, or they are older than calls can lag): they apply, and threads gone
 * before ts are forgotten.
 */
void offcpu_watermark(struct offcpu_clocks *oc, uint64_t ts);

void offcpu_thread_gone(struct offcpu_clocks *oc, uint32_t tid);

#endif
