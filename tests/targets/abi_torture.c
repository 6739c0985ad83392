// SPDX-License-Identifier: MIT
/*
 * ABI torture target, run by tests/integration/test_abi.sh plain, under
 * `profctl run --funcs 'torture_*'` and under `--funcs '*'`: the promise is
 * that instrumentation changes nothing the program can observe. Every case
 * prints one deterministic line, `case NAME ok` or `case NAME FAIL details`,
 * whatever the CPU (AVX2/AVX-512 paths run only where supported, silently);
 * `count NAME N` for functions whose calls the trace must show exactly comes
 * before the last cases (frames left without a plain return), so that a crash
 * there still leaves the counts to compare. `abi_torture CASE...` runs only
 * the named cases. Exit status 0 iff all ok.
 *
 * Callees are non-static, noinline and used (so they are in .symtab) and at
 * least 5 bytes (12 on aarch64); most are called through volatile pointers,
 * some directly so that GCC's IPA-RA keeps caller values in "caller-saved"
 * registers across the call. The assembly functions below (x86-64, aarch64:
 * cases named *_a64 exist there only) pin down exact prologue shapes and
 * check every register, not only what the ABI promises.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fenv.h>
#include <float.h>
#ifdef __x86_64__
#include <immintrin.h>
#endif
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wpsabi"

#define TORTURE __attribute__((noinline, used))
/* A volatile pointer to fn: the compiler cannot see which function it calls. */
#define VIA(fn) static __typeof__(fn) *volatile vp_##fn = fn
#define WHY_LEN 256

/* Each case returns 0, or 1 with the details in why. */
#define FAIL_IF(cond, ...)                                  \
	do {                                                \
		if (cond) {                                 \
			snprintf(why, WHY_LEN, __VA_ARGS__); \
			return 1;                           \
		}                                           \
	} while (0)

/* Calls the program counts itself; the trace must hold exactly this many slices. */
static _Atomic unsigned long n_int_args, n_int128, n_varargs, n_mixed_fp, n_ret_tl, n_ret_td,
	n_ret_tm, n_ret_tfi, n_ret_big, n_struct_args, n_nested_parent, n_tiny, n_add6, n_thr_fp,
	n_set_errno, n_keep_errno, n_thunk_target, n_asm_thunk, n_asm_tiny, n_fp_div, n_memops,
	n_hfa_f, n_hfa_d, n_hva;

static void bump(_Atomic unsigned long *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Keeps a value opaque to the optimizer (no constant propagation into callees). */
static long opaque(long v)
{
	__asm__ volatile("" : "+r"(v));
	return v;
}

#ifdef __x86_64__ /* x86-64 assembly and the register cases that use it */
/* ---- assembly: exact prologue shapes and register probes -------------------- */

/* Values the probes load into every register before calling a tiny callee. */
const uint64_t probe_gpr_magic[14] = {
	0x0b0b0b0b0b0b0b01, 0x1212121212121202, 0x1313131313131303, 0x1414141414141404,
	0x1515151515151505, 0x0c0c0c0c0c0c0c06, 0x0d0d0d0d0d0d0d07, 0x5151515151515108,
	0x0d1d1d1d1d1d1d09, 0x0808080808080810, 0x0909090909090911, 0x1010101010101012,
	0x1111111111111113, 0xa0a0a0a0a0a0a014,
};
/* gprs probe output order: rbx r12 r13 r14 r15 rcx rdx rsi rdi r8 r9 r10 r11 */
static const char *const probe_gpr_names[13] = {
	"rbx", "r12", "r13", "r14", "r15", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
};
_Alignas(64) uint64_t probe_vec_magic[32 * 8];
uint16_t probe_k_magic[8] = { 0, 0x1357, 0x2468, 0x9abc, 0xdef0, 0x0f1e, 0x2d3c, 0x4b5a };

long torture_asm_tiny(long x);
long torture_asm_helper(long x);
long torture_asm_thunk(long a, long b);
long torture_asm_riprel_load(long x);
long torture_asm_riprel_cmp(long x);
double torture_asm_riprel_sse(double x);
long torture_asm_riprel_store(long x);
void *torture_asm_riprel_lea(void);
long torture_asm_jcc(long x);
long torture_asm_jcc_late(long x);
long torture_asm_shortjmp(long x);
long torture_asm_loop_entry(long n, long acc);
long torture_asm_loop_mid(long n);
long torture_asm_callfirst(long x);
uintptr_t torture_asm_rsp(void);
void probe_asm_gprs(long (*fn)(long), uint64_t out[15]);
void probe_asm_xmm(long (*fn)(long), uint64_t out[32]);
void probe_asm_zmm(long (*fn)(long), uint64_t out[32 * 8], uint16_t kout[8]);
extern uint64_t torture_asm_quad, torture_asm_slot;

#define ASM_FUNC(name) \
	".globl " #name "\n.type " #name ", @function\n.p2align 4\n" #name ":\n"
#define ASM_END(name) ".size " #name ", .-" #name "\n"
#define ZLOAD(n) "vmovdqu64 " #n "*64(%rax), %zmm" #n "\n"
#define ZSTORE(n) "vmovdqu64 %zmm" #n ", " #n "*64(%rax)\n"
#define ZLOAD8(a, b, c, d, e, f, g, h) \
	ZLOAD(a) ZLOAD(b) ZLOAD(c) ZLOAD(d) ZLOAD(e) ZLOAD(f) ZLOAD(g) ZLOAD(h)
#define ZSTORE8(a, b, c, d, e, f, g, h) \
	ZSTORE(a) ZSTORE(b) ZSTORE(c) ZSTORE(d) ZSTORE(e) ZSTORE(f) ZSTORE(g) ZSTORE(h)
#define XLOAD(n) "movdqu probe_vec_magic+" #n "*16(%rip), %xmm" #n "\n"
#define XSTORE(n) "movdqu %xmm" #n ", " #n "*16(%rax)\n"
#define XLOAD8(a, b, c, d, e, f, g, h) \
	XLOAD(a) XLOAD(b) XLOAD(c) XLOAD(d) XLOAD(e) XLOAD(f) XLOAD(g) XLOAD(h)
#define XSTORE8(a, b, c, d, e, f, g, h) \
	XSTORE(a) XSTORE(b) XSTORE(c) XSTORE(d) XSTORE(e) XSTORE(f) XSTORE(g) XSTORE(h)
#define KLOAD(n) "kmovw probe_k_magic+" #n "*2(%rip), %k" #n "\n"
#define KSTORE(n) "kmovw %k" #n ", " #n "*2(%rax)\n"

__asm__(".data\n"
	".p2align 3\n"
	".globl torture_asm_quad\n.type torture_asm_quad, @object\n.size torture_asm_quad, 8\n"
	"torture_asm_quad: .quad 0x1122334455667788\n"
	".globl torture_asm_slot\n.type torture_asm_slot, @object\n.size torture_asm_slot, 8\n"
	"torture_asm_slot: .quad 0\n"
	"torture_asm_double: .double 2.5\n"
	"torture_asm_word: .long 0x5a5a5a5a\n"
	".text\n"

	/* Touches rax only: every other register must come back as it went in. */
	ASM_FUNC(torture_asm_tiny)
	"movq %rdi, %rax\n"
	"addq $1, %rax\n"
	"ret\n"
	ASM_END(torture_asm_tiny)

	ASM_FUNC(torture_asm_helper)
	"movq %rdi, %rax\n"
	"addq %rdi, %rax\n"
	"addq %rdi, %rax\n"
	"ret\n"
	ASM_END(torture_asm_helper)

	/* A tail-call thunk: the whole function is one jmp rel32. */
	ASM_FUNC(torture_asm_thunk)
	".byte 0xe9\n"
	".long torture_thunk_target - . - 4\n"
	ASM_END(torture_asm_thunk)

	/* rip-relative operands inside the displaced bytes. */
	ASM_FUNC(torture_asm_riprel_load)
	"movq torture_asm_quad(%rip), %rax\n"
	"addq %rdi, %rax\n"
	"ret\n"
	ASM_END(torture_asm_riprel_load)

	/* disp32 followed by an imm32: the displacement is not the last field. */
	ASM_FUNC(torture_asm_riprel_cmp)
	"cmpl $0x5a5a5a5a, torture_asm_word(%rip)\n"
	"jne 1f\n"
	"leaq 7(%rdi), %rax\n"
	"ret\n"
	"1: movq $-1, %rax\n"
	"ret\n"
	ASM_END(torture_asm_riprel_cmp)

	/* A prefixed SSE instruction with a rip-relative source. */
	ASM_FUNC(torture_asm_riprel_sse)
	"addsd torture_asm_double(%rip), %xmm0\n"
	"ret\n"
	ASM_END(torture_asm_riprel_sse)

	ASM_FUNC(torture_asm_riprel_store)
	"movq %rdi, torture_asm_slot(%rip)\n"
	"leaq (%rdi,%rdi), %rax\n"
	"ret\n"
	ASM_END(torture_asm_riprel_store)

	ASM_FUNC(torture_asm_riprel_lea)
	"leaq torture_asm_quad(%rip), %rax\n"
	"ret\n"
	ASM_END(torture_asm_riprel_lea)

	/* A short jcc inside the first 5 bytes, target past the patch. */
	ASM_FUNC(torture_asm_jcc)
	"testq %rdi, %rdi\n"
	"js 1f\n"
	"leaq 1(%rdi), %rax\n"
	"ret\n"
	"1: movq $-1, %rax\n"
	"ret\n"
	ASM_END(torture_asm_jcc)

	/* The jcc straddles the 5-byte boundary (bytes 4-5). */
	ASM_FUNC(torture_asm_jcc_late)
	"cmpq $10, %rdi\n"
	"jg 1f\n"
	"leaq -3(%rdi), %rax\n"
	"ret\n"
	"1: leaq (%rdi,%rdi), %rax\n"
	"ret\n"
	ASM_END(torture_asm_jcc_late)

	/* A short jmp first, then dead bytes. */
	ASM_FUNC(torture_asm_shortjmp)
	"jmp 1f\n"
	"int3\nint3\nint3\nint3\nint3\nint3\n"
	"1: leaq (%rdi,%rdi,2), %rax\n"
	"ret\n"
	ASM_END(torture_asm_shortjmp)

	/* A loop whose head is the entry itself (as tail-recursion elimination makes). */
	ASM_FUNC(torture_asm_loop_entry)
	"0: addq %rdi, %rsi\n"
	"decq %rdi\n"
	"jnz 0b\n"
	"movq %rsi, %rax\n"
	"ret\n"
	ASM_END(torture_asm_loop_entry)

	/* A loop head inside the first 5 bytes: must be skipped, and still work. */
	ASM_FUNC(torture_asm_loop_mid)
	"xorl %eax, %eax\n"
	"0: addq %rdi, %rax\n"
	"decq %rdi\n"
	"jnz 0b\n"
	"ret\n"
	ASM_END(torture_asm_loop_mid)

	/* A call inside the displaced bytes (stack kept 16-aligned for the callee). */
	ASM_FUNC(torture_asm_callfirst)
	"subq $8, %rsp\n"
	"call torture_asm_helper\n"
	"addq $8, %rsp\n"
	"addq $1, %rax\n"
	"ret\n"
	ASM_END(torture_asm_callfirst)

	/* Reads rsp in the displaced bytes: returns the caller's rsp. */
	ASM_FUNC(torture_asm_rsp)
	"leaq 8(%rsp), %rax\n"
	"ret\n"
	ASM_END(torture_asm_rsp)

	/*
	 * probe_asm_gprs(fn, out): loads probe_gpr_magic into rbx, r12-r15, rcx,
	 * rdx, rsi, rdi, r8-r11 and rax, calls fn, stores those 13 registers,
	 * then the return value, then rsp - rbp (must be -64).
	 */
	ASM_FUNC(probe_asm_gprs)
	"pushq %rbp\n"
	"movq %rsp, %rbp\n"
	"pushq %rbx\n"
	"pushq %r12\n"
	"pushq %r13\n"
	"pushq %r14\n"
	"pushq %r15\n"
	"pushq %rdi\n" /* -48: fn */
	"pushq %rsi\n" /* -56: out */
	"subq $8, %rsp\n"
	"movq probe_gpr_magic+0(%rip), %rbx\n"
	"movq probe_gpr_magic+8(%rip), %r12\n"
	"movq probe_gpr_magic+16(%rip), %r13\n"
	"movq probe_gpr_magic+24(%rip), %r14\n"
	"movq probe_gpr_magic+32(%rip), %r15\n"
	"movq probe_gpr_magic+40(%rip), %rcx\n"
	"movq probe_gpr_magic+48(%rip), %rdx\n"
	"movq probe_gpr_magic+56(%rip), %rsi\n"
	"movq probe_gpr_magic+64(%rip), %rdi\n"
	"movq probe_gpr_magic+72(%rip), %r8\n"
	"movq probe_gpr_magic+80(%rip), %r9\n"
	"movq probe_gpr_magic+88(%rip), %r10\n"
	"movq probe_gpr_magic+96(%rip), %r11\n"
	"movq probe_gpr_magic+104(%rip), %rax\n"
	"call *-48(%rbp)\n"
	"pushq %rax\n"
	"movq -56(%rbp), %rax\n"
	"movq %rbx, 0(%rax)\n"
	"movq %r12, 8(%rax)\n"
	"movq %r13, 16(%rax)\n"
	"movq %r14, 24(%rax)\n"
	"movq %r15, 32(%rax)\n"
	"movq %rcx, 40(%rax)\n"
	"movq %rdx, 48(%rax)\n"
	"movq %rsi, 56(%rax)\n"
	"movq %rdi, 64(%rax)\n"
	"movq %r8, 72(%rax)\n"
	"movq %r9, 80(%rax)\n"
	"movq %r10, 88(%rax)\n"
	"movq %r11, 96(%rax)\n"
	"popq %rcx\n"
	"movq %rcx, 104(%rax)\n"
	"movq %rsp, %rcx\n"
	"subq %rbp, %rcx\n"
	"movq %rcx, 112(%rax)\n"
	"leaq -40(%rbp), %rsp\n"
	"popq %r15\n"
	"popq %r14\n"
	"popq %r13\n"
	"popq %r12\n"
	"popq %rbx\n"
	"popq %rbp\n"
	"ret\n"
	ASM_END(probe_asm_gprs)

	/* probe_asm_xmm(fn, out): xmm0-15 from probe_vec_magic, around a call of fn. */
	ASM_FUNC(probe_asm_xmm)
	"pushq %rbp\n"
	"movq %rsp, %rbp\n"
	"pushq %rdi\n"
	"pushq %rsi\n"
	XLOAD8(0, 1, 2, 3, 4, 5, 6, 7)
	XLOAD8(8, 9, 10, 11, 12, 13, 14, 15)
	"movq probe_gpr_magic+64(%rip), %rdi\n"
	"call *-8(%rbp)\n"
	"movq -16(%rbp), %rax\n"
	XSTORE8(0, 1, 2, 3, 4, 5, 6, 7)
	XSTORE8(8, 9, 10, 11, 12, 13, 14, 15)
	"leave\n"
	"ret\n"
	ASM_END(probe_asm_xmm)

	/* probe_asm_zmm(fn, out, kout): zmm0-31 and k1-k7 (AVX-512F only). */
	ASM_FUNC(probe_asm_zmm)
	"pushq %rbp\n"
	"movq %rsp, %rbp\n"
	"pushq %rdi\n" /* -8 */
	"pushq %rsi\n" /* -16 */
	"pushq %rdx\n" /* -24 */
	"subq $8, %rsp\n"
	"leaq probe_vec_magic(%rip), %rax\n"
	ZLOAD8(0, 1, 2, 3, 4, 5, 6, 7)
	ZLOAD8(8, 9, 10, 11, 12, 13, 14, 15)
	ZLOAD8(16, 17, 18, 19, 20, 21, 22, 23)
	ZLOAD8(24, 25, 26, 27, 28, 29, 30, 31)
	KLOAD(1) KLOAD(2) KLOAD(3) KLOAD(4) KLOAD(5) KLOAD(6) KLOAD(7)
	"movq probe_gpr_magic+64(%rip), %rdi\n"
	"call *-8(%rbp)\n"
	"movq -16(%rbp), %rax\n"
	ZSTORE8(0, 1, 2, 3, 4, 5, 6, 7)
	ZSTORE8(8, 9, 10, 11, 12, 13, 14, 15)
	ZSTORE8(16, 17, 18, 19, 20, 21, 22, 23)
	ZSTORE8(24, 25, 26, 27, 28, 29, 30, 31)
	"movq -24(%rbp), %rax\n"
	KSTORE(1) KSTORE(2) KSTORE(3) KSTORE(4) KSTORE(5) KSTORE(6) KSTORE(7)
	"vzeroupper\n"
	"leave\n"
	"ret\n"
	ASM_END(probe_asm_zmm));

static void probe_magic_init(void)
{
	for (int i = 0; i < 32 * 8; i++)
		probe_vec_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
}

static int check_gprs(char *why)
{
	uint64_t out[15] = { 0 };

	probe_asm_gprs(torture_asm_tiny, out);
	bump(&n_asm_tiny);
	for (int i = 0; i < 13; i++)
		FAIL_IF(out[i] != probe_gpr_magic[i], "%s 0x%lx after the call, expected 0x%lx",
			probe_gpr_names[i], (unsigned long)out[i],
			(unsigned long)probe_gpr_magic[i]);
	FAIL_IF(out[13] != probe_gpr_magic[8] + 1, "rax 0x%lx", (unsigned long)out[13]);
	FAIL_IF((int64_t)out[14] != -64, "rsp moved by %ld", (long)out[14] + 64);
	return 0;
}

static int check_xmm(char *why)
{
	uint64_t out[32] = { 0 };

	probe_asm_xmm(torture_asm_tiny, out);
	bump(&n_asm_tiny);
	for (int i = 0; i < 32; i++)
		FAIL_IF(out[i] != probe_vec_magic[i], "xmm%d qword %d changed by the call", i / 2,
			i % 2);
	return 0;
}

/* AVX-512 machines only; elsewhere the xmm probe runs instead (same counts). */
static int check_zmm(char *why)
{
	static __thread uint64_t out[32 * 8];
	uint16_t kout[8] = { 0 };

	if (!__builtin_cpu_supports("avx512f"))
		return check_xmm(why);
	probe_asm_zmm(torture_asm_tiny, out, kout);
	bump(&n_asm_tiny);
	for (int i = 0; i < 32 * 8; i++)
		FAIL_IF(out[i] != probe_vec_magic[i], "zmm%d qword %d changed by the call", i / 8,
			i % 8);
	for (int k = 1; k < 8; k++)
		FAIL_IF(kout[k] != probe_k_magic[k], "k%d 0x%x after the call", k, kout[k]);
	return 0;
}

static int case_regs_gpr(char *why)
{
	return check_gprs(why);
}

static int case_regs_xmm(char *why)
{
	return check_xmm(why);
}

static int case_regs_zmm(char *why)
{
	return check_zmm(why);
}

#elif defined(__aarch64__) /* aarch64 assembly and the cases that use it */
/* ---- assembly: AAPCS64 register probes and prologue shapes ------------------- */

/*
 * The agent's entry patch is `b stub` (4 bytes) or, far from its stubs,
 * adrp/add/br x16 (12 bytes: x16 is clobbered, x17 is the relocated code's
 * scratch). So each shape below is at least 12 bytes with its first three
 * words displaceable (no ret/b before the third, nothing branching into
 * them, no x16/x17) unless the shape itself is the point, and literal pools
 * sit after the function's .size where the relocator's branch scan stops.
 */
typedef unsigned long v2u64 __attribute__((vector_size(16)));

/* Indexed by register number: x0-x15 and x18-x28 get these around the call. */
uint64_t probe_a64_gpr_magic[31];
/* v0-v31 (two qwords each), then the FPCR and FPSR values to run the call under. */
_Alignas(16) uint64_t probe_a64_vec_magic[32 * 2 + 2];
/* FPCR: round toward zero (RMode 0b11), flush-to-zero, default NaN, alternative half. */
#define A64_FPCR_SET 0x07c00000ul
/* FPSR: QC, IDC and the cumulative IXC, DZC, IOC flags. */
#define A64_FPSR_SET 0x08000095ul
/* probe_a64_simd's out[]: the vectors, FPCR/FPSR after the call, read back before it, x0. */
#define A64_SIMD_OUT (32 * 2 + 5)

/* Prologue shapes whose calls the program counts (one counter each). */
#define A64_COUNTED(X)                                                                      \
	X(adrp_ldr) X(adrp_add) X(adr) X(ldr_x) X(ldr_w) X(ldrsw) X(ldr_s) X(ldr_d) X(ldr_q) \
	X(cbz) X(cbnz) X(tbz) X(tbnz) X(bcond) X(bti) X(paciasp) X(pacibsp) X(sp)
#define A64_ENUM(name) A64_##name,
enum a64_counted { A64_COUNTED(A64_ENUM) A64_N };
static _Atomic unsigned long n_a64[A64_N];
/* Counts a direct call of torture_asm_NAME, then makes it. */
#define A64_CALL(name, ...) (bump(&n_a64[A64_##name]), torture_asm_##name(__VA_ARGS__))

long torture_asm_tiny(long x);
long torture_asm_helper(long x);
long torture_asm_thunk(long a, long b);
long torture_asm_adrp_ldr(long x);
void *torture_asm_adrp_add(void);
long torture_asm_adr(long x);
long torture_asm_ldr_x(long x);
long torture_asm_ldr_w(long x);
long torture_asm_ldrsw(long x);
float torture_asm_ldr_s(float x);
double torture_asm_ldr_d(double x);
v2u64 torture_asm_ldr_q(v2u64 x);
long torture_asm_cbz(long x);
long torture_asm_cbnz(long x);
long torture_asm_tbz(long x);
long torture_asm_tbnz(long x);
long torture_asm_bcond(long x);
long torture_asm_bti(long x);
long torture_asm_paciasp(long x);
long torture_asm_pacibsp(long x);
long torture_asm_loop_mid(long n, long acc);
uintptr_t torture_asm_sp(void);
long probe_a64_bl_first(long x);
void probe_a64_gprs(uint64_t out[31]);
void probe_a64_simd(uint64_t out[A64_SIMD_OUT]);
extern uint64_t torture_asm_quad;

#define ASM_FUNC(name) \
	".globl " #name "\n.type " #name ", %function\n.p2align 4\n" #name ":\n"
#define ASM_END(name) ".size " #name ", .-" #name "\n"
/* x17 points at the magic table (loads) or at out (stores), indexed by register number. */
#define XPAIR(op, a, b) op " x" #a ", x" #b ", [x17, #8*" #a "]\n"
#define XPAIRS(op)                                                                      \
	XPAIR(op, 0, 1) XPAIR(op, 2, 3) XPAIR(op, 4, 5) XPAIR(op, 6, 7) XPAIR(op, 8, 9)   \
	XPAIR(op, 10, 11) XPAIR(op, 12, 13) XPAIR(op, 14, 15) XPAIR(op, 19, 20)          \
	XPAIR(op, 21, 22) XPAIR(op, 23, 24) XPAIR(op, 25, 26) XPAIR(op, 27, 28)
#define QPAIR(op, a, b) op " q" #a ", q" #b ", [x17, #16*" #a "]\n"
#define QPAIRS(op)                                                                       \
	QPAIR(op, 0, 1) QPAIR(op, 2, 3) QPAIR(op, 4, 5) QPAIR(op, 6, 7) QPAIR(op, 8, 9)    \
	QPAIR(op, 10, 11) QPAIR(op, 12, 13) QPAIR(op, 14, 15) QPAIR(op, 16, 17)           \
	QPAIR(op, 18, 19) QPAIR(op, 20, 21) QPAIR(op, 22, 23) QPAIR(op, 24, 25)           \
	QPAIR(op, 26, 27) QPAIR(op, 28, 29) QPAIR(op, 30, 31)

__asm__(".pushsection .data\n"
	".p2align 3\n"
	".globl torture_asm_quad\n.type torture_asm_quad, %object\n.size torture_asm_quad, 8\n"
	"torture_asm_quad: .quad 0x1122334455667788\n"
	".popsection\n"
	".pushsection .text\n"

	/* Touches x0 only: every other register must come back as it went in. */
	ASM_FUNC(torture_asm_tiny)
	"add x0, x0, #1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_tiny)

	ASM_FUNC(torture_asm_helper)
	"add x0, x0, x0, lsl #1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_helper)

	/* A tail jump: the whole function is one b. */
	ASM_FUNC(torture_asm_thunk)
	"b torture_thunk_target\n"
	ASM_END(torture_asm_thunk)

	/* adrp + ldr :lo12: of a local object: x + torture_asm_quad. */
	ASM_FUNC(torture_asm_adrp_ldr)
	"adrp x1, torture_asm_quad\n"
	"ldr x1, [x1, #:lo12:torture_asm_quad]\n"
	"add x0, x0, x1\n"
	"ret\n"
	ASM_END(torture_asm_adrp_ldr)

	/* adrp into the result register + add :lo12:: &torture_asm_quad. */
	ASM_FUNC(torture_asm_adrp_add)
	"adrp x0, torture_asm_quad\n"
	"add x0, x0, #:lo12:torture_asm_quad\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_adrp_add)

	/* adr of a literal past the function: x + 0x0123456789abcdef. */
	ASM_FUNC(torture_asm_adr)
	"adr x1, 1f\n"
	"ldr x1, [x1]\n"
	"add x0, x0, x1\n"
	"ret\n"
	ASM_END(torture_asm_adr)
	".p2align 3\n1: .quad 0x0123456789abcdef\n"

	/* ldr x literal: x + 0x0fedcba987654321. */
	ASM_FUNC(torture_asm_ldr_x)
	"ldr x1, 1f\n"
	"add x0, x0, x1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldr_x)
	".p2align 3\n1: .quad 0x0fedcba987654321\n"

	/* ldr w literal zero-extends: x + 0x89abcdef. */
	ASM_FUNC(torture_asm_ldr_w)
	"ldr w1, 1f\n"
	"add x0, x0, x1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldr_w)
	".p2align 2\n1: .long 0x89abcdef\n"

	/* ldrsw literal sign-extends: x + (int32_t)0x89abcdef. */
	ASM_FUNC(torture_asm_ldrsw)
	"ldrsw x1, 1f\n"
	"add x0, x0, x1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldrsw)
	".p2align 2\n1: .long 0x89abcdef\n"

	/* SIMD&FP literals: s (x + 2.5f), d (x + 1234.5), q (x + two qwords). */
	ASM_FUNC(torture_asm_ldr_s)
	"ldr s1, 1f\n"
	"fadd s0, s0, s1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldr_s)
	".p2align 2\n1: .long 0x40200000\n"

	ASM_FUNC(torture_asm_ldr_d)
	"ldr d1, 1f\n"
	"fadd d0, d0, d1\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldr_d)
	".p2align 3\n1: .quad 0x40934a0000000000\n"

	ASM_FUNC(torture_asm_ldr_q)
	"ldr q1, 1f\n"
	"add v0.2d, v0.2d, v1.2d\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_ldr_q)
	".p2align 4\n1: .quad 0x0123456789abcdef, 0xfedcba9876543210\n"

	/* cbz (x): x ? (x + 3) * 2 + 1 : 100. */
	ASM_FUNC(torture_asm_cbz)
	"cbz x0, 1f\n"
	"add x0, x0, #3\n"
	"lsl x0, x0, #1\n"
	"add x0, x0, #1\n"
	"ret\n"
	"1: mov x0, #100\n"
	"ret\n"
	ASM_END(torture_asm_cbz)

	/* cbnz (w: the low half only): (uint32_t)x ? 200 : x + 7. */
	ASM_FUNC(torture_asm_cbnz)
	"cbnz w0, 1f\n"
	"add x0, x0, #7\n"
	"nop\n"
	"ret\n"
	"1: mov x0, #200\n"
	"ret\n"
	ASM_END(torture_asm_cbnz)

	/* tbz (x, bit 40): bit set ? x - 1 : 300. */
	ASM_FUNC(torture_asm_tbz)
	"tbz x0, #40, 1f\n"
	"sub x0, x0, #1\n"
	"nop\n"
	"ret\n"
	"1: mov x0, #300\n"
	"ret\n"
	ASM_END(torture_asm_tbz)

	/* tbnz (w, bit 3): bit set ? 400 : x * 5. */
	ASM_FUNC(torture_asm_tbnz)
	"tbnz w0, #3, 1f\n"
	"add x0, x0, x0, lsl #2\n"
	"nop\n"
	"ret\n"
	"1: mov x0, #400\n"
	"ret\n"
	ASM_END(torture_asm_tbnz)

	/* cmp, then b.gt in the second word: x > 10 ? 2x : x - 3. */
	ASM_FUNC(torture_asm_bcond)
	"cmp x0, #10\n"
	"b.gt 1f\n"
	"sub x0, x0, #3\n"
	"ret\n"
	"1: lsl x0, x0, #1\n"
	"ret\n"
	ASM_END(torture_asm_bcond)

	/* bti c (a landing pad; a NOP where BTI is off): x + 5. */
	ASM_FUNC(torture_asm_bti)
	"hint #34\n"
	"add x0, x0, #5\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_bti)

	/* paciasp ... autiasp; ret around a call (signs x30 with sp): 3x + 1. */
	ASM_FUNC(torture_asm_paciasp)
	"hint #25\n"
	"stp x29, x30, [sp, #-16]!\n"
	"mov x29, sp\n"
	"bl torture_asm_helper\n"
	"add x0, x0, #1\n"
	"ldp x29, x30, [sp], #16\n"
	"hint #29\n"
	"ret\n"
	ASM_END(torture_asm_paciasp)

	/* The same with key B (pacibsp ... autibsp): 3x + 2. */
	ASM_FUNC(torture_asm_pacibsp)
	"hint #27\n"
	"stp x29, x30, [sp, #-16]!\n"
	"mov x29, sp\n"
	"bl torture_asm_helper\n"
	"add x0, x0, #2\n"
	"ldp x29, x30, [sp], #16\n"
	"hint #31\n"
	"ret\n"
	ASM_END(torture_asm_pacibsp)

	/* The entry is the loop head (n, acc: acc + n(n+1)/2): must be skipped, and still work. */
	ASM_FUNC(torture_asm_loop_mid)
	"0: add x1, x1, x0\n"
	"subs x0, x0, #1\n"
	"b.ne 0b\n"
	"mov x0, x1\n"
	"ret\n"
	ASM_END(torture_asm_loop_mid)

	/* Reads sp in the displaced word: returns the caller's sp. */
	ASM_FUNC(torture_asm_sp)
	"mov x0, sp\n"
	"nop\n"
	"ret\n"
	ASM_END(torture_asm_sp)

	/*
	 * A call in the first word overwrites x30 before anything could save it,
	 * so this one returns to x19, where probe_a64_bl_first put the address:
	 * 3x + 1, and only if the relocated bl returned into the function. Its
	 * exit passes no exit hook (the agent must treat it as a longjmp).
	 */
	ASM_FUNC(torture_asm_bl_first)
	"bl torture_asm_helper\n"
	"add x0, x0, #1\n"
	"ret x19\n"
	ASM_END(torture_asm_bl_first)

	ASM_FUNC(probe_a64_bl_first)
	"stp x29, x30, [sp, #-32]!\n"
	"mov x29, sp\n"
	"str x19, [sp, #16]\n"
	"adr x19, 1f\n"
	"bl torture_asm_bl_first\n"
	"1: ldr x19, [sp, #16]\n"
	"ldp x29, x30, [sp], #32\n"
	"ret\n"
	ASM_END(probe_a64_bl_first)

	/*
	 * probe_a64_gprs(out): x0-x15, x18-x28 from probe_a64_gpr_magic,
	 * torture_asm_tiny called, then those registers into out[register number]
	 * and sp - x29 (must be 0) into out[29]; out[16], out[17], out[30] unused.
	 * Direct calls only, here and below: the pac build's object claims BTI,
	 * and only a landing pad may be the target of a blr.
	 */
	ASM_FUNC(probe_a64_gprs)
	"stp x29, x30, [sp, #-112]!\n"
	"mov x29, sp\n"
	"stp x19, x20, [sp, #16]\n"
	"stp x21, x22, [sp, #32]\n"
	"stp x23, x24, [sp, #48]\n"
	"stp x25, x26, [sp, #64]\n"
	"stp x27, x28, [sp, #80]\n"
	"str x0, [sp, #96]\n" /* out */
	"adrp x17, probe_a64_gpr_magic\n"
	"add x17, x17, #:lo12:probe_a64_gpr_magic\n"
	XPAIRS("ldp")
	"ldr x18, [x17, #8*18]\n"
	"bl torture_asm_tiny\n"
	"ldr x17, [x29, #96]\n" /* x29-based: a moved sp is reported, not a crash */
	XPAIRS("stp")
	"str x18, [x17, #8*18]\n"
	"mov x16, sp\n"
	"sub x16, x16, x29\n"
	"str x16, [x17, #8*29]\n"
	"mov sp, x29\n"
	"ldp x19, x20, [sp, #16]\n"
	"ldp x21, x22, [sp, #32]\n"
	"ldp x23, x24, [sp, #48]\n"
	"ldp x25, x26, [sp, #64]\n"
	"ldp x27, x28, [sp, #80]\n"
	"ldp x29, x30, [sp], #112\n"
	"ret\n"
	ASM_END(probe_a64_gprs)

	/*
	 * probe_a64_simd(out): v0-v31 (128 bits each) from probe_a64_vec_magic and
	 * FPCR/FPSR from the two qwords after them, torture_asm_tiny(41), then the
	 * vectors, FPCR and FPSR after the call, the two as read back before it,
	 * and x0 into out. The caller's FPCR/FPSR and d8-d15 are restored.
	 */
	ASM_FUNC(probe_a64_simd)
	"stp x29, x30, [sp, #-112]!\n"
	"mov x29, sp\n"
	"stp d8, d9, [sp, #16]\n"
	"stp d10, d11, [sp, #32]\n"
	"stp d12, d13, [sp, #48]\n"
	"stp d14, d15, [sp, #64]\n"
	"str x0, [sp, #80]\n" /* out */
	"mrs x9, fpcr\n"
	"mrs x10, fpsr\n"
	"stp x9, x10, [sp, #96]\n"
	"adrp x17, probe_a64_vec_magic\n"
	"add x17, x17, #:lo12:probe_a64_vec_magic\n"
	"add x11, x17, #8*64\n" /* past ldp's reach: out[64...] and magic[64...] via x11 */
	"ldp x9, x10, [x11]\n"
	"msr fpcr, x9\n"
	"msr fpsr, x10\n"
	"mrs x9, fpcr\n"
	"mrs x10, fpsr\n"
	"add x11, x0, #8*64\n"
	"stp x9, x10, [x11, #16]\n"
	QPAIRS("ldp")
	"mov x0, #41\n"
	"bl torture_asm_tiny\n"
	"ldr x17, [x29, #80]\n"
	QPAIRS("stp")
	"mrs x9, fpcr\n"
	"mrs x10, fpsr\n"
	"add x11, x17, #8*64\n"
	"stp x9, x10, [x11]\n"
	"str x0, [x11, #32]\n"
	"mov sp, x29\n"
	"ldp x9, x10, [sp, #96]\n"
	"msr fpcr, x9\n"
	"msr fpsr, x10\n"
	"ldp d8, d9, [sp, #16]\n"
	"ldp d10, d11, [sp, #32]\n"
	"ldp d12, d13, [sp, #48]\n"
	"ldp d14, d15, [sp, #64]\n"
	"ldp x29, x30, [sp], #112\n"
	"ret\n"
	ASM_END(probe_a64_simd)
	".popsection\n");

static void probe_magic_init(void)
{
	for (int i = 0; i < 31; i++)
		probe_a64_gpr_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 101);
	for (int i = 0; i < 32 * 2; i++)
		probe_a64_vec_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	probe_a64_vec_magic[64] = A64_FPCR_SET;
	probe_a64_vec_magic[65] = A64_FPSR_SET;
}

/* What IPA-RA callers assume: all but x0 (the result), IP0/IP1 and x30 kept. */
static int check_gprs(char *why)
{
	uint64_t out[31] = { 0 };

	probe_a64_gprs(out);
	bump(&n_asm_tiny);
	FAIL_IF(out[0] != probe_a64_gpr_magic[0] + 1, "x0 0x%lx", (unsigned long)out[0]);
	for (int r = 1; r < 29; r++)
		FAIL_IF(r != 16 && r != 17 && out[r] != probe_a64_gpr_magic[r],
			"x%d 0x%lx after the call, expected 0x%lx", r, (unsigned long)out[r],
			(unsigned long)probe_a64_gpr_magic[r]);
	FAIL_IF(out[29] != 0, "sp - x29 is %ld after the call", (long)out[29]);
	return 0;
}

/* All 128 bits of v0-v31 (not only d8-d15's low halves), FPCR and FPSR. */
static int check_xmm(char *why)
{
	uint64_t out[A64_SIMD_OUT] = { 0 };

	probe_a64_simd(out);
	bump(&n_asm_tiny);
	FAIL_IF(out[68] != 42, "x0 %ld", (long)out[68]);
	for (int i = 0; i < 32 * 2; i++)
		FAIL_IF(out[i] != probe_a64_vec_magic[i], "v%d %s half changed by the call", i / 2,
			i % 2 ? "high" : "low");
	FAIL_IF((out[66] & A64_FPCR_SET) != A64_FPCR_SET, "FPCR 0x%lx: the mode did not take",
		(unsigned long)out[66]);
	FAIL_IF(out[64] != out[66], "FPCR 0x%lx after the call, 0x%lx before",
		(unsigned long)out[64], (unsigned long)out[66]);
	FAIL_IF(out[65] != out[67], "FPSR 0x%lx after the call, 0x%lx before",
		(unsigned long)out[65], (unsigned long)out[67]);
	return 0;
}

/* No wider registers than v0-v31 without SVE: the threads case's third probe. */
static int check_zmm(char *why)
{
	return check_xmm(why);
}

static int case_asm_prologues_a64(char *why)
{
	uintptr_t caller_sp, seen;
	v2u64 q;

	for (long k = 0; k < 10; k++) {
		long r = torture_asm_thunk(k, 7); /* direct calls: see probe_a64_gprs */

		bump(&n_asm_thunk);
		FAIL_IF(r != k * 1000 + 7, "b in the first word (tail jump): %ld", r);
	}
	FAIL_IF(A64_CALL(adrp_ldr, 5) != (long)(0x1122334455667788 + 5), "adrp + ldr :lo12:");
	FAIL_IF(A64_CALL(adrp_add) != (void *)&torture_asm_quad, "adrp + add :lo12:");
	FAIL_IF(A64_CALL(adr, 5) != 0x0123456789abcdef + 5, "adr");
	FAIL_IF(A64_CALL(ldr_x, 5) != 0x0fedcba987654321 + 5, "ldr x literal");
	FAIL_IF(A64_CALL(ldr_w, 5) != 0x89abcdefL + 5, "ldr w literal");
	FAIL_IF(A64_CALL(ldrsw, 5) != (long)(int32_t)0x89abcdef + 5, "ldrsw literal");
	FAIL_IF(A64_CALL(ldr_s, 1.25f) != 3.75f, "ldr s literal");
	FAIL_IF(A64_CALL(ldr_d, 0.25) != 1234.75, "ldr d literal");
	q = A64_CALL(ldr_q, ((v2u64){ 1, 2 }));
	FAIL_IF(q[0] != 0x0123456789abcdf0 || q[1] != 0xfedcba9876543212, "ldr q literal");
	FAIL_IF(A64_CALL(cbz, 0) != 100 || A64_CALL(cbz, 4) != 15, "cbz");
	FAIL_IF(A64_CALL(cbnz, 5) != 200 || A64_CALL(cbnz, 1L << 32) != (1L << 32) + 7, "cbnz w");
	FAIL_IF(A64_CALL(tbz, 9) != 300 || A64_CALL(tbz, (1L << 40) + 9) != (1L << 40) + 8, "tbz");
	FAIL_IF(A64_CALL(tbnz, 8) != 400 || A64_CALL(tbnz, 4) != 20, "tbnz w");
	FAIL_IF(A64_CALL(bcond, 10) != 7 || A64_CALL(bcond, 11) != 22, "cmp + b.gt");
	FAIL_IF(A64_CALL(bti, 5) != 10, "bti c");
	FAIL_IF(A64_CALL(paciasp, 5) != 16, "paciasp ... autiasp");
	FAIL_IF(A64_CALL(pacibsp, 5) != 17, "pacibsp ... autibsp");
	FAIL_IF(torture_asm_loop_mid(100, 0) != 5050, "loop back to the entry");
	__asm__ volatile("mov %0, sp" : "=r"(caller_sp));
	seen = A64_CALL(sp);
	FAIL_IF(seen != caller_sp, "callee saw sp 0x%lx, caller's is 0x%lx", (unsigned long)seen,
		(unsigned long)caller_sp);
	return 0;
}

#else
/* The register probes are assembly; elsewhere they check nothing. */
static int check_gprs(char *why) { (void)why; return 0; }
static int check_xmm(char *why) { (void)why; return 0; }
static int check_zmm(char *why) { (void)why; return 0; }
#endif

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

static int case_int_args(char *why)
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

static int case_int128(char *why)
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

static int case_varargs(char *why)
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

static int case_mixed_fp(char *why)
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

static int case_m256(char *why)
{
	return __builtin_cpu_supports("avx2") ? m256_run(why) : 0;
}

static int case_m512(char *why)
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

static int case_x87(char *why)
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

static int case_complex(char *why)
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
struct long_double_pair {
	long a;
	double b;
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

static int case_structs(char *why)
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

static int case_static_chain(char *why)
{
	for (long x = 0; x < 10; x++) {
		long v = opaque(x);
		long r = vp_torture_nested_parent(v);
		long e = (v * 3 + 1) * (2 * v + 1) + (2 * v + 1) * 1000;

		FAIL_IF(r != e, "x=%ld: %ld, expected %ld", v, r, e);
	}
	return 0;
}

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

static int case_alignment(char *why)
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

static int case_memops(char *why)
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
static int case_callee_saved(char *why)
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

static int case_ipa_ra(char *why)
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
VIA(torture_recurse);

TORTURE long torture_recurse(long n)
{
	long r;

	if (n == 0)
		return 0;
	r = vp_torture_recurse(n - 1); /* through the pointer: a real call, never a loop */
	return r + n * 3;
}

static int case_recursion(char *why)
{
	static const long depths[] = { 2000, 10, 1500, 1023, 1024, 1025, 3000, 1 };

	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		long n = depths[i], r = vp_torture_recurse(n);

		FAIL_IF(r != 3 * n * (n + 1) / 2, "depth %ld: %ld", n, r);
	}
	return 0;
}

/* ---- prologues written in assembly -------------------------------------------- */

TORTURE long torture_thunk_target(long a, long b)
{
	bump(&n_thunk_target);
	return a * 1000 + b;
}

#ifdef __x86_64__
static int case_asm_prologues(char *why)
{
	long (*volatile thunk)(long, long) = torture_asm_thunk;
	long (*volatile jcc)(long) = torture_asm_jcc;
	long (*volatile jcc_late)(long) = torture_asm_jcc_late;
	long (*volatile loop_entry)(long, long) = torture_asm_loop_entry;
	long r;

	for (long k = 0; k < 10; k++) {
		r = thunk(k, 7);
		bump(&n_asm_thunk);
		FAIL_IF(r != k * 1000 + 7, "thunk: %ld", r);
	}
	FAIL_IF(torture_asm_riprel_load(5) != (long)(0x1122334455667788 + 5), "rip-relative load");
	FAIL_IF(torture_asm_riprel_cmp(5) != 12, "rip-relative cmp with imm32");
	FAIL_IF(torture_asm_riprel_sse(1.25) != 3.75, "rip-relative SSE operand");
	FAIL_IF(torture_asm_riprel_store(21) != 42 || torture_asm_slot != 21,
		"rip-relative store");
	FAIL_IF(torture_asm_riprel_lea() != (void *)&torture_asm_quad, "rip-relative lea");
	FAIL_IF(jcc(41) != 42 || jcc(-5) != -1, "short jcc in the first bytes");
	FAIL_IF(jcc_late(10) != 7 || jcc_late(11) != 22, "jcc across the 5-byte boundary");
	FAIL_IF(torture_asm_shortjmp(4) != 12, "short jmp first");
	FAIL_IF(loop_entry(100, 5) != 5050 + 5, "loop back to the entry: %ld",
		loop_entry(100, 5));
	FAIL_IF(torture_asm_loop_mid(100) != 5050, "loop into the first bytes");
	FAIL_IF(torture_asm_callfirst(7) != 22, "call in the first bytes");
	return 0;
}

#endif

/* ---- errno -------------------------------------------------------------------- */

TORTURE int torture_set_errno(int e)
{
	bump(&n_set_errno);
	errno = e;
	return -1;
}
VIA(torture_set_errno);

static int case_errno(char *why)
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

static int case_fpenv(char *why)
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

/* ---- signals ------------------------------------------------------------------ */

static volatile sig_atomic_t sig_hits, sig_bad;

TORTURE long torture_sig_leaf(long n)
{
	return n * 7 + 3;
}
VIA(torture_sig_leaf);

TORTURE long torture_sig_work(long n)
{
	long s = 0;

	for (long i = 0; i < 5; i++)
		s += vp_torture_sig_leaf(n + i);
	return s; /* 35 n + 85 */
}
VIA(torture_sig_work);

/* Instrumented itself: its return address is __restore_rt. */
TORTURE void torture_sig_handler(int sig)
{
	int saved = errno;
	long n = sig_hits;

	if (sig != SIGALRM || vp_torture_sig_work(n) != 35 * n + 85)
		sig_bad++;
	sig_hits = n + 1;
	errno = saved;
}

/* The main thread's work while the timer fires: floating point and nested calls. */
TORTURE double torture_sig_busy(long n)
{
	double x = (double)n;

	for (int i = 0; i < 4000; i++)
		x = x * 0.999 + 1.0;
	return x + (double)vp_torture_sig_leaf(n);
}
VIA(torture_sig_busy);

static double sig_busy_expect(long n)
{
	double x = (double)n;

	for (int i = 0; i < 4000; i++)
		x = x * 0.999 + 1.0;
	return x + (double)(n * 7 + 3);
}

TORTURE int torture_sig_raise(int depth);
VIA(torture_sig_raise);

TORTURE int torture_sig_raise(int depth)
{
	if (depth > 0)
		return vp_torture_sig_raise(depth - 1) + 1;
	return raise(SIGALRM);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int case_signal(char *why)
{
	struct sigaction sa = { .sa_handler = torture_sig_handler }, old;
	struct itimerval tv = { { 0, 1000 }, { 0, 1000 } }, off = { { 0, 0 }, { 0, 0 } };
	double deadline = now_s() + 30;
	long iterations = 0, wrong = 0;
	int r;

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	FAIL_IF(sigaction(SIGALRM, &sa, &old) != 0, "sigaction: %s", strerror(errno));
	sig_hits = sig_bad = 0;
	setitimer(ITIMER_REAL, &tv, NULL);
	while (sig_hits < 25 && now_s() < deadline) {
		if (vp_torture_sig_busy(iterations) != sig_busy_expect(iterations))
			wrong++;
		iterations++;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	FAIL_IF(sig_hits < 25, "only %d SIGALRMs in 30 s", (int)sig_hits);
	FAIL_IF(wrong != 0, "%ld of %ld interrupted computations wrong", wrong, iterations);

	long before = sig_hits;

	r = vp_torture_sig_raise(6);
	FAIL_IF(r != 6 || sig_hits != before + 1, "raise from nested calls: %d, %ld handler runs",
		r, (long)(sig_hits - before));
	sigaction(SIGALRM, &old, NULL);
	FAIL_IF(sig_bad != 0, "%d handler runs computed wrong results", (int)sig_bad);
	return 0;
}

/* ---- threads -------------------------------------------------------------------- */

#define N_THREADS 8
#define THREAD_ROUNDS 1500

TORTURE long torture_add6(long a, long b, long c, long d, long e, long f)
{
	bump(&n_add6);
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}
VIA(torture_add6);

TORTURE double torture_thr_fp(double a, float b, long c, double d)
{
	bump(&n_thr_fp);
	return a * 2 + b - (double)c + d * 0.5;
}
VIA(torture_thr_fp);

struct thread_job {
	int index;
	int failed;
	char why[WHY_LEN];
};

static pthread_barrier_t thread_barrier;

/*
 * A thread's first instrumented call takes the agent's slow path (thread
 * state setup, with the extended state saved): probe the registers there.
 */
static int thread_first_call(struct thread_job *job)
{
	switch (job->index % 3) {
	case 0:
		return check_gprs(job->why);
	case 1:
		return check_xmm(job->why);
	default:
		return check_zmm(job->why);
	}
}

static int thread_rounds(struct thread_job *job)
{
	char *why = job->why;
	long t = job->index;

	for (long i = 0; i < THREAD_ROUNDS; i++) {
		long r = vp_torture_add6(i, t, -i, i * t, 7, i ^ t);
		double d = vp_torture_thr_fp((double)i, (float)t + 0.5f, i * 3, (double)t);
		struct long_double_pair m = vp_torture_ret_tm(i + t, (double)i);

		FAIL_IF(r != i + 2 * t - 3 * i + 4 * i * t + 35 + 6 * (i ^ t), "add6 round %ld",
			i);
		FAIL_IF(d != i * 2.0 + (t + 0.5) - i * 3 + t * 0.5, "thr_fp round %ld: %g", i,
			d);
		FAIL_IF(m.a != i + t - 1 || m.b != i * 4.0, "ret_tm round %ld", i);
		if (i % 100 == 0) {
			long n = 20 + t, rec = vp_torture_recurse(n);

			FAIL_IF(rec != 3 * n * (n + 1) / 2, "recursion round %ld: %ld", i, rec);
			errno = (int)(i + 1);
			FAIL_IF(vp_torture_keep_errno((int)i) != 2 * i + 1 || errno != i + 1,
				"errno %d in a thread, expected %ld", errno, i + 1);
		}
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct thread_job *job = arg;

	job->failed = thread_first_call(job);
	pthread_barrier_wait(&thread_barrier);
	if (!job->failed)
		job->failed = thread_rounds(job);
	if (!job->failed)
		job->failed = check_gprs(job->why) || check_xmm(job->why) || check_zmm(job->why);
	return NULL;
}

static int case_threads(char *why)
{
	pthread_t tids[N_THREADS];
	struct thread_job jobs[N_THREADS];

	pthread_barrier_init(&thread_barrier, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++) {
		jobs[i] = (struct thread_job){ .index = i };
		FAIL_IF(pthread_create(&tids[i], NULL, thread_main, &jobs[i]) != 0,
			"pthread_create");
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&thread_barrier);
	for (int i = 0; i < N_THREADS; i++)
		FAIL_IF(jobs[i].failed, "thread %d: %s", i, jobs[i].why);
	return 0;
}

/* ---- fork, vfork, setjmp/longjmp, ucontext ---------------------------------------- */

/* The child returns through this hijacked frame, with recording off. */
TORTURE pid_t torture_fork_inner(int *child_ok)
{
	pid_t pid = fork();

	if (pid == 0)
		*child_ok = vp_torture_add6(1, 2, 3, 4, 5, 6) == 91 &&
			    vp_torture_recurse(1100) == 3 * 1100 * 1101 / 2;
	return pid;
}
VIA(torture_fork_inner);

static int case_fork(char *why)
{
	int child_ok = 0, status = 0;
	pid_t pid = vp_torture_fork_inner(&child_ok);

	if (pid == 0)
		_exit(child_ok ? 42 : 1);
	FAIL_IF(pid < 0, "fork: %s", strerror(errno));
	FAIL_IF(waitpid(pid, &status, 0) != pid, "waitpid");
	FAIL_IF(!WIFEXITED(status) || WEXITSTATUS(status) != 42, "child status 0x%x", status);
	return 0;
}

static jmp_buf jump_buffer;

TORTURE void torture_lj_thrower(int n);
VIA(torture_lj_thrower);

TORTURE void torture_lj_thrower(int n)
{
	if (n <= 0)
		longjmp(jump_buffer, 7);
	vp_torture_lj_thrower(n - 1);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

/* setjmp inside an instrumented function, longjmp from frames below it. */
TORTURE int torture_lj_catcher(int n)
{
	volatile int tries = 0;
	int v = setjmp(jump_buffer);

	if (v == 0) {
		tries++;
		vp_torture_lj_thrower(n);
		return -1;
	}
	return v + tries * 100;
}
VIA(torture_lj_catcher);

static int case_setjmp(char *why)
{
	for (int k = 0; k < 50; k++) {
		int r = vp_torture_lj_catcher(k % 6);

		FAIL_IF(r != 107, "round %d: %d", k, r);
	}
	FAIL_IF(vp_torture_recurse(40) != 3 * 40 * 41 / 2, "calls after the longjmps");
	return 0;
}

#ifdef __aarch64__
/* After the counts: torture_asm_bl_first's frame is left without a plain return. */
static int case_asm_bl_first_a64(char *why)
{
	for (long k = 0; k < 10; k++) {
		long r = probe_a64_bl_first(k);

		FAIL_IF(r != 3 * k + 1, "bl in the first word: %ld, expected %ld", r, 3 * k + 1);
	}
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after the bl-first returns");
	return 0;
}
#endif

/* Parent and child return from vfork() on the same stack, with shared memory. */
TORTURE int torture_vfork_run(void)
{
	int status = 0;
	pid_t pid = vfork();

	if (pid == 0)
		_exit(42);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}
VIA(torture_vfork_run);

static int case_vfork(char *why)
{
	int r = vp_torture_vfork_run();

	FAIL_IF(r != 42, "vfork child status %d", r);
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after vfork");
	return 0;
}

extern char **environ;

/* posix_spawn: a CLONE_VM|CLONE_VFORK child runs libc code on memory it shares with us. */
TORTURE int torture_spawn_true(void)
{
	char *argv[] = { "true", NULL };
	int status = -1;
	pid_t pid;

	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
		return -1;
	if (waitpid(pid, &status, 0) != pid)
		return -2;
	return status;
}
VIA(torture_spawn_true);

static int case_spawn(char *why)
{
	for (int i = 0; i < 3; i++) {
		int r = vp_torture_spawn_true();

		FAIL_IF(r != 0, "spawn %d: status %d", i, r);
	}
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after posix_spawn");
	return 0;
}

#define CO_ROUNDS 5
#define CO_STACK_SIZE (256 * 1024)

static ucontext_t co_main_ctx, co_ctx;
static long co_value;

TORTURE long torture_co_step(long v)
{
	return v * 3 + 1;
}
VIA(torture_co_step);

/* Runs on its own stack; every swap leaves instrumented frames suspended on both stacks. */
TORTURE void torture_co_body(void)
{
	for (int i = 0; i < CO_ROUNDS; i++) {
		co_value = vp_torture_co_step(co_value);
		swapcontext(&co_ctx, &co_main_ctx);
	}
	co_value = -co_value; /* then returns: uc_link resumes the main context */
}

TORTURE long torture_co_resume(void)
{
	if (swapcontext(&co_main_ctx, &co_ctx) != 0)
		return LONG_MIN;
	return co_value;
}
VIA(torture_co_resume);

static int case_ucontext(char *why)
{
	void *stack = malloc(CO_STACK_SIZE);
	volatile long expect = 1; /* getcontext() returns twice, in principle */

	FAIL_IF(!stack || getcontext(&co_ctx) != 0, "getcontext");
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = CO_STACK_SIZE;
	co_ctx.uc_link = &co_main_ctx;
	makecontext(&co_ctx, torture_co_body, 0);
	co_value = 1;
	for (int i = 0; i <= CO_ROUNDS; i++) {
		long r = vp_torture_co_resume();

		if (i < CO_ROUNDS)
			expect = expect * 3 + 1;
		else
			expect = -expect;
		if (r != expect) {
			free(stack);
			FAIL_IF(1, "resume %d: %ld, expected %ld", i, r, expect);
		}
	}
	free(stack);
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after the coroutine");
	return 0;
}

/* ---- driver ------------------------------------------------------------------------ */

struct torture_case {
	const char *name;
	int (*run)(char *why); /* NULL: print the counts here */
};

static const struct torture_case cases[] = {
#ifdef __x86_64__
	{ "regs_gpr", case_regs_gpr },
#endif
#ifdef __x86_64__
	{ "regs_xmm", case_regs_xmm },
#endif
#ifdef __x86_64__
	{ "regs_zmm", case_regs_zmm },
#endif
#ifdef __aarch64__
	{ "regs_gpr_a64", check_gprs },
	{ "regs_simd_a64", check_xmm },
#endif
	{ "int_args", case_int_args },
	{ "int128", case_int128 },
	{ "varargs", case_varargs },
	{ "mixed_fp", case_mixed_fp },
#ifdef __x86_64__
	{ "m256", case_m256 },
#endif
#ifdef __x86_64__
	{ "m512", case_m512 },
#endif
	{ "x87", case_x87 },
	{ "complex", case_complex },
	{ "structs", case_structs },
	{ "static_chain", case_static_chain },
#ifdef __x86_64__
	{ "alignment", case_alignment },
#endif
#ifdef __x86_64__
	{ "memops", case_memops },
#endif
#ifdef __x86_64__
	{ "callee_saved", case_callee_saved },
#endif
	{ "ipa_ra", case_ipa_ra },
	{ "recursion", case_recursion },
#ifdef __x86_64__
	{ "asm_prologues", case_asm_prologues },
#endif
#ifdef __aarch64__
	{ "asm_prologues_a64", case_asm_prologues_a64 },
#endif
	{ "errno", case_errno },
	{ "fpenv", case_fpenv },
	{ "signal", case_signal },
	{ "threads", case_threads },
	{ "fork", case_fork },
	{ "counts", NULL }, /* the cases below call no counted function */
	{ "setjmp", case_setjmp },
#ifdef __aarch64__
	{ "asm_bl_first_a64", case_asm_bl_first_a64 },
#endif
	{ "spawn", case_spawn },
	{ "vfork", case_vfork },
	{ "ucontext", case_ucontext },
};

struct counted {
	const char *name;
	_Atomic unsigned long *calls;
};

static const struct counted counted[] = {
	{ "torture_int_args", &n_int_args },
	{ "torture_int128", &n_int128 },
	{ "torture_varargs_sum", &n_varargs },
	{ "torture_mixed_fp", &n_mixed_fp },
	{ "torture_ret_tl", &n_ret_tl },
	{ "torture_ret_td", &n_ret_td },
	{ "torture_ret_tm", &n_ret_tm },
	{ "torture_ret_tfi", &n_ret_tfi },
	{ "torture_ret_big", &n_ret_big },
	{ "torture_struct_args", &n_struct_args },
	{ "torture_nested_parent", &n_nested_parent },
	{ "torture_tiny", &n_tiny },
	{ "torture_add6", &n_add6 },
	{ "torture_thr_fp", &n_thr_fp },
	{ "torture_set_errno", &n_set_errno },
	{ "torture_keep_errno", &n_keep_errno },
	{ "torture_thunk_target", &n_thunk_target },
	{ "torture_asm_thunk", &n_asm_thunk },
	{ "torture_asm_tiny", &n_asm_tiny },
	{ "torture_fp_div", &n_fp_div },
	{ "torture_memops", &n_memops },
	{ "torture_hfa_f", &n_hfa_f },
	{ "torture_hfa_d", &n_hfa_d },
	{ "torture_hva", &n_hva },
#ifdef __aarch64__
#define A64_COUNTED_ENTRY(name) { "torture_asm_" #name, &n_a64[A64_##name] },
	A64_COUNTED(A64_COUNTED_ENTRY)
#endif
};

static void print_counts(void)
{
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		printf("count %s %lu\n", counted[i].name, atomic_load(counted[i].calls));
}

static int selected(int argc, char **argv, const char *name)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int failures = 0;

	setvbuf(stdout, NULL, _IOLBF, 0); /* a crash still shows the cases that passed */
#if defined(__x86_64__) || defined(__aarch64__)
	probe_magic_init();
#endif
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[WHY_LEN] = "";

		if (!cases[i].run) {
			print_counts();
			continue;
		}
		if (!selected(argc, argv, cases[i].name))
			continue;
		if (cases[i].run(why)) {
			printf("case %s FAIL %s\n", cases[i].name, why);
			failures++;
		} else {
			printf("case %s ok\n", cases[i].name);
		}
	}
	return failures ? 1 : 0;
}
