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
 * Parses patterns[0..n) (each may hold several comma-separated items; blanks
 * around items, after "!" and around ':' are ignored; the first ':' splits
 * module from glob). Returns 0, or -EINVAL with a one-line reason in err
 * naming the item (empty item, "!" alone, empty module or glob around ':',
 * no include at all), or -ENOMEM. The filter is read-only afterwards: any
 * number of threads may match against it concurrently.
 */
int func_filter_parse(const char *const *patterns, size_t n, struct func_filter **out, char *err,
		      size_t errlen);
void func_filter_free(struct func_filter *f);

/*
 * module_path may be a full path; only its basename is matched (NULL matches
 * as ""). Globs use fnmatch(3) without flags.
 */
bool func_filter_match(const struct func_filter *f, const char *module_path, const char *symbol);

/*
 * False when no symbol of this module can be selected (no include applies to
 * it, or an exclude whose glob is "*" covers it), so the module can be skipped
 * before its symbols are read; true when some may be.
 */
bool func_filter_module_may_match(const struct func_filter *f, const char *module_path);

#endif
