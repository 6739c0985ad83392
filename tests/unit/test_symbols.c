// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/symbols/symbols.c and daemon/symbols/elf_module.c: this process's own
 * functions, libc and the vdso symbolized through /proc/self/maps and checked
 * against an independent libelf reading and readelf; symbol rules (aliases,
 * size 0, nesting) on an ELF written here; broken ELF files never crash;
 * .gnu_debuglink files found in gdb's three places and refused on a CRC
 * mismatch (a library built here with cc and objcopy); anonymous code named
 * through this process's own /tmp/perf-PID.map.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/symbols/elf_module.h"
#include "daemon/symbols/module_cache.h"
#include "daemon/symbols/symbols.h"
#include "tests/unit/unit.h"

#define PUBLIC __attribute__((noinline, used, visibility("default")))

static volatile int sink;

PUBLIC int profd_symtest_alpha(int x)
{
	int i;

	for (i = 0; i < x; i++)
		sink += i * x;
	return sink;
}

PUBLIC int profd_symtest_beta(int x)
{
	return profd_symtest_alpha(x + 1) * 3 + sink;
}

static char self_path[PATH_MAX];

static const char *exe_path(void)
{
	ssize_t n;

	if (!self_path[0]) {
		n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
		if (n > 0)
			self_path[n] = '\0';
	}
	return self_path;
}

static struct symbolizer *self_symbolizer(void)
{
	struct symbolizer *s = symbolizer_new(getpid());

	CHECK(s != NULL);
	if (s)
		CHECK_EQ_INT(symbolizer_load_proc_maps(s), 0);
	return s;
}

/* st_value of a function named name in path's symbol table of type, or 0. */
static uint64_t elf_symbol_value(const char *path, uint32_t type, const char *name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	uint64_t value = 0;
	Elf *elf;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && !value && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Sym sym;
		size_t i;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !(d = elf_getdata(scn, NULL)))
			continue;
		for (i = 0; i < sh.sh_size / sh.sh_entsize && gelf_getsym(d, (int)i, &sym); i++) {
			const char *n = elf_strptr(elf, sh.sh_link, sym.st_name);

			if (n && strcmp(n, name) == 0 && sym.st_shndx != SHN_UNDEF &&
			    GELF_ST_TYPE(sym.st_info) == STT_FUNC)
				value = sym.st_value;
		}
	}
	elf_end(elf);
	close(fd);
	return value;
}

/* Build ID as printed by readelf -n, or "" */
static void readelf_build_id(const char *path, char *out, size_t len)
{
	char cmd[PATH_MAX + 64], line[512], *p;
	FILE *f;

	out[0] = '\0';
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, "Build ID: ");
		if (p && sscanf(p + 10, "%127s", out) == 1 && strlen(out) < len)
			break;
		out[0] = '\0';
	}
	pclose(f);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static void test_own_function_names(void)
{
	struct symbolizer *s = self_symbolizer();
	struct symbol_info si;

	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)&profd_symtest_alpha, &si), 0);
	CHECK_EQ_STR(si.function, "profd_symtest_alpha");
	CHECK_EQ_U64(si.function_offset, 0);
	CHECK_EQ_STR(si.mapping_path, exe_path());
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)&profd_symtest_beta + 4, &si), 0);
	CHECK_EQ_STR(si.function, "profd_symtest_beta");
	CHECK_EQ_U64(si.function_offset, 4);
	CHECK(si.map_start <= (uintptr_t)&profd_symtest_beta);
	CHECK((uintptr_t)&profd_symtest_beta < si.map_end);
	symbolizer_free(s);
}

static void test_rel_pc_is_st_value(void)
{
	struct symbolizer *s = self_symbolizer();
	uint64_t value = elf_symbol_value(exe_path(), SHT_SYMTAB, "profd_symtest_beta");
	struct symbol_info si;

	if (!s)
		return;
	CHECK(value != 0);
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)&profd_symtest_beta, &si), 0);
	CHECK_EQ_U64(si.rel_pc, value);
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)&profd_symtest_beta + 7, &si), 0);
	CHECK_EQ_U64(si.rel_pc, value + 7);
	symbolizer_free(s);
}

static void test_libc_function(void)
{
	struct symbolizer *s = self_symbolizer();
	void *addr = dlsym(RTLD_DEFAULT, "getpid");
	struct symbol_info si;

	CHECK(addr != NULL);
	if (!s || !addr)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)addr, &si), 0);
	CHECK(strstr(si.mapping_path, "libc.so.6") != NULL);
	/* getpid (weak) and __getpid (global) alias: the shortest global name wins */
	CHECK_EQ_STR(si.function, "getpid");
	CHECK_EQ_U64(si.function_offset, 0);
	CHECK_EQ_U64(elf_symbol_value(si.mapping_path, SHT_DYNSYM, "getpid"), si.rel_pc);
	CHECK_EQ_U64(si.build_id_len, 20);
	symbolizer_free(s);
}

/* Two processes' symbolizers sharing modules read libc once: the same names, freed in any order. */
static void test_shared_modules(void)
{
	struct module_cache *c = module_cache_new();
	struct symbolizer *a = self_symbolizer(), *b = self_symbolizer();
	void *addr = dlsym(RTLD_DEFAULT, "getpid");
	struct symbol_info sa, sb;

	CHECK(c != NULL);
	if (!c || !a || !b || !addr)
		return;
	symbolizer_share_modules(a, c);
	symbolizer_share_modules(b, c);
	CHECK_EQ_INT(symbolizer_lookup(a, (uintptr_t)addr, &sa), 0);
	CHECK_EQ_INT(symbolizer_lookup(b, (uintptr_t)addr, &sb), 0);
	CHECK_EQ_STR(sb.function, "getpid");
	CHECK(sa.function == sb.function); /* one table, read once */
	CHECK(sa.mapping_path == sb.mapping_path);
	symbolizer_free(a);
	module_cache_free(c);
	CHECK_EQ_INT(symbolizer_lookup(b, (uintptr_t)addr, &sb), 0);
	CHECK_EQ_STR(sb.function, "getpid");
	symbolizer_free(b);
}

static void check_build_id(struct symbolizer *s, uintptr_t pc)
{
	char want[130], got[130];
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_lookup(s, pc, &si), 0);
	readelf_build_id(si.mapping_path, want, sizeof(want));
	CHECK(want[0] != '\0');
	CHECK(si.build_id != NULL);
	if (!si.build_id)
		return;
	hex(si.build_id, si.build_id_len, got);
	CHECK_EQ_STR(got, want);
}

static void *return_address_thread(void *arg)
{
	*(void **)arg = __builtin_extract_return_addr(__builtin_return_address(0));
	return NULL;
}

/* start_thread is local to libc: only a .symtab (libc6-dbg's debug file) names it. */
static void test_libc_local_function_from_debug_file(void)
{
	struct symbolizer *s = self_symbolizer();
	char path[256], id[130];
	struct symbol_info si;
	void *ret = NULL;
	pthread_t t;

	if (!s)
		return;
	CHECK_EQ_INT(pthread_create(&t, NULL, return_address_thread, &ret), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)ret, &si), 0);
	CHECK(strstr(si.mapping_path, "libc.so.6") != NULL);
	hex(si.build_id, si.build_id_len, id);
	snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	if (access(path, R_OK) != 0) {
		printf("skip: no %s (libc6-dbg)\n", path);
	} else {
		CHECK_EQ_STR(si.function, "start_thread");
		CHECK(si.function_offset > 0);
	}
	symbolizer_free(s);
}

static void test_build_id_matches_readelf(void)
{
	struct symbolizer *s = self_symbolizer();

	if (!s)
		return;
	check_build_id(s, (uintptr_t)&profd_symtest_alpha);
	check_build_id(s, (uintptr_t)dlsym(RTLD_DEFAULT, "getpid"));
	symbolizer_free(s);
}

static void test_load_bias_of_pie(void)
{
	struct symbolizer *s = self_symbolizer();
	struct symbol_info si;

	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)&profd_symtest_alpha, &si), 0);
	/* GNU ld puts the executable PT_LOAD at p_vaddr == p_offset */
	CHECK_EQ_U64(si.load_bias, 0);
	symbolizer_free(s);
}

static void test_vdso(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *fn = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	struct symbolizer *s;
	struct symbol_info si;

	if (!fn) {
		printf("skip: no linux-vdso.so.1 in the link map\n");
		return;
	}
	s = self_symbolizer();
	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)fn, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "[vdso]");
	CHECK_EQ_STR(si.function, "clock_gettime"); /* weak alias, shortest */
	CHECK_EQ_U64(si.function_offset, 0);
	symbolizer_free(s);
}

/* Once the target is gone its vdso is read from ours: the kernel's image is the same. */
static void test_vdso_of_exited_process(void)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *fn = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	struct symbolizer *own, *gone;
	struct symbol_info si;
	pid_t child;

	if (!fn) {
		printf("skip: no linux-vdso.so.1 in the link map\n");
		return;
	}
	child = fork();
	if (child == 0)
		_exit(0);
	waitpid(child, NULL, 0);
	own = self_symbolizer();
	gone = symbolizer_new(child);
	if (!own || !gone)
		return;
	CHECK_EQ_INT(symbolizer_lookup(own, (uintptr_t)fn, &si), 0);
	CHECK_EQ_INT(symbolizer_add_mapping(gone, si.map_start, si.map_end, 0, "[vdso]"), 0);
	CHECK_EQ_INT(symbolizer_lookup(gone, (uintptr_t)fn + 2, &si), 0);
	CHECK_EQ_STR(si.function, "clock_gettime");
	CHECK_EQ_U64(si.function_offset, 2);
	symbolizer_free(own);
	symbolizer_free(gone);
}

static void test_unknown_pc(void)
{
	struct symbolizer *s = self_symbolizer();
	struct symbol_info si;

	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, 8, &si), -ENOENT);
	CHECK_EQ_STR(si.mapping_path, "[unknown]");
	CHECK(si.function == NULL);
	CHECK(si.build_id == NULL);
	symbolizer_free(s);
}

static void test_anon_mapping(void)
{
	struct symbolizer *s = symbolizer_new(getpid());
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x10000, 0x20000, 0, "//anon"), 0);
	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x20000, 0x30000, 0, NULL), 0);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x10010, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "[anon]");
	CHECK(si.function == NULL);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x2fff0, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "[anon]");
	CHECK_EQ_INT(symbolizer_lookup(s, 0x30000, &si), -ENOENT);
	symbolizer_free(s);
}

static void test_overlap_replaces(void)
{
	struct symbolizer *s = symbolizer_new(getpid());
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x100000, 0x105000, 0x1000, "/a"), 0);
	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x106000, 0x107000, 0, "/c"), 0);
	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x102000, 0x103000, 0, "/b"), 0);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x101000, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "/a");
	CHECK_EQ_U64(si.map_end, 0x102000);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x102800, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "/b");
	CHECK_EQ_INT(symbolizer_lookup(s, 0x104000, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "/a");
	CHECK_EQ_U64(si.map_start, 0x103000);
	CHECK_EQ_U64(si.map_pgoff, 0x4000);
	/* one mapping covering all three replaces them */
	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x0ff000, 0x108000, 0, "/d"), 0);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x106800, &si), 0);
	CHECK_EQ_STR(si.mapping_path, "/d");
	CHECK_EQ_INT(symbolizer_lookup(s, 0x108000, &si), -ENOENT);
	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x2000, 0x2000, 0, "/e"), -EINVAL);
	symbolizer_free(s);
}

/* A temp file holding the first len bytes of src (all of it when len is 0). */
static int copy_prefix(const char *src, size_t len, char *tmpl)
{
	static char buf[1 << 16];
	int in = open(src, O_RDONLY), out = mkstemp(tmpl);
	size_t done = 0;
	ssize_t n;

	while (in >= 0 && out >= 0 && (!len || done < len)) {
		n = read(in, buf, len && len - done < sizeof(buf) ? len - done : sizeof(buf));
		if (n <= 0 || write(out, buf, (size_t)n) != n)
			break;
		done += (size_t)n;
	}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return out >= 0 && done > 0 ? 0 : -1;
}

/* A mapping of path must resolve to the path, without a symbol, without crashing. */
static void check_no_symbols(const char *path)
{
	struct symbolizer *s = symbolizer_new(getpid());
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_add_mapping(s, 0x7f0000000000, 0x7f0000010000, 0, path), 0);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x7f0000000100, &si), 0);
	CHECK_EQ_STR(si.mapping_path, path);
	CHECK(si.function == NULL);
	CHECK(si.symbols_error != NULL);
	CHECK_EQ_INT(symbolizer_lookup(s, 0x7f000000f000, &si), 0);
	CHECK(si.function == NULL);
	symbolizer_free(s);
}

static void test_truncated_elf(void)
{
	struct symbolizer *s = self_symbolizer();
	struct symbol_info si;
	char tmpl[] = "/tmp/profd-trunc-XXXXXX";

	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)dlsym(RTLD_DEFAULT, "getpid"), &si), 0);
	CHECK_EQ_INT(copy_prefix(si.mapping_path, 1000, tmpl), 0);
	check_no_symbols(tmpl);
	unlink(tmpl);
	symbolizer_free(s);
}

static void test_not_elf_and_missing_file(void)
{
	char tmpl[] = "/tmp/profd-text-XXXXXX";
	int fd = mkstemp(tmpl);

	CHECK(fd >= 0);
	CHECK(write(fd, "hello, not an ELF\n", 18) == 18);
	close(fd);
	check_no_symbols(tmpl);
	unlink(tmpl);
	check_no_symbols("/nonexistent/profd/libmissing.so");
	check_no_symbols("/dev/null");
	check_no_symbols("/proc/self");
}

/* A deleted file stays readable through /proc/PID/map_files/START-END. */
static void test_deleted_file(void)
{
	char tmpl[] = "/tmp/profd-deleted-XXXXXX";
	struct symbolizer *s;
	struct symbol_info si;
	void *h, *fn;
	Dl_info dl;

	CHECK(dladdr((void *)&elf_version, &dl) != 0 && dl.dli_fname != NULL);
	CHECK_EQ_INT(copy_prefix(dl.dli_fname, 0, tmpl), 0);
	h = dlopen(tmpl, RTLD_NOW | RTLD_LOCAL);
	fn = h ? dlsym(h, "elf_version") : NULL;
	CHECK(fn != NULL && fn != (void *)&elf_version);
	unlink(tmpl);
	s = self_symbolizer();
	if (s && fn) {
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)fn, &si), 0);
		CHECK(strstr(si.mapping_path, " (deleted)") != NULL);
		CHECK_EQ_STR(si.function, "elf_version");
		CHECK_EQ_U64(si.function_offset, 0);
	}
	symbolizer_free(s);
	if (h)
		dlclose(h);
}

/* ---- symbol rules on an ELF written here ---------------------------------- */

#define TEXT_ADDR 0x401000u
#define TEXT_SIZE 0x1000u

struct test_sym {
	const char *name;
	uint32_t off, size;
	int bind, type, undef;
};

static const struct test_sym rule_syms[] = {
	{ "alias_long_name", 0x000, 0x40, STB_GLOBAL, STT_FUNC, 0 },
	{ "a", 0x000, 0x40, STB_LOCAL, STT_FUNC, 0 },
	{ "__alias", 0x000, 0x40, STB_WEAK, STT_FUNC, 0 },
	{ "outer", 0x100, 0x100, STB_GLOBAL, STT_FUNC, 0 },
	{ "inner", 0x120, 0x10, STB_LOCAL, STT_FUNC, 0 },
	{ "asm_size0", 0x300, 0, STB_GLOBAL, STT_FUNC, 0 },
	{ "after", 0x340, 0x10, STB_GLOBAL, STT_FUNC, 0 },
	{ "an_object", 0x500, 0x10, STB_GLOBAL, STT_OBJECT, 0 },
	{ "resolver", 0x600, 0x20, STB_GLOBAL, STT_GNU_IFUNC, 0 },
	{ "last_size0", 0x800, 0, STB_LOCAL, STT_FUNC, 0 },
	{ "undefined", 0, 0, STB_GLOBAL, STT_FUNC, 1 },
};

#define N_RULE_SYMS (sizeof(rule_syms) / sizeof(rule_syms[0]))

static Elf_Scn *new_section(Elf *elf, const char *name, size_t *stroff, char *shstr, uint32_t type,
			    void *buf, size_t size, Elf_Type dtype)
{
	Elf_Scn *scn = elf_newscn(elf);
	Elf_Data *d = elf_newdata(scn);
	GElf_Shdr sh;

	d->d_buf = buf;
	d->d_size = size;
	d->d_type = dtype;
	d->d_align = 8;
	gelf_getshdr(scn, &sh);
	sh.sh_name = (uint32_t)*stroff;
	sh.sh_type = type;
	strcpy(shstr + *stroff, name);
	*stroff += strlen(name) + 1;
	gelf_update_shdr(scn, &sh);
	return scn;
}

static void fill_rule_symbols(Elf64_Sym *syms, char *strtab, size_t text_index)
{
	size_t i, off = 1;

	for (i = 0; i < N_RULE_SYMS; i++) {
		Elf64_Sym *y = &syms[i + 1];

		y->st_name = (uint32_t)off;
		strcpy(strtab + off, rule_syms[i].name);
		off += strlen(rule_syms[i].name) + 1;
		y->st_info = (unsigned char)ELF64_ST_INFO(rule_syms[i].bind, rule_syms[i].type);
		y->st_shndx = rule_syms[i].undef ? SHN_UNDEF : (uint16_t)text_index;
		y->st_value = rule_syms[i].undef ? 0 : TEXT_ADDR + rule_syms[i].off;
		y->st_size = rule_syms[i].size;
	}
}

/* Writes an ELF64 with one PT_LOAD, .text at TEXT_ADDR and the rule_syms. */
static int write_rule_elf(int fd, uint64_t *text_offset)
{
	static uint8_t text[TEXT_SIZE];
	static Elf64_Sym syms[N_RULE_SYMS + 1];
	static char strtab[1024], shstr[256];
	size_t shoff = 1, text_index;
	Elf_Scn *text_scn, *sym_scn, *str_scn, *shstr_scn;
	GElf_Shdr sh;
	GElf_Ehdr eh;
	GElf_Phdr ph;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_WRITE, NULL);
	gelf_newehdr(elf, ELFCLASS64);
	gelf_newphdr(elf, 1);
	text_scn = new_section(elf, ".text", &shoff, shstr, SHT_PROGBITS, text, TEXT_SIZE,
			       ELF_T_BYTE);
	text_index = elf_ndxscn(text_scn);
	fill_rule_symbols(syms, strtab, text_index);
	sym_scn = new_section(elf, ".symtab", &shoff, shstr, SHT_SYMTAB, syms, sizeof(syms),
			      ELF_T_SYM);
	str_scn = new_section(elf, ".strtab", &shoff, shstr, SHT_STRTAB, strtab, sizeof(strtab),
			      ELF_T_BYTE);
	shstr_scn = new_section(elf, ".shstrtab", &shoff, shstr, SHT_STRTAB, shstr, sizeof(shstr),
				ELF_T_BYTE);
	gelf_getshdr(sym_scn, &sh);
	sh.sh_link = (uint32_t)elf_ndxscn(str_scn);
	sh.sh_entsize = sizeof(Elf64_Sym);
	sh.sh_info = 1;
	gelf_update_shdr(sym_scn, &sh);
	gelf_getehdr(elf, &eh);
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_shstrndx = (uint16_t)elf_ndxscn(shstr_scn);
	gelf_update_ehdr(elf, &eh);
	if (elf_update(elf, ELF_C_NULL) < 0)
		return -1;
	gelf_getshdr(text_scn, &sh);
	sh.sh_addr = TEXT_ADDR;
	sh.sh_flags = SHF_ALLOC | SHF_EXECINSTR;
	gelf_update_shdr(text_scn, &sh);
	ph = (GElf_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = sh.sh_offset,
			  .p_vaddr = TEXT_ADDR, .p_filesz = TEXT_SIZE, .p_memsz = TEXT_SIZE };
	gelf_update_phdr(elf, 0, &ph);
	*text_offset = sh.sh_offset;
	if (elf_update(elf, ELF_C_WRITE) < 0)
		return -1;
	elf_end(elf);
	return 0;
}

#define RULE_MAP 0x500000000000ull

static void check_rule(struct symbolizer *s, uint32_t off, const char *name, uint64_t fn_off)
{
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_lookup(s, RULE_MAP + off, &si), 0);
	CHECK_EQ_U64(si.rel_pc, TEXT_ADDR + off);
	if (!name) {
		CHECK(si.function == NULL);
		return;
	}
	CHECK_EQ_STR(si.function, name);
	CHECK_EQ_U64(si.function_offset, fn_off);
}

static void test_symbol_rules(void)
{
	char tmpl[] = "/tmp/profd-rules-XXXXXX";
	int fd = mkstemp(tmpl);
	struct symbolizer *s = symbolizer_new(getpid());
	uint64_t text_offset = 0;

	CHECK(fd >= 0);
	CHECK_EQ_INT(write_rule_elf(fd, &text_offset), 0);
	close(fd);
	CHECK_EQ_U64(elf_symbol_value(tmpl, SHT_SYMTAB, "outer"), TEXT_ADDR + 0x100);
	/* the mapping starts at .text: pgoff is its file offset */
	CHECK_EQ_INT(symbolizer_add_mapping(s, RULE_MAP, RULE_MAP + TEXT_SIZE, text_offset, tmpl),
		     0);
	check_rule(s, 0x010, "__alias", 0x10);       /* global/weak over local, then shortest */
	check_rule(s, 0x125, "inner", 0x5);          /* nested: innermost */
	check_rule(s, 0x180, "outer", 0x80);         /* past the nested one: the outer again */
	check_rule(s, 0x330, "asm_size0", 0x30);     /* size 0: up to the next symbol */
	check_rule(s, 0x345, "after", 0x5);
	check_rule(s, 0x400, NULL, 0);               /* gap */
	check_rule(s, 0x505, NULL, 0);               /* objects are not functions */
	check_rule(s, 0x610, "resolver", 0x10);      /* IFUNC resolvers are functions */
	check_rule(s, 0xfff, "last_size0", 0x7ff);   /* size 0, last: up to the section end */
	unlink(tmpl);
	symbolizer_free(s);
}

/*
 * A mapping the kernel named by device and inode (MMAP2) takes the module
 * another process loaded from that file without opening it: the file is
 * gone when the second process looks it up (a pid with no /proc either), and
 * its names still come. A different inode, or none, opens the path: nothing.
 */
static void check_unnamed(struct symbolizer *s, uint64_t pc)
{
	struct symbol_info si;

	CHECK_EQ_INT(symbolizer_lookup(s, pc, &si), 0);
	CHECK(si.function == NULL);
}

static void test_shared_modules_by_identity(void)
{
	char tmpl[] = "/tmp/profd-ident-XXXXXX";
	int fd = mkstemp(tmpl);
	struct module_cache *c = module_cache_new();
	struct symbolizer *a = symbolizer_new(getpid());
	struct symbolizer *b = symbolizer_new(INT32_MAX), *other = symbolizer_new(INT32_MAX);
	struct symbolizer *none = symbolizer_new(INT32_MAX);
	uint64_t text_offset = 0;
	struct stat st;

	CHECK(fd >= 0 && c && a && b && other && none);
	if (fd < 0 || !c || !a || !b || !other || !none)
		return;
	CHECK_EQ_INT(write_rule_elf(fd, &text_offset), 0);
	CHECK_EQ_INT(fstat(fd, &st), 0);
	close(fd);
	symbolizer_share_modules(a, c);
	symbolizer_share_modules(b, c);
	symbolizer_share_modules(other, c);
	symbolizer_share_modules(none, c);
	CHECK_EQ_INT(symbolizer_add_mapping_id(a, RULE_MAP, RULE_MAP + TEXT_SIZE, text_offset, tmpl,
					       st.st_dev, st.st_ino), 0);
	check_rule(a, 0x125, "inner", 0x5); /* loaded from the file, kept in the cache */
	unlink(tmpl);
	CHECK_EQ_INT(symbolizer_add_mapping_id(b, RULE_MAP, RULE_MAP + TEXT_SIZE, text_offset, tmpl,
					       st.st_dev, st.st_ino), 0);
	check_rule(b, 0x180, "outer", 0x80);
	CHECK_EQ_INT(symbolizer_add_mapping_id(other, RULE_MAP, RULE_MAP + TEXT_SIZE, text_offset,
					       tmpl, st.st_dev, st.st_ino + 1), 0);
	check_unnamed(other, RULE_MAP + 0x180);
	CHECK_EQ_INT(symbolizer_add_mapping(none, RULE_MAP, RULE_MAP + TEXT_SIZE, text_offset, tmpl),
		     0);
	check_unnamed(none, RULE_MAP + 0x180);
	symbolizer_free(a);
	symbolizer_free(b);
	symbolizer_free(other);
	symbolizer_free(none);
	module_cache_free(c);
}

/* ---- mutated ELF files ------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static size_t read_all(const char *path, uint8_t **out)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);
	size_t n = 0;

	if (fd < 0 || fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	n = (size_t)read(fd, buf, (size_t)st.st_size) == (size_t)st.st_size ? (size_t)st.st_size
									  : 0;
	close(fd);
	*out = buf;
	return n;
}

/* Flips bytes in the headers (ELF header, phdrs, shdrs at the end) or anywhere. */
static void mutate(uint8_t *buf, size_t len, size_t *out_len)
{
	size_t i, n = 1 + rng() % 16, pos;

	for (i = 0; i < n; i++) {
		switch (rng() % 3) {
		case 0:
			pos = rng() % (len < 4096 ? len : 4096);
			break;
		case 1:
			pos = len - 1 - rng() % (len < 8192 ? len : 8192);
			break;
		default:
			pos = rng() % len;
		}
		buf[pos] = (uint8_t)rng();
	}
	*out_len = rng() % 4 == 0 ? rng() % len : len;
}

static void fuzz_one(const uint8_t *buf, size_t len, const char *path)
{
	struct symbolizer *s = symbolizer_new(getpid());
	struct symbol_info si;
	int fd = open(path, O_WRONLY | O_TRUNC);
	int i;

	CHECK(fd >= 0 && write(fd, buf, len) == (ssize_t)len);
	close(fd);
	symbolizer_add_mapping(s, 0x600000000000, 0x600000000000 + (1 << 20), 0, path);
	for (i = 0; i < 8; i++)
		CHECK_EQ_INT(symbolizer_lookup(s, 0x600000000000 + rng() % (1 << 20), &si), 0);
	symbolizer_free(s);
}

static void test_mutated_elf_never_crashes(void)
{
	char tmpl[] = "/tmp/profd-fuzz-XXXXXX";
	const char *inputs[] = { "/bin/true", exe_path() };
	uint8_t *orig = NULL, *buf;
	size_t len, mlen, k;
	int i, fd = mkstemp(tmpl);

	CHECK(fd >= 0);
	close(fd);
	for (k = 0; k < 2; k++) {
		len = read_all(inputs[k], &orig);
		CHECK(len > 0);
		buf = malloc(len);
		for (i = 0; buf && len && i < 300; i++) {
			memcpy(buf, orig, len);
			mutate(buf, len, &mlen);
			fuzz_one(buf, mlen, tmpl);
		}
		free(buf);
		free(orig);
		orig = NULL;
	}
	unlink(tmpl);
}

/* ---- .gnu_debuglink ------------------------------------------------------------ */

#define DL_NAME "libprofd_dl.debug"
#define DL_HIDDEN "profd_dl_hidden"

/* A stripped library whose one local function only its debuglink file names. */
static const char dl_source[] =
	"static __attribute__((noinline)) int profd_dl_hidden(int x)\n"
	"{ volatile int y = x; return y * 3; }\n"
	"void *profd_dl_hidden_addr(void) { return (void *)profd_dl_hidden; }\n"
	"int profd_dl_call(int x) { return profd_dl_hidden(x) + 1; }\n";

struct debuglink_lib {
	bool tried, ok;
	char dir[64];
	void *handle;
	uintptr_t hidden;        /* profd_dl_hidden in this process */
};

static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Builds DIR/libprofd_dl.so (stripped, debuglink DL_NAME) and DIR/stash (the debug file). */
static int build_debuglink_lib(struct debuglink_lib *l)
{
	char cmd[1024], src[128];
	void *(*addr_fn)(void);

	snprintf(l->dir, sizeof(l->dir), "/tmp/profd-dlink-XXXXXX");
	if (!mkdtemp(l->dir))
		return -1;
	snprintf(src, sizeof(src), "%s/dl.c", l->dir);
	if (write_file(src, dl_source, sizeof(dl_source) - 1) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cc -shared -fPIC -O2 -g -o libprofd_dl.so dl.c && "
		 "objcopy --only-keep-debug libprofd_dl.so " DL_NAME " && "
		 "objcopy --strip-all libprofd_dl.so && "
		 "objcopy --add-gnu-debuglink=" DL_NAME " libprofd_dl.so && "
		 "mv " DL_NAME " stash",
		 l->dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s/libprofd_dl.so", l->dir);
	l->handle = dlopen(cmd, RTLD_NOW | RTLD_LOCAL);
	addr_fn = l->handle ? (void *(*)(void))dlsym(l->handle, "profd_dl_hidden_addr") : NULL;
	if (!addr_fn)
		return -1;
	l->hidden = (uintptr_t)addr_fn();
	return 0;
}

static struct debuglink_lib dl_lib;

/* The library, built on first use; NULL (after printing why) without cc or objcopy. */
static struct debuglink_lib *debuglink_lib(void)
{
	if (!dl_lib.tried) {
		dl_lib.tried = true;
		dl_lib.ok = build_debuglink_lib(&dl_lib) == 0;
		if (!dl_lib.ok)
			printf("skip: cannot build a library with cc and objcopy in %s\n",
			       dl_lib.dir);
	}
	return dl_lib.ok ? &dl_lib : NULL;
}

static void debuglink_lib_remove(void)
{
	char cmd[128];

	if (dl_lib.handle)
		dlclose(dl_lib.handle);
	if (dl_lib.dir[0] && strncmp(dl_lib.dir, "/tmp/profd-dlink-", 17) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dl_lib.dir);
		CHECK(system(cmd) == 0);
	}
}

/* Copies the stashed debug file to path, with extra bytes appended (changing its CRC). */
static int place_debug_file(const struct debuglink_lib *l, const char *path, const char *extra)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "cp %s/stash '%s'%s%s%s", l->dir, path,
		 extra ? " && printf '" : "", extra ? extra : "", extra ? "' >> '" : "");
	if (extra)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s'", path);
	return system(cmd) == 0 ? 0 : -1;
}

/* The name a fresh symbolizer of this process gives the library's hidden function. */
static void lookup_hidden(const struct debuglink_lib *l, struct symbol_info *si, char *fn,
			  size_t len)
{
	struct symbolizer *s = self_symbolizer();

	snprintf(fn, len, "(none)");
	if (!s)
		return;
	CHECK_EQ_INT(symbolizer_lookup(s, l->hidden, si), 0);
	if (si->function)
		snprintf(fn, len, "%s", si->function);
	CHECK(strstr(si->mapping_path, "/libprofd_dl.so") != NULL);
	symbolizer_free(s);
}

static void check_debuglink_at(const char *path)
{
	struct debuglink_lib *l = debuglink_lib();
	struct symbol_info si;
	char fn[128];

	if (!l)
		return;
	CHECK_EQ_INT(place_debug_file(l, path, NULL), 0);
	lookup_hidden(l, &si, fn, sizeof(fn));
	CHECK_EQ_STR(fn, DL_HIDDEN);
	CHECK_EQ_U64(si.function_offset, 0);
	unlink(path);
}

static void test_debuglink_next_to_file(void)
{
	char path[128];

	if (!debuglink_lib())
		return;
	snprintf(path, sizeof(path), "%s/" DL_NAME, dl_lib.dir);
	check_debuglink_at(path);
}

static void test_debuglink_in_dot_debug(void)
{
	char path[128];

	if (!debuglink_lib())
		return;
	snprintf(path, sizeof(path), "%s/.debug", dl_lib.dir);
	CHECK_EQ_INT(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/.debug/" DL_NAME, dl_lib.dir);
	check_debuglink_at(path);
}

/* /usr/lib/debug/DIR/NAME: written only where this test may create the directory. */
static void test_debuglink_in_usr_lib_debug(void)
{
	char dir[128], path[192], cmd[256];

	if (!debuglink_lib())
		return;
	snprintf(dir, sizeof(dir), "/usr/lib/debug%s", dl_lib.dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' 2>/dev/null", dir);
	if (system(cmd) != 0) {
		printf("skip: cannot create %s\n", dir);
		return;
	}
	snprintf(path, sizeof(path), "%s/" DL_NAME, dir);
	check_debuglink_at(path);
	rmdir(dir);
	rmdir("/usr/lib/debug/tmp"); /* only if this test made it and it is empty */
}

/* Without a debug file, or with one whose CRC-32 differs, the hidden function has no name. */
static void test_debuglink_crc_mismatch(void)
{
	struct debuglink_lib *l = debuglink_lib();
	struct symbol_info si;
	char path[128], fn[128];

	if (!l)
		return;
	lookup_hidden(l, &si, fn, sizeof(fn));
	CHECK(strcmp(fn, DL_HIDDEN) != 0);
	snprintf(path, sizeof(path), "%s/" DL_NAME, l->dir);
	CHECK_EQ_INT(place_debug_file(l, path, "x"), 0);
	lookup_hidden(l, &si, fn, sizeof(fn));
	CHECK(strcmp(fn, DL_HIDDEN) != 0);
	unlink(path);
}

/* ---- JIT code through /tmp/perf-PID.map ------------------------------------------- */

#define JIT_PAGES 4

static int append_line(const char *path, const char *fmt, uintptr_t start, unsigned size,
		       const char *name)
{
	FILE *f = fopen(path, "ae");

	if (!f)
		return -1;
	fprintf(f, fmt, (unsigned long)start, size, name);
	return fclose(f) == 0 ? 0 : -1;
}

struct jit_fixture {
	uint8_t *code;           /* JIT_PAGES anonymous executable pages */
	char map_path[64];
};

static int jit_fixture_init(struct jit_fixture *j)
{
	j->code = mmap(NULL, JIT_PAGES * 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (j->code == MAP_FAILED) {
		printf("skip: no anonymous executable mapping: %s\n", strerror(errno));
		return -1;
	}
	snprintf(j->map_path, sizeof(j->map_path), "/tmp/perf-%d.map", (int)getpid());
	unlink(j->map_path);
	return 0;
}

static void jit_fixture_fini(struct jit_fixture *j)
{
	munmap(j->code, JIT_PAGES * 4096);
	unlink(j->map_path);
}

static void test_jit_map_names_anon_code(void)
{
	struct jit_fixture j;
	struct symbolizer *s;
	struct symbol_info si;

	if (jit_fixture_init(&j) < 0)
		return;
	CHECK_EQ_INT(append_line(j.map_path, "%lx %x %s\n", (uintptr_t)j.code, 0x100,
				 "LazyCompile:*hot app.js:12"), 0);
	CHECK_EQ_INT(append_line(j.map_path, "%lx %x %s\n", (uintptr_t)j.code + 0x1000, 0x80,
				 "Builtin:Call"), 0);
	s = self_symbolizer();
	if (s) {
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x10, &si), 0);
		CHECK_EQ_STR(si.mapping_path, "[jit]");
		CHECK_EQ_STR(si.function, "LazyCompile:*hot app.js:12");
		CHECK_EQ_U64(si.function_offset, 0x10);
		CHECK(si.map_start <= (uintptr_t)j.code && (uintptr_t)j.code < si.map_end);
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x107f, &si), 0);
		CHECK_EQ_STR(si.function, "Builtin:Call");
		/* anonymous code the map does not cover stays anonymous */
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x1080, &si), 0);
		CHECK_EQ_STR(si.mapping_path, "[anon]");
		CHECK(si.function == NULL);
	}
	symbolizer_free(s);
	jit_fixture_fini(&j);
}

/* JITs append: a miss re-reads the map within SYMBOLIZER_JIT_RECHECK_MISSES misses. */
static void test_jit_map_appended_later(void)
{
	struct jit_fixture j;
	struct symbolizer *s;
	struct symbol_info si;
	int i, found_after = -1;

	if (jit_fixture_init(&j) < 0)
		return;
	CHECK_EQ_INT(append_line(j.map_path, "%lx %x %s\n", (uintptr_t)j.code, 0x100, "first"),
		     0);
	s = self_symbolizer();
	if (s) {
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x2010, &si), 0);
		CHECK_EQ_STR(si.mapping_path, "[anon]");
		CHECK_EQ_INT(append_line(j.map_path, "%lx %x %s\n", (uintptr_t)j.code + 0x2000,
					 0x40, "compiled_later"), 0);
		for (i = 0; i <= SYMBOLIZER_JIT_RECHECK_MISSES && found_after < 0; i++)
			if (symbolizer_lookup(s, (uintptr_t)j.code + 0x2010, &si) == 0 &&
			    si.function && strcmp(si.function, "compiled_later") == 0)
				found_after = i;
		CHECK(found_after >= 0);
		CHECK_EQ_STR(si.mapping_path, "[jit]");
		CHECK_EQ_U64(si.function_offset, 0x10);
		/* the first entry is still there */
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x20, &si), 0);
		CHECK_EQ_STR(si.function, "first");
	}
	symbolizer_free(s);
	jit_fixture_fini(&j);
}

/* A map others could have written is refused, and the frame says why. */
/*
 * Every PLT entry objdump names ("<malloc@plt>:") is named the same by the
 * module, at its first byte and its last. Returns the entries checked, -1
 * when objdump cannot be run.
 */
static int check_plt_as_objdump(const char *objdump, const char *path)
{
	char cmd[PATH_MAX + 128], line[512], name[256];
	struct elf_module *em;
	unsigned long long addr, prev = 0;
	int checked = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s -d -j .plt -j .plt.sec '%s' 2>/dev/null", objdump, path);
	if (access(path, R_OK) != 0 || !(f = popen(cmd, "r")))
		return -1;
	em = elf_module_new(path);
	CHECK(em != NULL);
	if (em)
		elf_module_load(em, 0, 0, 0);
	while (em && fgets(line, sizeof(line), f)) {
		const struct elf_function *fn;

		/* not the header, which objdump names "<first@plt-0x10>" */
		if (!strstr(line, "@plt>:") || sscanf(line, "%llx <%255[^@>]@plt>:", &addr, name) != 2)
			continue;
		strcat(name, "@plt");
		fn = elf_module_find_function(em, addr);
		if (!fn)
			fprintf(stderr, "  %s: nothing at %#llx (%s)\n", path, addr, name);
		CHECK(fn != NULL);
		if (fn)
			CHECK_EQ_STR(fn->name, name);
		if (fn && checked && prev < addr) /* the entry before ends where this one starts */
			CHECK_EQ_U64(elf_module_find_function(em, addr - 1)->end, addr);
		prev = addr;
		checked++;
	}
	if (pclose(f) != 0 && checked == 0)
		checked = -1;
	elf_module_free(em);
	return checked;
}

/* A pc in a PLT stub is named as perf and objdump name it, on x86-64 and aarch64. */
static void test_plt_entries_named(void)
{
	char a64[PATH_MAX];
	int n = check_plt_as_objdump("objdump", exe_path());

	if (n < 0) {
		printf("skip: objdump cannot be run\n");
		return;
	}
	CHECK(n >= 5); /* this test calls libc through its PLT */
	snprintf(a64, sizeof(a64), "%.*s/aarch64/tests/targets/args_target",
		 (int)(strstr(exe_path(), "/tests/") ? strstr(exe_path(), "/tests/") - exe_path() : 0),
		 exe_path());
	n = check_plt_as_objdump("aarch64-linux-gnu-objdump", a64);
	if (n < 0)
		printf("skip: no aarch64 build or aarch64-linux-gnu-objdump for %s\n", a64);
	else
		CHECK(n >= 3);
}

static void test_jit_map_refused_when_writable_by_others(void)
{
	struct jit_fixture j;
	struct symbolizer *s;
	struct symbol_info si;

	if (jit_fixture_init(&j) < 0)
		return;
	CHECK_EQ_INT(append_line(j.map_path, "%lx %x %s\n", (uintptr_t)j.code, 0x100, "forged"),
		     0);
	CHECK_EQ_INT(chmod(j.map_path, 0666), 0);
	s = self_symbolizer();
	if (s) {
		CHECK_EQ_INT(symbolizer_lookup(s, (uintptr_t)j.code + 0x10, &si), 0);
		CHECK_EQ_STR(si.mapping_path, "[anon]");
		CHECK(si.function == NULL);
		CHECK(si.symbols_error && strstr(si.symbols_error, "writable by others"));
	}
	symbolizer_free(s);
	jit_fixture_fini(&j);
}

int main(void)
{
	RUN_TEST(test_own_function_names);
	RUN_TEST(test_rel_pc_is_st_value);
	RUN_TEST(test_libc_function);
	RUN_TEST(test_shared_modules);
	RUN_TEST(test_libc_local_function_from_debug_file);
	RUN_TEST(test_build_id_matches_readelf);
	RUN_TEST(test_load_bias_of_pie);
	RUN_TEST(test_vdso);
	RUN_TEST(test_vdso_of_exited_process);
	RUN_TEST(test_unknown_pc);
	RUN_TEST(test_anon_mapping);
	RUN_TEST(test_overlap_replaces);
	RUN_TEST(test_truncated_elf);
	RUN_TEST(test_not_elf_and_missing_file);
	RUN_TEST(test_deleted_file);
	RUN_TEST(test_plt_entries_named);
	RUN_TEST(test_symbol_rules);
	RUN_TEST(test_shared_modules_by_identity);
	RUN_TEST(test_mutated_elf_never_crashes);
	RUN_TEST(test_debuglink_next_to_file);
	RUN_TEST(test_debuglink_in_dot_debug);
	RUN_TEST(test_debuglink_in_usr_lib_debug);
	RUN_TEST(test_debuglink_crc_mismatch);
	RUN_TEST(test_jit_map_names_anon_code);
	RUN_TEST(test_jit_map_appended_later);
	RUN_TEST(test_jit_map_refused_when_writable_by_others);
	debuglink_lib_remove();
	return unit_summary();
}
