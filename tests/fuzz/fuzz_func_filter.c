// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for common/func_filter.c. Input: NUL-separated strings;
 * with three or more, the last two are a module path and a symbol and the
 * rest are patterns, else all are patterns. The first byte picks a small or a
 * roomy error buffer. Checks parse results and match/may_match consistency.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/func_filter.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())
#define MAX_PARTS 10

/* Splits data at NUL bytes into at most MAX_PARTS heap strings. */
static size_t split(const uint8_t *data, size_t size, char **parts)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; i <= size && n < MAX_PARTS; i++) {
		if (i < size && data[i] != 0)
			continue;
		parts[n] = strndup((const char *)data + start, i - start);
		n++;
		start = i + 1;
	}
	return n;
}

static void check_matches(const struct func_filter *f, const char *module, const char *symbol)
{
	bool may = func_filter_module_may_match(f, module);
	bool hit = func_filter_match(f, module, symbol);
	const char *base = strrchr(module, '/');
	char *path;

	CHECK(!hit || may);
	CHECK(func_filter_match(f, NULL, symbol) == func_filter_match(f, "", symbol));
	CHECK(!func_filter_match(f, module, NULL));
	/* only the basename counts */
	if (asprintf(&path, "/fuzz/dir/%s", base ? base + 1 : module) < 0)
		return;
	CHECK(func_filter_match(f, path, symbol) == hit);
	CHECK(func_filter_module_may_match(f, path) == may);
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *parts[MAX_PARTS];
	size_t n = split(data, size, parts), n_patterns = n >= 3 ? n - 2 : n;
	size_t errlen = size && data[0] % 4 == 0 ? 8 : 256;
	char *err = malloc(errlen); /* exact size: ASan sees any overrun */
	struct func_filter *f = NULL;
	int ret;

	err[0] = '\0';
	ret = func_filter_parse((const char *const *)parts, n_patterns, &f, err, errlen);
	CHECK(ret == 0 || ret == -EINVAL || ret == -ENOMEM);
	CHECK((ret == 0) == (f != NULL));
	CHECK(ret != -EINVAL || (err[0] != '\0' && strlen(err) < errlen));
	if (f && n >= 3)
		check_matches(f, parts[n - 2], parts[n - 1]);
	func_filter_free(f);
	for (size_t i = 0; i < n; i++)
		free(parts[i]);
	free(err);
	return 0;
}
