// SPDX-License-Identifier: MIT
/*
 * Unit tests of trampolines/relocator_x86_64.c: hand-derived encodings and
 * skip reasons, then every exported function of libc (and of libzstd and
 * libsqlite3 when installed) relocated 256 MiB away. Every success is decoded
 * back with Zydis and each target compared with the original's; a few copies
 * are also executed from a page near the original and must behave like it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

#include "tests/unit/unit.h"
#include "trampolines/relocator_x86_64.h"

#define FUNC_ADDR  0x401000ULL
#define NEAR_DEST  0x501000ULL       /* FUNC_ADDR + 1 MiB */
#define FAR_DEST   0x7f0000001000ULL /* beyond rel32 reach of FUNC_ADDR */
#define REAL_DEST_OFFSET 0x10000000ULL
#define OUT_FILL   0xaa
#define MAX_INSNS  RELOCATOR_MAX_PATCH_LEN

/* ---- decoding the output back --------------------------------------------- */

struct decoded_insn {
	size_t off;
	size_t len;
	ZydisMnemonic mnemonic;
	bool has_target;
	bool is_branch;   /* relative immediate (re-pointed into the copy if copied) */
	bool is_memory;   /* rip-relative memory operand */
	bool ends_flow;
	uint8_t disp_off; /* is_memory: where the disp32 sits */
	uint64_t target;
};

static bool decode_one(const uint8_t *code, size_t len, uint64_t addr, struct decoded_insn *d)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, len, &insn, ops)))
		return false;
	memset(d, 0, sizeof(*d));
	d->len = insn.length;
	d->mnemonic = insn.mnemonic;
	d->ends_flow = insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		       insn.meta.category == ZYDIS_CATEGORY_RET;
	d->disp_off = insn.raw.disp.offset;
	for (int i = 0; i < insn.operand_count_visible; i++) {
		bool branch = ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative;
		bool memory = ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			      ops[i].mem.base == ZYDIS_REGISTER_RIP;

		if (!branch && !memory)
			continue;
		d->is_branch = branch;
		d->is_memory = memory;
		d->has_target = ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&insn, &ops[i], addr,
								      &d->target));
		break;
	}
	return true;
}

/* Decodes n instructions of code from offset 0; false if one does not decode. */
static bool decode_n(const uint8_t *code, size_t len, uint64_t addr, struct decoded_insn *d,
		     size_t n)
{
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		if (off >= len || !decode_one(code + off, len - off, addr + off, &d[i]))
			return false;
		d[i].off = off;
		off += d[i].len;
	}
	return true;
}

static bool same_but_disp32(const uint8_t *a, const struct decoded_insn *da, const uint8_t *b,
			    const struct decoded_insn *db)
{
	size_t tail = da->disp_off + 4u;

	return da->len == db->len && da->disp_off == db->disp_off &&
	       memcmp(a, b, da->disp_off) == 0 && memcmp(a + tail, b + tail, da->len - tail) == 0;
}

/* Where the copy must send a branch to orig_target. */
static uint64_t expected_branch_target(const struct decoded_insn *orig,
				       const struct decoded_insn *copy, size_t n,
				       uint64_t func_addr, uint64_t dest_addr, uint64_t orig_target)
{
	for (size_t i = 0; i < n; i++)
		if (func_addr + orig[i].off == orig_target)
			return dest_addr + copy[i].off;
	return orig_target;
}

static const char *verify_jump_back(const uint8_t *out, const struct relocation *r,
				    uint64_t func_addr, uint64_t dest_addr, size_t at)
{
	struct decoded_insn jb;
	uint64_t target;

	if (!decode_one(out + at, r->code_len - at, dest_addr + at, &jb))
		return "jump back does not decode";
	if (jb.mnemonic != ZYDIS_MNEMONIC_JMP || !jb.has_target)
		return "jump back is not a direct or rip-relative jmp";
	target = jb.target;
	if (jb.is_memory) {
		if (target != dest_addr + at + jb.len || at + jb.len + 8 != r->code_len)
			return "absolute jump back does not read the quad after it";
		memcpy(&target, out + at + jb.len, 8);
	} else if (at + jb.len != r->code_len) {
		return "code_len does not end after the jump back";
	}
	return target == func_addr + r->patch_len ? NULL : "jump back misses func + patch_len";
}

/*
 * A call as the last copied instruction becomes: lea -8(%rsp),%rsp; movl lo,
 * (%rsp); movl hi, 4(%rsp) pushing the original return address (after the
 * call, in the untouched function), then a jmp to the same target.
 */
static const char *verify_call_as_jmp(const uint8_t *out, const struct relocation *r,
				      const struct decoded_insn *call, uint64_t func_addr,
				      uint64_t dest_addr, size_t at)
{
	static const uint8_t lea[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8 };
	uint64_t ret = func_addr + call->off + call->len, pushed;
	uint32_t lo, hi;
	struct decoded_insn jmp;

	if (r->code_len < at + 20 || memcmp(out + at, lea, sizeof(lea)) != 0 ||
	    out[at + 5] != 0xc7 || out[at + 12] != 0xc7)
		return "call not rewritten as push-return + jmp";
	memcpy(&lo, out + at + 8, 4);
	memcpy(&hi, out + at + 16, 4);
	pushed = (uint64_t)hi << 32 | lo;
	if (pushed != ret)
		return "pushed return address is not the instruction after the call";
	if (!decode_one(out + at + 20, r->code_len - at - 20, dest_addr + at + 20, &jmp) ||
	    jmp.mnemonic != ZYDIS_MNEMONIC_JMP || !jmp.has_target ||
	    jmp.is_memory != call->is_memory)
		return "call not followed by the equivalent jmp";
	if (jmp.target != call->target)
		return "call's jmp target differs";
	return at + 20 + jmp.len == r->code_len ? NULL : "code after the call's jmp";
}

/*
 * NULL when out holds the prologue of code relocated to dest_addr: same
 * mnemonics, position-independent instructions byte-identical, every branch
 * and rip-relative operand aimed at the original absolute target (branches
 * into the copied range at the copy), then the jump back unless the copy ends
 * the flow.
 */
static const char *verify_relocation(const uint8_t *code, size_t func_size, uint64_t func_addr,
				     uint64_t dest_addr, const uint8_t *out,
				     const struct relocation *r)
{
	struct decoded_insn orig[MAX_INSNS], copy[MAX_INSNS];
	size_t n = 0, off = 0, end, last_is_call;

	while (off < r->patch_len) {
		if (n == MAX_INSNS ||
		    !decode_one(code + off, func_size - off, func_addr + off, &orig[n]))
			return "original prologue does not decode";
		orig[n].off = off;
		off += orig[n++].len;
	}
	if (off != r->patch_len)
		return "patch_len is not on an instruction boundary";
	last_is_call = orig[n - 1].mnemonic == ZYDIS_MNEMONIC_CALL && orig[n - 1].has_target;
	if (!decode_n(out, r->code_len, dest_addr, copy, n - last_is_call))
		return "relocated code does not decode";

	for (size_t i = 0; i < n - last_is_call; i++) {
		uint64_t want = orig[i].target;

		if (copy[i].mnemonic != orig[i].mnemonic)
			return "mnemonic changed";
		if (!orig[i].has_target) {
			if (copy[i].len != orig[i].len ||
			    memcmp(out + copy[i].off, code + orig[i].off, orig[i].len) != 0)
				return "position-independent instruction not copied verbatim";
			continue;
		}
		if (orig[i].is_memory && !same_but_disp32(code + orig[i].off, &orig[i],
							  out + copy[i].off, &copy[i]))
			return "rip-relative instruction changed beyond its disp32";
		if (orig[i].is_branch)
			want = expected_branch_target(orig, copy, n, func_addr, dest_addr, want);
		if (!copy[i].has_target || copy[i].target != want)
			return "relocated target differs";
	}
	if (last_is_call)
		return verify_call_as_jmp(out, r, &orig[n - 1], func_addr, dest_addr,
					  n > 1 ? copy[n - 2].off + copy[n - 2].len : 0);
	end = copy[n - 1].off + copy[n - 1].len;
	if (orig[n - 1].ends_flow)
		return end == r->code_len ? NULL : "code after a final jmp/ret";
	return verify_jump_back(out, r, func_addr, dest_addr, end);
}

/* ---- hand-written cases ----------------------------------------------------- */

#define CODE(bytes)   .code = (bytes), .size = sizeof(bytes)
#define EXPECT(bytes) .out = (bytes), .code_len = sizeof(bytes)

struct hand_case {
	const uint8_t *code;
	size_t size;
	uint64_t dest_addr;
	size_t out_cap;            /* 0: the whole 256-byte buffer */
	int err;                   /* expected return */
	const char *reason;        /* substring of skip_reason when err != 0 */
	size_t patch_len;
	const uint8_t *out;        /* expected bytes when err == 0 */
	size_t code_len;
};

static void run_hand_case(const struct hand_case *c)
{
	struct relocation r;
	uint8_t out[256];
	size_t cap = c->out_cap ? c->out_cap : sizeof(out);
	const char *bad;
	int err;

	memset(out, OUT_FILL, sizeof(out));
	err = relocator_relocate(c->code, c->size, FUNC_ADDR, RELOCATOR_JMP_REL32_LEN, c->dest_addr,
				 out, cap, &r);
	CHECK_EQ_INT(err, c->err);
	if (c->err) {
		CHECK(r.skip_reason && strstr(r.skip_reason, c->reason));
		if (r.skip_reason && !strstr(r.skip_reason, c->reason))
			fprintf(stderr, "  reason \"%s\", want \"%s\"\n", r.skip_reason, c->reason);
		for (size_t i = 0; i < sizeof(out); i++)
			CHECK_EQ_INT(out[i], OUT_FILL);
		return;
	}
	CHECK(r.skip_reason == NULL);
	CHECK_EQ_INT(r.patch_len, c->patch_len);
	CHECK_EQ_INT(r.code_len, c->code_len);
	CHECK_MEM_EQ(out, c->out, c->code_len);
	for (size_t i = c->code_len; i < sizeof(out); i++)
		CHECK_EQ_INT(out[i], OUT_FILL);
	bad = verify_relocation(c->code, c->size, FUNC_ADDR, c->dest_addr, out, &r);
	CHECK(bad == NULL);
	if (bad)
		fprintf(stderr, "  verify: %s\n", bad);
}

/*
 * Expected displacements: the copy sits D = NEAR_DEST - FUNC_ADDR = 0x100000
 * above the function, so an instruction ending at copy offset k that reaches
 * function offset t needs rel32 = t - k - 0x100000 = 0xfff00000 + (t - k).
 * The jump back after an unwidened copy (t = k) is always FB FF EF FF.
 */

/* endbr64; push rbp | mov rbp,rsp; pop rbp; ret */
static const uint8_t endbr_push_code[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5,
					   0x5d, 0xc3 };
static const uint8_t endbr_push_out[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55,
					  0xe9, 0xfb, 0xff, 0xef, 0xff };
/* The same copy 0x7f00_0000_0000 away: jmp *0(%rip); .quad FUNC_ADDR + 5 */
static const uint8_t endbr_push_far_out[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55,
					      0xff, 0x25, 0x00, 0x00, 0x00, 0x00,
					      0x05, 0x10, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00 };

static void test_endbr_push_copied_verbatim(void)
{
	run_hand_case(&(struct hand_case){
		CODE(endbr_push_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(endbr_push_out),
	});
}

static void test_far_dest_gets_absolute_jump_back(void)
{
	run_hand_case(&(struct hand_case){
		CODE(endbr_push_code),
		.dest_addr = FAR_DEST,
		.patch_len = 5,
		EXPECT(endbr_push_far_out),
	});
}

static void test_small_out_cap_is_enospc(void)
{
	run_hand_case(&(struct hand_case){
		CODE(endbr_push_code),
		.dest_addr = NEAR_DEST,
		.out_cap = sizeof(endbr_push_out) - 1,
		.err = -ENOSPC,
		.reason = "do not fit",
	});
}

/* sub rsp,0x18; mov [rsp+8],rdi | add rsp,0x18; ret */
static const uint8_t sub_rsp_code[] = { 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x08,
					0x48, 0x83, 0xc4, 0x18, 0xc3 };
static const uint8_t sub_rsp_out[] = { 0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x7c, 0x24, 0x08,
				       0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_sub_rsp_and_store_copied_verbatim(void)
{
	run_hand_case(&(struct hand_case){
		CODE(sub_rsp_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 9,
		EXPECT(sub_rsp_out),
	});
}

/* mov rax,[rip+0x1000] | ret: target +0x1007, new disp 0x1000 - D = 0xfff01000 */
static const uint8_t rip_mov_code[] = { 0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00, 0xc3 };
static const uint8_t rip_mov_out[] = { 0x48, 0x8b, 0x05, 0x00, 0x10, 0xf0, 0xff,
				       0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_rip_relative_mov(void)
{
	run_hand_case(&(struct hand_case){
		CODE(rip_mov_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 7,
		EXPECT(rip_mov_out),
	});
}

static void test_rip_relative_out_of_range_is_erange(void)
{
	run_hand_case(&(struct hand_case){
		CODE(rip_mov_code),
		.dest_addr = FAR_DEST,
		.err = -ERANGE,
		.reason = "rip-relative operand at +0x0",
	});
}

/*
 * lea rax,[rip-7] | ret: takes the function's own address, which must stay
 * FUNC_ADDR (data references are never re-pointed into the copy):
 * new disp = -7 - D = 0xffeffff9.
 */
static const uint8_t rip_lea_code[] = { 0x48, 0x8d, 0x05, 0xf9, 0xff, 0xff, 0xff, 0xc3 };
static const uint8_t rip_lea_out[] = { 0x48, 0x8d, 0x05, 0xf9, 0xff, 0xef, 0xff,
				       0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_rip_relative_lea_of_own_address(void)
{
	run_hand_case(&(struct hand_case){
		CODE(rip_lea_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 7,
		EXPECT(rip_lea_out),
	});
}

/* cmp byte [rip+0x2000],0 | ret: disp32 sits before the imm8, which must survive */
static const uint8_t rip_cmp_code[] = { 0x80, 0x3d, 0x00, 0x20, 0x00, 0x00, 0x00, 0xc3 };
static const uint8_t rip_cmp_out[] = { 0x80, 0x3d, 0x00, 0x20, 0xf0, 0xff, 0x00,
				       0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_rip_relative_cmp_with_immediate(void)
{
	run_hand_case(&(struct hand_case){
		CODE(rip_cmp_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 7,
		EXPECT(rip_cmp_out),
	});
}

/* vmovdqu64 zmm16,[rip+0x3000] (EVEX, R' set) | ret */
static const uint8_t evex_code[] = { 0x62, 0xe1, 0xfe, 0x48, 0x6f, 0x05, 0x00, 0x30, 0x00, 0x00,
				     0xc3 };
static const uint8_t evex_out[] = { 0x62, 0xe1, 0xfe, 0x48, 0x6f, 0x05, 0x00, 0x30, 0xf0, 0xff,
				    0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_evex_rip_relative_zmm16(void)
{
	run_hand_case(&(struct hand_case){
		CODE(evex_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 10,
		EXPECT(evex_out),
	});
}

/*
 * cmp rdx,0x10; jb +0x20 (to +0x26) | 32 x nop; ret at +0x26.
 * jb widens to 0F 82 ending at copy +10: 0x26 - 10 -> 0xfff0001c; the jump
 * back ends at +15 and reaches +6: -9 -> 0xffeffff7.
 */
static const uint8_t jb_out_code[] = {
	0x48, 0x83, 0xfa, 0x10, 0x72, 0x20,
	0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0xc3,
};
static const uint8_t jb_out_out[] = { 0x48, 0x83, 0xfa, 0x10, 0x0f, 0x82, 0x1c, 0x00, 0xf0, 0xff,
				      0xe9, 0xf7, 0xff, 0xef, 0xff };

static void test_jb_rel8_to_outside_widened(void)
{
	run_hand_case(&(struct hand_case){
		CODE(jb_out_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 6,
		EXPECT(jb_out_out),
	});
}

/*
 * je +1 (to +3); push rbx; push rbp; push r12 | pop r12; pop rbp; pop rbx; ret.
 * je becomes 0F 84 and must skip the copied push rbx (copy +6) to the copied
 * push rbp at copy +7: rel32 1. Jump back ends at +15, reaches +6.
 */
static const uint8_t jcc_inside_code[] = { 0x74, 0x01, 0x53, 0x55, 0x41, 0x54,
					   0x41, 0x5c, 0x5d, 0x5b, 0xc3 };
static const uint8_t jcc_inside_out[] = { 0x0f, 0x84, 0x01, 0x00, 0x00, 0x00, 0x53, 0x55, 0x41,
					  0x54, 0xe9, 0xf7, 0xff, 0xef, 0xff };

static void test_jcc_rel8_into_copied_range(void)
{
	run_hand_case(&(struct hand_case){
		CODE(jcc_inside_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 6,
		EXPECT(jcc_inside_out),
	});
}

/* jmp +1 (to +3, inside the 3-byte mov at +2) | mov rbp,rsp: unmappable */
static const uint8_t jmp_mid_insn_code[] = { 0xeb, 0x01, 0x48, 0x89, 0xe5, 0xc3 };

static void test_copied_branch_into_middle_of_copy_is_exdev(void)
{
	run_hand_case(&(struct hand_case){
		CODE(jmp_mid_insn_code),
		.dest_addr = NEAR_DEST,
		.err = -EXDEV,
		.reason = "a branch at +0x0 lands inside",
	});
}

/*
 * jmp +0x10 (to +0x12); nop x3 | nop...; ret at +0x12. jmp widens to E9
 * ending at +5: 0x12 - 5 -> 0xfff0000d; the last copied nop falls through, so
 * the jump back follows (ends at +13, reaches +5: -8).
 */
static const uint8_t jmp8_code[] = { 0xeb, 0x10, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
				     0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3 };
static const uint8_t jmp8_out[] = { 0xe9, 0x0d, 0x00, 0xf0, 0xff, 0x90, 0x90, 0x90,
				    0xe9, 0xf8, 0xff, 0xef, 0xff };

static void test_jmp_rel8_widened(void)
{
	run_hand_case(&(struct hand_case){
		CODE(jmp8_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(jmp8_out),
	});
}

/* jmp rel32 to +0x105 as the whole 5-byte function: no jump back */
static const uint8_t thunk_code[] = { 0xe9, 0x00, 0x01, 0x00, 0x00 };
static const uint8_t thunk_out[] = { 0xe9, 0x00, 0x01, 0xf0, 0xff };

static void test_jmp_rel32_thunk(void)
{
	run_hand_case(&(struct hand_case){
		CODE(thunk_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(thunk_out),
	});
}

static void test_thunk_out_of_range_is_erange(void)
{
	run_hand_case(&(struct hand_case){
		CODE(thunk_code),
		.dest_addr = FAR_DEST,
		.err = -ERANGE,
		.reason = "branch at +0x0",
	});
}

/*
 * call +0x1000 | ret: the callee must return to func+5 (the original ret), so
 * the copy pushes FUNC+5 by hand and jumps: jmp ends at copy +25.
 */
#define CALL_RET_LO 0x05, 0x10, 0x40, 0x00 /* FUNC_ADDR + 5 */
#define CALL_RET_HI 0x00, 0x00, 0x00, 0x00
static const uint8_t call_code[] = { 0xe8, 0xfb, 0x0f, 0x00, 0x00, 0xc3 };
static const uint8_t call_out[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8,
				    0xc7, 0x04, 0x24, CALL_RET_LO,
				    0xc7, 0x44, 0x24, 0x04, CALL_RET_HI,
				    0xe9, 0xe7, 0x0f, 0xf0, 0xff };

/* How much of the copy a sampled pc can be mapped back from: up to the first grown instruction. */
static size_t same_offsets_of(const uint8_t *code, size_t size)
{
	struct relocation r;
	uint8_t out[RELOCATOR_MAX_CODE_LEN];

	if (relocator_relocate(code, size, FUNC_ADDR, RELOCATOR_JMP_REL32_LEN, NEAR_DEST, out,
			       sizeof(out), &r))
		return (size_t)-1;
	return r.same_offsets_len;
}

static void test_same_offsets_len(void)
{
	/* nothing grew: the whole copy */
	CHECK_EQ_INT(same_offsets_of(endbr_push_code, sizeof(endbr_push_code)), 5);
	/* cmp (4 bytes) kept, then jb rel8 widened to rel32 */
	CHECK_EQ_INT(same_offsets_of(jb_out_code, sizeof(jb_out_code)), 4);
	/* the first instruction grew: nothing maps back */
	CHECK_EQ_INT(same_offsets_of(jcc_inside_code, sizeof(jcc_inside_code)), 0);
}

static void test_call_rel32(void)
{
	run_hand_case(&(struct hand_case){
		CODE(call_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(call_out),
	});
}

/* call $+5; pop rax; ret */
static const uint8_t call_next_code[] = { 0xe8, 0x00, 0x00, 0x00, 0x00, 0x58, 0xc3 };

static void test_call_next_instruction_is_enotsup(void)
{
	run_hand_case(&(struct hand_case){
		CODE(call_next_code),
		.dest_addr = NEAR_DEST,
		.err = -ENOTSUP,
		.reason = "call to next instruction captures the pc",
	});
}

/* loop $; nop x5; ret */
static const uint8_t loop_code[] = { 0xe2, 0xfe, 0x90, 0x90, 0x90, 0x90, 0x90, 0xc3 };

static void test_loop_rel8_is_enotsup(void)
{
	run_hand_case(&(struct hand_case){
		CODE(loop_code),
		.dest_addr = NEAR_DEST,
		.err = -ENOTSUP,
		.reason = "loop at +0x0",
	});
}

/* xbegin +0; ret */
static const uint8_t xbegin_code[] = { 0xc7, 0xf8, 0x00, 0x00, 0x00, 0x00, 0xc3 };

static void test_xbegin_is_enotsup(void)
{
	run_hand_case(&(struct hand_case){
		CODE(xbegin_code),
		.dest_addr = NEAR_DEST,
		.err = -ENOTSUP,
		.reason = "xbegin at +0x0",
	});
}

/* push rbx; (invalid in 64-bit mode) 06; ... */
static const uint8_t undecodable_code[] = { 0x53, 0x06, 0x90, 0x90, 0x90, 0xc3 };

static void test_undecodable_in_patch_is_enotsup(void)
{
	run_hand_case(&(struct hand_case){
		CODE(undecodable_code),
		.dest_addr = NEAR_DEST,
		.err = -ENOTSUP,
		.reason = "undecodable instruction at +0x1",
	});
}

/* xor eax,eax; ret */
static const uint8_t too_short_code[] = { 0x31, 0xc0, 0xc3 };

static void test_function_shorter_than_patch_is_erange(void)
{
	run_hand_case(&(struct hand_case){
		CODE(too_short_code),
		.dest_addr = NEAR_DEST,
		.err = -ERANGE,
		.reason = "function shorter than the 5-byte patch",
	});
}

/* push rbx; mov rax,[rip+...] cut off by the symbol's size */
static const uint8_t truncated_code[] = { 0x53, 0x48, 0x8b, 0x05, 0x00 };

static void test_instruction_past_end_is_erange(void)
{
	run_hand_case(&(struct hand_case){
		CODE(truncated_code),
		.dest_addr = NEAR_DEST,
		.err = -ERANGE,
		.reason = "runs past the end",
	});
}

/*
 * xor eax,eax; push rbx; push rbp; mov ebx,edi | 1: dec ebx; jne to +2 (the
 * push rbx, byte 2 of the patch); pop rbp; pop rbx; ret
 */
static const uint8_t back_branch_code[] = { 0x31, 0xc0, 0x53, 0x55, 0x89, 0xfb, 0xff, 0xcb,
					    0x75, 0xf8, 0x5d, 0x5b, 0xc3 };

static void test_backward_branch_into_patch_is_exdev(void)
{
	run_hand_case(&(struct hand_case){
		CODE(back_branch_code),
		.dest_addr = NEAR_DEST,
		.err = -EXDEV,
		.reason = "a branch at +0x8 lands inside the patched bytes",
	});
}

/* push rbp; mov rbp,rsp; pop rbp | jmp to +0 (the entry itself is fine) */
static const uint8_t branch_to_entry_code[] = { 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xeb, 0xf9 };
static const uint8_t branch_to_entry_out[] = { 0x55, 0x48, 0x89, 0xe5, 0x5d,
					       0xe9, 0xfb, 0xff, 0xef, 0xff };

static void test_branch_to_entry_is_allowed(void)
{
	run_hand_case(&(struct hand_case){
		CODE(branch_to_entry_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(branch_to_entry_out),
	});
}

/*
 * endbr64; push rbp | ret; 06 (undecodable: the scan stops there) jmp to +2.
 * The branch after the undecodable byte is never seen.
 */
static const uint8_t scan_stops_code[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0xc3, 0x06, 0xeb, 0xf9 };

static void test_body_scan_stops_at_undecodable_bytes(void)
{
	run_hand_case(&(struct hand_case){
		CODE(scan_stops_code),
		.dest_addr = NEAR_DEST,
		.patch_len = 5,
		EXPECT(endbr_push_out),
	});
}

static void test_invalid_min_patch_len_is_einval(void)
{
	struct relocation r;
	uint8_t out[64];

	CHECK_EQ_INT(relocator_relocate(endbr_push_code, sizeof(endbr_push_code), FUNC_ADDR, 0,
					NEAR_DEST, out, sizeof(out), &r), -EINVAL);
	CHECK_EQ_INT(relocator_relocate(endbr_push_code, sizeof(endbr_push_code), FUNC_ADDR,
					RELOCATOR_MAX_PATCH_LEN + 1, NEAR_DEST, out, sizeof(out),
					&r),
		     -EINVAL);
	CHECK(r.skip_reason != NULL);
}

struct reason_thread {
	pthread_barrier_t *both_failed;
	bool reason_kept;
};

static void *relocate_loop_in_thread(void *arg)
{
	struct reason_thread *t = arg;
	struct relocation r;
	uint8_t out[64];

	relocator_relocate(loop_code, sizeof(loop_code), FUNC_ADDR, RELOCATOR_JMP_REL32_LEN,
			   NEAR_DEST, out, sizeof(out), &r);
	pthread_barrier_wait(t->both_failed);
	t->reason_kept = r.skip_reason && strstr(r.skip_reason, "loop at +0x0");
	return NULL;
}

/* A failure in one thread does not overwrite the reason another thread holds. */
static void test_skip_reasons_are_per_thread(void)
{
	pthread_barrier_t both_failed;
	struct reason_thread t = { &both_failed, false };
	struct relocation r;
	pthread_t thread;
	uint8_t out[64];

	pthread_barrier_init(&both_failed, NULL, 2);
	if (pthread_create(&thread, NULL, relocate_loop_in_thread, &t) != 0) {
		CHECK(!"pthread_create failed");
		pthread_barrier_destroy(&both_failed);
		return;
	}
	relocator_relocate(back_branch_code, sizeof(back_branch_code), FUNC_ADDR,
			   RELOCATOR_JMP_REL32_LEN, NEAR_DEST, out, sizeof(out), &r);
	pthread_barrier_wait(&both_failed);
	pthread_join(thread, NULL);
	pthread_barrier_destroy(&both_failed);
	CHECK(t.reason_kept);
	CHECK(r.skip_reason && strstr(r.skip_reason, "a branch at +0x8"));
}

/* ---- running relocated copies ------------------------------------------------ */

/*
 * A probe with a rip-relative cmp with immediate, a jcc rel8 and a jmp rel8 in
 * its first 17 bytes: relocating 5..16 bytes covers the cmp alone, the jcc
 * going out of the copy, a copy ending in jmp, and the jcc into the copy.
 *  0: cmpl $0,probe_flag(%rip)  7: je 14  9: lea 1(%rdi),%eax  12: jmp 17
 * 14: lea 2(%rdi),%eax  17: ret
 */
static volatile int probe_flag __attribute__((used));
__attribute__((visibility("hidden"))) int relocator_probe(int x);
__attribute__((visibility("hidden"))) extern const uint8_t relocator_probe_end[];
asm(".pushsection .text\n"
    ".type relocator_probe, @function\n"
    "relocator_probe:\n"
    "	cmpl $0, probe_flag(%rip)\n"
    "	je 1f\n"
    "	lea 1(%rdi), %eax\n"
    "	jmp 2f\n"
    "1:	lea 2(%rdi), %eax\n"
    "2:	ret\n"
    "relocator_probe_end:\n"
    ".size relocator_probe, . - relocator_probe\n"
    ".popsection\n");

#define NEAR_PAGE_LEN 4096

/* An RW page within +-1 GiB of addr (the copy's rel32 reach), or NULL. */
static uint8_t *map_page_near(uintptr_t addr)
{
	for (uintptr_t step = 1; step <= 16; step++) {
		uintptr_t hint = (addr & ~(uintptr_t)0xfff) + step * 0x4000000; /* 64 MiB steps */
		void *page = mmap((void *)hint, NEAR_PAGE_LEN, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		if (page != MAP_FAILED)
			return page;
	}
	return NULL;
}

/* Relocates func into a new executable page near it; NULL (and says why) on failure. */
static uint8_t *relocate_to_near_page(const void *func, size_t size, size_t min_patch_len)
{
	uint8_t *page = map_page_near((uintptr_t)func);
	struct relocation r;
	int err;

	if (!page) {
		printf("  no free page near %p\n", func);
		return NULL;
	}
	err = relocator_relocate(func, size, (uintptr_t)func, min_patch_len, (uintptr_t)page,
				 page, NEAR_PAGE_LEN, &r);
	if (err || mprotect(page, NEAR_PAGE_LEN, PROT_READ | PROT_EXEC) != 0) {
		printf("  %p (%zu bytes): not run: %s\n", func, size,
		       err ? r.skip_reason : strerror(errno));
		munmap(page, NEAR_PAGE_LEN);
		return NULL;
	}
	return page;
}

static void test_relocated_probe_runs_like_the_original(void)
{
	size_t size = (size_t)(relocator_probe_end - (const uint8_t *)relocator_probe);

	for (size_t min_len = RELOCATOR_JMP_REL32_LEN; min_len <= RELOCATOR_MAX_PATCH_LEN;
	     min_len++) {
		uint8_t *page = relocate_to_near_page((const void *)relocator_probe, size, min_len);
		int (*copy)(int) = (int (*)(int))(uintptr_t)page;

		CHECK(page != NULL);
		if (!page)
			continue;
		for (int flag = 0; flag <= 1; flag++) {
			probe_flag = flag;
			CHECK_EQ_INT(copy(40), relocator_probe(40));
		}
		munmap(page, NEAR_PAGE_LEN);
	}
}

/* The address and .dynsym size of an exported libc function, via dladdr1. */
static const void *libc_function(const char *name, size_t *size)
{
	const Elf64_Sym *sym = NULL;
	void *addr = dlsym(RTLD_DEFAULT, name);
	Dl_info info;

	if (!addr || !dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    info.dli_saddr != addr)
		return NULL;
	*size = sym->st_size;
	return addr;
}

static int compare_ints(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void check_atoi_copy(uintptr_t entry)
{
	int (*copy)(const char *) = (int (*)(const char *))entry;

	CHECK_EQ_INT(copy("12345"), 12345);
}

static void check_strtol_copy(uintptr_t entry)
{
	long (*copy)(const char *, char **, int) = (long (*)(const char *, char **, int))entry;

	CHECK_EQ_INT(copy("-77", NULL, 10), -77);
}

static void check_labs_copy(uintptr_t entry)
{
	long (*copy)(long) = (long (*)(long))entry;

	CHECK_EQ_INT(copy(-5), 5);
}

static void check_getpid_copy(uintptr_t entry)
{
	pid_t (*copy)(void) = (pid_t (*)(void))entry;

	CHECK_EQ_INT(copy(), getpid());
}

/* write's prologue holds a syscall. */
static void check_write_copy(uintptr_t entry)
{
	ssize_t (*copy)(int, const void *, size_t) = (ssize_t (*)(int, const void *, size_t))entry;

	errno = 0;
	CHECK_EQ_INT(copy(-1, "", 0), -1);
	CHECK_EQ_INT(errno, EBADF);
}

static void check_qsort_copy(uintptr_t entry)
{
	void (*copy)(void *, size_t, size_t, int (*)(const void *, const void *)) =
		(void (*)(void *, size_t, size_t, int (*)(const void *, const void *)))entry;
	int v[] = { 3, 1, 2 };

	copy(v, 3, sizeof(int), compare_ints);
	CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3);
}

static const struct {
	const char *name;
	void (*check)(uintptr_t entry);
} libc_copies[] = {
	{ "atoi", check_atoi_copy },     { "strtol", check_strtol_copy },
	{ "labs", check_labs_copy },     { "getpid", check_getpid_copy },
	{ "write", check_write_copy },   { "qsort", check_qsort_copy },
};

#define N_LIBC_COPIES (sizeof(libc_copies) / sizeof(libc_copies[0]))

/* Runs each relocated copy it can make; returns how many ran. */
static size_t run_libc_copies(void)
{
	size_t ran = 0;

	for (size_t i = 0; i < N_LIBC_COPIES; i++) {
		size_t size = 0;
		const void *func = libc_function(libc_copies[i].name, &size);
		uint8_t *copy;

		if (!func) {
			printf("  %s: no .dynsym entry found\n", libc_copies[i].name);
			continue;
		}
		copy = relocate_to_near_page(func, size, RELOCATOR_JMP_REL32_LEN);
		if (!copy)
			continue;
		libc_copies[i].check((uintptr_t)copy);
		munmap(copy, NEAR_PAGE_LEN);
		ran++;
	}
	return ran;
}

static void test_relocated_libc_prologues_run(void)
{
	size_t ran = run_libc_copies();

	printf("libc copies run: %zu of %zu\n", ran, N_LIBC_COPIES);
	CHECK(ran >= N_LIBC_COPIES - 2);
}

/* ---- real prologues from installed libraries -------------------------------- */

#define MAX_REASONS 48

struct reason_count {
	char text[96];
	size_t count;
};

struct lib_stats {
	size_t relocated;
	size_t skipped;
	size_t unexpected;
	size_t verify_failed;
	struct reason_count reasons[MAX_REASONS];
	size_t n_reasons;
};

struct func_sym {
	uint64_t addr;
	uint64_t size;
	const char *name;
};

struct elf_image {
	int fd;
	const uint8_t *map;
	size_t map_len;
	Elf *elf;
};

/* Offsets and sizes make one reason per kind: "+0x1a" -> "+#", "7-byte" -> "#-byte". */
static void normalize_reason(const char *in, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; in[i] && o + 2 < cap;) {
		bool starts_number = (in[i] >= '0' && in[i] <= '9') &&
				     (i == 0 || !((in[i - 1] >= 'a' && in[i - 1] <= 'z') ||
						 (in[i - 1] >= '0' && in[i - 1] <= '9')));

		if (!starts_number) {
			out[o++] = in[i++];
			continue;
		}
		out[o++] = '#';
		if (in[i] == '0' && in[i + 1] == 'x')
			i += 2;
		while ((in[i] >= '0' && in[i] <= '9') || (in[i] >= 'a' && in[i] <= 'f'))
			i++;
	}
	out[o] = '\0';
}

static const char *errno_name(int err)
{
	switch (-err) {
	case ERANGE:  return "ERANGE";
	case EXDEV:   return "EXDEV";
	case ENOTSUP: return "ENOTSUP";
	case ENOSPC:  return "ENOSPC";
	case EINVAL:  return "EINVAL";
	case ENOENT:  return "ENOENT";
	default:      return "E?";
	}
}

static void count_reason(struct lib_stats *st, int err, const char *reason)
{
	char text[96], norm[80];
	size_t i;

	normalize_reason(reason ? reason : "(none)", norm, sizeof(norm));
	snprintf(text, sizeof(text), "%-7s %s", errno_name(err), norm);
	for (i = 0; i < st->n_reasons; i++)
		if (strcmp(st->reasons[i].text, text) == 0)
			break;
	if (i == st->n_reasons) {
		if (st->n_reasons == MAX_REASONS)
			i = MAX_REASONS - 1; /* the last slot absorbs the rest */
		else
			snprintf(st->reasons[st->n_reasons++].text, sizeof(text), "%s", text);
	}
	st->reasons[i].count++;
}

static int compare_reason_counts(const void *a, const void *b)
{
	const struct reason_count *x = a, *y = b;

	return (x->count < y->count) - (x->count > y->count);
}

static int compare_func_addr(const void *a, const void *b)
{
	const struct func_sym *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

static bool elf_image_open(const char *path, struct elf_image *img)
{
	struct stat sb;

	memset(img, 0, sizeof(*img));
	img->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (img->fd < 0)
		return false;
	if (fstat(img->fd, &sb) < 0)
		goto err_close;
	img->map_len = (size_t)sb.st_size;
	img->map = mmap(NULL, img->map_len, PROT_READ, MAP_PRIVATE, img->fd, 0);
	if (img->map == MAP_FAILED)
		goto err_close;
	elf_version(EV_CURRENT);
	img->elf = elf_memory((char *)img->map, img->map_len);
	if (!img->elf)
		goto err_unmap;
	return true;

err_unmap:
	munmap((void *)img->map, img->map_len);
err_close:
	close(img->fd);
	return false;
}

static void elf_image_close(struct elf_image *img)
{
	elf_end(img->elf);
	munmap((void *)img->map, img->map_len);
	close(img->fd);
}

/* The file bytes of [vaddr, vaddr+size) if one executable PT_LOAD holds them all. */
static const uint8_t *elf_image_code(const struct elf_image *img, uint64_t vaddr, uint64_t size)
{
	size_t n_phdrs;
	GElf_Phdr ph;

	if (elf_getphdrnum(img->elf, &n_phdrs) != 0)
		return NULL;
	for (size_t i = 0; i < n_phdrs; i++) {
		if (!gelf_getphdr(img->elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X))
			continue;
		if (vaddr < ph.p_vaddr || vaddr + size > ph.p_vaddr + ph.p_filesz)
			continue;
		if (ph.p_offset + (vaddr - ph.p_vaddr) + size > img->map_len)
			return NULL;
		return img->map + ph.p_offset + (vaddr - ph.p_vaddr);
	}
	return NULL;
}

/* Defined functions >= 5 bytes from .dynsym, one per address; *n_out entries, malloc'd. */
static struct func_sym *elf_image_functions(const struct elf_image *img, size_t *n_out)
{
	struct func_sym *funcs = NULL;
	size_t n = 0, cap = 0, uniq = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(img->elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			int type;

			if (!gelf_getsym(data, (int)i, &sym))
				continue;
			type = GELF_ST_TYPE(sym.st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
			    sym.st_shndx == SHN_UNDEF || sym.st_size < RELOCATOR_JMP_REL32_LEN)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				funcs = realloc(funcs, cap * sizeof(*funcs));
				if (!funcs)
					return NULL;
			}
			funcs[n].addr = sym.st_value;
			funcs[n].size = sym.st_size;
			funcs[n++].name = elf_strptr(img->elf, sh.sh_link, sym.st_name);
		}
	}
	if (!funcs)
		return NULL;
	qsort(funcs, n, sizeof(*funcs), compare_func_addr);
	for (size_t i = 0; i < n; i++)
		if (uniq == 0 || funcs[uniq - 1].addr != funcs[i].addr)
			funcs[uniq++] = funcs[i];
	*n_out = uniq;
	return funcs;
}

static bool is_expected_skip(int err)
{
	return err == -ERANGE || err == -EXDEV || err == -ENOTSUP;
}

static void relocate_one(const struct elf_image *img, const struct func_sym *f,
			 struct lib_stats *st)
{
	const uint8_t *code = elf_image_code(img, f->addr, f->size);
	uint64_t dest = f->addr + REAL_DEST_OFFSET;
	uint8_t out[RELOCATOR_MAX_CODE_LEN];
	struct relocation r;
	const char *bad;
	int err;

	if (!code) {
		st->skipped++;
		count_reason(st, -ENOENT, "bytes not in an executable PT_LOAD");
		return;
	}
	err = relocator_relocate(code, f->size, f->addr, RELOCATOR_JMP_REL32_LEN, dest, out,
				 sizeof(out), &r);
	if (err == 0) {
		st->relocated++;
		bad = verify_relocation(code, f->size, f->addr, dest, out, &r);
		if (bad && st->verify_failed++ < 5)
			fprintf(stderr, "  %s@0x%" PRIx64 ": %s\n", f->name, f->addr, bad);
		return;
	}
	if (!is_expected_skip(err) && st->unexpected++ < 5)
		fprintf(stderr, "  %s@0x%" PRIx64 ": unexpected %d (%s)\n", f->name, f->addr, err,
			r.skip_reason);
	st->skipped++;
	count_reason(st, err, r.skip_reason);
}

static void print_lib_stats(const char *label, struct lib_stats *st)
{
	qsort(st->reasons, st->n_reasons, sizeof(st->reasons[0]), compare_reason_counts);
	printf("%s: %zu relocated, %zu skipped\n", label, st->relocated, st->skipped);
	for (size_t i = 0; i < st->n_reasons; i++)
		printf("    %6zu  %s\n", st->reasons[i].count, st->reasons[i].text);
}

/* Returns false (and says why) when the library is not installed. */
static bool relocate_library(const char *path, const char *label, struct lib_stats *st)
{
	struct elf_image img;
	struct func_sym *funcs;
	size_t n = 0;

	memset(st, 0, sizeof(*st));
	if (!elf_image_open(path, &img)) {
		printf("%s: skipped, cannot open %s: %s\n", label, path, strerror(errno));
		return false;
	}
	funcs = elf_image_functions(&img, &n);
	for (size_t i = 0; funcs && i < n; i++)
		relocate_one(&img, &funcs[i], st);
	free(funcs);
	elf_image_close(&img);
	print_lib_stats(label, st);
	return true;
}

static void check_library(const char *path, const char *label, bool required)
{
	struct lib_stats st;
	size_t total;

	if (!relocate_library(path, label, &st)) {
		CHECK(!required);
		return;
	}
	total = st.relocated + st.skipped;
	CHECK(st.relocated > 0);
	CHECK_EQ_INT(st.unexpected, 0);
	CHECK_EQ_INT(st.verify_failed, 0);
	CHECK(total > 0 && (double)st.relocated / (double)total >= 0.90);
}

static void test_real_prologues_libc(void)
{
	check_library("/lib/x86_64-linux-gnu/libc.so.6", "libc", true);
}

static void test_real_prologues_libzstd(void)
{
	check_library("/lib/x86_64-linux-gnu/libzstd.so.1", "libzstd", false);
}

static void test_real_prologues_libsqlite3(void)
{
	check_library("/lib/x86_64-linux-gnu/libsqlite3.so.0", "libsqlite3", false);
}

int main(void)
{
	RUN_TEST(test_endbr_push_copied_verbatim);
	RUN_TEST(test_far_dest_gets_absolute_jump_back);
	RUN_TEST(test_small_out_cap_is_enospc);
	RUN_TEST(test_sub_rsp_and_store_copied_verbatim);
	RUN_TEST(test_rip_relative_mov);
	RUN_TEST(test_rip_relative_out_of_range_is_erange);
	RUN_TEST(test_rip_relative_lea_of_own_address);
	RUN_TEST(test_rip_relative_cmp_with_immediate);
	RUN_TEST(test_evex_rip_relative_zmm16);
	RUN_TEST(test_jb_rel8_to_outside_widened);
	RUN_TEST(test_jcc_rel8_into_copied_range);
	RUN_TEST(test_copied_branch_into_middle_of_copy_is_exdev);
	RUN_TEST(test_jmp_rel8_widened);
	RUN_TEST(test_jmp_rel32_thunk);
	RUN_TEST(test_thunk_out_of_range_is_erange);
	RUN_TEST(test_same_offsets_len);
	RUN_TEST(test_call_rel32);
	RUN_TEST(test_call_next_instruction_is_enotsup);
	RUN_TEST(test_loop_rel8_is_enotsup);
	RUN_TEST(test_xbegin_is_enotsup);
	RUN_TEST(test_undecodable_in_patch_is_enotsup);
	RUN_TEST(test_function_shorter_than_patch_is_erange);
	RUN_TEST(test_instruction_past_end_is_erange);
	RUN_TEST(test_backward_branch_into_patch_is_exdev);
	RUN_TEST(test_branch_to_entry_is_allowed);
	RUN_TEST(test_body_scan_stops_at_undecodable_bytes);
	RUN_TEST(test_invalid_min_patch_len_is_einval);
	RUN_TEST(test_skip_reasons_are_per_thread);
	RUN_TEST(test_relocated_probe_runs_like_the_original);
	RUN_TEST(test_relocated_libc_prologues_run);
	RUN_TEST(test_real_prologues_libc);
	RUN_TEST(test_real_prologues_libzstd);
	RUN_TEST(test_real_prologues_libsqlite3);
	return unit_summary();
}
