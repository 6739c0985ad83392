// SPDX-License-Identifier: MIT
/*
 * What DWARF unwinding costs the daemon per sample. tests/targets/nofp_target
 * runs (spin: 3 frames without frame pointers; sort: the same through libc's
 * qsort and back into a callback) under the daemon's sampler with stack
 * copies; every sample (registers + stack copy) is stored, and the modules
 * are handed to the daemon's dwarf unwinder from the MMAP2 records while the
 * target lives. After it exited, every stored sample is unwound: once cold
 * (libdwfl reads each module's CFI the first time), then in timed warm
 * passes. Prints ns per sample and per frame, frames per sample, and how many
 * chains reach main. Exits 1 when the figures cannot be trusted.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/sampling/dwarf_unwind.h"
#include "daemon/sampling/sampler.h"
#include "daemon/symbols/symbols.h"

#define MAX_FRAMES 64
#define WARMUP_PASSES 2 /* after the cold pass, not timed */
#define PASSES 21
#define MIN_SAMPLES 100
#define MAX_CPUS 256
#define TARGET_TIMEOUT_NS 60000000000ull

struct stored_sample {
	uint64_t regs[SAMPLER_REGS_MAX], regs_mask, sp;
	uint8_t *stack;
	size_t stack_size;
	uint64_t fp[MAX_FRAMES]; /* the kernel's frame-pointer callchain */
	size_t n_fp;
	uint64_t pcs[MAX_FRAMES]; /* the cold pass's chain */
	size_t n;
};

struct run {
	const char *mode;
	pid_t child;
	bool reaped;
	struct symbolizer *sym;
	struct dwarf_unwinder *unw;
	struct stored_sample *samples;
	size_t n, cap, no_stack, mappings, mapping_errors, late_mappings;
	uint64_t stack_bytes, lost, throttled;
	bool oom;
};

struct result {
	double frames_per_sample, main_pct, fp_main_pct, stack_kib;
	double cold_ns, cold_wall_ns, warm_cpu_ns, warm_cpu_min, warm_wall_ns, first_ns;
	struct dwarf_unwind_stats st;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_sample(void *ctx, const struct sampler_sample *s)
{
	struct run *r = ctx;
	struct stored_sample *st, *grown;

	if (s->pid != (uint32_t)r->child || !s->user_mode || r->oom)
		return;
	if (!s->regs_mask || !s->stack_size) {
		r->no_stack++;
		return;
	}
	if (r->n == r->cap) {
		grown = realloc(r->samples, (r->cap ? 2 * r->cap : 1024) * sizeof(*grown));
		if (!grown) {
			r->oom = true;
			return;
		}
		r->samples = grown;
		r->cap = r->cap ? 2 * r->cap : 1024;
	}
	st = &r->samples[r->n];
	st->stack = malloc(s->stack_size);
	if (!st->stack) {
		r->oom = true;
		return;
	}
	memcpy(st->stack, s->stack, s->stack_size);
	st->stack_size = s->stack_size;
	st->sp = s->stack_addr;
	st->regs_mask = s->regs_mask;
	memcpy(st->regs, s->regs, sizeof(st->regs));
	st->n_fp = s->n_callchain < MAX_FRAMES ? s->n_callchain : MAX_FRAMES;
	memcpy(st->fp, s->callchain, st->n_fp * sizeof(uint64_t));
	st->n = 0;
	r->stack_bytes += s->stack_size;
	r->n++;
}

/* As the daemon's session does with every executable MMAP2 record. */
static void on_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct run *r = ctx;
	int err;

	if (m->pid != (uint32_t)r->child || !(m->prot & PROT_EXEC))
		return;
	/* the unwinder opens the file now: after the exit it may no longer be the target's */
	if (r->reaped)
		r->late_mappings++;
	symbolizer_add_mapping(r->sym, m->start, m->start + m->len, m->pgoff, m->filename);
	err = dwarf_unwinder_add_mapping(r->unw, m->start, m->start + m->len, m->pgoff,
					 m->filename);
	if (err < 0 && r->mapping_errors++ == 0)
		fprintf(stderr, "unwind_cost: %s: cannot load %s: %s\n", r->mode,
			m->filename ? m->filename : "(null)", strerror(-err));
	else if (err == 0)
		r->mappings++;
}

static const struct sampler_callbacks run_cbs = { .sample = on_sample, .mmap = on_mmap };

/* Polls and drains until the target exits; false (after saying why) when it fails. */
static bool drain_until_exit(struct sampler *s, struct run *r)
{
	struct pollfd pfd[MAX_CPUS];
	const int *fds;
	size_t i, n = sampler_fds(s, &fds);
	uint64_t give_up = clock_ns(CLOCK_MONOTONIC) + TARGET_TIMEOUT_NS;
	int status = 0, rc;

	for (i = 0; i < n && i < MAX_CPUS; i++)
		pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	for (;;) {
		poll(pfd, i, 50);
		rc = sampler_read(s, &run_cbs, r);
		if (rc < 0) {
			fprintf(stderr, "unwind_cost: %s: sampler_read: %s\n", r->mode,
				strerror(-rc));
			return false;
		}
		if (waitpid(r->child, &status, WNOHANG) == r->child)
			break;
		if (clock_ns(CLOCK_MONOTONIC) > give_up) {
			fprintf(stderr, "unwind_cost: %s: target still running after 60 s\n",
				r->mode);
			return false;
		}
	}
	r->reaped = true;
	rc = sampler_read(s, &run_cbs, r);
	if (rc < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "unwind_cost: %s: target failed (status 0x%x)\n", r->mode, status);
		return false;
	}
	return true;
}

/*
 * Runs "TARGET MODE MS exit" sampled from its execve to its exit at freq Hz
 * with stack copies of the daemon's default size. Returns 0 or -1 (printed).
 */
static int run_target(struct run *r, const char *exe, const char *ms, uint32_t freq)
{
	struct sampler_config cfg = { .freq_hz = freq, .enable_on_exec = true,
				      .copy_stack = true };
	struct sampler_stats stats;
	struct sampler *s;
	char err[256], c = 0;
	int pfd[2], e;
	bool ok;

	if (pipe(pfd) < 0)
		return -1;
	r->child = fork();
	if (r->child < 0)
		return -1;
	if (r->child == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			execl(exe, exe, r->mode, ms, "exit", (char *)NULL);
		_exit(127);
	}
	close(pfd[0]);
	cfg.pid = r->child;
	r->sym = symbolizer_new(r->child);
	r->unw = dwarf_unwinder_new(r->child);
	snprintf(err, sizeof(err), "%s", strerror(errno));
	s = r->sym && r->unw ? sampler_open(&cfg, err, sizeof(err)) : NULL;
	e = errno;
	if (!s) {
		close(pfd[1]);
		kill(r->child, SIGKILL);
		waitpid(r->child, NULL, 0);
		r->child = 0;
		fprintf(stderr, "unwind_cost: %s: cannot sample: %s\n", r->mode, err);
		errno = e;
		return -1;
	}
	ok = write(pfd[1], &c, 1) == 1;
	close(pfd[1]);
	ok = ok && drain_until_exit(s, r);
	sampler_get_stats(s, &stats);
	r->lost = stats.lost;
	r->throttled = stats.throttled;
	sampler_close(s);
	if (!r->reaped) {
		kill(r->child, SIGKILL);
		waitpid(r->child, NULL, 0);
	}
	return ok ? 0 : -1;
}

static void run_free(struct run *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->samples[i].stack);
	free(r->samples);
	dwarf_unwinder_free(r->unw);
	symbolizer_free(r->sym);
}

/*
 * Unwinds every stored sample; keep: into the samples' own pcs (the cold
 * pass), else into one scratch buffer. first_ns, when not NULL, gets the wall
 * time of the first unwind. Returns the frames found, or -1 when an unwind
 * failed.
 */
static long unwind_pass(struct run *r, bool keep, double *first_ns)
{
	static uint64_t scratch[MAX_FRAMES];
	struct stored_sample *st;
	size_t i, n, frames = 0;
	uint64_t t0 = first_ns ? clock_ns(CLOCK_MONOTONIC) : 0;
	int err;

	for (i = 0; i < r->n; i++) {
		if (i == 1 && first_ns)
			*first_ns = (double)(clock_ns(CLOCK_MONOTONIC) - t0);
		st = &r->samples[i];
		err = dwarf_unwinder_unwind(r->unw, st->regs, st->regs_mask, st->sp, st->stack,
					    st->stack_size, keep ? st->pcs : scratch, MAX_FRAMES,
					    &n);
		if (err < 0) {
			fprintf(stderr, "unwind_cost: %s: sample %zu: unwind: %s\n", r->mode, i,
				strerror(-err));
			return -1;
		}
		if (keep)
			st->n = n;
		frames += n;
	}
	return (long)frames;
}

/* Name of frame i (callers looked up at pc - 1, inside their call). */
static const char *frame_name(struct symbolizer *s, const uint64_t *pcs, size_t i)
{
	struct symbol_info si;

	symbolizer_lookup(s, i ? pcs[i] - 1 : pcs[i], &si);
	return si.function ? si.function : "?";
}

static bool reaches_main(struct symbolizer *s, const uint64_t *pcs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(frame_name(s, pcs, i), "main") == 0)
			return true;
	return false;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The cold pass, then the timed warm passes, then the chains' names. Returns 0 or -1. */
static int measure(struct run *r, struct result *res)
{
	double cpu[PASSES], wall[PASSES];
	uint64_t w0, c0;
	size_t i, n_main = 0, n_fp_main = 0;
	long frames, again;

	w0 = clock_ns(CLOCK_MONOTONIC);
	c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	frames = unwind_pass(r, true, &res->first_ns);
	res->cold_ns = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)r->n;
	res->cold_wall_ns = (double)(clock_ns(CLOCK_MONOTONIC) - w0) / (double)r->n;
	if (frames < 0)
		return -1;
	for (i = 0; i < WARMUP_PASSES + PASSES; i++) {
		w0 = clock_ns(CLOCK_MONOTONIC);
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		again = unwind_pass(r, false, NULL);
		if (i >= WARMUP_PASSES) {
			cpu[i - WARMUP_PASSES] =
				(double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)r->n;
			wall[i - WARMUP_PASSES] =
				(double)(clock_ns(CLOCK_MONOTONIC) - w0) / (double)r->n;
		}
		if (again != frames) {
			fprintf(stderr, "unwind_cost: %s: pass %zu found %ld frames, the first %ld\n",
				r->mode, i + 2, again, frames);
			return -1;
		}
	}
	res->warm_wall_ns = median(wall, PASSES);
	res->warm_cpu_ns = median(cpu, PASSES);
	res->warm_cpu_min = cpu[0]; /* sorted by median() */
	res->frames_per_sample = (double)frames / (double)r->n;
	for (i = 0; i < r->n; i++) {
		n_main += reaches_main(r->sym, r->samples[i].pcs, r->samples[i].n);
		n_fp_main += reaches_main(r->sym, r->samples[i].fp, r->samples[i].n_fp);
	}
	res->main_pct = 100.0 * (double)n_main / (double)r->n;
	res->fp_main_pct = 100.0 * (double)n_fp_main / (double)r->n;
	res->stack_kib = (double)r->stack_bytes / 1024.0 / (double)r->n;
	dwarf_unwinder_get_stats(r->unw, &res->st);
	return 0;
}

/* One chain, leaf first, a run of the same function as "name xN" (msort recurses). */
static void print_chain(struct run *r, const char *what, const uint64_t *pcs, size_t n)
{
	const char *name, *next;
	size_t i, same;

	printf("%s: %s:", r->mode, what);
	for (i = 0; i < n; i += same) {
		name = frame_name(r->sym, pcs, i);
		for (same = 1; i + same < n; same++) {
			next = frame_name(r->sym, pcs, i + same);
			if (strcmp(next, name) != 0)
				break;
		}
		printf(same > 1 ? " %s x%zu" : " %s", name, same);
	}
	printf("\n");
}

/* Samples and unwinds one mode; prints its detail lines. Returns 0 or -1 (printed). */
static int bench_mode(struct run *r, const char *exe, const char *ms, uint32_t freq,
		      struct result *res)
{
	const struct stored_sample *st;
	size_t i;

	if (run_target(r, exe, ms, freq) < 0)
		return -1;
	if (r->oom) {
		fprintf(stderr, "unwind_cost: %s: out of memory storing samples\n", r->mode);
		return -1;
	}
	if (r->n < MIN_SAMPLES) {
		fprintf(stderr, "unwind_cost: %s: %zu samples with a stack copy, want %d or more\n",
			r->mode, r->n, MIN_SAMPLES);
		return -1;
	}
	if (r->mapping_errors || r->late_mappings) {
		fprintf(stderr, "unwind_cost: %s: %zu mappings failed to load, %zu came after "
			"the exit\n", r->mode, r->mapping_errors, r->late_mappings);
		return -1;
	}
	if (measure(r, res) < 0)
		return -1;
	printf("%s: %zu samples (%zu without a stack copy, %" PRIu64 " lost, %" PRIu64
	       " throttled), %.1f KiB of stack each; %" PRIu64 " modules from %zu mappings; "
	       "stopped: %" PRIu64 " loops, %" PRIu64 " at max\n", r->mode, r->n, r->no_stack,
	       r->lost, r->throttled, res->stack_kib, res->st.modules, r->mappings,
	       res->st.stopped_loop, res->st.stopped_max);
	printf("%s: cold pass %.1f ms cpu (%.1f ms wall), of which %.1f ms more than a warm "
	       "pass; its first unwind %.0f us wall\n", r->mode, res->cold_ns * (double)r->n / 1e6,
	       res->cold_wall_ns * (double)r->n / 1e6,
	       (res->cold_ns - res->warm_cpu_ns) * (double)r->n / 1e6, res->first_ns / 1000.0);
	st = &r->samples[r->n / 2];
	print_chain(r, "a chain", st->pcs, st->n);
	print_chain(r, "same sample, frame pointers", st->fp, st->n_fp);
	for (i = 0; i < r->n; i++) {
		st = &r->samples[i];
		if (!reaches_main(r->sym, st->pcs, st->n)) {
			print_chain(r, "the first chain without main", st->pcs, st->n);
			break;
		}
	}
	return 0;
}

static int target_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return -1;
	self[n] = '\0';
	/* build/bench/unwind_cost -> build/tests/targets/nofp_target */
	snprintf(buf, len, "%s/../tests/targets/nofp_target", dirname(self));
	return 0;
}

static double load_average(void)
{
	double l = -1;

	getloadavg(&l, 1);
	return l;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "spin", "sort" };
	struct result res[2] = { 0 };
	struct run runs[2] = { 0 };
	const char *ms = argc > 1 ? argv[1] : "1000";
	uint32_t freq = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 2000;
	char exe[PATH_MAX];
	double load_before = load_average();
	int rc = 0;
	size_t k;

	if (argc > 4 || atol(ms) <= 0 || freq == 0) {
		fprintf(stderr, "usage: %s [TARGET_CPU_MS [FREQ_HZ [NOFP_TARGET]]]\n", argv[0]);
		return 2;
	}
	if (argc > 3)
		snprintf(exe, sizeof(exe), "%s", argv[3]);
	else if (target_path(exe, sizeof(exe)) < 0)
		return 1;
	if (access(exe, X_OK) < 0) {
		fprintf(stderr, "unwind_cost: %s: %s (make all)\n", exe, strerror(errno));
		return 1;
	}
	for (k = 0; k < 2 && rc == 0; k++) {
		runs[k].mode = modes[k];
		if (bench_mode(&runs[k], exe, ms, freq, &res[k]) < 0)
			rc = 1;
	}
	if (rc == 0) {
		printf("%s ms of target CPU at %" PRIu32 " Hz, %d KiB stack copies; cpu ns: "
		       "median and min of %d warm passes after %d dropped; load average %.2f "
		       "before, %.2f after\n", ms, freq, SAMPLER_DEFAULT_STACK_BYTES / 1024,
		       PASSES, WARMUP_PASSES, load_before, load_average());
		printf("%-5s %7s %8s %8s %8s %9s %9s %9s %9s %8s\n", "", "", "frames/",
		       "to main", "to main", "cold pass", "warm cpu", "", "warm wall", "cpu ns/");
		printf("%-5s %7s %8s %8s %8s %9s %9s %9s %9s %8s\n", "mode", "samples", "sample",
		       "dwarf %", "fp %", "ns/sample", "ns/sample", "min", "ns/sample", "frame");
		for (k = 0; k < 2; k++)
			printf("%-5s %7zu %8.2f %8.1f %8.1f %9.0f %9.0f %9.0f %9.0f %8.0f\n",
			       modes[k], runs[k].n, res[k].frames_per_sample, res[k].main_pct,
			       res[k].fp_main_pct, res[k].cold_ns, res[k].warm_cpu_ns,
			       res[k].warm_cpu_min, res[k].warm_wall_ns,
			       res[k].warm_cpu_ns / res[k].frames_per_sample);
		for (k = 0; k < 2; k++)
			if (runs[k].lost)
				printf("warning: %s: %" PRIu64 " samples lost (rings full)\n", modes[k],
				       runs[k].lost);
	}
	for (k = 0; k < 2; k++)
		run_free(&runs[k]);
	return rc;
}
