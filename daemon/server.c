// SPDX-License-Identifier: MIT
/*
 * The epoll loop (see server.h): accepts connections, reads frames without
 * ever blocking on a peer, classifies a connection by its first frame and
 * hands frames to the sessions. A peer that sends a bad header is dropped;
 * nothing a peer sends can stall the loop or other sessions. Also the
 * daemon's voice: log lines (stderr or the journal) and the service
 * manager's READY/STATUS/STOPPING notifications.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/server.h"
#include "daemon/session.h"
#include "proto/frame_io.h"

#define TICK_NS (20 * 1000 * 1000)
#define READ_CHUNK (64 * 1024)
#define LOG_LINE_MAX 4096

/* journald reads the stream $JOURNAL_STREAM names ("DEV:INO"); a redirected stderr is not it */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return env && sscanf(env, "%llu:%llu", &dev, &ino) == 2 && !fstat(STDERR_FILENO, &st) &&
	       st.st_dev == dev && st.st_ino == ino;
}

static void server_logv(int prio, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	size_t room, len;
	int head, n;

	head = stderr_is_journal() ? snprintf(line, sizeof(line), "<%d>", prio & LOG_PRIMASK)
				   : snprintf(line, sizeof(line), "profd: ");
	room = sizeof(line) - (size_t)head - 1; /* the last byte is for '\n' */
	n = vsnprintf(line + head, room, fmt, ap);
	len = (size_t)head + (n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1);
	/* messages carry peers' text (comm, paths): it must not forge or split lines */
	for (size_t i = (size_t)head; i < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0) {
		/* nowhere left to say it */
	}
}

void server_log_prio(int prio, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	server_logv(prio, fmt, ap);
	va_end(ap);
	errno = saved;
}

void server_log(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	server_logv(LOG_INFO, fmt, ap);
	va_end(ap);
	errno = saved;
}

int server_notify(const char *state)
{
	return sd_notify(0, state);
}

int conn_send(struct conn *c, uint32_t type, const void *payload, size_t len)
{
	int err;

	if (!c || c->closing)
		return -EPIPE;
	err = frame_send(c->fd, type, payload, len, -1);
	if (err < 0)
		c->closing = true;
	return err;
}

void conn_close_later(struct conn *c)
{
	if (c)
		c->closing = true;
}

static int listen_on(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(fd, 64)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int epoll_add(int epfd, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

int server_init(struct server *srv, const struct server_options *opt)
{
	struct itimerspec tick = { { 0, TICK_NS }, { 0, TICK_NS } };
	sigset_t stop_signals;

	memset(srv, 0, sizeof(*srv));
	srv->status_sessions = -1;
	srv->exit_when_idle = opt->exit_when_idle;
	srv->verbose = opt->verbose;
	srv->listen_fd = opt->listen_fd >= 0 ? opt->listen_fd : listen_on(opt->socket_path);
	if (srv->listen_fd < 0) {
		server_log_prio(LOG_ERR, "cannot listen on %s: %s", opt->socket_path,
				strerror(-srv->listen_fd));
		return srv->listen_fd;
	}
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGHUP);
	/* a private daemon belongs to its profctl: the terminal's Ctrl-C is not for it */
	if (opt->exit_when_idle)
		signal(SIGINT, SIG_IGN);
	else
		sigaddset(&stop_signals, SIGINT);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	srv->signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
	srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	srv->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (srv->epoll_fd < 0 || srv->timer_fd < 0 || srv->signal_fd < 0 ||
	    timerfd_settime(srv->timer_fd, 0, &tick, NULL))
		return -errno;
	/* data.ptr NULL = listener, &timer_fd = timer, else a struct conn */
	if (epoll_add(srv->epoll_fd, srv->listen_fd, NULL) ||
	    epoll_add(srv->epoll_fd, srv->timer_fd, &srv->timer_fd) ||
	    epoll_add(srv->epoll_fd, srv->signal_fd, &srv->signal_fd))
		return -errno;
	return 0;
}

static void server_accept(struct server *srv)
{
	for (;;) {
		socklen_t len = sizeof(struct ucred);
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0)
			return;
		c = calloc(1, sizeof(*c));
		if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len) ||
		    epoll_add(srv->epoll_fd, fd, c)) {
			free(c);
			close(fd);
			continue;
		}
		/* bounded: a client that stops reading cannot hold the loop for long */
		struct timeval tv = { .tv_sec = 1 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		c->fd = fd;
		c->passed_fd = -1;
		frame_reader_init(&c->reader);
		c->next = srv->conns;
		srv->conns = c;
	}
}

static void conn_free(struct server *srv, struct conn *c)
{
	for (struct conn **l = &srv->conns; *l; l = &(*l)->next) {
		if (*l == c) {
			*l = c->next;
			break;
		}
	}
	session_conn_closed(srv, c);
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	frame_reader_free(&c->reader);
	free(c);
}

/* Reads what the socket has; returns bytes read, 0 on EOF, -EAGAIN, or -errno. */
static ssize_t conn_read(struct conn *c)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} control;
	size_t room;
	uint8_t *space = frame_reader_space(&c->reader, READ_CHUNK, &room);
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;
	int fd;

	if (!space)
		return -ENOMEM;
	iov = (struct iovec){ space, room };
	msg.msg_control = control.buf;
	msg.msg_controllen = sizeof(control.buf);
	n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	fd = frame_take_passed_fd(&msg);
	if (fd >= 0) {
		if (c->passed_fd >= 0)
			close(c->passed_fd);
		c->passed_fd = fd;
	}
	frame_reader_commit(&c->reader, (size_t)n);
	return n;
}

static void conn_dispatch(struct server *srv, struct conn *c, const struct frame_header *h,
			  const uint8_t *payload)
{
	if (c->kind == CONN_NEW)
		c->kind = h->type == FRAME_AGENT_HELLO ? CONN_AGENT : CONN_CLIENT;
	if (c->kind == CONN_AGENT)
		session_agent_frame(srv, c, h->type, payload, h->length);
	else
		session_client_frame(srv, c, h->type, payload, h->length);
}

static void conn_readable(struct server *srv, struct conn *c)
{
	struct frame_header h;
	const uint8_t *payload;
	ssize_t n;
	int r = 0;

	/* bounded work per wake-up so one busy agent cannot starve the others */
	for (int rounds = 0; rounds < 64 && !c->closing; rounds++) {
		n = conn_read(c);
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			c->closing = true;
			break;
		}
		while (!c->closing && (r = frame_reader_next(&c->reader, &h, &payload)) > 0)
			conn_dispatch(srv, c, &h, payload);
		if (r < 0) {
			if (srv->verbose)
				server_log_prio(LOG_WARNING, "pid %d sent a bad frame header: %s",
						(int)c->peer.pid, strerror(-r));
			c->closing = true;
		}
	}
}

static void reap_closing(struct server *srv)
{
	struct conn *c = srv->conns, *next;

	for (; c; c = next) {
		next = c->next;
		if (c->closing)
			conn_free(srv, c);
	}
}

/*
 * A session lives exactly as long as its client connection points to it:
 * session_conn_closed() finishes it when the client goes, and session_finish()
 * clears c->session. So counting clients counts sessions.
 */
static int count_sessions(const struct server *srv)
{
	int n = 0;

	for (const struct conn *c = srv->conns; c; c = c->next)
		n += c->kind == CONN_CLIENT && c->session;
	return n;
}

/* STATUS= for `systemctl status`, sent only when the count changes */
static void update_status(struct server *srv)
{
	char state[64];
	int n = count_sessions(srv);

	if (n == srv->status_sessions)
		return;
	srv->status_sessions = n;
	snprintf(state, sizeof(state), "STATUS=%d session%s", n, n == 1 ? "" : "s");
	server_notify(state);
}

static void server_stopping(struct server *srv)
{
	struct signalfd_siginfo si = { 0 };
	const char *name = NULL;
	char state[96];
	int n = count_sessions(srv);

	if (read(srv->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		name = sigabbrev_np((int)si.ssi_signo);
	server_log("stopping on SIG%s: finalizing %d trace%s", name ? name : "?", n,
		   n == 1 ? "" : "s");
	snprintf(state, sizeof(state), "STOPPING=1\nSTATUS=finalizing %d trace%s", n,
		 n == 1 ? "" : "s");
	server_notify(state);
}

int server_run(struct server *srv)
{
	struct epoll_event events[64];

	update_status(srv);
	for (;;) {
		int n = epoll_wait(srv->epoll_fd, events, 64, -1);

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			void *ptr = events[i].data.ptr;

			if (!ptr) {
				server_accept(srv);
			} else if (ptr == &srv->signal_fd) {
				server_stopping(srv);
				return 0;
			} else if (ptr == &srv->timer_fd) {
				uint64_t expirations;

				if (read(srv->timer_fd, &expirations, sizeof(expirations)) < 0)
					continue;
				session_tick_all(srv);
			} else {
				conn_readable(srv, ptr);
			}
		}
		reap_closing(srv);
		update_status(srv);
		if (srv->exit_when_idle && srv->served_one && !srv->sessions && !srv->conns)
			return 0;
	}
}

void server_fini(struct server *srv)
{
	session_finish_all(srv);
	reap_closing(srv);
	while (srv->conns)
		conn_free(srv, srv->conns);
	close(srv->epoll_fd);
	close(srv->timer_fd);
	close(srv->signal_fd);
	close(srv->listen_fd);
}
