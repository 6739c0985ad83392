/* SPDX-License-Identifier: MIT */
/*
 * Who may profile what: the daemon may run as root, so it serves a client
 * only for a target the client could ptrace itself (same user on every uid,
 * or CAP_SYS_PTRACE / root), judged from SO_PEERCRED and /proc.
 */
#ifndef PROFD_ACCESS_H
#define PROFD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * NULL when the client (pid, uid from SO_PEERCRED) may profile target, else
 * a one-line reason written to buf ("no such process", "PID 12 belongs to
 * uid 0, not to uid 1000 (needs CAP_SYS_PTRACE)", ...). must_be_child: the
 * target must be the client's own child (profctl run).
 */
const char *access_check_target(pid_t client_pid, uid_t client_uid, pid_t target,
				bool must_be_child, char *buf, size_t len);

/* The target's start time (clock ticks since boot), to notice a pid reused; 0 if gone. */
unsigned long long access_start_time(pid_t pid);

#endif
