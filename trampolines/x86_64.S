/* SPDX-License-Identifier: MIT */
/*
 * x86-64 entry and exit trampolines (System V ABI), shared by every
 * instrumented function. Owns the register-save discipline; must never
 * change what the instrumented function or its caller observe.
 *
 * Every general-purpose register the C hooks may clobber is saved on both
 * paths, not only the argument and return registers: GCC's IPA-RA lets a
 * caller keep values in rcx, r8-r11 ... across a call to a same-unit
 * function that does not clobber them. Vector and x87 registers are not
 * saved on the fast path because the hooks are compiled with
 * -mgeneral-regs-only and call nothing (agent/hooks.c); the once-per-thread
 * slow path, which runs ordinary C, saves the whole extended state (xsave64).
 *
 * Entry: a function's stub did `call region_thunk`, which jumped here. So
 * rsp -> stub+5 (the function's exit landing), rsp+8 -> the caller's return
 * address, rsp % 16 == 0. We call profagent_enter_hook(desc, &return_address)
 * with rsp 16-aligned, then leave for the relocated prologue at stub+11 with
 * everything restored. The CFI describes the stub's pushed address as part
 * of this frame, so unwinders go from here straight to the instrumented
 * function's caller.
 *
 * The return stack buffer (RSB). The caller's call pushed r, the stub's call
 * stub+5: [.., r, stub+5]. When the hook hijacked the return (the slot now
 * holds stub+5, the landing) we leave by an indirect jump and stub+5 stays on
 * the RSB: the function's own `ret` to its landing is predicted, the landing
 * jumps to the exit trampoline, whose `ret` to r is predicted too. When it
 * did not (filters, slow cases: the slot holds r), a `ret` pops stub+5
 * (mispredicted once, to stub+11) and the RSB stays in step with the stack.
 * bench/hijack_micro.c measures both schemes (bench/README.md, issue 28).
 *
 * Stack at the call of the enter hook (offsets from rbp):
 *   +16 caller's return address  +8 stub+11 (was stub+5)  0 saved rbp  -8 rdi  -16 rsi
 *   -24 rdx  -32 rcx  -40 r8  -48 r9  -56 rax  -64 r10  -72 r11
 *   -80 scratch (the slow path's reason, then whether to retry)  -88 padding
 *
 * A non-zero answer from the enter hook asks for the slow path: ordinary C,
 * run with every vector register saved, profagent_enter_slow(reason), which
 * says whether to ask the enter hook again (a thread's first call) or not
 * (a module was loaded: nothing to time).
 *
 * Exit: the hook replaced the return address with the function's landing,
 * which jumps here: the instrumented function's `ret` left rsp 16-aligned.
 * We save the same nine registers (rax/rdx carry integer returns; xmm0/xmm1
 * and st0/st1 are untouched by the hook), call profagent_exit_hook(stack
 * pointer), which returns the real return address, put it back in the
 * return slot, restore and `ret` there.
 */
#include "trampolines/trampoline_layout.h"

#define ENTRY(name)                 \
	.globl name;                \
	.hidden name;               \
	.type name, @function;      \
	.p2align 4;                 \
	name:

#define END(name) .size name, .-name

#define SLOW_SCRATCH -80
#define SAVED_AREA_BOTTOM -88
#define XSAVE_HEADER_OFFSET 512

.macro SAVE_SCRATCH_REGISTERS
	pushq	%rdi
	pushq	%rsi
	pushq	%rdx
	pushq	%rcx
	pushq	%r8
	pushq	%r9
	pushq	%rax
	pushq	%r10
	pushq	%r11
.endm

.macro RESTORE_SCRATCH_REGISTERS
	popq	%r11
	popq	%r10
	popq	%rax
	popq	%r9
	popq	%r8
	popq	%rcx
	popq	%rdx
	popq	%rsi
	popq	%rdi
.endm

	.text

ENTRY(profagent_entry_trampoline)
	.cfi_startproc
	.cfi_def_cfa_offset 16
	endbr64
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	/*
	 * The word the stub's call pushed becomes the relocated prologue's
	 * address at once: where we leave to, and what a frame-pointer chain
	 * through this frame reads (the function just entered), never a
	 * landing, which in a chain is a hijacked return (profd tells them by
	 * value).
	 */
	addq	$STUB_RELOCATED_OFFSET-STUB_LANDING_OFFSET, 8(%rbp)
	SAVE_SCRATCH_REGISTERS
	subq	$16, %rsp
.Lentry_call_hook:
	movq	8(%rbp), %rdi
	addq	$STUB_RELOCATED_TO_DESC, %rdi
	leaq	16(%rbp), %rsi
	call	profagent_enter_hook
	testl	%eax, %eax
	jnz	.Lentry_slow_path
.Lentry_restore:
	/*
	 * Hijacked (the return slot holds the landing, stub+5) or not: ZF says,
	 * through the restore (lea and pop leave the flags alone).
	 */
	movq	8(%rbp), %rax
	leaq	STUB_LANDING_OFFSET-STUB_RELOCATED_OFFSET(%rax), %rax
	cmpq	%rax, 16(%rbp)
	leaq	16(%rsp), %rsp
	RESTORE_SCRATCH_REGISTERS
	popq	%rbp
	.cfi_remember_state
	.cfi_def_cfa %rsp, 16
	.cfi_same_value %rbp
	je	.Lentry_hijacked
	ret				/* not hijacked: pops stub+5 off the RSB */
.Lentry_hijacked:
	/*
	 * stub+5 stays on the RSB for the function's own ret. The prologue's
	 * address is then in the red zone, which signal frames skip.
	 */
	leaq	8(%rsp), %rsp
	.cfi_def_cfa %rsp, 8
	jmp	*-8(%rsp)

	.cfi_restore_state
.Lentry_slow_path:
	/* Ordinary C on the hook's behalf, with all vector state saved. */
	movl	%eax, SLOW_SCRATCH(%rbp)
	subq	profagent_xsave_area_size(%rip), %rsp
	andq	$-64, %rsp
	xorl	%eax, %eax
	movq	%rax, XSAVE_HEADER_OFFSET+0(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+8(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+16(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+24(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+32(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+40(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+48(%rsp)
	movq	%rax, XSAVE_HEADER_OFFSET+56(%rsp)
	movl	$-1, %eax
	movl	$-1, %edx
	xsave64	(%rsp)
	movl	SLOW_SCRATCH(%rbp), %edi
	call	profagent_enter_slow
	movl	%eax, SLOW_SCRATCH(%rbp)
	movl	$-1, %eax
	movl	$-1, %edx
	xrstor64 (%rsp)
	leaq	SAVED_AREA_BOTTOM(%rbp), %rsp
	cmpl	$0, SLOW_SCRATCH(%rbp)
	jne	.Lentry_call_hook
	jmp	.Lentry_restore
	.cfi_endproc
END(profagent_entry_trampoline)

ENTRY(profagent_exit_trampoline)
	.cfi_startproc
	/*
	 * Entered from a landing (the instrumented function's ret went there):
	 * its hijacked return slot is right below rsp, so the CFA (the caller's
	 * rsp) is rsp itself. The push puts a 0 back into that slot until the
	 * hook returns the real address: unwinders in the process stop at the
	 * 0, and profd, which knows the slot from the enter record, puts the
	 * real address into its copy of the stack. Before the push there is no
	 * telling: undefined.
	 */
	.cfi_def_cfa %rsp, 0
	.cfi_undefined %rip
	pushq	$0
	.cfi_def_cfa_offset 8
	.cfi_offset %rip, -8
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	SAVE_SCRATCH_REGISTERS
	subq	$8, %rsp
	leaq	16(%rbp), %rdi
	call	profagent_exit_hook
	movq	%rax, 8(%rbp)
	addq	$8, %rsp
	RESTORE_SCRATCH_REGISTERS
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	.cfi_same_value %rbp
	/*
	 * The function's ret took stub+5 off the RSB (the landing), so its top
	 * is the caller's r again: this ret is predicted and the return stack
	 * stays in step. (Entered by a ret that took r, as before the landings,
	 * every return up the chain would be predicted one frame off: a plain
	 * call through 3 plain callers cost +28 ns that way.)
	 */
	ret
	.cfi_endproc
END(profagent_exit_trampoline)

	.section .note.GNU-stack, "", @progbits
