/* SPDX-License-Identifier: MIT */
/*
 * Interning tables (hash index, fixed-key table, byte-string table) and the
 * scratch protobuf encoder used by viewer-export/. Plain data structures: no
 * I/O, no logging, no global state; every failure is -ENOMEM (or errno ENOMEM).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/perfetto_intern.h"

/* ---- hashing ------------------------------------------------------------ */

static inline uint64_t pw_mix(uint64_t h, uint64_t v)
{
	h ^= v * 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

uint32_t pw_hash(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t h = 0x243f6a8885a308d3ull ^ len, v;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&v, p, 8);
		h = pw_mix(h, v);
	}
	if (len) {
		v = 0;
		memcpy(&v, p, len);
		h = pw_mix(h, v ^ ((uint64_t)len << 56));
	}
	h = pw_mix(h, 0x94d049bb133111ebull);
	return (uint32_t)(h ^ (h >> 32));
}

/* ---- pw_index ------------------------------------------------------------ */

static int pw_index_rehash(struct pw_index *ix, uint32_t new_cap)
{
	struct pw_slot *slots = calloc(new_cap, sizeof(*slots));
	uint32_t i, j, mask = new_cap - 1;

	if (!slots)
		return -ENOMEM;
	for (i = 0; ix->slots && i <= ix->mask; i++) {
		if (!ix->slots[i].ref)
			continue;
		for (j = ix->slots[i].hash & mask; slots[j].ref; j = (j + 1) & mask)
			;
		slots[j] = ix->slots[i];
	}
	free(ix->slots);
	ix->slots = slots;
	ix->mask = mask;
	return 0;
}

int pw_index_reserve(struct pw_index *ix)
{
	uint64_t cap = ix->slots ? (uint64_t)ix->mask + 1 : 0;

	/* keep the load factor under 3/4 so probe chains stay short */
	if ((uint64_t)(ix->count + 1) * 4 <= cap * 3)
		return 0;
	if (cap >= (1u << 31))
		return -ENOMEM;
	return pw_index_rehash(ix, cap ? (uint32_t)cap * 2 : 64);
}

struct pw_slot *pw_index_lookup(const struct pw_index *ix, uint32_t hash, pw_eq_fn eq,
				const void *ctx, const void *key)
{
	uint32_t i;

	for (i = hash & ix->mask;; i = (i + 1) & ix->mask) {
		struct pw_slot *s = &ix->slots[i];

		if (!s->ref)
			return s;
		if (s->hash == hash && eq(ctx, s->ref - 1, key))
			return s;
	}
}

void pw_index_clear(struct pw_index *ix)
{
	if (ix->slots)
		memset(ix->slots, 0, ((size_t)ix->mask + 1) * sizeof(*ix->slots));
	ix->count = 0;
}

void pw_index_free(struct pw_index *ix)
{
	free(ix->slots);
	memset(ix, 0, sizeof(*ix));
}

/* ---- pw_table ------------------------------------------------------------ */

void pw_table_init(struct pw_table *t, size_t ent_size, size_t key_size)
{
	memset(t, 0, sizeof(*t));
	t->ent_size = ent_size;
	t->key_size = key_size;
}

static bool pw_table_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pw_table *t = ctx;

	return memcmp(pw_table_at(t, idx), key, t->key_size) == 0;
}

void *pw_table_find(const struct pw_table *t, const void *key)
{
	const struct pw_slot *s;

	if (!t->n)
		return NULL;
	s = pw_index_lookup(&t->ix, pw_hash(key, t->key_size), pw_table_eq, t, key);
	return s->ref ? pw_table_at(t, s->ref - 1) : NULL;
}

static int pw_table_grow(struct pw_table *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 16;
	uint8_t *ents;

	if (t->cap >= (1u << 30))
		return -ENOMEM;
	ents = realloc(t->ents, (size_t)cap * t->ent_size);
	if (!ents)
		return -ENOMEM;
	t->ents = ents;
	t->cap = cap;
	return 0;
}

void *pw_table_get(struct pw_table *t, const void *key, bool *is_new)
{
	uint32_t hash = pw_hash(key, t->key_size);
	struct pw_slot *s;
	uint8_t *e;

	*is_new = false;
	if (pw_index_reserve(&t->ix) < 0 || (t->n == t->cap && pw_table_grow(t) < 0)) {
		errno = ENOMEM;
		return NULL;
	}
	s = pw_index_lookup(&t->ix, hash, pw_table_eq, t, key);
	if (s->ref)
		return pw_table_at(t, s->ref - 1);
	e = pw_table_at(t, t->n);
	memset(e, 0, t->ent_size);
	memcpy(e, key, t->key_size);
	pw_index_fill(&t->ix, s, hash, t->n++);
	*is_new = true;
	return e;
}

void pw_table_clear(struct pw_table *t)
{
	pw_index_clear(&t->ix);
	t->n = 0;
}

void pw_table_free(struct pw_table *t)
{
	pw_index_free(&t->ix);
	free(t->ents);
	t->ents = NULL;
	t->n = t->cap = 0;
}

/* ---- pw_strtab ----------------------------------------------------------- */

struct pw_strkey {
	const void *data;
	size_t len;
};

static bool pw_strtab_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct pw_strtab *s = ctx;
	const struct pw_strkey *k = key;

	return s->ents[idx].len == k->len && memcmp(pw_strtab_data(s, idx), k->data, k->len) == 0;
}

static int pw_strtab_room(struct pw_strtab *s, size_t len)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 64;
		struct pw_str *ents;

		if (s->cap >= (1u << 30))
			return -ENOMEM;
		ents = realloc(s->ents, cap * sizeof(*ents));
		if (!ents)
			return -ENOMEM;
		s->ents = ents;
		s->cap = cap;
	}
	if (s->pool_cap - s->pool_len < len + 1) {
		size_t cap = s->pool_cap ? s->pool_cap : 1024;
		uint8_t *pool;

		while (cap - s->pool_len < len + 1)
			cap *= 2;
		pool = realloc(s->pool, cap);
		if (!pool)
			return -ENOMEM;
		s->pool = pool;
		s->pool_cap = cap;
	}
	return 0;
}

int64_t pw_strtab_intern(struct pw_strtab *s, const void *data, size_t len, bool *is_new)
{
	struct pw_strkey key = { data, len };
	uint32_t hash = pw_hash(data, len);
	struct pw_slot *slot;
	struct pw_str *e;

	*is_new = false;
	if (len >= UINT32_MAX)
		return -E2BIG;
	if (pw_index_reserve(&s->ix) < 0 || pw_strtab_room(s, len) < 0)
		return -ENOMEM;
	slot = pw_index_lookup(&s->ix, hash, pw_strtab_eq, s, &key);
	if (slot->ref)
		return slot->ref - 1;
	e = &s->ents[s->n];
	e->off = s->pool_len;
	e->len = (uint32_t)len;
	e->hash = hash;
	e->aux = 0;
	if (len)
		memcpy(s->pool + s->pool_len, data, len);
	s->pool[s->pool_len + len] = 0;
	s->pool_len += len + 1;
	pw_index_fill(&s->ix, slot, hash, s->n);
	*is_new = true;
	return s->n++;
}

void pw_strtab_free(struct pw_strtab *s)
{
	pw_index_free(&s->ix);
	free(s->ents);
	free(s->pool);
	memset(s, 0, sizeof(*s));
}

/* ---- pw_vec -------------------------------------------------------------- */

int pw_vec_push(struct pw_vec *v, uint32_t x)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		uint32_t *p = realloc(v->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->v = p;
		v->cap = cap;
	}
	v->v[v->n++] = x;
	return 0;
}

void pw_vec_free(struct pw_vec *v)
{
	free(v->v);
	memset(v, 0, sizeof(*v));
}

/* ---- pwb ----------------------------------------------------------------- */

bool pwb_grow(struct pwb *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 4096;
	uint8_t *p;

	if (b->oom)
		return false;
	while (cap - b->len < need) {
		if (cap > SIZE_MAX / 2)
			goto err_oom;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p)
		goto err_oom;
	b->p = p;
	b->cap = cap;
	return true;
err_oom:
	b->oom = true;
	return false;
}

void pwb_bytes(struct pwb *b, uint32_t field, const void *data, size_t len)
{
	pwb_tag(b, field, PWB_LEN);
	pwb_varint(b, len);
	if (b->cap - b->len < len && !pwb_grow(b, len))
		return;
	if (len)
		memcpy(b->p + b->len, data, len);
	b->len += len;
}

size_t pwb_open(struct pwb *b, uint32_t field)
{
	pwb_tag(b, field, PWB_LEN);
	if (b->cap - b->len < 1 && !pwb_grow(b, 1))
		return b->len;
	b->p[b->len] = 0; /* one length byte reserved: most bodies are < 128 bytes */
	return b->len++;
}

void pwb_close(struct pwb *b, size_t mark)
{
	size_t body, extra;

	if (b->oom)
		return;
	body = b->len - mark - 1;
	extra = pwb_varint_size(body) - 1;
	if (extra) {
		if (b->cap - b->len < extra && !pwb_grow(b, extra))
			return;
		memmove(b->p + mark + 1 + extra, b->p + mark + 1, body);
		b->len += extra;
	}
	pwb_put_varint(b->p + mark, body);
}

void pwb_free(struct pwb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}
