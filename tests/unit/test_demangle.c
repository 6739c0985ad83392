// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/symbols/demangle.c: C++ names made readable once,
 * suffixed names ("@plt", "@VERSION") included, anything else left alone.
 */
#include <string.h>

#include "daemon/symbols/demangle.h"
#include "tests/unit/unit.h"

static void test_plain_mangled(void)
{
	struct demangle_cache *c = demangle_cache_new();
	static const char name[] = "_Z10ex_throweri";

	CHECK_EQ_STR(demangle_cached(c, name), "ex_thrower(int)");
	/* cached by address: the same answer, the same string */
	CHECK(demangle_cached(c, name) == demangle_cached(c, name));
	demangle_cache_free(c);
}

/* A PLT entry's name, as the symbolizer gives it (seen in a sample's outermost frame). */
static void test_suffix_kept(void)
{
	struct demangle_cache *c = demangle_cache_new();

	CHECK_EQ_STR(demangle_cached(c, "_ZNSt14error_categoryC2Ev@plt"),
		     "std::error_category::error_category()@plt");
	CHECK_EQ_STR(demangle_cached(c, "_ZNSt9exceptionD2Ev@@GLIBCXX_3.4"),
		     "std::exception::~exception()@@GLIBCXX_3.4");
	demangle_cache_free(c);
}

static void test_others_untouched(void)
{
	struct demangle_cache *c = demangle_cache_new();
	static const char *const names[] = { "main", "malloc@plt", "_Znot a name@plt", "_Z@plt",
					     "_Z", "@plt", "" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(demangle_cached(c, names[i]) == names[i]);
	CHECK(demangle_cached(NULL, "_Z10ex_throweri") != NULL);
	demangle_cache_free(c);
}

/* Many names: the cache grows and every answer stays right. */
static void test_grows(void)
{
	struct demangle_cache *c = demangle_cache_new();
	static char names[3000][32];

	for (int i = 0; i < 3000; i++)
		snprintf(names[i], sizeof(names[i]), "_Z1fILi%dEEvv%s", i, i % 2 ? "@plt" : "");
	for (int i = 0; i < 3000; i++) {
		char want[48];

		snprintf(want, sizeof(want), "void f<%d>()%s", i, i % 2 ? "@plt" : "");
		if (strcmp(demangle_cached(c, names[i]), want) != 0) {
			CHECK_EQ_STR(demangle_cached(c, names[i]), want);
			break;
		}
	}
	CHECK_EQ_STR(demangle_cached(c, names[7]), "void f<7>()@plt");
	demangle_cache_free(c);
}

int main(void)
{
	RUN_TEST(test_plain_mangled);
	RUN_TEST(test_suffix_kept);
	RUN_TEST(test_others_untouched);
	RUN_TEST(test_grows);
	return unit_summary();
}
