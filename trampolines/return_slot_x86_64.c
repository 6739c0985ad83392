// SPDX-License-Identifier: MIT
/*
 * Whether a function reads its own return address where the entry hook
 * would have put the exit trampoline (x86-64): `__builtin_return_address(0)`
 * and loggers or plugin loaders that dladdr() their caller compile to a load
 * of the return slot, [rsp] at entry, through rsp or through rbp once the
 * frame is set up. A straight-line scan of the first instructions with
 * Zydis, tracking rsp and rbp relative to the entry; it stops at the first
 * branch, call or change it cannot follow. What it cannot see (a read after
 * a branch, through another register, in a callee given the slot's address)
 * stays undetected: see return_slot_x86_64.h.
 */
#include <stdbool.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "trampolines/return_slot_x86_64.h"

#define SCAN_MAX_INSNS 48

/* rsp and rbp as entry rsp minus an offset, while known. */
struct frame_track {
	int64_t sp_below; /* entry rsp - rsp */
	int64_t bp_below; /* entry rsp - rbp, when bp_known */
	bool sp_known, bp_known;
};

/* A memory operand that addresses the return slot (entry rsp + 0). */
static bool is_return_slot(const struct frame_track *f, const ZydisDecodedOperand *op)
{
	if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || op->mem.index != ZYDIS_REGISTER_NONE ||
	    op->mem.segment == ZYDIS_REGISTER_FS || op->mem.segment == ZYDIS_REGISTER_GS)
		return false;
	if (op->mem.base == ZYDIS_REGISTER_RSP && f->sp_known)
		return op->mem.disp.value == f->sp_below;
	if (op->mem.base == ZYDIS_REGISTER_RBP && f->bp_known)
		return op->mem.disp.value == f->bp_below;
	return false;
}

/* Follows push/pop/sub/add rsp and mov rbp, rsp; false when rsp is lost. */
static bool track(struct frame_track *f, const ZydisDecodedInstruction *insn,
		  const ZydisDecodedOperand *ops)
{
	const ZydisDecodedOperand *dst = &ops[0], *src = &ops[1];
	bool imm = insn->operand_count_visible == 2 && src->type == ZYDIS_OPERAND_TYPE_IMMEDIATE;

	switch (insn->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
		f->sp_below += 8;
		return true;
	case ZYDIS_MNEMONIC_POP:
		f->sp_below -= 8;
		if (dst->type == ZYDIS_OPERAND_TYPE_REGISTER && dst->reg.value == ZYDIS_REGISTER_RBP)
			f->bp_known = false;
		return true;
	case ZYDIS_MNEMONIC_SUB:
	case ZYDIS_MNEMONIC_ADD:
		if (dst->type == ZYDIS_OPERAND_TYPE_REGISTER && dst->reg.value == ZYDIS_REGISTER_RSP) {
			if (!imm)
				return false;
			f->sp_below += insn->mnemonic == ZYDIS_MNEMONIC_SUB ? src->imm.value.s
									     : -src->imm.value.s;
			return true;
		}
		break;
	case ZYDIS_MNEMONIC_MOV:
		if (dst->type == ZYDIS_OPERAND_TYPE_REGISTER && dst->reg.value == ZYDIS_REGISTER_RBP &&
		    src->type == ZYDIS_OPERAND_TYPE_REGISTER && src->reg.value == ZYDIS_REGISTER_RSP) {
			f->bp_below = f->sp_below;
			f->bp_known = f->sp_known;
			return true;
		}
		break;
	default:
		break;
	}
	/* any other write to rsp (and, lea, mov): no longer followed; to rbp: forgotten */
	for (uint8_t i = 0; i < insn->operand_count; i++) {
		if (ops[i].type != ZYDIS_OPERAND_TYPE_REGISTER || !(ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		if (ops[i].reg.value == ZYDIS_REGISTER_RBP || ops[i].reg.value == ZYDIS_REGISTER_EBP)
			f->bp_known = false;
		if (ops[i].reg.value == ZYDIS_REGISTER_RSP &&
		    insn->mnemonic != ZYDIS_MNEMONIC_CALL && insn->mnemonic != ZYDIS_MNEMONIC_PUSH &&
		    insn->mnemonic != ZYDIS_MNEMONIC_POP)
			f->sp_known = false;
	}
	return f->sp_known || f->bp_known;
}

/* A branch, call or return ends the straight line. */
static bool ends_scan(const ZydisDecodedInstruction *insn)
{
	return insn->meta.category == ZYDIS_CATEGORY_COND_BR ||
	       insn->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
	       insn->meta.category == ZYDIS_CATEGORY_CALL || insn->meta.category == ZYDIS_CATEGORY_RET ||
	       insn->meta.category == ZYDIS_CATEGORY_SYSTEM || insn->meta.category == ZYDIS_CATEGORY_INTERRUPT;
}

bool return_slot_read_early(const uint8_t *code, size_t size)
{
	struct frame_track f = { .sp_known = true };
	ZydisDecodedInstruction insn;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecoder dec;
	size_t off = 0;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (int n = 0; n < SCAN_MAX_INSNS && off < size; n++) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, size - off, &insn, ops)))
			return false;
		/* `lock or $0, (%rsp)` is a barrier idiom, not a read */
		for (uint8_t i = 0; i < insn.operand_count_visible &&
				    !(insn.attributes & ZYDIS_ATTRIB_HAS_LOCK); i++)
			if (is_return_slot(&f, &ops[i]))
				return true;
		if (ends_scan(&insn) || !track(&f, &insn, ops))
			return false;
		off += insn.length;
	}
	return false;
}
