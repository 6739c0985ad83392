// SPDX-License-Identifier: MIT
/*
 * x86-64 prologue relocator: decodes a function's first instructions
 * (trampolines/insn_x86_64.h: built in, Zydis for the rest), re-targets
 * their rip-relative and branch displacements for the copy at dest_addr
 * and appends the jump back. It holds no state, allocates nothing, never writes outside out[0..out_cap) (nothing at all on failure), and turns
 * every doubt into a skip reason rather than a guess. It does not log: the
 * caller knows the function's name and logs the reason once.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "trampolines/insn_x86_64.h"
#include "trampolines/relocator_x86_64.h"
#include "trampolines/skip_reason.h"

/* Whole instructions covering min_patch_len bytes: at most one per byte. */
#define RELOCATOR_MAX_INSNS  RELOCATOR_MAX_PATCH_LEN
#define X86_MAX_INSN_LEN     15
#define JCC_REL32_LEN        6
#define JMP_ABS64_LEN        14 /* jmp *0(%rip); .quad target */
#define RELOCATOR_MAX_CODE   (RELOCATOR_MAX_INSNS * X86_MAX_INSN_LEN + JMP_ABS64_LEN)

enum copy_kind {
	COPY_VERBATIM,     /* position-independent: bytes as they are */
	COPY_RIP_RELATIVE, /* same bytes, new disp32 */
	COPY_JCC,          /* re-emitted as 0F 8x rel32 */
	COPY_JMP,          /* re-emitted as E9 rel32 */
	COPY_CALL,         /* re-emitted as E8 rel32 */
	COPY_CALL_AS_JMP,  /* last copied call: return address pushed by hand, then a jmp */
};

/*
 * A call copied as a call would push a return address inside the stub, where
 * no unwinder finds CFI. The last copied instruction can instead push the
 * original return address (func + patch_len: untouched original code) and
 * jump: the callee returns straight into the function.
 *   lea -8(%rsp), %rsp; movl $lo, (%rsp); movl $hi, 4(%rsp); jmp target
 */
#define PUSH_RETURN_LEN 20
#define CALL_AS_JMP_LEN (PUSH_RETURN_LEN + RELOCATOR_JMP_REL32_LEN)
#define CALL_MEM_AS_JMP_LEN (PUSH_RETURN_LEN + 6)

struct copied_insn {
	enum copy_kind kind;
	size_t src_off;
	size_t src_len;
	size_t out_off;
	size_t out_len;
	uint64_t target;   /* original absolute address of the memory operand or branch */
	uint8_t cond;      /* COPY_JCC: condition code, the opcode's low nibble */
	uint8_t disp_off;  /* COPY_RIP_RELATIVE: offset of disp32 in the instruction */
	bool ends_flow;    /* unconditional jmp or ret: nothing falls through */
	bool is_call;      /* COPY_RIP_RELATIVE: `call *disp(%rip)` */
};

struct prologue {
	const uint8_t *code;
	size_t func_size;
	uint64_t func_addr;
	uint64_t dest_addr;
	size_t patch_len;
	size_t n_insns;
	struct copied_insn insns[RELOCATOR_MAX_INSNS];
};

#define fail SKIP

static bool rel32_of(uint64_t target, uint64_t next_ip, int32_t *rel)
{
	int64_t delta = (int64_t)(target - next_ip);

	if (delta < INT32_MIN || delta > INT32_MAX)
		return false;
	*rel = (int32_t)delta;
	return true;
}

static void put_le32(uint8_t *p, int32_t value)
{
	uint32_t v = (uint32_t)value;

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The target of a relative immediate (jmp/jcc/call/loop/xbegin), if any. */
static bool relative_branch_target(const struct insn *insn, uint64_t ip, uint64_t *target)
{
	if (!insn->has_rel)
		return false;
	*target = ip + insn->len + (uint64_t)insn->rel;
	return true;
}

static const char *name_of(const struct insn *insn)
{
	return insn->mnemonic ? insn->mnemonic : "instruction";
}

static int classify_branch(const struct prologue *p, struct copied_insn *ci,
			   const struct insn *insn, struct relocation *reloc)
{
	uint64_t ip = p->func_addr + ci->src_off;

	/* branches with only a rel8 form, or whose target is a hidden abort/loop address */
	if (insn->kind == INSN_LOOP)
		return fail(reloc, -ENOTSUP, "%s at +0x%zx cannot be relocated", name_of(insn),
			    ci->src_off);
	/* 66-prefixed near branches truncate rip to 16 bits on AMD. */
	if (insn->opsize)
		return fail(reloc, -ENOTSUP, "%s at +0x%zx has an operand-size prefix",
			    name_of(insn), ci->src_off);
	if (insn->kind == INSN_JMP) {
		ci->kind = COPY_JMP;
		ci->out_len = RELOCATOR_JMP_REL32_LEN;
	} else if (insn->kind == INSN_CALL) {
		if (ci->target == ip + insn->len)
			return fail(reloc, -ENOTSUP, "call to next instruction captures the pc");
		ci->kind = COPY_CALL;
		ci->out_len = RELOCATOR_JMP_REL32_LEN;
	} else if (insn->kind == INSN_JCC) { /* 7x rel8 or 0F 8x rel32 */
		ci->kind = COPY_JCC;
		ci->cond = insn->cond;
		ci->out_len = JCC_REL32_LEN;
	} else {
		return fail(reloc, -ENOTSUP,
			    "%s at +0x%zx has a relative operand we do not relocate",
			    name_of(insn), ci->src_off);
	}
	return 0;
}

static int classify_insn(const struct prologue *p, struct copied_insn *ci,
			 const struct insn *insn, struct relocation *reloc)
{
	uint64_t ip = p->func_addr + ci->src_off;

	ci->kind = COPY_VERBATIM;
	ci->out_len = insn->len;
	ci->ends_flow = insn->flow == INSN_FLOW_UNCOND_BR || insn->flow == INSN_FLOW_RET;
	if (relative_branch_target(insn, ip, &ci->target))
		return classify_branch(p, ci, insn, reloc);

	if (insn->ip_base == INSN_REG_NONE)
		return 0;
	if (insn->ip_base == INSN_REG_EIP)
		return fail(reloc, -ENOTSUP, "%s at +0x%zx uses a 32-bit eip-relative address",
			    name_of(insn), ci->src_off);
	ci->kind = COPY_RIP_RELATIVE;
	ci->is_call = insn->rip_call; /* plain FF 15 disp32 */
	ci->disp_off = insn->disp_off;
	ci->target = ip + insn->len + (uint64_t)insn->disp;
	return 0;
}

/* See COPY_CALL_AS_JMP: only the last instruction's return address lies past the patch. */
static void mark_last_call_as_jmp(struct prologue *p)
{
	struct copied_insn *last = &p->insns[p->n_insns - 1];

	if (last->kind == COPY_CALL) {
		last->kind = COPY_CALL_AS_JMP;
		last->out_len = CALL_AS_JMP_LEN;
		last->ends_flow = true;
	} else if (last->kind == COPY_RIP_RELATIVE && last->is_call) {
		last->out_len = CALL_MEM_AS_JMP_LEN;
		last->ends_flow = true;
	}
}

/* Decodes whole instructions until they cover min_patch_len bytes. */
static int decode_prologue(struct prologue *p, size_t min_patch_len, struct relocation *reloc)
{
	struct insn insn;
	size_t off = 0;

	while (off < min_patch_len) {
		struct copied_insn *ci = &p->insns[p->n_insns];
		int err;

		assert(p->n_insns < RELOCATOR_MAX_INSNS);
		err = insn_decode(p->code + off, p->func_size - off, INSN_WANT_LENGTH, &insn);
		if (err == -ENODATA)
			return fail(reloc, -ERANGE,
				    "instruction at +0x%zx runs past the end of the function", off);
		if (err == -ELIBACC)
			return fail(reloc, -ENOTSUP,
				    "instruction at +0x%zx needs libZydis, which cannot be loaded",
				    off);
		if (err)
			return fail(reloc, -ENOTSUP, "undecodable instruction at +0x%zx", off);

		memset(ci, 0, sizeof(*ci));
		ci->src_off = off;
		ci->src_len = insn.len;
		err = classify_insn(p, ci, &insn, reloc);
		if (err)
			return err;
		p->n_insns++;
		off += insn.len;
	}
	p->patch_len = off;
	mark_last_call_as_jmp(p);
	return 0;
}

static bool lands_inside_patch(const struct prologue *p, uint64_t target)
{
	return target > p->func_addr && target < p->func_addr + p->patch_len;
}

/*
 * A branch from the rest of the body into bytes 1..patch_len-1 would execute
 * the tail of the jmp rel32. Decoding stops quietly at the first undecodable
 * byte (padding or data): past it, linear decoding proves nothing either way.
 * Indirect jumps (switch tables) cannot be checked here.
 */
static int check_branches_into_patch(const struct prologue *p, struct relocation *reloc)
{
	struct insn insn;
	size_t off = p->patch_len;

	while (off < p->func_size) {
		uint64_t target;
		int err = insn_decode(p->code + off, p->func_size - off, INSN_WANT_LENGTH, &insn);

		if (err == -ELIBACC) /* not knowing is not proof */
			return fail(reloc, -ENOTSUP,
				    "instruction at +0x%zx needs libZydis, which cannot be loaded",
				    off);
		if (err)
			break;
		if (relative_branch_target(&insn, p->func_addr + off, &target) &&
		    lands_inside_patch(p, target))
			return fail(reloc, -EXDEV,
				    "a branch at +0x%zx lands inside the patched bytes", off);
		off += insn.len;
	}
	return 0;
}

/*
 * Places each instruction in the copy before any is encoded: branches widen.
 * Returns how many bytes at the copy's start are exactly where they were
 * (up to the first instruction that changed length).
 */
static size_t lay_out_copy(struct prologue *p)
{
	size_t out_off = 0, kept = p->patch_len;

	for (size_t i = 0; i < p->n_insns; i++) {
		p->insns[i].out_off = out_off;
		if (p->insns[i].out_len != p->insns[i].src_len && kept == p->patch_len)
			kept = out_off;
		out_off += p->insns[i].out_len;
	}
	return kept;
}

/* Where a copied branch must go: into the copy if its target was copied. */
static int resolve_branch_target(const struct prologue *p, const struct copied_insn *ci,
				 uint64_t *target, struct relocation *reloc)
{
	if (ci->target < p->func_addr || ci->target >= p->func_addr + p->patch_len) {
		*target = ci->target;
		return 0;
	}
	for (size_t i = 0; i < p->n_insns; i++) {
		if (p->func_addr + p->insns[i].src_off == ci->target) {
			*target = p->dest_addr + p->insns[i].out_off;
			return 0;
		}
	}
	return fail(reloc, -EXDEV, "a branch at +0x%zx lands inside the patched bytes",
		    ci->src_off);
}

static int encode_branch(const struct prologue *p, const struct copied_insn *ci, uint8_t *out,
			 struct relocation *reloc)
{
	uint64_t next_ip = p->dest_addr + ci->out_off + ci->out_len;
	uint64_t target = 0;
	int32_t rel;
	int err;

	err = resolve_branch_target(p, ci, &target, reloc);
	if (err)
		return err;
	if (!rel32_of(target, next_ip, &rel))
		return fail(reloc, -ERANGE,
			    "branch at +0x%zx: target out of rel32 range of the copy", ci->src_off);
	if (ci->kind == COPY_JCC) {
		out[0] = 0x0f;
		out[1] = 0x80 | ci->cond;
	} else {
		out[0] = ci->kind == COPY_CALL ? 0xe8 : 0xe9;
	}
	put_le32(out + ci->out_len - 4, rel);
	return 0;
}

/* lea -8(%rsp), %rsp; movl $lo, (%rsp); movl $hi, 4(%rsp) */
static void encode_push_return(uint8_t *out, uint64_t return_address)
{
	static const uint8_t lea[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8 };

	memcpy(out, lea, sizeof(lea));
	out[5] = 0xc7, out[6] = 0x04, out[7] = 0x24;
	put_le32(out + 8, (int32_t)(uint32_t)return_address);
	out[12] = 0xc7, out[13] = 0x44, out[14] = 0x24, out[15] = 0x04;
	put_le32(out + 16, (int32_t)(uint32_t)(return_address >> 32));
}

static int encode_call_as_jmp(const struct prologue *p, const struct copied_insn *ci,
			      uint8_t *out, struct relocation *reloc)
{
	uint64_t return_address = p->func_addr + ci->src_off + ci->src_len;
	uint64_t next_ip = p->dest_addr + ci->out_off + ci->out_len;
	int32_t rel;

	encode_push_return(out, return_address);
	if (ci->kind == COPY_RIP_RELATIVE) { /* jmp *disp(%rip): same memory operand */
		if (!rel32_of(ci->target, next_ip, &rel))
			return fail(reloc, -ERANGE,
				    "rip-relative operand at +0x%zx out of rel32 range of the copy",
				    ci->src_off);
		out[PUSH_RETURN_LEN] = 0xff;
		out[PUSH_RETURN_LEN + 1] = 0x25;
		put_le32(out + PUSH_RETURN_LEN + 2, rel);
		return 0;
	}
	if (!rel32_of(ci->target, next_ip, &rel))
		return fail(reloc, -ERANGE,
			    "branch at +0x%zx: target out of rel32 range of the copy", ci->src_off);
	out[PUSH_RETURN_LEN] = 0xe9;
	put_le32(out + PUSH_RETURN_LEN + 1, rel);
	return 0;
}

static int encode_insn(const struct prologue *p, const struct copied_insn *ci, uint8_t *out,
		       struct relocation *reloc)
{
	uint64_t next_ip = p->dest_addr + ci->out_off + ci->out_len;
	int32_t rel;

	switch (ci->kind) {
	case COPY_VERBATIM:
		memcpy(out, p->code + ci->src_off, ci->src_len);
		return 0;
	case COPY_CALL_AS_JMP:
		return encode_call_as_jmp(p, ci, out, reloc);
	case COPY_RIP_RELATIVE:
		if (ci->out_len == CALL_MEM_AS_JMP_LEN)
			return encode_call_as_jmp(p, ci, out, reloc);
		if (!rel32_of(ci->target, next_ip, &rel))
			return fail(reloc, -ERANGE,
				    "rip-relative operand at +0x%zx out of rel32 range of the copy",
				    ci->src_off);
		memcpy(out, p->code + ci->src_off, ci->src_len);
		put_le32(out + ci->disp_off, rel);
		return 0;
	case COPY_JCC:
	case COPY_JMP:
	case COPY_CALL:
		return encode_branch(p, ci, out, reloc);
	}
	assert(!"unknown copy kind");
	return -EINVAL;
}

/* Appends the jump to func_addr + patch_len at out[at]; returns its length. */
static size_t encode_jump_back(const struct prologue *p, uint8_t *out, size_t at)
{
	static const uint8_t jmp_rip_indirect[6] = { 0xff, 0x25, 0, 0, 0, 0 };
	uint64_t resume = p->func_addr + p->patch_len;
	int32_t rel;

	if (rel32_of(resume, p->dest_addr + at + RELOCATOR_JMP_REL32_LEN, &rel)) {
		out[at] = 0xe9;
		put_le32(out + at + 1, rel);
		return RELOCATOR_JMP_REL32_LEN;
	}
	memcpy(out + at, jmp_rip_indirect, sizeof(jmp_rip_indirect));
	put_le64(out + at + sizeof(jmp_rip_indirect), resume);
	return JMP_ABS64_LEN;
}

static int encode_copy(const struct prologue *p, uint8_t *code, size_t *code_len,
		       struct relocation *reloc)
{
	size_t len = 0;

	for (size_t i = 0; i < p->n_insns; i++) {
		const struct copied_insn *ci = &p->insns[i];
		int err = encode_insn(p, ci, code + ci->out_off, reloc);

		if (err)
			return err;
		len = ci->out_off + ci->out_len;
	}
	if (!p->insns[p->n_insns - 1].ends_flow)
		len += encode_jump_back(p, code, len);
	assert(len <= RELOCATOR_MAX_CODE_LEN);
	*code_len = len;
	return 0;
}

int relocator_relocate(const uint8_t *code, size_t func_size, uint64_t func_addr,
		       size_t min_patch_len, uint64_t dest_addr, uint8_t *out, size_t out_cap,
		       struct relocation *reloc)
{
	struct prologue p = {
		.code = code,
		.func_size = func_size,
		.func_addr = func_addr,
		.dest_addr = dest_addr,
	};
	uint8_t copy[RELOCATOR_MAX_CODE];
	size_t copy_len, same_offsets_len;
	int err;

	if (!reloc)
		return -EINVAL;
	memset(reloc, 0, sizeof(*reloc));
	if (!code || !out || min_patch_len == 0 || min_patch_len > RELOCATOR_MAX_PATCH_LEN)
		return fail(reloc, -EINVAL, "invalid arguments (min_patch_len %zu)", min_patch_len);
	if (func_size < min_patch_len)
		return fail(reloc, -ERANGE, "function shorter than the %zu-byte patch",
			    min_patch_len);
	err = decode_prologue(&p, min_patch_len, reloc);
	if (err)
		return err;
	err = check_branches_into_patch(&p, reloc);
	if (err)
		return err;
	same_offsets_len = lay_out_copy(&p);
	err = encode_copy(&p, copy, &copy_len, reloc);
	if (err)
		return err;
	if (copy_len > out_cap)
		return fail(reloc, -ENOSPC, "%zu bytes of relocated code do not fit in %zu",
			    copy_len, out_cap);

	memcpy(out, copy, copy_len);
	reloc->patch_len = p.patch_len;
	reloc->code_len = copy_len;
	reloc->same_offsets_len = same_offsets_len;
	return 0;
}

size_t relocator_padding_after(const uint8_t *code, size_t avail, size_t func_size)
{
	struct insn insn;
	size_t off = func_size;

	while (off < avail && insn_decode(code + off, avail - off, INSN_WANT_LENGTH, &insn) == 0 &&
	       (insn.kind == INSN_NOP || insn.kind == INSN_INT3))
		off += insn.len;
	return off - func_size;
}
