/* SPDX-License-Identifier: MIT */
/*
 * aarch64 prologue relocator: copies the first instructions of a function,
 * re-encoded to run at another address, and decides whether the function can
 * be patched at all. Pure encoding (no arm64 headers, builds and is tested on
 * x86-64): reads the words it is given, writes only `out`; anything it cannot
 * prove safe is a skip reason, as in trampolines/relocator_x86_64.h.
 *
 * The patch at the entry is either
 *   b stub                            4 bytes, stub within +-128 MiB, or
 *   adrp x16, stub; add x16, x16, #lo12(stub); br x16
 *                                     12 bytes, stub within +-4 GiB.
 * (Three instructions are 12 bytes, not 16: a 16-byte form would be
 * `ldr x16, #8; br x16; .quad stub`, which reaches anywhere but puts data in
 * the text; stubs are allocated near the code, so 12 suffices.)
 * x16 (IP0) because the AAPCS64 lets a veneer or PLT stub clobber x16/x17
 * between a call and the callee's entry, so no caller can have a live value
 * there; and because on a BTI-guarded page `br x16`/`br x17` is the only
 * register branch a `bti c` landing pad (the stub's first instruction)
 * accepts. The relocated code uses the other one, x17 (IP1), as its scratch
 * register, so the far patch and the copy never fight over one register.
 *
 * BTI and pointer authentication at the entry. `bti c`/`bti jc` and
 * `paciasp`/`pacibsp` are hints and relocate as they are. But both are also
 * landing pads: on a BTI-guarded page (PROT_BTI, "bt" in smaps' VmFlags) an
 * indirect call that lands on the patch's `b` instead of the pad faults. So
 * there the patch goes after the pad (relocator_a64_landing_pad_len()). The
 * agent (agent/stub_slot_aarch64.c) always leaves a pad in place and
 * relocates it together with the jump's words (patch_len = 4 + 4 or 4 + 12:
 * a patch_len of 12 or more is the far form, whose x16 a displaced
 * instruction must not use). The choices for the hijacked return were:
 *  - pad copied (unguarded page, the patch overwrites paciasp): the entry
 *    trampoline takes over x30 before the copied `paciasp` runs, so the copy
 *    signs the exit trampoline's address with the function's own SP; the
 *    function's `autiasp`/`retaa` authenticates that same value and returns
 *    into the exit trampoline, which returns with the caller's unsigned x30
 *    from the shadow stack. Nothing to re-sign.
 *  - paciasp left in place (guarded page): x30 arrives signed. The entry keeps
 *    the signed value on the shadow stack and must sign the exit trampoline's
 *    address the same way (key A for paciasp, B for pacibsp, modifier = SP at
 *    the entry, i.e. `mov x30, exit; paciasp` run with the function's SP)
 *    before branching to the copy; the exit, whose SP equals the entry's
 *    again, authenticates the saved value (`autiasp`, or `retaa`) before
 *    returning. A plain `ret` to the saved signed value would fault (FEAT_FPAC)
 *    or jump to a non-canonical address.
 */
#ifndef PROFD_RELOCATOR_AARCH64_H
#define PROFD_RELOCATOR_AARCH64_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of `b stub` at the entry (stub within +-128 MiB). */
#define RELOCATOR_A64_B_LEN 4
/* Bytes of `adrp x16; add x16; br x16` (stub within +-4 GiB). */
#define RELOCATOR_A64_FAR_LEN 12
/* Largest patch_len accepted. */
#define RELOCATOR_A64_MAX_PATCH_LEN 16
/* Register the far patch clobbers at the entry (IP0). */
#define RELOCATOR_A64_PATCH_REG 16
/* Register the relocated sequences and the far branch back use (IP1). */
#define RELOCATOR_A64_SCRATCH_REG 17
/*
 * Upper bound of reloc->code_len: 4 displaced instructions of at most 6 words
 * each (inverted b.cond, 4-word address, br) and a 5-word branch back.
 */
#define RELOCATOR_A64_MAX_CODE_LEN 128

struct relocation_a64 {
	size_t patch_len;        /* original bytes displaced (== the patch_len asked for) */
	size_t code_len;         /* bytes written to out: relocated instructions + branch back */
	size_t same_offsets_len; /* bytes at the copy's start that sit at their original
				    offsets: a pc there maps back into the original function */
	const char *skip_reason; /* on failure: thread-local text, see below */
};

/*
 * Relocates the first patch_len bytes (a multiple of 4, 4..16) of the
 * function at func_addr whose little-endian words are code[0..func_size)
 * (the whole body: it is scanned for branches into the patched range). The
 * copy executes at dest_addr and ends with a branch to back_addr (normally
 * func_addr + patch_len): `b` within +-128 MiB, else x17 loaded with the
 * address and `br x17`; none when the copy ends in b/br/ret.
 *
 * Rewritten so the effect is the original's: adr, adrp (into the same
 * register), b, bl, b.cond/bc.cond, cbz/cbnz, tbz/tbnz (inverted over an
 * absolute branch when out of range), ldr literal W/X/SW/PRFM and SIMD&FP
 * S/D/Q (the address loaded into the destination register, or into x17 for
 * SIMD&FP, prfm and xzr, then a load from it). Addresses are built with adr,
 * adrp+add or movz/movk, whichever reaches. Everything else position-
 * independent is copied as is (bti, paciasp, other hints).
 *
 * Returns 0 with *reloc filled, or a negative errno with reloc->skip_reason:
 *  -ERANGE  function shorter than patch_len;
 *  -EXDEV   a branch (from anywhere in the body, the copied ones included)
 *           lands in [func_addr, func_addr + patch_len): the entry itself
 *           (a loop back to the entry) or the tail of a multi-word patch;
 *  -ENOTSUP an instruction we do not relocate: svc and the other exception
 *           generators, exclusive load/store (ldxr/stxr...), eret/drps,
 *           SVE/SME, undecodable words; b/br/ret before the last displaced
 *           word; a displaced instruction naming x16 under a far patch or x17
 *           when the copy needs it;
 *  -ENOSPC  out_cap too small (RELOCATOR_A64_MAX_CODE_LEN always suffices);
 *  -EINVAL  NULL pointers, patch_len not a multiple of 4 in 4..16, or
 *           addresses not 4-byte aligned.
 * On failure nothing is written to out. skip_reason then points to a
 * thread-local buffer valid until the next call in the same thread. NULL on
 * success. Thread-safe; not async-signal-safe (snprintf).
 */
int relocator_a64_relocate(const uint8_t *code, size_t func_size, uint64_t func_addr,
			   size_t patch_len, uint64_t dest_addr, uint64_t back_addr,
			   uint8_t *out, size_t out_cap, struct relocation_a64 *reloc);

/* Hint-space words the relocator and the agent's slots read and write (NOPs without BTI/PAuth). */
#define A64_NOP     0xd503201fu
#define A64_BTI_C   0xd503245fu
#define A64_BTI_JC  0xd50324dfu
#define A64_PACIASP 0xd503233fu
#define A64_PACIBSP 0xd503237fu

/* `b target` at pc (within +-128 MiB) and `adr xrd, target` at pc (within +-1 MiB). */
uint32_t relocator_a64_enc_b(uint64_t pc, uint64_t target);
uint32_t relocator_a64_enc_adr(unsigned rd, uint64_t pc, uint64_t target);

/*
 * Bytes at the entry that must stay in place on a BTI-guarded page: 4 when
 * the first word is `bti c`, `bti jc`, `paciasp` or `pacibsp` (landing pads
 * for an indirect call), else 0.
 */
size_t relocator_a64_landing_pad_len(const uint8_t *code, size_t func_size);

/* Instructions relocator_a64_return_signer() reads at most: 1 KiB. */
#define RELOCATOR_A64_SIGNER_SCAN 256

/*
 * How the function signs its return address: A64_PACIASP or A64_PACIBSP,
 * the first of them among its first RELOCATOR_A64_SIGNER_SCAN instructions
 * (within func_size), else 0. Compilers sign once, in the prologue, before
 * x30 is saved and before SP moves (so with the entry SP, the CFA the
 * unwinder authenticates with), but not always first: GCC schedules
 * argument moves before it (`bti c; mov x3, x0; paciasp`) and shrink-wraps
 * it behind an early exit (`cbz x0, 1f; paciasp`), 17 instructions in at
 * most in tests/targets' pac builds. Thread-safe.
 */
uint32_t relocator_a64_return_signer(const uint8_t *code, size_t func_size);

/*
 * Encodes the entry patch at func_addr branching to stub_addr into out
 * (`b`, else adrp/add/br x16). Returns its length (4 or 12), or -ERANGE when
 * the stub is beyond +-4 GiB, -EINVAL on misaligned addresses or a NULL out.
 */
int relocator_a64_encode_patch(uint64_t func_addr, uint64_t stub_addr, uint8_t *out,
			       size_t out_cap);

#endif
