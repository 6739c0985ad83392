// SPDX-License-Identifier: MIT
/*
 * `profctl top PID --funcs GLOBS`: attaches as `profctl attach` does and
 * shows, live, what the instrumented functions do: calls, total and self
 * time per second, average, p50/p99 over the last interval, max, off-CPU
 * share, from profd's exact figures (top_loop.c draws them). Quitting
 * detaches and leaves the process as it was. `profctl top --session ID`
 * watches a session that runs anyway (a flight recorder, say) and leaves it
 * running. Without -o the timeline goes to an unnamed file, dropped at the
 * end: top is about the figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profctl/agent_inject.h"
#include "profctl/attach_process.h"
#include "profctl/profctl.h"
#include "profctl/session_client.h"
#include "profctl/top_loop.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

static const char top_usage[] =
	"usage: profctl top PID --funcs GLOBS [--interval S] [--batch] [-n N] [--sort KEY] [--totals] [-o FILE] [--freq HZ] [--sched on|off] [-v]\n"
	"       profctl top --session ID [--interval S] [--batch] [-n N] [--sort KEY] [--totals]\n"
	"  KEY: total (default), calls, self, avg, p99, off-cpu\n";

/* Without -o: the timeline is kept in a flight recorder this big in profd, then dropped. */
#define TOP_RING_SIZE (4ull << 20)
#define TABLE_WAIT_MS 3000

/* ---- options --------------------------------------------------------------------------- */

static int parse_number(const char *s, const char *what, double min, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max) {
		fprintf(stderr, "profctl: %s must be a number from %g to %g, not '%s'\n", what, min,
			max, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_option(int c, const char *arg, struct top_options *o, struct profile_options *p)
{
	double v;
	int k;

	switch (c) {
	case 'F': p->patterns[p->n_patterns++] = (char *)arg; return 0;
	case 'o': p->output = arg; return 0;
	case 'v': p->verbose = o->verbose = true; return 0;
	case 'b': o->batch = true; return 0;
	case 'T': o->totals = true; return 0;
	case 'i': return parse_number(arg, "--interval", 0.1, 3600, &o->interval_s);
	case 'n':
		if (parse_number(arg, "--iterations", 1, 1e9, &v))
			return -EINVAL;
		if (v != (double)(unsigned)v) {
			fprintf(stderr, "profctl: --iterations must be a whole number, not '%s'\n", arg);
			return -EINVAL;
		}
		o->iterations = (unsigned)v;
		return 0;
	case 'f':
		if (parse_number(arg, "--freq", 0, 100000, &v))
			return -EINVAL;
		p->freq = (unsigned)v;
		return 0;
	case 'S':
		if (strcmp(arg, "on") && strcmp(arg, "off")) {
			fprintf(stderr, "profctl: --sched must be on or off, not '%s'\n", arg);
			return -EINVAL;
		}
		p->sched_off = strcmp(arg, "off") == 0;
		return 0;
	case 's':
		if ((k = top_sort_parse(arg)) < 0) {
			fprintf(stderr, "profctl: --sort must be total, calls, self, avg, p99 or "
					"off-cpu, not '%s'\n", arg);
			return -EINVAL;
		}
		o->sort = (enum top_sort)k;
		return 0;
	case 'I':
		if (parse_number(arg, "--session", 1, 1e18, &v))
			return -EINVAL;
		o->session_id = (uint64_t)v;
		return 0;
	default:
		fprintf(stderr, "%s", top_usage);
		return -EINVAL;
	}
}

/* Index of the first operand (the PID), or a negative errno after saying why. */
static int parse_options(int argc, char **argv, struct top_options *o, struct profile_options *p)
{
	static const struct option longopts[] = {
		{ "funcs", required_argument, NULL, 'F' },   { "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' }, { "batch", no_argument, NULL, 'b' },
		{ "iterations", required_argument, NULL, 'n' }, { "sort", required_argument, NULL, 's' },
		{ "totals", no_argument, NULL, 'T' },        { "freq", required_argument, NULL, 'f' },
		{ "sched", required_argument, NULL, 'S' },   { "session", required_argument, NULL, 'I' },
		{ "verbose", no_argument, NULL, 'v' },       { 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	memset(p, 0, sizeof(*p));
	o->interval_s = 1.0;
	p->freq = PROFILE_DEFAULT_FREQ;
	p->patterns = calloc((size_t)argc + 1, sizeof(char *));
	if (!p->patterns)
		return -ENOMEM;
	while ((c = getopt_long(argc, argv, "o:vbn:", longopts, NULL)) != -1)
		if (parse_option(c, optarg, o, p))
			return -EINVAL;
	return optind;
}

/* ---- attached --------------------------------------------------------------------------- */

/* Where the timeline goes: -o FILE, or an unnamed file in $TMPDIR (a flight recorder's end). */
static int open_output(struct session_client *c, struct profile_options *p, const char *comm,
		       pid_t pid)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX];

	if (p->output)
		return session_client_open_output(c, comm, pid);
	if (!dir || !dir[0])
		dir = "/tmp";
	c->out_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (c->out_fd < 0) { /* a file system without O_TMPFILE */
		snprintf(path, sizeof(path), "%s/profctl-top-XXXXXX", dir);
		c->out_fd = mkostemp(path, O_CLOEXEC);
		if (c->out_fd >= 0)
			unlink(path);
	}
	if (c->out_fd < 0) {
		fprintf(stderr, "profctl: cannot make a file for the timeline in %s: %s\n", dir,
			strerror(errno));
		return -errno;
	}
	snprintf(c->output_path, sizeof(c->output_path), "(profctl top, not kept)");
	p->ring_size = TOP_RING_SIZE;
	return 0;
}

/* One LiveRequest on the session's link and its answer (the function table's counts). */
static Profd__LiveFigures *ask_once(struct session_client *c)
{
	Profd__LiveRequest req = PROFD__LIVE_REQUEST__INIT;
	struct frame_header h;
	uint8_t buf[16], *payload = NULL;
	Profd__LiveFigures *m = NULL;

	if (frame_send(c->link.fd, FRAME_LIVE_REQUEST, buf, profd__live_request__pack(&req, buf),
		       -1))
		return NULL;
	while (!m && !frame_recv(c->link.fd, &h, &payload, NULL, TABLE_WAIT_MS)) {
		if (h.type == FRAME_LIVE_FIGURES)
			m = profd__live_figures__unpack(NULL, h.length, payload);
		free(payload);
		payload = NULL;
		if (h.type == FRAME_LIVE_FIGURES || h.type == FRAME_ERROR)
			break;
	}
	return m;
}

/*
 * Whether the agent instrumented anything: its table says (the agent may
 * write jumps of its own whatever GLOBS select). When not, one line says
 * whether GLOBS matched nothing or nothing could be instrumented. A table
 * that does not come in time is not held against the session.
 */
static bool instrumented_any(struct session_client *c, const struct profile_options *p, pid_t pid,
			     const char *comm)
{
	Profd__LiveFigures *m = NULL;
	char globs[256] = "";
	bool any;

	/* the table travels on the agent's own link: give it a moment to reach profd */
	for (int tries = 0; tries < TABLE_WAIT_MS / 50; tries++) {
		if ((m = ask_once(c)) && m->tables_received)
			break;
		if (m)
			profd__live_figures__free_unpacked(m, NULL);
		m = NULL;
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
	any = !m || m->functions_instrumented > 0;
	for (size_t i = 0; !any && i < p->n_patterns; i++)
		snprintf(globs + strlen(globs), sizeof(globs) - strlen(globs), "%s%s", i ? "," : "",
			 p->patterns[i]);
	if (!any && m->functions_matched)
		fprintf(stderr, "profctl: --funcs '%s' matched %u functions in PID %d (%s), none of "
				"which could be instrumented (profctl funcs '%s' --pid %d says why)\n",
			globs, m->functions_matched, (int)pid, comm, globs, (int)pid);
	else if (!any)
		fprintf(stderr, "profctl: --funcs '%s' matched no function in PID %d (%s)\n", globs,
			(int)pid, comm);
	if (m)
		profd__live_figures__free_unpacked(m, NULL);
	return any;
}

/* Puts the bytes back (unless the target is gone or was detached), then ends the session. */
static int detach_and_finish(struct session_client *c, pid_t pid, const char *agent,
			     enum stop_cause why)
{
	char err[512] = "";
	int r = 0;

	if (why != STOP_TARGET_EXITED && why != STOP_AGENT_GONE && !attach_process_gone(pid) &&
	    attach_process_detach(pid, agent, why, err, sizeof(err)) && kill(pid, 0) == 0) {
		fprintf(stderr, "profctl: detaching from PID %d: %s\n", (int)pid, err);
		r = -EIO;
	}
	if (why == STOP_DAEMON)
		return -EPIPE;
	c->quiet = true;
	if (session_client_finish(c, 0))
		return -EPIPE;
	return r;
}

/* Attached: the loop, then what it leaves to say once the terminal is back. */
static int top_attached(struct top_options *o, struct session_client *c, pid_t pid,
			const char *agent)
{
	struct top_source src = { c->link.fd, pid };
	struct top_result res;
	int r = top_loop_run(o, &src, &res);

	if (r)
		res.why = STOP_SIGNAL;
	r = detach_and_finish(c, pid, agent, res.why) || !res.ok ? 1 : r;
	if (res.last && res.why == STOP_TARGET_EXITED)
		fputs(res.last, stdout); /* the last table stays on the terminal */
	free(res.last);
	if (res.why == STOP_TARGET_EXITED)
		fprintf(stderr, "profctl: PID %d exited\n", (int)pid);
	else if (res.why == STOP_REQUESTED)
		fprintf(stderr, "profctl: session stopped by profctl stop: detached\n");
	if (res.message[0])
		fprintf(stderr, "%s\n", res.message);
	if (c->opt->output && res.why != STOP_DAEMON)
		fprintf(stderr, "profctl: trace: %s; open it at https://ui.perfetto.dev\n",
			c->output_path);
	return r;
}

static int top_attach(struct top_options *o, struct profile_options *p, pid_t pid)
{
	struct session_client client;
	char comm[64], agent[PATH_MAX + 32], token[128], err[512] = "", exe[64];
	int patched = 0, r;
	double pause_ms = 0;

	if (attach_process_agent_path(agent, sizeof(agent)))
		return 2;
	if (attach_process_comm(pid, comm, sizeof(comm))) {
		fprintf(stderr, "profctl: no such process: %d\n", (int)pid);
		return 1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (command_is_static(exe)) {
		fprintf(stderr, "profctl: PID %d (%s) is statically linked: its functions cannot be "
				"instrumented\n", (int)pid, comm);
		return 1;
	}
	session_client_init(&client, p);
	r = open_output(&client, p, comm, pid);
	if (!r)
		r = session_client_start(&client, comm, pid, token, sizeof(token));
	if (r) {
		session_client_close(&client);
		return 1;
	}
	struct agent_inject_session sess = { client.link.fd, client.link.socket_path, token, false };
	r = agent_inject_start(pid, agent, &sess, &patched, &pause_ms, err, sizeof(err));
	if (r && attach_process_gone(pid))
		snprintf(err, sizeof(err), "PID %d exited during the attach", (int)pid);
	if (r)
		fprintf(stderr, "profctl: cannot attach to PID %d: %s\n", (int)pid, err);
	else if (!instrumented_any(&client, p, pid, comm))
		r = -ENOENT;
	if (r) {
		/* an agent that instruments nothing is taken out; the session ends either way */
		if (r == -ENOENT) {
			detach_and_finish(&client, pid, agent, STOP_SIGNAL);
		} else {
			client.quiet = true;
			session_client_finish(&client, 0);
		}
		session_client_close(&client);
		return 1;
	}
	if (o->verbose)
		fprintf(stderr, "profctl: attached to PID %d (%s), %d jumps written while stopped "
				"for %.1f ms\n", (int)pid, comm, patched, pause_ms);
	r = top_attached(o, &client, pid, agent);
	session_client_close(&client);
	return r ? 1 : 0;
}

/* --session ID: someone else's recording, watched; it goes on after q. */
static int top_session(struct top_options *o)
{
	struct top_source src = { -1, 0 };
	struct top_result res;
	int r = top_loop_run(o, &src, &res);

	if (res.last && res.why == STOP_TARGET_EXITED)
		fputs(res.last, stdout); /* the last table stays on the terminal */
	free(res.last);
	if (res.message[0])
		fprintf(stderr, "%s\n", res.message);
	return r || !res.ok ? 1 : 0;
}

int cmd_top(int argc, char **argv)
{
	struct top_options o;
	struct profile_options p;
	int first = parse_options(argc, argv, &o, &p), r;
	pid_t pid;

	if (first < 0)
		return 2;
	if (!isatty(STDOUT_FILENO))
		o.batch = true; /* a pipe or a file: plain tables, as top -b writes them */
	if (o.session_id) {
		if (first != argc || p.n_patterns || p.output) {
			fprintf(stderr, "profctl: top --session watches a running session: no PID, "
					"--funcs or -o\n%s", top_usage);
			r = 2;
		} else {
			r = top_session(&o);
		}
	} else if (first != argc - 1 || !p.n_patterns) {
		fprintf(stderr, "%s", top_usage);
		r = 2;
	} else if (profile_patterns_check(&p) || attach_process_parse_pid(argv[first], &pid)) {
		r = 2;
	} else {
		r = top_attach(&o, &p, pid);
	}
	free(p.patterns);
	return r;
}
