// SPDX-License-Identifier: MIT
/*
 * A library whose function starts with x87 instructions, which the agent's
 * built-in x86-64 decoder leaves to Zydis (tests/integration/test_lazy_decoder.sh):
 * instrumenting it after a dlopen loads libZydis from inside the loader.
 */
#if defined(__x86_64__)
/* fldz; fstp %st(0); lea 1(%rdi), %rax; ret -- the first 5 bytes span the x87 pair */
__asm__(".text\n"
	".globl x87_first\n"
	".type x87_first, @function\n"
	"x87_first:\n"
	"\tfldz\n"
	"\tfstp %st(0)\n"
	"\tlea 1(%rdi), %rax\n"
	"\tret\n"
	".size x87_first, .-x87_first\n");
long x87_first(long x);
#else
__attribute__((noinline)) long x87_first(long x)
{
	return x + 1;
}
#endif

long x87_run(long n)
{
	long sum = 0;

	for (long i = 0; i < n; i++)
		sum += x87_first(i);
	return sum;
}
