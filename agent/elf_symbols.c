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
	bool nul_ended; /* the string table's last byte is NUL: every name in it ends inside */
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
	uint64_t next;   /* selected loads: the lowest function address above value */
	uint64_t index;  /* in the symbol table */
	const char *name;
	size_t name_len;
	unsigned char is_ifunc;
	unsigned char is_global;
	unsigned char is_variant_pcs;
	unsigned char beaten; /* an alias the caller did not keep names the address */
};

/* Which functions a load keeps: all (keep NULL), or those keep() accepts. */
struct elf_pick {
	elf_symbols_keep_fn keep;
	void *ctx;
};

/* What marks the module's runtime, from any defined symbol (see struct elf_symbols). */
struct elf_markers {
	int go, v8, hotspot;
	uint64_t go_lo, go_hi;
	uint64_t v8_blob, v8_blob_size_at;
	uint64_t builtins_lo, builtins_hi;
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
	t->nul_ended = t->strsz > 0 && t->strtab[t->strsz - 1] == '\0';
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

/* Symbol i's name, checked to lie in the string table and end there. */
static int elf_symbol_name(const struct elf_view *v, const struct elf_symtab *t, uint64_t i,
			   uint32_t st_name, const char **name)
{
	if (st_name >= t->strsz)
		return elf_fail(v, -ENOEXEC, "symbol %llu: name offset 0x%x outside string table",
				(unsigned long long)i, st_name);
	if (!t->nul_ended && !memchr(t->strtab + st_name, '\0', t->strsz - st_name))
		return elf_fail(v, -ENOEXEC, "symbol %llu: name at 0x%x not NUL-terminated",
				(unsigned long long)i, st_name);
	*name = t->strtab + st_name;
	return 0;
}

static bool elf_sym_wanted(const Elf64_Sym *sym)
{
	unsigned char type = ELF64_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF &&
	       sym->st_size >= 1 && sym->st_name != 0;
}

static void elf_sym_read(const struct elf_view *v, const struct elf_symtab *t, uint64_t i,
			 Elf64_Sym *sym)
{
	memcpy(sym, v->buf + t->off + i * t->entsize, sizeof(*sym));
}

/*
 * Go's runtime symbols (runtime.buildVersion marks Go code, runtime.text and
 * runtime.etext, size 0, bound all of it), V8's (v8::internal, its embedded
 * builtins' blob and Builtins_ functions) and HotSpot's. Checked for every
 * defined symbol; the first byte sorts almost all out.
 */
static void elf_note_marker(struct elf_markers *m, const char *name, const Elf64_Sym *sym)
{
	if (name[0] == 'r' && strncmp(name, "runtime.", 8) == 0) {
		if (strcmp(name + 8, "buildVersion") == 0)
			m->go = 1;
		else if (strcmp(name + 8, "text") == 0)
			m->go_lo = sym->st_value;
		else if (strcmp(name + 8, "etext") == 0)
			m->go_hi = sym->st_value;
	} else if (name[0] == '_' && strncmp(name, "_ZN2v88internal", 15) == 0) {
		m->v8 = 1;
	} else if (name[0] == 'v' && strcmp(name, "v8_Default_embedded_blob_code_") == 0) {
		m->v8_blob = sym->st_value;
	} else if (name[0] == 'v' && strcmp(name, "v8_Default_embedded_blob_code_size_") == 0) {
		m->v8_blob_size_at = sym->st_value;
	} else if (name[0] == 'g' && strcmp(name, "gHotSpotVMStructs") == 0) {
		m->hotspot = 1;
	} else if (name[0] == 'B' && strncmp(name, "Builtins_", 9) == 0 && elf_sym_wanted(sym)) {
		if (!m->builtins_hi || sym->st_value < m->builtins_lo)
			m->builtins_lo = sym->st_value;
		if (sym->st_value + sym->st_size > m->builtins_hi)
			m->builtins_hi = sym->st_value + sym->st_size;
	}
}

static int elf_cand_push(const struct elf_view *v, struct elf_cand **c, size_t *n, size_t *cap)
{
	struct elf_cand *grown;

	if (*n < *cap)
		return 0;
	*cap = *cap ? *cap * 2 : 16;
	grown = realloc(*c, *cap * sizeof(**c));
	if (!grown)
		return elf_fail(v, -ENOMEM, "out of memory for %zu symbols", *cap);
	*c = grown;
	return 0;
}

static void elf_cand_fill(struct elf_cand *c, uint64_t i, const Elf64_Sym *sym, const char *name)
{
	unsigned char bind = ELF64_ST_BIND(sym->st_info);

	c->value = sym->st_value;
	c->size = sym->st_size;
	c->next = UINT64_MAX;
	c->index = i;
	c->name = name;
	c->name_len = strlen(name);
	c->is_ifunc = ELF64_ST_TYPE(sym->st_info) == STT_GNU_IFUNC;
	c->is_global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
	c->is_variant_pcs = ELF_OUR_MACHINE == EM_AARCH64 && (sym->st_other & STO_AARCH64_VARIANT_PCS);
	c->beaten = 0;
}

/*
 * One pass over the table: the functions pick keeps into a malloc'ed array
 * (*out, *n), and the markers of every defined symbol. A function's name
 * that is not in the string table is an error, kept or not.
 */
static int elf_collect(const struct elf_view *v, const struct elf_symtab *t,
		       const struct elf_pick *pick, struct elf_markers *m, struct elf_cand **out,
		       size_t *n)
{
	size_t cap = pick->keep ? 0 : (size_t)(t->count ? t->count : 1);
	struct elf_cand *c = cap ? malloc(cap * sizeof(*c)) : NULL;

	*n = 0;
	if (cap && !c)
		return elf_fail(v, -ENOMEM, "out of memory for %llu symbols",
				(unsigned long long)t->count);
	for (uint64_t i = 0; i < t->count; i++) {
		const char *name = NULL;
		Elf64_Sym sym;
		bool wanted;

		elf_sym_read(v, t, i, &sym);
		if (sym.st_name == 0 || sym.st_shndx == SHN_UNDEF)
			continue;
		wanted = elf_sym_wanted(&sym);
		if (elf_symbol_name(wanted ? v : &(struct elf_view){ 0 }, t, i, sym.st_name,
				    &name)) {
			if (!wanted)
				continue; /* not a function: its bad name is no business of ours */
			free(c);
			return -ENOEXEC;
		}
		elf_note_marker(m, name, &sym);
		if (!wanted || name[0] == '\0' || (pick->keep && !pick->keep(pick->ctx, name)))
			continue;
		if (elf_cand_push(v, &c, n, &cap)) {
			free(c);
			return -ENOMEM;
		}
		elf_cand_fill(&c[(*n)++], i, &sym, name);
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

/* The first of c[0..n) (sorted) whose value is at least value. */
static size_t elf_cand_lower(const struct elf_cand *c, size_t n, uint64_t value)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c[mid].value < value)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Symbol i, a function not kept or kept, at the address of group c[0..]. */
static void elf_cand_alias(struct elf_cand *group, size_t n_group, uint64_t i,
			   const Elf64_Sym *sym, const struct elf_symtab *t)
{
	struct elf_cand alias;

	for (size_t k = 0; k < n_group; k++)
		if (group[k].index == i)
			return; /* kept itself */
	elf_cand_fill(&alias, i, sym, t->strtab + sym->st_name);
	group->is_ifunc |= alias.is_ifunc;
	group->is_variant_pcs |= alias.is_variant_pcs;
	if (elf_cand_cmp(&alias, group) < 0)
		group->beaten = 1;
}

/*
 * A selected load kept some functions only; what a full load would know of
 * them comes from all the others, in a second pass (names checked by the
 * first): an alias that wins the address names it (it is then not the
 * caller's), every alias adds its IFUNC and variant-PCS marks, and the
 * lowest function address above a kept one is its next.
 */
static void elf_resolve_kept(const struct elf_view *v, const struct elf_symtab *t,
			     struct elf_cand *c, size_t n)
{
	if (n == 0)
		return;
	qsort(c, n, sizeof(*c), elf_cand_cmp);
	for (uint64_t i = 0; i < t->count; i++) {
		Elf64_Sym sym;
		size_t at, end;

		elf_sym_read(v, t, i, &sym);
		if (!elf_sym_wanted(&sym) || t->strtab[sym.st_name] == '\0')
			continue;
		at = elf_cand_lower(c, n, sym.st_value);
		for (end = at; end < n && c[end].value == sym.st_value; end++)
			;
		if (end > at)
			elf_cand_alias(&c[at], end - at, i, &sym, t);
		if (at > 0 && c[at - 1].next > sym.st_value)
			c[at - 1].next = sym.st_value;
	}
}

/*
 * Sorted, one entry per address (the first of its aliases; an IFUNC alias
 * marks it), none whose address an alias not kept names; each one's next.
 */
static size_t elf_fold(struct elf_cand *c, size_t n, bool selected)
{
	size_t i, kept = 0;

	if (n == 0)
		return 0;
	if (!selected) /* else elf_resolve_kept sorted them */
		qsort(c, n, sizeof(*c), elf_cand_cmp);
	for (i = 0; i < n; i++) {
		if (kept > 0 && c[kept - 1].value == c[i].value) {
			c[kept - 1].is_ifunc |= c[i].is_ifunc;
			c[kept - 1].is_variant_pcs |= c[i].is_variant_pcs;
			if (c[i].next < c[kept - 1].next)
				c[kept - 1].next = c[i].next;
			continue;
		}
		if (kept > 0 && c[kept - 1].beaten)
			kept--;
		c[kept++] = c[i];
	}
	if (kept > 0 && c[kept - 1].beaten)
		kept--;
	for (i = 0; !selected && i < kept; i++)
		c[i].next = i + 1 < kept ? c[i + 1].value : UINT64_MAX;
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
		fn->next = c[i].next;
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

/* The markers into out, after elf_build (the blob's size is read through the segments). */
static void elf_apply_markers(const struct elf_view *v, const struct elf_markers *m,
			      int go_section, struct elf_symbols *out)
{
	out->has_go = go_section || m->go;
	if (m->go_lo && m->go_hi > m->go_lo) {
		out->has_go = 1;
		out->go_text_lo = m->go_lo;
		out->go_text_hi = m->go_hi;
	}
	out->has_v8 = m->v8;
	out->has_hotspot = m->hotspot;
	if (m->v8_blob && m->v8_blob_size_at) {
		out->has_v8 = 1;
		out->v8_blob_lo = m->v8_blob;
		out->v8_blob_hi = m->v8_blob + elf_read_u32(v, out, m->v8_blob_size_at);
	}
	out->v8_builtins_lo = m->builtins_lo;
	out->v8_builtins_hi = m->builtins_hi;
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

static int elf_load_buffer(const uint8_t *buf, size_t len, const struct elf_pick *pick,
			   struct elf_symbols *out, char *err, size_t errlen)
{
	struct elf_view v = { .buf = buf, .len = buf ? len : 0, .err = err, .errlen = errlen };
	struct elf_markers m = { 0 };
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
	ret = elf_collect(&v, &t, pick, &m, &c, &n);
	if (ret < 0)
		return ret;
	if (pick->keep)
		elf_resolve_kept(&v, &t, c, n);
	ret = elf_build(&v, &eh, c, elf_fold(c, n, pick->keep != NULL), n_seg, &t, out);
	free(c);
	if (ret < 0)
		return ret;
	out->from_symtab = from_symtab;
	elf_apply_markers(&v, &m, go_section, out);
	return 0;
}

int elf_symbols_load_buffer(const uint8_t *buf, size_t len, struct elf_symbols *out, char *err,
			    size_t errlen)
{
	return elf_load_buffer(buf, len, &(struct elf_pick){ 0 }, out, err, errlen);
}

int elf_symbols_load_buffer_selected(const uint8_t *buf, size_t len, elf_symbols_keep_fn keep,
				     void *ctx, struct elf_symbols *out, char *err,
				     size_t errlen)
{
	return elf_load_buffer(buf, len, &(struct elf_pick){ keep, ctx }, out, err, errlen);
}

int elf_symbols_load_selected(const char *path, elf_symbols_keep_fn keep, void *ctx,
			      struct elf_symbols *out, char *err, size_t errlen)
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
	ret = elf_load_buffer(map, (size_t)sb.st_size, &(struct elf_pick){ keep, ctx }, out, err,
			      errlen);
	munmap(map, (size_t)sb.st_size);
	return ret;

err_close:
	close(fd);
	return ret;
}

int elf_symbols_load(const char *path, struct elf_symbols *out, char *err, size_t errlen)
{
	return elf_symbols_load_selected(path, NULL, NULL, out, err, errlen);
}

void elf_symbols_free(struct elf_symbols *s)
{
	if (!s)
		return;
	free(s->storage);
	memset(s, 0, sizeof(*s));
}
