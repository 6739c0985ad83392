// SPDX-License-Identifier: MIT
/*
 * The name table of `profctl report` (report_names.h): open addressing on
 * the interned pointer, the entries in one growing array.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "profctl/report_names.h"

static size_t name_hash(const char *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32);
}

static int name_table_rehash(struct name_table *t)
{
	size_t cap = t->mask ? (t->mask + 1) * 2 : 256;
	uint32_t *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		size_t k = name_hash(t->items[i].name) & (cap - 1);

		while (slots[k])
			k = (k + 1) & (cap - 1);
		slots[k] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->mask = cap - 1;
	return 0;
}

struct name_stat *name_table_get(struct name_table *t, const char *name)
{
	size_t k;

	if ((t->n + 1) * 2 > t->mask + 1 && name_table_rehash(t) < 0)
		return NULL;
	for (k = name_hash(name) & t->mask; t->slots[k]; k = (k + 1) & t->mask)
		if (t->items[t->slots[k] - 1].name == name)
			return &t->items[t->slots[k] - 1];
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct name_stat *n = realloc(t->items, ncap * sizeof(*n));

		if (!n)
			return NULL;
		t->items = n;
		t->cap = ncap;
	}
	t->items[t->n] = (struct name_stat){ .name = name };
	t->slots[k] = (uint32_t)++t->n;
	return &t->items[t->n - 1];
}

const struct name_stat *name_table_find(const struct name_table *t, const char *name)
{
	if (!t->mask)
		return NULL;
	for (size_t k = name_hash(name) & t->mask; t->slots[k]; k = (k + 1) & t->mask)
		if (t->items[t->slots[k] - 1].name == name)
			return &t->items[t->slots[k] - 1];
	return NULL;
}

void name_table_free(struct name_table *t)
{
	free(t->items);
	free(t->slots);
}

bool report_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return true;
	p = realloc(*arr, ncap * size);
	if (!p)
		return false;
	*arr = p;
	*cap = ncap;
	return true;
}
