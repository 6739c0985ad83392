/* SPDX-License-Identifier: MIT */
/*
 * The --funcs language: comma-separated globs (fnmatch syntax), "!GLOB"
 * excludes, "MODULE:GLOB" restricts a glob to modules whose file name
 * (basename) matches MODULE. A symbol is selected when some include matches
 * and no exclude does. Pure, libc-only (used inside the agent).
 */
#ifndef PROFD_FUNC_FILTER_H
#define PROFD_FUNC_FILTER_H

#include <stdbool.h>
#include <stddef.h>

struct func_filter;

/*
 * Parses patterns[0..n) (each may hold several comma-separated items).
 * Returns 0, or -EINVAL with a one-line reason in err (empty item, "!" alone,
 * empty module or glob around ':', no include at all).
 */
int func_filter_parse(const char *const *patterns, size_t n, struct func_filter **out, char *err,
		      size_t errlen);
void func_filter_free(struct func_filter *f);

/* module_path may be a full path; only its basename is matched. */
bool func_filter_match(const struct func_filter *f, const char *module_path, const char *symbol);

/* True when some include item names a module (so modules can be skipped early). */
bool func_filter_module_may_match(const struct func_filter *f, const char *module_path);

#endif
