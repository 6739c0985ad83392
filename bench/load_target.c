// SPDX-License-Identifier: MIT
/*
 * Load target for bench/load.sh: N threads call two small functions
 * (load_outer -> 2 x load_inner) as fast as they can for S seconds, then the
 * program prints exactly how many calls each function got. Under
 * `profctl run --funcs 'load_*'` every call is an enter and an exit event, so
 * these counts are what profd must account for (recorded or dropped).
 * Only the worker threads call load_*: main never does, and no other
 * function of this file has a name that the glob matches.
 *
 * Usage: load_target [THREADS] [SECONDS]   (defaults 4 and 30)
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 64
/* Calls of load_outer between two reads of the stop flag. */
#define BATCH 256

/* Per-thread counters, one cache line each: the threads share nothing on the hot path. */
struct load_counts {
	uint64_t outer;
	uint64_t inner;
	long sum;
} __attribute__((aligned(64)));

static struct load_counts counts[MAX_THREADS];
static _Atomic int stop;
static pthread_barrier_t start_barrier;

/* noipa: no inlining, cloning or folding, so each call really goes through the patched entry. */
__attribute__((noipa)) long load_inner(struct load_counts *c, long x)
{
	c->inner++;
	return x * 3 + 1;
}

__attribute__((noipa)) long load_outer(struct load_counts *c, long x)
{
	c->outer++;
	return load_inner(c, x) + load_inner(c, x + 1);
}

static void *worker_run(void *arg)
{
	struct load_counts *c = arg;
	long sum = 0;

	pthread_barrier_wait(&start_barrier);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		for (int i = 0; i < BATCH; i++)
			sum += load_outer(c, i);
	c->sum = sum;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_arg(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno || end == s || *end || *out < lo || *out > hi ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	long nthreads = 4, seconds = 30;
	pthread_t threads[MAX_THREADS];
	uint64_t outer = 0, inner = 0;
	struct timespec run;
	double t0, t1;
	int err;

	if ((argc > 1 && parse_arg(argv[1], 1, MAX_THREADS, &nthreads)) ||
	    (argc > 2 && parse_arg(argv[2], 1, 3600, &seconds)) || argc > 3) {
		fprintf(stderr, "usage: %s [THREADS 1-%d] [SECONDS 1-3600]\n", argv[0], MAX_THREADS);
		return 2;
	}
	pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
	for (long i = 0; i < nthreads; i++) {
		err = pthread_create(&threads[i], NULL, worker_run, &counts[i]);
		if (err) {
			fprintf(stderr, "load_target: pthread_create: error %d\n", err);
			return 1;
		}
	}
	pthread_barrier_wait(&start_barrier);
	t0 = now_s();
	run = (struct timespec){ .tv_sec = seconds };
	while (nanosleep(&run, &run) && errno == EINTR)
		;
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	for (long i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	t1 = now_s();

	for (long i = 0; i < nthreads; i++) {
		/* load_outer calls load_inner exactly twice: anything else is a miscount */
		if (counts[i].inner != 2 * counts[i].outer) {
			fprintf(stderr, "load_target: thread %ld: %llu inner calls for %llu outer\n",
				i, (unsigned long long)counts[i].inner,
				(unsigned long long)counts[i].outer);
			return 1;
		}
		printf("thread %ld: load_outer %llu load_inner %llu\n", i,
		       (unsigned long long)counts[i].outer, (unsigned long long)counts[i].inner);
		outer += counts[i].outer;
		inner += counts[i].inner;
	}
	printf("ran %.3f s in %ld threads\n", t1 - t0, nthreads);
	printf("calls: load_outer %llu load_inner %llu total %llu\n", (unsigned long long)outer,
	       (unsigned long long)inner, (unsigned long long)(outer + inner));
	return 0;
}
