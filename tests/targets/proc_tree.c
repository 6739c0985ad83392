// SPDX-License-Identifier: MIT
/*
 * Process trees for profctl run (tests/integration/test_process_tree.sh):
 * each process computes fibf() and spins on its own CPU time, and prints
 * "pid PID fibf N" with its own call count, so the test can compare every
 * process's slices with what it made.
 *   proc_tree work N            fibf(N) here
 *   proc_tree fork K N          K workers forked, each fibf(N); the parent fibf(15)
 *   proc_tree forkexit K N      the same, each worker ending by _exit (no exit handlers)
 *   proc_tree forkexec PROG...  a child execs PROG...; the parent fibf(15)
 *   proc_tree spawn PROG...     posix_spawn of PROG...; the parent fibf(15)
 *   proc_tree vfork PROG...     vfork + exec of PROG...
 *   proc_tree grand N           a child whose child computes fibf(N)
 *   proc_tree quick             a child that ends at once by a raw exit_group (no call, no
 *                               exit handler, no _exit: nothing of the agent runs)
 *   proc_tree idle              two children that make no call, one ending by exit, one
 *                               by _exit (their agents connect at their exit); the parent
 *                               fibf(15)
 *   proc_tree server FIFO       a pre-forking server: a worker per line on a FIFO ("N":
 *                               fibf(N); "N FILE": fibf(N) over and over until FILE exists)
 *   proc_tree reuse N1 N2       two processes of one pid, one after the other, running
 *                               "work N1" then "work N2" (see reuse_pid)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long fibf_calls;
static volatile long zero; /* no call of fibf becomes a loop: each is an entry */

__attribute__((noinline)) long fibf(int n)
{
	long a, b;

	fibf_calls++;
	if (n < 2)
		return n;
	a = fibf(n - 1);
	b = fibf(n - 2);
	return a + b + zero;
}

/* CPU time, not wall time: the same samples whatever the machine's load. */
__attribute__((noinline)) void spin_cpu(long ms)
{
	struct timespec t0, t;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static void work(int n)
{
	fibf(n);
	spin_cpu(100);
	printf("pid %d fibf %ld\n", (int)getpid(), fibf_calls);
	fflush(stdout);
}

static int wait_all(void)
{
	int status, bad = 0;

	while (wait(&status) > 0)
		bad |= !WIFEXITED(status) || WEXITSTATUS(status);
	return bad;
}

static int fork_workers(int k, int n, int by_exit_call)
{
	for (int i = 0; i < k; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0) {
			fibf_calls = 0; /* the parent's count is the parent's */
			work(n);
			if (by_exit_call)
				_exit(0);
			exit(0);
		}
	}
	work(15);
	return wait_all();
}

static int run_child(char **argv, int how)
{
	pid_t pid;

	if (how == 's') {
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ))
			return 1;
	} else {
		pid = how == 'v' ? vfork() : fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			execv(argv[0], argv);
			_exit(127);
		}
	}
	if (how != 'v')
		work(15);
	return wait_all();
}

static int grandchild(int n)
{
	pid_t pid = fork();

	if (pid == 0) {
		fibf_calls = 0;
		if (fork() == 0) {
			fibf_calls = 0;
			work(n);
			exit(0);
		}
		exit(wait_all());
	}
	work(15);
	return wait_all();
}

/* A worker per line (a number: its fibf), forked now; "quit" ends the server. */
static int serve_line(const char *line)
{
	char release[200];

	if (strncmp(line, "quit", 4) == 0)
		return 1;
	if (fork() == 0) {
		fibf_calls = 0;
		if (sscanf(line, "%*d %199s", release) == 1) /* "N FILE": fibf(N) until FILE exists */
			while (access(release, F_OK) != 0)
				fibf(atoi(line));
		work(atoi(line));
		exit(0);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return 0;
}

/*
 * One worker per line read: a master that forks after it was attached to.
 * It waits spinning in its own code, not blocked in libc, where attach finds
 * no thread at a safe point. O_RDWR: the FIFO never blocks the open nor
 * reads EOF when a writer leaves.
 */
static int server(const char *fifo)
{
	char buf[256];
	size_t len = 0;
	int fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		char *nl;

		if (n <= 0) {
			spin_cpu(2);
			continue;
		}
		len += (size_t)n;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			if (serve_line(buf)) {
				close(fd);
				return wait_all();
			}
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
		if (len == sizeof(buf) - 1)
			len = 0; /* a line longer than the buffer: dropped */
	}
}

/*
 * A pid the kernel hands out twice in one session, made to happen: a child
 * runs "work N1" and is reaped, then clone3 with set_tid asks for its pid
 * again (CAP_SYS_ADMIN over the PID namespace: root) for a child that runs
 * "work N2". Between the two, 50 ms: their start times in /proc (clock
 * ticks) differ, as those of two processes of a reused pid always do.
 * Prints "reuse PID", or "reuse-failed ERRNO" when the kernel refused (no
 * privilege, no clone3, the pid taken meanwhile).
 */
static int reuse_pid(char *self, char *n1, char *n2)
{
	char *argv1[] = { self, "work", n1, NULL }, *argv2[] = { self, "work", n2, NULL };
	struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid_size = 1 };
	pid_t first = fork(), again;
	int status, bad;

	if (first < 0)
		return 1;
	if (first == 0) {
		execv(self, argv1);
		_exit(127);
	}
	bad = waitpid(first, &status, 0) != first || !WIFEXITED(status) || WEXITSTATUS(status);
	usleep(50000);
	fflush(stdout);
	ca.set_tid = (uintptr_t)&first;
	again = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
	if (again == 0) { /* a copy of the parent that ran no atfork handler: straight to exec */
		syscall(SYS_execve, self, argv2, environ);
		syscall(SYS_exit_group, 127);
	}
	if (again < 0) {
		printf("reuse-failed %d\n", errno);
		return bad;
	}
	bad |= waitpid(again, &status, 0) != again || !WIFEXITED(status) || WEXITSTATUS(status);
	printf("reuse %d\n", (int)again);
	return bad;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "work") && argc > 2) {
		work(atoi(argv[2]));
		return 0;
	}
	if (!strcmp(mode, "fork") && argc > 3)
		return fork_workers(atoi(argv[2]), atoi(argv[3]), 0);
	if (!strcmp(mode, "forkexit") && argc > 3)
		return fork_workers(atoi(argv[2]), atoi(argv[3]), 1);
	if (!strcmp(mode, "forkexec") && argc > 2)
		return run_child(argv + 2, 'f');
	if (!strcmp(mode, "spawn") && argc > 2)
		return run_child(argv + 2, 's');
	if (!strcmp(mode, "vfork") && argc > 2)
		return run_child(argv + 2, 'v');
	if (!strcmp(mode, "grand") && argc > 2)
		return grandchild(atoi(argv[2]));
	if (!strcmp(mode, "quick")) {
		if (fork() == 0)
			syscall(SYS_exit_group, 0);
		work(15);
		return wait_all();
	}
	if (!strcmp(mode, "idle")) {
		fflush(stdout);
		if (fork() == 0)
			exit(0);
		if (fork() == 0)
			_exit(0);
		work(15);
		return wait_all();
	}
	if (!strcmp(mode, "server") && argc > 2)
		return server(argv[2]);
	if (!strcmp(mode, "reuse") && argc > 3)
		return reuse_pid(argv[0], argv[2], argv[3]);
	fprintf(stderr, "usage: proc_tree work N | fork|forkexit K N | forkexec|spawn|vfork PROG... | "
			"grand N | quick | idle | server FIFO | reuse N1 N2\n");
	return 2;
}
