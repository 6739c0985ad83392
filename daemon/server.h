/* SPDX-License-Identifier: MIT */
/*
 * profd's event loop: one epoll set holding the listening socket, every
 * connection (profctl clients and agents) and a periodic timer. Owns the
 * connections and their frame readers; sessions (daemon/session.c) own
 * everything about a profiled target. Also owns the log sink and the
 * sd_notify messages, which only main() and the loop send.
 */
#ifndef PROFD_SERVER_H
#define PROFD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <syslog.h>

#include "proto/frame.h"

struct session;
struct server;

enum conn_kind {
	CONN_NEW = 0,   /* first frame not seen yet */
	CONN_CLIENT,    /* profctl */
	CONN_AGENT,     /* libprofagent.so inside a target */
	CONN_SPAWNER,   /* attach --children: forked children's links come through it */
};

struct conn {
	int fd;                   /* non-blocking: nothing a peer does can hold the loop */
	struct server *srv;
	enum conn_kind kind;
	struct ucred peer;        /* SO_PEERCRED at accept */
	struct frame_reader reader;
	int passed_fd;            /* last SCM_RIGHTS descriptor received, -1 if none */
	struct session *session;
	uint64_t bound_session;   /* an agent link a client handed over: only this session's agent */
	bool closing;
	bool session_told;        /* session_conn_closed() ran: only queued output remains */
	/* frames the peer has not taken yet, bounded by CONN_OUT_MAX */
	uint8_t *out;
	size_t out_len, out_cap;
	bool out_watched;         /* EPOLLOUT registered */
	uint64_t last_read_ns;    /* a partial frame older than CONN_STALL_NS ends the connection */
	uint64_t linger_until_ns; /* closing with output queued: flushed until then */
	struct conn *next;
};

struct server {
	int epoll_fd;
	int listen_fd;
	int timer_fd;
	int signal_fd;            /* SIGTERM/SIGINT/SIGHUP: finalize every trace, then exit */
	struct conn *conns;
	struct session *sessions;
	uint64_t next_session_id;
	bool exit_when_idle;      /* private daemon: leave after the last session */
	bool served_one;
	int verbose;
	int status_sessions;      /* session count last sent as STATUS=, -1 = none yet */
	size_t n_conns;
	int spare_fd;             /* kept free for accept-and-close when descriptors run out */
	bool told_full;           /* "too many connections" logged once per episode */
	bool sessions_may_end;    /* an agent left a session whose target exited: see session_end_ready */
	/*
	 * The scheduler probe, loaded while a session uses it (daemon/sched/sched_tracer.h)
	 * and SCHED_KEEP_NS after: sched_idle_ns, when the last one let it go (0: in use).
	 */
	struct sched_tracer *sched;
	uint64_t sched_idle_ns;
	/* /proc/kallsyms read by a session, for the next ones (server_kernel_symbols) */
	struct kernel_symbols *kernel;
	uint64_t kernel_sig, kernel_used_ns;
	/* its reading on a thread, started by server_kernel_symbols_prefetch */
	struct kernel_symbols_job *kernel_job;
	uint64_t kernel_job_sig;
};

struct server_options {
	const char *socket_path;
	int listen_fd;            /* >= 0: already bound and listening (socket activation) */
	bool exit_when_idle;
	int verbose;
};

int server_init(struct server *srv, const struct server_options *opt);
/* Runs until idle exit (private mode) or a fatal error; returns 0 or negative errno. */
int server_run(struct server *srv);
void server_fini(struct server *srv);

/*
 * The scheduler probe for one more session: loaded (and its ring watched)
 * by the first. 0, or -1 with a one-line reason in why.
 * server_sched_put: once no session follows a target with it, it is
 * unloaded a few seconds later (server_sched_expire), unless a session
 * takes it again: sessions in a row (a bench's rounds, a test suite) load
 * and verify it once (~35 ms each, before their target may start).
 */
int server_sched_get(struct server *srv, char *why, size_t len);
void server_sched_put(struct server *srv);
void server_sched_expire(struct server *srv, uint64_t now_ns);

/*
 * The kernel's symbols (daemon/symbols/kernel_symbols.h), a reference for
 * the caller to free: read from /proc/kallsyms, or the table read for an
 * earlier session while its key stays the same (kernel_symbols_cache_key:
 * a module loaded, unloaded or moved, or kptr_restrict changed, reads it
 * again). NULL with a one-line reason in err.
 * server_kernel_symbols_expire drops the server's table unused for a minute.
 */
struct kernel_symbols *server_kernel_symbols(struct server *srv, char *err, size_t len);
void server_kernel_symbols_expire(struct server *srv, uint64_t now_ns);
/*
 * Starts reading the table on a thread unless the server's copy is current
 * or a read is under way: a session's target need not wait for it (the
 * 60-130 ms were most of a short `profctl run`). server_kernel_symbols
 * waits for that read; server_kernel_symbols_pending says whether it would.
 */
void server_kernel_symbols_prefetch(struct server *srv);
bool server_kernel_symbols_pending(const struct server *srv);

/*
 * Queues one frame for the peer and sends what the socket takes now; the
 * rest goes out as the peer reads (EPOLLOUT). Never blocks. A peer that lets
 * CONN_OUT_MAX bytes pile up is dropped. Returns 0, or a negative errno when
 * the connection is closing or was dropped.
 */
/*
 * Reads now what agents (and peers yet to say what they are) sent so far:
 * the connections waiting in the backlog are accepted, each one's frames
 * handled. Agents do not wait for profd's answer: one whose process exited
 * may have connected and said everything before profd looked. Handling a
 * frame may end a session: call it outside any walk of the sessions.
 */
void server_settle(struct server *srv);

/*
 * Serves fd, a connected socket a client handed over (an agent link), as a
 * connection of its own; its peer is the socket's SO_PEERCRED. Makes it
 * non-blocking. Returns the connection, or NULL (over CONN_MAX, out of
 * memory): fd is then still the caller's to close.
 */
struct conn *server_adopt(struct server *srv, int fd);

int conn_send(struct conn *c, uint32_t type, const void *payload, size_t len);
void conn_close_later(struct conn *c);

/*
 * Logs one line to stderr: one event, one line (control characters in the
 * message, newlines included, become '?'), written with a single write(2).
 * When stderr is the journal ($JOURNAL_STREAM names it), the line starts with
 * the syslog priority ("<6>") instead of "profd: ", which journald shows
 * itself. prio is a LOG_* level from <syslog.h>; server_log() is LOG_INFO.
 * Keeps errno. Thread-safe (no state).
 */
void server_log_prio(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define server_log(...) server_log_prio(LOG_INFO, __VA_ARGS__)

/*
 * Sends state to the service manager (sd_notify(3), libsystemd), e.g.
 * "READY=1\nSTATUS=0 sessions". Returns > 0 when sent, 0 when no manager
 * listens ($NOTIFY_SOCKET unset), or a negative errno. Keeps the environment.
 */
int server_notify(const char *state);

#endif
