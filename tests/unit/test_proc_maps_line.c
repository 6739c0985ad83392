// SPDX-License-Identifier: MIT
/*
 * Unit tests for common/proc_maps_line.c: lines as the kernel writes them
 * (paths with spaces, deleted files, no path with and without the trailing
 * blank, 64-bit fields), malformed and overflowing ones refused, the text's
 * iteration, and every line of this process's maps equal to sscanf's parse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/proc_maps_line.h"
#include "tests/unit/unit.h"

static int parse(const char *line, struct proc_maps_line *l)
{
	memset(l, 0xa5, sizeof(*l));
	return proc_maps_line_parse(line, strlen(line), l);
}

/* l's path as a string (the parser leaves it unterminated, in the caller's text) */
static const char *path_of(const struct proc_maps_line *l)
{
	static char buf[4352];

	snprintf(buf, sizeof(buf), "%.*s", (int)l->path_len, l->path);
	return buf;
}

static void test_file_mapping(void)
{
	struct proc_maps_line l;

	CHECK_EQ_INT(parse("7f9de2747000-7f9de2748000 r-xp 0001c000 fe:00 320473"
			   "                     /usr/lib/x86_64-linux-gnu/libc.so.6", &l), 0);
	CHECK_EQ_U64(l.start, 0x7f9de2747000);
	CHECK_EQ_U64(l.end, 0x7f9de2748000);
	CHECK_EQ_INT(l.prot, PROT_READ | PROT_EXEC);
	CHECK_EQ_U64(l.pgoff, 0x1c000);
	CHECK_EQ_INT(l.major, 0xfe);
	CHECK_EQ_INT(l.minor, 0);
	CHECK_EQ_U64(l.inode, 320473);
	CHECK_EQ_STR(path_of(&l), "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

static void test_path_with_spaces_and_deleted(void)
{
	struct proc_maps_line l;

	CHECK_EQ_INT(parse("00400000-00401000 rw-s 00000000 103:02 12 /tmp/a b)  c (deleted)", &l),
		     0);
	CHECK_EQ_INT(l.prot, PROT_READ | PROT_WRITE);
	CHECK_EQ_INT(l.major, 0x103);
	CHECK_EQ_INT(l.minor, 2);
	CHECK_EQ_STR(path_of(&l), "/tmp/a b)  c (deleted)");
}

static void test_no_path(void)
{
	struct proc_maps_line l;

	/* the kernel ends a nameless mapping's line with a blank after the inode */
	CHECK_EQ_INT(parse("7f9de2752000-7f9de2754000 rw-p 00000000 00:00 0 ", &l), 0);
	CHECK_EQ_U64(l.inode, 0);
	CHECK_EQ_INT(l.path_len, 0);
	CHECK_EQ_INT(parse("7f9de2752000-7f9de2754000 ---p 00000000 00:00 0", &l), 0);
	CHECK_EQ_INT(l.prot, 0);
	CHECK_EQ_INT(l.path_len, 0);
	CHECK_EQ_INT(parse("7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0      [vdso]", &l), 0);
	CHECK_EQ_STR(path_of(&l), "[vdso]");
}

static void test_huge_fields(void)
{
	struct proc_maps_line l;

	CHECK_EQ_INT(parse("ffffffffff600000-ffffffffff601000 --xp fffffffffffff000 ffff:fffff "
			   "18446744073709551615 [vsyscall]", &l), 0);
	CHECK_EQ_U64(l.start, 0xffffffffff600000);
	CHECK_EQ_U64(l.end, 0xffffffffff601000);
	CHECK_EQ_U64(l.pgoff, 0xfffffffffffff000);
	CHECK_EQ_INT(l.major, 0xffff);
	CHECK_EQ_INT(l.minor, 0xfffff);
	CHECK_EQ_U64(l.inode, UINT64_MAX);
	CHECK_EQ_STR(path_of(&l), "[vsyscall]");
	/* one digit more than 64 bits hold */
	CHECK_EQ_INT(parse("1ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 x", &l),
		     -EINVAL);
	CHECK_EQ_INT(parse("00400000-00401000 r-xp 00000000 00:00 18446744073709551616 x", &l),
		     -EINVAL);
}

static void test_malformed(void)
{
	static const char *const bad[] = {
		"",
		"00400000",
		"00400000-",
		"00400000 00401000 r-xp 00000000 00:00 0 /x",
		"00400000-00401000 r-x 00000000 00:00 0 /x",
		"00400000-00401000 r-xp 0000000g 00:00 0 /x",
		"00400000-00401000 r-xp 00000000 0000 0 /x",
		"00400000-00401000 r-xp 00000000 00:00 /x",
		"00400000-00401000 r-xp 00000000 00:00 ",
		"0040000G-00401000 r-xp 00000000 00:00 0 /x",
		"Name:\tcat",
	};
	struct proc_maps_line l;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], &l) != -EINVAL) {
			fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
			CHECK(0);
		}
}

static void test_lines_of_text(void)
{
	static const char text[] = "a\n\nbc\nlast";
	const char *line;
	size_t off = 0, len;

	CHECK_EQ_INT(proc_maps_line_next(text, sizeof(text) - 1, &off, &line, &len), 1);
	CHECK(len == 1 && line == text);
	CHECK_EQ_INT(proc_maps_line_next(text, sizeof(text) - 1, &off, &line, &len), 1);
	CHECK_EQ_INT(len, 0);
	CHECK_EQ_INT(proc_maps_line_next(text, sizeof(text) - 1, &off, &line, &len), 1);
	CHECK(len == 2 && line == text + 3);
	CHECK_EQ_INT(proc_maps_line_next(text, sizeof(text) - 1, &off, &line, &len), 1);
	CHECK(len == 4 && memcmp(line, "last", 4) == 0);
	CHECK_EQ_INT(proc_maps_line_next(text, sizeof(text) - 1, &off, &line, &len), 0);
}

/* Every line of this process's maps (made longer than the first buffer) as sscanf reads it. */
static void test_own_maps_as_sscanf(void)
{
	size_t len, off = 0, line_len, lines = 0;
	struct proc_maps_line l;
	const char *line;
	void *extra[600];
	char *text;

	/* distinct protections keep them apart: more than 16 KiB of lines */
	for (int i = 0; i < 600; i++)
		extra[i] = mmap(NULL, 4096, i % 2 ? PROT_READ : PROT_NONE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK_EQ_INT(proc_maps_text_read(0, &text, &len), 0);
	CHECK(len > 16384);
	CHECK_EQ_INT(text[len], '\0');
	while (proc_maps_line_next(text, len, &off, &line, &line_len)) {
		unsigned long long start, end, pgoff, ino;
		unsigned int major, minor;
		char copy[4352], perms[8];
		int name = 0;

		snprintf(copy, sizeof(copy), "%.*s", (int)line_len, line);
		CHECK_EQ_INT(sscanf(copy, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms,
				    &pgoff, &major, &minor, &ino, &name), 7);
		CHECK_EQ_INT(proc_maps_line_parse(line, line_len, &l), 0);
		CHECK_EQ_U64(l.start, start);
		CHECK_EQ_U64(l.end, end);
		CHECK_EQ_U64(l.pgoff, pgoff);
		CHECK_EQ_INT(l.major, major);
		CHECK_EQ_INT(l.minor, minor);
		CHECK_EQ_U64(l.inode, ino);
		CHECK_EQ_INT(l.prot & PROT_EXEC ? 1 : 0, perms[2] == 'x');
		CHECK_EQ_STR(path_of(&l), copy + name);
		lines++;
	}
	CHECK(lines >= 600);
	free(text);
	for (int i = 0; i < 600; i++)
		munmap(extra[i], 4096);
}

static void test_missing_file(void)
{
	char *text = NULL;
	size_t len = 0;

	CHECK_EQ_INT(proc_maps_text_read(2147483647, &text, &len), -ENOENT);
	CHECK(text == NULL);
}

int main(void)
{
	RUN_TEST(test_file_mapping);
	RUN_TEST(test_path_with_spaces_and_deleted);
	RUN_TEST(test_no_path);
	RUN_TEST(test_huge_fields);
	RUN_TEST(test_malformed);
	RUN_TEST(test_lines_of_text);
	RUN_TEST(test_own_maps_as_sscanf);
	RUN_TEST(test_missing_file);
	return unit_summary();
}
