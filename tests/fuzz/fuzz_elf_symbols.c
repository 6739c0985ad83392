// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for agent/elf_symbols.c elf_symbols_load_buffer (and its
 * selected variant). The input
 * is the ELF file, placed at an odd address half the time (any alignment is
 * allowed) and always flush with the end of its allocation so that ASan sees
 * any read past it. Checks the documented results, never exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/elf_symbols.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static void check_loaded(const struct elf_symbols *s)
{
	CHECK(s->n_functions == 0 || s->functions != NULL);
	for (size_t i = 0; i < s->n_functions; i++) {
		const struct elf_function *f = &s->functions[i];

		CHECK(f->name != NULL);
		(void)strlen(f->name); /* NUL-terminated inside the result */
		/* sorted, one entry per distinct address */
		CHECK(i == 0 || s->functions[i - 1].value < f->value);
	}
	CHECK(s->n_segments == 0 || s->segments != NULL);
}

static void check_failed(const struct elf_symbols *s, int ret, const char *err)
{
	static const struct elf_symbols zero;

	CHECK(ret == -ENOEXEC || ret == -ENODATA || ret == -ENOMEM);
	CHECK(err[0] != '\0' || ret == -ENOMEM);
	CHECK(memcmp(s, &zero, sizeof(zero)) == 0);
}

/* Half the names: the selected load's second pass (aliases, next) runs on every input. */
static bool keep_even(void *ctx, const char *name)
{
	(void)ctx;
	return strlen(name) % 2 == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t shift = size % 2;
	uint8_t *mem = malloc(size + shift ? size + shift : 1);
	uint8_t *buf = mem + shift;
	struct elf_symbols s;
	char err[256];
	int ret;

	memcpy(buf, data, size);
	ret = elf_symbols_load_buffer_selected(buf, size, keep_even, NULL, &s, err, sizeof(err));
	if (ret == 0)
		check_loaded(&s);
	else
		check_failed(&s, ret, err);
	elf_symbols_free(&s);
	ret = elf_symbols_load_buffer(buf, size, &s, err, sizeof(err));
	memset(buf, 0xa5, size); /* nothing may point into the buffer afterwards */
	if (ret == 0)
		check_loaded(&s);
	else
		check_failed(&s, ret, err);
	elf_symbols_free(&s);
	free(mem);
	return 0;
}
