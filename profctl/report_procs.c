// SPDX-License-Identifier: MIT
/* `profctl report`'s processes table (see profctl/report_procs.h). */
#include "profctl/report_procs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/trace_reader.h"

const char *report_pid(char *buf, int32_t pid, uint32_t generation)
{
	if (generation)
		snprintf(buf, REPORT_PID_LEN, "%d.%u", (int)pid, generation);
	else
		snprintf(buf, REPORT_PID_LEN, "%d", (int)pid);
	return buf;
}

/* The process's row, made on first sight (a few per trace: a linear search). */
static struct report_proc *proc_row(struct report_procs *r, int32_t pid, uint32_t generation)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].pid == pid && r->v[i].generation == generation)
			return &r->v[i];
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct report_proc *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n] = (struct report_proc){ .pid = pid, .generation = generation };
	return &r->v[r->n++];
}

int report_procs_named(struct report_procs *r, int32_t pid, uint32_t generation, const char *name)
{
	struct report_proc *p = pid > 0 ? proc_row(r, pid, generation) : NULL;
	char *copy;

	if (pid <= 0)
		return 0;
	if (!p || !(copy = strdup(name ? name : "")))
		return -ENOMEM;
	free(p->name);
	p->name = copy;
	return 0;
}

int report_procs_sample(struct report_procs *r, int32_t pid, uint32_t generation)
{
	struct report_proc *p = pid > 0 ? proc_row(r, pid, generation) : NULL;

	if (p)
		p->samples++;
	return pid > 0 && !p ? -ENOMEM : 0;
}

int report_procs_total(struct report_procs *r, const struct trace_func_total *t)
{
	struct report_proc *p = t->pid > 0 && t->tid == 0 ? proc_row(r, t->pid, t->generation) : NULL;

	if (p)
		p->calls += t->calls;
	return t->pid > 0 && t->tid == 0 && !p ? -ENOMEM : 0;
}

void report_procs_print(const struct report_procs *r, FILE *out)
{
	if (r->n < 2)
		return;
	fprintf(out, "\nprocesses (%zu):\n%10s %12s %10s  %s\n", r->n, "pid", "calls", "samples",
		"name");
	for (size_t i = 0; i < r->n; i++) {
		char pid[REPORT_PID_LEN];

		fprintf(out, "%10s %12" PRIu64 " %10" PRIu64 "  %s\n",
			report_pid(pid, r->v[i].pid, r->v[i].generation), r->v[i].calls,
			r->v[i].samples, r->v[i].name ? r->v[i].name : "?");
	}
}

void report_procs_free(struct report_procs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].name);
	free(r->v);
	*r = (struct report_procs){ 0 };
}
