// SPDX-License-Identifier: MIT
/* Part of tests/targets/args_dwarf, built without -g: a function with no DWARF. */
__attribute__((noinline, used)) int ad_nodwarf(int x)
{
	return x * 3;
}
