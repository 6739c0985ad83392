// SPDX-License-Identifier: MIT
/*
 * abi_torture: calls that do not return the plain way or run elsewhere
 * (signals, threads, fork, setjmp/longjmp, vfork, posix_spawn, ucontext).
 */
#include "abi_torture.h"

/* ---- signals ------------------------------------------------------------------ */

static volatile sig_atomic_t sig_hits, sig_bad;

TORTURE long torture_sig_leaf(long n)
{
	return n * 7 + 3;
}
VIA(torture_sig_leaf);

TORTURE long torture_sig_work(long n)
{
	long s = 0;

	for (long i = 0; i < 5; i++)
		s += vp_torture_sig_leaf(n + i);
	return s; /* 35 n + 85 */
}
VIA(torture_sig_work);

/* Instrumented itself: its return address is __restore_rt. */
TORTURE void torture_sig_handler(int sig)
{
	int saved = errno;
	long n = sig_hits;

	if (sig != SIGALRM || vp_torture_sig_work(n) != 35 * n + 85)
		sig_bad++;
	sig_hits = n + 1;
	errno = saved;
}

/* The main thread's work while the timer fires: floating point and nested calls. */
TORTURE double torture_sig_busy(long n)
{
	double x = (double)n;

	for (int i = 0; i < 4000; i++)
		x = x * 0.999 + 1.0;
	return x + (double)vp_torture_sig_leaf(n);
}
VIA(torture_sig_busy);

static double sig_busy_expect(long n)
{
	double x = (double)n;

	for (int i = 0; i < 4000; i++)
		x = x * 0.999 + 1.0;
	return x + (double)(n * 7 + 3);
}

TORTURE int torture_sig_raise(int depth);
VIA(torture_sig_raise);

TORTURE int torture_sig_raise(int depth)
{
	if (depth > 0)
		return vp_torture_sig_raise(depth - 1) + 1;
	return raise(SIGALRM);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int case_signal(char *why)
{
	struct sigaction sa = { .sa_handler = torture_sig_handler }, old;
	struct itimerval tv = { { 0, 1000 }, { 0, 1000 } }, off = { { 0, 0 }, { 0, 0 } };
	double deadline = now_s() + 30;
	long iterations = 0, wrong = 0;
	int r;

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	FAIL_IF(sigaction(SIGALRM, &sa, &old) != 0, "sigaction: %s", strerror(errno));
	sig_hits = sig_bad = 0;
	setitimer(ITIMER_REAL, &tv, NULL);
	while (sig_hits < 25 && now_s() < deadline) {
		if (vp_torture_sig_busy(iterations) != sig_busy_expect(iterations))
			wrong++;
		iterations++;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	FAIL_IF(sig_hits < 25, "only %d SIGALRMs in 30 s", (int)sig_hits);
	FAIL_IF(wrong != 0, "%ld of %ld interrupted computations wrong", wrong, iterations);

	long before = sig_hits;

	r = vp_torture_sig_raise(6);
	FAIL_IF(r != 6 || sig_hits != before + 1, "raise from nested calls: %d, %ld handler runs",
		r, (long)(sig_hits - before));
	sigaction(SIGALRM, &old, NULL);
	FAIL_IF(sig_bad != 0, "%d handler runs computed wrong results", (int)sig_bad);
	return 0;
}

/* ---- threads -------------------------------------------------------------------- */

#define N_THREADS 8
#define THREAD_ROUNDS 1500

TORTURE long torture_add6(long a, long b, long c, long d, long e, long f)
{
	bump(&n_add6);
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}
VIA(torture_add6);

TORTURE double torture_thr_fp(double a, float b, long c, double d)
{
	bump(&n_thr_fp);
	return a * 2 + b - (double)c + d * 0.5;
}
VIA(torture_thr_fp);
VIA(torture_ret_tm);
VIA(torture_keep_errno);

struct thread_job {
	int index;
	int failed;
	char why[WHY_LEN];
};

static pthread_barrier_t thread_barrier;

/*
 * A thread's first instrumented call takes the agent's slow path (thread
 * state setup, with the extended state saved): probe the registers there.
 */
static int thread_first_call(struct thread_job *job)
{
	switch (job->index % 3) {
	case 0:
		return check_gprs(job->why);
	case 1:
		return check_xmm(job->why);
	default:
		return check_zmm(job->why);
	}
}

static int thread_rounds(struct thread_job *job)
{
	char *why = job->why;
	long t = job->index;

	for (long i = 0; i < THREAD_ROUNDS; i++) {
		long r = vp_torture_add6(i, t, -i, i * t, 7, i ^ t);
		double d = vp_torture_thr_fp((double)i, (float)t + 0.5f, i * 3, (double)t);
		struct long_double_pair m = vp_torture_ret_tm(i + t, (double)i);

		FAIL_IF(r != i + 2 * t - 3 * i + 4 * i * t + 35 + 6 * (i ^ t), "add6 round %ld",
			i);
		FAIL_IF(d != i * 2.0 + (t + 0.5) - i * 3 + t * 0.5, "thr_fp round %ld: %g", i,
			d);
		FAIL_IF(m.a != i + t - 1 || m.b != i * 4.0, "ret_tm round %ld", i);
		if (i % 100 == 0) {
			long n = 20 + t, rec = vp_torture_recurse(n);

			FAIL_IF(rec != 3 * n * (n + 1) / 2, "recursion round %ld: %ld", i, rec);
			errno = (int)(i + 1);
			FAIL_IF(vp_torture_keep_errno((int)i) != 2 * i + 1 || errno != i + 1,
				"errno %d in a thread, expected %ld", errno, i + 1);
		}
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct thread_job *job = arg;

	job->failed = thread_first_call(job);
	pthread_barrier_wait(&thread_barrier);
	if (!job->failed)
		job->failed = thread_rounds(job);
	if (!job->failed)
		job->failed = check_gprs(job->why) || check_xmm(job->why) || check_zmm(job->why);
	return NULL;
}

int case_threads(char *why)
{
	pthread_t tids[N_THREADS];
	struct thread_job jobs[N_THREADS];

	pthread_barrier_init(&thread_barrier, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++) {
		jobs[i] = (struct thread_job){ .index = i };
		FAIL_IF(pthread_create(&tids[i], NULL, thread_main, &jobs[i]) != 0,
			"pthread_create");
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&thread_barrier);
	for (int i = 0; i < N_THREADS; i++)
		FAIL_IF(jobs[i].failed, "thread %d: %s", i, jobs[i].why);
	return 0;
}

/* ---- fork, vfork, setjmp/longjmp, ucontext ---------------------------------------- */

/* The child returns through this hijacked frame, with recording off. */
TORTURE pid_t torture_fork_inner(int *child_ok)
{
	pid_t pid = fork();

	if (pid == 0)
		*child_ok = vp_torture_add6(1, 2, 3, 4, 5, 6) == 91 &&
			    vp_torture_recurse(1100) == 3 * 1100 * 1101 / 2;
	return pid;
}
VIA(torture_fork_inner);

int case_fork(char *why)
{
	int child_ok = 0, status = 0;
	pid_t pid = vp_torture_fork_inner(&child_ok);

	if (pid == 0)
		_exit(child_ok ? 42 : 1);
	FAIL_IF(pid < 0, "fork: %s", strerror(errno));
	FAIL_IF(waitpid(pid, &status, 0) != pid, "waitpid");
	FAIL_IF(!WIFEXITED(status) || WEXITSTATUS(status) != 42, "child status 0x%x", status);
	return 0;
}

static jmp_buf jump_buffer;

TORTURE void torture_lj_thrower(int n);
VIA(torture_lj_thrower);

TORTURE void torture_lj_thrower(int n)
{
	if (n <= 0)
		longjmp(jump_buffer, 7);
	vp_torture_lj_thrower(n - 1);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

/* setjmp inside an instrumented function, longjmp from frames below it. */
TORTURE int torture_lj_catcher(int n)
{
	volatile int tries = 0;
	int v = setjmp(jump_buffer);

	if (v == 0) {
		tries++;
		vp_torture_lj_thrower(n);
		return -1;
	}
	return v + tries * 100;
}
VIA(torture_lj_catcher);

int case_setjmp(char *why)
{
	for (int k = 0; k < 50; k++) {
		int r = vp_torture_lj_catcher(k % 6);

		FAIL_IF(r != 107, "round %d: %d", k, r);
	}
	FAIL_IF(vp_torture_recurse(40) != 3 * 40 * 41 / 2, "calls after the longjmps");
	return 0;
}


/* Parent and child return from vfork() on the same stack, with shared memory. */
TORTURE int torture_vfork_run(void)
{
	int status = 0;
	pid_t pid = vfork();

	if (pid == 0)
		_exit(42);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}
VIA(torture_vfork_run);

int case_vfork(char *why)
{
	int r = vp_torture_vfork_run();

	FAIL_IF(r != 42, "vfork child status %d", r);
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after vfork");
	return 0;
}

extern char **environ;

/* posix_spawn: a CLONE_VM|CLONE_VFORK child runs libc code on memory it shares with us. */
TORTURE int torture_spawn_true(void)
{
	char *argv[] = { "true", NULL };
	int status = -1;
	pid_t pid;

	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
		return -1;
	if (waitpid(pid, &status, 0) != pid)
		return -2;
	return status;
}
VIA(torture_spawn_true);

int case_spawn(char *why)
{
	for (int i = 0; i < 3; i++) {
		int r = vp_torture_spawn_true();

		FAIL_IF(r != 0, "spawn %d: status %d", i, r);
	}
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after posix_spawn");
	return 0;
}

#define CO_ROUNDS 5
#define CO_STACK_SIZE (256 * 1024)

static ucontext_t co_main_ctx, co_ctx;
static long co_value;

TORTURE long torture_co_step(long v)
{
	return v * 3 + 1;
}
VIA(torture_co_step);

/* Runs on its own stack; every swap leaves instrumented frames suspended on both stacks. */
TORTURE void torture_co_body(void)
{
	for (int i = 0; i < CO_ROUNDS; i++) {
		co_value = vp_torture_co_step(co_value);
		swapcontext(&co_ctx, &co_main_ctx);
	}
	co_value = -co_value; /* then returns: uc_link resumes the main context */
}

TORTURE long torture_co_resume(void)
{
	if (swapcontext(&co_main_ctx, &co_ctx) != 0)
		return LONG_MIN;
	return co_value;
}
VIA(torture_co_resume);

int case_ucontext(char *why)
{
	void *stack = malloc(CO_STACK_SIZE);
	volatile long expect = 1; /* getcontext() returns twice, in principle */

	FAIL_IF(!stack || getcontext(&co_ctx) != 0, "getcontext");
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = CO_STACK_SIZE;
	co_ctx.uc_link = &co_main_ctx;
	makecontext(&co_ctx, torture_co_body, 0);
	co_value = 1;
	for (int i = 0; i <= CO_ROUNDS; i++) {
		long r = vp_torture_co_resume();

		if (i < CO_ROUNDS)
			expect = expect * 3 + 1;
		else
			expect = -expect;
		if (r != expect) {
			free(stack);
			FAIL_IF(1, "resume %d: %ld, expected %ld", i, r, expect);
		}
	}
	free(stack);
	FAIL_IF(vp_torture_recurse(30) != 3 * 30 * 31 / 2, "calls after the coroutine");
	return 0;
}
