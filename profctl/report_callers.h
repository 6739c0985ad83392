/* SPDX-License-Identifier: MIT */
/*
 * `profctl report --callers F`: who calls F and what F calls, from the
 * slices' parent chains as the trace stream delivers them (a slice comes
 * when it ends, so after its children). Memory follows the slices still
 * open (children wait for their parent's name), never the trace's size.
 */
#ifndef PROFD_REPORT_CALLERS_H
#define PROFD_REPORT_CALLERS_H

#include <stdint.h>
#include <stdio.h>

#include "viewer-export/trace_stream.h"

struct callers_row {
	const char *name; /* the stream's interned name, or "(no caller)" */
	uint64_t count;
	int64_t total_ns; /* of F's slices (callers) or of the callee's slices */
};

struct callers_pending; /* children waiting for their parent to end */

struct report_callers {
	const char *func;             /* F as the user wrote it */
	uint64_t slices;              /* F's slices */
	int64_t total_ns;             /* their time (ended ones) */
	struct callers_row *callers, *callees;
	size_t n_callers, n_callees, cap_callers, cap_callees;
	struct callers_pending *pending;
	size_t n_pending, cap_pending;
	size_t pending_peak;
};

void report_callers_init(struct report_callers *c, const char *func);
/* One slice, in the stream's order. 0 or -ENOMEM. */
int report_callers_slice(struct report_callers *c, const struct trace_stream_slice *s);
/* The view, callers and callees sorted by count; top 0: all rows. */
void report_callers_print(struct report_callers *c, FILE *out, size_t top);
void report_callers_free(struct report_callers *c);

#endif
