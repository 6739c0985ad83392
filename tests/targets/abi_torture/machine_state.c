// SPDX-License-Identifier: MIT
/*
 * abi_torture: machine state a call must keep (stack alignment, the
 * direction flag, callee-saved registers, IPA-RA assumptions, errno, the
 * floating-point environment) and recursion past the shadow stack.
 */
#include "abi_torture.h"

#ifdef __x86_64__
/* ---- stack alignment, direction flag, big memory operations ---------------- */

/* Returns a mask of misalignments seen from inside the callee. */
TORTURE int torture_align_probe(int k)
{
	_Alignas(16) volatile float v[4];
	_Alignas(64) volatile char line[64];
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	__m128 x = _mm_set1_ps((float)k);
	int bad = 0;

	_mm_store_ps((float *)v, x); /* movaps: faults if the frame is misaligned */
	line[0] = (char)k;
	bad |= (frame & 15) != 0;
	bad |= ((uintptr_t)v & 15) << 1;
	bad |= ((uintptr_t)line & 63) != 0 ? 4 : 0;
	bad |= v[3] != (float)k ? 8 : 0;
	return bad;
}
VIA(torture_align_probe);

__attribute__((target("avx"), noinline, used)) int torture_align_avx(int k)
{
	_Alignas(32) volatile float v[8];

	_mm256_store_ps((float *)v, _mm256_set1_ps((float)k)); /* vmovaps */
	return ((uintptr_t)v & 31) != 0 || v[7] != (float)k;
}

int case_alignment(char *why)
{
	int r = vp_torture_align_probe(3);
	uintptr_t caller_rsp, seen;

	FAIL_IF(r != 0, "misalignment mask 0x%x", r);
	r = torture_align_probe(4);
	FAIL_IF(r != 0, "direct: misalignment mask 0x%x", r);
	if (__builtin_cpu_supports("avx")) {
		int (*volatile fn)(int) = torture_align_avx;

		FAIL_IF(fn(5) != 0, "AVX aligned store saw a misaligned frame");
	}
	/* rsp seen by the displaced first instruction is the caller's, exactly */
	__asm__ volatile("movq %%rsp, %0" : "=r"(caller_rsp));
	seen = torture_asm_rsp();
	FAIL_IF(seen != caller_rsp, "callee saw rsp 0x%lx, caller's is 0x%lx",
		(unsigned long)seen, (unsigned long)caller_rsp);
	return 0;
}

static int direction_flag_set(void)
{
	unsigned long flags;

	__asm__ volatile("pushfq; popq %0" : "=r"(flags));
	return (flags >> 10) & 1;
}

/* Copies backwards with DF set, and clears it again before returning. */
TORTURE void torture_copy_backwards(unsigned char *dst, const unsigned char *src, size_t n)
{
	unsigned char *d = dst + n - 1;
	const unsigned char *s = src + n - 1;

	__asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}
VIA(torture_copy_backwards);

TORTURE int torture_memops(unsigned char *a, unsigned char *b, size_t n)
{
	bump(&n_memops);
	if (n < 64)
		return 4;
	memset(a, 0xa5, n);
	memcpy(b, a, n);
	if (memcmp(a, b, n) != 0)
		return 1;
	for (size_t i = 0; i < n; i += 4093)
		a[i] = (unsigned char)i;
	memmove(a + 3, a, n - 3); /* overlapping, forwards */
	memmove(b, a + 3, n - 3);  /* overlapping source, backwards relative to a */
	for (size_t i = 0; i + 3 < n; i += 4093)
		if (b[i] != (unsigned char)i)
			return 2;
	memset(b, 0, n);
	return memchr(b, 1, n) != NULL ? 3 : 0;
}
VIA(torture_memops);

int case_memops(char *why)
{
	const size_t n = 4u << 20;
	unsigned char *a = malloc(n), *b = malloc(n);
	int r;

	FAIL_IF(!a || !b, "malloc");
	for (size_t len = n; len >= 64; len /= 7) {
		r = vp_torture_memops(a, b, len);
		if (r) {
			free(a);
			free(b);
			FAIL_IF(1, "memops on %zu bytes: step %d", len, r);
		}
	}
	for (size_t i = 0; i < 100000; i++)
		a[i] = (unsigned char)(i * 7);
	vp_torture_copy_backwards(b, a, 100000);
	r = direction_flag_set();
	for (size_t i = 0; i < 100000 && !r; i++)
		if (b[i] != (unsigned char)(i * 7))
			r = 2;
	free(a);
	free(b);
	FAIL_IF(r == 1, "direction flag still set after the call");
	FAIL_IF(r == 2, "backwards copy wrong");
	return 0;
}

#endif

/* ---- callee-saved registers and IPA-RA ---------------------------------------- */

TORTURE int torture_keep_errno(int x)
{
	bump(&n_keep_errno);
	return x * 2 + 1;
}
VIA(torture_keep_errno);

#ifdef __x86_64__ /* pins values in named x86-64 registers */
int case_callee_saved(char *why)
{
	register long vbx __asm__("rbx") = opaque(0x0b0b0b0b0b0b0b0b);
	register long v12 __asm__("r12") = opaque(0x1212121212121212);
	register long v13 __asm__("r13") = opaque(0x1313131313131313);
	register long v14 __asm__("r14") = opaque(0x1414141414141414);
	register long v15 __asm__("r15") = opaque(0x1515151515151515);
	int r;

	__asm__ volatile("" : "+r"(vbx), "+r"(v12), "+r"(v13), "+r"(v14), "+r"(v15));
	r = vp_torture_keep_errno(20);
	__asm__ volatile("" : "+r"(vbx), "+r"(v12), "+r"(v13), "+r"(v14), "+r"(v15));
	FAIL_IF(r != 41, "result %d", r);
	FAIL_IF(vbx != 0x0b0b0b0b0b0b0b0b, "rbx 0x%lx", vbx);
	FAIL_IF(v12 != 0x1212121212121212, "r12 0x%lx", v12);
	FAIL_IF(v13 != 0x1313131313131313, "r13 0x%lx", v13);
	FAIL_IF(v14 != 0x1414141414141414, "r14 0x%lx", v14);
	FAIL_IF(v15 != 0x1515151515151515, "r15 0x%lx", v15);
	return 0;
}
#endif

/* Clobbers only rax: IPA-RA lets same-unit callers keep values in rcx, rsi, r8-r11 ... */
TORTURE long torture_tiny(long x)
{
	return x * 3 + 1;
}

/*
 * Direct calls from the same unit with many values live across them: with
 * IPA-RA, GCC keeps them in caller-saved integer and vector registers.
 */
TORTURE long torture_ipa_caller(long a, long b, long c, long d, long e, long f, double x,
				double y)
{
	long v0 = a * 7 + b, v1 = b * 11 ^ c, v2 = c * 13 + d, v3 = d * 17 ^ e, v4 = e * 19 + f,
	     v5 = f * 23 ^ a, v6 = a * b, v7 = c * d;
	double w0 = x * 1.5 + y, w1 = y * 2.5 - x, w2 = x * y;
	long s;

	n_tiny += 3;
	s = torture_tiny(v0);
	s += torture_tiny(v1 + s);
	s += torture_tiny(v2 ^ s);
	return s + v0 + v1 * 2 + v2 * 3 + v3 * 4 + v4 * 5 + v5 * 6 + v6 * 7 + v7 * 8 +
	       (long)(w0 * 9 + w1 * 10 + w2 * 11);
}
VIA(torture_ipa_caller);

static long ipa_expect(long a, long b, long c, long d, long e, long f, double x, double y)
{
	long v0 = a * 7 + b, v1 = b * 11 ^ c, v2 = c * 13 + d, v3 = d * 17 ^ e, v4 = e * 19 + f,
	     v5 = f * 23 ^ a, v6 = a * b, v7 = c * d;
	double w0 = x * 1.5 + y, w1 = y * 2.5 - x, w2 = x * y;
	long s;

	s = v0 * 3 + 1;
	s += (v1 + s) * 3 + 1;
	s += (v2 ^ s) * 3 + 1;
	return s + v0 + v1 * 2 + v2 * 3 + v3 * 4 + v4 * 5 + v5 * 6 + v6 * 7 + v7 * 8 +
	       (long)(w0 * 9 + w1 * 10 + w2 * 11);
}

int case_ipa_ra(char *why)
{
	for (long k = 0; k < 25; k++) {
		long a = opaque(k + 1), b = opaque(k * 3 - 7), c = opaque(k ^ 0x55),
		     d = opaque(-k * 101), e = opaque(k << 20), f = opaque(k * k);
		double x = (double)opaque(k) + 0.75, y = (double)opaque(k * 2) - 0.5;
		long r = vp_torture_ipa_caller(a, b, c, d, e, f, x, y);
		long ex = ipa_expect(a, b, c, d, e, f, x, y);

		FAIL_IF(r != ex, "k=%ld: %ld, expected %ld", k, r, ex);
	}
	return 0;
}

/* ---- recursion past the shadow stack ------------------------------------------ */

TORTURE long torture_recurse(long n);
long (*volatile vp_torture_recurse)(long n) = torture_recurse;

TORTURE long torture_recurse(long n)
{
	long r;

	if (n == 0)
		return 0;
	r = vp_torture_recurse(n - 1); /* through the pointer: a real call, never a loop */
	return r + n * 3;
}

int case_recursion(char *why)
{
	static const long depths[] = { 2000, 10, 1500, 1023, 1024, 1025, 3000, 1 };

	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		long n = depths[i], r = vp_torture_recurse(n);

		FAIL_IF(r != 3 * n * (n + 1) / 2, "depth %ld: %ld", n, r);
	}
	return 0;
}

/* ---- errno -------------------------------------------------------------------- */

TORTURE int torture_set_errno(int e)
{
	bump(&n_set_errno);
	errno = e;
	return -1;
}
VIA(torture_set_errno);

int case_errno(char *why)
{
	char *end;

	errno = 0;
	FAIL_IF(vp_torture_set_errno(ERANGE) != -1 || errno != ERANGE, "errno %d after set", errno);
	FAIL_IF(torture_set_errno(EILSEQ) != -1 || errno != EILSEQ, "direct: errno %d", errno);
	errno = 4321;
	FAIL_IF(vp_torture_keep_errno(1) != 3 || errno != 4321, "errno %d, expected kept", errno);
	errno = 0;
	FAIL_IF(close(-1) != -1 || errno != EBADF, "close(-1): errno %d", errno);
	errno = 0;
	FAIL_IF(strtol("99999999999999999999999", &end, 10) != LONG_MAX || errno != ERANGE,
		"strtol overflow: errno %d", errno);
	return 0;
}

/* ---- floating-point environment ----------------------------------------------- */

TORTURE double torture_fp_div(double a, double b)
{
	bump(&n_fp_div);
	return a / b;
}
VIA(torture_fp_div);

int case_fpenv(char *why)
{
	volatile double one = 1.0, three = 3.0, tiny = DBL_MIN;
	double up, down;
	int mode_up, mode_down;

	fesetround(FE_UPWARD);
	up = vp_torture_fp_div(one, three);
	mode_up = fegetround();
	fesetround(FE_DOWNWARD);
	down = vp_torture_fp_div(one, three);
	mode_down = fegetround();
	fesetround(FE_TONEAREST);
	FAIL_IF(mode_up != FE_UPWARD || mode_down != FE_DOWNWARD, "rounding mode changed by a call");
	FAIL_IF(up != nextafter(down, 1.0), "directed rounding not applied: %a %a", up, down);

#ifdef __x86_64__
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr | 0x8040); /* FTZ | DAZ */
	double flushed = vp_torture_fp_div(tiny, 4.0);
	unsigned after = _mm_getcsr();
	_mm_setcsr(csr);
	FAIL_IF(flushed != 0.0, "flush-to-zero not applied: %a", flushed);
	FAIL_IF((after & 0xffc0) != ((csr | 0x8040) & 0xffc0), "MXCSR control 0x%x after the call",
		after);
#else
	(void)tiny;
#endif
	return 0;
}
