// SPDX-License-Identifier: MIT
/*
 * Functions that read their own return address, as loggers and plugin
 * loaders do: the module of the caller through dladdr, and the raw
 * __builtin_return_address(0). Under '*' they must not see the exit
 * trampoline (tests/integration/test_return_reader.sh).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) const char *caller_module(void)
{
	Dl_info info;
	const char *base;

	if (!dladdr(__builtin_return_address(0), &info) || !info.dli_fname)
		return "?";
	base = strrchr(info.dli_fname, '/');
	return base ? base + 1 : info.dli_fname;
}

__attribute__((noinline)) void *return_address(void)
{
	return __builtin_return_address(0);
}

int main(void)
{
	char *ra = return_address();

	printf("caller module: %s\n", caller_module());
	printf("return address inside main: %s\n",
	       ra > (char *)main && ra < (char *)main + 4096 ? "yes" : "no");
	return 0;
}
