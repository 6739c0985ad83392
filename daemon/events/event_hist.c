// SPDX-License-Identifier: MIT
/*
 * Duration histograms counted from events (see event_hist.h): an
 * open-addressing table of (tid, agent id) to counters allocated one by one,
 * so that a pointer the replay keeps stays valid as the table grows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/event_hist.h"

struct hist_slot {
	uint32_t tid, agent_id;
	uint32_t *counts; /* NULL: empty slot */
};

struct event_hists {
	struct hist_slot *slots;
	size_t cap, n; /* cap: a power of two */
};

struct event_hists *event_hists_new(void)
{
	return calloc(1, sizeof(struct event_hists));
}

void event_hists_free(struct event_hists *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->cap; i++)
		free(h->slots[i].counts);
	free(h->slots);
	free(h);
}

static size_t slot_of(uint32_t tid, uint32_t agent_id, size_t cap)
{
	return (size_t)((((uint64_t)tid << 32 | agent_id) * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static struct hist_slot *find(const struct event_hists *h, uint32_t tid, uint32_t agent_id)
{
	size_t k;

	if (!h->cap)
		return NULL;
	for (k = slot_of(tid, agent_id, h->cap); h->slots[k].counts; k = (k + 1) & (h->cap - 1))
		if (h->slots[k].tid == tid && h->slots[k].agent_id == agent_id)
			return &h->slots[k];
	return &h->slots[k];
}

static int grow(struct event_hists *h)
{
	size_t ncap = h->cap ? h->cap * 2 : 16;
	struct hist_slot *n = calloc(ncap, sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < h->cap; i++) {
		size_t k;

		if (!h->slots[i].counts)
			continue;
		for (k = slot_of(h->slots[i].tid, h->slots[i].agent_id, ncap); n[k].counts;
		     k = (k + 1) & (ncap - 1))
			;
		n[k] = h->slots[i];
	}
	free(h->slots);
	h->slots = n;
	h->cap = ncap;
	return 0;
}

uint32_t *event_hists_get(struct event_hists *h, uint32_t tid, uint32_t agent_id)
{
	struct hist_slot *s = find(h, tid, agent_id);

	if (s && s->counts)
		return s->counts;
	if ((h->n + 1) * 2 > h->cap) {
		if (grow(h))
			return NULL;
		s = find(h, tid, agent_id);
	}
	s->counts = calloc(AGG_BUCKETS, sizeof(*s->counts));
	if (!s->counts)
		return NULL;
	s->tid = tid;
	s->agent_id = agent_id;
	h->n++;
	return s->counts;
}

/* Adds s's counts into `into` and zeroes them; false when all were 0. */
static bool take_slot(struct hist_slot *s, uint64_t *into)
{
	bool any = false;

	for (uint32_t b = 0; b < AGG_BUCKETS; b++) {
		if (!s->counts[b])
			continue;
		into[b] += s->counts[b];
		s->counts[b] = 0;
		any = true;
	}
	return any;
}

bool event_hists_take(struct event_hists *h, uint32_t tid, uint32_t agent_id, uint64_t *into)
{
	struct hist_slot *s = find(h, tid, agent_id);

	return s && s->counts && take_slot(s, into);
}

void event_hists_take_all(struct event_hists *h,
			  void (*fn)(void *ctx, uint32_t tid, uint32_t agent_id,
				     const uint64_t *counts),
			  void *ctx)
{
	uint64_t counts[AGG_BUCKETS];

	for (size_t i = 0; i < h->cap; i++) {
		struct hist_slot *s = &h->slots[i];

		memset(counts, 0, sizeof(counts));
		if (s->counts && take_slot(s, counts))
			fn(ctx, s->tid, s->agent_id, counts);
	}
}
