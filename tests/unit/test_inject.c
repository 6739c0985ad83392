// SPDX-License-Identifier: MIT
/*
 * profctl/inject.c against a live four-thread target
 * (tests/targets/inject_target.c) that exits 1 on any damage to registers,
 * vector or mask registers, interrupted syscalls or signals: attach/detach
 * cycles, remote calls (with data, IFUNCs, dlopen), signals during a call,
 * error messages, and timings. Skips, saying why, where ptrace is denied.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profctl/inject.h"
#include "unit.h"

#define CALL_TIMEOUT_MS 5000
#define LINE_TIMEOUT_MS 5000
#define EXIT_TIMEOUT_MS 10000
#define TARGET_LIFETIME_S "60"
#define DLOPEN_LIB "/lib/x86_64-linux-gnu/libm.so.6"
#define TIMING_RUNS 20

static char target_path[PATH_MAX + 32];
static char skip_reason[200];

/* A running inject_target with its three standard streams. */
struct target {
	pid_t pid;
	int in, out, err;   /* its stdin (write end), stdout and stderr (read ends) */
	char buf[4096];     /* stdout bytes not yet returned as lines */
	size_t len;
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static bool skipped(void)
{
	if (skip_reason[0])
		printf("skip: %s\n", skip_reason);
	return skip_reason[0] != '\0';
}

/* Next line of the target's stdout (without '\n'), or -ETIMEDOUT / -EPIPE. */
static int target_line(struct target *tg, char *line, size_t size, int timeout_ms)
{
	int64_t deadline = mono_ns() + timeout_ms * 1000000LL;

	for (;;) {
		char *nl = memchr(tg->buf, '\n', tg->len);
		struct pollfd pfd = { tg->out, POLLIN, 0 };
		ssize_t n;

		if (nl) {
			size_t l = nl - tg->buf;

			snprintf(line, size, "%.*s", (int)l, tg->buf);
			memmove(tg->buf, nl + 1, tg->len - l - 1);
			tg->len -= l + 1;
			return 0;
		}
		if (mono_ns() > deadline || tg->len == sizeof(tg->buf))
			return -ETIMEDOUT;
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = read(tg->out, tg->buf + tg->len, sizeof(tg->buf) - tg->len);
		if (n <= 0)
			return -EPIPE;
		tg->len += n;
	}
}

static int target_start_extra(struct target *tg, const char *role, const char *extra)
{
	int in[2], out[2], err[2];
	char line[256];

	memset(tg, 0, sizeof(*tg));
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	tg->pid = fork();
	if (tg->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(target_path, "inject_target", role, TARGET_LIFETIME_S, extra, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	tg->in = in[1];
	tg->out = out[0];
	tg->err = err[0];
	if (tg->pid < 0 || target_line(tg, line, sizeof(line), LINE_TIMEOUT_MS) ||
	    strcmp(line, "ready") != 0) {
		fprintf(stderr, "%s did not start\n", target_path);
		return -1;
	}
	return 0;
}

static int target_start(struct target *tg, const char *role)
{
	return target_start_extra(tg, role, "");
}

/* Sends one byte; the target answers "got C usr1=N counter=M". */
static int target_echo(struct target *tg, char c, char *line, size_t size)
{
	if (write(tg->in, &c, 1) != 1)
		return -EPIPE;
	return target_line(tg, line, size, LINE_TIMEOUT_MS);
}

/* Closes its stdin and checks that it ends with status 0 and nothing on stderr. */
static void target_finish(struct target *tg)
{
	int64_t deadline = mono_ns() + EXIT_TIMEOUT_MS * 1000000LL;
	char errtext[512] = "";
	int status = -1;
	ssize_t n;

	close(tg->in);
	while (waitpid(tg->pid, &status, WNOHANG) == 0) {
		if (mono_ns() > deadline) {
			kill(tg->pid, SIGKILL);
			waitpid(tg->pid, &status, 0);
			fprintf(stderr, "target %d did not exit\n", tg->pid);
			break;
		}
		usleep(2000);
	}
	n = read(tg->err, errtext, sizeof(errtext) - 1);
	errtext[n > 0 ? n : 0] = '\0';
	CHECK_EQ_STR(errtext, "");
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
	close(tg->out);
	close(tg->err);
}

/* The target is neither stopped nor traced: state R, S or D. */
static bool target_running(pid_t pid)
{
	char path[64], buf[512], *paren;
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	return paren && strchr("RSD", paren[2]) != NULL;
}

static long read_target_long(pid_t pid, uint64_t addr, size_t size)
{
	char path[64];
	long v = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, &v, size, (off_t)addr) != (ssize_t)size)
		v = -1;
	if (fd >= 0)
		close(fd);
	return v;
}

static int attach_or_report(pid_t pid, struct inject_target **t)
{
	char err[256] = "";
	int rc = inject_attach(pid, t, err, sizeof(err));

	if (rc)
		fprintf(stderr, "inject_attach(%d): %d %s\n", pid, rc, err);
	return rc;
}

/* Resolves symbol and calls it; returns rax, or -1 after printing why. */
static uint64_t call_symbol(struct inject_target *t, const char *module, const char *symbol,
			    const uint64_t *args, int nargs, const void *data, size_t data_len,
			    bool others_run)
{
	char err[256] = "";
	uint64_t fn, ret = 0;
	int rc = inject_resolve(t, module, symbol, &fn, err, sizeof(err));

	if (!rc)
		rc = inject_call(t, fn, args, nargs, data, data_len, others_run, CALL_TIMEOUT_MS,
				 &ret, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s in %s: %d %s\n", symbol, module, rc, err);
		return (uint64_t)-1;
	}
	return ret;
}

static void test_attach_detach_50_times(void)
{
	struct inject_target *t;
	struct target tg;
	char line[128];
	uint64_t *ips;
	size_t n = 0;

	if (skipped() || target_start(&tg, "spin")) {
		CHECK(skip_reason[0]);
		return;
	}
	for (int i = 0; i < 50; i++) {
		if (attach_or_report(tg.pid, &t)) {
			CHECK(0);
			break;
		}
		if (i == 0) {
			CHECK_EQ_INT(inject_thread_ips(t, &ips, &n), 0);
			CHECK_EQ_INT(n, 4);
			free(ips);
		}
		inject_detach(t);
		CHECK(target_running(tg.pid));
	}
	CHECK_EQ_INT(target_echo(&tg, 'a', line, sizeof(line)), 0);
	CHECK(strncmp(line, "got a", 5) == 0);
	target_finish(&tg);
}

static void test_call_exported_function(void)
{
	const uint64_t args[2] = { 40, 2 };
	struct inject_target *t;
	struct target tg;
	char err[256], line[128];
	uint64_t counter = 0;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(inject_resolve(t, "inject_target", "inject_probe_counter", &counter, err,
				    sizeof(err)), 0);
	CHECK_EQ_INT(read_target_long(tg.pid, counter, sizeof(long)), 0);
	CHECK_EQ_U64(call_symbol(t, "inject_target", "inject_probe_add", args, 2, NULL, 0, false),
		     42);
	CHECK_EQ_INT(read_target_long(tg.pid, counter, sizeof(long)), 1);
	CHECK_EQ_U64(call_symbol(t, "inject_targ*", "inject_probe_add", args, 2, NULL, 0, true),
		     42);
	CHECK_EQ_INT(read_target_long(tg.pid, counter, sizeof(long)), 2);
	inject_detach(t);
	CHECK_EQ_INT(target_echo(&tg, 'c', line, sizeof(line)), 0);
	CHECK_EQ_STR(line, "got c usr1=0 counter=2");
	target_finish(&tg);
}

/* Calls getpid n times; role decides where the main thread (which gets the calls) is. */
static void check_getpid_calls(const char *role, int n)
{
	struct inject_target *t;
	struct target tg;
	char line[128];

	if (skipped() || target_start(&tg, role) || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	for (int i = 0; i < n; i++)
		CHECK_EQ_U64(call_symbol(t, "libc.so.6", "getpid", NULL, 0, NULL, 0, i & 1),
			     tg.pid);
	inject_detach(t);
	/* The interrupted read() (or nanosleep) resumed: the reader still answers. */
	CHECK_EQ_INT(target_echo(&tg, 'r', line, sizeof(line)), 0);
	CHECK(strncmp(line, "got r", 5) == 0);
	target_finish(&tg);
}

static void test_call_getpid_on_spinning_thread(void)
{
	check_getpid_calls("spin", 4);
}

static void test_call_on_thread_blocked_in_read(void)
{
	check_getpid_calls("read", 10);
}

/* The call goes elsewhere (restart_block), but the sleeper is stopped and resumed each time. */
static void test_calls_with_main_thread_in_nanosleep(void)
{
	check_getpid_calls("sleep", 10);
}

static void test_call_with_data_and_ifunc(void)
{
	const uint64_t args[1] = { INJECT_DATA_ADDR };
	struct inject_target *t;
	struct target tg;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	/* strlen is an IFUNC: inject_resolve runs the target's resolver. */
	CHECK_EQ_U64(call_symbol(t, "libc.so.6", "strlen", args, 1, "hello", 6, false), 5);
	inject_detach(t);
	target_finish(&tg);
}

/* glibc's EVEX strlen uses ymm16+ and k registers; the spinning thread checks them. */
static void test_extended_state_survives_calls(void)
{
	const uint64_t args[1] = { INJECT_DATA_ADDR };
	struct inject_target *t;
	struct target tg;
	char text[1001];
	char err[256] = "";
	uint64_t fn = 0, ret;
	int failures = 0;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	memset(text, 'x', 1000);
	text[1000] = '\0';
	CHECK_EQ_INT(inject_resolve(t, "libc.so.6", "strlen", &fn, err, sizeof(err)), 0);
	for (int i = 0; i < 200; i++) {
		ret = 0;
		if (inject_call(t, fn, args, 1, text, sizeof(text), i % 4 == 0, CALL_TIMEOUT_MS,
				&ret, err, sizeof(err)) || ret != 1000)
			failures++;
	}
	CHECK_EQ_INT(failures, 0);
	inject_detach(t);
	target_finish(&tg);
}

static void test_remote_dlopen(void)
{
	const uint64_t args[2] = { INJECT_DATA_ADDR, RTLD_NOW };
	struct inject_target *t;
	struct target tg;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK(!inject_has_module(t, "libm.so*"));
	CHECK(call_symbol(t, "libc.so.6", "dlopen", args, 2, DLOPEN_LIB, sizeof(DLOPEN_LIB), true)
	      + 1 > 1); /* neither NULL nor the -1 of a failure */
	CHECK(inject_has_module(t, "libm.so*"));
	inject_detach(t);
	target_finish(&tg);
}

/* Polls the reader until it reports usr1=want (signal delivery is asynchronous). */
static void check_usr1_count(struct target *tg, int want)
{
	char line[128], expect[64];

	snprintf(expect, sizeof(expect), "usr1=%d ", want);
	for (int i = 0; i < 100; i++) {
		if (target_echo(tg, 's', line, sizeof(line)) || strstr(line, expect))
			break;
		usleep(20000);
	}
	CHECK(strstr(line, expect) != NULL);
}

/* A signal raised inside the call is held, then delivered after detach, once. */
static void test_signal_during_call_is_redelivered(void)
{
	const uint64_t args[1] = { SIGUSR1 };
	struct inject_target *t;
	struct target tg;
	char err[256];
	uint64_t usr1 = 0;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(inject_resolve(t, "inject_target", "inject_probe_usr1", &usr1, err,
				    sizeof(err)), 0);
	CHECK_EQ_U64(call_symbol(t, "inject_target", "inject_probe_raise", args, 1, NULL, 0, false),
		     0);
	CHECK_EQ_INT(read_target_long(tg.pid, usr1, sizeof(int)), 0);
	inject_detach(t);
	check_usr1_count(&tg, 1);
	target_finish(&tg);
}

/* A signal sent while we hold the process reaches it (threads running during a call pass it). */
static void test_signal_while_attached_is_delivered(void)
{
	struct inject_target *t;
	struct target tg;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(kill(tg.pid, SIGUSR1), 0);
	CHECK_EQ_U64(call_symbol(t, "libc.so.6", "getpid", NULL, 0, NULL, 0, true), tg.pid);
	CHECK_EQ_INT(kill(tg.pid, SIGUSR1), 0);
	inject_detach(t);
	check_usr1_count(&tg, 2);
	target_finish(&tg);
}

/* Threads born and gone during attach and calls: all stopped, none left behind. */
static void test_attach_while_threads_come_and_go(void)
{
	struct inject_target *t;
	struct target tg;
	char line[128];
	uint64_t *ips;
	size_t n = 0;

	if (skipped() || target_start_extra(&tg, "spin", "churn")) {
		CHECK(skip_reason[0]);
		return;
	}
	for (int i = 0; i < 30; i++) {
		if (attach_or_report(tg.pid, &t)) {
			CHECK(0);
			break;
		}
		CHECK_EQ_U64(call_symbol(t, "libc.so.6", "getpid", NULL, 0, NULL, 0, true), tg.pid);
		CHECK_EQ_INT(inject_thread_ips(t, &ips, &n), 0);
		CHECK(n >= 5);
		free(ips);
		inject_detach(t);
		CHECK(target_running(tg.pid));
	}
	CHECK_EQ_INT(target_echo(&tg, 'k', line, sizeof(line)), 0);
	CHECK(strncmp(line, "got k", 5) == 0);
	target_finish(&tg);
}

static void test_call_timeout_puts_thread_back(void)
{
	const uint64_t args[1] = { 10000 };
	struct inject_target *t;
	struct target tg;
	char err[256] = "";
	uint64_t fn = 0, ret;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(inject_resolve(t, "inject_target", "inject_probe_sleep", &fn, err,
				    sizeof(err)), 0);
	CHECK_EQ_INT(inject_call(t, fn, args, 1, NULL, 0, false, 200, &ret, err, sizeof(err)),
		     -ETIMEDOUT);
	CHECK(strstr(err, "timed out after 200 ms (interrupted") != NULL);
	CHECK_EQ_U64(call_symbol(t, "libc.so.6", "getpid", NULL, 0, NULL, 0, false), tg.pid);
	inject_detach(t);
	target_finish(&tg);
}

static void test_call_fault_is_reported(void)
{
	struct inject_target *t;
	struct target tg;
	char err[256] = "";
	uint64_t ret;

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(inject_call(t, 0x10, NULL, 0, NULL, 0, false, CALL_TIMEOUT_MS, &ret, err,
				 sizeof(err)), -EFAULT);
	CHECK(strstr(err, "the call faulted") != NULL);
	CHECK_EQ_U64(call_symbol(t, "libc.so.6", "getpid", NULL, 0, NULL, 0, false), tg.pid);
	inject_detach(t);
	target_finish(&tg);
}

static void test_error_seccomp(void)
{
	struct inject_target *t = (void *)1;
	struct target tg;
	char err[256] = "";

	if (skipped() || target_start_extra(&tg, "spin", "seccomp")) {
		CHECK(skip_reason[0]);
		return;
	}
	CHECK_EQ_INT(inject_attach(tg.pid, &t, err, sizeof(err)), -ENOTSUP);
	CHECK(strstr(err, "runs under a seccomp filter") != NULL);
	CHECK(t == NULL);
	target_finish(&tg);
}

static void test_error_no_such_process(void)
{
	struct inject_target *t = (void *)1;
	char err[256] = "";
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	CHECK_EQ_INT(inject_attach(pid, &t, err, sizeof(err)), -ESRCH);
	CHECK(strncmp(err, "no such process", 15) == 0);
	CHECK(t == NULL);
}

static void test_error_already_traced(void)
{
	struct inject_target *t, *t2 = NULL;
	struct target tg;
	char err[256] = "", expect[64];

	if (skipped() || target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
		CHECK(skip_reason[0]);
		return;
	}
	snprintf(expect, sizeof(expect), "already traced by PID %d", getpid());
	CHECK_EQ_INT(inject_attach(tg.pid, &t2, err, sizeof(err)), -EBUSY);
	CHECK_EQ_STR(err, expect);
	CHECK(t2 == NULL);
	inject_detach(t);
	target_finish(&tg);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_ms(int64_t *ns, int n)
{
	qsort(ns, n, sizeof(*ns), cmp_i64);
	return ns[n / 2] / 1e6;
}

/* Not a pass/fail check: prints median attach, getpid and first-dlopen times. */
static void test_timings(void)
{
	const uint64_t args[2] = { INJECT_DATA_ADDR, RTLD_NOW };
	int64_t attach[TIMING_RUNS], getpid_ns[TIMING_RUNS], dlopen_ns[TIMING_RUNS], t0;
	struct inject_target *t;
	struct target tg;
	char err[256];
	uint64_t fn = 0, ret = 0;

	if (skipped() || target_start(&tg, "spin")) {
		CHECK(skip_reason[0]);
		return;
	}
	for (int i = 0; i < TIMING_RUNS; i++) {
		t0 = mono_ns();
		if (attach_or_report(tg.pid, &t)) {
			CHECK(0);
			break;
		}
		attach[i] = mono_ns() - t0;
		if (i == 0)
			CHECK_EQ_INT(inject_resolve(t, "libc.so.6", "getpid", &fn, err,
						    sizeof(err)), 0);
		t0 = mono_ns();
		CHECK_EQ_INT(inject_call(t, fn, NULL, 0, NULL, 0, false, CALL_TIMEOUT_MS, &ret, err,
					 sizeof(err)), 0);
		getpid_ns[i] = mono_ns() - t0;
		CHECK_EQ_U64(ret, tg.pid);
		inject_detach(t);
	}
	target_finish(&tg);
	for (int i = 0; i < TIMING_RUNS; i++) {
		if (target_start(&tg, "spin") || attach_or_report(tg.pid, &t)) {
			CHECK(0);
			return;
		}
		CHECK_EQ_INT(inject_resolve(t, "libc.so.6", "dlopen", &fn, err, sizeof(err)), 0);
		t0 = mono_ns();
		CHECK_EQ_INT(inject_call(t, fn, args, 2, DLOPEN_LIB, sizeof(DLOPEN_LIB), true,
					 CALL_TIMEOUT_MS, &ret, err, sizeof(err)), 0);
		dlopen_ns[i] = mono_ns() - t0;
		CHECK(ret != 0);
		inject_detach(t);
		target_finish(&tg);
	}
	printf("timing: attach (4 threads) %.3f ms, remote getpid %.3f ms, remote first "
	       "dlopen(libm, RTLD_NOW) %.3f ms (medians of %d)\n", median_ms(attach, TIMING_RUNS),
	       median_ms(getpid_ns, TIMING_RUNS), median_ms(dlopen_ns, TIMING_RUNS), TIMING_RUNS);
}

/* The target next to this binary, and whether this environment lets us ptrace at all. */
static void setup(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;
	pid_t child;

	self[n > 0 ? n : 0] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(target_path, sizeof(target_path), "%s/targets/inject_target", self);
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	if (ptrace(PTRACE_SEIZE, child, 0, 0))
		snprintf(skip_reason, sizeof(skip_reason), "ptrace not permitted here: %s",
			 strerror(errno));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	if (!skip_reason[0] && access(target_path, X_OK))
		fprintf(stderr, "missing %s (make all)\n", target_path);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	setup();
	RUN_TEST(test_attach_detach_50_times);
	RUN_TEST(test_call_exported_function);
	RUN_TEST(test_call_getpid_on_spinning_thread);
	RUN_TEST(test_call_on_thread_blocked_in_read);
	RUN_TEST(test_calls_with_main_thread_in_nanosleep);
	RUN_TEST(test_call_with_data_and_ifunc);
	RUN_TEST(test_extended_state_survives_calls);
	RUN_TEST(test_remote_dlopen);
	RUN_TEST(test_signal_during_call_is_redelivered);
	RUN_TEST(test_signal_while_attached_is_delivered);
	RUN_TEST(test_attach_while_threads_come_and_go);
	RUN_TEST(test_call_timeout_puts_thread_back);
	RUN_TEST(test_call_fault_is_reported);
	RUN_TEST(test_error_seccomp);
	RUN_TEST(test_error_no_such_process);
	RUN_TEST(test_error_already_traced);
	RUN_TEST(test_timings);
	return unit_summary();
}
