// SPDX-License-Identifier: MIT
/*
 * A target for tests/integration/test_faults.sh: profiled while its profctl,
 * its profd or its disk fails. Worker threads call ft_work() a known number
 * of times (each call makes two ft_leaf() calls), sleeping between rounds;
 * one more thread sits in a long poll() and another blocks every signal, so
 * an agent that stops the world must do so without an EINTR the program can
 * see. Prints only deterministic lines: results, call counts, and how many
 * sleeps or polls were cut short (always 0 unless something interrupted it).
 *
 * usage: fault_target THREADS ROUNDS CALLS_PER_ROUND SLEEP_US [READY_FILE]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64

static long rounds, calls_per_round, sleep_us;
static _Atomic long interrupted, wrong;
static int stop_pipe[2];

__attribute__((noinline, used)) long ft_leaf(long x)
{
	long r = x * 2654435761L + 7;

	__asm__ volatile("" : "+r"(r));
	return r ^ (r >> 13);
}

__attribute__((noinline, used)) long ft_work(long i)
{
	long r = ft_leaf(i) + ft_leaf(i + 1);

	__asm__ volatile("" : "+r"(r));
	return r;
}

static long expected(long i)
{
	long a = i * 2654435761L + 7, b = (i + 1) * 2654435761L + 7;

	return (a ^ (a >> 13)) + (b ^ (b >> 13));
}

/* A sleep a signal handler cut short shows as EINTR: counted, never hidden. */
static void pause_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	if (us > 0 && nanosleep(&ts, NULL) != 0 && errno == EINTR)
		atomic_fetch_add(&interrupted, 1);
}

static void *worker(void *arg)
{
	long id = (long)arg, sum = 0;

	for (long r = 0; r < rounds; r++) {
		for (long k = 0; k < calls_per_round; k++) {
			long i = id * 1000003L + r * calls_per_round + k;
			long v = ft_work(i);

			if (v != expected(i))
				atomic_fetch_add(&wrong, 1);
			sum += v & 0xffff;
		}
		pause_us(sleep_us);
	}
	return (void *)sum;
}

/* Sleeps in poll() until main writes to the pipe: one EINTR would show. */
static void *poller(void *arg)
{
	struct pollfd p = { .fd = stop_pipe[0], .events = POLLIN };

	(void)arg;
	if (poll(&p, 1, -1) < 0)
		atomic_fetch_add(&interrupted, 1);
	return NULL;
}

/* Blocks every signal: an agent cannot reach it with one. */
static void *masked(void *arg)
{
	sigset_t all;
	long sum = 0;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	for (long r = 0; r < rounds; r++) {
		for (long k = 0; k < calls_per_round; k++)
			sum += ft_leaf(r * calls_per_round + k) & 0xff;
		pause_us(sleep_us);
	}
	return (void *)sum;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS], poll_th, mask_th;
	long threads;
	void *ret;

	if (argc < 5) {
		fprintf(stderr, "usage: %s THREADS ROUNDS CALLS_PER_ROUND SLEEP_US [READY_FILE]\n",
			argv[0]);
		return 2;
	}
	threads = atol(argv[1]);
	rounds = atol(argv[2]);
	calls_per_round = atol(argv[3]);
	sleep_us = atol(argv[4]);
	if (threads < 1 || threads > MAX_THREADS || pipe(stop_pipe))
		return 2;
	pthread_create(&poll_th, NULL, poller, NULL);
	pthread_create(&mask_th, NULL, masked, NULL);
	for (long t = 0; t < threads; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	if (argc > 5) { /* the test waits for it before it breaks something */
		FILE *f = fopen(argv[5], "w");

		if (f)
			fclose(f);
	}
	for (long t = 0; t < threads; t++) {
		pthread_join(th[t], &ret);
		printf("thread %ld sum %ld\n", t, (long)ret);
	}
	pthread_join(mask_th, &ret);
	printf("masked sum %ld\n", (long)ret);
	if (write(stop_pipe[1], "x", 1) != 1)
		return 1;
	pthread_join(poll_th, NULL);
	printf("ft_work calls %ld\n", threads * rounds * calls_per_round);
	printf("ft_leaf calls %ld\n", (2 * threads + 1) * rounds * calls_per_round);
	printf("wrong results %ld\n", (long)atomic_load(&wrong));
	printf("interrupted sleeps %ld\n", (long)atomic_load(&interrupted));
	return 0;
}
