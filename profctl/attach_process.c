// SPDX-License-Identifier: MIT
/*
 * The process `profctl attach` and `profctl top` attach to (see
 * attach_process.h), moved here from cmd_attach.c so that both read it the
 * same way.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profctl/agent_inject.h"
#include "profctl/attach_process.h"
#include "profctl/profctl.h"
#include "proto/frame.h"

int attach_process_parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v <= 0 || v > 0x7fffffff) {
		fprintf(stderr, "profctl: not a process id: '%s'\n", s);
		return -EINVAL;
	}
	*pid = (pid_t)v;
	return 0;
}

int attach_process_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f || !fgets(buf, (int)len, f)) {
		if (f)
			fclose(f);
		return -ESRCH;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

bool attach_process_gone(pid_t pid)
{
	char path[64], line[512], *p;
	bool gone = true;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	/* the comm field may hold spaces and parentheses: the state follows the last ')' */
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) && p[1] == ' ')
		gone = p[2] == 'Z' || p[2] == 'X';
	fclose(f);
	return gone;
}

/*
 * The agent's connection closed: a detach from elsewhere, or the target dying
 * (a process closes its sockets before it is a zombie, and a zombie still
 * answers kill(pid, 0)). Its pidfd tells, given a moment to finish exiting.
 */
static bool target_exiting(pid_t pid, int pidfd)
{
	struct pollfd p = { pidfd, POLLIN, 0 };

	if (pidfd < 0)
		return kill(pid, 0) != 0;
	return poll(&p, 1, 200) > 0;
}

int attach_process_agent_path(char *buf, size_t len)
{
	char dir[PATH_MAX];

	if (profctl_self_dir(dir, sizeof(dir)))
		return -ENOENT;
	snprintf(buf, len, "%s/libprofagent.so", dir);
	if (access(buf, R_OK)) {
		fprintf(stderr, "profctl: agent %s: %s\n", buf, strerror(errno));
		return -ENOENT;
	}
	return 0;
}


enum stop_cause attach_process_frame(uint32_t type, pid_t pid, int pidfd)
{
	if (type == FRAME_AGENT_GONE)
		return target_exiting(pid, pidfd) ? STOP_TARGET_EXITED : STOP_AGENT_GONE;
	if (type == FRAME_STOP_NOTICE) /* profctl stop, from anywhere */
		return STOP_REQUESTED;
	return STOP_NONE;
}

#define DETACH_BUSY_TRIES 30
#define DETACH_BUSY_WAIT_NS (100 * 1000 * 1000)

int attach_process_detach(pid_t pid, const char *agent, enum stop_cause why, char *err,
			  size_t errlen)
{
	int r = agent_inject_remove(pid, agent, err, errlen);

	for (int i = 0; why == STOP_DAEMON && r == -EBUSY && i < DETACH_BUSY_TRIES; i++) {
		nanosleep(&(struct timespec){ 0, DETACH_BUSY_WAIT_NS }, NULL);
		r = agent_inject_remove(pid, agent, err, errlen);
	}
	return why == STOP_DAEMON && r == -EINVAL ? 0 : r;
}
