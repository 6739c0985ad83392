// SPDX-License-Identifier: MIT
/*
 * abi_torture: arguments and results in every class (integers, int128,
 * varargs, floating point, vectors, x87 and complex, structs by value and
 * by reference, the static chain).
 */
#include "abi_torture.h"

/* ---- integer and pointer arguments ------------------------------------------ */

static char int_args_buf[16];
static int int_args_ints[4];

/* 6 in registers, 4 on the stack; returns the bad-argument mask negated, or a sum. */
TORTURE long torture_int_args(long a, char *b, int c, short d, unsigned char e, void *f, long g,
			      int *h, long i, unsigned j)
{
	long bad = 0;

	bump(&n_int_args);
	bad |= (b != int_args_buf + (a & 7)) << 1;
	bad |= (c != (int)(a * 3)) << 2;
	bad |= (d != (short)(a ^ 0x5a5a)) << 3;
	bad |= (e != (unsigned char)(a + 7)) << 4;
	bad |= (f != (void *)&int_args_ints[0]) << 5;
	bad |= (g != a * -5) << 6;
	bad |= (h != &int_args_ints[2]) << 7;
	bad |= (i != ~a) << 8;
	bad |= (j != (unsigned)(a << 3)) << 9;
	if (bad)
		return -bad;
	return a + c + d + e + g + i + j;
}
VIA(torture_int_args);

static long int_args_expect(long a)
{
	return a + (int)(a * 3) + (short)(a ^ 0x5a5a) + (unsigned char)(a + 7) + a * -5 + ~a +
	       (unsigned)(a << 3);
}

static long int_args_call(long (*fn)(long, char *, int, short, unsigned char, void *, long, int *,
				     long, unsigned),
			  long a)
{
	return fn(a, int_args_buf + (a & 7), (int)(a * 3), (short)(a ^ 0x5a5a),
		  (unsigned char)(a + 7), &int_args_ints[0], a * -5, &int_args_ints[2], ~a,
		  (unsigned)(a << 3));
}

int case_int_args(char *why)
{
	for (long k = 0; k < 40; k++) {
		long a = opaque(k * 0x123456789 - 77);
		long r = int_args_call(vp_torture_int_args, a);

		FAIL_IF(r != int_args_expect(a), "a=%ld: got %ld, expected %ld", a, r,
			int_args_expect(a));
	}
	/* and directly, from this translation unit */
	long a = opaque(99);
	long r = torture_int_args(a, int_args_buf + (a & 7), (int)(a * 3), (short)(a ^ 0x5a5a),
				  (unsigned char)(a + 7), &int_args_ints[0], a * -5,
				  &int_args_ints[2], ~a, (unsigned)(a << 3));

	FAIL_IF(r != int_args_expect(a), "direct call: got %ld", r);
	return 0;
}

/* __int128 in register pairs and on the stack (x takes rdi:rsi ... z on the stack). */
TORTURE __int128 torture_int128(__int128 x, __int128 y, long pad, __int128 z, __int128 w)
{
	bump(&n_int128);
	return x * 3 + y - z + (w >> 1) + pad;
}
VIA(torture_int128);

int case_int128(char *why)
{
	for (long k = 1; k < 20; k++) {
		__int128 x = ((__int128)opaque(k) << 70) + 12345, y = -((__int128)k << 100);
		__int128 z = ((__int128)0x7fff << 64) | (unsigned long)opaque(k * 99);
		__int128 w = ((__int128)k << 90) + 2;
		__int128 r = vp_torture_int128(x, y, k, z, w);
		__int128 e = x * 3 + y - z + (w >> 1) + k;

		FAIL_IF(r != e, "k=%ld: high 0x%lx low 0x%lx, expected high 0x%lx low 0x%lx", k,
			(unsigned long)(r >> 64), (unsigned long)r, (unsigned long)(e >> 64),
			(unsigned long)e);
	}
	return 0;
}

/* ---- varargs ---------------------------------------------------------------- */

/* An HFA of three doubles (AAPCS64: d0-d2 as an argument; see the structs below). */
struct hfa_d3 {
	double a, b, c;
};

/*
 * fmt: 'i' an int, 'l' a long, 'd' a double, 'L' a long double, 'h' a
 * struct hfa_d3. al carries the vector register count on x86-64; on aarch64
 * va_arg takes doubles, long doubles and HFAs (one 16-byte slot per member)
 * from the vector register save area until v0-v7 run out.
 */
TORTURE double torture_varargs_sum(const char *fmt, ...)
{
	va_list ap;
	double sum = 0;

	bump(&n_varargs);
	va_start(ap, fmt);
	for (const char *p = fmt; *p; p++) {
		if (*p == 'i') {
			sum += va_arg(ap, int);
		} else if (*p == 'l') {
			sum += (double)va_arg(ap, long);
		} else if (*p == 'L') {
			sum += (double)va_arg(ap, long double);
		} else if (*p == 'h') {
			struct hfa_d3 h = va_arg(ap, struct hfa_d3);

			sum += h.a + h.b * 2 + h.c * 4;
		} else {
			sum += va_arg(ap, double);
		}
	}
	va_end(ap);
	return sum;
}
VIA(torture_varargs_sum);

TORTURE int torture_varargs_format(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	return r;
}
VIA(torture_varargs_format);

int case_varargs(char *why)
{
	double x = (double)opaque(3) + 0.25;
	double r = vp_torture_varargs_sum("ddddddddddd", x, x + 1, x + 2, x + 3, x + 4, x + 5,
					  x + 6, x + 7, x + 8, x + 9, x + 10);
	char buf[128];

	FAIL_IF(r != 11 * x + 55, "11 doubles: %.17g", r);
	r = vp_torture_varargs_sum("ililililili", 1, 2L, 3, 4L, 5, 6L, 7, 8L, 9, 10L, 11);
	FAIL_IF(r != 66, "11 integers: %.17g", r);
	r = vp_torture_varargs_sum("idldidldidldidldid", 1, 0.5, 2L, 0.25, 3, 0.125, 4L, 0.0625, 5,
				   1.5, 6L, 2.5, 7, 3.5, 8L, 4.5, 9, 5.5);
	FAIL_IF(r != 45 + 18.4375, "mixed: %.17g", r);
	/* aarch64: h in v0-v2, d v3, L q4, h v5-v7, i x1; then d and h on the stack */
	r = vp_torture_varargs_sum("hdLhidh", (struct hfa_d3){ 1, 2, 3 }, 0.5, 1.25L,
				   (struct hfa_d3){ 0.25, 0.5, 0.75 }, 8, 0.125,
				   (struct hfa_d3){ x, x, x });
	FAIL_IF(r != 17 + 0.5 + 1.25 + 4.25 + 8 + 0.125 + 7 * x, "HFAs and long doubles: %.17g",
		r);
	r = torture_varargs_sum("dddi", x, x, x, 4);
	FAIL_IF(r != 3 * x + 4, "direct: %.17g", r);
	vp_torture_varargs_format(buf, sizeof(buf), "%d %.3f %s %ld %.2e %c %g %g %g %g %g %g %g",
				  -17, 3.14159, "str", 1234567890123L, 6.02e23, 'z', 1.0, 2.0,
				  3.0, 4.0, 5.0, 6.0, 7.5);
	FAIL_IF(strcmp(buf, "-17 3.142 str 1234567890123 6.02e+23 z 1 2 3 4 5 6 7.5") != 0,
		"vsnprintf gave '%s'", buf);
	return 0;
}

/* ---- floating point in xmm0-7 and on the stack -------------------------------- */

/* 8 ints (2 on the stack) and 10 floats/doubles (2 on the stack), interleaved. */
TORTURE double torture_mixed_fp(int i0, double d0, long i1, float f1, int i2, double d2, long i3,
				float f3, int i4, double d4, long i5, float f5, int i6, double d6,
				long i7, float f7, double d8, float f9)
{
	bump(&n_mixed_fp);
	return i0 + d0 * 2 + i1 * 3 + f1 * 4 + i2 * 5 + d2 * 6 + i3 * 7 + f3 * 8 + i4 * 9 +
	       d4 * 10 + i5 * 11 + f5 * 12 + i6 * 13 + d6 * 14 + i7 * 15 + f7 * 16 + d8 * 17 +
	       f9 * 18;
}
VIA(torture_mixed_fp);

int case_mixed_fp(char *why)
{
	for (int k = 0; k < 20; k++) {
		int b = (int)opaque(k);
		double r = vp_torture_mixed_fp(b, b + 0.5, b + 2, b + 0.25f, b + 4, b + 0.125,
					       b + 6, b + 1.5f, b + 8, b + 2.5, b + 10, b + 3.5f,
					       b + 12, b + 4.5, b + 14, b + 5.5f, b + 6.5, b + 7.5f);
		double e = b + (b + 0.5) * 2 + (b + 2) * 3 + (b + 0.25) * 4 + (b + 4) * 5 +
			   (b + 0.125) * 6 + (b + 6) * 7 + (b + 1.5) * 8 + (b + 8) * 9 +
			   (b + 2.5) * 10 + (b + 10) * 11 + (b + 3.5) * 12 + (b + 12) * 13 +
			   (b + 4.5) * 14 + (b + 14) * 15 + (b + 5.5) * 16 + (b + 6.5) * 17 +
			   (b + 7.5) * 18;

		FAIL_IF(r != e, "k=%d: %.17g, expected %.17g", k, r, e);
	}
	return 0;
}

#ifdef __x86_64__
/* ---- __m256 and __m512 ------------------------------------------------------ */

#define VEC_ARGS 10

/* Lane l of argument k is k * 16 + l + 0.5; returns sum_k (k + 1) * a_k, or NaNs. */
__attribute__((target("avx2"), noinline, used)) __m256
torture_m256_many(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
		  __m256 a7, __m256 a8, __m256 a9)
{
	__m256 a[VEC_ARGS] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 };
	__m256 sum = _mm256_setzero_ps();

	for (int k = 0; k < VEC_ARGS; k++) {
		float lanes[8];

		_mm256_storeu_ps(lanes, a[k]);
		for (int l = 0; l < 8; l++)
			if (lanes[l] != k * 16 + l + 0.5f)
				return _mm256_set1_ps(NAN);
		sum = _mm256_add_ps(sum, _mm256_mul_ps(a[k], _mm256_set1_ps((float)(k + 1))));
	}
	return sum;
}

__attribute__((target("avx2"))) static __m256 m256_arg(int k)
{
	float lanes[8];

	for (int l = 0; l < 8; l++)
		lanes[l] = k * 16 + l + 0.5f;
	return _mm256_loadu_ps(lanes);
}

__attribute__((target("avx2"), noinline)) static int m256_run(char *why)
{
	__m256 (*volatile fn)(__m256, __m256, __m256, __m256, __m256, __m256, __m256, __m256,
			      __m256, __m256) = torture_m256_many;
	__m256 r = fn(m256_arg(0), m256_arg(1), m256_arg(2), m256_arg(3), m256_arg(4),
		      m256_arg(5), m256_arg(6), m256_arg(7), m256_arg(8), m256_arg(9));
	float lanes[8];

	_mm256_storeu_ps(lanes, r);
	for (int l = 0; l < 8; l++) {
		float e = 0;

		for (int k = 0; k < VEC_ARGS; k++)
			e += (k + 1) * (k * 16 + l + 0.5f);
		FAIL_IF(lanes[l] != e, "lane %d: %g, expected %g", l, lanes[l], e);
	}
	return 0;
}

__attribute__((target("avx512f"), noinline, used)) __m512
torture_m512_many(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5, __m512 a6,
		  __m512 a7, __m512 a8, __m512 a9)
{
	__m512 a[VEC_ARGS] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 };
	__m512 sum = _mm512_setzero_ps();

	for (int k = 0; k < VEC_ARGS; k++) {
		float lanes[16];

		_mm512_storeu_ps(lanes, a[k]);
		for (int l = 0; l < 16; l++)
			if (lanes[l] != k * 16 + l + 0.5f)
				return _mm512_set1_ps(NAN);
		sum = _mm512_add_ps(sum, _mm512_mul_ps(a[k], _mm512_set1_ps((float)(k + 1))));
	}
	return sum;
}

__attribute__((target("avx512f"))) static __m512 m512_arg(int k)
{
	float lanes[16];

	for (int l = 0; l < 16; l++)
		lanes[l] = k * 16 + l + 0.5f;
	return _mm512_loadu_ps(lanes);
}

__attribute__((target("avx512f"), noinline)) static int m512_run(char *why)
{
	__m512 (*volatile fn)(__m512, __m512, __m512, __m512, __m512, __m512, __m512, __m512,
			      __m512, __m512) = torture_m512_many;
	__m512 r = fn(m512_arg(0), m512_arg(1), m512_arg(2), m512_arg(3), m512_arg(4),
		      m512_arg(5), m512_arg(6), m512_arg(7), m512_arg(8), m512_arg(9));
	float lanes[16];

	_mm512_storeu_ps(lanes, r);
	for (int l = 0; l < 16; l++) {
		float e = 0;

		for (int k = 0; k < VEC_ARGS; k++)
			e += (k + 1) * (k * 16 + l + 0.5f);
		FAIL_IF(lanes[l] != e, "lane %d: %g, expected %g", l, lanes[l], e);
	}
	return 0;
}

int case_m256(char *why)
{
	return __builtin_cpu_supports("avx2") ? m256_run(why) : 0;
}

int case_m512(char *why)
{
	return __builtin_cpu_supports("avx512f") ? m512_run(why) : 0;
}

#endif

/* ---- x87 and complex returns -------------------------------------------------- */

/* long double arguments go on the stack; the result comes back in st0. */
TORTURE long double torture_ld_fma(long double a, long double b, int k, long double c)
{
	return a * b + c + k;
}
VIA(torture_ld_fma);

/* _Complex long double: st0 real, st1 imaginary. */
TORTURE _Complex long double torture_cld_make(long double re, long double im)
{
	return re + im * 1.0il;
}
VIA(torture_cld_make);

TORTURE _Complex double torture_cd_combine(_Complex double a, _Complex double b, double s)
{
	return a * s + b;
}
VIA(torture_cd_combine);

TORTURE _Complex float torture_cf_swap(_Complex float a)
{
	return __builtin_complex(__imag__ a, __real__ a);
}
VIA(torture_cf_swap);

#ifdef __x86_64__ /* aarch64 has no __float128: its long double is binary128 */
TORTURE __float128 torture_f128_add(__float128 a, __float128 b)
{
	return a + b;
}
VIA(torture_f128_add);
#endif

int case_x87(char *why)
{
	/* 1 + 2^-60 is exact in long double and not in double: precision must survive. */
	volatile long double a = 1.0L + 0x1p-60L, b = 3.0L, c = 0x1p-62L;
	long double r = vp_torture_ld_fma(a, b, 5, c);
	_Complex long double z;

	FAIL_IF(r != a * b + c + 5, "long double %La", r);
	z = vp_torture_cld_make(a, -a * 2);
	FAIL_IF(__real__ z != a || __imag__ z != -a * 2, "complex long double %La %La", __real__ z,
		__imag__ z);
	z = torture_cld_make(c, b);
	FAIL_IF(__real__ z != c || __imag__ z != b, "direct: complex long double %La %La",
		__real__ z, __imag__ z);
	return 0;
}

int case_complex(char *why)
{
	volatile double s = 0.5;
	_Complex double a = __builtin_complex(1.25, -3.5), b = __builtin_complex(1e300, 7.0);
	_Complex double r = vp_torture_cd_combine(a, b, s);
	_Complex float f = vp_torture_cf_swap(__builtin_complex(1.5f, -2.25f));
#ifdef __x86_64__
	__float128 q1 = (__float128)opaque(1) + 1e-30Q, q2 = 2.0Q;
	__float128 q = vp_torture_f128_add(q1, q2);
	__float128 qe = q1 + q2;
#endif

	FAIL_IF(__real__ r != 0.625 + 1e300 || __imag__ r != -1.75 + 7.0, "complex double %a %a",
		__real__ r, __imag__ r);
	FAIL_IF(__real__ f != -2.25f || __imag__ f != 1.5f, "complex float %a %a",
		(double)__real__ f, (double)__imag__ f);
#ifdef __x86_64__
	FAIL_IF(memcmp(&q, &qe, sizeof(q)) != 0, "__float128 sum differs");
#endif
	return 0;
}

/* ---- structs ---------------------------------------------------------------- */

struct two_longs {
	long a, b;
};
struct two_doubles {
	double a, b;
};
struct floats_int {
	float a, b, c;
	int d;
};
struct big64 {
	long v[8];
};

TORTURE struct two_longs torture_ret_tl(long x)
{
	bump(&n_ret_tl);
	return (struct two_longs){ x * 7, ~x };
}
VIA(torture_ret_tl);

TORTURE struct two_doubles torture_ret_td(double x)
{
	bump(&n_ret_td);
	return (struct two_doubles){ x * 0.5, -x };
}
VIA(torture_ret_td);

TORTURE struct long_double_pair torture_ret_tm(long x, double y)
{
	bump(&n_ret_tm);
	return (struct long_double_pair){ x - 1, y * 4 };
}
VIA(torture_ret_tm);

TORTURE struct floats_int torture_ret_tfi(float x, int k)
{
	bump(&n_ret_tfi);
	return (struct floats_int){ x, x * 2, x * 3, k * 5 };
}
VIA(torture_ret_tfi);

/* Through a hidden pointer in rdi, returned again in rax. */
TORTURE struct big64 torture_ret_big(long seed)
{
	struct big64 b;

	bump(&n_ret_big);
	for (int i = 0; i < 8; i++)
		b.v[i] = seed * (i + 1) ^ (0x5555L << i);
	return b;
}
VIA(torture_ret_big);

/* Small structs in registers, the 64-byte one and what does not fit on the stack. */
TORTURE long torture_struct_args(struct two_longs a, struct two_doubles b,
				 struct long_double_pair c, struct big64 d, struct floats_int e,
				 struct two_longs f, struct two_longs g)
{
	long s = a.a + a.b + (long)b.a + (long)b.b + c.a + (long)c.b + (long)e.a + (long)e.b +
		 (long)e.c + e.d + f.a * 3 + f.b * 5 + g.a * 7 + g.b * 11;

	bump(&n_struct_args);
	for (int i = 0; i < 8; i++)
		s += d.v[i] * (i + 2);
	return s;
}
VIA(torture_struct_args);

/*
 * AAPCS64 homogeneous aggregates (two_doubles above and hfa_d3 are HFAs
 * too): HFAs of up to four floats or doubles travel in s0-s3/d0-d3, HVAs of
 * up to four 16-byte vectors in q0-q3, each whole or not at all: the first
 * that does not fit goes on the stack, and every later FP/vector argument
 * with it. x86-64 passes the same structs in xmm pairs or in memory.
 */
struct hfa_f3 {
	float v[3];
};
struct hfa_f4 {
	float a, b, c, d;
};
struct hfa_d4 {
	double v[4];
};
typedef float v4f __attribute__((vector_size(16)));
struct hva2 {
	v4f a, b;
};
struct hva4 {
	v4f v[4];
};

/* a in s0-s3, b in s4-s6, s in s7; the result in s0-s3. */
TORTURE struct hfa_f4 torture_hfa_f(struct hfa_f4 a, struct hfa_f3 b, float s)
{
	bump(&n_hfa_f);
	return (struct hfa_f4){ a.a * s + b.v[0], a.b * s + b.v[1], a.c * s + b.v[2], a.d * s };
}
VIA(torture_hfa_f);

/* a in d0-d2, b in d3-d6; c needs four with only d7 left: c and k on the stack. */
TORTURE struct hfa_d4 torture_hfa_d(struct hfa_d3 a, struct hfa_d4 b, struct hfa_d4 c, double k,
				    long n)
{
	struct hfa_d4 r = { { a.a, a.b, a.c, 0 } };

	bump(&n_hfa_d);
	for (int i = 0; i < 4; i++)
		r.v[i] += b.v[i] * k + c.v[i] * n;
	return r;
}
VIA(torture_hfa_d);

/* a in q0-q1, b in q2-q5, c in q6; d needs four with only q7 left: on the stack. */
TORTURE struct hva4 torture_hva(struct hva2 a, struct hva4 b, v4f c, struct hva4 d, int n)
{
	struct hva4 r = { { a.a, a.b, c, c * 2 } };

	bump(&n_hva);
	for (int i = 0; i < 4; i++)
		r.v[i] += b.v[i] * (float)n + d.v[i];
	return r;
}
VIA(torture_hva);

static v4f v4_from(float base)
{
	return (v4f){ base, base + 1, base + 2, base + 3 };
}

/* One round of the homogeneous aggregates; every value is exact, fused or not. */
static int structs_hfa_hva(long k, char *why)
{
	float f = (float)k;
	struct hfa_f4 hf = vp_torture_hfa_f((struct hfa_f4){ f, f + 0.5f, -f, 0.25f },
					    (struct hfa_f3){ { 1, 2, f } }, 4);
	struct hfa_d3 a = { (double)k, 0.5, -1 };
	struct hfa_d4 b = { { 0.5, 1.5, 2.5, 3.5 } }, c = { { 0, (double)k, 2.0 * k, 3.0 * k } };
	struct hfa_d4 hd = vp_torture_hfa_d(a, b, c, 2, 3), direct = torture_hfa_d(a, b, c, 2, 3);
	struct hva2 va = { v4_from(f), v4_from(10) };
	struct hva4 vb, vd, hv;
	double ea[4] = { a.a, a.b, a.c, 0 };

	FAIL_IF(hf.a != f * 4 + 1 || hf.b != (f + 0.5f) * 4 + 2 || hf.c != -3 * f || hf.d != 1,
		"s0-s3 HFA %g %g %g %g", hf.a, hf.b, hf.c, hf.d);
	for (int i = 0; i < 4; i++) {
		FAIL_IF(hd.v[i] != ea[i] + b.v[i] * 2 + c.v[i] * 3, "d0-d3 HFA [%d] %g", i, hd.v[i]);
		FAIL_IF(direct.v[i] != hd.v[i], "direct: d0-d3 HFA [%d] %g", i, direct.v[i]);
		vb.v[i] = v4_from(4.0f * i);
		vd.v[i] = v4_from(100.0f + i);
	}
	hv = vp_torture_hva(va, vb, v4_from(-f), vd, 3);
	for (int i = 0; i < 4; i++) {
		v4f base = i == 0 ? va.a : i == 1 ? va.b : v4_from(-f) * (float)(i - 1);

		for (int l = 0; l < 4; l++)
			FAIL_IF(hv.v[i][l] != base[l] + vb.v[i][l] * 3 + vd.v[i][l],
				"q0-q3 HVA [%d] lane %d %g", i, l, hv.v[i][l]);
	}
	return 0;
}

int case_structs(char *why)
{
	for (long k = 1; k < 12; k++) {
		long x = opaque(k * 1000003);
		struct two_longs tl = vp_torture_ret_tl(x);
		struct two_doubles td = vp_torture_ret_td((double)x + 0.5);
		struct long_double_pair tm = vp_torture_ret_tm(x, (double)k);
		struct floats_int tfi = vp_torture_ret_tfi((float)k + 0.25f, (int)k);
		struct big64 big = vp_torture_ret_big(x), db = torture_ret_big(x + 1);
		long s = 0;

		FAIL_IF(tl.a != x * 7 || tl.b != ~x, "rax:rdx pair %ld %ld", tl.a, tl.b);
		FAIL_IF(td.a != ((double)x + 0.5) * 0.5 || td.b != -((double)x + 0.5),
			"xmm0:xmm1 pair %g %g", td.a, td.b);
		FAIL_IF(tm.a != x - 1 || tm.b != k * 4.0, "rax/xmm0 pair %ld %g", tm.a, tm.b);
		FAIL_IF(tfi.a != k + 0.25f || tfi.b != (k + 0.25f) * 2 ||
				tfi.c != (k + 0.25f) * 3 || tfi.d != k * 5,
			"xmm0/rax floats %g %g %g %d", tfi.a, tfi.b, tfi.c, tfi.d);
		for (int i = 0; i < 8; i++) {
			FAIL_IF(big.v[i] != (x * (i + 1) ^ (0x5555L << i)), "big[%d] %ld", i,
				big.v[i]);
			FAIL_IF(db.v[i] != ((x + 1) * (i + 1) ^ (0x5555L << i)),
				"direct big[%d] %ld", i, db.v[i]);
		}
		long r = vp_torture_struct_args(tl, td, tm, big, tfi, (struct two_longs){ k, -k },
						(struct two_longs){ 2 * k, 3 });

		s = tl.a + tl.b + (long)td.a + (long)td.b + tm.a + (long)tm.b + (long)tfi.a +
		    (long)tfi.b + (long)tfi.c + tfi.d + k * 3 - k * 5 + 2 * k * 7 + 3 * 11;
		for (int i = 0; i < 8; i++)
			s += big.v[i] * (i + 2);
		FAIL_IF(r != s, "struct arguments: %ld, expected %ld", r, s);
		if (structs_hfa_hva(k, why))
			return 1;
	}
	return 0;
}

/* ---- static chain (r10) ----------------------------------------------------- */

TORTURE long torture_nested_parent(long x)
{
	long base = x * 3 + 1, acc = 0;

	/* Called directly: no stack trampoline, the parent's frame goes in r10. */
	__attribute__((noinline)) long torture_nested_inner(long y)
	{
		acc += y;
		return base * y;
	}

	bump(&n_nested_parent);
	long r = torture_nested_inner(x) + torture_nested_inner(x + 1);

	return r + acc * 1000;
}
VIA(torture_nested_parent);

int case_static_chain(char *why)
{
	for (long x = 0; x < 10; x++) {
		long v = opaque(x);
		long r = vp_torture_nested_parent(v);
		long e = (v * 3 + 1) * (2 * v + 1) + (2 * v + 1) * 1000;

		FAIL_IF(r != e, "x=%ld: %ld, expected %ld", v, r, e);
	}
	return 0;
}
