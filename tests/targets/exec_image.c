// SPDX-License-Identifier: MIT
/*
 * tests/integration/test_run_session.sh's target: calls, then an exec that
 * replaces the image (no destructor runs), or fails and the image goes on.
 *   exec        1,000 calls, then execl of /bin/true
 *   execvp      1,000 calls, then execvp("true") through a PATH whose first
 *               directories do not exist (an execve fails in each first)
 *   fail        1,000 calls, an exec of a missing file, 500 calls, exit 0
 *   spawn       1,000 calls, then from inside ex_outer (its frame hijacked)
 *               system("true") twice (posix_spawn: the child's exec runs in
 *               this process's memory, on this thread's agent state), exit 0
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) int ex_step(int x)
{
	return x * 3 + 1;
}

static void calls(int n)
{
	int x = 0;

	for (int i = 0; i < n; i++)
		x = ex_step(x) & 0xffff;
	sink = x;
}

__attribute__((noinline)) int ex_outer(void)
{
	int status = system("true") | system("exit 0");

	calls(10);
	return status;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exec";

	calls(1000);
	if (strcmp(mode, "exec") == 0) {
		execl("/bin/true", "true", (char *)NULL);
	} else if (strcmp(mode, "execvp") == 0) {
		setenv("PATH", "/nonexistent/a:/nonexistent/b:/usr/bin:/bin", 1);
		execvp("true", (char *[]){ "true", NULL });
	} else if (strcmp(mode, "fail") == 0) {
		execl("/nonexistent/program", "program", (char *)NULL);
		printf("exec failed: %s\n", strerror(errno));
		calls(500);
		return 0;
	} else if (strcmp(mode, "spawn") == 0) {
		return ex_outer();
	}
	perror("exec_image");
	return 1;
}
