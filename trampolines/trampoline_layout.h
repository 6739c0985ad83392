/* SPDX-License-Identifier: MIT */
/*
 * Layout shared by trampolines/x86_64.S and the C that builds stubs
 * (agent/patcher.c): the per-function stub slot and its descriptor. The
 * assembly includes this file too, so only macros live outside the C guard;
 * agent/patcher.c checks them against the structs with _Static_assert.
 */
#ifndef PROFD_TRAMPOLINE_LAYOUT_H
#define PROFD_TRAMPOLINE_LAYOUT_H

/*
 * A stub region is a page-aligned block near one module: slot 0 holds the
 * address of the generic entry trampoline, slots 1.. one function each:
 *   +0   lea  desc(%rip), %r11        4c 8d 1d <rel32>
 *   +7   jmp  *region_entry(%rip)     ff 25 <rel32>
 *   +13  relocated prologue + jump back to the function
 *   +48  struct stub_desc
 */
#define STUB_SLOT_SIZE 64
#define STUB_CODE_OFFSET 0
#define STUB_RELOCATED_OFFSET 13
#define STUB_DESC_OFFSET 48
#define STUB_RELOCATED_MAX (STUB_DESC_OFFSET - STUB_RELOCATED_OFFSET)

/* struct stub_desc field offsets, for the assembly */
#define STUB_DESC_RELOCATED 0
#define STUB_DESC_FUNC_ID 8

#ifndef __ASSEMBLER__
#include <stdint.h>

struct stub_desc {
	uint64_t relocated; /* address of the relocated prologue in the same slot */
	uint32_t func_id;
	uint32_t reserved;
};

_Static_assert(sizeof(struct stub_desc) == STUB_SLOT_SIZE - STUB_DESC_OFFSET, "slot layout");
_Static_assert(__builtin_offsetof(struct stub_desc, relocated) == STUB_DESC_RELOCATED, "asm offset");
_Static_assert(__builtin_offsetof(struct stub_desc, func_id) == STUB_DESC_FUNC_ID, "asm offset");

/* Implemented in trampolines/x86_64.S. */
void profagent_entry_trampoline(void);
void profagent_exit_trampoline(void);

/* Implemented in agent/hooks.c, called only from the trampolines. */
int profagent_enter_hook(const struct stub_desc *desc, uintptr_t *return_slot);
uintptr_t profagent_exit_hook(uintptr_t stack_pointer);
/* agent/threads.c: the once-per-thread slow path, called with vector state saved. */
void profagent_thread_attach_slow(void);
#endif

#endif
