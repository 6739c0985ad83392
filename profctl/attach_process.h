/* SPDX-License-Identifier: MIT */
/*
 * What `profctl attach` and `profctl top` share about the process they
 * attach to: its id and name, whether it is gone, the agent file to load,
 * and what the frames profd sends during an attach session mean. Reads
 * /proc; never touches the process itself.
 */
#ifndef PROFD_ATTACH_PROCESS_H
#define PROFD_ATTACH_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Why an attach session's recording ends. */
enum stop_cause { STOP_NONE, STOP_SIGNAL, STOP_DURATION, STOP_TARGET_EXITED, STOP_AGENT_GONE,
		  STOP_DAEMON, STOP_REQUESTED };

/* PID from s; 0, or -EINVAL after saying why. */
int attach_process_parse_pid(const char *s, pid_t *pid);
/* Its command name (/proc/PID/comm); 0 or -ESRCH. */
int attach_process_comm(pid_t pid, char *buf, size_t len);
/* Gone or a zombie (which kill(pid, 0) cannot tell from alive): /proc/PID/stat's state. */
bool attach_process_gone(pid_t pid);
/* The agent beside this profctl binary, in buf; 0 or -ENOENT after saying why. */
int attach_process_agent_path(char *buf, size_t len);
/*
 * What a frame of type from profd means while attached to pid (pidfd: its
 * pidfd or -1): STOP_NONE for one that ends nothing (an answer the caller
 * asked for), else why the recording ends. FRAME_AGENT_GONE: the target
 * exiting, or a detach from elsewhere, told apart by its pidfd.
 */
enum stop_cause attach_process_frame(uint32_t type, pid_t pid, int pidfd);

/*
 * Puts pid's patched bytes back (agent_inject_remove) as a session ends for
 * why. When profd is gone (STOP_DAEMON) the agent gives up and unpatches
 * by itself, stopping its threads with ptrace meanwhile: a busy target is
 * tried again for a moment, and an agent found not profiling any more has
 * put the bytes back already. 0, or a negative errno with a reason in err.
 */
int attach_process_detach(pid_t pid, const char *agent, enum stop_cause why, char *err,
			  size_t errlen);

#endif
