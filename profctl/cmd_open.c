// SPDX-License-Identifier: MIT
/*
 * `profctl open FILE`: checks that FILE is a trace, serves it once on
 * 127.0.0.1 (profctl/http_serve.c) and prints, or opens with xdg-open, the
 * ui.perfetto.dev link that loads it, as Perfetto's tools/open_trace_in_ui
 * does. It exits 0 once the UI has fetched the file whole. It never writes
 * a file and never serves anything but FILE.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profctl/http_serve.h"
#include "profctl/profctl.h"

/*
 * The UI's Content Security Policy lets it fetch from http://127.0.0.1:9001
 * only (trace_processor's RPC port, which open_trace_in_ui reuses for that
 * reason); another port needs the UI's flag "Relax Content Security Policy
 * for 127.0.0.1:*", which ?rpc_port=PORT in the link asks the user to turn on.
 */
#define UI_PORT 9001
#define UI_ORIGIN "https://ui.perfetto.dev"
/* ../shared/perfetto-format.md 6.3: comfortable up to a few hundred MB, stops near 0.5-1 GB */
#define BROWSER_COMFORT_BYTES (512ull << 20)
#define NAME_MAX_LEN 100

static const char open_usage[] =
	"usage: profctl open [--port N] [--no-browser] [--timeout S] [--origin URL] [-v] FILE\n";

struct open_options {
	const char *file;
	const char *origin;
	unsigned port;
	unsigned timeout_s; /* 0: wait as long as it takes */
	bool no_browser, verbose;
};

static int parse_number(const char *s, const char *what, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max) {
		fprintf(stderr, "profctl: %s must be a whole number from 0 to %u, not '%s'\n", what,
			max, s);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* An origin is a scheme and host[:port], nothing that could break a header line. */
static int check_origin(const char *s)
{
	const char *host = strstr(s, "://");
	size_t len = strlen(s);

	if ((strncmp(s, "https://", 8) && strncmp(s, "http://", 7)) || len > 200 ||
	    !host[3] || strchr(host + 3, '/') || strcspn(s, " \t\r\n\"'<>\\?#") != len) {
		fprintf(stderr, "profctl: --origin must be like %s (scheme and host, no path), "
				"not '%s'\n", UI_ORIGIN, s);
		return -EINVAL;
	}
	return 0;
}

static int parse_options(int argc, char **argv, struct open_options *o)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },   { "no-browser", no_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' }, { "origin", required_argument, NULL, 'O' },
		{ "verbose", no_argument, NULL, 'v' },      { 0 },
	};
	int c;

	*o = (struct open_options){ .origin = UI_ORIGIN, .port = UI_PORT };
	while ((c = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': if (parse_number(optarg, "--port", 65535, &o->port)) return -EINVAL; break;
		case 't': if (parse_number(optarg, "--timeout", 86400, &o->timeout_s)) return -EINVAL; break;
		case 'O': if (check_origin(optarg)) return -EINVAL; o->origin = optarg; break;
		case 'n': o->no_browser = true; break;
		case 'v': o->verbose = true; break;
		default: fprintf(stderr, "%s", open_usage); return -EINVAL;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s", open_usage);
		return -EINVAL;
	}
	o->file = argv[optind];
	return 0;
}

/*
 * A trace starts with its first TracePacket (field 1, length-delimited: 0x0a
 * and a varint length that fits the file) or is gzip'ed whole; the UI takes
 * both (../shared/perfetto-format.md 1.1). A text file that starts with a
 * newline (0x0a too) fails on the length.
 */
static bool looks_like_trace(const uint8_t *b, size_t n, uint64_t size)
{
	uint64_t len = 0;

	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return true;
	if (n < 2 || b[0] != 0x0a)
		return false;
	for (size_t i = 1; i < n && i <= 10; i++) {
		len |= (uint64_t)(b[i] & 0x7f) << (7 * (i - 1));
		if (!(b[i] & 0x80))
			return len <= size - (i + 1);
	}
	return false;
}

/* What the UI will hold: a gzip file's trailer says its size (mod 4 GiB, last member only). */
static uint64_t loaded_size(int fd, uint64_t size)
{
	uint8_t m[2], t[4];
	uint64_t isize;

	if (size < 18 || pread(fd, m, 2, 0) != 2 || m[0] != 0x1f || m[1] != 0x8b ||
	    pread(fd, t, 4, (off_t)size - 4) != 4)
		return size;
	isize = t[0] | t[1] << 8 | t[2] << 16 | (uint64_t)t[3] << 24;
	return isize > size ? isize : size;
}

/* Opens FILE and checks it is a trace; one line on failure. Returns the fd or -1. */
static int open_trace(const char *path, struct stat *st)
{
	uint8_t head[16];
	ssize_t n;
	/* O_NONBLOCK: a FIFO fails the regular-file check instead of hanging here */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		fprintf(stderr, "profctl: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		fprintf(stderr, "profctl: %s is not a regular file\n", path);
		goto err_close;
	}
	n = pread(fd, head, sizeof(head), 0);
	if (n < 0) {
		fprintf(stderr, "profctl: cannot read %s: %s\n", path, strerror(errno));
		goto err_close;
	}
	if (!looks_like_trace(head, (size_t)n, (uint64_t)st->st_size)) {
		fprintf(stderr, "profctl: %s is not a Perfetto trace (%s; a trace starts with a "
				"TracePacket, 0x0a, or is gzip'ed)\n", path,
			n == 0 ? "it is empty" : "its first bytes are not one");
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

/* The name in the URL: FILE's base name with only URL-safe bytes, so the link needs no escaping. */
static void url_name(const char *path, char *out, size_t cap)
{
	const char *base = strrchr(path, '/');
	size_t n = 0;

	for (base = base ? base + 1 : path; *base && n + 1 < cap && n < NAME_MAX_LEN; base++) {
		char c = *base;
		bool keep = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
			    c == '.' || c == '_' || c == '-';

		out[n++] = keep ? c : '_';
	}
	out[n] = '\0';
	if (n == 0 || strspn(out, ".") == n)
		snprintf(out, cap, "trace.pftrace");
}

static void print_size(FILE *f, uint64_t bytes)
{
	if (bytes >= (1ull << 30))
		fprintf(f, "%.1f GiB", bytes / (double)(1ull << 30));
	else if (bytes >= (1ull << 20))
		fprintf(f, "%.1f MiB", bytes / (double)(1ull << 20));
	else
		fprintf(f, "%llu bytes", (unsigned long long)bytes);
}

static int listen_or_explain(const struct open_options *o, uint16_t *port)
{
	int fd = http_serve_listen((uint16_t)o->port, port);

	if (fd == -EADDRINUSE && o->port == UI_PORT)
		fprintf(stderr, "profctl: 127.0.0.1:%u is in use (trace_processor_shell --httpd, or "
				"another profctl open?): stop it, or pick another port with --port N\n",
			o->port);
	else if (fd == -EADDRINUSE)
		fprintf(stderr, "profctl: 127.0.0.1:%u is in use: pick another port with --port N\n",
			o->port);
	else if (fd < 0)
		fprintf(stderr, "profctl: cannot listen on 127.0.0.1:%u: %s\n", o->port,
			strerror(-fd));
	return fd;
}

/*
 * xdg-open LINK, quiet, with the signal state a fresh program expects, in a
 * process group of its own so that a Ctrl-C meant for profctl spares a
 * browser it starts; not waited for.
 */
static bool open_browser(const char *link)
{
	const char *display = getenv("DISPLAY"), *wayland = getenv("WAYLAND_DISPLAY");
	char *argv[] = { "xdg-open", (char *)link, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	pid_t pid;
	int err;

	if ((!display || !*display) && (!wayland || !*wayland))
		return false;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
					POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawn_file_actions_init(&fa);
	for (int fd = 0; fd < 3; fd++)
		posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
	err = posix_spawnp(&pid, "xdg-open", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return err == 0;
}

/* Prints the link (stdout, alone on its line) and what happens next (stderr). */
static void announce(const struct open_options *o, const char *name, uint16_t port,
		     uint64_t size, uint64_t loaded)
{
	char link[512];

	snprintf(link, sizeof(link), "%s/#!/?url=http://127.0.0.1:%u/%s", o->origin, port, name);
	if (port != UI_PORT)
		snprintf(link + strlen(link), sizeof(link) - strlen(link), "&rpc_port=%u", port);
	printf("%s\n", link);
	fflush(stdout);
	fprintf(stderr, "profctl: serving %s (", o->file);
	print_size(stderr, size);
	fprintf(stderr, ") on 127.0.0.1:%u until the UI has fetched it; Ctrl-C stops\n", port);
	if (port != UI_PORT)
		fprintf(stderr, "profctl: the UI fetches from a port other than %u only with its flag "
				"'Relax Content Security Policy for 127.0.0.1:*' on (it offers to)\n",
			UI_PORT);
	if (loaded > BROWSER_COMFORT_BYTES) {
		fprintf(stderr, "profctl: at ");
		print_size(stderr, loaded);
		fprintf(stderr, " this trace may not load in the browser (it stops near 0.5-1 GB): "
				"run trace_processor_shell --httpd %s and open %s, which then uses "
				"it on 127.0.0.1:%u\n", o->file, o->origin, UI_PORT);
	}
	if (!o->no_browser && open_browser(link))
		fprintf(stderr, "profctl: opening it in the browser (xdg-open)\n");
}

/* SIGINT and SIGTERM become readable on the returned fd (the server's stop_fd). */
static int stop_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN); /* a client that leaves mid-transfer is an EPIPE */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -1;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The exit status after the server returned err. */
static int finish(const struct open_options *o, int err, int stop_fd, uint64_t size)
{
	struct signalfd_siginfo si = { .ssi_signo = SIGINT };

	if (err == 0) {
		fprintf(stderr, "profctl: the UI fetched %s (%llu bytes)\n", o->file,
			(unsigned long long)size);
		return 0;
	}
	if (err == -ETIMEDOUT) {
		fprintf(stderr, "profctl: nothing fetched %s within %u s\n", o->file, o->timeout_s);
		return 1;
	}
	if (err == -EINTR) {
		if (read(stop_fd, &si, sizeof(si)) != sizeof(si))
			si.ssi_signo = SIGINT;
		fprintf(stderr, "profctl: stopped (%s) before the UI fetched %s\n",
			strsignal((int)si.ssi_signo), o->file);
		return 128 + (int)si.ssi_signo;
	}
	return 1; /* http_serve_run() said why */
}

/* Serves FILE (fd) on the listening socket until it is fetched; the exit status. */
static int serve_trace(const struct open_options *o, int fd, uint64_t size, int lfd,
		       uint16_t port, int stop_fd)
{
	char name[NAME_MAX_LEN + 1], path[NAME_MAX_LEN + 2];
	struct http_site site = { .path = path, .origin = o->origin, .port = port, .size = size };
	struct http_serve serve = { .site = &site, .file_fd = fd, .stop_fd = stop_fd,
				    .timeout_ms = o->timeout_s ? (int)(o->timeout_s * 1000) : -1,
				    .verbose = o->verbose };
	int status;

	url_name(o->file, name, sizeof(name));
	snprintf(path, sizeof(path), "/%s", name);
	announce(o, name, port, size, loaded_size(fd, size));
	status = finish(o, http_serve_run(lfd, &serve), stop_fd, size);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		; /* an xdg-open that has returned */
	return status;
}

int cmd_open(int argc, char **argv)
{
	struct open_options o;
	struct stat st;
	uint16_t port;
	int fd, lfd, stop_fd, status = 1;

	if (parse_options(argc, argv, &o))
		return 2;
	fd = open_trace(o.file, &st);
	if (fd < 0)
		return 1;
	lfd = listen_or_explain(&o, &port);
	if (lfd < 0)
		goto err_file;
	stop_fd = stop_signals();
	if (stop_fd < 0) {
		fprintf(stderr, "profctl: cannot catch Ctrl-C: %s\n", strerror(errno));
		goto err_listen;
	}
	status = serve_trace(&o, fd, (uint64_t)st.st_size, lfd, port, stop_fd);
	close(stop_fd);
err_listen:
	close(lfd);
err_file:
	close(fd);
	return status;
}
