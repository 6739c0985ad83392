// SPDX-License-Identifier: MIT
/*
 * Unit tests for agent/module_preset.c: a preset taken for its own file is
 * the selected load the agent would read (field by field), and never for a
 * file changed since, another path, a C++ module or a malformed preset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/elf_symbols.h"
#include "agent/instrument.h"
#include "agent/module_preset.h"
#include "tests/unit/unit.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static char exe_dir[4096];

static struct func_filter *filter_of(const char *pattern)
{
	struct func_filter *f = NULL;
	char err[256];

	CHECK_EQ_INT(func_filter_parse(&pattern, 1, &f, err, sizeof(err)), 0);
	return f;
}

static void check_same_symbols(const struct elf_symbols *a, const struct elf_symbols *b)
{
	CHECK_EQ_INT(a->n_functions, b->n_functions);
	CHECK_EQ_INT(a->n_segments, b->n_segments);
	CHECK_EQ_INT(a->from_symtab, b->from_symtab);
	CHECK_EQ_INT(a->has_go, b->has_go);
	CHECK_EQ_U64(a->go_text_lo, b->go_text_lo);
	CHECK_EQ_U64(a->go_text_hi, b->go_text_hi);
	CHECK_EQ_INT(a->has_v8, b->has_v8);
	CHECK_EQ_INT(a->has_hotspot, b->has_hotspot);
	for (size_t i = 0; i < a->n_functions && i < b->n_functions; i++) {
		CHECK_EQ_STR(a->functions[i].name, b->functions[i].name);
		CHECK_EQ_U64(a->functions[i].value, b->functions[i].value);
		CHECK_EQ_U64(a->functions[i].size, b->functions[i].size);
		CHECK_EQ_U64(a->functions[i].next, b->functions[i].next);
		CHECK_EQ_INT(a->functions[i].is_ifunc, b->functions[i].is_ifunc);
		CHECK_EQ_INT(a->functions[i].is_global, b->functions[i].is_global);
		CHECK_EQ_INT(a->functions[i].is_variant_pcs, b->functions[i].is_variant_pcs);
	}
	for (size_t i = 0; i < a->n_segments && i < b->n_segments; i++) {
		CHECK_EQ_U64(a->segments[i].vaddr, b->segments[i].vaddr);
		CHECK_EQ_U64(a->segments[i].memsz, b->segments[i].memsz);
		CHECK_EQ_U64(a->segments[i].offset, b->segments[i].offset);
		CHECK_EQ_U64(a->segments[i].filesz, b->segments[i].filesz);
		CHECK_EQ_INT(a->segments[i].flags, b->segments[i].flags);
	}
}

/* The preset of path for pattern, taken back through lookup, equals the agent's own read. */
static void check_round_trip(const char *path, const char *pattern)
{
	struct func_filter *f = filter_of(pattern);
	struct elf_symbols read, taken;
	Profd__PresetModule *pm;
	struct module_presets ps;
	char err[256] = "";
	int mangled = 0;

	if (!f)
		return;
	pm = module_preset_new(f, path, err, sizeof(err));
	CHECK(pm != NULL);
	if (!pm) {
		fprintf(stderr, "  %s: %s\n", path, err);
		func_filter_free(f);
		return;
	}
	ps = (struct module_presets){ &pm, 1 };
	CHECK_EQ_INT(instrument_selected_load(f, path, &read, &mangled, err, sizeof(err)), 0);
	CHECK_EQ_INT(module_presets_lookup(&ps, path, &taken), 0);
	check_same_symbols(&read, &taken);
	elf_symbols_free(&read);
	elf_symbols_free(&taken);
	module_preset_free(pm);
	func_filter_free(f);
}

static void test_libc_stack_walkers(void)
{
	/* nothing of libc selected: the stack walkers alone (backtrace, _exit, ...) */
	check_round_trip(LIBC, "narrow*");
}

static void test_libc_selected(void)
{
	check_round_trip(LIBC, "mem*,str*");
}

static void test_program_with_symtab(void)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/targets/filter_target", exe_dir);
	check_round_trip(path, "*");
}

static void test_other_path_reads_the_file(void)
{
	struct func_filter *f = filter_of("narrow*");
	Profd__PresetModule *pm = f ? module_preset_new(f, LIBC, (char[256]){ 0 }, 256) : NULL;
	struct module_presets ps = { &pm, 1 };
	struct elf_symbols s;

	CHECK(pm != NULL);
	if (pm) {
		CHECK_EQ_INT(module_presets_lookup(&ps, "/lib64/ld-linux-x86-64.so.2", &s), -ENOENT);
		CHECK_EQ_INT(module_presets_lookup(&ps, "/usr/lib/x86_64-linux-gnu/libc.so.6", &s),
			     -ENOENT); /* the same file by another path: its path is what the choice saw */
	}
	module_preset_free(pm);
	func_filter_free(f);
}

/* A copy of libc in a temporary file: changed after the preset, it is read again. */
static void test_changed_file_reads_the_file(void)
{
	char path[] = "/tmp/test_module_preset.XXXXXX";
	struct func_filter *f = filter_of("narrow*");
	int out = mkstemp(path);
	Profd__PresetModule *pm = NULL;
	struct module_presets ps = { &pm, 1 };
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };
	struct elf_symbols s;

	CHECK_EQ_INT(unit_copy_file(LIBC, out), 0);
	pm = f ? module_preset_new(f, path, (char[256]){ 0 }, 256) : NULL;
	CHECK(pm != NULL);
	if (pm) {
		CHECK_EQ_INT(module_presets_lookup(&ps, path, &s), 0);
		elf_symbols_free(&s);
		CHECK_EQ_INT(futimens(out, later), 0); /* same content, another mtime */
		CHECK_EQ_INT(module_presets_lookup(&ps, path, &s), -ENOENT);
	}
	module_preset_free(pm);
	func_filter_free(f);
	if (out >= 0)
		close(out);
	unlink(path);
}

static void test_cxx_module_has_no_preset(void)
{
	struct func_filter *f = filter_of("*");
	char path[4200], err[256] = "";
	Profd__PresetModule *pm;

	snprintf(path, sizeof(path), "%s/targets/exceptions", exe_dir);
	pm = f ? module_preset_new(f, path, err, sizeof(err)) : NULL;
	CHECK(pm == NULL);
	CHECK(strstr(err, "C++") != NULL);
	module_preset_free(pm);
	func_filter_free(f);
}

static void test_malformed_preset_refused(void)
{
	struct func_filter *f = filter_of("mem*");
	Profd__PresetModule *pm = f ? module_preset_new(f, LIBC, (char[256]){ 0 }, 256) : NULL;
	struct module_presets ps = { &pm, 1 };
	struct elf_symbols s;
	uint64_t v;

	CHECK(pm != NULL && pm->n_functions >= 2);
	if (pm && pm->n_functions >= 2) {
		v = pm->functions[0]->value; /* out of order */
		pm->functions[0]->value = pm->functions[1]->value;
		CHECK_EQ_INT(module_presets_lookup(&ps, LIBC, &s), -EINVAL);
		pm->functions[0]->value = v;
		pm->functions[1]->size = 0; /* a function of no bytes */
		CHECK_EQ_INT(module_presets_lookup(&ps, LIBC, &s), -EINVAL);
	}
	module_preset_free(pm);
	func_filter_free(f);
}

int main(int argc, char **argv)
{
	char *slash;

	(void)argc;
	snprintf(exe_dir, sizeof(exe_dir), "%s", argv[0]);
	slash = strrchr(exe_dir, '/');
	if (slash)
		*slash = '\0';
	RUN_TEST(test_libc_stack_walkers);
	RUN_TEST(test_libc_selected);
	RUN_TEST(test_program_with_symtab);
	RUN_TEST(test_other_path_reads_the_file);
	RUN_TEST(test_changed_file_reads_the_file);
	RUN_TEST(test_cxx_module_has_no_preset);
	RUN_TEST(test_malformed_preset_refused);
	return unit_summary();
}
