/* SPDX-License-Identifier: MIT */
/*
 * `profctl report`: the processes of a trace that holds several (a process
 * tree), one row each: pid, name, instrumented calls (the exact figures)
 * and CPU samples. A pid reused within the trace (trace_reader.h,
 * generation) is a row per process, the later ones shown as PID.GENERATION.
 */
#ifndef PROFD_REPORT_PROCS_H
#define PROFD_REPORT_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct trace_func_total;

struct report_proc {
	int32_t pid;
	uint32_t generation;
	char *name;
	uint64_t calls, samples;
};

struct report_procs {
	struct report_proc *v;
	size_t n, cap;
};

/*
 * How profctl shows the generation-th process of pid: "PID" for the first
 * (most), "PID.GENERATION" for a reused pid's later ones. Returns buf.
 */
#define REPORT_PID_LEN 24
const char *report_pid(char *buf, int32_t pid, uint32_t generation);
/* A process of the trace (again when renamed). 0 or -ENOMEM. */
int report_procs_named(struct report_procs *r, int32_t pid, uint32_t generation, const char *name);
/* A sample of pid; a totals row (its calls count when over all threads). 0 or -ENOMEM. */
int report_procs_sample(struct report_procs *r, int32_t pid, uint32_t generation);
int report_procs_total(struct report_procs *r, const struct trace_func_total *t);
/* The table, when the trace has more than one process. */
void report_procs_print(const struct report_procs *r, FILE *out);
void report_procs_free(struct report_procs *r);

#endif
