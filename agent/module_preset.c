// SPDX-License-Identifier: MIT
/*
 * Module presets (see module_preset.h): made by profctl from the file, taken
 * by the agent for that same file only. Both directions convert between
 * struct elf_symbols and AgentConfig's PresetModule field by field; the
 * agent's side checks what it is given (order, sizes, names) before it lays
 * it out as elf_symbols_load would.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/instrument.h"
#include "agent/module_preset.h"

/* More than any real module has: a preset past them is not one profctl made. */
#define PRESET_MAX_FUNCTIONS (1u << 20)
#define PRESET_MAX_SEGMENTS 256u

static uint64_t timespec_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static void preset_set_file(Profd__PresetModule *pm, const struct stat *st)
{
	pm->dev = (uint64_t)st->st_dev;
	pm->ino = (uint64_t)st->st_ino;
	pm->size = (uint64_t)st->st_size;
	pm->mtime_ns = timespec_ns(&st->st_mtim);
	pm->ctime_ns = timespec_ns(&st->st_ctim);
}

static bool preset_is_file(const Profd__PresetModule *pm, const struct stat *st)
{
	return pm->dev == (uint64_t)st->st_dev && pm->ino == (uint64_t)st->st_ino &&
	       pm->size == (uint64_t)st->st_size && pm->mtime_ns == timespec_ns(&st->st_mtim) &&
	       pm->ctime_ns == timespec_ns(&st->st_ctim);
}

static int preset_fill(Profd__PresetModule *pm, const struct elf_symbols *syms)
{
	pm->from_symtab = syms->from_symtab;
	pm->has_go = syms->has_go;
	pm->go_text_lo = syms->go_text_lo;
	pm->go_text_hi = syms->go_text_hi;
	pm->has_v8 = syms->has_v8;
	pm->has_hotspot = syms->has_hotspot;
	pm->v8_blob_lo = syms->v8_blob_lo;
	pm->v8_blob_hi = syms->v8_blob_hi;
	pm->v8_builtins_lo = syms->v8_builtins_lo;
	pm->v8_builtins_hi = syms->v8_builtins_hi;
	pm->segments = calloc(syms->n_segments + 1, sizeof(*pm->segments));
	pm->functions = calloc(syms->n_functions + 1, sizeof(*pm->functions));
	if (!pm->segments || !pm->functions)
		return -ENOMEM;
	for (size_t i = 0; i < syms->n_segments; i++, pm->n_segments++) {
		const struct elf_segment *g = &syms->segments[i];
		Profd__PresetSegment *ps = malloc(sizeof(*ps));

		if (!ps)
			return -ENOMEM;
		profd__preset_segment__init(ps);
		ps->vaddr = g->vaddr;
		ps->memsz = g->memsz;
		ps->offset = g->offset;
		ps->filesz = g->filesz;
		ps->flags = g->flags;
		pm->segments[i] = ps;
	}
	for (size_t i = 0; i < syms->n_functions; i++, pm->n_functions++) {
		const struct elf_function *fn = &syms->functions[i];
		Profd__PresetFunction *pf = malloc(sizeof(*pf));

		if (!pf)
			return -ENOMEM;
		profd__preset_function__init(pf);
		pm->functions[i] = pf;
		if (!(pf->name = strdup(fn->name)))
			return -ENOMEM;
		pf->value = fn->value;
		pf->size = fn->size;
		pf->next = fn->next;
		pf->marks = (fn->is_ifunc ? PRESET_IFUNC : 0) | (fn->is_global ? PRESET_GLOBAL : 0) |
			    (fn->is_variant_pcs ? PRESET_VARIANT_PCS : 0);
	}
	return 0;
}

Profd__PresetModule *module_preset_new(const struct func_filter *filter, const char *path,
				       char *err, size_t errlen)
{
	Profd__PresetModule *pm = NULL;
	struct elf_symbols syms;
	struct stat before, after;
	int mangled = 0;

	if (stat(path, &before)) {
		snprintf(err, errlen, "stat: %m");
		return NULL;
	}
	if (instrument_selected_load(filter, path, &syms, &mangled, err, errlen))
		return NULL;
	if (mangled) {
		snprintf(err, errlen, "C++ names matched (chosen by each process's demangler)");
		goto out;
	}
	if (stat(path, &after) || before.st_ino != after.st_ino || before.st_dev != after.st_dev ||
	    before.st_size != after.st_size ||
	    timespec_ns(&before.st_mtim) != timespec_ns(&after.st_mtim) ||
	    timespec_ns(&before.st_ctim) != timespec_ns(&after.st_ctim)) {
		snprintf(err, errlen, "changed while it was read");
		goto out;
	}
	pm = malloc(sizeof(*pm));
	if (!pm)
		goto out_nomem;
	profd__preset_module__init(pm);
	preset_set_file(pm, &before);
	if (!(pm->path = strdup(path)) || preset_fill(pm, &syms))
		goto out_nomem;
	elf_symbols_free(&syms);
	return pm;

out_nomem:
	snprintf(err, errlen, "out of memory");
	module_preset_free(pm);
	pm = NULL;
out:
	elf_symbols_free(&syms);
	return NULL;
}

void module_preset_free(Profd__PresetModule *pm)
{
	if (pm) /* every field was malloc'ed, as unpacking would have */
		profd__preset_module__free_unpacked(pm, NULL);
}

/* Sorted, one function per address, each inside the address space, names present. */
static int preset_check(const Profd__PresetModule *pm)
{
	if (pm->n_functions > PRESET_MAX_FUNCTIONS || pm->n_segments > PRESET_MAX_SEGMENTS)
		return -EINVAL;
	for (size_t i = 0; i < pm->n_functions; i++) {
		const Profd__PresetFunction *pf = pm->functions[i];
		uint64_t end;

		if (!pf->name || !pf->name[0] || pf->size == 0 ||
		    __builtin_add_overflow(pf->value, pf->size, &end) || pf->next <= pf->value ||
		    (i > 0 && pm->functions[i - 1]->value >= pf->value))
			return -EINVAL;
	}
	return 0;
}

/* pm laid out as elf_symbols_load lays a load out: one allocation, names after the arrays. */
static int preset_to_symbols(const Profd__PresetModule *pm, struct elf_symbols *out)
{
	size_t fn_bytes = pm->n_functions * sizeof(struct elf_function);
	size_t seg_bytes = pm->n_segments * sizeof(struct elf_segment);
	size_t name_bytes = 0;
	uint8_t *mem;
	char *names;

	for (size_t i = 0; i < pm->n_functions; i++)
		name_bytes += strlen(pm->functions[i]->name) + 1;
	mem = malloc(fn_bytes + seg_bytes + name_bytes + 1);
	if (!mem)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	out->storage = mem;
	out->functions = (struct elf_function *)mem;
	out->n_functions = pm->n_functions;
	out->segments = (struct elf_segment *)(mem + fn_bytes);
	out->n_segments = pm->n_segments;
	names = (char *)mem + fn_bytes + seg_bytes;
	for (size_t i = 0; i < pm->n_segments; i++) {
		const Profd__PresetSegment *ps = pm->segments[i];

		out->segments[i] = (struct elf_segment){ ps->vaddr, ps->memsz, ps->offset,
							 ps->filesz, ps->flags };
	}
	for (size_t i = 0; i < pm->n_functions; i++) {
		const Profd__PresetFunction *pf = pm->functions[i];
		size_t len = strlen(pf->name) + 1;

		memcpy(names, pf->name, len);
		out->functions[i] = (struct elf_function){
			.name = names, .value = pf->value, .size = pf->size, .next = pf->next,
			.is_ifunc = !!(pf->marks & PRESET_IFUNC),
			.is_global = !!(pf->marks & PRESET_GLOBAL),
			.is_variant_pcs = !!(pf->marks & PRESET_VARIANT_PCS) };
		names += len;
	}
	out->from_symtab = pm->from_symtab;
	out->has_go = pm->has_go;
	out->go_text_lo = pm->go_text_lo;
	out->go_text_hi = pm->go_text_hi;
	out->has_v8 = pm->has_v8;
	out->has_hotspot = pm->has_hotspot;
	out->v8_blob_lo = pm->v8_blob_lo;
	out->v8_blob_hi = pm->v8_blob_hi;
	out->v8_builtins_lo = pm->v8_builtins_lo;
	out->v8_builtins_hi = pm->v8_builtins_hi;
	return 0;
}

int module_presets_lookup(void *presets, const char *path, struct elf_symbols *out)
{
	const struct module_presets *ps = presets;
	struct stat st;

	for (size_t i = 0; i < ps->n; i++) {
		const Profd__PresetModule *pm = ps->items[i];

		if (!pm->path || strcmp(pm->path, path) != 0)
			continue;
		if (stat(path, &st) || !preset_is_file(pm, &st))
			return -ENOENT; /* another file by now: read it */
		if (preset_check(pm))
			return -EINVAL;
		return preset_to_symbols(pm, out);
	}
	return -ENOENT;
}
