// SPDX-License-Identifier: MIT
/*
 * tests/integration/test_flusher_start.sh's target: when the agent's
 * flusher thread starts. Each mode prints "threads N" (this process's
 * threads, from /proc/self/task) at the points the test checks.
 *   short        1,000 calls, then exit: no thread at all
 *   late [MS]    100 calls, MS ms asleep (60), 3,000 calls: the thread
 *                started; then 100 ms for it to run
 *   handler      after 60 ms, 3,000 calls in a SIGUSR1 handler (none
 *                started there), then 10 ms on, 3,000 outside it (started)
 *   nodefer      the same with an SA_NODEFER handler installed: never
 *                started (a handler could run unseen), every call sent at exit
 *   blocked      a SIGUSR1 handler installed and SIGUSR1 blocked before a
 *                worker thread is made (a server's way: another thread takes
 *                the signals): the worker's calls after 60 ms start it
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) int fs_step(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) void fs_calls(int n)
{
	int x = 0;

	for (int i = 0; i < n; i++)
		x = fs_step(x) & 0xffff;
	sink = x;
}

static void print_threads(const char *when)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	printf("%s threads %d\n", when, n);
	fflush(stdout);
}

static void on_usr1(int sig)
{
	(void)sig;
	fs_calls(3000);
}

static void handler_then_plain(int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	fs_calls(100);
	usleep(60000);
	raise(SIGUSR1);
	print_threads("handler");
	usleep(10000); /* past the retry that a refused start waits for */
	fs_calls(3000);
	print_threads("plain");
}

static void *blocked_worker(void *arg)
{
	(void)arg;
	fs_calls(100);
	usleep(60000);
	fs_calls(3000);
	print_threads("worker");
	usleep(100000); /* its thread runs (and names itself) before the exit */
	return NULL;
}

static void blocked_in_workers(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t usr1;
	pthread_t t;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	pthread_create(&t, NULL, blocked_worker, NULL);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "short";

	if (strcmp(mode, "short") == 0) {
		fs_calls(1000);
		print_threads("short");
	} else if (strcmp(mode, "late") == 0) {
		fs_calls(100);
		print_threads("early");
		usleep((useconds_t)(argc > 2 ? atoi(argv[2]) : 60) * 1000);
		fs_calls(3000);
		print_threads("late");
		usleep(100000); /* its thread runs (and names itself) before the exit */
	} else if (strcmp(mode, "handler") == 0) {
		handler_then_plain(0);
	} else if (strcmp(mode, "nodefer") == 0) {
		handler_then_plain(SA_NODEFER);
	} else if (strcmp(mode, "blocked") == 0) {
		blocked_in_workers();
	} else {
		fprintf(stderr, "usage: flusher_start short|late [MS]|handler|nodefer|blocked\n");
		return 2;
	}
	return 0;
}
