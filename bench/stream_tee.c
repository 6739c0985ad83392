// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD shim for bench/replay.sh: every byte the agent sends profd
 * after its hello, as it went (frame headers included), appended to the file
 * $STREAM_TEE. The agent's socket is the one whose first frame is a
 * FRAME_AGENT_HELLO; the shim comes after the agent in LD_PRELOAD (profctl
 * puts the agent first), so the agent's sendmsg resolves to this one.
 * Bench-only: it never changes what is sent.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/frame.h"

static pthread_mutex_t tee_lock = PTHREAD_MUTEX_INITIALIZER;
static int agent_fd = -1, out_fd = -2;

/* The first len bytes of msg's buffers, to the file. */
static void tee_bytes(const struct msghdr *msg, size_t len)
{
	for (size_t i = 0; i < msg->msg_iovlen && len; i++) {
		size_t k = msg->msg_iov[i].iov_len < len ? msg->msg_iov[i].iov_len : len;

		if (write(out_fd, msg->msg_iov[i].iov_base, k) != (ssize_t)k)
			return; /* the capture is short: replay.sh finds it so */
		len -= k;
	}
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	ssize_t n;

	if (!real)
		real = (ssize_t(*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	n = real(fd, msg, flags);
	if (n <= 0)
		return n;
	pthread_mutex_lock(&tee_lock);
	if (out_fd == -2) {
		const char *path = getenv("STREAM_TEE");

		out_fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)
			      : -1;
	}
	if (agent_fd < 0 && msg->msg_iovlen > 0 && msg->msg_iov[0].iov_len == FRAME_HEADER_SIZE) {
		uint32_t type;

		memcpy(&type, msg->msg_iov[0].iov_base, sizeof(type));
		if (type == FRAME_AGENT_HELLO)
			agent_fd = fd;
	}
	if (fd == agent_fd && out_fd >= 0)
		tee_bytes(msg, (size_t)n);
	pthread_mutex_unlock(&tee_lock);
	return n;
}
