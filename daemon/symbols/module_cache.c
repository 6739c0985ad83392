// SPDX-License-Identifier: MIT
/*
 * ELF modules shared by the processes of a session (see module_cache.h): a
 * list of the files loaded so far, each with the identity it was opened with.
 */
#include "daemon/symbols/module_cache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/elf_module.h"

#define MAX_CACHED 4096 /* files of one session; past it, each process reads its own */

struct cached {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct elf_module *m;
};

struct module_cache {
	struct cached *v;
	size_t n, cap;
};

struct module_cache *module_cache_new(void)
{
	return calloc(1, sizeof(struct module_cache));
}

void module_cache_free(struct module_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		elf_module_free(c->v[i].m);
	free(c->v);
	free(c);
}

static bool same_file(const struct cached *e, const struct stat *st, const char *path)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
	       e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec &&
	       strcmp(e->m->path, path) == 0;
}

/* Keeps a reference to m (loaded from the file st describes); silently not past the cap. */
static void cache_add(struct module_cache *c, struct elf_module *m, const struct stat *st)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct cached *v = cap <= MAX_CACHED ? realloc(c->v, cap * sizeof(*v)) : NULL;

		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct cached){ st->st_dev, st->st_ino, st->st_size, st->st_mtim,
					elf_module_ref(m) };
}

/*
 * The module loaded from the file the kernel named m's mapping by (MMAP2's
 * device and inode, the same numbers fstat gave when it was loaded): no
 * open through /proc/PID/root, no fstat, per process. NULL when none is.
 */
static struct elf_module *cached_by_identity(const struct module_cache *c,
					     const struct elf_module *m)
{
	if (m->mapped_dev == 0 && m->mapped_ino == 0)
		return NULL;
	for (size_t i = 0; i < c->n; i++)
		if ((uint64_t)c->v[i].dev == m->mapped_dev && (uint64_t)c->v[i].ino == m->mapped_ino &&
		    strcmp(c->v[i].m->path, m->path) == 0)
			return c->v[i].m;
	return NULL;
}

struct elf_module *module_cache_load(struct module_cache *c, struct elf_module *m, pid_t pid,
				     uint64_t start, uint64_t end)
{
	struct elf_module *same = cached_by_identity(c, m);
	int fd;
	struct stat st;
	bool known;

	if (same)
		return elf_module_ref(same);
	fd = elf_module_open(m, pid, start, end);
	if (fd < 0) {
		elf_module_load(m, pid, start, end); /* says why it has no symbols */
		return elf_module_ref(m);
	}
	known = fstat(fd, &st) == 0;
	if (known) {
		for (size_t i = 0; i < c->n; i++) {
			if (same_file(&c->v[i], &st, m->path)) {
				close(fd);
				return elf_module_ref(c->v[i].m);
			}
		}
	}
	elf_module_load_fd(m, fd, pid);
	close(fd);
	if (known)
		cache_add(c, m, &st);
	return elf_module_ref(m);
}
