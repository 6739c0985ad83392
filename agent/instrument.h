/* SPDX-License-Identifier: MIT */
/*
 * Finds the functions the user's patterns select in every loaded module,
 * builds their stubs and patches their entries. Produces the table the
 * daemon needs (id, name, module, address, size) and the skip list with a
 * reason for every matched function left alone.
 */
#ifndef PROFD_INSTRUMENT_H
#define PROFD_INSTRUMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/func_filter.h"

struct instrumented_function {
	uint32_t id;
	char *name;
	const char *module; /* points into the report's module strings */
	uint64_t address;
	uint64_t size;
	uint64_t base;               /* its module's load bias: address - base is its st_value */
	uint64_t stub;               /* its stub slot: `call region_thunk` then the relocated copy */
	uint64_t stub_same_offsets;  /* bytes of the copy at their original offsets */
	const char *dropped; /* set by instrument_commit: not patched after all, and why */
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
	bool go_exit_hooked; /* Go's runtime.exit: its hook waits for a flusher thread */
	uint64_t elapsed_ns;
};

#include "agent/patcher.h"
#include "agent/proc_maps.h"

struct pending_patch {
	struct code_patch jump;
	uint8_t original[PATCH_MAX_LEN];
	int64_t function;  /* index into report.functions; -1: patched only for its flags */
	uint32_t module;   /* index into plan.modules */
	int written;
	/* the function's address and its stub's same_offsets (the table's, for untimed stubs too) */
	uint64_t function_address;
	uint32_t same_offsets;
};

/* A module the plan has looked at (whether or not it patched anything in it). */
struct known_module {
	uint64_t base;
	uint64_t text_lo;  /* first executable byte: with base, tells a module apart */
	int gone;          /* unloaded (dlclose): its patches are forgotten, never touched */
};

/*
 * Instrumentation in two steps, so that a running process can be patched
 * with all its threads stopped: prepare allocates and builds every stub
 * (other threads may run), commit only writes code (no allocation, no lock).
 */
struct instrument_plan {
	struct instrument_report report;
	struct pending_patch *patches;   /* in address order within each module */
	size_t n_patches, cap_patches;
	struct proc_maps maps;           /* protections to restore after writing */
	struct known_module *modules;
	size_t n_modules, cap_modules;
	/*
	 * While the modules loaded at once are planned: the last stub region
	 * mapped, still writable, and the slots taken in it. The next module
	 * whose code it reaches puts its stubs there too (the loader, libc and
	 * the other libraries lie close together): one region, one mmap and
	 * one seal, rather than one each. Sealed when the walk ends.
	 */
	struct stub_region open_region;
	size_t open_used;
};

/*
 * A module as the walk sees it: its file and where its executable segments
 * are in this process's memory (the function bytes are read from there).
 */
#define LOADED_MODULE_MAX_SEGMENTS 8
struct loaded_module {
	char *path;
	uint64_t base; /* load bias: ELF address + base = address here */
	uint64_t seg_lo[LOADED_MODULE_MAX_SEGMENTS], seg_hi[LOADED_MODULE_MAX_SEGMENTS];
	int n_segs;
};

/*
 * Finds every function filter selects in the modules loaded now and builds
 * its stub. Returns 0 (even if some or all functions were skipped) or a
 * negative errno for a failure that stopped it.
 */
int instrument_prepare(const struct func_filter *filter, struct instrument_plan *plan);

/*
 * The same decisions over modules[0..n) instead of the loaded ones: `profctl
 * funcs` maps each file's segments for reading and gets the split `profctl
 * run` would get, stubs built (never run), nothing patched.
 */
int instrument_prepare_modules(const struct func_filter *filter,
			       const struct loaded_module *modules, size_t n,
			       struct instrument_plan *plan);

/*
 * Writes the entry jumps. A function whose patched bytes hold one of ips[]
 * (a stopped thread is executing them) is left alone and marked dropped, or,
 * with all_or_nothing, nothing is written and -EAGAIN returned (let the
 * threads move on and try again). Allocates nothing. Returns how many were
 * written or a negative errno.
 */
int instrument_commit(struct instrument_plan *plan, const uint64_t *ips, size_t n_ips,
		      int all_or_nothing);

/*
 * After the loader changed the module list (dlopen/dlclose, seen from
 * _dl_debug_state in the thread doing it): instruments the modules that are
 * new, before any other thread can run their code, and forgets the patches
 * of modules that are gone. Returns how many functions were added, or a
 * negative errno.
 */
int instrument_update_modules(const struct func_filter *filter, struct instrument_plan *plan);

struct elf_symbols;

/*
 * The selected load of the module at path that instrumenting it reads
 * (elf_symbols_load_selected with the filter's choice and the stack
 * walkers), made elsewhere (agent/module_preset.h). *mangled: C++ names
 * were matched, whose choice depends on the process (its demangler).
 * Returns as elf_symbols_load_selected.
 */
int instrument_selected_load(const struct func_filter *filter, const char *path,
			     struct elf_symbols *out, int *mangled, char *err, size_t errlen);

/*
 * Where instrumenting takes a module's selected load from before reading
 * its file: fn(ctx, path, out) returns 0 with *out filled as the load would
 * have, else nonzero (the file is read). NULL: always read. Setup-time,
 * single-threaded; fn and ctx must live while modules are instrumented.
 */
typedef int (*instrument_preset_fn)(void *ctx, const char *path, struct elf_symbols *out);
void instrument_set_presets(instrument_preset_fn fn, void *ctx);

/* Puts every original byte back (all threads stopped). Allocates nothing. */
int instrument_unpatch(struct instrument_plan *plan);

/* Adds a warning line to the report (sent with the table); best effort. */
void instrument_report_warn(struct instrument_report *r, const char *text);

/* Frees the plan; its stubs stay mapped (threads may still return through them). */
void instrument_plan_free(struct instrument_plan *plan);
void instrument_report_free(struct instrument_report *report);

#endif
