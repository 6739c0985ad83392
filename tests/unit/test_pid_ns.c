// SPDX-License-Identifier: MIT
/*
 * daemon/pid_ns.c: a process in our PID namespace needs no translation and
 * has no pid of its own; a child in a new one (root only, else skipped) is
 * pid 1 there, gets its namespace's thread ids mapped to ours, and an id it
 * does not have comes back unchanged.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/pid_ns.h"
#include "unit.h"

static void test_same_namespace_needs_none(void)
{
	CHECK(pid_ns_map_new(getpid()) == NULL);
	CHECK_EQ_INT(pid_ns_map_host_tid(NULL, 1234), 1234);
	CHECK_EQ_INT(pid_ns_own_pid(getpid()), 0);
	CHECK_EQ_INT(pid_ns_own_pid(1), 0);
	CHECK_EQ_INT(pid_ns_own_pid(2147483647), -1); /* no such process */
}

/* A child that is pid 1 of a new PID namespace, until killed; -1 if not allowed. */
static pid_t child_in_new_namespace(void)
{
	pid_t pid;

	if (unshare(CLONE_NEWPID))
		return -1;
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static void test_child_namespace_translated(void)
{
	int fds[2], status;
	pid_t child;
	struct pid_ns_map *m;

	/* unshare(CLONE_NEWPID) applies to children: do it in a helper process */
	if (pipe(fds))
		return;
	if (fork() == 0) {
		pid_t c = child_in_new_namespace();

		(void)!write(fds[1], &c, sizeof(c));
		if (c > 0)
			waitpid(c, NULL, 0);
		_exit(0);
	}
	CHECK_EQ_INT((int)read(fds[0], &child, sizeof(child)), (int)sizeof(child));
	if (child <= 0) {
		printf("skip: unshare(CLONE_NEWPID) not permitted\n");
		wait(&status);
		return;
	}
	CHECK_EQ_INT(pid_ns_own_pid(child), 1);
	m = pid_ns_map_new(child);
	CHECK(m != NULL);
	if (m) {
		CHECK_EQ_INT(pid_ns_map_ns_pid(m), 1);
		CHECK_EQ_INT(pid_ns_map_host_tid(m, 1), child);
		CHECK_EQ_INT(pid_ns_map_host_tid(m, 99999), 99999);
	}
	pid_ns_map_free(m);
	kill(child, SIGKILL);
	wait(&status);
}

int main(void)
{
	RUN_TEST(test_same_namespace_needs_none);
	RUN_TEST(test_child_namespace_translated);
	return unit_summary();
}
