/* SPDX-License-Identifier: MIT */
/*
 * Blocking frame I/O on AF_UNIX SOCK_STREAM sockets, for profctl and the
 * agent, with at most one descriptor passed per frame (SCM_RIGHTS). The layout
 * and limits are proto/frame.h's; this file only adds the syscalls. The
 * daemon's non-blocking path uses frame_reader plus frame_take_passed_fd.
 */
#ifndef PROFD_FRAME_IO_H
#define PROFD_FRAME_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto/frame.h"

/*
 * Control buffer size for a recvmsg that may carry passed descriptors. A peer
 * that passes more than fit gets them closed by the kernel (MSG_CTRUNC).
 */
#define FRAME_IO_MAX_FDS 4
#define FRAME_IO_CMSG_SPACE CMSG_SPACE(FRAME_IO_MAX_FDS * sizeof(int))

/*
 * Sends one frame (header and payload in one sendmsg, looping on partial
 * writes and EINTR; MSG_NOSIGNAL, so a closed peer gives -EPIPE, not SIGPIPE).
 * pass_fd >= 0 travels with the first byte as SCM_RIGHTS; -1 for none. Waits
 * with poll() when fd is non-blocking. Returns 0, -EPROTO for an unknown type,
 * -EMSGSIZE for len > FRAME_PAYLOAD_MAX, -EINVAL for a NULL payload with
 * len > 0, or the negative errno of sendmsg (-EPIPE, -ECONNRESET, ...).
 * Thread safety: frames from concurrent callers on one fd may interleave.
 */
int frame_send(int fd, uint32_t type, const void *payload, size_t len, int pass_fd);

/*
 * Frames gathered in the caller's buffer and written together. Each write
 * to a unix socket wakes its reader, which on a busy machine takes the
 * writer's CPU (a sync wakeup) until it has read: a short process's last
 * frames (its table, its events, its goodbye) in one write wake the daemon
 * once. Not thread-safe: one writer per batch.
 */
struct frame_batch {
	int fd;
	uint8_t *buf;
	size_t len, cap;
};

/*
 * Appends a copy of one frame. What is queued is sent first when the frame
 * does not fit after it; a frame larger than the buffer is then sent alone.
 * 0, or frame_send's errors (the queued frames are dropped on one).
 */
int frame_batch_add(struct frame_batch *b, uint32_t type, const void *payload, size_t len);

/* Sends what is queued (nothing: 0). 0, or frame_send's errors; the queue is empty after. */
int frame_batch_flush(struct frame_batch *b);

/*
 * Receives one whole frame. *payload gets a malloc'ed copy of the payload
 * (never NULL on success, even for length 0; the caller frees it). A
 * descriptor passed with any byte of the frame goes to *received_fd (-1 when
 * none; close-on-exec); when received_fd is NULL, or on error, or for every
 * descriptor after the first, it is closed. The header is checked before any
 * allocation. timeout_ms bounds the whole frame; -1 waits forever.
 * Returns 0 or a negative errno:
 *   -ETIMEDOUT  no byte arrived in time; the stream is still in sync (retry)
 *   -EBADMSG    a frame started but did not complete in time
 *   -ECONNRESET the peer closed the connection (EOF), before or inside a frame
 *   -EPROTO     unknown frame type (*hdr holds the raw header)
 *   -EMSGSIZE   length over FRAME_PAYLOAD_MAX (*hdr holds the raw header)
 *   -ENOMEM, or the negative errno of recvmsg/poll
 * After any error except -ETIMEDOUT the stream is out of sync: close it.
 */
int frame_recv(int fd, struct frame_header *hdr, uint8_t **payload, int *received_fd,
	       int timeout_ms);

/*
 * For callers that run recvmsg themselves (the daemon's non-blocking loop):
 * returns the first descriptor passed in msg's SCM_RIGHTS control data, closes
 * every other one, and empties msg's control data so that a second call finds
 * nothing. Returns the descriptor, or -ENOENT when none was passed.
 */
int frame_take_passed_fd(struct msghdr *msg);

/* Connects a close-on-exec AF_UNIX stream socket to path; returns it or a negative errno. */
int frame_connect_unix(const char *path);

#endif
