// SPDX-License-Identifier: MIT
/*
 * aarch64 stub slots and entry jumps (see agent/patcher.h and
 * trampolines/trampoline_layout.h): the region thunk, a slot's
 * nop/autia/autib + `adr x16, desc` + `b region_thunk`, the relocated
 * prologue (trampolines/aarch64/relocator_aarch64.c) and the descriptor, and
 * the entry jump: `b`, or adrp/add/br x16, after a landing pad kept in place.
 *
 * A landing pad (`bti c`, `paciasp`...) stays where it is, so that an
 * indirect call on a BTI-guarded page still lands on it, and the jump goes
 * right after it; the copy starts with the pad all the same (displaced with
 * the jump's words, so the relocator also refuses branches into it). For
 * `paciasp`/`pacibsp` that gives the pointer-authentication dance: the pad
 * in place signs x30 with the entry SP, the slot's autiasp/autibsp checks
 * and strips it (the shadow stack keeps plain addresses, as x86-64's), and
 * the copied pad signs whatever x30 the trampoline left (the exit
 * trampoline's address, once hijacked) with the same SP, which the
 * function's own autiasp/retaa then checks. No key or modifier is handled
 * outside those three instructions on a call's way, and all are NOPs where
 * pointer authentication is off. Only an unwinder's restore re-signs (the
 * real return address, agent/hooks.c), with the key the descriptor names.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agent/patcher.h"
#include "trampolines/aarch64/relocator_aarch64.h"
#include "trampolines/trampoline_layout.h"

#define A64_AUTIASP 0xd50323bfu
#define A64_AUTIBSP 0xd50323ffu
#define A64_LDR_X17_LITERAL_8 0x58000051u /* ldr x17, #8 */
#define A64_BR_X17 0xd61f0220u

_Static_assert(PATCH_NEAR_LEN == RELOCATOR_A64_B_LEN, "near jump");
_Static_assert(PATCH_FAR_LEN == RELOCATOR_A64_FAR_LEN, "far jump");
_Static_assert(4 + PATCH_FAR_LEN <= RELOCATOR_A64_MAX_PATCH_LEN, "pad + jump relocate together");
_Static_assert(4 + PATCH_FAR_LEN <= PATCH_MAX_LEN, "pad + jump fit the saved bytes");
_Static_assert(4 + RELOCATOR_A64_MAX_CODE_LEN <= STUB_RELOCATED_MAX, "a copy fits its slot");

static void put_word(uint8_t *at, uint32_t w)
{
	memcpy(at, &w, sizeof(w));
}

static uint32_t get_word(const uint8_t *at)
{
	uint32_t w;

	memcpy(&w, at, sizeof(w));
	return w;
}

/* Slot 0: `ldr x17, #8; br x17` and the address of the generic entry trampoline. */
void stub_region_write_thunk(uint8_t *thunk)
{
	uint64_t entry = (uint64_t)(uintptr_t)profagent_entry_trampoline;

	put_word(thunk, A64_LDR_X17_LITERAL_8);
	put_word(thunk + 4, A64_BR_X17);
	memcpy(thunk + STUB_THUNK_POINTER_OFFSET, &entry, sizeof(entry));
}

/* Fixed-width instructions: a function of 4 bytes or more always has room for `b`. */
size_t stub_padding_after(const uint8_t *code, size_t avail, size_t func_size)
{
	(void)code, (void)avail, (void)func_size;
	return 0;
}

/*
 * STUB_FLAG_SIGNS_RA_*: the function signs x30 with its entry SP, wherever
 * its prologue does it (relocator_a64_return_signer): as the pad, right
 * after a `bti c` pad (the copy in the slot does it then) or further on, in
 * place. An unwinder's restore needs it for every signer (agent/hooks.c,
 * restored_return): with 1 entry SP in 128 the function's signature of the
 * exit trampoline's address is that address (a 7-bit PAC of 0), and only
 * the flag says the unwinder will authenticate it. Looking at the first
 * two words alone missed `bti c; mov x3, x0; paciasp`, whose restored
 * return address then went back unsigned: backtrace() crashed in ~1 run of
 * 128 under qemu-user, which draws new keys each run.
 */
static uint32_t return_signing_flags(const uint8_t *code, size_t func_size)
{
	uint32_t signer = relocator_a64_return_signer(code, func_size);

	return signer == A64_PACIASP ? STUB_FLAG_SIGNS_RA_A :
	       signer == A64_PACIBSP ? STUB_FLAG_SIGNS_RA_B :
				       0;
}

/* The slot's first word: authenticate x30 when the pad left in place signed it. */
static uint32_t slot_auth_word(uint32_t pad)
{
	return pad == A64_PACIASP ? A64_AUTIASP : pad == A64_PACIBSP ? A64_AUTIBSP : A64_NOP;
}

int stub_region_fill(struct stub_region *r, size_t slot, uint64_t func_addr, size_t func_size,
		     uint32_t func_id, uint32_t flags, struct stub_fill *fill,
		     const char **reason)
{
	const uint8_t *code = (const uint8_t *)(uintptr_t)func_addr;
	uint8_t *s = r->base + (slot + 1) * STUB_SLOT_SIZE;
	uint64_t sa = (uint64_t)(uintptr_t)s;
	struct stub_desc desc = { .relocated = sa + STUB_RELOCATED_OFFSET, .func_id = func_id,
				  .flags = flags };
	size_t pad = relocator_a64_landing_pad_len(code, func_size);
	uint8_t jump[PATCH_FAR_LEN];
	struct relocation_a64 reloc = { 0 };
	int jump_len, err;

	/* the encoder's own choice of `b` or adrp/add/br: patcher_encode_jump makes it again */
	jump_len = relocator_a64_encode_patch(func_addr + pad, sa, jump, sizeof(jump));
	if (jump_len < 0) {
		*reason = "no stub memory within 4 GiB (the reach of adrp/add/br x16)";
		return jump_len;
	}
	/*
	 * A pad says the module may be BTI-guarded, where the far copy's way back
	 * (`br x17` to a word that is no pad) would fault: near stubs only.
	 */
	if (pad && jump_len != PATCH_NEAR_LEN) {
		*reason = "a BTI landing pad, and no stub memory within 128 MiB (a far patch's "
			  "branch back would fault on a guarded page)";
		return -ERANGE;
	}
	memset(s, 0, STUB_SLOT_SIZE); /* udf #0 wherever no code goes */
	err = relocator_a64_relocate(code, func_size, func_addr, pad + (size_t)jump_len,
				     sa + STUB_RELOCATED_OFFSET, func_addr + pad + (size_t)jump_len,
				     s + STUB_RELOCATED_OFFSET, STUB_RELOCATED_MAX, &reloc);
	if (err) {
		*reason = reloc.skip_reason ? reloc.skip_reason : "relocation failed";
		return err;
	}
	put_word(s, slot_auth_word(pad ? get_word(code) : 0));
	desc.flags |= return_signing_flags(code, func_size);
	put_word(s + 4, relocator_a64_enc_adr(16, sa + 4, sa + STUB_DESC_OFFSET));
	put_word(s + 8, relocator_a64_enc_b(sa + 8, (uint64_t)(uintptr_t)r->base));
	memcpy(s + STUB_DESC_OFFSET, &desc, sizeof(desc));
	fill->patch_len = reloc.patch_len;
	fill->same_offsets_len = reloc.same_offsets_len;
	fill->jump_offset = pad;
	fill->jump_len = (size_t)jump_len;
	return 0;
}

void patcher_encode_jump(uint8_t *jmp, const struct code_patch *p)
{
	relocator_a64_encode_patch(p->address, p->target, jmp, p->len);
}
