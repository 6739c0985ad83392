// SPDX-License-Identifier: MIT
/*
 * Unit tests for common/proc_stat_line.c: names with blanks, parentheses
 * and newlines, negative fields, lines cut before the start time or with
 * a number too large refused, and this process's and a renamed child's
 * stat as sscanf and getppid() see them.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proc_stat_line.h"
#include "tests/unit/unit.h"

static int parse(const char *line, struct proc_stat_line *st)
{
	memset(st, 0x5a, sizeof(*st));
	return proc_stat_line_parse(line, strlen(line), st);
}

static void test_plain_line(void)
{
	struct proc_stat_line st;

	CHECK_EQ_INT(parse("22577 (cat) R 22561 22561 2791 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 "
			   "0 5504321 2785280 224 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 "
			   "0 17 1 0 0 0 0 0\n", &st), 0);
	CHECK_EQ_INT(st.pid, 22577);
	CHECK_EQ_STR(st.comm, "cat");
	CHECK_EQ_INT(st.state, 'R');
	CHECK_EQ_INT(st.ppid, 22561);
	CHECK_EQ_U64(st.start_time, 5504321);
}

static void test_name_with_parentheses(void)
{
	struct proc_stat_line st;

	/* the name ends at the last ')', whatever it holds */
	CHECK_EQ_INT(parse("7 (a\nb\\c d) (e\t) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 -2 -20 1 0 "
			   "42 0", &st), 0);
	CHECK_EQ_STR(st.comm, "a\nb\\c d) (e\t");
	CHECK_EQ_INT(st.state, 'S');
	CHECK_EQ_INT(st.ppid, 1);
	CHECK_EQ_U64(st.start_time, 42);
	CHECK_EQ_INT(parse("8 () Z 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 99", &st), 0);
	CHECK_EQ_STR(st.comm, "");
	CHECK_EQ_INT(st.state, 'Z');
	CHECK_EQ_INT(st.ppid, 0);
	CHECK_EQ_U64(st.start_time, 99);
}

static void test_long_name_cut(void)
{
	char line[256], name[PROC_STAT_COMM_MAX + 11];
	struct proc_stat_line st;

	memset(name, 'k', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(line, sizeof(line), "9 (%s) I 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77", name);
	CHECK_EQ_INT(parse(line, &st), 0);
	CHECK_EQ_INT(strlen(st.comm), PROC_STAT_COMM_MAX);
	CHECK_EQ_U64(st.start_time, 77);
}

static void test_malformed(void)
{
	static const char *const bad[] = {
		"",
		"12",
		"12 cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"12 (cat R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"x2 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"12 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0",     /* no start time */
		"12 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5x",
		"12 (cat) R x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"12 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5",
		"12 (cat) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999",
		"12 (cat)R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
	};
	struct proc_stat_line st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &st) != -EINVAL) {
			fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
			CHECK(0);
		}
}

static void test_own_stat_as_sscanf(void)
{
	unsigned long long start = 0;
	struct proc_stat_line st;
	char line[1024], *p;
	int ppid = 0;
	FILE *f = fopen("/proc/self/stat", "re");

	CHECK(f && fgets(line, sizeof(line), f));
	if (f)
		fclose(f);
	p = strrchr(line, ')');
	CHECK(p && sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			  "%*d %*d %*d %*d %llu", &ppid, &start) == 2);
	CHECK_EQ_INT(proc_stat_read(getpid(), &st), 0);
	CHECK_EQ_INT(st.pid, getpid());
	CHECK_EQ_INT(st.ppid, ppid);
	CHECK_EQ_INT(st.ppid, getppid());
	CHECK_EQ_U64(st.start_time, start);
}

static void test_renamed_child(void)
{
	int ready[2], status;
	struct proc_stat_line st;
	char c;
	pid_t child;

	CHECK_EQ_INT(pipe(ready), 0);
	child = fork();
	if (child == 0) {
		prctl(PR_SET_NAME, "a) b (c\nd");
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK_EQ_INT(read(ready[0], &c, 1), 1);
	CHECK_EQ_INT(proc_stat_read(child, &st), 0);
	CHECK_EQ_STR(st.comm, "a) b (c\nd");
	CHECK_EQ_INT(st.ppid, getpid());
	CHECK_EQ_INT(st.pid, child);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	CHECK_EQ_INT(proc_stat_read(child, &st), -ENOENT);
	close(ready[0]);
	close(ready[1]);
}

int main(void)
{
	RUN_TEST(test_plain_line);
	RUN_TEST(test_name_with_parentheses);
	RUN_TEST(test_long_name_cut);
	RUN_TEST(test_malformed);
	RUN_TEST(test_own_stat_as_sscanf);
	RUN_TEST(test_renamed_child);
	return unit_summary();
}
