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
 * With --rate, each thread makes CALLS_PER_S calls per second instead of as
 * many as it can (bench/pipeline.sh searches the highest rate that profd
 * records without dropping): it makes 1 ms worth of calls, then sleeps until
 * they are due. Sleeping, not spinning, leaves the CPU to the agent's flusher
 * and to profd, whose cost is what that search measures.
 *
 * Usage: load_target [THREADS] [SECONDS] [--rate CALLS_PER_S]   (defaults 4, 30, flat out)
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_THREADS 64
/* Calls of load_outer between two reads of the stop flag. */
#define BATCH 256
/* load_outer + 2 x load_inner */
#define CALLS_PER_ITERATION 3
/* Paced: the calls of this long are made at once, then the thread sleeps until they are due. */
#define PACE_TICK_NS 1000000.0
/* Paced, and this far behind (preempted): the debt is forgotten, not made up in one burst. */
#define PACE_MAX_LAG_NS 10000000.0

/* Per-thread counters, one cache line each: the threads share nothing on the hot path. */
struct load_counts {
	uint64_t outer;
	uint64_t inner;
	long sum;
} __attribute__((aligned(64)));

static struct load_counts counts[MAX_THREADS];
static _Atomic int stop;
static long rate; /* calls per second per thread; 0: flat out */
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

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* --rate: iteration k is due at start + k x CALLS_PER_ITERATION / rate seconds. */
static long worker_paced(struct load_counts *c)
{
	double ns_per_iteration = 1e9 * CALLS_PER_ITERATION / (double)rate;
	long chunk = (long)(PACE_TICK_NS / ns_per_iteration);
	double due = now_ns(), now;
	struct timespec ts;
	long sum = 0;

	if (chunk < 1)
		chunk = 1;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		for (long i = 0; i < chunk; i++)
			sum += load_outer(c, i);
		due += (double)chunk * ns_per_iteration;
		now = now_ns();
		if (now - due > PACE_MAX_LAG_NS)
			due = now;
		if (due <= now)
			continue;
		ts.tv_sec = (time_t)(due / 1e9);
		ts.tv_nsec = (long)(due - (double)ts.tv_sec * 1e9);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return sum;
}

static void *worker_run(void *arg)
{
	struct load_counts *c = arg;
	long sum = 0;

	pthread_barrier_wait(&start_barrier);
	if (rate)
		sum = worker_paced(c);
	else
		while (!atomic_load_explicit(&stop, memory_order_relaxed))
			for (int i = 0; i < BATCH; i++)
				sum += load_outer(c, i);
	c->sum = sum;
	return NULL;
}

static int parse_arg(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno || end == s || *end || *out < lo || *out > hi ? -EINVAL : 0;
}

static int parse_args(int argc, char **argv, long *nthreads, long *seconds)
{
	int positional = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rate") == 0) {
			if (++i == argc || parse_arg(argv[i], 1, 1000000000000L, &rate))
				return -EINVAL;
		} else if (positional == 0) {
			if (parse_arg(argv[i], 1, MAX_THREADS, nthreads))
				return -EINVAL;
			positional++;
		} else if (positional == 1) {
			if (parse_arg(argv[i], 1, 3600, seconds))
				return -EINVAL;
			positional++;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	long nthreads = 4, seconds = 30;
	pthread_t threads[MAX_THREADS];
	uint64_t outer = 0, inner = 0;
	struct timespec run;
	double t0, t1;
	int err;

	if (parse_args(argc, argv, &nthreads, &seconds)) {
		fprintf(stderr, "usage: %s [THREADS 1-%d] [SECONDS 1-3600] [--rate CALLS_PER_S]\n",
			argv[0], MAX_THREADS);
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
	t0 = now_ns();
	run = (struct timespec){ .tv_sec = seconds };
	while (nanosleep(&run, &run) && errno == EINTR)
		;
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	for (long i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	t1 = now_ns();

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
	printf("ran %.3f s in %ld threads\n", (t1 - t0) / 1e9, nthreads);
	if (rate)
		printf("paced: %ld calls/s per thread\n", rate);
	printf("calls: load_outer %llu load_inner %llu total %llu\n", (unsigned long long)outer,
	       (unsigned long long)inner, (unsigned long long)(outer + inner));
	return 0;
}
