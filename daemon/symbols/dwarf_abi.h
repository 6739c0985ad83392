/* SPDX-License-Identifier: MIT */
/*
 * Internal to daemon/symbols/dwarf_params.c: where the calling convention
 * (System V x86-64, AAPCS64) puts each parameter and the return value of a
 * function, given what DWARF says of their types. Pure arithmetic on the
 * kinds below: no DWARF, no I/O. A value it cannot place exactly gets
 * DWARF_LOC_NONE and a reason, and so does every later value whose slot
 * that one made uncertain.
 */
#ifndef PROFD_DWARF_ABI_H
#define PROFD_DWARF_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/symbols/dwarf_params.h"

/* What the ABI rules need of a type (after typedefs and qualifiers). */
enum abi_kind {
	ABI_VOID,
	ABI_SCALAR,      /* integer, char, bool, enum, pointer, reference: <= 8 bytes */
	ABI_FLOAT,       /* float or double */
	ABI_INT128,      /* __int128 and other 16-byte integers */
	ABI_FLOAT128,    /* 16-byte float: x87 long double (x86-64) or binary128 */
	ABI_COMPLEX,     /* _Complex anything */
	ABI_AGGREGATE,   /* struct, union, class, array by value */
	ABI_UNKNOWN,     /* anything else, or a type DWARF does not describe fully */
};

struct abi_value {
	enum abi_kind kind;
	uint64_t size;           /* bytes; 0 when DWARF has no size */
	bool x87;                /* FLOAT128 named "long double" (x86-64: memory, not xmm) */
	bool promoted;           /* FLOAT of an unprototyped C function: the caller passed a double */
	bool regs_certain;       /* AGGREGATE: C type with naturally aligned members, so
				    x86-64 returns it in registers when <= 16 bytes */
};

/*
 * Places the n params and the return value: fills params[i].loc, .index,
 * .reason and ret->loc, ->reason (names and types are the caller's).
 * arch is X86_64 or AARCH64.
 */
void dwarf_abi_place(enum dwarf_params_arch arch, const struct abi_value *kinds, size_t n,
		     const struct abi_value *ret_kind, struct dwarf_value *params,
		     struct dwarf_value *ret);

#endif
