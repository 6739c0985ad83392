// SPDX-License-Identifier: MIT
/*
 * profctl's connection to profd: the system daemon when one answers,
 * otherwise a private profd started for this session in a 0700 directory
 * (same user, no install needed), which exits when the session ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profctl/profctl.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define SYSTEM_SOCKET "/run/profd/profd.sock"
#define READY_TIMEOUT_MS 5000

int profctl_self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	return 0;
}

static int wait_ready(int fd, pid_t pid)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char byte;

	if (poll(&p, 1, READY_TIMEOUT_MS) != 1 || read(fd, &byte, 1) != 1) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid)
			return -ECHILD;
		return -ETIMEDOUT;
	}
	return 0;
}

static int spawn_private(struct daemon_link *link, bool verbose)
{
	char dir[PATH_MAX], profd[PATH_MAX + 8], fdnum[16];
	const char *tmp = getenv("TMPDIR");
	int pipefd[2], err;
	pid_t pid;

	if (profctl_self_dir(dir, sizeof(dir)))
		return -ENOENT;
	snprintf(profd, sizeof(profd), "%s/profd", dir);
	snprintf(link->private_dir, sizeof(link->private_dir), "%s/profd-XXXXXX",
		 tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(link->private_dir))
		return -errno;
	snprintf(link->socket_path, sizeof(link->socket_path), "%s/profd.sock", link->private_dir);
	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char *argv[] = { profd, "--private", "--socket", link->socket_path, "--ready-fd",
				 fdnum, verbose ? "-v" : NULL, NULL };

		dup2(pipefd[1], 3);
		if (!verbose) { /* the daemon's log is for -v; the user's terminal is the target's */
			int null_fd = open("/dev/null", O_WRONLY);

			if (null_fd >= 0)
				dup2(null_fd, STDERR_FILENO);
		}
		snprintf(fdnum, sizeof(fdnum), "3");
		setpgid(0, 0); /* Ctrl-C at the terminal must not kill the daemon mid-trace */
		execv(profd, argv);
		fprintf(stderr, "profctl: cannot start %s: %s\n", profd, strerror(errno));
		_exit(127);
	}
	/* also here: a Ctrl-C before the child's own setpgid must not reach the daemon */
	setpgid(pid, pid);
	close(pipefd[1]);
	err = wait_ready(pipefd[0], pid);
	close(pipefd[0]);
	link->private_pid = pid;
	return err;
}

int daemon_link_connect(struct daemon_link *link)
{
	const char *path = getenv("PROFD_SOCKET");

	memset(link, 0, sizeof(*link));
	snprintf(link->socket_path, sizeof(link->socket_path), "%s",
		 path && path[0] ? path : SYSTEM_SOCKET);
	link->fd = frame_connect_unix(link->socket_path);
	return link->fd < 0 ? link->fd : 0;
}

int daemon_link_open(struct daemon_link *link, bool verbose)
{
	const char *path = getenv("PROFD_SOCKET");
	int err;

	memset(link, 0, sizeof(*link));
	link->fd = frame_connect_unix(path && path[0] ? path : SYSTEM_SOCKET);
	if (link->fd >= 0) {
		snprintf(link->socket_path, sizeof(link->socket_path), "%s",
			 path && path[0] ? path : SYSTEM_SOCKET);
		return 0;
	}
	if (path && path[0]) {
		fprintf(stderr, "profctl: cannot connect to profd at %s: %s\n", path,
			strerror(-link->fd));
		return link->fd;
	}
	err = spawn_private(link, verbose);
	if (!err)
		link->fd = frame_connect_unix(link->socket_path);
	if (err || link->fd < 0) {
		err = err ? err : link->fd;
		fprintf(stderr, "profctl: no profd answers and a private one could not start: %s\n",
			strerror(-err));
		daemon_link_close(link);
		return err;
	}
	return 0;
}

void daemon_link_close(struct daemon_link *link)
{
	if (link->fd >= 0)
		close(link->fd);
	link->fd = -1;
	if (link->private_pid > 0) {
		for (int i = 0; i < 500; i++) { /* the daemon exits when its session is done */
			if (waitpid(link->private_pid, NULL, WNOHANG) == link->private_pid)
				goto reaped;
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
		}
		kill(link->private_pid, SIGTERM);
		waitpid(link->private_pid, NULL, 0);
reaped:
		link->private_pid = 0;
	}
	if (link->private_dir[0]) {
		unlink(link->socket_path);
		rmdir(link->private_dir);
		link->private_dir[0] = '\0';
	}
}

#define ASK_TIMEOUT_MS 5000

int profctl_ask(uint32_t type, const uint8_t *req, size_t len, int fd, struct frame_header *h,
		uint8_t **reply)
{
	struct daemon_link link;
	int err = daemon_link_connect(&link);

	if (err) {
		fprintf(stderr, "profctl: no profd is listening at %s: %s (profctl run's private "
				"daemons are not listed)\n", link.socket_path, strerror(-err));
		return err;
	}
	err = frame_send(link.fd, type, req, len, fd);
	if (!err)
		err = frame_recv(link.fd, h, reply, NULL, ASK_TIMEOUT_MS);
	if (err)
		fprintf(stderr, "profctl: profd at %s did not answer: %s\n", link.socket_path,
			strerror(-err));
	daemon_link_close(&link);
	return err;
}

int profctl_print_refusal(const uint8_t *payload, size_t len)
{
	Profd__ErrorReply *e = profd__error_reply__unpack(NULL, len, payload);

	fprintf(stderr, "profctl: %s\n", e && e->message ? e->message : "profd refused");
	if (e)
		profd__error_reply__free_unpacked(e, NULL);
	return -EPERM;
}
