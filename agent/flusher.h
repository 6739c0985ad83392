/* SPDX-License-Identifier: MIT */
/*
 * The agent's flusher thread: drains every thread's ring, encodes the records
 * as compact event chunks (proto/event_wire.h) with each thread's aggregates,
 * and writes them to the daemon (FRAME_EVENTS_RAW). It is the only agent
 * thread that talks to the socket after setup; target threads never wait for it.
 */
#ifndef PROFD_FLUSHER_H
#define PROFD_FLUSHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/event_wire.h"

/* Reads a (TSC, CLOCK_MONOTONIC) pair taken at the same instant (best of three). */
void flusher_read_clock_pair(struct event_clock_pair *pair);

/*
 * What the agent does on the flusher thread. send_table(ctx, sock): the
 * functions not sent yet, before any event (and whatever must follow them).
 * lost(ctx): the daemon is gone and the session was released (the agent
 * puts the original code back there). frame(ctx, sock, type, payload, len),
 * may be NULL: a frame the daemon sent after the setup (an answer the agent
 * asked for in send_table); a negative return is logged nowhere, the
 * session goes on. functions(ctx): how many functions have ids (1 .. n),
 * may be NULL: no aggregate past n is read. send_table, frame and
 * functions run under the table lock.
 */
struct flusher_ops {
	int (*send_table)(void *ctx, int sock);
	uint32_t (*functions)(void *ctx);
	void (*lost)(void *ctx);
	int (*frame)(void *ctx, int sock, uint32_t type, const uint8_t *payload, size_t len);
};

/*
 * frame_send(fd, type, payload, len, -1), for what the flusher's callers
 * send on its socket (ops->send_table, ops->frame): during the process's
 * exit drain the frame joins the drain's others, written at its end in
 * one send, in order. 0, or frame_send's errors (a batched frame's come
 * at the end of the drain).
 */
int flusher_send_frame(int fd, uint32_t type, const void *payload, size_t len);

/*
 * Starts the flusher on the connected socket. It sends nothing until
 * flusher_release(); then ops->send_table first (from the flusher thread,
 * which may allocate), then events, and takes in the daemon's frames as
 * they come (ops->frame). When the daemon is gone (the connection closed,
 * or a send failed: it stopped reading), the flusher turns recording off,
 * calls ops->lost on its own thread once the session was released, closes
 * the socket and exits; flusher_lost() is true from then on. ops must live
 * as long as the flusher. Returns 0 or a negative errno.
 */
int flusher_start(int sock, const struct flusher_ops *ops, void *ctx);

/*
 * The same state without the thread, for a process that is exiting (a
 * forked child whose first connection is its exit's): the exit drain
 * (flusher_exit_drain) sends everything. No thread is created where the
 * exit may run (a signal handler's _exit, a destructor), and none is paid
 * for by a process that is ending. 0 or a negative errno.
 */
int flusher_start_at_exit(int sock, const struct flusher_ops *ops, void *ctx);

/*
 * The state without its thread, which a hook's slow path starts later
 * (flusher_start_if_due): a process that lives less than delay_ns and fills
 * no ring starts none, and its exit drain sends everything (a thread cost a
 * short process of a tree 150-300 us, bench/README.md). 0 or a negative errno.
 */
int flusher_start_deferred(int sock, const struct flusher_ops *ops, void *ctx, uint64_t delay_ns);

/* Whether the thread is still to be started (lock-free, for the slow paths). */
bool flusher_deferred(void);

/* Whether it is, and a slow path would try now (the delay or the last refusal's wait is over). */
bool flusher_start_due(void);

/*
 * From a hook's slow path (signals blocked, entered with entry_mask, the
 * agent's guard held): starts the deferred thread when it is due (the delay
 * passed, or flusher_poke asked) and starting one is safe here
 * (thread_start_safe_here); else a later slow path tries again.
 */
void flusher_start_if_due(uint64_t entry_mask);

/*
 * Before an exec (its hook): everything recorded so far, the figures of
 * every thread included, goes out now, then a goodbye saying "exec" (the
 * socket closes with the image; the new one connects anew). An exec that
 * fails (execvp tries each directory of PATH) records on, and its next
 * events tell profd the process stayed. Bounded as the exit drain; no-op
 * in a vfork child. 0, or -ETIMEDOUT when the flusher thread held the
 * drain too long.
 */
int flusher_exec_flush(void);

/*
 * Lets the flusher go, with the clock pair taken before recording began.
 * Lock-free: callable while every other thread of the process is stopped.
 */
void flusher_release(const struct event_clock_pair *initial);

/*
 * Final drain, AgentGoodbye with reason, join (while the flusher makes
 * progress, bounded so a stuck daemon cannot hold the target's exit for
 * long). let_calls_return (detach):
 * calls entered before the unpatch get up to 100 ms to return first, so
 * their slices close. Safe to call twice. Returns -ETIMEDOUT when the
 * flusher did not finish (it keeps its socket then).
 */
int flusher_stop(const char *reason, bool let_calls_return);

/*
 * Process exit: the final drain and AgentGoodbye with reason on the calling
 * thread, not handed to the flusher thread (a wake-up and a join, the largest
 * wait of a short process on a loaded machine). Waits for a cycle the
 * flusher thread is in (as flusher_stop waits for its join); that thread is
 * then left to end with the process. Nothing when another process started
 * the flusher (a vfork or CLONE_VM child shares its parent's memory, flusher
 * state included, but not its thread). Signals are blocked while it drains.
 * Returns 0, or -ETIMEDOUT when the flusher thread held the drain too long.
 */
int flusher_exit_drain(const char *reason);

/*
 * In a forked child: the flusher thread does not exist there and the socket
 * is the parent's; forget both without touching them (never join, never send).
 */
void flusher_forget_after_fork(void);

/*
 * Around instrumenting more functions while the flusher runs: no event of
 * theirs is sent before the table that names them (sent at the next cycle).
 */
void flusher_table_lock(void);
/* added: functions were instrumented, the next cycle sends them first */
void flusher_table_unlock(int added);

/* Wakes the flusher for a drain now (a ring segment filled). Never blocks; a syscall. */
void flusher_poke(void);

/* True when no flusher runs or it gave up (its daemon is gone): the session is dead. */
int flusher_lost(void);

#endif
