// SPDX-License-Identifier: MIT
/*
 * Whether a function reads its own return address where the entry hook
 * would have put the exit trampoline (x86-64): `__builtin_return_address(0)`
 * and loggers or plugin loaders that dladdr() their caller compile to a load
 * of the return slot, [rsp] at entry, through rsp or through rbp once the
 * frame is set up. A straight-line scan of the first instructions
 * (trampolines/insn_x86_64.h), tracking rsp and rbp relative to the entry;
 * it stops at the first branch, call or change it cannot follow. What it cannot see (a read after
 * a branch, through another register, in a callee given the slot's address)
 * stays undetected: see return_slot_x86_64.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "trampolines/insn_x86_64.h"
#include "trampolines/return_slot_x86_64.h"

#define SCAN_MAX_INSNS 48

/* rsp and rbp as entry rsp minus an offset, while known. */
struct frame_track {
	int64_t sp_below; /* entry rsp - rsp */
	int64_t bp_below; /* entry rsp - rbp, when bp_known */
	bool sp_known, bp_known;
};

/* A memory operand that addresses the return slot (entry rsp + 0). */
static bool is_return_slot(const struct frame_track *f, const struct insn_mem *m)
{
	if (m->index != INSN_REG_NONE || m->fs_gs)
		return false;
	if (m->base == INSN_REG_RSP && f->sp_known)
		return m->disp == f->sp_below;
	if (m->base == INSN_REG_RBP && f->bp_known)
		return m->disp == f->bp_below;
	return false;
}

/* Follows push/pop/sub/add rsp and mov rbp, rsp; false when rsp is lost. */
static bool track(struct frame_track *f, const struct insn *insn)
{
	switch (insn->kind) {
	case INSN_PUSH:
		f->sp_below += 8;
		return true;
	case INSN_POP:
		f->sp_below -= 8;
		if (insn->dst_reg == INSN_REG_RBP)
			f->bp_known = false;
		return true;
	case INSN_SUB:
	case INSN_ADD:
		if (insn->dst_reg == INSN_REG_RSP) {
			if (!insn->src_imm)
				return false;
			f->sp_below += insn->kind == INSN_SUB ? insn->imm : -insn->imm;
			return true;
		}
		break;
	case INSN_MOV:
		if (insn->dst_reg == INSN_REG_RBP && insn->src_reg == INSN_REG_RSP) {
			f->bp_below = f->sp_below;
			f->bp_known = f->sp_known;
			return true;
		}
		break;
	default:
		break;
	}
	/* any other write to rsp (and, lea, mov): no longer followed; to rbp: forgotten */
	if (insn->writes & INSN_WRITES_RBP)
		f->bp_known = false;
	if (insn->writes & INSN_WRITES_RSP)
		f->sp_known = false;
	return f->sp_known || f->bp_known;
}

/* A branch, call or return ends the straight line. */
static bool ends_scan(const struct insn *insn)
{
	return insn->flow != INSN_FLOW_NONE;
}

int return_slot_read_early(const uint8_t *code, size_t size)
{
	struct frame_track f = { .sp_known = true };
	struct insn insn;
	size_t off = 0;

	for (int n = 0; n < SCAN_MAX_INSNS && off < size; n++) {
		int err = insn_decode(code + off, size - off, INSN_WANT_OPERANDS, &insn);

		if (err == -ELIBACC)
			return err;
		if (err)
			return 0;
		/* `lock or $0, (%rsp)` is a barrier idiom, not a read */
		for (uint8_t i = 0; i < insn.n_mem && !insn.lock; i++)
			if (is_return_slot(&f, &insn.mem[i]))
				return 1;
		if (ends_scan(&insn) || !track(&f, &insn))
			return 0;
		off += insn.len;
	}
	return 0;
}
