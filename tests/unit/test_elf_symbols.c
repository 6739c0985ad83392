// SPDX-License-Identifier: MIT
/*
 * Unit tests for agent/elf_symbols.c: libc's .dynsym against nm, the test
 * binary's own .symtab against a function pointer, alias folding and
 * filtering on a hand-built ELF, and fuzzing (truncation, byte flips) that
 * must end in an error with a reason, never a crash.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/elf_symbols.h"
#include "tests/unit/unit.h"

#define LIBC_PATH "/lib/x86_64-linux-gnu/libc.so.6"

/* ---- helpers ---------------------------------------------------------------- */

struct file_copy {
	uint8_t *data;
	size_t len;
};

static bool read_file(const char *path, struct file_copy *f)
{
	struct stat sb;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	f->data = NULL;
	if (fd < 0 || fstat(fd, &sb) < 0 || sb.st_size <= 0)
		goto err_close;
	f->len = (size_t)sb.st_size;
	f->data = malloc(f->len);
	while (f->data && done < f->len) {
		ssize_t n = read(fd, f->data + done, f->len - done);

		if (n <= 0)
			goto err_close;
		done += (size_t)n;
	}
	close(fd);
	return f->data != NULL;

err_close:
	free(f->data);
	f->data = NULL;
	if (fd >= 0)
		close(fd);
	return false;
}

static const struct elf_function *find_by_value(const struct elf_symbols *s, uint64_t value)
{
	size_t lo = 0, hi = s->n_functions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->functions[mid].value == value)
			return &s->functions[mid];
		if (s->functions[mid].value < value)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const struct elf_function *find_by_name(const struct elf_symbols *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->n_functions; i++)
		if (strcmp(s->functions[i].name, name) == 0)
			return &s->functions[i];
	return NULL;
}

/* Sorted by strictly increasing value, every name a real C string. */
static void check_invariants(const struct elf_symbols *s)
{
	size_t i;

	for (i = 0; i < s->n_functions; i++) {
		CHECK(s->functions[i].name != NULL);
		CHECK(s->functions[i].name[0] != '\0');
		CHECK(s->functions[i].size >= 1);
		if (i > 0 && s->functions[i - 1].value >= s->functions[i].value) {
			CHECK(!"functions not sorted by distinct value");
			return;
		}
	}
}

/* Where the parser looks: headers and the symbol and string tables. */
struct hot_range {
	size_t off, len;
};

static void flip_bytes(uint8_t *data, size_t len, const struct hot_range *r, size_t nr,
		       uint64_t *seed)
{
	unsigned k, flips = 1 + unit_rand(seed) % 8;

	for (k = 0; k < flips; k++) {
		size_t pos = unit_rand(seed) % len;

		if (unit_rand(seed) & 1) {
			const struct hot_range *h = &r[unit_rand(seed) % nr];
			size_t span = h->off < len ? len - h->off : 0;

			span = h->len < span ? h->len : span;
			if (span == 0)
				continue;
			pos = h->off + unit_rand(seed) % span;
		}
		data[pos] ^= (uint8_t)(1 + unit_rand(seed) % 255);
	}
}

/* ---- a hand-built ELF ---------------------------------------------------------- */

struct mini_sym {
	const char *name;
	uint64_t value, size;
	unsigned char type, bind;
	uint16_t shndx;
};

/* Layout: ehdr, one phdr, 4 section headers, symbols, strings (last). */
#define MINI_PHOFF sizeof(Elf64_Ehdr)
#define MINI_SHOFF (MINI_PHOFF + sizeof(Elf64_Phdr))
#define MINI_SYMOFF (MINI_SHOFF + 4 * sizeof(Elf64_Shdr))
#define MINI_MAX 4096

static void mini_shdr(uint8_t *out, unsigned i, uint32_t type, uint64_t off, uint64_t size,
		      uint32_t link, uint64_t entsize)
{
	Elf64_Shdr sh = { .sh_type = type, .sh_offset = off, .sh_size = size, .sh_link = link,
			  .sh_entsize = entsize, .sh_addralign = 1 };

	memcpy(out + MINI_SHOFF + i * sizeof(sh), &sh, sizeof(sh));
}

static size_t mini_strings(uint8_t *out, size_t stroff, const struct mini_sym *syms, size_t n,
			   uint32_t *name_off)
{
	size_t i, len = 1;

	out[stroff] = '\0';
	for (i = 0; i < n; i++) {
		size_t l = strlen(syms[i].name);

		name_off[i] = l ? (uint32_t)len : 0;
		memcpy(out + stroff + len, syms[i].name, l + 1);
		len += l ? l + 1 : 0;
	}
	return len;
}

/* Builds an ELF64 x86-64 shared object with symbols of section type symtype. */
static size_t mini_elf(uint8_t *out, const struct mini_sym *syms, size_t n, uint32_t symtype)
{
	Elf64_Ehdr eh = { .e_type = ET_DYN, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
			  .e_phoff = MINI_PHOFF, .e_shoff = MINI_SHOFF,
			  .e_ehsize = sizeof(Elf64_Ehdr), .e_phentsize = sizeof(Elf64_Phdr),
			  .e_phnum = 1, .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = 4 };
	Elf64_Phdr ph = { .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = 0,
			  .p_vaddr = 0x1000, .p_filesz = 0x100, .p_memsz = 0x3000 };
	size_t stroff = MINI_SYMOFF + (n + 1) * sizeof(Elf64_Sym), strsz, i;
	uint32_t name_off[16];

	memset(out, 0, MINI_MAX);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	memcpy(out, &eh, sizeof(eh));
	memcpy(out + MINI_PHOFF, &ph, sizeof(ph));
	strsz = mini_strings(out, stroff, syms, n, name_off);
	for (i = 0; i < n; i++) {
		Elf64_Sym sym = { .st_name = name_off[i], .st_value = syms[i].value,
				  .st_size = syms[i].size, .st_shndx = syms[i].shndx,
				  .st_info = ELF64_ST_INFO(syms[i].bind, syms[i].type) };

		memcpy(out + MINI_SYMOFF + (i + 1) * sizeof(sym), &sym, sizeof(sym));
	}
	mini_shdr(out, 1, SHT_PROGBITS, 0, 0x100, 0, 0);
	mini_shdr(out, 2, symtype, MINI_SYMOFF, (n + 1) * sizeof(Elf64_Sym), 3, sizeof(Elf64_Sym));
	mini_shdr(out, 3, SHT_STRTAB, stroff, strsz, 0, 0);
	return stroff + strsz;
}

static const struct mini_sym mini_aliases[] = {
	{ "zz", 0x1000, 16, STT_FUNC, STB_LOCAL, 1 },
	{ "longer_name", 0x1000, 16, STT_FUNC, STB_GLOBAL, 1 },
	{ "bbb", 0x1000, 16, STT_FUNC, STB_GLOBAL, 1 },
	{ "aaa", 0x1000, 16, STT_FUNC, STB_WEAK, 1 },
	{ "x", 0x2000, 8, STT_FUNC, STB_LOCAL, 1 },
	{ "impl", 0x1800, 4, STT_FUNC, STB_GLOBAL, 1 },
	{ "ifn", 0x1800, 4, STT_GNU_IFUNC, STB_LOCAL, 1 },
	{ "undefined", 0, 0, STT_FUNC, STB_GLOBAL, SHN_UNDEF },
	{ "undef_sized", 0x2100, 8, STT_FUNC, STB_GLOBAL, SHN_UNDEF },
	{ "zero_size", 0x2200, 0, STT_FUNC, STB_GLOBAL, 1 },
	{ "object", 0x2300, 8, STT_OBJECT, STB_GLOBAL, 1 },
	{ "", 0x2400, 8, STT_FUNC, STB_GLOBAL, 1 },
	{ "resolver", 0x2500, 8, STT_GNU_IFUNC, STB_GLOBAL, 1 },
};

#define N_MINI (sizeof(mini_aliases) / sizeof(mini_aliases[0]))

/* ---- cases: hand-built ELF ------------------------------------------------------ */

static void test_fold_and_filter(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	struct elf_symbols s;
	char err[128];

	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.from_symtab, 1);
	CHECK_EQ_INT(s.n_functions, 4);
	if (s.n_functions != 4)
		goto out;
	CHECK_EQ_STR(s.functions[0].name, "aaa");
	CHECK_EQ_U64(s.functions[0].value, 0x1000);
	CHECK_EQ_INT(s.functions[0].is_global, 1);
	CHECK_EQ_STR(s.functions[1].name, "impl");
	CHECK_EQ_INT(s.functions[1].is_ifunc, 1);
	CHECK_EQ_STR(s.functions[2].name, "x");
	CHECK_EQ_INT(s.functions[2].is_global, 0);
	CHECK_EQ_U64(s.functions[2].size, 8);
	CHECK_EQ_STR(s.functions[3].name, "resolver");
	CHECK_EQ_INT(s.functions[3].is_ifunc, 1);
	CHECK_EQ_INT(s.n_segments, 1);
	CHECK_EQ_U64(s.segments[0].vaddr, 0x1000);
	CHECK_EQ_U64(s.segments[0].memsz, 0x3000);
	CHECK_EQ_INT(s.segments[0].flags, PF_R | PF_X);
out:
	elf_symbols_free(&s);
}

static void test_dynsym_only(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_DYNSYM);
	struct elf_symbols s;
	char err[128];

	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.from_symtab, 0);
	CHECK_EQ_INT(s.n_functions, 4);
	elf_symbols_free(&s);
}

/* Rewrites one field of the symbol table's section header, expects an error. */
static void check_corrupt_symtab(size_t field_off, uint64_t value, size_t width, int code,
				 const char *reason_prefix)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	struct elf_symbols s;
	char err[160] = "";

	memcpy(buf + MINI_SHOFF + 2 * sizeof(Elf64_Shdr) + field_off, &value, width);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), code);
	CHECK(strncmp(err, reason_prefix, strlen(reason_prefix)) == 0);
	if (strncmp(err, reason_prefix, strlen(reason_prefix)) != 0)
		fprintf(stderr, "  reason: \"%s\"\n", err);
	CHECK(s.functions == NULL && s.n_functions == 0 && s.storage == NULL);
}

static void test_corrupt_section_fields(void)
{
	check_corrupt_symtab(offsetof(Elf64_Shdr, sh_entsize), 8, 8, -ENOEXEC,
			     "bad symbol entry size 8");
	check_corrupt_symtab(offsetof(Elf64_Shdr, sh_offset), UINT64_MAX - 8, 8, -ENOEXEC,
			     "truncated symbol table at 0x");
	check_corrupt_symtab(offsetof(Elf64_Shdr, sh_size), UINT64_MAX, 8, -ENOEXEC,
			     "truncated symbol table at 0x");
	check_corrupt_symtab(offsetof(Elf64_Shdr, sh_link), 4, 4, -ENOEXEC,
			     "bad string table index 4");
	check_corrupt_symtab(offsetof(Elf64_Shdr, sh_link), 1, 4, -ENOEXEC,
			     "section 1 is not a string table");
}

static void test_corrupt_name_offsets(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	uint32_t bad = 0x7fffffff;
	struct elf_symbols s;
	char err[160] = "";

	memcpy(buf + MINI_SYMOFF + sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_name), &bad, 4);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK_EQ_STR(err, "symbol 1: name offset 0x7fffffff outside string table");

	/* The last name loses its NUL: the string table now ends inside it. */
	len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	buf[len - 1] = 'X';
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "not NUL-terminated") != NULL);
}

static void test_corrupt_headers(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	uint64_t big = UINT64_MAX - 100;
	uint16_t count = 0xfff0;
	struct elf_symbols s;
	char err[160] = "";

	memcpy(buf + offsetof(Elf64_Ehdr, e_shoff), &big, 8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK(strncmp(err, "truncated section header table at 0x", 36) == 0);

	len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	memcpy(buf + offsetof(Elf64_Ehdr, e_shnum), &count, 2);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK(strncmp(err, "truncated section header table at 0x", 36) == 0);

	len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	memcpy(buf + offsetof(Elf64_Ehdr, e_phoff), &big, 8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK_EQ_STR(err, "truncated program header table at 0xffffffffffffff9b");

	len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	buf[EI_CLASS] = ELFCLASS32;
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK_EQ_STR(err, "not an ELF64 x86-64 file");
}

static void test_no_symbol_table(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_PROGBITS);
	uint64_t zero = 0;
	struct elf_symbols s;
	char err[160] = "";

	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENODATA);
	CHECK_EQ_STR(err, "no symbol table");

	len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	memcpy(buf + offsetof(Elf64_Ehdr, e_shoff), &zero, 8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENODATA);
	CHECK(strncmp(err, "no symbol table", 15) == 0);
}

/* Every prefix of the hand-built file (its tables are spread over it). */
static void test_mini_truncation(void)
{
	static uint8_t full[MINI_MAX];
	size_t len = mini_elf(full, mini_aliases, N_MINI, SHT_SYMTAB), cut;

	for (cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		struct elf_symbols s;
		char err[160] = "";

		if (!copy)
			return;
		memcpy(copy, full, cut);
		CHECK(elf_symbols_load_buffer(copy, cut, &s, err, sizeof(err)) < 0);
		CHECK(err[0] != '\0');
		free(copy);
	}
}

/* Aliases sharing one long name cost one copy of the string table, not n. */
static void test_shared_long_name(void)
{
	static const char name[] = "a_rather_long_function_name_shared_by_all";
	struct mini_sym syms[12];
	static uint8_t buf[MINI_MAX];
	size_t len, i;
	uint32_t one = 1;
	uint64_t strsz = sizeof(name) + 1;
	struct elf_symbols s;
	char err[160] = "";

	for (i = 0; i < 12; i++)
		syms[i] = (struct mini_sym){ name, 0x1000 + 16 * i, 16, STT_FUNC, STB_GLOBAL, 1 };
	len = mini_elf(buf, syms, 12, SHT_SYMTAB);
	for (i = 0; i < 12; i++)
		memcpy(buf + MINI_SYMOFF + (i + 1) * sizeof(Elf64_Sym), &one, 4);
	memcpy(buf + MINI_SHOFF + 3 * sizeof(Elf64_Shdr) + offsetof(Elf64_Shdr, sh_size), &strsz,
	       8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.n_functions, 12);
	for (i = 0; i < s.n_functions; i++) {
		CHECK_EQ_STR(s.functions[i].name, name);
		CHECK_EQ_U64(s.functions[i].value, 0x1000 + 16 * i);
	}
	elf_symbols_free(&s);
}

/* e_shnum == 0: the section count lives in section 0's sh_size. */
static void test_extended_section_count(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	uint16_t zero = 0;
	uint64_t four = 4, huge = UINT64_MAX / 8;
	struct elf_symbols s;
	char err[160] = "";

	memcpy(buf + offsetof(Elf64_Ehdr, e_shnum), &zero, 2);
	memcpy(buf + MINI_SHOFF + offsetof(Elf64_Shdr, sh_size), &four, 8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.n_functions, 4);
	elf_symbols_free(&s);
	memcpy(buf + MINI_SHOFF + offsetof(Elf64_Shdr, sh_size), &huge, 8);
	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), -ENOEXEC);
	CHECK(strncmp(err, "truncated section header table at 0x", 36) == 0);
}

/* Byte flips in the hand-built file, where nearly every byte is structure. */
static void test_mini_flip_fuzz(void)
{
	static uint8_t full[MINI_MAX];
	size_t len = mini_elf(full, mini_aliases, N_MINI, SHT_SYMTAB);
	struct hot_range all = { 0, len };
	uint64_t seed = 0x13198a2e03707344ull;
	uint8_t *copy = malloc(len);
	int i;

	for (i = 0; copy && i < 20000; i++) {
		struct elf_symbols s;
		char err[160] = "";
		int ret;

		memcpy(copy, full, len);
		flip_bytes(copy, len, &all, 1, &seed);
		ret = elf_symbols_load_buffer(copy, len, &s, err, sizeof(err));
		CHECK(ret <= 0);
		if (ret < 0)
			CHECK(err[0] != '\0');
		else
			check_invariants(&s);
		elf_symbols_free(&s);
	}
	free(copy);
}

/* ---- cases: real files ------------------------------------------------------------ */

struct nm_entry {
	char name[64];
	uint64_t value, size;
	char type;
	bool found;
};

/* Fills want[] from nm's default-version ("name" or "name@@VER") lines. */
static bool nm_lookup(const char *path, struct nm_entry *want, size_t n)
{
	char cmd[256], line[512], name[256], type;
	unsigned long long value, size;
	FILE *p;
	size_t i;

	snprintf(cmd, sizeof(cmd), "nm -D --defined-only -S %s 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return false;
	while (fgets(line, sizeof(line), p)) {
		char *at;

		if (sscanf(line, "%llx %llx %c %255s", &value, &size, &type, name) != 4)
			continue;
		at = strchr(name, '@');
		if (at && at[1] != '@')
			continue;
		if (at)
			*at = '\0';
		for (i = 0; i < n; i++) {
			if (strcmp(want[i].name, name) != 0)
				continue;
			want[i].value = value;
			want[i].size = size;
			want[i].type = type;
			want[i].found = true;
		}
	}
	return pclose(p) == 0;
}

static void test_libc_dynsym_matches_nm(void)
{
	struct nm_entry want[] = { { .name = "malloc" }, { .name = "free" },
				   { .name = "memcpy" }, { .name = "strlen" },
				   { .name = "printf" }, { .name = "qsort" } };
	const size_t n = sizeof(want) / sizeof(want[0]);
	struct elf_symbols s;
	char err[160] = "";
	size_t i;

	if (!nm_lookup(LIBC_PATH, want, n)) {
		printf("SKIP %s: nm -D failed on %s\n", __func__, LIBC_PATH);
		return;
	}
	CHECK_EQ_INT(elf_symbols_load(LIBC_PATH, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.from_symtab, 0);
	check_invariants(&s);
	for (i = 0; i < n; i++) {
		const struct elf_function *fn = find_by_value(&s, want[i].value);

		CHECK(want[i].found);
		CHECK(fn != NULL);
		if (!fn || !want[i].found)
			continue;
		CHECK_EQ_STR(fn->name, want[i].name);
		CHECK_EQ_U64(fn->size, want[i].size);
		CHECK_EQ_INT(fn->is_ifunc, want[i].type == 'i');
		CHECK_EQ_INT(fn->is_global, 1);
	}
	CHECK_EQ_INT(find_by_name(&s, "memcpy")->is_ifunc, 1);
	elf_symbols_free(&s);
}

/* ---- cases: next addresses and selected loads ----------------------------------- */

static void test_next_addresses(void)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	struct elf_symbols s;
	char err[128];

	CHECK_EQ_INT(elf_symbols_load_buffer(buf, len, &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.n_functions, 4);
	if (s.n_functions == 4) {
		CHECK_EQ_U64(s.functions[0].next, 0x1800);
		CHECK_EQ_U64(s.functions[1].next, 0x2000);
		CHECK_EQ_U64(s.functions[2].next, 0x2500);
		CHECK_EQ_U64(s.functions[3].next, UINT64_MAX);
	}
	elf_symbols_free(&s);
}

static bool keep_named(void *ctx, const char *name)
{
	return strcmp(name, ctx) == 0;
}

/* A selected load of one name: the entry a full load gives, or none. */
static void check_selected_one(const char *name, const char *want, uint64_t value, uint64_t next,
			       int is_ifunc)
{
	static uint8_t buf[MINI_MAX];
	size_t len = mini_elf(buf, mini_aliases, N_MINI, SHT_SYMTAB);
	struct elf_symbols s;
	char err[128];

	CHECK_EQ_INT(elf_symbols_load_buffer_selected(buf, len, keep_named, (void *)name, &s, err,
						      sizeof(err)), 0);
	CHECK_EQ_INT(s.n_functions, want ? 1 : 0);
	if (want && s.n_functions == 1) {
		CHECK_EQ_STR(s.functions[0].name, want);
		CHECK_EQ_U64(s.functions[0].value, value);
		CHECK_EQ_U64(s.functions[0].next, next);
		CHECK_EQ_INT(s.functions[0].is_ifunc, is_ifunc);
	}
	CHECK_EQ_INT(s.n_segments, 1);
	elf_symbols_free(&s);
}

static void test_selected_mini(void)
{
	check_selected_one("aaa", "aaa", 0x1000, 0x1800, 0);
	check_selected_one("bbb", NULL, 0, 0, 0);      /* "aaa" names its address */
	check_selected_one("zz", NULL, 0, 0, 0);
	check_selected_one("impl", "impl", 0x1800, 0x2000, 1); /* its alias "ifn" is an IFUNC */
	check_selected_one("ifn", NULL, 0, 0, 0);
	check_selected_one("x", "x", 0x2000, 0x2500, 0);
	check_selected_one("resolver", "resolver", 0x2500, UINT64_MAX, 1);
	check_selected_one("undefined", NULL, 0, 0, 0);
	check_selected_one("object", NULL, 0, 0, 0);
}

static bool keep_prefix(void *ctx, const char *name)
{
	return strncmp(name, ctx, strlen(ctx)) == 0;
}

/* Selected loads give exactly the full load's entries of the names kept. */
static void check_selected(const char *path, const char *prefix)
{
	struct elf_symbols full, sel;
	char err[160] = "";
	size_t k = 0;

	CHECK_EQ_INT(elf_symbols_load(path, &full, err, sizeof(err)), 0);
	CHECK_EQ_INT(elf_symbols_load_selected(path, keep_prefix, (void *)prefix, &sel, err,
					       sizeof(err)), 0);
	for (size_t i = 0; i < full.n_functions; i++) {
		const struct elf_function *f = &full.functions[i], *g = &sel.functions[k];

		if (!keep_prefix((void *)prefix, f->name))
			continue;
		CHECK(k < sel.n_functions);
		if (k >= sel.n_functions)
			break;
		CHECK_EQ_STR(g->name, f->name);
		CHECK_EQ_U64(g->value, f->value);
		CHECK_EQ_U64(g->size, f->size);
		CHECK_EQ_U64(g->next, f->next);
		CHECK_EQ_INT(g->is_ifunc, f->is_ifunc);
		CHECK_EQ_INT(g->is_global, f->is_global);
		k++;
	}
	CHECK_EQ_INT(sel.n_functions, k);
	CHECK_EQ_INT(sel.has_go, full.has_go);
	CHECK_EQ_INT(sel.n_segments, full.n_segments);
	elf_symbols_free(&full);
	elf_symbols_free(&sel);
}

static void test_selected_matches_full(void)
{
	check_selected(LIBC_PATH, "str");
	check_selected(LIBC_PATH, "__");
	check_selected(LIBC_PATH, "");
	check_selected(LIBC_PATH, "no_such_function_prefix");
	check_selected("/proc/self/exe", "test_"); /* .symtab, locals and aliases */
	check_selected("/proc/self/exe", "");
}

static void test_libc_segments(void)
{
	struct elf_symbols s;
	const struct elf_function *fn;
	char err[160] = "";
	bool inside = false;
	size_t i;

	CHECK_EQ_INT(elf_symbols_load(LIBC_PATH, &s, err, sizeof(err)), 0);
	fn = find_by_name(&s, "malloc");
	CHECK(fn != NULL && s.n_segments >= 2);
	for (i = 0; fn && i < s.n_segments; i++) {
		const struct elf_segment *seg = &s.segments[i];

		if ((seg->flags & PF_X) && fn->value >= seg->vaddr &&
		    fn->value + fn->size <= seg->vaddr + seg->memsz)
			inside = true;
	}
	CHECK(inside);
	elf_symbols_free(&s);
}

/* A static function of this file: found in .symtab at its runtime address. */
__attribute__((noinline)) static int elf_test_static_target(int x)
{
	return x * 3 + 1;
}

static int first_object_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uintptr_t *)data = info->dlpi_addr;
	return 1;
}

static void test_self_symtab(void)
{
	int (*volatile target)(int) = elf_test_static_target;
	const struct elf_function *fn;
	struct elf_symbols s;
	char err[160] = "";
	uintptr_t bias = 0;

	CHECK_EQ_INT(target(1), 4);
	dl_iterate_phdr(first_object_bias, &bias);
	CHECK_EQ_INT(elf_symbols_load("/proc/self/exe", &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.from_symtab, 1);
	check_invariants(&s);
	fn = find_by_name(&s, "elf_test_static_target");
	CHECK(fn != NULL);
	if (fn) {
		CHECK_EQ_U64(fn->value, (uintptr_t)target - bias);
		CHECK_EQ_INT(fn->is_global, 0);
		CHECK_EQ_INT(fn->is_ifunc, 0);
	}
	fn = find_by_name(&s, "main");
	CHECK(fn != NULL && fn->is_global);
	elf_symbols_free(&s);
}

static bool write_temp_file(char *path, const char *content)
{
	int fd = mkstemp(path);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, content, strlen(content)) == (ssize_t)strlen(content);
	close(fd);
	return ok;
}

static void test_load_errors(void)
{
	char text[] = "/tmp/test_elf_symbols.XXXXXX";
	struct elf_symbols s;
	char err[160] = "";

	CHECK_EQ_INT(elf_symbols_load("/nonexistent/libnothing.so", &s, err, sizeof(err)),
		     -ENOENT);
	CHECK_EQ_STR(err, "open: No such file or directory");
	CHECK_EQ_INT(elf_symbols_load("/proc/self/status", &s, err, sizeof(err)), -ENOEXEC);
	CHECK(err[0] != '\0');
	CHECK(write_temp_file(text, "#!/bin/sh\necho not ELF\n"));
	CHECK_EQ_INT(elf_symbols_load(text, &s, err, sizeof(err)), -ENOEXEC);
	CHECK_EQ_STR(err, "not an ELF64 x86-64 file");
	unlink(text);
	CHECK_EQ_INT(elf_symbols_load_buffer((const uint8_t *)"hello", 5, &s, err, sizeof(err)),
		     -ENOEXEC);
	CHECK_EQ_INT(elf_symbols_load_buffer(NULL, 0, &s, NULL, 0), -ENOEXEC);
	CHECK(s.functions == NULL && s.storage == NULL);
	elf_symbols_free(&s);
}

/* The buffer needs no alignment, and the result outlives it. */
static void test_unaligned_buffer_and_copy(void)
{
	struct file_copy f;
	struct elf_symbols a, b;
	uint8_t *odd;
	char err[160] = "";

	CHECK(read_file(LIBC_PATH, &f));
	if (!f.data)
		return;
	odd = malloc(f.len + 1);
	CHECK(odd != NULL);
	if (!odd)
		goto out_free_file;
	memcpy(odd + 1, f.data, f.len);
	CHECK_EQ_INT(elf_symbols_load_buffer(f.data, f.len, &a, err, sizeof(err)), 0);
	CHECK_EQ_INT(elf_symbols_load_buffer(odd + 1, f.len, &b, err, sizeof(err)), 0);
	memset(odd, 0xa5, f.len + 1);
	free(odd);
	CHECK_EQ_INT(a.n_functions, b.n_functions);
	if (a.n_functions == b.n_functions && a.n_functions > 0) {
		size_t mid = a.n_functions / 2;

		CHECK_EQ_STR(a.functions[mid].name, b.functions[mid].name);
		CHECK_EQ_U64(a.functions[7].value, b.functions[7].value);
	}
	elf_symbols_free(&a);
	elf_symbols_free(&b);
out_free_file:
	free(f.data);
}

/* Loads data[0..len) from an exact-size copy, so that ASan sees any overread. */
static void load_prefix(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	struct elf_symbols s;
	char err[160] = "";
	int ret;

	if (!copy)
		return;
	memcpy(copy, data, len);
	ret = elf_symbols_load_buffer(copy, len, &s, err, sizeof(err));
	free(copy);
	CHECK(ret <= 0);
	if (ret < 0)
		CHECK(err[0] != '\0');
	else
		check_invariants(&s);
	elf_symbols_free(&s);
}

static void test_truncation_fuzz(void)
{
	struct file_copy f;
	size_t len, cut;

	CHECK(read_file(LIBC_PATH, &f));
	if (!f.data)
		return;
	for (len = 0; len < 65536 && len < f.len; len += 7)
		load_prefix(f.data, len);
	for (cut = 1; cut <= 64 && cut <= f.len; cut++)
		load_prefix(f.data, f.len - cut);
	free(f.data);
}

static size_t hot_ranges(const struct file_copy *f, struct hot_range *r)
{
	Elf64_Ehdr eh;
	size_t n = 0, i;

	memcpy(&eh, f->data, sizeof(eh));
	r[n++] = (struct hot_range){ 0, sizeof(eh) };
	r[n++] = (struct hot_range){ eh.e_phoff, (size_t)eh.e_phnum * eh.e_phentsize };
	r[n++] = (struct hot_range){ eh.e_shoff, (size_t)eh.e_shnum * eh.e_shentsize };
	for (i = 0; i < eh.e_shnum && n < 8; i++) {
		Elf64_Shdr sh;

		memcpy(&sh, f->data + eh.e_shoff + i * eh.e_shentsize, sizeof(sh));
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
			r[n++] = (struct hot_range){ sh.sh_offset, sh.sh_size };
	}
	return n;
}

static void test_byte_flip_fuzz(void)
{
	uint64_t seed = 0x243f6a8885a308d3ull;
	struct hot_range r[8];
	struct file_copy f;
	uint8_t *copy;
	size_t nr;
	int i, ok = 0;

	CHECK(read_file("/proc/self/exe", &f));
	if (!f.data)
		return;
	nr = hot_ranges(&f, r);
	copy = malloc(f.len);
	for (i = 0; copy && i < 1000; i++) {
		struct elf_symbols s;
		char err[160] = "";
		int ret;

		memcpy(copy, f.data, f.len);
		flip_bytes(copy, f.len, r, nr, &seed);
		ret = elf_symbols_load_buffer(copy, f.len, &s, err, sizeof(err));
		CHECK(ret <= 0);
		if (ret < 0)
			CHECK(err[0] != '\0');
		else
			check_invariants(&s);
		ok += ret == 0;
		elf_symbols_free(&s);
	}
	printf("byte flips: %d of 1000 mutated files still loaded\n", ok);
	free(copy);
	free(f.data);
}

int main(void)
{
	RUN_TEST(test_fold_and_filter);
	RUN_TEST(test_dynsym_only);
	RUN_TEST(test_corrupt_section_fields);
	RUN_TEST(test_corrupt_name_offsets);
	RUN_TEST(test_corrupt_headers);
	RUN_TEST(test_no_symbol_table);
	RUN_TEST(test_mini_truncation);
	RUN_TEST(test_shared_long_name);
	RUN_TEST(test_extended_section_count);
	RUN_TEST(test_mini_flip_fuzz);
	RUN_TEST(test_libc_dynsym_matches_nm);
	RUN_TEST(test_libc_segments);
	RUN_TEST(test_next_addresses);
	RUN_TEST(test_selected_mini);
	RUN_TEST(test_selected_matches_full);
	RUN_TEST(test_self_symtab);
	RUN_TEST(test_load_errors);
	RUN_TEST(test_unaligned_buffer_and_copy);
	RUN_TEST(test_truncation_fuzz);
	RUN_TEST(test_byte_flip_fuzz);
	return unit_summary();
}
