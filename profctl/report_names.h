/* SPDX-License-Identifier: MIT */
/*
 * `profctl report`'s per-name counters: a table keyed by the trace stream's
 * interned name pointers (one pointer per distinct name).
 */
#ifndef PROFD_REPORT_NAMES_H
#define PROFD_REPORT_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct name_stat {
	const char *name;      /* the stream's interned string: one pointer per name */
	uint64_t count;        /* slices, or samples with this leaf */
	int64_t total_ns;
	uint64_t self_samples; /* CPU samples taken while this was the innermost call */
};

struct name_table {
	struct name_stat *items;
	size_t n, cap;
	uint32_t *slots;       /* index + 1, open addressing on the pointer */
	size_t mask;
};

/* The entry of name (created at zero); NULL on ENOMEM. */
struct name_stat *name_table_get(struct name_table *t, const char *name);
/* The entry of name, NULL if none. */
const struct name_stat *name_table_find(const struct name_table *t, const char *name);
void name_table_free(struct name_table *t);

/* Grows *arr (elements of `size` bytes, doubling) to hold n + 1; false on ENOMEM. */
bool report_grow(void **arr, size_t *cap, size_t n, size_t size);

#endif
