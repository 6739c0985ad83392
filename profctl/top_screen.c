// SPDX-License-Identifier: MIT
/*
 * profctl top's table and terminal (see top_screen.h). The escapes used are
 * the few every terminal emulator since the VT100 knows (cursor home, erase,
 * reverse video, the xterm alternate screen and cursor visibility); with
 * TERM=dumb or unset, none at all: each table follows the last.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "profctl/top_screen.h"

enum top_col { COL_CALLS, COL_TOTAL, COL_SELF, COL_AVG, COL_P50, COL_P99, COL_MAX, COL_OFF, COLS };

static const struct {
	const char *rate_name, *total_name;
	unsigned width;
	unsigned drop; /* left out in this order when the terminal is narrow; 0: never */
} cols[COLS] = {
	[COL_CALLS] = { "calls/s", "calls", 10, 0 }, [COL_TOTAL] = { "total/s", "total", 9, 0 },
	[COL_SELF] = { "self/s", "self", 9, 4 },     [COL_AVG] = { "avg", "avg", 8, 5 },
	[COL_P50] = { "p50~", "p50~", 8, 1 },        [COL_P99] = { "p99~", "p99~", 8, 6 },
	[COL_MAX] = { "max", "max", 8, 2 },          [COL_OFF] = { "off-CPU", "off-CPU", 7, 3 },
};

#define NAME_MIN 16
#define HEADER_LINES 3

const char *top_screen_duration(char *buf, size_t len, double ns)
{
	static const struct { double scale; const char *unit; } units[] = {
		{ 1e3, "us" }, { 1e6, "ms" }, { 1e9, "s" },
	};
	const char *unit = "ns";
	double v = ns;

	if (ns < 0.5) {
		snprintf(buf, len, "0");
		return buf;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && ns >= units[i].scale * 0.9995;
	     i++) {
		v = ns / units[i].scale;
		unit = units[i].unit;
	}
	/* three significant digits: 850ns, 2.30us, 41.2ms, 112ms */
	snprintf(buf, len, v < 9.995 && unit[0] != 'n' ? "%.2f%s" : v < 99.95 && unit[0] != 'n' ?
		 "%.1f%s" : "%.0f%s", v, unit);
	return buf;
}

/* A count or a rate: whole below a million (one decimal below 100 for rates), then M, G. */
static const char *count_text(char *buf, size_t len, double v, bool rate, bool batch)
{
	if (batch)
		snprintf(buf, len, rate ? "%.1f" : "%.0f", v);
	else if (rate && v < 100)
		snprintf(buf, len, "%.1f", v);
	else if (v < 1e6)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1e9)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else
		snprintf(buf, len, "%.2fG", v / 1e9);
	return buf;
}

/* Which columns this view shows: off-CPU only with scheduler states, then as the width allows. */
static void choose_columns(bool shown[COLS], const struct top_header *h, const struct top_view *v)
{
	unsigned need = NAME_MIN;

	for (int c = 0; c < COLS; c++) {
		shown[c] = c != COL_OFF || h->sched;
		need += shown[c] ? cols[c].width + 1 : 0;
	}
	for (unsigned drop = 1; v->width && !v->batch && need > v->width && drop <= 6; drop++)
		for (int c = 0; c < COLS; c++)
			if (cols[c].drop == drop && shown[c]) {
				shown[c] = false;
				need -= cols[c].width + 1;
			}
}

static void cell(char *line, size_t len, const bool shown[COLS], int c, const char *text)
{
	size_t at = strlen(line);

	if (shown[c] && at < len)
		snprintf(line + at, len - at, "%*s ", (int)cols[c].width, text);
}

static const char *time_or_dash(char *buf, size_t len, uint64_t ns, bool any, bool estimated)
{
	char d[24];

	if (!any)
		return "-";
	snprintf(buf, len, "%s%s", estimated ? "~" : "", top_screen_duration(d, sizeof(d), (double)ns));
	return buf;
}

static void format_row(char *line, size_t len, const bool shown[COLS], const struct top_row *r,
		       const struct top_view *v)
{
	char b[40];
	bool any = r->avg_ns || r->p99_ns || r->max_ns;

	line[0] = '\0';
	cell(line, len, shown, COL_CALLS, count_text(b, sizeof(b), r->calls, !v->totals, v->batch));
	cell(line, len, shown, COL_TOTAL, top_screen_duration(b, sizeof(b), r->total_ns));
	cell(line, len, shown, COL_SELF, top_screen_duration(b, sizeof(b), r->self_ns));
	cell(line, len, shown, COL_AVG, time_or_dash(b, sizeof(b), r->avg_ns, any, false));
	cell(line, len, shown, COL_P50, time_or_dash(b, sizeof(b), r->p50_ns, any, false));
	cell(line, len, shown, COL_P99, time_or_dash(b, sizeof(b), r->p99_ns, any, false));
	cell(line, len, shown, COL_MAX, time_or_dash(b, sizeof(b), r->max_ns, any, r->max_estimated));
	if (r->off_cpu >= 0)
		snprintf(b, sizeof(b), "%.0f%%", 100 * r->off_cpu);
	cell(line, len, shown, COL_OFF, r->off_cpu >= 0 ? b : "-");
}

/* Writes s cut to the view's width; names that do not fit end in "..". */
static void put_line(FILE *out, const char *s, const struct top_view *v)
{
	size_t n = strlen(s);

	if (v->width && !v->batch && n > v->width)
		fprintf(out, "%.*s..\n", v->width > 2 ? (int)v->width - 2 : 0, s);
	else
		fprintf(out, "%s\n", s);
}

static void format_header(FILE *out, const struct top_header *h, const struct top_view *v)
{
	char line[512], ev[32], dr[32], when[32] = "", threads[24] = "", procs[24] = "", cost[24];
	char over[32] = "";
	time_t now = time(NULL);
	struct tm tm;

	if (v->batch && localtime_r(&now, &tm)) /* "profctl top HH:MM:SS ": a script's anchor */
		strftime(when, sizeof(when), "profctl top %H:%M:%S ", &tm);
	if (v->threads >= 0)
		snprintf(threads, sizeof(threads), "  threads %d", v->threads);
	if (h->processes > 1)
		snprintf(procs, sizeof(procs), "  processes %u", h->processes);
	if (h->overhead >= 0)
		snprintf(over, sizeof(over), "  overhead %.1f%%", 100 * h->overhead);
	snprintf(line, sizeof(line), "%sPID %d (%s)%s%s  events %s/s  drops %s/s (%llu)%s"
		 "  profd %s/answer", when, (int)h->pid,
		 h->target ? h->target : "?", threads, procs,
		 count_text(ev, sizeof(ev), h->events_per_s, false, false),
		 count_text(dr, sizeof(dr), h->drops_per_s, false, false),
		 (unsigned long long)h->drops, over,
		 top_screen_duration(cost, sizeof(cost), (double)h->compute_ns));
	put_line(out, line, v);
	snprintf(line, sizeof(line), "%s %.2f s, by %s, %u functions called%s%s",
		 v->totals ? "totals over" : "per second over", h->interval_s,
		 top_sort_name(v->sort), h->functions_called,
		 h->functions_left_out ? " (some not listed: profd's frame limit)" : "",
		 v->batch ? "" : "  |  sort: c t s a p o  r: totals/rates  q: quit");
	put_line(out, line, v);
}

void top_screen_format(FILE *out, const struct top_header *h, const struct top_row *rows,
		       size_t n, const struct top_view *v)
{
	bool shown[COLS];
	char line[1024];
	size_t room = v->height > HEADER_LINES + 1 ? v->height - HEADER_LINES - 1 : 0;

	choose_columns(shown, h, v);
	format_header(out, h, v);
	line[0] = '\0';
	for (int c = 0; c < COLS; c++)
		cell(line, sizeof(line), shown, c, v->totals ? cols[c].total_name : cols[c].rate_name);
	snprintf(line + strlen(line), sizeof(line) - strlen(line), "function");
	put_line(out, line, v);
	if (!v->ready && !v->totals)
		fprintf(out, "(figures of the first interval come in a moment)\n");
	for (size_t i = 0; v->ready || v->totals ? i < n : false; i++) {
		if (v->height && !v->batch && i >= room)
			break;
		format_row(line, sizeof(line), shown, &rows[i], v);
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s", rows[i].name);
		put_line(out, line, v);
	}
	if (v->status)
		put_line(out, v->status, v);
}

/* ---- the terminal --------------------------------------------------------------------- */

static void put(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static int enter(struct top_term *t)
{
	struct termios raw = t->saved;

	/* keys one at a time, unechoed; Ctrl-C and Ctrl-Z still signal, output still maps \n */
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(t->in, TCSAFLUSH, &raw))
		return -errno;
	t->raw = true;
	if (t->ansi) {
		put(t->out, "\033[?1049h\033[?25l\033[H\033[2J");
		t->alternate = true;
	}
	return 0;
}

int top_term_open(struct top_term *t, int in, int out)
{
	const char *term = getenv("TERM");

	memset(t, 0, sizeof(*t));
	t->in = in;
	t->out = out;
	if (!isatty(in) || !isatty(out) || tcgetattr(in, &t->saved))
		return -ENOTTY;
	t->ansi = term && term[0] && strcmp(term, "dumb") != 0;
	t->width = 80;
	t->height = 24;
	top_term_size(t);
	return enter(t);
}

void top_term_suspend(struct top_term *t)
{
	if (t->alternate)
		put(t->out, "\033[?25h\033[?1049l");
	t->alternate = false;
	if (t->raw)
		tcsetattr(t->in, TCSAFLUSH, &t->saved);
	t->raw = false;
}

int top_term_resume(struct top_term *t)
{
	if (t->raw)
		return 0;
	top_term_size(t);
	return enter(t);
}

void top_term_close(struct top_term *t)
{
	top_term_suspend(t);
}

void top_term_size(struct top_term *t)
{
	struct winsize ws;

	if (ioctl(t->out, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		t->width = ws.ws_col;
		t->height = ws.ws_row;
	}
}

void top_term_draw(struct top_term *t, const char *text, size_t len)
{
	char *copy;

	if (!t->ansi) {
		put(t->out, "\n");
		put(t->out, text);
		return;
	}
	/* each line erased to its end as it is written, then the rest of the screen */
	copy = malloc(len * 4 + 32); /* "\033[K" before every newline */
	if (!copy)
		return;
	strcpy(copy, "\033[H");
	for (size_t i = 0, at = 3; i < len; i++) {
		if (text[i] == '\n')
			at += (size_t)sprintf(copy + at, "\033[K");
		copy[at++] = text[i];
		copy[at] = '\0';
	}
	strcat(copy, "\033[J");
	put(t->out, copy);
	free(copy);
}

int top_term_key(struct top_term *t)
{
	unsigned char c;

	return read(t->in, &c, 1) == 1 ? c : -1;
}
