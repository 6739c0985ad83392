// SPDX-License-Identifier: MIT
/*
 * Loads a library after profiling began (tests/integration/test_dlopen.sh):
 * waits for argv[2] to exist (if given), dlopens argv[1], calls plug_work
 * 1000 times, dlcloses it, loads it again and calls it 1000 times more.
 * Prints the sums and `count plug_work 2000`. With PLUG_SPIN_MS=N in the
 * environment each load also spins N ms in plug_spin (for sampling tests);
 * with PLUG_PACE_US=N it sleeps N us after each plug_work call, so that a
 * load's calls last longer than the agent takes to describe its functions
 * (--auto-args, test_auto_args.sh).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* noinline: test_auto_args checks its parameter's name on both calls, around a dlopen */
__attribute__((noinline)) static long run_plugin(const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	long (*work)(long), (*spin)(long), sum = 0;
	long pace_us = getenv("PLUG_PACE_US") ? atol(getenv("PLUG_PACE_US")) : 0;

	if (!h) {
		printf("dlopen failed: %s\n", dlerror());
		return -1;
	}
	work = (long (*)(long))dlsym(h, "plug_work");
	for (long i = 0; work && i < 1000; i++) {
		sum += work(i);
		if (pace_us)
			usleep((useconds_t)pace_us);
	}
	spin = (long (*)(long))dlsym(h, "plug_spin");
	if (spin && getenv("PLUG_SPIN_MS"))
		spin(atol(getenv("PLUG_SPIN_MS")));
	dlclose(h);
	return sum;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	printf("ready\n");
	fflush(stdout);
	while (argc > 2 && access(argv[2], F_OK) != 0)
		usleep(10000);
	printf("first %ld\n", run_plugin(argv[1]));
	printf("second %ld\n", run_plugin(argv[1]));
	printf("count plug_work 2000\n");
	fflush(stdout);
	while (argc > 3 && access(argv[3], F_OK) != 0)
		usleep(10000);
	return 0;
}
