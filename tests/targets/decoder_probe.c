// SPDX-License-Identifier: MIT
/*
 * Which decoder the agent needed (tests/integration/test_lazy_decoder.sh):
 * calls probe_step 100 times, prints how many of its mappings are libZydis's,
 * then, given a library path, dlopens it, calls its x87_run(100) and prints
 * the count again. The agent dlopen()s libZydis only for a prologue its
 * built-in decoder does not know.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) long probe_step(long x)
{
	long r = x * 3 + 1;

	__asm__ volatile("" : "+r"(r));
	return r;
}

static int zydis_mappings(void)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "libZydis") != NULL;
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	long sum = 0, (*run)(long);
	void *h;

	for (long i = 0; i < 100; i++)
		sum += probe_step(i);
	printf("sum %ld, libZydis mapped %s\n", sum, zydis_mappings() ? "yes" : "no");
	if (argc < 2)
		return 0;
	h = dlopen(argv[1], RTLD_NOW);
	run = h ? (long (*)(long))dlsym(h, "x87_run") : NULL;
	if (!run) {
		printf("dlopen failed: %s\n", dlerror());
		return 1;
	}
	printf("x87 sum %ld, libZydis mapped %s\n", run(100), zydis_mappings() ? "yes" : "no");
	return 0;
}
