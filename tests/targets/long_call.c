// SPDX-License-Identifier: MIT
/*
 * The target of a check in tests/integration/test_exact_calls.sh: one call
 * that is still running when the agent sends its figures (every 250 ms),
 * then returns while the program goes on. Its exact time must reach the
 * summary, and nothing may be left "still running".
 */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int long_call(void)
{
	usleep(600 * 1000);
	return 7;
}

int main(void)
{
	printf("long_call %d\n", long_call());
	fflush(stdout);
	usleep(400 * 1000);
	return 0;
}
