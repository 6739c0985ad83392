/* SPDX-License-Identifier: MIT */
/*
 * Layout shared by trampolines/x86_64.S or trampolines/aarch64.S and the C that builds stubs
 * (agent/patcher.c): the per-function stub slot and its descriptor. The
 * assembly includes this file too, so only macros live outside the C guard;
 * agent/patcher.c checks them against the structs with _Static_assert.
 */
#ifndef PROFD_TRAMPOLINE_LAYOUT_H
#define PROFD_TRAMPOLINE_LAYOUT_H

#if defined(__x86_64__)
/*
 * A stub region is a page-aligned block near one module. Slot 0 is the
 * region's thunk: `jmp *8(%rip)`, the address of the generic entry
 * trampoline at +8 and of the exit trampoline at +16 (the agent may lie
 * more than 2 GiB away). Slots 1.. serve one function each:
 *   +0   call region_thunk             e8 <rel32>   pushes slot+5
 *   +5   jmp *exit(%rip)               ff 25 <rel32>: the function's exit landing
 *   +11  relocated prologue + jump back to the function
 *   +48  struct stub_desc
 * No register is touched before the trampoline saves them all (callers
 * compiled with IPA-RA keep values in "caller-saved" registers across calls
 * to functions known not to clobber them). The enter hook hijacks the return
 * slot with slot+5, the address the stub's call pushed: the entry trampoline
 * leaves it on the return stack buffer (it jumps into the relocated
 * prologue, no `ret`), so the function's own `ret` to its landing is
 * predicted, and so is the exit trampoline's `ret` to the real caller.
 */
#define STUB_SLOT_SIZE 64
#define STUB_CODE_OFFSET 0
#define STUB_LANDING_OFFSET 5
#define STUB_LANDING_LEN 6
#define STUB_RELOCATED_OFFSET (STUB_LANDING_OFFSET + STUB_LANDING_LEN)
#define STUB_DESC_OFFSET 48
/* From the address the stub's call pushed (slot+5, the landing) to its descriptor. */
#define STUB_RETURN_TO_DESC (STUB_DESC_OFFSET - STUB_LANDING_OFFSET)
/* The same from the relocated prologue, what the entry trampoline makes of that word. */
#define STUB_RELOCATED_TO_DESC (STUB_DESC_OFFSET - STUB_RELOCATED_OFFSET)
#define STUB_THUNK_POINTER_OFFSET 8
/*
 * Where the trampolines saved the argument and return registers, in words
 * from the hooked call's return slot (x86_64.S's stack pictures): argN
 * (N <= 6) at slot[-2 - N] (rdi at -3 ... r9 at -8), argN (N > 6) on the
 * caller's stack at slot[N - 6]; at the exit (slot = rsp - 8 as the
 * function returned) rax at slot[-8].
 */
#define ENTER_INT_ARG_REGS 6
#define ENTER_INT_ARG_WORD(n) ((n) <= ENTER_INT_ARG_REGS ? -2 - (n) : (n) - ENTER_INT_ARG_REGS)
#define EXIT_INT_RETURN_WORD (-8)
#define STUB_THUNK_EXIT_POINTER_OFFSET 16
/*
 * What the trampolines' fast paths (x86_64.S) read and write of the agent's
 * per-thread state (agent/agent_thread.h) and of the figures
 * (proto/func_aggregates.h): byte offsets and sizes, checked against the
 * structs by _Static_assert in agent/hooks.c, so a change to either struct
 * fails the build until these follow.
 */
#define HOT_THREAD_COMMITTED 0
#define HOT_THREAD_RING_BASE 8
#define HOT_THREAD_RING_END 16
#define HOT_THREAD_RETURNS_RESTORED 32
#define HOT_THREAD_AGG_PAGES 0x6108
#define HOT_THREAD_SHADOW 0x26180
#define HOT_THREAD_LANDING 0xf6580
#define HOT_SHADOW_SIZE_SHIFT 6 /* 64-byte entries */
#define HOT_SHADOW_RETURN_ADDRESS 0
#define HOT_SHADOW_RETURN_SLOT 8
#define HOT_SHADOW_FUNC_ID 16
#define HOT_SHADOW_FLAGS 20
#define HOT_SHADOW_EXIT_HEAD 24
#define HOT_SHADOW_ENTER_TSC 32
#define HOT_SHADOW_CHILD_TICKS 40
#define HOT_SHADOW_AGG 48
#define HOT_AGG_PAGE_SHIFT 6 /* AGG_PAGE_FUNCS functions a page */
#define HOT_AGG_FUNCS_MAX (1 << 20) /* AGG_PAGE_FUNCS * AGG_PAGES */
#define HOT_AGG_SIZE 832
#define HOT_AGG_EXITED 8
#define HOT_AGG_TOTAL_TICKS 40
#define HOT_AGG_SELF_TICKS 48
#define HOT_AGG_MAX_TICKS 56
#define HOT_STATE_DEPTH_BITS 16
#define HOT_SHADOW_RECORDED 1
#define HOT_EVENT_ENTER 1
#define HOT_EVENT_EXIT 2
#define HOT_RECORDING_PLAIN 1 /* agent_recording: on, no --min-duration */
#elif defined(__aarch64__)
/*
 * A stub region is a page-aligned block within +-128 MiB of one module (a
 * `b` reaches it), or +-4 GiB (adrp/add/br x16). Slot 0 is the region's
 * thunk: `ldr x17, #8; br x17` then the address of the generic entry
 * trampoline at +8. Slots 1.. serve one function each:
 *   +0   nop, or autiasp/autibsp when the function's paciasp/pacibsp stays
 *        in place (a landing pad): x30 arrives signed, the trampoline and the
 *        shadow stack see it plain
 *   +4   adr x16, +DESC                the descriptor, for the trampoline
 *   +8   b region_thunk
 *   +12  relocated prologue (after a `paciasp`/`pacibsp` that signs again
 *        whatever x30 the trampoline left, with the entry's SP, when +0
 *        authenticated) + branch back to the function
 *   +144 struct stub_desc
 * Only x16/x17 (IP0/IP1) are touched before the trampoline saves the rest:
 * the AAPCS64 lets a veneer clobber them on the way to any callee, and GCC's
 * calls clobber them whatever IPA-RA knows of the callee.
 */
#define STUB_SLOT_SIZE 160
/*
 * Where the trampolines saved the argument and return registers, in words
 * from the hooked call's return slot (aarch64.S's frames; the slot is
 * sp_entry - 8 at the enter, sp - 8 as the function returned at the exit):
 * argN (N <= 8, x0-x7) at slot[N - 38], argN (N > 8) on the caller's stack
 * at slot[N - 8] (AAPCS64: 8 bytes each); fpargN (d0-d7, the low half of
 * q0-q7) at slot[2N - 19]; at the exit x0 at slot[-27] and d0 at slot[-9].
 * aarch64.S checks its frames against these (.if/.error).
 */
#define ENTER_INT_ARG_REGS 8
#define ENTER_INT_REG_WORD(n) ((n) - 38)
#define ENTER_INT_ARG_WORD(n) \
	((n) <= ENTER_INT_ARG_REGS ? ENTER_INT_REG_WORD(n) : (n) - ENTER_INT_ARG_REGS)
#define ENTER_FP_ARG_WORD(n) (2 * (n) - 19)
#define EXIT_INT_RETURN_WORD (-27)
#define EXIT_FP_RETURN_WORD (-9)
#define STUB_CODE_OFFSET 0
#define STUB_RELOCATED_OFFSET 12
#define STUB_DESC_OFFSET 144
#define STUB_THUNK_POINTER_OFFSET 8
#else
#error "no trampolines for this architecture (x86_64, aarch64)"
#endif
#define STUB_RELOCATED_MAX (STUB_DESC_OFFSET - STUB_RELOCATED_OFFSET)

/* struct stub_desc field offsets, for the assembly */
#define STUB_DESC_RELOCATED 0
#define STUB_DESC_FUNC_ID 8
#define STUB_DESC_FLAGS 12

#ifndef __ASSEMBLER__
#include <stdint.h>

/* Functions that walk or unwind the stack: hijacked return addresses must go first. */
#define STUB_FLAG_UNWINDER 1u
/* Where a caught exception lands (__cxa_begin_catch): the surviving frames are hijacked again. */
#define STUB_FLAG_CATCH 2u
/* The loader's debugger hook (_dl_debug_state): a module came or went. */
#define STUB_FLAG_MODULES 4u
/*
 * aarch64: the function begins with paciasp (key A) or pacibsp (key B), so
 * the home of its return address holds it signed with the entry SP. Told by
 * the slot, not by the word: 7 PAC bits under qemu's top-byte-ignore are 0
 * once in 128 signings, and a signed address then looks plain.
 */
#define STUB_FLAG_SIGNS_RA_A 8u
#define STUB_FLAG_SIGNS_RA_B 16u
/*
 * Go's runtime.exit: the process ends by a raw exit_group, no destructor
 * runs; the enter hook has the flusher send everything first. Go code: never
 * hijacked, never timed.
 */
#define STUB_FLAG_GO_EXIT 32u
/*
 * A function of a module with V8 in it: a call whose return address is not
 * in V8's compiled C++ (agent/jit_callers.h) came from generated code, which
 * may read or rewrite that address; it is counted, not hijacked.
 */
#define STUB_FLAG_JIT_CALLERS 64u
/*
 * libc's _exit (and _Exit): the process ends by exit_group without the
 * destructors that send the agent's last figures (a forked child's usual
 * end), so the enter hook has the slow path send them first. Never timed.
 */
#define STUB_FLAG_PROCESS_EXIT 128u
/*
 * An --args/--retval spec applies (agent/arg_capture.h): the enter goes to
 * the hooks' slow path, which records the values with the ENTER (and marks
 * the shadow entry for the return value). Functions without it pay nothing.
 */
#define STUB_FLAG_ARGS 256u
/*
 * libc's execve, execveat and fexecve (every exec* of libc ends in one):
 * the image and its agent are about to go, with no destructor; the enter
 * hook has the slow path send what it holds first. Never timed.
 */
#define STUB_FLAG_PROCESS_EXEC 512u

/* What the enter hook may ask the trampoline's slow path for. */
#define HOOK_SLOW_THREAD 1  /* the thread's first call: set up its state, then ask again */
#define HOOK_SLOW_MODULES 2 /* instrument modules loaded since the last look */
#define HOOK_SLOW_MEMORY 3  /* a ring segment or an aggregates page, then ask again */
#define HOOK_SLOW_EXIT 4    /* _exit: send what the agent holds (STUB_FLAG_PROCESS_EXIT) */
#define HOOK_SLOW_EXEC 5    /* exec: the same, and record on if it fails (STUB_FLAG_PROCESS_EXEC) */

struct stub_desc {
	uint64_t relocated; /* address of the relocated prologue in the same slot */
	uint32_t func_id;   /* 0 for a function patched only for its flags */
	uint32_t flags;     /* STUB_FLAG_* */
};

_Static_assert(sizeof(struct stub_desc) == STUB_SLOT_SIZE - STUB_DESC_OFFSET, "slot layout");
_Static_assert(__builtin_offsetof(struct stub_desc, relocated) == STUB_DESC_RELOCATED, "asm offset");
_Static_assert(__builtin_offsetof(struct stub_desc, func_id) == STUB_DESC_FUNC_ID, "asm offset");
_Static_assert(__builtin_offsetof(struct stub_desc, flags) == STUB_DESC_FLAGS, "asm offset");

/* Implemented in trampolines/$(ARCH).S. */
void profagent_entry_trampoline(void);
void profagent_exit_trampoline(void);

/* Implemented in agent/hooks.c, called only from the trampolines. */
int profagent_enter_hook(const struct stub_desc *desc, uintptr_t *return_slot);
uintptr_t profagent_exit_hook(uintptr_t stack_pointer);
/* agent/agent.c: the slow path, called with vector state saved; returns 1 to ask the hook again. */
int profagent_enter_slow(int reason);
/* agent/threads.c: a thread's first call. */
void profagent_thread_attach_slow(void);
#endif

#endif
