// SPDX-License-Identifier: MIT
/*
 * attach --children for the descendants that run at the attach (see
 * profctl/attach_children.h): found through /proc/PID/task/TID/children,
 * parents before their children, each attached like the target.
 */
#include "profctl/attach_children.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends the children of every thread of pid to list (up to max); returns the new count. */
static size_t add_children(pid_t pid, pid_t *list, size_t n, size_t max)
{
	char path[96 + 256];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && (d = readdir(dir)) && n < max) {
		int kid;
		FILE *f;

		if (atoi(d->d_name) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/children", (int)pid, d->d_name);
		f = fopen(path, "re");
		while (f && n < max && fscanf(f, "%d", &kid) == 1)
			list[n++] = (pid_t)kid;
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return n;
}

void attach_children_find(struct attach_children *k, pid_t pid)
{
	k->n_found = add_children(pid, k->found, 0, ATTACH_CHILDREN_MAX);
	/* breadth first: parents before their children */
	for (size_t i = 0; i < k->n_found; i++)
		k->n_found = add_children(k->found[i], k->found, k->n_found, ATTACH_CHILDREN_MAX);
	k->n = 0;
}

void attach_children_start(struct attach_children *k, pid_t pid, const char *agent,
			   const struct agent_inject_session *sess, bool verbose)
{
	for (size_t i = 0; i < k->n_found; i++) {
		char err[512] = "";
		double pause_ms = 0;
		int patched = 0;

		if (agent_inject_start(k->found[i], agent, sess, &patched, &pause_ms, err,
				       sizeof(err))) {
			if (kill(k->found[i], 0) == 0) /* one that exited meanwhile is no news */
				fprintf(stderr, "profctl: cannot attach to PID %d (a descendant of %d): "
					"%s\n", (int)k->found[i], (int)pid, err);
			continue;
		}
		k->pids[k->n++] = k->found[i];
		if (verbose)
			fprintf(stderr, "profctl: attached to PID %d (a descendant of %d), %d jumps "
				"written while stopped for %.1f ms\n",
				(int)k->found[i], (int)pid, patched, pause_ms);
	}
}

void attach_children_stop(struct attach_children *k, const char *agent)
{
	for (size_t i = 0; i < k->n; i++) {
		char err[512] = "";

		if (agent_inject_remove(k->pids[i], agent, err, sizeof(err)) &&
		    kill(k->pids[i], 0) == 0)
			fprintf(stderr, "profctl: detaching from PID %d: %s\n", (int)k->pids[i], err);
	}
	k->n = 0;
}
