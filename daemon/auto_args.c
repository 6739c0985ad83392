// SPDX-License-Identifier: MIT
/*
 * --auto-args in profd: an agent's query (the functions it is about to
 * patch) answered from DWARF, the descriptions kept to name the values it
 * then sends. Owns the session's open debug info, one per module file
 * (device and inode through /proc/PID/root: the same path in two mount
 * namespaces may be two files). Opens only files the process has mapped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "common/mono_clock.h"
#include "daemon/auto_args.h"
#include "daemon/server.h"
#include "profd.pb-c.h"

/* Bounds what a hostile query makes profd look up (the agent's ids are 1..n). */
#define AUTO_ARGS_MAX_ID (1u << 22)
#define AUTO_ARGS_SPECS_MAX 64

struct debug_module {
	dev_t dev;
	ino_t ino;
	struct dwarf_params_module *m; /* NULL: no DWARF (err says why) */
	int err;
};

struct auto_args_names {
	struct dwarf_function **by_id; /* the agent's id -> its description, NULL: none */
	uint32_t n;
	struct auto_args_names *next;
};

struct auto_args {
	struct arg_spec specs[AUTO_ARGS_SPECS_MAX];
	size_t n_specs;
	char *debug_root;
	struct debug_module *mods;
	size_t n_mods, cap_mods;
	struct auto_args_names *names; /* every agent's, kept to the session's end */
	struct auto_args_stats stats;
	char late_named[AUTO_ARGS_LATE_NAMED][AUTO_ARGS_LATE_TEXT];
};

static void add_specs(struct auto_args *aa, char **texts, size_t n, bool retval)
{
	char err[256];

	for (size_t i = 0; i < n && aa->n_specs < AUTO_ARGS_SPECS_MAX; i++)
		if (!arg_spec_parse(texts[i], retval, &aa->specs[aa->n_specs], err, sizeof(err)))
			aa->n_specs++;
}

struct auto_args *auto_args_new(char **arg_specs, size_t n_arg_specs, char **retval_specs,
				size_t n_retval_specs, const char *debug_root)
{
	struct auto_args *aa = calloc(1, sizeof(*aa));

	if (!aa)
		return NULL;
	if (debug_root && !(aa->debug_root = strdup(debug_root))) {
		free(aa);
		return NULL;
	}
	add_specs(aa, arg_specs, n_arg_specs, false);
	add_specs(aa, retval_specs, n_retval_specs, true);
	return aa;
}

static void names_free(struct auto_args_names *n)
{
	for (uint32_t i = 0; i < n->n; i++)
		if (n->by_id[i])
			dwarf_function_free(n->by_id[i]);
	free(n->by_id);
	free(n);
}

void auto_args_free(struct auto_args *aa)
{
	if (!aa)
		return;
	for (size_t i = 0; i < aa->n_mods; i++)
		if (aa->mods[i].m)
			dwarf_params_close(aa->mods[i].m);
	while (aa->names) {
		struct auto_args_names *next = aa->names->next;

		names_free(aa->names);
		aa->names = next;
	}
	free(aa->mods);
	free(aa->debug_root);
	free(aa);
}

/*
 * The file-backed mappings of pid as /proc/PID/maps gives them, one line
 * each ("... DEV INODE PATH"), NUL-ended, in one buffer: a module the agent
 * names must be one of them. NULL when unreadable.
 */
static char *mapped_files(pid_t pid, size_t *len)
{
	char path[64], *line = NULL, *out = calloc(1, 1);
	size_t cap = 0, n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!out || !(f = fopen(path, "re"))) {
		free(out);
		return NULL;
	}
	while (out && getline(&line, &cap, f) > 0) {
		size_t l = strcspn(line, "\n"); /* a module's several mappings repeat it: cheap enough */
		char *grown;

		if (!strchr(line, '/'))
			continue;
		if (!(grown = realloc(out, n + l + 2))) {
			free(out);
			out = NULL;
			break;
		}
		out = grown;
		memcpy(out + n, line, l);
		out[n + l] = '\0';
		n += l + 1;
	}
	free(line);
	fclose(f);
	*len = n;
	return out;
}

/*
 * Whether module (st: the file through /proc/PID/root) is mapped: by path,
 * or by device and inode (the loader's name may be a symlink's, as
 * /lib/x86_64-linux-gnu/libc.so.6 for /usr/lib/... after the usr merge).
 */
static bool file_mapped(const char *maps, size_t len, const char *module, const struct stat *st)
{
	for (size_t off = 0; off < len; off += strlen(maps + off) + 1) {
		unsigned maj, min;
		unsigned long long ino;
		int at = 0;

		if (sscanf(maps + off, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &ino, &at) < 3 ||
		    !at)
			continue;
		if (strcmp(maps + off + at, module) == 0 ||
		    (ino == st->st_ino && maj == major(st->st_dev) && min == minor(st->st_dev)))
			return true;
	}
	return false;
}

/*
 * The module's debug info, opened (or its failure remembered) once per
 * file; NULL when the process has no such file mapped.
 */
static struct debug_module *module_get(struct auto_args *aa, pid_t pid, const char *maps,
				       size_t maps_len, const char *module)
{
	char path[4352], root[4096];
	struct debug_module *d;
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, module);
	if (stat(path, &st) || !file_mapped(maps, maps_len, module, &st))
		return NULL;
	for (size_t i = 0; i < aa->n_mods; i++)
		if (aa->mods[i].dev == st.st_dev && aa->mods[i].ino == st.st_ino)
			return &aa->mods[i];
	if (aa->n_mods == aa->cap_mods) {
		size_t cap = aa->cap_mods ? 2 * aa->cap_mods : 8;
		struct debug_module *grown = realloc(aa->mods, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		aa->mods = grown;
		aa->cap_mods = cap;
	}
	d = &aa->mods[aa->n_mods++];
	*d = (struct debug_module){ st.st_dev, st.st_ino, NULL, 0 };
	/* the target's /usr/lib/debug: its libraries' debug files, in its mount namespace */
	snprintf(root, sizeof(root), "/proc/%d/root%s", (int)pid,
		 aa->debug_root ? aa->debug_root : "/usr/lib/debug");
	d->err = dwarf_params_open(path, root, DWARF_PARAMS_ARCH_AUTO, &d->m);
	if (d->err && d->err != -ENODATA)
		server_log("auto-args: %s (PID %d): %s", module, (int)pid, strerror(-d->err));
	return d;
}

/* The item that captures v, false when it cannot be captured (not placed, or no such format). */
static bool item_of(const struct dwarf_value *v, struct arg_item *it)
{
	static const uint8_t cls[] = {
		[DWARF_TYPE_INT] = ARG_CLASS_INT,     [DWARF_TYPE_CHAR] = ARG_CLASS_CHAR,
		[DWARF_TYPE_BOOL] = ARG_CLASS_BOOL,   [DWARF_TYPE_ENUM] = ARG_CLASS_ENUM,
		[DWARF_TYPE_FLOAT] = ARG_CLASS_FLOAT, [DWARF_TYPE_STRING] = ARG_CLASS_STR,
		[DWARF_TYPE_POINTER] = ARG_CLASS_PTR,
	};
	unsigned size = v->type.size;

	if (v->loc == DWARF_LOC_NONE || (unsigned)v->type.cls >= sizeof(cls) || !cls[v->type.cls])
		return false;
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return false;
	*it = (struct arg_item){ .index = (uint8_t)v->index, .cls = cls[v->type.cls],
				 .size = (uint8_t)size };
	if (it->cls == ARG_CLASS_INT && !v->type.is_signed)
		it->cls = ARG_CLASS_UINT;
	if (v->loc == DWARF_LOC_FP)
		it->source = v->index ? ARG_SRC_FP : ARG_SRC_FPRET;
	else
		it->source = v->index ? ARG_SRC_INT : ARG_SRC_RET;
	if ((it->source == ARG_SRC_INT && it->index > ARG_INT_INDEX_MAX) ||
	    (it->source == ARG_SRC_FP && it->index > ARG_FP_INDEX_MAX))
		return false;
	return (it->cls == ARG_CLASS_FLOAT) == (v->loc == DWARF_LOC_FP);
}

/* f's capture into c (its enter and exit arrays have room); false when nothing is placed. */
static bool capture_of(struct auto_args *aa, const struct dwarf_function *f,
		       Profd__AutoArgsCapture *c)
{
	struct arg_item it;

	for (size_t i = 0; i < f->n_params; i++) {
		if (!item_of(&f->params[i], &it))
			continue;
		if (c->n_enter == ARG_SPEC_ITEMS_MAX)
			aa->stats.capped++;
		else
			c->enter[c->n_enter++] = (uint32_t)arg_item_desc(&it);
	}
	if (item_of(&f->ret, &it))
		c->exit[c->n_exit++] = (uint32_t)arg_item_desc(&it);
	return c->n_enter || c->n_exit;
}

static bool explicit_spec(const struct auto_args *aa, const char *name)
{
	for (size_t i = 0; i < aa->n_specs; i++)
		if (arg_spec_matches(&aa->specs[i], name))
			return true;
	return false;
}

/* Its description (kept in names), or NULL: no DWARF, an explicit spec, a module not mapped. */
static struct dwarf_function *describe(struct auto_args *aa, pid_t pid, const char *paths,
				       size_t paths_len, const Profd__AutoArgsFunction *q)
{
	struct dwarf_function *f = NULL;
	struct debug_module *d;

	aa->stats.functions++;
	if (explicit_spec(aa, q->name)) {
		aa->stats.explicit++;
		return NULL;
	}
	if (!q->module || q->module[0] != '/')
		return NULL;
	d = module_get(aa, pid, paths, paths_len, q->module);
	if (!d || !d->m || dwarf_params_lookup(d->m, q->elf_address, q->name, &f))
		return NULL;
	aa->stats.described++;
	aa->stats.unplaced += (uint32_t)(f->n_params - f->n_supported);
	return f;
}

/*
 * A names table for ids up to the query's largest, chained into aa, with
 * the descriptions of prev (the agent's earlier queries: a module loaded
 * later is asked about alone); NULL when out of memory. A new table, not
 * prev grown: a forked child starts from its parent's, and both go on.
 */
static struct auto_args_names *names_new(struct auto_args *aa, const Profd__AutoArgsQuery *q,
					 const struct auto_args_names *prev)
{
	struct auto_args_names *n = calloc(1, sizeof(*n));
	uint32_t max = prev && prev->n ? prev->n - 1 : 0;

	for (size_t i = 0; i < q->n_functions; i++)
		if (q->functions[i]->id > max)
			max = q->functions[i]->id;
	if (!n || !(n->by_id = calloc((size_t)max + 1, sizeof(*n->by_id)))) {
		free(n);
		return NULL;
	}
	if (prev)
		memcpy(n->by_id, prev->by_id, prev->n * sizeof(*n->by_id));
	n->n = max + 1;
	n->next = aa->names;
	aa->names = n;
	return n;
}

/* The AutoArgs of q, packed into *reply; n gets the descriptions. */
static int answer(struct auto_args *aa, pid_t pid, const Profd__AutoArgsQuery *q,
		  struct auto_args_names *n, uint8_t **reply, size_t *reply_len)
{
	Profd__AutoArgs a = PROFD__AUTO_ARGS__INIT;
	Profd__AutoArgsCapture *caps = calloc(q->n_functions + 1, sizeof(*caps));
	Profd__AutoArgsCapture **ptrs = calloc(q->n_functions + 1, sizeof(*ptrs));
	uint32_t *descs = calloc((q->n_functions + 1) * (ARG_SPEC_ITEMS_MAX + 1), sizeof(*descs));
	size_t paths_len = 0;
	char *paths = mapped_files(pid, &paths_len);
	int err = -ENOMEM;

	if (!caps || !ptrs || !descs)
		goto out;
	for (size_t i = 0; i < q->n_functions; i++) {
		const Profd__AutoArgsFunction *fq = q->functions[i];
		Profd__AutoArgsCapture *c = &caps[a.n_functions];
		struct dwarf_function *f;

		if (n->by_id[fq->id]) /* listed twice: described once */
			continue;
		if (!(f = paths ? describe(aa, pid, paths, paths_len, fq) : NULL))
			continue;
		n->by_id[fq->id] = f;
		profd__auto_args_capture__init(c);
		c->id = fq->id;
		c->enter = descs + a.n_functions * (ARG_SPEC_ITEMS_MAX + 1);
		c->exit = c->enter + ARG_SPEC_ITEMS_MAX;
		if (capture_of(aa, f, c))
			ptrs[a.n_functions++] = c;
	}
	a.functions = ptrs;
	*reply_len = profd__auto_args__get_packed_size(&a);
	if ((*reply = malloc(*reply_len + 1))) {
		profd__auto_args__pack(&a, *reply);
		err = 0;
	}
out:
	free(paths);
	free(descs);
	free(ptrs);
	free(caps);
	return err;
}

int auto_args_answer(struct auto_args *aa, pid_t pid, const uint8_t *b, size_t len,
		     uint8_t **reply, size_t *reply_len, struct auto_args_names **names)
{
	uint64_t t0 = mono_clock_ns();
	Profd__AutoArgsQuery *q = profd__auto_args_query__unpack(NULL, len, b);
	struct auto_args_names *n;
	int err = -EBADMSG;

	if (!q)
		return -EBADMSG;
	for (size_t i = 0; i < q->n_functions; i++)
		if (!q->functions[i]->id || q->functions[i]->id > AUTO_ARGS_MAX_ID)
			goto out;
	err = -ENOMEM;
	if ((n = names_new(aa, q, *names)))
		err = answer(aa, pid, q, n, reply, reply_len);
	if (!err)
		*names = n;
	aa->stats.ns += mono_clock_ns() - t0;
out:
	profd__auto_args_query__free_unpacked(q, NULL);
	return err;
}

const struct dwarf_value *auto_args_value(const struct auto_args_names *n, uint32_t func_id,
					  const struct arg_item *item)
{
	const struct dwarf_function *f = n && func_id < n->n ? n->by_id[func_id] : NULL;
	struct arg_item it;

	if (!f)
		return NULL;
	if (item->source == ARG_SRC_RET || item->source == ARG_SRC_FPRET)
		return item_of(&f->ret, &it) && it.source == item->source ? &f->ret : NULL;
	for (size_t i = 0; i < f->n_params; i++)
		if (item_of(&f->params[i], &it) && it.source == item->source &&
		    it.index == item->index)
			return &f->params[i];
	return NULL;
}

/* value as the enum's type holds it: sign-extended from its size when signed */
static int64_t enum_value(const struct dwarf_value *v, uint64_t value)
{
	unsigned bits = v->type.size * 8u;

	if (bits >= 64 || !bits)
		return (int64_t)value;
	value &= (1ull << bits) - 1;
	if (v->type.is_signed && (value >> (bits - 1)))
		value |= ~0ull << bits;
	return (int64_t)value;
}

size_t auto_args_enum_text(const struct dwarf_value *v, uint64_t value, char *buf, size_t len)
{
	int64_t x = enum_value(v, value);
	uint64_t left = (uint64_t)x;
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < v->type.n_enumerators; i++)
		if (v->type.enumerators[i].value == x)
			return (size_t)snprintf(buf, len, "%s", v->type.enumerators[i].name) % len;
	/* flags: single-bit enumerators that make up the value exactly */
	for (size_t i = 0; i < v->type.n_enumerators && left && n < len; i++) {
		uint64_t bit = (uint64_t)v->type.enumerators[i].value;

		if (bit && !(bit & (bit - 1)) && (left & bit)) {
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "",
					      v->type.enumerators[i].name);
			left &= ~bit;
		}
	}
	if (left || !n || n >= len)
		n = (size_t)snprintf(buf, len, "%" PRId64, x);
	return n < len ? n : len - 1;
}

void auto_args_get_stats(const struct auto_args *aa, struct auto_args_stats *out)
{
	*out = aa ? aa->stats : (struct auto_args_stats){ 0 };
}

void auto_args_late(struct auto_args *aa, const char *name, uint64_t calls_before)
{
	if (aa->stats.late < AUTO_ARGS_LATE_NAMED)
		snprintf(aa->late_named[aa->stats.late], AUTO_ARGS_LATE_TEXT, "%.64s %" PRIu64,
			 name ? name : "?", calls_before);
	aa->stats.late++;
	aa->stats.late_calls += calls_before;
}

const char *auto_args_late_named(const struct auto_args *aa, uint32_t i)
{
	return aa && i < AUTO_ARGS_LATE_NAMED && i < aa->stats.late ? aa->late_named[i] : NULL;
}
