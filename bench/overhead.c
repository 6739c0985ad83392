// SPDX-License-Identifier: MIT
/*
 * Per-call overhead of instrumentation, run under
 * `profctl run --funcs bench_instrumented,bench_instrumented_args`
 * (bench/run.sh does). Every pair of functions is identical code, one copy
 * patched by profd and one not, timed interleaved in the same process, so
 * the difference is what one instrumented call (enter + exit) costs:
 *  - an empty function; a third and fourth copy with a kernel
 *    uprobe + uretprobe on them instead (perf_event_open, uprobe PMU);
 *  - a function of 8 mixed integer/float arguments (its results are
 *    checked: the trampolines must hand every argument register through);
 *  - --args (issue 29): a function of 4 integers instrumented without a
 *    spec, with arg1 and with arg1-arg4, and one of a string with arg1/s
 *    (bench/run.sh gives the specs), beside the process_vm_readv the
 *    string's copy makes, timed alone;
 *  - the empty function in 1, 2, 4 and 8 threads at once;
 *  - two clock reads (rdtsc) back to back, the floor of a timed call: the
 *    hooks' budget is stated against it (bench/README.md);
 *  - with --uftrace, run under `uftrace record` (bench/run.sh): the empty
 *    function built as -pg builds it (a call to mcount) and one with the
 *    5-byte nop uftrace's dynamic patching (-P) replaces.
 * Times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user +
 * kernel, not the time spent preempted); wall time is printed beside it.
 * Knows nothing of the agent's internals: profctl reports events and drops,
 * bench/run.sh checks them against the calls counted here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 31
#define WARMUP_ROUNDS 5
#define TOTAL_ROUNDS (ROUNDS + WARMUP_ROUNDS)
#define MAX_THREADS 8
/* Kernel probes cost microseconds: fewer calls keep a round short. */
#define UPROBE_CALLS_DIVISOR 10
#define UPROBE_STEP_CALLS_DIVISOR 40
/*
 * Pause after each batch of instrumented calls. The flusher drains the
 * rings every 5 ms and profd decodes them on the same 2 CPUs: 8 threads x
 * 40k events took 20-40 ms (less and the rings overflow), and with 20 ms
 * pauses the instrumented medians came out 5-15 ns higher, presumably as the
 * drain still ran on the other vCPU. The rows are the calling thread's cost;
 * the drain's is profd's own CPU time.
 */
#define DRAIN_PAUSE_MS 100

/*
 * The shape of an empty function built with frame pointers, written in
 * assembly so the compiler cannot shrink it below the 5-byte patch.
 */
#define EMPTY_FUNCTION(name)                                                   \
	__asm__(".text\n.globl " #name "\n.type " #name ", @function\n"       \
		".p2align 4\n" #name ":\n\tpush %rbp\n\tmov %rsp, %rbp\n"          \
		"\tpop %rbp\n\tret\n.size " #name ", .-" #name "\n");          \
	void name(void)

/*
 * An empty function alone on its code page, so that the kernel's uprobe
 * breakpoint and profd's patching never share (and copy-on-write) a page.
 * `first` is its first instruction: `push %rbp` is emulated by the uprobe
 * code, `sub $8, %rsp` has to be single-stepped out of line.
 */
#define PAGE_ALONE_FUNCTION(name, first, last)                                 \
	__asm__(".pushsection .text." #name ", \"ax\", @progbits\n"            \
		".globl " #name "\n.type " #name ", @function\n"                \
		".p2align 12\n" #name ":\n\t" first "\n\tnop\n\t" last "\n\tret\n"  \
		".size " #name ", .-" #name "\n.p2align 12\n.popsection\n");    \
	void name(void)

EMPTY_FUNCTION(bench_plain);
EMPTY_FUNCTION(bench_instrumented);

/*
 * The empty function as uftrace's two modes want it: as `gcc -pg` builds it
 * (mcount called after the frame is set up; glibc's mcount when uftrace is
 * not there), and with the 5-byte nop of -fpatchable-function-entry=5 listed
 * in __patchable_function_entries, which `uftrace record -P` patches.
 */
__asm__(".text\n.globl bench_uftrace_pg\n.type bench_uftrace_pg, @function\n.p2align 4\n"
	"bench_uftrace_pg:\n\tpush %rbp\n\tmov %rsp, %rbp\n\tcall mcount@PLT\n"
	"\tpop %rbp\n\tret\n.size bench_uftrace_pg, .-bench_uftrace_pg\n"
	".globl bench_uftrace_dyn\n.type bench_uftrace_dyn, @function\n.p2align 4\n"
	"bench_uftrace_dyn:\n\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tpush %rbp\n"
	"\tmov %rsp, %rbp\n\tpop %rbp\n\tret\n.size bench_uftrace_dyn, .-bench_uftrace_dyn\n"
	".section __patchable_function_entries, \"awo\", @progbits, bench_uftrace_dyn\n"
	".p2align 3\n.quad bench_uftrace_dyn\n.text\n");
void bench_uftrace_pg(void);
void bench_uftrace_dyn(void);
PAGE_ALONE_FUNCTION(bench_uprobe, "push %rbp", "pop %rbp");
PAGE_ALONE_FUNCTION(bench_uprobe_step, "sub $8, %rsp", "add $8, %rsp");

/*
 * 8 arguments: 4 integer registers (rdi, rsi, edx, rcx) and 4 vector ones
 * (xmm0-3, one a float). noipa: no inlining, cloning or identical-code
 * folding of the two copies; every argument feeds the result.
 */
#define ARGS_FUNCTION(name)                                                    \
	__attribute__((noipa)) long name(long a, double b, long c, double d, int e, \
					 float f, long g, double h)            \
	{                                                                      \
		return a + c * 3 + e + (g >> 1) + (long)(b + d * 2.0 + f - h);  \
	}

ARGS_FUNCTION(bench_args_plain)
ARGS_FUNCTION(bench_instrumented_args)

/* --args: 4 integers (copies without a spec, with arg1, with arg1-arg4), a string. */
#define INT4_FUNCTION(name)                                                    \
	__attribute__((noipa)) long name(long a, long b, long c, long d)       \
	{                                                                      \
		return a + 3 * b + (c ^ d);                                    \
	}
#define STR_FUNCTION(name)                                                     \
	__attribute__((noipa)) long name(const char *s)                        \
	{                                                                      \
		return s[0];                                                   \
	}

INT4_FUNCTION(bench_int4_plain)
INT4_FUNCTION(bench_instrumented_int4)
INT4_FUNCTION(bench_instrumented_int4_arg1)
INT4_FUNCTION(bench_instrumented_int4_args)
STR_FUNCTION(bench_str_plain)
STR_FUNCTION(bench_instrumented_str_args)
/* The string the string rows pass: 40 bytes, as a path or a key might be. */
static const char bench_string[] = "/usr/lib/x86_64-linux-gnu/libexample.so";
#define BENCH_STRING_MAX 64 /* what the agent copies at most (--args-string-max) */

typedef void (*empty_fn)(void);
typedef long (*args_fn)(long, double, long, double, int, float, long, double);
typedef long (*int4_fn)(long, long, long, long);
typedef long (*str_fn)(const char *);

/* Calls made to the instrumented functions, warm-up included: profd records 2 events each. */
static _Atomic unsigned long instrumented_calls;

struct sample {
	double cpu;  /* ns per call, this thread's CPU time */
	double wall; /* ns per call, CLOCK_MONOTONIC */
};

struct clock_pair {
	struct timespec cpu, wall;
};

static void clock_pair_read(struct clock_pair *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->wall);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c->cpu);
}

static double ts_diff_ns(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e9 + (double)(b->tv_nsec - a->tv_nsec);
}

static struct sample sample_between(const struct clock_pair *a, const struct clock_pair *b,
				    unsigned long calls)
{
	struct sample s = {
		.cpu = ts_diff_ns(&a->cpu, &b->cpu) / (double)calls,
		.wall = ts_diff_ns(&a->wall, &b->wall) / (double)calls,
	};

	return s;
}

/*
 * Three plain frames above the call, each returning after it: a call's
 * return-stack-buffer entries must stay in step for theirs to be predicted
 * (a loop that never returns hides a trampoline that puts them off by one).
 */
static __attribute__((noinline)) void call_depth3(empty_fn fn)
{
	fn();
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

static __attribute__((noinline)) void call_depth2(empty_fn fn)
{
	call_depth3(fn);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void call_depth1(empty_fn fn)
{
	call_depth2(fn);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) struct sample time_chain(empty_fn fn, unsigned long calls)
{
	struct clock_pair start, end;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++)
		call_depth1(fn);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	return sample_between(&start, &end, calls);
}

static __attribute__((noinline)) struct sample time_empty(empty_fn fn, unsigned long calls)
{
	struct clock_pair start, end;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++)
		fn();
	/* CPU clock first on the way out: the wall interval encloses it */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	return sample_between(&start, &end, calls);
}

/* Two clock reads per iteration, what every timed call must pay at least. */
static __attribute__((noinline)) struct sample time_two_clock_reads(unsigned long calls)
{
	struct clock_pair start, end;
	uint64_t sum = 0;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++) {
		sum += __builtin_ia32_rdtsc();
		sum += __builtin_ia32_rdtsc();
		__asm__ volatile("" : "+r"(sum)); /* both reads stay in the loop */
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	return sample_between(&start, &end, calls);
}

static __attribute__((noinline)) struct sample time_args(args_fn fn, unsigned long calls,
							 long *checksum)
{
	struct clock_pair start, end;
	double x = 0.25;
	long sum = 0;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++) {
		sum += fn((long)i, x, (long)i ^ 7, x * 0.5, (int)i, (float)x, (long)i << 1, x + 1.0);
		x += 0.5;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	*checksum = sum;
	return sample_between(&start, &end, calls);
}

static __attribute__((noinline)) struct sample time_int4(int4_fn fn, unsigned long calls,
							 long *checksum)
{
	struct clock_pair start, end;
	long sum = 0;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++)
		sum += fn((long)i, (long)i >> 3, 1000 + (long)i, -(long)i);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	*checksum = sum;
	return sample_between(&start, &end, calls);
}

static __attribute__((noinline)) struct sample time_str(str_fn fn, unsigned long calls,
							long *checksum)
{
	struct clock_pair start, end;
	long sum = 0;

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++) {
		sum += fn(bench_string);
		__asm__ volatile("" ::: "memory");
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	*checksum = sum;
	return sample_between(&start, &end, calls);
}

/* The copy of a string row's call alone: process_vm_readv of our own memory, as the agent's. */
static __attribute__((noinline)) struct sample time_vm_readv(unsigned long calls, int *failed)
{
	struct clock_pair start, end;
	char dst[BENCH_STRING_MAX];
	struct iovec local = { dst, sizeof(dst) };
	struct iovec remote = { (void *)bench_string, sizeof(dst) };
	pid_t tid = gettid();

	clock_pair_read(&start);
	for (unsigned long i = 0; i < calls; i++)
		if (syscall(SYS_process_vm_readv, tid, &local, 1, &remote, 1, 0) <= 0)
			*failed = 1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end.cpu);
	clock_gettime(CLOCK_MONOTONIC, &end.wall);
	return sample_between(&start, &end, calls);
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- statistics ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double minimum(const double *v, size_t n)
{
	double m = v[0];

	for (size_t i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

/* One row's measured rounds (pooled over threads), each paired with its baseline. */
struct series {
	size_t n;
	double cpu[ROUNDS * MAX_THREADS];
	double wall[ROUNDS * MAX_THREADS];
	double over[ROUNDS * MAX_THREADS]; /* cpu minus the baseline's cpu, same round and thread */
};

static void series_add(struct series *s, struct sample x, const struct sample *base)
{
	s->cpu[s->n] = x.cpu;
	s->wall[s->n] = x.wall;
	s->over[s->n] = base ? x.cpu - base->cpu : 0;
	s->n++;
}

static void print_header(void)
{
	printf("%-42s %10s %9s %11s %10s\n", "", "cpu ns/call", "", "overhead", "wall ns/");
	printf("%-42s %10s %9s %11s %10s\n", "row", "median", "min", "vs plain", "call");
}

static void print_row(const char *label, struct series *s, int has_base)
{
	char over[32] = "-";

	if (has_base)
		snprintf(over, sizeof(over), "%+.2f", median(s->over, s->n));
	printf("%-42s %10.2f %9.2f %11s %10.2f\n", label, median(s->cpu, s->n), minimum(s->cpu, s->n),
	       over, median(s->wall, s->n));
}

static void print_missing_row(const char *label, const char *why)
{
	printf("%-42s %10s   (%s)\n", label, "n/a", why);
}

/* ---- uprobe + uretprobe through the uprobe PMU (no tracefs) -------------- */

struct uprobe_pair {
	int entry_fd, return_fd;
	char why[160]; /* why it is not attached */
};

static int read_first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok ? 0 : -EIO;
}

/* The file and file offset that hold addr, from /proc/self/maps. */
static int file_offset_of(const void *addr, char *path, size_t path_len, uint64_t *offset)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, pgoff;
		int name_at = 0;

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &pgoff, &name_at) != 3 ||
		    (uintptr_t)addr < lo || (uintptr_t)addr >= hi)
			continue;
		if (line[name_at] != '/')
			break;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, path_len, "%s", line + name_at);
		*offset = (uintptr_t)addr - lo + pgoff;
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

static int uprobe_open(int type, uint64_t config, const char *path, uint64_t offset)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.config = config;
	attr.config1 = (uint64_t)(uintptr_t)path; /* uprobe_path */
	attr.config2 = offset;                    /* probe_offset */
	/* a counting event: the count proves every call hit the probe */
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Attaches an entry and a return probe to fn in this thread; on failure says why in p->why. */
static int uprobe_pair_attach(struct uprobe_pair *p, empty_fn fn)
{
	char buf[64], path[4096];
	const char *which;
	uint64_t offset = 0;
	int type, retbit, err;

	p->entry_fd = p->return_fd = -1;
	err = read_first_line("/sys/bus/event_source/devices/uprobe/type", buf, sizeof(buf));
	if (err) {
		snprintf(p->why, sizeof(p->why), "no uprobe PMU: %s", strerror(-err));
		return err;
	}
	type = atoi(buf);
	err = read_first_line("/sys/bus/event_source/devices/uprobe/format/retprobe", buf,
			      sizeof(buf));
	if (err || sscanf(buf, "config:%d", &retbit) != 1) {
		snprintf(p->why, sizeof(p->why), "uprobe PMU has no retprobe format bit");
		return -ENOTSUP;
	}
	err = file_offset_of((const void *)fn, path, sizeof(path), &offset);
	if (err) {
		snprintf(p->why, sizeof(p->why), "no file mapping for %p", (void *)fn);
		return err;
	}
	which = "uprobe";
	p->entry_fd = uprobe_open(type, 0, path, offset);
	if (p->entry_fd < 0) {
		err = -errno;
		goto err_why;
	}
	which = "uretprobe";
	p->return_fd = uprobe_open(type, 1ull << retbit, path, offset);
	if (p->return_fd < 0) {
		err = -errno;
		goto err_close_entry;
	}
	return 0;

err_close_entry:
	close(p->entry_fd);
	p->entry_fd = -1;
err_why:
	snprintf(p->why, sizeof(p->why), "perf_event_open(%s %.80s+0x%llx): %s", which, path,
		 (unsigned long long)offset, strerror(-err));
	return err;
}

/* Hits counted by the entry and the return probe. */
static void uprobe_pair_counts(const struct uprobe_pair *p, uint64_t *entries, uint64_t *returns)
{
	*entries = *returns = 0;
	if (read(p->entry_fd, entries, sizeof(*entries)) != sizeof(*entries))
		*entries = 0;
	if (read(p->return_fd, returns, sizeof(*returns)) != sizeof(*returns))
		*returns = 0;
}

static void uprobe_pair_close(struct uprobe_pair *p)
{
	if (p->entry_fd >= 0)
		close(p->entry_fd);
	if (p->return_fd >= 0)
		close(p->return_fd);
	p->entry_fd = p->return_fd = -1;
}

/* ---- single thread: empty, uprobes, 8 arguments ------------------------- */

struct single_results {
	struct series plain, instr, uprobe, uprobe_step, args_plain, args_instr, clock_reads;
	struct series chain_plain, chain_instr;
	/* --args: 4 ints plain, instrumented with no spec, arg1, arg1-arg4; a string; the copy */
	struct series int4_plain, int4_instr, int4_arg1, int4_args, str_plain, str_args, vm_readv;
	struct uprobe_pair up, up_step;
	int up_ok, up_step_ok;
	uint64_t up_calls, up_step_calls;
	int args_mismatch;
	int vm_readv_failed;
};

static void single_start(struct single_results *res)
{
	res->up_ok = uprobe_pair_attach(&res->up, bench_uprobe) == 0;
	res->up_step_ok = uprobe_pair_attach(&res->up_step, bench_uprobe_step) == 0;
}

/*
 * The --args rows of one round. The instrumented copies run in turn, in
 * the other order every other round, so that a drift within a round (the
 * flusher draining, a neighbour's job) does not favour one of them.
 */
static void args_round(struct single_results *res, unsigned long calls, int keep)
{
	static const int4_fn instr[3] = { bench_instrumented_int4, bench_instrumented_int4_arg1,
					  bench_instrumented_int4_args };
	struct sample p, x[3], s, sa, v;
	long sum_plain, sum[3], str_plain, str_args;
	int flip = rand() & 1;

	p = time_int4(bench_int4_plain, calls, &sum_plain);
	for (int k = 0; k < 3; k++) {
		int j = flip ? 2 - k : k;

		x[j] = time_int4(instr[j], calls, &sum[j]);
	}
	instrumented_calls += 3 * calls;
	for (int k = 0; k < 3; k++)
		if (sum[k] != sum_plain)
			res->args_mismatch = 1;
	if (keep) {
		series_add(&res->int4_plain, p, NULL);
		series_add(&res->int4_instr, x[0], &p);
		series_add(&res->int4_arg1, x[1], &p);
		series_add(&res->int4_args, x[2], &p);
	}
	pause_ms(DRAIN_PAUSE_MS);
	if (flip) {
		sa = time_str(bench_instrumented_str_args, calls, &str_args);
		s = time_str(bench_str_plain, calls, &str_plain);
	} else {
		s = time_str(bench_str_plain, calls, &str_plain);
		sa = time_str(bench_instrumented_str_args, calls, &str_args);
	}
	v = time_vm_readv(calls, &res->vm_readv_failed);
	instrumented_calls += calls;
	if (str_plain != str_args)
		res->args_mismatch = 1;
	if (keep) {
		series_add(&res->str_plain, s, NULL);
		series_add(&res->str_args, sa, &s);
		series_add(&res->vm_readv, v, NULL);
	}
	pause_ms(DRAIN_PAUSE_MS);
}

/* One round in the calling thread; drops the figures of warm-up rounds. */
static void single_round(struct single_results *res, unsigned long calls, int keep)
{
	unsigned long up_calls = calls / UPROBE_CALLS_DIVISOR ?: 1;
	unsigned long step_calls = calls / UPROBE_STEP_CALLS_DIVISOR ?: 1;
	struct sample p, i, u, a, ai;
	long sum_plain, sum_instr;

	p = time_empty(bench_plain, calls);
	i = time_empty(bench_instrumented, calls);
	u = time_two_clock_reads(calls);
	if (keep) {
		series_add(&res->plain, p, NULL);
		series_add(&res->instr, i, &p);
		series_add(&res->clock_reads, u, NULL);
	}
	pause_ms(DRAIN_PAUSE_MS);
	p = time_chain(bench_plain, calls);
	i = time_chain(bench_instrumented, calls);
	instrumented_calls += calls;
	if (keep) {
		series_add(&res->chain_plain, p, NULL);
		series_add(&res->chain_instr, i, &p);
	}
	if (res->up_ok) {
		u = time_empty(bench_uprobe, up_calls);
		res->up_calls += up_calls;
		if (keep)
			series_add(&res->uprobe, u, &p);
	}
	if (res->up_step_ok) {
		u = time_empty(bench_uprobe_step, step_calls);
		res->up_step_calls += step_calls;
		if (keep)
			series_add(&res->uprobe_step, u, &p);
	}
	pause_ms(DRAIN_PAUSE_MS);
	a = time_args(bench_args_plain, calls, &sum_plain);
	ai = time_args(bench_instrumented_args, calls, &sum_instr);
	instrumented_calls += 2 * calls; /* this and the empty one above */
	if (sum_plain != sum_instr)
		res->args_mismatch = 1;
	if (keep) {
		series_add(&res->args_plain, a, NULL);
		series_add(&res->args_instr, ai, &a);
	}
	pause_ms(DRAIN_PAUSE_MS);
	args_round(res, calls, keep);
}

/* ---- threads: the empty function in N threads at once -------------------- */

/* One thread count: its workers live through every round. */
struct thread_run {
	int nthreads, started, err;
	/* the gate opens once every worker exists (go = 1) or creating one failed (go = -1) */
	pthread_mutex_t gate_lock;
	pthread_cond_t gate;
	int go;
	pthread_barrier_t start, done;
	unsigned long calls;
	struct worker {
		pthread_t thread;
		int index;
		struct thread_run *run;
	} workers[MAX_THREADS];
	struct sample plain[MAX_THREADS][TOTAL_ROUNDS];
	struct sample instr[MAX_THREADS][TOTAL_ROUNDS];
	long preempted[MAX_THREADS]; /* involuntary context switches inside measured rounds */
};

/* What a thread count's rounds showed beyond the pooled series. */
struct thread_stats {
	double lo, hi;     /* lowest and highest per-thread median, instrumented cpu ns/call */
	double preempted;  /* involuntary context switches per thread per round */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct thread_run *run = w->run;
	char name[16];
	int go;

	snprintf(name, sizeof(name), "bench-%d.%d", run->nthreads, w->index);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&run->gate_lock);
	while (!run->go)
		pthread_cond_wait(&run->gate, &run->gate_lock);
	go = run->go;
	pthread_mutex_unlock(&run->gate_lock);
	if (go < 0)
		return NULL;
	for (int r = 0; r < TOTAL_ROUNDS; r++) {
		struct rusage before, after;

		pthread_barrier_wait(&run->start);
		getrusage(RUSAGE_THREAD, &before);
		run->plain[w->index][r] = time_empty(bench_plain, run->calls);
		run->instr[w->index][r] = time_empty(bench_instrumented, run->calls);
		instrumented_calls += run->calls;
		getrusage(RUSAGE_THREAD, &after);
		if (r >= WARMUP_ROUNDS)
			run->preempted[w->index] += after.ru_nivcsw - before.ru_nivcsw;
		pthread_barrier_wait(&run->done);
	}
	return NULL;
}

/* Creates the workers, parked until the rounds start; on failure sets run->err (an errno). */
static void threads_start(struct thread_run *run, int nthreads, unsigned long calls)
{
	run->nthreads = nthreads;
	run->calls = calls;
	pthread_mutex_init(&run->gate_lock, NULL);
	pthread_cond_init(&run->gate, NULL);
	pthread_barrier_init(&run->start, NULL, (unsigned)nthreads + 1);
	pthread_barrier_init(&run->done, NULL, (unsigned)nthreads + 1);
	for (run->started = 0; run->started < nthreads; run->started++) {
		struct worker *w = &run->workers[run->started];

		w->index = run->started;
		w->run = run;
		run->err = pthread_create(&w->thread, NULL, worker_main, w);
		if (run->err)
			break;
	}
	pthread_mutex_lock(&run->gate_lock);
	run->go = run->err ? -1 : 1;
	pthread_cond_broadcast(&run->gate);
	pthread_mutex_unlock(&run->gate_lock);
	if (run->err)
		fprintf(stderr, "overhead: pthread_create: %s\n", strerror(run->err));
}

/* One round: every worker times its loops, all at once. */
static void threads_round(struct thread_run *run)
{
	if (run->err)
		return;
	pthread_barrier_wait(&run->start);
	pthread_barrier_wait(&run->done);
	pause_ms(DRAIN_PAUSE_MS);
}

/* Joins the workers and pools their measured rounds; returns 0 or run->err. */
static int threads_finish(struct thread_run *run, struct series *plain, struct series *instr,
			  struct thread_stats *st)
{
	for (int t = 0; t < run->started; t++)
		pthread_join(run->workers[t].thread, NULL);
	pthread_barrier_destroy(&run->start);
	pthread_barrier_destroy(&run->done);
	pthread_cond_destroy(&run->gate);
	pthread_mutex_destroy(&run->gate_lock);
	if (run->err)
		return run->err;

	st->lo = 1e300;
	st->hi = 0;
	st->preempted = 0;
	for (int t = 0; t < run->nthreads; t++) {
		double mine[ROUNDS], m;

		for (int r = WARMUP_ROUNDS; r < TOTAL_ROUNDS; r++) {
			series_add(plain, run->plain[t][r], NULL);
			series_add(instr, run->instr[t][r], &run->plain[t][r]);
			mine[r - WARMUP_ROUNDS] = run->instr[t][r].cpu;
		}
		m = median(mine, ROUNDS);
		st->lo = m < st->lo ? m : st->lo;
		st->hi = m > st->hi ? m : st->hi;
		st->preempted += (double)run->preempted[t] / (ROUNDS * run->nthreads);
	}
	return 0;
}

/* ---- main ----------------------------------------------------------------- */

/* The 1-minute load average, or -1. */
static double load_average(void)
{
	char buf[64];
	double load;

	if (read_first_line("/proc/loadavg", buf, sizeof(buf)) || sscanf(buf, "%lf", &load) != 1)
		return -1;
	return load;
}

static void print_uprobe_row(const char *label, struct series *s, int ok,
			     struct uprobe_pair *p, uint64_t calls)
{
	uint64_t entries, returns;

	if (!ok) {
		print_missing_row(label, "not attached, see above");
		return;
	}
	print_row(label, s, 1);
	uprobe_pair_counts(p, &entries, &returns);
	if (entries != calls || returns != calls)
		printf("%-42s   warning: probes counted %llu entries, %llu returns, %llu calls\n",
		       "", (unsigned long long)entries, (unsigned long long)returns,
		       (unsigned long long)calls);
}

/*
 * The instrumented call beyond its two clock reads: per round, the
 * instrumented row's overhead less the two reads of the same round.
 */
static void print_clock_budget(struct single_results *res)
{
	double beyond[ROUNDS];

	for (size_t r = 0; r < res->instr.n; r++)
		beyond[r] = res->instr.over[r] - res->clock_reads.cpu[r];
	printf("empty instrumented (profd) beyond two clock reads: %+.2f ns per call "
	       "(two clock reads %.2f ns)\n",
	       median(beyond, res->instr.n), median(res->clock_reads.cpu, res->clock_reads.n));
}

/*
 * --args per round, against the same round's rows: what the spec adds to
 * the function's instrumented call without one, per integer (arg1-arg4 less
 * arg1, over 3), and the string's beside its copy alone.
 */
static void print_args_budget(struct single_results *res)
{
	double spec[ROUNDS], per_int[ROUNDS], four[ROUNDS], str[ROUNDS];
	size_t n = res->int4_instr.n;

	for (size_t r = 0; r < n; r++) {
		spec[r] = res->int4_arg1.cpu[r] - res->int4_instr.cpu[r];
		four[r] = res->int4_args.cpu[r] - res->int4_instr.cpu[r];
		per_int[r] = (res->int4_args.cpu[r] - res->int4_arg1.cpu[r]) / 3;
		str[r] = res->str_args.over[r] - res->vm_readv.cpu[r];
	}
	printf("--args beyond the same call without a spec: arg1 %+.2f ns, arg1-arg4 %+.2f ns, "
	       "each int after the first %+.2f ns\n",
	       median(spec, n), median(four, n), median(per_int, n));
	printf("--args arg1/s: the instrumented string call beyond plain less its "
	       "process_vm_readv alone (%.2f ns): %+.2f ns\n",
	       median(res->vm_readv.cpu, res->vm_readv.n), median(str, n));
	if (res->vm_readv_failed)
		printf("warning: process_vm_readv failed: the string rows copy nothing\n");
}

/* ---- --uftrace: the same empty call under `uftrace record` ---------------- */

/* Whether mcount is uftrace's (its libmcount preloaded), not glibc's. */
static int uftrace_mcount_loaded(void)
{
	Dl_info info;
	void *mcount = dlsym(RTLD_DEFAULT, "mcount");

	return mcount && dladdr(mcount, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libmcount");
}

/* Whether `uftrace record -P` patched the 5-byte nop at bench_uftrace_dyn. */
static int uftrace_dyn_patched(void)
{
	static const unsigned char nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	return memcmp((const void *)bench_uftrace_dyn, nop5, sizeof(nop5)) != 0;
}

static void uftrace_print_row(const char *label, struct series *s, int traced, const char *why)
{
	if (traced)
		print_row(label, s, 1);
	else
		print_missing_row(label, why);
}

static int uftrace_main(unsigned long calls)
{
	static struct series plain, pg, dyn, chain_plain, chain_pg, chain_dyn;
	int pg_on = uftrace_mcount_loaded(), dyn_on = uftrace_dyn_patched();

	for (int r = 0; r < TOTAL_ROUNDS; r++) {
		struct sample p = time_empty(bench_plain, calls);
		struct sample g = time_empty(bench_uftrace_pg, calls);
		struct sample d = time_empty(bench_uftrace_dyn, calls);
		struct sample cp = time_chain(bench_plain, calls);
		struct sample cg = time_chain(bench_uftrace_pg, calls);
		struct sample cd = time_chain(bench_uftrace_dyn, calls);

		if (r >= WARMUP_ROUNDS) {
			series_add(&plain, p, NULL);
			series_add(&pg, g, &p);
			series_add(&dyn, d, &p);
			series_add(&chain_plain, cp, NULL);
			series_add(&chain_pg, cg, &cp);
			series_add(&chain_dyn, cd, &cp);
		}
		pause_ms(DRAIN_PAUSE_MS);
	}
	printf("%lu calls per round, median and min of %d rounds after %d warm-up rounds\n",
	       calls, ROUNDS, WARMUP_ROUNDS);
	print_header();
	print_row("empty  plain", &plain, 0);
	uftrace_print_row("empty  uftrace -pg (mcount)", &pg, pg_on, "not under uftrace");
	uftrace_print_row("empty  uftrace -P (dynamic patching)", &dyn, dyn_on, "not patched");
	print_row("empty  via 3 callers, plain", &chain_plain, 0);
	uftrace_print_row("empty  via 3 callers, uftrace -pg", &chain_pg, pg_on, "not under uftrace");
	uftrace_print_row("empty  via 3 callers, uftrace -P", &chain_dyn, dyn_on, "not patched");
	return 0;
}

int main(int argc, char **argv)
{
	int uftrace = argc > 1 && strcmp(argv[1], "--uftrace") == 0;
	/* 20k calls per round: 40k events, inside one thread's 64k-record ring */
	unsigned long calls = argc > 1 + uftrace ? strtoul(argv[1 + uftrace], NULL, 10) : 20000;
	static struct single_results single;
	static struct thread_run runs[4];
	static struct series tplain[4], tinstr[4];
	static const int thread_counts[4] = { 1, 2, 4, 8 };
	struct thread_stats tstats[4];
	int thread_err[4];
	char label[64];
	double load_before;

	if (calls == 0) {
		fprintf(stderr, "usage: %s [--uftrace] [CALLS_PER_ROUND]\n", argv[0]);
		return 2;
	}
	if (uftrace)
		return uftrace_main(calls);
	/* other work on the machine shows up in every row: say how much there was */
	load_before = load_average();
	single_start(&single);
	for (int k = 0; k < 4; k++)
		threads_start(&runs[k], thread_counts[k], calls);
	/*
	 * Every round runs every row once, so that a noisy stretch of the
	 * machine's life hits all rows alike instead of one phase.
	 */
	for (int r = 0; r < TOTAL_ROUNDS; r++) {
		single_round(&single, calls, r >= WARMUP_ROUNDS);
		for (int k = 0; k < 4; k++)
			threads_round(&runs[k]);
	}
	for (int k = 0; k < 4; k++)
		thread_err[k] = threads_finish(&runs[k], &tplain[k], &tinstr[k], &tstats[k]);

	printf("%lu calls per round (uprobe rows: %lu and %lu), median and min of %d rounds "
	       "after %d warm-up rounds; %ld CPUs online, load average %.2f before, %.2f after\n",
	       calls, calls / UPROBE_CALLS_DIVISOR ?: 1, calls / UPROBE_STEP_CALLS_DIVISOR ?: 1,
	       ROUNDS, WARMUP_ROUNDS, sysconf(_SC_NPROCESSORS_ONLN), load_before, load_average());
	if (!single.up_ok)
		printf("uprobe: not attached: %s\n", single.up.why);
	if (!single.up_step_ok)
		printf("uprobe (sub): not attached: %s\n", single.up_step.why);
	print_header();
	print_row("empty  plain", &single.plain, 0);
	print_row("empty  instrumented (profd)", &single.instr, 1);
	print_uprobe_row("empty  uprobe+uretprobe (push, emulated)", &single.uprobe, single.up_ok,
			 &single.up, single.up_calls);
	print_uprobe_row("empty  uprobe+uretprobe (sub, stepped)", &single.uprobe_step,
			 single.up_step_ok, &single.up_step, single.up_step_calls);
	print_row("two clock reads (rdtsc x2)", &single.clock_reads, 0);
	print_row("empty  via 3 callers, plain", &single.chain_plain, 0);
	print_row("empty  via 3 callers, instrumented (profd)", &single.chain_instr, 1);
	print_row("8-arg  plain", &single.args_plain, 0);
	print_row("8-arg  instrumented (profd)", &single.args_instr, 1);
	print_row("4-int  plain", &single.int4_plain, 0);
	print_row("4-int  instrumented, no spec", &single.int4_instr, 1);
	print_row("4-int  instrumented, --args arg1", &single.int4_arg1, 1);
	print_row("4-int  instrumented, --args arg1-arg4", &single.int4_args, 1);
	print_row("string plain", &single.str_plain, 0);
	print_row("string instrumented, --args arg1/s", &single.str_args, 1);
	print_row("process_vm_readv of 64 bytes alone", &single.vm_readv, 0);
	for (int k = 0; k < 4; k++) {
		int n = thread_counts[k];

		snprintf(label, sizeof(label), "%d thread%s plain", n, n > 1 ? "s" : "");
		if (thread_err[k]) {
			print_missing_row(label, strerror(thread_err[k]));
			continue;
		}
		print_row(label, &tplain[k], 0);
		snprintf(label, sizeof(label), "%d thread%s instrumented (profd)", n, n > 1 ? "s" : "");
		print_row(label, &tinstr[k], 1);
	}
	print_clock_budget(&single);
	print_args_budget(&single);
	printf("per-thread medians, instrumented (cpu ns/call):");
	for (int k = 0; k < 4; k++)
		if (!thread_err[k])
			printf("  %dT %.2f..%.2f", thread_counts[k], tstats[k].lo, tstats[k].hi);
	printf("\npreemptions per thread per round (involuntary switches):");
	for (int k = 0; k < 4; k++)
		if (!thread_err[k])
			printf("  %dT %.2f", thread_counts[k], tstats[k].preempted);
	printf("\n");
	/* bench/run.sh checks this against profctl's count of recorded events */
	printf("instrumented calls: %lu (profd should record %lu events)\n",
	       atomic_load(&instrumented_calls), 2 * atomic_load(&instrumented_calls));
	uprobe_pair_close(&single.up);
	uprobe_pair_close(&single.up_step);
	if (single.args_mismatch) {
		printf("FAIL: an instrumented copy returned other results than its plain one\n");
		return 1;
	}
	return 0;
}
