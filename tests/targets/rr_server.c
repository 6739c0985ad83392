// SPDX-License-Identifier: MIT
/*
 * A small request/response service to attach to as an admin would
 * (tests/integration/test_attach_service_user.sh, bench/attach_service.sh).
 * Server: `rr_server serve` listens on 127.0.0.1 (a free port, printed as
 * "port N"), one thread per connection answering each 8-byte request with
 * rr_handle()'s reply. Client: `rr_server client PORT STOPFILE|-SECONDS`
 * sends requests in a loop, checks every reply, and prints "requests N
 * errors E" (and requests/s): any error is the profiler changing behaviour.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline, used)) uint64_t rr_parse(uint64_t req)
{
	uint64_t r = req ^ 0x5bd1e995u;

	__asm__ volatile("" : "+r"(r));
	return r;
}

__attribute__((noinline, used)) uint64_t rr_compute(uint64_t x)
{
	for (int i = 0; i < 8; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

__attribute__((noinline, used)) uint64_t rr_handle(uint64_t req)
{
	return rr_compute(rr_parse(req));
}

/* The same arithmetic inline, uninstrumented: what a reply must be. */
static uint64_t expected(uint64_t req)
{
	uint64_t x = req ^ 0x5bd1e995u;

	for (int i = 0; i < 8; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static int io_all(int fd, void *buf, size_t len, int is_write)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = is_write ? write(fd, (char *)buf + done, len - done)
				     : read(fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static void *serve_one(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint64_t v;

	while (io_all(fd, &v, sizeof(v), 0) == 0) {
		v = rr_handle(v);
		if (io_all(fd, &v, sizeof(v), 1))
			break;
	}
	close(fd);
	return NULL;
}

static int serve(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	signal(SIGPIPE, SIG_IGN);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 64) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("rr_server");
		return 1;
	}
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		pthread_t th;

		if (c < 0)
			continue;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&th, NULL, serve_one, (void *)(intptr_t)c))
			close(c);
		else
			pthread_detach(th);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until STOPFILE exists, or for SECONDS when given as -SECONDS. */
static int client(int port, const char *until)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	double t0 = now_s(), limit = until[0] == '-' ? atof(until + 1) : 0;
	long requests = 0, errors = 0;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		perror("rr_server client");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (uint64_t i = 1;; i++) {
		uint64_t v = i;

		if ((i & 255) == 0 && (limit ? now_s() - t0 >= limit : access(until, F_OK) == 0))
			break;
		if (io_all(fd, &v, sizeof(v), 1) || io_all(fd, &v, sizeof(v), 0)) {
			errors++;
			break;
		}
		requests++;
		errors += v != expected(i);
	}
	printf("requests %ld errors %ld rate %.0f/s\n", requests, errors, requests / (now_s() - t0));
	return errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "serve") == 0)
		return serve();
	if (argc == 4 && strcmp(argv[1], "client") == 0)
		return client(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: rr_server serve | rr_server client PORT STOPFILE|-SECONDS\n");
	return 2;
}
