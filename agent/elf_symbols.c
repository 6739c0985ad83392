// SPDX-License-Identifier: MIT
/*
 * Function symbols of an ELF64 file of the machine we run on (x86-64 or
 * aarch64), parsed with plain <elf.h> (see agent/elf_symbols.h). Runs inside
 * the profiled process on files that may be truncated or hostile: every
 * offset, size, count and index is checked against the buffer with
 * overflow-safe arithmetic before it is used, structures are memcpy'd out
 * (the buffer need not be aligned), and nothing is kept pointing into the
 * buffer. No libelf, no logging, no global state; never crashes.
 */
#include <assert.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/elf_symbols.h"

_Static_assert(sizeof(struct elf_function) % _Alignof(struct elf_segment) == 0, "storage layout");

/* The input and where to write a reason. */
struct elf_view {
	const uint8_t *buf;
	size_t len;
	char *err;
	size_t errlen;
};

/* The section header table, checked to lie inside the buffer. */
struct elf_sections {
	uint64_t off;
	uint64_t num;
	uint64_t entsize;
};

/* The chosen symbol table and its string table, both inside the buffer. */
struct elf_symtab {
	uint64_t off;
	uint64_t count;
	uint64_t entsize;
	const char *strtab;
	uint64_t strsz;
	uint32_t index;
};

/* The modules the agent instruments are of the machine it runs on. */
#if defined(__x86_64__)
#define ELF_OUR_MACHINE EM_X86_64
#define ELF_NOT_OURS "not an ELF64 x86-64 file"
#elif defined(__aarch64__)
#define ELF_OUR_MACHINE EM_AARCH64
#define ELF_NOT_OURS "not an ELF64 aarch64 file"
#endif

/* A function symbol before folding; name points into the buffer. */
struct elf_cand {
	uint64_t value;
	uint64_t size;
	const char *name;
	size_t name_len;
	unsigned char is_ifunc;
	unsigned char is_global;
	unsigned char is_variant_pcs;
};

__attribute__((format(printf, 3, 4)))
static int elf_fail(const struct elf_view *v, int code, const char *fmt, ...)
{
	va_list ap;

	if (v->err && v->errlen) {
		va_start(ap, fmt);
		vsnprintf(v->err, v->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* [off, off + size) lies inside a buffer of len bytes; no overflow possible. */
static bool elf_range_ok(size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off;
}

static bool elf_table_ok(size_t len, uint64_t off, uint64_t count, uint64_t entsize)
{
	uint64_t bytes;

	if (__builtin_mul_overflow(count, entsize, &bytes))
		return false;
	return elf_range_ok(len, off, bytes);
}

static int elf_check_header(const struct elf_view *v, Elf64_Ehdr *eh)
{
	const uint8_t *id = v->buf;

	if (v->len < EI_NIDENT || memcmp(id, ELFMAG, SELFMAG) != 0 ||
	    id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB)
		return elf_fail(v, -ENOEXEC, ELF_NOT_OURS);
	if (v->len < sizeof(*eh))
		return elf_fail(v, -ENOEXEC, "truncated ELF header (%zu bytes)", v->len);
	memcpy(eh, v->buf, sizeof(*eh));
	if (eh->e_machine != ELF_OUR_MACHINE)
		return elf_fail(v, -ENOEXEC, ELF_NOT_OURS);
	if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN)
		return elf_fail(v, -ENOEXEC, "not an executable or shared object (e_type %u)",
				eh->e_type);
	return 0;
}

/* Reads section header i (i < st->num, checked by elf_section_table). */
static void elf_shdr(const struct elf_view *v, const struct elf_sections *st, uint64_t i,
		     Elf64_Shdr *sh)
{
	assert(i < st->num);
	memcpy(sh, v->buf + st->off + i * st->entsize, sizeof(*sh));
}

static int elf_section_table(const struct elf_view *v, const Elf64_Ehdr *eh,
			     struct elf_sections *st)
{
	Elf64_Shdr sh0;

	st->off = eh->e_shoff;
	st->num = eh->e_shnum;
	st->entsize = eh->e_shentsize;
	if (st->off == 0)
		return elf_fail(v, -ENODATA, "no symbol table (no section headers)");
	if (st->entsize < sizeof(Elf64_Shdr))
		return elf_fail(v, -ENOEXEC, "bad section header size %u", eh->e_shentsize);
	if (st->num == 0) {
		/* SHN_LORESERVE sections or more: the count is in section 0. */
		if (!elf_range_ok(v->len, st->off, sizeof(sh0)))
			return elf_fail(v, -ENOEXEC, "truncated section header table at 0x%llx",
					(unsigned long long)st->off);
		memcpy(&sh0, v->buf + st->off, sizeof(sh0));
		st->num = sh0.sh_size;
	}
	if (!elf_table_ok(v->len, st->off, st->num, st->entsize))
		return elf_fail(v, -ENOEXEC,
				"truncated section header table at 0x%llx (%llu x %llu bytes, "
				"file %zu)",
				(unsigned long long)st->off, (unsigned long long)st->num,
				(unsigned long long)st->entsize, v->len);
	return 0;
}

/* Index of the first section of type, or -1. */
static int64_t elf_find_section(const struct elf_view *v, const struct elf_sections *st,
				uint32_t type)
{
	Elf64_Shdr sh;
	uint64_t i;

	for (i = 1; i < st->num; i++) {
		elf_shdr(v, st, i, &sh);
		if (sh.sh_type == type)
			return (int64_t)i;
	}
	return -1;
}

static int elf_symtab_open(const struct elf_view *v, const struct elf_sections *st,
			   uint64_t index, struct elf_symtab *t)
{
	Elf64_Shdr sh, str;

	elf_shdr(v, st, index, &sh);
	t->index = (uint32_t)index;
	if (sh.sh_entsize < sizeof(Elf64_Sym))
		return elf_fail(v, -ENOEXEC, "bad symbol entry size %llu in section %llu",
				(unsigned long long)sh.sh_entsize, (unsigned long long)index);
	if (!elf_range_ok(v->len, sh.sh_offset, sh.sh_size))
		return elf_fail(v, -ENOEXEC, "truncated symbol table at 0x%llx (0x%llx bytes)",
				(unsigned long long)sh.sh_offset, (unsigned long long)sh.sh_size);
	if (sh.sh_link == 0 || sh.sh_link >= st->num)
		return elf_fail(v, -ENOEXEC, "bad string table index %u for section %llu",
				sh.sh_link, (unsigned long long)index);
	elf_shdr(v, st, sh.sh_link, &str);
	if (str.sh_type != SHT_STRTAB)
		return elf_fail(v, -ENOEXEC, "section %u is not a string table", sh.sh_link);
	if (!elf_range_ok(v->len, str.sh_offset, str.sh_size))
		return elf_fail(v, -ENOEXEC, "truncated string table at 0x%llx (0x%llx bytes)",
				(unsigned long long)str.sh_offset, (unsigned long long)str.sh_size);
	t->off = sh.sh_offset;
	t->entsize = sh.sh_entsize;
	t->count = sh.sh_size / sh.sh_entsize;
	t->strtab = (const char *)v->buf + str.sh_offset;
	t->strsz = str.sh_size;
	return 0;
}

/* Picks .symtab, else .dynsym; *from_symtab tells which. */
static int elf_symtab_choose(const struct elf_view *v, const struct elf_sections *st,
			     struct elf_symtab *t, int *from_symtab)
{
	int64_t index = elf_find_section(v, st, SHT_SYMTAB);

	*from_symtab = index >= 0;
	if (index < 0)
		index = elf_find_section(v, st, SHT_DYNSYM);
	if (index < 0)
		return elf_fail(v, -ENODATA, "no symbol table");
	return elf_symtab_open(v, st, (uint64_t)index, t);
}

static int elf_symbol_name(const struct elf_view *v, const struct elf_symtab *t, uint64_t i,
			   uint32_t st_name, struct elf_cand *c)
{
	const char *nul;

	if (st_name >= t->strsz)
		return elf_fail(v, -ENOEXEC, "symbol %llu: name offset 0x%x outside string table",
				(unsigned long long)i, st_name);
	nul = memchr(t->strtab + st_name, '\0', t->strsz - st_name);
	if (!nul)
		return elf_fail(v, -ENOEXEC, "symbol %llu: name at 0x%x not NUL-terminated",
				(unsigned long long)i, st_name);
	c->name = t->strtab + st_name;
	c->name_len = (size_t)(nul - c->name);
	return 0;
}

static bool elf_sym_wanted(const Elf64_Sym *sym)
{
	unsigned char type = ELF64_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF &&
	       sym->st_size >= 1 && sym->st_name != 0;
}

/* Copies the wanted symbols into a malloc'ed array (*out, *n). */
static int elf_collect(const struct elf_view *v, const struct elf_symtab *t,
		       struct elf_cand **out, size_t *n)
{
	struct elf_cand *c = calloc(t->count ? t->count : 1, sizeof(*c));
	uint64_t i;
	int ret;

	*n = 0;
	if (!c)
		return elf_fail(v, -ENOMEM, "out of memory for %llu symbols",
				(unsigned long long)t->count);
	for (i = 0; i < t->count; i++) {
		Elf64_Sym sym;
		unsigned char bind;

		memcpy(&sym, v->buf + t->off + i * t->entsize, sizeof(sym));
		if (!elf_sym_wanted(&sym))
			continue;
		ret = elf_symbol_name(v, t, i, sym.st_name, &c[*n]);
		if (ret < 0) {
			free(c);
			return ret;
		}
		if (c[*n].name_len == 0)
			continue;
		bind = ELF64_ST_BIND(sym.st_info);
		c[*n].value = sym.st_value;
		c[*n].size = sym.st_size;
		c[*n].is_ifunc = ELF64_ST_TYPE(sym.st_info) == STT_GNU_IFUNC;
		c[*n].is_global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
		c[*n].is_variant_pcs = ELF_OUR_MACHINE == EM_AARCH64 &&
				       (sym.st_other & STO_AARCH64_VARIANT_PCS);
		(*n)++;
	}
	*out = c;
	return 0;
}

/* Address order; at one address the alias to keep comes first. */
static int elf_cand_cmp(const void *pa, const void *pb)
{
	const struct elf_cand *a = pa, *b = pb;

	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->is_global != b->is_global)
		return a->is_global ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Sorts and keeps one entry per address; an IFUNC alias marks the address. */
static size_t elf_fold(struct elf_cand *c, size_t n)
{
	size_t i, kept = 0;

	if (n == 0)
		return 0;
	qsort(c, n, sizeof(*c), elf_cand_cmp);
	for (i = 0; i < n; i++) {
		if (kept > 0 && c[kept - 1].value == c[i].value) {
			c[kept - 1].is_ifunc |= c[i].is_ifunc;
			c[kept - 1].is_variant_pcs |= c[i].is_variant_pcs;
			continue;
		}
		c[kept++] = c[i];
	}
	return kept;
}

/* Checks the program header table; *n_load gets the number of PT_LOAD entries. */
static int elf_check_phdrs(const struct elf_view *v, const Elf64_Ehdr *eh, size_t *n_load)
{
	Elf64_Phdr ph;
	uint64_t i;

	*n_load = 0;
	if (eh->e_phnum == 0)
		return 0;
	if (eh->e_phnum == PN_XNUM)
		return elf_fail(v, -ENOEXEC, "extended program header count not supported");
	if (eh->e_phentsize < sizeof(Elf64_Phdr))
		return elf_fail(v, -ENOEXEC, "bad program header size %u", eh->e_phentsize);
	if (!elf_table_ok(v->len, eh->e_phoff, eh->e_phnum, eh->e_phentsize))
		return elf_fail(v, -ENOEXEC, "truncated program header table at 0x%llx",
				(unsigned long long)eh->e_phoff);
	for (i = 0; i < eh->e_phnum; i++) {
		memcpy(&ph, v->buf + eh->e_phoff + i * eh->e_phentsize, sizeof(ph));
		*n_load += ph.p_type == PT_LOAD;
	}
	return 0;
}

static void elf_fill_segments(const struct elf_view *v, const Elf64_Ehdr *eh,
			      struct elf_segment *seg)
{
	Elf64_Phdr ph;
	uint64_t i;

	for (i = 0; i < eh->e_phnum; i++) {
		memcpy(&ph, v->buf + eh->e_phoff + i * eh->e_phentsize, sizeof(ph));
		if (ph.p_type != PT_LOAD)
			continue;
		seg->vaddr = ph.p_vaddr;
		seg->memsz = ph.p_memsz;
		seg->offset = ph.p_offset;
		seg->filesz = ph.p_filesz;
		seg->flags = ph.p_flags;
		seg++;
	}
}

/*
 * Bytes needed for the names: one copy each, or the whole string table when
 * that is smaller (aliases sharing a long name cannot blow memory up).
 */
static uint64_t elf_names_size(const struct elf_cand *c, size_t n, const struct elf_symtab *t,
			       bool *whole_table)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < n && total <= t->strsz; i++)
		total += c[i].name_len + 1;
	*whole_table = total > t->strsz;
	return *whole_table ? t->strsz : total;
}

static void elf_fill_functions(struct elf_symbols *out, const struct elf_cand *c,
			       const struct elf_symtab *t, char *names, bool whole_table)
{
	size_t i;

	if (whole_table)
		memcpy(names, t->strtab, t->strsz);
	for (i = 0; i < out->n_functions; i++) {
		struct elf_function *fn = &out->functions[i];

		if (whole_table) {
			fn->name = names + (c[i].name - t->strtab);
		} else {
			memcpy(names, c[i].name, c[i].name_len + 1);
			fn->name = names;
			names += c[i].name_len + 1;
		}
		fn->value = c[i].value;
		fn->size = c[i].size;
		fn->is_ifunc = c[i].is_ifunc;
		fn->is_global = c[i].is_global;
		fn->is_variant_pcs = c[i].is_variant_pcs;
	}
}

/* Lays functions, segments and names out in one allocation (out->storage). */
static int elf_build(const struct elf_view *v, const Elf64_Ehdr *eh, const struct elf_cand *c,
		     size_t n, size_t n_seg, const struct elf_symtab *t, struct elf_symbols *out)
{
	uint64_t fn_bytes = (uint64_t)n * sizeof(struct elf_function);
	uint64_t seg_bytes = (uint64_t)n_seg * sizeof(struct elf_segment);
	bool whole_table;
	uint64_t name_bytes = elf_names_size(c, n, t, &whole_table);
	uint8_t *mem;

	/* Each term is bounded by the buffer length: no overflow. */
	mem = malloc(fn_bytes + seg_bytes + name_bytes + 1);
	if (!mem)
		return elf_fail(v, -ENOMEM, "out of memory for %zu functions", n);
	out->storage = mem;
	out->functions = (struct elf_function *)mem;
	out->n_functions = n;
	out->segments = (struct elf_segment *)(mem + fn_bytes);
	out->n_segments = n_seg;
	elf_fill_segments(v, eh, out->segments);
	elf_fill_functions(out, c, t, (char *)mem + fn_bytes + seg_bytes, whole_table);
	return 0;
}

/* 1 when a section is named .go.buildinfo or .gopclntab (Go's linker writes them). */
static int elf_has_go_section(const struct elf_view *v, const Elf64_Ehdr *eh,
			      const struct elf_sections *st)
{
	static const char *const names[] = { ".go.buildinfo", ".gopclntab" };
	Elf64_Shdr names_sh, sh;

	if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= st->num)
		return 0;
	elf_shdr(v, st, eh->e_shstrndx, &names_sh);
	if (!elf_range_ok(v->len, names_sh.sh_offset, names_sh.sh_size))
		return 0;
	for (uint64_t i = 1; i < st->num; i++) {
		elf_shdr(v, st, i, &sh);
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			size_t len = strlen(names[k]) + 1;

			if (sh.sh_name < names_sh.sh_size && names_sh.sh_size - sh.sh_name >= len &&
			    memcmp(v->buf + names_sh.sh_offset + sh.sh_name, names[k], len) == 0)
				return 1;
		}
	}
	return 0;
}

/* Symbol i's defined name (NUL-terminated inside the table), or NULL. */
static const char *elf_defined_name(const struct elf_view *v, const struct elf_symtab *t,
				    uint64_t i, Elf64_Sym *sym)
{
	memcpy(sym, v->buf + t->off + i * t->entsize, sizeof(*sym));
	if (sym->st_name == 0 || sym->st_name >= t->strsz || sym->st_shndx == SHN_UNDEF ||
	    !memchr(t->strtab + sym->st_name, '\0', t->strsz - sym->st_name))
		return NULL;
	return t->strtab + sym->st_name;
}

/*
 * Go's runtime symbols: runtime.buildVersion marks Go code, runtime.text and
 * runtime.etext (size 0, so elf_collect ignores them) bound all of it.
 */
static void elf_scan_go_symbols(const struct elf_view *v, const struct elf_symtab *t,
				struct elf_symbols *out)
{
	uint64_t lo = 0, hi = 0;

	for (uint64_t i = 0; i < t->count; i++) {
		Elf64_Sym sym;
		const char *name = elf_defined_name(v, t, i, &sym);

		if (!name || strncmp(name, "runtime.", 8) != 0)
			continue;
		if (strcmp(name + 8, "buildVersion") == 0)
			out->has_go = 1;
		else if (strcmp(name + 8, "text") == 0)
			lo = sym.st_value;
		else if (strcmp(name + 8, "etext") == 0)
			hi = sym.st_value;
	}
	if (lo && hi > lo) {
		out->has_go = 1;
		out->go_text_lo = lo;
		out->go_text_hi = hi;
	}
}

/* The 4-byte value at ELF address vaddr, through the PT_LOAD segments; 0 when not in the file. */
static uint32_t elf_read_u32(const struct elf_view *v, const struct elf_symbols *s, uint64_t vaddr)
{
	uint32_t val;

	for (size_t i = 0; i < s->n_segments; i++) {
		const struct elf_segment *g = &s->segments[i];

		if (vaddr < g->vaddr || vaddr - g->vaddr > g->filesz ||
		    g->filesz - (vaddr - g->vaddr) < sizeof(val) ||
		    !elf_range_ok(v->len, g->offset + (vaddr - g->vaddr), sizeof(val)))
			continue;
		memcpy(&val, v->buf + g->offset + (vaddr - g->vaddr), sizeof(val));
		return val;
	}
	return 0;
}

/*
 * V8 (its embedded builtins' range) and HotSpot: see struct elf_symbols.
 * After elf_build (the segments are needed to read the blob's size).
 */
static void elf_scan_runtime_symbols(const struct elf_view *v, const struct elf_symtab *t,
				     struct elf_symbols *out)
{
	uint64_t blob = 0, blob_size_at = 0;

	for (uint64_t i = 0; i < t->count; i++) {
		Elf64_Sym sym;
		const char *name = elf_defined_name(v, t, i, &sym);

		if (!name)
			continue;
		if (strncmp(name, "_ZN2v88internal", 15) == 0)
			out->has_v8 = 1;
		else if (strcmp(name, "v8_Default_embedded_blob_code_") == 0)
			blob = sym.st_value;
		else if (strcmp(name, "v8_Default_embedded_blob_code_size_") == 0)
			blob_size_at = sym.st_value;
		else if (strcmp(name, "gHotSpotVMStructs") == 0)
			out->has_hotspot = 1;
	}
	if (blob && blob_size_at) {
		out->has_v8 = 1;
		out->v8_blob_lo = blob;
		out->v8_blob_hi = blob + elf_read_u32(v, out, blob_size_at);
	}
}

int elf_symbols_is_go(const struct elf_symbols *s, uint64_t value, uint64_t size)
{
	if (!s->has_go)
		return 0;
	if (!s->go_text_hi)
		return 1;
	return value < s->go_text_hi && value + size > s->go_text_lo;
}

/* Checks the headers and finds the symbol table to read. */
static int elf_parse_tables(const struct elf_view *v, Elf64_Ehdr *eh, size_t *n_seg,
			    struct elf_symtab *t, int *from_symtab, int *go_section)
{
	struct elf_sections st;
	int ret;

	ret = elf_check_header(v, eh);
	if (ret < 0)
		return ret;
	ret = elf_check_phdrs(v, eh, n_seg);
	if (ret < 0)
		return ret;
	ret = elf_section_table(v, eh, &st);
	if (ret < 0)
		return ret;
	*go_section = elf_has_go_section(v, eh, &st);
	return elf_symtab_choose(v, &st, t, from_symtab);
}

int elf_symbols_load_buffer(const uint8_t *buf, size_t len, struct elf_symbols *out, char *err,
			    size_t errlen)
{
	struct elf_view v = { .buf = buf, .len = buf ? len : 0, .err = err, .errlen = errlen };
	struct elf_symtab t = { 0 };
	struct elf_cand *c = NULL;
	size_t n = 0, n_seg = 0;
	int from_symtab = 0, go_section = 0;
	Elf64_Ehdr eh;
	int ret;

	memset(out, 0, sizeof(*out));
	if (err && errlen)
		err[0] = '\0';
	ret = elf_parse_tables(&v, &eh, &n_seg, &t, &from_symtab, &go_section);
	if (ret < 0)
		return ret;
	ret = elf_collect(&v, &t, &c, &n);
	if (ret < 0)
		return ret;
	ret = elf_build(&v, &eh, c, elf_fold(c, n), n_seg, &t, out);
	free(c);
	if (ret < 0)
		return ret;
	out->from_symtab = from_symtab;
	out->has_go = go_section;
	elf_scan_go_symbols(&v, &t, out);
	elf_scan_runtime_symbols(&v, &t, out);
	return 0;
}

int elf_symbols_load(const char *path, struct elf_symbols *out, char *err, size_t errlen)
{
	struct elf_view v = { .err = err, .errlen = errlen };
	struct stat sb;
	void *map;
	int fd, ret;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return elf_fail(&v, -errno, "open: %m");
	if (fstat(fd, &sb) < 0) {
		ret = elf_fail(&v, -errno, "fstat: %m");
		goto err_close;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size <= 0) {
		ret = elf_fail(&v, -ENOEXEC,
			       ELF_NOT_OURS " (not a regular file or empty)");
		goto err_close;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		ret = elf_fail(&v, -errno, "mmap %lld bytes: %m", (long long)sb.st_size);
		goto err_close;
	}
	close(fd);
	ret = elf_symbols_load_buffer(map, (size_t)sb.st_size, out, err, errlen);
	munmap(map, (size_t)sb.st_size);
	return ret;

err_close:
	close(fd);
	return ret;
}

void elf_symbols_free(struct elf_symbols *s)
{
	if (!s)
		return;
	free(s->storage);
	memset(s, 0, sizeof(*s));
}
