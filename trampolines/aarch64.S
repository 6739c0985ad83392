/* SPDX-License-Identifier: MIT */
/*
 * aarch64 entry and exit trampolines (AAPCS64), shared by every instrumented
 * function. Owns the register-save discipline; must never change what the
 * instrumented function or its caller observe.
 *
 * Saved on both paths: every general-purpose register the C hooks may
 * clobber, x0-x15 and x18, not only the argument and result registers: GCC's
 * IPA-RA lets a caller keep values in x9-x15 across a call to a same-unit
 * function that does not clobber them. x16/x17 (IP0/IP1) are free on both
 * paths: a veneer may clobber them on the way to any callee, so GCC's call
 * patterns clobber them whatever IPA-RA knows. The hooks are compiled with
 * -mgeneral-regs-only and call nothing (agent/hooks.c), so they touch no
 * SIMD&FP register; the entry saves q0-q7 (the argument registers, whole)
 * and the exit q0-q3 (an HFA/HVA result) anyway, 16 instructions against a
 * compiler flag changing one day. The once-per-thread slow path, which runs
 * ordinary C, saves all of q0-q31, FPCR and FPSR.
 *
 * SVE and SME. A base-PCS callee may clobber the bits of z0-z31 above 128,
 * p0-p15 and FFR (AAPCS64: only d8-d15 survive a call), so the trampolines,
 * which preserve the whole V registers, preserve everything a base-PCS
 * function's caller may rely on. Functions with the SVE or SME vector PCS
 * (STO_AARCH64_VARIANT_PCS: arguments in z/p registers, more preserved) are
 * never patched (agent/elf_symbols.c). In streaming mode (SME) the slow
 * path's q-register stores would trap; a streaming function is
 * variant-PCS or called from one, so it is never reached.
 *
 * Entry: the function's entry `b` (or adrp/add/br x16) reached its stub slot,
 * which did `adr x16, desc; b region_thunk`, whose `br x17` jumped here. So
 * x16 = the slot's struct stub_desc, x30 = the caller's return address
 * (plain: a slot that authenticated it first), sp = the function's entry SP.
 * The frame record goes right below the entry SP, so x30 is saved at
 * sp_entry - 8: that is the return slot profagent_enter_hook reads and
 * rewrites (with the exit trampoline's address), as on x86-64, and the one
 * its age comparisons use. We restore everything, x30 included, and `br x16`
 * into the relocated prologue. The CFI describes x30 at CFA - 8, so unwinders
 * go from here straight to the instrumented function's caller.
 *
 * Frame (offsets from sp after the sub):
 *   0..127 x0-x15   128 x16 (desc)   136 x18   144 padding   160..287 q0-q7
 *   288 x29   296 x30 (the return slot)
 *
 * A non-zero answer from the enter hook asks for the slow path, as on x86-64
 * (see trampolines/x86_64.S): profagent_enter_slow(reason) with all of the
 * SIMD&FP state saved, then maybe the enter hook again.
 *
 * Exit: the hook replaced the return address, so the function's `ret` lands
 * here with sp = its entry SP again. We put 0 where its return slot was
 * (sp - 8: unwinders stop there until the hook answers), save what the hook
 * may clobber, call profagent_exit_hook(sp), which returns the real return
 * address, store it in the slot for unwinders, restore and `ret` there.
 */
#include "trampolines/trampoline_layout.h"

#define ENTRY(name)                 \
	.globl name;                \
	.hidden name;               \
	.type name, %function;      \
	.p2align 4;                 \
	name:

#define END(name) .size name, .-name

/* bti c: the region thunk enters with `br x17`, which a guarded page checks. */
#define BTI_C hint #34

#define ENTRY_FRAME 288
#define ENTRY_DESC 128
#define ENTRY_X18 136
#define ENTRY_Q0 160
#define EXIT_FRAME 208
#define EXIT_X18 128
#define EXIT_Q0 144
#define SIMD_AREA 528 /* FPCR and FPSR, then q0-q31 */

/*
 * The words the argument capture reads (trampoline_layout.h), from the return
 * slot: x0 saved at sp+0, q0 at sp+ENTRY_Q0, the slot at sp+ENTRY_FRAME+8.
 */
.if (0 - ENTRY_FRAME - 8) / 8 != ENTER_INT_REG_WORD(1) || (ENTRY_Q0 - ENTRY_FRAME - 8) / 8 != ENTER_FP_ARG_WORD(1)
.error "entry frame and ENTER_*_ARG_WORD disagree"
.endif
.if (0 - EXIT_FRAME - 16 + 8) / 8 != EXIT_INT_RETURN_WORD || (EXIT_Q0 - EXIT_FRAME - 16 + 8) / 8 != EXIT_FP_RETURN_WORD
.error "exit frame and EXIT_*_RETURN_WORD disagree"
.endif

/* x0-x15 in pairs at sp+0: `X0_X15 stp` saves them, `X0_X15 ldp` restores them. */
.macro X0_X15 pair
	\pair	x0, x1, [sp, #0]
	\pair	x2, x3, [sp, #16]
	\pair	x4, x5, [sp, #32]
	\pair	x6, x7, [sp, #48]
	\pair	x8, x9, [sp, #64]
	\pair	x10, x11, [sp, #80]
	\pair	x12, x13, [sp, #96]
	\pair	x14, x15, [sp, #112]
.endm

	.text

ENTRY(profagent_entry_trampoline)
	.cfi_startproc
	BTI_C
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov	x29, sp
	.cfi_def_cfa_register x29
	sub	sp, sp, #ENTRY_FRAME
	X0_X15 stp
	stp	x16, x18, [sp, #ENTRY_DESC]
	stp	q0, q1, [sp, #ENTRY_Q0]
	stp	q2, q3, [sp, #ENTRY_Q0 + 32]
	stp	q4, q5, [sp, #ENTRY_Q0 + 64]
	stp	q6, q7, [sp, #ENTRY_Q0 + 96]
.Lentry_call_hook:
	mov	x0, x16
	add	x1, x29, #8			/* the return slot: x30 as saved above */
	bl	profagent_enter_hook
	cbnz	w0, .Lentry_slow_path
.Lentry_restore:
	ldr	x16, [sp, #ENTRY_DESC]
	ldr	x16, [x16, #STUB_DESC_RELOCATED]
	ldp	q0, q1, [sp, #ENTRY_Q0]
	ldp	q2, q3, [sp, #ENTRY_Q0 + 32]
	ldp	q4, q5, [sp, #ENTRY_Q0 + 64]
	ldp	q6, q7, [sp, #ENTRY_Q0 + 96]
	ldr	x18, [sp, #ENTRY_X18]
	X0_X15 ldp
	mov	sp, x29
	.cfi_remember_state
	.cfi_def_cfa_register sp
	ldp	x29, x30, [sp], #16		/* x30: the exit trampoline, once hijacked */
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	br	x16				/* into the relocated prologue */

	.cfi_restore_state
.Lentry_slow_path:
	/* Ordinary C on the hook's behalf, with all SIMD&FP state saved. */
	sub	sp, sp, #SIMD_AREA		/* w0, the reason, is the argument */
	stp	q0, q1, [sp, #16]
	stp	q2, q3, [sp, #48]
	stp	q4, q5, [sp, #80]
	stp	q6, q7, [sp, #112]
	stp	q8, q9, [sp, #144]
	stp	q10, q11, [sp, #176]
	stp	q12, q13, [sp, #208]
	stp	q14, q15, [sp, #240]
	stp	q16, q17, [sp, #272]
	stp	q18, q19, [sp, #304]
	stp	q20, q21, [sp, #336]
	stp	q22, q23, [sp, #368]
	stp	q24, q25, [sp, #400]
	stp	q26, q27, [sp, #432]
	stp	q28, q29, [sp, #464]
	stp	q30, q31, [sp, #496]
	mrs	x1, fpcr
	mrs	x2, fpsr
	stp	x1, x2, [sp, #0]
	bl	profagent_enter_slow
	ldp	x1, x2, [sp, #0]
	msr	fpcr, x1
	msr	fpsr, x2
	ldp	q0, q1, [sp, #16]
	ldp	q2, q3, [sp, #48]
	ldp	q4, q5, [sp, #80]
	ldp	q6, q7, [sp, #112]
	ldp	q8, q9, [sp, #144]
	ldp	q10, q11, [sp, #176]
	ldp	q12, q13, [sp, #208]
	ldp	q14, q15, [sp, #240]
	ldp	q16, q17, [sp, #272]
	ldp	q18, q19, [sp, #304]
	ldp	q20, q21, [sp, #336]
	ldp	q22, q23, [sp, #368]
	ldp	q24, q25, [sp, #400]
	ldp	q26, q27, [sp, #432]
	ldp	q28, q29, [sp, #464]
	ldp	q30, q31, [sp, #496]
	add	sp, sp, #SIMD_AREA
	ldr	x16, [sp, #ENTRY_DESC]
	cbnz	w0, .Lentry_call_hook
	b	.Lentry_restore
	.cfi_endproc
END(profagent_entry_trampoline)

ENTRY(profagent_exit_trampoline)
	.cfi_startproc
	/*
	 * Entered by the instrumented function's ret: the CFA (the caller's SP)
	 * is sp itself, and before the store below there is no telling where
	 * the caller's return address is: undefined.
	 */
	.cfi_def_cfa sp, 0
	.cfi_undefined x30
	stp	x29, xzr, [sp, #-16]!		/* 0 in the return slot until the hook answers */
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov	x29, sp
	.cfi_def_cfa_register x29
	sub	sp, sp, #EXIT_FRAME
	X0_X15 stp
	str	x18, [sp, #EXIT_X18]
	stp	q0, q1, [sp, #EXIT_Q0]
	stp	q2, q3, [sp, #EXIT_Q0 + 32]
	add	x0, x29, #16			/* sp as the function returned */
	bl	profagent_exit_hook
	str	x0, [x29, #8]			/* the real return address, for unwinders */
	ldp	q0, q1, [sp, #EXIT_Q0]
	ldp	q2, q3, [sp, #EXIT_Q0 + 32]
	ldr	x18, [sp, #EXIT_X18]
	X0_X15 ldp
	mov	sp, x29
	.cfi_def_cfa_register sp
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
END(profagent_exit_trampoline)

	.section .note.GNU-stack, "", %progbits
