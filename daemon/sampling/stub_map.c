// SPDX-License-Identifier: MIT
/*
 * The stub map (see stub_map.h): a sorted array of slots, looked up by
 * binary search; tables arrive rarely (start, dlopen), lookups per sample.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sampling/stub_map.h"
#include "trampolines/trampoline_layout.h"

struct stub_entry {
	uint64_t stub, func_addr;
	uint32_t same_offsets;
};

struct stub_map {
	struct stub_entry *entries;
	size_t n, cap;
	bool sorted;
};

struct stub_map *stub_map_new(void)
{
	return calloc(1, sizeof(struct stub_map));
}

void stub_map_free(struct stub_map *m)
{
	if (!m)
		return;
	free(m->entries);
	free(m);
}

void stub_map_clear(struct stub_map *m)
{
	m->n = 0;
}

int stub_map_add(struct stub_map *m, uint64_t stub, uint64_t func_addr, uint32_t same_offsets)
{
	if (stub == 0 || stub % STUB_SLOT_SIZE)
		return -EINVAL;
	if (m->n >= STUB_MAP_MAX)
		return -ENOSPC; /* an agent's tables are hostile input: memory stays bounded */
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16; /* a process of a tree has a few */
		struct stub_entry *e = realloc(m->entries, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		m->entries = e;
		m->cap = cap;
	}
	m->entries[m->n++] = (struct stub_entry){ stub, func_addr, same_offsets };
	m->sorted = false;
	return 0;
}

static int by_stub(const void *a, const void *b)
{
	const struct stub_entry *x = a, *y = b;

	return (x->stub > y->stub) - (x->stub < y->stub);
}

static const struct stub_entry *find_slot(struct stub_map *m, uint64_t slot)
{
	size_t lo = 0, hi = m->n;

	if (!m->sorted) {
		qsort(m->entries, m->n, sizeof(m->entries[0]), by_stub);
		m->sorted = true;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->entries[mid].stub == slot)
			return &m->entries[mid];
		if (m->entries[mid].stub < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* In a function's slot: at its entry, or at the same offset of its prologue. */
static bool relocate_in_slot(const struct stub_entry *e, uint64_t *regs)
{
	uint64_t off = regs[PERF_REG_X86_IP] - e->stub;

	if (off < STUB_LANDING_OFFSET) { /* the call to the thunk: nothing ran yet */
		regs[PERF_REG_X86_IP] = e->func_addr;
		return true;
	}
	if (off < STUB_RELOCATED_OFFSET)
		return false; /* the landing: the function has returned (stub_map_is_landing) */
	if (off - STUB_RELOCATED_OFFSET >= e->same_offsets)
		return false; /* a widened branch or the jump back: no equivalent place */
	regs[PERF_REG_X86_IP] = e->func_addr + (off - STUB_RELOCATED_OFFSET);
	return true;
}

/*
 * In the region thunk (the slot before the region's first function): the
 * stub's call pushed slot+5 (its landing) on top of the function's return
 * address; the function has not started.
 */
static bool relocate_in_thunk(struct stub_map *m, uint64_t *regs, const uint8_t *stack,
			      uint64_t stack_addr, size_t stack_size)
{
	uint64_t sp = regs[PERF_REG_X86_SP], pushed;
	const struct stub_entry *e;

	if (sp < stack_addr || sp - stack_addr + sizeof(pushed) > stack_size)
		return false;
	memcpy(&pushed, stack + (sp - stack_addr), sizeof(pushed));
	e = find_slot(m, pushed - STUB_LANDING_OFFSET);
	if (!e)
		return false;
	regs[PERF_REG_X86_IP] = e->func_addr;
	regs[PERF_REG_X86_SP] = sp + sizeof(pushed);
	return true;
}

bool stub_map_relocate_sample(struct stub_map *m, uint64_t *regs, const uint8_t *stack,
			      uint64_t stack_addr, size_t stack_size)
{
	uint64_t slot = regs[PERF_REG_X86_IP] & ~(uint64_t)(STUB_SLOT_SIZE - 1);
	const struct stub_entry *e;

	if (m->n == 0)
		return false;
	e = find_slot(m, slot);
	if (e)
		return relocate_in_slot(e, regs);
	if (find_slot(m, slot + STUB_SLOT_SIZE) && regs[PERF_REG_X86_IP] - slot < 16)
		return relocate_in_thunk(m, regs, stack, stack_addr, stack_size);
	return false;
}

bool stub_map_function_at(struct stub_map *m, uint64_t pc, uint64_t *func_addr)
{
	const struct stub_entry *e;

	if (m->n == 0)
		return false;
	e = find_slot(m, pc & ~(uint64_t)(STUB_SLOT_SIZE - 1));
	if (e)
		*func_addr = e->func_addr;
	return e != NULL;
}

bool stub_map_is_agent_code(struct stub_map *m, uint64_t pc)
{
	uint64_t slot = pc & ~(uint64_t)(STUB_SLOT_SIZE - 1), off = pc - slot;
	const struct stub_entry *e;

	if (m->n == 0)
		return false;
	e = find_slot(m, slot);
	if (e)
		return off < STUB_RELOCATED_OFFSET ||
		       off - STUB_RELOCATED_OFFSET >= e->same_offsets;
	return off < 16 && find_slot(m, slot + STUB_SLOT_SIZE); /* the region thunk */
}

bool stub_map_is_landing(struct stub_map *m, uint64_t pc)
{
	if (m->n == 0 || pc % STUB_SLOT_SIZE != STUB_LANDING_OFFSET)
		return false;
	return find_slot(m, pc - STUB_LANDING_OFFSET) != NULL;
}
