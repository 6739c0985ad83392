// SPDX-License-Identifier: MIT
/*
 * A signal before every profiler instruction, one at a time. A worker thread
 * runs a fixed probe of ss_* calls (nesting, recursion, longjmp out of two
 * frames, backtrace(), a register check); a tracer child ptraces it,
 * single-steps one probe to learn its instructions, then stops the worker
 * exactly before each one that lies in profiler code (libprofagent.so, the
 * anonymous executable mappings that hold the stubs, the patched first bytes
 * of ss_ functions) and delivers SIGUSR1 there, in four passes of handler
 * behaviour. The worker checks every result after each visit; the tracer
 * names pass, step, rip and symbol of whatever went wrong. Run under
 * `profctl run --freq 0 --funcs 'ss_*,backtrace'` by
 * tests/integration/test_signal_steps.sh, and plain (then only the ss_ entry
 * bytes are profiler code). Prints `count ss_NAME N` for its own calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SS_FN __attribute__((noinline, used, noipa))
#define N_PASSES 4
/* A hang, not a time limit: a visit takes well under a millisecond. */
#define WATCHDOG_SECONDS 30
#define PATCHED_ENTRY_BYTES 16

static const char *const pass_names[N_PASSES + 1] = {
	"", "handler calls ss_ functions", "handler on a sigaltstack",
	"nested SA_NODEFER handlers", "handler leaves by siglongjmp",
};

/* ---- shared by the worker, main and the tracer child (MAP_SHARED) ------- */

enum mode { MODE_SETUP = 1, MODE_LEARN, MODE_VISIT, MODE_DONE };
enum category { CAT_ENTER, CAT_EXIT, CAT_TRAMP, CAT_STUB, CAT_OTHER, N_CATS };
static const char *const cat_names[N_CATS] = { "enter hook", "exit hook", "trampolines",
					       "stubs", "other" };

/* The worker's verdict on one probe. Only OUT_UNRECORDED leaves the agent's state sane. */
#define OUT_PROBE 0x01      /* a probe call returned a wrong value */
#define OUT_REGS 0x02       /* a register changed across an instrumented call */
#define OUT_BACKTRACE 0x04  /* backtrace() did not see the true callers */
#define OUT_HANDLER 0x08    /* the handler ran the wrong number of times or computed wrong */
#define OUT_FLOW 0x10       /* the probe was abandoned, or was not when it should have been */
#define OUT_LOST 0x20       /* the probe's own calls were not recorded: instrumentation lost */
#define OUT_UNRECORDED 0x40 /* calls made by the handler were not recorded */
#define OUT_FATAL (~OUT_UNRECORDED)

struct pass_stats {
	unsigned steps;    /* instructions in one probe (learned) */
	unsigned planned;  /* of them in profiler code */
	unsigned cats[N_CATS];
	unsigned visited, failed, skipped;
	int complete;
};

struct ctl {
	pid_t tid;
	int mode, pass;        /* tracer -> worker, written while it is stopped at a marker */
	unsigned outcome;      /* worker -> tracer: OUT_* of the last probe */
	char detail[512];
	struct pass_stats stats[N_PASSES + 1];
	int fatal;             /* tracer -> main: a visit broke the process */
	int windows;           /* failing address ranges reported */
	int skip;              /* ptrace not possible here */
	char skip_reason[200];
	unsigned long singlesteps, stops;
	double learn_s, visit_s;
};

static struct ctl *ctl;

/* ---- the instrumented functions ------------------------------------------ */

enum ss_id {
	SS_OUTER, SS_INNER, SS_RECURSE, SS_JUMP_OUTER, SS_JUMP_LEAF, SS_AFTER_JUMP, SS_CATCH,
	SS_BT_OUTER, SS_BT, SS_REGS_LEAF, SS_HANDLER_WORK, SS_SETTLE, SS_COUNT
};
static const char *const ss_names[SS_COUNT] = {
	"ss_outer", "ss_inner", "ss_recurse", "ss_jump_outer", "ss_jump_leaf", "ss_after_jump",
	"ss_catch", "ss_bt_outer", "ss_bt", "ss_regs_leaf", "ss_handler_work", "ss_settle",
};
/* Calls counted at entry (lock add: one instruction, whatever interrupts). The asm uses it. */
__attribute__((used)) long ss_calls[SS_COUNT];
#define SS_REGS_LEAF_OFFSET "72"
_Static_assert(SS_REGS_LEAF * sizeof(long) == 72, "asm offset");

extern char __executable_start[], etext[];
/* The return address every hijacked call has; 0 when nothing instruments us. */
static uintptr_t exit_trampoline;
static uintptr_t first_return;
static volatile int handler_depth;
static long unhijacked_probe, unhijacked_handler;

static void ss_note_entry(int id, uintptr_t ret)
{
	__atomic_fetch_add(&ss_calls[id], 1, __ATOMIC_RELAXED);
	if (!first_return)
		first_return = ret;
	if (exit_trampoline && ret != exit_trampoline)
		__atomic_fetch_add(handler_depth ? &unhijacked_handler : &unhijacked_probe, 1,
				   __ATOMIC_RELAXED);
}
/* At entry the return slot holds the exit trampoline if the agent recorded the call. */
#define SS_ENTER(id) ss_note_entry(id, (uintptr_t)__builtin_return_address(0))

SS_FN long ss_inner(long x)
{
	SS_ENTER(SS_INNER);
	return x * 3 + 1;
}

SS_FN long ss_outer(long x)
{
	long r;

	SS_ENTER(SS_OUTER);
	r = ss_inner(x);
	r += 2 * ss_inner(x + 1);
	__asm__ volatile("" : "+r"(r));
	return r;
}

SS_FN long ss_recurse(long n)
{
	long r;

	SS_ENTER(SS_RECURSE);
	if (n == 0)
		return 1;
	r = ss_recurse(n - 1);
	__asm__ volatile("" : "+r"(r)); /* a real recursion, not a loop */
	return 2 * r + n;
}

static volatile long jump_value;

SS_FN void ss_jump_leaf(jmp_buf *env, long v)
{
	SS_ENTER(SS_JUMP_LEAF);
	jump_value = v;
	longjmp(*env, 1);
}

SS_FN long ss_jump_outer(jmp_buf *env, long v)
{
	SS_ENTER(SS_JUMP_OUTER);
	ss_jump_leaf(env, v + 1);
	__asm__ volatile("" ::: "memory"); /* not a tail call: two frames to leave */
	return -1;
}

SS_FN long ss_after_jump(long x)
{
	SS_ENTER(SS_AFTER_JUMP);
	return x + 100;
}

/* Catches its own longjmp, then returns with the two frames above it gone. */
SS_FN long ss_catch(long v)
{
	jmp_buf env;

	SS_ENTER(SS_CATCH);
	jump_value = 0;
	if (setjmp(env) == 0)
		ss_jump_outer(&env, v);
	return jump_value * 10;
}

/* Bit i set: frame i of backtrace() is not the function it must be. */
static long bt_frames_check(void **frames, int n)
{
	static const char *const want[] = { "ss_bt", "ss_bt_outer", "probe_run" };
	long bad = 0;

	for (int i = 0; i < 3; i++) {
		Dl_info info;

		if (i >= n || !dladdr(frames[i], &info) || !info.dli_sname ||
		    strcmp(info.dli_sname, want[i]) != 0)
			bad |= 1l << i;
	}
	return bad;
}

SS_FN long ss_bt(void)
{
	void *frames[8];
	int n;
	long r;

	SS_ENTER(SS_BT);
	n = backtrace(frames, 8);
	r = bt_frames_check(frames, n);
	__asm__ volatile("" : "+r"(r));
	return r;
}

SS_FN long ss_bt_outer(void)
{
	long r;

	SS_ENTER(SS_BT_OUTER);
	r = ss_bt();
	__asm__ volatile("" : "+r"(r)); /* its frame must be there for the walk */
	return r;
}

SS_FN long ss_handler_work(long x)
{
	long r;

	SS_ENTER(SS_HANDLER_WORK);
	r = ss_outer(x) + ss_recurse(2);
	__asm__ volatile("" : "+r"(r));
	return r;
}

SS_FN long ss_settle(void)
{
	SS_ENTER(SS_SETTLE);
	return 42;
}

/*
 * probe_regs loads a pattern into every general-purpose register but rsp and
 * rbp, calls ss_regs_leaf (which touches only rax and the flags) and stores
 * them all in regs_after: the trampolines must be invisible, even to
 * caller-saved registers (IPA-RA callers rely on it), whatever signal
 * arrives in between.
 */
#define N_REGS 14
static const char *const reg_names[N_REGS] = { "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8",
					       "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
__attribute__((used)) uint64_t regs_after[N_REGS];
#define REG_PATTERN(i) (0x1111111111111111ull * (uint64_t)(i) + 0x0102030405060708ull)
void probe_regs(void);
__asm__(".text\n"
	".globl ss_regs_leaf\n"
	".type ss_regs_leaf, @function\n"
	".p2align 4\n"
	"ss_regs_leaf:\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	"	lock incq ss_calls+" SS_REGS_LEAF_OFFSET "(%rip)\n"
	"	movl $0x5a5a, %eax\n"
	"	popq %rbp\n"
	"	ret\n"
	".size ss_regs_leaf, .-ss_regs_leaf\n"
	".globl probe_regs\n"
	".type probe_regs, @function\n"
	".p2align 4\n"
	"probe_regs:\n"
	"	pushq %rbp\n"
	"	movq %rsp, %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	subq $8, %rsp\n"
	"	movabsq $0x1213141516171819, %rbx\n"
	"	movabsq $0x2324252627282920, %rcx\n"
	"	movabsq $0x3435363738393a3b, %rdx\n"
	"	movabsq $0x4546474849404142, %rsi\n"
	"	movabsq $0x565758595a5b5c5d, %rdi\n"
	"	movabsq $0x6768696a6b6c6d6e, %r8\n"
	"	movabsq $0x78797a7b7c7d7e7f, %r9\n"
	"	movabsq $0x0a0b0c0d0e0f0102, %r10\n"
	"	movabsq $0x1b1c1d1e1f101112, %r11\n"
	"	movabsq $0x2c2d2e2f20212223, %r12\n"
	"	movabsq $0x3d3e3f3031323334, %r13\n"
	"	movabsq $0x4e4f404142434445, %r14\n"
	"	movabsq $0x5f50515253545556, %r15\n"
	"	call ss_regs_leaf\n"
	"	movq %rax, regs_after+0(%rip)\n"
	"	movq %rbx, regs_after+8(%rip)\n"
	"	movq %rcx, regs_after+16(%rip)\n"
	"	movq %rdx, regs_after+24(%rip)\n"
	"	movq %rsi, regs_after+32(%rip)\n"
	"	movq %rdi, regs_after+40(%rip)\n"
	"	movq %r8, regs_after+48(%rip)\n"
	"	movq %r9, regs_after+56(%rip)\n"
	"	movq %r10, regs_after+64(%rip)\n"
	"	movq %r11, regs_after+72(%rip)\n"
	"	movq %r12, regs_after+80(%rip)\n"
	"	movq %r13, regs_after+88(%rip)\n"
	"	movq %r14, regs_after+96(%rip)\n"
	"	movq %r15, regs_after+104(%rip)\n"
	"	addq $8, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size probe_regs, .-probe_regs\n");
static const uint64_t regs_expected[N_REGS] = {
	0x5a5a,             0x1213141516171819, 0x2324252627282920, 0x3435363738393a3b,
	0x4546474849404142, 0x565758595a5b5c5d, 0x6768696a6b6c6d6e, 0x78797a7b7c7d7e7f,
	0x0a0b0c0d0e0f0102, 0x1b1c1d1e1f101112, 0x2c2d2e2f20212223, 0x3d3e3f3031323334,
	0x4e4f404142434445, 0x5f50515253545556,
};

/* ---- the probe and what it must return ------------------------------------ */

void sigstep_mark_begin(void);
void sigstep_mark_end(void);
/* The tracer's stops: rip is the marker + 1 there. */
__asm__(".text\n"
	".globl sigstep_mark_begin\n"
	".type sigstep_mark_begin, @function\n"
	"sigstep_mark_begin:\n"
	"	int3\n"
	"	ret\n"
	".size sigstep_mark_begin, .-sigstep_mark_begin\n"
	".globl sigstep_mark_end\n"
	".type sigstep_mark_end, @function\n"
	"sigstep_mark_end:\n"
	"	int3\n"
	"	ret\n"
	".size sigstep_mark_end, .-sigstep_mark_end\n");

struct probe_result {
	long outer, recurse, jump, after, caught, bt;
	int done;
};
static struct probe_result res;
static jmp_buf probe_env;

__attribute__((noinline, used)) void probe_run(void)
{
	res.outer = ss_outer(7);
	res.recurse = ss_recurse(3);
	jump_value = 0;
	if (setjmp(probe_env) == 0)
		ss_jump_outer(&probe_env, 4); /* longjmp out of two instrumented frames */
	res.jump = jump_value;
	res.after = ss_after_jump(5); /* the call that finds their entries stale */
	res.caught = ss_catch(6);     /* returns over the stale entries of its callees */
	res.bt = ss_bt_outer();
	probe_regs();
	res.done = 1;
}

static long ref_recurse(long n)
{
	return n == 0 ? 1 : 2 * ref_recurse(n - 1) + n;
}

static long ref_outer(long x)
{
	return (x * 3 + 1) + 2 * ((x + 1) * 3 + 1);
}

#define HANDLER_ARG 3

/* ---- signal handlers ---------------------------------------------------------- */

static volatile int cur_pass;
static volatile int handler_runs, handler_bad, handler_off_stack;
static volatile long handler_last;
static volatile int abandoned;
static sigjmp_buf visit_env;
static char *altstack;
#define ALTSTACK_SIZE (256 << 10)

static void handler_work(void)
{
	long r = ss_handler_work(HANDLER_ARG);

	if (r != ref_outer(HANDLER_ARG) + ref_recurse(2)) {
		handler_bad++;
		handler_last = r;
	}
}

static void on_sigusr1(int sig)
{
	int saved_errno = errno;
	int depth = ++handler_depth;
	char here;

	(void)sig;
	handler_runs++;
	if (cur_pass == 2 && (&here < altstack || &here >= altstack + ALTSTACK_SIZE))
		handler_off_stack++;
	handler_work();
	if (cur_pass == 3 && depth == 1) {
		raise(SIGUSR1); /* SA_NODEFER: runs nested, right away */
		handler_work();
	}
	handler_depth--;
	errno = saved_errno;
	if (cur_pass == 4)
		siglongjmp(visit_env, 1);
}

static int pass_setup(int pass)
{
	struct sigaction sa = { .sa_handler = on_sigusr1, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	if (pass == 2)
		sa.sa_flags |= SA_ONSTACK;
	if (pass == 3)
		sa.sa_flags |= SA_NODEFER;
	cur_pass = pass;
	return sigaction(SIGUSR1, &sa, NULL);
}

/* ---- the worker ------------------------------------------------------------------ */

static long settle_result;

static void visit_reset(void)
{
	memset(&res, 0, sizeof(res));
	memset(regs_after, 0, sizeof(regs_after));
	handler_runs = handler_bad = handler_off_stack = 0;
	handler_depth = 0;
	unhijacked_probe = unhijacked_handler = 0;
	abandoned = 0;
	settle_result = 0;
}

static void detail_add(char *d, size_t len, const char *fmt, ...)
{
	size_t n = strlen(d);
	va_list ap;

	if (n && n + 2 < len) {
		strcpy(d + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(d + n, len - n, fmt, ap);
	va_end(ap);
}

static unsigned probe_check(char *d, size_t len)
{
	const struct {
		const char *what;
		long got, want;
	} calls[] = {
		{ "ss_outer(7)", res.outer, ref_outer(7) },
		{ "ss_recurse(3)", res.recurse, ref_recurse(3) },
		{ "longjmp out of ss_jump_outer(4)", res.jump, 5 },
		{ "ss_after_jump(5)", res.after, 105 },
		{ "ss_catch(6)", res.caught, 70 },
	};
	unsigned out = 0;

	if (!res.done) {
		detail_add(d, len, "the probe did not finish");
		return OUT_FLOW;
	}
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (calls[i].got != calls[i].want) {
			detail_add(d, len, "%s returned %ld, expected %ld", calls[i].what,
				   calls[i].got, calls[i].want);
			out |= OUT_PROBE;
		}
	if (res.bt) {
		detail_add(d, len, "backtrace() frames %s%s%s are not ss_bt, ss_bt_outer, probe_run",
			   res.bt & 1 ? "0 " : "", res.bt & 2 ? "1 " : "", res.bt & 4 ? "2" : "");
		out |= OUT_BACKTRACE;
	}
	for (int i = 0; i < N_REGS; i++)
		if (regs_after[i] != regs_expected[i]) {
			detail_add(d, len, "%s was 0x%llx after ss_regs_leaf, expected 0x%llx",
				   reg_names[i], (unsigned long long)regs_after[i],
				   (unsigned long long)regs_expected[i]);
			out |= OUT_REGS;
		}
	return out;
}

static unsigned visit_check(int mode, int pass, char *d, size_t len)
{
	int want_runs = mode == MODE_LEARN ? 0 : pass == 3 ? 2 : 1;
	int want_abandoned = mode != MODE_LEARN && pass == 4;
	unsigned out = 0;

	d[0] = '\0';
	if (handler_runs != want_runs) {
		detail_add(d, len, "the handler ran %d times, expected %d", handler_runs, want_runs);
		out |= OUT_HANDLER;
	}
	if (handler_bad) {
		detail_add(d, len, "ss_handler_work(%d) returned %ld in the handler, expected %ld",
			   HANDLER_ARG, handler_last, ref_outer(HANDLER_ARG) + ref_recurse(2));
		out |= OUT_HANDLER;
	}
	if (handler_off_stack) {
		detail_add(d, len, "the handler did not run on the alternate stack");
		out |= OUT_HANDLER;
	}
	if (abandoned != want_abandoned) {
		detail_add(d, len, abandoned ? "the probe was abandoned" :
					       "the handler's siglongjmp did not happen");
		out |= OUT_FLOW;
	}
	if (!abandoned && mode != MODE_SETUP)
		out |= probe_check(d, len);
	if (settle_result != 42) {
		detail_add(d, len, "ss_settle() returned %ld after the probe", settle_result);
		out |= OUT_PROBE;
	}
	if (unhijacked_probe) {
		detail_add(d, len, "%ld of the probe's calls went unrecorded (not hijacked)",
			   unhijacked_probe);
		out |= OUT_LOST;
	}
	if (unhijacked_handler) {
		detail_add(d, len, "%ld of the handler's calls went unrecorded (not hijacked)",
			   unhijacked_handler);
		out |= OUT_UNRECORDED;
	}
	return out;
}

struct worker_args {
	int ready_fd, go_fd;
	int baseline_failed;
};

/* Before the tracer: lazy binding resolved, libgcc_s loaded, the agent's thread state made. */
static int worker_warm_up(void)
{
	char d[512];
	unsigned out;

	ss_settle();
	if ((first_return < (uintptr_t)__executable_start || first_return >= (uintptr_t)etext))
		exit_trampoline = first_return;
	for (int i = 0; i < 2; i++) {
		visit_reset();
		probe_run();
		settle_result = ss_settle();
		out = visit_check(MODE_LEARN, 1, d, sizeof(d));
		if (out) {
			printf("FATAL without any signal: %s\n", d);
			return -1;
		}
	}
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker_args *a = arg;
	stack_t ss = { .ss_size = ALTSTACK_SIZE };
	char go = 0;

	ctl->tid = gettid();
	altstack = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	ss.ss_sp = altstack;
	if (altstack == MAP_FAILED || sigaltstack(&ss, NULL) || pass_setup(1)) {
		perror("sigstep: worker setup");
		a->baseline_failed = 1;
	} else if (worker_warm_up()) {
		a->baseline_failed = 1;
	}
	if (write(a->ready_fd, "r", 1) != 1 || read(a->go_fd, &go, 1) != 1 || go != 'g' ||
	    a->baseline_failed)
		return NULL;
	for (;;) {
		int mode;

		sigstep_mark_begin();
		mode = ctl->mode;
		if (mode == MODE_DONE)
			break;
		if (mode == MODE_SETUP && pass_setup(ctl->pass))
			perror("sigstep: sigaction");
		visit_reset();
		if (sigsetjmp(visit_env, 1) == 0) {
			if (mode == MODE_SETUP)
				raise(SIGUSR1); /* the handler once, outside profiler code */
			else
				probe_run();
		} else {
			abandoned = 1;
		}
		/* after a siglongjmp: the call that closes the abandoned entries */
		settle_result = ss_settle();
		sigstep_mark_end();
		ctl->outcome = visit_check(mode, cur_pass, ctl->detail, sizeof(ctl->detail));
	}
	return NULL;
}

/* ---- tracer: where code lies, and its names ------------------------------------- */

struct map_entry {
	uintptr_t lo, hi, offset;
	char perms[8];
	char path[PATH_MAX];
};

struct sym {
	uintptr_t value, size;
	const char *name;
};

struct elf_file {
	char path[PATH_MAX];
	uintptr_t bias;
	struct sym *syms;
	size_t n;
};

/* One instruction address the probe runs in profiler code, and its visits. */
struct rip_stat {
	uintptr_t rip;
	unsigned visits, failed, mask;
	char base[96]; /* "libprofagent.so profagent_exit_hook", "stub of ss_inner" */
	uintptr_t off;
};

struct step {
	uintptr_t rip, rsp;
};

struct visit {
	unsigned step, occurrence, stat;
	int cat;
};

struct tracer {
	pid_t pid, tid;
	struct map_entry *maps;
	size_t n_maps;
	struct elf_file files[16];
	size_t n_files;
	struct step *steps, *first_steps;
	size_t n_steps, cap_steps, n_first_steps;
	struct visit *visits;
	size_t n_visits;
	struct rip_stat *stats;
	size_t n_stats;
	unsigned *hash; /* rip -> stats index + 1, open addressing */
	size_t hash_cap;
	int from_pass, from_visit;
	char **skip;
	size_t n_skip;
	int crash_sig; /* a signal to hand on when detaching after a crash */
	int at_begin;  /* the worker is stopped at its begin marker: it can be let go */
};

static int maps_read(struct tracer *tr)
{
	char name[64], line[PATH_MAX + 128];
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", tr->pid);
	f = fopen(name, "r");
	if (!f)
		return -errno;
	tr->n_maps = 0;
	while (fgets(line, sizeof(line), f)) {
		struct map_entry *m;
		unsigned long lo, hi, off;
		int pos = 0;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &pos) < 4)
			continue;
		tr->maps = realloc(tr->maps, (tr->n_maps + 1) * sizeof(*tr->maps));
		m = &tr->maps[tr->n_maps++];
		m->lo = lo;
		m->hi = hi;
		m->offset = off;
		snprintf(m->perms, sizeof(m->perms), "%s", perms);
		snprintf(m->path, sizeof(m->path), "%s", pos ? line + pos : "");
		m->path[strcspn(m->path, "\n")] = '\0';
	}
	fclose(f);
	return 0;
}

static const struct map_entry *maps_find(const struct tracer *tr, uintptr_t addr)
{
	for (size_t i = 0; i < tr->n_maps; i++)
		if (addr >= tr->maps[i].lo && addr < tr->maps[i].hi)
			return &tr->maps[i];
	return NULL;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* Function symbols of one mapped file (.symtab, else .dynsym); the file stays mapped. */
static struct elf_file *elf_file_get(struct tracer *tr, const struct map_entry *m)
{
	struct elf_file *ef;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const unsigned char *base;
	struct stat st;
	int fd, pick = -1;

	for (size_t i = 0; i < tr->n_files; i++)
		if (strcmp(tr->files[i].path, m->path) == 0)
			return &tr->files[i];
	if (tr->n_files == sizeof(tr->files) / sizeof(tr->files[0]))
		return NULL;
	ef = &tr->files[tr->n_files++];
	memset(ef, 0, sizeof(*ef));
	snprintf(ef->path, sizeof(ef->path), "%s", m->path);
	fd = open(m->path, O_RDONLY);
	if (fd < 0)
		return ef;
	base = fstat(fd, &st) == 0 ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (!base || base == MAP_FAILED || (size_t)st.st_size < sizeof(*eh))
		return ef;
	eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > (size_t)st.st_size)
		return ef;
	sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && pick < 0))
			pick = i;
	if (pick < 0 || sh[pick].sh_link >= eh->e_shnum)
		return ef;
	{
		const Elf64_Sym *s = (const Elf64_Sym *)(base + sh[pick].sh_offset);
		const char *strtab = (const char *)base + sh[sh[pick].sh_link].sh_offset;
		size_t n = sh[pick].sh_size / sizeof(*s);

		ef->syms = calloc(n ? n : 1, sizeof(*ef->syms));
		for (size_t i = 0; i < n; i++)
			if (ELF64_ST_TYPE(s[i].st_info) == STT_FUNC && s[i].st_value)
				ef->syms[ef->n++] = (struct sym){ s[i].st_value, s[i].st_size,
								  strtab + s[i].st_name };
		qsort(ef->syms, ef->n, sizeof(*ef->syms), sym_cmp);
	}
	if (eh->e_type == ET_DYN)
		for (size_t i = 0; i < tr->n_maps; i++)
			if (strcmp(tr->maps[i].path, m->path) == 0 && tr->maps[i].offset == 0) {
				ef->bias = tr->maps[i].lo;
				break;
			}
	return ef;
}

/* "libprofagent.so profagent_exit_hook" and the offset into it; 0 if unknown. */
static int symbolize(struct tracer *tr, uintptr_t addr, char *base, size_t len, uintptr_t *off)
{
	const struct map_entry *m = maps_find(tr, addr);
	const struct elf_file *ef;
	const char *file;
	size_t lo = 0, hi;

	if (!m || m->path[0] != '/') {
		snprintf(base, len, "%s", m ? m->path : "unmapped");
		*off = m ? addr - m->lo : addr;
		return 0;
	}
	file = strrchr(m->path, '/') + 1;
	ef = elf_file_get(tr, m);
	hi = ef ? ef->n : 0;
	while (lo < hi) { /* the last symbol at or below addr */
		size_t mid = (lo + hi) / 2;

		if (ef->syms[mid].value <= addr - ef->bias)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0) {
		snprintf(base, len, "%s", file);
		*off = addr - ef->bias;
		return 0;
	}
	snprintf(base, len, "%s %s", file, ef->syms[lo - 1].name);
	*off = addr - ef->bias - ef->syms[lo - 1].value;
	return 1;
}

static int is_agent_map(const struct map_entry *m)
{
	const char *slash = strrchr(m->path, '/');

	return slash && strncmp(slash + 1, "libprofagent.so", 15) == 0;
}

void ss_regs_leaf(void);

static uintptr_t ss_entry_address(int id)
{
	void *const fns[SS_COUNT] = {
		ss_outer, ss_inner,    ss_recurse, ss_jump_outer,         ss_jump_leaf,    ss_after_jump,
		ss_catch, ss_bt_outer, ss_bt,      (void *)ss_regs_leaf, ss_handler_work, ss_settle,
	};

	return (uintptr_t)fns[id];
}

/* Which ss_ function's patched first bytes rip lies in, or -1. */
static int ss_entry_index(uintptr_t rip)
{
	for (int i = 0; i < SS_COUNT; i++)
		if (rip >= ss_entry_address(i) && rip < ss_entry_address(i) + PATCHED_ENTRY_BYTES)
			return i;
	return -1;
}
static int is_stub_map(const struct map_entry *m)
{
	return m && !m->path[0] && strchr(m->perms, 'x');
}

/* ---- tracer: ptrace plumbing ------------------------------------------------------ */

static volatile sig_atomic_t watchdog_fired;

static void on_alarm(int sig)
{
	(void)sig;
	watchdog_fired = 1;
}

struct stop {
	int gone;  /* the thread exited or was killed: status says how */
	int status;
	int sig;   /* the signal of a signal-delivery-stop, 0 for other stops */
	struct user_regs_struct regs;
};

static int tracer_wait(struct tracer *tr, struct stop *s)
{
	memset(s, 0, sizeof(*s));
	for (;;) {
		pid_t r = waitpid(tr->tid, &s->status, __WALL);

		if (r == tr->tid)
			break;
		if (r < 0 && errno == EINTR && watchdog_fired)
			return -ETIMEDOUT;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
	ctl->stops++;
	if (WIFEXITED(s->status) || WIFSIGNALED(s->status)) {
		s->gone = 1;
		return 0;
	}
	if (WIFSTOPPED(s->status) && (s->status >> 16) == 0)
		s->sig = WSTOPSIG(s->status);
	if (ptrace(PTRACE_GETREGS, tr->tid, NULL, &s->regs))
		return -errno;
	return 0;
}

static int tracer_resume(struct tracer *tr, int request, int sig)
{
	tr->at_begin = 0;
	return ptrace(request, tr->tid, NULL, (void *)(long)sig) ? -errno : 0;
}

static int hw_breakpoint_set(struct tracer *tr, uintptr_t addr)
{
	/* DR7 bit 0: local enable of DR0; R/W0 = 00 (execute), LEN0 = 00 */
	if (ptrace(PTRACE_POKEUSER, tr->tid, offsetof(struct user, u_debugreg[0]), addr) ||
	    ptrace(PTRACE_POKEUSER, tr->tid, offsetof(struct user, u_debugreg[7]), 1))
		return -errno;
	return 0;
}

static int hw_breakpoint_clear(struct tracer *tr)
{
	return ptrace(PTRACE_POKEUSER, tr->tid, offsetof(struct user, u_debugreg[7]), 0) ? -errno
											    : 0;
}

static int at_marker(const struct stop *s, void (*marker)(void))
{
	return s->sig == SIGTRAP && s->regs.rip == (uintptr_t)marker + 1;
}

static void stop_describe(struct tracer *tr, const struct stop *s, char *buf, size_t len)
{
	char base[96];
	uintptr_t off;

	if (s->gone) {
		if (WIFSIGNALED(s->status))
			snprintf(buf, len, "the process was killed by %s",
				 strsignal(WTERMSIG(s->status)));
		else
			snprintf(buf, len, "the thread exited (status %d)", WEXITSTATUS(s->status));
		return;
	}
	symbolize(tr, s->regs.rip, base, sizeof(base), &off);
	snprintf(buf, len, "%s %s at rip 0x%llx (%s+0x%lx), rsp 0x%llx",
		 s->sig ? "signal" : "stop", s->sig ? strsignal(s->sig) : "event",
		 (unsigned long long)s->regs.rip, base, (unsigned long)off,
		 (unsigned long long)s->regs.rsp);
}

/* Continues until the given marker; SIGUSR1 raised inside handlers is handed on. */
static int run_to_marker(struct tracer *tr, int sig, void (*marker)(void), struct stop *s)
{
	int err = tracer_resume(tr, PTRACE_CONT, sig);

	while (!err) {
		err = tracer_wait(tr, s);
		if (err || s->gone)
			return err ? err : -ESRCH;
		if (at_marker(s, marker)) {
			tr->at_begin = marker == sigstep_mark_begin;
			return 0;
		}
		if (s->sig != SIGUSR1)
			return -EPROTO;
		err = tracer_resume(tr, PTRACE_CONT, SIGUSR1);
	}
	return err;
}

/* ---- tracer: learning one probe ----------------------------------------------------- */

static unsigned stat_for(struct tracer *tr, uintptr_t rip, int *is_new)
{
	size_t h = (rip * 0x9e3779b97f4a7c15ull) >> 40;

	if (!tr->hash) {
		tr->hash_cap = 1 << 16;
		tr->hash = calloc(tr->hash_cap, sizeof(*tr->hash));
	}
	for (;; h++) {
		unsigned *slot = &tr->hash[h & (tr->hash_cap - 1)];

		if (!*slot) {
			tr->stats = realloc(tr->stats, (tr->n_stats + 1) * sizeof(*tr->stats));
			memset(&tr->stats[tr->n_stats], 0, sizeof(*tr->stats));
			tr->stats[tr->n_stats].rip = rip;
			*slot = ++tr->n_stats;
			*is_new = 1;
			return *slot - 1;
		}
		if (tr->stats[*slot - 1].rip == rip) {
			*is_new = 0;
			return *slot - 1;
		}
	}
}

/*
 * Which profiler category a step falls in, or -1 outside profiler code. Hook
 * code is put with the trampoline that last ran: whatever the hooks' helpers
 * are called, the enter path and the exit path stay apart.
 */
static int step_category(struct tracer *tr, uintptr_t rip, int *last_tramp)
{
	const struct map_entry *m = maps_find(tr, rip);
	char base[96];
	uintptr_t off;

	if (ss_entry_index(rip) >= 0)
		return CAT_OTHER;
	if (is_stub_map(m))
		return CAT_STUB;
	if (!m || !is_agent_map(m) || !strchr(m->perms, 'x'))
		return -1;
	symbolize(tr, rip, base, sizeof(base), &off);
	if (strstr(base, "entry_trampoline")) {
		*last_tramp = CAT_ENTER;
		return CAT_TRAMP;
	}
	if (strstr(base, "exit_trampoline")) {
		*last_tramp = CAT_EXIT;
		return CAT_TRAMP;
	}
	return *last_tramp >= 0 ? *last_tramp : CAT_OTHER;
}

/* The worker is stopped at the begin marker: single-step it to the end marker. */
static int learn_probe(struct tracer *tr, struct stop *s)
{
	int err = 0;

	tr->n_steps = 0;
	ctl->mode = MODE_LEARN;
	while (!err) {
		if (tr->n_steps == tr->cap_steps) {
			tr->cap_steps = tr->cap_steps ? 2 * tr->cap_steps : 1 << 16;
			tr->steps = realloc(tr->steps, tr->cap_steps * sizeof(*tr->steps));
		}
		tr->steps[tr->n_steps++] = (struct step){ s->regs.rip, s->regs.rsp };
		err = tracer_resume(tr, PTRACE_SINGLESTEP, 0);
		if (!err)
			err = tracer_wait(tr, s);
		ctl->singlesteps++;
		if (!err && (s->gone || s->sig != SIGTRAP))
			err = -EPROTO;
		if (!err && at_marker(s, sigstep_mark_end))
			return 0;
	}
	return err;
}

/* Profiler steps of the learned probe, each with the occurrence of its rip so far. */
static void plan_visits(struct tracer *tr, struct pass_stats *ps)
{
	int last_tramp = -1;
	uintptr_t stub_entry = 0;
	char stub_owner[80] = "?";

	free(tr->visits);
	tr->visits = calloc(tr->n_steps, sizeof(*tr->visits));
	tr->n_visits = 0;
	for (size_t i = 0; i < tr->n_stats; i++)
		tr->stats[i].visits = 0; /* counts occurrences below, visits later */
	for (size_t k = 0; k < tr->n_steps; k++) {
		uintptr_t rip = tr->steps[k].rip;
		int cat = step_category(tr, rip, &last_tramp), is_new;
		struct rip_stat *st;
		struct visit *v;

		if (cat == CAT_STUB && k > 0 && !is_stub_map(maps_find(tr, tr->steps[k - 1].rip))) {
			char base[96];
			uintptr_t off;

			stub_entry = rip; /* a patched jump landed here: this stub serves its source */
			symbolize(tr, tr->steps[k - 1].rip, base, sizeof(base), &off);
			snprintf(stub_owner, sizeof(stub_owner), "%s",
				 strchr(base, ' ') ? strchr(base, ' ') + 1 : base);
		}
		if (cat < 0)
			continue;
		v = &tr->visits[tr->n_visits++];
		v->step = k;
		v->cat = cat;
		v->stat = stat_for(tr, rip, &is_new);
		st = &tr->stats[v->stat];
		v->occurrence = ++st->visits;
		if (is_new && cat == CAT_STUB) {
			if (rip >= stub_entry && rip < stub_entry + 64) {
				snprintf(st->base, sizeof(st->base), "stub of %s", stub_owner);
				st->off = rip - stub_entry;
			} else {
				const struct map_entry *m = maps_find(tr, rip);

				snprintf(st->base, sizeof(st->base), "stub region");
				st->off = rip - m->lo;
			}
		} else if (is_new) {
			symbolize(tr, rip, st->base, sizeof(st->base), &st->off);
		}
		ps->cats[cat]++;
	}
	ps->planned = tr->n_visits;
	ps->steps = tr->n_steps;
	for (size_t i = 0; i < tr->n_stats; i++)
		tr->stats[i].visits = 0;
}

/* ---- tracer: visits and what they found --------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void rip_label(const struct rip_stat *st, char *buf, size_t len)
{
	const char *sp = strchr(st->base, ' ');

	/* the skip list and the reports name it without the file for agent code */
	snprintf(buf, len, "%s+0x%lx", strncmp(st->base, "stub", 4) && sp ? sp + 1 : st->base,
		 (unsigned long)st->off);
}

/* The ss_ function the probe entered last before step k, and how many it entered. */
static const char *last_ss_entered(const struct tracer *tr, size_t k, int *nth)
{
	int id = -1;

	*nth = 0;
	for (size_t i = 0; i <= k; i++) {
		int e = ss_entry_index(tr->steps[i].rip);

		if (e >= 0 && tr->steps[i].rip == ss_entry_address(e)) {
			id = e;
			(*nth)++;
		}
	}
	return id >= 0 ? ss_names[id] : "no ss_ function yet";
}

static void report_fatal(struct tracer *tr, int pass, size_t v, const char *what)
{
	const struct visit *vi = &tr->visits[v];
	const struct rip_stat *st = &tr->stats[vi->stat];
	char label[128];
	int nth;
	const char *in = last_ss_entered(tr, vi->step, &nth);

	rip_label(st, label, sizeof(label));
	printf("FATAL pass %d (%s) visit %zu/%zu step %u: signal before rip 0x%lx %s [%s], "
	       "in the probe's call #%d (%s): %s\n",
	       pass, pass_names[pass], v + 1, tr->n_visits, vi->step, (unsigned long)st->rip,
	       label, cat_names[vi->cat], nth, in, what);
	fflush(stdout);
	ctl->fatal = 1;
}

/*
 * One visit: from the begin marker to the occurrence-th time the worker is
 * about to run rip, SIGUSR1 delivered there, then on to the end marker and,
 * after the worker's own checks, to the next begin marker. Returns 0 with the
 * worker at the begin marker, else the fatal report is made and the worker
 * is stopped somewhere (or gone).
 */
static int visit_one(struct tracer *tr, int pass, size_t v)
{
	const struct visit *vi = &tr->visits[v];
	const struct step *want = &tr->steps[vi->step];
	struct rip_stat *st = &tr->stats[vi->stat];
	unsigned hits = 0;
	int injected = 0, err;
	struct stop s;
	char why[400];

	ctl->mode = MODE_VISIT;
	ctl->pass = pass;
	watchdog_fired = 0;
	alarm(WATCHDOG_SECONDS);
	err = hw_breakpoint_set(tr, want->rip);
	if (!err)
		err = tracer_resume(tr, PTRACE_CONT, 0);
	while (!err) {
		err = tracer_wait(tr, &s);
		if (err || s.gone)
			break;
		if (!injected && s.sig == SIGTRAP && s.regs.rip == want->rip) {
			int sig = 0;

			if (++hits == vi->occurrence) {
				if (s.regs.rsp != want->rsp) {
					snprintf(why, sizeof(why),
						 "harness: the probe took another path (rsp 0x%llx, "
						 "learned 0x%lx)",
						 (unsigned long long)s.regs.rsp, (unsigned long)want->rsp);
					report_fatal(tr, pass, v, why);
					/* no signal was sent: the probe can finish */
					if (!hw_breakpoint_clear(tr) &&
					    !run_to_marker(tr, 0, sigstep_mark_end, &s))
						run_to_marker(tr, 0, sigstep_mark_begin, &s);
					alarm(0);
					return -EPROTO;
				}
				err = hw_breakpoint_clear(tr);
				sig = SIGUSR1;
				injected = 1;
			}
			if (!err)
				err = tracer_resume(tr, PTRACE_CONT, sig);
			continue;
		}
		if (at_marker(&s, sigstep_mark_end))
			break;
		if (injected && s.sig == SIGUSR1) { /* raised by the nested handler */
			err = tracer_resume(tr, PTRACE_CONT, SIGUSR1);
			continue;
		}
		break;
	}
	if (err == -ETIMEDOUT) {
		report_fatal(tr, pass, v, injected ? "the worker hangs after the signal" :
						     "harness: the worker hangs before the signal");
		kill(tr->pid, SIGKILL);
		return err;
	}
	if (!err && !at_marker(&s, sigstep_mark_end)) {
		char desc[300];

		stop_describe(tr, &s, desc, sizeof(desc));
		snprintf(why, sizeof(why), "the worker crashed: %s", desc);
		report_fatal(tr, pass, v, why);
		if (!s.gone && s.sig)
			tr->crash_sig = s.sig;
		return -EFAULT;
	}
	if (!err && !injected) {
		snprintf(why, sizeof(why),
			 "harness: the probe ran rip only %u times, not %u (its path changed)", hits,
			 vi->occurrence);
		report_fatal(tr, pass, v, why);
		if (!hw_breakpoint_clear(tr))
			run_to_marker(tr, 0, sigstep_mark_begin, &s);
		alarm(0);
		return -EPROTO;
	}
	if (!err)
		err = run_to_marker(tr, 0, sigstep_mark_begin, &s);
	alarm(0);
	if (err) {
		stop_describe(tr, &s, why, sizeof(why));
		report_fatal(tr, pass, v, why);
		return err;
	}
	st->visits++;
	if (ctl->outcome) {
		st->failed++;
		st->mask |= ctl->outcome;
		ctl->stats[pass].failed++;
		if (ctl->outcome & OUT_FATAL) {
			report_fatal(tr, pass, v, ctl->detail);
			return -EPROTO;
		}
	}
	return 0;
}

static const char *outcome_words(unsigned mask)
{
	if (mask == OUT_UNRECORDED)
		return "the handler's calls went unrecorded (passed through, not hijacked)";
	return "see FATAL";
}

static int stat_addr_cmp(const void *a, const void *b)
{
	const struct rip_stat *x = *(struct rip_stat *const *)a, *y = *(struct rip_stat *const *)b;

	return x->rip < y->rip ? -1 : x->rip > y->rip;
}

/* Failing instructions of this pass, as runs of consecutive addresses within one symbol. */
static void report_windows(struct tracer *tr, int pass)
{
	struct rip_stat **sorted = calloc(tr->n_stats + 1, sizeof(*sorted));
	size_t n = 0;

	for (size_t i = 0; i < tr->n_stats; i++)
		if (tr->stats[i].visits)
			sorted[n++] = &tr->stats[i];
	qsort(sorted, n, sizeof(*sorted), stat_addr_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		unsigned visits = 0, failed = 0;

		if (!sorted[i]->failed) {
			i++;
			continue;
		}
		while (j < n && sorted[j]->failed && sorted[j]->mask == sorted[i]->mask &&
		       strcmp(sorted[j]->base, sorted[i]->base) == 0) {
			visits += sorted[j]->visits;
			failed += sorted[j]->failed;
			j++;
		}
		printf("FAIL pass %d (%s): %s+0x%lx..+0x%lx (%zu instructions, %u of %u visits): %s\n",
		       pass, pass_names[pass], sorted[i]->base, (unsigned long)sorted[i]->off,
		       (unsigned long)sorted[j - 1]->off, j - i, failed, visits,
		       outcome_words(sorted[i]->mask));
		ctl->windows++;
		i = j;
	}
	for (size_t i = 0; i < tr->n_stats; i++)
		tr->stats[i].visits = tr->stats[i].failed = tr->stats[i].mask = 0;
	free(sorted);
	fflush(stdout);
}

static int skipped(const struct tracer *tr, const struct rip_stat *st)
{
	char label[128];

	rip_label(st, label, sizeof(label));
	for (size_t i = 0; i < tr->n_skip; i++)
		if (strcmp(tr->skip[i], label) == 0)
			return 1;
	return 0;
}

/* One pass, from the begin marker back to it. Returns non-zero after a fatal visit. */
static int run_pass(struct tracer *tr, int pass)
{
	struct pass_stats *ps = &ctl->stats[pass];
	struct stop s;
	double t0 = now_s();
	int err;

	ctl->mode = MODE_SETUP;
	ctl->pass = pass;
	alarm(WATCHDOG_SECONDS);
	err = run_to_marker(tr, 0, sigstep_mark_end, &s);
	if (!err)
		err = run_to_marker(tr, 0, sigstep_mark_begin, &s);
	if (!err && ctl->outcome) {
		printf("FATAL pass %d (%s): the handler alone, outside profiler code: %s\n", pass,
		       pass_names[pass], ctl->detail);
		return ctl->fatal = 1;
	}
	if (!err)
		err = learn_probe(tr, &s);
	if (!err)
		err = run_to_marker(tr, 0, sigstep_mark_begin, &s);
	alarm(0);
	if (err) {
		char why[300];

		stop_describe(tr, &s, why, sizeof(why));
		printf("FATAL pass %d (%s): harness: setting up or learning the probe: %s (%s)\n",
		       pass, pass_names[pass], strerror(-err), why);
		return ctl->fatal = 1;
	}
	if (ctl->outcome) {
		printf("FATAL pass %d (%s): the probe without a signal: %s\n", pass,
		       pass_names[pass], ctl->detail);
		return ctl->fatal = 1;
	}
	maps_read(tr);
	plan_visits(tr, ps);
	if (!tr->first_steps) {
		tr->first_steps = malloc(tr->n_steps * sizeof(*tr->steps));
		memcpy(tr->first_steps, tr->steps, tr->n_steps * sizeof(*tr->steps));
		tr->n_first_steps = tr->n_steps;
	} else if (tr->n_first_steps != tr->n_steps ||
		   memcmp(tr->first_steps, tr->steps, tr->n_steps * sizeof(*tr->steps))) {
		printf("FATAL pass %d (%s): harness: the probe ran %zu instructions, %zu in the "
		       "first pass learned (not deterministic)\n",
		       pass, pass_names[pass], tr->n_steps, tr->n_first_steps);
		return ctl->fatal = 1;
	}
	ctl->learn_s += now_s() - t0;
	t0 = now_s();
	for (size_t v = 0; v < tr->n_visits; v++) {
		if ((pass == tr->from_pass && (int)v < tr->from_visit) ||
		    skipped(tr, &tr->stats[tr->visits[v].stat])) {
			ps->skipped++;
			continue;
		}
		if (visit_one(tr, pass, v)) {
			ctl->visit_s += now_s() - t0;
			report_windows(tr, pass);
			return 1;
		}
		ps->visited++;
	}
	ctl->visit_s += now_s() - t0;
	ps->complete = 1;
	report_windows(tr, pass);
	return 0;
}

static int tracer_main(struct tracer *tr, int go_fd)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: waitpid returns */
	struct stop s;
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGALRM, &sa, NULL);
	if (ptrace(PTRACE_SEIZE, tr->tid, NULL, (void *)PTRACE_O_EXITKILL)) {
		ctl->skip = 1;
		snprintf(ctl->skip_reason, sizeof(ctl->skip_reason),
			 "cannot ptrace the worker thread: %s", strerror(errno));
		return write(go_fd, "s", 1) == 1 ? 0 : 1;
	}
	if (write(go_fd, "g", 1) != 1)
		return 1;
	alarm(WATCHDOG_SECONDS);
	err = tracer_wait(tr, &s);
	alarm(0);
	tr->at_begin = !err && at_marker(&s, sigstep_mark_begin);
	if (!tr->at_begin) {
		printf("FATAL harness: the worker did not reach its first probe\n");
		ctl->fatal = 1;
		kill(tr->pid, SIGKILL);
		return 1;
	}
	if (maps_read(tr))
		return 1;
	for (int pass = tr->from_pass; pass <= N_PASSES; pass++)
		if (run_pass(tr, pass))
			break;
	if (ctl->fatal && tr->crash_sig) /* a crash: let the program die of it */
		return ptrace(PTRACE_DETACH, tr->tid, NULL, (void *)(long)tr->crash_sig) ? 1 : 0;
	if (ctl->fatal && !tr->at_begin) {
		/* stopped anywhere: the worker may be in no state to go on */
		ptrace(PTRACE_DETACH, tr->tid, NULL, NULL);
		kill(tr->pid, SIGKILL);
		return 1;
	}
	ctl->mode = MODE_DONE;
	return ptrace(PTRACE_DETACH, tr->tid, NULL, NULL) ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------ */

static void print_summary(void)
{
	const struct pass_stats *first = NULL;
	unsigned complete = 0, visited = 0;

	for (int p = 1; p <= N_PASSES; p++) {
		const struct pass_stats *ps = &ctl->stats[p];

		if (!ps->steps)
			continue;
		printf("pass %d (%s): %u of %u profiler instructions visited (%u skipped), %u "
		       "failed, probe %u instructions\n",
		       p, pass_names[p], ps->visited, ps->planned, ps->skipped, ps->failed,
		       ps->steps);
		if (!first)
			first = ps;
		complete += ps->complete;
		visited += ps->visited;
	}
	if (first)
		printf("visited %u instructions (enter hook %u, exit hook %u, trampolines %u, stubs "
		       "%u, other %u) x %u passes\n",
		       first->planned, first->cats[CAT_ENTER], first->cats[CAT_EXIT],
		       first->cats[CAT_TRAMP], first->cats[CAT_STUB], first->cats[CAT_OTHER],
		       complete);
	printf("signals delivered: %u\n", visited);
	printf("sigstep: %.1f s learning (%lu single steps), %.1f s visiting (%lu ptrace stops)\n",
	       ctl->learn_s, ctl->singlesteps, ctl->visit_s, ctl->stops);
}

static int parse_args(int argc, char **argv, struct tracer *tr)
{
	tr->from_pass = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%d:%d", &tr->from_pass, &tr->from_visit) != 2 ||
			    tr->from_pass < 1 || tr->from_pass > N_PASSES || tr->from_visit < 1)
				return -1;
			tr->from_visit--; /* visits are numbered from 1 in the reports */
		} else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc) {
			for (char *tok = strtok(argv[++i], ","); tok; tok = strtok(NULL, ",")) {
				tr->skip = realloc(tr->skip, (tr->n_skip + 1) * sizeof(*tr->skip));
				tr->skip[tr->n_skip++] = tok;
			}
		} else {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct tracer tr;
	struct worker_args wa = { 0 };
	int ready[2], go[2], status = 0, ok;
	pthread_t worker;
	pid_t child;
	char c;

	if (parse_args(argc, argv, &tr)) {
		fprintf(stderr, "usage: %s [--from PASS:VISIT] [--skip SYMBOL+0xOFF,...]\n",
			argv[0]);
		return 2;
	}
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED || pipe(ready) || pipe(go))
		return perror("sigstep"), 1;
	wa.ready_fd = ready[1];
	wa.go_fd = go[0];
	if (pthread_create(&worker, NULL, worker_main, &wa) || read(ready[0], &c, 1) != 1)
		return perror("sigstep: worker"), 1;
	if (wa.baseline_failed) {
		if (write(go[1], "x", 1) != 1)
			perror("sigstep");
		pthread_join(worker, NULL);
		return 1;
	}
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* Yama: the tracer is our child */
	fflush(NULL);
	child = fork();
	if (child < 0)
		return perror("sigstep: fork"), 1;
	if (child == 0) {
		tr.pid = getppid();
		tr.tid = ctl->tid;
		_exit(tracer_main(&tr, go[1]));
	}
	if (waitpid(child, &status, 0) != child)
		return perror("sigstep: waitpid"), 1;
	if (ctl->skip) {
		printf("skip: %s\n", ctl->skip_reason);
		pthread_join(worker, NULL);
		return 0;
	}
	pthread_join(worker, NULL);
	print_summary();
	for (int i = 0; i < SS_COUNT; i++)
		printf("count %s %ld\n", ss_names[i], ss_calls[i]);
	ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !ctl->fatal && !ctl->windows;
	printf("%s\n", ok ? "sigstep: every visit right" :
			    "sigstep: FAILED (see the FATAL and FAIL lines)");
	return ok ? 0 : 1;
}
