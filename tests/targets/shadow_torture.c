// SPDX-License-Identifier: MIT
/*
 * Frames that do not return the ordinary way, run under `profctl run
 * --funcs 'sh_*'` by tests/integration/test_shadow_stack.sh: longjmp and
 * siglongjmp, backtrace(), pthread_exit and cancellation with cleanup
 * handlers, fork, vfork+exec, signals on an alternate stack, recursion far
 * past the shadow stack, 1,000 short-lived threads. Prints only
 * deterministic lines, plus `count NAME N` for the calls it made itself.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, used))

static _Atomic long calls_jump_leaf, calls_recurse, calls_thread_body, calls_fork_inner;
static jmp_buf jump_target;
static sigjmp_buf signal_target;

/* It does end: longjmp. GCC cannot know that the recursion stops there. */
#pragma GCC diagnostic ignored "-Winfinite-recursion"
NOINLINE void sh_jump_leaf(int n)
{
	calls_jump_leaf++;
	if (n <= 0)
		longjmp(jump_target, 1);
	else
		sh_jump_leaf(n - 1);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

NOINLINE int sh_jump_outer(int rounds)
{
	int done = 0;

	for (int i = 0; i < rounds; i++) {
		if (setjmp(jump_target) == 0)
			sh_jump_leaf(3);
		else
			done++;
	}
	return done;
}

NOINLINE long sh_recurse(long n)
{
	long r;

	calls_recurse++;
	if (n == 0)
		return 0;
	r = sh_recurse(n - 1);
	__asm__ volatile("" : "+r"(r)); /* keeps it a real recursion, not a loop */
	return r + 1;
}

static void *deep_recursion(void *arg)
{
	return (void *)sh_recurse((long)arg);
}

NOINLINE int sh_backtrace_level3(void)
{
	void *frames[16];
	int n = backtrace(frames, 16);
	char **names = backtrace_symbols(frames, n);
	int found = 0;

	/* the callers must be seen in order, whatever trampolines are in between */
	for (int i = 0; names && i < n; i++) {
		const char *want[] = { "sh_backtrace_level3", "sh_backtrace_level2",
				       "sh_backtrace_level1" };

		if (found < 3 && strstr(names[i], want[found]))
			found++;
	}
	free(names);
	return found;
}

NOINLINE int sh_backtrace_level2(void)
{
	int r = sh_backtrace_level3();

	__asm__ volatile("" ::: "memory");
	return r;
}

NOINLINE int sh_backtrace_level1(void)
{
	int r = sh_backtrace_level2();

	__asm__ volatile("" ::: "memory");
	return r;
}

#ifdef __aarch64__

/* x30 as the caller will get it back, whatever called this: the exit trampoline under the agent. */
NOINLINE uintptr_t sh_pac_probe_return(void)
{
	register uintptr_t lr __asm__("x30") = (uintptr_t)__builtin_return_address(0);

	__asm__("hint #7" : "+r"(lr)); /* xpaclri */
	return lr;
}

/* Whether paciasp at this SP leaves `address` as it is (a PAC of 0; a NOP without PAuth too). */
static int signs_to_itself(uintptr_t address, uintptr_t sp)
{
	register uintptr_t x17 __asm__("x17") = address;
	register uintptr_t x16 __asm__("x16") = sp;

	__asm__("hint #8" : "+r"(x17) : "r"(x16)); /* pacia1716 */
	return x17 == address;
}

NOINLINE int sh_pac_zero_leaf(void)
{
	void *frames[8];
	int n = backtrace(frames, 8), found = 0;
	char **names = backtrace_symbols(frames, n);
	const char *want[] = { "sh_pac_zero_leaf", "sh_pac_zero_caller" };

	for (int i = 0; names && i < n; i++)
		if (found < 2 && strstr(names[i], want[found]))
			found++;
	free(names);
	return found;
}

/*
 * int sh_pac_late_signer(int (*leaf)(void)): calls leaf from a frame that
 * signs its return address after another instruction, as GCC may schedule
 * it (`bti c; mov x3, x0; paciasp`, once sh_pac_zero_caller's own prologue).
 * In assembly so that no compiler moves the paciasp back to the front.
 */
int sh_pac_late_signer(int (*leaf)(void));
__asm__(".text\n"
	".globl sh_pac_late_signer\n"
	".type sh_pac_late_signer, %function\n"
	".p2align 2\n"
	"sh_pac_late_signer:\n"
	".cfi_startproc\n"
	"hint #34\n" /* bti c */
	"mov x9, x0\n"
	"hint #25\n" /* paciasp */
	".cfi_negate_ra_state\n"
	"stp x29, x30, [sp, #-16]!\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset x29, -16\n"
	".cfi_offset x30, -8\n"
	"mov x29, sp\n"
	"blr x9\n"
	"ldp x29, x30, [sp], #16\n"
	".cfi_restore x29\n"
	".cfi_restore x30\n"
	".cfi_def_cfa_offset 0\n"
	"hint #29\n" /* autiasp */
	".cfi_negate_ra_state\n"
	"ret\n"
	".cfi_endproc\n"
	".size sh_pac_late_signer, .-sh_pac_late_signer\n");

/*
 * backtrace() from a function whose signed return address is the plain one:
 * the 7-bit PAC of the exit trampoline's address with the entry SP of the
 * function called is 0 for 1 SP in 128, and the unwinder authenticates what
 * it reads back. Moves SP 16 bytes at a time until that SP comes (1 - 1e-14
 * within 64 KiB), then calls the leaf there, or with `late` the late signer
 * (which calls the leaf).
 */
NOINLINE int sh_pac_zero_caller(int *reached, int late)
{
	uintptr_t exit_address = sh_pac_probe_return(), sp;

	*reached = 0;
	for (int step = 0; step < 4096 && !*reached; step++) {
		__asm__ volatile("mov %0, sp" : "=r"(sp));
		*reached = signs_to_itself(exit_address, sp);
		if (!*reached)
			*(volatile char *)alloca(16) = 0;
	}
	return late ? sh_pac_late_signer(sh_pac_zero_leaf) : sh_pac_zero_leaf();
}
#endif

static _Atomic int cleanups_run;
static _Atomic int cleanups_run;

static void count_cleanup(void *arg)
{
	(void)arg;
	cleanups_run++;
}

NOINLINE void sh_exit_inner(void)
{
	pthread_exit((void *)42);
}

NOINLINE void *sh_exit_outer(void *arg)
{
	pthread_cleanup_push(count_cleanup, arg);
	sh_exit_inner();
	pthread_cleanup_pop(0);
	return NULL;
}

NOINLINE void sh_cancel_wait(int fd)
{
	char c;

	if (read(fd, &c, 1) < 0) /* a cancellation point, blocks forever */
		perror("read");
}

NOINLINE void *sh_cancel_outer(void *arg)
{
	pthread_cleanup_push(count_cleanup, arg);
	sh_cancel_wait(*(int *)arg);
	pthread_cleanup_pop(0);
	return NULL;
}

static int run_thread_exits(void)
{
	pthread_t a, b;
	void *ret = NULL;
	int fds[2];

	if (pipe(fds) || pthread_create(&a, NULL, sh_exit_outer, NULL) ||
	    pthread_create(&b, NULL, sh_cancel_outer, &fds[0]))
		return -1;
	pthread_join(a, &ret);
	usleep(20000);
	pthread_cancel(b);
	pthread_join(b, NULL);
	return ret == (void *)42 ? cleanups_run : -1;
}

NOINLINE int sh_fork_inner(int depth)
{
	calls_fork_inner++;
	if (depth > 0)
		return sh_fork_inner(depth - 1) + 1;
	pid_t pid = fork();

	if (pid == 0)
		return 100; /* the child returns through every instrumented frame */
	waitpid(pid, NULL, 0);
	return 0;
}

NOINLINE int sh_vfork_exec(void)
{
	pid_t pid = vfork();
	int status = 0;

	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

NOINLINE void sh_in_handler(int depth)
{
	if (depth > 0)
		sh_in_handler(depth - 1);
	else
		siglongjmp(signal_target, 1);
	__asm__ volatile("" ::: "memory");
}

static void on_signal(int sig)
{
	(void)sig;
	sh_in_handler(3);
}

NOINLINE int sh_signal_outer(void)
{
	static char alt[256 * 1024];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_ONSTACK };
	int landed = 0;

	sigaltstack(&ss, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 50; i++) {
		if (sigsetjmp(signal_target, 1) == 0)
			raise(SIGUSR1);
		else
			landed++;
	}
	return landed;
}

NOINLINE void *sh_thread_body(void *arg)
{
	calls_thread_body++;
	return arg;
}

static int run_short_threads(int n)
{
	long sum = 0;

	for (int i = 0; i < n; i++) {
		pthread_t t;
		void *r;

		if (pthread_create(&t, NULL, sh_thread_body, (void *)(long)i))
			return -1;
		pthread_join(t, &r);
		sum += (long)r;
	}
	return sum == (long)n * (n - 1) / 2;
}

int main(void)
{
	pthread_attr_t attr;
	pthread_t t;
	void *depth;

	printf("longjmp rounds %d\n", sh_jump_outer(1000));
	printf("backtrace callers found %d of 3\n", sh_backtrace_level1());
#ifdef __aarch64__
	int reached, found = sh_pac_zero_caller(&reached, 0);

	printf("backtrace from a zero-PAC return found %d of 2%s\n", found,
	       reached ? "" : " (no zero-PAC stack pointer in 64 KiB)");
	found = sh_pac_zero_caller(&reached, 1);
	printf("backtrace from a zero-PAC return signed late found %d of 2%s\n", found,
	       reached ? "" : " (no zero-PAC stack pointer in 64 KiB)");
#endif
	printf("thread exit cleanups %d\n", run_thread_exits());
	fflush(stdout);
	int forked = sh_fork_inner(3);

	if (forked >= 100) { /* the child came back through every instrumented frame */
		printf("fork child returned %d\n", forked);
		exit(0); /* runs the agent's destructor in the child: it must stay silent */
	}
	printf("fork parent returned %d\n", forked);
	printf("vfork+exec status %d\n", sh_vfork_exec());
	printf("signals on sigaltstack %d\n", sh_signal_outer());
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 20);
	pthread_create(&t, &attr, deep_recursion, (void *)100000);
	pthread_join(t, &depth);
	printf("recursion depth %ld\n", (long)depth);
	printf("short threads ok %d\n", run_short_threads(1000));
	printf("count sh_jump_leaf %ld\n", (long)calls_jump_leaf);
	printf("count sh_thread_body %ld\n", (long)calls_thread_body);
	printf("count sh_recurse %ld\n", (long)calls_recurse);
	return 0;
}
