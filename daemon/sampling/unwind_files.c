// SPDX-License-Identifier: MIT
/*
 * ELF files shared by a session's DWARF unwinders (see unwind_files.h): a
 * bounded list of the files mapped so far, each with its descriptor, its
 * PT_LOAD segments and, once a walk needed it, its libelf handle, which
 * libelf counts (elf_begin on a handle returns it, counted once more; each
 * libdwfl session elf_ends its count).
 */
#include "daemon/sampling/unwind_files.h"

#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Files held for the session at once: each is a descriptor. Past it the
 * files no process uses any more make room, else a process reads its own.
 */
#define UNWIND_FILES_MAX 256

struct unwind_files {
	struct unwind_file *v[UNWIND_FILES_MAX];
	size_t n;
};

struct unwind_files *unwind_files_new(void)
{
	return calloc(1, sizeof(struct unwind_files));
}

void unwind_files_free(struct unwind_files *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->n; i++)
		unwind_file_put(fs->v[i]);
	free(fs);
}

static bool id_known(const struct unwind_file_id *id)
{
	return id && (id->dev || id->ino);
}

static bool unchanged(const struct unwind_file *f)
{
	struct stat st;

	return fstat(f->fd, &st) == 0 && st.st_size == f->size &&
	       st.st_mtim.tv_sec == f->mtime.tv_sec && st.st_mtim.tv_nsec == f->mtime.tv_nsec;
}

/* Where fs holds id, or fs->n. */
static size_t index_of(const struct unwind_files *fs, const struct unwind_file_id *id)
{
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i]->id.dev == id->dev && fs->v[i]->id.ino == id->ino)
			break;
	return i;
}

struct unwind_file *unwind_files_find(struct unwind_files *fs, const struct unwind_file_id *id)
{
	size_t i;

	if (!fs || !id_known(id))
		return NULL;
	i = index_of(fs, id);
	return i < fs->n && unchanged(fs->v[i]) ? unwind_file_ref(fs->v[i]) : NULL;
}

/* Room for one more: files only the cache holds go first. */
static bool make_room(struct unwind_files *fs)
{
	size_t k = 0;

	if (fs->n < UNWIND_FILES_MAX)
		return true;
	for (size_t i = 0; i < fs->n; i++) {
		if (fs->v[i]->refs == 1)
			unwind_file_put(fs->v[i]);
		else
			fs->v[k++] = fs->v[i];
	}
	fs->n = k;
	return fs->n < UNWIND_FILES_MAX;
}

/* The PT_LOAD segments of an x86-64 ET_EXEC or ET_DYN file; -ENOEXEC otherwise. */
static int read_loads(struct unwind_file *f)
{
	Elf *e = elf_begin(f->fd, ELF_C_READ, NULL);
	size_t phnum, n = 0;
	GElf_Ehdr eh;
	GElf_Phdr ph;
	int rc = -ENOEXEC;

	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getphdrnum(e, &phnum) < 0)
		goto out;
	f->loads = calloc(phnum ? phnum : 1, sizeof(*f->loads));
	if (!f->loads) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < phnum; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
			f->loads[n++] = (struct unwind_load){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
							      ph.p_memsz, ph.p_align };
	f->n_loads = n;
	f->is_exec = eh.e_type == ET_EXEC;
	rc = n ? 0 : -ENOEXEC;
out:
	elf_end(e);
	return rc;
}

struct unwind_file *unwind_file_open(struct unwind_files *fs, const struct unwind_file_id *id,
				     int fd, int *err)
{
	struct unwind_file *f = calloc(1, sizeof(*f));
	struct stat st;
	size_t i;

	if (!f) {
		close(fd);
		*err = -ENOMEM;
		return NULL;
	}
	f->refs = 1;
	f->fd = fd;
	if (fstat(fd, &st) == 0) {
		f->size = st.st_size;
		f->mtime = st.st_mtim;
	}
	*err = read_loads(f);
	if (*err) {
		unwind_file_put(f);
		return NULL;
	}
	if (!fs || !id_known(id))
		return f;
	f->id = *id;
	i = index_of(fs, id);
	if (i < fs->n) { /* rewritten in place since: this one stands for it from now on */
		unwind_file_put(fs->v[i]);
		fs->v[i] = unwind_file_ref(f);
	} else if (make_room(fs)) {
		fs->v[fs->n++] = unwind_file_ref(f);
	}
	return f;
}

struct unwind_file *unwind_file_ref(struct unwind_file *f)
{
	f->refs++;
	return f;
}

void unwind_file_put(struct unwind_file *f)
{
	if (!f || --f->refs)
		return;
	if (f->elf)
		elf_end(f->elf); /* ours; each libdwfl session ended its own count */
	close(f->fd);
	free(f->loads);
	free(f);
}

Elf *unwind_file_elf(struct unwind_file *f)
{
	if (!f->elf)
		f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
	/* the same handle, counted once more (libelf's dup of a non-archive) */
	return f->elf ? elf_begin(-1, ELF_C_READ, f->elf) : NULL;
}
