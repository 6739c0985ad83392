// SPDX-License-Identifier: MIT
/* daemon/server.c: sending never blocks the loop; a peer that reads nothing is dropped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/server.h"
#include "tests/unit/unit.h"

struct pair {
	struct server srv;
	struct conn c;
	int peer;
};

/* A connection as server_accept() makes it: non-blocking, in the epoll set. */
static void pair_open(struct pair *p)
{
	int sv[2];
	struct epoll_event ev = { .events = EPOLLIN };

	memset(p, 0, sizeof(*p));
	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	p->srv.epoll_fd = epoll_create1(0);
	p->c.fd = sv[0];
	p->c.srv = &p->srv;
	p->c.passed_fd = -1;
	p->peer = sv[1];
	ev.data.ptr = &p->c;
	CHECK_EQ_INT(epoll_ctl(p->srv.epoll_fd, EPOLL_CTL_ADD, p->c.fd, &ev), 0);
}

static void pair_close(struct pair *p)
{
	close(p->c.fd);
	close(p->peer);
	close(p->srv.epoll_fd);
	free(p->c.out);
}

static void test_send_larger_than_the_socket_returns_at_once(void)
{
	size_t big = 1u << 20;
	uint8_t *payload = calloc(1, big), head[8];
	struct epoll_event ev;
	struct pair p;

	pair_open(&p);
	/* a blocking send would wait here for ever: nobody reads p.peer yet */
	CHECK_EQ_INT(conn_send(&p.c, FRAME_ERROR, payload, big), 0);
	CHECK(p.c.out_len > 0);
	CHECK(!p.c.closing);
	CHECK(p.c.out_watched);
	/* what did go out starts with the frame's header */
	CHECK_EQ_INT(read(p.peer, head, sizeof(head)), 8);
	CHECK_EQ_INT(head[0], FRAME_ERROR);
	/* once the peer reads, the loop is told it may send the rest */
	while (read(p.peer, payload, big) > 0)
		;
	CHECK_EQ_INT(epoll_wait(p.srv.epoll_fd, &ev, 1, 1000), 1);
	CHECK(ev.events & EPOLLOUT);
	pair_close(&p);
	free(payload);
}

static void test_peer_that_reads_nothing_is_dropped(void)
{
	size_t big = 1u << 20;
	uint8_t *payload = calloc(1, big);
	struct pair p;
	int err = 0;

	pair_open(&p);
	/* past CONN_OUT_MAX (two frames of the largest size) and the socket's buffers */
	for (int i = 0; i < 2 * (int)(FRAME_PAYLOAD_MAX / big) + 8 && !err; i++)
		err = conn_send(&p.c, FRAME_ERROR, payload, big);
	CHECK_EQ_INT(err, -ENOBUFS);
	CHECK(p.c.closing);
	CHECK_EQ_INT(conn_send(&p.c, FRAME_ERROR, "x", 1), -EPIPE);
	pair_close(&p);
	free(payload);
}

static void test_gone_peer_closes(void)
{
	struct pair p;

	pair_open(&p);
	close(p.peer);
	p.peer = -1;
	CHECK_EQ_INT(conn_send(&p.c, FRAME_ERROR, "bye", 3), -EPIPE);
	CHECK(p.c.closing);
	pair_close(&p);
}

int main(void)
{
	RUN_TEST(test_send_larger_than_the_socket_returns_at_once);
	RUN_TEST(test_peer_that_reads_nothing_is_dropped);
	RUN_TEST(test_gone_peer_closes);
	return unit_summary();
}
