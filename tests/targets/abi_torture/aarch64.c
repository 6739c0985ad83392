// SPDX-License-Identifier: MIT
/*
 * abi_torture on aarch64: AAPCS64 register probes (x0-x28, v0-v31 whole,
 * FPCR/FPSR), prologue shapes for every pc-relative class the relocator
 * rewrites, and the cases that use them.
 */
#ifdef __aarch64__
#include "abi_torture.h"

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

_Atomic unsigned long n_a64[A64_N];

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

void probe_magic_init(void)
{
	for (int i = 0; i < 31; i++)
		probe_a64_gpr_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 101);
	for (int i = 0; i < 32 * 2; i++)
		probe_a64_vec_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	probe_a64_vec_magic[64] = A64_FPCR_SET;
	probe_a64_vec_magic[65] = A64_FPSR_SET;
}

/* What IPA-RA callers assume: all but x0 (the result), IP0/IP1 and x30 kept. */
int check_gprs(char *why)
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
int check_xmm(char *why)
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
int check_zmm(char *why)
{
	return check_xmm(why);
}

int case_asm_prologues_a64(char *why)
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

/* After the counts: torture_asm_bl_first's frame is left without a plain return. */
int case_asm_bl_first_a64(char *why)
{
	for (long k = 0; k < 10; k++) {
		long r = probe_a64_bl_first(k);

		FAIL_IF(r != 3 * k + 1, "bl in the first word: %ld, expected %ld", r, 3 * k + 1);
	}
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after the bl-first returns");
	return 0;
}

#endif
