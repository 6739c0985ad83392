// SPDX-License-Identifier: MIT
/*
 * Scheduler-heavy target for bench/sched.sh: two threads pass one byte back
 * and forth over a pair of pipes, so every round trip blocks each thread once
 * and wakes it once (2 wakeups and at least 2 context switches; 4 when the
 * two threads sit on different CPUs and each switch goes through the idle
 * task). What profd's scheduler probe costs shows up here as time per round
 * trip. Knows nothing of profd: bench/sched.sh compares it bare and under
 * `profctl run`, and divides by the scheduler events profctl reports.
 *
 * With --cpu N both threads run on CPU N only: every switch goes straight
 * from one thread to the other (2 per round trip), with no idle task and no
 * cross-CPU wakeup in between, whose cost on a VM dwarfs the rest. With
 * --cpu N,M ping runs on N and pong on M: every byte is a wakeup of another
 * CPU, and each CPU switches to its idle task and back (4 per round trip).
 * Unpinned, the scheduler moves them between the two cases as it likes.
 *
 * Prints one line of key=value figures (see print_result) for the timed
 * round trips; a warm-up of WARMUP_ROUND_TRIPS comes first and is not timed
 * (a profiler's counts include it: the line says how many).
 *
 * Usage: pingpong [--cpu N[,M]] [ROUND_TRIPS]   (default 200000, any CPU)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The first round trips page in the stacks and pipe buffers and let the CPUs leave deep idle. */
#define WARMUP_ROUND_TRIPS 2000

struct pingpong {
	int to_pong[2];   /* ping writes [1], pong reads [0] */
	int to_ping[2];   /* pong writes [1], ping reads [0] */
	long round_trips; /* warm-up included */
	struct rusage pong_usage; /* pong's own, from its first timed round trip */
	int pong_err;             /* 0, or the negative errno that stopped pong */
};

/* One byte through fd, or a negative errno (a closed pipe is -EPIPE). */
static int pass_byte(int fd_out, int fd_in)
{
	char c = 'x';
	ssize_t n;

	if (fd_out >= 0) {
		while ((n = write(fd_out, &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			return n < 0 ? -errno : -EPIPE;
	}
	if (fd_in >= 0) {
		while ((n = read(fd_in, &c, 1)) < 0 && errno == EINTR)
			;
		if (n != 1)
			return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/*
 * Answers every byte. Its rusage is taken from the first timed round trip,
 * as ping's, so the two threads' context switches add up to the
 * timed round trips' (the agent's flusher thread, under profctl, is left out).
 */
static void *pong_run(void *arg)
{
	struct pingpong *p = arg;
	struct rusage start, end;
	int err = 0;

	for (long i = 0; i < p->round_trips && !err; i++) {
		if (i == WARMUP_ROUND_TRIPS)
			getrusage(RUSAGE_THREAD, &start);
		err = pass_byte(-1, p->to_pong[0]);
		if (!err)
			err = pass_byte(p->to_ping[1], -1);
	}
	getrusage(RUSAGE_THREAD, &end);
	if (err) /* ping must not wait for a byte that will never come */
		close(p->to_ping[1]);
	p->pong_usage.ru_nvcsw = end.ru_nvcsw - start.ru_nvcsw;
	p->pong_usage.ru_nivcsw = end.ru_nivcsw - start.ru_nivcsw;
	p->pong_err = err;
	return NULL;
}

static double now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct measure {
	double wall_ns, cpu_ns;   /* the process (both threads) */
	long nvcsw, nivcsw;        /* ping's; pong's are added after the join */
};

static void measure_start(struct measure *m)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	m->nvcsw = -ru.ru_nvcsw;
	m->nivcsw = -ru.ru_nivcsw;
	m->cpu_ns = -now_ns(CLOCK_PROCESS_CPUTIME_ID);
	m->wall_ns = -now_ns(CLOCK_MONOTONIC);
}

static void measure_stop(struct measure *m)
{
	struct rusage ru;

	m->wall_ns += now_ns(CLOCK_MONOTONIC);
	m->cpu_ns += now_ns(CLOCK_PROCESS_CPUTIME_ID);
	getrusage(RUSAGE_THREAD, &ru);
	m->nvcsw += ru.ru_nvcsw;
	m->nivcsw += ru.ru_nivcsw;
}

/*
 * switches: the two threads' switches out of the CPU (voluntary: blocked on
 * the pipe; involuntary: preempted), per round trip. The scheduler's own
 * count of sched_switch events is about twice that when each switch goes
 * through the idle task (one out, one in); profctl reports it.
 */
static void print_result(long n, const struct measure *m)
{
	printf("pingpong: round_trips=%ld wall_s=%.3f round_trips_per_s=%.0f ns_per_round_trip=%.1f "
	       "cpu_ns_per_round_trip=%.1f switches_per_round_trip=%.3f "
	       "involuntary_per_round_trip=%.4f warmup_round_trips=%d\n",
	       n, m->wall_ns / 1e9, n / (m->wall_ns / 1e9), m->wall_ns / (double)n,
	       m->cpu_ns / (double)n, (double)(m->nvcsw + m->nivcsw) / (double)n,
	       (double)m->nivcsw / (double)n, WARMUP_ROUND_TRIPS);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno || end == s || *end || *out < lo || *out > hi ? -EINVAL : 0;
}

/* --cpu N or N,M: the CPUs of ping and pong (both N when M is not given). */
static int parse_cpus(char *s, long cpu[2])
{
	char *comma = strchr(s, ',');

	if (comma)
		*comma = '\0';
	if (parse_long(s, 0, CPU_SETSIZE - 1, &cpu[0]))
		return -EINVAL;
	cpu[1] = cpu[0];
	return comma ? parse_long(comma + 1, 0, CPU_SETSIZE - 1, &cpu[1]) : 0;
}

static int parse_args(int argc, char **argv, long *n, long cpu[2])
{
	int positional = 0;

	*n = 200000;
	cpu[0] = cpu[1] = -1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--cpu") == 0) {
			if (++i == argc || parse_cpus(argv[i], cpu))
				return -EINVAL;
		} else if (positional++ || parse_long(argv[i], 1, 1000000000L, n)) {
			return -EINVAL;
		}
	}
	return 0;
}

/* The calling thread only; a thread created afterwards inherits the mask. */
static int pin_to(long cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET((int)cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "pingpong: cannot run on CPU %ld: %s\n", cpu, strerror(errno));
		return -errno;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct pingpong p = { 0 };
	struct measure m = { 0 };
	pthread_t pong;
	long n, cpu[2];
	int err = 0;

	if (parse_args(argc, argv, &n, cpu)) {
		fprintf(stderr, "usage: %s [--cpu N[,M]] [ROUND_TRIPS 1-1000000000]\n", argv[0]);
		return 2;
	}
	if (cpu[1] >= 0 && pin_to(cpu[1])) /* pong's CPU, inherited by pong */
		return 1;
	p.round_trips = n + WARMUP_ROUND_TRIPS;
	if (pipe(p.to_pong) || pipe(p.to_ping)) {
		fprintf(stderr, "pingpong: pipe: %s\n", strerror(errno));
		return 1;
	}
	err = pthread_create(&pong, NULL, pong_run, &p);
	if (err) {
		fprintf(stderr, "pingpong: pthread_create: %s\n", strerror(err));
		return 1;
	}
	if (cpu[0] != cpu[1] && pin_to(cpu[0]))
		return 1; /* pong waits in read(): exit ends it */
	err = 0;
	for (long i = 0; i < p.round_trips && !err; i++) {
		if (i == WARMUP_ROUND_TRIPS)
			measure_start(&m);
		err = pass_byte(p.to_pong[1], p.to_ping[0]);
	}
	measure_stop(&m);
	if (err) /* pong must not wait for a byte that will never come */
		close(p.to_pong[1]);
	pthread_join(pong, NULL);
	if (err || p.pong_err) {
		fprintf(stderr, "pingpong: a pipe failed: %s\n", strerror(-(err ? err : p.pong_err)));
		return 1;
	}
	m.nvcsw += p.pong_usage.ru_nvcsw;
	m.nivcsw += p.pong_usage.ru_nivcsw;
	print_result(n, &m);
	return 0;
}
