// SPDX-License-Identifier: MIT
/*
 * `profctl run`: starts CMD stopped before exec, sets up the session with
 * profd (output descriptor passed, sampling armed on exec), releases CMD with
 * the agent preloaded, waits for it, and prints the session summary on
 * stderr. CMD's stdin/stdout/stderr are its own; its exit status is ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/func_filter.h"
#include "profctl/profctl.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define REPLY_TIMEOUT_MS 10000
#define SUMMARY_TIMEOUT_MS 60000
#define DEFAULT_FREQ 999

struct run_options {
	char **patterns;
	size_t n_patterns;
	unsigned freq;
	unsigned duration_s;
	const char *output;
	bool verbose;
	char **argv;      /* CMD ARGS..., NULL-terminated */
};

struct run_state {
	struct run_options opt;
	struct daemon_link link;
	char output_path[PATH_MAX];
	char agent_path[PATH_MAX + 32];
	pid_t child;
	int go_pipe;      /* write end: the child waits on it before exec */
	int exec_error_pipe; /* read end: errno of a failed exec, or EOF on success */
	int out_fd;
};

static void run_usage(void)
{
	fprintf(stderr, "usage: profctl run [--funcs GLOBS] [--freq HZ] [-o FILE] [--duration S] "
			"[-v] -- CMD [ARGS...]\n");
}

static int parse_unsigned(const char *s, const char *what, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > max || s[0] == '-') {
		fprintf(stderr, "profctl: %s must be a whole number from 0 to %u, not '%s'\n", what,
			max, s);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_run_options(int argc, char **argv, struct run_options *o)
{
	static const struct option longopts[] = {
		{ "funcs", required_argument, NULL, 'F' }, { "freq", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },      { 0 },
	};
	int c;

	o->freq = DEFAULT_FREQ;
	o->patterns = calloc((size_t)argc + 1, sizeof(char *));
	if (!o->patterns)
		return -ENOMEM;
	while ((c = getopt_long(argc, argv, "+o:v", longopts, NULL)) != -1) {
		switch (c) {
		case 'F': o->patterns[o->n_patterns++] = optarg; break;
		case 'f': if (parse_unsigned(optarg, "--freq", 100000, &o->freq)) return -EINVAL; break;
		case 'd': if (parse_unsigned(optarg, "--duration", 86400 * 365, &o->duration_s)) return -EINVAL; break;
		case 'o': o->output = optarg; break;
		case 'v': o->verbose = true; break;
		default: run_usage(); return -EINVAL;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "profctl: run needs a command after '--'\n");
		run_usage();
		return -EINVAL;
	}
	o->argv = argv + optind;
	return 0;
}

/* Like execvp's search, so "command not found" is said before anything starts. */
static int find_command(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL;
	int found = 0;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(cmd, X_OK) == 0 ? 0 : -errno;
	}
	copy = strdup(path && path[0] ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		struct stat st;

		snprintf(out, len, "%s/%s", dir[0] ? dir : ".", cmd);
		found = access(out, X_OK) == 0 && stat(out, &st) == 0 && S_ISREG(st.st_mode);
	}
	free(copy);
	return found ? 0 : -ENOENT;
}

static int read_token(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);

		if (r <= 0 || buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return n > 0 ? 0 : -EPIPE;
}

static void set_preload(const char *agent)
{
	const char *old = getenv("LD_PRELOAD");
	size_t len = strlen(agent) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(len);

	if (!v)
		return;
	snprintf(v, len, "%s%s%s", agent, old && old[0] ? ":" : "", old ? old : "");
	setenv("LD_PRELOAD", v, 1);
	free(v);
}

/*
 * In the child: wait for the go (two lines: the session token, or "-" for no
 * agent, and the daemon's socket path, both known only after the fork), then
 * become CMD.
 */
static void child_main(struct run_state *rs, int go_read, int err_write)
{
	char token[128], socket_path[sizeof(rs->link.socket_path)];
	int err;

	if (read_token(go_read, token, sizeof(token)) ||
	    read_token(go_read, socket_path, sizeof(socket_path)))
		_exit(127); /* profctl gave up before starting us */
	close(go_read);
	if (strcmp(token, "-") != 0) {
		set_preload(rs->agent_path);
		setenv("PROFD_AGENT_SOCKET", socket_path, 1);
		setenv("PROFD_AGENT_TOKEN", token, 1);
	}
	execvp(rs->opt.argv[0], rs->opt.argv);
	err = errno;
	if (write(err_write, &err, sizeof(err)) != sizeof(err))
		_exit(127);
	_exit(127);
}

static int fork_target(struct run_state *rs)
{
	int go[2], exec_err[2];

	if (pipe2(go, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC))
		return -errno;
	rs->child = fork();
	if (rs->child < 0)
		return -errno;
	if (rs->child == 0) {
		close(go[1]);
		close(exec_err[0]);
		child_main(rs, go[0], exec_err[1]);
	}
	close(go[0]);
	close(exec_err[1]);
	rs->go_pipe = go[1];
	rs->exec_error_pipe = exec_err[0];
	return 0;
}

static int open_output(struct run_state *rs)
{
	const char *base = strrchr(rs->opt.argv[0], '/');

	base = base ? base + 1 : rs->opt.argv[0];
	if (rs->opt.output)
		snprintf(rs->output_path, sizeof(rs->output_path), "%s", rs->opt.output);
	else
		snprintf(rs->output_path, sizeof(rs->output_path), "profd-%s-%d.pftrace", base,
			 (int)rs->child);
	rs->out_fd = open(rs->output_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (rs->out_fd < 0) {
		fprintf(stderr, "profctl: cannot write the trace to %s: %s\n", rs->output_path,
			strerror(errno));
		return -errno;
	}
	return 0;
}

/* Waits for one reply frame of the expected type; prints the daemon's error otherwise. */
static int expect_reply(struct run_state *rs, uint32_t want, uint8_t **payload, uint32_t *len,
			int timeout_ms)
{
	struct frame_header h;
	int err = frame_recv(rs->link.fd, &h, payload, NULL, timeout_ms);

	if (err < 0) {
		fprintf(stderr, "profctl: profd did not answer: %s\n", strerror(-err));
		return err;
	}
	if (h.type == want) {
		*len = h.length;
		return 0;
	}
	if (h.type == FRAME_ERROR) {
		Profd__ErrorReply *e = profd__error_reply__unpack(NULL, h.length, *payload);

		fprintf(stderr, "profctl: profd refused: %s\n", e && e->message ? e->message : "?");
		if (e)
			profd__error_reply__free_unpacked(e, NULL);
	} else {
		fprintf(stderr, "profctl: unexpected %s frame from profd\n", frame_type_name(h.type));
	}
	free(*payload);
	*payload = NULL;
	return -EPROTO;
}

static int start_session(struct run_state *rs, char *token, size_t token_len)
{
	Profd__RunRequest req = PROFD__RUN_REQUEST__INIT;
	Profd__SessionStarted *started;
	const char *base = strrchr(rs->opt.argv[0], '/');
	uint8_t *buf, *reply = NULL;
	uint32_t len;
	size_t n;
	int err;

	req.n_func_patterns = rs->opt.n_patterns;
	req.func_patterns = rs->opt.patterns;
	req.sample_freq = rs->opt.freq;
	req.duration_s = rs->opt.duration_s;
	req.target_comm = (char *)(base ? base + 1 : rs->opt.argv[0]);
	req.output_name = rs->output_path;
	n = profd__run_request__get_packed_size(&req);
	buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	profd__run_request__pack(&req, buf);
	err = frame_send(rs->link.fd, FRAME_RUN_REQUEST, buf, n, rs->out_fd);
	free(buf);
	if (err < 0)
		return err;
	err = expect_reply(rs, FRAME_SESSION_STARTED, &reply, &len, REPLY_TIMEOUT_MS);
	if (err)
		return err;
	started = profd__session_started__unpack(NULL, len, reply);
	free(reply);
	if (!started || !started->agent_token || strlen(started->agent_token) + 2 > token_len)
		return -EPROTO;
	snprintf(token, token_len, "%s", started->agent_token);
	profd__session_started__free_unpacked(started, NULL);
	return 0;
}

static int announce_target(struct run_state *rs)
{
	Profd__TargetForked msg = PROFD__TARGET_FORKED__INIT;
	Profd__SamplingReady *ready;
	uint8_t buf[64], *reply = NULL;
	uint32_t len;
	int err;

	msg.pid = rs->child;
	err = frame_send(rs->link.fd, FRAME_TARGET_FORKED, buf,
			 profd__target_forked__pack(&msg, buf), -1);
	if (err < 0)
		return err;
	err = expect_reply(rs, FRAME_SAMPLING_READY, &reply, &len, REPLY_TIMEOUT_MS);
	if (err)
		return err;
	ready = profd__sampling_ready__unpack(NULL, len, reply);
	free(reply);
	if (ready && ready->warning && ready->warning[0])
		fprintf(stderr, "profctl: warning: %s\n", ready->warning);
	if (ready)
		profd__sampling_ready__free_unpacked(ready, NULL);
	return 0;
}

/* Releases the child; returns 0 once it has exec'ed, or its exec errno. */
static int release_target(struct run_state *rs, const char *token)
{
	int exec_errno = 0;
	char msg[512];
	int len = snprintf(msg, sizeof(msg), "%s\n%s\n", token, rs->link.socket_path);

	if (len >= (int)sizeof(msg) || write(rs->go_pipe, msg, (size_t)len) != len)
		return -EPIPE;
	close(rs->go_pipe);
	rs->go_pipe = -1;
	if (read(rs->exec_error_pipe, &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno)) {
		fprintf(stderr, "profctl: cannot execute %s: %s\n", rs->opt.argv[0],
			strerror(exec_errno));
		return -exec_errno;
	}
	return 0;
}

static int wait_target(struct run_state *rs, int *status)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		pid_t r = waitpid(rs->child, status, rs->opt.duration_s ? WNOHANG : 0);

		if (r == rs->child)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (!rs->opt.duration_s)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= (time_t)rs->opt.duration_s)
			return -ETIMEDOUT; /* profiling ends, the target runs on */
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}

static void print_skipped(const Profd__SessionSummary *s, bool verbose)
{
	size_t shown = verbose ? s->n_skipped : (s->n_skipped < 20 ? s->n_skipped : 20);

	for (size_t i = 0; i < shown; i++) {
		const Profd__SkippedFunction *f = s->skipped[i];
		const char *mod = f->module ? strrchr(f->module, '/') : NULL;

		fprintf(stderr, "  skipped %s (%s): %s\n", f->name, mod ? mod + 1 : f->module,
			f->reason);
	}
	if (shown < s->n_skipped)
		fprintf(stderr, "  ... and %zu more skipped (-v lists them all)\n",
			s->n_skipped - shown);
}

static void print_summary(const struct run_state *rs, const Profd__SessionSummary *s)
{
	if (s->error && s->error[0])
		fprintf(stderr, "profctl: error: %s\n", s->error);
	for (size_t i = 0; i < s->n_warnings; i++)
		fprintf(stderr, "profctl: warning: %s\n", s->warnings[i]);
	if (rs->opt.n_patterns > 0) {
		if (!s->agent_connected)
			fprintf(stderr, "profctl: warning: the agent never connected: no function "
					"was instrumented\n");
		else if (s->functions_matched == 0)
			fprintf(stderr, "profctl: warning: --funcs matched no function in the "
					"program or its libraries\n");
		fprintf(stderr, "profctl: functions: %u matched, %u instrumented, %zu skipped\n",
			s->functions_matched, s->functions_instrumented, s->n_skipped);
		print_skipped(s, rs->opt.verbose);
	}
	fprintf(stderr, "profctl: events: %llu recorded, %llu dropped; samples: %llu (%llu lost)\n",
		(unsigned long long)s->events, (unsigned long long)s->events_dropped,
		(unsigned long long)s->samples, (unsigned long long)s->samples_lost);
	fprintf(stderr, "profctl: trace: %s (%llu bytes); open it at https://ui.perfetto.dev\n",
		rs->output_path, (unsigned long long)s->trace_bytes);
}

static int finish_session(struct run_state *rs, int wait_status)
{
	Profd__TargetExited msg = PROFD__TARGET_EXITED__INIT;
	Profd__SessionSummary *sum;
	uint8_t buf[64], *reply = NULL;
	uint32_t len;
	int err;

	msg.wait_status = wait_status;
	err = frame_send(rs->link.fd, FRAME_TARGET_EXITED, buf,
			 profd__target_exited__pack(&msg, buf), -1);
	if (!err)
		err = expect_reply(rs, FRAME_SESSION_SUMMARY, &reply, &len, SUMMARY_TIMEOUT_MS);
	if (err)
		return err;
	sum = profd__session_summary__unpack(NULL, len, reply);
	free(reply);
	if (!sum)
		return -EPROTO;
	print_summary(rs, sum);
	profd__session_summary__free_unpacked(sum, NULL);
	return 0;
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

static int validate_patterns(const struct run_options *o)
{
	struct func_filter *f;
	char err[256];

	if (o->n_patterns == 0)
		return 0;
	if (func_filter_parse((const char *const *)o->patterns, o->n_patterns, &f, err,
			      sizeof(err))) {
		fprintf(stderr, "profctl: --funcs: %s\n", err);
		return -EINVAL;
	}
	func_filter_free(f);
	return 0;
}

static int prepare(struct run_state *rs)
{
	char cmd_path[PATH_MAX], dir[PATH_MAX];

	if (validate_patterns(&rs->opt))
		return -EINVAL;
	if (find_command(rs->opt.argv[0], cmd_path, sizeof(cmd_path))) {
		fprintf(stderr, "profctl: %s: command not found\n", rs->opt.argv[0]);
		return -ENOENT;
	}
	if (profctl_self_dir(dir, sizeof(dir)))
		return -ELIBACC;
	snprintf(rs->agent_path, sizeof(rs->agent_path), "%s/libprofagent.so", dir);
	if (rs->opt.n_patterns && access(rs->agent_path, R_OK)) {
		fprintf(stderr, "profctl: agent %s: %s\n", rs->agent_path, strerror(errno));
		return -ELIBACC;
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct run_state rs = { .go_pipe = -1, .exec_error_pipe = -1, .out_fd = -1 };
	char token[128] = "-";
	int status = 0, err;

	rs.link.fd = -1;
	if (parse_run_options(argc, argv, &rs.opt))
		return 2;
	err = prepare(&rs);
	if (err)
		return err == -ENOENT ? 127 : 2; /* 127: the shell's "command not found" */
	err = fork_target(&rs);
	if (!err)
		err = open_output(&rs);
	if (!err)
		err = daemon_link_open(&rs.link, rs.opt.verbose);
	if (!err)
		err = start_session(&rs, token, sizeof(token));
	if (!err)
		err = announce_target(&rs);
	if (!err && rs.opt.n_patterns == 0)
		snprintf(token, sizeof(token), "-"); /* sampling only: no agent */
	if (!err)
		err = release_target(&rs, token);
	if (err) {
		if (rs.child > 0) {
			kill(rs.child, SIGKILL);
			waitpid(rs.child, NULL, 0);
		}
		daemon_link_close(&rs.link);
		return err == -ENOENT || err == -EACCES ? 127 : 1;
	}
	close(rs.out_fd); /* profd holds its own copy */
	/* Ctrl-C is for CMD; profctl stays to finalize the trace */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	err = wait_target(&rs, &status);
	finish_session(&rs, status);
	if (err == -ETIMEDOUT)
		waitpid(rs.child, &status, 0);
	daemon_link_close(&rs.link);
	return exit_code(status);
}
