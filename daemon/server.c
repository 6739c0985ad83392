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
#include <grp.h>
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
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "common/mono_clock.h"
#include "daemon/sched/sched_tracer.h"
#include "daemon/server.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/kernel_symbols_cache.h"
#include "daemon/symbols/kernel_symbols_job.h"
#include "daemon/session.h"
#include "proto/frame_io.h"

#define TICK_NS (20 * 1000 * 1000)
#define PROFD_GROUP "profd" /* systemd/profd.sysusers */
#define READ_CHUNK (64 * 1024)
/*
 * A peer may leave this much of our output unread before it is dropped: two
 * whole frames of the largest size, or one large frame (the function table
 * of a module whose 48,000 functions are all skipped with their reasons, as
 * libjvm's are) would drop a client that simply had not read yet.
 */
#define CONN_OUT_MAX (2 * (FRAME_HEADER_SIZE + FRAME_PAYLOAD_MAX))
/* A frame begun and not finished within this is a stalled peer: dropped. */
#define CONN_STALL_NS (10ull * 1000 * 1000 * 1000)
/* A connection whose first frame does not come within this is dropped too. */
#define CONN_FIRST_FRAME_NS (10ull * 1000 * 1000 * 1000)
/* A peer quiet this long gets its read buffer trimmed (frame_reader_keep). */
#define CONN_TRIM_NS (1000ull * 1000 * 1000)
/* How long a closing connection may take to drain its last frames (a summary). */
#define CONN_LINGER_NS (2ull * 1000 * 1000 * 1000)
/* Beyond this many connections new ones are accepted and closed at once. */
#define CONN_MAX 512
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

int server_notify(const char *state)
{
	return sd_notify(0, state);
}

static void conn_watch_output(struct conn *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };

	if (c->out_watched == on)
		return;
	if (epoll_ctl(c->srv->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->out_watched = on;
}

/* Sends what the socket takes; 0 (maybe with output left), or -errno: the peer is gone. */
static int conn_flush(struct conn *c)
{
	size_t done = 0;
	int err = 0;

	while (done < c->out_len) {
		ssize_t n = send(c->fd, c->out + done, c->out_len - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				err = -errno;
			break;
		}
		done += (size_t)n;
	}
	memmove(c->out, c->out + done, c->out_len - done);
	c->out_len -= done;
	if (!err)
		conn_watch_output(c, c->out_len > 0);
	return err;
}

static int conn_queue(struct conn *c, const void *p, size_t len)
{
	if (c->out_len + len > CONN_OUT_MAX)
		return -ENOBUFS;
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		uint8_t *out;

		while (cap < c->out_len + len)
			cap *= 2;
		out = realloc(c->out, cap);
		if (!out)
			return -ENOMEM;
		c->out = out;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, len);
	c->out_len += len;
	return 0;
}

int conn_send(struct conn *c, uint32_t type, const void *payload, size_t len)
{
	uint8_t header[FRAME_HEADER_SIZE];
	int err;

	if (!c || c->closing)
		return -EPIPE;
	if (len > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	frame_header_encode(header, type, (uint32_t)len);
	err = conn_queue(c, header, sizeof(header));
	if (!err && len)
		err = conn_queue(c, payload, len);
	if (!err)
		err = conn_flush(c);
	if (err == -ENOBUFS)
		server_log_prio(LOG_WARNING, "pid %d reads nothing of what profd sends: "
				"disconnected", (int)c->peer.pid);
	if (err < 0)
		c->closing = true;
	return err;
}

void conn_close_later(struct conn *c)
{
	if (c)
		c->closing = true;
}

/*
 * The modes profd.socket gives (SocketMode=0660, SocketGroup=profd), for a
 * profd that binds its own socket: group `profd` may connect, nobody else.
 * Without that group only root may. Before listen(): nobody connects sooner.
 */
static int restrict_socket(const char *path)
{
	struct group *grp = getgrnam(PROFD_GROUP);

	if (!grp) {
		server_log_prio(LOG_WARNING, "no group %s (systemd-sysusers creates it): only root "
				"may connect to %s", PROFD_GROUP, path);
		return chmod(path, 0600) ? -errno : 0;
	}
	if (chown(path, (uid_t)-1, grp->gr_gid) || chmod(path, 0660))
		return -errno;
	return 0;
}

/*
 * Binds and listens under a temporary name, then renames it into place: the
 * socket appears at `path` already listening, with its final modes, so a
 * client polling for it never meets a refused or wrongly open socket.
 */
static int listen_on(const char *path, bool shared)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char dir[sizeof(addr.sun_path)], *slash;
	int fd, n;

	n = snprintf(addr.sun_path, sizeof(addr.sun_path), "%s.new", path);
	if (n < 0 || (size_t)n >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	/* /run/profd as profd.socket makes it (DirectoryMode=0755), when it is not there */
	strcpy(dir, path);
	slash = strrchr(dir, '/');
	if (shared && slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -errno;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(addr.sun_path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    (shared && restrict_socket(addr.sun_path)) || listen(fd, 64) ||
	    rename(addr.sun_path, path)) {
		int err = -errno;

		unlink(addr.sun_path);
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
	srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	srv->exit_when_idle = opt->exit_when_idle;
	srv->verbose = opt->verbose;
	srv->listen_fd = opt->listen_fd >= 0 ? opt->listen_fd :
						 listen_on(opt->socket_path, !opt->exit_when_idle);
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

#define SCHED_KEEP_NS (10ull * 1000000000ull)

int server_sched_get(struct server *srv, char *why, size_t len)
{
	srv->sched_idle_ns = 0;
	if (srv->sched)
		return 0;
	srv->sched = sched_tracer_open(why, len);
	if (!srv->sched)
		return -1;
	/* data.ptr &srv->sched: the ring is filling up (it is read on every tick anyway) */
	if (epoll_add(srv->epoll_fd, sched_tracer_fd(srv->sched), &srv->sched)) {
		snprintf(why, len, "cannot watch the BPF ring buffer: %s", strerror(errno));
		sched_tracer_close(srv->sched);
		srv->sched = NULL;
		return -1;
	}
	server_log("scheduler probe loaded");
	return 0;
}

void server_sched_put(struct server *srv)
{
	if (srv->sched && !sched_tracer_targets(srv->sched))
		srv->sched_idle_ns = mono_clock_ns();
}

void server_sched_expire(struct server *srv, uint64_t now_ns)
{
	if (!srv->sched || !srv->sched_idle_ns || now_ns - srv->sched_idle_ns < SCHED_KEEP_NS ||
	    sched_tracer_targets(srv->sched))
		return;
	srv->sched_idle_ns = 0;
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, sched_tracer_fd(srv->sched), NULL);
	sched_tracer_close(srv->sched);
	srv->sched = NULL;
	server_log("scheduler probe unloaded");
}

/*
 * Out of descriptors (or over CONN_MAX): a pending connection left in the
 * backlog keeps the listener readable and the loop spinning. Take it with
 * the spare descriptor and close it; the peer sees the hang-up at once.
 */
static void server_refuse_one(struct server *srv, const char *why)
{
	int fd;

	if (!srv->told_full)
		server_log_prio(LOG_WARNING, "refusing connections: %s", why);
	srv->told_full = true;
	if (srv->spare_fd >= 0) {
		close(srv->spare_fd);
		srv->spare_fd = -1;
	}
	fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	srv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A connection for fd, in the loop; the peer is whoever SO_PEERCRED names. NULL: fd is the caller's. */
static struct conn *conn_new(struct server *srv, int fd)
{
	socklen_t len = sizeof(struct ucred);
	struct conn *c = calloc(1, sizeof(*c));

	if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len) ||
	    epoll_add(srv->epoll_fd, fd, c)) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->srv = srv;
	c->passed_fd = -1;
	c->last_read_ns = mono_clock_ns();
	frame_reader_init(&c->reader);
	/* agents stream frames of up to 2 MiB: trimmed when quiet (drop_stalled) */
	frame_reader_keep(&c->reader, true);
	c->next = srv->conns;
	srv->conns = c;
	srv->n_conns++;
	return c;
}

static void server_accept(struct server *srv)
{
	for (;;) {
		int fd;

		if (srv->n_conns >= CONN_MAX) {
			server_refuse_one(srv, "too many connections");
			return;
		}
		fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				server_refuse_one(srv, strerror(errno));
			return;
		}
		srv->told_full = false;
		if (!conn_new(srv, fd))
			close(fd);
	}
}

struct conn *server_adopt(struct server *srv, int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (srv->n_conns >= CONN_MAX)
		return NULL;
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK))
		return NULL;
	return conn_new(srv, fd);
}

static void conn_free(struct server *srv, struct conn *c)
{
	for (struct conn **l = &srv->conns; *l; l = &(*l)->next) {
		if (*l == c) {
			*l = c->next;
			break;
		}
	}
	srv->n_conns--;
	if (!c->session_told)
		session_conn_closed(srv, c);
	epoll_ctl(srv->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	frame_reader_free(&c->reader);
	free(c->out);
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
	c->last_read_ns = mono_clock_ns();
	return n;
}

static void conn_dispatch(struct server *srv, struct conn *c, const struct frame_header *h,
			  const uint8_t *payload)
{
	if (c->kind == CONN_NEW)
		c->kind = h->type == FRAME_AGENT_HELLO ? CONN_AGENT : CONN_CLIENT;
	if (c->kind == CONN_AGENT)
		session_agent_frame(srv, c, h->type, payload, h->length);
	else if (c->kind == CONN_SPAWNER)
		session_spawner_frame(srv, c, h->type);
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

void server_settle(struct server *srv)
{
	server_accept(srv);
	for (struct conn *c = srv->conns; c; c = c->next)
		if (!c->closing && (c->kind == CONN_NEW || c->kind == CONN_AGENT))
			conn_readable(srv, c);
}

/*
 * A closing connection's session learns it at once; the connection itself
 * stays only while frames queued for the peer (its summary, an error) are
 * still going out, CONN_LINGER_NS at most.
 */
static void reap_closing(struct server *srv)
{
	struct conn *c = srv->conns, *next;
	uint64_t now = mono_clock_ns();

	for (; c; c = next) {
		next = c->next;
		if (!c->closing)
			continue;
		if (!c->session_told) {
			session_conn_closed(srv, c);
			c->session_told = true;
			c->linger_until_ns = now + CONN_LINGER_NS;
		}
		if (c->out_len && conn_flush(c) == 0 && c->out_len && now < c->linger_until_ns)
			continue;
		conn_free(srv, c);
	}
}

/* The peer may take more of our output; a closing connection reads nothing more. */
static void conn_writable(struct server *srv, struct conn *c)
{
	(void)srv;
	if (conn_flush(c) < 0)
		c->closing = true;
}

/*
 * Peers that stopped halfway through a frame, or never said what they are;
 * and the read buffers of quiet peers go back to their small size.
 */
static void drop_stalled(struct server *srv)
{
	uint64_t now = mono_clock_ns();

	for (struct conn *c = srv->conns; c; c = c->next) {
		const char *why = NULL;

		if (c->closing)
			continue;
		if (now - c->last_read_ns > CONN_TRIM_NS)
			frame_reader_trim(&c->reader);
		if (frame_reader_partial(&c->reader) && now - c->last_read_ns > CONN_STALL_NS)
			why = "stalled in the middle of a frame";
		else if (c->kind == CONN_NEW && now - c->last_read_ns > CONN_FIRST_FRAME_NS)
			why = "sent no frame";
		if (!why)
			continue;
		server_log_prio(LOG_WARNING, "pid %d %s for %llu s: disconnected", (int)c->peer.pid,
				why, (unsigned long long)((now - c->last_read_ns) / 1000000000ull));
		c->closing = true;
	}
}

/* STATUS= for `systemctl status`, sent only when the count changes */
static void update_status(struct server *srv)
{
	char state[64];
	int n = session_count(srv);

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
	int n = session_count(srv);

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
			} else if (ptr == &srv->sched) {
				session_sched_drain(srv);
			} else if (ptr == &srv->timer_fd) {
				uint64_t expirations;

				if (read(srv->timer_fd, &expirations, sizeof(expirations)) < 0)
					continue;
				session_tick_all(srv);
				drop_stalled(srv);
			} else {
				if (events[i].events & EPOLLOUT)
					conn_writable(srv, ptr);
				if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					conn_readable(srv, ptr);
			}
		}
		reap_closing(srv);
		if (srv->sessions_may_end)
			session_end_ready(srv);
		update_status(srv);
		if (srv->exit_when_idle && srv->served_one && !srv->sessions && !srv->conns)
			return 0;
	}
}

/* Exiting: the summaries just queued get CONN_LINGER_NS to reach their clients. */
static void drain_output(struct server *srv)
{
	uint64_t deadline = mono_clock_ns() + CONN_LINGER_NS;
	bool pending = true;

	while (pending && mono_clock_ns() < deadline) {
		pending = false;
		for (struct conn *c = srv->conns; c; c = c->next)
			if (c->out_len && conn_flush(c) == 0 && c->out_len)
				pending = true;
		if (pending)
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
}

#define KERNEL_SYMBOLS_KEEP_NS (60ull * 1000000000ull)

/* The thread's table, waited for, as the server's copy; NULL with its reason in err. */
static struct kernel_symbols *kernel_job_collect(struct server *srv, char *err, size_t len)
{
	struct kernel_symbols *k = kernel_symbols_job_finish(srv->kernel_job, err, len);

	srv->kernel_job = NULL;
	if (k) {
		kernel_symbols_free(srv->kernel);
		srv->kernel = k;
		srv->kernel_sig = srv->kernel_job_sig;
	}
	return k;
}

struct kernel_symbols *server_kernel_symbols(struct server *srv, char *err, size_t len)
{
	uint64_t sig;

	if (srv->kernel_job && !kernel_job_collect(srv, err, len))
		return NULL; /* read once for this session: its reason stands */
	sig = kernel_symbols_cache_key(); /* what moves the symbols, BPF programs aside */
	if (srv->kernel && sig != srv->kernel_sig) {
		kernel_symbols_free(srv->kernel);
		srv->kernel = NULL;
	}
	if (!srv->kernel) {
		srv->kernel = kernel_symbols_load_cached(KERNEL_SYMBOLS_CACHE_DIR, err, len);
		srv->kernel_sig = sig;
	}
	srv->kernel_used_ns = mono_clock_ns();
	return srv->kernel ? kernel_symbols_ref(srv->kernel) : NULL;
}

void server_kernel_symbols_prefetch(struct server *srv)
{
	uint64_t sig;

	if (srv->kernel_job)
		return;
	sig = kernel_symbols_cache_key(); /* what moves the symbols, BPF programs aside */
	if (srv->kernel && sig == srv->kernel_sig) {
		srv->kernel_used_ns = mono_clock_ns();
		return;
	}
	/* no thread: server_kernel_symbols reads it when first asked, as before */
	srv->kernel_job = kernel_symbols_job_start(NULL);
	srv->kernel_job_sig = sig;
}

bool server_kernel_symbols_pending(const struct server *srv)
{
	return srv->kernel_job && !kernel_symbols_job_done(srv->kernel_job);
}

void server_kernel_symbols_expire(struct server *srv, uint64_t now_ns)
{
	if (srv->kernel && now_ns - srv->kernel_used_ns > KERNEL_SYMBOLS_KEEP_NS) {
		kernel_symbols_free(srv->kernel); /* sessions keep their references */
		srv->kernel = NULL;
	}
}

void server_fini(struct server *srv)
{
	session_finish_all(srv);
	if (srv->kernel_job) { /* its copy saved for the next daemon (a private one's next run) */
		char err[8];

		kernel_job_collect(srv, err, sizeof(err));
	}
	kernel_symbols_free(srv->kernel);
	srv->kernel = NULL;
	sched_tracer_close(srv->sched); /* every session gave its target back */
	srv->sched = NULL;
	drain_output(srv);
	reap_closing(srv);
	while (srv->conns)
		conn_free(srv, srv->conns);
	close(srv->epoll_fd);
	close(srv->timer_fd);
	close(srv->signal_fd);
	close(srv->listen_fd);
	if (srv->spare_fd >= 0)
		close(srv->spare_fd);
}
