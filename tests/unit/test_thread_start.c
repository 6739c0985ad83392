// SPDX-License-Identifier: MIT
/*
 * When a hook's slow path may start a thread (agent/thread_start.c): never
 * where a signal handler of the program's may be running (it may have
 * interrupted malloc, whose lock pthread_create takes), nor in a vfork
 * child, nor in a plan that times functions of libc or the loader.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>

#include "agent/thread_start.h"
#include "unit.h"

static uint64_t mask_of(int sig)
{
	return 1ull << (sig - 1);
}

static int me(void)
{
	return (int)syscall(SYS_getpid);
}

static void on_usr1(int sig)
{
	(void)sig;
}

static bool safe_in_handler;
static uint64_t handler_mask;
static bool handler_unblocked; /* as if the handler had unblocked its own signal */

/* what a slow path in this handler would see: the mask it was entered with */
static void check_from_handler(int sig)
{
	sigset_t now;

	(void)sig;
	sigprocmask(SIG_BLOCK, NULL, &now);
	handler_mask = 0;
	for (int s = 1; s <= 64; s++)
		if (sigismember(&now, s) == 1)
			handler_mask |= mask_of(s);
	safe_in_handler = thread_start_safe_here(handler_unblocked ? 0 : handler_mask, me());
}

static void set_handler(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void test_plain_thread_is_safe(void)
{
	CHECK(thread_start_safe_here(0, me()));
	/* a blocked signal nobody handles (sigwait's way) is no handler running */
	CHECK(thread_start_safe_here(mask_of(SIGUSR2) | mask_of(SIGINT), me()));
}

static void test_not_another_process(void)
{
	CHECK(!thread_start_safe_here(0, me() + 1)); /* a vfork child shares our memory */
}

static void test_handled_signal_blocked(void)
{
	set_handler(SIGUSR1, on_usr1, 0);
	CHECK(thread_start_safe_here(0, me()));
	CHECK(!thread_start_safe_here(mask_of(SIGUSR1), me()));
	set_handler(SIGUSR1, check_from_handler, 0);
	raise(SIGUSR1);
	CHECK(handler_mask & mask_of(SIGUSR1));
	CHECK(!safe_in_handler);
	set_handler(SIGUSR1, SIG_DFL, 0);
	CHECK(thread_start_safe_here(mask_of(SIGUSR1), me()));
}

static void test_nodefer_handler_anywhere(void)
{
	set_handler(SIGUSR1, check_from_handler, SA_NODEFER);
	raise(SIGUSR1);
	CHECK(!(handler_mask & mask_of(SIGUSR1))); /* the handler cannot be told from its mask */
	CHECK(!safe_in_handler);
	CHECK(!thread_start_safe_here(0, me()));
	set_handler(SIGUSR1, SIG_DFL, 0);
	CHECK(thread_start_safe_here(0, me()));
}

static void test_on_signal_stack(void)
{
	stack_t ss = { .ss_size = 1u << 16 };

	ss.ss_sp = malloc(ss.ss_size);
	CHECK(ss.ss_sp && sigaltstack(&ss, NULL) == 0);
	/* its own signal unblocked since (sigprocmask in the handler): only the stack tells */
	handler_unblocked = true;
	set_handler(SIGUSR2, check_from_handler, SA_ONSTACK);
	raise(SIGUSR2);
	CHECK(!safe_in_handler);
	handler_unblocked = false;
	set_handler(SIGUSR2, SIG_DFL, 0);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	free(ss.ss_sp);
}

/* ASan's fault handlers: SA_NODEFER on a signal stack, told apart by the stack */
static void test_nodefer_on_signal_stack(void)
{
	stack_t ss = { .ss_size = 1u << 16 };

	ss.ss_sp = malloc(ss.ss_size);
	set_handler(SIGUSR1, check_from_handler, SA_NODEFER | SA_ONSTACK);
	CHECK(!thread_start_safe_here(0, me())); /* no signal stack yet: cannot be told */
	CHECK(ss.ss_sp && sigaltstack(&ss, NULL) == 0);
	CHECK(thread_start_safe_here(0, me()));
	raise(SIGUSR1);
	CHECK(!safe_in_handler);
	set_handler(SIGUSR1, SIG_DFL, 0);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	free(ss.ss_sp);
}

static bool plan_allows(const char *module)
{
	struct instrumented_function fn = { .name = "f", .module = module };
	struct instrument_report r = { .functions = &fn, .n_functions = 1 };

	return thread_start_plan_allows(&r);
}

static void test_plan_modules(void)
{
	CHECK(plan_allows("/usr/bin/make"));
	CHECK(plan_allows("/usr/lib/x86_64-linux-gnu/libcrypto.so.3"));
	CHECK(!plan_allows("/usr/lib/x86_64-linux-gnu/libc.so.6"));
	CHECK(!plan_allows("/lib64/ld-linux-x86-64.so.2"));
	CHECK(!plan_allows("/lib/ld-linux-aarch64.so.1"));
	CHECK(!plan_allows("/lib/x86_64-linux-gnu/libpthread.so.0"));
	CHECK(!plan_allows("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")); /* an allocator's own */
}

int main(void)
{
	RUN_TEST(test_plain_thread_is_safe);
	RUN_TEST(test_not_another_process);
	RUN_TEST(test_handled_signal_blocked);
	RUN_TEST(test_nodefer_handler_anywhere);
	RUN_TEST(test_on_signal_stack);
	RUN_TEST(test_nodefer_on_signal_stack);
	RUN_TEST(test_plan_modules);
	return unit_summary();
}
