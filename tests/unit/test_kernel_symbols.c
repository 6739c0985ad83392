// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/symbols/kernel_symbols.c on kallsyms fixtures (aliases, data
 * symbols skipped, module names, bad lines, the all-zero table kptr_restrict
 * gives) and on this machine's /proc/kallsyms checked against grep. Also
 * access_may_see_kernel (daemon/access.c), the gate in front of kernel
 * frames, for this process and for children running as nobody with chosen
 * capabilities.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/access.h"
#include "daemon/symbols/kernel_symbols.h"
#include "tests/unit/unit.h"

static const char fixture[] =
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 T _text\n"
	"ffffffff81000000 t __local_alias\n"
	"ffffffff81000100 T do_syscall_64\n"
	"ffffffff81000200 D some_data\n"           /* not text: skipped, not bad */
	"ffffffff81000300 t helper\n"
	"ffffffff81000300 W weak_helper\n"
	"this is not a kallsyms line\n"
	"ffffffff8100zz00 T bad_address\n"
	"ffffffffc0001000 t ext4_foo\t[ext4]\n"
	"ffffffffc0001080 T ext4_bar\t[ext4]\n"
	"ffffffffc0002000 t broken_module\t[ext4\n"
	"ffffffffc0100000 t xfs_thing\t[xfs]\n";

static struct kernel_symbols *from_string(const char *text, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct kernel_symbols *k;

	if (!f)
		return NULL;
	k = kernel_symbols_new(f, err, errlen);
	fclose(f);
	return k;
}

static void check_at(const struct kernel_symbols *k, uint64_t pc, const char *fn, uint64_t off,
		     const char *mapping)
{
	struct symbol_info si;

	CHECK_EQ_INT(kernel_symbols_lookup(k, pc, &si), 0);
	CHECK_EQ_STR(si.function, fn);
	CHECK_EQ_U64(si.function_offset, off);
	CHECK_EQ_STR(si.mapping_path, mapping);
	CHECK_EQ_U64(si.rel_pc, pc);
	CHECK(si.map_start <= pc && pc < si.map_end);
}

static void test_fixture_lookup(void)
{
	char err[256] = "";
	struct kernel_symbols *k = from_string(fixture, err, sizeof(err));

	CHECK(k != NULL);
	if (!k)
		return;
	check_at(k, 0xffffffff81000000, "_text", 0, "[kernel.kallsyms]"); /* global, shortest */
	check_at(k, 0xffffffff81000150, "do_syscall_64", 0x50, "[kernel.kallsyms]");
	check_at(k, 0xffffffff81000250, "do_syscall_64", 0x150, "[kernel.kallsyms]");
	check_at(k, 0xffffffff81000300, "weak_helper", 0, "[kernel.kallsyms]"); /* W over t */
	check_at(k, 0xffffffff81001fff, "weak_helper", 0x1cff, "[kernel.kallsyms]");
	check_at(k, 0xffffffffc0001010, "ext4_foo", 0x10, "[ext4]");
	check_at(k, 0xffffffffc000108f, "ext4_bar", 0xf, "[ext4]");
	check_at(k, 0xffffffffc0100004, "xfs_thing", 4, "[xfs]");
	kernel_symbols_free(k);
}

static void test_fixture_misses(void)
{
	char err[256] = "";
	struct kernel_symbols *k = from_string(fixture, err, sizeof(err));
	struct symbol_info si;

	CHECK(k != NULL);
	if (!k)
		return;
	CHECK_EQ_INT(kernel_symbols_lookup(k, 0x1000, &si), -ENOENT);
	CHECK(si.function == NULL);
	CHECK_EQ_STR(si.mapping_path, "[kernel.kallsyms]");
	/* past the last kernel symbol's page and the next: not stretched up to the modules */
	CHECK_EQ_INT(kernel_symbols_lookup(k, 0xffffffff81002000, &si), -ENOENT);
	CHECK_EQ_INT(kernel_symbols_lookup(k, 0xffffffffbfffffff, &si), -ENOENT);
	/* a module's last symbol does not run into the next module */
	CHECK_EQ_INT(kernel_symbols_lookup(k, 0xffffffffc0003000, &si), -ENOENT);
	CHECK_EQ_INT(kernel_symbols_lookup(k, UINT64_MAX, &si), -ENOENT);
	kernel_symbols_free(k);
}

static void test_fixture_stats(void)
{
	char err[256] = "";
	struct kernel_symbols *k = from_string(fixture, err, sizeof(err));
	struct kernel_symbols_stats st;

	CHECK(k != NULL);
	if (!k)
		return;
	kernel_symbols_get_stats(k, &st);
	CHECK_EQ_INT(st.n_symbols, 6);
	CHECK_EQ_INT(st.n_modules, 3);
	CHECK_EQ_INT(st.bad_lines, 3);
	kernel_symbols_free(k);
}

/* kptr_restrict shows every address as 0: refused, not a table naming every frame "_text". */
static void test_all_zero_refused(void)
{
	char err[256] = "";
	struct kernel_symbols *k = from_string("0000000000000000 T _text\n"
					       "0000000000000000 t helper\n"
					       "0000000000000000 t ext4_foo\t[ext4]\n",
					       err, sizeof(err));

	CHECK(k == NULL);
	CHECK_EQ_INT(errno, EPERM);
	CHECK(strstr(err, "zero") != NULL);
	kernel_symbols_free(k);
}

static void test_no_text_symbols(void)
{
	char err[256] = "";
	struct kernel_symbols *k = from_string("ffffffff82000000 D data\nnonsense\n", err,
					       sizeof(err));

	CHECK(k == NULL);
	CHECK_EQ_INT(errno, ENOENT);
	CHECK(strstr(err, "no text symbols") != NULL);
}

/* The address grep finds for name in /proc/kallsyms, or 0. */
static uint64_t grep_kallsyms(const char *name)
{
	char cmd[160];
	unsigned long long addr = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "grep -m1 ' [tT] %s$' /proc/kallsyms", name);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	if (fscanf(p, "%llx", &addr) != 1)
		addr = 0;
	pclose(p);
	return addr;
}

static void test_proc_kallsyms(void)
{
	char err[256] = "";
	struct kernel_symbols *k = kernel_symbols_load(NULL, err, sizeof(err));
	struct kernel_symbols_stats st;
	struct symbol_info si;
	uint64_t addr;

	if (!k) {
		CHECK_EQ_INT(errno, EPERM); /* the only acceptable failure: addresses hidden */
		CHECK(strstr(err, "kptr_restrict=") != NULL);
		printf("skip: %s\n", err);
		return;
	}
	kernel_symbols_get_stats(k, &st);
	printf("info: /proc/kallsyms: %zu text symbols, %zu modules, %llu bad lines\n",
	       st.n_symbols, st.n_modules, (unsigned long long)st.bad_lines);
	CHECK(st.n_symbols > 1000);
	CHECK_EQ_INT(st.bad_lines, 0);
	addr = grep_kallsyms("schedule");
	CHECK(addr != 0);
	CHECK_EQ_INT(kernel_symbols_lookup(k, addr + 1, &si), 0);
	CHECK_EQ_STR(si.function, "schedule");
	CHECK_EQ_U64(si.function_offset, 1);
	CHECK_EQ_STR(si.mapping_path, "[kernel.kallsyms]");
	kernel_symbols_free(k);
}

/* ---- access_may_see_kernel ------------------------------------------------------ */

static long read_sysctl(const char *name)
{
	char path[96];
	long v = -100;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	f = fopen(path, "re");
	if (f && fscanf(f, "%ld", &v) != 1)
		v = -100;
	if (f)
		fclose(f);
	return v;
}

static bool open_to_everybody(void)
{
	return read_sysctl("perf_event_paranoid") <= 1 && read_sysctl("kptr_restrict") == 0;
}

/* This process: root with every capability here, or whatever the sysctls allow. */
static void test_access_self(void)
{
	char line[256];
	unsigned long long cap_eff = 0;
	FILE *f = fopen("/proc/self/status", "re");
	struct ucred self = { getpid(), geteuid(), getegid() }, other = self;
	bool perfmon;

	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "CapEff: %llx", &cap_eff);
	if (f)
		fclose(f);
	perfmon = (cap_eff >> CAP_PERFMON & 1) ||
		  ((cap_eff >> CAP_SYSLOG & 1) && (cap_eff >> CAP_SYS_ADMIN & 1));
	other.uid += 4242;
	CHECK_EQ_INT(access_may_see_kernel(&self), perfmon || open_to_everybody());
	/* a uid that is not the process's own is not vouched for by its capabilities */
	CHECK_EQ_INT(access_may_see_kernel(&other), open_to_everybody());
	CHECK_EQ_INT(access_may_see_kernel(&(struct ucred){ 0x3ffffff0, 0, 0 }), open_to_everybody());
}

/*
 * A child that dropped to nobody, keeping only the capabilities in caps
 * (effective and permitted), blocked until *done is written. Returns its pid.
 */
static pid_t spawn_nobody(uint64_t caps, int *done_fd)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	int ready[2], done[2];
	pid_t child;
	char c = 0;

	if (pipe(ready) < 0 || pipe(done) < 0)
		return -1;
	data[0].effective = data[0].permitted = (uint32_t)caps;
	data[1].effective = data[1].permitted = (uint32_t)(caps >> 32);
	child = fork();
	if (child == 0) {
		/* our copies of the other ends would keep both sides from seeing EOF */
		close(ready[0]);
		close(done[1]);
		if (prctl(PR_SET_KEEPCAPS, 1) == 0 && setresgid(65534, 65534, 65534) == 0 &&
		    setresuid(65534, 65534, 65534) == 0 && syscall(SYS_capset, &hdr, data) == 0)
			(void)!write(ready[1], "r", 1);
		close(ready[1]);
		(void)!read(done[0], &c, 1);
		_exit(0);
	}
	close(ready[1]);
	close(done[0]);
	*done_fd = done[1];
	if (child < 0 || read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		close(done[1]);
		if (child > 0)
			waitpid(child, NULL, 0);
		return -1;
	}
	close(ready[0]);
	return child;
}

static void check_child_sees_kernel(uint64_t caps, bool want)
{
	int done = -1;
	pid_t child = spawn_nobody(caps, &done);

	CHECK(child > 0);
	if (child <= 0)
		return;
	CHECK_EQ_INT(access_may_see_kernel(&(struct ucred){ child, 65534, 65534 }),
		     want || open_to_everybody());
	close(done);
	waitpid(child, NULL, 0);
}

static void test_access_unprivileged_children(void)
{
	if (geteuid() != 0) {
		printf("skip: dropping to nobody with chosen capabilities needs root\n");
		return;
	}
	check_child_sees_kernel(0, false);
	check_child_sees_kernel(1ull << CAP_PERFMON, true);
	check_child_sees_kernel(1ull << CAP_SYS_ADMIN, false);
	check_child_sees_kernel(1ull << CAP_SYSLOG, false);
	check_child_sees_kernel(1ull << CAP_SYSLOG | 1ull << CAP_SYS_ADMIN, true);
}


int main(void)
{
	RUN_TEST(test_fixture_lookup);
	RUN_TEST(test_fixture_misses);
	RUN_TEST(test_fixture_stats);
	RUN_TEST(test_all_zero_refused);
	RUN_TEST(test_no_text_symbols);
	RUN_TEST(test_proc_kallsyms);
	RUN_TEST(test_access_self);
	RUN_TEST(test_access_unprivileged_children);
	return unit_summary();
}
