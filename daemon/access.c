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
#include <sys/stat.h>
#include <unistd.h>

#include "common/proc_stat_line.h"
#include "daemon/access.h"

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYSLOG_BIT 34
#define CAP_PERFMON_BIT 38

struct proc_status {
	long ppid;
	long uid[4];   /* real, effective, saved, filesystem */
	long gid[4];
	uint64_t cap_eff, cap_prm;
	int found_uid, found_gid;
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
	/* sscanf only on the five lines wanted: trying each on all ~55 lines cost a check's CPU */
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "PPid:", 5) == 0)
			sscanf(line, "PPid: %ld", &st->ppid);
		else if (strncmp(line, "Uid:", 4) == 0)
			st->found_uid = sscanf(line, "Uid: %ld %ld %ld %ld", &st->uid[0],
					       &st->uid[1], &st->uid[2], &st->uid[3]) == 4;
		else if (strncmp(line, "Gid:", 4) == 0)
			st->found_gid = sscanf(line, "Gid: %ld %ld %ld %ld", &st->gid[0],
					       &st->gid[1], &st->gid[2], &st->gid[3]) == 4;
		else if (strncmp(line, "CapPrm:", 7) == 0)
			sscanf(line, "CapPrm: %" SCNx64, &st->cap_prm);
		else if (strncmp(line, "CapEff:", 7) == 0)
			sscanf(line, "CapEff: %" SCNx64, &st->cap_eff);
	}
	fclose(f);
	return st->found_uid && st->found_gid ? 0 : -ESRCH;
}

/*
 * The client as it is now, if it is still who connected: its effective uid
 * must be the one SO_PEERCRED gave (a setuid exec after the connect, or a
 * reused pid, must not lend the client its capabilities).
 */
static int read_client(const struct ucred *client, struct proc_status *st)
{
	if (client->pid <= 0 || read_status(client->pid, st))
		return -ESRCH;
	return st->uid[1] == (long)client->uid ? 0 : -EPERM;
}

/*
 * The kernel's __ptrace_may_access() for a caller without CAP_SYS_PTRACE:
 * every uid and gid of the target the client's, the target dumpable (else
 * /proc/PID is owned by root), and no capability the client lacks.
 */
static const char *unprivileged_may_trace(const struct ucred *client, const struct proc_status *c,
					  pid_t target, const struct proc_status *t, char *buf,
					  size_t len)
{
	char path[32];
	struct stat dir;

	for (int i = 0; i < 3; i++) {
		if (t->uid[i] != (long)client->uid) {
			snprintf(buf, len, "PID %d belongs to uid %ld, not to uid %u "
				 "(needs CAP_SYS_PTRACE)", (int)target, t->uid[i], (unsigned)client->uid);
			return buf;
		}
		if (t->gid[i] != (long)client->gid) {
			snprintf(buf, len, "PID %d runs with gid %ld, not with gid %u "
				 "(needs CAP_SYS_PTRACE)", (int)target, t->gid[i], (unsigned)client->gid);
			return buf;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d", (int)target);
	if (stat(path, &dir) || (dir.st_uid == 0 && client->uid != 0)) {
		snprintf(buf, len, "PID %d is not dumpable (setuid, or it said so: "
			 "needs CAP_SYS_PTRACE)", (int)target);
		return buf;
	}
	if (t->cap_prm & ~c->cap_prm) {
		snprintf(buf, len, "PID %d holds capabilities uid %u lacks (needs CAP_SYS_PTRACE)",
			 (int)target, (unsigned)client->uid);
		return buf;
	}
	return NULL;
}

static const char *check_target(const struct ucred *client, pid_t target, bool must_be_child,
				char *buf, size_t len)
{
	struct proc_status st, cst;

	if (target <= 0 || read_status(target, &st)) {
		snprintf(buf, len, "no such process: %d", (int)target);
		return buf;
	}
	if (must_be_child && st.ppid != client->pid) {
		snprintf(buf, len, "PID %d is not a child of the client", (int)target);
		return buf;
	}
	if (read_client(client, &cst)) {
		snprintf(buf, len, "the client (PID %d) is gone or changed its uid",
			 (int)client->pid);
		return buf;
	}
	if (client->uid == 0 || (cst.cap_eff >> CAP_SYS_PTRACE_BIT & 1))
		return NULL;
	return unprivileged_may_trace(client, &cst, target, &st, buf, len);
}

unsigned long long access_start_time(pid_t pid)
{
	struct proc_stat_line st;

	return proc_stat_read(pid, &st) ? 0 : st.start_time;
}

const char *access_check_target(const struct ucred *client, pid_t target, bool must_be_child,
				unsigned long long *start_time, char *buf, size_t len)
{
	const char *refused;

	*start_time = target > 0 ? access_start_time(target) : 0;
	refused = check_target(client, target, must_be_child, buf, len);
	/* bracketed by the start time: a pid that died and was reused meanwhile is refused */
	if (!refused && (!*start_time || access_start_time(target) != *start_time)) {
		snprintf(buf, len, "PID %d exited while it was being checked", (int)target);
		return buf;
	}
	return refused;
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

bool access_may_see_kernel(const struct ucred *client)
{
	struct proc_status st;

	/* unreadable sysctls count as the most restrictive values */
	if (read_kernel_sysctl("perf_event_paranoid", 3) <= 1 &&
	    read_kernel_sysctl("kptr_restrict", 2) == 0)
		return true;
	/*
	 * uid 0 alone is not enough: a container's root shares uid 0 with the
	 * host but not its capabilities, and kernel addresses defeat KASLR.
	 */
	return read_client(client, &st) == 0 && caps_see_kernel(st.cap_eff);
}

bool access_may_see_other_tasks(const struct ucred *client)
{
	struct proc_status st;

	/* perf's rule for system-wide events: CAP_PERFMON (or CAP_SYS_ADMIN before it existed) */
	return read_client(client, &st) == 0 &&
	       ((st.cap_eff >> CAP_PERFMON_BIT & 1) || (st.cap_eff >> CAP_SYS_ADMIN_BIT & 1));
}
