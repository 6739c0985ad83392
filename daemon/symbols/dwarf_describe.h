/* SPDX-License-Identifier: MIT */
/*
 * Internal to daemon/symbols/dwarf_params.c: one subprogram DIE made into a
 * struct dwarf_function (names, types with enumerators, ABI places through
 * dwarf_abi.c). The result owns copies of every string: it outlives the
 * Dwarf. Type chains, parameter and enumerator counts are bounded, so a
 * hostile DIE graph (cycles, millions of children) ends in an error.
 */
#ifndef PROFD_DWARF_DESCRIBE_H
#define PROFD_DWARF_DESCRIBE_H

#include <elfutils/libdw.h>

#include "daemon/symbols/dwarf_params.h"

/* The DIE's DWARF name for matching ELF symbols: linkage name, else name (NULL: none). */
const char *dwarf_describe_name(Dwarf_Die *die);

/*
 * Describes the subprogram die whose entry is entry. symbol_name as in
 * dwarf_params_lookup. Returns 0 and *out, -EINVAL (malformed), -E2BIG
 * (over the bounds), -ENOMEM.
 */
int dwarf_describe_function(Dwarf_Die *die, uint64_t entry, const char *symbol_name,
			    enum dwarf_params_arch arch, struct dwarf_function **out);

#endif
