// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/symbols/jit_map.c: line validation (good lines kept, bad ones
 * counted), overlapping entries, partial last lines, incremental rereads of
 * an appended file, and the refusals that keep a root daemon safe: symlinks,
 * FIFOs, files others may write or that belong to another user, oversize
 * files. Maps are temp files named by path, owned by this (target) process.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/jit_map.h"
#include "tests/unit/unit.h"

static long parse_str(struct jit_map *m, const char *text)
{
	return jit_map_parse(m, text, strlen(text));
}

static const char *name_at(const struct jit_map *m, uint64_t pc)
{
	struct jit_symbol js;

	return jit_map_find(m, pc, &js) == 0 ? js.name : NULL;
}

static void test_parse_and_find(void)
{
	struct jit_map *m = jit_map_new(getpid(), "/nonexistent");
	struct jit_map_stats st;
	struct jit_symbol js;
	const char *text = "7f0000001000 40 LazyCompile:*foo a.js:1\n"
			   "7f0000002000 100 Interpreter\n";

	CHECK_EQ_INT(parse_str(m, text), (long)strlen(text));
	CHECK_EQ_INT(jit_map_find(m, 0x7f0000001000, &js), 0);
	CHECK_EQ_STR(js.name, "LazyCompile:*foo a.js:1");
	CHECK_EQ_U64(js.start, 0x7f0000001000);
	CHECK_EQ_U64(js.end, 0x7f0000001040);
	CHECK_EQ_STR(name_at(m, 0x7f000000103f), "LazyCompile:*foo a.js:1");
	CHECK(name_at(m, 0x7f0000001040) == NULL); /* one past the end */
	CHECK(name_at(m, 0x7f0000000fff) == NULL);
	CHECK_EQ_STR(name_at(m, 0x7f00000020ff), "Interpreter");
	CHECK(name_at(m, 0x7f0000002100) == NULL);
	jit_map_get_stats(m, &st);
	CHECK_EQ_INT(st.n_symbols, 2);
	CHECK_EQ_INT(st.bad_lines, 0);
	jit_map_free(m);
}

static void test_bad_lines_skipped_and_counted(void)
{
	static const char text[] =
		"1000 10 good one\n"
		"zz00 10 not hex\n"
		"2000 0 empty range\n"
		"3000 10\n"                              /* no name */
		"3000 10 \n"                             /* empty name */
		"fffffffffffffff0 20 wraps\n"
		"10000000000000000 1 seventeen digits\n"
		"4000 10 control\001byte\n"
		"5000\t10 tab separated\n"
		"\n"
		"0x6000 0x10 with 0x\n"
		"7000 10 crlf\r\n"
		"8000  10  two spaces\n";
	struct jit_map *m = jit_map_new(getpid(), "/nonexistent");
	struct jit_map_stats st;

	CHECK_EQ_INT(parse_str(m, text), (long)strlen(text));
	jit_map_get_stats(m, &st);
	CHECK_EQ_INT(st.bad_lines, 9);
	CHECK_EQ_INT(st.n_symbols, 4);
	CHECK_EQ_STR(name_at(m, 0x1005), "good one");
	CHECK_EQ_STR(name_at(m, 0x6005), "with 0x");
	CHECK_EQ_STR(name_at(m, 0x7005), "crlf");
	CHECK_EQ_STR(name_at(m, 0x8005), "two spaces");
	CHECK(name_at(m, 0x2000) == NULL);
	CHECK(name_at(m, 0x4005) == NULL);
	jit_map_free(m);
}

/* Code freed and reused by a later function: the later line names it. */
static void test_overlap_later_line_wins(void)
{
	struct jit_map *m = jit_map_new(getpid(), "/nonexistent");

	parse_str(m, "1000 100 old_big\n1040 20 newer_small\n1000 10 newest_at_start\n");
	CHECK_EQ_STR(name_at(m, 0x1005), "newest_at_start");
	CHECK_EQ_STR(name_at(m, 0x1020), "old_big");
	CHECK_EQ_STR(name_at(m, 0x1045), "newer_small");
	CHECK_EQ_STR(name_at(m, 0x1080), "old_big");
	/* a later line starting lower still wins */
	parse_str(m, "2040 20 older_small\n2000 100 newer_big\n");
	CHECK_EQ_STR(name_at(m, 0x2045), "newer_big");
	jit_map_free(m);
}

/* A JIT may be mid-write: the line without its newline is left for later. */
static void test_partial_line_waits(void)
{
	struct jit_map *m = jit_map_new(getpid(), "/nonexistent");
	struct jit_map_stats st;

	CHECK_EQ_INT(parse_str(m, "1000 10 done\n2000 10 half"), 13);
	jit_map_get_stats(m, &st);
	CHECK_EQ_INT(st.n_symbols, 1);
	CHECK_EQ_INT(st.bad_lines, 0);
	jit_map_free(m);
}

/* ---- files -------------------------------------------------------------------- */

struct map_file {
	char path[64];
};

static int map_file_new(struct map_file *f, const char *text)
{
	int fd;

	snprintf(f->path, sizeof(f->path), "/tmp/profd-jitmap-XXXXXX");
	fd = mkstemp(f->path);
	if (fd < 0)
		return -1;
	fchmod(fd, 0644);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static void map_file_append(const struct map_file *f, const char *text)
{
	int fd = open(f->path, O_WRONLY | O_APPEND);

	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	if (fd >= 0)
		close(fd);
}

static void test_refresh_reads_appended_lines(void)
{
	struct map_file f;
	struct jit_map *m;
	struct jit_map_stats st;
	const char *first;

	CHECK_EQ_INT(map_file_new(&f, "1000 10 a\n2000 10 b"), 0);
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	first = name_at(m, 0x1000);
	CHECK_EQ_STR(first, "a");
	CHECK(name_at(m, 0x2000) == NULL);        /* not finished yet */
	CHECK_EQ_INT(jit_map_refresh(m), 0);      /* unchanged: nothing read */
	map_file_append(&f, "\n3000 10 c\n");
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK_EQ_STR(name_at(m, 0x2000), "b");
	CHECK_EQ_STR(name_at(m, 0x3000), "c");
	CHECK(name_at(m, 0x1000) == first);       /* names never move */
	jit_map_get_stats(m, &st);
	CHECK_EQ_INT(st.n_symbols, 3);            /* the appended part only, no duplicates */
	CHECK_EQ_INT(st.reads, 2);
	jit_map_free(m);
	unlink(f.path);
}

static void test_refresh_rereads_replaced_file(void)
{
	struct map_file f, g;
	struct jit_map *m;
	const char *old_name;

	CHECK_EQ_INT(map_file_new(&f, "1000 10 before\n"), 0);
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	old_name = name_at(m, 0x1000);
	CHECK_EQ_INT(map_file_new(&g, "5000 10 after\n"), 0);
	CHECK_EQ_INT(rename(g.path, f.path), 0); /* same path, new inode */
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK(name_at(m, 0x1000) == NULL);
	CHECK_EQ_STR(name_at(m, 0x5000), "after");
	CHECK_EQ_STR(old_name, "before");         /* still valid memory */
	jit_map_free(m);
	unlink(f.path);
}

/* Truncated and rewritten longer: looks like an append, but the old bytes changed. */
static void test_refresh_rereads_rewritten_file(void)
{
	struct map_file f;
	struct jit_map *m;
	struct jit_map_stats st;

	CHECK_EQ_INT(map_file_new(&f, "5000 10 after\n"), 0);
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK_EQ_INT(truncate(f.path, 0), 0);
	map_file_append(&f, "6000 10 rewritten\n");
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK(name_at(m, 0x5000) == NULL);
	CHECK_EQ_STR(name_at(m, 0x6000), "rewritten");
	jit_map_get_stats(m, &st);
	CHECK_EQ_INT(st.n_symbols, 1);
	CHECK_EQ_INT(st.bad_lines, 0);
	jit_map_free(m);
	unlink(f.path);
}

static void test_missing_file(void)
{
	struct jit_map *m = jit_map_new(getpid(), "/tmp/profd-jitmap-does-not-exist");

	CHECK_EQ_INT(jit_map_refresh(m), -ENOENT);
	CHECK(jit_map_error(m) == NULL); /* no map is normal, not an error */
	jit_map_free(m);
}

static void test_refuses_symlink(void)
{
	struct map_file f;
	char link[80];
	struct jit_map *m;

	CHECK_EQ_INT(map_file_new(&f, "1000 10 a\n"), 0);
	snprintf(link, sizeof(link), "%s.link", f.path);
	CHECK_EQ_INT(symlink(f.path, link), 0);
	m = jit_map_new(getpid(), link);
	CHECK_EQ_INT(jit_map_refresh(m), -ELOOP);
	CHECK(name_at(m, 0x1000) == NULL);
	CHECK(jit_map_error(m) && strstr(jit_map_error(m), "symlink"));
	jit_map_free(m);
	unlink(link);
	unlink(f.path);
}

static void test_refuses_fifo_without_blocking(void)
{
	char path[64];
	struct jit_map *m;

	snprintf(path, sizeof(path), "/tmp/profd-jitmap-fifo-%d", (int)getpid());
	unlink(path);
	CHECK_EQ_INT(mkfifo(path, 0644), 0);
	m = jit_map_new(getpid(), path);
	CHECK_EQ_INT(jit_map_refresh(m), -EPERM); /* would hang without O_NONBLOCK */
	CHECK(jit_map_error(m) && strstr(jit_map_error(m), "regular"));
	jit_map_free(m);
	unlink(path);
}

static void test_refuses_writable_by_others(void)
{
	struct map_file f;
	struct jit_map *m;

	CHECK_EQ_INT(map_file_new(&f, "1000 10 a\n"), 0);
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK_EQ_INT(chmod(f.path, 0666), 0);
	map_file_append(&f, "2000 10 forged\n");
	CHECK_EQ_INT(jit_map_refresh(m), -EPERM);
	CHECK(name_at(m, 0x2000) == NULL);
	CHECK_EQ_STR(name_at(m, 0x1000), "a");  /* what was read stays */
	jit_map_free(m);
	unlink(f.path);
}

static void test_refuses_other_owner(void)
{
	struct map_file f;
	struct jit_map *m;

	if (geteuid() != 0) {
		printf("skip: chown needs root\n");
		return;
	}
	CHECK_EQ_INT(map_file_new(&f, "1000 10 a\n"), 0);
	CHECK_EQ_INT(chown(f.path, 65534, 65534), 0);
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), -EPERM);
	CHECK(jit_map_error(m) && strstr(jit_map_error(m), "owned"));
	CHECK(name_at(m, 0x1000) == NULL);
	jit_map_free(m);
	unlink(f.path);
}

static void test_refuses_oversize(void)
{
	struct map_file f;
	struct jit_map *m;

	CHECK_EQ_INT(map_file_new(&f, "1000 10 a\n"), 0);
	CHECK_EQ_INT(truncate(f.path, (off_t)JIT_MAP_MAX_FILE_BYTES + 1), 0); /* sparse */
	m = jit_map_new(getpid(), f.path);
	CHECK_EQ_INT(jit_map_refresh(m), -EFBIG);
	CHECK(name_at(m, 0x1000) == NULL);
	jit_map_free(m);
	unlink(f.path);
}

/* The default path: /tmp/perf-PID.map inside this process's own root. */
static void test_default_path_in_target_root(void)
{
	char path[64];
	struct jit_map *m;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	f = fopen(path, "we");
	CHECK(f != NULL);
	if (!f)
		return;
	fprintf(f, "abc000 20 from_default_path\n");
	fclose(f);
	chmod(path, 0644);
	m = jit_map_new(getpid(), NULL);
	CHECK_EQ_INT(jit_map_refresh(m), 1);
	CHECK_EQ_STR(name_at(m, 0xabc010), "from_default_path");
	jit_map_free(m);
	unlink(path);
}

/* Random bytes, lines and near-valid lines: never a crash, names always printable. */
static void test_random_input(void)
{
	static char buf[4096];
	struct jit_map *m = jit_map_new(getpid(), "/nonexistent");
	uint64_t x = 0x2545f4914f6cdd1dull;
	struct jit_map_stats st;
	struct jit_symbol js;
	size_t i, k, bad_names = 0;

	for (i = 0; i < 3000; i++) {
		for (k = 0; k < sizeof(buf); k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[k] = "0123456789abcdef \n\t\rxZ\001"[(x >> 24) % 23];
		}
		jit_map_parse(m, buf, (size_t)(x % sizeof(buf)));
	}
	jit_map_get_stats(m, &st);
	for (i = 0; i < 2000; i++, x = x * 6364136223846793005ull + 1)
		if (jit_map_find(m, x >> (x % 48), &js) == 0)
			for (k = 0; js.name[k]; k++)
				bad_names += (unsigned char)js.name[k] < 0x20;
	printf("info: random input: %zu symbols, %llu bad lines\n", st.n_symbols,
	       (unsigned long long)st.bad_lines);
	CHECK(st.n_symbols > 0 && st.bad_lines > 0);
	CHECK_EQ_INT(bad_names, 0);
	jit_map_free(m);
}

int main(void)
{
	RUN_TEST(test_parse_and_find);
	RUN_TEST(test_bad_lines_skipped_and_counted);
	RUN_TEST(test_overlap_later_line_wins);
	RUN_TEST(test_partial_line_waits);
	RUN_TEST(test_refresh_reads_appended_lines);
	RUN_TEST(test_refresh_rereads_replaced_file);
	RUN_TEST(test_refresh_rereads_rewritten_file);
	RUN_TEST(test_missing_file);
	RUN_TEST(test_refuses_symlink);
	RUN_TEST(test_refuses_fifo_without_blocking);
	RUN_TEST(test_refuses_writable_by_others);
	RUN_TEST(test_refuses_other_owner);
	RUN_TEST(test_refuses_oversize);
	RUN_TEST(test_default_path_in_target_root);
	RUN_TEST(test_random_input);
	return unit_summary();
}
