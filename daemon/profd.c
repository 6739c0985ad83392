// SPDX-License-Identifier: MIT
/*
 * profd's main(): options, socket activation, readiness, and the server loop.
 * `--private` is how profctl starts a daemon of its own for one session (same
 * user, private socket, exits when idle); without it profd serves until
 * SIGTERM. profd never forks: under systemd it is Type=notify and gets its
 * socket from profd.socket; by hand, `profd --foreground` is the same thing.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/server.h"

#define DEFAULT_SOCKET "/run/profd/profd.sock"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: profd [--socket PATH] [--private] [--ready-fd N] [--foreground] [-v]\n"
		"  --socket PATH  listen here (default " DEFAULT_SOCKET "); ignored when\n"
		"                 systemd passes the socket (LISTEN_FDS)\n"
		"  --private      serve the sessions of the user that started it; exit when idle\n"
		"  --ready-fd N   write one byte to descriptor N once listening, then close it\n"
		"  --foreground   for scripts: profd never forks, and logs to stderr\n"
		"  -v             log every connection problem\n");
}

static int fd_set_flags(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC))
		return -errno;
	return 0;
}

/*
 * Socket activation (sd_listen_fds(3)): systemd passes the bound, listening
 * socket as fd 3. Sets *fd to it, or to -1 when profd was not activated.
 * Returns 0 or a negative errno (logged).
 */
static int activation_fd(int *fd)
{
	struct sockaddr_un addr = { 0 };
	socklen_t alen = sizeof(addr);
	int n, err;

	*fd = -1;
	/* unset_environment: children must not take our socket for theirs */
	n = sd_listen_fds(1);
	if (n == 0)
		return 0;
	if (n != 1) {
		server_log_prio(LOG_ERR, "socket activation: %s", n < 0 ? strerror(-n) :
				"more than one socket passed, expected 1");
		return n < 0 ? n : -EINVAL;
	}
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		server_log_prio(LOG_ERR, "socket activation: fd %d is not a listening "
				"AF_UNIX stream socket", SD_LISTEN_FDS_START);
		return -EPROTOTYPE;
	}
	/* the loop accepts until EAGAIN: a blocking listener would hang it */
	err = fd_set_flags(SD_LISTEN_FDS_START);
	if (err) {
		server_log_prio(LOG_ERR, "socket activation: fd %d: %s", SD_LISTEN_FDS_START,
				strerror(-err));
		return err;
	}
	if (getsockname(SD_LISTEN_FDS_START, (struct sockaddr *)&addr, &alen) || !addr.sun_path[0])
		snprintf(addr.sun_path, sizeof(addr.sun_path), "(unnamed)");
	server_log("socket activation: fd %d (%.*s)", SD_LISTEN_FDS_START,
		   (int)sizeof(addr.sun_path), addr.sun_path);
	*fd = SD_LISTEN_FDS_START;
	return 0;
}

/*
 * A private daemon's socket lives in the 0700 directory its profctl made for
 * it; the directory goes too (rmdir: only if empty), in case profctl was
 * killed before it could clean up.
 */
static void remove_private_socket(const char *path)
{
	char dir[PATH_MAX], *slash;

	unlink(path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		rmdir(dir);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "private", no_argument, NULL, 'p' },
		{ "ready-fd", required_argument, NULL, 'r' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct server_options opt = { .socket_path = DEFAULT_SOCKET, .listen_fd = -1 };
	struct server srv;
	int ready_fd = -1, c, err;

	while ((c = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opt.socket_path = optarg; break;
		case 'p': opt.exit_when_idle = true; break;
		case 'r': ready_fd = atoi(optarg); break;
		case 'f': break;
		case 'v': opt.verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	/* a private daemon inherits profctl's environment: its manager is not ours */
	if (opt.exit_when_idle)
		unsetenv("NOTIFY_SOCKET");
	if (activation_fd(&opt.listen_fd))
		return 1;
	err = server_init(&srv, &opt);
	if (err)
		return 1;
	if (opt.listen_fd < 0 && !opt.exit_when_idle)
		server_log("listening on %s", opt.socket_path);
	if (ready_fd >= 0) {
		if (write(ready_fd, "R", 1) != 1)
			server_log_prio(LOG_WARNING, "cannot signal readiness on fd %d: %s",
					ready_fd, strerror(errno));
		close(ready_fd);
	}
	err = server_notify("READY=1");
	if (err < 0)
		server_log_prio(LOG_WARNING, "cannot notify the service manager: %s",
				strerror(-err));
	err = server_run(&srv);
	server_fini(&srv);
	if (opt.exit_when_idle && opt.listen_fd < 0)
		remove_private_socket(opt.socket_path);
	return err ? 1 : 0;
}
