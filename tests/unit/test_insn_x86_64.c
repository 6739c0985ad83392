// SPDX-License-Identifier: MIT
/*
 * Unit tests of trampolines/insn_x86_64.c, the built-in decoder, against
 * Zydis: wherever the built-in one claims an instruction (random bytes, and
 * every instruction of every function of libc, ld.so, libstdc++ and the test
 * targets) each field the relocator or the return-slot scan reads must be
 * Zydis's. Then the relocator and the return-slot scan built on Zydis alone
 * (their sources included again below) must give the same answer, bytes and
 * skip reasons as the shipped ones on every function entry of those files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/unit.h"
#include "trampolines/insn_x86_64.h"
#include "trampolines/relocator_x86_64.h"
#include "trampolines/return_slot_x86_64.h"

/* ---- the relocator and the scan on Zydis alone ------------------------------ */

static int zydis_only_decode(const uint8_t *code, size_t avail, unsigned want, struct insn *in)
{
	(void)want;
	return insn_decode_zydis(code, avail, in);
}

#define insn_decode zydis_only_decode
#define relocator_relocate zydis_relocator_relocate
#define relocator_padding_after zydis_relocator_padding_after
#define return_slot_read_early zydis_return_slot_read_early
int zydis_relocator_relocate(const uint8_t *code, size_t func_size, uint64_t func_addr,
			     size_t min_patch_len, uint64_t dest_addr, uint8_t *out,
			     size_t out_cap, struct relocation *reloc);
size_t zydis_relocator_padding_after(const uint8_t *code, size_t avail, size_t func_size);
int zydis_return_slot_read_early(const uint8_t *code, size_t size);
#include "trampolines/relocator_x86_64.c"
#include "trampolines/return_slot_x86_64.c"
#undef insn_decode
#undef relocator_relocate
#undef relocator_padding_after
#undef return_slot_read_early

/* ---- field by field ------------------------------------------------------------ */

static long mismatches;

#define SAME(field)                                                                        \
	do {                                                                               \
		if ((long long)b->field != (long long)z->field) {                          \
			if (mismatches++ < 20)                                             \
				fprintf(stderr, "%s: " #field " %lld, Zydis %lld (%s)\n",   \
					hex, (long long)b->field, (long long)z->field,     \
					z->mnemonic);                                      \
			return false;                                                      \
		}                                                                          \
	} while (0)

static bool same_length_fields(const struct insn *b, const struct insn *z, const char *hex)
{
	SAME(len);
	SAME(kind);
	SAME(flow);
	if (z->kind == INSN_JCC)
		SAME(cond);
	SAME(opsize);
	SAME(lock);
	SAME(has_rel);
	SAME(rel);
	SAME(rip_call);
	SAME(ip_base);
	if (z->ip_base != INSN_REG_NONE) {
		SAME(disp_off);
		SAME(disp);
	}
	return true;
}

static bool same_operand_fields(const struct insn *b, const struct insn *z, const char *hex)
{
	SAME(n_mem);
	for (int i = 0; i < z->n_mem; i++) {
		SAME(mem[i].base);
		SAME(mem[i].index);
		SAME(mem[i].fs_gs);
		SAME(mem[i].disp);
	}
	SAME(writes);
	if (z->kind == INSN_POP || z->kind == INSN_ADD || z->kind == INSN_SUB ||
	    z->kind == INSN_MOV) {
		SAME(dst_reg);
		SAME(src_reg);
	}
	if ((z->kind == INSN_ADD || z->kind == INSN_SUB) && z->dst_reg == INSN_REG_RSP) {
		SAME(src_imm);
		if (z->src_imm)
			SAME(imm);
	}
	return true;
}

struct tally {
	long insns, claimed, claimed_operands, funcs, funcs_all_builtin, checked;
};

/* Both levels of one instruction; false on a disagreement. */
static bool compare_one(const uint8_t *code, size_t avail, struct tally *t)
{
	struct insn b, z;
	char hex[3 * 16 + 1] = "";
	int zerr = insn_decode_zydis(code, avail, &z);

	for (size_t i = 0; i < avail && i < 15; i++)
		snprintf(hex + 3 * i, 4, "%02x ", code[i]);
	t->insns++;
	if (insn_decode_builtin(code, avail, INSN_WANT_LENGTH, &b) == 0) {
		t->claimed++;
		if (zerr) {
			if (mismatches++ < 20)
				fprintf(stderr, "%s: claimed (len %d), Zydis %d\n", hex, b.len, zerr);
			return false;
		}
		if (!same_length_fields(&b, &z, hex))
			return false;
	}
	if (insn_decode_builtin(code, avail, INSN_WANT_OPERANDS, &b) == 0) {
		t->claimed_operands++;
		if (zerr || !same_length_fields(&b, &z, hex) || !same_operand_fields(&b, &z, hex))
			return false;
	}
	return true;
}

/* Random bytes, with prefixes and common opcodes drawn more often than chance. */
static void test_random_bytes(void)
{
	static const uint8_t common[] = { 0x66, 0xf2, 0xf3, 0xf0, 0x2e, 0x3e, 0x64, 0x65, 0x48,
					  0x49, 0x4c, 0x4d, 0x41, 0x44, 0x0f, 0x0f, 0x0f, 0x89,
					  0x8b, 0x8d, 0x83, 0x81, 0xff, 0xc7, 0xe8, 0xe9, 0xeb,
					  0x1f, 0x1e, 0xfa, 0x24, 0x25, 0x05, 0x15, 0x44, 0x84 };
	struct tally t = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	long bad = 0;

	for (long n = 0; n < 4000000; n++) {
		uint8_t code[16];

		for (int i = 0; i < 16; i++) {
			uint64_t r = unit_rand(&seed);

			code[i] = (r & 3) == 0 ? common[(r >> 8) % sizeof(common)] : (uint8_t)(r >> 16);
		}
		bad += !compare_one(code, 1 + unit_rand(&seed) % 16, &t);
	}
	printf("random: %ld sequences, built-in claimed %ld (%ld with operands), %ld differ\n",
	       t.insns, t.claimed, t.claimed_operands, bad);
	CHECK_EQ_INT(bad, 0);
	CHECK(t.claimed > t.insns / 10);
}

/* ---- real code ------------------------------------------------------------------ */

struct func_code {
	const uint8_t *code;
	size_t size, avail; /* the symbol's size; bytes to the section's end */
	uint64_t addr;
};

/* Every instruction of the body, in step with Zydis; and the function's entry. */
static bool compare_function(const struct func_code *f, struct tally *t)
{
	bool all_builtin = true, ok = true;
	size_t off = 0;

	t->funcs++;
	while (off < f->size) {
		struct insn z, b;

		if (insn_decode_zydis(f->code + off, f->size - off, &z))
			break;
		if (insn_decode_builtin(f->code + off, f->size - off, INSN_WANT_LENGTH, &b))
			all_builtin = false;
		ok &= compare_one(f->code + off, f->size - off, t);
		off += z.len;
	}
	t->funcs_all_builtin += all_builtin;
	return ok;
}

static char reason_copy[512];

static void keep_reason(const struct relocation *r)
{
	snprintf(reason_copy, sizeof(reason_copy), "%s", r->skip_reason ? r->skip_reason : "");
}

/* The shipped relocator and scan against Zydis-only builds of them. */
static bool compare_entry(const struct func_code *f, struct tally *t)
{
	uint8_t out_b[RELOCATOR_MAX_CODE_LEN], out_z[RELOCATOR_MAX_CODE_LEN];
	struct relocation rb, rz;
	uint64_t dest = f->addr + 0x10000000ull;
	int eb, ez;

	if (f->size < RELOCATOR_JMP_REL32_LEN)
		return relocator_padding_after(f->code, f->avail < 32 ? f->avail : 32, f->size) ==
		       zydis_relocator_padding_after(f->code, f->avail < 32 ? f->avail : 32,
						     f->size);
	t->checked++;
	memset(out_b, 0xaa, sizeof(out_b));
	memset(out_z, 0xaa, sizeof(out_z));
	eb = relocator_relocate(f->code, f->size, f->addr, RELOCATOR_JMP_REL32_LEN, dest, out_b,
				sizeof(out_b), &rb);
	keep_reason(&rb);
	ez = zydis_relocator_relocate(f->code, f->size, f->addr, RELOCATOR_JMP_REL32_LEN, dest,
				      out_z, sizeof(out_z), &rz);
	if (eb != ez || rb.patch_len != rz.patch_len || rb.code_len != rz.code_len ||
	    rb.same_offsets_len != rz.same_offsets_len || memcmp(out_b, out_z, sizeof(out_b)) ||
	    strcmp(reason_copy, rz.skip_reason ? rz.skip_reason : "")) {
		fprintf(stderr, "relocation at 0x%llx differs: %d '%s' / Zydis %d '%s'\n",
			(unsigned long long)f->addr, eb, reason_copy, ez,
			rz.skip_reason ? rz.skip_reason : "");
		return false;
	}
	return return_slot_read_early(f->code, f->size) ==
	       zydis_return_slot_read_early(f->code, f->size);
}

static bool exec_section(Elf *elf, size_t shndx, Elf_Data **data, GElf_Shdr *sh)
{
	Elf_Scn *scn = elf_getscn(elf, shndx);

	if (!scn || !gelf_getshdr(scn, sh) || sh->sh_type != SHT_PROGBITS ||
	    !(sh->sh_flags & SHF_EXECINSTR))
		return false;
	*data = elf_getdata(scn, NULL);
	return *data && (*data)->d_buf && (*data)->d_size == sh->sh_size;
}

/* Calls fn on every sized function symbol of path (both symbol tables); failures. */
static long for_each_function(const char *path, struct tally *t,
			      bool (*fn)(const struct func_code *, struct tally *))
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	Elf_Scn *scn = NULL;
	long bad = 0;

	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr symsh;
		Elf_Data *syms;

		if (!gelf_getshdr(scn, &symsh) ||
		    (symsh.sh_type != SHT_SYMTAB && symsh.sh_type != SHT_DYNSYM))
			continue;
		syms = elf_getdata(scn, NULL);
		for (size_t i = 0; syms && i < symsh.sh_size / symsh.sh_entsize; i++) {
			GElf_Sym s;
			GElf_Shdr sh;
			Elf_Data *d;
			struct func_code f;

			if (!gelf_getsym(syms, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    !s.st_size || !exec_section(elf, s.st_shndx, &d, &sh) ||
			    s.st_value < sh.sh_addr || s.st_value + s.st_size > sh.sh_addr + sh.sh_size)
				continue;
			f.code = (const uint8_t *)d->d_buf + (s.st_value - sh.sh_addr);
			f.size = s.st_size;
			f.avail = sh.sh_addr + sh.sh_size - s.st_value;
			f.addr = s.st_value;
			bad += !fn(&f, t);
		}
	}
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : bad;
}

static const char *const libraries[] = {
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib64/ld-linux-x86-64.so.2",
	"/lib/x86_64-linux-gnu/libstdc++.so.6",
};

static void check_file(const char *path, bool required)
{
	struct tally t = { 0 }, e = { 0 };
	long bad;

	mismatches = 0;
	bad = for_each_function(path, &t, compare_function);

	if (bad < 0) {
		if (required)
			CHECK(!"cannot read a required file");
		printf("%s: not found, skipped\n", path);
		return;
	}
	CHECK_EQ_INT(bad, 0);
	bad = for_each_function(path, &e, compare_entry);
	CHECK_EQ_INT(bad, 0);
	printf("%s: %ld functions (%ld decoded without Zydis, %ld entries relocated alike), "
	       "%ld of %ld instructions built in (%ld with operands)\n",
	       path, t.funcs, t.funcs_all_builtin, e.checked, t.claimed, t.insns,
	       t.claimed_operands);
}

static void test_libraries(void)
{
	for (size_t i = 0; i < sizeof(libraries) / sizeof(libraries[0]); i++)
		check_file(libraries[i], i < 2);
}

/* The test targets and profd's own programs: compiled code of this tree. */
static void test_targets(void)
{
	DIR *dir = opendir("build/tests/targets");
	struct dirent *de;
	char path[512];
	int files = 0;

	while (dir && (de = readdir(dir))) {
		struct stat st;

		snprintf(path, sizeof(path), "build/tests/targets/%s", de->d_name);
		if (de->d_name[0] == '.' || stat(path, &st) || !S_ISREG(st.st_mode) ||
		    !(st.st_mode & S_IXUSR))
			continue;
		check_file(path, true);
		files++;
	}
	if (dir)
		closedir(dir);
	check_file("build/profd", false);
	check_file("build/libprofagent.so", true);
	if (!files)
		printf("build/tests/targets: no targets built, skipped\n");
}

/* The prologues the benchmark's and most -O2 programs' functions start with. */
static void test_common_prologues(void)
{
	static const uint8_t prologues[][16] = {
		{ 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56 },
		{ 0x48, 0x83, 0xec, 0x18, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0 },
		{ 0x8d, 0x44, 0x7f, 0x01, 0xc3 },
		{ 0x48, 0x8d, 0x05, 0x10, 0x20, 0x30, 0x00, 0x48, 0x89, 0x44, 0x24, 0x08 },
		{ 0x53, 0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00, 0x48, 0x89, 0xfb },
	};
	struct insn in;

	for (size_t i = 0; i < sizeof(prologues) / sizeof(prologues[0]); i++) {
		size_t off = 0;

		while (off < 8) {
			int err = insn_decode_builtin(prologues[i] + off, 16 - off,
						      INSN_WANT_OPERANDS, &in);

			CHECK_EQ_INT(err, 0);
			if (err)
				break;
			off += in.len;
		}
	}
}

int main(void)
{
	elf_version(EV_CURRENT);
	RUN_TEST(test_common_prologues);
	RUN_TEST(test_random_bytes);
	RUN_TEST(test_libraries);
	RUN_TEST(test_targets);
	return unit_summary();
}
