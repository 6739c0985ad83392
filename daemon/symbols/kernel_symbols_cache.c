// SPDX-License-Identifier: MIT
/*
 * Saved copies of the kernel symbol table (see kernel_symbols_cache.h). The
 * file: a header, the functions (32 bytes each, sorted), the modules, then
 * the names, each NUL-terminated. A copy is read whole and checked field by
 * field before a table is made of it; the names stay in the buffer read.
 */
#include "daemon/symbols/kernel_symbols_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/kernel_symbols_internal.h"

#define CACHE_FILE "kallsyms.cache"
#define CACHE_MAGIC "PRFDKSY1"
#define CACHE_MAX_BYTES (512u << 20)
#define CACHE_MAX_MODULES (1u << 16)

struct saved_header {
	char magic[8];
	uint64_t key, n_functions, n_modules, modules_bytes, names_bytes, bad_lines, reserved;
};

struct saved_function {
	uint64_t start, end;
	uint32_t name_off, name_len, module, global;
};

struct saved_module_head {
	uint64_t start, end;
	uint32_t name_len, reserved;
};

/* ---- the key ----------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/*
 * Hashes the file's bytes into *h; false when it cannot be read. A kernel
 * without modules has no /proc/modules: that absence is hashed, when allowed.
 */
static bool hash_file(uint64_t *h, const char *path, bool may_be_absent)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT && may_be_absent) {
		*h = fnv1a(*h, "-", 1);
		return true;
	}
	if (fd < 0)
		return false;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		*h = fnv1a(*h, buf, (size_t)n);
	close(fd);
	return n == 0;
}

uint64_t kernel_symbols_cache_key(void)
{
	uint64_t h = fnv1a(14695981039346656037ull, CACHE_MAGIC, sizeof(CACHE_MAGIC));

	if (!hash_file(&h, "/proc/sys/kernel/random/boot_id", false) ||
	    !hash_file(&h, "/proc/modules", true) ||
	    !hash_file(&h, "/proc/sys/kernel/kptr_restrict", false))
		return 0;
	return h ? h : 1;
}

/* ---- writing ----------------------------------------------------------------- */

struct out_buf {
	char *p;
	size_t len, cap;
};

static void put(struct out_buf *o, const void *data, size_t len)
{
	memcpy(o->p + o->len, data, len);
	o->len += len;
}

int kernel_symbols_save(const struct kernel_symbols *k, int fd, uint64_t key)
{
	struct saved_header h = { .key = key, .n_functions = k->n, .n_modules = k->n_modules,
				  .bad_lines = k->bad_lines };
	struct out_buf o = { 0 };
	size_t names = 0, name_off = 0;
	int err = 0;

	for (size_t i = 0; i < k->n; i++)
		names += k->v[i].name_len + 1;
	for (size_t i = 0; i < k->n_modules; i++)
		h.modules_bytes += sizeof(struct saved_module_head) + strlen(k->modules[i].name);
	if (names > UINT32_MAX)
		return -E2BIG;
	h.names_bytes = names;
	memcpy(h.magic, CACHE_MAGIC, sizeof(h.magic));
	o.cap = sizeof(h) + k->n * sizeof(struct saved_function) + h.modules_bytes + names;
	if (!(o.p = malloc(o.cap)))
		return -ENOMEM;
	put(&o, &h, sizeof(h));
	for (size_t i = 0; i < k->n; i++) {
		const struct kernel_function *f = &k->v[i];
		struct saved_function sf = { f->start, f->end, (uint32_t)name_off, f->name_len,
					     f->module, f->global };

		put(&o, &sf, sizeof(sf));
		name_off += f->name_len + 1;
	}
	for (size_t i = 0; i < k->n_modules; i++) {
		const struct kernel_module *m = &k->modules[i];
		struct saved_module_head mh = { m->start, m->end, (uint32_t)strlen(m->name), 0 };

		put(&o, &mh, sizeof(mh));
		put(&o, m->name, mh.name_len);
	}
	for (size_t i = 0; i < k->n; i++)
		put(&o, k->v[i].name, k->v[i].name_len + 1);
	for (size_t done = 0; done < o.len && !err;) {
		ssize_t n = write(fd, o.p + done, o.len - done);

		if (n < 0 && errno != EINTR)
			err = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	free(o.p);
	return err;
}

/* ---- reading ----------------------------------------------------------------- */

static char *read_whole(int fd, size_t *len)
{
	struct stat st;
	char *buf;
	size_t done = 0;

	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(struct saved_header) ||
	    (uint64_t)st.st_size > CACHE_MAX_BYTES)
		return NULL;
	if (!(buf = malloc((size_t)st.st_size)))
		return NULL;
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n <= 0 && !(n < 0 && errno == EINTR)) {
			free(buf);
			return NULL;
		}
		if (n > 0)
			done += (size_t)n;
	}
	*len = done;
	return buf;
}

/* The modules' section into k (modules[0] the kernel's, as table_new made it). */
static bool restore_modules(struct kernel_symbols *k, const char *p, size_t len, size_t n)
{
	struct kernel_module *v = realloc(k->modules, n * sizeof(*v));

	if (!v)
		return false;
	k->modules = v;
	k->cap_modules = n;
	for (size_t i = 0; i < n; i++) {
		struct saved_module_head mh;

		if (len < sizeof(mh))
			return false;
		memcpy(&mh, p, sizeof(mh));
		p += sizeof(mh);
		len -= sizeof(mh);
		if (mh.name_len < 3 || mh.name_len > KSYMS_MAX_MODULE_LEN + 2 || mh.name_len > len ||
		    p[0] != '[' || p[mh.name_len - 1] != ']' || memchr(p, '\0', mh.name_len) ||
		    mh.start > mh.end)
			return false;
		if (i == 0 && (mh.name_len != strlen(k->modules[0].name) ||
			       memcmp(p, k->modules[0].name, mh.name_len)))
			return false;
		if (i > 0 && !(k->modules[i].name = strndup(p, mh.name_len)))
			return false;
		k->modules[i].start = mh.start;
		k->modules[i].end = mh.end;
		k->n_modules = i + 1;
		p += mh.name_len;
		len -= mh.name_len;
	}
	return len == 0;
}

/* The functions into k, their names pointing into names (names_bytes long). */
static bool restore_functions(struct kernel_symbols *k, const char *p, size_t n,
			      const char *names, size_t names_bytes)
{
	if (!(k->v = malloc(n * sizeof(*k->v))))
		return false;
	k->cap = n;
	for (size_t i = 0; i < n; i++) {
		struct saved_function sf;

		memcpy(&sf, p + i * sizeof(sf), sizeof(sf));
		if (sf.name_len == 0 || sf.name_len > KSYMS_MAX_NAME_LEN ||
		    (uint64_t)sf.name_off + sf.name_len >= names_bytes ||
		    names[sf.name_off + sf.name_len] != '\0' ||
		    memchr(names + sf.name_off, '\0', sf.name_len) || sf.module >= k->n_modules ||
		    sf.global > 1 || sf.start >= sf.end || (i > 0 && sf.start <= k->v[i - 1].start))
			return false;
		k->v[i] = (struct kernel_function){ .start = sf.start, .end = sf.end,
						    .name = names + sf.name_off,
						    .module = sf.module, .name_len = sf.name_len,
						    .name_off = sf.name_off, .global = sf.global };
		k->n = i + 1;
	}
	return true;
}

struct kernel_symbols *kernel_symbols_restore(int fd, uint64_t key)
{
	struct saved_header h;
	struct kernel_symbols *k;
	size_t len, functions_bytes;
	char *buf = read_whole(fd, &len);

	if (!buf) {
		errno = EINVAL;
		return NULL;
	}
	memcpy(&h, buf, sizeof(h));
	functions_bytes = (size_t)h.n_functions * sizeof(struct saved_function);
	if (memcmp(h.magic, CACHE_MAGIC, sizeof(h.magic)) || h.n_functions == 0 ||
	    h.n_functions > KSYMS_MAX_SYMBOLS || h.n_modules == 0 ||
	    h.n_modules > CACHE_MAX_MODULES || h.modules_bytes > len || h.names_bytes > len ||
	    h.names_bytes > UINT32_MAX ||
	    len != sizeof(h) + functions_bytes + h.modules_bytes + h.names_bytes) {
		free(buf);
		errno = EINVAL;
		return NULL;
	}
	if (h.key != key) {
		free(buf);
		errno = ESTALE;
		return NULL;
	}
	if (!(k = kernel_symbols_table_new())) {
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	free(k->pool);
	k->pool = buf; /* the names stay where they were read; freed with the table */
	k->bad_lines = h.bad_lines;
	if (!restore_modules(k, buf + sizeof(h) + functions_bytes, h.modules_bytes, h.n_modules) ||
	    !restore_functions(k, buf + sizeof(h), h.n_functions,
			       buf + sizeof(h) + functions_bytes + h.modules_bytes, h.names_bytes)) {
		kernel_symbols_free(k);
		errno = EINVAL;
		return NULL;
	}
	return k;
}

/* ---- the copy in a directory ------------------------------------------------- */

/* A file of root's only, or a directory no one else may write: else no copy is used. */
static bool owned_by_root(int fd_or_neg, const char *path, bool directory)
{
	struct stat st;

	if (fd_or_neg >= 0 ? fstat(fd_or_neg, &st) : lstat(path, &st))
		return false;
	if (st.st_uid != 0)
		return false;
	return directory ? S_ISDIR(st.st_mode) && !(st.st_mode & 022)
			 : S_ISREG(st.st_mode) && !(st.st_mode & 077);
}

static struct kernel_symbols *read_copy(const char *dir, uint64_t key)
{
	char path[4096];
	struct kernel_symbols *k = NULL;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, CACHE_FILE) >= (int)sizeof(path) ||
	    !owned_by_root(-1, dir, true))
		return NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (owned_by_root(fd, path, false))
		k = kernel_symbols_restore(fd, key);
	close(fd);
	return k;
}

/* Written beside, then renamed over: a reader sees the old copy or the new, whole. */
static void save_copy(const char *dir, const struct kernel_symbols *k, uint64_t key)
{
	char tmp[4096], path[4096];
	int fd, err;

	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, CACHE_FILE) >= (int)sizeof(tmp) ||
	    snprintf(path, sizeof(path), "%s/%s", dir, CACHE_FILE) >= (int)sizeof(path))
		return;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return;
	if (!owned_by_root(-1, dir, true))
		return;
	fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
	if (fd < 0)
		return;
	err = kernel_symbols_save(k, fd, key);
	if (close(fd) || err || rename(tmp, path))
		unlink(tmp);
}

struct kernel_symbols *kernel_symbols_load_cached(const char *dir, char *err, size_t errlen)
{
	uint64_t key = geteuid() == 0 ? kernel_symbols_cache_key() : 0;
	struct kernel_symbols *k = key ? read_copy(dir, key) : NULL;

	if (k)
		return k;
	k = kernel_symbols_load(NULL, err, errlen);
	if (k && key)
		save_copy(dir, k, key);
	return k;
}
