// SPDX-License-Identifier: MIT
/*
 * aarch64 prologue relocator: classifies a function's first words by their
 * A64 encoding (the Arm ARM's top-level groups, written out by hand so this
 * builds on any host), rewrites the pc-relative ones for the copy at
 * dest_addr and appends the branch back. No state, no allocation, nothing
 * written outside out[0..out_cap) and nothing at all on failure; every doubt
 * is a skip reason. It does not log: the caller names the function.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "trampolines/aarch64/relocator_aarch64.h"
#include "trampolines/skip_reason.h"

#define A64_MAX_INSNS (RELOCATOR_A64_MAX_PATCH_LEN / 4)
#define A64_MAX_WORDS (RELOCATOR_A64_MAX_CODE_LEN / 4)
#define SCRATCH       RELOCATOR_A64_SCRATCH_REG
#define REG_ZR        31 /* xzr/wzr in these fields (sp only as a load's base) */

enum a64_kind {
	K_VERBATIM,   /* position-independent: copied as is */
	K_ADR,        /* adr/adrp: target is the computed address */
	K_B,          /* b (and b.al/b.nv) */
	K_BL,
	K_BCOND,      /* b.cond, bc.cond */
	K_CB,         /* cbz/cbnz */
	K_TB,         /* tbz/tbnz */
	K_LDR_LIT,    /* ldr/ldrsw/prfm literal, SIMD&FP included */
	K_END_FLOW,   /* br, ret (and their pointer-authenticated forms): verbatim, ends flow */
};

struct a64_insn {
	uint32_t word;
	enum a64_kind kind;
	uint64_t target;   /* original absolute target or literal address */
	bool gpr_rt;       /* bits 4:0 name a general register the rewrite keeps */
};

/* Words being emitted into a local buffer at a known address. */
struct emitter {
	uint32_t w[A64_MAX_WORDS + 8];
	size_t n;
	uint64_t base;
	bool used_scratch;
};

#define fail SKIP

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t sext(uint64_t v, unsigned bits)
{
	uint64_t m = 1ull << (bits - 1);

	v &= (1ull << bits) - 1;
	return (int64_t)((v ^ m) - m);
}

/* delta fits a signed `bits`-bit field counting units of 1 << shift */
static bool fits(int64_t delta, unsigned bits, unsigned shift)
{
	int64_t lim = 1ll << (bits - 1 + shift);

	return (delta & ((1ll << shift) - 1)) == 0 && delta >= -lim && delta < lim;
}

static uint64_t emit_pc(const struct emitter *e)
{
	return e->base + 4 * e->n;
}

static void emit(struct emitter *e, uint32_t w)
{
	e->w[e->n++] = w;
}

/* ---- encodings (Arm ARM C4.1, C6.2) ----------------------------------------- */

static uint32_t enc_b(uint64_t pc, uint64_t target, bool link)
{
	return (link ? 0x94000000u : 0x14000000u) |
	       ((uint32_t)((int64_t)(target - pc) >> 2) & 0x3ffffffu);
}

uint32_t relocator_a64_enc_b(uint64_t pc, uint64_t target)
{
	return enc_b(pc, target, false);
}

/* a `bits`-wide word offset at bit 5: imm19 (b.cond, cbz/cbnz, ldr literal), imm14 (tbz) */
static uint32_t with_imm(uint32_t w, unsigned bits, uint64_t pc, uint64_t target)
{
	uint32_t mask = (1u << bits) - 1;
	uint32_t imm = (uint32_t)((int64_t)(target - pc) >> 2) & mask;

	return (w & ~(mask << 5)) | imm << 5;
}

static uint32_t enc_adr_like(uint32_t op, unsigned rd, int64_t imm)
{
	uint32_t u = (uint32_t)imm & 0x1fffffu;

	return op | (u & 3) << 29 | (u >> 2) << 5 | rd;
}

uint32_t relocator_a64_enc_adr(unsigned rd, uint64_t pc, uint64_t target)
{
	return enc_adr_like(0x10000000u, rd, (int64_t)(target - pc));
}

/*
 * rd = value, from the emitter's pc: adr within +-1 MiB, adrp (+add) within
 * +-4 GiB, else movz and a movk per further non-zero halfword. rd != 31
 * (add would write sp).
 */
static void emit_mov_abs(struct emitter *e, unsigned rd, uint64_t value)
{
	uint64_t pc = emit_pc(e);
	int64_t pages = (int64_t)((value >> 12) - (pc >> 12));
	bool first = true;

	if (fits((int64_t)(value - pc), 21, 0)) {
		emit(e, enc_adr_like(0x10000000u, rd, (int64_t)(value - pc)));
		return;
	}
	if (fits(pages, 21, 0)) {
		emit(e, enc_adr_like(0x90000000u, rd, pages));
		if (value & 0xfff)
			emit(e, 0x91000000u | (uint32_t)(value & 0xfff) << 10 | rd << 5 | rd);
		return;
	}
	for (unsigned hw = 0; hw < 4; hw++) {
		uint32_t imm = (uint32_t)(value >> (16 * hw)) & 0xffff;

		if (!imm && !(first && hw == 3))
			continue;
		emit(e, (first ? 0xd2800000u : 0xf2800000u) | hw << 21 | imm << 5 | rd);
		first = false;
	}
}

/* b target when reachable, else x17 = target; br (or blr) x17 */
static void emit_branch_abs(struct emitter *e, uint64_t target, bool link)
{
	if (fits((int64_t)(target - emit_pc(e)), 26, 2)) {
		emit(e, enc_b(emit_pc(e), target, link));
		return;
	}
	emit_mov_abs(e, SCRATCH, target);
	emit(e, (link ? 0xd63f0000u : 0xd61f0000u) | SCRATCH << 5);
	e->used_scratch = true;
}

/* ---- classification ------------------------------------------------------------ */

static bool is_exclusive(uint32_t w)
{
	/* load/store exclusive: size 001000 o2=0 (ldxr/stxr/ldxp/stxp/ldaxr/stlxr, casp) */
	return (w & 0x3f800000u) == 0x08000000u;
}

static int classify_branch_group(struct a64_insn *in, uint64_t pc, struct relocation_a64 *reloc,
				 size_t off)
{
	uint32_t w = in->word;

	if ((w & 0x7c000000u) == 0x14000000u) {
		in->kind = (w >> 31) ? K_BL : K_B;
		in->target = pc + (uint64_t)(sext(w, 26) * 4);
	} else if ((w & 0xff000000u) == 0x54000000u) {
		in->kind = (w & 0xe) == 0xe ? K_B : K_BCOND; /* al/nv: always */
		in->target = pc + (uint64_t)(sext(w >> 5, 19) * 4);
	} else if ((w & 0x7e000000u) == 0x34000000u) {
		in->kind = K_CB;
		in->gpr_rt = true;
		in->target = pc + (uint64_t)(sext(w >> 5, 19) * 4);
	} else if ((w & 0x7e000000u) == 0x36000000u) {
		in->kind = K_TB;
		in->gpr_rt = true;
		in->target = pc + (uint64_t)(sext(w >> 5, 14) * 4);
	} else if ((w & 0xff000000u) == 0xd4000000u) {
		return fail(reloc, -ENOTSUP, "exception generator (svc/brk/hvc) 0x%08x at +0x%zx",
			    w, off);
	} else if ((w & 0xff000000u) == 0xd5000000u) {
		in->kind = K_VERBATIM; /* system: hints (bti, paciasp), barriers, mrs/msr */
	} else if ((w & 0xfe000000u) == 0xd6000000u) {
		unsigned opc = (w >> 21) & 0xf;

		if (opc == 1 || opc == 9) { /* blr, blraaz/blrabz; blraa/blrab */
			in->kind = K_VERBATIM;
		} else if (opc == 0 || opc == 2 || opc == 8) { /* br/braaz, ret/retaa, braa */
			in->kind = K_END_FLOW;
		} else {
			return fail(reloc, -ENOTSUP, "eret/drps 0x%08x at +0x%zx", w, off);
		}
	} else {
		return fail(reloc, -ENOTSUP, "undecodable branch word 0x%08x at +0x%zx", w, off);
	}
	return 0;
}

static int classify(struct a64_insn *in, uint64_t pc, struct relocation_a64 *reloc, size_t off)
{
	uint32_t w = in->word;
	unsigned op0 = (w >> 25) & 0xf;

	in->kind = K_VERBATIM;
	in->gpr_rt = false;
	if ((w >> 16) == 0 || op0 == 1 || op0 == 3)
		return fail(reloc, -ENOTSUP, "undecodable word 0x%08x at +0x%zx", w, off);
	if (op0 == 0 || op0 == 2)
		return fail(reloc, -ENOTSUP, "SVE/SME word 0x%08x at +0x%zx (not decoded)", w, off);
	if ((w & 0x1f000000u) == 0x10000000u) {
		in->kind = K_ADR;
		in->gpr_rt = true;
		if (w >> 31)
			in->target = (pc & ~0xfffull) + (uint64_t)(sext((w >> 29 & 3) | (w >> 3 & ~3u), 21) << 12);
		else
			in->target = pc + (uint64_t)sext((w >> 29 & 3) | (w >> 3 & ~3u), 21);
		return 0;
	}
	if ((op0 & 0xe) == 0xa)
		return classify_branch_group(in, pc, reloc, off);
	if ((w & 0x3b000000u) == 0x18000000u) {
		if ((w >> 26 & 1) && (w >> 30) == 3)
			return fail(reloc, -ENOTSUP, "undecodable word 0x%08x at +0x%zx", w, off);
		in->kind = K_LDR_LIT;
		in->gpr_rt = !(w >> 26 & 1) && (w >> 30) != 3; /* not SIMD&FP, not prfm */
		in->target = pc + (uint64_t)(sext(w >> 5, 19) * 4);
		return 0;
	}
	if ((op0 & 5) == 4 && is_exclusive(w))
		return fail(reloc, -ENOTSUP, "exclusive load/store 0x%08x at +0x%zx", w, off);
	return 0;
}

/*
 * Whether the displaced word may read or write general register r. Verbatim
 * words: any of the four register fields (conservative: an immediate or a
 * vector register there counts too). Rewritten ones: their Rt only.
 */
static bool names_reg(const struct a64_insn *in, unsigned r)
{
	uint32_t w = in->word;

	if (in->kind == K_VERBATIM || in->kind == K_END_FLOW)
		return (w & 31) == r || (w >> 5 & 31) == r || (w >> 10 & 31) == r ||
		       (w >> 16 & 31) == r;
	return in->gpr_rt && (w & 31) == r;
}

/* ---- rewriting ------------------------------------------------------------------- */

/*
 * b.cond, cbz/cbnz, tbz/tbnz: re-aimed when the target is in reach, else the
 * inverted condition skips over an absolute branch to it.
 */
static void emit_cond_branch(struct emitter *e, const struct a64_insn *in)
{
	unsigned bits = in->kind == K_TB ? 14 : 19;
	uint32_t inverted = in->kind == K_BCOND ? in->word ^ 1 : in->word ^ (1u << 24);
	size_t at = e->n;

	if (fits((int64_t)(in->target - emit_pc(e)), bits, 2)) {
		emit(e, with_imm(in->word, bits, emit_pc(e), in->target));
		return;
	}
	emit(e, 0);
	emit_branch_abs(e, in->target, false);
	e->w[at] = with_imm(inverted, bits, e->base + 4 * at, emit_pc(e));
}

static void emit_ldr_literal_far(struct emitter *e, uint32_t w, uint64_t addr)
{
	unsigned rt = w & 31, opc = w >> 30;
	bool simd = w >> 26 & 1;
	unsigned base = (simd || opc == 3 || rt == REG_ZR) ? SCRATCH : rt;
	/* the same load, unsigned-offset form with offset 0, from [base] */
	static const uint32_t gpr[4] = { 0xb9400000u, 0xf9400000u, 0xb9800000u, 0xf9800000u };
	static const uint32_t fp[3] = { 0xbd400000u, 0xfd400000u, 0x3dc00000u };

	if (base == SCRATCH)
		e->used_scratch = true;
	emit_mov_abs(e, base, addr);
	emit(e, (simd ? fp[opc] : gpr[opc]) | base << 5 | rt);
}

static void emit_insn(struct emitter *e, const struct a64_insn *in, bool last, uint64_t back_addr)
{
	uint32_t w = in->word;
	int64_t d = (int64_t)(in->target - emit_pc(e));

	switch (in->kind) {
	case K_ADR:
		if ((w & 31) == REG_ZR)
			emit(e, A64_NOP); /* result discarded */
		else
			emit_mov_abs(e, w & 31, in->target);
		break;
	case K_B:
		emit_branch_abs(e, in->target, false);
		break;
	case K_BL:
		if (last) { /* return straight into the original code: no pc of the copy on the stack */
			emit_mov_abs(e, 30, back_addr);
			emit_branch_abs(e, in->target, false);
		} else {
			emit_branch_abs(e, in->target, true);
		}
		break;
	case K_BCOND:
	case K_CB:
	case K_TB:
		emit_cond_branch(e, in);
		break;
	case K_LDR_LIT:
		if (fits(d, 19, 2))
			emit(e, with_imm(w, 19, emit_pc(e), in->target));
		else
			emit_ldr_literal_far(e, w, in->target);
		break;
	case K_VERBATIM:
	case K_END_FLOW:
		emit(e, w);
		break;
	}
}

static bool ends_flow(const struct a64_insn *in, bool last)
{
	return in->kind == K_B || in->kind == K_END_FLOW || (in->kind == K_BL && last);
}

/* ---- checks ------------------------------------------------------------------------ */

static bool direct_target(uint32_t w, uint64_t pc, uint64_t *target, bool *is_call)
{
	struct a64_insn in = { .word = w };
	struct relocation_a64 scratch;

	if (((w >> 25) & 0xe) != 0xa || classify_branch_group(&in, pc, &scratch, 0) < 0)
		return false;
	*target = in.target;
	*is_call = in.kind == K_BL;
	return in.kind == K_B || in.kind == K_BL || in.kind == K_BCOND || in.kind == K_CB ||
	       in.kind == K_TB;
}

/*
 * A direct branch anywhere in the body (the displaced ones included) into
 * [func_addr, func_addr + patch_len): to the entry it would run the patch
 * again (a second "call" with x30 already taken over), past it the tail of a
 * far patch. A `bl` to the entry is a recursive call like any other call.
 * Literal pools that decode as branches only make us skip more; indirect
 * branches (switch tables) cannot be checked here.
 */
static int check_branches_into_patch(const uint8_t *code, size_t func_size, uint64_t func_addr,
				     size_t patch_len, struct relocation_a64 *reloc)
{
	for (size_t off = 0; off + 4 <= func_size; off += 4) {
		uint64_t target;
		bool is_call;

		if (!direct_target(get_le32(code + off), func_addr + off, &target, &is_call) ||
		    target < func_addr || target >= func_addr + patch_len ||
		    (is_call && target == func_addr))
			continue;
		if (target == func_addr)
			return fail(reloc, -EXDEV, "a branch at +0x%zx loops back to the entry", off);
		return fail(reloc, -EXDEV, "a branch at +0x%zx lands inside the patched bytes (+0x%zx)",
			    off, (size_t)(target - func_addr));
	}
	return 0;
}

static int check_registers(const struct a64_insn *insns, size_t n, size_t patch_len,
			   bool used_scratch, struct relocation_a64 *reloc)
{
	for (size_t i = 0; i < n; i++) {
		/* 4 or 8 bytes: `b`, after a landing pad left in place or not */
		if (patch_len >= RELOCATOR_A64_FAR_LEN &&
		    names_reg(&insns[i], RELOCATOR_A64_PATCH_REG))
			return fail(reloc, -ENOTSUP,
				    "+0x%zx may use x16, which the far patch clobbers", 4 * i);
		if (used_scratch && names_reg(&insns[i], SCRATCH))
			return fail(reloc, -ENOTSUP,
				    "+0x%zx may use x17, which the relocated code needs", 4 * i);
	}
	return 0;
}

static int decode_prologue(const uint8_t *code, uint64_t func_addr, size_t n,
			   struct a64_insn *insns, struct relocation_a64 *reloc)
{
	for (size_t i = 0; i < n; i++) {
		int err;

		insns[i].word = get_le32(code + 4 * i);
		err = classify(&insns[i], func_addr + 4 * i, reloc, 4 * i);
		if (err)
			return err;
		if (insns[i].kind == K_END_FLOW || insns[i].kind == K_B) {
			if (i + 1 < n)
				return fail(reloc, -ENOTSUP,
					    "b/br/ret at +0x%zx before the end of the patch: "
					    "what follows is reached only by jumps we cannot see",
					    4 * i);
		}
	}
	return 0;
}

static void emit_copy(const struct a64_insn *insns, size_t n, uint64_t back_addr,
		      struct emitter *e, size_t *same_offsets_len)
{
	bool same = true;

	*same_offsets_len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t before = e->n;

		emit_insn(e, &insns[i], i + 1 == n, back_addr);
		if (same && before == i && e->n == i + 1)
			*same_offsets_len = 4 * (i + 1);
		else
			same = false;
	}
	if (!ends_flow(&insns[n - 1], true))
		emit_branch_abs(e, back_addr, false);
}

int relocator_a64_relocate(const uint8_t *code, size_t func_size, uint64_t func_addr,
			   size_t patch_len, uint64_t dest_addr, uint64_t back_addr,
			   uint8_t *out, size_t out_cap, struct relocation_a64 *reloc)
{
	struct a64_insn insns[A64_MAX_INSNS];
	struct emitter e = { .base = dest_addr };
	size_t n = patch_len / 4;
	int err;

	if (!reloc)
		return -EINVAL;
	memset(reloc, 0, sizeof(*reloc));
	if (!code || !out || patch_len < 4 || patch_len > RELOCATOR_A64_MAX_PATCH_LEN ||
	    patch_len % 4 || (func_addr | dest_addr | back_addr) & 3)
		return fail(reloc, -EINVAL, "invalid arguments (patch_len %zu)", patch_len);
	if (func_size < patch_len)
		return fail(reloc, -ERANGE, "function shorter than the %zu-byte patch", patch_len);
	err = decode_prologue(code, func_addr, n, insns, reloc);
	if (!err)
		err = check_branches_into_patch(code, func_size, func_addr, patch_len, reloc);
	if (err)
		return err;
	emit_copy(insns, n, back_addr, &e, &reloc->same_offsets_len);
	err = check_registers(insns, n, patch_len, e.used_scratch, reloc);
	if (err)
		return err;
	if (4 * e.n > out_cap)
		return fail(reloc, -ENOSPC, "%zu bytes of relocated code do not fit in %zu",
			    4 * e.n, out_cap);
	for (size_t i = 0; i < e.n; i++)
		for (int b = 0; b < 4; b++)
			out[4 * i + b] = (uint8_t)(e.w[i] >> (8 * b));
	reloc->patch_len = patch_len;
	reloc->code_len = 4 * e.n;
	return 0;
}

size_t relocator_a64_landing_pad_len(const uint8_t *code, size_t func_size)
{
	uint32_t w;

	if (!code || func_size < 4)
		return 0;
	w = get_le32(code);
	return (w == A64_BTI_C || w == A64_BTI_JC || w == A64_PACIASP || w == A64_PACIBSP) ? 4 : 0;
}

uint32_t relocator_a64_return_signer(const uint8_t *code, size_t func_size)
{
	size_t n = func_size / 4;

	if (n > RELOCATOR_A64_SIGNER_SCAN)
		n = RELOCATOR_A64_SIGNER_SCAN;
	for (size_t i = 0; code && i < n; i++) {
		uint32_t w = get_le32(code + 4 * i);

		if (w == A64_PACIASP || w == A64_PACIBSP)
			return w;
	}
	return 0;
}

int relocator_a64_encode_patch(uint64_t func_addr, uint64_t stub_addr, uint8_t *out,
			       size_t out_cap)
{
	struct emitter e = { .base = func_addr };
	int64_t pages = (int64_t)((stub_addr >> 12) - (func_addr >> 12));
	unsigned r = RELOCATOR_A64_PATCH_REG;

	if (!out || (func_addr | stub_addr) & 3)
		return -EINVAL;
	if (fits((int64_t)(stub_addr - func_addr), 26, 2)) {
		emit(&e, enc_b(func_addr, stub_addr, false));
	} else if (fits(pages, 21, 0)) {
		emit(&e, enc_adr_like(0x90000000u, r, pages));
		emit(&e, 0x91000000u | (uint32_t)(stub_addr & 0xfff) << 10 | r << 5 | r);
		emit(&e, 0xd61f0000u | r << 5);
	} else {
		return -ERANGE;
	}
	if (4 * e.n > out_cap)
		return -ENOSPC;
	for (size_t i = 0; i < e.n; i++)
		for (int b = 0; b < 4; b++)
			out[4 * i + b] = (uint8_t)(e.w[i] >> (8 * b));
	return (int)(4 * e.n);
}
