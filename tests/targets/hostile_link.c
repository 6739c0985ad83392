// SPDX-License-Identifier: MIT
/*
 * A hostile target for tests/integration/test_attach_service_user.sh: it
 * makes an agent link as an attached process does (a socket pair whose other
 * end the client takes with pidfd_getfd and hands to profd), then speaks on
 * it as its agent would, with the token written to TOKEN_FILE: another
 * session's, to reach that session, or its own. Prints "link FD" (the end
 * for the client) once ready, then "hello reply TYPE TEXT" (TEXT: the
 * payload's printable bytes) or "hello closed".
 *   hostile_link TOKEN_FILE
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FRAME_AGENT_HELLO 16

/* AgentHello { agent_token = 1; pid = 2; protocol_version = 3 } as profd reads it */
static size_t encode_hello(uint8_t *out, const char *token)
{
	size_t n = 8, len = strlen(token);
	uint32_t type = FRAME_AGENT_HELLO, body;

	out[n++] = 0x0a;
	out[n++] = (uint8_t)len;
	memcpy(out + n, token, len);
	n += len;
	out[n++] = 0x10; /* pid: a made-up one, profd asks the kernel */
	out[n++] = 1;
	out[n++] = 0x18; /* protocol_version */
	out[n++] = 1;
	body = (uint32_t)(n - 8);
	memcpy(out, &type, 4);
	memcpy(out + 4, &body, 4);
	return n;
}

static int read_reply(int fd)
{
	static uint8_t buf[1 << 16];
	size_t got = 0, want = 8;
	uint32_t type, len;

	while (got < want) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 5000) <= 0 || (r = read(fd, buf + got, want - got)) <= 0)
			return -1;
		got += (size_t)r;
		if (got == 8 && want == 8) {
			memcpy(&len, buf + 4, 4);
			want = len < sizeof(buf) - 8 ? 8 + len : 8;
		}
	}
	memcpy(&type, buf, 4);
	printf("hello reply %u ", type);
	for (size_t i = 8; i < got; i++)
		if (buf[i] >= 0x20 && buf[i] < 0x7f)
			putchar(buf[i]);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t frame[256];
	char token[128] = "";
	FILE *f = NULL;
	int sv[2];

	if (argc != 2 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		fprintf(stderr, "usage: hostile_link TOKEN_FILE\n");
		return 2;
	}
	printf("link %d\n", sv[1]);
	fflush(stdout);
	for (int i = 0; i < 300 && !(f = fopen(argv[1], "re")); i++)
		usleep(50000);
	if (!f || !fgets(token, sizeof(token), f) || strlen(token) > 100) {
		printf("no token\n");
		return 1;
	}
	token[strcspn(token, "\n")] = '\0';
	if (write(sv[0], frame, encode_hello(frame, token)) < 0 || read_reply(sv[0]))
		printf("hello closed\n");
	fflush(stdout);
	return 0;
}
