// SPDX-License-Identifier: MIT
/*
 * A call that one attach session sees enter and the next sees return
 * (tests/integration/test_attach.sh): the agent, kept loaded between the
 * two, must leave it out of the second session's calls and timeline. Files
 * in DIR drive it: `enter` makes it call cs_long, which waits for `release`;
 * then it calls cs_short 5 times and writes "done" (and waits for `stop`).
 * cs_long says "inside" once it runs.
 * Usage: cross_session DIR
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

static int exists(const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void wait_for(const char *name)
{
	for (int i = 0; i < 60000 && !exists(name); i++)
		usleep(1000);
}

__attribute__((noinline)) int cs_long(void)
{
	printf("inside\n");
	fflush(stdout);
	wait_for("release");
	return 1;
}

/* long enough to be patched: a few instructions past the entry jump */
__attribute__((noinline)) int cs_short(int x)
{
	__asm__ volatile("nop; nop; nop; nop; nop; nop" : "+r"(x));
	return x + 1;
}

int main(int argc, char **argv)
{
	int sum;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	printf("ready\n");
	fflush(stdout);
	wait_for("enter");
	sum = cs_long();
	for (int i = 0; i < 5; i++)
		sum = cs_short(sum);
	printf("done %d\n", sum);
	fflush(stdout);
	wait_for("stop");
	return 0;
}
