// SPDX-License-Identifier: MIT
/*
 * x86-64 stub slots and entry jumps (see agent/patcher.h and
 * trampolines/trampoline_layout.h): the region thunk, a slot's `call
 * region_thunk` + exit landing + relocated prologue
 * (trampolines/relocator_x86_64.c) + descriptor, and the 5-byte `jmp rel32`
 * or 14-byte absolute jump at the entry.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agent/patcher.h"
#include "trampolines/relocator_x86_64.h"
#include "trampolines/return_slot_x86_64.h"
#include "trampolines/trampoline_layout.h"

_Static_assert(PATCH_NEAR_LEN == RELOCATOR_JMP_REL32_LEN, "near jump");
_Static_assert(PATCH_FAR_LEN <= PATCH_MAX_LEN, "far jump");

static void put_rel32(uint8_t *at, uint64_t next_insn, uint64_t target)
{
	int32_t rel = (int32_t)(int64_t)(target - next_insn);

	memcpy(at, &rel, sizeof(rel));
}

/*
 * Slot 0: `jmp *8(%rip)`, the address of the generic entry trampoline, and
 * that of the exit trampoline, which every slot's landing jumps through.
 */
void stub_region_write_thunk(uint8_t *thunk)
{
	static const uint8_t jmp_indirect[] = { 0xff, 0x25, 0x02, 0x00, 0x00, 0x00, 0xcc, 0xcc };
	uint64_t entry = (uint64_t)(uintptr_t)profagent_entry_trampoline;
	uint64_t exit = (uint64_t)(uintptr_t)profagent_exit_trampoline;

	_Static_assert(sizeof(jmp_indirect) == STUB_THUNK_POINTER_OFFSET, "thunk layout");
	_Static_assert(STUB_THUNK_EXIT_POINTER_OFFSET == STUB_THUNK_POINTER_OFFSET + 8, "thunk");
	memcpy(thunk, jmp_indirect, sizeof(jmp_indirect));
	memcpy(thunk + STUB_THUNK_POINTER_OFFSET, &entry, sizeof(entry));
	memcpy(thunk + STUB_THUNK_EXIT_POINTER_OFFSET, &exit, sizeof(exit));
}

/* The slot's exit landing: `jmp *exit(%rip)` through the thunk's second address. */
static void write_landing(uint8_t *s, uint64_t sa, uint64_t region)
{
	_Static_assert(STUB_LANDING_LEN == 6, "ff 25 rel32");
	s[STUB_LANDING_OFFSET] = 0xff;
	s[STUB_LANDING_OFFSET + 1] = 0x25;
	put_rel32(s + STUB_LANDING_OFFSET + 2, sa + STUB_RELOCATED_OFFSET,
		  region + STUB_THUNK_EXIT_POINTER_OFFSET);
}

size_t stub_padding_after(const uint8_t *code, size_t avail, size_t func_size)
{
	return relocator_padding_after(code, avail, func_size);
}

int stub_region_fill(struct stub_region *r, size_t slot, uint64_t func_addr, size_t func_size,
		     uint32_t func_id, uint32_t flags, struct stub_fill *fill,
		     const char **reason)
{
	uint8_t *s = r->base + (slot + 1) * STUB_SLOT_SIZE;
	uint64_t sa = (uint64_t)(uintptr_t)s;
	struct stub_desc desc = { .relocated = sa + STUB_RELOCATED_OFFSET, .func_id = func_id,
				  .flags = flags };
	struct relocation reloc = { 0 };
	int err;

	size_t jump_len = r->far ? PATCH_FAR_LEN : PATCH_NEAR_LEN;

	if (!r->far && !code_in_reach(func_addr + PATCH_NEAR_LEN, sa, STUB_NEAR_REACH)) {
		*reason = "no stub memory within reach of a 5-byte jump";
		return -ERANGE;
	}
	/* a timed call's return is hijacked: code that reads it would see the trampoline */
	err = func_id ? return_slot_read_early((const uint8_t *)(uintptr_t)func_addr, func_size) : 0;
	if (err < 0) {
		*reason = "its prologue needs libZydis, which cannot be loaded";
		return -ENOTSUP;
	}
	if (err) {
		*reason = "reads its own return address (__builtin_return_address, dladdr of its "
			  "caller): it would see the exit path";
		return -EPERM;
	}
	memset(s, 0xcc, STUB_SLOT_SIZE);
	err = relocator_relocate((const uint8_t *)(uintptr_t)func_addr, func_size, func_addr,
				 jump_len, sa + STUB_RELOCATED_OFFSET, s + STUB_RELOCATED_OFFSET,
				 STUB_RELOCATED_MAX, &reloc);
	if (err) {
		memset(s, 0xcc, STUB_SLOT_SIZE);
		if (r->far && err == -ERANGE && func_size < PATCH_FAR_LEN)
			*reason = "no stub memory within 2 GiB, and shorter than a 14-byte absolute jump";
		else
			*reason = reloc.skip_reason ? reloc.skip_reason : "relocation failed";
		return err;
	}
	s[0] = 0xe8; /* call region_thunk: pushes the landing's address */
	put_rel32(s + 1, sa + STUB_LANDING_OFFSET, (uint64_t)(uintptr_t)r->base);
	write_landing(s, sa, (uint64_t)(uintptr_t)r->base);
	memcpy(s + STUB_DESC_OFFSET, &desc, sizeof(desc));
	fill->patch_len = reloc.patch_len;
	fill->same_offsets_len = reloc.same_offsets_len;
	fill->jump_offset = 0;
	fill->jump_len = jump_len;
	return 0;
}

void patcher_encode_jump(uint8_t *jmp, const struct code_patch *p)
{
	static const uint8_t jmp_rip_indirect[6] = { 0xff, 0x25, 0, 0, 0, 0 };

	if (p->len == PATCH_FAR_LEN) {
		memcpy(jmp, jmp_rip_indirect, sizeof(jmp_rip_indirect));
		memcpy(jmp + sizeof(jmp_rip_indirect), &p->target, sizeof(p->target));
	} else {
		jmp[0] = 0xe9;
		put_rel32(jmp + 1, p->address + PATCH_NEAR_LEN, p->target);
	}
}
