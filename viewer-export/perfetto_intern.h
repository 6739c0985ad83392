/* SPDX-License-Identifier: MIT */
/*
 * Interning tables shared by the Perfetto writer and the trace reader, and
 * the tiny protobuf encoder the writer uses. Internal to viewer-export/:
 * nothing here is part of profd's interface. Tables are open addressing on
 * a stored 32-bit hash, grow by doubling, and never shrink; indexes they hand
 * out are dense from 0 (the writer's iid is index + 1). No global state.
 */
#ifndef PROFD_PERFETTO_INTERN_H
#define PROFD_PERFETTO_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- hashing ------------------------------------------------------------ */

uint32_t pw_hash(const void *data, size_t len);

/* ---- pw_index: hash -> dense entry index (the entries live elsewhere) ---- */

struct pw_slot {
	uint32_t hash;
	uint32_t ref; /* entry index + 1; 0 = empty */
};

struct pw_index {
	struct pw_slot *slots;
	uint32_t mask;  /* capacity - 1, capacity a power of two (0 before first use) */
	uint32_t count;
};

typedef bool (*pw_eq_fn)(const void *ctx, uint32_t idx, const void *key);

/* Makes room for one more entry (call before pw_index_lookup + insert). 0 or -ENOMEM. */
int pw_index_reserve(struct pw_index *ix);
/*
 * Finds the entry with `hash` for which eq(ctx, idx, key) holds. Returns its
 * slot (ref != 0) or the empty slot where it belongs (ref == 0), valid until
 * the next pw_index_reserve. Requires a prior successful pw_index_reserve.
 */
struct pw_slot *pw_index_lookup(const struct pw_index *ix, uint32_t hash, pw_eq_fn eq,
				const void *ctx, const void *key);
static inline void pw_index_fill(struct pw_index *ix, struct pw_slot *slot, uint32_t hash,
				 uint32_t idx)
{
	slot->hash = hash;
	slot->ref = idx + 1;
	ix->count++;
}
void pw_index_clear(struct pw_index *ix);
void pw_index_free(struct pw_index *ix);

/* ---- pw_table: fixed-size entries whose first key_size bytes are the key ---- */

struct pw_table {
	struct pw_index ix;
	uint8_t *ents;
	size_t ent_size, key_size;
	uint32_t n, cap;
};

void pw_table_init(struct pw_table *t, size_t ent_size, size_t key_size);
/*
 * Returns the entry whose key equals `key`, creating it (key copied, rest
 * zeroed, *is_new = true) when absent. The pointer is valid until the next
 * insertion. NULL with errno = ENOMEM on allocation failure.
 */
void *pw_table_get(struct pw_table *t, const void *key, bool *is_new);
/* Lookup only: NULL when absent. */
void *pw_table_find(const struct pw_table *t, const void *key);
static inline void *pw_table_at(const struct pw_table *t, uint32_t idx)
{
	return t->ents + (size_t)idx * t->ent_size;
}
static inline uint32_t pw_table_index(const struct pw_table *t, const void *ent)
{
	return (uint32_t)(((const uint8_t *)ent - t->ents) / t->ent_size);
}
void pw_table_clear(struct pw_table *t);
void pw_table_free(struct pw_table *t);

/* ---- pw_strtab: interned byte strings, stored back to back in one pool ---- */

struct pw_str {
	size_t off;
	uint32_t len;
	uint32_t hash;
	uint64_t aux; /* caller's per-entry value (e.g. a track uuid) */
};

struct pw_strtab {
	struct pw_index ix;
	struct pw_str *ents;
	uint8_t *pool; /* every entry is NUL-terminated in the pool */
	size_t pool_len, pool_cap;
	uint32_t n, cap;
};

/*
 * Returns the index of `data`, adding it when absent (*is_new = true).
 * Returns -ENOMEM or -E2BIG (len >= 4 GiB) on failure.
 */
int64_t pw_strtab_intern(struct pw_strtab *s, const void *data, size_t len, bool *is_new);
static inline const uint8_t *pw_strtab_data(const struct pw_strtab *s, uint32_t idx)
{
	return s->pool + s->ents[idx].off;
}
void pw_strtab_free(struct pw_strtab *s);

/* ---- pw_vec: a growable array of u32 ------------------------------------- */

struct pw_vec {
	uint32_t *v;
	size_t n, cap;
};

int pw_vec_push(struct pw_vec *v, uint32_t x);
void pw_vec_free(struct pw_vec *v);

/* ---- pwb: protobuf encoder into a growable scratch buffer ----------------- */

enum { PWB_VARINT = 0, PWB_I64 = 1, PWB_LEN = 2, PWB_I32 = 5 };

struct pwb {
	uint8_t *p;
	size_t len, cap;
	bool oom; /* sticky: once set, writes are dropped and the message is invalid */
};

bool pwb_grow(struct pwb *b, size_t need);

static inline unsigned pwb_varint_size(uint64_t v)
{
	unsigned n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *pwb_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline void pwb_varint(struct pwb *b, uint64_t v)
{
	if (b->cap - b->len < 10 && !pwb_grow(b, 10))
		return;
	b->len = (size_t)(pwb_put_varint(b->p + b->len, v) - b->p);
}

static inline void pwb_tag(struct pwb *b, uint32_t field, unsigned wire_type)
{
	pwb_varint(b, ((uint64_t)field << 3) | wire_type);
}

static inline void pwb_uint(struct pwb *b, uint32_t field, uint64_t v)
{
	pwb_tag(b, field, PWB_VARINT);
	pwb_varint(b, v);
}

void pwb_bytes(struct pwb *b, uint32_t field, const void *data, size_t len);
/* Bytes already encoded (whole fields), appended as they are. */
static inline void pwb_raw(struct pwb *b, const void *data, size_t len)
{
	if (b->cap - b->len < len && !pwb_grow(b, len))
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
}
static inline void pwb_str(struct pwb *b, uint32_t field, const char *s)
{
	pwb_bytes(b, field, s, strlen(s));
}
/* Opens a length-delimited field; returns the mark to give pwb_close. */
size_t pwb_open(struct pwb *b, uint32_t field);
/* Writes the length of the field opened at `mark` (moves its body if needed). */
void pwb_close(struct pwb *b, size_t mark);
void pwb_free(struct pwb *b);

#endif
