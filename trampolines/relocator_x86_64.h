/* SPDX-License-Identifier: MIT */
/*
 * x86-64 prologue relocator: copies the first instructions of a
 * function, re-encoded to run at another address, and decides whether the
 * function can be patched at all. Pure: reads the bytes it is given, writes
 * only `out`; never guesses -- anything it cannot prove safe is a skip reason.
 */
#ifndef PROFD_RELOCATOR_X86_64_H
#define PROFD_RELOCATOR_X86_64_H

#include <stddef.h>
#include <stdint.h>

/* Bytes a `jmp rel32` needs at the function's entry. */
#define RELOCATOR_JMP_REL32_LEN 5
/* Largest min_patch_len accepted (bounds the work arrays on the stack). */
#define RELOCATOR_MAX_PATCH_LEN 16
/*
 * Upper bound of reloc->code_len: at most 30 displaced bytes, at most 8 rel8
 * branches widened by 4 bytes each, and a 14-byte absolute jump back.
 */
#define RELOCATOR_MAX_CODE_LEN 128

struct relocation {
	size_t patch_len;        /* original bytes displaced (whole instructions, >= min_patch_len) */
	size_t code_len;         /* bytes written to out: relocated instructions + jump back */
	size_t same_offsets_len; /* bytes at the copy's start that sit at their original
				    offsets (before the first instruction that changed length):
				    a pc there maps back into the original function */
	const char *skip_reason; /* on failure: static or thread-local text, see below */
};

/*
 * Relocates the prologue of the function at func_addr whose bytes are
 * code[0..func_size) (func_size from the symbol; the whole body must be
 * readable). The copy covers whole instructions totalling at least
 * min_patch_len bytes, is re-encoded to execute at dest_addr, and is followed
 * by a jump back to func_addr + patch_len (rel32 when within +-2 GiB, else an
 * absolute `jmp *0(%rip); .quad`), unless the copied code ends in an
 * unconditional jmp/ret.
 *
 * Handled: rip-relative memory operands (legacy, VEX, EVEX), jmp/jcc rel8 and
 * rel32 (rel8 widened; targets inside the copied range are re-pointed into the
 * copy), call rel32, endbr64, and position-independent instructions copied as is.
 *
 * Returns 0 with *reloc filled, or a negative errno with reloc->skip_reason:
 *  -ERANGE  function shorter than min_patch_len, or a new displacement does not fit;
 *  -EXDEV   a branch elsewhere in the function lands inside the patched bytes;
 *  -ENOTSUP an instruction we do not relocate (loop/jrcxz, xbegin, undecodable, ...),
 *           or one only Zydis decodes and libZydis cannot be loaded;
 *  -ENOSPC  out_cap too small (RELOCATOR_MAX_CODE_LEN always suffices);
 *  -EINVAL  NULL pointers, or min_patch_len 0 or above RELOCATOR_MAX_PATCH_LEN.
 * On failure nothing is written to out. skip_reason then points to a
 * thread-local buffer, valid until the next call in the same thread; copy it
 * to keep it. NULL on success.
 * Thread-safe; not async-signal-safe (snprintf, and the first instruction
 * the built-in decoder leaves to Zydis dlopen()s libZydis).
 */
int relocator_relocate(const uint8_t *code, size_t func_size, uint64_t func_addr,
		       size_t min_patch_len, uint64_t dest_addr, uint8_t *out, size_t out_cap,
		       struct relocation *reloc);

/*
 * Bytes of padding (NOP and INT3 instructions, as the linker and the
 * compiler's alignment put them) that follow a function of func_size bytes
 * in code[0..avail): a function shorter than the patch whose padding makes up
 * the difference can still be patched, its `ret` running first. Thread-safe.
 */
size_t relocator_padding_after(const uint8_t *code, size_t avail, size_t func_size);

#endif
