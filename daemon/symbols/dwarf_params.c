// SPDX-License-Identifier: MIT
/*
 * One module's DWARF for --auto-args: finds it (own, build id, debuglink),
 * keeps the units' address ranges, and indexes a unit's function entries
 * the first time a lookup lands in it, so an attach that instruments a few
 * functions of libc reads a few units, not all. Every file is hostile: read
 * with ELF_C_READ (never mmapped), opened without blocking, DIE walks
 * bounded by offsets that must grow, and libdw never asked to open a file
 * itself (no split units; a dwz alt file only as we found it).
 */
#include "daemon/symbols/dwarf_params.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/debug_file.h"
#include "daemon/symbols/dwarf_describe.h"

#define MAX_UNITS (1u << 20)
#define MAX_RANGES_PER_UNIT (1u << 16)
#define MAX_NEST 16              /* namespaces inside namespaces */
#define LOOKBACK 16              /* overlapping unit ranges tried for one address */

/* A function entry of an indexed unit. */
struct func_entry {
	uint64_t addr;
	Dwarf_Off die;
};

struct unit {
	Dwarf_Off die;               /* the unit DIE's offset */
	bool indexed, has_ranges;
	struct func_entry *funcs;    /* sorted by addr, then DIE offset */
	size_t n_funcs, cap_funcs;
};

struct unit_range {
	uint64_t lo, hi;
	size_t unit;
};

struct name_entry {
	const char *name;            /* in the Dwarf's string data */
	Dwarf_Off die;
	uint64_t addr;
	bool instance;               /* has DW_AT_abstract_origin */
};

/* An open ELF file: what libdw's Dwarf reads from must outlive it. */
struct elf_file {
	int fd;
	Elf *elf;
	void *image;                 /* open_image's copy, else NULL */
	uint64_t size;
};

struct dwarf_params_module {
	enum dwarf_params_arch arch;
	enum dwarf_params_source source;
	char *debug_path;
	struct elf_file main, debug, alt;
	Dwarf *dw, *alt_dw;
	struct unit *units;
	size_t n_units;
	struct unit_range *ranges;
	size_t n_ranges, cap_ranges;
	bool rangeless_indexed;
	struct name_entry *names;    /* built by the first lookup by name */
	size_t n_names;
	bool names_built;
	size_t units_indexed, functions_indexed;
};

/* ---- files --------------------------------------------------------------- */

static void elf_file_close(struct elf_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	if (f->fd >= 0)
		close(f->fd);
	free(f->image);
	*f = (struct elf_file){ .fd = -1 };
}

/* Opens path as an ELF read with pread: regular files only, never blocking on a FIFO. */
static int elf_file_open(struct elf_file *f, const char *path)
{
	struct stat st;

	*f = (struct elf_file){ .fd = -1 };
	f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (f->fd < 0)
		return -errno;
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		elf_file_close(f);
		return -ENOEXEC;
	}
	f->size = (uint64_t)st.st_size;
	f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
		elf_file_close(f);
		return -ENOEXEC;
	}
	return 0;
}

/* A .debug_info with bytes in the file (a stripped file keeps a NOBITS one). */
static bool has_debug_info(const struct elf_file *f)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;

	if (!debug_file_headers_in_file(f->elf, f->size) ||
	    elf_getshdrstrndx(f->elf, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(f->elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
			continue;
		name = elf_strptr(f->elf, shstrndx, sh.sh_name);
		if (name && (strcmp(name, ".debug_info") == 0 ||
			     strcmp(name, ".zdebug_info") == 0))
			return sh.sh_offset <= f->size && sh.sh_size <= f->size - sh.sh_offset;
	}
	return false;
}

static bool same_build_id(Elf *a, Elf *b)
{
	const void *ida, *idb;
	ssize_t la = dwelf_elf_gnu_build_id(a, &ida), lb = dwelf_elf_gnu_build_id(b, &idb);

	if (la <= 0 || lb <= 0)
		return la <= 0 || lb <= 0; /* only both present can disagree */
	return la == lb && memcmp(ida, idb, (size_t)la) == 0;
}

/* Opens path as the debug file of main if it has DWARF and the build ids agree. */
static int try_debug_file(struct dwarf_params_module *m, const char *path, bool need_id,
			  const uint32_t *crc)
{
	uint32_t got;
	int ret = elf_file_open(&m->debug, path);

	if (ret < 0)
		return ret;
	if ((need_id && dwelf_elf_gnu_build_id(m->debug.elf, &(const void *){ NULL }) <= 0) ||
	    !same_build_id(m->main.elf, m->debug.elf) || !has_debug_info(&m->debug) ||
	    (crc && (debug_file_crc32(m->debug.fd, &got) < 0 || got != *crc))) {
		elf_file_close(&m->debug);
		return -ENODATA;
	}
	m->debug_path = strdup(path);
	if (!m->debug_path) {
		elf_file_close(&m->debug);
		return -ENOMEM;
	}
	return 0;
}

static int find_by_build_id(struct dwarf_params_module *m, const char *root)
{
	char path[PATH_MAX];
	const void *id;
	ssize_t len = dwelf_elf_gnu_build_id(m->main.elf, &id);

	if (len < 2 || debug_file_build_id_path(path, sizeof(path), root, id, (size_t)len) < 0)
		return -ENODATA;
	return try_debug_file(m, path, true, NULL);
}

static int find_by_debuglink(struct dwarf_params_module *m, const char *module_path,
			     const char *root)
{
	char name[NAME_MAX + 1], path[2 * PATH_MAX];
	uint32_t crc;
	unsigned int i;

	if (!module_path ||
	    !debug_file_read_debuglink(m->main.elf, m->main.size, name, sizeof(name), &crc))
		return -ENODATA;
	for (i = 0; i < DEBUG_FILE_DEBUGLINK_PLACES; i++)
		if (debug_file_debuglink_path(path, sizeof(path), i, root, module_path, name) == 0 &&
		    try_debug_file(m, path, false, &crc) == 0)
			return 0;
	return -ENODATA;
}

/*
 * A dwz-compressed file names a shared alt file. libdw would look for it
 * itself (any path the file names, opened blocking), so we find it by build
 * id under the debug root and hand it over, or refuse the module.
 */
static int attach_alt(struct dwarf_params_module *m, const char *root)
{
	char path[PATH_MAX];
	const char *alt_name;
	const void *id;
	ssize_t len = dwelf_dwarf_gnu_debugaltlink(m->dw, &alt_name, &id);

	if (len <= 0)
		return 0; /* none, or unreadable: libdw then looks for nothing either */
	if (len < 2 || !root || debug_file_build_id_path(path, sizeof(path), root, id,
							   (size_t)len) < 0 ||
	    elf_file_open(&m->alt, path) < 0)
		return -ENODATA;
	m->alt_dw = dwarf_begin_elf(m->alt.elf, DWARF_C_READ, NULL);
	if (!m->alt_dw)
		return -ENODATA;
	dwarf_setalt(m->dw, m->alt_dw);
	return 0;
}

/* ---- the unit table ------------------------------------------------------- */

static int push_range(struct dwarf_params_module *m, uint64_t lo, uint64_t hi, size_t unit)
{
	if (m->n_ranges == m->cap_ranges) {
		size_t cap = m->cap_ranges ? m->cap_ranges * 2 : 256;
		struct unit_range *r = realloc(m->ranges, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		m->ranges = r;
		m->cap_ranges = cap;
	}
	m->ranges[m->n_ranges++] = (struct unit_range){ lo, hi, unit };
	return 0;
}

static int add_unit_ranges(struct dwarf_params_module *m, Dwarf_Die *cu, size_t unit)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	unsigned int n = 0;
	int ret;

	while (n < MAX_RANGES_PER_UNIT && (off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
		if (lo >= hi)
			continue;
		ret = push_range(m, lo, hi, unit);
		if (ret < 0)
			return ret;
		n++;
	}
	m->units[unit].has_ranges = n > 0;
	return 0;
}

static int range_cmp(const void *pa, const void *pb)
{
	const struct unit_range *a = pa, *b = pb;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Reads the unit headers and their DIEs' ranges: full and partial units only. */
static int read_units(struct dwarf_params_module *m)
{
	Dwarf_CU *cu = NULL;
	size_t cap = 0;
	int ret;

	for (;;) {
		Dwarf_Half version;
		uint8_t type;
		Dwarf_Die cudie;

		/* no subdie: libdw would go looking for a split unit's .dwo file */
		ret = dwarf_get_units(m->dw, cu, &cu, &version, &type, &cudie, NULL);
		if (ret != 0)
			break;
		if (type != DW_UT_compile && type != DW_UT_partial)
			continue;
		if (m->n_units == MAX_UNITS)
			return -E2BIG;
		if (m->n_units == cap) {
			struct unit *u = realloc(m->units, (cap ? cap * 2 : 64) * sizeof(*u));

			if (!u)
				return -ENOMEM;
			m->units = u;
			cap = cap ? cap * 2 : 64;
		}
		m->units[m->n_units] = (struct unit){ .die = dwarf_dieoffset(&cudie) };
		ret = add_unit_ranges(m, &cudie, m->n_units++);
		if (ret < 0)
			return ret;
	}
	if (ret < 0)
		return -EINVAL;
	if (m->n_ranges)
		qsort(m->ranges, m->n_ranges, sizeof(*m->ranges), range_cmp);
	return 0;
}

/* ---- open / close ------------------------------------------------------------ */

static int arch_of(Elf *elf, enum dwarf_params_arch want, enum dwarf_params_arch *out)
{
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -ENOEXEC;
	if (want != DWARF_PARAMS_ARCH_AUTO)
		*out = want;
	else if (eh.e_machine == EM_X86_64)
		*out = DWARF_PARAMS_ARCH_X86_64;
	else if (eh.e_machine == EM_AARCH64)
		*out = DWARF_PARAMS_ARCH_AARCH64;
	else
		return -ENOEXEC;
	return 0;
}

/* The DWARF of m->main (path NULL: an image, no separate file looked for). */
static int find_dwarf(struct dwarf_params_module *m, const char *path, const char *root)
{
	struct elf_file *from = &m->main;

	if (has_debug_info(&m->main)) {
		m->source = DWARF_PARAMS_OWN;
		m->debug_path = strdup(path ? path : "(image)");
		if (!m->debug_path)
			return -ENOMEM;
	} else if (!path || !debug_file_headers_in_file(m->main.elf, m->main.size)) {
		return -ENODATA;
	} else if (find_by_build_id(m, root) == 0) {
		m->source = DWARF_PARAMS_BUILD_ID;
		from = &m->debug;
	} else if (find_by_debuglink(m, path, root) == 0) {
		m->source = DWARF_PARAMS_DEBUGLINK;
		from = &m->debug;
	} else {
		return -ENODATA;
	}
	m->dw = dwarf_begin_elf(from->elf, DWARF_C_READ, NULL);
	if (!m->dw)
		return -EINVAL; /* has_debug_info saw the section: it is malformed */
	return attach_alt(m, path ? (root ? root : DEBUG_FILE_ROOT) : NULL);
}

static int open_common(struct dwarf_params_module *m, const char *path, const char *root,
		       enum dwarf_params_arch arch)
{
	int ret = arch_of(m->main.elf, arch, &m->arch);

	if (ret == 0)
		ret = find_dwarf(m, path, root);
	if (ret == 0)
		ret = read_units(m);
	return ret;
}

static struct dwarf_params_module *module_new(void)
{
	struct dwarf_params_module *m = calloc(1, sizeof(*m));

	if (m)
		m->main.fd = m->debug.fd = m->alt.fd = -1;
	return m;
}

int dwarf_params_open(const char *path, const char *debug_root, enum dwarf_params_arch arch,
		      struct dwarf_params_module **out)
{
	struct dwarf_params_module *m;
	int ret;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	m = module_new();
	if (!m)
		return -ENOMEM;
	ret = elf_file_open(&m->main, path);
	if (ret == 0)
		ret = open_common(m, path, debug_root, arch);
	if (ret < 0) {
		dwarf_params_close(m);
		return ret;
	}
	*out = m;
	return 0;
}

int dwarf_params_open_image(const void *image, size_t len, enum dwarf_params_arch arch,
			    struct dwarf_params_module **out)
{
	struct dwarf_params_module *m;
	int ret = -ENOEXEC;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	m = module_new();
	if (!m)
		return -ENOMEM;
	m->main.image = malloc(len ? len : 1);
	if (!m->main.image) {
		free(m);
		return -ENOMEM;
	}
	memcpy(m->main.image, image, len);
	m->main.size = len;
	m->main.elf = elf_memory(m->main.image, len);
	if (m->main.elf && elf_kind(m->main.elf) == ELF_K_ELF)
		ret = open_common(m, NULL, NULL, arch);
	if (ret < 0) {
		dwarf_params_close(m);
		return ret;
	}
	*out = m;
	return 0;
}

void dwarf_params_close(struct dwarf_params_module *m)
{
	size_t i;

	if (!m)
		return;
	if (m->dw)
		dwarf_end(m->dw);
	if (m->alt_dw)
		dwarf_end(m->alt_dw);
	elf_file_close(&m->alt);
	elf_file_close(&m->debug);
	elf_file_close(&m->main);
	for (i = 0; i < m->n_units; i++)
		free(m->units[i].funcs);
	free(m->units);
	free(m->ranges);
	free(m->names);
	free(m->debug_path);
	free(m);
}

enum dwarf_params_source dwarf_params_source(const struct dwarf_params_module *m)
{
	return m->source;
}

const char *dwarf_params_debug_path(const struct dwarf_params_module *m)
{
	return m->debug_path;
}

enum dwarf_params_arch dwarf_params_arch(const struct dwarf_params_module *m)
{
	return m->arch;
}

void dwarf_params_get_stats(const struct dwarf_params_module *m, struct dwarf_params_stats *out)
{
	*out = (struct dwarf_params_stats){ .units = m->n_units,
					    .units_indexed = m->units_indexed,
					    .functions_indexed = m->functions_indexed };
}

/* ---- per-unit function index ---------------------------------------------------- */

static int push_func(struct unit *u, uint64_t addr, Dwarf_Off die)
{
	if (u->n_funcs == u->cap_funcs) {
		size_t cap = u->cap_funcs ? u->cap_funcs * 2 : 16;
		struct func_entry *f = realloc(u->funcs, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		u->funcs = f;
		u->cap_funcs = cap;
	}
	u->funcs[u->n_funcs++] = (struct func_entry){ addr, die };
	return 0;
}

/*
 * A defined subprogram's entry: DW_AT_entry_pc, else DW_AT_low_pc, else the
 * first of its ranges (GCC lists the entry's part of a hot/cold split first).
 */
static bool subprogram_entry(Dwarf_Die *die, uint64_t *addr)
{
	Dwarf_Addr base, lo, hi;

	if (dwarf_hasattr(die, DW_AT_declaration))
		return false;
	if (dwarf_entrypc(die, addr) == 0)
		return true;
	if (!dwarf_hasattr(die, DW_AT_ranges) || dwarf_ranges(die, 0, &base, &lo, &hi) <= 0)
		return false;
	*addr = lo;
	return true;
}

/* The subprograms among parent's children, and inside its namespaces. */
static int index_children(struct unit *u, Dwarf_Die *parent, int depth)
{
	Dwarf_Die child;
	Dwarf_Off last;
	uint64_t addr;
	int ret;

	if (depth > MAX_NEST || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		last = dwarf_dieoffset(&child);
		if (tag == DW_TAG_subprogram && subprogram_entry(&child, &addr))
			ret = push_func(u, addr, last);
		else if (tag == DW_TAG_namespace || tag == DW_TAG_module)
			ret = index_children(u, &child, depth + 1);
		else
			ret = 0;
		if (ret < 0)
			return ret;
		/* a hostile DW_AT_sibling pointing back would loop: offsets must grow */
	} while (dwarf_siblingof(&child, &child) == 0 && dwarf_dieoffset(&child) > last);
	return 0;
}

static int func_cmp(const void *pa, const void *pb)
{
	const struct func_entry *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->die < b->die ? -1 : a->die > b->die;
}

static int index_unit(struct dwarf_params_module *m, struct unit *u)
{
	Dwarf_Die cudie;
	int ret;

	if (u->indexed)
		return 0;
	u->indexed = true;
	m->units_indexed++;
	if (!dwarf_offdie(m->dw, u->die, &cudie))
		return -EINVAL;
	ret = index_children(u, &cudie, 0);
	if (u->n_funcs)
		qsort(u->funcs, u->n_funcs, sizeof(*u->funcs), func_cmp);
	m->functions_indexed += u->n_funcs;
	return ret;
}

/* The DIE offset of the function at addr in unit u, or 0. */
static Dwarf_Off unit_find(const struct unit *u, uint64_t addr)
{
	size_t lo = 0, hi = u->n_funcs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (u->funcs[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < u->n_funcs && u->funcs[lo].addr == addr ? u->funcs[lo].die : 0;
}

/* Tries the units whose ranges cover addr. */
static int find_in_ranges(struct dwarf_params_module *m, uint64_t addr, Dwarf_Off *die)
{
	size_t lo = 0, hi = m->n_ranges, k;
	int ret;

	while (lo < hi) { /* first range starting above addr */
		size_t mid = lo + (hi - lo) / 2;

		if (m->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = 0; lo > 0 && k < LOOKBACK; lo--, k++) {
		const struct unit_range *r = &m->ranges[lo - 1];

		if (addr >= r->hi)
			continue;
		ret = index_unit(m, &m->units[r->unit]);
		if (ret < 0)
			return ret;
		*die = unit_find(&m->units[r->unit], addr);
		if (*die)
			return 0;
	}
	return -ENOENT;
}

/* Units without address ranges (rare: hand-made DWARF) are searched one by one. */
static int find_in_rangeless(struct dwarf_params_module *m, uint64_t addr, Dwarf_Off *die)
{
	size_t i;
	int ret;

	for (i = 0; i < m->n_units; i++) {
		if (m->units[i].has_ranges)
			continue;
		ret = index_unit(m, &m->units[i]);
		if (ret < 0)
			return ret;
		*die = unit_find(&m->units[i], addr);
		if (*die)
			return 0;
	}
	return -ENOENT;
}

static int describe_at(struct dwarf_params_module *m, Dwarf_Off off, uint64_t addr,
		       const char *symbol_name, struct dwarf_function **out)
{
	Dwarf_Die die;

	if (!dwarf_offdie(m->dw, off, &die))
		return -EINVAL;
	return dwarf_describe_function(&die, addr, symbol_name, m->arch, out);
}

int dwarf_params_lookup(struct dwarf_params_module *m, uint64_t addr, const char *symbol_name,
			struct dwarf_function **out)
{
	Dwarf_Off die = 0;
	int ret = find_in_ranges(m, addr, &die);

	if (ret == -ENOENT)
		ret = find_in_rangeless(m, addr, &die);
	if (ret < 0)
		return ret;
	return describe_at(m, die, addr, symbol_name, out);
}

/* ---- by name ------------------------------------------------------------------ */

static int name_cmp(const void *pa, const void *pb)
{
	const struct name_entry *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c)
		return c;
	if (a->instance != b->instance)
		return a->instance ? 1 : -1; /* definitions first */
	return a->die < b->die ? -1 : a->die > b->die;
}

static int build_names(struct dwarf_params_module *m)
{
	size_t i, j, n = 0;
	int ret;

	m->names_built = true;
	for (i = 0; i < m->n_units; i++) {
		/* a malformed unit keeps what it indexed: the others still answer */
		ret = index_unit(m, &m->units[i]);
		if (ret == -ENOMEM)
			return ret;
		n += m->units[i].n_funcs;
	}
	m->names = calloc(n ? n : 1, sizeof(*m->names));
	if (!m->names)
		return -ENOMEM;
	for (i = 0; i < m->n_units; i++) {
		for (j = 0; j < m->units[i].n_funcs; j++) {
			const struct func_entry *f = &m->units[i].funcs[j];
			Dwarf_Die die;
			const char *name;

			if (!dwarf_offdie(m->dw, f->die, &die) || !(name = dwarf_describe_name(&die)))
				continue;
			m->names[m->n_names++] = (struct name_entry){
				name, f->die, f->addr, dwarf_hasattr(&die, DW_AT_abstract_origin) };
		}
	}
	if (m->n_names)
		qsort(m->names, m->n_names, sizeof(*m->names), name_cmp);
	return 0;
}

int dwarf_params_lookup_name(struct dwarf_params_module *m, const char *name,
			     struct dwarf_function **out)
{
	size_t lo = 0, hi;
	int ret;

	if (!m->names_built && (ret = build_names(m)) < 0)
		return ret;
	hi = m->n_names;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(m->names[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->n_names || strcmp(m->names[lo].name, name) != 0)
		return -ENOENT;
	return describe_at(m, m->names[lo].die, m->names[lo].addr, NULL, out);
}
