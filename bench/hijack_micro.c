// SPDX-License-Identifier: MIT
/*
 * The bare return hijack, without the agent: which way of leaving the
 * trampolines keeps the return stack buffer (RSB) predicting (issue 28,
 * bench/README.md). Two skeletons of profd's x86-64 scheme, each a patched
 * function, its stub, a region thunk, an entry and an exit trampoline that
 * save the same nine registers and call one tiny C hook each (a shadow stack
 * of return addresses, nothing timed):
 *  - "exit trampoline": today's agent. The entry trampoline `ret`s into the
 *    relocated prologue at stub+5; the hook hijacks the return slot with the
 *    shared exit trampoline, so the function's own `ret` always mispredicts;
 *    the exit trampoline leaves by an indirect jump.
 *  - "stub landing": stub+5 holds `jmp *exit(%rip)`, the landing the hook
 *    writes into the return slot; the entry trampoline leaves by an indirect
 *    jump (stub+5 stays on the RSB), so the function's `ret` to the landing
 *    is predicted, and the exit trampoline ends with a predicted `ret`.
 * Shapes: a loop calling the function; the same through three plain
 * noinline callers (returns above the call show an RSB one entry off); four
 * functions in turn (the landing scheme's jump into the relocated prologue
 * is one indirect jump shared by every function).
 * Prints the median over alternated rounds of (row - plain), CPU ns per call.
 * Usage: hijack_micro [CALLS_PER_ROUND]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__)

#define ROUNDS 31
#define WARMUP_ROUNDS 5
#define NFUNCS 4
#define SHADOW_DEPTH 64

static uintptr_t shadow[SHADOW_DEPTH];
static unsigned shadow_top;

/* The hooks: what the agent's do to the return slot, and nothing else. */
__attribute__((noinline, used)) int micro_enter(uintptr_t *slot, uintptr_t landing)
{
	shadow[shadow_top++ % SHADOW_DEPTH] = *slot;
	*slot = landing;
	return 0;
}

__attribute__((noinline, used)) uintptr_t micro_exit(void)
{
	return shadow[--shadow_top % SHADOW_DEPTH];
}

/*
 * The skeletons. FUNC builds a function whose first instructions (push rbp;
 * mov rsp,rbp) were displaced into its stub, as the patcher leaves it.
 * STUB_OLD/STUB_NEW are the two stub layouts; each scheme has its own region
 * thunk. The register saves match trampolines/x86_64.S.
 */
__asm__(".macro SAVE9\n pushq %rdi; pushq %rsi; pushq %rdx; pushq %rcx; pushq %r8\n"
	" pushq %r9; pushq %rax; pushq %r10; pushq %r11\n.endm\n"
	".macro RESTORE9\n popq %r11; popq %r10; popq %rax; popq %r9; popq %r8\n"
	" popq %rcx; popq %rdx; popq %rsi; popq %rdi\n.endm\n"
	".macro FUNC name, stub\n .globl \\name\n .type \\name, @function\n .p2align 4\n"
	"\\name:\n jmp \\stub\n\\name\\()_rest:\n popq %rbp\n ret\n .size \\name, .-\\name\n.endm\n"
	".macro STUB_OLD name, func\n .p2align 6\n\\name:\n call old_thunk\n"
	" pushq %rbp\n movq %rsp, %rbp\n jmp \\func\\()_rest\n.endm\n"
	".macro STUB_NEW name, func\n .p2align 6\n\\name:\n call new_thunk\n"
	" jmp *new_exit_pointer(%rip)\n pushq %rbp\n movq %rsp, %rbp\n jmp \\func\\()_rest\n"
	".endm\n"
	".text\n"
	"FUNC old_f0, old_s0\nFUNC old_f1, old_s1\nFUNC old_f2, old_s2\nFUNC old_f3, old_s3\n"
	"FUNC new_f0, new_s0\nFUNC new_f1, new_s1\nFUNC new_f2, new_s2\nFUNC new_f3, new_s3\n"
	".globl plain_f\n.type plain_f, @function\n.p2align 4\n"
	"plain_f:\n pushq %rbp\n movq %rsp, %rbp\n popq %rbp\n ret\n"
	/* stub regions: a page each, slot 0 the thunk and the trampolines' addresses */
	".p2align 12\nold_thunk:\n jmp *old_entry_pointer(%rip)\n"
	".pushsection .data.rel.ro\n .p2align 3\nold_entry_pointer: .quad old_entry\n"
	"new_entry_pointer: .quad new_entry\nnew_exit_pointer: .quad new_exit\n.popsection\n"
	"STUB_OLD old_s0, old_f0\nSTUB_OLD old_s1, old_f1\nSTUB_OLD old_s2, old_f2\n"
	"STUB_OLD old_s3, old_f3\n"
	".p2align 12\nnew_thunk:\n jmp *new_entry_pointer(%rip)\n"
	"STUB_NEW new_s0, new_f0\nSTUB_NEW new_s1, new_f1\nSTUB_NEW new_s2, new_f2\n"
	"STUB_NEW new_s3, new_f3\n"
	".p2align 12\n"
	/* today's entry: ret into stub+5 */
	"old_entry:\n pushq %rbp\n movq %rsp, %rbp\n SAVE9\n subq $16, %rsp\n"
	" leaq 16(%rbp), %rdi\n leaq old_exit(%rip), %rsi\n call micro_enter\n"
	" testl %eax, %eax\n jnz 9f\n addq $16, %rsp\n RESTORE9\n popq %rbp\n ret\n9: ud2\n"
	/* today's exit: leaves by a jump through the restored slot */
	".p2align 4\nold_exit:\n pushq $0\n pushq %rbp\n movq %rsp, %rbp\n SAVE9\n"
	" subq $8, %rsp\n call micro_exit\n movq %rax, 8(%rbp)\n addq $8, %rsp\n"
	" RESTORE9\n popq %rbp\n leaq 8(%rsp), %rsp\n jmp *-8(%rsp)\n"
	/*
	 * The landing scheme's entry: hijacked (slot == stub+5) leaves by a jump
	 * to stub+11 through the red zone, stub+5 staying on the RSB; otherwise
	 * a `ret` to stub+11 pops it. The flags live through the restore.
	 */
	".p2align 4\nnew_entry:\n pushq %rbp\n movq %rsp, %rbp\n SAVE9\n subq $16, %rsp\n"
	" leaq 16(%rbp), %rdi\n movq 8(%rbp), %rsi\n call micro_enter\n"
	" testl %eax, %eax\n jnz 9f\n movq 8(%rbp), %rax\n cmpq %rax, 16(%rbp)\n"
	" leaq 6(%rax), %rax\n movq %rax, 8(%rbp)\n leaq 16(%rsp), %rsp\n RESTORE9\n"
	" popq %rbp\n jne 8f\n leaq 8(%rsp), %rsp\n jmp *-8(%rsp)\n8: ret\n9: ud2\n"
	/* the landing scheme's exit: the RSB top is the caller's return address */
	".p2align 4\nnew_exit:\n pushq $0\n pushq %rbp\n movq %rsp, %rbp\n SAVE9\n"
	" subq $8, %rsp\n call micro_exit\n movq %rax, 8(%rbp)\n addq $8, %rsp\n"
	" RESTORE9\n popq %rbp\n ret\n");

void plain_f(void);
void old_f0(void), old_f1(void), old_f2(void), old_f3(void);
void new_f0(void), new_f1(void), new_f2(void), new_f3(void);

typedef void (*empty_fn)(void);

enum shape { DIRECT, CALLERS3, ROTATE4, NSHAPES };
enum scheme { PLAIN, OLD, NEW, NSCHEMES };
static const char *const shape_names[NSHAPES] = { "direct call", "via 3 callers",
						  "4 functions in turn" };
static const char *const scheme_names[NSCHEMES] = { "plain", "exit trampoline (today)",
						    "stub landing" };

static __attribute__((noinline)) void caller3(empty_fn f)
{
	f();
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

static __attribute__((noinline)) void caller2(empty_fn f)
{
	caller3(f);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void caller1(empty_fn f)
{
	caller2(f);
	__asm__ volatile("" ::: "memory");
}

static double thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One timed loop: CPU ns per call. */
static double time_loop(enum shape shape, const empty_fn fns[NFUNCS], long calls)
{
	double start = thread_ns();

	for (long i = 0; i < calls; i++) {
		if (shape == DIRECT)
			fns[0]();
		else if (shape == CALLERS3)
			caller1(fns[0]);
		else if ((i & (NFUNCS - 1)) == 0) { /* four call sites, four functions */
			fns[0]();
			fns[1]();
			fns[2]();
			fns[3]();
		}
		__asm__ volatile("" ::: "memory");
	}
	return (thread_ns() - start) / calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 20000;
	const empty_fn fns[NSCHEMES][NFUNCS] = {
		{ plain_f, plain_f, plain_f, plain_f },
		{ old_f0, old_f1, old_f2, old_f3 },
		{ new_f0, new_f1, new_f2, new_f3 },
	};
	static double ns[NSHAPES][NSCHEMES][ROUNDS], over[NSHAPES][NSCHEMES][ROUNDS];

	if (calls <= 0)
		calls = 20000;
	for (int r = 0; r < WARMUP_ROUNDS + ROUNDS; r++) {
		for (int s = 0; s < NSHAPES; s++) {
			double t[NSCHEMES];

			/* plain first, then the two schemes in alternating order */
			t[PLAIN] = time_loop(s, fns[PLAIN], calls);
			for (int k = 0; k < 2; k++) {
				int sc = (r + k) % 2 ? NEW : OLD;

				t[sc] = time_loop(s, fns[sc], calls);
			}
			if (r < WARMUP_ROUNDS)
				continue;
			for (int sc = 0; sc < NSCHEMES; sc++) {
				ns[s][sc][r - WARMUP_ROUNDS] = t[sc];
				over[s][sc][r - WARMUP_ROUNDS] = t[sc] - t[PLAIN];
			}
		}
	}
	if (shadow_top != 0) {
		fprintf(stderr, "hijack_micro: shadow stack off by %u\n", shadow_top);
		return 1;
	}
	printf("%-22s %-24s %12s %10s %12s\n", "shape", "scheme", "cpu ns/call", "min",
	       "vs plain");
	for (int s = 0; s < NSHAPES; s++)
		for (int sc = 0; sc < NSCHEMES; sc++) {
			double mn = ns[s][sc][0];

			for (int r = 1; r < ROUNDS; r++)
				mn = ns[s][sc][r] < mn ? ns[s][sc][r] : mn;
			printf("%-22s %-24s %12.2f %10.2f %+12.2f\n", shape_names[s],
			       scheme_names[sc], median(ns[s][sc], ROUNDS), mn,
			       median(over[s][sc], ROUNDS));
		}
	return 0;
}

#else
int main(void)
{
	puts("hijack_micro: x86-64 only");
	return 0;
}
#endif
