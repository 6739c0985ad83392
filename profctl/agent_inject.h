/* SPDX-License-Identifier: MIT */
/*
 * The agent in and out of a running process for `profctl attach`/`detach`:
 * ptrace-stopped (profctl/inject.h), loaded, connected to the session,
 * patched, resumed; and the reverse. Each call attaches and detaches itself.
 */
#ifndef PROFD_AGENT_INJECT_H
#define PROFD_AGENT_INJECT_H

#include <sys/types.h>

/*
 * Loads the agent at agent_path into pid (unless an earlier attach left it
 * there), has it join the session (socket_path, token) and patch with every
 * thread stopped. *patched: jumps written; *pause_ms: how long the threads
 * stood still for it. 0, or a negative errno with a one-line reason in err.
 */
int agent_inject_start(pid_t pid, const char *agent_path, const char *socket_path,
		       const char *token, int *patched, double *pause_ms, char *err,
		       size_t errlen);

/*
 * Puts the original bytes back with every thread stopped, then lets the
 * agent drain and leave. -ENOENT: no agent there; -EINVAL: it is not
 * profiling. 0, or a negative errno with a one-line reason in err.
 */
int agent_inject_remove(pid_t pid, char *err, size_t errlen);

#endif
