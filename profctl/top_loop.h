/* SPDX-License-Identifier: MIT */
/*
 * profctl top's loop: every interval, one LiveRequest to profd and the
 * table redrawn from its answer; between them, keys, terminal resizes,
 * Ctrl-C and Ctrl-Z, the target's exit and profd's frames. Owns the
 * terminal while it runs and gives it back as it found it before it
 * returns. Attaching and detaching are the caller's (profctl/cmd_top.c).
 */
#ifndef PROFD_TOP_LOOP_H
#define PROFD_TOP_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profctl/attach_process.h"
#include "profctl/top_figures.h"

struct top_options {
	double interval_s;     /* between two tables */
	bool batch;            /* plain tables on stdout, no keys */
	unsigned iterations;   /* tables to print, 0: until quit */
	enum top_sort sort;
	bool totals;
	uint64_t session_id;   /* --session ID: a running session, asked on a connection per table */
	bool verbose;
};

/* Where the figures come from. */
struct top_source {
	int link_fd;           /* the attach session's link to profd; -1 with --session */
	pid_t pid;             /* the target (for its threads and its exit); 0: not known */
};

struct top_result {
	enum stop_cause why;   /* STOP_SIGNAL for q, Ctrl-C or --iterations */
	bool ok;               /* nothing went wrong (a refusal, a bad answer) */
	char message[400];     /* a line to say once the terminal is back, or "" */
	unsigned tables;       /* tables drawn */
	char *last;            /* interactive: the last table as plain text (to free), or NULL */
};

/*
 * Runs until q, Ctrl-C, --iterations, the target's exit (batch), profd's
 * end, or a stop from elsewhere. 0 or a negative errno (no terminal for an
 * interactive top, out of memory); r says why it ended.
 */
int top_loop_run(const struct top_options *o, const struct top_source *src, struct top_result *r);

#endif
