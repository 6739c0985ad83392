// SPDX-License-Identifier: MIT
/*
 * Signal storms against the agent's hooks, run by bench/signal_stress.sh and
 * tests/integration/test_signal_stress.sh under `profctl run --funcs '*'`
 * (or 'storm_*'). The thread calls tiny instrumented functions flat out and
 * checks every result while a timer fires as fast as the kernel delivers
 * (itimer, thread_timer, altstack, nodefer, longjmp), or while a hardware
 * breakpoint sends one SIGTRAP at each instruction of the agent's hooks in
 * turn (breakpoints, breakpoints_longjmp); the handler is instrumented
 * itself and calls instrumented functions. abi_torture's `signal` case (one
 * SIGALRM per ms, the thread mostly in its own loop) almost never lands in
 * the hooks.
 *
 * Prints one deterministic line per case, `case NAME ok` or `case NAME FAIL
 * details`, then `count storm_marker N`: calls made after the storms, at
 * leisure, which the trace must hold exactly (a thread whose recording
 * stopped during a storm shows fewer). Rates go to stderr.
 * `signal_storm [-v] [-n SIGNALS] [-i USEC] [CASE...]`: SIGNALS per timer
 * storm (default 5000), a timer every USEC (default 20; at 1 the thread
 * never leaves its handler), only the named cases (default all); -v prints
 * where the signals landed (module+offset, as objdump shows them). Exit
 * status 0 iff all ok.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "case_macros.h"
#include "stub_landing.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid /* glibc < 2.41 names only the union member */
#endif

#define STORM __attribute__((noinline, used))

#define STORM_DEADLINE_S 20.0
#define STORM_THREADS 2
#define NODEFER_DEPTH 3
#define MARKER_CALLS 100
#define ALTSTACK_SIZE (64 * 1024)

#define LANDINGS_MAX (1 << 16)

static long storm_signals = 5000;   /* per storm: -n */
static long storm_interval_us = 20; /* -i */
static int verbose;                 /* -v: where the signals landed, to stderr */
static uintptr_t landings[LANDINGS_MAX];
static _Atomic unsigned n_landings;
static _Atomic long marker_calls;

/* ---- the instrumented functions ----------------------------------------------- */

STORM long storm_leaf(long x)
{
	return x * 7 + 3;
}
VIA(storm_leaf);

/* Three calls, three exits per iteration of the flat-out loop. */
STORM long storm_pair(long x)
{
	return vp_storm_leaf(x) + vp_storm_leaf(x + 1); /* 14 x + 13 */
}
VIA(storm_pair);

/* The handler's work. */
STORM long storm_work(long n)
{
	long s = 0;

	for (long i = 0; i < 3; i++)
		s += vp_storm_leaf(n + i);
	return s; /* 21 n + 30 */
}
VIA(storm_work);

STORM void storm_marker(void)
{
	atomic_fetch_add_explicit(&marker_calls, 1, memory_order_relaxed);
}
VIA(storm_marker);

/* ---- per-thread storm state ------------------------------------------------------ */

struct storm {
	int sig;                    /* the timer's signal */
	int thread_timer;           /* timer (1) or the process's ITIMER_REAL (0) */
	int breakpoint;             /* no timer: SIGTRAPs from hardware breakpoints */
	timer_t timer;
	int on_altstack;            /* the handler must run on this thread's sigaltstack */
	int nodefer;                /* the handler re-raises itself from nested calls */
	int longjmp;                /* the handler leaves with siglongjmp */
	volatile sig_atomic_t hits; /* handler runs */
	volatile sig_atomic_t bad;  /* handler runs that computed wrong, or ran where they must not */
	volatile sig_atomic_t depth, max_depth;
	volatile sig_atomic_t jump_armed;
	char *altstack;
	sigjmp_buf jump;
	long iterations, wrong, jumps;
};

static __thread struct storm *current;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void storm_disarm(struct storm *s)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct itimerspec off_spec = { { 0, 0 }, { 0, 0 } };

	if (s->breakpoint)
		return; /* each breakpoint fires once (PERF_EVENT_IOC_REFRESH 1) */
	if (s->thread_timer)
		timer_settime(s->timer, 0, &off_spec, NULL);
	else
		setitimer(ITIMER_REAL, &off, NULL);
}

STORM int storm_raise(int levels);
VIA(storm_raise);

/* The raise comes from `levels` instrumented frames down. */
STORM int storm_raise(int levels)
{
	if (levels > 0)
		return vp_storm_raise(levels - 1) + 1;
	return raise(current->sig);
}

/* Instrumented itself: its return address is __restore_rt. */
STORM void storm_handler(int sig, siginfo_t *info, void *ucontext)
{
	struct storm *s = current;
	int saved = errno;
	long n = s->hits;
	char here;

	(void)info;
	if (verbose) {
		unsigned i = atomic_fetch_add_explicit(&n_landings, 1, memory_order_relaxed);

		if (i < LANDINGS_MAX)
			landings[i] = ((ucontext_t *)ucontext)->uc_mcontext.gregs[REG_RIP];
	}
	if (sig != s->sig || vp_storm_work(n) != 21 * n + 30)
		s->bad++;
	if (s->on_altstack && (&here < s->altstack || &here >= s->altstack + ALTSTACK_SIZE))
		s->bad++;
	s->hits = n + 1;
	if (s->hits == storm_signals)
		storm_disarm(s); /* even if the thread never got to run between signals */
	if (s->nodefer && s->depth < NODEFER_DEPTH) {
		/* SA_NODEFER: this raise runs the handler again, nested, before it returns */
		s->depth++;
		if (s->depth > s->max_depth)
			s->max_depth = s->depth;
		if (vp_storm_raise(s->depth) != s->depth)
			s->bad++;
		s->depth--;
	}
	errno = saved;
	if (s->longjmp && s->jump_armed)
		siglongjmp(s->jump, 1);
}

/* The thread's flat-out loop; a siglongjmp from the handler lands back in it. */
static void storm_loop(struct storm *s)
{
	volatile long i = 0;
	double deadline = now_s() + STORM_DEADLINE_S;

	if (s->longjmp && sigsetjmp(s->jump, 1))
		s->jumps++; /* the interrupted iteration is abandoned, unchecked */
	s->jump_armed = 1;
	while (s->hits < storm_signals) {
		long k = i, r = vp_storm_pair(k);

		if (r != 14 * k + 13)
			s->wrong++;
		i = k + 1;
		if ((k & 1023) == 0 && now_s() > deadline)
			break;
	}
	s->jump_armed = 0;
	s->iterations = i;
}

static int install_handler(struct storm *s, char *why)
{
	struct sigaction sa = { .sa_sigaction = storm_handler };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	if (s->on_altstack)
		sa.sa_flags |= SA_ONSTACK;
	if (s->nodefer)
		sa.sa_flags |= SA_NODEFER;
	FAIL_IF(sigaction(s->sig, &sa, NULL) != 0, "sigaction: %s", strerror(errno));
	return 0;
}

/* The storm is over: pending signals of it are discarded, never default-handled. */
static void drop_handler(int sig)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };

	sigaction(sig, &ign, NULL);
}

/* After the storm, calls at leisure: each one must reach the trace. */
static void call_markers(void)
{
	usleep(20 * 1000); /* the flusher (every 5 ms) empties the ring a storm filled */
	for (int i = 0; i < MARKER_CALLS; i++) {
		vp_storm_marker();
		if (i % 10 == 9)
			usleep(1000);
	}
}

static int check_storm(const char *name, struct storm *s, double seconds, char *why)
{
	fprintf(stderr, "storm %s: %ld signals in %.3f s (%.0f/s), %ld iterations (%.1f M calls/s)",
		name, (long)s->hits, seconds, s->hits / seconds, s->iterations,
		3e-6 * s->iterations / seconds);
	if (s->nodefer)
		fprintf(stderr, ", nested %d deep", (int)s->max_depth);
	if (s->longjmp)
		fprintf(stderr, ", %ld siglongjmps", s->jumps);
	fputc('\n', stderr);
	FAIL_IF(s->hits < storm_signals, "only %ld of %ld signals in %.0f s", (long)s->hits,
		storm_signals, STORM_DEADLINE_S);
	FAIL_IF(s->wrong, "%ld of %ld interrupted computations wrong", s->wrong, s->iterations);
	FAIL_IF(s->bad, "%d handler runs computed wrong or ran off their stack", (int)s->bad);
	FAIL_IF(s->nodefer && s->max_depth != NODEFER_DEPTH, "handler nested %d deep, expected %d",
		(int)s->max_depth, NODEFER_DEPTH);
	FAIL_IF(s->longjmp && s->jumps == 0, "no siglongjmp out of the handler");
	return 0;
}

/*
 * One storm on this thread from setitimer(ITIMER_REAL). Under SA_NODEFER each
 * tick runs the handler 1 + NODEFER_DEPTH times: the ticks are spaced as much
 * more, or the thread would spend all its time in handlers (and the nesting
 * would grow without bound).
 */
static int itimer_storm(const char *name, struct storm *s, char *why)
{
	long us = s->nodefer ? storm_interval_us * (1 + NODEFER_DEPTH) : storm_interval_us;
	struct timeval every = { us / 1000000, us % 1000000 };
	struct itimerval fast = { every, every };
	stack_t ss = { 0 };
	double t0;
	int failed;

	s->sig = SIGALRM;
	current = s;
	if (s->on_altstack) {
		s->altstack = malloc(ALTSTACK_SIZE);
		ss.ss_sp = s->altstack;
		ss.ss_size = ALTSTACK_SIZE;
		FAIL_IF(!s->altstack || sigaltstack(&ss, NULL) != 0, "sigaltstack: %s",
			strerror(errno));
	}
	if (install_handler(s, why))
		return 1;
	t0 = now_s();
	FAIL_IF(setitimer(ITIMER_REAL, &fast, NULL) != 0, "setitimer: %s", strerror(errno));
	storm_loop(s);
	storm_disarm(s);
	drop_handler(SIGALRM);
	failed = check_storm(name, s, now_s() - t0, why);
	if (s->on_altstack) {
		ss.ss_flags = SS_DISABLE;
		sigaltstack(&ss, NULL);
		free(s->altstack);
	}
	call_markers();
	return failed;
}

static int case_itimer(char *why)
{
	struct storm s = { 0 };

	return itimer_storm("itimer", &s, why);
}

static int case_altstack(char *why)
{
	struct storm s = { .on_altstack = 1 };

	return itimer_storm("altstack", &s, why);
}

static int case_nodefer(char *why)
{
	struct storm s = { .nodefer = 1 };

	return itimer_storm("nodefer", &s, why);
}

static int case_longjmp(char *why)
{
	struct storm s = { .longjmp = 1 };

	return itimer_storm("longjmp", &s, why);
}

/* ---- per-thread timers: timer_create(SIGEV_THREAD_ID) ------------------------------ */

struct thread_job {
	int index;
	int failed;
	char why[WHY_LEN];
};

static pthread_barrier_t storm_barrier;

static int thread_storm(struct thread_job *job)
{
	struct storm s = { .sig = SIGRTMIN, .thread_timer = 1 };
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN };
	struct timespec every = { storm_interval_us / 1000000, storm_interval_us % 1000000 * 1000 };
	struct itimerspec fast = { every, every };
	char *why = job->why, name[32];
	sigset_t blocked;
	double t0;

	sigemptyset(&blocked);
	sigaddset(&blocked, SIGRTMIN);
	current = &s;
	sev.sigev_notify_thread_id = gettid();
	FAIL_IF(timer_create(CLOCK_MONOTONIC, &sev, &s.timer) != 0, "timer_create: %s",
		strerror(errno));
	pthread_barrier_wait(&storm_barrier); /* the storms overlap */
	t0 = now_s();
	FAIL_IF(timer_settime(s.timer, 0, &fast, NULL) != 0, "timer_settime: %s",
		strerror(errno));
	storm_loop(&s);
	timer_delete(s.timer);
	pthread_sigmask(SIG_BLOCK, &blocked, NULL); /* a last pending one never finds s gone */
	pthread_barrier_wait(&storm_barrier); /* the handler stays until both are done */
	snprintf(name, sizeof(name), "thread_timer[%d]", job->index);
	return check_storm(name, &s, now_s() - t0, why);
}

static void *thread_main(void *arg)
{
	struct thread_job *job = arg;

	job->failed = thread_storm(job);
	call_markers();
	return NULL;
}

static int case_thread_timer(char *why)
{
	struct storm install = { .sig = SIGRTMIN };
	pthread_t tids[STORM_THREADS];
	struct thread_job jobs[STORM_THREADS];

	if (install_handler(&install, why))
		return 1;
	pthread_barrier_init(&storm_barrier, NULL, STORM_THREADS);
	for (int i = 0; i < STORM_THREADS; i++) {
		jobs[i] = (struct thread_job){ .index = i };
		FAIL_IF(pthread_create(&tids[i], NULL, thread_main, &jobs[i]) != 0,
			"pthread_create");
	}
	for (int i = 0; i < STORM_THREADS; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&storm_barrier);
	drop_handler(SIGRTMIN);
	for (int i = 0; i < STORM_THREADS; i++)
		FAIL_IF(jobs[i].failed, "thread %d: %s", i, jobs[i].why);
	return 0;
}

/* ---- a signal at every instruction of the agent's hooks: hardware breakpoints ------ */

/*
 * Timers land where the CPU lingers (after rdtsc, after stores that miss):
 * an instruction the agent passes quickly may see one signal in 100,000. Here
 * a one-shot execute breakpoint (perf_event_open, sigtrap: a SIGTRAP to this
 * thread before the instruction runs) is put on each byte of the agent's
 * hooks in turn while the thread calls instrumented functions; the bytes
 * that are instruction starts on the path taken get exactly one signal each.
 * The agent's symbols come from its .symtab (they are hidden): with no agent,
 * a stripped one or no breakpoints (perf_event_paranoid, a hypervisor), the
 * case says why on stderr and tests nothing.
 */
static const char *const hook_symbols[] = {
	"profagent_entry_trampoline",
	"profagent_enter_hook",
	"profagent_exit_trampoline",
	"profagent_exit_hook",
};

#define MAX_RANGES 16

struct code_range {
	uintptr_t start;
	size_t size;
};

struct agent_module {
	char path[4096];
	uintptr_t base;
};

static int find_agent(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct agent_module *m = arg;

	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libprofagent.so"))
		return 0;
	snprintf(m->path, sizeof(m->path), "%s", info->dlpi_name);
	m->base = info->dlpi_addr;
	return 1;
}

/* The symbol, or a compiler-split part of it ("NAME.cold"). */
static int is_hook_symbol(const char *name)
{
	for (size_t i = 0; i < sizeof(hook_symbols) / sizeof(hook_symbols[0]); i++) {
		size_t n = strlen(hook_symbols[i]);

		if (strncmp(name, hook_symbols[i], n) == 0 && (name[n] == '\0' || name[n] == '.'))
			return 1;
	}
	return 0;
}

/* The hooks' code in this process; 0 ranges with the reason in why. */
static int hook_ranges(struct code_range *ranges, char *why)
{
	struct agent_module m = { "", 0 };
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	struct stat st;
	int fd, n = 0;
	void *map;

	if (!dl_iterate_phdr(find_agent, &m)) {
		snprintf(why, WHY_LEN, "no libprofagent.so in this process");
		return 0;
	}
	fd = open(m.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(why, WHY_LEN, "%s: %s", m.path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(why, WHY_LEN, "mmap %s: %s", m.path, strerror(errno));
		return 0;
	}
	eh = map;
	sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++) {
		const Elf64_Sym *sym = (const Elf64_Sym *)((const char *)map + sh[i].sh_offset);
		const char *names = (const char *)map + sh[sh[i].sh_link].sh_offset;

		if (sh[i].sh_type != SHT_SYMTAB)
			continue;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym) && n < MAX_RANGES; k++)
			if (ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC && sym[k].st_size &&
			    is_hook_symbol(names + sym[k].st_name))
				ranges[n++] = (struct code_range){ m.base + sym[k].st_value,
								   sym[k].st_size };
	}
	munmap(map, st.st_size);
	if (n == 0)
		snprintf(why, WHY_LEN, "%s has no .symtab naming the hooks (stripped?)", m.path);
	return n;
}

/*
 * The exit landings (x86-64) of the workload's functions, where their ret
 * goes: a signal there has the function returned and its exit not begun.
 */
static int landing_ranges(struct code_range *ranges, int n)
{
	const void *const funcs[] = { (const void *)storm_pair, (const void *)storm_leaf };

	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]) && n < MAX_RANGES; i++) {
		uintptr_t landing = stub_landing_of(funcs[i]);

		if (landing != 1)
			ranges[n++] = (struct code_range){ landing, STUB_LANDING_LEN };
	}
	return n;
}

static int breakpoint_open(uintptr_t addr)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_BREAKPOINT,
		.size = sizeof(a),
		.bp_type = HW_BREAKPOINT_X,
		.bp_addr = addr,
		.bp_len = sizeof(long),
		.sample_period = 1,
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
		.remove_on_exec = 1, /* required by sigtrap */
		.sigtrap = 1,
	};

	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The calls each breakpoint waits for: enter and exit hooks, nested. */
static void breakpoint_workload(struct storm *s)
{
	for (long k = 0; k < 8; k++) {
		if (vp_storm_pair(k) != 14 * k + 13)
			s->wrong++;
		s->iterations++;
	}
}

/* One breakpoint per byte of the ranges; returns the bytes that fired. */
static long breakpoint_scan(struct storm *s, const struct code_range *ranges, int n, char *why)
{
	volatile long fired = 0;

	for (int r = 0; r < n; r++) {
		for (volatile size_t off = 0; off < ranges[r].size; off++) {
			long before = s->hits;
			int fd = breakpoint_open(ranges[r].start + off);

			if (fd < 0) {
				snprintf(why, WHY_LEN, "perf_event_open: %s", strerror(errno));
				return -1;
			}
			if (s->longjmp && sigsetjmp(s->jump, 1)) {
				s->jumps++;
			} else {
				s->jump_armed = 1;
				/* enabled for one overflow: the handler's own calls pass freely */
				ioctl(fd, PERF_EVENT_IOC_REFRESH, 1);
				breakpoint_workload(s);
			}
			s->jump_armed = 0;
			ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
			close(fd);
			fired += s->hits > before;
		}
	}
	return fired;
}

static int breakpoint_storm(const char *name, struct storm *s, char *why)
{
	struct code_range ranges[MAX_RANGES];
	char skip[WHY_LEN] = "";
	int n = hook_ranges(ranges, skip), fd;
	size_t bytes = 0;
	long fired;

	if (n > 0)
		n = landing_ranges(ranges, n);
	s->sig = SIGTRAP;
	s->breakpoint = 1;
	current = s;
	if (n > 0) {
		fd = breakpoint_open(ranges[0].start);
		if (fd < 0)
			snprintf(skip, WHY_LEN, "no hardware breakpoints: perf_event_open: %s",
				 strerror(errno));
		else
			close(fd);
	}
	if (skip[0]) {
		fprintf(stderr, "storm %s: nothing tested: %s\n", name, skip);
		call_markers();
		return 0; /* the same line as a plain run's */
	}
	for (int i = 0; i < n; i++)
		bytes += ranges[i].size;
	if (install_handler(s, why))
		return 1;
	fired = breakpoint_scan(s, ranges, n, why);
	drop_handler(SIGTRAP);
	if (fired < 0)
		return 1;
	fprintf(stderr, "storm %s: %ld signals, one at each instruction reached of %d functions "
			"(%zu bytes tried)%s\n",
		name, (long)s->hits, n, bytes, s->longjmp ? ", each left by siglongjmp" : "");
	FAIL_IF(fired == 0, "no breakpoint fired in %zu bytes of the hooks", bytes);
	FAIL_IF(s->wrong, "%ld of %ld calls wrong", s->wrong, s->iterations);
	FAIL_IF(s->bad, "%d handler runs computed wrong", (int)s->bad);
	call_markers();
	return 0;
}

static int case_breakpoints(char *why)
{
	struct storm s = { 0 };

	return breakpoint_storm("breakpoints", &s, why);
}

static int case_breakpoints_longjmp(char *why)
{
	struct storm s = { .longjmp = 1 };

	return breakpoint_storm("breakpoints_longjmp", &s, why);
}

/* ---- -v: where the signals interrupted the program ------------------------------- */

struct landing_count {
	const char *module;
	uintptr_t offset; /* pc - module base: objdump's address in that file */
	unsigned n;
};

static int by_count(const void *a, const void *b)
{
	const struct landing_count *x = a, *y = b;

	return (int)y->n - (int)x->n;
}

/* Per module, then the most frequent pcs (module+offset, to look up with objdump). */
static void print_landings(void)
{
	unsigned n = atomic_load(&n_landings), distinct = 0;
	struct landing_count *pcs;

	if (n > LANDINGS_MAX)
		n = LANDINGS_MAX;
	pcs = calloc(n ? n : 1, sizeof(*pcs));
	if (!pcs)
		return;
	for (unsigned i = 0; i < n; i++) {
		Dl_info dl = { 0 };
		const char *mod = "?";
		uintptr_t off = landings[i];
		unsigned k;

		if (dladdr((void *)landings[i], &dl) && dl.dli_fname) {
			mod = strrchr(dl.dli_fname, '/') ? strrchr(dl.dli_fname, '/') + 1 : dl.dli_fname;
			off = landings[i] - (uintptr_t)dl.dli_fbase;
		}
		for (k = 0; k < distinct && (pcs[k].offset != off || strcmp(pcs[k].module, mod)); k++)
			;
		if (k == distinct)
			pcs[distinct++] = (struct landing_count){ mod, off, 0 };
		pcs[k].n++;
	}
	qsort(pcs, distinct, sizeof(*pcs), by_count);
	fprintf(stderr, "landings: %u signals at %u distinct pcs\n", n, distinct);
	for (unsigned i = 0; i < distinct; i++) {
		unsigned in_module = 0, first = 1;

		for (unsigned k = 0; k < i; k++)
			first &= strcmp(pcs[k].module, pcs[i].module) != 0;
		if (!first)
			continue;
		for (unsigned k = 0; k < distinct; k++)
			if (strcmp(pcs[k].module, pcs[i].module) == 0)
				in_module += pcs[k].n;
		fprintf(stderr, "  %-24s %6u (%.1f%%)\n", pcs[i].module, in_module,
			100.0 * in_module / n);
	}
	for (unsigned i = 0; i < distinct && i < 12; i++)
		fprintf(stderr, "  %s+0x%lx: %u\n", pcs[i].module, (unsigned long)pcs[i].offset,
			pcs[i].n);
	free(pcs);
}

/* ---- driver ---------------------------------------------------------------------- */

struct storm_case {
	const char *name;
	int (*run)(char *why);
};

static const struct storm_case cases[] = {
	{ "itimer", case_itimer },
	{ "thread_timer", case_thread_timer },
	{ "altstack", case_altstack },
	{ "nodefer", case_nodefer },
	{ "longjmp", case_longjmp },
	{ "breakpoints", case_breakpoints },
	{ "breakpoints_longjmp", case_breakpoints_longjmp },
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

int main(int argc, char **argv)
{
	int failures = 0, first = 1, selected[N_CASES] = { 0 }, any = 0;

	setvbuf(stdout, NULL, _IOLBF, 0); /* a crash still shows the cases that passed */
	while (first < argc && argv[first][0] == '-') {
		if (strcmp(argv[first], "-v") == 0) {
			verbose = 1;
			first++;
		} else if (first + 1 < argc && strcmp(argv[first], "-n") == 0) {
			storm_signals = atol(argv[first + 1]);
			first += 2;
		} else if (first + 1 < argc && strcmp(argv[first], "-i") == 0) {
			storm_interval_us = atol(argv[first + 1]);
			first += 2;
		} else {
			break; /* usage, below */
		}
	}
	for (int i = first; i < argc; i++) {
		size_t c = 0;

		while (c < N_CASES && strcmp(argv[i], cases[c].name) != 0)
			c++;
		if (c == N_CASES || storm_signals <= 0 || storm_interval_us <= 0 ||
		    storm_interval_us >= 1000000) {
			fprintf(stderr, "usage: %s [-v] [-n SIGNALS] [-i USEC] [CASE...]; cases:",
				argv[0]);
			for (c = 0; c < N_CASES; c++)
				fprintf(stderr, " %s", cases[c].name);
			fputc('\n', stderr);
			return 2;
		}
		selected[c] = any = 1;
	}
	for (size_t c = 0; c < N_CASES; c++) {
		char why[WHY_LEN] = "";

		if (any && !selected[c])
			continue;
		if (cases[c].run(why)) {
			printf("case %s FAIL %s\n", cases[c].name, why);
			failures++;
		} else {
			printf("case %s ok\n", cases[c].name);
		}
	}
	printf("count storm_marker %ld\n", atomic_load(&marker_calls));
	if (verbose)
		print_landings();
	return failures ? 1 : 0;
}
