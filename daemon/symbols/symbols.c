// SPDX-License-Identifier: MIT
/*
 * Symbolizer of one target process: a sorted, non-overlapping array of its
 * executable mappings, each pointing at a module (one per distinct path,
 * ELF loading in daemon/symbols/elf_module.c, lazily on the first lookup that hits
 * it), plus the target's JIT map for anonymous code (daemon/symbols/jit_map.c).
 * Not thread-safe: one owner thread per symbolizer. Never trusts the target:
 * paths and files it names only ever yield "no symbols".
 */
#include "daemon/symbols/symbols.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/proc_maps_line.h"
#include "daemon/symbols/elf_module.h"
#include "daemon/symbols/jit_map.h"
#include "daemon/symbols/module_cache.h"

struct mapping {
	uint64_t start, end, pgoff;
	struct elf_module *module;
};

struct symbolizer {
	pid_t pid;
	struct mapping *maps;   /* sorted by start, non-overlapping */
	size_t n_maps, cap_maps;
	struct elf_module **modules;
	size_t n_modules, cap_modules;
	struct jit_map *jit;    /* perf-PID.map, created on the first pc in "[anon]" */
	unsigned int jit_misses; /* [anon] pcs the map missed since it was last checked */
	struct module_cache *shared; /* NULL: every file read for this process alone */
};

struct symbolizer *symbolizer_new(pid_t pid)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	return s;
}

void symbolizer_share_modules(struct symbolizer *s, struct module_cache *c)
{
	s->shared = c;
}

void symbolizer_free(struct symbolizer *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_modules; i++)
		elf_module_free(s->modules[i]);
	free(s->modules);
	free(s->maps);
	jit_map_free(s->jit);
	free(s);
}

/* perf names anonymous memory "//anon"; /proc/PID/maps leaves it blank or "[anon:...]". */
static const char *canonical_path(const char *path)
{
	if (!path || !path[0] || strcmp(path, "//anon") == 0 || strncmp(path, "[anon", 5) == 0)
		return "[anon]";
	return path;
}

static struct elf_module *module_get(struct symbolizer *s, const char *path)
{
	struct elf_module *m;
	size_t i;

	for (i = 0; i < s->n_modules; i++)
		if (strcmp(s->modules[i]->path, path) == 0)
			return s->modules[i];
	if (s->n_modules == s->cap_modules) {
		size_t cap = s->cap_modules ? s->cap_modules * 2 : 16;
		struct elf_module **v = realloc(s->modules, cap * sizeof(*v));

		if (!v)
			return NULL;
		s->modules = v;
		s->cap_modules = cap;
	}
	m = elf_module_new(path);
	if (m)
		s->modules[s->n_modules++] = m;
	return m;
}

static int maps_reserve(struct symbolizer *s, size_t extra)
{
	size_t cap = s->cap_maps ? s->cap_maps : 64;
	struct mapping *v;

	if (s->n_maps + extra <= s->cap_maps)
		return 0;
	while (cap < s->n_maps + extra)
		cap *= 2;
	v = realloc(s->maps, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->maps = v;
	s->cap_maps = cap;
	return 0;
}

/* Index of the first mapping whose end is above addr. */
static size_t maps_first_ending_after(const struct symbolizer *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Replaces maps[first..last) (the mappings overlapping nm) by what is left of
 * them around nm plus nm itself: at most a head, nm and a tail.
 */
static void maps_splice(struct symbolizer *s, size_t first, size_t last, const struct mapping *nm)
{
	struct mapping repl[3];
	size_t n = 0;

	if (first < last && s->maps[first].start < nm->start) {
		repl[n] = s->maps[first];
		repl[n++].end = nm->start;
	}
	repl[n++] = *nm;
	if (first < last && s->maps[last - 1].end > nm->end) {
		repl[n] = s->maps[last - 1];
		repl[n].pgoff += nm->end - repl[n].start;
		repl[n++].start = nm->end;
	}
	memmove(&s->maps[first + n], &s->maps[last], (s->n_maps - last) * sizeof(*s->maps));
	memcpy(&s->maps[first], repl, n * sizeof(*repl));
	s->n_maps = s->n_maps - (last - first) + n;
}

/*
 * The module's file as its mappings name it, while it is not loaded (the
 * identity only finds it loaded already): the first mapping's, forgotten
 * when another of the path disagrees.
 */
static void module_note_identity(struct elf_module *m, uint64_t dev, uint64_t ino)
{
	if (m->loaded)
		return;
	if (!m->identity_seen) {
		m->mapped_dev = dev;
		m->mapped_ino = ino;
		m->identity_seen = true;
	} else if (m->mapped_dev != dev || m->mapped_ino != ino) {
		m->mapped_dev = m->mapped_ino = 0;
	}
}

int symbolizer_add_mapping_id(struct symbolizer *s, uint64_t start, uint64_t end, uint64_t pgoff,
			      const char *path, uint64_t dev, uint64_t ino)
{
	struct mapping nm = { start, end, pgoff, NULL };
	size_t first, last;

	if (!s || start >= end)
		return -EINVAL;
	nm.module = module_get(s, canonical_path(path));
	if (!nm.module || maps_reserve(s, 2) < 0)
		return -ENOMEM;
	module_note_identity(nm.module, dev, ino);
	first = maps_first_ending_after(s, start);
	for (last = first; last < s->n_maps && s->maps[last].start < end; last++)
		;
	maps_splice(s, first, last, &nm);
	return 0;
}

int symbolizer_add_mapping(struct symbolizer *s, uint64_t start, uint64_t end, uint64_t pgoff,
			   const char *path)
{
	return symbolizer_add_mapping_id(s, start, end, pgoff, path, 0, 0);
}

int symbolizer_copy_mappings(struct symbolizer *s, const struct symbolizer *from)
{
	for (size_t i = 0; i < from->n_maps; i++) {
		const struct mapping *m = &from->maps[i];
		int err = symbolizer_add_mapping_id(s, m->start, m->end, m->pgoff, m->module->path,
						    m->module->mapped_dev, m->module->mapped_ino);

		if (err < 0)
			return err;
	}
	return 0;
}

int symbolizer_load_maps_text(struct symbolizer *s, const char *text, size_t len)
{
	char path[PATH_MAX + 64];
	struct proc_maps_line l;
	size_t off = 0;
	int err;

	while (proc_maps_line_next_exec(text, len, &off, &l, path, sizeof(path))) {
		err = symbolizer_add_mapping(s, l.start, l.end, l.pgoff, path);
		if (err < 0)
			return err;
	}
	return 0;
}

int symbolizer_load_proc_maps(struct symbolizer *s)
{
	char *text;
	size_t len;
	int err;

	if (!s)
		return -EINVAL;
	err = proc_maps_text_read(s->pid, &text, &len);
	if (err)
		return err;
	err = symbolizer_load_maps_text(s, text, len);
	free(text);
	return err;
}

/*
 * m's file, loaded: through the shared modules, where another process may
 * have read it already; that module then stands for m in every mapping.
 */
static struct elf_module *module_load(struct symbolizer *s, struct elf_module *m,
				      uint64_t start, uint64_t end)
{
	struct elf_module *got;

	if (m->loaded || !s->shared || m->kind != ELF_MODULE_FILE) {
		elf_module_load(m, s->pid, start, end);
		return m;
	}
	got = module_cache_load(s->shared, m, s->pid, start, end);
	if (got == m) {
		elf_module_free(got); /* the reference we already hold */
		return m;
	}
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i] == m)
			s->modules[i] = got; /* the reference module_cache_load gave */
	for (size_t i = 0; i < s->n_maps; i++)
		if (s->maps[i].module == m)
			s->maps[i].module = got;
	elf_module_free(m);
	return got;
}

static const struct mapping *maps_find(const struct symbolizer *s, uint64_t pc)
{
	size_t i = maps_first_ending_after(s, pc);

	if (i < s->n_maps && s->maps[i].start <= pc)
		return &s->maps[i];
	return NULL;
}

/*
 * The JIT symbol covering pc. JITs append to their map, so misses re-check
 * it, but only once per SYMBOLIZER_JIT_RECHECK_MISSES of them: plain
 * anonymous code costs an open and a stat only now and then.
 */
static int jit_lookup(struct symbolizer *s, uint64_t pc, struct jit_symbol *js)
{
	if (!s->jit) {
		s->jit = jit_map_new(s->pid, NULL);
		if (!s->jit)
			return -ENOMEM;
		s->jit_misses = SYMBOLIZER_JIT_RECHECK_MISSES - 1;
	}
	if (jit_map_find(s->jit, pc, js) == 0)
		return 0;
	if (++s->jit_misses < SYMBOLIZER_JIT_RECHECK_MISSES)
		return -ENOENT;
	s->jit_misses = 0;
	if (jit_map_refresh(s->jit) <= 0)
		return -ENOENT;
	return jit_map_find(s->jit, pc, js);
}

static void lookup_anon(struct symbolizer *s, uint64_t pc, struct symbol_info *out)
{
	struct jit_symbol js;

	if (jit_lookup(s, pc, &js) < 0) {
		if (s->jit && jit_map_error(s->jit))
			out->symbols_error = jit_map_error(s->jit);
		return;
	}
	out->mapping_path = "[jit]";
	out->function = js.name;
	out->function_offset = pc - js.start;
	out->symbols_error = NULL;
}

int symbolizer_lookup(struct symbolizer *s, uint64_t pc, struct symbol_info *out)
{
	const struct mapping *mp = s ? maps_find(s, pc) : NULL;
	const struct elf_function *fn;
	struct elf_module *m;

	memset(out, 0, sizeof(*out));
	out->rel_pc = pc;
	out->mapping_path = "[unknown]";
	if (!mp)
		return -ENOENT;
	m = module_load(s, mp->module, mp->start, mp->end);
	out->mapping_path = m->path;
	out->map_start = mp->start;
	out->map_end = mp->end;
	out->map_pgoff = mp->pgoff;
	out->load_bias = m->load_bias;
	out->rel_pc = elf_module_offset_to_vaddr(m, pc - mp->start + mp->pgoff);
	if (m->build_id_len) {
		out->build_id = m->build_id;
		out->build_id_len = m->build_id_len;
	}
	out->symbols_error = m->load_error;
	if (m->kind == ELF_MODULE_SPECIAL && strcmp(m->path, "[anon]") == 0) {
		lookup_anon(s, pc, out);
		return 0;
	}
	fn = elf_module_find_function(m, out->rel_pc);
	if (fn) {
		out->function = fn->name;
		out->function_offset = out->rel_pc - fn->start;
	}
	return 0;
}
