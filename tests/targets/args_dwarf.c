// SPDX-License-Identifier: MIT
/*
 * Functions whose parameters --auto-args reads from DWARF (issue 29): every
 * scalar kind, enums, strings and other pointers, floats interleaved with
 * integers, stack arguments, the cases the ABI rules refuse (structs by
 * value, long double, __int128) and the one that shifts them (a struct
 * returned in memory). ad_nodwarf comes from args_dwarf/nodwarf.c, built
 * without -g. tests/unit/test_dwarf_params.c checks the placements this
 * file's comments give (x86-64 / aarch64); main calls each once (with
 * --loop, every 10 ms until stdin closes: for profctl attach).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>

#define AD_FN __attribute__((noinline, noclone, used))

enum ad_mode { AD_READ = 0, AD_WRITE = 1, AD_APPEND = 4, AD_BACK = -2 };
enum ad_flags { AD_F_SYNC = 1, AD_F_TRUNC = 2, AD_F_HIGH = 0x80000000u };

struct ad_small {
	int x, y;
};

struct ad_big {
	long a, b, c;
};

typedef unsigned long ad_size_t;
typedef const char *ad_name_t;

int ad_nodwarf(int x);

/* arg1/i32 arg2/u32 arg3/i16 arg4/c arg5/i64 arg6/u8(bool); retval/i32 */
AD_FN int ad_ints(int i, unsigned int u, short s, char c, long l, bool b)
{
	return i + (int)u + s + c + (int)l + b;
}

/* mode: signed enum, arg1/i32; flags: unsigned enum, arg2/u32 */
AD_FN int ad_enum(enum ad_mode mode, enum ad_flags flags)
{
	return (int)mode ^ (int)flags;
}

/* path, buf: strings; opaque, bytes: pointers (unsigned char * is not text) */
AD_FN long ad_strings(const char *path, char *buf, void *opaque, unsigned char *bytes)
{
	return (long)strlen(path) + buf[0] + (opaque != NULL) + bytes[0];
}

/* arg1/i32 fparg1/f64 fparg2/f32 arg2/i64 fparg3/f64; retval/f64 */
AD_FN double ad_mixed(int a, double d, float f, long b, double e)
{
	return a + d + f + (double)b + e;
}

/* a7 is arg7 (the first stack word), f1 fparg1, a8 arg8 */
AD_FN long ad_many(long a1, long a2, long a3, long a4, long a5, long a6, long a7, double f1,
		   long a8)
{
	return a1 + a2 + a3 + a4 + a5 + a6 + a7 + (long)f1 + a8;
}

/* f9 goes to the stack (unsupported); a7 is then the second stack word: arg8 */
AD_FN double ad_fp9(double f1, double f2, double f3, double f4, double f5, double f6, double f7,
		    double f8, double f9, long a1, long a2, long a3, long a4, long a5, long a6,
		    long a7)
{
	return f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8 + f9 + (double)(a1 + a2 + a3 + a4 + a5 + a6 + a7);
}

/* a arg1; s unsupported, and so are b and d on x86-64 (and on aarch64: <= 16 bytes) */
AD_FN int ad_struct_val(int a, struct ad_small s, int b, double d)
{
	return a + s.x + s.y + b + (int)d;
}

/* x86-64: b unsupported; aarch64: s passed by reference in x1, b arg3 */
AD_FN long ad_big_val(int a, struct ad_big s, int b)
{
	return a + s.a + s.b + s.c + b;
}

/* x86-64: the result's address in rdi, so a arg2 and name arg3; aarch64 (x8): arg1, arg2 */
AD_FN struct ad_big ad_ret_big(int a, const char *name)
{
	struct ad_big r = { a, (long)strlen(name), 3 };

	return r;
}

/* returned in rax: a stays arg1 */
AD_FN struct ad_small ad_ret_small(int a)
{
	struct ad_small r = { a, a + 1 };

	return r;
}

/* arg1/u64 (ad_size_t), arg2/s (ad_name_t), arg3/i32 */
AD_FN int ad_typedef(ad_size_t n, ad_name_t name, const volatile int cv)
{
	return (int)n + name[0] + cv;
}

/* x86-64: long double is on the stack, so b arg2 and d fparg1 still */
AD_FN int ad_ldouble(int a, long double x, int b, double d)
{
	return a + (int)x + b + (int)d;
}

/* x86-64: big in rsi:rdx, b arg4; aarch64: big in x2:x3, b arg5 */
AD_FN int ad_i128(int a, __int128 big, int b)
{
	return a + (int)big + b;
}

/* the fixed parameters are placed: fmt arg1/s, level arg2 */
AD_FN int ad_printf(const char *fmt, int level, ...)
{
	va_list ap;
	int n;

	va_start(ap, level);
	n = vsnprintf(NULL, 0, fmt, ap) + level;
	va_end(ap);
	return n;
}

/* fparg1/f32, retval/f32 */
AD_FN float ad_retf(float x)
{
	return x * 2;
}

/* retval/u8 (bool) */
AD_FN bool ad_is_ok(const void *p)
{
	return p != NULL;
}

AD_FN void ad_void(void)
{
	__asm__ volatile("" ::: "memory");
}

/* At -O2, GCC clones it (ad_clone_me.constprop.0: b is always 7): that symbol is refused */
static __attribute__((noinline)) int ad_clone_me(int a, int b, const char *s)
{
	return a * 3 + b + s[0];
}

/* Every function once; returns their sum. */
static __attribute__((noinline)) long call_all(void)
{
	unsigned char bytes[1] = { 1 };
	char buf[2] = "b";
	struct ad_small sm = { 1, 2 };
	struct ad_big big = { 1, 2, 3 };
	long sum = 0;

	sum += ad_ints(-1, 2, -3, 'c', 5, true);
	sum += ad_enum(AD_APPEND, AD_F_SYNC | AD_F_TRUNC);
	sum += ad_strings("/etc/hostname", buf, buf, bytes);
	sum += (long)ad_mixed(1, 2.5, 3.5f, 4, 5.5);
	sum += ad_many(1, 2, 3, 4, 5, 6, 7, 8.0, 9);
	sum += (long)ad_fp9(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7);
	sum += ad_struct_val(1, sm, 2, 3.0);
	sum += ad_big_val(1, big, 2);
	sum += ad_ret_big(1, "x").c;
	sum += ad_ret_small(4).y;
	sum += ad_typedef(3, "n", 4);
	sum += ad_ldouble(1, 2.0L, 3, 4.0);
	sum += ad_i128(1, (__int128)2, 3);
	sum += ad_printf("%d %s", 1, 2, "x");
	sum += (long)ad_retf(1.5f);
	sum += ad_is_ok(&sum);
	ad_void();
	sum += ad_nodwarf(5);
	sum += ad_clone_me((int)sum, 7, "k") + ad_clone_me(2, 7, "j");
	return sum;
}

/* "--loop": for profctl attach, every function every 10 ms until stdin closes. */
int main(int argc, char **argv)
{
	long sum = call_all();

	printf("args_dwarf %ld\n", sum);
	if (argc > 1 && strcmp(argv[1], "--loop") == 0) {
		fflush(stdout);
		while (!feof(stdin)) {
			struct timeval tv = { 0, 10000 };
			fd_set in;

			call_all();
			FD_ZERO(&in);
			FD_SET(0, &in);
			if (select(1, &in, NULL, NULL, &tv) > 0 && getchar() == EOF)
				break;
		}
	}
	return 0;
}
