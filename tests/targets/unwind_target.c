// SPDX-License-Identifier: MIT
/*
 * A program that waits inside three instrumented calls so that a debugger
 * can look at its stack (tests/integration/test_unwind.sh): it writes a
 * file when it is there, and goes on when uw_release is set (or after 20 s).
 */
#include <stdio.h>
#include <unistd.h>

volatile int uw_release;

__attribute__((noinline, used)) int uw_level3(const char *ready_file)
{
	FILE *f = fopen(ready_file, "w");

	if (f)
		fclose(f);
	for (int i = 0; i < 20000 && !uw_release; i++)
		usleep(1000);
	return 3;
}

__attribute__((noinline, used)) int uw_level2(const char *ready_file)
{
	int r = uw_level3(ready_file);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

__attribute__((noinline, used)) int uw_level1(const char *ready_file)
{
	int r = uw_level2(ready_file);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

int main(int argc, char **argv)
{
	printf("%d\n", uw_level1(argc > 1 ? argv[1] : "/dev/null"));
	return 0;
}
