// SPDX-License-Identifier: MIT
/*
 * The one-file HTTP server of `profctl open` (see http_serve.h). It never
 * maps a request to a path: the target is compared with the one name served.
 * One thread, non-blocking sockets and poll(), so a browser's idle
 * preconnection or a slow reader cannot hold up the fetch that matters.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/mono_clock.h"
#include "profctl/http_serve.h"

#define MAX_CLIENTS 16
#define HEAD_WAIT_MS 10000  /* to send a whole request head */
#define STALL_MS 30000      /* without taking a byte of the reply */
#define LINGER_MS 5000      /* after the reply, for the client's close */
#define LINGER_MAX (64 << 10) /* bytes read and dropped after the reply */
#define SENDFILE_CHUNK (1 << 30)

/* ---- request parsing ---------------------------------------------------- */

static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A field value's byte: visible, space, tab or obs-text; never CTL or DEL. */
static bool is_field_byte(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool str_is(struct http_str s, const char *lit)
{
	return s.p && s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

static bool str_is_nocase(struct http_str s, const char *lit)
{
	return s.p && s.len == strlen(lit) && strncasecmp(s.p, lit, s.len) == 0;
}

/* The CR of the next CRLF from p, or NULL at a bare CR or LF, a NUL or the end. */
static const char *find_crlf(const char *p, const char *end)
{
	for (; p < end; p++) {
		if (*p == '\r')
			return p + 1 < end && p[1] == '\n' ? p : NULL;
		if (*p == '\n' || *p == '\0')
			return NULL;
	}
	return NULL;
}

/* METHOD SP /target SP HTTP/1.x */
static int parse_request_line(const char *p, const char *eol, struct http_request *req)
{
	const char *s = p;

	while (s < eol && is_tchar((unsigned char)*s))
		s++;
	if (s == p || s - p > 16 || s == eol || *s != ' ')
		return -EINVAL;
	req->method = (struct http_str){ p, (size_t)(s - p) };
	p = ++s;
	while (s < eol && (unsigned char)*s > 0x20 && *s != 0x7f)
		s++;
	if (s == p || *p != '/' || s == eol || *s != ' ')
		return -EINVAL;
	req->target = (struct http_str){ p, (size_t)(s - p) };
	p = s + 1;
	if (eol - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
		return -EINVAL;
	req->http11 = p[7] == '1';
	return 0;
}

/* The header fields the reply depends on, or NULL for the others. */
static struct http_str *known_field(struct http_request *req, struct http_str name)
{
	if (str_is_nocase(name, "host"))
		return &req->host;
	if (str_is_nocase(name, "origin"))
		return &req->origin;
	if (str_is_nocase(name, "access-control-request-method"))
		return &req->preflight_method;
	if (str_is_nocase(name, "access-control-request-private-network"))
		return &req->preflight_private;
	return NULL;
}

/* NAME ":" OWS value OWS, a known field at most once. */
static int parse_header(const char *p, const char *eol, struct http_request *req)
{
	const char *s = p, *v, *ve;
	struct http_str *field;

	while (s < eol && is_tchar((unsigned char)*s))
		s++;
	if (s == p || s == eol || *s != ':')
		return -EINVAL;
	field = known_field(req, (struct http_str){ p, (size_t)(s - p) });
	for (v = s + 1; v < eol; v++)
		if (!is_field_byte((unsigned char)*v))
			return -EINVAL;
	for (v = s + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
		;
	for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
		;
	if (field) {
		if (field->p)
			return -EINVAL;
		*field = (struct http_str){ v, (size_t)(ve - v) };
	}
	return 0;
}

int http_request_parse(const char *head, size_t len, struct http_request *req)
{
	const char *p = head, *end = head + len, *eol;

	memset(req, 0, sizeof(*req));
	eol = find_crlf(p, end);
	if (!eol || parse_request_line(p, eol, req))
		return -EINVAL;
	for (p = eol + 2;; p = eol + 2) {
		eol = find_crlf(p, end);
		if (!eol)
			return -EINVAL;
		if (eol == p)
			break;
		if (parse_header(p, eol, req))
			return -EINVAL;
	}
	/* the blank line ends the head; RFC 9112 3.2: 1.1 without Host is a 400 */
	if (eol + 2 != end || (req->http11 && !req->host.p))
		return -EINVAL;
	return 0;
}

/* ---- replies --------------------------------------------------------------- */

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	default: return "Error";
	}
}

/* Only the loopback names: a page that rebinds its own DNS name to 127.0.0.1 sends its name. */
static bool host_allowed(struct http_str host, uint16_t port)
{
	char a[32], b[32];

	snprintf(a, sizeof(a), "127.0.0.1:%u", port);
	snprintf(b, sizeof(b), "localhost:%u", port);
	return !host.p || str_is(host, a) || str_is_nocase(host, b);
}

static int reply_status(const struct http_request *req, const struct http_site *site)
{
	if (!req)
		return 400;
	if (!host_allowed(req->host, site->port))
		return 403;
	if (req->origin.p && !str_is(req->origin, site->origin))
		return 403;
	if (!str_is(req->target, site->path))
		return 404;
	if (str_is(req->method, "GET") || str_is(req->method, "HEAD"))
		return 200;
	if (str_is(req->method, "OPTIONS"))
		return 204;
	return 405;
}

/* Appends to r->head; the buffer is sized for every reply built here. */
__attribute__((format(printf, 2, 3))) static void put(struct http_reply *r, const char *fmt, ...)
{
	size_t room = sizeof(r->head) - r->head_len;
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(r->head + r->head_len, room, fmt, ap);
	va_end(ap);
	if (len > 0)
		r->head_len += (size_t)len < room ? (size_t)len : room - 1;
}

void http_reply_build(const struct http_request *req, const struct http_site *site, time_t now,
		      struct http_reply *r)
{
	char date[64], body[64];
	struct tm tm;

	memset(r, 0, sizeof(*r));
	r->status = reply_status(req, site);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
	put(r, "HTTP/1.1 %d %s\r\nDate: %s\r\n", r->status, reason(r->status), date);
	/* like tools/open_trace_in_ui: the UI reads it cross-origin, never from a cache */
	put(r, "Access-Control-Allow-Origin: %s\r\n", site->origin);
	put(r, "Cache-Control: no-cache\r\nConnection: close\r\n");
	if (r->status == 204) {
		put(r, "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
		       "Access-Control-Allow-Headers: Range\r\nAccess-Control-Max-Age: 600\r\n");
		/* Chrome's Private Network Access preflight (a public page asking a loopback
		 * server), before its Local Network Access prompt replaced it */
		if (str_is_nocase(req->preflight_private, "true"))
			put(r, "Access-Control-Allow-Private-Network: true\r\n");
		put(r, "\r\n");
		return;
	}
	if (r->status == 200) {
		/* the UI fetches the whole file (no Range): a plain 200 for any request */
		r->sends_file = str_is(req->method, "GET");
		r->file_len = r->sends_file ? site->size : 0;
		put(r, "Content-Type: application/octet-stream\r\nContent-Length: %llu\r\n\r\n",
		    (unsigned long long)site->size);
		return;
	}
	if (r->status == 405)
		put(r, "Allow: GET, HEAD, OPTIONS\r\n");
	snprintf(body, sizeof(body), "%d %s\n", r->status, reason(r->status));
	put(r, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n\r\n",
	    strlen(body));
	if (!req || !str_is(req->method, "HEAD"))
		put(r, "%s", body);
}

/* ---- the server -------------------------------------------------------- */

enum client_state { CLIENT_FREE, CLIENT_READ, CLIENT_WRITE, CLIENT_LINGER };

struct client {
	int fd;
	enum client_state state;
	uint64_t deadline_ns;
	char peer[INET_ADDRSTRLEN + 8];
	size_t in_len;
	char in[HTTP_HEAD_MAX];
	struct http_reply reply;
	size_t head_sent;
	off_t file_sent;
	size_t dropped; /* bytes read and ignored while lingering */
};

static uint64_t after_ms(unsigned ms)
{
	return mono_clock_ns() + ms * 1000000ull;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CLIENT_FREE;
}

/* Takes every waiting connection while a slot is free. */
static void accept_clients(int listen_fd, struct client *clients)
{
	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct sockaddr_in sa;
		socklen_t salen = sizeof(sa);
		struct client *c = &clients[i];
		char addr[INET_ADDRSTRLEN] = "?";

		if (c->state != CLIENT_FREE)
			continue;
		c->fd = accept4(listen_fd, (struct sockaddr *)&sa, &salen,
				SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c->fd < 0)
			return; /* EAGAIN, or a connection reset before we took it */
		inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
		snprintf(c->peer, sizeof(c->peer), "%s:%u", addr, ntohs(sa.sin_port));
		c->state = CLIENT_READ;
		c->in_len = 0;
		c->deadline_ns = after_ms(HEAD_WAIT_MS);
	}
}

static void log_request(const struct client *c, const struct http_request *req, bool parsed)
{
	if (parsed)
		fprintf(stderr, "profctl: %s \"%.*s %.*s\" %d\n", c->peer, (int)req->method.len,
			req->method.p, (int)req->target.len, req->target.p, c->reply.status);
	else
		fprintf(stderr, "profctl: %s malformed or too long request: %d\n", c->peer,
			c->reply.status);
}

/*
 * The end of the head in c->in (just past its blank line), or 0 while
 * incomplete. A blank line ended by a bare LF counts too, so that such a
 * request gets its 400 now rather than when the client gives up.
 */
static size_t head_end(const struct client *c, size_t from)
{
	for (size_t i = from > 2 ? from - 2 : 0; i + 1 < c->in_len; i++) {
		if (c->in[i] != '\n')
			continue;
		if (c->in[i + 1] == '\n')
			return i + 2;
		if (c->in[i + 1] == '\r' && i + 2 < c->in_len && c->in[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static void client_read(struct client *c, const struct http_serve *s)
{
	struct http_request req;
	size_t before = c->in_len, end;
	ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	bool parsed;

	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			client_close(c); /* gone before asking anything */
		return;
	}
	c->in_len += (size_t)n;
	end = head_end(c, before);
	if (!end && c->in_len < sizeof(c->in))
		return;
	parsed = end && http_request_parse(c->in, end, &req) == 0;
	http_reply_build(parsed ? &req : NULL, s->site, time(NULL), &c->reply);
	if (s->verbose)
		log_request(c, &req, parsed);
	c->state = CLIENT_WRITE;
	c->head_sent = 0;
	c->file_sent = 0;
	c->deadline_ns = after_ms(STALL_MS);
}

/* Half-closes, then reads until the client closes: closing with its bytes unread would reset the connection and lose the reply's tail. */
static void client_linger(struct client *c)
{
	shutdown(c->fd, SHUT_WR);
	c->state = CLIENT_LINGER;
	c->dropped = 0;
	c->deadline_ns = after_ms(LINGER_MS);
}

static void client_drain(struct client *c)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv(c->fd, buf, sizeof(buf), 0)) > 0)
		if ((c->dropped += (size_t)n) > LINGER_MAX)
			break;
	if (n == 0 || c->dropped > LINGER_MAX || (n < 0 && errno != EAGAIN && errno != EINTR))
		client_close(c);
}

/* A write that failed: a client that left mid-transfer is named, the others just closed. */
static void client_write_failed(struct client *c, int err)
{
	if (c->reply.sends_file && err != EAGAIN)
		fprintf(stderr, "profctl: %s left after %llu of %llu bytes (%s); still serving\n",
			c->peer, (unsigned long long)c->file_sent,
			(unsigned long long)c->reply.file_len, strerror(err));
	client_close(c);
}

/* Sends what the socket takes. Returns true once a GET has had the whole file. */
static bool client_write(struct client *c, const struct http_serve *s)
{
	const struct http_reply *r = &c->reply;

	while (c->head_sent < r->head_len) {
		ssize_t n = send(c->fd, r->head + c->head_sent, r->head_len - c->head_sent,
				 MSG_NOSIGNAL);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				client_write_failed(c, errno);
			return false;
		}
		c->head_sent += (size_t)n;
		c->deadline_ns = after_ms(STALL_MS);
	}
	while ((uint64_t)c->file_sent < r->file_len) {
		uint64_t left = r->file_len - (uint64_t)c->file_sent;
		ssize_t n = sendfile(c->fd, s->file_fd, &c->file_sent,
				     left < SENDFILE_CHUNK ? left : SENDFILE_CHUNK);

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				client_write_failed(c, errno);
			return false;
		}
		if (n == 0) { /* the file got shorter than its Content-Length */
			fprintf(stderr, "profctl: the trace shrank to %llu bytes while served\n",
				(unsigned long long)c->file_sent);
			client_close(c);
			return false;
		}
		c->deadline_ns = after_ms(STALL_MS);
	}
	client_linger(c);
	return r->sends_file;
}

/* Poll entries: [0] stop_fd, [1] the listener, then one per busy client (slot in idx). */
static nfds_t poll_set(struct pollfd *pfd, int *idx, int listen_fd, const struct client *clients,
		       const struct http_serve *s, bool accepting)
{
	nfds_t n = 2;
	bool room = false;

	pfd[0] = (struct pollfd){ .fd = s->stop_fd, .events = POLLIN };
	for (int i = 0; i < MAX_CLIENTS; i++) {
		const struct client *c = &clients[i];

		if (c->state == CLIENT_FREE) {
			room = true;
			continue;
		}
		pfd[n] = (struct pollfd){ .fd = c->fd,
					  .events = c->state == CLIENT_WRITE ? POLLOUT : POLLIN };
		idx[n++] = i;
	}
	/* a full house leaves new connections in the backlog until a slot frees */
	pfd[1] = (struct pollfd){ .fd = accepting && room ? listen_fd : -1, .events = POLLIN };
	return n;
}

/* Closes clients past their deadline; returns the poll timeout to the next deadline. */
static int expire_clients(struct client *clients, uint64_t give_up_ns)
{
	uint64_t now = mono_clock_ns(), next = give_up_ns;

	for (int i = 0; i < MAX_CLIENTS; i++) {
		struct client *c = &clients[i];

		if (c->state == CLIENT_FREE)
			continue;
		if (c->deadline_ns <= now) {
			if (c->state == CLIENT_WRITE)
				client_write_failed(c, ETIMEDOUT);
			else
				client_close(c);
			continue;
		}
		if (c->deadline_ns < next)
			next = c->deadline_ns;
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)((next - now + 999999) / 1000000);
}

/* One client's turn; returns true once the file went out whole to it. */
static bool client_step(struct client *c, short revents, const struct http_serve *s)
{
	if (c->state == CLIENT_READ && (revents & (POLLIN | POLLHUP | POLLERR)))
		client_read(c, s);
	if (c->state == CLIENT_WRITE && (revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
		return client_write(c, s);
	if (c->state == CLIENT_LINGER && (revents & (POLLIN | POLLHUP | POLLERR)))
		client_drain(c);
	return false;
}

static int serve_loop(int listen_fd, struct client *clients, const struct http_serve *s)
{
	struct pollfd pfd[MAX_CLIENTS + 2];
	int idx[MAX_CLIENTS + 2], done = -1; /* the client that took the file */
	uint64_t give_up = s->timeout_ms >= 0 ? after_ms((unsigned)s->timeout_ms) : UINT64_MAX;

	for (;;) {
		int timeout = expire_clients(clients, done >= 0 ? UINT64_MAX : give_up);
		nfds_t n;

		/* the file went out whole: done once that client has closed, or lingered enough */
		if (done >= 0 && clients[done].state == CLIENT_FREE)
			return 0;
		if (done < 0 && mono_clock_ns() >= give_up)
			return -ETIMEDOUT;
		n = poll_set(pfd, idx, listen_fd, clients, s, done < 0);
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "profctl: poll: %s\n", strerror(errno));
			return -errno;
		}
		if (pfd[0].revents)
			return -EINTR;
		if (pfd[1].revents)
			accept_clients(listen_fd, clients);
		for (nfds_t i = 2; i < n; i++)
			if (pfd[i].revents && client_step(&clients[idx[i]], pfd[i].revents, s) &&
			    done < 0)
				done = idx[i];
	}
}

int http_serve_run(int listen_fd, const struct http_serve *s)
{
	struct client *clients = calloc(MAX_CLIENTS, sizeof(*clients));
	int ret;

	if (!clients) {
		fprintf(stderr, "profctl: out of memory for the HTTP clients\n");
		return -ENOMEM;
	}
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i].fd = -1;
	ret = serve_loop(listen_fd, clients, s);
	for (int i = 0; i < MAX_CLIENTS; i++)
		client_close(&clients[i]);
	free(clients);
	return ret;
}

int http_serve_listen(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t salen = sizeof(sa);
	int one = 1, err, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	/* a port left in TIME_WAIT by the last run is free to take; one listened on is not */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, MAX_CLIENTS) ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen))
		goto err_close;
	*bound = ntohs(sa.sin_port);
	return fd;

err_close:
	err = -errno;
	close(fd);
	return err;
}
