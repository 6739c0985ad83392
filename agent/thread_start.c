/* SPDX-License-Identifier: MIT */
/*
 * When a hook's slow path may start a thread (see thread_start.h).
 * pthread_create takes malloc's lock (the new thread's TLS vector), glibc's
 * stack-cache lock and the loader's TLS lock (recursive). The thread calling
 * it must hold none of the first two: they are held only inside libc, so a
 * hook's caller holds one only when a signal handler interrupted libc and
 * called an instrumented function, or when the instrumented function is
 * libc's (or the allocator's) own, called under the lock. The first is told
 * from the signal state, the second from the plan. Owns no state.
 */
#include "agent/thread_start.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/lock_modules.h"

/* Modules whose functions may run with malloc's or the stack cache's lock held. */
static bool is_locker_module(const char *path, const char *malloc_path)
{
	return (malloc_path && strcmp(path, malloc_path) == 0) || lock_module_path(path);
}

bool thread_start_plan_allows(const struct instrument_report *report)
{
	Dl_info in_malloc, in_libc;
	void *malloc_fn = dlsym(RTLD_DEFAULT, "malloc");

	/* another allocator (jemalloc, the program's own) may call back under its lock */
	if (!malloc_fn || !dladdr(malloc_fn, &in_malloc) || !dladdr((void *)getpid, &in_libc) ||
	    in_malloc.dli_fbase != in_libc.dli_fbase)
		return false;
	for (size_t i = 0; i < report->n_functions; i++)
		if (report->functions[i].module &&
		    is_locker_module(report->functions[i].module, in_malloc.dli_fname))
			return false;
	return true;
}

bool thread_start_safe_here(uint64_t entry_mask, int owner_pid)
{
	stack_t alt;
	bool alt_stack = false;

	/* a vfork or posix_spawn child runs in its parent's memory */
	if (syscall(SYS_getpid) != owner_pid)
		return false;
	if (sigaltstack(NULL, &alt) == 0) {
		if (alt.ss_flags & SS_ONSTACK)
			return false;
		alt_stack = !(alt.ss_flags & SS_DISABLE);
	}
	for (int sig = 1; sig <= 64; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
			continue; /* glibc's own (32, 33) answer EINVAL */
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		/* a handler runs with its signal blocked */
		if (entry_mask & (1ull << (sig - 1)))
			return false;
		/*
		 * unless SA_NODEFER: then only its stack can tell it runs (ASan's
		 * fault handlers: SA_NODEFER | SA_ONSTACK, with a signal stack)
		 */
		if ((sa.sa_flags & SA_NODEFER) && !((sa.sa_flags & SA_ONSTACK) && alt_stack))
			return false;
	}
	return true;
}
