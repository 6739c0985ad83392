/* SPDX-License-Identifier: MIT */
/*
 * Parameters and return types of a module's functions from its DWARF (libdw),
 * for --auto-args: each parameter's name, type and where the ABI passes it
 * (argN / fpargN, System V x86-64 or AAPCS64), the return value likewise.
 * Owns one module's debug info: found in the module, else by build id or
 * .gnu_debuglink under a debug root. It never guesses a register: what it
 * cannot place exactly is unsupported, with the reason. Hostile files give a
 * negative errno, never a crash; files are read, never mmapped.
 */
#ifndef PROFD_DWARF_PARAMS_H
#define PROFD_DWARF_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dwarf_params_module;

enum dwarf_params_arch {
	DWARF_PARAMS_ARCH_AUTO,     /* from the module's ELF header (x86-64 or aarch64) */
	DWARF_PARAMS_ARCH_X86_64,   /* System V AMD64: rdi rsi rdx rcx r8 r9, xmm0-7 */
	DWARF_PARAMS_ARCH_AARCH64,  /* AAPCS64: x0-x7, v0-v7, x8 = indirect result */
};

/* Where the module's DWARF came from. */
enum dwarf_params_source {
	DWARF_PARAMS_OWN,           /* the module's own .debug_info */
	DWARF_PARAMS_BUILD_ID,      /* ROOT/.build-id/xx/yyyy.debug */
	DWARF_PARAMS_DEBUGLINK,     /* .gnu_debuglink in DIR, DIR/.debug or ROOT/DIR */
};

enum dwarf_type_class {
	DWARF_TYPE_VOID,            /* return type only */
	DWARF_TYPE_INT,             /* size 1, 2, 4 or 8; is_signed */
	DWARF_TYPE_CHAR,            /* plain char, signed char, unsigned char (size 1) */
	DWARF_TYPE_BOOL,            /* size 1 (or the DWARF's size) */
	DWARF_TYPE_ENUM,            /* integer of size/is_signed; enumerators */
	DWARF_TYPE_FLOAT,           /* size 4 (float) or 8 (double) */
	DWARF_TYPE_STRING,          /* pointer to (const) char: NUL-terminated text */
	DWARF_TYPE_POINTER,         /* any other pointer or reference */
	DWARF_TYPE_OTHER,           /* struct, union, long double, __int128, ...: no value */
};

struct dwarf_enumerator {
	int64_t value;              /* unsigned enumerators above INT64_MAX wrap */
	const char *name;
};

struct dwarf_value_type {
	enum dwarf_type_class cls;
	uint8_t size;               /* bytes in the register (0 for void; capped at 255) */
	bool is_signed;
	const char *name;           /* the typedef's or the type's name ("size_t", "mode" for
				       enum mode, "const char *"), or NULL */
	const struct dwarf_enumerator *enumerators; /* ENUM: in DWARF order */
	size_t n_enumerators;
};

enum dwarf_value_loc {
	DWARF_LOC_NONE,             /* unsupported: see reason */
	DWARF_LOC_INT,              /* argN (index N, 1-based) or retval */
	DWARF_LOC_FP,               /* fpargN (index N, 1-based), or the return in xmm0 / v0
				       (uftrace's spec: retval/f32, retval/f64) */
};

/*
 * A parameter or the return value. argN counts the integer slots: the
 * registers (x86-64 1-6, aarch64 1-8), then the stack's 8-byte words in
 * order (x86-64 arg7 is the first word above the return address, aarch64
 * arg9 the word at sp). fpargN counts the vector registers (1-8).
 */
struct dwarf_value {
	const char *name;           /* parameter name; NULL if unnamed; "retval" for the return */
	struct dwarf_value_type type;
	enum dwarf_value_loc loc;
	unsigned int index;         /* N of argN / fpargN; 0 for the return value */
	const char *reason;         /* why loc is NONE (static string), else NULL */
};

struct dwarf_function {
	const char *name;           /* DWARF name (C++: the plain name, not demangled) */
	uint64_t entry;             /* entry address in the module's ELF addresses */
	struct dwarf_value *params; /* in declaration order; C++ `this` first */
	size_t n_params;
	struct dwarf_value ret;     /* cls VOID and loc NONE (reason NULL) for void */
	bool variadic;              /* the fixed parameters are still placed exactly */
	size_t n_supported;         /* params with loc != NONE */
};

/*
 * Opens the module at path (absolute for the debuglink search) and finds its
 * DWARF: the file's own .debug_info, else DEBUG_ROOT/.build-id/xx/yyyy.debug
 * whose build id matches, else the .gnu_debuglink file in DIR, DIR/.debug,
 * DEBUG_ROOT/DIR whose CRC-32 (and build id, when both have one) matches.
 * debug_root NULL means /usr/lib/debug. Reads the unit headers and the
 * units' address ranges only; each unit's functions are indexed the first
 * time a lookup lands in it.
 * Returns 0 and *out, or -ENOENT/-EACCES (cannot open), -ENOEXEC (not an ELF,
 * or arch AUTO and not x86-64/aarch64), -ENODATA (no DWARF found anywhere),
 * -EINVAL (malformed DWARF), -ENOMEM. Not thread-safe: one thread at a time
 * per module; modules are independent.
 */
int dwarf_params_open(const char *path, const char *debug_root, enum dwarf_params_arch arch,
		      struct dwarf_params_module **out);

/*
 * The same from an ELF image in memory (no separate debug file is looked
 * for); the image is copied. Errors as dwarf_params_open.
 */
int dwarf_params_open_image(const void *image, size_t len, enum dwarf_params_arch arch,
			    struct dwarf_params_module **out);

void dwarf_params_close(struct dwarf_params_module *m);

/* Where the DWARF came from, and the file read for it (the module's path for OWN). */
enum dwarf_params_source dwarf_params_source(const struct dwarf_params_module *m);
const char *dwarf_params_debug_path(const struct dwarf_params_module *m);
enum dwarf_params_arch dwarf_params_arch(const struct dwarf_params_module *m);

/*
 * The function whose entry is addr (the ELF symbol's st_value). symbol_name
 * is the ELF symbol's name, or NULL: an out-of-line instance
 * (DW_AT_abstract_origin) is trusted only when symbol_name is its DWARF
 * name, since GCC's clones (foo.isra.0, foo.constprop.0) share the
 * declaration's DWARF but not its ABI; otherwise all its parameters are
 * unsupported. Returns 0 and *out (free with dwarf_function_free; it does
 * not point into m), -ENOENT (no DWARF subprogram starts at addr),
 * -EINVAL (malformed DWARF), -ENOMEM.
 */
int dwarf_params_lookup(struct dwarf_params_module *m, uint64_t addr, const char *symbol_name,
			struct dwarf_function **out);

/*
 * The function named name (DW_AT_linkage_name, else DW_AT_name; a
 * definition before an out-of-line instance). Indexes every unit on first
 * use. Errors as dwarf_params_lookup.
 */
int dwarf_params_lookup_name(struct dwarf_params_module *m, const char *name,
			     struct dwarf_function **out);

void dwarf_function_free(struct dwarf_function *f);

/*
 * uftrace's spec text of f's placed values (--args / --retval without
 * FUNC@): args "arg1/i32,arg2/s,fparg1/f64", retval "retval/u8" (empty
 * strings when nothing is placed). Formats: iN/uN (N = 8, 16, 32, 64; enums
 * and bool as their integer), c, s, p, f32, f64. Names and enumerators are
 * lost here: the daemon uses struct dwarf_function itself. Returns 0, or
 * -ENOSPC when a buffer is too small (then both hold "").
 */
int dwarf_function_spec(const struct dwarf_function *f, char *args, size_t args_size,
			char *retval, size_t retval_size);

/* Counters since open. */
struct dwarf_params_stats {
	size_t units;               /* compilation units */
	size_t units_indexed;       /* units whose functions have been indexed */
	size_t functions_indexed;   /* subprograms with an entry address in those */
};

void dwarf_params_get_stats(const struct dwarf_params_module *m, struct dwarf_params_stats *out);

#endif
