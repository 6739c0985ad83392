// SPDX-License-Identifier: MIT
/*
 * The exports' aggregation (export.h): name ids keyed by the stream's
 * interned pointers, identical stacks summed, and instrumented call chains
 * rebuilt from slices that arrive as they end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/export/export.h"

static size_t ptr_hash(const void *p)
{
	return (size_t)(((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull) >> 32);
}

static bool grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return true;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * size);
	if (!p)
		return false;
	*arr = p;
	*cap = ncap;
	return true;
}

/* ---- names ------------------------------------------------------------------- */

/*
 * Doubles an index of items (slots hold item + 1, open addressing), placing
 * item i at hash(t, i): shared by the names and the stacks tables.
 */
static int slots_grow(uint32_t **slots, size_t *mask, size_t n, size_t first_cap,
		      size_t (*hash)(const void *t, size_t i), const void *t)
{
	size_t cap = *mask ? (*mask + 1) * 2 : first_cap;
	uint32_t *ns = calloc(cap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t k = hash(t, i) & (cap - 1);

		while (ns[k])
			k = (k + 1) & (cap - 1);
		ns[k] = (uint32_t)i + 1;
	}
	free(*slots);
	*slots = ns;
	*mask = cap - 1;
	return 0;
}

static size_t name_at(const void *t, size_t i)
{
	return ptr_hash(((const struct export_names *)t)->names[i]);
}

static int names_rehash(struct export_names *t)
{
	return slots_grow(&t->slots, &t->mask, t->n, 256, name_at, t);
}

int64_t export_names_id(struct export_names *t, const char *name)
{
	size_t k;

	if ((t->n + 1) * 2 > t->mask + 1 && names_rehash(t) < 0)
		return -ENOMEM;
	for (k = ptr_hash(name) & t->mask; t->slots[k]; k = (k + 1) & t->mask)
		if (t->names[t->slots[k] - 1] == name)
			return t->slots[k] - 1;
	if (!grow((void **)&t->names, &t->cap, t->n + 1, sizeof(*t->names)))
		return -ENOMEM;
	t->names[t->n] = name;
	t->slots[k] = (uint32_t)++t->n;
	return (int64_t)t->n - 1;
}

void export_names_free(struct export_names *t)
{
	free(t->names);
	free(t->slots);
	*t = (struct export_names){ 0 };
}

/* ---- stacks -------------------------------------------------------------------- */

static size_t ids_hash(const uint32_t *ids, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;

	for (size_t i = 0; i < n; i++)
		h = (h ^ ids[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 29));
}

static size_t stack_at(const void *t, size_t i)
{
	const struct export_stacks *st = t;

	return ids_hash(st->pool + st->items[i].off, st->items[i].n);
}

static int stacks_rehash(struct export_stacks *t)
{
	return slots_grow(&t->slots, &t->mask, t->n, 64, stack_at, t);
}

int export_stacks_add(struct export_stacks *t, const uint32_t *ids, size_t n,
		      const int64_t v[EXPORT_VALUES])
{
	struct export_stack *s;
	size_t k;

	if ((t->n + 1) * 2 > t->mask + 1 && stacks_rehash(t) < 0)
		return -ENOMEM;
	for (k = ids_hash(ids, n) & t->mask; t->slots[k]; k = (k + 1) & t->mask) {
		s = &t->items[t->slots[k] - 1];
		if (s->n == n && memcmp(t->pool + s->off, ids, n * sizeof(*ids)) == 0)
			goto found;
	}
	if (!grow((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items)) ||
	    !grow((void **)&t->pool, &t->pool_cap, t->pool_n + n, sizeof(*t->pool)))
		return -ENOMEM;
	if (n)
		memcpy(t->pool + t->pool_n, ids, n * sizeof(*ids));
	s = &t->items[t->n];
	*s = (struct export_stack){ .off = (uint32_t)t->pool_n, .n = (uint32_t)n };
	t->pool_n += n;
	t->slots[k] = (uint32_t)++t->n;
found:
	for (int i = 0; i < EXPORT_VALUES; i++)
		s->v[i] += v[i];
	return 0;
}

const struct export_stack *export_stacks_find(const struct export_stacks *t, const uint32_t *ids,
					      size_t n)
{
	if (!t->mask)
		return NULL;
	for (size_t k = ids_hash(ids, n) & t->mask; t->slots[k]; k = (k + 1) & t->mask) {
		const struct export_stack *s = &t->items[t->slots[k] - 1];

		if (s->n == n && memcmp(t->pool + s->off, ids, n * sizeof(*ids)) == 0)
			return s;
	}
	return NULL;
}

void export_stacks_free(struct export_stacks *t)
{
	free(t->items);
	free(t->pool);
	free(t->slots);
	*t = (struct export_stacks){ 0 };
}

/* ---- instrumented call chains ----------------------------------------------------- */

/* The finished subtrees under one open call: chains leaf first, up to (not including) it. */
struct pending {
	uint64_t parent_id; /* key: the open call they belong to */
	struct export_stacks chains;
	bool used;
};

struct export_calls {
	struct export_names *names;
	export_chain_fn done;
	void *ctx;
	struct pending *slots; /* open addressing on parent_id; tombstone-free: rebuilt on growth */
	size_t mask, n;
	uint32_t *buf;         /* scratch chain */
	size_t buf_cap;
};

struct export_calls *export_calls_new(struct export_names *names, export_chain_fn done, void *ctx)
{
	struct export_calls *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	*c = (struct export_calls){ .names = names, .done = done, .ctx = ctx, .mask = 63 };
	c->slots = calloc(64, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return NULL;
	}
	return c;
}

static size_t id_hash(uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 32);
}

/* Linear probing with backward-shift deletion, so lookups never cross holes wrongly. */
static struct pending *pending_find(struct export_calls *c, uint64_t id, bool create)
{
	size_t k;

	if (create && (c->n + 1) * 2 > c->mask + 1) {
		size_t cap = (c->mask + 1) * 2;
		struct pending *ns = calloc(cap, sizeof(*ns));

		if (!ns)
			return NULL;
		for (size_t i = 0; i <= c->mask; i++) {
			if (!c->slots[i].used)
				continue;
			for (k = id_hash(c->slots[i].parent_id) & (cap - 1); ns[k].used;)
				k = (k + 1) & (cap - 1);
			ns[k] = c->slots[i];
		}
		free(c->slots);
		c->slots = ns;
		c->mask = cap - 1;
	}
	for (k = id_hash(id) & c->mask; c->slots[k].used; k = (k + 1) & c->mask)
		if (c->slots[k].parent_id == id)
			return &c->slots[k];
	if (!create)
		return NULL;
	c->slots[k] = (struct pending){ .parent_id = id, .used = true };
	c->n++;
	return &c->slots[k];
}

static void pending_remove(struct export_calls *c, struct pending *p)
{
	size_t i = (size_t)(p - c->slots), j = i;

	export_stacks_free(&p->chains);
	p->used = false;
	c->n--;
	for (;;) { /* backward shift: move later entries of the run into the hole */
		size_t home;

		j = (j + 1) & c->mask;
		if (!c->slots[j].used)
			return;
		home = id_hash(c->slots[j].parent_id) & c->mask;
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			c->slots[i] = c->slots[j];
			c->slots[j].used = false;
			i = j;
		}
	}
}

/* One chain (leaf first, ending below the call) extended by the call's id, sent on. */
static int chain_up(struct export_calls *c, const uint32_t *ids, size_t n, uint32_t self,
		    const int64_t v[EXPORT_VALUES], struct export_stacks *into)
{
	if (!grow((void **)&c->buf, &c->buf_cap, n + 1, sizeof(*c->buf)))
		return -ENOMEM;
	if (into) {
		memcpy(c->buf, ids, n * sizeof(*ids));
		c->buf[n] = self;
		return export_stacks_add(into, c->buf, n + 1, v);
	}
	c->buf[0] = self; /* a root call: hand the chain on root first */
	for (size_t i = 0; i < n; i++)
		c->buf[1 + i] = ids[n - 1 - i];
	return c->done(c->ctx, c->buf, n + 1, v[0], v[1]);
}

int export_calls_slice(struct export_calls *c, const struct trace_stream_slice *s)
{
	int64_t id = export_names_id(c->names, s->name ? s->name : "?");
	int64_t dur = s->dur > 0 ? s->dur : 0;
	int64_t own[EXPORT_VALUES] = { 1, dur, dur };
	struct pending *mine = pending_find(c, s->id, false), *up = NULL;
	int err = 0;

	if (id < 0)
		return (int)id;
	for (size_t i = 0; mine && i < mine->chains.n; i++) /* self: less the direct children */
		if (mine->chains.items[i].n == 1)
			own[1] -= mine->chains.items[i].v[2];
	if (own[1] < 0)
		own[1] = 0;
	if (s->parent >= 0) {
		up = pending_find(c, (uint64_t)s->parent, true);
		if (!up)
			return -ENOMEM;
		mine = pending_find(c, s->id, false); /* the table may have moved */
	}
	err = chain_up(c, NULL, 0, (uint32_t)id, own, up ? &up->chains : NULL);
	for (size_t i = 0; mine && !err && i < mine->chains.n; i++) {
		const struct export_stack *st = &mine->chains.items[i];

		err = chain_up(c, export_stack_ids(&mine->chains, st), st->n, (uint32_t)id, st->v,
			       up ? &up->chains : NULL);
	}
	if (mine)
		pending_remove(c, mine);
	return err;
}

void export_calls_free(struct export_calls *c)
{
	if (!c)
		return;
	for (size_t i = 0; i <= c->mask; i++)
		if (c->slots[i].used)
			export_stacks_free(&c->slots[i].chains);
	free(c->slots);
	free(c->buf);
	free(c);
}
