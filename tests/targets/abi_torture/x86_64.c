// SPDX-License-Identifier: MIT
/*
 * abi_torture on x86-64: assembly with exact prologue shapes, the register
 * probes (every GPR, xmm/ymm/zmm, x87 and MXCSR state around a call) and the
 * cases that use them.
 */
#ifdef __x86_64__
#include "abi_torture.h"

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

void probe_magic_init(void)
{
	for (int i = 0; i < 32 * 8; i++)
		probe_vec_magic[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
}

int check_gprs(char *why)
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

int check_xmm(char *why)
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
int check_zmm(char *why)
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

int case_regs_gpr(char *why)
{
	return check_gprs(why);
}

int case_regs_xmm(char *why)
{
	return check_xmm(why);
}

int case_regs_zmm(char *why)
{
	return check_zmm(why);
}

/* ---- prologues written in assembly -------------------------------------------- */

int case_asm_prologues(char *why)
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
