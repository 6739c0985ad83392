/* SPDX-License-Identifier: MIT */
/*
 * Stopping every other thread of the process, from inside it, so that the
 * agent can rewrite code when no profctl is there to do it (its daemon died).
 * A helper process sharing our memory ptrace-stops the threads: no signal
 * reaches the program and every syscall it interrupts restarts.
 */
#ifndef PROFD_WORLD_STOP_H
#define PROFD_WORLD_STOP_H

/*
 * Stops every other thread until world_resume_others(). While they are
 * stopped none is inside a jump the agent wrote (a jump is one instruction),
 * so patches may be taken out. Call it from an agent thread that blocks
 * every signal, holds no lock a target thread may want and allocates nothing
 * until the resume. Returns 0, or a negative errno with every thread
 * running: -EPERM when tracing is not allowed or would change a setting of
 * the program (a tracer is attached, a seccomp filter, not dumpable, Yama),
 * -ETIMEDOUT when a thread would not stop (uninterruptible sleep, vfork),
 * -ECANCELED after an exec, -EBUSY when already stopped, -ENOMEM.
 */
int world_stop_others(void);
void world_resume_others(void);

#endif
