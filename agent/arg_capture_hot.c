// SPDX-License-Identifier: MIT
/*
 * The capture of --args/--retval values, called from the hooks' slow enter
 * and slow exit only (agent/hooks.c) for functions with a spec. Built like
 * the hooks: general registers only (on x86-64 the FP argument registers
 * still hold the call's values here: nothing on the way from the trampoline
 * touched them, and they are read by name; on aarch64 they are read where
 * the trampolines saved them), no libc, no lock, no allocation.
 *
 * A string is read with process_vm_readv on the calling thread's own
 * memory: the kernel copies what it can and fails cleanly on a bad or
 * unmapped pointer, so the target never faults and its signal handling is
 * never touched (a SIGSEGV handler of our own would be visible to it and
 * raced by its own sigaction calls). One system call per string: its cost
 * is in bench/README.md (issue 29).
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "agent/arg_capture.h"
#include "trampolines/trampoline_layout.h"

#define PAGE 4096u
/* Below: never a string (NULL, small integers passed as pointers); above: not user memory. */
#define LOWEST_POINTER 4096u
#if defined(__aarch64__)
#define HIGHEST_POINTER (1ull << 48) /* 48-bit user addresses; a tagged pointer is refused */
#else
#define HIGHEST_POINTER (1ull << 47)
#endif

static long raw_syscall6(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a3;
	register long r8 __asm__("r8") = a4;
	register long r9 __asm__("r9") = a5;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a0), "S"(a1), "d"(a2), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a0;
	register long x1 __asm__("x1") = a1;
	register long x2 __asm__("x2") = a2;
	register long x3 __asm__("x3") = a3;
	register long x4 __asm__("x4") = a4;
	register long x5 __asm__("x5") = a5;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
#endif
}

/*
 * FP argument N (1-based). x86-64: the register itself, untouched since the
 * trampoline (the hooks use general registers only). aarch64: the low half
 * of q(N-1) where the entry trampoline saved it.
 */
static uint64_t fp_argument(const uintptr_t *return_slot, int n) /* int: the word is negative */
{
	uint64_t v = 0;

#if defined(__x86_64__)
	(void)return_slot;
	switch (n) {
	case 1: __asm__ volatile("movq %%xmm0, %0" : "=r"(v)); break;
	case 2: __asm__ volatile("movq %%xmm1, %0" : "=r"(v)); break;
	case 3: __asm__ volatile("movq %%xmm2, %0" : "=r"(v)); break;
	case 4: __asm__ volatile("movq %%xmm3, %0" : "=r"(v)); break;
	case 5: __asm__ volatile("movq %%xmm4, %0" : "=r"(v)); break;
	case 6: __asm__ volatile("movq %%xmm5, %0" : "=r"(v)); break;
	case 7: __asm__ volatile("movq %%xmm6, %0" : "=r"(v)); break;
	case 8: __asm__ volatile("movq %%xmm7, %0" : "=r"(v)); break;
	}
#else
	if (n >= 1 && n <= 8)
		v = return_slot[ENTER_FP_ARG_WORD(n)];
#endif
	return v;
}

/* The FP return value (xmm0, d0) as the function returned; slot as profagent_exit_hook's. */
static uint64_t fp_return(const uintptr_t *slot)
{
#if defined(__x86_64__)
	(void)slot;
	return fp_argument(NULL, 1);
#else
	return slot[EXIT_FP_RETURN_WORD];
#endif
}

/*
 * Copies the string at src into dst (room: max bytes) through the kernel;
 * sets u's length and flags. Two remote pieces split at the page boundary:
 * the kernel never splits one piece, so a string that ends just before an
 * unmapped page is still read.
 */
static void copy_string(struct arg_unit *u, uint8_t *dst, uint32_t max, uint32_t tid)
{
	uintptr_t src = (uintptr_t)u->value, first = PAGE - src % PAGE;
	struct iovec local = { dst, max }, remote[2] = { { (void *)src, max }, { 0, 0 } };
	long n;
	uint32_t len;

	u->str_len = 0;
	u->str_flags = EVENT_STR_INVALID;
	if (src < LOWEST_POINTER || src >= HIGHEST_POINTER - max || !max)
		return;
	if (first < max) {
		remote[0].iov_len = first;
		remote[1] = (struct iovec){ (void *)(src + first), max - first };
	}
	n = raw_syscall6(SYS_process_vm_readv, (long)tid, (long)&local, 1, (long)remote,
			 first < max ? 2 : 1, 0);
	if (n <= 0)
		return;
	for (len = 0; len < (uint32_t)n && dst[len]; len++)
		__asm__("" : "+r"(len)); /* a loop, never a call to strnlen */
	u->str_len = (uint16_t)len;
	u->str_flags = len == (uint32_t)n ? EVENT_STR_CUT : 0; /* no NUL in what could be read */
}

/* One item's unit at out (and a string's bytes after it, room permitting); the units used. */
static uint32_t capture_one(const struct arg_cap *c, uint64_t value, struct arg_unit *out,
			    uint32_t room, uint32_t tid)
{
	uint32_t max = arg_string_max;

	out->value = value;
	out->desc = c->desc;
	out->str_len = 0;
	out->str_units = 0;
	out->str_flags = 0;
	if (c->cls != ARG_CLASS_STR)
		return 1;
	if (max > (room - 1) * 16)
		max = (room - 1) * 16;
	copy_string(out, (uint8_t *)(out + 1), max, tid);
	out->str_units = (uint8_t)((out->str_len + 15) / 16);
	return 1 + out->str_units;
}

/*
 * Where the trampolines saved integer argument N and the integer return
 * (trampolines/trampoline_layout.h).
 */
static inline uint64_t int_argument(const uintptr_t *return_slot, int n)
{
	return return_slot[ENTER_INT_ARG_WORD(n)];
}

static inline uint64_t int_return(const uintptr_t *slot)
{
	return slot[EXIT_INT_RETURN_WORD];
}

uint32_t arg_capture_enter(const struct arg_func *f, const uintptr_t *return_slot,
			   struct arg_unit *out, uint32_t tid)
{
	uint32_t used = 0;

	for (unsigned i = 0; i < f->n_enter && used < f->enter_units; i++) {
		const struct arg_cap *c = &f->enter[i];
		uint64_t v = c->source == ARG_SRC_FP ? fp_argument(return_slot, (int)c->index) :
						       int_argument(return_slot, (int)c->index);

		used += capture_one(c, v, out + used, f->enter_units - used, tid);
	}
	return used;
}

uint32_t arg_capture_exit(const struct arg_func *f, const uintptr_t *slot, struct arg_unit *out,
			  uint32_t tid)
{
	const struct arg_cap *c = &f->exit[0];

	if (!f->n_exit)
		return 0;
	return capture_one(c, c->source == ARG_SRC_FPRET ? fp_return(slot) : int_return(slot),
			   out, f->exit_units, tid);
}

void arg_units_copy(void *dst, const void *src, uint32_t n)
{
	uint64_t *d = dst;
	const uint64_t *s = src;

	for (uint32_t i = 0; i < 2 * n; i++) {
		d[i] = s[i];
		__asm__("" ::: "memory"); /* a loop, never a call to memcpy */
	}
}
