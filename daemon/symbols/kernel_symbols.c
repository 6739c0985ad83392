// SPDX-License-Identifier: MIT
/*
 * /proc/kallsyms table (see kernel_symbols.h): owns the kernel's and the
 * modules' text symbols, sorted and folded to one name per address, and the
 * module names. Lines are validated one by one; a bad line is counted and
 * skipped, never trusted. Built once, then only read: no global state;
 * shared by reference (kernel_symbols_ref) between the sessions of a cache.
 */
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/kernel_symbols_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct kernel_symbols *kernel_symbols_ref(struct kernel_symbols *k)
{
	atomic_fetch_add(&k->refs, 1);
	return k;
}

void kernel_symbols_free(struct kernel_symbols *k)
{
	size_t i;

	if (!k || atomic_fetch_sub(&k->refs, 1) > 1)
		return;
	for (i = 0; i < k->n_modules; i++)
		free(k->modules[i].name);
	free(k->modules);
	free(k->v);
	free(k->pool);
	free(k);
}

/* ---- parsing ----------------------------------------------------------------- */

struct kallsyms_line {
	uint64_t addr;
	char type;
	const char *name, *module;   /* module NULL for the kernel itself */
	size_t name_len, module_len;
};

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A token of 1..max bytes up to one of stops (or the end); advances *p. */
static size_t token(const char **p, const char *stops, size_t max)
{
	size_t len = strcspn(*p, stops);

	if (len == 0 || len > max)
		return 0;
	*p += len;
	return len;
}

/* "ADDR TYPE NAME" or "ADDR TYPE NAME\t[MODULE]", without the newline. */
static bool parse_line(const char *p, struct kallsyms_line *l)
{
	int digits = 0, d;

	l->addr = 0;
	for (; (d = hex_value(*p)) >= 0; p++) {
		if (++digits > 16)
			return false;
		l->addr = l->addr << 4 | (uint64_t)d;
	}
	if (!digits || p[0] != ' ' || !((p[1] | 0x20) >= 'a' && (p[1] | 0x20) <= 'z') ||
	    p[2] != ' ')
		return false;
	l->type = p[1];
	p += 3;
	l->name = p;
	l->name_len = token(&p, " \t", KSYMS_MAX_NAME_LEN);
	if (!l->name_len)
		return false;
	l->module = NULL;
	l->module_len = 0;
	if (*p == '\0')
		return true;
	if (p[0] != '\t' || p[1] != '[')
		return false;
	p += 2;
	l->module = p;
	l->module_len = token(&p, "] \t/", KSYMS_MAX_MODULE_LEN);
	return l->module_len && p[0] == ']' && p[1] == '\0';
}

static int pool_add(struct kernel_symbols *k, const char *s, size_t len, size_t *off)
{
	if (k->pool_cap - k->pool_len < len + 1) {
		size_t cap = k->pool_cap ? k->pool_cap * 2 : 1u << 20;
		char *p;

		while (cap - k->pool_len < len + 1)
			cap *= 2;
		p = realloc(k->pool, cap);
		if (!p)
			return -ENOMEM;
		k->pool = p;
		k->pool_cap = cap;
	}
	memcpy(k->pool + k->pool_len, s, len);
	k->pool[k->pool_len + len] = '\0';
	*off = k->pool_len;
	k->pool_len += len + 1;
	return 0;
}

/* Index of the module named "[name]", added if new; modules[0] is the kernel. */
static int module_index(struct kernel_symbols *k, const char *name, size_t len, uint32_t *out)
{
	size_t i;

	for (i = k->n_modules; i-- > 1;) { /* the last one first: a module's lines are together */
		if (strlen(k->modules[i].name) == len + 2 &&
		    strncmp(k->modules[i].name + 1, name, len) == 0) {
			*out = (uint32_t)i;
			return 0;
		}
	}
	if (k->n_modules == k->cap_modules) {
		size_t cap = k->cap_modules * 2;
		struct kernel_module *v = realloc(k->modules, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		k->modules = v;
		k->cap_modules = cap;
	}
	k->modules[k->n_modules].name = malloc(len + 3);
	if (!k->modules[k->n_modules].name)
		return -ENOMEM;
	snprintf(k->modules[k->n_modules].name, len + 3, "[%.*s]", (int)len, name);
	*out = (uint32_t)k->n_modules++;
	return 0;
}

static int add_function(struct kernel_symbols *k, const struct kallsyms_line *l)
{
	struct kernel_function *f;
	uint32_t module = 0;

	if (k->n == KSYMS_MAX_SYMBOLS)
		return -E2BIG;
	if (l->module && module_index(k, l->module, l->module_len, &module) < 0)
		return -ENOMEM;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 4096;

		f = realloc(k->v, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		k->v = f;
		k->cap = cap;
	}
	f = &k->v[k->n];
	*f = (struct kernel_function){ .start = l->addr, .module = module,
				       .name_len = (uint32_t)l->name_len,
				       .global = l->type != 't' }; /* T, W and w */
	if (pool_add(k, l->name, l->name_len, &f->name_off) < 0)
		return -ENOMEM;
	k->n++;
	return 0;
}

static bool is_text_type(char type)
{
	return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* Reads every line; *nonzero tells whether any text symbol had an address. */
static int read_lines(struct kernel_symbols *k, FILE *f, bool *nonzero)
{
	struct kallsyms_line l;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int err = 0;

	*nonzero = false;
	while (err == 0 && (len = getline(&line, &cap, f)) > 0) {
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if ((size_t)len != strlen(line) || !parse_line(line, &l)) {
			k->bad_lines++;
			continue;
		}
		if (!is_text_type(l.type))
			continue;
		*nonzero |= l.addr != 0;
		err = add_function(k, &l);
	}
	free(line);
	return err;
}

/* ---- folding ----------------------------------------------------------------- */

/* Address, then the preferred alias first: global over local, shortest, byte order. */
static int function_cmp(const void *pa, const void *pb)
{
	const struct kernel_function *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->global != b->global)
		return a->global ? -1 : 1;
	if (a->name_len != b->name_len)
		return a->name_len < b->name_len ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Keeps the first of each address, then sets ends and the modules' spans. */
static void fold_and_close(struct kernel_symbols *k)
{
	size_t i, n = 0;

	for (i = 0; i < k->n; i++)
		k->v[i].name = k->pool + k->v[i].name_off;
	qsort(k->v, k->n, sizeof(*k->v), function_cmp);
	for (i = 0; i < k->n; i++)
		if (n == 0 || k->v[i].start != k->v[n - 1].start)
			k->v[n++] = k->v[i];
	k->n = n;
	for (i = 0; i < n; i++) {
		struct kernel_function *f = &k->v[i];
		struct kernel_module *m = &k->modules[f->module];

		if (i + 1 < n && k->v[i + 1].module == f->module)
			f->end = k->v[i + 1].start;
		else /* no size in kallsyms: to the end of the page after the one it starts in */
			f->end = (f->start | (KSYMS_PAGE_BYTES - 1)) + 1 + KSYMS_PAGE_BYTES;
		if (f->end < f->start)
			f->end = UINT64_MAX;
		if (!m->end || f->start < m->start)
			m->start = f->start;
		if (f->end > m->end)
			m->end = f->end;
	}
}

struct kernel_symbols *kernel_symbols_table_new(void)
{
	struct kernel_symbols *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	atomic_init(&k->refs, 1);
	k->modules = calloc(8, sizeof(*k->modules));
	if (k->modules)
		k->modules[0].name = strdup(KERNEL_SYMBOLS_MAPPING);
	if (!k->modules || !k->modules[0].name) {
		free(k->modules);
		free(k);
		return NULL;
	}
	k->n_modules = 1;
	k->cap_modules = 8;
	atomic_init(&k->refs, 1);
	return k;
}

struct kernel_symbols *kernel_symbols_new(FILE *f, char *err, size_t errlen)
{
	struct kernel_symbols *k = kernel_symbols_table_new();
	bool nonzero;
	int e;

	if (!k) {
		snprintf(err, errlen, "kallsyms: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	e = read_lines(k, f, &nonzero);
	if (e == 0 && k->n == 0)
		e = -ENOENT;
	else if (e == 0 && !nonzero)
		e = -EPERM;
	if (e < 0) {
		snprintf(err, errlen, "kallsyms: %s",
			 e == -ENOENT ? "no text symbols"
			 : e == -EPERM ? "every address is zero: this reader may not see them"
			 : e == -E2BIG ? "too many symbols" : "out of memory");
		kernel_symbols_free(k);
		errno = -e;
		return NULL;
	}
	fold_and_close(k);
	return k;
}

static void read_kptr_restrict(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/kptr_restrict", "re");

	if (!f || !fgets(buf, (int)len, f))
		snprintf(buf, len, "?");
	buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

struct kernel_symbols *kernel_symbols_load(const char *path, char *err, size_t errlen)
{
	struct kernel_symbols *k;
	char restrict_val[16];
	FILE *f;
	int e;

	if (!path)
		path = "/proc/kallsyms";
	f = fopen(path, "re");
	if (!f) {
		e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	k = kernel_symbols_new(f, err, errlen);
	e = errno;
	fclose(f);
	if (!k && e == EPERM) {
		read_kptr_restrict(restrict_val, sizeof(restrict_val));
		snprintf(err, errlen,
			 "%s: every address is zero (kernel.kptr_restrict=%s; needs CAP_SYSLOG "
			 "or kptr_restrict=0)", path, restrict_val);
	}
	errno = e;
	return k;
}

/* ---- lookup ------------------------------------------------------------------ */

int kernel_symbols_lookup(const struct kernel_symbols *k, uint64_t pc, struct symbol_info *out)
{
	size_t lo = 0, hi = k->n;
	const struct kernel_function *f;
	const struct kernel_module *m;

	memset(out, 0, sizeof(*out));
	out->rel_pc = pc;
	out->mapping_path = KERNEL_SYMBOLS_MAPPING;
	/* first function starting above pc */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->v[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= k->v[lo - 1].end)
		return -ENOENT;
	f = &k->v[lo - 1];
	m = &k->modules[f->module];
	out->function = f->name;
	out->function_offset = pc - f->start;
	out->mapping_path = m->name;
	out->map_start = m->start;
	out->map_end = m->end;
	return 0;
}

void kernel_symbols_get_stats(const struct kernel_symbols *k, struct kernel_symbols_stats *out)
{
	*out = (struct kernel_symbols_stats){ k->n, k->n_modules, k->bad_lines };
}
