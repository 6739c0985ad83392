// SPDX-License-Identifier: MIT
/*
 * Demangling cache (see demangle.h), over libstdc++'s __cxa_demangle.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/symbols/demangle.h"

char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

struct demangle_entry {
	const char *mangled; /* key: the caller's pointer */
	char *plain;         /* NULL: demangling failed, answer the mangled name */
};

struct demangle_cache {
	struct demangle_entry *slots;
	size_t cap, used;
};

struct demangle_cache *demangle_cache_new(void)
{
	struct demangle_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cap = 1024;
	c->slots = calloc(c->cap, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return NULL;
	}
	return c;
}

void demangle_cache_free(struct demangle_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++)
		free(c->slots[i].plain);
	free(c->slots);
	free(c);
}

static size_t slot_of(const struct demangle_cache *c, const char *key)
{
	size_t i = ((uintptr_t)key >> 3) * 0x9e3779b97f4a7c15ull & (c->cap - 1);

	while (c->slots[i].mangled && c->slots[i].mangled != key)
		i = (i + 1) & (c->cap - 1);
	return i;
}

static int grow(struct demangle_cache *c)
{
	struct demangle_cache bigger = { calloc(c->cap * 2, sizeof(*c->slots)), c->cap * 2, c->used };

	if (!bigger.slots)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i].mangled)
			bigger.slots[slot_of(&bigger, c->slots[i].mangled)] = c->slots[i];
	free(c->slots);
	*c = bigger;
	return 0;
}

/*
 * "_ZNSt14error_categoryC2Ev@plt" (a PLT entry, as the symbolizer names it)
 * or "name@VERSION": the mangled part before the '@' demangled, the suffix
 * kept, as perf shows them. NULL when that part is no mangled name either.
 */
static char *demangle_suffixed(const char *name)
{
	const char *at = strchr(name, '@');
	char *head, *plain, *out = NULL;
	int status = -1;

	if (!at || at == name)
		return NULL;
	head = strndup(name, (size_t)(at - name));
	if (!head)
		return NULL;
	plain = __cxa_demangle(head, NULL, NULL, &status);
	free(head);
	if (status == 0 && plain) {
		size_t plain_len = strlen(plain), suffix_len = strlen(at);

		out = malloc(plain_len + suffix_len + 1);
		if (out) {
			memcpy(out, plain, plain_len);
			memcpy(out + plain_len, at, suffix_len + 1);
		}
	}
	free(plain);
	return out;
}

const char *demangle_cached(struct demangle_cache *c, const char *name)
{
	size_t i;
	int status = -1;

	if (!c || !name || name[0] != '_' || name[1] != 'Z')
		return name;
	if (c->used * 2 >= c->cap && grow(c))
		return name;
	i = slot_of(c, name);
	if (!c->slots[i].mangled) {
		char *plain = __cxa_demangle(name, NULL, NULL, &status);

		if (status != 0) {
			free(plain);
			plain = demangle_suffixed(name);
		}
		c->slots[i].mangled = name;
		c->slots[i].plain = plain;
		c->used++;
	}
	return c->slots[i].plain ? c->slots[i].plain : name;
}
