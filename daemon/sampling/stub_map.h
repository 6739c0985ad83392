/* SPDX-License-Identifier: MIT */
/*
 * Where the agent's stubs are (trampolines/trampoline_layout.h), from its
 * function tables: a sample taken inside a stub (the region thunk, the
 * `call region_thunk`, the relocated prologue) has no unwind info there, so
 * its registers are moved to the instrumented function it stands for, at its
 * entry or at the same offset of its prologue, where the stack looks the same;
 * and which return addresses are hijacked ones (the stubs' exit landings).
 */
#ifndef PROFD_STUB_MAP_H
#define PROFD_STUB_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stub_map;

struct stub_map *stub_map_new(void);
void stub_map_free(struct stub_map *m);

/* Stubs one map holds at most: an agent instruments at most 2^20 functions (HOT_AGG_FUNCS_MAX). */
#define STUB_MAP_MAX (1u << 21)

/*
 * The stub slot at `stub` stands for the function at func_addr; the first
 * same_offsets bytes of its relocated copy sit at their original offsets.
 * Returns 0, -EINVAL (stub not slot-aligned), -ENOSPC (STUB_MAP_MAX held),
 * -ENOMEM.
 */
int stub_map_add(struct stub_map *m, uint64_t stub, uint64_t func_addr, uint32_t same_offsets);

/* Forgets every stub (a new agent after exec). */
void stub_map_clear(struct stub_map *m);

/*
 * If regs' IP lies in a known stub (not on its landing), rewrites IP (and
 * SP in the region thunk, which runs with the stub's return address pushed)
 * to the equivalent place in the function and returns true. stack is the sample's
 * copy of [stack_addr, stack_addr + stack_size). regs indexed by perf's
 * x86-64 numbering.
 */
bool stub_map_relocate_sample(struct stub_map *m, uint64_t *regs, const uint8_t *stack,
			      uint64_t stack_addr, size_t stack_size);

/*
 * If pc lies in a known stub slot, *func_addr gets the address of the
 * function the stub stands for and true is returned. For a frame-pointer
 * chain, whose entries carry no registers to move.
 */
bool stub_map_function_at(struct stub_map *m, uint64_t pc, uint64_t *func_addr);

/*
 * Whether pc is the agent's code in a stub: the call to the region thunk,
 * the thunk, a widened branch or the jump back; not the prologue
 * instructions copied at their original offsets, which are the function's
 * own work (those stub_map_relocate_sample moves to the same offset).
 */
bool stub_map_is_agent_code(struct stub_map *m, uint64_t pc);

/*
 * Whether pc is a known stub's exit landing (x86-64: slot+5, the address its
 * call pushed): the value the agent writes into a hijacked return slot, and,
 * as a sampled pc, a function that has just returned into the exit path (its
 * real return address is in the slot right below sp), as at the exit
 * trampoline's first instruction.
 */
bool stub_map_is_landing(struct stub_map *m, uint64_t pc);

#endif
