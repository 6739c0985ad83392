// SPDX-License-Identifier: MIT
/*
 * daemon/symbols/dwarf_params.c on tests/targets/args_dwarf (-O2 -g) and
 * args_dwarf_O0: every parameter's name, type and argN/fpargN against the
 * placements its comments give (checked against the machine code), the
 * aarch64 rules on the same DWARF, the spec text, debug files found by build
 * id and by debuglink under a temporary debug root, and hostile files
 * (truncated, corrupted) that must give an errno, never a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/symbols/dwarf_params.h"
#include "daemon/symbols/elf_module.h"
#include "tests/unit/unit.h"

#define X86 DWARF_PARAMS_ARCH_X86_64
#define A64 DWARF_PARAMS_ARCH_AARCH64

static const char *const variants[] = { "args_dwarf", "args_dwarf_O0" };

static void target_path(const char *name, char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	self[n > 0 ? n : 0] = '\0';
	snprintf(buf, len, "%s/targets/%s", dirname(self), name);
}

/* The ELF symbol's address (what the daemon knows), or 0. */
static uint64_t symbol_addr(const char *path, const char *name)
{
	struct elf_module *em = elf_module_new(path);
	uint64_t addr = 0;
	size_t i;

	elf_module_load(em, 0, 0, 0);
	for (i = 0; i < em->n_functions; i++)
		if (strcmp(em->functions[i].name, name) == 0)
			addr = em->functions[i].start;
	elf_module_free(em);
	return addr;
}

/* fn of target variant v looked up by its symbol's address, classified for arch. */
static struct dwarf_function *lookup(int v, const char *fn, enum dwarf_params_arch arch)
{
	struct dwarf_params_module *m;
	struct dwarf_function *f = NULL;
	char path[PATH_MAX];
	uint64_t addr;
	int ret;

	target_path(variants[v], path, sizeof(path));
	addr = symbol_addr(path, fn);
	CHECK(addr != 0);
	ret = dwarf_params_open(path, NULL, arch, &m);
	CHECK_EQ_INT(ret, 0);
	if (ret < 0)
		return NULL;
	CHECK_EQ_INT(dwarf_params_source(m), DWARF_PARAMS_OWN);
	ret = dwarf_params_lookup(m, addr, fn, &f);
	CHECK_EQ_INT(ret, 0);
	if (f)
		CHECK_EQ_STR(f->name, fn);
	dwarf_params_close(m);
	return f;
}

#define CHECK_VALUE(v, nm, c, sz, sgn, lc, idx)                                   \
	do {                                                                      \
		const struct dwarf_value *cv_ = (v);                              \
		if (nm)                                                           \
			CHECK_EQ_STR(cv_->name, (const char *)(nm));              \
		CHECK_EQ_INT(cv_->type.cls, c);                                   \
		CHECK_EQ_INT(cv_->type.size, sz);                                 \
		CHECK_EQ_INT(cv_->type.is_signed, sgn);                           \
		CHECK_EQ_INT(cv_->loc, lc);                                       \
		CHECK_EQ_INT(cv_->index, idx);                                    \
		CHECK((cv_->loc == DWARF_LOC_NONE) == (cv_->reason != NULL) ||    \
		      cv_->type.cls == DWARF_TYPE_VOID);                          \
	} while (0)

#define P(f, i) (&(f)->params[i])
#define INT DWARF_LOC_INT
#define FP DWARF_LOC_FP
#define NONE DWARF_LOC_NONE

static void test_integers(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_ints", X86);

		if (!f)
			continue;
		CHECK_EQ_INT(f->n_params, 6);
		CHECK_VALUE(P(f, 0), "i", DWARF_TYPE_INT, 4, true, INT, 1);
		CHECK_VALUE(P(f, 1), "u", DWARF_TYPE_INT, 4, false, INT, 2);
		CHECK_VALUE(P(f, 2), "s", DWARF_TYPE_INT, 2, true, INT, 3);
		CHECK_VALUE(P(f, 3), "c", DWARF_TYPE_CHAR, 1, true, INT, 4);
		CHECK_VALUE(P(f, 4), "l", DWARF_TYPE_INT, 8, true, INT, 5);
		CHECK_VALUE(P(f, 5), "b", DWARF_TYPE_BOOL, 1, false, INT, 6);
		CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_INT, 4, true, INT, 0);
		CHECK_EQ_INT(f->n_supported, 6);
		CHECK(!f->variadic);
		dwarf_function_free(f);
	}
}

static void test_enums(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_enum", X86);

		if (!f)
			continue;
		CHECK_VALUE(P(f, 0), "mode", DWARF_TYPE_ENUM, 4, true, INT, 1);
		CHECK_EQ_STR(P(f, 0)->type.name, "ad_mode");
		CHECK_EQ_INT(P(f, 0)->type.n_enumerators, 4);
		if (P(f, 0)->type.n_enumerators == 4) {
			CHECK_EQ_STR(P(f, 0)->type.enumerators[2].name, "AD_APPEND");
			CHECK_EQ_INT(P(f, 0)->type.enumerators[2].value, 4);
			CHECK_EQ_STR(P(f, 0)->type.enumerators[3].name, "AD_BACK");
			CHECK_EQ_INT(P(f, 0)->type.enumerators[3].value, -2);
		}
		CHECK_VALUE(P(f, 1), "flags", DWARF_TYPE_ENUM, 4, false, INT, 2);
		CHECK_EQ_INT(P(f, 1)->type.n_enumerators, 3);
		if (P(f, 1)->type.n_enumerators == 3)
			CHECK_EQ_INT(P(f, 1)->type.enumerators[2].value, 0x80000000ll);
		dwarf_function_free(f);
	}
}

static void test_strings_and_pointers(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_strings", X86);

		if (!f)
			continue;
		CHECK_VALUE(P(f, 0), "path", DWARF_TYPE_STRING, 8, false, INT, 1);
		CHECK_EQ_STR(P(f, 0)->type.name, "const char *");
		CHECK_VALUE(P(f, 1), "buf", DWARF_TYPE_STRING, 8, false, INT, 2);
		CHECK_VALUE(P(f, 2), "opaque", DWARF_TYPE_POINTER, 8, false, INT, 3);
		CHECK_EQ_STR(P(f, 2)->type.name, "void *");
		/* unsigned char * is bytes, not text */
		CHECK_VALUE(P(f, 3), "bytes", DWARF_TYPE_POINTER, 8, false, INT, 4);
		CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_INT, 8, true, INT, 0);
		dwarf_function_free(f);
	}
}

/* Floating-point parameters count their own slots, interleaved with integers. */
static void test_floats_interleaved(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_mixed", X86);

		if (!f)
			continue;
		CHECK_VALUE(P(f, 0), "a", DWARF_TYPE_INT, 4, true, INT, 1);
		CHECK_VALUE(P(f, 1), "d", DWARF_TYPE_FLOAT, 8, false, FP, 1);
		CHECK_VALUE(P(f, 2), "f", DWARF_TYPE_FLOAT, 4, false, FP, 2);
		CHECK_VALUE(P(f, 3), "b", DWARF_TYPE_INT, 8, true, INT, 2);
		CHECK_VALUE(P(f, 4), "e", DWARF_TYPE_FLOAT, 8, false, FP, 3);
		CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_FLOAT, 8, false, FP, 0);
		dwarf_function_free(f);
	}
}

/* arg7 is the first stack word; a double past xmm7 takes a word too. */
static void test_stack_arguments(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_many", X86);

		if (f) {
			CHECK_VALUE(P(f, 6), "a7", DWARF_TYPE_INT, 8, true, INT, 7);
			CHECK_VALUE(P(f, 7), "f1", DWARF_TYPE_FLOAT, 8, false, FP, 1);
			CHECK_VALUE(P(f, 8), "a8", DWARF_TYPE_INT, 8, true, INT, 8);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_fp9", X86);
		if (f) {
			CHECK_VALUE(P(f, 7), "f8", DWARF_TYPE_FLOAT, 8, false, FP, 8);
			CHECK_VALUE(P(f, 8), "f9", DWARF_TYPE_FLOAT, 8, false, NONE, 0);
			CHECK_VALUE(P(f, 14), "a6", DWARF_TYPE_INT, 8, true, INT, 6);
			CHECK_VALUE(P(f, 15), "a7", DWARF_TYPE_INT, 8, true, INT, 8);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_many", A64); /* x0-x7: a7 in x6, a8 in x7 */
		if (f) {
			CHECK_VALUE(P(f, 6), "a7", DWARF_TYPE_INT, 8, true, INT, 7);
			CHECK_VALUE(P(f, 8), "a8", DWARF_TYPE_INT, 8, true, INT, 8);
			dwarf_function_free(f);
		}
	}
}

/* A struct by value: unsupported, and every later slot with it (x86-64). */
static void test_struct_by_value(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_struct_val", X86);

		if (f) {
			CHECK_VALUE(P(f, 0), "a", DWARF_TYPE_INT, 4, true, INT, 1);
			CHECK_VALUE(P(f, 1), "s", DWARF_TYPE_OTHER, 0, false, NONE, 0);
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, NONE, 0);
			CHECK_VALUE(P(f, 3), "d", DWARF_TYPE_FLOAT, 8, false, NONE, 0);
			CHECK_EQ_INT(f->n_supported, 1);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_big_val", X86);
		if (f) {
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, NONE, 0);
			dwarf_function_free(f);
		}
		/* aarch64: over 16 bytes goes by reference in x1, so b is x2 */
		f = lookup(v, "ad_big_val", A64);
		if (f) {
			CHECK_VALUE(P(f, 1), "s", DWARF_TYPE_OTHER, 0, false, NONE, 0);
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, INT, 3);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_struct_val", A64); /* <= 16 bytes: registers unknown */
		if (f) {
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, NONE, 0);
			dwarf_function_free(f);
		}
	}
}

/* x86-64 passes a returned struct's address in rdi; aarch64 in x8. */
static void test_struct_return(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_ret_big", X86);

		if (f) {
			CHECK_VALUE(P(f, 0), "a", DWARF_TYPE_INT, 4, true, INT, 2);
			CHECK_VALUE(P(f, 1), "name", DWARF_TYPE_STRING, 8, false, INT, 3);
			CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_OTHER, 0, false, NONE, 0);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_ret_big", A64);
		if (f) {
			CHECK_VALUE(P(f, 0), "a", DWARF_TYPE_INT, 4, true, INT, 1);
			CHECK_VALUE(P(f, 1), "name", DWARF_TYPE_STRING, 8, false, INT, 2);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_ret_small", X86); /* in rax: nothing shifts */
		if (f) {
			CHECK_VALUE(P(f, 0), "a", DWARF_TYPE_INT, 4, true, INT, 1);
			CHECK_EQ_INT(f->ret.loc, NONE);
			dwarf_function_free(f);
		}
	}
}

static void test_typedefs_and_qualifiers(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_typedef", X86);

		if (!f)
			continue;
		CHECK_VALUE(P(f, 0), "n", DWARF_TYPE_INT, 8, false, INT, 1);
		CHECK_EQ_STR(P(f, 0)->type.name, "ad_size_t");
		CHECK_VALUE(P(f, 1), "name", DWARF_TYPE_STRING, 8, false, INT, 2);
		CHECK_EQ_STR(P(f, 1)->type.name, "ad_name_t");
		CHECK_VALUE(P(f, 2), "cv", DWARF_TYPE_INT, 4, true, INT, 3);
		dwarf_function_free(f);
	}
}

/* long double is on the x86-64 stack (registers unaffected); __int128 takes a pair. */
static void test_wide_types(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_ldouble", X86);

		if (f) {
			CHECK_VALUE(P(f, 1), "x", DWARF_TYPE_OTHER, 16, false, NONE, 0);
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, INT, 2);
			CHECK_VALUE(P(f, 3), "d", DWARF_TYPE_FLOAT, 8, false, FP, 1);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_i128", X86);
		if (f) {
			CHECK_EQ_INT(P(f, 1)->loc, NONE);
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, INT, 4);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_i128", A64); /* an even pair: x2:x3 */
		if (f) {
			CHECK_VALUE(P(f, 2), "b", DWARF_TYPE_INT, 4, true, INT, 5);
			dwarf_function_free(f);
		}
	}
}

static void test_variadic_and_returns(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_function *f = lookup(v, "ad_printf", X86);

		if (f) {
			CHECK(f->variadic);
			CHECK_EQ_INT(f->n_params, 2);
			CHECK_VALUE(P(f, 0), "fmt", DWARF_TYPE_STRING, 8, false, INT, 1);
			CHECK_VALUE(P(f, 1), "level", DWARF_TYPE_INT, 4, true, INT, 2);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_retf", X86);
		if (f) {
			CHECK_VALUE(P(f, 0), "x", DWARF_TYPE_FLOAT, 4, false, FP, 1);
			CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_FLOAT, 4, false, FP, 0);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_is_ok", X86);
		if (f) {
			CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_BOOL, 1, false, INT, 0);
			dwarf_function_free(f);
		}
		f = lookup(v, "ad_void", X86);
		if (f) {
			CHECK_EQ_INT(f->n_params, 0);
			CHECK_VALUE(&f->ret, "retval", DWARF_TYPE_VOID, 0, false, NONE, 0);
			dwarf_function_free(f);
		}
	}
}

static void test_spec_text(void)
{
	struct dwarf_function *f = lookup(0, "ad_mixed", X86);
	char args[256], ret[32];

	if (!f)
		return;
	CHECK_EQ_INT(dwarf_function_spec(f, args, sizeof(args), ret, sizeof(ret)), 0);
	CHECK_EQ_STR(args, "arg1/i32,fparg1/f64,fparg2/f32,arg2/i64,fparg3/f64");
	CHECK_EQ_STR(ret, "retval/f64");
	CHECK_EQ_INT(dwarf_function_spec(f, args, 10, ret, sizeof(ret)), -ENOSPC);
	CHECK_EQ_STR(args, "");
	dwarf_function_free(f);
	f = lookup(0, "ad_ints", X86);
	if (!f)
		return;
	dwarf_function_spec(f, args, sizeof(args), ret, sizeof(ret));
	CHECK_EQ_STR(args, "arg1/i32,arg2/u32,arg3/i16,arg4/c,arg5/i64,arg6/u8");
	CHECK_EQ_STR(ret, "retval/i32");
	dwarf_function_free(f);
	f = lookup(0, "ad_struct_val", X86); /* only what is placed */
	if (!f)
		return;
	dwarf_function_spec(f, args, sizeof(args), ret, sizeof(ret));
	CHECK_EQ_STR(args, "arg1/i32");
	dwarf_function_free(f);
}

/* ad_nodwarf (nodwarf.c, no -g) has a symbol but no subprogram: -ENOENT. */
static void test_function_without_dwarf(void)
{
	for (int v = 0; v < 2; v++) {
		struct dwarf_params_module *m;
		struct dwarf_function *f = NULL;
		char path[PATH_MAX];
		uint64_t addr;

		target_path(variants[v], path, sizeof(path));
		addr = symbol_addr(path, "ad_nodwarf");
		CHECK(addr != 0);
		if (dwarf_params_open(path, NULL, DWARF_PARAMS_ARCH_AUTO, &m) != 0) {
			CHECK(0);
			continue;
		}
		CHECK_EQ_INT(dwarf_params_arch(m), X86);
		CHECK_EQ_INT(dwarf_params_lookup(m, addr, "ad_nodwarf", &f), -ENOENT);
		CHECK_EQ_INT(dwarf_params_lookup(m, addr + 1, NULL, &f), -ENOENT);
		CHECK_EQ_INT(dwarf_params_lookup_name(m, "ad_nodwarf", &f), -ENOENT);
		CHECK(f == NULL);
		dwarf_params_close(m);
	}
}

static void test_lookup_by_name(void)
{
	struct dwarf_params_module *m;
	struct dwarf_function *f;
	char path[PATH_MAX];

	target_path(variants[0], path, sizeof(path));
	if (dwarf_params_open(path, NULL, X86, &m) != 0) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(dwarf_params_lookup_name(m, "ad_enum", &f), 0);
	if (f) {
		CHECK_EQ_U64(f->entry, symbol_addr(path, "ad_enum"));
		CHECK_VALUE(P(f, 1), "flags", DWARF_TYPE_ENUM, 4, false, INT, 2);
		dwarf_function_free(f);
	}
	dwarf_params_close(m);
}

/* GCC's clone (-O2: ad_clone_me.constprop.0...) shares the DWARF, not the ABI. */
static void test_compiler_clone_refused(void)
{
	struct elf_module *em;
	struct dwarf_params_module *m;
	struct dwarf_function *f;
	char path[PATH_MAX];
	size_t i, clones = 0;

	target_path(variants[0], path, sizeof(path));
	if (dwarf_params_open(path, NULL, X86, &m) != 0) {
		CHECK(0);
		return;
	}
	em = elf_module_new(path);
	elf_module_load(em, 0, 0, 0);
	for (i = 0; i < em->n_functions; i++) {
		const char *name = em->functions[i].name;

		if (strncmp(name, "ad_clone_me.", 12) != 0 ||
		    dwarf_params_lookup(m, em->functions[i].start, name, &f) != 0)
			continue;
		clones++;
		CHECK_EQ_INT(f->n_supported, 0);
		CHECK_EQ_INT(f->ret.loc, NONE);
		dwarf_function_free(f);
	}
	if (!clones)
		printf("info: no clone of ad_clone_me in this build: nothing to refuse\n");
	elf_module_free(em);
	dwarf_params_close(m);
}

/* ---- separate debug files ---------------------------------------------------- */

struct debug_dir {
	char dir[64];
	char stripped[128];
};

static int sh(const char *cmd)
{
	int ret = system(cmd);

	if (ret != 0)
		fprintf(stderr, "command failed (%d): %s\n", ret, cmd);
	return ret;
}

/* DIR/bin (no DWARF) and DIR/full.debug (only debug), plus DIR/root, the debug root. */
static int make_debug_dir(struct debug_dir *d)
{
	char target[PATH_MAX], cmd[4 * PATH_MAX];

	snprintf(d->dir, sizeof(d->dir), "/tmp/test_dwarf_params.XXXXXX");
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->stripped, sizeof(d->stripped), "%s/bin", d->dir);
	target_path(variants[0], target, sizeof(target));
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir root && objcopy --only-keep-debug %s full.debug && "
		 "objcopy --strip-debug %s bin", d->dir, target, target);
	return sh(cmd);
}

static void remove_debug_dir(struct debug_dir *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	sh(cmd);
}

static void check_found(const char *path, const char *root, enum dwarf_params_source source,
			const char *debug_path)
{
	struct dwarf_params_module *m;
	struct dwarf_function *f;
	int ret = dwarf_params_open(path, root, X86, &m);

	CHECK_EQ_INT(ret, 0);
	if (ret)
		return;
	CHECK_EQ_INT(dwarf_params_source(m), source);
	CHECK_EQ_STR(dwarf_params_debug_path(m), debug_path);
	CHECK_EQ_INT(dwarf_params_lookup(m, symbol_addr(path, "ad_strings"), "ad_strings", &f), 0);
	if (f) {
		CHECK_VALUE(P(f, 0), "path", DWARF_TYPE_STRING, 8, false, INT, 1);
		dwarf_function_free(f);
	}
	dwarf_params_close(m);
}

static void test_debug_file_by_build_id(void)
{
	struct debug_dir d;
	struct dwarf_params_module *m;
	char cmd[1024], root[128], want[1200];

	if (make_debug_dir(&d) != 0) {
		CHECK(0);
		return;
	}
	snprintf(root, sizeof(root), "%s/root", d.dir);
	/* no debug file yet: nothing */
	CHECK_EQ_INT(dwarf_params_open(d.stripped, root, X86, &m), -ENODATA);
	/* ROOT/.build-id/xx/yyyy.debug, named from the build id readelf prints */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && id=$(readelf -n bin | sed -n 's/.*Build ID: //p') && "
		 "mkdir -p root/.build-id/${id%%${id#??}} && "
		 "cp full.debug root/.build-id/${id%%${id#??}}/${id#??}.debug && "
		 "echo root/.build-id/${id%%${id#??}}/${id#??}.debug > where",
		 d.dir);
	if (sh(cmd) == 0) {
		FILE *fp;

		snprintf(cmd, sizeof(cmd), "%s/where", d.dir);
		fp = fopen(cmd, "r");
		if (fp && fscanf(fp, "%200s", cmd) == 1) {
			snprintf(want, sizeof(want), "%s/%s", d.dir, cmd);
			check_found(d.stripped, root, DWARF_PARAMS_BUILD_ID, want);
		} else {
			CHECK(0);
		}
		if (fp)
			fclose(fp);
	}
	remove_debug_dir(&d);
}

static void test_debug_file_by_debuglink(void)
{
	struct debug_dir d;
	struct dwarf_params_module *m;
	char cmd[1024], root[128], want[1200];

	if (make_debug_dir(&d) != 0) {
		CHECK(0);
		return;
	}
	snprintf(root, sizeof(root), "%s/root", d.dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && objcopy --add-gnu-debuglink=full.debug bin && mkdir .debug && "
		 "mv full.debug .debug/", d.dir);
	if (sh(cmd) == 0) {
		snprintf(want, sizeof(want), "%s/.debug/full.debug", d.dir);
		check_found(d.stripped, root, DWARF_PARAMS_DEBUGLINK, want);
		/* a debug file whose CRC-32 does not match is refused */
		snprintf(cmd, sizeof(cmd), "cd %s && echo x >> .debug/full.debug", d.dir);
		sh(cmd);
		CHECK_EQ_INT(dwarf_params_open(d.stripped, root, X86, &m), -ENODATA);
	}
	remove_debug_dir(&d);
}

/* ---- hostile files ------------------------------------------------------------- */

static void *read_whole(const char *path, size_t *len)
{
	struct stat st;
	void *buf = NULL;
	int fd = open(path, O_RDONLY);

	if (fd >= 0 && fstat(fd, &st) == 0 && (buf = malloc((size_t)st.st_size)) &&
	    read(fd, buf, (size_t)st.st_size) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	*len = buf ? (size_t)st.st_size : 0;
	return buf;
}

/* Every function of m looked up: results or errors, no crash. */
static void lookup_everything(struct dwarf_params_module *m, const char *path)
{
	struct elf_module *em = elf_module_new(path);
	struct dwarf_function *f;
	char args[512], ret[64];
	size_t i;

	elf_module_load(em, 0, 0, 0);
	for (i = 0; i < em->n_functions; i++) {
		int r = dwarf_params_lookup(m, em->functions[i].start, em->functions[i].name, &f);

		CHECK(r == 0 || r == -ENOENT || r == -EINVAL || r == -E2BIG);
		if (r == 0) {
			dwarf_function_spec(f, args, sizeof(args), ret, sizeof(ret));
			dwarf_function_free(f);
		}
	}
	elf_module_free(em);
}

static void test_truncated_files(void)
{
	char target[PATH_MAX], path[] = "/tmp/test_dwarf_params_trunc.XXXXXX";
	size_t len, cut;
	void *image;
	int fd = mkstemp(path);

	target_path(variants[0], target, sizeof(target));
	image = read_whole(target, &len);
	CHECK(image != NULL && fd >= 0);
	for (cut = 0; image && fd >= 0 && cut < len; cut += len / 23 + 1) {
		struct dwarf_params_module *m;
		int ret;

		if (ftruncate(fd, 0) != 0 || pwrite(fd, image, cut, 0) != (ssize_t)cut)
			break;
		ret = dwarf_params_open(path, "/nonexistent", X86, &m);
		CHECK(ret < 0); /* section headers are at the end: none survives a cut */
		if (ret == 0)
			dwarf_params_close(m);
		ret = dwarf_params_open_image(image, cut, X86, &m);
		CHECK(ret <= 0);
		if (ret == 0) {
			lookup_everything(m, target);
			dwarf_params_close(m);
		}
	}
	if (fd >= 0)
		close(fd);
	unlink(path);
	free(image);
}

/* Bytes flipped through the whole file, the DWARF included: errors, never a crash. */
static void test_corrupted_images(void)
{
	char target[PATH_MAX];
	size_t len, i;
	unsigned int seed = 29;
	uint8_t *image, *copy;

	target_path(variants[0], target, sizeof(target));
	image = read_whole(target, &len);
	copy = malloc(len ? len : 1);
	CHECK(image && copy);
	for (int round = 0; image && copy && round < 200; round++) {
		struct dwarf_params_module *m;

		memcpy(copy, image, len);
		for (i = 0; i < 16; i++)
			copy[rand_r(&seed) % len] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		if (dwarf_params_open_image(copy, len, X86, &m) == 0) {
			lookup_everything(m, target);
			dwarf_params_close(m);
		}
	}
	free(copy);
	free(image);
}

static void test_not_elf(void)
{
	struct dwarf_params_module *m;

	CHECK_EQ_INT(dwarf_params_open("/nonexistent/file", NULL, X86, &m), -ENOENT);
	CHECK_EQ_INT(dwarf_params_open("/proc/self/status", NULL, X86, &m), -ENOEXEC);
	CHECK_EQ_INT(dwarf_params_open("/tmp", NULL, X86, &m), -ENOEXEC);
	CHECK_EQ_INT(dwarf_params_open_image("\177ELF", 4, X86, &m), -ENOEXEC);
}

/* ---- cost ------------------------------------------------------------------------ */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Index and lookup times on path's every function (info only: machines differ). */
static void measure(const char *path)
{
	struct dwarf_params_module *m;
	struct dwarf_params_stats st;
	struct elf_module *em;
	double t0 = now_ms(), t1, t2, t3;
	size_t i, found = 0;

	if (dwarf_params_open(path, NULL, DWARF_PARAMS_ARCH_AUTO, &m) != 0) {
		printf("info: %s: no DWARF found, not measured\n", path);
		return;
	}
	t1 = now_ms();
	em = elf_module_new(path);
	elf_module_load(em, 0, 0, 0);
	for (int pass = 0; pass < 2; pass++) {
		t2 = now_ms();
		for (i = 0; i < em->n_functions; i++) {
			struct dwarf_function *f;

			if (dwarf_params_lookup(m, em->functions[i].start, em->functions[i].name,
						&f) == 0) {
				found += !pass;
				dwarf_function_free(f);
			}
		}
		t3 = now_ms();
		dwarf_params_get_stats(m, &st);
		printf("info: %s: open %.1f ms (%zu units); %s %zu lookups (%zu found) %.1f ms, "
		       "%.2f us each (%zu units indexed)\n",
		       path, t1 - t0, st.units, pass ? "again" : "first", em->n_functions, found,
		       t3 - t2, em->n_functions ? (t3 - t2) * 1e3 / em->n_functions : 0.0,
		       st.units_indexed);
	}
	elf_module_free(em);
	dwarf_params_close(m);
}

static void test_cost(void)
{
	char target[PATH_MAX];

	target_path(variants[0], target, sizeof(target));
	measure(target);
	if (access("/lib/x86_64-linux-gnu/libc.so.6", R_OK) == 0)
		measure("/lib/x86_64-linux-gnu/libc.so.6"); /* with libc6-dbg: its debug file */
}

int main(void)
{
	RUN_TEST(test_integers);
	RUN_TEST(test_enums);
	RUN_TEST(test_strings_and_pointers);
	RUN_TEST(test_floats_interleaved);
	RUN_TEST(test_stack_arguments);
	RUN_TEST(test_struct_by_value);
	RUN_TEST(test_struct_return);
	RUN_TEST(test_typedefs_and_qualifiers);
	RUN_TEST(test_wide_types);
	RUN_TEST(test_variadic_and_returns);
	RUN_TEST(test_spec_text);
	RUN_TEST(test_function_without_dwarf);
	RUN_TEST(test_lookup_by_name);
	RUN_TEST(test_compiler_clone_refused);
	RUN_TEST(test_debug_file_by_build_id);
	RUN_TEST(test_debug_file_by_debuglink);
	RUN_TEST(test_truncated_files);
	RUN_TEST(test_corrupted_images);
	RUN_TEST(test_not_elf);
	RUN_TEST(test_cost);
	return unit_summary();
}
