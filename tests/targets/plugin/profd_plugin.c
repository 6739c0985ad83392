// SPDX-License-Identifier: MIT
/* A library loaded with dlopen by tests/targets/plugin_host.c, after profiling began. */
__attribute__((noinline)) long plug_inner(long x)
{
	long r = x * 3 + 1;

	__asm__ volatile("" : "+r"(r));
	return r;
}

long plug_work(long x)
{
	long r = plug_inner(x) + 2;

	__asm__ volatile("" : "+r"(r));
	return r;
}
