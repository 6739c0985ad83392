/* SPDX-License-Identifier: MIT */
/*
 * The argument specs of --args and --retval (uftrace's -A/-R syntax:
 * "FUNC@arg1/s,arg2,fparg1/f64", "FUNC@retval/f64") and what one value is
 * on the wire: {source, index, class, size}. One structure for a user's
 * spec and a DWARF-derived one (--auto-args): a list of items, each naming
 * where the value lives (the Nth integer or FP argument, the return value)
 * and how to show it. libc only: profctl validates with it, the agent
 * matches and captures with it, profd renders with it.
 */
#ifndef PROFD_ARG_SPEC_H
#define PROFD_ARG_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a value lives (wire values: never renumber). */
enum arg_source {
	ARG_SRC_INT = 0,   /* argN: the Nth integer argument (registers, then the stack) */
	ARG_SRC_FP = 1,    /* fpargN: the Nth floating-point argument (xmm0-7 / v0-7) */
	ARG_SRC_RET = 2,   /* retval: the integer return register */
	ARG_SRC_FPRET = 3, /* retval/f32, retval/f64: the FP return register */
};

/* How a value is shown (wire values: never renumber). */
enum arg_class {
	ARG_CLASS_INT = 1,   /* d, i: signed */
	ARG_CLASS_UINT = 2,  /* u */
	ARG_CLASS_HEX = 3,   /* x */
	ARG_CLASS_CHAR = 4,  /* c */
	ARG_CLASS_FLOAT = 5, /* f32, f64 */
	ARG_CLASS_PTR = 6,   /* p */
	ARG_CLASS_STR = 7,   /* s: a NUL-terminated string, copied safely */
	ARG_CLASS_BOOL = 8,  /* DWARF bool */
	ARG_CLASS_ENUM = 9,  /* DWARF enum: an integer the daemon names by its enumerators */
	ARG_CLASS_MAX = 15,
};

/* argN up to this (x86-64: 6 registers, then the caller's stack), fpargN up to 8. */
#define ARG_INT_INDEX_MAX 16
#define ARG_FP_INDEX_MAX 8
/* Items of one spec, and of one function's merged specs. */
#define ARG_SPEC_ITEMS_MAX 8

struct arg_item {
	uint8_t source;   /* enum arg_source */
	uint8_t index;    /* 1-based for arguments, 0 for the return value */
	uint8_t cls;      /* enum arg_class */
	uint8_t size;     /* bytes: 1, 2, 4 or 8 */
	const char *name; /* NULL: arg1, fparg1, retval (a DWARF spec names its parameters) */
};

struct arg_spec {
	char glob[128];   /* fnmatch(3) over the instrumented functions' names */
	struct arg_item items[ARG_SPEC_ITEMS_MAX];
	unsigned n_items;
};

/*
 * Parses one --args (retval false) or --retval (true) spec. Returns 0, or
 * -EINVAL with a one-line reason in err that quotes the option and the spec
 * ("--args 'foo@arg9/q': unknown format 'q'").
 */
int arg_spec_parse(const char *text, bool retval, struct arg_spec *out, char *err, size_t errlen);

/* Whether spec applies to the function so named. */
bool arg_spec_matches(const struct arg_spec *spec, const char *func_name);

/*
 * The wire descriptor of an item, and back: ((index << 2 | source) << 6) |
 * cls << 2 | log2(size). -EINVAL when desc names no valid item.
 */
uint64_t arg_item_desc(const struct arg_item *item);
int arg_desc_decode(uint64_t desc, struct arg_item *item);

/* "arg1", "fparg2", "retval", or the item's own name. */
const char *arg_item_name(const struct arg_item *item, char *buf, size_t len);

/* "arg1/i32": the item as a spec writes it (for messages and tests). */
const char *arg_item_format(const struct arg_item *item, char *buf, size_t len);

/* v (the register's 64 bits) cut to the item's size: sign-extended for INT, zero-extended else. */
static inline uint64_t arg_item_value(const struct arg_item *item, uint64_t v)
{
	unsigned bits = item->size * 8u;

	if (bits >= 64)
		return v;
	if (item->cls == ARG_CLASS_INT)
		return (uint64_t)((int64_t)(v << (64 - bits)) >> (64 - bits));
	return v & ((1ull << bits) - 1);
}

#endif
