// SPDX-License-Identifier: MIT
/*
 * Unit tests of trampolines/aarch64/relocator_aarch64.c, run on any host (pure
 * encoding). Inputs are hand-assembled A64 words (builders below, from the Arm
 * ARM's encodings; a table of words produced by aarch64-linux-gnu-as pins the
 * builders). Each copy is checked by running it on a small A64 interpreter
 * that knows only the instructions involved: the original words from
 * func_addr and the copy from dest_addr start in the same state and must
 * leave the same way (exit pc, registers other than x16/x17, the address and
 * kind of any load), for every flag and register value that decides a
 * branch; the original's effect is also compared with a hand-computed one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tests/unit/unit.h"
#include "trampolines/aarch64/relocator_aarch64.h"

#define FUNC       0x40000000ULL  /* 1 GiB: room for copies below it */
#define HI_FUNC    0x200000000ULL /* 8 GiB: room for adrp's -4 GiB */
#define NEAR_DEST  (FUNC + 0x10000ULL)       /* 64 KiB: everything reaches */
#define MID_DEST   (FUNC + 0x4000000ULL)     /* 64 MiB: beyond b.cond/cbz/ldr literal, within b */
#define FAR_DEST   (FUNC + 0x200000000ULL)   /* 8 GiB: beyond adrp and b */
#define HIGH_DEST  0x7f1234567000ULL         /* far, every halfword non-zero */
#define OUT_FILL   0xaa
#define LOADED     0x10ad10ad10ad10adULL     /* what an interpreted load writes */

static const uint64_t dests[] = { NEAR_DEST, MID_DEST, FAR_DEST, HIGH_DEST, FUNC - 0x4000000ULL };
#define N_DESTS (sizeof(dests) / sizeof(dests[0]))

/* ---- hand assembler (Arm ARM C6.2) --------------------------------------------- */

static uint32_t ADR(unsigned rd, int32_t imm)
{
	uint32_t u = (uint32_t)imm & 0x1fffff;

	return 0x10000000u | (u & 3) << 29 | (u >> 2) << 5 | rd;
}
static uint32_t ADRP(unsigned rd, int32_t pages)
{
	return ADR(rd, pages) | 0x80000000u;
}
static uint32_t B(int32_t off) { return 0x14000000u | ((uint32_t)(off >> 2) & 0x3ffffff); }
static uint32_t BL(int32_t off) { return 0x94000000u | ((uint32_t)(off >> 2) & 0x3ffffff); }
static uint32_t imm19(int32_t off) { return ((uint32_t)(off >> 2) & 0x7ffff) << 5; }
static uint32_t BCOND(unsigned cond, int32_t off) { return 0x54000000u | imm19(off) | cond; }
static uint32_t CBZ(bool x, unsigned rt, int32_t off)
{
	return 0x34000000u | (uint32_t)x << 31 | imm19(off) | rt;
}
static uint32_t CBNZ(bool x, unsigned rt, int32_t off) { return CBZ(x, rt, off) | 1u << 24; }
static uint32_t TBZ(unsigned rt, unsigned bit, int32_t off)
{
	return 0x36000000u | (bit >> 5) << 31 | (bit & 31) << 19 |
	       ((uint32_t)(off >> 2) & 0x3fff) << 5 | rt;
}
static uint32_t TBNZ(unsigned rt, unsigned bit, int32_t off) { return TBZ(rt, bit, off) | 1u << 24; }
/* opc: 0 W/S, 1 X/D, 2 SW/Q, 3 PRFM; simd: V bit */
static uint32_t LDR_LIT(unsigned opc, bool simd, unsigned rt, int32_t off)
{
	return 0x18000000u | opc << 30 | (uint32_t)simd << 26 | imm19(off) | rt;
}

#define NOP      0xd503201fu
#define BTI_C    0xd503245fu
#define PACIASP  0xd503233fu
#define RET      0xd65f03c0u
#define BR_X3    0xd61f0060u
#define SVC0     0xd4000001u
#define BRK0     0xd4200000u
#define LDXR     0xc85f7c20u /* ldxr x0, [x1] */
#define STXR     0xc8027c20u /* stxr w2, x0, [x1] */
#define UDF0     0x00000000u
#define SVE_WORD 0x04a03000u
#define ADD_X16  0x91000610u /* add x16, x16, #1 */
#define ADD_X17  0x91000631u /* add x17, x17, #1 */
#define ADD_X1   0x91000421u /* add x1, x1, #1 */

/* ---- interpreter --------------------------------------------------------------- */

struct machine {
	uint64_t x[32]; /* x[31] reads as zero */
	unsigned nzcv;
	bool loaded;
	uint64_t load_addr;
	unsigned load_kind; /* opc | simd << 2, as in LDR_LIT */
	unsigned load_rt;
	uint64_t exit_pc;
	bool unknown;      /* a word the interpreter does not model changed control flow */
};

static bool cond_holds(unsigned cond, unsigned nzcv)
{
	bool n = nzcv & 8, z = nzcv & 4, c = nzcv & 2, v = nzcv & 1, r;

	switch (cond >> 1) {
	case 0: r = z; break;
	case 1: r = c; break;
	case 2: r = n; break;
	case 3: r = v; break;
	case 4: r = c && !z; break;
	case 5: r = n == v; break;
	case 6: r = n == v && !z; break;
	default: return true;
	}
	return (cond & 1) ? !r : r;
}

static int64_t sx(uint64_t v, unsigned bits)
{
	uint64_t m = 1ull << (bits - 1);

	v &= (1ull << bits) - 1;
	return (int64_t)((v ^ m) - m);
}

static uint64_t reg(const struct machine *m, unsigned r) { return r == 31 ? 0 : m->x[r]; }
static void set_reg(struct machine *m, unsigned r, uint64_t v) { if (r != 31) m->x[r] = v; }

static void record_load(struct machine *m, uint64_t addr, unsigned kind, unsigned rt)
{
	m->loaded = true;
	m->load_addr = addr;
	m->load_kind = kind;
	m->load_rt = rt;
	if (!(kind & 4) && (kind & 3) != 3)
		set_reg(m, rt, LOADED);
}

/* ldr (unsigned offset, imm12 0) forms the relocator emits, as a load kind */
static int ldr_uimm_kind(uint32_t w)
{
	static const uint32_t base[7] = { 0xb9400000u, 0xf9400000u, 0xb9800000u, 0xf9800000u,
					   0xbd400000u, 0xfd400000u, 0x3dc00000u };
	for (int k = 0; k < 7; k++)
		if ((w & 0xfffffc00u) == base[k])
			return k;
	return -1;
}

/* One step; returns the next pc. */
static uint64_t step(struct machine *m, uint32_t w, uint64_t pc)
{
	unsigned rt = w & 31, rn = w >> 5 & 31;
	int k;

	if ((w & 0x1f000000u) == 0x10000000u) {
		int64_t imm = sx((w >> 29 & 3) | (w >> 5 & 0x7ffff) << 2, 21);
		set_reg(m, rt, (w >> 31) ? (pc & ~0xfffull) + (uint64_t)(imm << 12) : pc + (uint64_t)imm);
	} else if ((w & 0xff800000u) == 0xd2800000u) { /* movz x */
		set_reg(m, rt, (uint64_t)(w >> 5 & 0xffff) << (16 * (w >> 21 & 3)));
	} else if ((w & 0xff800000u) == 0xf2800000u) { /* movk x */
		unsigned sh = 16 * (w >> 21 & 3);
		set_reg(m, rt, (reg(m, rt) & ~(0xffffull << sh)) | (uint64_t)(w >> 5 & 0xffff) << sh);
	} else if ((w & 0xffc00000u) == 0x91000000u) { /* add x, imm */
		if (rn == 31)
			m->unknown = true; /* sp: never emitted */
		set_reg(m, rt, reg(m, rn) + (w >> 10 & 0xfff));
	} else if ((w & 0x7c000000u) == 0x14000000u) {
		if (w >> 31)
			m->x[30] = pc + 4;
		return pc + (uint64_t)(sx(w, 26) * 4);
	} else if ((w & 0xff000010u) == 0x54000000u) {
		return cond_holds(w & 15, m->nzcv) ? pc + (uint64_t)(sx(w >> 5, 19) * 4) : pc + 4;
	} else if ((w & 0x7e000000u) == 0x34000000u) {
		uint64_t v = (w >> 31) ? reg(m, rt) : (uint32_t)reg(m, rt);
		bool take = (w >> 24 & 1) ? v != 0 : v == 0;
		return take ? pc + (uint64_t)(sx(w >> 5, 19) * 4) : pc + 4;
	} else if ((w & 0x7e000000u) == 0x36000000u) {
		unsigned bit = (w >> 31) << 5 | (w >> 19 & 31);
		bool set = reg(m, rt) >> bit & 1;
		bool take = (w >> 24 & 1) ? set : !set;
		return take ? pc + (uint64_t)(sx(w >> 5, 14) * 4) : pc + 4;
	} else if ((w & 0x3b000000u) == 0x18000000u) {
		record_load(m, pc + (uint64_t)(sx(w >> 5, 19) * 4), (w >> 30) | (w >> 26 & 1) << 2, rt);
	} else if ((k = ldr_uimm_kind(w)) >= 0) {
		if (rn == 31)
			m->unknown = true;
		record_load(m, reg(m, rn), k < 4 ? (unsigned)k : (unsigned)(k - 4) | 4, rt);
	} else if ((w & 0xfffffc1fu) == 0xd61f0000u || (w & 0xfffffc1fu) == 0xd63f0000u) {
		uint64_t t = reg(m, rn);
		if (w & (1u << 21))
			m->x[30] = pc + 4;
		return t;
	} else if (w == RET) {
		return reg(m, 30);
	} else if ((w & 0xfe000000u) == 0xd6000000u ||
		   ((w >> 26 & 7) == 5 && (w >> 24) != 0xd5)) { /* other branches; not hints */
		m->unknown = true;
	}
	return pc + 4;
}

/* Runs words[0..n) placed at base, from pc, until the pc leaves them. */
static void run_at(struct machine *m, const uint32_t *words, size_t n, uint64_t base, uint64_t pc)
{

	for (int steps = 0; steps < 64 && pc >= base && pc < base + 4 * n; steps++)
		pc = step(m, words[(pc - base) / 4], pc);
	m->exit_pc = pc;
}

static void run(struct machine *m, const uint32_t *words, size_t n, uint64_t base)
{
	run_at(m, words, n, base, base);
}

static void words_of(const uint8_t *bytes, size_t len, uint32_t *w)
{
	for (size_t i = 0; i < len / 4; i++)
		w[i] = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
		       (uint32_t)bytes[4 * i + 2] << 16 | (uint32_t)bytes[4 * i + 3] << 24;
}

static void bytes_of(const uint32_t *w, size_t n, uint8_t *bytes)
{
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			bytes[4 * i + b] = (uint8_t)(w[i] >> (8 * b));
}

/* ---- relocate and compare ------------------------------------------------------ */

struct copy {
	uint32_t w[RELOCATOR_A64_MAX_CODE_LEN / 4];
	size_t n;
	struct relocation_a64 reloc;
	int err;
};

/* Relocates the function words[0..n_func) at func, patching n_patch words, to dest. */
static void relocate(const uint32_t *words, size_t n_func, size_t n_patch, uint64_t func,
		     uint64_t dest, struct copy *c)
{
	uint8_t code[64 * 4], out[RELOCATOR_A64_MAX_CODE_LEN];

	bytes_of(words, n_func, code);
	memset(out, OUT_FILL, sizeof(out));
	c->err = relocator_a64_relocate(code, 4 * n_func, func, 4 * n_patch, dest,
				       func + 4 * n_patch, out, sizeof(out), &c->reloc);
	c->n = c->err ? 0 : c->reloc.code_len / 4;
	words_of(out, sizeof(out), c->w);
}

static void init_machine(struct machine *m, uint64_t seed, unsigned nzcv)
{
	memset(m, 0, sizeof(*m));
	for (int r = 0; r < 31; r++)
		m->x[r] = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)r * 0x100010001ULL;
	m->nzcv = nzcv;
}

/*
 * The original and the copy, from the same state, must end alike. Returns
 * the original's end state in *orig for hand-computed checks.
 */
static bool same_effect(const uint32_t *words, size_t n_patch, uint64_t func, uint64_t dest,
			const struct copy *c, const struct machine *init, struct machine *orig)
{
	struct machine a = *init, b = *init;

	run(&a, words, n_patch, func);
	run(&b, c->w, c->n, dest);
	if (orig)
		*orig = a;
	for (int r = 0; r < 31; r++) {
		if (r == 16 || r == 17)
			continue;
		if (a.x[r] != b.x[r]) {
			fprintf(stderr, "  x%d: original 0x%" PRIx64 ", copy at 0x%" PRIx64 " 0x%" PRIx64 "\n",
				r, a.x[r], dest, b.x[r]);
			return false;
		}
	}
	if (a.exit_pc != b.exit_pc || a.loaded != b.loaded || a.unknown || b.unknown ||
	    (a.loaded && (a.load_addr != b.load_addr || a.load_kind != b.load_kind ||
			  a.load_rt != b.load_rt))) {
		fprintf(stderr, "  copy at 0x%" PRIx64 ": exit 0x%" PRIx64 "/0x%" PRIx64
			" load %d/%d 0x%" PRIx64 "/0x%" PRIx64 " kind %u/%u rt %u/%u unknown %d/%d\n",
			dest, a.exit_pc, b.exit_pc, a.loaded, b.loaded, a.load_addr, b.load_addr,
			a.load_kind, b.load_kind, a.load_rt, b.load_rt, a.unknown, b.unknown);
		return false;
	}
	return true;
}

/*
 * The prologue words[0..n_patch) (the function is those plus NOP filler)
 * relocated to every destination must behave like the original for each of
 * the n_states initial states; returns the original's end state for state 0.
 */
static struct machine check_everywhere(const uint32_t *prologue, size_t n_patch, uint64_t func,
				       const struct machine *states, size_t n_states)
{
	uint32_t words[16];
	struct machine end0 = { 0 };

	for (size_t i = 0; i < 16; i++)
		words[i] = i < n_patch ? prologue[i] : NOP;
	for (size_t d = 0; d < N_DESTS; d++) {
		struct copy c;

		relocate(words, 16, n_patch, func, dests[d], &c);
		CHECK_EQ_INT(c.err, 0);
		if (c.err) {
			fprintf(stderr, "  0x%08x -> 0x%" PRIx64 ": %s\n", prologue[0], dests[d],
				c.reloc.skip_reason);
			continue;
		}
		CHECK(c.reloc.code_len <= RELOCATOR_A64_MAX_CODE_LEN);
		for (size_t s = 0; s < n_states; s++) {
			struct machine end;
			bool same = same_effect(words, n_patch, func, dests[d], &c, &states[s], &end);

			CHECK(same);
			if (!same)
				fprintf(stderr, "  prologue 0x%08x state %zu\n", prologue[0], s);
			if (d == 0 && s == 0)
				end0 = end;
		}
	}
	return end0;
}

static struct machine check_one(uint32_t word, uint64_t func)
{
	struct machine st;

	init_machine(&st, 1, 0);
	return check_everywhere(&word, 1, func, &st, 1);
}

/* ---- builders pinned to the assembler ------------------------------------------- */

/*
 * Words from aarch64-linux-gnu-as 2.40 + objdump -d (binutils-aarch64-linux-gnu,
 * installed for this), for the source text in the comment (adrp: linked, at
 * 0x10000), and the forms the relocator emits.
 */
static void test_builders_match_gnu_as(void)
{
	CHECK_EQ_U64(ADR(3, 0x1000), 0x10008003u);          /* adr x3, .+0x1000 */
	CHECK_EQ_U64(ADR(0, -4), 0x10ffffe0u);              /* adr x0, .-4 */
	CHECK_EQ_U64(ADRP(5, 1), 0xb0000005u);              /* adrp x5, .+0x1000 */
	CHECK_EQ_U64(ADRP(6, -3), 0xb0ffffe6u);             /* adrp x6, .-0x3000 */
	CHECK_EQ_U64(B(-8), 0x17fffffeu);                   /* b .-8 */
	CHECK_EQ_U64(BL(0x100), 0x94000040u);               /* bl .+0x100 */
	CHECK_EQ_U64(BCOND(1, 0x40), 0x54000201u);          /* b.ne .+0x40 */
	CHECK_EQ_U64(CBZ(false, 2, 0x10), 0x34000082u);     /* cbz w2, .+0x10 */
	CHECK_EQ_U64(CBNZ(true, 9, -0x10), 0xb5ffff89u);    /* cbnz x9, .-0x10 */
	CHECK_EQ_U64(TBZ(4, 63, 0x20), 0xb6f80104u);        /* tbz x4, #63, .+0x20 */
	CHECK_EQ_U64(TBNZ(4, 3, -4), 0x371fffe4u);          /* tbnz w4, #3, .-4 */
	CHECK_EQ_U64(LDR_LIT(1, false, 7, 0x100), 0x58000807u); /* ldr x7, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(0, false, 7, 0x100), 0x18000807u); /* ldr w7, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(2, false, 7, 0x100), 0x98000807u); /* ldrsw x7, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(3, false, 0, 0x100), 0xd8000800u); /* prfm pldl1keep, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(0, true, 1, 0x100), 0x1c000801u);  /* ldr s1, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(1, true, 1, 0x100), 0x5c000801u);  /* ldr d1, .+0x100 */
	CHECK_EQ_U64(LDR_LIT(2, true, 1, 0x100), 0x9c000801u);  /* ldr q1, .+0x100 */
	CHECK_EQ_U64(ADD_X16, 0x91000610u);                 /* add x16, x16, #1 */
	CHECK_EQ_U64(LDXR, 0xc85f7c20u);                    /* ldxr x0, [x1] */
	CHECK_EQ_U64(STXR, 0xc8027c20u);                    /* stxr w2, x0, [x1] */
	CHECK_EQ_U64(BTI_C, 0xd503245fu);                   /* bti c */
	CHECK_EQ_U64(PACIASP, 0xd503233fu);                 /* paciasp */
	/* what the relocator emits, as the interpreter reads it */
	CHECK_EQ_INT(ldr_uimm_kind(0xb9400083u), 0);        /* ldr w3, [x4] */
	CHECK_EQ_INT(ldr_uimm_kind(0xb9800083u), 2);        /* ldrsw x3, [x4] */
	CHECK_EQ_INT(ldr_uimm_kind(0xf9800080u), 3);        /* prfm pldl1keep, [x4] */
	CHECK_EQ_INT(ldr_uimm_kind(0xbd400083u), 4);        /* ldr s3, [x4] */
	CHECK_EQ_INT(ldr_uimm_kind(0xfd400083u), 5);        /* ldr d3, [x4] */
	CHECK_EQ_INT(ldr_uimm_kind(0x3dc00083u), 6);        /* ldr q3, [x4] */
	{
		struct machine m;

		init_machine(&m, 1, 0);
		step(&m, 0xd2e24683u, 0); /* mov x3, #0x1234000000000000 */
		step(&m, 0xf2a24683u, 0); /* movk x3, #0x1234, lsl #16 */
		CHECK_EQ_U64(m.x[3], 0x1234000012340000ULL);
		m.x[17] = 0x5000;
		CHECK_EQ_U64(step(&m, 0xd61f0220u, 0x100), 0x5000); /* br x17 */
		CHECK_EQ_U64(step(&m, 0xd63f0220u, 0x100), 0x5000); /* blr x17 */
		CHECK_EQ_U64(m.x[30], 0x104);
	}
}

/* ---- adr / adrp ------------------------------------------------------------------ */

static void test_adr_extremes(void)
{
	static const int32_t imms[] = { 0, 4, -4, 0xfffff, -0x100000, 0x12345, -0x54321 };

	for (size_t i = 0; i < sizeof(imms) / sizeof(imms[0]); i++) {
		struct machine end = check_one(ADR(3, imms[i]), FUNC + 0x800);

		CHECK_EQ_U64(end.x[3], FUNC + 0x800 + (uint64_t)(int64_t)imms[i]);
	}
}

static void test_adrp_page_boundaries(void)
{
	static const int32_t pages[] = { 0, 1, -1, 0xfffff, -0x100000, 0x400 };
	/* the adrp at a page's first and last word: same page either way */
	static const uint64_t at[] = { HI_FUNC + 0x1000, HI_FUNC + 0x1ffc };

	for (size_t a = 0; a < 2; a++) {
		for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
			struct machine end = check_one(ADRP(20, pages[i]), at[a]);

			CHECK_EQ_U64(end.x[20], HI_FUNC + 0x1000 + ((uint64_t)(int64_t)pages[i] << 12));
		}
	}
}

static void test_adr_to_xzr_discards(void)
{
	struct copy c;
	uint32_t w[2] = { ADR(31, 0x40), NOP };

	relocate(w, 2, 1, FUNC, FAR_DEST, &c);
	CHECK_EQ_INT(c.err, 0);
	CHECK_EQ_U64(c.w[0], NOP);
}

/* ---- branches -------------------------------------------------------------------- */

static void test_b_and_bl(void)
{
	static const int32_t offs[] = { 0x10, -0x10, 0x7fffffc, -0x8000000, 0x123450 };

	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		struct machine end = check_one(B(offs[i]), FUNC + 0x8000000);

		CHECK_EQ_U64(end.exit_pc, FUNC + 0x8000000 + (uint64_t)(int64_t)offs[i]);
		/* bl as the last word: x30 = the original return address */
		end = check_one(BL(offs[i]), FUNC + 0x8000000);
		CHECK_EQ_U64(end.exit_pc, FUNC + 0x8000000 + (uint64_t)(int64_t)offs[i]);
		CHECK_EQ_U64(end.x[30], FUNC + 0x8000000 + 4);
	}
}

/* bl not last: returns into the copy, which goes on with the next word */
static void test_bl_not_last_returns_into_copy(void)
{
	uint32_t w[4] = { BL(0x1000), ADD_X1, NOP, NOP };

	for (size_t d = 0; d < N_DESTS; d++) {
		struct copy c;
		struct machine m;

		relocate(w, 4, 2, FUNC, dests[d], &c);
		CHECK_EQ_INT(c.err, 0);
		init_machine(&m, 3, 0);
		run(&m, c.w, c.n, dests[d]);
		CHECK_EQ_U64(m.exit_pc, FUNC + 0x1000);
		CHECK(m.x[30] > dests[d] && m.x[30] < dests[d] + c.reloc.code_len);
		/* the callee returns there: add x1, then back to func + 8 */
		m.x[1] = 5;
		run_at(&m, c.w, c.n, dests[d], m.x[30]);
		CHECK_EQ_U64(m.x[1], 6);
		CHECK_EQ_U64(m.exit_pc, FUNC + 8);
	}
}

static void test_bcond_every_condition_and_flags(void)
{
	struct machine states[16];

	for (unsigned f = 0; f < 16; f++)
		init_machine(&states[f], 2, f);
	for (unsigned cond = 0; cond < 16; cond++) {
		uint32_t w[2] = { BCOND(cond, 0x40), ADD_X1 };
		size_t n = cond >= 14 ? 1 : 2; /* b.al/b.nv: unconditional, so last */

		check_everywhere(w, n, FUNC, states, 16);
		w[0] = BCOND(cond, -0x100000); /* most negative */
		check_everywhere(w, n, FUNC + 0x200000, states, 16);
		w[0] = BCOND(cond, 0xffffc);   /* most positive */
		check_everywhere(w, n, FUNC, states, 16);
	}
}

static void test_bcond_hand_checked(void)
{
	struct machine st;
	uint32_t w = BCOND(0, 0x40); /* b.eq */

	init_machine(&st, 1, 4); /* Z */
	CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &st, 1).exit_pc, FUNC + 0x40);
	init_machine(&st, 1, 0);
	CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &st, 1).exit_pc, FUNC + 4);
}

static void test_cbz_cbnz_w_and_x(void)
{
	static const uint64_t values[] = { 0, 1, 0xffffffff00000000ULL, 0x80000000ULL, ~0ULL };
	struct machine states[5];

	for (size_t i = 0; i < 5; i++) {
		init_machine(&states[i], 4, 0);
		states[i].x[5] = values[i];
	}
	for (int x = 0; x < 2; x++) {
		uint32_t w[2] = { CBZ(x, 5, 0x80), ADD_X1 };

		check_everywhere(w, 2, FUNC, states, 5);
		w[0] = CBNZ(x, 5, -0x100000);
		check_everywhere(w, 2, FUNC + 0x200000, states, 5);
		w[0] = CBNZ(x, 5, 0xffffc);
		check_everywhere(w, 2, FUNC, states, 5);
	}
	/* W: upper half set, low half zero is zero */
	{
		uint32_t w = CBZ(false, 5, 0x80);
		CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &states[2], 1).exit_pc, FUNC + 0x80);
		w = CBZ(true, 5, 0x80);
		CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &states[2], 1).exit_pc, FUNC + 4);
	}
}

static void test_tbz_tbnz_bits(void)
{
	static const unsigned bits[] = { 0, 31, 32, 63 };
	struct machine states[4];

	for (size_t i = 0; i < 4; i++) {
		init_machine(&states[i], 5, 0);
		states[i].x[9] = 1ULL << bits[i];
	}
	for (size_t b = 0; b < 4; b++) {
		uint32_t w[2] = { TBZ(9, bits[b], 0x100), ADD_X1 };

		check_everywhere(w, 2, FUNC, states, 4);
		w[0] = TBNZ(9, bits[b], -0x8000); /* most negative */
		check_everywhere(w, 2, FUNC + 0x10000, states, 4);
		w[0] = TBNZ(9, bits[b], 0x7ffc);  /* most positive */
		check_everywhere(w, 2, FUNC, states, 4);
	}
	{
		uint32_t w = TBNZ(9, 63, 0x100);
		CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &states[3], 1).exit_pc, FUNC + 0x100);
		CHECK_EQ_U64(check_everywhere(&w, 1, FUNC, &states[2], 1).exit_pc, FUNC + 4);
	}
}

/* ---- literal loads --------------------------------------------------------------- */

static void test_ldr_literal_every_kind(void)
{
	static const int32_t offs[] = { 0x100, -0x100, 0xffffc, -0x100000 };

	for (unsigned simd = 0; simd < 2; simd++) {
		for (unsigned opc = 0; opc < (simd ? 3u : 4u); opc++) {
			for (size_t i = 0; i < 4; i++) {
				uint64_t func = FUNC + 0x200000;
				struct machine end = check_one(LDR_LIT(opc, simd, 6, offs[i]), func);

				CHECK(end.loaded);
				CHECK_EQ_U64(end.load_addr, func + (uint64_t)(int64_t)offs[i]);
				CHECK_EQ_INT(end.load_kind, opc | simd << 2);
			}
		}
	}
}

static void test_ldr_literal_to_xzr(void)
{
	struct machine end = check_one(LDR_LIT(1, false, 31, 0x40), FUNC);

	CHECK(end.loaded);
	CHECK_EQ_U64(end.load_addr, FUNC + 0x40);
}

/* ---- a multi-word prologue (the torture's adrp/ldr/cbz shape) -------------------- */

static void test_prologue_of_four(void)
{
	uint32_t w[4] = { PACIASP, ADRP(0, 0x10), LDR_LIT(1, false, 2, 0x2000), CBZ(true, 2, 0x40) };
	struct machine states[2];

	init_machine(&states[0], 6, 0);
	init_machine(&states[1], 7, 0);
	check_everywhere(w, 4, FUNC, states, 2);
	/* same_offsets_len: paciasp stays at +0 in every copy; near, all four do */
	{
		uint32_t f[16];
		struct copy c;

		for (int i = 0; i < 16; i++)
			f[i] = i < 4 ? w[i] : NOP;
		relocate(f, 16, 4, FUNC, NEAR_DEST, &c);
		CHECK_EQ_INT(c.reloc.same_offsets_len, 16);
		CHECK_EQ_U64(c.w[0], PACIASP);
		relocate(f, 16, 4, FUNC, HIGH_DEST, &c);
		CHECK(c.reloc.same_offsets_len >= 4 && c.reloc.same_offsets_len < 16);
	}
}

static void test_landing_pads(void)
{
	uint8_t code[8];
	uint32_t w[2] = { BTI_C, NOP };
	struct copy c;

	bytes_of(w, 2, code);
	CHECK_EQ_INT(relocator_a64_landing_pad_len(code, 8), 4);
	w[0] = PACIASP;
	bytes_of(w, 2, code);
	CHECK_EQ_INT(relocator_a64_landing_pad_len(code, 8), 4);
	w[0] = NOP;
	bytes_of(w, 2, code);
	CHECK_EQ_INT(relocator_a64_landing_pad_len(code, 8), 0);
	/* copied as is */
	w[0] = BTI_C;
	relocate(w, 2, 1, FUNC, HIGH_DEST, &c);
	CHECK_EQ_INT(c.err, 0);
	CHECK_EQ_U64(c.w[0], BTI_C);
}

/* Prologue shapes from tests/targets' pac builds (GCC 12, -mbranch-protection=standard). */
static void test_return_signer(void)
{
	uint8_t code[4 * (RELOCATOR_A64_SIGNER_SCAN + 1)];
	uint32_t w[RELOCATOR_A64_SIGNER_SCAN + 1];
	const uint32_t mov_x3_x0 = 0xaa0003e3u, stp_fp_lr = 0xa9bf7bfdu;

	/* first thing, after `bti c`, after an argument move (sh_pac_zero_caller) */
	w[0] = PACIASP, w[1] = stp_fp_lr;
	bytes_of(w, 2, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 8), A64_PACIASP);
	w[0] = BTI_C, w[1] = A64_PACIBSP, w[2] = stp_fp_lr;
	bytes_of(w, 3, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 12), A64_PACIBSP);
	w[0] = BTI_C, w[1] = mov_x3_x0, w[2] = PACIASP, w[3] = stp_fp_lr;
	bytes_of(w, 4, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 16), A64_PACIASP);
	/* shrink-wrapped behind an early exit (torture_recurse) */
	w[0] = BTI_C, w[1] = CBZ(true, 0, 0x40), w[2] = PACIASP, w[3] = stp_fp_lr;
	bytes_of(w, 4, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 16), A64_PACIASP);
	/* no signer, or one past the function's end or the scan's */
	w[0] = BTI_C, w[1] = mov_x3_x0, w[2] = stp_fp_lr, w[3] = RET;
	bytes_of(w, 4, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 16), 0);
	w[3] = PACIASP;
	bytes_of(w, 4, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, 12), 0);
	for (size_t i = 0; i < RELOCATOR_A64_SIGNER_SCAN; i++)
		w[i] = NOP;
	w[RELOCATOR_A64_SIGNER_SCAN - 1] = PACIASP;
	bytes_of(w, RELOCATOR_A64_SIGNER_SCAN + 1, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, sizeof(code)), A64_PACIASP);
	w[RELOCATOR_A64_SIGNER_SCAN - 1] = NOP, w[RELOCATOR_A64_SIGNER_SCAN] = PACIASP;
	bytes_of(w, RELOCATOR_A64_SIGNER_SCAN + 1, code);
	CHECK_EQ_U64(relocator_a64_return_signer(code, sizeof(code)), 0);
	CHECK_EQ_U64(relocator_a64_return_signer(NULL, 16), 0);
}

static void test_ret_last_needs_no_branch_back(void)
{
	uint32_t w[2] = { NOP, RET };
	struct copy c;

	relocate(w, 2, 2, FUNC, HIGH_DEST, &c);
	CHECK_EQ_INT(c.err, 0);
	CHECK_EQ_INT(c.reloc.code_len, 8);
	CHECK_EQ_U64(c.w[1], RET);
}

/* ---- skip reasons ------------------------------------------------------------------ */

static void expect_skip(const uint32_t *w, size_t n_func, size_t n_patch, uint64_t dest,
			int err, const char *needle)
{
	uint8_t code[64 * 4], out[RELOCATOR_A64_MAX_CODE_LEN], fill[RELOCATOR_A64_MAX_CODE_LEN];
	struct relocation_a64 r;
	int got;

	bytes_of(w, n_func, code);
	memset(out, OUT_FILL, sizeof(out));
	memset(fill, OUT_FILL, sizeof(fill));
	got = relocator_a64_relocate(code, 4 * n_func, FUNC, 4 * n_patch, dest, FUNC + 4 * n_patch,
				     out, sizeof(out), &r);
	CHECK_EQ_INT(got, err);
	CHECK(r.skip_reason && strstr(r.skip_reason, needle));
	if (!r.skip_reason || !strstr(r.skip_reason, needle))
		fprintf(stderr, "  reason \"%s\", wanted \"%s\"\n", r.skip_reason ? r.skip_reason : "",
			needle);
	CHECK_MEM_EQ(out, fill, sizeof(out)); /* nothing half-written */
}

static void test_skip_reasons(void)
{
	uint32_t loop[8] = { NOP, NOP, NOP, NOP, NOP, BCOND(1, -0x14), NOP, RET };
	uint32_t into[8] = { NOP, NOP, NOP, NOP, NOP, CBZ(true, 0, -0x10), NOP, RET };
	uint32_t self[4] = { NOP, NOP, CBZ(true, 0, -4), RET };
	uint32_t w[4];

	expect_skip(loop, 8, 1, NEAR_DEST, -EXDEV, "loops back to the entry");
	expect_skip(into, 8, 4, NEAR_DEST, -EXDEV, "lands inside the patched bytes (+0x4)");
	expect_skip(self, 4, 3, NEAR_DEST, -EXDEV, "lands inside the patched bytes (+0x4)");

	w[0] = RET; w[1] = NOP; w[2] = NOP; w[3] = NOP;
	expect_skip(w, 4, 2, NEAR_DEST, -ENOTSUP, "before the end of the patch");
	w[0] = BR_X3;
	expect_skip(w, 4, 2, NEAR_DEST, -ENOTSUP, "before the end of the patch");
	w[0] = B(0x100);
	expect_skip(w, 4, 2, NEAR_DEST, -ENOTSUP, "before the end of the patch");
	w[0] = SVC0;
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "exception generator");
	w[0] = BRK0;
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "exception generator");
	w[0] = LDXR;
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "exclusive");
	w[0] = NOP; w[1] = STXR;
	expect_skip(w, 4, 2, NEAR_DEST, -ENOTSUP, "exclusive");
	w[0] = UDF0; w[1] = NOP;
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "undecodable");
	w[0] = SVE_WORD;
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "SVE");
	w[0] = 0xd69f03e0u; /* eret */
	expect_skip(w, 4, 1, NEAR_DEST, -ENOTSUP, "eret");
	/* x16 under the far (multi-word) patch; fine under `b` */
	w[0] = ADD_X16; w[1] = NOP; w[2] = NOP;
	expect_skip(w, 4, 3, NEAR_DEST, -ENOTSUP, "x16");
	check_one(ADD_X16, FUNC);
	/* a landing pad kept in place: pad + `b` (8 bytes) leaves x16 alone, pad + far does not */
	w[0] = BTI_C; w[1] = ADD_X16; w[2] = NOP; w[3] = NOP;
	{
		struct copy c;

		relocate(w, 4, 2, FUNC, NEAR_DEST, &c);
		CHECK_EQ_INT(c.err, 0);
	}
	expect_skip(w, 4, 4, NEAR_DEST, -ENOTSUP, "x16");
	/* x17 when the copy needs it (far branch back), fine when it does not */
	w[0] = ADD_X17;
	expect_skip(w, 4, 1, HIGH_DEST, -ENOTSUP, "x17");
	{
		struct copy c;

		relocate(w, 4, 1, FUNC, NEAR_DEST, &c);
		CHECK_EQ_INT(c.err, 0);
	}
	/* adrp into x17 with a far copy: x17 would be overwritten by the branch back */
	w[0] = ADRP(17, 4);
	expect_skip(w, 4, 1, HIGH_DEST, -ENOTSUP, "x17");
	w[0] = NOP;
	expect_skip(w, 1, 2, NEAR_DEST, -ERANGE, "shorter");
	expect_skip(w, 4, 0, NEAR_DEST, -EINVAL, "invalid");
	expect_skip(w, 4, 5, NEAR_DEST, -EINVAL, "invalid");
}

static void test_invalid_arguments_and_space(void)
{
	uint8_t code[16] = { 0 }, out[8];
	struct relocation_a64 r;
	uint32_t w[4] = { CBZ(true, 0, 0x40), NOP, NOP, NOP };

	CHECK_EQ_INT(relocator_a64_relocate(NULL, 16, FUNC, 4, NEAR_DEST, FUNC + 4, out, 8, &r),
		     -EINVAL);
	CHECK_EQ_INT(relocator_a64_relocate(code, 16, FUNC, 6, NEAR_DEST, FUNC + 6, out, 8, &r),
		     -EINVAL);
	CHECK_EQ_INT(relocator_a64_relocate(code, 16, FUNC + 2, 4, NEAR_DEST, FUNC + 6, out, 8, &r),
		     -EINVAL);
	CHECK_EQ_INT(relocator_a64_relocate(code, 16, FUNC, 4, NEAR_DEST, FUNC + 4, out, 8, NULL),
		     -EINVAL);
	bytes_of(w, 4, code);
	memset(out, OUT_FILL, sizeof(out));
	CHECK_EQ_INT(relocator_a64_relocate(code, 16, FUNC, 4, HIGH_DEST, FUNC + 4, out, 8, &r),
		     -ENOSPC);
	CHECK(r.skip_reason && strstr(r.skip_reason, "do not fit"));
	CHECK_EQ_INT(out[0], OUT_FILL);
}

/* ---- the entry patch ---------------------------------------------------------------- */

static void test_encode_patch(void)
{
	static const uint64_t stubs[] = { FUNC + 0x7fffffc, FUNC - 0x8000000, FUNC + 0x8000000,
					  FUNC + 0x7ffff000 + 0x123, FUNC + 0x100000000ULL - 4 };
	uint8_t out[16];
	uint32_t w[4];

	for (size_t i = 0; i < sizeof(stubs) / sizeof(stubs[0]); i++) {
		uint64_t stub = stubs[i] & ~3ULL;
		int len = relocator_a64_encode_patch(FUNC, stub, out, sizeof(out));
		struct machine m;

		CHECK(len == 4 || len == 12);
		if (len <= 0)
			continue;
		words_of(out, (size_t)len, w);
		init_machine(&m, 8, 0);
		run(&m, w, (size_t)len / 4, FUNC);
		CHECK_EQ_U64(m.exit_pc, stub);
		CHECK_EQ_INT(len, (i < 2) ? 4 : 12);
	}
	CHECK_EQ_INT(relocator_a64_encode_patch(FUNC, HIGH_DEST, out, sizeof(out)), -ERANGE);
	CHECK_EQ_INT(relocator_a64_encode_patch(FUNC, FUNC + 2, out, sizeof(out)), -EINVAL);
	CHECK_EQ_INT(relocator_a64_encode_patch(FUNC, FUNC + 0x10000000, out, 8), -ENOSPC);
}

int main(void)
{
	RUN_TEST(test_builders_match_gnu_as);
	RUN_TEST(test_adr_extremes);
	RUN_TEST(test_adrp_page_boundaries);
	RUN_TEST(test_adr_to_xzr_discards);
	RUN_TEST(test_b_and_bl);
	RUN_TEST(test_bl_not_last_returns_into_copy);
	RUN_TEST(test_bcond_every_condition_and_flags);
	RUN_TEST(test_bcond_hand_checked);
	RUN_TEST(test_cbz_cbnz_w_and_x);
	RUN_TEST(test_tbz_tbnz_bits);
	RUN_TEST(test_ldr_literal_every_kind);
	RUN_TEST(test_ldr_literal_to_xzr);
	RUN_TEST(test_prologue_of_four);
	RUN_TEST(test_landing_pads);
	RUN_TEST(test_return_signer);
	RUN_TEST(test_ret_last_needs_no_branch_back);
	RUN_TEST(test_skip_reasons);
	RUN_TEST(test_invalid_arguments_and_space);
	RUN_TEST(test_encode_patch);
	return unit_summary();
}
