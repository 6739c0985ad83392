// SPDX-License-Identifier: MIT
/*
 * A hostile or impostor profd client for tests: connects to a Unix socket,
 * sends raw bytes given in hex (frame headers included, any content),
 * optionally stalls with the connection open, then prints what profd sent
 * back: "reply TYPE TEXT" (TEXT: the payload's printable bytes, e.g. an
 * ErrorReply's message) or "closed" when profd hung up without a reply.
 *   raw_frame_client SOCKET HEX [STALL_MS]
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	if (write(fd, out, n) != (ssize_t)n) {
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
	return 0;
}
