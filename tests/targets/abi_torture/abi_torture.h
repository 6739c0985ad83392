// SPDX-License-Identifier: MIT
/*
 * abi_torture's shared pieces (tests/targets/abi_torture/): the macros every
 * case uses, the counters of calls the trace must show exactly, the cases the
 * driver (main.c) runs, and what one file's cases call in another's.
 */
#ifndef ABI_TORTURE_H
#define ABI_TORTURE_H

#define _GNU_SOURCE
#include <errno.h>
#include <fenv.h>
#include <float.h>
#ifdef __x86_64__
#include <immintrin.h>
#endif
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "../case_macros.h"

#pragma GCC diagnostic ignored "-Wpsabi"

#define TORTURE __attribute__((noinline, used))

/* Calls the program counts itself; the trace must hold exactly this many slices. */
extern _Atomic unsigned long n_int_args, n_int128, n_varargs, n_mixed_fp, n_ret_tl, n_ret_td,
	n_ret_tm, n_ret_tfi, n_ret_big, n_struct_args, n_nested_parent, n_tiny, n_add6, n_thr_fp,
	n_set_errno, n_keep_errno, n_thunk_target, n_asm_thunk, n_asm_tiny, n_fp_div, n_memops,
	n_hfa_f, n_hfa_d, n_hva;

static inline void bump(_Atomic unsigned long *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Keeps a value opaque to the optimizer (no constant propagation into callees). */
static inline long opaque(long v)
{
	__asm__ volatile("" : "+r"(v));
	return v;
}

/* A struct returned in rax:xmm0 (x0:d0): the threads case calls it too (args.c). */
struct long_double_pair {
	long a;
	double b;
};
struct long_double_pair torture_ret_tm(long x, double y);
/* errno kept across a call (machine_state.c), also in threads. */
int torture_keep_errno(int x);

/* Through a pointer: the recursion cases re-check after odd frames (machine_state.c). */
extern long (*volatile vp_torture_recurse)(long n);

#if defined(__x86_64__) || defined(__aarch64__)
/* The register probes (x86_64.c, aarch64.c). */
void probe_magic_init(void);
int check_gprs(char *why);
int check_xmm(char *why);
int check_zmm(char *why);
#endif
#ifdef __x86_64__
uintptr_t torture_asm_rsp(void);
#endif
#ifdef __aarch64__
/* Prologue shapes whose calls the program counts (one counter each). */
#define A64_COUNTED(X)                                                                      \
	X(adrp_ldr) X(adrp_add) X(adr) X(ldr_x) X(ldr_w) X(ldrsw) X(ldr_s) X(ldr_d) X(ldr_q) \
	X(cbz) X(cbnz) X(tbz) X(tbnz) X(bcond) X(bti) X(paciasp) X(pacibsp) X(sp)
#define A64_ENUM(name) A64_##name,
enum a64_counted { A64_COUNTED(A64_ENUM) A64_N };
extern _Atomic unsigned long n_a64[A64_N];
/* Counts a direct call of torture_asm_NAME, then makes it. */
#define A64_CALL(name, ...) (bump(&n_a64[A64_##name]), torture_asm_##name(__VA_ARGS__))
#endif

/* The cases: 0, or 1 with the details in why (WHY_LEN). */
#define CASE(name) int case_##name(char *why);
CASE(alignment)
CASE(asm_bl_first_a64)
CASE(asm_prologues)
CASE(asm_prologues_a64)
CASE(callee_saved)
CASE(complex)
CASE(errno)
CASE(fork)
CASE(fpenv)
CASE(int128)
CASE(int_args)
CASE(ipa_ra)
CASE(m256)
CASE(m512)
CASE(memops)
CASE(mixed_fp)
CASE(recursion)
CASE(regs_gpr)
CASE(regs_xmm)
CASE(regs_zmm)
CASE(setjmp)
CASE(signal)
CASE(spawn)
CASE(static_chain)
CASE(structs)
CASE(threads)
CASE(ucontext)
CASE(varargs)
CASE(vfork)
CASE(x87)
#undef CASE

#endif
