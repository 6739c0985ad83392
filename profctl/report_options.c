// SPDX-License-Identifier: MIT
/*
 * `profctl report`'s command line (report_options.h): every option and its
 * value checked, one line on stderr naming what was wrong.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/func_filter.h"
#include "profctl/report_options.h"

const char profctl_report_usage[] =
	"usage: profctl report [--dump | [--sort calls|total|self|avg|p99] [--top N] [--threads]\n"
	"                      [--percentiles] [--funcs GLOBS] [--callers FUNC]] FILE\n";

static int parse_sort(const char *v, enum profctl_report_sort *sort)
{
	static const char *const names[] = {
		[PROFCTL_SORT_TOTAL] = "total", [PROFCTL_SORT_CALLS] = "calls",
		[PROFCTL_SORT_SELF] = "self", [PROFCTL_SORT_AVG] = "avg", [PROFCTL_SORT_P99] = "p99",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(v, names[i]) == 0) {
			*sort = (enum profctl_report_sort)i;
			return 0;
		}
	fprintf(stderr, "profctl: report: --sort %s: expected calls, total, self, avg or p99\n", v);
	return -EINVAL;
}

static int parse_top(const char *v, size_t *top)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end || errno || n == 0 || n > 1000000000ull) {
		fprintf(stderr, "profctl: report: --top %s: expected a number of rows from 1\n", v);
		return -EINVAL;
	}
	*top = (size_t)n;
	return 0;
}

static int parse_funcs(const char *v, struct func_filter **f)
{
	char err[256];

	if (func_filter_parse(&v, 1, f, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "profctl: report: --funcs %s: %s\n", v, err);
	return -EINVAL;
}

/* The value of option name at argv[*i] ("--name V" or "--name=V"), NULL if it is not name. */
static const char *option_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
	size_t len = strlen(name);

	if (strncmp(argv[*i], name, len) != 0)
		return NULL;
	if (argv[*i][len] == '=')
		return argv[*i] + len + 1;
	if (argv[*i][len])
		return NULL;
	if (*i + 1 >= argc) {
		fprintf(stderr, "profctl: report: %s needs a value\n", name);
		*missing = true;
		return NULL;
	}
	return argv[++*i];
}

int profctl_report_parse(int argc, char **argv, struct profctl_report_opts *o, const char **path,
			struct func_filter **filter)
{
	bool missing = false, summary = false;
	const char *v;

	for (int i = 1; i < argc && !missing; i++) {
		const char *a = argv[i];
		int err = 0;

		if (strcmp(a, "--dump") == 0) {
			o->dump = true;
		} else if (strcmp(a, "--threads") == 0) {
			o->threads = summary = true;
		} else if (strcmp(a, "--percentiles") == 0) {
			o->percentiles = summary = true;
		} else if ((v = option_value(argc, argv, &i, "--sort", &missing))) {
			err = parse_sort(v, &o->sort);
			summary = true;
		} else if ((v = option_value(argc, argv, &i, "--top", &missing))) {
			err = parse_top(v, &o->top);
			summary = true;
		} else if ((v = option_value(argc, argv, &i, "--funcs", &missing))) {
			func_filter_free(*filter);
			*filter = NULL;
			err = parse_funcs(v, filter);
			o->funcs = *filter;
			summary = true;
		} else if ((v = option_value(argc, argv, &i, "--callers", &missing))) {
			if (!*v) {
				fprintf(stderr, "profctl: report: --callers needs a function name\n");
				err = -EINVAL;
			}
			o->callers = v;
			summary = true;
		} else if (missing) {
			break;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "profctl: report: unknown option %s\n", a);
			err = -EINVAL;
		} else if (!*path) {
			*path = a;
		} else {
			fprintf(stderr, "profctl: report: one trace at a time (%s, then %s)\n", *path, a);
			err = -EINVAL;
		}
		if (err)
			return err;
	}
	if (missing)
		return -EINVAL;
	if (o->dump && summary) {
		fprintf(stderr, "profctl: report: --dump prints every item; --sort, --top, --threads, "
			"--percentiles, --funcs and --callers shape the summary\n");
		return -EINVAL;
	}
	if (!*path) {
		fputs(profctl_report_usage, stderr);
		return -EINVAL;
	}
	return 0;
}

