// SPDX-License-Identifier: MIT
/*
 * A service with known call rates for profctl top (tests/integration/test_top.sh).
 * Four threads, each paced by absolute deadlines so that its rate holds
 * whatever the machine's load does to the work:
 *   top_fast   2000 calls/s, ~2 us each (on-CPU)
 *   top_slow     50 calls/s, ~1 ms each (on-CPU)
 *   top_wait     20 calls/s, ~20 ms each, asleep (off-CPU): 20 times the
 *                longest of the others, so that a loaded machine's preemptions
 *                do not reorder p99 and avg
 *   top_outer   200 calls/s, calling top_inner (~200 us on-CPU) once each
 * So by total time: top_wait > top_slow > top_outer >= top_inner > top_fast;
 * by calls: top_fast first; by self: top_outer last; by avg: top_wait first.
 * Every 100 ms it writes its own counts to the file argv[1] (rewritten
 * whole: "MONO_NS fast slow wait outer inner"), and runs until argv[2] exists.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { FAST, SLOW, WAIT, OUTER, INNER, FUNCS };

static _Atomic unsigned long counts[FUNCS];
static _Atomic int stop;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, used)) void top_fast(void)
{
	spin_ns(2000);
	atomic_fetch_add_explicit(&counts[FAST], 1, memory_order_relaxed);
}

__attribute__((noinline, used)) void top_slow(void)
{
	spin_ns(1000000);
	atomic_fetch_add_explicit(&counts[SLOW], 1, memory_order_relaxed);
}

__attribute__((noinline, used)) void top_wait(void)
{
	nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	atomic_fetch_add_explicit(&counts[WAIT], 1, memory_order_relaxed);
}

__attribute__((noinline, used)) void top_inner(void)
{
	spin_ns(200000);
	atomic_fetch_add_explicit(&counts[INNER], 1, memory_order_relaxed);
}

__attribute__((noinline, used)) void top_outer(void)
{
	top_inner();
	atomic_fetch_add_explicit(&counts[OUTER], 1, memory_order_relaxed);
}

struct pace {
	void (*fn)(void);
	unsigned per_tick;  /* calls every 10 ms */
	unsigned every;     /* ticks between batches */
};

/* Calls fn per_tick times every `every` 10 ms ticks, on absolute deadlines (no drift). */
static void *paced(void *arg)
{
	const struct pace *p = arg;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (unsigned i = 0; i < p->per_tick; i++)
			p->fn();
		next.tv_nsec += 10000000L * p->every;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	return NULL;
}

static void write_counts(const char *path)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%llu", (unsigned long long)now_ns());
	for (int i = 0; i < FUNCS; i++)
		fprintf(f, " %lu", atomic_load(&counts[i]));
	fprintf(f, "\n");
	fclose(f);
	rename(tmp, path); /* readers see a whole line */
}

int main(int argc, char **argv)
{
	static const struct pace paces[] = {
		{ top_fast, 20, 1 },  /* 2000/s */
		{ top_slow, 1, 2 },   /* 50/s */
		{ top_wait, 1, 5 },   /* 20/s */
		{ top_outer, 2, 1 },  /* 200/s */
	};
	pthread_t th[4];

	if (argc != 3) {
		fprintf(stderr, "usage: top_target COUNTS_FILE STOP_FILE\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, paced, (void *)&paces[i]);
	printf("running\n");
	fflush(stdout);
	while (access(argv[2], F_OK) != 0) {
		write_counts(argv[1]);
		usleep(100000);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	write_counts(argv[1]);
	printf("done\n");
	return 0;
}
