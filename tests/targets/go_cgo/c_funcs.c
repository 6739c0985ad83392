// SPDX-License-Identifier: MIT
/*
 * The C half of go_cgo (tests/targets/go_cgo/main.go): plain C functions the
 * agent must time in a Go process, one calling another, one calling back
 * into Go. Kept out of main.go's preamble because it has an //export.
 */
#include <stdint.h>

#include "_cgo_export.h"

__attribute__((noinline)) uint64_t c_leaf(uint64_t x)
{
	return x * 2654435761u ^ (x >> 7);
}

__attribute__((noinline)) uint64_t c_work(uint64_t x, int n)
{
	uint64_t acc = x;

	for (int i = 0; i < n; i++)
		acc += c_leaf(acc + (uint64_t)i);
	return acc;
}

__attribute__((noinline)) uint64_t c_calls_go(uint64_t x)
{
	return go_callback(c_leaf(x)) + 1;
}
