// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/sampling/sampler.c. Live cases sample this binary re-executed
 * with "--spin" (two threads in profd_spin_worker) through enable_on_exec, or
 * attach to it running; they skip with a printed reason where
 * perf_event_open is not permitted. With copy_stack, "--stack-spin" spins
 * with a known word pushed at its SP: samples must carry it as the first word
 * of their stack copy, and regs[IP] == ip. Parser cases feed crafted and
 * random bytes through sampler_parse and sampler_parse_copy_stack. With
 * kernel_callchain, "--read-spin" spends its time in read(2) from /dev/zero:
 * samples must carry kernel frames that /proc/kallsyms names, and a child
 * dropped to nobody must fall back to user frames with a warning. Only lower
 * bounds on counts, no timing limits.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <fcntl.h>
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

#include "daemon/symbols/kernel_symbols.h"
#include "daemon/sampling/sampler.h"
#include "daemon/symbols/symbols.h"
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

/*
 * profd_stack_spin(n): pushes STACK_MAGIC and spins n times with it at [rsp],
 * the caller's return address right above. A sample in the loop must see
 * both as the first two words of its stack copy.
 */
#define STACK_MAGIC 0x5eed5eed5eed5eedull
__asm__(".text\n"
	".globl profd_stack_spin\n"
	".hidden profd_stack_spin\n"
	".type profd_stack_spin, @function\n"
	"profd_stack_spin:\n"
	".cfi_startproc\n"
	"movabs $0x5eed5eed5eed5eed, %rax\n"
	"push %rax\n"
	".cfi_adjust_cfa_offset 8\n"
	".globl profd_stack_spin_loop\n"
	".hidden profd_stack_spin_loop\n"
	"profd_stack_spin_loop:\n"
	"sub $1, %rdi\n"
	"jnz profd_stack_spin_loop\n"
	".globl profd_stack_spin_loop_end\n"
	".hidden profd_stack_spin_loop_end\n"
	"profd_stack_spin_loop_end:\n"
	"pop %rax\n"
	".cfi_adjust_cfa_offset -8\n"
	"ret\n"
	".cfi_endproc\n"
	".size profd_stack_spin, .-profd_stack_spin\n");

void profd_stack_spin(uint64_t n);
extern const char profd_stack_spin_loop[], profd_stack_spin_loop_end[];

static volatile int stack_spin_sink;

__attribute__((noinline)) void profd_stack_spin_caller(long ms)
{
	uint64_t end = thread_cpu_ns() + (uint64_t)ms * 1000000u;

	do {
		profd_stack_spin(1000000);
		stack_spin_sink++; /* work after the call: no tail call */
	} while (thread_cpu_ns() < end);
}

/* argv: --stack-spin MS */
static int stack_spin_main(char **argv)
{
	profd_stack_spin_caller(atol(argv[2]));
	_exit(0);
}

/* profd_read_spin_worker(ms): read(2)s /dev/zero for ms of CPU time, nearly all in the kernel. */
__attribute__((noinline, visibility("default"))) void profd_read_spin_worker(long ms)
{
	static char buf[256 << 10];
	uint64_t end = thread_cpu_ns() + (uint64_t)ms * 1000000u;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		_exit(1);
	do {
		if (read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			_exit(1);
	} while (thread_cpu_ns() < end);
	close(fd);
}

/* argv: --read-spin MS */
static int read_spin_main(char **argv)
{
	profd_read_spin_worker(atol(argv[2]));
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

static const struct sampler_callbacks run_cbs = {
	.sample = on_sample, .mmap = on_mmap, .comm = on_comm, .task = on_task, .lost = on_lost,
};

/* Polls and drains until the child exits (or 30 s pass). */
static void drain_child(struct sampler *s, pid_t child, const struct sampler_callbacks *cb,
			void *ctx)
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
		CHECK(sampler_read(s, cb, ctx) >= 0);
		if (waitpid(child, &status, WNOHANG) == child)
			break;
		if (mono_ns() > give_up) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			CHECK(!"target did not exit");
			break;
		}
	}
	CHECK(sampler_read(s, cb, ctx) >= 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void drain_until_exit(struct sampler *s, struct run *r)
{
	drain_child(s, r->child, &run_cbs, r);
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

/* ---- copy_stack on a live target ---------------------------------------------------- */

#define MAX_STACK_SAMPLES 20000

struct stack_sample {
	uint64_t ip, stack_addr, regs_mask, regs[SAMPLER_REGS_MAX], words[2];
	size_t stack_size;
	bool user_mode;
};

struct stack_run {
	pid_t child;
	struct symbolizer *sym;
	struct stack_sample *samples;
	size_t n;
};

static void on_stack_sample(void *ctx, const struct sampler_sample *s)
{
	struct stack_run *r = ctx;
	struct stack_sample *st;

	if (r->n == MAX_STACK_SAMPLES || s->pid != (uint32_t)r->child)
		return;
	st = &r->samples[r->n++];
	*st = (struct stack_sample){ .ip = s->ip, .stack_addr = s->stack_addr,
				     .regs_mask = s->regs_mask, .stack_size = s->stack_size,
				     .user_mode = s->user_mode };
	memcpy(st->regs, s->regs, sizeof(st->regs));
	if (s->stack_size >= sizeof(st->words))
		memcpy(st->words, s->stack, sizeof(st->words));
}

static void on_stack_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct stack_run *r = ctx;

	if (m->prot & PROT_EXEC)
		symbolizer_add_mapping(r->sym, m->start, m->start + m->len, m->pgoff, m->filename);
}

static const struct sampler_callbacks stack_cbs = { .sample = on_stack_sample,
						    .mmap = on_stack_mmap };

/* Samples "--stack-spin" from execve to exit with 4 KiB stack copies. Returns 0, 1 (skip), -1. */
static int run_stack_spin(struct stack_run *r, const char *exe)
{
	struct sampler_config cfg = { .freq_hz = 2000, .enable_on_exec = true,
				      .copy_stack = true, .stack_bytes = 4096 };
	char err[256], c = 0;
	struct sampler *s;
	int pfd[2], e;

	if (pipe(pfd) < 0)
		return -1;
	r->child = fork();
	if (r->child == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			execl(exe, exe, "--stack-spin", "500", (char *)NULL);
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
	CHECK(write(pfd[1], &c, 1) == 1);
	close(pfd[1]);
	drain_child(s, r->child, &stack_cbs, r);
	sampler_close(s);
	return 0;
}

/* In the loop, [sp] holds STACK_MAGIC and [sp + 8] returns into profd_stack_spin_caller. */
static bool in_spin_loop(struct symbolizer *sym, uint64_t ip)
{
	const uint64_t lo = (uint64_t)(profd_stack_spin_loop - (const char *)profd_stack_spin);
	const uint64_t hi = (uint64_t)(profd_stack_spin_loop_end - (const char *)profd_stack_spin);
	struct symbol_info si;

	return symbolizer_lookup(sym, ip, &si) == 0 && si.function &&
	       strcmp(si.function, "profd_stack_spin") == 0 && si.function_offset >= lo &&
	       si.function_offset <= hi;
}

static void test_exec_copy_stack(void)
{
	struct stack_run r = { 0 };
	struct symbol_info si;
	size_t i, bad_regs = 0, bad_size = 0, in_loop = 0, bad_words = 0, bad_caller = 0;
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int rc;

	r.samples = calloc(MAX_STACK_SAMPLES, sizeof(*r.samples));
	CHECK(len > 0 && r.samples);
	if (len <= 0 || !r.samples)
		goto out;
	exe[len] = '\0';
	rc = run_stack_spin(&r, exe);
	CHECK(rc >= 0);
	if (rc != 0)
		goto out;
	for (i = 0; i < r.n; i++) {
		const struct stack_sample *st = &r.samples[i];

		bad_regs += !st->user_mode || st->regs_mask != SAMPLER_REGS_MASK ||
			    st->regs[PERF_REG_X86_IP] != st->ip ||
			    st->regs[PERF_REG_X86_SP] != st->stack_addr;
		bad_size += st->stack_size < 16 || st->stack_size > 4096;
		if (!in_spin_loop(r.sym, st->ip))
			continue;
		in_loop++;
		bad_words += st->words[0] != STACK_MAGIC;
		bad_caller += symbolizer_lookup(r.sym, st->words[1] - 1, &si) != 0 ||
			      !si.function || strcmp(si.function, "profd_stack_spin_caller") != 0;
	}
	printf("info: copy_stack: %zu samples, %zu in the pushed-word loop\n", r.n, in_loop);
	CHECK(r.n >= 200);
	CHECK(in_loop * 2 >= r.n);
	CHECK_EQ_INT(bad_regs, 0);
	CHECK_EQ_INT(bad_size, 0);
	CHECK_EQ_INT(bad_words, 0);
	CHECK_EQ_INT(bad_caller, 0);
out:
	symbolizer_free(r.sym);
	free(r.samples);
}

static void test_open_stack_config(void)
{
	struct sampler_config cfg = { .pid = getpid(), .freq_hz = 1000, .copy_stack = true,
				      .stack_bytes = 12 };
	char err[256] = "";

	CHECK(sampler_open(&cfg, err, sizeof(err)) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
	CHECK(strstr(err, "stack_bytes 12") != NULL);
	cfg.stack_bytes = SAMPLER_MAX_STACK_BYTES + 8;
	CHECK(sampler_open(&cfg, err, sizeof(err)) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
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

/* ---- kernel frames on a live target ------------------------------------------------ */

#define MAX_KERNEL_LEAVES 20000

struct kernel_run {
	pid_t child;
	size_t samples, with_kernel, kernel_mode, leaf_not_ip, not_kernel_address, user_chains;
	uint64_t leaves[MAX_KERNEL_LEAVES];
	size_t n_leaves;
};

static void on_kernel_sample(void *ctx, const struct sampler_sample *s)
{
	struct kernel_run *r = ctx;
	size_t k;

	if (s->pid != (uint32_t)r->child)
		return;
	r->samples++;
	r->with_kernel += s->n_kernel_callchain > 0;
	for (k = 0; k < s->n_kernel_callchain; k++)
		r->not_kernel_address += s->kernel_callchain[k] < 0xffff800000000000ull;
	if (s->user_mode)
		return;
	r->kernel_mode++;
	r->leaf_not_ip += !s->n_kernel_callchain || s->kernel_callchain[0] != s->ip;
	r->user_chains += s->n_callchain > 0;
	if (s->n_kernel_callchain && r->n_leaves < MAX_KERNEL_LEAVES)
		r->leaves[r->n_leaves++] = s->kernel_callchain[0];
}

static const struct sampler_callbacks kernel_cbs = { .sample = on_kernel_sample };

/* Samples "--read-spin" from execve to exit with kernel_callchain. Returns 0, 1 (skip), -1. */
static int run_read_spin(struct kernel_run *r, struct sampler_stats *st)
{
	struct sampler_config cfg = { .freq_hz = 2000, .enable_on_exec = true,
				      .kernel_callchain = true };
	char exe[4096], err[256], c = 0;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct sampler *s;
	int pfd[2], e;

	if (len <= 0 || pipe(pfd) < 0)
		return -1;
	exe[len] = '\0';
	r->child = fork();
	if (r->child == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			execl(exe, exe, "--read-spin", "500", (char *)NULL);
		_exit(127);
	}
	close(pfd[0]);
	cfg.pid = r->child;
	s = sampler_open(&cfg, err, sizeof(err));
	e = errno;
	if (!s || sampler_warning(s)) {
		close(pfd[1]);
		waitpid(r->child, NULL, 0);
		if (s)
			printf("skip: %s\n", sampler_warning(s));
		sampler_close(s);
		return s || skip_open_error(e, err) ? 1 : -1;
	}
	CHECK(sampler_has_kernel_callchain(s));
	CHECK(write(pfd[1], &c, 1) == 1);
	close(pfd[1]);
	drain_child(s, r->child, &kernel_cbs, r);
	sampler_get_stats(s, st);
	sampler_close(s);
	return 0;
}

/* Leaves /proc/kallsyms names; -1 when its addresses are hidden. */
static long named_leaves(const struct kernel_run *r)
{
	char err[256];
	struct kernel_symbols *k = kernel_symbols_load(NULL, err, sizeof(err));
	struct symbol_info si;
	long named = 0;
	size_t i;

	if (!k) {
		printf("skip: %s\n", err);
		return -1;
	}
	for (i = 0; i < r->n_leaves; i++)
		named += kernel_symbols_lookup(k, r->leaves[i], &si) == 0;
	if (r->n_leaves && kernel_symbols_lookup(k, r->leaves[r->n_leaves / 2], &si) == 0)
		printf("info: a kernel leaf: %s+0x%" PRIx64 " %s\n", si.function,
		       si.function_offset, si.mapping_path);
	kernel_symbols_free(k);
	return named;
}

static void test_exec_kernel_callchain(void)
{
	struct kernel_run *r = calloc(1, sizeof(*r));
	struct sampler_stats st = { 0 };
	long named;
	int rc;

	CHECK(r != NULL);
	if (!r)
		return;
	rc = run_read_spin(r, &st);
	CHECK(rc >= 0);
	if (rc == 0) {
		printf("info: kernel_callchain: %zu samples, %zu in the kernel, %zu with kernel "
		       "frames\n", r->samples, r->kernel_mode, r->with_kernel);
		CHECK(r->samples >= 200);
		CHECK(r->kernel_mode * 2 >= r->samples); /* read(2) of /dev/zero: kernel time */
		CHECK(r->with_kernel >= r->kernel_mode);
		CHECK_EQ_INT(st.kernel_samples, r->with_kernel);
		CHECK_EQ_INT(r->leaf_not_ip, 0);
		CHECK_EQ_INT(r->not_kernel_address, 0);
		/* and where the thread entered the kernel */
		CHECK(r->user_chains * 2 >= r->kernel_mode);
		named = named_leaves(r);
		CHECK(named < 0 || (size_t)named * 10 >= r->n_leaves * 9);
	}
	free(r);
}

/*
 * In a child dropped to nobody (no capabilities) sampling itself: with
 * perf_event_paranoid 2 the kernel refuses kernel frames but allows user
 * ones, so the sampler must fall back and say so. Exit 0 when it did, 3 when
 * even user sampling is refused, 4 when kernel frames are allowed to all.
 */
static int fallback_child(void)
{
	struct sampler_config cfg = { .freq_hz = 1000, .kernel_callchain = true };
	struct sampler *s;
	char err[256];
	int rc = 1;

	if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
		return 1;
	cfg.pid = getpid();
	cfg.kernel_callchain = false;
	s = sampler_open(&cfg, err, sizeof(err));
	if (!s)
		return errno == EACCES || errno == EPERM ? 3 : 1;
	sampler_close(s);
	cfg.kernel_callchain = true;
	s = sampler_open(&cfg, err, sizeof(err));
	if (!s)
		return 1;
	if (!sampler_warning(s))
		rc = 4;
	else if (strstr(sampler_warning(s), "kernel frames refused") &&
		 strstr(sampler_warning(s), "perf_event_paranoid=") &&
		 !sampler_has_kernel_callchain(s))
		rc = 0;
	sampler_close(s);
	return rc;
}

static void test_kernel_refused_falls_back(void)
{
	pid_t child;
	int status = 0;

	if (geteuid() != 0) {
		printf("skip: dropping to nobody needs root\n");
		return;
	}
	fflush(stdout);
	child = fork();
	if (child == 0)
		_exit(fallback_child());
	CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status));
	if (WEXITSTATUS(status) == 3)
		printf("skip: perf_event_open refuses nobody even user-only samples\n");
	else if (WEXITSTATUS(status) == 4)
		printf("skip: perf_event_paranoid <= 1 gives nobody kernel frames\n");
	else
		CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

/* ---- parser on crafted bytes ------------------------------------------------------ */

struct rec {
	uint8_t b[4096];
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
	uint64_t kernel_chain[SAMPLER_MAX_CALLCHAIN];
	char filename[64], comm[32];
	struct sampler_mmap mmap;
	uint8_t stack[256];            /* the last sample's stack copy, if it fits */
	uint64_t stack_sum;            /* every stack byte read: out-of-bounds shows in ASan */
};

static void p_sample(void *ctx, const struct sampler_sample *s)
{
	struct parsed *p = ctx;
	size_t i;

	p->samples++;
	p->last = *s;
	memcpy(p->chain, s->callchain, s->n_callchain * sizeof(uint64_t));
	if (s->n_kernel_callchain)
		memcpy(p->kernel_chain, s->kernel_callchain,
		       s->n_kernel_callchain * sizeof(uint64_t));
	for (i = 0; i < s->stack_size; i++)
		p->stack_sum += s->stack[i];
	if (s->stack && s->stack_size <= sizeof(p->stack))
		memcpy(p->stack, s->stack, s->stack_size);
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

static const struct sampler_callbacks parse_cbs = {
	.sample = p_sample, .mmap = p_mmap, .comm = p_comm, .task = p_task, .lost = p_lost,
};

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

/* ---- kernel frames ----------------------------------------------------------------- */

#define KIP1 0xffffffff81234567ull
#define KIP2 0xffffffff81000080ull

static const struct sampler_parse_options with_kernel = { .kernel_callchain = true };

/* A sample taken in the kernel (read(2)): kernel frames, then the user ones. */
static void kernel_sample_rec(struct rec *r)
{
	const uint64_t chain[] = { (uint64_t)PERF_CONTEXT_KERNEL, KIP1, KIP2,
				   (uint64_t)PERF_CONTEXT_USER, 0x401000, 0x402000, 0 };

	sample_rec(r, KIP1, chain, 7);
	memcpy(r->b + 4, &(uint16_t){ PERF_RECORD_MISC_KERNEL }, 2);
}

static void test_parse_kernel_callchain(void)
{
	static uint8_t ring[1024];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	struct rec r;
	uint64_t tail = 2 * 1024 + 960, head;

	kernel_sample_rec(&r);
	head = place(ring, sizeof(ring), tail, &r); /* wraps the ring's end */
	CHECK_EQ_INT(sampler_parse_with(ring, sizeof(ring), tail, head, 0, &with_kernel,
					&parse_cbs, &p, &st), 1);
	CHECK_EQ_INT(p.samples, 1);
	CHECK(!p.last.user_mode);
	CHECK_EQ_U64(p.last.ip, KIP1);
	CHECK_EQ_INT(p.last.n_kernel_callchain, 2);
	CHECK_EQ_U64(p.kernel_chain[0], KIP1);
	CHECK_EQ_U64(p.kernel_chain[1], KIP2);
	/* the user part exactly as without kernel frames */
	CHECK_EQ_INT(p.last.n_callchain, 2);
	CHECK_EQ_U64(p.chain[0], 0x401000);
	CHECK_EQ_U64(p.chain[1], 0x402000);
	CHECK_EQ_INT(st.kernel_samples, 1);
	CHECK_EQ_INT(st.malformed, 0);
}

/* Without the option the same record gives no kernel frames and the same user frames. */
static void test_parse_kernel_callchain_off(void)
{
	static uint8_t ring[1024];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	struct rec r;
	uint64_t head;

	kernel_sample_rec(&r);
	head = place(ring, sizeof(ring), 0, &r);
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st), 1);
	CHECK_EQ_INT(p.last.n_kernel_callchain, 0);
	CHECK(p.last.kernel_callchain == NULL);
	CHECK_EQ_INT(p.last.n_callchain, 2);
	CHECK_EQ_U64(p.chain[0], 0x401000);
	CHECK_EQ_U64(p.chain[1], 0x402000);
	CHECK_EQ_INT(st.kernel_samples, 0);
}

/* A kernel part longer than SAMPLER_MAX_CALLCHAIN is cut; the user part after it survives. */
static void test_parse_kernel_callchain_truncated(void)
{
	static uint64_t chain[SAMPLER_MAX_CALLCHAIN + 20];
	static uint8_t ring[4096];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	size_t i, n = 0;
	struct rec r;
	uint64_t head;

	chain[n++] = (uint64_t)PERF_CONTEXT_KERNEL;
	for (i = 0; i < SAMPLER_MAX_CALLCHAIN + 10; i++)
		chain[n++] = KIP2 + i;
	chain[n++] = (uint64_t)PERF_CONTEXT_USER;
	chain[n++] = 0x401000;
	chain[n++] = 0x402000;
	sample_rec(&r, KIP2, chain, n);
	head = place(ring, sizeof(ring), 0, &r);
	CHECK_EQ_INT(sampler_parse_with(ring, sizeof(ring), 0, head, 0, &with_kernel, &parse_cbs,
					&p, &st), 1);
	CHECK_EQ_INT(p.last.n_kernel_callchain, SAMPLER_MAX_CALLCHAIN);
	CHECK_EQ_U64(p.kernel_chain[SAMPLER_MAX_CALLCHAIN - 1], KIP2 + SAMPLER_MAX_CALLCHAIN - 1);
	CHECK_EQ_INT(p.last.n_callchain, 2);
	CHECK_EQ_U64(p.chain[1], 0x402000);
	CHECK_EQ_INT(st.truncated_chains, 1);
}

/* ---- copy_stack records ---------------------------------------------------------- */

#define REC_SP 0x7ffc00001000ull

/* A copy_stack sample: the plain one, then abi, registers in mask order, size, data, dyn_size. */
static void stack_sample_rec(struct rec *r, uint64_t abi, size_t n_regs, const void *stack,
			     uint64_t size, uint64_t dyn)
{
	const uint64_t chain[] = { (uint64_t)PERF_CONTEXT_USER, 0x401000, 0x402000 };
	unsigned int bit;

	sample_rec(r, 0x401000, chain, 3);
	put64(r, abi);
	for (bit = 0; bit < SAMPLER_REGS_MAX && n_regs; bit++) {
		if (!(SAMPLER_REGS_MASK & (1ull << bit)))
			continue;
		if (bit == PERF_REG_X86_IP)
			put64(r, 0x401000);
		else
			put64(r, bit == PERF_REG_X86_SP ? REC_SP : 0x1000 + bit);
		n_regs--;
	}
	put64(r, size);
	if (size) {
		put(r, stack, size);
		put64(r, dyn);
	}
	rec_end(r, false, 0);
}

static void test_parse_copy_stack_sample(void)
{
	static uint8_t ring[1024];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	uint8_t stack[64];
	struct rec r;
	uint64_t tail = 5 * 1024 + 800, head;
	size_t i;

	for (i = 0; i < sizeof(stack); i++)
		stack[i] = (uint8_t)(i * 7 + 1);
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 40);
	head = place(ring, sizeof(ring), tail, &r); /* wraps the ring's end */
	CHECK_EQ_INT(sampler_parse_copy_stack(ring, sizeof(ring), tail, head, 0, &parse_cbs, &p,
					      &st), 1);
	CHECK_EQ_INT(p.samples, 1);
	CHECK_EQ_INT(st.malformed, 0);
	CHECK_EQ_U64(p.last.regs_mask, SAMPLER_REGS_MASK);
	CHECK_EQ_U64(p.last.regs[PERF_REG_X86_IP], p.last.ip);
	CHECK_EQ_U64(p.last.regs[PERF_REG_X86_R15], 0x1000 + PERF_REG_X86_R15);
	CHECK_EQ_U64(p.last.regs[PERF_REG_X86_BX], 0x1000 + PERF_REG_X86_BX);
	CHECK_EQ_U64(p.last.regs[PERF_REG_X86_DS], 0); /* not asked for */
	CHECK_EQ_U64(p.last.stack_addr, REC_SP);
	CHECK_EQ_INT(p.last.stack_size, 40);
	CHECK_MEM_EQ(p.stack, stack, 40);
	CHECK_EQ_INT(p.last.n_callchain, 2);
	CHECK_EQ_U64(p.chain[1], 0x402000);
	/* the same bytes through the plain parser: the layout is not guessed */
	memset(&p, 0, sizeof(p));
	CHECK_EQ_INT(sampler_parse(ring, sizeof(ring), tail, head, 0, &parse_cbs, &p, &st), 1);
	CHECK_EQ_U64(p.last.regs_mask, 0);
	CHECK(p.last.stack == NULL);
}

static void test_parse_copy_stack_variants(void)
{
	static uint8_t ring[8192];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	uint8_t stack[64] = { 1, 2, 3 };
	struct rec r;
	uint64_t head = 0;

	/* no user registers (a kernel thread): no regs, no stack, still a sample */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_NONE, 0, NULL, 0, 0);
	head = place(ring, sizeof(ring), head, &r);
	CHECK_EQ_INT(sampler_parse_copy_stack(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st),
		     1);
	CHECK_EQ_U64(p.last.regs_mask, 0);
	CHECK_EQ_INT(p.last.stack_size, 0);
	CHECK_EQ_U64(p.last.stack_addr, 0);
	/* a 32-bit task: the stack, but no registers an x86-64 unwinder could use */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_32, 20, stack, sizeof(stack), 64);
	head = place(ring, sizeof(ring), 0, &r);
	CHECK_EQ_INT(sampler_parse_copy_stack(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st),
		     1);
	CHECK_EQ_U64(p.last.regs_mask, 0);
	CHECK_EQ_INT(p.last.stack_size, 64);
	CHECK_EQ_INT(st.malformed, 0);
}

/* Each broken record is skipped alone: the good one after them still parses. */
static void test_parse_copy_stack_malformed(void)
{
	static uint8_t ring[8192];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	uint8_t stack[64] = { 0 };
	uint64_t head = 0, big = 4096;
	struct rec r;

	/* dyn_size > size */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 65);
	head = place(ring, sizeof(ring), head, &r);
	/* an unknown abi */
	stack_sample_rec(&r, 7, 20, stack, sizeof(stack), 8);
	head = place(ring, sizeof(ring), head, &r);
	/* 5 of 20 registers, and no stack size */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 5, NULL, 0, 0);
	r.len -= 8;
	rec_end(&r, false, 0);
	head = place(ring, sizeof(ring), head, &r);
	/* a stack size beyond the record */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 8);
	memcpy(r.b + r.len - 8 - sizeof(stack) - 8, &big, 8);
	head = place(ring, sizeof(ring), head, &r);
	/* no dyn_size after the data */
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 8);
	r.len -= 8;
	rec_end(&r, false, 0);
	head = place(ring, sizeof(ring), head, &r);
	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 16);
	head = place(ring, sizeof(ring), head, &r);
	CHECK_EQ_INT(sampler_parse_copy_stack(ring, sizeof(ring), 0, head, 0, &parse_cbs, &p, &st),
		     1);
	CHECK_EQ_INT(st.malformed, 5);
	CHECK_EQ_INT(p.samples, 1);
	CHECK_EQ_INT(p.last.stack_size, 16);
}

/* A valid copy_stack sample with a few words or bytes overwritten, many times over. */
static void test_parse_copy_stack_mutated(void)
{
	static uint8_t ring[1024];
	struct sampler_stats st = { 0 };
	struct parsed p = { 0 };
	uint8_t stack[64] = { 9 };
	uint64_t x = 0x9e3779b97f4a7c15ull, tail, v;
	struct rec r, m;
	size_t i, k, at;

	stack_sample_rec(&r, PERF_SAMPLE_REGS_ABI_64, 20, stack, sizeof(stack), 64);
	for (i = 0; i < 50000; i++) {
		m = r;
		for (k = 0; k < 1 + i % 4; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			at = (size_t)(x >> 8) % (m.len / 8) * 8;
			/* small values where sizes live, so they land near the edges */
			v = (x & 1) ? x >> 48 : (x & 2) ? (x >> 20) % 512 : x;
			memcpy(m.b + (at ? at : 8), &v, (x & 4) ? 8 : 1);
		}
		if (i % 3 == 0)
			rec_end(&m, false, 0); /* keep the header size right, break only the body */
		tail = x % 5000;
		place(ring, sizeof(ring), tail, &m);
		sampler_parse_copy_stack(ring, sizeof(ring), tail, tail + m.len, 0, &parse_cbs, &p,
					 &st);
	}
	printf("info: mutated copy_stack samples: %zu parsed, %" PRIu64 " malformed\n", p.samples,
	       st.malformed);
	CHECK(p.samples > 0 && st.malformed > 0);
}

typedef int (*parse_fn)(const void *, size_t, uint64_t, uint64_t, uint32_t,
			const struct sampler_callbacks *, void *, struct sampler_stats *);

static void parse_random_rings(const char *what, parse_fn parse)
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
		parse(ring, sizeof(ring), tail, tail + (x >> 32) % 4200, 0, &parse_cbs, &p, &st);
	}
	printf("info: random rings (%s): %" PRIu64 " records parsed, %" PRIu64 " malformed\n",
	       what, st.records, st.malformed);
	CHECK(st.malformed > 0);
}

static void test_parse_random_bytes(void)
{
	parse_random_rings("plain", sampler_parse);
}

static void test_parse_random_bytes_copy_stack(void)
{
	parse_random_rings("copy_stack", sampler_parse_copy_stack);
}

static int parse_everything(const void *data, size_t size, uint64_t tail, uint64_t head,
			    uint32_t cpu, const struct sampler_callbacks *cb, void *ctx,
			    struct sampler_stats *stats)
{
	const struct sampler_parse_options opt = { .copy_stack = true, .kernel_callchain = true };

	return sampler_parse_with(data, size, tail, head, cpu, &opt, cb, ctx, stats);
}

static void test_parse_random_bytes_kernel(void)
{
	parse_random_rings("copy_stack + kernel", parse_everything);
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--spin") == 0)
		return spin_main(argc, argv);
	if (argc > 2 && strcmp(argv[1], "--stack-spin") == 0)
		return stack_spin_main(argv);
	if (argc > 2 && strcmp(argv[1], "--read-spin") == 0)
		return read_spin_main(argv);
	RUN_TEST(test_parse_wrapped_sample);
	RUN_TEST(test_parse_side_records);
	RUN_TEST(test_parse_malformed);
	RUN_TEST(test_parse_random_bytes);
	RUN_TEST(test_parse_copy_stack_sample);
	RUN_TEST(test_parse_copy_stack_variants);
	RUN_TEST(test_parse_copy_stack_malformed);
	RUN_TEST(test_parse_copy_stack_mutated);
	RUN_TEST(test_parse_random_bytes_copy_stack);
	RUN_TEST(test_parse_kernel_callchain);
	RUN_TEST(test_parse_kernel_callchain_off);
	RUN_TEST(test_parse_kernel_callchain_truncated);
	RUN_TEST(test_parse_random_bytes_kernel);
	RUN_TEST(test_open_stack_config);
	RUN_TEST(test_open_errors);
	RUN_TEST(test_exec_1khz);
	RUN_TEST(test_exec_10khz);
	RUN_TEST(test_attach_running_threads);
	RUN_TEST(test_exec_copy_stack);
	RUN_TEST(test_exec_kernel_callchain);
	RUN_TEST(test_kernel_refused_falls_back);
	return unit_summary();
}
