// SPDX-License-Identifier: MIT
/* The kernel's symbols read once per profd, not per session (see kernel_symbols_cache.h). */
#include "daemon/symbols/kernel_symbols_cache.h"

#include <stdio.h>

#include "common/mono_clock.h"

/* FNV-1a of the file's bytes; 0 when it cannot be read (then only age decides). */
static uint64_t file_hash(const char *path)
{
	uint64_t h = 1469598103934665603ull;
	FILE *f = fopen(path, "re");
	char buf[4096];
	size_t n;

	if (!f)
		return 0;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		for (size_t i = 0; i < n; i++)
			h = (h ^ (uint8_t)buf[i]) * 1099511628211ull;
	fclose(f);
	return h;
}

struct kernel_symbols *kernel_symbols_cache_get(struct kernel_symbols_cache *c, char *err,
						size_t errlen)
{
	uint64_t now = mono_clock_ns();
	uint64_t modules = file_hash(c->modules_path ? c->modules_path : "/proc/modules");
	struct kernel_symbols *fresh;

	if (c->table && now - c->loaded_ns < KERNEL_SYMBOLS_CACHE_NS && modules == c->modules_hash)
		return kernel_symbols_ref(c->table);
	fresh = kernel_symbols_load(c->kallsyms_path, err, errlen);
	if (!fresh)
		return NULL;
	kernel_symbols_free(c->table); /* sessions holding it keep it */
	c->table = fresh;
	c->loaded_ns = now;
	c->modules_hash = modules;
	return kernel_symbols_ref(fresh);
}

void kernel_symbols_cache_fini(struct kernel_symbols_cache *c)
{
	kernel_symbols_free(c->table);
	c->table = NULL;
}
