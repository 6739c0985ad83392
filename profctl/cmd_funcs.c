// SPDX-License-Identifier: MIT
/*
 * `profctl funcs [--pid PID | -- CMD [ARGS]] GLOBS`: what GLOBS would
 * instrument, module by module, and every function they would skip with its
 * reason, without running the workload. The decision is the agent's own
 * (agent/instrument.c over files mapped for reading, funcs_modules.h), so
 * the split is the one `profctl run` and `attach` print.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/instrument.h"
#include "common/func_filter.h"
#include "profctl/funcs_modules.h"
#include "profctl/profctl.h"

#define FUNCS_MAX_PATTERNS 64

static const char funcs_usage[] =
	"usage: profctl funcs GLOBS... (--pid PID | -- CMD [ARGS...])\n";

struct funcs_args {
	const char *patterns[FUNCS_MAX_PATTERNS];
	size_t n_patterns;
	long pid;          /* 0: none */
	char **command;    /* after "--", NULL: none */
};

static int parse_pid(const char *v, long *pid)
{
	char *end;

	errno = 0;
	*pid = strtol(v, &end, 10);
	if (v[0] < '0' || v[0] > '9' || *end || errno || *pid <= 0 || *pid > INT32_MAX) {
		fprintf(stderr, "profctl: funcs: --pid %s: expected a process id\n", v);
		return -EINVAL;
	}
	return 0;
}

static int funcs_parse(int argc, char **argv, struct funcs_args *a)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			a->command = i + 1 < argc ? argv + i + 1 : NULL;
			if (!a->command) {
				fprintf(stderr, "profctl: funcs: no command after --\n");
				return -EINVAL;
			}
			break;
		} else if (strcmp(argv[i], "--pid") == 0 || strcmp(argv[i], "--funcs") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "profctl: funcs: %s needs a value\n", argv[i]);
				return -EINVAL;
			}
			if (argv[i][2] == 'p' && parse_pid(argv[++i], &a->pid))
				return -EINVAL;
			if (argv[i][2] == 'f')
				a->patterns[a->n_patterns++] = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "profctl: funcs: unknown option %s\n", argv[i]);
			return -EINVAL;
		} else {
			a->patterns[a->n_patterns++] = argv[i];
		}
		if (a->n_patterns == FUNCS_MAX_PATTERNS) {
			fprintf(stderr, "profctl: funcs: more than %d glob arguments\n",
				FUNCS_MAX_PATTERNS - 1);
			return -EINVAL;
		}
	}
	if (!a->n_patterns || !!a->pid == !!a->command) {
		fputs(funcs_usage, stderr);
		return -EINVAL;
	}
	return 0;
}

/*
 * The agent demangles C++ names with the program's own libstdc++: when the
 * program has one, so do we (the symbols are looked up in the global scope).
 */
static void load_demangler(const struct funcs_modules *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *base = strrchr(m->items[i].path, '/');

		if (strncmp(base ? base + 1 : m->items[i].path, "libstdc++.so", 12) == 0 &&
		    dlopen(m->items[i].path, RTLD_LAZY | RTLD_GLOBAL))
			return;
	}
}

static const char *basename_of(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path ? path : "?";
}

static void print_module(const struct instrument_report *r, const char *module)
{
	size_t n_in = 0, n_skip = 0;

	for (size_t i = 0; i < r->n_functions; i++)
		n_in += r->functions[i].module == module;
	for (size_t i = 0; i < r->n_skipped; i++)
		n_skip += r->skipped[i].module == module;
	if (!n_in && !n_skip)
		return;
	printf("%s: %zu instrumented, %zu skipped\n", module, n_in, n_skip);
	for (size_t i = 0; i < r->n_functions; i++)
		if (r->functions[i].module == module)
			printf("  instrumented %s\n", r->functions[i].name);
	for (size_t i = 0; i < r->n_skipped; i++)
		if (r->skipped[i].module == module)
			printf("  skipped %s (%s): %s\n", r->skipped[i].name, basename_of(module),
			       r->skipped[i].reason);
}

/* Modules in the order the walk met them (the report keeps one string per module). */
static void print_report(const struct instrument_report *r, const struct funcs_modules *m)
{
	const char *last = NULL;

	for (size_t i = 0; i < r->n_strings; i++)
		for (size_t k = 0; k < m->n; k++)
			if (strcmp(r->strings[i], m->items[k].path) == 0 && r->strings[i] != last) {
				print_module(r, r->strings[i]);
				last = r->strings[i];
				break;
			}
	for (size_t i = 0; i < m->n_notes; i++)
		printf("note: %s\n", m->notes[i]);
	for (size_t i = 0; i < r->n_warnings; i++)
		printf("warning: %s\n", r->warnings[i]);
	printf("profctl: functions: %u matched, %zu instrumented, %zu skipped (%u modules scanned)\n",
	       r->matched, r->n_functions, r->n_skipped, r->modules_scanned);
}

static int funcs_modules(const struct funcs_args *a, struct funcs_modules *m)
{
	char dir[PATH_MAX - 32], agent[PATH_MAX];

	if (a->pid)
		return funcs_modules_of_pid((pid_t)a->pid, m);
	if (profctl_self_dir(dir, sizeof(dir)))
		return -ELIBACC;
	snprintf(agent, sizeof(agent), "%s/libprofagent.so", dir);
	return funcs_modules_of_command(a->command, agent, m);
}

int cmd_funcs(int argc, char **argv)
{
	struct funcs_args a = { 0 };
	struct funcs_modules m = { 0 };
	struct instrument_plan plan;
	struct func_filter *filter = NULL;
	char err_text[256];
	int err, rc = 1;

	if (funcs_parse(argc, argv, &a))
		return 2;
	if (func_filter_parse(a.patterns, a.n_patterns, &filter, err_text, sizeof(err_text))) {
		fprintf(stderr, "profctl: funcs: %s\n", err_text);
		return 2;
	}
	err = funcs_modules(&a, &m);
	if (!err) {
		load_demangler(&m);
		err = instrument_prepare_modules(filter, m.items, m.n, &plan);
		if (err)
			fprintf(stderr, "profctl: funcs: %s\n", strerror(-err));
		else if (!plan.report.matched)
			fprintf(stderr, "profctl: funcs: the globs select no function in the %u modules "
				"scanned\n", plan.report.modules_scanned);
		else
			rc = 0;
		if (!err && plan.report.matched)
			print_report(&plan.report, &m);
		instrument_plan_free(&plan);
	}
	funcs_modules_free(&m);
	func_filter_free(filter);
	return rc;
}
