/* SPDX-License-Identifier: MIT */
/*
 * Who may profile what: the daemon may run as root, so it serves a client
 * only for a target the client could ptrace itself (same user on every uid,
 * or CAP_SYS_PTRACE / root), and shows kernel frames only to a client that
 * could read them itself; judged from SO_PEERCRED and /proc.
 */
#ifndef PROFD_ACCESS_H
#define PROFD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/*
 * NULL when the client (SO_PEERCRED: pid, uid, gid) may profile target, i.e.
 * could ptrace it itself, else a one-line reason written to buf ("no such
 * process: 12", "PID 12 belongs to uid 0, not to uid 1000 (needs
 * CAP_SYS_PTRACE)", ...). Root and holders of CAP_SYS_PTRACE may; anyone
 * else needs the target's uids and gids to be theirs, the target dumpable
 * and no capability of the target's they lack. The client must still have
 * the effective uid it connected with. must_be_child: the target must be
 * the client's own child (profctl run). *start_time gets the target's start
 * time, read before the checks and compared after them (a pid reused in
 * between is refused): keep it to notice a reuse later.
 */
const char *access_check_target(const struct ucred *client, pid_t target, bool must_be_child,
				unsigned long long *start_time, char *buf, size_t len);

/*
 * Whether the client (SO_PEERCRED) may be shown kernel frames and addresses:
 * when the system shows them to everybody (kernel.perf_event_paranoid <= 1
 * and kernel.kptr_restrict == 0), or when the client's effective
 * capabilities (/proc/PID/status CapEff) hold CAP_PERFMON, or CAP_SYSLOG and
 * CAP_SYS_ADMIN, and it still has the effective uid it connected with. Root
 * counts through its capabilities, not its uid. False when anything cannot
 * be read.
 */
bool access_may_see_kernel(const struct ucred *client);

/*
 * Whether the client may see other processes' scheduling (who ran, woke or
 * waited beside its target, and when): with CAP_PERFMON or CAP_SYS_ADMIN in
 * its effective capabilities (root has them) and its connecting euid, as
 * perf requires for system-wide events. Others see such tasks as "another
 * task", without pid or name. False when anything cannot be read.
 */
bool access_may_see_other_tasks(const struct ucred *client);

/* The target's start time (clock ticks since boot), to notice a pid reused; 0 if gone. */
unsigned long long access_start_time(pid_t pid);

#endif
