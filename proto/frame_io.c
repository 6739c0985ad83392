// SPDX-License-Identifier: MIT
/*
 * Blocking send and receive of whole frames over AF_UNIX stream sockets, with
 * one optional SCM_RIGHTS descriptor (see proto/frame_io.h). Never trusts a
 * header before proto/frame.c has checked it, never leaks a passed descriptor,
 * never raises SIGPIPE; no logging (callers know the peer) and no global state.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proto/frame_io.h"

union frame_cmsg_one {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

union frame_cmsg_many {
	char buf[FRAME_IO_CMSG_SPACE];
	struct cmsghdr align;
};

static int64_t frame_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events; deadline_ms < 0 is forever. */
static int frame_wait(int fd, short events, int64_t deadline_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int timeout = -1;
	int n;

	if (deadline_ms >= 0) {
		int64_t left = deadline_ms - frame_now_ms();

		timeout = left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
	}
	n = poll(&pfd, 1, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	/* POLLHUP/POLLERR: the next sendmsg/recvmsg reports what happened. */
	return n == 0 ? -ETIMEDOUT : 0;
}

/* Drops the first n sent bytes from msg's iovecs. */
static void frame_iov_advance(struct msghdr *msg, size_t n)
{
	while (msg->msg_iovlen > 0 && n >= msg->msg_iov->iov_len) {
		n -= msg->msg_iov->iov_len;
		msg->msg_iov++;
		msg->msg_iovlen--;
	}
	if (msg->msg_iovlen > 0) {
		msg->msg_iov->iov_base = (uint8_t *)msg->msg_iov->iov_base + n;
		msg->msg_iov->iov_len -= n;
	}
}

static int frame_send_all(int fd, struct msghdr *msg)
{
	while (msg->msg_iovlen > 0) {
		ssize_t n = sendmsg(fd, msg, MSG_NOSIGNAL);
		int err;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			/*
			 * A blocking socket says EAGAIN when its SO_SNDTIMEO ran out:
			 * the peer stopped reading. The send fails (the agent's
			 * flusher counts on it) rather than waiting forever.
			 */
			if (!(fcntl(fd, F_GETFL) & O_NONBLOCK))
				return -ETIMEDOUT;
			err = frame_wait(fd, POLLOUT, -1);
			if (err < 0)
				return err;
			continue;
		}
		/* The descriptor went with the first byte: never send it twice. */
		msg->msg_control = NULL;
		msg->msg_controllen = 0;
		frame_iov_advance(msg, (size_t)n);
	}
	return 0;
}

/* What frame_send refuses to write (see frame_io.h): 0, -EPROTO, -EMSGSIZE or -EINVAL. */
static int frame_check(uint32_t type, const void *payload, size_t len)
{
	if (!frame_type_known(type))
		return -EPROTO;
	if (len > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	if (len && !payload)
		return -EINVAL;
	return 0;
}

int frame_send(int fd, uint32_t type, const void *payload, size_t len, int pass_fd)
{
	uint8_t head[FRAME_HEADER_SIZE];
	struct iovec iov[2] = {
		{ .iov_base = head, .iov_len = sizeof(head) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	union frame_cmsg_one ctl;
	struct cmsghdr *cmsg;
	int err;

	err = frame_check(type, payload, len);
	if (err < 0)
		return err;
	frame_header_encode(head, type, (uint32_t)len);
	if (pass_fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
	}
	return frame_send_all(fd, &msg);
}

int frame_batch_flush(struct frame_batch *b)
{
	struct iovec iov = { .iov_base = b->buf, .iov_len = b->len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (!b->len)
		return 0;
	b->len = 0;
	return frame_send_all(b->fd, &msg);
}

int frame_batch_add(struct frame_batch *b, uint32_t type, const void *payload, size_t len)
{
	int err;

	err = frame_check(type, payload, len);
	if (err < 0)
		return err;
	if (FRAME_HEADER_SIZE + len > b->cap - b->len && (err = frame_batch_flush(b)) < 0)
		return err;
	if (FRAME_HEADER_SIZE + len > b->cap)
		return frame_send(b->fd, type, payload, len, -1);
	frame_header_encode(b->buf + b->len, type, (uint32_t)len);
	if (len)
		memcpy(b->buf + b->len + FRAME_HEADER_SIZE, payload, len);
	b->len += FRAME_HEADER_SIZE + len;
	return 0;
}

int frame_take_passed_fd(struct msghdr *msg)
{
	struct cmsghdr *cmsg;
	int kept = -1;

	for (cmsg = CMSG_FIRSTHDR(msg); cmsg; cmsg = CMSG_NXTHDR(msg, cmsg)) {
		size_t i, n;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS ||
		    cmsg->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
			if (kept < 0)
				kept = fd;
			else
				close(fd);
		}
	}
	msg->msg_control = NULL;
	msg->msg_controllen = 0;
	return kept >= 0 ? kept : -ENOENT;
}

/* Keeps the first descriptor passed with this frame, closes later ones. */
static void frame_collect_fd(struct msghdr *msg, int *passed)
{
	int fd = frame_take_passed_fd(msg);

	if (fd < 0)
		return;
	if (*passed < 0)
		*passed = fd;
	else
		close(fd);
}

/*
 * Reads exactly len bytes into buf. *got counts the bytes of this frame read
 * so far (header included), so that a timeout can tell "nothing" from "part".
 */
static int frame_recv_exact(int fd, uint8_t *buf, size_t len, size_t *got, int *passed,
			    int64_t deadline_ms)
{
	size_t done = 0;

	while (done < len) {
		struct iovec iov = { .iov_base = buf + done, .iov_len = len - done };
		union frame_cmsg_many ctl;
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				      .msg_controllen = sizeof(ctl.buf) };
		ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int err;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			err = frame_wait(fd, POLLIN, deadline_ms);
			if (err == -ETIMEDOUT && *got > 0)
				return -EBADMSG;
			if (err < 0)
				return err;
			continue;
		}
		frame_collect_fd(&msg, passed);
		if (n == 0)
			return -ECONNRESET;
		done += (size_t)n;
		*got += (size_t)n;
	}
	return 0;
}

int frame_recv(int fd, struct frame_header *hdr, uint8_t **payload, int *received_fd,
	       int timeout_ms)
{
	int64_t deadline_ms = timeout_ms < 0 ? -1 : frame_now_ms() + timeout_ms;
	uint8_t head[FRAME_HEADER_SIZE];
	size_t got = 0;
	int passed = -1;
	uint8_t *data;
	int err;

	*payload = NULL;
	if (received_fd)
		*received_fd = -1;
	err = frame_recv_exact(fd, head, sizeof(head), &got, &passed, deadline_ms);
	if (err < 0)
		goto err_close_fd;
	err = frame_header_decode(head, sizeof(head), hdr);
	if (err < 0)
		goto err_close_fd;
	data = malloc(hdr->length ? hdr->length : 1);
	if (!data) {
		err = -ENOMEM;
		goto err_close_fd;
	}
	err = frame_recv_exact(fd, data, hdr->length, &got, &passed, deadline_ms);
	if (err < 0)
		goto err_free_data;
	*payload = data;
	if (received_fd)
		*received_fd = passed;
	else if (passed >= 0)
		close(passed);
	return 0;

err_free_data:
	free(data);
err_close_fd:
	if (passed >= 0)
		close(passed);
	return err;
}

int frame_connect_unix(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0)
		return fd;
	err = -errno;
	close(fd);
	return err;
}
