// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/symbols/kernel_symbols_cache.c (a saved table read
 * back the same; a copy of another key, truncated or corrupted refused;
 * the copy in a directory used only when it is root's and current) and of
 * daemon/symbols/kernel_symbols_job.c (the table read on a thread: not done
 * while its file is not written, the table when it is, or the reason).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/kernel_symbols_cache.h"
#include "daemon/symbols/kernel_symbols_job.h"
#include "tests/unit/unit.h"

static const char fixture[] =
	"ffffffff81000000 T _stext\n"
	"ffffffff81000000 t __local_alias\n"
	"ffffffff81000100 T do_syscall_64\n"
	"ffffffff81000200 D some_data\n"
	"ffffffff81000300 t helper\n"
	"not a line\n"
	"ffffffffc0001000 t ext4_foo\t[ext4]\n"
	"ffffffffc0001080 T ext4_bar\t[ext4]\n"
	"ffffffffc0100000 t xfs_thing\t[xfs]\n";

/* Addresses worth asking about: on symbols, between them, before and after all. */
static const uint64_t probes[] = {
	0xffffffff80ffffffull, 0xffffffff81000000ull, 0xffffffff81000042ull,
	0xffffffff81000150ull, 0xffffffff81000301ull, 0xffffffff81002fffull,
	0xffffffffc0001000ull, 0xffffffffc0001081ull, 0xffffffffc0100010ull,
	0xffffffffc0103000ull, 0xffffffffffffffffull,
};

static struct kernel_symbols *fixture_table(void)
{
	FILE *f = fmemopen((void *)fixture, strlen(fixture), "r");
	char err[128];
	struct kernel_symbols *k = f ? kernel_symbols_new(f, err, sizeof(err)) : NULL;

	if (f)
		fclose(f);
	return k;
}

/* A memfd holding k saved under key; -1 on failure. */
static int saved(const struct kernel_symbols *k, uint64_t key)
{
	int fd = memfd_create("ksyms", MFD_CLOEXEC);

	if (fd >= 0 && kernel_symbols_save(k, fd, key) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Every probe resolves the same in a and b. */
static void check_same_lookups(const struct kernel_symbols *a, const struct kernel_symbols *b)
{
	struct kernel_symbols_stats sa, sb;

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		struct symbol_info x, y;
		int rx = kernel_symbols_lookup(a, probes[i], &x);
		int ry = kernel_symbols_lookup(b, probes[i], &y);

		CHECK_EQ_INT(rx, ry);
		CHECK_EQ_STR(x.function ? x.function : "(none)", y.function ? y.function : "(none)");
		CHECK_EQ_STR(x.mapping_path, y.mapping_path);
		CHECK_EQ_U64(x.function_offset, y.function_offset);
		CHECK_EQ_U64(x.map_start, y.map_start);
		CHECK_EQ_U64(x.map_end, y.map_end);
	}
	kernel_symbols_get_stats(a, &sa);
	kernel_symbols_get_stats(b, &sb);
	CHECK_EQ_U64(sa.n_symbols, sb.n_symbols);
	CHECK_EQ_U64(sa.n_modules, sb.n_modules);
	CHECK_EQ_U64(sa.bad_lines, sb.bad_lines);
}

static void test_round_trip(void)
{
	struct kernel_symbols *k = fixture_table(), *r;
	int fd;

	CHECK(k != NULL);
	fd = saved(k, 42);
	CHECK(fd >= 0);
	r = kernel_symbols_restore(fd, 42);
	CHECK(r != NULL);
	if (r)
		check_same_lookups(k, r);
	errno = 0;
	CHECK(kernel_symbols_restore(fd, 43) == NULL);
	CHECK_EQ_INT(errno, ESTALE);
	kernel_symbols_free(r);
	kernel_symbols_free(k);
	close(fd);
}

/* Reads fd's bytes into a buffer; returns its length. */
static size_t file_bytes(int fd, char **out)
{
	struct stat st;
	char *buf;

	if (fstat(fd, &st) || !(buf = malloc((size_t)st.st_size)) ||
	    pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
		return 0;
	*out = buf;
	return (size_t)st.st_size;
}

static struct kernel_symbols *restore_bytes(const char *buf, size_t len, uint64_t key)
{
	int fd = memfd_create("ksyms", MFD_CLOEXEC);
	struct kernel_symbols *k = NULL;

	if (fd >= 0 && write(fd, buf, len) == (ssize_t)len)
		k = kernel_symbols_restore(fd, key);
	if (fd >= 0)
		close(fd);
	return k;
}

/* The fixture saved under key 7, as bytes (*buf, the caller's to free); 0 on failure. */
static size_t fixture_bytes(char **buf)
{
	struct kernel_symbols *k = fixture_table();
	int fd = k ? saved(k, 7) : -1;
	size_t len = fd >= 0 ? file_bytes(fd, buf) : 0;

	kernel_symbols_free(k);
	if (fd >= 0)
		close(fd);
	return len;
}

static void test_truncated_refused(void)
{
	char *buf = NULL;
	size_t len = fixture_bytes(&buf), refused = 0;

	CHECK(len > 64);
	for (size_t cut = 0; cut < len; cut++) {
		struct kernel_symbols *r = restore_bytes(buf, cut, 7);

		refused += r == NULL;
		kernel_symbols_free(r);
	}
	CHECK_EQ_U64(refused, len);
	free(buf);
}

/*
 * Every byte changed, one at a time: a copy that reads at all must still
 * answer every probe with names inside the table (the sanitizers watch).
 */
static void test_corrupted_never_trusted(void)
{
	char *buf = NULL;
	size_t len = fixture_bytes(&buf), read_back = 0;

	CHECK(len > 64);
	for (size_t i = 0; i < len; i++) {
		for (int flip = 1; flip < 256; flip <<= 2) {
			struct kernel_symbols *r;

			buf[i] ^= (char)flip;
			r = restore_bytes(buf, len, 7);
			buf[i] ^= (char)flip;
			if (!r)
				continue;
			read_back++;
			for (size_t p = 0; p < sizeof(probes) / sizeof(probes[0]); p++) {
				struct symbol_info si;

				kernel_symbols_lookup(r, probes[p], &si);
				CHECK(!si.function || strlen(si.function) > 0);
				CHECK(si.mapping_path && si.mapping_path[0] == '[');
			}
			kernel_symbols_free(r);
		}
	}
	/* the names' bytes and the spans may change and still read: most else must not */
	CHECK(read_back < len * 4);
	printf("info: %zu of %zu changed copies read back\n", read_back, len * 4);
	free(buf);
}

/* ---- the copy in a directory ---------------------------------------------------- */

static void write_copy(const char *dir, const struct kernel_symbols *k, uint64_t key, int mode)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/kallsyms.cache", dir);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ_INT(kernel_symbols_save(k, fd, key), 0);
	fchmod(fd, (mode_t)mode);
	close(fd);
}

/* Whether load_cached gave the fixture (its do_syscall_64 at the fixture's address). */
static bool gave_fixture(const char *dir)
{
	char err[256];
	struct kernel_symbols *k = kernel_symbols_load_cached(dir, err, sizeof(err));
	struct symbol_info si;
	bool fixture_names;

	if (!k)
		return false;
	fixture_names = kernel_symbols_lookup(k, 0xffffffff81000150ull, &si) == 0 &&
			strcmp(si.function, "do_syscall_64") == 0 && si.function_offset == 0x50;
	kernel_symbols_free(k);
	return fixture_names;
}

static void test_directory_copy(void)
{
	char dir[] = "/tmp/ksyms-cache-XXXXXX", path[256], err[256];
	struct kernel_symbols *fix = fixture_table(), *k;
	uint64_t key = kernel_symbols_cache_key();
	struct stat st;

	if (geteuid() != 0 || !mkdtemp(dir) || !fix) {
		printf("skip: needs root (the copies are root's only)\n");
		kernel_symbols_free(fix);
		return;
	}
	CHECK(key != 0);
	snprintf(path, sizeof(path), "%s/kallsyms.cache", dir);
	write_copy(dir, fix, key, 0600);
	CHECK(gave_fixture(dir));                   /* current and root's: used */
	write_copy(dir, fix, key ^ 1, 0600);
	CHECK(!gave_fixture(dir));                  /* another key: read from /proc ... */
	CHECK(!gave_fixture(dir));                  /* ... and saved over it */
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size > 100000);
	write_copy(dir, fix, key, 0644);
	CHECK(!gave_fixture(dir));                  /* readable by others: not used */
	write_copy(dir, fix, key, 0600);
	chmod(dir, 0777);
	CHECK(!gave_fixture(dir));                  /* in a directory others may write */
	chmod(dir, 0700);
	CHECK(gave_fixture(dir));
	unlink(path);
	k = kernel_symbols_load_cached(dir, err, sizeof(err)); /* none: read, then saved */
	CHECK(k != NULL);
	CHECK(stat(path, &st) == 0);
	kernel_symbols_free(k);
	unlink(path);
	rmdir(dir);
	kernel_symbols_free(fix);
}

/* ---- the thread ----------------------------------------------------------------- */

static void test_job_waits_for_its_file(void)
{
	char dir[] = "/tmp/ksyms-job-XXXXXX", fifo[256], err[256] = "";
	struct kernel_symbols_job *job;
	struct kernel_symbols *k;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof(fifo), "%s/kallsyms", dir);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	job = kernel_symbols_job_start(fifo);
	CHECK(job != NULL);
	if (!job)
		return;
	usleep(20000);
	CHECK(!kernel_symbols_job_done(job)); /* its open waits for a writer */
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(write(fd, fixture, strlen(fixture)) == (ssize_t)strlen(fixture));
	close(fd);
	k = kernel_symbols_job_finish(job, err, sizeof(err));
	CHECK(k != NULL);
	if (k) {
		struct symbol_info si;

		CHECK_EQ_INT(kernel_symbols_lookup(k, 0xffffffffc0001081ull, &si), 0);
		CHECK_EQ_STR(si.function, "ext4_bar");
	}
	kernel_symbols_free(k);

	/* a file that is no table: the reason comes back */
	job = kernel_symbols_job_start(dir); /* a directory */
	CHECK(job != NULL);
	k = job ? kernel_symbols_job_finish(job, err, sizeof(err)) : NULL;
	CHECK(k == NULL);
	CHECK(strlen(err) > 0);

	unlink(fifo);
	rmdir(dir);
}

int main(void)
{
	RUN_TEST(test_round_trip);
	RUN_TEST(test_truncated_refused);
	RUN_TEST(test_corrupted_never_trusted);
	RUN_TEST(test_directory_copy);
	RUN_TEST(test_job_waits_for_its_file);
	return unit_summary();
}
