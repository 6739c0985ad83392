// SPDX-License-Identifier: MIT
/*
 * A runtime's generated code that moves the return address of the C++ it
 * calls, as V8's irregexp does when a GC moved the regexp's code during its
 * stack check (RegExpMacroAssemblerX64::CheckStackGuardState rewrites
 * *return_address by the code's displacement). The "C++" carries a V8 name,
 * so the agent treats this program as V8. The generated code, in anonymous
 * memory, passes the home of the return address its call pushes; the
 * function moves it to a copy of the code after the call, which returns 2
 * instead of 1. The same function called from C is an ordinary call. The
 * output must be the same profiled (tests/integration/test_runtimes.sh).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* v8::internal::Test::MoveReturn(unsigned long*, long) */
__attribute__((noinline)) void move_return(uintptr_t *home, long delta)
	__asm__("_ZN2v88internal4Test10MoveReturnEPml");
static volatile unsigned long moves;

void move_return(uintptr_t *home, long delta)
{
	moves = moves + 1; /* long enough for the entry jump */
	*home += (uintptr_t)delta;
}

#if defined(__x86_64__)
#define COPY_DELTA 64
typedef int (*generated_fn)(void);

/* sub $8,%rsp; lea -8(%rsp),%rdi; mov $COPY_DELTA,%esi; movabs $f,%rax; call *%rax */
static size_t emit_call(uint8_t *p, void (*f)(uintptr_t *, long))
{
	static const uint8_t head[] = { 0x48, 0x83, 0xec, 0x08, 0x48, 0x8d, 0x7c, 0x24, 0xf8,
					0xbe, COPY_DELTA, 0, 0, 0, 0x48, 0xb8 };
	uint64_t target = (uint64_t)(uintptr_t)f;
	size_t n = sizeof(head);

	memcpy(p, head, n);
	memcpy(p + n, &target, 8);
	n += 8;
	p[n++] = 0xff; /* call *%rax */
	p[n++] = 0xd0;
	return n;
}

/* mov $value,%eax; add $8,%rsp; ret */
static void emit_return(uint8_t *p, int value)
{
	const uint8_t code[] = { 0xb8, (uint8_t)value, 0, 0, 0, 0x48, 0x83, 0xc4, 0x08, 0xc3 };

	memcpy(p, code, sizeof(code));
}

static generated_fn generate(void)
{
	uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t after_call;

	if (code == MAP_FAILED)
		return NULL;
	memset(code, 0xcc, 4096);
	after_call = emit_call(code, move_return);
	emit_return(code + after_call, 1);
	emit_return(code + after_call + COPY_DELTA, 2); /* where a GC "moved" the code */
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC))
		return NULL;
	return (generated_fn)(uintptr_t)code;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1000, sum = 0;
	generated_fn run = generate();
	uintptr_t home = 0;

	if (!run) {
		perror("jit_caller: mmap");
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		sum += run();
		move_return(&home, 1);
	}
	printf("generated code returned %d over %d calls; from C: %lu\n", sum, rounds,
	       (unsigned long)home);
	return 0;
}
#else
int main(void)
{
	uintptr_t home = 0;

	move_return(&home, 1);
	printf("no generated code on this architecture; from C: %lu\n", (unsigned long)home);
	return 0;
}
#endif
