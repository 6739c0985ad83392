// SPDX-License-Identifier: MIT
/*
 * C++ exceptions thrown through instrumented frames (run under `profctl run
 * --funcs 'ex_*'` by tests/integration/test_shadow_stack.sh): the unwinder
 * must find the real return addresses, destructors must run, the catch must
 * land, and instrumented calls after the catch must be traced normally.
 */
#include <cstdio>
#include <stdexcept>

#define NOINLINE __attribute__((noinline, used))

static long calls_thrower, destructors_run;

struct counted_guard {
	~counted_guard() { destructors_run++; }
};

NOINLINE void ex_thrower(int depth)
{
	counted_guard guard;

	calls_thrower++;
	if (depth == 0)
		throw std::runtime_error("bottom");
	ex_thrower(depth - 1);
	__asm__ volatile("" ::: "memory");
}

NOINLINE int ex_catcher(int rounds)
{
	int caught = 0;

	for (int i = 0; i < rounds; i++) {
		try {
			ex_thrower(3);
		} catch (const std::runtime_error &e) {
			caught++;
		}
	}
	return caught;
}

NOINLINE int ex_rethrower(void)
{
	try {
		ex_thrower(2);
	} catch (...) {
		throw;
	}
	return 0;
}

NOINLINE int ex_outer(void)
{
	try {
		return ex_rethrower();
	} catch (const std::exception &e) {
		return 7;
	}
}

int main()
{
	std::printf("caught %d\n", ex_catcher(1000));
	std::printf("rethrown %d\n", ex_outer());
	std::printf("destructors %ld\n", destructors_run);
	std::printf("count ex_thrower %ld\n", calls_thrower);
	return 0;
}
