// SPDX-License-Identifier: MIT
/*
 * Per-file ELF loading for daemon/symbols/symbols.c (libelf): function symbols from
 * .symtab, else a build-id debug file's .symtab, else the .symtab of the
 * file .gnu_debuglink names (CRC-32 checked), else .dynsym; PT_LOAD
 * segments; the GNU build id. Every file is hostile: sizes are checked
 * against the file before libelf reads them, and any inconsistency gives a
 * module with fewer or no symbols, never a crash. Files are read with pread
 * (ELF_C_READ), never mmapped, so a file truncated underneath cannot SIGBUS.
 */
#include "daemon/symbols/elf_module.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/debug_file.h"
#include "daemon/symbols/elf_plt.h"

#define MAX_SYMBOLS (16u << 20)      /* more is a hostile file, not a program */
#define MAX_NOTE_BYTES (1u << 20)
#define MAX_VDSO_BYTES (1u << 20)
#define LOOKBACK 16                  /* nested symbols searched before giving up */
#define PLT_SUFFIX "@plt"
#define PLT_SUFFIX_LEN 4

/* A symbol while loading; name points into the Elf's string table. */
struct raw_symbol {
	uint64_t start, size, section_end;
	const char *name;
	size_t name_len;
	bool global;
	bool plt; /* a PLT entry: named "name@plt" */
};

struct raw_symbols {
	struct raw_symbol *v;
	size_t n, cap;
};

struct elf_module *elf_module_new(const char *path)
{
	struct elf_module *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->refs = 1;
	m->path = strdup(path);
	if (!m->path) {
		free(m);
		return NULL;
	}
	if (strcmp(path, "[vdso]") == 0)
		m->kind = ELF_MODULE_VDSO;
	else if (path[0] == '[')
		m->kind = ELF_MODULE_SPECIAL;
	else
		m->kind = ELF_MODULE_FILE;
	return m;
}

struct elf_module *elf_module_ref(struct elf_module *m)
{
	m->refs++;
	return m;
}

void elf_module_free(struct elf_module *m)
{
	if (!m || --m->refs > 0)
		return;
	free(m->functions);
	free(m->names);
	free(m->segments);
	free(m->path);
	free(m);
}

/* True when the section's bytes lie inside the file (NOBITS has none). */
bool elf_section_in_file(const GElf_Shdr *sh, uint64_t file_size)
{
	if (sh->sh_type == SHT_NOBITS)
		return false;
	return sh->sh_offset <= file_size && sh->sh_size <= file_size - sh->sh_offset;
}

static void read_segments(struct elf_module *m, Elf *elf)
{
	size_t phnum, i, n = 0;
	bool have_bias = false;

	if (elf_getphdrnum(elf, &phnum) != 0 || phnum == 0 || phnum > 65535)
		return;
	m->segments = calloc(phnum, sizeof(*m->segments));
	if (!m->segments)
		return;
	for (i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		m->segments[n++] = (struct elf_segment){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
							 ph.p_flags };
		if ((ph.p_flags & PF_X) && !have_bias) {
			m->load_bias = ph.p_vaddr - ph.p_offset;
			have_bias = true;
		}
	}
	m->n_segments = n;
}

/* Copies the NT_GNU_BUILD_ID of one note area; returns its length or 0. */
static size_t build_id_from_notes(Elf_Data *data, uint8_t *out)
{
	size_t off = 0, next, name_off, desc_off, len;
	GElf_Nhdr nh;

	if (!data || !data->d_buf)
		return 0;
	while (off < data->d_size &&
	       (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const char *name = (const char *)data->d_buf + name_off;

		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(name, "GNU", 4) == 0 && nh.n_descsz > 0) {
			len = nh.n_descsz < ELF_MODULE_MAX_BUILD_ID ? nh.n_descsz
								      : ELF_MODULE_MAX_BUILD_ID;
			memcpy(out, (const uint8_t *)data->d_buf + desc_off, len);
			return len;
		}
		off = next;
	}
	return 0;
}

static size_t build_id_from_phdrs(Elf *elf, uint64_t file_size, uint8_t *out)
{
	size_t phnum, i, len;

	if (elf_getphdrnum(elf, &phnum) != 0)
		return 0;
	for (i = 0; i < phnum && i < 65536; i++) {
		GElf_Phdr ph;
		Elf_Data *d;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (ph.p_filesz == 0 || ph.p_filesz > MAX_NOTE_BYTES ||
		    ph.p_offset > file_size || ph.p_filesz > file_size - ph.p_offset)
			continue;
		d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
					 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		len = build_id_from_notes(d, out);
		if (len)
			return len;
	}
	return 0;
}

static size_t build_id_from_sections(Elf *elf, uint64_t file_size, uint8_t *out)
{
	Elf_Scn *scn = NULL;
	size_t len;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    sh.sh_size > MAX_NOTE_BYTES || !elf_section_in_file(&sh, file_size))
			continue;
		len = build_id_from_notes(elf_getdata(scn, NULL), out);
		if (len)
			return len;
	}
	return 0;
}

static size_t read_build_id(Elf *elf, uint64_t file_size, uint8_t *out)
{
	size_t len = build_id_from_phdrs(elf, file_size, out);

	return len ? len : build_id_from_sections(elf, file_size, out);
}

/* End of the section a size-0 symbol lives in, or 0 when unknown. */
static uint64_t section_end_of(Elf *elf, size_t shndx, uint64_t value)
{
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
		return 0;
	scn = elf_getscn(elf, shndx);
	if (!scn || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
		return 0;
	if (value < sh.sh_addr || value - sh.sh_addr >= sh.sh_size)
		return 0;
	return sh.sh_addr + sh.sh_size;
}

static int raw_push(struct raw_symbols *rs, const struct raw_symbol *sym)
{
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 1024;
		struct raw_symbol *v = realloc(rs->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		rs->v = v;
		rs->cap = cap;
	}
	rs->v[rs->n++] = *sym;
	return 0;
}

/* Checks the symbol table section and its string table; returns the data or NULL. */
static Elf_Data *symtab_data(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t file_size)
{
	Elf_Scn *str_scn = elf_getscn(elf, sh->sh_link);
	GElf_Shdr str_sh;
	Elf_Data *d;

	if (!elf_section_in_file(sh, file_size) || !str_scn || !gelf_getshdr(str_scn, &str_sh) ||
	    str_sh.sh_type != SHT_STRTAB || !elf_section_in_file(&str_sh, file_size))
		return NULL;
	d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_type != ELF_T_SYM)
		return NULL;
	return d;
}

/* Appends the defined function symbols of one symbol table to rs. */
static int collect_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t file_size,
			   struct raw_symbols *rs)
{
	Elf_Data *d = symtab_data(elf, scn, sh, file_size);
	size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t i, count;

	if (!d || entsize == 0)
		return -EINVAL;
	count = d->d_size / entsize;
	if (count > MAX_SYMBOLS)
		return -E2BIG;
	for (i = 0; i < count; i++) {
		struct raw_symbol r = { .plt = false };
		GElf_Sym sym;
		int type;

		if (!gelf_getsym(d, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF)
			continue;
		r.name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!r.name || !r.name[0])
			continue;
		/* debug files name versioned symbols "memcpy@@GLIBC_2.14": show "memcpy" */
		r.name_len = strcspn(r.name, "@");
		if (r.name_len == 0)
			continue;
		r.start = sym.st_value;
		r.size = sym.st_value + sym.st_size < sym.st_value ? 0 : sym.st_size;
		r.section_end = r.size ? 0 : section_end_of(elf, sym.st_shndx, sym.st_value);
		r.global = GELF_ST_BIND(sym.st_info) != STB_LOCAL;
		if (raw_push(rs, &r) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Orders by address, then the preferred alias first: global or weak over
 * local, then the shortest name, then byte order (the agent's rule in
 * agent/elf_symbols.h, so both sides print the same name).
 */
static int raw_cmp(const void *pa, const void *pb)
{
	const struct raw_symbol *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->global != b->global)
		return a->global ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* End of the alias group rs->v[first..last): see the size-0 rule in store_symbols. */
static uint64_t group_end(const struct raw_symbols *rs, size_t first, size_t last)
{
	uint64_t start = rs->v[first].start, end = 0, limit = UINT64_MAX;
	size_t i;

	for (i = first; i < last; i++) {
		if (rs->v[i].size && start + rs->v[i].size > end)
			end = start + rs->v[i].size;
		if (!rs->v[i].size && rs->v[i].section_end && rs->v[i].section_end < limit)
			limit = rs->v[i].section_end;
	}
	if (end)
		return end;
	if (last < rs->n && rs->v[last].start < limit)
		limit = rs->v[last].start;
	return limit == UINT64_MAX ? start + 1 : limit;
}

/*
 * Folds aliases and copies the names into one pool. A symbol of size 0
 * (hand-written assembly without .size) covers the bytes up to the next
 * symbol or the end of its executable section, whichever comes first, as
 * perf does; with neither known it covers its first byte only.
 */
static int store_symbols(struct elf_module *m, struct raw_symbols *rs)
{
	size_t i, j, n = 0, pool = 0, off = 0;

	qsort(rs->v, rs->n, sizeof(*rs->v), raw_cmp);
	for (i = 0; i < rs->n; i = j) {
		for (j = i + 1; j < rs->n && rs->v[j].start == rs->v[i].start; j++)
			;
		pool += rs->v[i].name_len + (rs->v[i].plt ? PLT_SUFFIX_LEN : 0) + 1;
		n++;
	}
	m->functions = calloc(n ? n : 1, sizeof(*m->functions));
	m->names = malloc(pool ? pool : 1);
	if (!m->functions || !m->names)
		return -ENOMEM;
	n = 0;
	for (i = 0; i < rs->n; i = j) {
		for (j = i + 1; j < rs->n && rs->v[j].start == rs->v[i].start; j++)
			;
		size_t len = rs->v[i].name_len;

		memcpy(m->names + off, rs->v[i].name, len);
		if (rs->v[i].plt) {
			memcpy(m->names + off + len, PLT_SUFFIX, PLT_SUFFIX_LEN);
			len += PLT_SUFFIX_LEN;
		}
		m->names[off + len] = '\0';
		m->functions[n++] = (struct elf_function){ rs->v[i].start, group_end(rs, i, j),
							   m->names + off };
		off += len + 1;
	}
	m->n_functions = n;
	return 0;
}

static Elf_Scn *find_section(Elf *elf, uint32_t type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, sh) && sh->sh_type == type)
			return scn;
	return NULL;
}

/* Loads one symbol table of type into m; returns the number of functions. */
static size_t load_symbol_table(struct elf_module *m, Elf *elf, uint64_t file_size, uint32_t type)
{
	struct raw_symbols rs = { 0 };
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(elf, type, &sh);

	if (!scn || collect_symbols(elf, scn, &sh, file_size, &rs) < 0 || rs.n == 0 ||
	    store_symbols(m, &rs) < 0) {
		free(m->functions);
		free(m->names);
		m->functions = NULL;
		m->names = NULL;
		m->n_functions = 0;
	}
	free(rs.v);
	return m->n_functions;
}

/* Opens path, seen from pid's root when pid > 0; regular files only. */
static int open_regular(pid_t pid, const char *path)
{
	char buf[4096 + 64];
	struct stat st;
	int fd;

	if (pid > 0 && path[0] == '/') {
		snprintf(buf, sizeof(buf), "/proc/%d/root%s", (int)pid, path);
		path = buf;
	}
	/* O_NONBLOCK: a hostile mapping path naming a FIFO must not block us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static Elf *elf_open_fd(int fd, uint64_t *file_size)
{
	struct stat st;
	Elf *elf;

	if (fstat(fd, &st) < 0)
		return NULL;
	*file_size = (uint64_t)st.st_size;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return NULL;
	}
	return elf;
}

/* .symtab of /usr/lib/debug/.build-id/xx/yyyy.debug if its build id matches. */
static size_t load_debug_file(struct elf_module *m, pid_t pid)
{
	char path[64 + 2 * ELF_MODULE_MAX_BUILD_ID];
	uint8_t id[ELF_MODULE_MAX_BUILD_ID];
	uint64_t size;
	size_t n = 0;
	int fd;
	Elf *elf;

	if (debug_file_build_id_path(path, sizeof(path), NULL, m->build_id, m->build_id_len) < 0)
		return 0;
	fd = open_regular(pid, path);
	if (fd < 0 && pid > 0)
		fd = open_regular(0, path);
	if (fd < 0)
		return 0;
	elf = elf_open_fd(fd, &size);
	if (elf && read_build_id(elf, size, id) == m->build_id_len &&
	    memcmp(id, m->build_id, m->build_id_len) == 0)
		n = load_symbol_table(m, elf, size, SHT_SYMTAB);
	elf_end(elf);
	close(fd);
	return n;
}

/* ---- .gnu_debuglink (found by daemon/symbols/debug_file.c) ---------------- */

/*
 * .symtab of one debuglink candidate, if its CRC-32 matches and, when both
 * files have a build id, the ids agree. Returns the functions loaded.
 */
static size_t load_debuglink_candidate(struct elf_module *m, pid_t pid, const char *path,
				       uint32_t want_crc)
{
	uint8_t id[ELF_MODULE_MAX_BUILD_ID];
	uint32_t crc = 0;
	uint64_t size;
	size_t n = 0, id_len;
	int fd = open_regular(pid, path);
	Elf *elf;

	if (fd < 0 && pid > 0)
		fd = open_regular(0, path);
	if (fd < 0)
		return 0;
	if (debug_file_crc32(fd, &crc) < 0 || crc != want_crc) {
		close(fd);
		return 0;
	}
	elf = elf_open_fd(fd, &size);
	id_len = elf ? read_build_id(elf, size, id) : 0;
	if (elf && (!m->build_id_len || !id_len ||
		    (id_len == m->build_id_len && memcmp(id, m->build_id, id_len) == 0)))
		n = load_symbol_table(m, elf, size, SHT_SYMTAB);
	elf_end(elf);
	close(fd);
	return n;
}

/* gdb's search: DIR/NAME, DIR/.debug/NAME, /usr/lib/debug/DIR/NAME (DIR seen from pid's root). */
static size_t load_debuglink(struct elf_module *m, Elf *elf, uint64_t file_size, pid_t pid)
{
	char name[NAME_MAX + 1], path[2 * PATH_MAX];
	uint32_t crc;
	unsigned int i;
	size_t n = 0;

	if (!debug_file_read_debuglink(elf, file_size, name, sizeof(name), &crc))
		return 0;
	for (i = 0; i < DEBUG_FILE_DEBUGLINK_PLACES && !n; i++)
		if (debug_file_debuglink_path(path, sizeof(path), i, NULL, m->path, name) == 0)
			n = load_debuglink_candidate(m, pid, path, crc);
	return n;
}

/*
 * The file's PLT entries joined to the functions loaded (from whichever
 * symbol table): the stubs live in the file itself, never in a debug file.
 * Nothing changes when there are none or memory runs out.
 */
static void add_plt_entries(struct elf_module *m, Elf *elf, uint64_t file_size)
{
	struct elf_function *old_functions = m->functions;
	char *old_names = m->names;
	size_t old_n = m->n_functions;
	struct elf_plt_entry *plt;
	struct raw_symbols rs = { 0 };
	ssize_t n = elf_plt_entries(elf, file_size, &plt);
	int err = n > 0 ? 0 : -ENOENT;

	for (size_t i = 0; !err && i < old_n; i++) {
		const struct elf_function *f = &old_functions[i];

		err = raw_push(&rs, &(struct raw_symbol){ .start = f->start, .size = f->end - f->start,
							  .name = f->name, .name_len = strlen(f->name),
							  .global = true });
	}
	for (ssize_t i = 0; !err && i < n; i++)
		err = raw_push(&rs, &(struct raw_symbol){ .start = plt[i].start, .size = plt[i].size,
							  .name = plt[i].name,
							  .name_len = plt[i].name_len, .plt = true });
	if (!err && store_symbols(m, &rs) == 0) {
		free(old_functions);
		free(old_names);
	} else if (!err) {
		free(m->functions);
		free(m->names);
		m->functions = old_functions;
		m->names = old_names;
		m->n_functions = old_n;
	}
	free(rs.v);
	free(plt);
}

static void load_elf(struct elf_module *m, Elf *elf, uint64_t file_size, pid_t pid)
{
	read_segments(m, elf);
	m->build_id_len = read_build_id(elf, file_size, m->build_id);
	if (load_symbol_table(m, elf, file_size, SHT_SYMTAB))
		m->symbol_source = ".symtab";
	else if (m->kind == ELF_MODULE_FILE && debug_file_headers_in_file(elf, file_size) &&
		 load_debug_file(m, pid))
		m->symbol_source = "debug .symtab";
	else if (m->kind == ELF_MODULE_FILE && debug_file_headers_in_file(elf, file_size) &&
		 load_debuglink(m, elf, file_size, pid))
		m->symbol_source = "debuglink .symtab";
	else if (load_symbol_table(m, elf, file_size, SHT_DYNSYM))
		m->symbol_source = ".dynsym";
	else
		m->load_error = "no function symbols";
	if (m->n_functions)
		add_plt_entries(m, elf, file_size);
}

int elf_module_open(const struct elf_module *m, pid_t pid, uint64_t start, uint64_t end)
{
	char buf[96];
	int fd = open_regular(pid, m->path);

	if (fd < 0 && pid > 0)
		fd = open_regular(0, m->path);
	if (fd < 0 && pid > 0 && start < end) {
		/* deleted or replaced files stay reachable through the mapping itself */
		snprintf(buf, sizeof(buf), "/proc/%d/map_files/%llx-%llx", (int)pid,
			 (unsigned long long)start, (unsigned long long)end);
		fd = open_regular(0, buf);
	}
	return fd;
}

void elf_module_load_fd(struct elf_module *m, int fd, pid_t pid)
{
	uint64_t size;
	Elf *elf;

	m->loaded = true;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		m->load_error = "libelf version mismatch";
		return;
	}
	elf = elf_open_fd(fd, &size);
	if (elf)
		load_elf(m, elf, size, pid);
	else
		m->load_error = "not an ELF file";
	elf_end(elf);
}

static void load_file(struct elf_module *m, pid_t pid, uint64_t start, uint64_t end)
{
	int fd = elf_module_open(m, pid, start, end);

	if (fd < 0) {
		m->load_error = "cannot open file";
		return;
	}
	elf_module_load_fd(m, fd, pid);
	close(fd);
}

/* Reads len bytes of pid's memory at addr into a new buffer. */
static void *read_memory(pid_t pid, uint64_t addr, size_t len)
{
	char path[64];
	void *buf;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	buf = malloc(len);
	if (buf && pread(fd, buf, len, (off_t)addr) != (ssize_t)len) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

/* The vdso image is the kernel's, so our own is the fallback when the target is gone. */
static void load_vdso(struct elf_module *m, pid_t pid, uint64_t start, uint64_t end)
{
	size_t len = end - start;
	void *image = NULL;
	uint64_t own = getauxval(AT_SYSINFO_EHDR);

	if (start >= end || len > MAX_VDSO_BYTES) {
		m->load_error = "bad vdso mapping";
		return;
	}
	if (pid > 0)
		image = read_memory(pid, start, len);
	if (!image && own)
		image = read_memory(getpid(), own, len);
	if (!image) {
		m->load_error = "cannot read vdso";
		return;
	}
	elf_module_load_image(m, image, len);
	free(image);
}

void elf_module_load_image(struct elf_module *m, const void *image, size_t len)
{
	char *copy = malloc(len ? len : 1);
	Elf *elf;

	m->loaded = true;
	if (!copy) {
		m->load_error = "out of memory";
		return;
	}
	memcpy(copy, image, len);
	elf = elf_memory(copy, len);
	if (elf && elf_kind(elf) == ELF_K_ELF)
		load_elf(m, elf, len, 0);
	else
		m->load_error = "not an ELF image";
	elf_end(elf);
	free(copy);
}

void elf_module_load(struct elf_module *m, pid_t pid, uint64_t map_start, uint64_t map_end)
{
	if (m->loaded)
		return;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		m->loaded = true;
		m->load_error = "libelf version mismatch";
		return;
	}
	switch (m->kind) {
	case ELF_MODULE_FILE:
		load_file(m, pid, map_start, map_end);
		break;
	case ELF_MODULE_VDSO:
		load_vdso(m, pid, map_start, map_end);
		break;
	case ELF_MODULE_SPECIAL:
		m->load_error = "not a file";
		break;
	}
	m->loaded = true;
}

const struct elf_function *elf_module_find_function(const struct elf_module *m, uint64_t vaddr)
{
	size_t lo = 0, hi = m->n_functions, i, k;

	/* first function starting above vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->functions[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* nested or overlapping symbols: the closest start that still covers vaddr */
	for (i = lo, k = 0; i > 0 && k < LOOKBACK; i--, k++)
		if (vaddr < m->functions[i - 1].end)
			return &m->functions[i - 1];
	return NULL;
}

uint64_t elf_module_offset_to_vaddr(const struct elf_module *m, uint64_t off)
{
	const struct elf_segment *best = NULL;
	size_t i;

	for (i = 0; i < m->n_segments; i++) {
		const struct elf_segment *sg = &m->segments[i];

		if (off >= sg->offset && off - sg->offset < sg->filesz)
			return off - sg->offset + sg->vaddr;
		/* past filesz (a zero-filled tail page): the closest segment below */
		if (off >= sg->offset && (!best || sg->offset > best->offset))
			best = sg;
	}
	return best ? off - best->offset + best->vaddr : off;
}
