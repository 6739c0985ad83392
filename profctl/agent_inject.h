/* SPDX-License-Identifier: MIT */
/*
 * The agent in and out of a running process for `profctl attach`/`detach`:
 * ptrace-stopped (profctl/inject.h), loaded, connected to the session,
 * patched, resumed; and the reverse. Each call attaches and detaches itself.
 */
#ifndef PROFD_AGENT_INJECT_H
#define PROFD_AGENT_INJECT_H

#include <stdbool.h>
#include <sys/types.h>

/* The session the agent joins: profd's connection (its link goes there), or its socket and token. */
struct agent_inject_session {
	int daemon_fd;
	const char *socket_path;
	const char *token;
	bool children;   /* attach --children: the processes pid forks join too */
};

/*
 * Loads the agent at agent_path into pid (unless an earlier attach left it
 * there) from a memfd, connects it to the session through a socket pair
 * handed to profd (the socket path where the kernel cannot), and has it
 * patch with every thread stopped. *patched: jumps written; *pause_ms: how
 * long the threads stood still for it. 0, or a negative errno with a
 * one-line reason in err. Leaves no descriptor of ours in the target but the
 * agent's connection.
 */
int agent_inject_start(pid_t pid, const char *agent_path, const struct agent_inject_session *sess,
		       int *patched, double *pause_ms, char *err, size_t errlen);

/*
 * Puts the original bytes back with every thread stopped, then lets the
 * agent drain and leave (its connection closed). agent_path: the agent file
 * a memfd-loaded agent was filled from, to find its symbols. -ENOENT: no
 * agent there; -EINVAL: it is not profiling. 0, or a negative errno with a
 * one-line reason in err.
 */
int agent_inject_remove(pid_t pid, const char *agent_path, char *err, size_t errlen);

#endif
