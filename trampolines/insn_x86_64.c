// SPDX-License-Identifier: MIT
/*
 * The built-in side of trampolines/insn_x86_64.h: the one-byte and 0F-map
 * instructions compilers put in functions (general-purpose, SSE/SSE2 moves
 * and arithmetic, branches, the nop and endbr64 forms), decoded to what the
 * relocator and the return-slot scan need. It claims an encoding only where
 * it knows Zydis decodes it alike, and leaves every other one (VEX, EVEX, the
 * 0F38/0F3A maps, x87, MMX, 67-prefixed, unusual prefix mixes...) to Zydis:
 * a wrong "not mine" costs a dlopen, a wrong claim a bad patch.
 * Pure: no state, no allocation, no logging.
 */
#include <errno.h>
#include <string.h>

#include "trampolines/insn_x86_64.h"

#define X86_MAX_INSN_LEN 15

/* Immediates */
enum { IMM_NONE, IMM_8, IMM_16, IMM_Z /* 16 or 32 by operand size */, IMM_V /* 16/32/64 */ };
/* The general-purpose register an instruction writes */
enum { DST_NONE, DST_RM, DST_REG, DST_OPC, DST_UNKNOWN /* several or implicit: Zydis tells */ };

#define D_MODRM    0x01
#define D_MEM_ONLY 0x02
#define D_BYTE     0x04 /* 8-bit operands */
#define D_LOCKABLE 0x08 /* a lock prefix is valid with a memory destination */
#define D_REL      0x10 /* the immediate is relative */
#define D_DEF64    0x20 /* 64-bit operand size by default (push, pop, near branches) */
#define D_SSE_GPR  0x40 /* an SSE instruction's general-purpose operand: 32 or 64 bits */

/* One opcode as decoded: filled by the map's describer, or refused. */
struct op_desc {
	uint8_t flags, imm, dst, kind, flow;
	uint8_t writes; /* implicit INSN_WRITES_* */
};

/* Prefixes before the opcode. */
struct prefixes {
	unsigned len;
	bool opsize, lock, rep, repne, fs_gs;
	unsigned segs;
	uint8_t rex; /* 0 if none */
};

/* The ModRM byte and what follows it. */
struct modrm {
	uint8_t mod, reg, rm;
	unsigned len; /* modrm + sib + displacement */
	unsigned disp_off, disp_len;
	int64_t disp;
	int8_t base, index;
};

static int read_prefixes(const uint8_t *c, size_t avail, struct prefixes *p)
{
	memset(p, 0, sizeof(*p));
	for (; p->len < avail && p->len < X86_MAX_INSN_LEN; p->len++) {
		switch (c[p->len]) {
		case 0xf0: p->lock = true; continue;
		case 0xf2: p->repne = true; continue;
		case 0xf3: p->rep = true; continue;
		case 0x66: p->opsize = true; continue;
		case 0x2e: case 0x36: case 0x3e: case 0x26: p->segs++; p->fs_gs = false; continue;
		case 0x64: case 0x65: p->segs++; p->fs_gs = true; continue;
		case 0x67: return -ENOENT; /* 32-bit addresses: Zydis's */
		default: break;
		}
		break;
	}
	if (p->len < avail && (c[p->len] & 0xf0) == 0x40)
		p->rex = c[p->len++];
	if (p->len >= avail || (p->rep && p->repne) || p->segs > 1)
		return -ENOENT;
	return 0;
}

static int64_t read_le(const uint8_t *c, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)c[i] << (8 * i);
	if (n < 8 && (v >> (8 * n - 1)) & 1) /* sign-extend */
		v |= ~0ull << (8 * n);
	return (int64_t)v;
}

static int read_modrm(const uint8_t *c, size_t avail, uint8_t rex, struct modrm *m)
{
	unsigned at = 1;

	memset(m, 0, sizeof(*m));
	m->mod = c[0] >> 6;
	m->reg = (uint8_t)(((c[0] >> 3) & 7) | (rex & 4 ? 8 : 0));
	m->rm = c[0] & 7;
	m->base = m->index = INSN_REG_NONE;
	if (m->mod == 3) {
		m->rm |= rex & 1 ? 8 : 0;
		m->len = 1;
		return 0;
	}
	if (m->rm == 4) { /* SIB */
		uint8_t sib;

		if (avail < 2)
			return -ENOENT;
		sib = c[1];
		at = 2;
		if (((sib >> 3) & 7) != 4 || (rex & 2))
			m->index = (int8_t)(((sib >> 3) & 7) | (rex & 2 ? 8 : 0));
		if ((sib & 7) == 5 && m->mod == 0)
			m->disp_len = 4; /* no base */
		else
			m->base = (int8_t)((sib & 7) | (rex & 1 ? 8 : 0));
	} else if (m->rm == 5 && m->mod == 0) {
		m->base = INSN_REG_RIP;
		m->disp_len = 4;
	} else {
		m->base = (int8_t)(m->rm | (rex & 1 ? 8 : 0));
	}
	if (m->mod == 1)
		m->disp_len = 1;
	else if (m->mod == 2)
		m->disp_len = 4;
	if (at + m->disp_len > avail)
		return -ENOENT;
	m->disp_off = at;
	m->disp = m->disp_len ? read_le(c + at, m->disp_len) : 0;
	m->len = at + m->disp_len;
	return 0;
}

static bool set(struct op_desc *d, uint8_t flags, uint8_t imm, uint8_t dst, uint8_t kind,
		uint8_t flow)
{
	*d = (struct op_desc){ flags, imm, dst, kind, flow, 0 };
	return true;
}

/* 00-3F: add, or, adc, sbb, and, sub, xor, cmp in their six forms. */
static bool describe_alu(uint8_t op, struct op_desc *d)
{
	static const uint8_t kinds[8] = { INSN_ADD, 0, 0, 0, 0, INSN_SUB, 0, 0 };
	uint8_t kind = kinds[op >> 3], form = op & 7;
	bool cmp = (op >> 3) == 7;
	uint8_t lockable = cmp ? 0 : D_LOCKABLE;

	switch (form) {
	case 0: return set(d, D_MODRM | D_BYTE | lockable, IMM_NONE, cmp ? DST_NONE : DST_RM, kind, 0);
	case 1: return set(d, D_MODRM | lockable, IMM_NONE, cmp ? DST_NONE : DST_RM, kind, 0);
	case 2: return set(d, D_MODRM | D_BYTE, IMM_NONE, cmp ? DST_NONE : DST_REG, kind, 0);
	case 3: return set(d, D_MODRM, IMM_NONE, cmp ? DST_NONE : DST_REG, kind, 0);
	case 4: return set(d, D_BYTE, IMM_8, DST_NONE, kind, 0);  /* al: not rsp/rbp */
	case 5: return set(d, 0, IMM_Z, DST_NONE, kind, 0);       /* eax/rax */
	default: return false;
	}
}

/* Group 1 (80, 81, 83): the ALU operation in ModRM.reg, an immediate. */
static bool describe_group1(uint8_t op, uint8_t reg, struct op_desc *d)
{
	uint8_t kind = reg == 0 ? INSN_ADD : reg == 5 ? INSN_SUB : INSN_OTHER;
	uint8_t flags = D_MODRM | (op == 0x80 ? D_BYTE : 0) | (reg != 7 ? D_LOCKABLE : 0);

	return set(d, flags, op == 0x81 ? IMM_Z : IMM_8, reg == 7 ? DST_NONE : DST_RM, kind, 0);
}

/* Groups 2, 3, 4/5 and the other ModRM.reg-selected one-byte opcodes. */
static bool describe_group(uint8_t op, uint8_t reg, struct op_desc *d)
{
	uint8_t byte = (op & 1) ? 0 : D_BYTE;

	switch (op) {
	case 0xc0: case 0xc1: case 0xd0: case 0xd1: case 0xd2: case 0xd3: /* shifts, rotates */
		if (reg == 6)
			return false;
		return set(d, D_MODRM | byte, op <= 0xc1 ? IMM_8 : IMM_NONE, DST_RM, 0, 0);
	case 0xf6: case 0xf7:
		if (reg == 0) /* test r/m, imm */
			return set(d, D_MODRM | byte, op == 0xf6 ? IMM_8 : IMM_Z, DST_NONE, 0, 0);
		if (reg == 2 || reg == 3) /* not, neg */
			return set(d, D_MODRM | byte | D_LOCKABLE, IMM_NONE, DST_RM, 0, 0);
		if (reg >= 4) /* mul, imul, div, idiv: rax/rdx (and ah) */
			return set(d, D_MODRM | byte, IMM_NONE, DST_NONE, 0, 0);
		return false;
	case 0xfe:
		return reg <= 1 && set(d, D_MODRM | D_BYTE | D_LOCKABLE, IMM_NONE, DST_RM, 0, 0);
	case 0xff:
		if (reg <= 1) /* inc, dec */
			return set(d, D_MODRM | D_LOCKABLE, IMM_NONE, DST_RM, 0, 0);
		if (reg == 2)
			return set(d, D_MODRM | D_DEF64, IMM_NONE, DST_NONE, INSN_CALL, INSN_FLOW_CALL);
		if (reg == 4)
			return set(d, D_MODRM | D_DEF64, IMM_NONE, DST_NONE, INSN_JMP,
				   INSN_FLOW_UNCOND_BR);
		if (reg == 6)
			return set(d, D_MODRM | D_DEF64, IMM_NONE, DST_NONE, INSN_PUSH, 0);
		return false;
	case 0xc6: case 0xc7: /* mov r/m, imm (c6 f8 / c7 f8: xabort, xbegin) */
		return reg == 0 && set(d, D_MODRM | byte, op == 0xc6 ? IMM_8 : IMM_Z, DST_RM,
				       INSN_MOV, 0);
	case 0x8f:
		return reg == 0 && set(d, D_MODRM | D_DEF64, IMM_NONE, DST_RM, INSN_POP, 0);
	default:
		return false;
	}
}

/* The one-byte map. reg is ModRM.reg (without REX.R) where the opcode has one. */
static bool describe_map0(uint8_t op, uint8_t reg, struct op_desc *d)
{
	if (op < 0x40 && (op & 7) < 6)
		return describe_alu(op, d);
	if (op >= 0x50 && op <= 0x57)
		return set(d, D_DEF64, IMM_NONE, DST_NONE, INSN_PUSH, 0);
	if (op >= 0x58 && op <= 0x5f)
		return set(d, D_DEF64, IMM_NONE, DST_OPC, INSN_POP, 0);
	if (op >= 0x70 && op <= 0x7f)
		return set(d, D_REL | D_DEF64, IMM_8, DST_NONE, INSN_JCC, INSN_FLOW_COND_BR);
	if (op >= 0xb0 && op <= 0xb7)
		return set(d, D_BYTE, IMM_8, DST_OPC, INSN_MOV, 0);
	if (op >= 0xb8 && op <= 0xbf)
		return set(d, 0, IMM_V, DST_OPC, INSN_MOV, 0);
	switch (op) {
	case 0x63: return set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0); /* movsxd */
	case 0x68: return set(d, D_DEF64, IMM_Z, DST_NONE, INSN_PUSH, 0);
	case 0x6a: return set(d, D_DEF64, IMM_8, DST_NONE, INSN_PUSH, 0);
	case 0x69: return set(d, D_MODRM, IMM_Z, DST_REG, 0, 0);  /* imul */
	case 0x6b: return set(d, D_MODRM, IMM_8, DST_REG, 0, 0);
	case 0x80: case 0x81: case 0x83: return describe_group1(op, reg, d);
	case 0x84: return set(d, D_MODRM | D_BYTE, IMM_NONE, DST_NONE, 0, 0); /* test */
	case 0x85: return set(d, D_MODRM, IMM_NONE, DST_NONE, 0, 0);
	case 0x86: return set(d, D_MODRM | D_BYTE | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0);
	case 0x87: return set(d, D_MODRM | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0); /* xchg */
	case 0x88: return set(d, D_MODRM | D_BYTE, IMM_NONE, DST_RM, INSN_MOV, 0);
	case 0x89: return set(d, D_MODRM, IMM_NONE, DST_RM, INSN_MOV, 0);
	case 0x8a: return set(d, D_MODRM | D_BYTE, IMM_NONE, DST_REG, INSN_MOV, 0);
	case 0x8b: return set(d, D_MODRM, IMM_NONE, DST_REG, INSN_MOV, 0);
	case 0x8d: return set(d, D_MODRM | D_MEM_ONLY, IMM_NONE, DST_REG, 0, 0); /* lea */
	case 0x90: return set(d, 0, IMM_NONE, DST_NONE, INSN_NOP, 0); /* refined by the caller */
	case 0x98: case 0x99: return set(d, 0, IMM_NONE, DST_NONE, 0, 0); /* cdqe, cqo */
	case 0xa8: return set(d, D_BYTE, IMM_8, DST_NONE, 0, 0);
	case 0xa9: return set(d, 0, IMM_Z, DST_NONE, 0, 0);
	case 0xa4: case 0xa5: case 0xa6: case 0xa7: case 0xaa: case 0xab: case 0xac: case 0xad:
	case 0xae: case 0xaf: /* string instructions */
		return set(d, (op & 1) ? 0 : D_BYTE, IMM_NONE, DST_UNKNOWN, 0, 0);
	case 0xc2: case 0xc3: /* ret: pops rsp */
		set(d, D_DEF64, op == 0xc2 ? IMM_16 : IMM_NONE, DST_NONE, 0, INSN_FLOW_RET);
		d->writes = INSN_WRITES_RSP;
		return true;
	case 0xc9: /* leave: rsp and rbp */
		set(d, D_DEF64, IMM_NONE, DST_NONE, 0, 0);
		d->writes = INSN_WRITES_RSP | INSN_WRITES_RBP;
		return true;
	case 0xcc: return set(d, 0, IMM_NONE, DST_NONE, INSN_INT3, INSN_FLOW_INTERRUPT);
	case 0xf4: return set(d, 0, IMM_NONE, DST_NONE, 0, INSN_FLOW_SYSTEM); /* hlt, after _exit's syscall */
	case 0xe8: return set(d, D_REL | D_DEF64, IMM_Z, DST_NONE, INSN_CALL, INSN_FLOW_CALL);
	case 0xe9: return set(d, D_REL | D_DEF64, IMM_Z, DST_NONE, INSN_JMP, INSN_FLOW_UNCOND_BR);
	case 0xeb: return set(d, D_REL | D_DEF64, IMM_8, DST_NONE, INSN_JMP, INSN_FLOW_UNCOND_BR);
	case 0xc0: case 0xc1: case 0xd0: case 0xd1: case 0xd2: case 0xd3: case 0xf6: case 0xf7:
	case 0xfe: case 0xff: case 0xc6: case 0xc7: case 0x8f:
		return describe_group(op, reg, d);
	default:
		return false;
	}
}

/*
 * The SSE/SSE2 opcodes of the 0F map by mandatory prefix (bit 0: none, 1: 66,
 * 2: F3, 3: F2), every one with a ModRM and an xmm destination unless noted.
 */
static uint8_t sse_prefixes(uint8_t op)
{
	enum { N = 1, P66 = 2, F3 = 4, F2 = 8, ALL = 15 };

	if (op >= 0x60 && op <= 0x6b)
		return P66;
	if ((op >= 0xd1 && op <= 0xd5) || (op >= 0xd8 && op <= 0xdf) || (op >= 0xe0 && op <= 0xe5) ||
	    (op >= 0xe8 && op <= 0xef) || (op >= 0xf1 && op <= 0xf6) || (op >= 0xf8 && op <= 0xfe))
		return P66;
	switch (op) {
	case 0x10: case 0x11: case 0x51: case 0x58: case 0x59: case 0x5a: case 0x5c: case 0x5d:
	case 0x5e: case 0x5f: case 0xc2:
		return ALL;
	case 0x14: case 0x15: case 0x28: case 0x29: case 0x2e: case 0x2f: case 0x54: case 0x55:
	case 0x56: case 0x57: case 0xc6:
		return N | P66;
	case 0x52: case 0x53: return N | F3;
	case 0x12: case 0x13: case 0x16: case 0x17: return N | P66; /* movlps, movhps...: see below */
	case 0x5b: return N | P66 | F3;
	case 0x6c: case 0x6d: case 0x6e: case 0x74: case 0x75: case 0x76: case 0xd6:
		return P66;
	case 0x6f: case 0x7f: return P66 | F3;
	case 0x70: case 0xe6: return P66 | F3 | F2;
	case 0x7e: return P66 | F3;
	case 0x2a: case 0x2c: case 0x2d: return F3 | F2;
	default: return 0;
	}
}

/* The 0F map: SSE by prefix, then the general-purpose ones. prefix is 0-3 as above. */
static bool describe_map1(uint8_t op, uint8_t reg, unsigned prefix, struct op_desc *d)
{
	uint8_t sse = sse_prefixes(op);

	if (sse) {
		uint8_t dst = DST_NONE;

		if (!(sse & (1u << prefix)))
			return false;
		if ((op == 0x2c || op == 0x2d) || (op == 0x7e && prefix == 1))
			dst = op == 0x7e ? DST_RM : DST_REG; /* cvt to a GPR, movd/movq to r/m */
		set(d, D_MODRM, (op == 0x70 || op == 0xc2 || op == 0xc6) ? IMM_8 : IMM_NONE, dst, 0, 0);
		/* the stores, and movlpd/movhpd: memory only (0f 12/16 on registers: movhlps, movlhps) */
		if (op == 0x13 || op == 0x17 || ((op == 0x12 || op == 0x16) && prefix == 1))
			d->flags |= D_MEM_ONLY;
		return true;
	}
	if (op >= 0x80 && op <= 0x8f)
		return prefix == 0 &&
		       set(d, D_REL | D_DEF64, IMM_Z, DST_NONE, INSN_JCC, INSN_FLOW_COND_BR);
	if (op >= 0x40 && op <= 0x4f) /* cmovcc */
		return prefix <= 1 && set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0);
	if (op >= 0x90 && op <= 0x9f) /* setcc */
		return prefix == 0 && reg == 0 && set(d, D_MODRM | D_BYTE, IMM_NONE, DST_RM, 0, 0);
	if (op >= 0xc8 && op <= 0xcf) /* bswap */
		return prefix == 0 && set(d, 0, IMM_NONE, DST_OPC, 0, 0);
	if (prefix >= 2 && !(prefix == 2 && (op == 0xb8 || op == 0xbc || op == 0xbd || op == 0x1e)))
		return false;
	switch (op) {
	case 0x05: return prefix == 0 && set(d, 0, IMM_NONE, DST_NONE, 0, 0); /* syscall */
	case 0x0b: return prefix == 0 && set(d, 0, IMM_NONE, DST_NONE, 0, 0); /* ud2 */
	case 0x1f: return reg == 0 && set(d, D_MODRM, IMM_NONE, DST_NONE, INSN_NOP, 0);
	case 0xa3: return set(d, D_MODRM, IMM_NONE, DST_NONE, 0, 0); /* bt */
	case 0xab: case 0xb3: case 0xbb: /* bts, btr, btc */
		return set(d, D_MODRM | D_LOCKABLE, IMM_NONE, DST_RM, 0, 0);
	case 0xa4: case 0xac: return set(d, D_MODRM, IMM_8, DST_RM, 0, 0); /* shld, shrd */
	case 0xa5: case 0xad: return set(d, D_MODRM, IMM_NONE, DST_RM, 0, 0);
	case 0xaf: return set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0); /* imul */
	case 0xb0: return set(d, D_MODRM | D_BYTE | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0);
	case 0xb1: return set(d, D_MODRM | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0); /* cmpxchg */
	case 0xb6: case 0xb7: case 0xbe: case 0xbf: /* movzx, movsx: a full-width destination */
		return set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0);
	case 0xb8: return prefix == 2 && set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0); /* popcnt */
	case 0xbc: case 0xbd: return set(d, D_MODRM, IMM_NONE, DST_REG, 0, 0); /* bsf/tzcnt.. */
	case 0xba:
		if (reg < 4)
			return false;
		return set(d, D_MODRM | (reg > 4 ? D_LOCKABLE : 0), IMM_8,
			   reg > 4 ? DST_RM : DST_NONE, 0, 0);
	case 0xc0: return set(d, D_MODRM | D_BYTE | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0);
	case 0xc1: return set(d, D_MODRM | D_LOCKABLE, IMM_NONE, DST_UNKNOWN, 0, 0); /* xadd */
	default: return false;
	}
}

static unsigned imm_len(uint8_t imm, const struct prefixes *p, bool def64)
{
	bool w = p->rex & 8;

	switch (imm) {
	case IMM_8: return 1;
	case IMM_16: return 2;
	case IMM_Z: return (p->opsize && !w && !def64) ? 2 : 4;
	case IMM_V: return w ? 8 : p->opsize ? 2 : 4;
	default: return 0;
	}
}

/* Operand size in bits of a general-purpose destination. */
static unsigned op_width(const struct op_desc *d, const struct prefixes *p)
{
	if (d->flags & D_BYTE)
		return 8;
	if (d->flags & D_SSE_GPR)
		return p->rex & 8 ? 64 : 32;
	if ((p->rex & 8) || (d->flags & D_DEF64))
		return 64;
	return p->opsize ? 16 : 32;
}

static uint8_t writes_of(int reg, unsigned width)
{
	if (reg == INSN_REG_RSP && width == 64)
		return INSN_WRITES_RSP;
	if (reg == INSN_REG_RBP && width >= 32)
		return INSN_WRITES_RBP;
	return 0;
}

/* The prefixes Zydis accepts on a legacy-map opcode and treats as we do. */
static bool map0_prefixes_ok(uint8_t op, const struct op_desc *d, const struct prefixes *p,
			     const struct modrm *m)
{
	bool string = (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf);
	bool branch = d->flow != INSN_FLOW_NONE && d->flow != INSN_FLOW_INTERRUPT;

	if (p->lock && (!(d->flags & D_LOCKABLE) || m->mod == 3 || !(d->flags & D_MODRM)))
		return false;
	if ((p->rep || p->repne) && !string && !(op == 0x90 && p->rep && !p->opsize))
		return false;
	if (p->opsize && (branch || d->kind == INSN_PUSH || d->kind == INSN_POP || string ||
			  (op == 0x90 && p->rep) || op == 0xc9 || op == 0x63))
		return false;
	if (p->rex && (op == 0x90 || op == 0x63) && !(p->rex & 8 && op == 0x63))
		return false;
	return true;
}

static bool map1_prefixes_ok(uint8_t op, const struct op_desc *d, const struct prefixes *p,
			     const struct modrm *m)
{
	if (p->lock && (!(d->flags & D_LOCKABLE) || m->mod == 3 || !(d->flags & D_MODRM)))
		return false;
	/* 66 is the mandatory prefix of SSE2 forms, an operand size elsewhere; not both */
	if (p->opsize && (p->rep || p->repne))
		return false;
	if (p->opsize && (d->flow != INSN_FLOW_NONE || op == 0x05 || op == 0x0b))
		return false;
	return true;
}

/* add/sub/mov whose first operand is the ModRM r/m one (the others: reg first). */
static bool rm_is_first(uint8_t op)
{
	if (op < 0x40)
		return (op & 7) < 2;
	return op != 0x8a && op != 0x8b;
}

static void fill_operands(struct insn *in, const struct op_desc *d, const struct prefixes *p,
			  const struct modrm *m, uint8_t op)
{
	unsigned width = op_width(d, p);
	int rm_reg = m->mod == 3 ? m->rm : INSN_REG_NONE;
	int opc_reg = (op & 7) | (p->rex & 1 ? 8 : 0);
	int dst = INSN_REG_NONE;

	if (d->dst == DST_RM)
		dst = rm_reg;
	else if (d->dst == DST_REG)
		dst = m->reg;
	else if (d->dst == DST_OPC)
		dst = opc_reg;
	in->writes = d->writes | (dst != INSN_REG_NONE ? writes_of(dst, width) : 0);
	if (in->kind == INSN_PUSH || in->kind == INSN_POP || in->kind == INSN_CALL)
		in->writes &= (uint8_t)~INSN_WRITES_RSP; /* their own move of rsp: the scan's */
	if (m->mod != 3 && (d->flags & D_MODRM)) {
		in->n_mem = 1;
		/* lea computes an offset: Zydis gives its operand no segment */
		in->mem[0] = (struct insn_mem){ .base = m->base, .index = m->index,
						.fs_gs = p->fs_gs && op != 0x8d, .disp = m->disp };
	}
	if (width != 64)
		return;
	/* the visible operands the scan compares: pop rbp, add/sub rsp, mov rbp <- rsp */
	if (in->kind == INSN_POP)
		in->dst_reg = (int8_t)(d->flags & D_MODRM ? rm_reg : opc_reg);
	if (in->kind != INSN_ADD && in->kind != INSN_SUB && in->kind != INSN_MOV)
		return;
	if (d->dst == DST_OPC)
		in->dst_reg = (int8_t)opc_reg;
	else if (!(d->flags & D_MODRM))
		in->dst_reg = 0; /* rax, imm */
	else
		in->dst_reg = (int8_t)(rm_is_first(op) ? rm_reg : m->reg);
	if ((d->flags & D_MODRM) && d->imm == IMM_NONE)
		in->src_reg = (int8_t)(rm_is_first(op) ? m->reg : rm_reg);
}

/* endbr64 and endbr32 (f3 0f 1e fa/fb), the only 0f 1e forms taken. */
static int decode_endbr(const uint8_t *c, size_t avail, const struct prefixes *p, unsigned at,
			struct insn *in)
{
	if (at >= avail || (c[at] != 0xfa && c[at] != 0xfb) || !p->rep || p->opsize || p->lock ||
	    p->rex)
		return -ENOENT;
	in->len = (uint8_t)(at + 1);
	return 0;
}

static int decode_immediate(const uint8_t *c, size_t avail, unsigned at, const struct op_desc *d,
			    const struct prefixes *p, struct insn *in)
{
	unsigned n = imm_len(d->imm, p, d->flags & D_DEF64);

	if (at + n > avail || at + n > X86_MAX_INSN_LEN)
		return -ENOENT;
	in->len = (uint8_t)(at + n);
	if (!n)
		return 0;
	if (d->flags & D_REL) {
		in->has_rel = true;
		in->rel = read_le(c + at, n);
	} else if (in->kind == INSN_ADD || in->kind == INSN_SUB || in->kind == INSN_MOV) {
		in->src_imm = true;
		in->imm = read_le(c + at, n);
	}
	return 0;
}

static bool describe(const uint8_t *c, size_t avail, unsigned map, unsigned at,
		     const struct prefixes *p, struct op_desc *d, uint8_t op)
{
	uint8_t reg = at < avail ? (c[at] >> 3) & 7 : 0; /* meaningful where there is a ModRM */
	unsigned prefix = p->rep ? 2 : p->repne ? 3 : p->opsize ? 1 : 0;

	if (map == 0)
		return describe_map0(op, reg, d);
	if (!describe_map1(op, reg, prefix, d))
		return false;
	if (sse_prefixes(op) && (d->dst == DST_REG || d->dst == DST_RM))
		d->flags |= D_SSE_GPR; /* 66 is a mandatory prefix there, not a 16-bit size */
	return true;
}

int insn_decode_builtin(const uint8_t *c, size_t avail, unsigned want, struct insn *in)
{
	struct prefixes p;
	struct modrm m = { .mod = 3, .base = INSN_REG_NONE, .index = INSN_REG_NONE };
	struct op_desc d;
	unsigned at, map = 0;
	uint8_t op;

	memset(in, 0, sizeof(*in));
	in->ip_base = in->dst_reg = in->src_reg = INSN_REG_NONE;
	if (read_prefixes(c, avail, &p))
		return -ENOENT;
	at = p.len;
	op = c[at++];
	if (op == 0x0f) {
		if (at >= avail)
			return -ENOENT;
		op = c[at++];
		map = 1;
		if (op == 0x1e)
			return decode_endbr(c, avail, &p, at, in);
	}
	if (!describe(c, avail, map, at, &p, &d, op))
		return -ENOENT;
	if (d.dst == DST_UNKNOWN && want == INSN_WANT_OPERANDS)
		return -ENOENT;
	if (d.flags & D_MODRM) {
		if (at >= avail || read_modrm(c + at, avail - at, p.rex, &m))
			return -ENOENT;
		if ((d.flags & D_MEM_ONLY) && m.mod == 3)
			return -ENOENT;
		m.disp_off += at;
		at += m.len;
	}
	if (!(map ? map1_prefixes_ok(op, &d, &p, &m) : map0_prefixes_ok(op, &d, &p, &m)))
		return -ENOENT;
	in->kind = d.kind;
	in->flow = d.flow;
	in->cond = op & 0x0f;
	in->opsize = p.opsize && !(map == 1 && sse_prefixes(op)); /* there, 66 selects the form */
	in->lock = p.lock;
	if (op == 0x90 && map == 0 && p.rep)
		in->kind = INSN_OTHER; /* pause */
	if (m.base == INSN_REG_RIP) {
		in->ip_base = INSN_REG_RIP;
		in->disp_off = (uint8_t)m.disp_off;
		in->disp = m.disp;
	}
	in->rip_call = map == 0 && op == 0xff && m.reg == 2 && in->ip_base == INSN_REG_RIP &&
		       at == 6;
	fill_operands(in, &d, &p, &m, op);
	return decode_immediate(c, avail, at, &d, &p, in);
}

int insn_decode(const uint8_t *code, size_t avail, unsigned want, struct insn *insn)
{
	if (insn_decode_builtin(code, avail, want, insn) == 0)
		return 0;
	return insn_decode_zydis(code, avail, insn);
}
