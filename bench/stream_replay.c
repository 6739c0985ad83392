// SPDX-License-Identifier: MIT
/*
 * The agent of its own process for bench/replay.sh: run by `profctl run --
 * stream_replay CAPTURE`, it sends profd a new hello (this process's pid,
 * the session's token) and then the frames bench/stream_tee.c captured, as
 * they are: profd decodes the same events every time, whichever profd it is.
 * The real agent comes in through LD_PRELOAD: the program runs itself again
 * without it first (profd takes that as an exec). Bench-only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/frame.h"

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* AgentHello (proto/profd.proto): token, pid, protocol_version 1, config_known, parent. */
static size_t hello(uint8_t *buf, const char *token)
{
	uint8_t *p = buf + FRAME_HEADER_SIZE;
	size_t tlen = strlen(token);

	*p++ = 0x0a;
	p = put_varint(p, tlen);
	memcpy(p, token, tlen);
	p += tlen;
	*p++ = 0x10;
	p = put_varint(p, (uint64_t)getpid());
	*p++ = 0x18;
	p = put_varint(p, 1);
	*p++ = 0x28;
	p = put_varint(p, 1);
	*p++ = 0x30;
	p = put_varint(p, (uint64_t)getppid());
	frame_header_encode(buf, FRAME_AGENT_HELLO, (uint32_t)(p - buf - FRAME_HEADER_SIZE));
	return (size_t)(p - buf);
}

int main(int argc, char **argv)
{
	const char *path = getenv("PROFD_AGENT_SOCKET"), *token = getenv("PROFD_AGENT_TOKEN");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	uint8_t head[512];
	uint8_t *cap;
	long size;
	FILE *f;
	int fd;

	if (argc != 2 || !path || !token || strlen(token) > 256) {
		fprintf(stderr, "usage: profctl run ... -- %s CAPTURE\n", argv[0]);
		return 2;
	}
	if (getenv("LD_PRELOAD")) { /* the real agent is in: again without it */
		unsetenv("LD_PRELOAD");
		execv("/proc/self/exe", argv);
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(cap = malloc((size_t)size + 1)) || fread(cap, 1, (size_t)size, f) != (size_t)size) {
		perror(argv[1]);
		return 2;
	}
	fclose(f);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    send_all(fd, head, hello(head, token))) {
		perror(path);
		return 3;
	}
	for (long off = 0; off + FRAME_HEADER_SIZE <= size;) {
		struct frame_header h;

		if (frame_header_decode(cap + off, (size_t)(size - off), &h) ||
		    (long)h.length > size - off - (long)FRAME_HEADER_SIZE) {
			fprintf(stderr, "%s: bad frame at byte %ld\n", argv[1], off);
			return 2;
		}
		if (h.type != FRAME_AGENT_HELLO &&
		    send_all(fd, cap + off, FRAME_HEADER_SIZE + h.length))
			return 3;
		off += FRAME_HEADER_SIZE + (long)h.length;
	}
	/* all said: profd reads to the end, then closes */
	alarm(30);
	shutdown(fd, SHUT_WR);
	while (read(fd, head, sizeof(head)) > 0)
		;
	free(cap);
	return 0;
}
