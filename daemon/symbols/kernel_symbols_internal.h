/* SPDX-License-Identifier: MIT */
/*
 * The kernel symbol table's layout, shared by its builder (kernel_symbols.c)
 * and its saved copies (kernel_symbols_cache.c); nothing else reads it.
 */
#ifndef PROFD_KERNEL_SYMBOLS_INTERNAL_H
#define PROFD_KERNEL_SYMBOLS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KSYMS_MAX_NAME_LEN 511         /* KSYM_NAME_LEN - 1 */
#define KSYMS_MAX_MODULE_LEN 63        /* MODULE_NAME_LEN - 1 */
#define KSYMS_MAX_SYMBOLS (8u << 20)
#define KSYMS_PAGE_BYTES 4096u

struct kernel_function {
	uint64_t start, end;
	const char *name;
	uint32_t module;         /* index in modules[]; 0 is the kernel */
	uint32_t name_len;
	size_t name_off;         /* in pool, until the names are final */
	bool global;
};

struct kernel_module {
	char *name;              /* "[kernel.kallsyms]", "[ext4]" */
	uint64_t start, end;     /* span of its symbols */
};

struct kernel_symbols {
	struct kernel_function *v;
	size_t n, cap;
	struct kernel_module *modules;
	size_t n_modules, cap_modules;
	char *pool;
	size_t pool_len, pool_cap;
	uint64_t bad_lines;
	_Atomic unsigned refs;   /* its holders, 1 when built */
};

/* An empty table with its kernel module, one holder; NULL without memory. */
struct kernel_symbols *kernel_symbols_table_new(void);

#endif
