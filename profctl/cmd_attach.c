// SPDX-License-Identifier: MIT
/*
 * `profctl attach PID` and `profctl detach PID`: with the user's own ptrace
 * rights, load the agent into a running process (or reuse the one already
 * there), let it patch while every thread is stopped, record until Ctrl-C,
 * --duration, the target's exit or a detach from elsewhere, then put every
 * byte back and leave. Whatever fails, the target runs on.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profctl/agent_inject.h"
#include "profctl/attach_children.h"
#include "profctl/attach_process.h"
#include "profctl/profctl.h"
#include "profctl/session_client.h"
#include "proto/frame.h"
#include "proto/frame_io.h"

static const char attach_usage[] =
	"usage: profctl attach PID --funcs GLOBS [--freq HZ] [-o FILE] [--duration S] [--call-graph fp|dwarf[,BYTES]|auto] [--mmap-pages N] [--buffer-size SIZE] [--min-duration DUR] [--max-depth N] [--trace-compression deflate|zstd|none] [--ring SIZE] [--sched on|off] [--children] [--args SPEC] [--retval SPEC] [--args-string-max N] [--auto-args] [-v]\n";

static double seconds_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static enum stop_cause wait_for_stop_on(struct session_client *c, pid_t pid, unsigned duration_s,
					int signal_fd, int pidfd)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd fds[3] = { { c->link.fd, POLLIN, 0 }, { signal_fd, POLLIN, 0 },
					 { pidfd, POLLIN, 0 } };

		if (poll(fds, pidfd >= 0 ? 3 : 2, 200) > 0) {
			if (fds[2].revents)
				return STOP_TARGET_EXITED;
			if (fds[1].revents)
				return STOP_SIGNAL;
			if (fds[0].revents) {
				struct frame_header h;
				uint8_t *payload = NULL;
				int r = frame_recv(c->link.fd, &h, &payload, NULL, 1000);
				enum stop_cause why = r < 0 ? STOP_DAEMON :
						      attach_process_frame(h.type, pid, pidfd);

				free(payload);
				if (why != STOP_NONE)
					return why;
			}
		}
		if (kill(pid, 0) && errno == ESRCH)
			return STOP_TARGET_EXITED;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration_s && (now.tv_sec - start.tv_sec) * 1000000000L +
					  (now.tv_nsec - start.tv_nsec) >=
				  (long)duration_s * 1000000000L)
			return STOP_DURATION;
	}
}

/* Waits until something ends the recording; returns why. */
static enum stop_cause wait_for_stop(struct session_client *c, pid_t pid, unsigned duration_s,
				     int signal_fd)
{
	/* readable once the target has exited, zombie or not (kill(pid, 0) cannot tell) */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	enum stop_cause why = wait_for_stop_on(c, pid, duration_s, signal_fd, pidfd);

	if (pidfd >= 0)
		close(pidfd);
	return why;
}

static int stop_signals_fd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC);
}

/* Attached and recording: wait, then put everything back and report. */
static int record_and_detach(struct session_client *c, pid_t pid, const char *agent,
			     int signal_fd, struct attach_children *kids)
{
	char err[512] = "";
	enum stop_cause why = wait_for_stop(c, pid, c->opt->duration_s, signal_fd);
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* whatever ended the wait, a target that died meanwhile is what the user must hear */
	if (why != STOP_DAEMON && why != STOP_TARGET_EXITED && attach_process_gone(pid))
		why = STOP_TARGET_EXITED;
	if (why == STOP_REQUESTED)
		fprintf(stderr, "profctl: session stopped by profctl stop: detaching\n");
	if (why == STOP_DAEMON) /* the agent's link went with it: put the bytes back all the same */
		fprintf(stderr, "profctl: profd exited during the session: detaching; the trace "
				"may be cut short\n");
	if (why == STOP_SIGNAL || why == STOP_DURATION || why == STOP_DAEMON ||
	    why == STOP_REQUESTED) {
		if (c->opt->n_patterns && attach_process_detach(pid, agent, why, err, sizeof(err)) &&
		    kill(pid, 0) == 0)
			fprintf(stderr, "profctl: detaching from PID %d: %s\n", (int)pid, err);
		else if (c->opt->verbose)
			fprintf(stderr, "profctl: detached in %.1f ms\n", seconds_since(&t0) * 1e3);
	} else if (why == STOP_AGENT_GONE) {
		fprintf(stderr, "profctl: PID %d was detached from elsewhere\n", (int)pid);
	} else {
		fprintf(stderr, "profctl: PID %d exited\n", (int)pid);
	}
	if (why != STOP_DAEMON)
		attach_children_stop(kids, agent);
	return why == STOP_DAEMON ? -EPIPE : session_client_finish(c, 0);
}

int cmd_attach(int argc, char **argv)
{
	struct profile_options opt;
	static struct attach_children kids; /* 16 KiB: not on the stack */
	struct session_client client;
	char comm[64], agent[PATH_MAX + 32], token[128], err[512] = "", exe[64];
	int first, patched = 0, signal_fd = stop_signals_fd(), r;
	double pause_ms = 0;
	struct timespec t0;
	pid_t pid;

	first = profile_options_parse(argc, argv, &opt, attach_usage, false);
	if (first < 0 || first != argc - 1 || profile_patterns_check(&opt)) {
		if (first >= 0 && first != argc - 1)
			fprintf(stderr, "%s", attach_usage);
		return 2;
	}
	if (attach_process_parse_pid(argv[first], &pid) || attach_process_agent_path(agent, sizeof(agent)))
		return 2;
	if (attach_process_comm(pid, comm, sizeof(comm))) {
		fprintf(stderr, "profctl: no such process: %d\n", (int)pid);
		return 1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (opt.n_patterns && command_is_static(exe)) { /* no loader to dlopen the agent with */
		fprintf(stderr, "profctl: PID %d (%s) is statically linked: functions cannot be "
				"instrumented; sampling and scheduler states only\n", (int)pid, comm);
		opt.n_patterns = 0;
	}
	session_client_init(&client, &opt);
	r = session_client_open_output(&client, comm, pid);
	if (!r)
		r = session_client_start(&client, comm, pid, token, sizeof(token));
	if (r) {
		session_client_close(&client);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (opt.children)
		attach_children_find(&kids, pid);
	struct agent_inject_session sess = { client.link.fd, client.link.socket_path, token,
					     opt.children };
	r = opt.n_patterns ? agent_inject_start(pid, agent, &sess, &patched, &pause_ms, err,
						sizeof(err))
			   : 0;
	if (r && attach_process_gone(pid)) /* what failed is of no interest: it died under us */
		snprintf(err, sizeof(err), "PID %d exited during the attach", (int)pid);
	if (r) {
		fprintf(stderr, "profctl: cannot attach to PID %d: %s\n", (int)pid, err);
		session_client_finish(&client, 0); /* the trace so far is finalized all the same */
		session_client_close(&client);
		return 1;
	}
	if (opt.verbose)
		fprintf(stderr,
			"profctl: attached to PID %d (%s) in %.1f ms, %d jumps written while "
			"stopped for %.1f ms\n",
			(int)pid, comm, seconds_since(&t0) * 1e3, patched, pause_ms);
	if (opt.children && opt.n_patterns)
		attach_children_start(&kids, pid, agent, &sess, opt.verbose);
	r = record_and_detach(&client, pid, agent, signal_fd, &kids);
	session_client_close(&client);
	close(signal_fd);
	return r ? 1 : 0;
}

int cmd_detach(int argc, char **argv)
{
	char err[512] = "", agent[PATH_MAX + 32];
	pid_t pid;

	if (argc != 2 || attach_process_parse_pid(argv[1], &pid)) {
		fprintf(stderr, "usage: profctl detach PID\n");
		return 2;
	}
	if (attach_process_agent_path(agent, sizeof(agent)))
		agent[0] = '\0'; /* symbols from map_files only (root), or an agent loaded by path */
	if (agent_inject_remove(pid, agent, err, sizeof(err))) {
		fprintf(stderr, "profctl: cannot detach from PID %d: %s\n", (int)pid, err);
		return 1;
	}
	return 0;
}

