// SPDX-License-Identifier: MIT
/*
 * The program under test of tests/integration/test_signal_steps.sh: worker
 * threads run a fixed probe of ss_* calls (nesting, recursion, a longjmp out
 * of two frames, backtrace(), a register check) between two markers, and
 * sigstep_tracer (which this program starts) delivers SIGUSR1 before every
 * profiler instruction of the probe, one per run, in four passes of handler
 * behaviour (sigstep.h). After each run the worker checks every result. A
 * run that breaks the worker retires its thread and main starts another.
 * Passes unprofiled too. Prints a summary and `count ss_NAME N`; options
 * (--verbose, --from, --skip, --only) go to the tracer. With --capture-probe
 * first, the probe is ss_args and ss_ints alone, the functions the script
 * gives --args/--retval specs: the walk of the hooks' capture paths, kept
 * apart so that the full probe's walk does not grow.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigstep.h"

#define SS_FN __attribute__((noinline, used, noipa))

static struct sigstep_ctl *ctl;

/* ---- the instrumented functions ------------------------------------------ */

/* Each ss_ function's calls; ss_regs_leaf's asm counts at SS_REGS_LEAF_OFFSET. */
__attribute__((used)) long ss_calls[SS_COUNT];
#define SS_REGS_LEAF_OFFSET "72"
_Static_assert(SS_REGS_LEAF * sizeof(long) == 72, "asm offset");

extern char __executable_start[], etext[];
/*
 * What each function's hijacked return slot holds: its stub's exit landing
 * (stub_landing.h); all 0 when nothing instruments us.
 */
static uintptr_t hijacked_return[SS_COUNT];
static uintptr_t first_return;
static volatile int handler_depth;
static long unhijacked_probe, unhijacked_handler;
/*
 * Calls the agent let pass unrecorded, per function: a handler's calls while
 * the thread is inside a hook (the agent counts them as dropped), and, if the
 * agent broke, anything else. The script checks the trace's slices against
 * the calls less these, and their sum against profctl's dropped figure.
 */
static long ss_unrecorded[SS_COUNT];
static long handler_passed_through;

/* Not ss_: the glob must select only the functions counted. */
/*
 * The caller's return address, read above the frame record a callee is
 * handed: the agent skips functions that read their own return slot
 * (__builtin_return_address), and these must be timed for the harness to
 * see that the slot holds the stub's landing. (SS_FN code keeps frame pointers.)
 */
static __attribute__((noinline, noipa)) uintptr_t return_slot_of(void *frame)
{
	return ((const uintptr_t *)frame)[1];
}

static inline __attribute__((always_inline)) void note_entry(int id, uintptr_t ret)
{
	if (!first_return)
		first_return = ret;
	if (hijacked_return[id] && ret != hijacked_return[id]) {
		__atomic_fetch_add(handler_depth ? &unhijacked_handler : &unhijacked_probe, 1,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&ss_unrecorded[id], 1, __ATOMIC_RELAXED);
	}
}

/*
 * Counts the call (a locked add: one instruction, whatever interrupts it)
 * and notes whether the agent recorded it: at entry the return slot then
 * holds the function's landing.
 */
#define SS_ENTER(id)                                                            \
	do {                                                                    \
		__atomic_fetch_add(&ss_calls[id], 1, __ATOMIC_RELAXED);         \
		note_entry(id, return_slot_of(__builtin_frame_address(0)));    \
	} while (0)

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

/* The capture probe's calls: integers, a string, a double; returns a double. */
#define SS_ARGS_STRING "sigstep"
SS_FN double ss_args(long a, int b, const char *s, double d)
{
	SS_ENTER(SS_ARGS);
	return (double)(a + b + s[0]) * d;
}

/* Integers only: the hooks copy them inline (arg_capture_ints). */
SS_FN long ss_ints(long a, long b, long c, long d)
{
	SS_ENTER(SS_INTS);
	return a + 2 * b + 3 * c + 4 * d;
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
void probe_regs(void);
void ss_regs_leaf(void);
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
	double args;
	long ints;
	int done;
};
static struct probe_result res;
static jmp_buf probe_env;
static int capture_probe; /* --capture-probe: ss_args alone */
/* ss_args and ss_ints calls that returned to probe_run: the slices that must have a retval */
static long args_returned, ints_returned;

#define SS_ARGS_CALL() ss_args(5, -7, SS_ARGS_STRING, 2.5)
#define SS_ARGS_RESULT ((5 - 7 + 's') * 2.5)
#define SS_INTS_CALL() ss_ints(1, -2, 3, 1l << 20)
#define SS_INTS_RESULT (1 - 4 + 9 + (4l << 20))

__attribute__((noinline, used)) void probe_run(void)
{
	if (capture_probe) {
		res.args = SS_ARGS_CALL();
		args_returned++;
		res.ints = SS_INTS_CALL();
		ints_returned++;
		res.done = 1;
		return;
	}
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

/*
 * Pass 4 abandons the probe: a call entered (its first instruction ran) but
 * not yet counted is counted here if the agent recorded it, as its slice is
 * in the trace. The agent recorded it when its entry is the committed top of
 * the thread's shadow stack (asked of the agent: the return slot alone
 * cannot tell, it is hijacked one instruction apart from the publish).
 */
static long abandoned_entries[SS_COUNT];
static void *(*agent_top_slot)(void); /* profagent_debug_top_slot, when profiled */

static void abandoned_entry_count(void)
{
	int id = ctl->inflight;

	if (id >= 0 && agent_top_slot && ss_calls[id] == ctl->inflight_calls &&
	    agent_top_slot() == (void *)ctl->inflight_slot)
		abandoned_entries[id]++;
}

static void on_sigusr1(int sig)
{
	int saved_errno = errno;
	int depth = ++handler_depth;
	char here;

	(void)sig;
	if (cur_pass == 4)
		abandoned_entry_count(); /* before its own calls count */
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

/*
 * A visit that broke the worker (it jumped somewhere wrong) ends here, on
 * the alternate stack: the thread leaves through worker_escape and exits,
 * taking its agent state with it, and main starts a fresh worker. The
 * tracer has reported the crash before it let the signal through.
 */
static volatile pid_t escape_tid;
static sigjmp_buf worker_escape;

static void on_crash(int sig)
{
	if (gettid() == escape_tid)
		siglongjmp(worker_escape, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int crash_handlers_install(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP };
	struct sigaction sa = { .sa_handler = on_crash, .sa_flags = SA_ONSTACK | SA_NODEFER };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return -errno;
	return 0;
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
	if (capture_probe) {
		if (res.args != SS_ARGS_RESULT) {
			detail_add(d, len, "ss_args returned %g, expected %g", res.args,
				   SS_ARGS_RESULT);
			out |= OUT_PROBE;
		}
		if (res.ints != SS_INTS_RESULT) {
			detail_add(d, len, "ss_ints returned %ld, expected %ld", res.ints,
				   SS_INTS_RESULT);
			out |= OUT_PROBE;
		}
		return out;
	}
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (calls[i].got != calls[i].want) {
			detail_add(d, len, "%s returned %ld, expected %ld", calls[i].what,
				   calls[i].got, calls[i].want);
			out |= OUT_PROBE;
		}
	if (res.bt) {
		detail_add(d, len,
			   "backtrace() frames %s%s%s are not ss_bt, ss_bt_outer, probe_run",
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
		detail_add(d, len, "the handler ran %d times, expected %d", handler_runs,
			   want_runs);
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
	/*
	 * A handler's calls inside a hook pass through, counted by the agent as
	 * dropped: not a failure here; the script checks the count is exact.
	 */
	handler_passed_through += unhijacked_handler;
	return out;
}

/* Before the tracer: lazy binding resolved, libgcc_s loaded, the agent's thread state made. */
static int worker_warm_up(void)
{
	char d[512];
	unsigned out;

	ss_settle();
	/* a return slot outside our code: the agent hijacked it */
	if (!hijacked_return[SS_SETTLE] &&
	    (first_return < (uintptr_t)__executable_start || first_return >= (uintptr_t)etext))
		for (int i = 0; i < SS_COUNT; i++)
			hijacked_return[i] = stub_landing_of((const void *)ctl->entries[i]);
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

struct worker_args {
	int ready_fd, go_fd;
};

/* Runs probes, one per visit, between markers where the tracer takes over. */
static void worker_loop(void)
{
	for (;;) {
		int mode;

		sigstep_mark_begin();
		mode = ctl->mode;
		if (mode == MODE_DONE || mode == MODE_RETIRE)
			return;
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
		if (ctl->mode == MODE_LEARN)
			mode = MODE_LEARN; /* the tracer sent no signal after all (another path) */
		ctl->outcome = visit_check(mode, cur_pass, ctl->detail, sizeof(ctl->detail));
	}
}

static void *worker_main(void *arg)
{
	struct worker_args *a = arg;
	stack_t ss = { .ss_size = ALTSTACK_SIZE };
	char go = 0;

	altstack = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
	ss.ss_sp = altstack;
	if (altstack == MAP_FAILED || sigaltstack(&ss, NULL)) {
		perror("sigstep: sigaltstack");
		ctl->warm_up_failed = 1;
	} else if (worker_warm_up()) {
		ctl->warm_up_failed = 1;
	}
	ctl->tid = gettid();
	if (write(a->ready_fd, "r", 1) != 1 || ctl->warm_up_failed)
		goto out;
	if (read(a->go_fd, &go, 1) != 1 || go != 'g')
		goto out;
	escape_tid = gettid();
	if (sigsetjmp(worker_escape, 1) == 0)
		worker_loop();
	escape_tid = 0;
out:
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	if (altstack != MAP_FAILED)
		munmap(altstack, ALTSTACK_SIZE);
	return NULL;
}

/* The tracer needs the entries: it counts a call from its first instruction on. */
static void *const ss_functions[SS_COUNT] = {
	ss_outer, ss_inner,    ss_recurse, ss_jump_outer,        ss_jump_leaf,    ss_after_jump,
	ss_catch, ss_bt_outer, ss_bt,      (void *)ss_regs_leaf, ss_handler_work, ss_settle,
	ss_args,  ss_ints,
};

/* ---- main ------------------------------------------------------------------------ */

static void print_summary(void)
{
	const struct pass_stats *first = NULL;
	unsigned complete = 0, visited = 0;
	long uncounted = 0;

	for (int p = 1; p <= N_PASSES; p++) {
		const struct pass_stats *ps = &ctl->stats[p];

		if (!ps->steps)
			continue;
		printf("pass %d (%s): %u of %u profiler instructions visited (%u skipped), %u "
		       "failed (%u fatal), probe %u instructions\n",
		       p, pass_names[p], ps->visited, ps->planned, ps->skipped, ps->failed,
		       ps->fatal, ps->steps);
		if (!first)
			first = ps;
		complete += ps->complete;
		visited += ps->visited;
	}
	if (first)
		printf("visited %u instructions (enter hook %u, exit hook %u, trampolines %u, "
		       "stubs %u, other %u) x %u passes\n",
		       first->planned, first->cats[CAT_ENTER], first->cats[CAT_EXIT],
		       first->cats[CAT_TRAMP], first->cats[CAT_STUB], first->cats[CAT_OTHER],
		       complete);
	printf("signals delivered: %u; worker threads retired after a broken visit: %u; visits "
	       "made again after the probe took another path: %u\n", visited, ctl->respawns,
	       ctl->visits_repeated);
	printf("sigstep: %.1f s learning (%lu single steps), %.1f s visiting (%lu ptrace stops)\n",
	       ctl->learn_s, ctl->singlesteps, ctl->visit_s, ctl->stops);
	for (int i = 0; i < SS_COUNT; i++) {
		printf("count %s %ld\n", ss_names[i], ss_calls[i] + abandoned_entries[i]);
		printf("unrecorded %s %ld\n", ss_names[i], ss_unrecorded[i]);
		uncounted += abandoned_entries[i];
	}
	printf("handler calls passed through unrecorded: %ld\n", handler_passed_through);
	printf("ss_args calls returned: %ld\n", args_returned);
	printf("ss_ints calls returned: %ld\n", ints_returned);
	printf("calls recorded on entry, then abandoned before they counted themselves: %ld\n",
	       uncounted);
}

/* The shared state, in a memfd the tracer maps after exec. */
static int ctl_create(void)
{
	int fd = memfd_create("sigstep", 0);

	if (fd < 0 || ftruncate(fd, sizeof(*ctl)))
		return -1;
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ctl == MAP_FAILED)
		return -1;
	ctl->size = sizeof(*ctl);
	ctl->pid = getpid();
	ctl->mark_begin = (uintptr_t)sigstep_mark_begin;
	ctl->mark_end = (uintptr_t)sigstep_mark_end;
	for (int i = 0; i < SS_COUNT; i++)
		ctl->entries[i] = (uintptr_t)ss_functions[i];
	ctl->calls = (uintptr_t)ss_calls;
	ctl->inflight = -1;
	return fd;
}

/*
 * sigstep_tracer, next to this program, with an empty environment: a
 * profiler preloaded into us must not come along. Never returns.
 */
static void tracer_exec(int argc, char **argv, int ctl_fd, int tids_fd, int go_fd)
{
	char path[PATH_MAX], fds[3][16], *args[argc + 4], *slash;
	char *const envp[] = { NULL };
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);

	slash = n > 0 ? memrchr(path, '/', n) : NULL;
	if (!slash) {
		perror("sigstep: /proc/self/exe");
		_exit(127);
	}
	strcpy(slash + 1, "sigstep_tracer");
	snprintf(fds[0], sizeof(fds[0]), "%d", ctl_fd);
	snprintf(fds[1], sizeof(fds[1]), "%d", tids_fd);
	snprintf(fds[2], sizeof(fds[2]), "%d", go_fd);
	args[0] = path;
	args[1] = fds[0];
	args[2] = fds[1];
	args[3] = fds[2];
	for (int i = 1; i <= argc; i++)
		args[3 + i] = argv[i]; /* the user's options, and the NULL */
	execve(path, args, envp);
	fprintf(stderr, "sigstep: cannot run %s: %s\n", path, strerror(errno));
	_exit(127);
}

int main(int argc, char **argv)
{
	struct worker_args wa;
	int ready[2], go[2], tids[2], status = 0, ctl_fd, ok;
	pid_t child = 0;

	if (argc > 1 && strcmp(argv[1], "--capture-probe") == 0) {
		capture_probe = 1;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	agent_top_slot = (void *(*)(void))dlsym(RTLD_DEFAULT, "profagent_debug_top_slot");
	ctl_fd = ctl_create();
	if (ctl_fd < 0 || pipe(ready) || pipe(go) || pipe(tids) || crash_handlers_install())
		return perror("sigstep"), 1;
	wa = (struct worker_args){ ready[1], go[0] };
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* Yama: the tracer is our child */
	/* one worker at a time; the tracer asks for the next when it retires one */
	for (;;) {
		pthread_t worker;
		pid_t tid;
		char c;

		ctl->respawn = 0;
		if (pthread_create(&worker, NULL, worker_main, &wa) || read(ready[0], &c, 1) != 1)
			return perror("sigstep: worker"), 1;
		if (!child) {
			ctl->hijacked_return = hijacked_return[SS_SETTLE];
			fflush(NULL);
			child = fork();
			if (child < 0)
				return perror("sigstep: fork"), 1;
			if (child == 0)
				tracer_exec(argc, argv, ctl_fd, tids[0], go[1]);
			close(go[1]); /* a tracer gone: the worker waiting for it reads EOF */
		}
		tid = ctl->warm_up_failed ? 0 : ctl->tid;
		if (write(tids[1], &tid, sizeof(tid)) != sizeof(tid))
			return perror("sigstep"), 1;
		pthread_join(worker, NULL);
		if (!ctl->respawn || ctl->warm_up_failed)
			break;
	}
	close(tids[1]);
	if (waitpid(child, &status, 0) != child)
		return perror("sigstep: waitpid"), 1;
	if (ctl->skip) {
		printf("skip: %s\n", ctl->skip_reason);
		return 0;
	}
	print_summary();
	ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !ctl->stopped && !ctl->windows &&
	     !ctl->warm_up_failed;
	printf("%s\n", ok ? "sigstep: every visit right" :
			    "sigstep: FAILED (see the FATAL and FAIL lines)");
	return ok ? 0 : 1;
}
