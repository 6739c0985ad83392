/* SPDX-License-Identifier: MIT */
/*
 * profctl top's figures: turns profd's cumulative LiveFigures into table
 * rows, either per-second rates over the last interval (differences between
 * two answers, each thread's divided by the time that thread's figures
 * cover; percentiles from the histograms' differences) or session totals.
 * Pure: no I/O, no clock; profd's answers are checked before they are used.
 * Not thread-safe.
 */
#ifndef PROFD_TOP_FIGURES_H
#define PROFD_TOP_FIGURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profd.pb-c.h"

/* The keys the table is sorted by, largest first. */
enum top_sort {
	TOP_SORT_TOTAL = 0, /* the default */
	TOP_SORT_CALLS,
	TOP_SORT_SELF,
	TOP_SORT_AVG,
	TOP_SORT_P99,
	TOP_SORT_OFF_CPU,
	TOP_SORTS
};

/* One function's row: per second over the interval (rates) or since the attach (totals). */
struct top_row {
	uint32_t id;
	const char *name;   /* valid until the next top_figures_update */
	double calls;       /* per second, or a count */
	double total_ns;    /* per second (ns/s), or a sum */
	double self_ns;
	uint64_t avg_ns, p50_ns, p99_ns, max_ns; /* of the calls that returned in the window */
	bool max_estimated; /* rates: the interval's longest call read off the histogram */
	double off_cpu;     /* share of its time switched out, 0..1; < 0: not known */
};

/* The line above the table. */
struct top_header {
	int32_t pid;
	const char *target;     /* valid until the next top_figures_update */
	uint32_t processes;
	double interval_s;      /* between the two answers (rates); since the first (totals) */
	double events_per_s, drops_per_s;
	uint64_t drops;         /* since the attach */
	double overhead;        /* share of samples that were the profiler's own; < 0: not known */
	uint64_t compute_ns;    /* what profd spent on the last answer */
	uint32_t functions_called, functions_left_out;
	bool sched;             /* off-CPU figures are recorded */
	bool target_exited;
};

struct top_figures;

struct top_figures *top_figures_new(void);
void top_figures_free(struct top_figures *f);

/*
 * Takes profd's next answer. The first one is the baseline (rates need two);
 * one no newer than the last (profd's cached answer) changes nothing.
 * 0, -EBADMSG when the answer does not hold together (an index or bucket out
 * of range, arrays of different lengths; nothing is taken), or -ENOMEM.
 */
int top_figures_update(struct top_figures *f, const Profd__LiveFigures *m);

/* True once two answers are in: rates mean something. */
bool top_figures_ready(const struct top_figures *f);

/*
 * The rows of the last answer, rates or totals, sorted by key (ties by
 * name); *rows valid until the next update or top_figures_rows call. Returns
 * their count. *h gets the header for the same view.
 */
size_t top_figures_rows(struct top_figures *f, bool totals, enum top_sort key,
			const struct top_row **rows, struct top_header *h);

/* The key's name as the table says it ("total", "calls", ..., "off-CPU"). */
const char *top_sort_name(enum top_sort key);
/* The key for a name (as --sort takes it), or -EINVAL. */
int top_sort_parse(const char *name);

#endif
