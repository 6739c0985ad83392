/* SPDX-License-Identifier: MIT */
/*
 * Finds the functions the user's patterns select in every loaded module,
 * builds their stubs and patches their entries. Produces the table the
 * daemon needs (id, name, module, address, size) and the skip list with a
 * reason for every matched function left alone.
 */
#ifndef PROFD_INSTRUMENT_H
#define PROFD_INSTRUMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/func_filter.h"

struct instrumented_function {
	uint32_t id;
	char *name;
	const char *module; /* points into the report's module strings */
	uint64_t address;
	uint64_t size;
};

struct skipped_function {
	char *name;
	const char *module;
	const char *reason; /* static or owned by report (see reasons) */
};

struct instrument_report {
	struct instrumented_function *functions;
	size_t n_functions, cap_functions;
	struct skipped_function *skipped;
	size_t n_skipped, cap_skipped;
	char **strings;     /* module paths and copied reasons, owned */
	size_t n_strings, cap_strings;
	char **warnings;
	size_t n_warnings;
	uint32_t matched;
	uint32_t modules_scanned;
	uint64_t elapsed_ns;
};

/*
 * Instruments every function selected by filter in the modules loaded now.
 * The caller must run it while no other thread executes code being patched
 * (process start, or all threads stopped). Returns 0 (even if some or all
 * functions were skipped) or a negative errno for a failure that stopped it.
 */
int instrument_all(const struct func_filter *filter, struct instrument_report *report);
void instrument_report_free(struct instrument_report *report);

#endif
