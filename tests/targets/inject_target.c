// SPDX-License-Identifier: MIT
/*
 * Target of tests/unit/test_inject.c: four threads that notice damage done by
 * an injector. Two spin with known values in every vector and mask register
 * (AVX-512, else AVX) and in general registers, one reads stdin (each byte is
 * echoed as "got C usr1=N counter=M"; EOF ends the program), one sleeps and
 * checks every nanosleep. argv[1] picks the main thread's role (spin, read,
 * sleep): remote calls land on the first thread at a safe point, the main
 * one; argv[2] is a lifetime in seconds; argv[3] adds "churn" (a fifth
 * thread creating and joining threads) or "seccomp" (an allow-all filter).
 * Any damage: a message on stderr and exit 1. Else "done ..." and exit 0.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define SPIN_ITERATIONS 2000000L
#define SLEEP_NS (20 * 1000 * 1000L)
#define DEFAULT_LIFETIME_S 120

/* Exported (-rdynamic) for the test to call and read. */
volatile long inject_probe_counter;

__attribute__((noinline, used)) long inject_probe_add(long a, long b)
{
	__atomic_add_fetch(&inject_probe_counter, 1, __ATOMIC_RELAXED);
	return a + b;
}

/* Raises sig in the calling thread: inside an injected call, the injector must hold it. */
__attribute__((noinline, used)) long inject_probe_raise(long sig)
{
	return raise((int)sig);
}

/* Handled SIGUSR1s, read by the test through /proc/PID/mem. */
volatile int inject_probe_usr1;
/* Sleeps ms milliseconds: a call that outlives the injector's timeout. */
__attribute__((noinline, used)) long inject_probe_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	return nanosleep(&ts, NULL);
}

static volatile int stop_flag;
static long spin_rounds[2];
static long sleeps;
static long lifetime_s = DEFAULT_LIFETIME_S;

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dprintf(2, "inject_target: %s\n", msg);
	_exit(1);
}

static void on_usr1(int sig)
{
	(void)sig;
	inject_probe_usr1++;
}

#define LOAD_ZMM(i) "vmovdqu64 " #i "*64(%[in]), %%zmm" #i "\n\t"
#define STORE_ZMM(i) "vmovdqu64 %%zmm" #i ", " #i "*64(%[out])\n\t"
#define REGS16(op)                                                                       \
	op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11) op(12)  \
	op(13) op(14) op(15)
#define REGS32(op)                                                                       \
	REGS16(op) op(16) op(17) op(18) op(19) op(20) op(21) op(22) op(23) op(24) op(25)  \
	op(26) op(27) op(28) op(29) op(30) op(31)

/* zmm0-31 and k1-k7 hold known values across a long spin; returns 0 if all survived. */
__attribute__((target("avx512f"), noinline))
static int spin_avx512(uint64_t seed)
{
	static __thread uint64_t in[32 * 8] __attribute__((aligned(64)));
	static __thread uint64_t out[32 * 8] __attribute__((aligned(64)));
	uint16_t kin[7], kout[7];
	long n = SPIN_ITERATIONS;

	for (int i = 0; i < 32 * 8; i++)
		in[i] = seed * 0x9e3779b97f4a7c15ULL + i;
	for (int i = 0; i < 7; i++)
		kin[i] = (uint16_t)(seed * 7 + i + 1);
	__asm__ volatile(
		REGS32(LOAD_ZMM)
		"kmovw 0(%[kin]), %%k1\n\tkmovw 2(%[kin]), %%k2\n\tkmovw 4(%[kin]), %%k3\n\t"
		"kmovw 6(%[kin]), %%k4\n\tkmovw 8(%[kin]), %%k5\n\tkmovw 10(%[kin]), %%k6\n\t"
		"kmovw 12(%[kin]), %%k7\n\t"
		"1: dec %[n]\n\tjnz 1b\n\t"
		REGS32(STORE_ZMM)
		"kmovw %%k1, 0(%[kout])\n\tkmovw %%k2, 2(%[kout])\n\tkmovw %%k3, 4(%[kout])\n\t"
		"kmovw %%k4, 6(%[kout])\n\tkmovw %%k5, 8(%[kout])\n\tkmovw %%k6, 10(%[kout])\n\t"
		"kmovw %%k7, 12(%[kout])\n\t"
		: [n] "+r"(n)
		: [in] "r"(in), [out] "r"(out), [kin] "r"(kin), [kout] "r"(kout)
		: "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",
		  "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",
		  "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4",
		  "k5", "k6", "k7");
	return memcmp(in, out, sizeof(in)) || memcmp(kin, kout, sizeof(kin));
}

#define LOAD_YMM(i) "vmovdqu " #i "*32(%[in]), %%ymm" #i "\n\t"
#define STORE_YMM(i) "vmovdqu %%ymm" #i ", " #i "*32(%[out])\n\t"

/* The same with ymm0-15 on machines without AVX-512. */
__attribute__((target("avx"), noinline))
static int spin_avx(uint64_t seed)
{
	static __thread uint64_t in[16 * 4] __attribute__((aligned(32)));
	static __thread uint64_t out[16 * 4] __attribute__((aligned(32)));
	long n = SPIN_ITERATIONS;

	for (int i = 0; i < 16 * 4; i++)
		in[i] = seed * 0x9e3779b97f4a7c15ULL + i;
	__asm__ volatile(
		REGS16(LOAD_YMM)
		"1: dec %[n]\n\tjnz 1b\n\t"
		REGS16(STORE_YMM)
		: [n] "+r"(n)
		: [in] "r"(in), [out] "r"(out)
		: "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return memcmp(in, out, sizeof(in));
}

/* FNV-1a over a buffer, compared with the first result: general registers and flags. */
static uint64_t checksum(const uint8_t *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ buf[i]) * 0x100000001b3ULL;
	return h;
}

static void run_spin(int index)
{
	static __thread uint8_t buf[4096];
	int avx512 = __builtin_cpu_supports("avx512f");
	uint64_t expected, seed = (uint64_t)index << 32;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + index);
	expected = checksum(buf, sizeof(buf));
	while (!stop_flag) {
		if (avx512 ? spin_avx512(seed) : spin_avx(seed))
			die("spin thread %d: vector registers changed (seed %lu)", index,
			    (unsigned long)seed);
		if (checksum(buf, sizeof(buf)) != expected)
			die("spin thread %d: wrong checksum", index);
		seed++;
		__atomic_add_fetch(&spin_rounds[index], 1, __ATOMIC_RELAXED);
	}
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void run_sleep(void)
{
	int64_t start = mono_ns(), t0;
	sigset_t usr1;

	/* A handler would end nanosleep with EINTR: SIGUSR1 goes to other threads. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	while (!stop_flag) {
		struct timespec ts = { 0, SLEEP_NS };

		t0 = mono_ns();
		if (nanosleep(&ts, NULL))
			die("nanosleep: %s", strerror(errno));
		if (mono_ns() - t0 < SLEEP_NS)
			die("nanosleep returned after %lld ns", (long long)(mono_ns() - t0));
		sleeps++;
		if (mono_ns() - start > lifetime_s * 1000000000LL) {
			/* The reader may sit in read() for good: end here. */
			dprintf(1, "done: lifetime over\n");
			exit(0);
		}
	}
}

static void run_read(void)
{
	char c;
	ssize_t n;

	while (!stop_flag) {
		n = read(0, &c, 1);
		if (n < 0)
			die("read: %s", strerror(errno));
		if (n == 0)
			break;
		dprintf(1, "got %c usr1=%d counter=%ld\n", c, inject_probe_usr1,
			inject_probe_counter);
	}
	stop_flag = 1;
}

static void run_role(const char *role)
{
	if (strcmp(role, "spin0") == 0)
		run_spin(0);
	else if (strcmp(role, "spin1") == 0)
		run_spin(1);
	else if (strcmp(role, "read") == 0)
		run_read();
	else
		run_sleep();
}

static void *noop_thread(void *arg)
{
	return arg;
}

/* Threads born and gone all the time, including while an injector attaches. */
static void *churn_thread(void *arg)
{
	pthread_t th;

	(void)arg;
	while (!stop_flag) {
		if (pthread_create(&th, NULL, noop_thread, NULL))
			die("churn: pthread_create failed");
		pthread_join(th, NULL);
	}
	return NULL;
}

static void install_seccomp_filter(void)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { 1, &allow };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		die("seccomp: %s", strerror(errno));
}

static void *role_thread(void *arg)
{
	run_role(arg);
	return NULL;
}

int main(int argc, char **argv)
{
	static char *roles[] = { "spin0", "spin1", "read", "sleep" };
	const char *main_role = argc > 1 ? argv[1] : "spin";
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	const char *extra = argc > 3 ? argv[3] : "";
	pthread_t threads[4];
	int n = 0;

	if (strcmp(main_role, "spin") == 0)
		main_role = "spin0";
	if (argc > 2)
		lifetime_s = strtol(argv[2], NULL, 10);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 4; i++)
		if (strcmp(roles[i], main_role) != 0 &&
		    pthread_create(&threads[n++], NULL, role_thread, roles[i]))
			die("pthread_create failed");
	if (n != 3)
		die("unknown role %s (spin, read, sleep)", main_role);
	if (strcmp(extra, "seccomp") == 0)
		install_seccomp_filter();
	if (strcmp(extra, "churn") == 0 && pthread_create(&threads[n++], NULL, churn_thread, NULL))
		die("pthread_create failed");
	dprintf(1, "ready\n");
	run_role(main_role);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	dprintf(1, "done spins=%ld,%ld sleeps=%ld counter=%ld usr1=%d\n", spin_rounds[0],
		spin_rounds[1], sleeps, inject_probe_counter, inject_probe_usr1);
	return 0;
}
