// SPDX-License-Identifier: MIT
/*
 * Symbol addresses in the target's modules for the injection (contract in
 * profctl/inject.h): the files behind its mappings, read through
 * /proc/PID/root, and their ELF symbol tables. Reads files only; never
 * writes the target, except to run an IFUNC resolver.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/mono_clock.h"

#include "profctl/inject_internal.h"

#define LOCAL_COPY_CHECK (64 * 1024) /* the first segment's headers and symbols, at most */

/* ---- symbols ----------------------------------------------------------- */

/* [off, off + size) inside a buffer of len bytes, or NULL; no overflow possible. */
static const uint8_t *elf_range(const uint8_t *p, size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off ? p + off : NULL;
}

struct elf_hit {
	uint64_t value;
	unsigned type;
	uint16_t shndx;
	int score;
};

/* Load-base-relative address that file offset off is mapped at (through its PT_LOAD). */
static int elf_vaddr_of_offset(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, uint64_t off,
			       uint64_t *vaddr)
{
	Elf64_Phdr ph;

	if (eh->e_phentsize != sizeof(ph))
		return -ENOEXEC;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const uint8_t *src = elf_range(p, len, eh->e_phoff + (uint64_t)i * sizeof(ph),
					       sizeof(ph));

		if (!src)
			return -ENOEXEC;
		memcpy(&ph, src, sizeof(ph));
		if (ph.p_type != PT_LOAD || !ph.p_filesz || ph.p_offset > UINT64_MAX - ph.p_filesz)
			continue;
		/* The page mapped at off overlaps the segment: the mapping is linear. */
		if (off < ph.p_offset + ph.p_filesz && off + 4096 > ph.p_offset) {
			*vaddr = ph.p_vaddr - ph.p_offset + off;
			return 0;
		}
	}
	return -ENOENT;
}

/* Version index of symbol i (bit 15: hidden, i.e. not the default version), or 0. */
static uint16_t elf_versym(const uint8_t *p, size_t len, const Elf64_Shdr *sh, size_t shnum,
			   size_t table, size_t i)
{
	uint16_t v;

	for (size_t k = 0; k < shnum; k++) {
		const uint8_t *src;

		if (sh[k].sh_type != SHT_GNU_versym || sh[k].sh_link != table)
			continue;
		src = elf_range(p, len, sh[k].sh_offset, sh[k].sh_size);
		if (!src || i >= sh[k].sh_size / 2)
			return 0;
		memcpy(&v, src + 2 * i, 2);
		return v;
	}
	return 0;
}

/* Best definition of name in symbol table sh[table]: global, default version, .dynsym. */
static void elf_scan_table(const uint8_t *p, size_t len, const Elf64_Shdr *sh, size_t shnum,
			   size_t table, const char *name, struct elf_hit *best)
{
	const Elf64_Shdr *tab = &sh[table], *strs;
	const uint8_t *syms;
	const char *str;
	size_t nlen = strlen(name);
	Elf64_Sym s;

	if (tab->sh_entsize != sizeof(s) || tab->sh_link >= shnum)
		return;
	strs = &sh[tab->sh_link];
	syms = elf_range(p, len, tab->sh_offset, tab->sh_size);
	str = (const char *)elf_range(p, len, strs->sh_offset, strs->sh_size);
	if (!syms || !str)
		return;
	for (size_t i = 1; i < tab->sh_size / sizeof(s); i++) {
		int score = tab->sh_type == SHT_DYNSYM ? 1 : 0, bind;

		memcpy(&s, syms + i * sizeof(s), sizeof(s));
		if (s.st_shndx == SHN_UNDEF || s.st_name >= strs->sh_size ||
		    strs->sh_size - s.st_name <= nlen || memcmp(str + s.st_name, name, nlen) ||
		    str[s.st_name + nlen])
			continue;
		bind = ELF64_ST_BIND(s.st_info);
		if (bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE)
			score += 4;
		/* VERSYM_HIDDEN: dlopen@GLIBC_2.2.5 loses to dlopen@@GLIBC_2.34 */
		if (tab->sh_type != SHT_DYNSYM || !(elf_versym(p, len, sh, shnum, table, i) &
						    VERSYM_HIDDEN))
			score += 2;
		if (score > best->score)
			*best = (struct elf_hit){ s.st_value, ELF64_ST_TYPE(s.st_info), s.st_shndx,
						  score };
	}
}

static int elf_lookup(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, const char *name,
		      struct elf_hit *hit)
{
	size_t shnum = eh->e_shnum;
	const uint8_t *src = elf_range(p, len, eh->e_shoff, shnum * sizeof(Elf64_Shdr));
	Elf64_Shdr *sh;

	if (eh->e_shentsize != sizeof(Elf64_Shdr) || !src || !shnum)
		return -ENODATA;
	sh = malloc(shnum * sizeof(*sh)); /* copied: the table need not be aligned */
	if (!sh)
		return -ENOMEM;
	memcpy(sh, src, shnum * sizeof(*sh));
	hit->score = 0;
	for (size_t i = 0; i < shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM || sh[i].sh_type == SHT_SYMTAB)
			elf_scan_table(p, len, sh, shnum, i, name, hit);
	free(sh);
	return hit->score ? 0 : -ENOENT;
}

/*
 * A deleted mapping that is our own local file, loaded through a memfd: the
 * mapped first segment (ELF headers, build id, dynamic symbols) must equal
 * the file's, or its symbols could be another build's. -ESTALE if not.
 */
static int open_local_copy(const struct inject_target *t, const struct map_entry *m)
{
	size_t len = m->end - m->start < LOCAL_COPY_CHECK ? m->end - m->start : LOCAL_COPY_CHECK;
	char *mapped = malloc(len), *ours = malloc(len);
	int fd = open(t->module_file, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0 || !mapped || !ours)
		rc = fd < 0 ? -errno : -ENOMEM;
	else if (pread(t->mem_fd, mapped, len, (off_t)m->start) != (ssize_t)len ||
		 pread(fd, ours, len, (off_t)m->offset) != (ssize_t)len || memcmp(mapped, ours, len))
		rc = -ESTALE;
	free(mapped);
	free(ours);
	if (rc && fd >= 0)
		close(fd);
	return rc ? rc : fd;
}

/*
 * The file behind a mapping, through the target's root; once replaced (a
 * package upgrade), only map_files has the mapped version (CAP_SYS_ADMIN).
 * A memfd (our agent) is deleted from the start: without CAP_SYS_ADMIN, the
 * local file it was filled from stands in, once proven identical.
 */
static int open_mapped_file(const struct inject_target *t, const struct map_entry *m)
{
	char path[PATH_MAX + 64];
	int fd;

	if (m->deleted)
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, t->pid,
			 m->start, m->end);
	else
		snprintf(path, sizeof(path), "/proc/%d/root%s", t->pid, m->path);
	/* O_NONBLOCK: the target's owner may have put a FIFO there meanwhile. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && m->deleted && t->module_file && strncmp(m->path, "/memfd:", 7) == 0)
		return open_local_copy(t, m);
	return fd < 0 ? -errno : fd;
}

/* Address of symbol in the module mapped by m (the module's first mapping). */
static int resolve_in_file(const struct inject_target *t, const struct map_entry *m, const char *symbol,
			   uint64_t *addr, bool *ifunc, char *err, size_t errlen)
{
	struct elf_hit hit = { 0 };
	uint64_t vaddr = 0;
	Elf64_Ehdr eh;
	struct stat st;
	uint8_t *p;
	int fd = open_mapped_file(t, m), rc;

	if (fd < 0)
		return inject_fail(err, errlen, fd, "cannot open %s: %s", m->path, strerror(-fd));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(eh)) {
		close(fd);
		return inject_fail(err, errlen, -ENOEXEC, "%s: not an ELF file", m->path);
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return inject_fail(err, errlen, -errno, "cannot map %s: %s", m->path, strerror(errno));
	memcpy(&eh, p, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64)
		rc = inject_fail(err, errlen, -ENOEXEC, "%s: not an x86-64 ELF64 file", m->path);
	else if (elf_vaddr_of_offset(p, st.st_size, &eh, m->offset, &vaddr))
		rc = inject_fail(err, errlen, -ENOEXEC, "%s: no PT_LOAD maps offset 0x%" PRIx64, m->path,
			  m->offset);
	else if ((rc = elf_lookup(p, st.st_size, &eh, symbol, &hit)))
		rc = inject_fail(err, errlen, rc, "symbol %s not found in %s", symbol, m->path);
	munmap(p, st.st_size);
	if (rc)
		return rc;
	*ifunc = hit.type == STT_GNU_IFUNC;
	*addr = hit.shndx == SHN_ABS ? hit.value : m->start - vaddr + hit.value;
	return 0;
}

/* First mapping of a file whose name matches glob; m points into *maps (free it). */
static int find_module(pid_t pid, const char *glob, char **maps, struct map_entry *m)
{
	char *cursor;
	int rc = inject_read_maps(pid, maps);

	for (cursor = rc ? NULL : *maps; cursor && inject_maps_next(&cursor, m);)
		if (m->path[0] == '/' && inject_matches_any(m->path, &glob, 1))
			return 0;
	return rc ? rc : -ENOENT;
}

int inject_resolve(struct inject_target *t, const char *module_glob, const char *symbol,
		   uint64_t *addr, char *err, size_t errlen)
{
	struct map_entry m;
	bool ifunc = false;
	char *maps = NULL;
	int rc;

	if (t->execed)
		return inject_fail(err, errlen, -ESTALE, "PID %d called execve: detach and attach again",
			    t->pid);
	rc = find_module(t->pid, module_glob, &maps, &m);
	if (!rc)
		rc = resolve_in_file(t, &m, symbol, addr, &ifunc, err, errlen);
	else if (rc == -ENOENT)
		inject_fail(err, errlen, rc, "no module matching %s in PID %d", module_glob, t->pid);
	else
		inject_fail(err, errlen, rc, "cannot read the maps of PID %d: %s", t->pid, strerror(-rc));
	free(maps);
	if (rc || !ifunc)
		return rc;
	/* x86-64 IFUNC resolvers take no arguments and lock nothing: ask the target's. */
	return inject_call(t, *addr, NULL, 0, NULL, 0, false, RESOLVER_TIMEOUT_MS, addr, err,
			   errlen);
}

bool inject_has_module(struct inject_target *t, const char *module_glob)
{
	struct map_entry m;
	char *maps = NULL;
	int rc = find_module(t->pid, module_glob, &maps, &m);

	free(maps);
	return rc == 0;
}
