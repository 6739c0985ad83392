/* SPDX-License-Identifier: MIT */
/*
 * profctl top's output: the table as text (for a terminal of a given size,
 * or plain for scripts), and the terminal it is drawn on: keys read one at
 * a time, the screen redrawn in place where the terminal can (any TERM but
 * dumb), and every setting put back as it was found, whatever way top ends.
 */
#ifndef PROFD_TOP_SCREEN_H
#define PROFD_TOP_SCREEN_H

#include <stdbool.h>
#include <stdio.h>
#include <termios.h>

#include "profctl/top_figures.h"

/* How the table is laid out. */
struct top_view {
	enum top_sort sort;
	bool totals;         /* session totals instead of rates */
	bool batch;          /* plain: a time stamp, every column, whole names and numbers */
	unsigned width;      /* columns; 0: no limit */
	unsigned height;     /* lines; 0: no limit */
	int threads;         /* the target's threads (/proc); < 0: not known */
	bool ready;          /* two answers in: rates mean something */
	const char *status;  /* the last line (a message), or NULL */
};

/*
 * Writes the header lines, the column names and one line per row (as many
 * as height leaves room for) to out, each cut to width. Columns that do not
 * fit beside 16 characters of name are left out, least useful first.
 */
void top_screen_format(FILE *out, const struct top_header *h, const struct top_row *rows,
		       size_t n, const struct top_view *v);

/* A duration in three digits and its unit, no space ("850ns", "2.30us", "41.2ms", "112s"). */
const char *top_screen_duration(char *buf, size_t len, double ns);

struct top_term {
	int in, out;          /* the terminal's descriptors */
	bool raw;             /* its settings are changed: top_term_close puts them back */
	bool ansi;            /* it redraws in place (TERM is set and not dumb) */
	bool alternate;       /* the alternate screen is on */
	struct termios saved;
	unsigned width, height;
};

/*
 * Takes the terminal on in (keys) and out (the screen): keys one at a time
 * without echo (signals still come from Ctrl-C), the alternate screen and
 * no cursor where TERM allows. 0, or -ENOTTY when in or out is not one.
 */
int top_term_open(struct top_term *t, int in, int out);
/* Puts every setting back (idempotent). */
void top_term_close(struct top_term *t);
/* Back to the settings found (Ctrl-Z), and to top's again (after SIGCONT). */
void top_term_suspend(struct top_term *t);
int top_term_resume(struct top_term *t);
/* Reads the size (after SIGWINCH); keeps the last one when the terminal does not say. */
void top_term_size(struct top_term *t);
/* Draws a whole screen: in place, or (TERM=dumb) after a blank line. */
void top_term_draw(struct top_term *t, const char *text, size_t len);
/* The next key waiting, or -1. */
int top_term_key(struct top_term *t);

#endif
