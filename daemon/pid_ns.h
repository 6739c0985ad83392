/* SPDX-License-Identifier: MIT */
/*
 * Thread ids of a target in another PID namespace (a container, `unshare
 * -p`): the agent reports getpid()/gettid() as its namespace numbers them,
 * while perf samples, the scheduler probe, the access checks and the trace
 * use profd's view. Owns the translation, read from the NSpid lines of
 * /proc/PID/task/TID/status; never trusts a number the agent sends.
 */
#ifndef PROFD_PID_NS_H
#define PROFD_PID_NS_H

#include <stdint.h>
#include <sys/types.h>

struct pid_ns_map;

/*
 * For host_pid (a pid in profd's view): NULL when its threads have the
 * same ids in its namespace as in ours (nothing to translate), or when it
 * cannot be read (errno set). Not thread-safe: one session's loop uses it.
 */
struct pid_ns_map *pid_ns_map_new(pid_t host_pid);
void pid_ns_map_free(struct pid_ns_map *m);

/*
 * host_pid's own pid in its innermost PID namespace when that is not ours
 * (what its getpid() returns there), 0 when it is ours, -1 when it cannot
 * be read (gone).
 */
pid_t pid_ns_own_pid(pid_t host_pid);

/* The target's own pid in its namespace (what its getpid() returns). */
pid_t pid_ns_map_ns_pid(const struct pid_ns_map *m);

/*
 * Our id of the target's thread ns_tid. An unknown one rereads the task
 * list (the first at once, more within 100 ms of it not: a stream of
 * made-up ids costs little); a thread still unknown, or NULL m, is
 * returned as is.
 */
uint32_t pid_ns_map_host_tid(struct pid_ns_map *m, uint32_t ns_tid);

#endif
