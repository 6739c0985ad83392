// SPDX-License-Identifier: MIT
/*
 * Arguments and return values for --args/--retval (issue 29): args_all
 * takes a string, integers of 8 to 64 bits (negative ones too), a double,
 * an enum and a pointer that is no string ((char *)1, then a PROT_NONE
 * page) and returns a value; args_long gets a string longer than
 * the copy limit, then 10 bytes without a NUL before an unreadable page;
 * args_stack has 10 integer arguments (x86-64: arg7-arg10 on the stack,
 * aarch64: arg9, arg10);
 * args_float returns a double; and fopen gets a path. Calls are made
 * ARGS_CALLS times each; the target prints "done".
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARGS_CALLS 3

enum colour { RED = 1, GREEN = 2, BLUE = 7 };

__attribute__((noinline)) long args_all(const char *name, int8_t small, int16_t mid, int32_t neg,
					int64_t big, double ratio, enum colour colour,
					const char *bad)
{
	__asm__ volatile("" ::: "memory");
	return (long)small + mid + neg + (long)big + (long)ratio + colour + (bad != NULL) + 1000;
}

__attribute__((noinline)) size_t args_long(const char *text)
{
	__asm__ volatile("" ::: "memory");
	return (size_t)text[0];
}

__attribute__((noinline)) long args_stack(long a1, long a2, long a3, long a4, long a5, long a6,
					  long a7, long a8, long a9, long a10)
{
	__asm__ volatile("" ::: "memory");
	return a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10;
}

__attribute__((noinline)) double args_float(double x, float y)
{
	__asm__ volatile("" ::: "memory");
	return x * 2 + y;
}

int main(void)
{
	char longer[200];
	long sum = 0;
	long page = sysconf(_SC_PAGESIZE);
	/* two pages: the second unreadable, the first ending in 10 'x' and no NUL */
	char *area = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *gone = area + page, *unended = gone - 10;
	FILE *f;

	for (size_t i = 0; i < sizeof(longer) - 1; i++)
		longer[i] = (char)('a' + i % 26);
	longer[sizeof(longer) - 1] = '\0';
	if (area == MAP_FAILED)
		return 1;
	memset(unended, 'x', 10);
	mprotect(gone, (size_t)page, PROT_NONE); /* kept mapped: nothing else lands there */
	for (int i = 0; i < ARGS_CALLS; i++) {
		sum += args_all("hello world", -5, 1234, -70000, 1ll << 40, 2.5, BLUE, (const char *)1);
		sum += args_all("second", 7, -2, 3, -4, -0.25, GREEN, gone);
		sum += (long)args_long(longer);
		sum += (long)args_long(unended);
		sum += args_stack(1, 2, 3, 4, 5, 6, 77, 88, 99, 1010);
		sum += (long)args_float(1.5, 0.25f);
	}
	f = fopen("/proc/self/args_target_path", "r"); /* fails: only its argument matters */
	if (f)
		fclose(f);
	printf("done %ld\n", sum);
	return 0;
}
