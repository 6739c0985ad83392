// SPDX-License-Identifier: MIT
/*
 * Scheduler states test target: four threads, each in one instrumented
 * function the whole time it waits or works.
 *   napper:  nap() sleeps NAP_MS, NAPS times (Sleeping, woken by the timer)
 *   holder:  hold_lock() takes the mutex, then sleeps HOLD_MS holding it
 *   waiter:  lock_wait() blocks on that mutex until the holder lets go
 *            (off-CPU, woken by the holder's unlock)
 *   spinner: spin() computes for SPIN_MS (Running)
 *   main:    deep() recurses DEEP_LEVELS deep and sleeps DEEP_MS at the
 *            bottom, DEEP_CALLS times (one sleep inside nested calls of
 *            one function: its off-CPU time counts once)
 * Prints what each thread measured itself, for the test to compare with the
 * trace: "ROLE tid=N calls=N ns=N asked=N" (ns: the total time inside the
 * calls; asked: the sleep they asked for, 0 for none).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NAPS 10
#define NAP_MS 20
#define HOLD_MS 60
#define SPIN_MS 150
#define DEEP_LEVELS 3
#define DEEP_MS 10
#define DEEP_CALLS 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void report(const char *role, int calls, uint64_t ns, uint64_t asked_ms)
{
	printf("%s tid=%ld calls=%d ns=%llu asked=%llu\n", role, (long)syscall(SYS_gettid), calls,
	       (unsigned long long)ns, (unsigned long long)asked_ms * 1000000);
}

__attribute__((noinline)) void nap(void)
{
	struct timespec t = { 0, NAP_MS * 1000000L };

	while (nanosleep(&t, &t))
		;
}

__attribute__((noinline)) void hold_lock(void)
{
	struct timespec t = { 0, HOLD_MS * 1000000L };

	pthread_mutex_lock(&lock);
	pthread_barrier_wait(&start); /* the waiter starts waiting now */
	while (nanosleep(&t, &t))
		;
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) void lock_wait(void)
{
	pthread_mutex_lock(&lock);
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) void spin(void)
{
	uint64_t end = now_ns() + SPIN_MS * 1000000ull, x = 0;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

__attribute__((noinline)) void deep(int level)
{
	struct timespec t = { 0, DEEP_MS * 1000000L };

	if (level > 1) {
		deep(level - 1);
		__asm__ volatile("" ::: "memory"); /* not a tail call */
		return;
	}
	while (nanosleep(&t, &t))
		;
}

static void *napper(void *arg)
{
	uint64_t t0 = now_ns();

	(void)arg;
	for (int i = 0; i < NAPS; i++)
		nap();
	report("napper", NAPS, now_ns() - t0, NAPS * NAP_MS);
	return NULL;
}

static void *holder(void *arg)
{
	uint64_t t0 = now_ns();

	(void)arg;
	hold_lock();
	report("holder", 1, now_ns() - t0, HOLD_MS);
	return NULL;
}

static void *waiter(void *arg)
{
	uint64_t t0;

	(void)arg;
	pthread_barrier_wait(&start);
	t0 = now_ns();
	lock_wait();
	report("waiter", 1, now_ns() - t0, 0);
	return NULL;
}

static void *spinner(void *arg)
{
	uint64_t t0 = now_ns();

	(void)arg;
	spin();
	report("spinner", 1, now_ns() - t0, 0);
	return NULL;
}

int main(void)
{
	void *(*roles[])(void *) = { napper, holder, waiter, spinner };
	pthread_t t[4];

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, roles[i], NULL))
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < DEEP_CALLS; i++)
		deep(DEEP_LEVELS);
	return 0;
}
