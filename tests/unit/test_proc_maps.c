// SPDX-License-Identifier: MIT
/*
 * Unit tests for agent/proc_maps.c's proc_maps_main_stack: the main
 * thread's stack as glibc's pthread_getattr_np finds it, from a snapshot
 * (the rlimit's cut, the mapping below's, a stack end in no mapping), and
 * equal to pthread_getattr_np's in this process; and the snapshot itself,
 * from PROCMAP_QUERY as from the text, and from the text when the ioctl is
 * refused as before Linux 6.11 (a seccomp filter in a child).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc_maps.h"
#include "tests/unit/unit.h"

#define PAGE 4096ull

extern void *__libc_stack_end;

static struct proc_map fake[] = {
	{ 0x555555554000, 0x555555556000, 5 },
	{ 0x7ffff7fc3000, 0x7ffff7fff000, 5 },   /* the highest mapping below the stack */
	{ 0x7ffffffde000, 0x7ffffffff000, 3 },   /* [stack] */
};
static const struct proc_maps fake_maps = { fake, 3 };

static void test_rlimit_cuts(void)
{
	uint64_t lo = 0, hi = 0, end = 0x7fffffffe123;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, end, 8ull << 20, PAGE, &lo, &hi), 0);
	CHECK_EQ_U64(hi, 0x7ffffffff000);
	/* rlimit less what lies above the stack end, page-aligned */
	CHECK_EQ_U64(lo, hi - (((8ull << 20) - (0x7ffffffff000 - hi)) & -PAGE));
}

static void test_mapping_below_cuts(void)
{
	uint64_t lo = 0, hi = 0;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, 0x7fffffffe123, RLIM_INFINITY, PAGE, &lo, &hi),
		     0);
	CHECK_EQ_U64(hi, 0x7ffffffff000);
	CHECK_EQ_U64(lo, 0x7ffff7fff000);
}

static void test_no_mapping(void)
{
	uint64_t lo = 1, hi = 1;

	CHECK_EQ_INT(proc_maps_main_stack(&fake_maps, 0x1000, 8ull << 20, PAGE, &lo, &hi), -ENOENT);
	CHECK_EQ_U64(lo, 1);
}

static void test_as_glibc_finds_it(void)
{
	struct proc_maps m = { 0 };
	pthread_attr_t attr;
	struct rlimit rl;
	uint64_t lo = 0, hi = 0;
	void *addr = NULL;
	size_t size = 0;

	CHECK_EQ_INT(proc_maps_load(&m), 0);
	CHECK_EQ_INT(getrlimit(RLIMIT_STACK, &rl), 0);
	CHECK_EQ_INT(pthread_getattr_np(pthread_self(), &attr), 0);
	CHECK_EQ_INT(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	CHECK_EQ_INT(proc_maps_main_stack(&m, (uint64_t)(uintptr_t)__libc_stack_end, rl.rlim_cur,
					  (uint64_t)sysconf(_SC_PAGESIZE), &lo, &hi), 0);
	CHECK_EQ_U64(lo, (uintptr_t)addr);
	CHECK_EQ_U64(hi, (uintptr_t)addr + size);
	proc_maps_free(&m);
}

static int maps_same(const struct proc_maps *text, const struct proc_maps *query, size_t n)
{
	if (n != query->n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (text->maps[i].start != query->maps[i].start ||
		    text->maps[i].end != query->maps[i].end || text->maps[i].prot != query->maps[i].prot)
			return 0;
	return 1;
}

/* The text's last line may be the gate area, which PROCMAP_QUERY leaves out. */
static int maps_equal(const struct proc_maps *text, const struct proc_maps *query)
{
	size_t n = text->n;

	if (n == query->n + 1 && text->maps[n - 1].start >= 0xffffffffff600000ull)
		n--;
	return maps_same(text, query, n);
}

/* Both ways, up to three times: a malloc between the two may move the heap's end. */
static int load_both(struct proc_maps *text, struct proc_maps *query, int *query_err)
{
	for (int tries = 0; tries < 3; tries++) {
		proc_maps_free(text);
		proc_maps_free(query);
		if (proc_maps_load_how(text, PROC_MAPS_TEXT))
			return 0;
		*query_err = proc_maps_load_how(query, PROC_MAPS_QUERY);
		if (*query_err || maps_equal(text, query))
			return 1;
	}
	return 1;
}

static void test_query_as_text(void)
{
	struct proc_maps text = { 0 }, query = { 0 };
	const struct proc_map *m;
	int err = 0;

	CHECK(load_both(&text, &query, &err));
	if (err == -ENOTTY) {
		printf("skip: test_query_as_text: no PROCMAP_QUERY (Linux 6.11)\n");
		goto out;
	}
	CHECK_EQ_INT(err, 0);
	CHECK(query.n > 3);
	CHECK(maps_equal(&text, &query));
	m = proc_maps_find(&query, (uint64_t)(uintptr_t)&test_query_as_text);
	CHECK(m && m->prot == (PROT_READ | PROT_EXEC));
	m = proc_maps_find(&query, (uint64_t)(uintptr_t)&err);
	CHECK(m && m->prot == (PROT_READ | PROT_WRITE));
out:
	proc_maps_free(&text);
	proc_maps_free(&query);
}

/* Makes every ioctl fail with ENOTTY, as on a kernel without PROCMAP_QUERY. 0, or -1. */
static int refuse_ioctl(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOTTY),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* In a child: exit 0 when the fallback gave the text's snapshot, else which check failed. */
static int fallback_child(void)
{
	struct proc_maps any = { 0 }, text = { 0 }, query = { 0 };

	if (refuse_ioctl())
		return 10;
	if (proc_maps_load_how(&query, PROC_MAPS_QUERY) != -ENOTTY || query.maps || query.n)
		return 1;
	for (int tries = 0; tries < 3; tries++) {
		proc_maps_free(&any);
		proc_maps_free(&text);
		if (proc_maps_load_how(&text, PROC_MAPS_TEXT) || proc_maps_load(&any))
			return 2;
		/* the text's gate area too: it came from the text */
		if (maps_same(&text, &any, text.n))
			return 0;
	}
	return 3;
}

static void test_fallback_to_text(void)
{
	int status = 0;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0)
		_exit(fallback_child());
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	if (WEXITSTATUS(status) == 10) {
		printf("skip: test_fallback_to_text: no seccomp filter here\n");
		return;
	}
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

int main(void)
{
	RUN_TEST(test_rlimit_cuts);
	RUN_TEST(test_mapping_below_cuts);
	RUN_TEST(test_no_mapping);
	RUN_TEST(test_as_glibc_finds_it);
	RUN_TEST(test_query_as_text);
	RUN_TEST(test_fallback_to_text);
	return unit_summary();
}
