// SPDX-License-Identifier: MIT
/*
 * daemon/session_process.c: which process of a reused pid a perf record is
 * from (session_process_of_record). Its time against the lives of the pid's
 * processes decides, not the order records arrive in: a record after the
 * newest's end, or while /proc has another process under the pid, waits
 * (NULL) for the FORK record of the process it is from.
 */
#include <stdlib.h>
#include <unistd.h>

#include "daemon/access.h"
#include "daemon/session_internal.h"
#include "unit.h"

static void session_drop(struct session *s)
{
	while (s && s->procs) {
		struct session_process *p = s->procs;

		s->procs = p->next;
		session_process_free(p);
	}
	if (s)
		free(s->pid_index);
	free(s);
}

static struct session *session_with(pid_t pid, uint32_t processes)
{
	struct session *s = calloc(1, sizeof(*s));

	for (uint32_t i = 0; s && i < processes; i++) {
		if (!session_process_new(s, pid)) {
			session_drop(s);
			return NULL;
		}
	}
	return s;
}

static void test_reused_pid_by_time(void)
{
	struct session *s = session_with(getpid(), 2);
	struct session_process *second, *first;

	CHECK(s != NULL);
	if (!s)
		return;
	second = s->procs;
	first = second->next;
	first->exited = true;
	first->exit_ts = 100;
	second->start_ts = 200;
	CHECK(session_process_of_record(s, getpid(), 100) == first);
	CHECK(session_process_of_record(s, getpid(), 150) == first); /* read late: still its */
	CHECK(session_process_of_record(s, getpid(), 250) == second);
	session_drop(s);
}

/* The thread test_pid_reuse.sh saw under the first: its COMM read before the second's FORK. */
static void test_after_exit_waits_for_next(void)
{
	struct session *s = session_with(getpid(), 1);
	struct session_process *first;

	CHECK(s != NULL);
	if (!s)
		return;
	first = s->procs;
	first->exited = true;
	first->exit_ts = 100;
	CHECK(session_process_of_record(s, getpid(), 90) == first);
	CHECK(session_process_of_record(s, getpid(), 150) == NULL);
	session_drop(s);
}

/* Its exit unread: /proc tells whether the pid is still its. */
static void test_exit_unread_asks_proc(void)
{
	struct session *s = session_with(getpid(), 1);
	struct session_process *first;
	unsigned long long now_start = access_start_time(getpid());

	CHECK(s != NULL);
	if (!s)
		return;
	first = s->procs;
	CHECK(now_start != 0);
	first->start_time = now_start;
	CHECK(session_process_of_record(s, getpid(), 150) == first);
	first->start_time = 0; /* not known: its */
	CHECK(session_process_of_record(s, getpid(), 150) == first);
	first->start_time = now_start + 1; /* another process has the pid now */
	CHECK(session_process_of_record(s, getpid(), 150) == NULL);
	first->exit_ts = 200; /* one of its threads' EXIT: the pid is not free before */
	CHECK(session_process_of_record(s, getpid(), 150) == first);
	CHECK(session_process_of_record(s, getpid(), 250) == NULL);
	session_drop(s);
}

static void test_unknown_pid(void)
{
	struct session *s = session_with(getpid(), 1);

	CHECK(s != NULL);
	CHECK(!s || session_process_of_record(s, getpid() + 1, 150) == NULL);
	session_drop(s);
}

int main(void)
{
	RUN_TEST(test_reused_pid_by_time);
	RUN_TEST(test_after_exit_waits_for_next);
	RUN_TEST(test_exit_unread_asks_proc);
	RUN_TEST(test_unknown_pid);
	return unit_summary();
}
