// SPDX-License-Identifier: MIT
/*
 * The Zydis side of trampolines/insn_x86_64.h: libZydis dlopen()ed on first
 * need (by the soname the build's header belongs to, ZYDIS_SONAME) and its
 * decoding turned into a struct insn. Nothing links libZydis: a process whose
 * functions the built-in decoder covers never maps it (~2,500 relocations and
 * two more libraries at every process start). Loading is lock-free: two
 * threads racing only take the same handle twice.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "trampolines/insn_x86_64.h"

#ifndef ZYDIS_SONAME
#error "ZYDIS_SONAME: the soname of the libZydis whose header this is built with"
#endif

enum { ZYDIS_UNTRIED, ZYDIS_READY, ZYDIS_MISSING };

struct zydis_api {
	ZyanStatus (*init)(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth);
	ZyanStatus (*decode_full)(const ZydisDecoder *, const void *, ZyanUSize,
				  ZydisDecodedInstruction *, ZydisDecodedOperand *);
	const char *(*mnemonic)(ZydisMnemonic);
};

static struct zydis_api zydis;
static _Atomic int zydis_state; /* ZYDIS_*; READY published after zydis is written */

static int zydis_load_slow(void)
{
	struct zydis_api api;
	void *h = dlopen(ZYDIS_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		atomic_store_explicit(&zydis_state, ZYDIS_MISSING, memory_order_release);
		return -ELIBACC;
	}
	api.init = (ZyanStatus(*)(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth))dlsym(
		h, "ZydisDecoderInit");
	api.decode_full = (ZyanStatus(*)(const ZydisDecoder *, const void *, ZyanUSize,
					 ZydisDecodedInstruction *, ZydisDecodedOperand *))
		dlsym(h, "ZydisDecoderDecodeFull");
	api.mnemonic = (const char *(*)(ZydisMnemonic))dlsym(h, "ZydisMnemonicGetString");
	if (!api.init || !api.decode_full || !api.mnemonic) {
		atomic_store_explicit(&zydis_state, ZYDIS_MISSING, memory_order_release);
		return -ELIBACC;
	}
	/* a racing loader writes the same pointers: the handle is refcounted */
	zydis = api;
	/* pairs with the acquire in zydis_ready() */
	atomic_store_explicit(&zydis_state, ZYDIS_READY, memory_order_release);
	return 0;
}

static int zydis_ready(void)
{
	int state = atomic_load_explicit(&zydis_state, memory_order_acquire);

	if (state == ZYDIS_READY)
		return 0;
	if (state == ZYDIS_MISSING)
		return -ELIBACC;
	/*
	 * The agent also decodes from the loader's own notification
	 * (_dl_debug_state). glibc 2.36 notifies RT_ADD with the new object
	 * already mapped, and a dlopen nested there works (test_lazy_decoder);
	 * in a dlclose's RT_DELETE one would trip the loader's assert that a
	 * load starts from RT_CONSISTENT or RT_ADD. Not then (another thread's
	 * dlclose seen here only costs this one prologue its patch).
	 */
	if (_r_debug.r_state == RT_DELETE)
		return -ELIBACC;
	return zydis_load_slow();
}

bool insn_zydis_loaded(void)
{
	return atomic_load_explicit(&zydis_state, memory_order_acquire) == ZYDIS_READY;
}

static int8_t gpr64(ZydisRegister r)
{
	if (r >= ZYDIS_REGISTER_RAX && r <= ZYDIS_REGISTER_R15)
		return (int8_t)(r - ZYDIS_REGISTER_RAX);
	return INSN_REG_NONE;
}

static int8_t mem_reg(ZydisRegister r)
{
	if (r == ZYDIS_REGISTER_NONE)
		return INSN_REG_NONE;
	if (r == ZYDIS_REGISTER_RIP)
		return INSN_REG_RIP;
	if (r == ZYDIS_REGISTER_EIP)
		return INSN_REG_EIP;
	return gpr64(r) == INSN_REG_NONE ? INSN_REG_OTHER : gpr64(r);
}

static uint8_t kind_of(const ZydisDecodedInstruction *z)
{
	uint8_t row = z->opcode_map == ZYDIS_OPCODE_MAP_0F ? 0x80 : 0x70;

	switch (z->mnemonic) {
	case ZYDIS_MNEMONIC_JMP: return INSN_JMP;
	case ZYDIS_MNEMONIC_CALL: return INSN_CALL;
	case ZYDIS_MNEMONIC_LOOP:
	case ZYDIS_MNEMONIC_LOOPE:
	case ZYDIS_MNEMONIC_LOOPNE:
	case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_JECXZ:
	case ZYDIS_MNEMONIC_JRCXZ:
	case ZYDIS_MNEMONIC_XBEGIN: return INSN_LOOP;
	case ZYDIS_MNEMONIC_PUSH: return INSN_PUSH;
	case ZYDIS_MNEMONIC_POP: return INSN_POP;
	case ZYDIS_MNEMONIC_ADD: return INSN_ADD;
	case ZYDIS_MNEMONIC_SUB: return INSN_SUB;
	case ZYDIS_MNEMONIC_MOV: return INSN_MOV;
	case ZYDIS_MNEMONIC_NOP: return INSN_NOP;
	case ZYDIS_MNEMONIC_INT3: return INSN_INT3;
	default: break;
	}
	if (z->meta.category == ZYDIS_CATEGORY_COND_BR && (z->opcode & 0xf0) == row)
		return INSN_JCC;
	return INSN_OTHER;
}

static uint8_t flow_of(ZydisInstructionCategory c)
{
	switch (c) {
	case ZYDIS_CATEGORY_COND_BR: return INSN_FLOW_COND_BR;
	case ZYDIS_CATEGORY_UNCOND_BR: return INSN_FLOW_UNCOND_BR;
	case ZYDIS_CATEGORY_CALL: return INSN_FLOW_CALL;
	case ZYDIS_CATEGORY_RET: return INSN_FLOW_RET;
	case ZYDIS_CATEGORY_SYSTEM: return INSN_FLOW_SYSTEM;
	case ZYDIS_CATEGORY_INTERRUPT: return INSN_FLOW_INTERRUPT;
	default: return INSN_FLOW_NONE;
	}
}

/* Registers written, hidden operands included (push/pop/call's rsp left out, as the scan does). */
static uint8_t writes_of(const ZydisDecodedInstruction *z, const ZydisDecodedOperand *ops)
{
	uint8_t w = 0;

	for (uint8_t i = 0; i < z->operand_count; i++) {
		if (ops[i].type != ZYDIS_OPERAND_TYPE_REGISTER ||
		    !(ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			continue;
		if (ops[i].reg.value == ZYDIS_REGISTER_RBP || ops[i].reg.value == ZYDIS_REGISTER_EBP)
			w |= INSN_WRITES_RBP;
		if (ops[i].reg.value == ZYDIS_REGISTER_RSP && z->mnemonic != ZYDIS_MNEMONIC_CALL &&
		    z->mnemonic != ZYDIS_MNEMONIC_PUSH && z->mnemonic != ZYDIS_MNEMONIC_POP)
			w |= INSN_WRITES_RSP;
	}
	return w;
}

static void operands_of(const ZydisDecodedInstruction *z, const ZydisDecodedOperand *ops,
			struct insn *in)
{
	in->dst_reg = in->src_reg = INSN_REG_NONE;
	if (z->operand_count_visible > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER)
		in->dst_reg = gpr64(ops[0].reg.value);
	if (z->operand_count_visible > 1 && ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER)
		in->src_reg = gpr64(ops[1].reg.value);
	in->src_imm = z->operand_count_visible == 2 && ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
	if (in->src_imm)
		in->imm = ops[1].imm.value.s;
	for (uint8_t i = 0; i < z->operand_count; i++) {
		const ZydisDecodedOperand *op = &ops[i];

		if (op->type != ZYDIS_OPERAND_TYPE_MEMORY)
			continue;
		if (in->ip_base == INSN_REG_NONE &&
		    (op->mem.base == ZYDIS_REGISTER_RIP || op->mem.base == ZYDIS_REGISTER_EIP)) {
			in->ip_base = mem_reg(op->mem.base);
			in->disp_off = z->raw.disp.offset;
			in->disp = z->raw.disp.value;
		}
		if (i >= z->operand_count_visible || in->n_mem == INSN_MAX_MEM)
			continue;
		in->mem[in->n_mem++] = (struct insn_mem){
			.base = mem_reg(op->mem.base),
			.index = mem_reg(op->mem.index),
			.fs_gs = op->mem.segment == ZYDIS_REGISTER_FS ||
				 op->mem.segment == ZYDIS_REGISTER_GS,
			.disp = op->mem.disp.value,
		};
	}
}

int insn_decode_zydis(const uint8_t *code, size_t avail, struct insn *in)
{
	ZydisDecodedInstruction z;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecoder dec;
	ZyanStatus status;
	int err = zydis_ready();

	if (err)
		return err;
	if (!ZYAN_SUCCESS(zydis.init(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return -ELIBACC;
	status = zydis.decode_full(&dec, code, avail, &z, ops);
	if (status == ZYDIS_STATUS_NO_MORE_DATA)
		return -ENODATA;
	if (!ZYAN_SUCCESS(status))
		return -EILSEQ;
	memset(in, 0, sizeof(*in));
	in->len = z.length;
	in->kind = kind_of(&z);
	in->flow = flow_of(z.meta.category);
	in->cond = z.opcode & 0x0f;
	in->opsize = z.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE;
	in->lock = z.attributes & ZYDIS_ATTRIB_HAS_LOCK;
	in->ip_base = INSN_REG_NONE;
	for (int i = 0; i < 2; i++) {
		if (z.raw.imm[i].is_relative) {
			in->has_rel = true;
			in->rel = z.raw.imm[i].value.s;
			break;
		}
	}
	operands_of(&z, ops, in);
	in->rip_call = z.mnemonic == ZYDIS_MNEMONIC_CALL && z.opcode == 0xff &&
		       z.raw.modrm.reg == 2 && z.length == 6 && in->ip_base == INSN_REG_RIP;
	in->writes = writes_of(&z, ops);
	in->mnemonic = zydis.mnemonic(z.mnemonic);
	return 0;
}
