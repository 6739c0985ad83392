// SPDX-License-Identifier: MIT
/*
 * The --funcs pattern language (see common/func_filter.h): parsing into a flat
 * list of include/exclude items and matching with fnmatch(3). libc only, no
 * logging and no global state: it runs inside the profiled process, and the
 * patterns come from the user, so every bad item is reported, never guessed.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/func_filter.h"

/* Longest piece of user text quoted in an error message. */
#define FUNC_FILTER_QUOTE_MAX 64

struct func_filter_item {
	const char *module; /* NULL: every module */
	const char *glob;
	size_t literal;     /* the glob's bytes before its first * ? [ or \ */
	bool exclude;
};

struct func_filter {
	struct func_filter_item *items;
	size_t n_items;
	size_t n_includes;
	char *text; /* the patterns, split in place; items point into it */
};

/* A one-line, bounded copy of user text for a message. */
static void func_filter_quote(char *dst, size_t dstlen, const char *s, size_t len)
{
	size_t i, n = len < FUNC_FILTER_QUOTE_MAX ? len : FUNC_FILTER_QUOTE_MAX;

	if (n >= dstlen)
		n = dstlen - 1;
	for (i = 0; i < n; i++)
		dst[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	dst[n] = '\0';
	if (n < len && n >= 3)
		memcpy(dst + n - 3, "...", 3);
}

__attribute__((format(printf, 3, 4)))
static int func_filter_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool func_filter_blank(char c)
{
	return isspace((unsigned char)c);
}

/* Trims [*start, *end) in place (pointer pair, end exclusive). */
static void func_filter_trim(char **start, char **end)
{
	while (*start < *end && func_filter_blank(**start))
		(*start)++;
	while (*end > *start && func_filter_blank((*end)[-1]))
		(*end)--;
}

/* Checks one trimmed item [s, e) and appends it; s..e is NUL-split in place. */
static int func_filter_add_item(struct func_filter *f, char *s, char *e, char *err, size_t errlen)
{
	struct func_filter_item *it = &f->items[f->n_items];
	char q[FUNC_FILTER_QUOTE_MAX + 1];
	char *colon, *ms = s, *me, *gs, *ge = e;

	func_filter_quote(q, sizeof(q), s, (size_t)(e - s));
	it->exclude = *s == '!';
	if (it->exclude) {
		ms = s + 1;
		func_filter_trim(&ms, &ge);
		if (ms == ge)
			return func_filter_fail(err, errlen, "\"!\" without a glob in item \"%s\"",
						q);
	}
	colon = memchr(ms, ':', (size_t)(ge - ms));
	gs = colon ? colon + 1 : ms;
	me = colon ? colon : ms;
	func_filter_trim(&ms, &me);
	func_filter_trim(&gs, &ge);
	if (colon && ms == me)
		return func_filter_fail(err, errlen, "empty module before ':' in item \"%s\"", q);
	if (gs == ge)
		return func_filter_fail(err, errlen, "empty glob after ':' in item \"%s\"", q);
	*ge = '\0';
	it->glob = gs;
	it->literal = strcspn(gs, "*?[\\");
	it->module = NULL;
	if (colon) {
		*me = '\0';
		it->module = ms;
	}
	f->n_items++;
	f->n_includes += !it->exclude;
	return 0;
}

/* Splits one NUL-terminated pattern (a copy in f->text) at its commas. */
static int func_filter_add_list(struct func_filter *f, char *text, char *err, size_t errlen)
{
	char q[FUNC_FILTER_QUOTE_MAX + 1];
	char *s = text, *e, *next;
	size_t index = 1;
	int ret;

	func_filter_quote(q, sizeof(q), text, strlen(text));
	for (;; index++, s = next + 1) {
		next = strchr(s, ',');
		e = next ? next : s + strlen(s);
		func_filter_trim(&s, &e);
		if (s == e && !next && index == 1)
			return func_filter_fail(err, errlen, "empty pattern \"%s\"", q);
		if (s == e)
			return func_filter_fail(err, errlen, "empty item %zu in \"%s\"", index, q);
		ret = func_filter_add_item(f, s, e, err, errlen);
		if (ret < 0 || !next)
			return ret;
	}
}

static struct func_filter *func_filter_alloc(const char *const *patterns, size_t n)
{
	struct func_filter *f = calloc(1, sizeof(*f));
	size_t i, text = 0, items = 0;
	const char *c;

	if (!f)
		return NULL;
	for (i = 0; i < n; i++) {
		text += strlen(patterns[i]) + 1;
		items++;
		for (c = patterns[i]; (c = strchr(c, ',')) != NULL; c++)
			items++;
	}
	f->text = malloc(text ? text : 1);
	f->items = calloc(items ? items : 1, sizeof(*f->items));
	if (!f->text || !f->items) {
		func_filter_free(f);
		return NULL;
	}
	return f;
}

int func_filter_parse(const char *const *patterns, size_t n, struct func_filter **out, char *err,
		      size_t errlen)
{
	struct func_filter *f;
	char *text;
	size_t i;
	int ret;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	f = func_filter_alloc(patterns, n);
	if (!f) {
		func_filter_fail(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0, text = f->text; i < n; i++) {
		size_t len = strlen(patterns[i]);

		memcpy(text, patterns[i], len + 1);
		ret = func_filter_add_list(f, text, err, errlen);
		if (ret < 0)
			goto err_free;
		text += len + 1;
	}
	if (f->n_includes == 0) {
		ret = func_filter_fail(err, errlen,
				       "no function to include (only excludes or nothing)");
		goto err_free;
	}
	*out = f;
	return 0;

err_free:
	func_filter_free(f);
	return ret;
}

void func_filter_free(struct func_filter *f)
{
	if (!f)
		return;
	free(f->items);
	free(f->text);
	free(f);
}

static const char *func_filter_basename(const char *path)
{
	const char *slash;

	if (!path)
		return "";
	slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static bool func_filter_module_ok(const struct func_filter_item *it, const char *module)
{
	return !it->module || fnmatch(it->module, module, 0) == 0;
}

/*
 * The literal prefix first: the agent matches every function name of every
 * module at each process start, and a glob like "narrow*" rejects nearly
 * all of them by their first bytes, without fnmatch.
 */
static bool func_filter_glob_ok(const struct func_filter_item *it, const char *symbol)
{
	return strncmp(symbol, it->glob, it->literal) == 0 && fnmatch(it->glob, symbol, 0) == 0;
}

bool func_filter_match(const struct func_filter *f, const char *module_path, const char *symbol)
{
	const char *module = func_filter_basename(module_path);
	bool included = false;
	size_t i;

	if (!symbol)
		return false;
	for (i = 0; i < f->n_items && !included; i++) {
		const struct func_filter_item *it = &f->items[i];

		included = !it->exclude && func_filter_glob_ok(it, symbol) &&
			   func_filter_module_ok(it, module);
	}
	for (i = 0; i < f->n_items && included; i++) {
		const struct func_filter_item *it = &f->items[i];

		if (it->exclude && func_filter_glob_ok(it, symbol) &&
		    func_filter_module_ok(it, module))
			return false;
	}
	return included;
}

bool func_filter_module_may_match(const struct func_filter *f, const char *module_path)
{
	const char *module = func_filter_basename(module_path);
	bool may = false;
	size_t i;

	for (i = 0; i < f->n_items; i++) {
		const struct func_filter_item *it = &f->items[i];

		if (!func_filter_module_ok(it, module))
			continue;
		if (it->exclude && strcmp(it->glob, "*") == 0)
			return false;
		may |= !it->exclude;
	}
	return may;
}
