/* SPDX-License-Identifier: MIT */
/*
 * A one-file HTTP/1.1 server on 127.0.0.1 for `profctl open`: it serves one
 * regular file under one path, to one browser origin, until a GET has taken
 * it whole. The request parser and the reply builder are pure (unit-tested,
 * fuzzed); http_serve_run() owns the sockets.
 */
#ifndef PROFD_HTTP_SERVE_H
#define PROFD_HTTP_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* A request head longer than this (request line and headers) gets a 400. */
#define HTTP_HEAD_MAX 8192

struct http_str {
	const char *p; /* into the parsed head; NULL when absent */
	size_t len;
};

struct http_request {
	struct http_str method, target;
	struct http_str host, origin;
	struct http_str preflight_method;  /* Access-Control-Request-Method */
	struct http_str preflight_private; /* Access-Control-Request-Private-Network */
	bool http11;
};

/*
 * Parses a request head: `len` bytes ending with its blank line (CRLF CRLF).
 * Strict: CRLF line ends only, a single space between the request line's
 * parts, an origin-form target ("/..."), HTTP/1.0 or 1.1, no control bytes,
 * no folded or nameless header, Host required by 1.1 and never repeated.
 * Returns 0, or -EINVAL when the head is malformed (the caller answers 400).
 */
int http_request_parse(const char *head, size_t len, struct http_request *req);

/* What is served, and to whom. */
struct http_site {
	const char *path;   /* the one target served, "/NAME" */
	const char *origin; /* the browser origin allowed to read it (CORS) */
	uint16_t port;      /* for the Host check: 127.0.0.1:PORT or localhost:PORT */
	uint64_t size;      /* the file's length */
};

struct http_reply {
	int status;
	bool sends_file;    /* a GET of the file: file_len bytes follow the head */
	uint64_t file_len;
	size_t head_len;    /* head (and a short error body) in head[] */
	char head[1024];
};

/*
 * The reply to req (NULL: a malformed request, 400). A Host other than the
 * loopback one (DNS rebinding) or an Origin other than site->origin gets
 * 403, any other target 404, a method other than GET, HEAD or OPTIONS
 * (the CORS preflight) 405. Every reply closes the connection.
 */
void http_reply_build(const struct http_request *req, const struct http_site *site, time_t now,
		      struct http_reply *r);

struct http_serve {
	const struct http_site *site;
	int file_fd;    /* read with sendfile() from offset 0 */
	int stop_fd;    /* readable means stop (a signalfd), or -1 */
	int timeout_ms; /* give up when nothing fetched the file in time; -1: never */
	bool verbose;   /* one stderr line per request */
};

/*
 * A non-blocking listening socket on 127.0.0.1:port (0: any free port),
 * with the port it got in *bound. Returns the fd or a negative errno
 * (-EADDRINUSE for a busy port); prints nothing.
 */
int http_serve_listen(uint16_t port, uint16_t *bound);

/*
 * Serves until one GET has been sent the whole file (0), the timeout passed
 * (-ETIMEDOUT) or stop_fd became readable (-EINTR). Up to 16 clients at once;
 * one that sends nothing, or stops reading, is dropped after a while; one
 * that leaves mid-transfer is named on stderr and serving goes on.
 * Other failures: a negative errno, printed. SIGPIPE must be ignored.
 */
int http_serve_run(int listen_fd, const struct http_serve *s);

#endif
