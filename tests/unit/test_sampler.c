// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/sampler.c. Live cases sample this binary re-executed
 * with "--spin" (two threads in profd_spin_worker) through enable_on_exec, or
 * attach to it running; they skip with a printed reason where
 * perf_event_open is not permitted. Parser cases feed crafted and random
 * bytes through sampler_parse. Only lower bounds on counts, no timing limits.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/sampler.h"
#include "daemon/symbols.h"
#include "tests/unit/unit.h"

#define SPIN_FUNCTION "profd_spin_worker"
#define SPIN_CPU_MS 500
#define MAX_SAMPLES 200000
#define MAX_CPUS 256

/* ---- the spinning target (this binary with --spin) ------------------------- */

static volatile uint64_t spin_sink;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for ms of this thread's CPU time, nearly all of it in this function. */
__attribute__((noinline, visibility("default"))) void profd_spin_worker(long ms)
{
	uint64_t end = thread_cpu_ns() + (uint64_t)ms * 1000000u;
	uint64_t x = 1;
	int i;

	do {
		for (i = 0; i < 200000; i++)
			x = x * 6364136223846793005u + 1442695040888963407u;
		spin_sink = x;
	} while (thread_cpu_ns() < end);
}

static void *spin_thread(void *arg)
{
	profd_spin_worker((long)(intptr_t)arg);
	return NULL;
}

/* argv: --spin MS [READY_FD]: writes a byte to READY_FD once both threads run. */
static int spin_main(int argc, char **argv)
{
	long ms = atol(argv[2]);
	pthread_t t;

	if (pthread_create(&t, NULL, spin_thread, (void *)(intptr_t)ms) != 0)
		return 1;
	if (argc > 3 && write(atoi(argv[3]), "r", 1) != 1)
		return 1;
	profd_spin_worker(ms);
	pthread_join(t, NULL);
	/* skip atexit work: LeakSanitizer would fork a tracer that inherit follows */
	_exit(0);
}

/* ---- collecting a live run ---------------------------------------------------- */

struct stored_sample {
	uint32_t pid, tid, cpu;
	uint64_t time, ip;
	size_t n;
	uint64_t chain[8];
};

struct run {
	pid_t child;
	char exe[4096];
	struct symbolizer *sym;
	struct stored_sample *samples;
	size_t n_samples, chain_not_ip, empty_chains, kernel_mode;
	uint64_t last_time[MAX_CPUS];
	size_t out_of_order;
	uint32_t tids[64];
	size_t n_tids;
	bool mmap_exe, comm_child, fork_thread;
	uint64_t t_start, t_end, lost;
	struct sampler_stats stats;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void note_tid(struct run *r, uint32_t tid)
{
	size_t i;

	for (i = 0; i < r->n_tids; i++)
		if (r->tids[i] == tid)
			return;
	if (r->n_tids < 64)
		r->tids[r->n_tids++] = tid;
}

static void on_sample(void *ctx, const struct sampler_sample *s)
{
	struct run *r = ctx;
	struct stored_sample *st;

	if (s->cpu < MAX_CPUS) {
		if (s->time < r->last_time[s->cpu])
			r->out_of_order++;
		r->last_time[s->cpu] = s->time;
	}
	r->empty_chains += s->n_callchain == 0;
	r->chain_not_ip += s->n_callchain && s->callchain[0] != s->ip;
	r->kernel_mode += !s->user_mode;
	note_tid(r, s->tid);
	if (r->n_samples == MAX_SAMPLES)
		return;
	st = &r->samples[r->n_samples++];
	*st = (struct stored_sample){ .pid = s->pid, .tid = s->tid, .cpu = s->cpu,
				      .time = s->time, .ip = s->ip, .n = s->n_callchain };
	if (st->n > 8)
		st->n = 8;
	memcpy(st->chain, s->callchain, st->n * sizeof(uint64_t));
}

static void on_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct run *r = ctx;

	if (m->pid == (uint32_t)r->child && strcmp(m->filename, r->exe) == 0)
		r->mmap_exe = true;
	if (m->prot & PROT_EXEC)
		symbolizer_add_mapping(r->sym, m->start, m->start + m->len, m->pgoff, m->filename);
}

static void on_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, uint64_t time)
{
	struct run *r = ctx;

	(void)tid;
	(void)time;
	if (pid == (uint32_t)r->child && strncmp(comm, "test_sampler", 12) == 0)
		r->comm_child = true;
}

static void on_task(void *ctx, bool is_exit, uint32_t pid, uint32_t tid, uint64_t time)
{
	struct run *r = ctx;

	(void)time;
	if (!is_exit && pid == (uint32_t)r->child && tid != pid)
		r->fork_thread = true;
}

static void on_lost(void *ctx, uint32_t cpu, uint64_t lost, uint64_t time)
{
	(void)cpu;
	(void)time;
	((struct run *)ctx)->lost += lost;
}

static const struct sampler_callbacks run_cbs = { on_sample, on_mmap, on_comm, on_task, on_lost };

/* Polls and drains until the child exits (or 30 s pass). */
static void drain_until_exit(struct sampler *s, struct run *r)
{
	const int *fds;
	size_t i, n = sampler_fds(s, &fds);
	struct pollfd pfd[MAX_CPUS];
	uint64_t give_up = mono_ns() + 30000000000ull;
	int status = 0;

	for (i = 0; i < n && i < MAX_CPUS; i++)
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	for (;;) {
		poll(pfd, n, 50);
		CHECK(sampler_read(s, &run_cbs, r) >= 0);
		if (waitpid(r->child, &status, WNOHANG) == r->child)
			break;
		if (mono_ns() > give_up) {
			kill(r->child, SIGKILL);
			waitpid(r->child, &status, 0);
			CHECK(!"target did not exit");
			break;
		}
	}
	CHECK(sampler_read(s, &run_cbs, r) >= 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int run_init(struct run *r)
{
	ssize_t n = readlink("/proc/self/exe", r->exe, sizeof(r->exe) - 1);

	if (n <= 0)
		return -1;
	r->exe[n] = '\0';
	r->samples = calloc(MAX_SAMPLES, sizeof(*r->samples));
	return r->samples ? 0 : -1;
}

/* True (after printing the reason) when perf_event_open is not available here. */
static bool skip_open_error(int e, const char *err)
{
	if (e != EACCES && e != EPERM && e != ENOENT && e != ENOSYS)
		return false;
	printf("skip: %s\n", err);
	return true;
}

/* Forks the target blocked on a pipe, samples it from its execve to its exit. */
static int run_exec(struct run *r, uint32_t freq)
{
	struct sampler_config cfg = { 0, freq, true, 0 };
	char err[256], ms[16];
	struct sampler *s;
	int pfd[2], e;
	char c = 0;

	if (run_init(r) < 0 || pipe(pfd) < 0)
		return -1;
	snprintf(ms, sizeof(ms), "%d", SPIN_CPU_MS);
	r->child = fork();
	if (r->child == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			execl(r->exe, r->exe, "--spin", ms, (char *)NULL);
		_exit(127);
	}
	close(pfd[0]);
	cfg.pid = r->child;
	r->sym = symbolizer_new(r->child);
	s = sampler_open(&cfg, err, sizeof(err));
	e = errno;
	if (!s) {
		close(pfd[1]);
		waitpid(r->child, NULL, 0);
		if (skip_open_error(e, err))
			return 1;
		fprintf(stderr, "sampler_open: %s\n", err);
		return -1;
	}
	r->t_start = mono_ns();
	CHECK(write(pfd[1], &c, 1) == 1);
	close(pfd[1]);
	drain_until_exit(s, r);
	r->t_end = mono_ns();
	sampler_get_stats(s, &r->stats);
	sampler_close(s);
	return 0;
}

static void run_free(struct run *r)
{
	symbolizer_free(r->sym);
	free(r->samples);
}

/* Samples whose callchain has SPIN_FUNCTION in any frame. */
static size_t samples_in_spin(struct run *r)
{
	struct symbol_info si;
	size_t i, k, hits = 0;

	for (i = 0; i < r->n_samples; i++)
		for (k = 0; k < r->samples[i].n; k++)
			if (symbolizer_lookup(r->sym, r->samples[i].chain[k], &si) == 0 &&
			    si.function && strcmp(si.function, SPIN_FUNCTION) == 0) {
				hits++;
				break;
			}
	return hits;
}

static void check_run_records(struct run *r)
{
	size_t i, wrong_pid = 0, outside = 0;

	for (i = 0; i < r->n_samples; i++) {
		wrong_pid += r->samples[i].pid != (uint32_t)r->child;
		outside += r->samples[i].time < r->t_start || r->samples[i].time > r->t_end;
	}
	CHECK_EQ_INT(wrong_pid, 0);
	CHECK_EQ_INT(outside, 0);
	CHECK_EQ_INT(r->out_of_order, 0);
	CHECK_EQ_INT(r->empty_chains, 0);
	CHECK_EQ_INT(r->chain_not_ip, 0);
	CHECK_EQ_INT(r->kernel_mode, 0);
	CHECK_EQ_INT(r->stats.malformed, 0);
	CHECK_EQ_INT(r->n_tids, 2);
	CHECK(r->mmap_exe);
	CHECK(r->comm_child);
	CHECK(r->fork_thread);
}

static void report_rate(struct run *r, uint32_t freq)
{
	double secs = (double)(r->t_end - r->t_start) / 1e9;

	printf("info: %u Hz: %zu samples (%" PRIu64 " lost, %" PRIu64
	       " throttled) from 2 threads x %d ms CPU: %.0f per thread-second, %.0f/s wall\n",
	       freq, r->n_samples, r->lost, r->stats.throttled, SPIN_CPU_MS,
	       (double)r->n_samples / (2 * SPIN_CPU_MS / 1000.0), (double)r->n_samples / secs);
}

static void check_exec_run(uint32_t freq, size_t min_samples)
{
	struct run r = { 0 };
	size_t hits;
	int rc = run_exec(&r, freq);

	CHECK(rc >= 0);
	if (rc == 0) {
		report_rate(&r, freq);
		CHECK(r.n_samples >= min_samples);
		check_run_records(&r);
		hits = samples_in_spin(&r);
		printf("info: %u Hz: %zu of %zu samples in " SPIN_FUNCTION "\n", freq, hits,
		       r.n_samples);
		CHECK(hits * 2 >= r.n_samples);
	}
	run_free(&r);
}

static void test_exec_1khz(void)
{
	/* 2 threads x 0.5 s CPU at 1 kHz: ~1000 expected */
	check_exec_run(1000, 100);
}

static void test_exec_10khz(void)
{
	check_exec_run(10000, 1000);
}

/* ---- attaching to a running multi-threaded target ------------------------------ */

static pid_t spawn_running(const char *exe, int ms)
{
	char ms_arg[16], fd_arg[16];
	int pfd[2];
	pid_t pid;
	char c;

	if (pipe(pfd) < 0)
		return -1;
	snprintf(ms_arg, sizeof(ms_arg), "%d", ms);
	snprintf(fd_arg, sizeof(fd_arg), "%d", pfd[1]);
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		execl(exe, exe, "--spin", ms_arg, fd_arg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (pid < 0 || read(pfd[0], &c, 1) != 1) { /* both threads exist */
		close(pfd[0]);
		return -1;
	}
	close(pfd[0]);
	return pid;
}

static void test_attach_running_threads(void)
{
	struct run r = { 0 };
	struct sampler_config cfg = { 0, 1000, false, 0 };
	struct sampler *s;
	char err[256];
	int e;

	CHECK_EQ_INT(run_init(&r), 0);
	r.child = spawn_running(r.exe, SPIN_CPU_MS);
	CHECK(r.child > 0);
	if (r.child <= 0)
		goto out;
	cfg.pid = r.child;
	r.sym = symbolizer_new(r.child);
	CHECK_EQ_INT(symbolizer_load_proc_maps(r.sym), 0);
	s = sampler_open(&cfg, err, sizeof(err));
	e = errno;
	if (!s) {
		kill(r.child, SIGKILL);
		waitpid(r.child, NULL, 0);
		CHECK(skip_open_error(e, err));
		goto out;
	}
	CHECK_EQ_INT(sampler_enable(s), 0);
	drain_until_exit(s, &r);
	sampler_close(s);
	printf("info: attached: %zu samples, %zu threads\n", r.n_samples, r.n_tids);
	CHECK(r.n_samples >= 50);
	CHECK_EQ_INT(r.n_tids, 2);
	CHECK_EQ_INT(r.empty_chains, 0);
	CHECK(samples_in_spin(&r) * 2 >= r.n_samples);
out:
	run_free(&r);
}

static void test_open_errors(void)
{
	struct sampler_config cfg = { 0x3ffffff0, 1000, true, 0 };
	char err[256] = "";

	CHECK(sampler_open(&cfg, err, sizeof(err)) == NULL);
	if (errno == EACCES || errno == ENOENT || errno == ENOSYS) {
		printf("skip: %s\n", err);
		return;
	}
	CHECK_EQ_INT(errno, ESRCH);
	CHECK(strstr(err, "pid 1073741808") != NULL);
	CHECK(strstr(err, "cpu 0") != NULL);
	CHECK(strstr(err, "no such process") != NULL);
	cfg.pid = getpid();
	cfg.ring_pages = 3;
	CHECK(sampler_open(&cfg, err, sizeof(err)) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
	CHECK(strstr(err, "power of two") != NULL);
	cfg.ring_pages = 0;
	cfg.freq_hz = 2000000000;
	CHECK(sampler_open(&cfg, err, sizeof(err)) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
	CHECK(strstr(err, "perf_event_max_sample_rate=") != NULL);
}

/* ---- parser on crafted bytes ------------------------------------------------------ */

struct rec {
	uint8_t b[1024];
	size_t len;
};

static void put(struct rec *r, const void *p, size_t n)
{
	memcpy(r->b + r->len, p, n);
	r->len += n;
}

static void put64(struct rec *r, uint64_t v)
{
	put(r, &v, 8);
}

static void put32x2(struct rec *r, uint32_t a, uint32_t b)
{
	put(r, &a, 4);
	put(r, &b, 4);
}

static void rec_begin(struct rec *r, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { type, misc, 0 };

	r->len = 0;
	put(r, &h, sizeof(h));
}

/* Pads to 8 and stores the size; with_id appends the sample_id_all trailer. */
static void rec_end(struct rec *r, bool with_id, uint64_t time)
{
	uint16_t size;

	while (r->len % 8)
		r->b[r->len++] = 0;
	if (with_id) {
		put32x2(r, 7, 8);
		put64(r, time);
		put32x2(r, 1, 0);
	}
	size = (uint16_t)r->len;
	memcpy(r->b + 6, &size, 2);
}

static void sample_rec(struct rec *r, uint64_t ip, const uint64_t *chain, uint64_t nr)
{
	uint64_t i;

	rec_begin(r, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
	put64(r, ip);
	put32x2(r, 7, 8);
	put64(r, 12345);
	put32x2(r, 1, 0);
	put64(r, nr);
	for (i = 0; i < nr; i++)
		put64(r, chain[i]);
	rec_end(r, false, 0);
}

/* Copies rec into ring at position pos (wrapping), returns pos + len. */
static uint64_t place(uint8_t *ring, size_t size, uint64_t pos, const struct rec *r)
{
	size_t i;

	for (i = 0; i < r->len; i++)
		ring[(pos + i) & (size - 1)] = r->b[i];
	return pos + r->len;
}

struct parsed {
	size_t samples, mmaps, comms, forks, exits;
	uint64_t lost;
	struct sampler_sample last;
	uint64_t chain[SAMPLER_MAX_CALLCHAIN];
	char filename[64], comm[32];
	struct sampler_mmap mmap;
};

static void p_sample(void *ctx, const struct sampler_sample *s)
{
	struct parsed *p = ctx;

	p->samples++;
	p->last = *s;
	memcpy(p->chain, s->callchain, s->n_callchain * sizeof(uint64_t));
}

static void p_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct parsed *p = ctx;

	p->mmaps++;
	p->mmap = *m;
	snprintf(p->filename, sizeof(p->filename), "%s", m->filename);
}

static void p_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, uint64_t time)
{
	struct parsed *p = ctx;

	(void)pid;
	(void)tid;
	(void)time;
	p->comms++;
	snprintf(p->comm, sizeof(p->comm), "%s", comm);
}

static void p_task(void *ctx, bool is_exit, uint32_t pid, uint32_t tid, uint64_t time)
{
	struct parsed *p = ctx;

	(void)pid;
	(void)tid;
	(void)time;
	if (is_exit)
		p->exits++;
	else
		p->forks++;
}

static void p_lost(void *ctx, uint32_t cpu, uint64_t lost, uint64_t time)
{
	(void)cpu;
	(void)time;
	((struct parsed *)ctx)->lost += lost;
}

static const struct sampler_callbacks parse_cbs = { p_sample, p_mmap, p_comm, p_task, p_lost };

static void test_parse_wrapped_sample(void)
{
	static uint8_t ring[256];
	const uint64_t chain[] = { (uint64_t)PERF_CONTEXT_KERNEL, 0xffffffff81000000ull,
				   (uint64_t)PERF_CONTEXT_USER, 0x401000, 0x402000, 0 };
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	struct rec r;
	uint64_t tail = 3 * 256 + 224, head;

	sample_rec(&r, 0x401000, chain, 6);
	head = place(ring, sizeof(ring), tail, &r);
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), tail, head, 1, &parse_cbs, &p, &st), 1);
	CHECK_EQ_INT(p.samples, 1);
	CHECK_EQ_U64(p.last.ip, 0x401000);
	CHECK_EQ_INT(p.last.pid, 7);
	CHECK_EQ_INT(p.last.tid, 8);
	CHECK_EQ_U64(p.last.time, 12345);
	CHECK_EQ_INT(p.last.cpu, 1);
	CHECK(p.last.user_mode);
	CHECK_EQ_INT(p.last.n_callchain, 2); /* kernel part, markers and the final 0 dropped */
	CHECK_EQ_U64(p.chain[0], 0x401000);
	CHECK_EQ_U64(p.chain[1], 0x402000);
	CHECK_EQ_INT(st.malformed, 0);
}

static void test_parse_side_records(void)
{
	static uint8_t ring[1024];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	struct rec r;
	uint64_t head = 0;

	rec_begin(&r, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
	put32x2(&r, 7, 7);
	put64(&r, 0x400000);
	put64(&r, 0x1000);
	put64(&r, 0x2000);
	put64(&r, 0);
	put64(&r, 0);
	put64(&r, 0);
	put32x2(&r, PROT_READ | PROT_EXEC, MAP_PRIVATE);
	put(&r, "/usr/bin/x", 11);
	rec_end(&r, true, 99);
	head = place(ring, sizeof(ring), head, &r);
	rec_begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	put32x2(&r, 7, 7);
	put(&r, "x", 2);
	rec_end(&r, true, 100);
	head = place(ring, sizeof(ring), head, &r);
	rec_begin(&r, PERF_RECORD_FORK, 0);
	put32x2(&r, 7, 7);
	put32x2(&r, 8, 7);
	put64(&r, 101);
	rec_end(&r, true, 101);
	head = place(ring, sizeof(ring), head, &r);
	rec_begin(&r, PERF_RECORD_LOST, 0);
	put64(&r, 1);
	put64(&r, 42);
	rec_end(&r, true, 102);
	head = place(ring, sizeof(ring), head, &r);
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st), 4);
	CHECK_EQ_INT(p.mmaps, 1);
	CHECK_EQ_STR(p.filename, "/usr/bin/x");
	CHECK_EQ_U64(p.mmap.start, 0x400000);
	CHECK_EQ_U64(p.mmap.len, 0x1000);
	CHECK_EQ_U64(p.mmap.pgoff, 0x2000);
	CHECK_EQ_U64(p.mmap.time, 99);
	CHECK_EQ_INT(p.mmap.prot, PROT_READ | PROT_EXEC);
	CHECK_EQ_INT(p.comms, 1);
	CHECK_EQ_STR(p.comm, "x");
	CHECK_EQ_INT(p.forks, 1);
	CHECK_EQ_U64(p.lost, 42);
	CHECK_EQ_U64(st.lost, 42);
	CHECK_EQ_INT(st.malformed, 0);
}

static void test_parse_malformed(void)
{
	static uint8_t ring[1024];
	const uint64_t chain[] = { (uint64_t)PERF_CONTEXT_USER, 0x401000 };
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	struct rec r;
	uint64_t head = 0, nr = 1000;

	/* a sample claiming 1000 frames in a 64-byte record: skipped alone */
	sample_rec(&r, 0x401000, chain, 2);
	memcpy(r.b + 40, &nr, 8);
	head = place(ring, sizeof(ring), head, &r);
	/* an MMAP2 whose filename has no NUL: skipped alone */
	rec_begin(&r, PERF_RECORD_MMAP2, 0);
	memset(r.b + r.len, 'a', 80);
	r.len += 80;
	rec_end(&r, true, 1);
	head = place(ring, sizeof(ring), head, &r);
	sample_rec(&r, 0x401000, chain, 2);
	head = place(ring, sizeof(ring), head, &r);
	/* size 0 loses framing: everything after it is skipped */
	rec_begin(&r, PERF_RECORD_SAMPLE, 0);
	r.len = 8;
	head = place(ring, sizeof(ring), head, &r);
	sample_rec(&r, 0x401000, chain, 2);
	head = place(ring, sizeof(ring), head, &r);
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st), 1);
	CHECK_EQ_INT(p.samples, 1);
	CHECK_EQ_INT(st.malformed, 3);
	/* more unread data than the ring holds */
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), 0, 4096, 0, &parse_cbs, &p, &st), 0);
	CHECK_EQ_INT(st.malformed, 4);
	CHECK_EQ_INT(sampler_parse(ring, 1000, 0, 8, 0, &parse_cbs, &p, &st), -EINVAL);
}

static void test_parse_random_bytes(void)
{
	static uint8_t ring[4096];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	uint64_t x = 0x243f6a8885a308d3ull, tail;
	size_t i, k;

	for (i = 0; i < 20000; i++) {
		for (k = 0; k < sizeof(ring); k += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* small sizes and known types now and then, so records parse */
			memcpy(ring + k, &x, 8);
			if ((x & 7) == 0)
				ring[k + 6] = (uint8_t)(x >> 20), ring[k + 7] = 0;
			if ((x & 24) == 0)
				ring[k] = (uint8_t)(x >> 40) % 16, ring[k + 1] = 0;
		}
		tail = x % 100000;
		sampler_parse(ring, sizeof(ring), tail, tail + (x >> 32) % 4200, 0, &parse_cbs, &p,
			      &st);
	}
	printf("info: random rings: %" PRIu64 " records parsed, %" PRIu64 " malformed\n",
	       st.records, st.malformed);
	CHECK(st.malformed > 0);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--spin") == 0)
		return spin_main(argc, argv);
	RUN_TEST(test_parse_wrapped_sample);
	RUN_TEST(test_parse_side_records);
	RUN_TEST(test_parse_malformed);
	RUN_TEST(test_parse_random_bytes);
	RUN_TEST(test_open_errors);
	RUN_TEST(test_exec_1khz);
	RUN_TEST(test_exec_10khz);
	RUN_TEST(test_attach_running_threads);
	return unit_summary();
}
