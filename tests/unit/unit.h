/* SPDX-License-Identifier: MIT */
/*
 * Minimal unit-test harness: one function per case, checks print both values
 * and file:line, each binary ends with "N passed, N failed" (tests/run.sh sums them).
 */
#ifndef PROFD_UNIT_H
#define PROFD_UNIT_H

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int unit_check_failures;
static int unit_cases_passed;
static int unit_cases_failed;

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                              \
			unit_check_failures++;                                       \
		}                                                                    \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                             \
	do {                                                                           \
		long long unit_a = (long long)(a), unit_b = (long long)(b);            \
		if (unit_a != unit_b) {                                                \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",       \
				__FILE__, __LINE__, #a, #b, unit_a, unit_b);           \
			unit_check_failures++;                                         \
		}                                                                      \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                             \
	do {                                                                           \
		uint64_t unit_a = (uint64_t)(a), unit_b = (uint64_t)(b);               \
		if (unit_a != unit_b) {                                                \
			fprintf(stderr, "%s:%d: %s == %s failed: 0x%" PRIx64             \
					" != 0x%" PRIx64 "\n",                         \
				__FILE__, __LINE__, #a, #b, unit_a, unit_b);           \
			unit_check_failures++;                                         \
		}                                                                      \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                             \
	do {                                                                           \
		const char *unit_a = (a), *unit_b = (b);                               \
		if (!unit_a || !unit_b || strcmp(unit_a, unit_b) != 0) {               \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",   \
				__FILE__, __LINE__, #a, #b, unit_a ? unit_a : "(null)", \
				unit_b ? unit_b : "(null)");                           \
			unit_check_failures++;                                         \
		}                                                                      \
	} while (0)

#define CHECK_MEM_EQ(a, b, len)                                                        \
	do {                                                                           \
		if (memcmp((a), (b), (len)) != 0) {                                    \
			fprintf(stderr, "%s:%d: memcmp(%s, %s, %zu) failed\n", __FILE__, \
				__LINE__, #a, #b, (size_t)(len));                      \
			unit_check_failures++;                                         \
		}                                                                      \
	} while (0)

static inline void unit_run(const char *name, void (*fn)(void))
{
	int before = unit_check_failures;

	fn();
	if (unit_check_failures == before) {
		unit_cases_passed++;
	} else {
		unit_cases_failed++;
		fprintf(stderr, "FAIL %s\n", name);
	}
}

#define RUN_TEST(fn) unit_run(#fn, fn)

/* Copies the file at from into fd (a case's scratch copy of a real file); 0, or -1. */
static inline int unit_copy_file(const char *from, int fd)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC);
	ssize_t n = -1;

	while (in >= 0 && fd >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	return in >= 0 && n == 0 ? 0 : -1;
}

/* xorshift64: the tests' reproducible random numbers (state: any non-zero seed). */
static inline uint64_t unit_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

static inline int unit_summary(void)
{
	printf("%d passed, %d failed\n", unit_cases_passed, unit_cases_failed);
	return unit_cases_failed ? 1 : 0;
}

#endif
