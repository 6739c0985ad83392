// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/sampling/unwind_files.c: a file opened for one
 * process's mapping is found by its identity for the next ones (one
 * descriptor, one libelf handle counted for each user), not when it was
 * rewritten in place since, never for an unknown identity; what is not an
 * x86-64 ELF file is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/sampling/unwind_files.h"
#include "tests/unit/unit.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static struct unwind_file_id id_of(int fd)
{
	struct stat st;

	CHECK_EQ_INT(fstat(fd, &st), 0);
	return (struct unwind_file_id){ (uint64_t)st.st_dev, (uint64_t)st.st_ino };
}

static void test_found_by_identity(void)
{
	struct unwind_files *fs = unwind_files_new();
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC), err = 0;
	struct unwind_file_id id = id_of(fd);
	struct unwind_file *a = unwind_file_open(fs, &id, fd, &err), *b;
	Elf *e1, *e2;

	CHECK(a != NULL);
	CHECK_EQ_INT(err, 0);
	if (!a)
		goto out;
	CHECK(a->n_loads >= 2);
	CHECK(!a->is_exec);
	b = unwind_files_find(fs, &id);
	CHECK(b == a);
	e1 = unwind_file_elf(a);
	e2 = unwind_file_elf(b);
	CHECK(e1 != NULL && e1 == e2); /* one handle, counted for each libdwfl session */
	CHECK_EQ_INT(elf_end(e1), 2); /* the file's own count and e2's left */
	CHECK_EQ_INT(elf_end(e2), 1);
	unwind_file_put(b);
	unwind_file_put(a);
out:
	unwind_files_free(fs);
}

static void test_unknown_identity_not_shared(void)
{
	struct unwind_files *fs = unwind_files_new();
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC), err = 0;
	struct unwind_file *a = unwind_file_open(fs, NULL, fd, &err);
	struct unwind_file_id none = { 0, 0 };

	CHECK(a != NULL);
	CHECK(unwind_files_find(fs, NULL) == NULL);
	CHECK(unwind_files_find(fs, &none) == NULL);
	unwind_file_put(a);
	unwind_files_free(fs);
}

static void test_rewritten_file_not_shared(void)
{
	char path[] = "/tmp/test_unwind_files.XXXXXX";
	struct unwind_files *fs = unwind_files_new();
	int out = mkstemp(path), err = 0;
	struct unwind_file *a = NULL, *b = NULL;
	struct unwind_file_id id;

	CHECK_EQ_INT(unit_copy_file(LIBC, out), 0);
	id = id_of(out);
	a = unwind_file_open(fs, &id, open(path, O_RDONLY | O_CLOEXEC), &err);
	CHECK(a != NULL);
	b = unwind_files_find(fs, &id);
	CHECK(b == a);
	unwind_file_put(b);
	CHECK_EQ_INT(write(out, "x", 1), 1); /* the same inode, rewritten */
	CHECK(unwind_files_find(fs, &id) == NULL);
	b = unwind_file_open(fs, &id, open(path, O_RDONLY | O_CLOEXEC), &err);
	CHECK(b != NULL && b != a);
	CHECK(unwind_files_find(fs, &id) == b); /* the new one stands for it */
	if (b)
		unwind_file_put(b); /* find's */
	unwind_file_put(b);
	unwind_file_put(a);
	unwind_files_free(fs);
	if (out >= 0)
		close(out);
	unlink(path);
}

static void test_not_elf_refused(void)
{
	struct unwind_files *fs = unwind_files_new();
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC), err = 0;
	struct unwind_file_id id = { 1, 2 };

	CHECK(unwind_file_open(fs, &id, fd, &err) == NULL);
	CHECK_EQ_INT(err, -ENOEXEC);
	CHECK(unwind_files_find(fs, &id) == NULL);
	unwind_files_free(fs);
}

int main(void)
{
	elf_version(EV_CURRENT);
	RUN_TEST(test_found_by_identity);
	RUN_TEST(test_unknown_identity_not_shared);
	RUN_TEST(test_rewritten_file_not_shared);
	RUN_TEST(test_not_elf_refused);
	return unit_summary();
}
