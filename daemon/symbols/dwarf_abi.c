// SPDX-License-Identifier: MIT
/*
 * Argument placement for dwarf_params.c: System V x86-64 and AAPCS64 (Linux)
 * rules for what can be placed exactly, and uftrace's spec text of the
 * result. Never guesses: each rule it does not implement (aggregates by
 * value, 16-byte and complex types) ends certainty for the slots it could
 * have consumed, and only those.
 */
#include "daemon/symbols/dwarf_abi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The registers of one arch and how sure we still are of each kind of slot. */
struct abi_state {
	unsigned int int_regs, fp_regs;   /* x86-64: 6, 8; aarch64: 8, 8 */
	unsigned int next_int, next_fp;   /* registers consumed */
	unsigned int stack_words;         /* 8-byte stack words consumed */
	bool int_ok, fp_ok, stack_ok;     /* their counts are still exact */
	bool aarch64;
};

static void place(struct dwarf_value *v, enum dwarf_value_loc loc, unsigned int index)
{
	v->loc = loc;
	v->index = index;
	v->reason = NULL;
}

static void refuse(struct dwarf_value *v, const char *reason)
{
	v->loc = DWARF_LOC_NONE;
	v->index = 0;
	v->reason = reason;
}

/* The next integer slot: a register, else the next stack word (argN past the registers). */
static void place_scalar(struct abi_state *s, struct dwarf_value *v)
{
	if (!s->int_ok)
		return refuse(v, "integer slot unknown after an earlier parameter");
	if (s->next_int < s->int_regs)
		return place(v, DWARF_LOC_INT, ++s->next_int);
	if (!s->stack_ok)
		return refuse(v, "stack slot unknown after an earlier parameter");
	place(v, DWARF_LOC_INT, s->int_regs + 1 + s->stack_words++);
}

static void place_float(struct abi_state *s, const struct abi_value *k, struct dwarf_value *v)
{
	if (!s->fp_ok)
		return refuse(v, "vector register unknown after an earlier parameter");
	if (s->next_fp < s->fp_regs) {
		s->next_fp++;
		if (k->promoted)
			return refuse(v, "float of an unprototyped function: passed as double");
		return place(v, DWARF_LOC_FP, s->next_fp);
	}
	/* on the stack: one word, but fpargN names registers only */
	if (s->stack_ok)
		s->stack_words++;
	refuse(v, "floating-point argument on the stack");
}

static void place_int128(struct abi_state *s, struct dwarf_value *v)
{
	unsigned int first = s->next_int;

	refuse(v, "128-bit integer");
	if (!s->int_ok) {
		s->stack_ok = false;
		return;
	}
	if (s->aarch64)
		first = (first + 1) & ~1u; /* an even register pair (AAPCS64 C.8) */
	if (first + 2 <= s->int_regs) {
		s->next_int = first + 2;
		return;
	}
	if (s->aarch64)
		s->next_int = s->int_regs; /* C.11: no more core registers */
	s->stack_ok = false;         /* 16-byte aligned on the stack: padding unknown to us */
}

static void place_float128(struct abi_state *s, const struct abi_value *k, struct dwarf_value *v)
{
	refuse(v, s->aarch64 || !k->x87 ? "128-bit float" : "long double (x87, on the stack)");
	if (!s->aarch64 && k->x87) {
		s->stack_ok = false; /* memory class: stack only, 16-byte aligned */
		return;
	}
	if (!s->aarch64) {
		s->fp_ok = false;    /* binary128 or something we cannot tell from x87: unsure */
		s->stack_ok = false;
		return;
	}
	if (s->fp_ok && s->next_fp < s->fp_regs)
		s->next_fp++;
	else
		s->stack_ok = false;
}

/* aarch64 (B.4): a composite over 16 bytes is copied and passed by its address. */
static void place_aggregate(struct abi_state *s, const struct abi_value *k, struct dwarf_value *v)
{
	if (s->aarch64 && k->size > 16) {
		struct dwarf_value pointer;

		place_scalar(s, &pointer);
		return refuse(v, "struct or union by value (passed by reference)");
	}
	refuse(v, "struct or union by value");
	s->int_ok = s->fp_ok = s->stack_ok = false;
}

static void place_param(struct abi_state *s, const struct abi_value *k, struct dwarf_value *v)
{
	switch (k->kind) {
	case ABI_SCALAR:
		return place_scalar(s, v);
	case ABI_FLOAT:
		return place_float(s, k, v);
	case ABI_INT128:
		return place_int128(s, v);
	case ABI_FLOAT128:
		return place_float128(s, k, v);
	case ABI_COMPLEX:
		refuse(v, "complex number");
		s->fp_ok = s->stack_ok = false;
		return;
	case ABI_AGGREGATE:
		return place_aggregate(s, k, v);
	case ABI_VOID:
	case ABI_UNKNOWN:
		break;
	}
	refuse(v, "type not described by DWARF");
	s->int_ok = s->fp_ok = s->stack_ok = false;
}

/*
 * x86-64: an aggregate returned in memory takes rdi for its address, so the
 * parameters start at arg2. Over 16 bytes it always is (C and C++ alike); at
 * most 16 only a C type with aligned members is surely in registers.
 */
static void place_return_x86_64(struct abi_state *s, const struct abi_value *k,
				 struct dwarf_value *ret)
{
	if (k->kind != ABI_AGGREGATE)
		return;
	if (k->size > 16) {
		refuse(ret, "struct or union returned in memory");
		s->next_int = 1;
	} else if (k->size == 0 || !k->regs_certain) {
		refuse(ret, "struct or union return: registers or memory unknown");
		s->int_ok = s->stack_ok = false;
	} else {
		refuse(ret, "struct or union returned in registers");
	}
}

/* The return value; aarch64 returns memory through x8, which shifts nothing. */
static void place_return(struct abi_state *s, const struct abi_value *k, struct dwarf_value *ret)
{
	switch (k->kind) {
	case ABI_VOID:
		return refuse(ret, NULL);
	case ABI_SCALAR:
		return place(ret, DWARF_LOC_INT, 0);
	case ABI_FLOAT:
		return place(ret, DWARF_LOC_FP, 0);
	case ABI_INT128:
		return refuse(ret, "128-bit integer");
	case ABI_FLOAT128:
		return refuse(ret, s->aarch64 || !k->x87 ? "128-bit float" : "long double (x87)");
	case ABI_COMPLEX:
		return refuse(ret, "complex number");
	case ABI_AGGREGATE:
		if (s->aarch64)
			return refuse(ret, "struct or union return");
		return place_return_x86_64(s, k, ret);
	case ABI_UNKNOWN:
		break;
	}
	refuse(ret, "type not described by DWARF");
	if (!s->aarch64)
		s->int_ok = s->stack_ok = false; /* might have been a hidden pointer */
}

void dwarf_abi_place(enum dwarf_params_arch arch, const struct abi_value *kinds, size_t n,
		     const struct abi_value *ret_kind, struct dwarf_value *params,
		     struct dwarf_value *ret)
{
	struct abi_state s = { .int_regs = 6, .fp_regs = 8, .int_ok = true, .fp_ok = true,
			       .stack_ok = true };
	size_t i;

	if (arch == DWARF_PARAMS_ARCH_AARCH64) {
		s.int_regs = 8;
		s.aarch64 = true;
	}
	place_return(&s, ret_kind, ret);
	for (i = 0; i < n; i++)
		place_param(&s, &kinds[i], &params[i]);
}

/* ---- uftrace spec text ----------------------------------------------------- */

/* The format of a placed value: "i32", "u8", "c", "s", "p", "f64". */
static void value_format(const struct dwarf_value *v, char *fmt, size_t size)
{
	const struct dwarf_value_type *t = &v->type;
	unsigned int bits = t->size * 8u;

	switch (t->cls) {
	case DWARF_TYPE_CHAR:
		snprintf(fmt, size, "c");
		return;
	case DWARF_TYPE_STRING:
		snprintf(fmt, size, "s");
		return;
	case DWARF_TYPE_POINTER:
		snprintf(fmt, size, "p");
		return;
	case DWARF_TYPE_FLOAT:
		snprintf(fmt, size, "f%u", bits);
		return;
	default:
		break;
	}
	if (bits != 8 && bits != 16 && bits != 32)
		bits = 64;
	snprintf(fmt, size, "%c%u", t->is_signed ? 'i' : 'u', bits);
}

/* Appends "NAME/FMT" (comma-separated) to buf; false when it does not fit. */
static bool append(char *buf, size_t size, size_t *len, const char *name, unsigned int index,
		   const char *fmt)
{
	int n = snprintf(buf + *len, size - *len, "%s%s%.0u/%s", *len ? "," : "", name, index, fmt);

	if (n < 0 || (size_t)n >= size - *len)
		return false;
	*len += (size_t)n;
	return true;
}

int dwarf_function_spec(const struct dwarf_function *f, char *args, size_t args_size,
			char *retval, size_t retval_size)
{
	size_t alen = 0, rlen = 0, i;
	bool ok = args_size > 0 && retval_size > 0;
	char fmt[8];

	if (ok)
		args[0] = retval[0] = '\0';
	for (i = 0; ok && i < f->n_params; i++) {
		const struct dwarf_value *v = &f->params[i];

		if (v->loc == DWARF_LOC_NONE)
			continue;
		value_format(v, fmt, sizeof(fmt));
		ok = append(args, args_size, &alen, v->loc == DWARF_LOC_FP ? "fparg" : "arg",
			    v->index, fmt);
	}
	if (ok && f->ret.loc != DWARF_LOC_NONE) {
		value_format(&f->ret, fmt, sizeof(fmt));
		ok = append(retval, retval_size, &rlen, "retval", 0, fmt);
	}
	if (ok)
		return 0;
	if (args_size)
		args[0] = '\0';
	if (retval_size)
		retval[0] = '\0';
	return -ENOSPC;
}
