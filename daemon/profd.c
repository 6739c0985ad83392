// SPDX-License-Identifier: MIT
/*
 * profd's main(): options, signals, and the server loop. `--private` is how
 * profctl starts a daemon of its own for one session (same user, private
 * socket, exits when idle); without it profd serves until SIGTERM.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"

#define DEFAULT_SOCKET "/run/profd/profd.sock"

static void usage(FILE *out)
{
	fprintf(out, "usage: profd [--socket PATH] [--private] [--ready-fd N] [-v]\n"
		     "  --socket PATH   listen here (default " DEFAULT_SOCKET ")\n"
		     "  --private       serve the sessions of the user that started it; exit when idle\n"
		     "  --ready-fd N    write one byte to descriptor N once listening, then close it\n"
		     "  -v              log every connection problem\n");
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
	err = server_init(&srv, &opt);
	if (err)
		return 1;
	if (ready_fd >= 0) {
		if (write(ready_fd, "R", 1) != 1)
			fprintf(stderr, "profd: cannot signal readiness: %s\n", strerror(errno));
		close(ready_fd);
	}
	err = server_run(&srv);
	server_fini(&srv);
	if (opt.exit_when_idle)
		unlink(opt.socket_path);
	return err ? 1 : 0;
}
