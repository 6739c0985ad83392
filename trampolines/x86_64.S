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
 * saved on the hook path because the hooks are compiled with
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
 *
 * The fast paths. Each trampoline first does the plainest case of its hook
 * itself (agent/hooks.c: profagent_enter_hook's and profagent_exit_hook's
 * fast paths, the same stores in the same order, under the same guard, one
 * publish): no call, so only the eight registers it works with are saved
 * (rdi .. r10 of the nine above, in the full path's order and places, after
 * rbp, the frame pointer as in the full path). Anything else (a guard set,
 * the thread's first call, a stub flag, a filter, a full segment, a stale or
 * unrecorded entry, no figures yet) is found before the first write, the
 * guard is dropped again, and the full path goes on from the same stack and
 * frame: it saves r11 and calls the C hook, which decides it all anew. Where
 * the C tests the depth before touching the entry below the top, these use
 * the thread's shadow_floor (shadow[-1], agent_thread.h) instead: one branch
 * less, and at depth 1 the exit adds its ticks to child time nobody reads.
 * A signal anywhere in a fast path finds what it would find in the C hook at
 * the same point (test_signal_steps walks them).
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

/*
 * The fast paths' saves, where the full path keeps them: rbp, set up as the
 * frame pointer at once (a frame-pointer chain through a fast path reads
 * what it reads through the full path: the relocated prologue's address at
 * the entry, the placeholder 0 at the exit), then rdi .. r10, the eight
 * registers they work with. They call nothing: vector state is untouched,
 * rsp unaligned.
 */
#define FAST_SAVED 72
/* After FAST_PUSH: the entry's stub word and return slot; the exit's return slot (its 0). */
#define EF_WORD FAST_SAVED
#define EF_SLOT (FAST_SAVED + 8)
#define XF_SLOT FAST_SAVED
.macro FAST_PUSH
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq	%rsp, %rbp
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	pushq	%r8
	.cfi_adjust_cfa_offset 8
	pushq	%r9
	.cfi_adjust_cfa_offset 8
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	pushq	%r10
	.cfi_adjust_cfa_offset 8
.endm

.macro FAST_POP
	popq	%r10
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	popq	%r9
	.cfi_adjust_cfa_offset -8
	popq	%r8
	.cfi_adjust_cfa_offset -8
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_same_value %rbp
.endm

/*
 * From a fast path to the full one: the last of its saves; rbp is its frame
 * already (cfa: the CFA's offset from it).
 */
.macro FULL_FROM_FAST below, cfa
	pushq	%r11
	.cfi_adjust_cfa_offset 8
	subq	$\below, %rsp
	.cfi_def_cfa %rbp, \cfa
.endm

/* The hooks' guard dropped (hooks.c guard_release); rax is scratch. */
.macro GUARD_RELEASE
	movq	agent_thread_guard@gottpoff(%rip), %rax
	movq	$0, %fs:(%rax)
.endm

/* A thread variable of the agent's (initial-exec) into reg. */
.macro TLS_LOAD var, reg
	movq	\var@gottpoff(%rip), \reg
	movq	%fs:(\reg), \reg
.endm

	.text

ENTRY(profagent_entry_trampoline)
	.cfi_startproc
	.cfi_def_cfa_offset 16
	endbr64
	/*
	 * The word the stub's call pushed becomes the relocated prologue's
	 * address at once: where we leave to, and what a frame-pointer chain
	 * through the full path's frame reads (the function just entered),
	 * never a landing, which in a chain is a hijacked return (profd tells
	 * them by value).
	 */
	addq	$STUB_RELOCATED_OFFSET-STUB_LANDING_OFFSET, (%rsp)
	FAST_PUSH
	/*
	 * profagent_enter_hook's fast-path conditions: no stub flag (a spec's
	 * calls go on to enter_with_args at once; aarch64's signing flags never
	 * come here), then under the guard: no unwinder's restore, figures for
	 * the function, no filter, recording, no stale entry on top, room for
	 * the ENTER and every open call's EXIT.
	 */
	movq	EF_WORD(%rsp), %rax
	cmpl	$0, STUB_RELOCATED_TO_DESC+STUB_DESC_FLAGS(%rax)
	jne	.Lentry_fast_out
	movl	STUB_RELOCATED_TO_DESC+STUB_DESC_FUNC_ID(%rax), %r8d
	TLS_LOAD agent_current_thread, %rdi
	movq	agent_thread_guard@gottpoff(%rip), %rdx
	cmpq	$0, %fs:(%rdx)
	jne	.Lentry_fast_out		/* agent code or a hook below us */
	testq	%rdi, %rdi
	jz	.Lentry_fast_out		/* the thread's first call */
	leaq	EF_SLOT(%rsp), %rsi
	movq	%rsi, %fs:(%rdx)		/* the guard: hooks.c guard_take */
	cmpl	$0, HOT_THREAD_RETURNS_RESTORED(%rdi)
	jne	.Lentry_fast_release
	movl	%r8d, %eax			/* below HOT_AGG_FUNCS_MAX: instrument.c */
	shrl	$HOT_AGG_PAGE_SHIFT, %eax
	movq	HOT_THREAD_AGG_PAGES(%rdi,%rax,8), %r9
	testq	%r9, %r9
	jz	.Lentry_fast_release
	cmpl	$HOT_RECORDING_PLAIN, agent_recording(%rip)	/* on, no --min-duration */
	jne	.Lentry_fast_release
	movq	HOT_THREAD_COMMITTED(%rdi), %rcx	/* s: head << 16 | depth */
	movzwl	%cx, %edx
	cmpl	agent_depth_limit(%rip), %edx
	jae	.Lentry_fast_release
	movq	%rdx, %r10
	shlq	$HOT_SHADOW_SIZE_SHIFT, %r10
	addq	%rdi, %r10			/* shadow[depth] at HOT_THREAD_SHADOW(%r10) */
	/* at depth 0 shadow[-1] is the floor, whose slot is above every other */
	cmpq	HOT_THREAD_SHADOW-64+HOT_SHADOW_RETURN_SLOT(%r10), %rsi
	jae	.Lentry_fast_release
	movq	%rcx, %rax
	shrq	$HOT_STATE_DEPTH_BITS, %rax
	leaq	3(%rax,%rdx), %rax
	cmpq	%rax, HOT_THREAD_RING_END(%rdi)
	jb	.Lentry_fast_release
	/* the call is ours: its figures, its clock read, its entry and ENTER */
	movl	%r8d, %eax
	andl	$(1 << HOT_AGG_PAGE_SHIFT) - 1, %eax
	imulq	$HOT_AGG_SIZE, %rax, %rax
	addq	%rax, %r9			/* a */
	rdtsc
	shlq	$32, %rdx
	orq	%rdx, %rax			/* tsc */
	movq	(%rsi), %rdx			/* the caller's return address */
	movq	%rdx, HOT_THREAD_SHADOW+HOT_SHADOW_RETURN_ADDRESS(%r10)
	movq	%rsi, HOT_THREAD_SHADOW+HOT_SHADOW_RETURN_SLOT(%r10)
	movl	%r8d, HOT_THREAD_SHADOW+HOT_SHADOW_FUNC_ID(%r10)
	movl	$HOT_SHADOW_RECORDED, HOT_THREAD_SHADOW+HOT_SHADOW_FLAGS(%r10)
	movq	$-1, HOT_THREAD_SHADOW+HOT_SHADOW_EXIT_HEAD(%r10)
	movq	%rax, HOT_THREAD_SHADOW+HOT_SHADOW_ENTER_TSC(%r10)
	movq	$0, HOT_THREAD_SHADOW+HOT_SHADOW_CHILD_TICKS(%r10)
	movq	%r9, HOT_THREAD_SHADOW+HOT_SHADOW_AGG(%r10)
	movzwl	%cx, %r9d
	movq	EF_WORD(%rsp), %r10
	subq	$STUB_RELOCATED_OFFSET-STUB_LANDING_OFFSET, %r10	/* the landing */
	movq	%r10, HOT_THREAD_LANDING(%rdi,%r9,8)
	movq	%rcx, %r9
	shrq	$HOT_STATE_DEPTH_BITS, %r9
	shlq	$4, %r9
	addq	HOT_THREAD_RING_BASE(%rdi), %r9	/* the ENTER, its frame after it */
	movq	%rax, (%r9)
	movl	%r8d, 8(%r9)
	movl	$HOT_EVENT_ENTER, 12(%r9)
	movq	%rdx, 16(%r9)
	movq	%rsi, 24(%r9)
	addq	$(2 << HOT_STATE_DEPTH_BITS) + 1, %rcx
	movq	%rcx, HOT_THREAD_COMMITTED(%rdi)	/* publish (hooks.c state_publish) */
	movq	%r10, (%rsi)			/* hijacked */
	GUARD_RELEASE
	.cfi_remember_state
	FAST_POP
	/* into the relocated prologue, the landing left on the RSB (as .Lentry_hijacked) */
	leaq	8(%rsp), %rsp
	.cfi_adjust_cfa_offset -8
	jmp	*-8(%rsp)

	.cfi_restore_state
.Lentry_fast_release:
	/* nothing written: the full path decides it all again */
	GUARD_RELEASE
.Lentry_fast_out:
	FULL_FROM_FAST 16, 24
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
	FAST_PUSH
	TLS_LOAD agent_current_thread, %rdi
	movq	agent_thread_guard@gottpoff(%rip), %rdx
	cmpq	$0, %fs:(%rdx)
	jne	.Lexit_fast_out			/* agent code, or a guard a siglongjmp left */
	testq	%rdi, %rdi
	jz	.Lexit_fast_out
	leaq	XF_SLOT(%rsp), %rsi
	movq	%rsi, %fs:(%rdx)		/* the guard: hooks.c guard_take */
	rdtsc
	shlq	$32, %rdx
	orq	%rdx, %rax			/* tsc */
	/* profagent_exit_hook's fast-path conditions: the top entry's, recorded, with figures */
	movq	HOT_THREAD_COMMITTED(%rdi), %rcx	/* s: head << 16 | depth */
	movzwl	%cx, %edx
	shlq	$HOT_SHADOW_SIZE_SHIFT, %rdx
	leaq	HOT_THREAD_SHADOW-64(%rdi,%rdx), %r10	/* e = shadow[depth - 1] */
	cmpq	%rsi, HOT_SHADOW_RETURN_SLOT(%r10)	/* at depth 0, the floor's: never */
	jne	.Lexit_fast_release
	/* recorded: a function's (an earlier session's calls have no flags, agent.c) */
	cmpl	$HOT_SHADOW_RECORDED, HOT_SHADOW_FLAGS(%r10)
	jne	.Lexit_fast_release
	movq	HOT_SHADOW_AGG(%r10), %r9	/* a */
	testq	%r9, %r9
	jz	.Lexit_fast_release
	/*
	 * hooks.c agg_close_figures: this call's figures (its entry's cleared
	 * first) and its caller's child time; its duration's bucket is profd's,
	 * from the EXIT below.
	 */
	xorl	%edx, %edx
	movq	%rax, %r8
	subq	HOT_SHADOW_ENTER_TSC(%r10), %r8
	cmovbq	%rdx, %r8			/* ticks, 0 if the clock went back */
	movq	%r8, %rsi
	subq	HOT_SHADOW_CHILD_TICKS(%r10), %rsi
	cmovbq	%rdx, %rsi			/* self */
	movq	%rdx, HOT_SHADOW_AGG(%r10)
	addq	%r8, HOT_SHADOW_CHILD_TICKS-64(%r10)	/* at depth 1, the floor's: unread */
	addq	$1, HOT_AGG_EXITED(%r9)
	addq	%r8, HOT_AGG_TOTAL_TICKS(%r9)
	addq	%rsi, HOT_AGG_SELF_TICKS(%r9)
	movq	HOT_AGG_MAX_TICKS(%r9), %rsi
	cmpq	%r8, %rsi
	cmovbq	%r8, %rsi
	movq	%rsi, HOT_AGG_MAX_TICKS(%r9)
	/* the EXIT, then the publish that pops the entry (rcx: s) */
	movq	%rcx, %rdx
	shrq	$HOT_STATE_DEPTH_BITS, %rdx
	shlq	$4, %rdx
	addq	HOT_THREAD_RING_BASE(%rdi), %rdx
	movq	%rax, (%rdx)
	movl	HOT_SHADOW_FUNC_ID(%r10), %esi
	movl	%esi, 8(%rdx)
	movl	$HOT_EVENT_EXIT, 12(%rdx)
	movq	HOT_SHADOW_RETURN_ADDRESS(%r10), %rax	/* before the publish pops e */
	addq	$(1 << HOT_STATE_DEPTH_BITS) - 1, %rcx
	movq	%rcx, HOT_THREAD_COMMITTED(%rdi)	/* publish */
	movq	%rax, XF_SLOT(%rsp)		/* the real return address, where the 0 was */
	GUARD_RELEASE
	.cfi_remember_state
	FAST_POP
	ret

	.cfi_restore_state
.Lexit_fast_release:
	/* nothing written: the full path decides it all again */
	GUARD_RELEASE
.Lexit_fast_out:
	FULL_FROM_FAST 8, 16
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
