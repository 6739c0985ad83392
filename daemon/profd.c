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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon/server.h"

#define DEFAULT_SOCKET "/run/profd/profd.sock"
#define LISTEN_FDS_START 3 /* SD_LISTEN_FDS_START */

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

static int socket_int_option(int fd, int name, int *value)
{
	socklen_t len = sizeof(*value);

	return getsockopt(fd, SOL_SOCKET, name, value, &len) ? -errno : 0;
}

/*
 * Socket activation (the sd_listen_fds(3) protocol, one of systemd's stable
 * interfaces, so no libsystemd): the manager passes the bound, listening
 * socket as fd 3 and names its own child in LISTEN_PID. Sets *fd to it, or to
 * -1 when profd was not activated. Returns 0 or a negative errno (logged).
 */
static int activation_fd(int *fd)
{
	const char *pid_env = getenv("LISTEN_PID"), *fds_env = getenv("LISTEN_FDS");
	struct sockaddr_un addr = { 0 };
	socklen_t alen = sizeof(addr);
	int domain, type, listening, flags, err;

	*fd = -1;
	if (!fds_env)
		return 0;
	/* children must not take our socket for theirs */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!pid_env || strtol(pid_env, NULL, 10) != (long)getpid())
		return 0; /* meant for a parent that exec'd us without clearing it */
	if (strcmp(fds_env, "1")) {
		server_log_prio(LOG_ERR, "socket activation: LISTEN_FDS=%s, expected 1", fds_env);
		return -EINVAL;
	}
	err = socket_int_option(LISTEN_FDS_START, SO_DOMAIN, &domain);
	if (!err)
		err = socket_int_option(LISTEN_FDS_START, SO_TYPE, &type);
	if (!err)
		err = socket_int_option(LISTEN_FDS_START, SO_ACCEPTCONN, &listening);
	if (!err && (domain != AF_UNIX || type != SOCK_STREAM || !listening))
		err = -EPROTOTYPE;
	if (err) {
		server_log_prio(LOG_ERR, "socket activation: fd %d is not a listening "
				"AF_UNIX stream socket: %s", LISTEN_FDS_START, strerror(-err));
		return err;
	}
	/* the loop accepts until EAGAIN: a blocking listener would hang it */
	flags = fcntl(LISTEN_FDS_START, F_GETFL);
	if (flags < 0 || fcntl(LISTEN_FDS_START, F_SETFL, flags | O_NONBLOCK) ||
	    fcntl(LISTEN_FDS_START, F_SETFD, FD_CLOEXEC)) {
		err = -errno;
		server_log_prio(LOG_ERR, "socket activation: fd %d: %s", LISTEN_FDS_START,
				strerror(errno));
		return err;
	}
	if (getsockname(LISTEN_FDS_START, (struct sockaddr *)&addr, &alen) || !addr.sun_path[0])
		snprintf(addr.sun_path, sizeof(addr.sun_path), "(unnamed)");
	server_log("socket activation: fd %d (%.*s)", LISTEN_FDS_START,
		   (int)sizeof(addr.sun_path), addr.sun_path);
	*fd = LISTEN_FDS_START;
	return 0;
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
		unlink(opt.socket_path);
	return err ? 1 : 0;
}
