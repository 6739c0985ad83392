// SPDX-License-Identifier: MIT
/*
 * Shadow-stack replay per thread (see call_stacks.h): an open-addressing
 * table of threads, each with a growable array of open frames. Only the
 * session's thread touches it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sampling/call_stacks.h"

struct call_stacks {
	struct call_thread *slots; /* power-of-two sized, at most half full */
	size_t n_slots, n_used;
	/* the last thread found: events come in runs of one thread (reset when slots move) */
	struct call_thread *last;
};

static size_t slot_index(const struct call_stacks *cs, uint32_t tid)
{
	return (tid * 2654435761u) & (cs->n_slots - 1);
}

static struct call_thread *find_thread(struct call_stacks *cs, uint32_t tid)
{
	if (cs->last && cs->last->tid == tid)
		return cs->last;
	for (size_t i = slot_index(cs, tid);; i = (i + 1) & (cs->n_slots - 1)) {
		if (cs->slots[i].tid == tid)
			return cs->last = &cs->slots[i];
		if (cs->slots[i].tid == 0)
			return NULL;
	}
}

static struct call_thread *insert_slot(struct call_stacks *cs, uint32_t tid)
{
	size_t i = slot_index(cs, tid);

	while (cs->slots[i].tid != 0)
		i = (i + 1) & (cs->n_slots - 1);
	cs->slots[i].tid = tid;
	cs->n_used++;
	return &cs->slots[i];
}

static int grow_table(struct call_stacks *cs)
{
	struct call_thread *old = cs->slots;
	size_t old_n = cs->n_slots;

	cs->slots = calloc(old_n * 2, sizeof(*cs->slots));
	if (!cs->slots) {
		cs->slots = old;
		return -ENOMEM;
	}
	cs->n_slots = old_n * 2;
	cs->n_used = 0;
	cs->last = NULL;
	for (size_t i = 0; i < old_n; i++)
		if (old[i].tid)
			*insert_slot(cs, old[i].tid) = old[i];
	free(old);
	return 0;
}

static struct call_thread *get_thread(struct call_stacks *cs, uint32_t tid)
{
	struct call_thread *t = find_thread(cs, tid);

	if (t)
		return t;
	if ((cs->n_used + 1) * 2 > cs->n_slots && grow_table(cs) < 0)
		return NULL;
	return insert_slot(cs, tid);
}

struct call_stacks *call_stacks_new(void)
{
	struct call_stacks *cs = calloc(1, sizeof(*cs));

	if (!cs)
		return NULL;
	cs->n_slots = 8; /* grows: a process of a tree has a thread or two, kept to the end */
	cs->slots = calloc(cs->n_slots, sizeof(*cs->slots));
	if (!cs->slots) {
		free(cs);
		return NULL;
	}
	return cs;
}

void call_stacks_free(struct call_stacks *cs)
{
	if (!cs)
		return;
	call_stacks_clear(cs);
	free(cs->slots);
	free(cs);
}

void call_stacks_clear(struct call_stacks *cs)
{
	for (size_t i = 0; i < cs->n_slots; i++) {
		free(cs->slots[i].frames);
		free(cs->slots[i].recent);
	}
	memset(cs->slots, 0, cs->n_slots * sizeof(cs->slots[0]));
	cs->n_used = 0;
	cs->last = NULL;
}

struct call_thread *call_stacks_thread(struct call_stacks *cs, uint32_t tid)
{
	return get_thread(cs, tid);
}

/* Room for one more frame (and the table of recent slots), unless refused. */
struct call_frame *call_thread_push_slow(struct call_thread *t)
{
	if (t->depth >= CALL_STACKS_MAX_DEPTH)
		return NULL;
	if (t->depth == t->capacity) {
		uint32_t cap = t->capacity ? t->capacity * 2 : 16;
		struct call_frame *f = realloc(t->frames, cap * sizeof(*f));

		if (!f)
			return NULL;
		t->frames = f;
		t->capacity = cap;
	}
	if (!t->recent && !(t->recent = calloc(CALL_STACKS_RECENT_SLOTS, sizeof(*t->recent))))
		return NULL;
	return &t->frames[t->depth++];
}

int call_stacks_enter(struct call_stacks *cs, uint32_t tid, const struct call_frame *frame)
{
	struct call_thread *t = get_thread(cs, tid);
	struct call_frame *f;

	if (!t)
		return -ENOMEM;
	f = call_thread_push(t);
	if (!f)
		return t->depth >= CALL_STACKS_MAX_DEPTH ? -E2BIG : -ENOMEM;
	*f = *frame;
	call_thread_pushed(t, f);
	return 0;
}

bool call_stacks_return_at(struct call_stacks *cs, uint32_t tid, uint64_t slot,
			   uint64_t *return_address)
{
	struct call_thread *t = find_thread(cs, tid);
	const struct slot_return *r;

	if (!t)
		return false;
	for (uint32_t i = t->depth; i-- > 0;) {
		if (t->frames[i].return_slot == slot) {
			*return_address = t->frames[i].return_address;
			return true;
		}
	}
	if (t->has_last_exited && t->last_exited.return_slot == slot) {
		*return_address = t->last_exited.return_address;
		return true;
	}
	r = t->recent ? &t->recent[call_stacks_recent_index(slot)] : NULL;
	if (!r || r->slot != slot)
		return false;
	*return_address = r->return_address;
	return true;
}

const struct call_frame *call_thread_exit_slow(struct call_thread *t, uint32_t func_id)
{
	uint32_t i;

	for (i = t->depth; i > 0 && t->frames[i - 1].func_id != func_id; i--)
		;
	if (i-- == 0)
		return NULL;
	t->last_exited = t->frames[i];
	if (i + 1 < t->depth) /* not the top: nearly never, and memmove is a call */
		memmove(&t->frames[i], &t->frames[i + 1],
			(t->depth - i - 1) * sizeof(t->frames[0]));
	t->depth--;
	t->has_last_exited = true;
	return &t->last_exited;
}

int call_stacks_exit(struct call_stacks *cs, uint32_t tid, uint32_t func_id,
		     struct call_frame *out)
{
	struct call_thread *t = find_thread(cs, tid);
	const struct call_frame *done = t ? call_thread_exit(t, func_id) : NULL;

	if (!done)
		return -ENOENT;
	*out = *done;
	return 0;
}

struct call_frame *call_stacks_open(struct call_stacks *cs, uint32_t tid, size_t *depth)
{
	struct call_thread *t = find_thread(cs, tid);

	*depth = t ? t->depth : 0;
	return t && t->depth ? t->frames : NULL;
}

const struct call_frame *call_stacks_last_exited(struct call_stacks *cs, uint32_t tid)
{
	struct call_thread *t = find_thread(cs, tid);

	return t && t->has_last_exited ? &t->last_exited : NULL;
}

/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
void call_stacks_thread_gone(struct call_stacks *cs, uint32_t tid)
{
	struct call_thread *t = find_thread(cs, tid);
	size_t hole, i;

	if (!t)
		return;
	free(t->frames);
	free(t->recent);
	hole = (size_t)(t - cs->slots);
	memset(t, 0, sizeof(*t));
	cs->n_used--;
	cs->last = NULL; /* entries move below */
	for (i = (hole + 1) & (cs->n_slots - 1); cs->slots[i].tid; i = (i + 1) & (cs->n_slots - 1)) {
		size_t home = slot_index(cs, cs->slots[i].tid);
		/* the entry may move to the hole if its home is not in (hole, i] cyclically */
		bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);

		if (stays)
			continue;
		cs->slots[hole] = cs->slots[i];
		memset(&cs->slots[i], 0, sizeof(cs->slots[i]));
		hole = i;
	}
}
