// SPDX-License-Identifier: MIT
/*
 * ptrace-equivalent access checks and who may see kernel addresses (see
 * access.h). Reads /proc only; every field is parsed defensively (a process
 * can vanish between two reads).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/access.h"

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYSLOG_BIT 34
#define CAP_PERFMON_BIT 38

struct proc_status {
	long ppid;
	long uid[4];   /* real, effective, saved, filesystem */
	uint64_t cap_eff;
	int found_uid;
};

static int read_status(pid_t pid, struct proc_status *st)
{
	char path[64], line[256];
	FILE *f;

	memset(st, 0, sizeof(*st));
	st->ppid = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "PPid: %ld", &st->ppid) == 1)
			continue;
		if (sscanf(line, "Uid: %ld %ld %ld %ld", &st->uid[0], &st->uid[1], &st->uid[2],
			   &st->uid[3]) == 4) {
			st->found_uid = 1;
			continue;
		}
		sscanf(line, "CapEff: %" SCNx64, &st->cap_eff);
	}
	fclose(f);
	return st->found_uid ? 0 : -ESRCH;
}

static bool client_is_privileged(pid_t client_pid, uid_t client_uid)
{
	struct proc_status st;

	if (client_uid == 0)
		return true;
	return read_status(client_pid, &st) == 0 && (st.cap_eff >> CAP_SYS_PTRACE_BIT & 1);
}

const char *access_check_target(pid_t client_pid, uid_t client_uid, pid_t target,
				bool must_be_child, char *buf, size_t len)
{
	struct proc_status st;

	if (target <= 0 || read_status(target, &st)) {
		snprintf(buf, len, "no such process: %d", (int)target);
		return buf;
	}
	if (must_be_child && st.ppid != client_pid) {
		snprintf(buf, len, "PID %d is not a child of the client", (int)target);
		return buf;
	}
	if (client_is_privileged(client_pid, client_uid))
		return NULL;
	for (int i = 0; i < 4; i++) {
		if (st.uid[i] != (long)client_uid) {
			snprintf(buf, len,
				 "PID %d belongs to uid %ld, not to uid %u (needs CAP_SYS_PTRACE)",
				 (int)target, st.uid[i], (unsigned)client_uid);
			return buf;
		}
	}
	return NULL;
}

unsigned long long access_start_time(pid_t pid)
{
	char path[64], line[1024], *p;
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* the comm field may hold spaces and parentheses: fields resume after the last ')' */
	if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')))
		sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d"
			       " %*d %*d %llu", &start);
	fclose(f);
	return start;
}

/* An integer sysctl under /proc/sys/kernel, or fallback when it cannot be read. */
static long read_kernel_sysctl(const char *name, long fallback)
{
	char path[96], buf[32], *end;
	ssize_t n = -1;
	long v;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return fallback;
	buf[n] = '\0';
	v = strtol(buf, &end, 10);
	return end == buf ? fallback : v;
}

static bool caps_see_kernel(uint64_t cap_eff)
{
	return (cap_eff >> CAP_PERFMON_BIT & 1) ||
	       ((cap_eff >> CAP_SYSLOG_BIT & 1) && (cap_eff >> CAP_SYS_ADMIN_BIT & 1));
}

bool access_may_see_kernel(pid_t client_pid, uid_t client_uid)
{
	struct proc_status st;

	/* unreadable sysctls count as the most restrictive values */
	if (read_kernel_sysctl("perf_event_paranoid", 3) <= 1 &&
	    read_kernel_sysctl("kptr_restrict", 2) == 0)
		return true;
	if (client_pid <= 0 || read_status(client_pid, &st) < 0)
		return false;
	/*
	 * uid 0 alone is not enough: a container's root shares uid 0 with the
	 * host but not its capabilities, and kernel addresses defeat KASLR.
	 * The status must still belong to client_uid (the pid may be reused).
	 */
	return st.uid[1] == (long)client_uid && caps_see_kernel(st.cap_eff);
}
