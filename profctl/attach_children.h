/* SPDX-License-Identifier: MIT */
/*
 * attach --children, the processes that run already: the target's
 * descendants at the attach, each given the agent as the target was (its own
 * link, its own spawner for what it forks), and detached with it. Those
 * forked later join by themselves (the spawner; see agent/agent.c).
 */
#ifndef PROFD_ATTACH_CHILDREN_H
#define PROFD_ATTACH_CHILDREN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "profctl/agent_inject.h"

#define ATTACH_CHILDREN_MAX 1024

struct attach_children {
	pid_t found[ATTACH_CHILDREN_MAX]; /* the descendants before the target's attach */
	size_t n_found;
	pid_t pids[ATTACH_CHILDREN_MAX];  /* attached: detached at the end */
	size_t n;
};

/*
 * pid's descendants, before pid is attached to: those it forks afterwards
 * join by themselves and must not be attached to twice.
 */
void attach_children_find(struct attach_children *k, pid_t pid);
/* Attaches to the descendants found; one warning line per one that could not be. */
void attach_children_start(struct attach_children *k, pid_t pid, const char *agent,
			   const struct agent_inject_session *sess, bool verbose);
/* Detaches from those still running (the others took their agents with them). */
void attach_children_stop(struct attach_children *k, const char *agent);

#endif
