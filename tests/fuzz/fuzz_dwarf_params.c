// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for daemon/symbols/dwarf_params.c: the input is an ELF
 * image with DWARF (a target's file, hostile: profd may run as root). Opens
 * it for x86-64 or aarch64, looks up every function its symbol table names
 * (agent/elf_symbols.c, itself fuzzed) and one by name, renders the spec
 * text, and checks the documented results. Never exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/elf_symbols.h"
#include "daemon/symbols/dwarf_params.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())
#define MAX_LOOKUPS 256

static void check_value(const struct dwarf_value *v)
{
	CHECK(v->loc == DWARF_LOC_NONE || v->loc == DWARF_LOC_INT || v->loc == DWARF_LOC_FP);
	CHECK(v->loc != DWARF_LOC_NONE || v->index == 0);
	if (v->name)
		(void)strlen(v->name);
	if (v->type.name)
		(void)strlen(v->type.name);
	for (size_t i = 0; i < v->type.n_enumerators; i++)
		(void)strlen(v->type.enumerators[i].name);
}

static void check_function(const struct dwarf_function *f)
{
	char args[4096], ret[64];
	size_t supported = 0;

	CHECK(f->n_params <= 256);
	for (size_t i = 0; i < f->n_params; i++) {
		check_value(&f->params[i]);
		CHECK(f->params[i].loc == DWARF_LOC_NONE || f->params[i].index > 0);
		supported += f->params[i].loc != DWARF_LOC_NONE;
	}
	CHECK(supported == f->n_supported);
	check_value(&f->ret);
	CHECK(dwarf_function_spec(f, args, sizeof(args), ret, sizeof(ret)) == 0);
}

static void check_result(int ret, struct dwarf_function *f)
{
	CHECK(ret == 0 || ret == -ENOENT || ret == -EINVAL || ret == -E2BIG || ret == -ENOMEM);
	if (ret == 0) {
		check_function(f);
		dwarf_function_free(f);
	}
}

static void lookup_all(struct dwarf_params_module *m, const uint8_t *data, size_t size)
{
	struct dwarf_function *f = NULL;
	struct elf_symbols s;
	char err[256];

	if (elf_symbols_load_buffer(data, size, &s, err, sizeof(err)) == 0) {
		for (size_t i = 0; i < s.n_functions && i < MAX_LOOKUPS; i++) {
			int ret = dwarf_params_lookup(m, s.functions[i].value, s.functions[i].name, &f);

			check_result(ret, f);
		}
		elf_symbols_free(&s);
	}
	check_result(dwarf_params_lookup_name(m, "main", &f), f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum dwarf_params_arch arch = size % 3 == 0 ? DWARF_PARAMS_ARCH_AUTO :
				      size % 3 == 1 ? DWARF_PARAMS_ARCH_X86_64 :
						      DWARF_PARAMS_ARCH_AARCH64;
	struct dwarf_params_module *m;
	int ret = dwarf_params_open_image(data, size, arch, &m);

	CHECK(ret == 0 || ret == -ENOEXEC || ret == -ENODATA || ret == -EINVAL ||
	      ret == -ENOMEM || ret == -E2BIG);
	if (ret < 0)
		return 0;
	lookup_all(m, data, size);
	dwarf_params_close(m);
	return 0;
}
