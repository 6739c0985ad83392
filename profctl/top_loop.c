// SPDX-License-Identifier: MIT
/*
 * profctl top's loop (see top_loop.h). Single-threaded: one poll over
 * profd's link, a signalfd (Ctrl-C, Ctrl-Z, resizes), the keys and the
 * target's pidfd. Signals are taken through the signalfd only, so no
 * handler ever runs with the terminal half set: whatever ends the loop, it
 * goes through top_term_close.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/mono_clock.h"
#include "profctl/profctl.h"
#include "profctl/top_loop.h"
#include "profctl/top_screen.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define ANSWER_TIMEOUT_MS 5000
/* the caller detaches all the same: the target keeps nothing of ours patched */
#define PROFD_GONE "profctl: profd exited during the session: detached; the trace may be cut short"

struct loop {
	const struct top_options *o;
	const struct top_source *src;
	struct top_result *r;
	struct top_figures *fig;
	pid_t pid;               /* the target: the attached one, or (--session) the answer's */
	struct top_term term;
	bool interactive;
	int signal_fd, pidfd;
	bool totals;
	enum top_sort sort;
	bool sched;              /* the last answer had scheduler states */
	bool waiting;            /* a request is out on the link */
	uint64_t next_ns;        /* when the next request goes */
	bool target_gone, final_asked;
	char status[200];
	bool done;
};

static void finish(struct loop *l, enum stop_cause why, bool ok, const char *message)
{
	l->done = true;
	l->r->why = why;
	l->r->ok = ok;
	if (message)
		snprintf(l->r->message, sizeof(l->r->message), "%s", message);
}

/* The target's threads now (/proc/PID/status), or -1. */
static int target_threads(pid_t pid)
{
	char path[64], line[128];
	int n = -1;
	FILE *f;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* The table as the view is now; malloc'd text (NULL when out of memory). */
static char *render(struct loop *l, bool plain, size_t *len)
{
	struct top_view v = { .sort = l->sort, .totals = l->totals, .batch = l->o->batch,
			      .threads = target_threads(l->pid),
			      .ready = top_figures_ready(l->fig),
			      .status = l->status[0] ? l->status : NULL };
	const struct top_row *rows;
	struct top_header h;
	size_t n = top_figures_rows(l->fig, l->totals, l->sort, &rows, &h);
	char *text = NULL;
	FILE *out = open_memstream(&text, len);

	if (!out)
		return NULL;
	if (l->interactive) {
		v.width = l->term.width;
		v.height = plain ? 0 : l->term.height;
	}
	if (plain && l->interactive)
		v.status = NULL; /* said on its own line after the table */
	top_screen_format(out, &h, rows, n, &v);
	fclose(out);
	return text;
}

static void draw(struct loop *l)
{
	size_t len;
	char *text;

	if (!top_figures_ready(l->fig) && !l->interactive)
		return; /* a terminal shows the header at once; a script's tables are all whole */
	text = render(l, false, &len);
	if (!text)
		return;
	if (l->interactive) {
		top_term_draw(&l->term, text, len);
	} else {
		fwrite(text, 1, len, stdout);
		fputc('\n', stdout);
		fflush(stdout);
	}
	free(text);
}

/* ---- profd's answers ------------------------------------------------------------------ */

static void take_answer(struct loop *l, const uint8_t *payload, size_t len)
{
	Profd__LiveFigures *m = profd__live_figures__unpack(NULL, len, payload);
	int err = m ? top_figures_update(l->fig, m) : -EBADMSG;

	if (err) {
		finish(l, STOP_SIGNAL, false, err == -ENOMEM ? "profctl: out of memory" :
			"profctl: profd's live figures do not hold together");
		if (m)
			profd__live_figures__free_unpacked(m, NULL);
		return;
	}
	l->sched = m->sched;
	if (l->src->pid <= 0)
		l->pid = m->target_pid; /* --session: for its threads */
	if (m->target_exited && !l->target_gone) {
		l->target_gone = l->final_asked = true; /* these are its last figures */
	}
	profd__live_figures__free_unpacked(m, NULL);
	if (l->target_gone)
		snprintf(l->status, sizeof(l->status), "PID %d exited: these are its last figures%s",
			 (int)l->pid, l->interactive ? "; q quits" : "");
	draw(l);
	if (top_figures_ready(l->fig))
		l->r->tables++;
	if (l->target_gone && !l->interactive)
		finish(l, STOP_TARGET_EXITED, true, NULL);
	else if (l->o->iterations && l->r->tables >= l->o->iterations)
		finish(l, STOP_SIGNAL, true, NULL);
}

static void take_frame(struct loop *l, uint32_t type, const uint8_t *payload, size_t len)
{
	enum stop_cause why;

	if (type == FRAME_LIVE_FIGURES) {
		take_answer(l, payload, len);
		return;
	}
	if (type == FRAME_ERROR && l->src->link_fd < 0 && l->r->tables) {
		/* --session: the session it watched is no more (or no longer its to see) */
		char msg[64];

		snprintf(msg, sizeof(msg), "profctl: session %llu ended",
			 (unsigned long long)l->o->session_id);
		finish(l, STOP_TARGET_EXITED, true, msg);
		return;
	}
	if (type == FRAME_ERROR) {
		Profd__ErrorReply *e = profd__error_reply__unpack(NULL, len, payload);
		char msg[300];

		snprintf(msg, sizeof(msg), "profctl: profd refused: %s",
			 e && e->message ? e->message : "?");
		if (e)
			profd__error_reply__free_unpacked(e, NULL);
		finish(l, STOP_SIGNAL, false, msg);
		return;
	}
	why = attach_process_frame(type, l->src->pid, l->pidfd);
	if (why == STOP_TARGET_EXITED)
		l->target_gone = true; /* its last figures are in: ask for them */
	else if (why != STOP_NONE)
		finish(l, why, why != STOP_AGENT_GONE, why == STOP_AGENT_GONE ?
			"profctl: the target was detached from elsewhere" : NULL);
}

/* --session: one connection per request, as profctl status does. */
static void ask_session(struct loop *l, const uint8_t *req, size_t n)
{
	struct daemon_link link;
	struct frame_header h;
	uint8_t *payload = NULL;
	char msg[sizeof(link.socket_path) + 64];
	int err = daemon_link_connect(&link);

	if (!err)
		err = frame_send(link.fd, FRAME_LIVE_REQUEST, req, n, -1);
	if (!err)
		err = frame_recv(link.fd, &h, &payload, NULL, ANSWER_TIMEOUT_MS);
	daemon_link_close(&link);
	if (err) {
		snprintf(msg, sizeof(msg), "profctl: profd at %s %s: %s", link.socket_path,
			 l->r->tables ? "went away" : "did not answer", strerror(-err));
		finish(l, STOP_DAEMON, false, msg);
		return;
	}
	take_frame(l, h.type, payload, h.length);
	free(payload);
}

static void request(struct loop *l)
{
	Profd__LiveRequest req = PROFD__LIVE_REQUEST__INIT;
	uint8_t buf[32];
	size_t n;

	req.session_id = l->o->session_id;
	n = profd__live_request__pack(&req, buf);
	if (l->src->link_fd < 0) {
		ask_session(l, buf, n);
	} else if (frame_send(l->src->link_fd, FRAME_LIVE_REQUEST, buf, n, -1)) {
		finish(l, STOP_DAEMON, false, PROFD_GONE);
	} else {
		l->waiting = true;
	}
}

static void read_link(struct loop *l)
{
	struct frame_header h;
	uint8_t *payload = NULL;

	if (frame_recv(l->src->link_fd, &h, &payload, NULL, ANSWER_TIMEOUT_MS)) {
		finish(l, STOP_DAEMON, false, PROFD_GONE);
		free(payload);
		return;
	}
	if (h.type == FRAME_LIVE_FIGURES || h.type == FRAME_ERROR)
		l->waiting = false;
	take_frame(l, h.type, payload, h.length);
	free(payload);
}

/* ---- keys and signals ----------------------------------------------------------------- */

static void key(struct loop *l, int c)
{
	static const char keys[] = "tcsapo"; /* in enum top_sort's order */
	const char *k = c > 0 ? strchr(keys, c) : NULL;

	l->status[0] = l->target_gone ? l->status[0] : '\0';
	if (c == 'q' || c == 'Q') {
		finish(l, STOP_SIGNAL, true, NULL);
		return;
	}
	if (c == 'r')
		l->totals = !l->totals;
	else if (k && *k == 'o' && !l->sched)
		snprintf(l->status, sizeof(l->status), "no scheduler states in this session: "
			 "off-CPU time is not known");
	else if (k)
		l->sort = (enum top_sort)(k - keys);
	else if (c != ' ' && c != 12 /* Ctrl-L */)
		return;
	draw(l);
}

static void take_signal(struct loop *l)
{
	struct signalfd_siginfo si;

	if (read(l->signal_fd, &si, sizeof(si)) != sizeof(si))
		return;
	switch (si.ssi_signo) {
	case SIGWINCH: /* a batch table is as wide as it is: nothing to redo */
		if (l->interactive) {
			top_term_size(&l->term);
			draw(l);
		}
		break;
	case SIGTSTP: /* Ctrl-Z: the shell gets its terminal back as it lent it */
		top_term_suspend(&l->term);
		kill(getpid(), SIGSTOP);
		__attribute__((fallthrough)); /* running again */
	case SIGCONT:
		if (l->interactive && !top_term_resume(&l->term))
			draw(l);
		break;
	default: /* SIGINT, SIGTERM, SIGHUP */
		finish(l, STOP_SIGNAL, true, NULL);
	}
}

/* ---- the loop -------------------------------------------------------------------------- */

static int loop_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGWINCH);
	sigaddset(&set, SIGTSTP);
	sigaddset(&set, SIGCONT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* One wait: whatever is ready is handled; the next request goes when its time comes. */
static void loop_once(struct loop *l)
{
	uint64_t now = mono_clock_ns();
	int timeout = l->next_ns > now ? (int)((l->next_ns - now) / 1000000 + 1) : 0;
	struct pollfd fds[4] = { { l->signal_fd, POLLIN, 0 }, { l->src->link_fd, POLLIN, 0 },
				 { l->interactive ? 0 : -1, POLLIN, 0 },
				 { l->target_gone ? -1 : l->pidfd, POLLIN, 0 } };

	if (l->waiting || (l->target_gone && l->final_asked))
		timeout = 1000; /* the answer, or a key, comes first */
	if (poll(fds, 4, timeout) < 0 && errno != EINTR)
		return finish(l, STOP_SIGNAL, false, "profctl: poll failed");
	if (fds[0].revents)
		take_signal(l);
	if (!l->done && fds[2].revents)
		for (int c; !l->done && (c = top_term_key(&l->term)) >= 0;)
			key(l, c);
	if (!l->done && fds[1].revents)
		read_link(l);
	/*
	 * Kept open, no longer polled (it stays readable): an agent-gone notice
	 * after it is told from a detach by it (attach_process_frame), where
	 * kill() would find the zombie not yet reaped and say "detached".
	 */
	if (!l->done && fds[3].revents)
		l->target_gone = true;
	if (l->done || l->waiting)
		return;
	if (l->target_gone && !l->final_asked) { /* its last figures, then the end (batch) */
		l->final_asked = true;
		request(l);
	} else if (!l->target_gone && mono_clock_ns() >= l->next_ns) {
		l->next_ns += (uint64_t)(l->o->interval_s * 1e9);
		request(l);
	}
}

int top_loop_run(const struct top_options *o, const struct top_source *src, struct top_result *r)
{
	struct loop l = { .o = o, .src = src, .r = r, .totals = o->totals, .sort = o->sort,
			  .pidfd = -1 };
	size_t len;

	memset(r, 0, sizeof(*r));
	l.fig = top_figures_new();
	l.signal_fd = loop_signals();
	if (!l.fig || l.signal_fd < 0) {
		top_figures_free(l.fig);
		return -ENOMEM;
	}
	l.interactive = !o->batch && top_term_open(&l.term, 0, 1) == 0;
	l.pid = src->pid;
	if (src->pid > 0)
		l.pidfd = (int)syscall(SYS_pidfd_open, src->pid, 0);
	l.next_ns = mono_clock_ns(); /* the first answer is the baseline */
	while (!l.done)
		loop_once(&l);
	if (l.interactive && top_figures_ready(l.fig))
		r->last = render(&l, true, &len);
	top_term_close(&l.term);
	if (l.pidfd >= 0)
		close(l.pidfd);
	close(l.signal_fd);
	top_figures_free(l.fig);
	return 0;
}
