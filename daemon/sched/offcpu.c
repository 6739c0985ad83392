// SPDX-License-Identifier: MIT
/* Per-thread off-CPU clocks (see offcpu.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sched/offcpu.h"

struct offcpu_clocks {
	struct offcpu_thread *slots;    /* open addressing on tid */
	uint32_t cap, used;
};

struct offcpu_clocks *offcpu_clocks_new(void)
{
	struct offcpu_clocks *oc = calloc(1, sizeof(*oc));

	if (oc && !(oc->slots = calloc(oc->cap = 64, sizeof(*oc->slots)))) {
		free(oc);
		return NULL;
	}
	return oc;
}

void offcpu_clocks_free(struct offcpu_clocks *oc)
{
	if (!oc)
		return;
	for (uint32_t i = 0; i < oc->cap; i++)
		free(oc->slots[i].queue);
	free(oc->slots);
	free(oc);
}

static struct offcpu_thread *slot_for(struct offcpu_thread *slots, uint32_t cap, uint32_t tid)
{
	uint32_t i = (tid * 2654435761u) & (cap - 1);

	while (slots[i].tid && slots[i].tid != tid)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int grow_table(struct offcpu_clocks *oc)
{
	uint32_t cap = oc->cap * 2;
	struct offcpu_thread *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < oc->cap; i++)
		if (oc->slots[i].tid)
			*slot_for(slots, cap, oc->slots[i].tid) = oc->slots[i];
	free(oc->slots);
	oc->slots = slots;
	oc->cap = cap;
	return 0;
}

/* The thread's clock; created when `create`, else NULL when unknown. */
static struct offcpu_thread *clock_of(struct offcpu_clocks *oc, uint32_t tid, bool create)
{
	struct offcpu_thread *c;

	if (!tid)
		return NULL;
	c = slot_for(oc->slots, oc->cap, tid);
	if (c->tid || !create)
		return c->tid ? c : NULL;
	if ((oc->used + 1) * 4 > oc->cap * 3) { /* keep probes short */
		if (grow_table(oc))
			return NULL;
		c = slot_for(oc->slots, oc->cap, tid);
	}
	c->tid = tid;
	oc->used++;
	return c;
}

static struct offcpu_time read_at(const struct offcpu_thread *c, uint64_t ts)
{
	return offcpu_thread_read(c, ts);
}

static void apply(struct offcpu_thread *c, const struct pending_switch *p)
{
	enum offcpu_state to = p->state;

	if (to == OFFCPU_GONE) {
		c->gone = true;
		return;
	}
	/*
	 * Switched in after its last switch: a new thread under the tid (tids
	 * wrap), whose clock must outlive the old one's. Only a switch-in says
	 * so: a dead thread is never switched in again, a late wakeup may come.
	 */
	if (to == OFFCPU_RUNNING)
		c->gone = false;
	/* a wakeup matters to a blocked thread only (it may race its own switch-out) */
	if (to == OFFCPU_WOKEN) {
		if (c->state != OFFCPU_BLOCKED)
			return;
		to = OFFCPU_RUNNABLE;
	}
	c->total = read_at(c, p->ts);
	if (p->ts > c->since)
		c->since = p->ts;
	c->state = to;
}

static void apply_oldest(struct offcpu_thread *c)
{
	apply(c, &c->queue[c->head]);
	c->head = (c->head + 1) & (c->cap - 1);
	c->count--;
}

void offcpu_thread_apply(struct offcpu_thread *c, uint64_t ts)
{
	while (c->count && c->queue[c->head].ts <= ts)
		apply_oldest(c);
}

static int queue_push(struct offcpu_thread *c, const struct pending_switch *p)
{
	if (c->count == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 16;
		struct pending_switch *q;

		if (cap > OFFCPU_QUEUE_MAX) {
			apply_oldest(c); /* calls lag too far: the oldest counts from now */
		} else {
			if (!(q = malloc(cap * sizeof(*q))))
				return -ENOMEM;
			for (uint32_t i = 0; i < c->count; i++)
				q[i] = c->queue[(c->head + i) & (c->cap - 1)];
			free(c->queue);
			c->queue = q;
			c->cap = cap;
			c->head = 0;
		}
	}
	c->queue[(c->head + c->count) & (c->cap - 1)] = *p;
	c->count++;
	return 0;
}

int offcpu_transition(struct offcpu_clocks *oc, uint32_t tid, uint64_t ts,
		      enum offcpu_state state)
{
	struct offcpu_thread *c = clock_of(oc, tid, true);

	if (!c)
		return tid ? -ENOMEM : 0;
	return queue_push(c, &(struct pending_switch){ .ts = ts, .state = state });
}

struct offcpu_time offcpu_before(struct offcpu_clocks *oc, uint32_t tid, uint64_t ts)
{
	return offcpu_thread_before(clock_of(oc, tid, false), ts);
}

struct offcpu_thread *offcpu_thread(struct offcpu_clocks *oc, uint32_t tid)
{
	return clock_of(oc, tid, false);
}

static void remove_slot(struct offcpu_clocks *oc, struct offcpu_thread *c);

void offcpu_watermark(struct offcpu_clocks *oc, uint64_t ts)
{
	for (uint32_t i = 0; i < oc->cap; i++) {
		struct offcpu_thread *c = &oc->slots[i];

		if (!c->tid)
			continue;
		offcpu_thread_apply(c, ts);
		/* a removal moves later slots back: look at this one again */
		if (c->gone && !c->count) {
			remove_slot(oc, c);
			i--;
		}
	}
}

/* Removes a slot of an open-addressed table: later slots of its run move back. */
static void remove_slot(struct offcpu_clocks *oc, struct offcpu_thread *c)
{
	uint32_t i = (uint32_t)(c - oc->slots), j = i;

	free(c->queue);
	memset(c, 0, sizeof(*c));
	oc->used--;
	for (;;) {
		uint32_t home;

		j = (j + 1) & (oc->cap - 1);
		if (!oc->slots[j].tid)
			return;
		home = (oc->slots[j].tid * 2654435761u) & (oc->cap - 1);
		/* j's entry may fill the hole at i unless its home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			oc->slots[i] = oc->slots[j];
			memset(&oc->slots[j], 0, sizeof(oc->slots[j]));
			i = j;
		}
	}
}

void offcpu_thread_gone(struct offcpu_clocks *oc, uint32_t tid)
{
	struct offcpu_thread *c = clock_of(oc, tid, false);

	if (c)
		remove_slot(oc, c);
}
