// SPDX-License-Identifier: MIT
/* One session's scheduler view (see sched_session.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sched/offcpu.h"
#include "daemon/sched/sched_session.h"
#include "viewer-export/perfetto_writer.h"

/* States after which the thread never runs again: its clock is of no more use. */
#define STATE_DEAD (0x10u | 0x20u) /* X, Z */

/*
 * Traced threads that died, by tid (open addressing; 0 empty, UINT32_MAX a
 * hole): their task_free is written only when the tid comes back as another
 * task. Written at death, the importer ends the thread there, and whatever
 * names it later (the final figures, counters, samples read late) makes a
 * second thread and process of the same ids.
 */
struct dead_tids {
	uint32_t *slots;
	uint32_t cap, used; /* used counts holes too */
};

struct sched_session {
	struct sched_session_config cfg;
	struct offcpu_clocks *clocks;
	struct sched_func_sums sums;
	struct dead_tids dead;
	struct sched_session_stats st;
};

struct sched_session *sched_session_new(const struct sched_session_config *cfg)
{
	struct sched_session *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->cfg = *cfg;
	ss->clocks = offcpu_clocks_new();
	if (!ss->clocks) {
		free(ss);
		return NULL;
	}
	return ss;
}

void sched_session_free(struct sched_session *ss)
{
	if (!ss)
		return;
	offcpu_clocks_free(ss->clocks);
	free(ss->sums.funcs);
	free(ss->dead.slots);
	free(ss);
}

#define DEAD_HOLE UINT32_MAX

/* The slot of tid, or of the first free/hole one on its path when absent (found false). */
static uint32_t *dead_slot(struct dead_tids *d, uint32_t tid, bool *found)
{
	uint32_t *hole = NULL;

	*found = false;
	for (uint32_t i = (tid * 2654435761u) & (d->cap - 1), n = 0; n < d->cap;
	     i = (i + 1) & (d->cap - 1), n++) {
		if (d->slots[i] == tid) {
			*found = true;
			return &d->slots[i];
		}
		if (d->slots[i] == DEAD_HOLE && !hole)
			hole = &d->slots[i];
		if (!d->slots[i])
			return hole ? hole : &d->slots[i];
	}
	return hole;
}

/* Remembers a dead traced tid; on ENOMEM it is forgotten (a reuse then merges, nothing worse). */
static void dead_add(struct dead_tids *d, uint32_t tid)
{
	bool found;
	uint32_t *slot;

	if (tid == 0 || tid == DEAD_HOLE)
		return;
	if ((d->used + 1) * 2 > d->cap) { /* grow (and drop holes) at half full */
		struct dead_tids bigger = { .cap = d->cap ? d->cap * 2 : 256 };

		bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
		if (!bigger.slots)
			return;
		for (uint32_t i = 0; i < d->cap; i++)
			if (d->slots[i] && d->slots[i] != DEAD_HOLE)
				dead_add(&bigger, d->slots[i]);
		free(d->slots);
		*d = bigger;
	}
	slot = dead_slot(d, tid, &found);
	if (found || !slot)
		return;
	d->used += *slot == 0;
	*slot = tid;
}

/* A task of this tid shows up again: the dead thread's free goes first, so it is another thread. */
static void dead_reused(struct sched_session *ss, uint32_t tid, uint64_t ts, uint32_t cpu)
{
	struct perfetto_sched_task gone = { .tid = (int32_t)tid, .comm = "" };
	bool found;
	uint32_t *slot;

	if (!ss->dead.cap || !tid)
		return;
	slot = dead_slot(&ss->dead, tid, &found);
	if (!found)
		return;
	*slot = DEAD_HOLE;
	perfetto_writer_sched_task_free(ss->cfg.writer, ts, cpu, &gone);
}

/*
 * A task as the client may see it: the target's threads and the CPUs' idle
 * tasks as they are; any other task, to a client that may not see other
 * processes, as the CPU's placeholder (perfetto_writer.h). True when hidden.
 */
static bool describe(const struct sched_session *ss, uint32_t tid, uint32_t tgid,
		     const char *comm, int32_t prio, uint32_t cpu, struct perfetto_sched_task *out)
{
	bool ours = tid && (ss->cfg.is_target ? ss->cfg.is_target(ss->cfg.is_target_ctx, tgid) :
						(pid_t)tgid == ss->cfg.target);

	if (tid && !ours && !ss->cfg.see_other_tasks) {
		*out = (struct perfetto_sched_task){ .tid = PERFETTO_SCHED_HIDDEN_TID + (int32_t)cpu,
						     .comm = PERFETTO_SCHED_HIDDEN_NAME, .prio = 120 };
		return true;
	}
	*out = (struct perfetto_sched_task){ .tid = (int32_t)tid, .comm = comm, .prio = prio,
					     .traced = ours };
	return false;
}

static void on_switch(struct sched_session *ss, const struct sched_record *r,
		      const struct perfetto_sched_task *prev, const struct perfetto_sched_task *next)
{
	bool runnable = r->prev_state == 0 || r->prev_state == SCHED_STATE_PREEMPTED;
	bool dead = r->prev_state & STATE_DEAD;

	if (prev->traced)
		offcpu_transition(ss->clocks, r->prev_tid, r->ts,
				  dead ? OFFCPU_GONE : runnable ? OFFCPU_RUNNABLE : OFFCPU_BLOCKED);
	if (next->traced)
		offcpu_transition(ss->clocks, r->next_tid, r->ts, OFFCPU_RUNNING);
	perfetto_writer_sched_switch(ss->cfg.writer, r->ts, r->cpu, prev, r->prev_state, next);
	/*
	 * its last switch: later events of its tid are another thread's (freed
	 * then). Not a process's main thread: its free ends the process, which
	 * the writer does itself when the pid comes back as a new process
	 * (perfetto_writer_process_start); a second free would end that one.
	 */
	if (prev->traced && dead && r->prev_tid != r->prev_tgid)
		dead_add(&ss->dead, r->prev_tid);
	ss->st.switches++;
}

void sched_session_record(struct sched_session *ss, const struct sched_record *r)
{
	struct perfetto_sched_task prev, next;
	char prev_comm[SCHED_COMM_LEN + 1], next_comm[SCHED_COMM_LEN + 1];
	uint32_t next_cpu = r->kind == SCHED_RECORD_SWITCH ? r->cpu : r->target_cpu;
	bool hidden;

	if (r->cpu >= PERFETTO_SCHED_MAX_CPUS || next_cpu >= PERFETTO_SCHED_MAX_CPUS)
		return;
	/* the kernel's strings, but a record is bytes: bound them */
	memcpy(prev_comm, r->prev_comm, SCHED_COMM_LEN);
	memcpy(next_comm, r->next_comm, SCHED_COMM_LEN);
	prev_comm[SCHED_COMM_LEN] = next_comm[SCHED_COMM_LEN] = '\0';
	hidden = describe(ss, r->prev_tid, r->prev_tgid, prev_comm, r->prev_prio, r->cpu, &prev);
	hidden |= describe(ss, r->next_tid, r->next_tgid, next_comm, r->next_prio, next_cpu, &next);
	if (prev.traced)
		dead_reused(ss, r->prev_tid, r->ts, r->cpu);
	if (next.traced)
		dead_reused(ss, r->next_tid, r->ts, r->cpu);
	switch (r->kind) {
	case SCHED_RECORD_SWITCH:
		on_switch(ss, r, &prev, &next);
		break;
	case SCHED_RECORD_WAKING:
		if (next.traced)
			offcpu_transition(ss->clocks, r->next_tid, r->ts, OFFCPU_WOKEN);
		perfetto_writer_sched_waking(ss->cfg.writer, r->ts, r->cpu, &prev, &next,
					     r->target_cpu);
		ss->st.wakeups++;
		break;
	case SCHED_RECORD_WAKEUP_NEW: /* a new task starts runnable, its creator the waker */
		if (hidden && !next.traced && next.tid >= PERFETTO_SCHED_HIDDEN_TID)
			return; /* a child process the client may not see: not even that it began */
		/*
		 * Written as a waking, not a task_newtask: the importer starts a new
		 * thread (and, without CLONE_THREAD, a new process) at a newtask,
		 * beside the one the track descriptors made for the same tid (read
		 * before any sorted event), so every thread created while profiled
		 * was two threads in trace processor, its slices on one and its
		 * scheduler states on the other.
		 */
		perfetto_writer_sched_waking(ss->cfg.writer, r->ts, r->cpu, &prev, &next,
					     r->target_cpu);
		ss->st.wakeups++;
		break;
	default:
		return;
	}
	ss->st.hidden += hidden;
}

struct offcpu_thread *sched_session_clock(struct sched_session *ss, uint32_t tid)
{
	return offcpu_thread(ss->clocks, tid);
}

void sched_session_watermark(struct sched_session *ss, uint64_t ts)
{
	offcpu_watermark(ss->clocks, ts);
}

void sched_session_thread_gone(struct sched_session *ss, uint32_t tid)
{
	offcpu_thread_gone(ss->clocks, tid);
}

void sched_session_call(struct sched_session *ss, uint32_t func_id, uint64_t dur_ns,
			const struct offcpu_time *in_call)
{
	struct sched_func_sums *s = &ss->sums;

	if (func_id >= s->n_funcs) {
		uint32_t n = func_id + 1 > 2 * s->n_funcs ? func_id + 1 : 2 * s->n_funcs;
		struct sched_func_time *f = realloc(s->funcs, n * sizeof(*f));

		if (!f)
			return; /* its sums are missing, and read as such */
		memset(f + s->n_funcs, 0, (n - s->n_funcs) * sizeof(*f));
		s->funcs = f;
		s->n_funcs = n;
	}
	sched_func_add(&s->funcs[func_id], dur_ns, in_call);
}

const struct sched_func_sums *sched_session_sums(struct sched_session *ss)
{
	return &ss->sums;
}

bool sched_session_func_time(const struct sched_session *ss, uint32_t func_id,
			     struct sched_func_time *out)
{
	if (func_id >= ss->sums.n_funcs || !ss->sums.funcs[func_id].calls)
		return false;
	*out = ss->sums.funcs[func_id];
	return true;
}

void sched_session_set_lost(struct sched_session *ss, uint64_t lost)
{
	if (lost > ss->st.lost)
		perfetto_writer_sched_lost(ss->cfg.writer);
	ss->st.lost = lost;
}

void sched_session_get_stats(const struct sched_session *ss, struct sched_session_stats *st)
{
	*st = ss->st;
}
