// SPDX-License-Identifier: MIT
/*
 * Unit tests for common/func_filter.c: the --funcs language (globs, comma
 * lists, excludes, module restrictions on basenames) and its error messages.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/func_filter.h"
#include "tests/unit/unit.h"

#define LIBZ "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define EXE "/home/user/build/app"

/* Parses one pattern string; NULL (and a failed check) when it does not parse. */
static struct func_filter *parse1(const char *pattern)
{
	struct func_filter *f = NULL;
	char err[256] = "";
	int ret = func_filter_parse(&pattern, 1, &f, err, sizeof(err));

	CHECK_EQ_INT(ret, 0);
	CHECK_EQ_STR(err, "");
	return f;
}

/* Expects pattern to be rejected with exactly this message. */
static void check_error(const char *pattern, const char *message)
{
	struct func_filter *f = (struct func_filter *)&f;
	char err[256] = "";

	CHECK_EQ_INT(func_filter_parse(&pattern, 1, &f, err, sizeof(err)), -EINVAL);
	CHECK(f == NULL);
	CHECK_EQ_STR(err, message);
	CHECK(strchr(err, '\n') == NULL);
}

static void test_plain_glob(void)
{
	struct func_filter *f = parse1("foo*");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "foo"));
	CHECK(func_filter_match(f, EXE, "foobar"));
	CHECK(func_filter_match(f, LIBC, "foo_in_libc"));
	CHECK(!func_filter_match(f, EXE, "barfoo"));
	CHECK(!func_filter_match(f, EXE, "Foo"));
	CHECK(!func_filter_match(f, EXE, ""));
	func_filter_free(f);
}

static void test_exact_name(void)
{
	struct func_filter *f = parse1("main");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "main"));
	CHECK(!func_filter_match(f, EXE, "main2"));
	CHECK(!func_filter_match(f, EXE, "mai"));
	func_filter_free(f);
}

static void test_comma_list_with_spaces(void)
{
	struct func_filter *f = parse1("  foo* , bar\t,baz_?  ");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "foo1"));
	CHECK(func_filter_match(f, EXE, "bar"));
	CHECK(func_filter_match(f, EXE, "baz_x"));
	CHECK(!func_filter_match(f, EXE, " bar"));
	CHECK(!func_filter_match(f, EXE, "baz_xy"));
	func_filter_free(f);
}

static void test_several_pattern_strings(void)
{
	const char *patterns[] = { "alpha*", "beta, !alpha_internal*" };
	struct func_filter *f = NULL;
	char err[128];

	CHECK_EQ_INT(func_filter_parse(patterns, 2, &f, err, sizeof(err)), 0);
	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "alpha_one"));
	CHECK(func_filter_match(f, EXE, "beta"));
	CHECK(!func_filter_match(f, EXE, "alpha_internal_x"));
	CHECK(!func_filter_match(f, EXE, "gamma"));
	func_filter_free(f);
}

static void test_excludes(void)
{
	struct func_filter *f = parse1("*, !_*, ! __libc_*");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "work"));
	CHECK(!func_filter_match(f, EXE, "_start"));
	CHECK(!func_filter_match(f, LIBC, "__libc_malloc"));
	func_filter_free(f);
}

static void test_exclude_before_include(void)
{
	struct func_filter *f = parse1("!foo_slow, foo_*");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "foo_fast"));
	CHECK(!func_filter_match(f, EXE, "foo_slow"));
	func_filter_free(f);
}

static void test_module_include(void)
{
	struct func_filter *f = parse1("libz.so*:deflate*");

	if (!f)
		return;
	CHECK(func_filter_match(f, LIBZ, "deflate"));
	CHECK(func_filter_match(f, LIBZ, "deflateInit_"));
	CHECK(!func_filter_match(f, LIBZ, "inflate"));
	CHECK(!func_filter_match(f, LIBC, "deflate"));
	CHECK(!func_filter_match(f, EXE, "deflate"));
	func_filter_free(f);
}

static void test_module_exclude(void)
{
	struct func_filter *f = parse1("*, !libc.so*:*, !app:helper_*");

	if (!f)
		return;
	CHECK(!func_filter_match(f, LIBC, "malloc"));
	CHECK(func_filter_match(f, LIBZ, "malloc"));
	CHECK(!func_filter_match(f, EXE, "helper_one"));
	CHECK(func_filter_match(f, LIBZ, "helper_one"));
	CHECK(func_filter_match(f, EXE, "main"));
	func_filter_free(f);
}

static void test_module_spaces_around_colon(void)
{
	struct func_filter *f = parse1(" libz.so* : deflate* ");

	if (!f)
		return;
	CHECK(func_filter_match(f, LIBZ, "deflateEnd"));
	CHECK(!func_filter_match(f, LIBC, "deflateEnd"));
	func_filter_free(f);
}

/* The module part matches the basename only, never the directories. */
static void test_full_path_vs_basename(void)
{
	struct func_filter *f = parse1("libz.so.1.2.13:crc32, x86_64*:a, *lib*:b");

	if (!f)
		return;
	CHECK(func_filter_match(f, LIBZ, "crc32"));
	CHECK(func_filter_match(f, "libz.so.1.2.13", "crc32"));
	CHECK(!func_filter_match(f, LIBZ, "a"));
	CHECK(func_filter_match(f, LIBZ, "b"));
	CHECK(!func_filter_match(f, "/usr/lib/x86_64-linux-gnu/app", "b"));
	CHECK(!func_filter_match(f, NULL, "crc32"));
	func_filter_free(f);

	f = parse1("/usr/lib/*:x");
	if (!f)
		return;
	CHECK(!func_filter_match(f, "/usr/lib/libq.so", "x"));
	func_filter_free(f);
}

static void test_bracket_and_question(void)
{
	struct func_filter *f = parse1("f[abc]o, g?, h[!0-9]");

	if (!f)
		return;
	CHECK(func_filter_match(f, EXE, "fao"));
	CHECK(func_filter_match(f, EXE, "fco"));
	CHECK(!func_filter_match(f, EXE, "fdo"));
	CHECK(func_filter_match(f, EXE, "g1"));
	CHECK(!func_filter_match(f, EXE, "g"));
	CHECK(!func_filter_match(f, EXE, "g12"));
	CHECK(func_filter_match(f, EXE, "hx"));
	CHECK(!func_filter_match(f, EXE, "h5"));
	func_filter_free(f);
}

static void test_module_may_match(void)
{
	struct func_filter *f = parse1("libz.so*:deflate*, !libc.so*:*");

	if (!f)
		return;
	CHECK(func_filter_module_may_match(f, LIBZ));
	CHECK(!func_filter_module_may_match(f, LIBC));
	CHECK(!func_filter_module_may_match(f, EXE));
	func_filter_free(f);

	f = parse1("main, !libc.so*:*");
	if (!f)
		return;
	CHECK(func_filter_module_may_match(f, EXE));
	CHECK(func_filter_module_may_match(f, LIBZ));
	CHECK(!func_filter_module_may_match(f, LIBC));
	func_filter_free(f);
}

static void test_error_empty_item(void)
{
	check_error("foo,,bar", "empty item 2 in \"foo,,bar\"");
	check_error("foo, ", "empty item 2 in \"foo, \"");
	check_error(",foo", "empty item 1 in \",foo\"");
}

static void test_error_bang_alone(void)
{
	check_error("foo, !", "\"!\" without a glob in item \"!\"");
	check_error("foo, !  ,bar", "\"!\" without a glob in item \"!\"");
}

static void test_error_empty_module(void)
{
	check_error("foo, :bar", "empty module before ':' in item \":bar\"");
	check_error("! :bar", "empty module before ':' in item \"! :bar\"");
}

static void test_error_empty_glob(void)
{
	check_error("libc.so*:", "empty glob after ':' in item \"libc.so*:\"");
	check_error("foo,!libz.so : ", "empty glob after ':' in item \"!libz.so :\"");
}

static void test_error_no_include(void)
{
	const char *none = NULL;
	struct func_filter *f = NULL;
	char err[128] = "";

	check_error("!foo, !bar", "no function to include (only excludes or nothing)");
	CHECK_EQ_INT(func_filter_parse(&none, 0, &f, err, sizeof(err)), -EINVAL);
	CHECK(f == NULL);
	CHECK_EQ_STR(err, "no function to include (only excludes or nothing)");
}

static void test_error_empty_string(void)
{
	check_error("", "empty pattern \"\"");
	check_error("   ", "empty pattern \"   \"");
}

/* A long or multi-line item is quoted on one bounded line. */
static void test_error_message_is_one_line(void)
{
	char pattern[300];
	const char *p = pattern;
	struct func_filter *f = NULL;
	char err[256] = "";

	memset(pattern, 'a', sizeof(pattern));
	memcpy(pattern, "x\ny:", 4);
	pattern[sizeof(pattern) - 1] = '\0';
	memcpy(pattern + 100, ", ,", 3);
	CHECK_EQ_INT(func_filter_parse(&p, 1, &f, err, sizeof(err)), -EINVAL);
	CHECK(strchr(err, '\n') == NULL);
	CHECK(strlen(err) < 120);
	CHECK(strstr(err, "empty item 2 in \"x?y:") == err);
	CHECK(strstr(err, "...\"") != NULL);
}

/* A tiny error buffer is truncated, not overrun; NULL is accepted. */
static void test_error_small_buffer(void)
{
	const char *p = "foo,,bar";
	struct func_filter *f = NULL;
	char err[8];

	memset(err, 'Z', sizeof(err));
	CHECK_EQ_INT(func_filter_parse(&p, 1, &f, err, 6), -EINVAL);
	CHECK_EQ_STR(err, "empty");
	CHECK(err[7] == 'Z');
	CHECK_EQ_INT(func_filter_parse(&p, 1, &f, NULL, 0), -EINVAL);
}

int main(void)
{
	RUN_TEST(test_plain_glob);
	RUN_TEST(test_exact_name);
	RUN_TEST(test_comma_list_with_spaces);
	RUN_TEST(test_several_pattern_strings);
	RUN_TEST(test_excludes);
	RUN_TEST(test_exclude_before_include);
	RUN_TEST(test_module_include);
	RUN_TEST(test_module_exclude);
	RUN_TEST(test_module_spaces_around_colon);
	RUN_TEST(test_full_path_vs_basename);
	RUN_TEST(test_bracket_and_question);
	RUN_TEST(test_module_may_match);
	RUN_TEST(test_error_empty_item);
	RUN_TEST(test_error_bang_alone);
	RUN_TEST(test_error_empty_module);
	RUN_TEST(test_error_empty_glob);
	RUN_TEST(test_error_no_include);
	RUN_TEST(test_error_empty_string);
	RUN_TEST(test_error_message_is_one_line);
	RUN_TEST(test_error_small_buffer);
	return unit_summary();
}
