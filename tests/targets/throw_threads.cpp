// SPDX-License-Identifier: MIT
/*
 * C++ exceptions thrown and caught on 4 threads at once, through frames with
 * destructors (tests/integration/test_unwind_calls.sh under --funcs '*'):
 * every call the unwinder makes (personality routine, FDE lookup, cleanup)
 * must be timed and counted like any other. The output depends only on the
 * computation.
 */
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#define NOINLINE __attribute__((noinline))

struct counted_guard {
	long *n;
	~counted_guard() { (*n)++; }
};

NOINLINE void tt_thrower(int depth, long *destructors)
{
	counted_guard guard{ destructors };

	if (depth == 0)
		throw std::runtime_error("bottom " + std::to_string(*destructors % 7));
	tt_thrower(depth - 1, destructors);
	__asm__ volatile("" ::: "memory");
}

NOINLINE long tt_work(int id)
{
	long destructors = 0, caught = 0;

	for (int i = 0; i < 2000; i++) {
		try {
			tt_thrower(3 + (i + id) % 4, &destructors);
		} catch (const std::exception &e) {
			caught += e.what()[7];
		}
	}
	return caught * 1000000 + destructors;
}

int main()
{
	std::vector<std::thread> threads;
	long result[4];

	for (int i = 0; i < 4; i++)
		threads.emplace_back([&result, i] { result[i] = tt_work(i); });
	for (auto &t : threads)
		t.join();
	for (int i = 0; i < 4; i++)
		std::printf("thread %d: %ld\n", i, result[i]);
	return 0;
}
