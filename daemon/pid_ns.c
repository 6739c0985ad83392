// SPDX-License-Identifier: MIT
/*
 * Thread ids across PID namespaces (contract in daemon/pid_ns.h): pairs of
 * (our id, the namespace's id) for each thread of one target, from the
 * NSpid lines in /proc, reread when a thread we have not seen shows up.
 * Reads /proc only; what the agent sends is only ever looked up.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mono_clock.h"
#include "daemon/pid_ns.h"

#define PID_NS_RESCAN_NS (100 * 1000000ull)

struct tid_pair {
	uint32_t host, ns;
};

struct pid_ns_map {
	pid_t host_pid, ns_pid;
	struct tid_pair *pairs;
	size_t n, cap;
	uint64_t scanned_ns;
	bool missed;             /* an id was not found since the last scan */
};

/* NSpid of /proc/PID/task/TID/status: first (ours) and last (innermost) ids; 1 if nested. */
static int read_nspid(pid_t pid, pid_t tid, uint32_t *host, uint32_t *ns)
{
	char path[80], line[256];
	int nested = -ENOENT;
	FILE *f;

	/*
	 * The leader's own status, not its task/ entry: every dentry under
	 * /proc/PID/task costs the process's parent in its reap (d_walk).
	 */
	if (tid == pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;
		unsigned long v;
		int fields = 0;

		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		while ((v = strtoul(p, &end, 10)), end != p) {
			if (fields++ == 0)
				*host = (uint32_t)v;
			*ns = (uint32_t)v;
			p = end;
		}
		nested = fields > 1;
		break;
	}
	fclose(f);
	return nested;
}

static void add_pair(struct pid_ns_map *m, uint32_t host, uint32_t ns)
{
	struct tid_pair *grown;

	for (size_t i = 0; i < m->n; i++)
		if (m->pairs[i].ns == ns) {
			m->pairs[i].host = host; /* an id reused by a new thread */
			return;
		}
	if (m->n == m->cap) {
		grown = realloc(m->pairs, (m->cap ? m->cap * 2 : 16) * sizeof(*grown));
		if (!grown)
			return; /* that thread keeps its namespace id */
		m->pairs = grown;
		m->cap = m->cap ? m->cap * 2 : 16;
	}
	m->pairs[m->n++] = (struct tid_pair){ host, ns };
}

static void rescan(struct pid_ns_map *m)
{
	char path[64];
	struct dirent *de;
	DIR *dir;

	m->scanned_ns = mono_clock_ns();
	m->missed = false;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)m->host_pid);
	dir = opendir(path);
	while (dir && (de = readdir(dir))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		uint32_t host, ns;

		if (tid > 0 && read_nspid(m->host_pid, tid, &host, &ns) >= 0)
			add_pair(m, host, ns);
	}
	if (dir)
		closedir(dir);
}

/*
 * Whether pid's PID namespace is the one /proc numbers from: 1 yes, 0 no,
 * -1 not known (a link we may not follow, or gone). Its ns link against
 * ours, ours checked once to be /proc's (NSpid of one field; pid 1's link
 * is not always ours to follow): two stats, where its status (NSpid's
 * file) renders some 55 lines. Most processes of a tree are in ours.
 */
static int in_proc_namespace(pid_t pid)
{
	static struct stat proc_ns;
	static int proc_ns_known; /* 0: not read yet, 1: read, -1: not usable */
	uint32_t host, ns;
	char path[64];
	struct stat st;

	if (!proc_ns_known) {
		bool ours_is_procs = read_nspid(getpid(), getpid(), &host, &ns) == 0;

		proc_ns_known = ours_is_procs && !stat("/proc/self/ns/pid", &proc_ns) ? 1 : -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (proc_ns_known < 0 || stat(path, &st))
		return -1;
	return st.st_dev == proc_ns.st_dev && st.st_ino == proc_ns.st_ino;
}

pid_t pid_ns_own_pid(pid_t host_pid)
{
	uint32_t host, ns;
	int nested;

	if (in_proc_namespace(host_pid) == 1)
		return 0;
	nested = read_nspid(host_pid, host_pid, &host, &ns);

	return nested < 0 ? -1 : nested ? (pid_t)ns : 0;
}

struct pid_ns_map *pid_ns_map_new(pid_t host_pid)
{
	struct pid_ns_map *m;
	uint32_t host, ns;
	int nested = in_proc_namespace(host_pid) == 1 ? 0 :
			     read_nspid(host_pid, host_pid, &host, &ns);

	if (nested <= 0) {
		errno = nested < 0 ? -nested : 0;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->host_pid = host_pid;
	m->ns_pid = (pid_t)ns;
	rescan(m);
	return m;
}

void pid_ns_map_free(struct pid_ns_map *m)
{
	if (!m)
		return;
	free(m->pairs);
	free(m);
}

pid_t pid_ns_map_ns_pid(const struct pid_ns_map *m)
{
	return m->ns_pid;
}

uint32_t pid_ns_map_host_tid(struct pid_ns_map *m, uint32_t ns_tid)
{
	if (!m)
		return ns_tid;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < m->n; i++)
			if (m->pairs[i].ns == ns_tid)
				return m->pairs[i].host;
		/* a new thread: one reread at once; more unknown ids wait their turn */
		if (pass || (m->missed && mono_clock_ns() - m->scanned_ns < PID_NS_RESCAN_NS))
			break;
		rescan(m);
	}
	m->missed = true;
	return ns_tid;
}
