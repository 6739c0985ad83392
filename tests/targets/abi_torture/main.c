// SPDX-License-Identifier: MIT
/*
 * ABI torture target, run by tests/integration/test_abi.sh plain, under
 * `profctl run --funcs 'torture_*'` and under `--funcs '*'`: the promise is
 * that instrumentation changes nothing the program can observe. Every case
 * prints one deterministic line, `case NAME ok` or `case NAME FAIL details`,
 * whatever the CPU (AVX2/AVX-512 paths run only where supported, silently);
 * `count NAME N` for functions whose calls the trace must show exactly comes
 * before the last cases (frames left without a plain return), so that a crash
 * there still leaves the counts to compare. `abi_torture CASE...` runs only
 * the named cases. Exit status 0 iff all ok. This file is the driver; the
 * cases are in args.c, machine_state.c, control_flow.c and the assembly
 * files.
 *
 * Callees are non-static, noinline and used (so they are in .symtab) and at
 * least 5 bytes (12 on aarch64); most are called through volatile pointers,
 * some directly so that GCC's IPA-RA keeps caller values in "caller-saved"
 * registers across the call. The assembly functions (x86_64.c, aarch64.c:
 * cases named *_a64 exist there only) pin down exact prologue shapes and
 * check every register, not only what the ABI promises.
 */
#include "abi_torture.h"

_Atomic unsigned long n_int_args, n_int128, n_varargs, n_mixed_fp, n_ret_tl, n_ret_td,
	n_ret_tm, n_ret_tfi, n_ret_big, n_struct_args, n_nested_parent, n_tiny, n_add6, n_thr_fp,
	n_set_errno, n_keep_errno, n_thunk_target, n_asm_thunk, n_asm_tiny, n_fp_div, n_memops,
	n_hfa_f, n_hfa_d, n_hva;

/* Where both architectures' assembly thunks jump (torture_asm_thunk): b/jmp in the first word. */
TORTURE long torture_thunk_target(long a, long b)
{
	bump(&n_thunk_target);
	return a * 1000 + b;
}

/* ---- driver ------------------------------------------------------------------------ */

struct torture_case {
	const char *name;
	int (*run)(char *why); /* NULL: print the counts here */
};

static const struct torture_case cases[] = {
#ifdef __x86_64__
	{ "regs_gpr", case_regs_gpr },
#endif
#ifdef __x86_64__
	{ "regs_xmm", case_regs_xmm },
#endif
#ifdef __x86_64__
	{ "regs_zmm", case_regs_zmm },
#endif
#ifdef __aarch64__
	{ "regs_gpr_a64", check_gprs },
	{ "regs_simd_a64", check_xmm },
#endif
	{ "int_args", case_int_args },
	{ "int128", case_int128 },
	{ "varargs", case_varargs },
	{ "mixed_fp", case_mixed_fp },
#ifdef __x86_64__
	{ "m256", case_m256 },
#endif
#ifdef __x86_64__
	{ "m512", case_m512 },
#endif
	{ "x87", case_x87 },
	{ "complex", case_complex },
	{ "structs", case_structs },
	{ "static_chain", case_static_chain },
#ifdef __x86_64__
	{ "alignment", case_alignment },
#endif
#ifdef __x86_64__
	{ "memops", case_memops },
#endif
#ifdef __x86_64__
	{ "callee_saved", case_callee_saved },
#endif
	{ "ipa_ra", case_ipa_ra },
	{ "recursion", case_recursion },
#ifdef __x86_64__
	{ "asm_prologues", case_asm_prologues },
#endif
#ifdef __aarch64__
	{ "asm_prologues_a64", case_asm_prologues_a64 },
#endif
	{ "errno", case_errno },
	{ "fpenv", case_fpenv },
	{ "signal", case_signal },
	{ "threads", case_threads },
	{ "fork", case_fork },
	{ "counts", NULL }, /* the cases below call no counted function */
	{ "setjmp", case_setjmp },
#ifdef __aarch64__
	{ "asm_bl_first_a64", case_asm_bl_first_a64 },
#endif
	{ "spawn", case_spawn },
	{ "vfork", case_vfork },
	{ "ucontext", case_ucontext },
};

struct counted {
	const char *name;
	_Atomic unsigned long *calls;
};

static const struct counted counted[] = {
	{ "torture_int_args", &n_int_args },
	{ "torture_int128", &n_int128 },
	{ "torture_varargs_sum", &n_varargs },
	{ "torture_mixed_fp", &n_mixed_fp },
	{ "torture_ret_tl", &n_ret_tl },
	{ "torture_ret_td", &n_ret_td },
	{ "torture_ret_tm", &n_ret_tm },
	{ "torture_ret_tfi", &n_ret_tfi },
	{ "torture_ret_big", &n_ret_big },
	{ "torture_struct_args", &n_struct_args },
	{ "torture_nested_parent", &n_nested_parent },
	{ "torture_tiny", &n_tiny },
	{ "torture_add6", &n_add6 },
	{ "torture_thr_fp", &n_thr_fp },
	{ "torture_set_errno", &n_set_errno },
	{ "torture_keep_errno", &n_keep_errno },
	{ "torture_thunk_target", &n_thunk_target },
	{ "torture_asm_thunk", &n_asm_thunk },
	{ "torture_asm_tiny", &n_asm_tiny },
	{ "torture_fp_div", &n_fp_div },
	{ "torture_memops", &n_memops },
	{ "torture_hfa_f", &n_hfa_f },
	{ "torture_hfa_d", &n_hfa_d },
	{ "torture_hva", &n_hva },
#ifdef __aarch64__
#define A64_COUNTED_ENTRY(name) { "torture_asm_" #name, &n_a64[A64_##name] },
	A64_COUNTED(A64_COUNTED_ENTRY)
#endif
};

static void print_counts(void)
{
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		printf("count %s %lu\n", counted[i].name, atomic_load(counted[i].calls));
}

static int selected(int argc, char **argv, const char *name)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int failures = 0;

	setvbuf(stdout, NULL, _IOLBF, 0); /* a crash still shows the cases that passed */
#if defined(__x86_64__) || defined(__aarch64__)
	probe_magic_init();
#endif
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[WHY_LEN] = "";

		if (!cases[i].run) {
			print_counts();
			continue;
		}
		if (!selected(argc, argv, cases[i].name))
			continue;
		if (cases[i].run(why)) {
			printf("case %s FAIL %s\n", cases[i].name, why);
			failures++;
		} else {
			printf("case %s ok\n", cases[i].name);
		}
	}
	return failures ? 1 : 0;
}
