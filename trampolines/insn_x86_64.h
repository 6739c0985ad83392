/* SPDX-License-Identifier: MIT */
/*
 * One x86-64 instruction as the prologue relocator and the return-slot scan
 * see it. insn_decode tries a small built-in decoder (the general-purpose and
 * SSE2 instructions compilers emit) and asks Zydis, dlopen()ed the first time
 * it is needed, for anything else: most processes never map libZydis. Both
 * fill the same fields the same way (tests/unit/test_insn_x86_64.c).
 */
#ifndef PROFD_INSN_X86_64_H
#define PROFD_INSN_X86_64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the scans single out; everything else is INSN_OTHER. */
enum insn_kind {
	INSN_OTHER,
	INSN_JMP,  /* any form: rel8, rel32, indirect */
	INSN_JCC,  /* 7x rel8 or 0F 8x rel32; cond is the opcode's low nibble */
	INSN_CALL, /* any near form */
	INSN_LOOP, /* loop*, jcxz family, xbegin: relative, with no rel32 form */
	INSN_PUSH,
	INSN_POP,
	INSN_ADD,
	INSN_SUB,
	INSN_MOV,
	INSN_NOP,
	INSN_INT3,
};

/* Where the instruction leaves straight-line code (Zydis's category of it). */
enum insn_flow {
	INSN_FLOW_NONE,
	INSN_FLOW_COND_BR,
	INSN_FLOW_UNCOND_BR,
	INSN_FLOW_CALL,
	INSN_FLOW_RET,
	INSN_FLOW_SYSTEM,
	INSN_FLOW_INTERRUPT,
};

/* Registers: 0-15 are the 64-bit general-purpose ones (rax = 0, rsp = 4, rbp = 5). */
#define INSN_REG_NONE  (-1)
#define INSN_REG_RSP   4
#define INSN_REG_RBP   5
#define INSN_REG_RIP   16
#define INSN_REG_EIP   17
#define INSN_REG_OTHER 18 /* any other: a 32-bit address's base, a segment... */

/* Registers written, hidden operands included, as the return-slot scan tells them. */
#define INSN_WRITES_RSP 1 /* rsp itself (a write of esp is not counted) */
#define INSN_WRITES_RBP 2 /* rbp or ebp */

#define INSN_MAX_MEM 2

struct insn_mem {
	int8_t base, index; /* INSN_REG_* */
	bool fs_gs;         /* an fs: or gs: segment */
	int64_t disp;
};

struct insn {
	uint8_t len;
	uint8_t kind;   /* enum insn_kind */
	uint8_t flow;   /* enum insn_flow */
	uint8_t cond;   /* INSN_JCC */
	bool opsize;    /* an effective 66 (operand-size) prefix */
	bool lock;
	bool has_rel;   /* a relative immediate: the target is the next instruction + rel */
	bool rip_call;  /* exactly `ff 15 disp32`: call *disp(%rip) */
	int64_t rel;
	int8_t ip_base; /* INSN_REG_RIP or _EIP when a memory operand is ip-relative */
	uint8_t disp_off; /* ip_base: where the disp32 sits in the instruction */
	int64_t disp;     /* ip_base: its value */
	uint8_t n_mem;  /* visible memory operands (lea's included) */
	struct insn_mem mem[INSN_MAX_MEM];
	uint8_t writes; /* INSN_WRITES_* */
	int8_t dst_reg; /* first visible operand, if a 64-bit general-purpose register */
	int8_t src_reg; /* second visible operand, likewise */
	bool src_imm;   /* exactly two visible operands, the second an immediate... */
	int64_t imm;    /* ...of this value (sign-extended) */
	const char *mnemonic; /* for skip reasons; NULL from the built-in decoder */
};

/* What a caller needs of an instruction. */
#define INSN_WANT_LENGTH   0 /* len, kind, flow, cond, prefixes, relative and ip-relative parts */
#define INSN_WANT_OPERANDS 1 /* also mem, writes, dst_reg, src_reg, src_imm */

/*
 * Decodes the instruction at code[0..avail), at least what want says (the
 * other fields may be left zero). Returns 0 with *insn filled,
 * -ENODATA if it runs past avail, -EILSEQ if it does not decode, -ELIBACC if
 * the built-in decoder does not know it and libZydis cannot be loaded.
 * Thread-safe; the first call that needs Zydis dlopen()s it (loader lock,
 * malloc), every later one is lock-free.
 */
int insn_decode(const uint8_t *code, size_t avail, unsigned want, struct insn *insn);

/*
 * The built-in decoder alone: 0 with *insn filled, or -ENOENT for an
 * instruction it leaves to Zydis (never a different answer than Zydis's).
 * Pure and async-signal-safe.
 */
int insn_decode_builtin(const uint8_t *code, size_t avail, unsigned want, struct insn *insn);

/* Zydis alone (loading it if need be); the same returns as insn_decode. */
int insn_decode_zydis(const uint8_t *code, size_t avail, struct insn *insn);

/* Whether this process has mapped libZydis through insn_decode_zydis. */
bool insn_zydis_loaded(void);

#endif
