// SPDX-License-Identifier: MIT
/*
 * A hostile or impostor profd client for tests: connects to a Unix socket,
 * sends raw bytes given in hex (frame headers included, any content),
 * optionally stalls with the connection open, then prints what profd sent
 * back: "reply TYPE TEXT" (TEXT: the payload's printable bytes, e.g. an
 * ErrorReply's message) or "closed" when profd hung up without a reply.
 *   raw_frame_client SOCKET HEX [STALL_MS]
 * With PASS_FILE=PATH in the environment, PATH is created and its descriptor
 * goes with the bytes (SCM_RIGHTS), as profctl passes its output file; with
 * HOLD_MS=N the connection stays open N ms after the reply is printed. With
 * THEN_LINK=1, after the reply it hands profd one end of a socket pair of
 * its own as an agent link (FRAME_AGENT_LINK) and prints "link closed" when
 * profd closes it (refused), "link open" when it is still open after 3 s.
 * With LINK_FROM=PID:FD instead, the end it hands over is PID's descriptor
 * FD, taken with pidfd_getfd as profctl takes the target's (needs ptrace
 * rights over PID); it prints "link passed".
 */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static size_t parse_hex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (; hex[0] && hex[1] && n < cap; hex += 2) {
		unsigned v;

		if (sscanf(hex, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
	}
	return n;
}

static int read_all(int fd, uint8_t *buf, size_t len, int timeout_ms)
{
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, timeout_ms) <= 0)
			return -1;
		r = read(fd, buf + got, len - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static ssize_t send_fd(int fd, const uint8_t *p, size_t n, int pass)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = { (void *)p, n };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	msg.msg_control = control.buf;
	msg.msg_controllen = sizeof(control.buf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &pass, sizeof(int));
	return sendmsg(fd, &msg, 0);
}

/* A forged agent link: a pair whose other end is ours, not the target's. */
static void forge_link(int fd)
{
	static const uint8_t frame[8] = { 22, 0, 0, 0, 0, 0, 0, 0 }; /* FRAME_AGENT_LINK, empty */
	struct pollfd p;
	int sv[2];
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || send_fd(fd, frame, 8, sv[1]) != 8) {
		perror("link");
		return;
	}
	close(sv[1]);
	p = (struct pollfd){ sv[0], POLLIN, 0 };
	if (poll(&p, 1, 3000) > 0 && read(sv[0], &c, 1) <= 0)
		printf("link closed\n");
	else
		printf("link open\n");
	close(sv[0]);
}

/* PID's descriptor FD handed to profd as the agent link, as profctl attach does. */
static void pass_link(int fd, const char *pid_fd)
{
	static const uint8_t frame[8] = { 22, 0, 0, 0, 0, 0, 0, 0 }; /* FRAME_AGENT_LINK, empty */
	int pid, target_fd, pidfd, link;

	if (sscanf(pid_fd, "%d:%d", &pid, &target_fd) != 2 ||
	    (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0 ||
	    (link = (int)syscall(SYS_pidfd_getfd, pidfd, target_fd, 0)) < 0 ||
	    send_fd(fd, frame, 8, link) != 8) {
		perror("LINK_FROM");
		return;
	}
	close(link);
	close(pidfd);
	printf("link passed\n");
}

static ssize_t send_bytes(int fd, const uint8_t *p, size_t n, const char *pass_path)
{
	int pass;

	if (!pass_path)
		return write(fd, p, n);
	pass = open(pass_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	return pass < 0 ? -1 : send_fd(fd, p, n, pass);
}

int main(int argc, char **argv)
{
	static uint8_t out[1 << 16], reply[1 << 16];
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	uint32_t type, len;
	size_t n;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: raw_frame_client SOCKET HEX [STALL_MS]\n");
		return 2;
	}
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("connect");
		return 1;
	}
	n = parse_hex(argv[2], out, sizeof(out));
	if (send_bytes(fd, out, n, getenv("PASS_FILE")) != (ssize_t)n) {
		perror("write");
		return 1;
	}
	if (argc > 3)
		usleep((useconds_t)atoi(argv[3]) * 1000);
	if (read_all(fd, reply, 8, 5000)) {
		printf("closed\n");
		return 0;
	}
	memcpy(&type, reply, 4);
	memcpy(&len, reply + 4, 4);
	if (len > sizeof(reply) || read_all(fd, reply, len, 5000)) {
		printf("reply %u (truncated)\n", type);
		return 0;
	}
	printf("reply %u ", type);
	for (uint32_t i = 0; i < len; i++)
		if (reply[i] >= 0x20 && reply[i] < 0x7f)
			putchar(reply[i]);
	printf("\n");
	fflush(stdout);
	if (getenv("THEN_LINK"))
		forge_link(fd);
	if (getenv("LINK_FROM"))
		pass_link(fd, getenv("LINK_FROM"));
	fflush(stdout);
	if (getenv("HOLD_MS"))
		usleep((useconds_t)atoi(getenv("HOLD_MS")) * 1000);
	return 0;
}
