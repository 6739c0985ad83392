// SPDX-License-Identifier: MIT
/*
 * Unit tests for common/arg_spec.c: the --args/--retval language, its
 * one-line errors, glob matching and the wire descriptor round trip.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/arg_spec.h"
#include "tests/unit/unit.h"

static struct arg_spec parse_ok(const char *text, bool retval)
{
	struct arg_spec s;
	char err[256] = "";

	CHECK_EQ_INT(arg_spec_parse(text, retval, &s, err, sizeof(err)), 0);
	CHECK_EQ_STR(err, "");
	return s;
}

static void check_error(const char *text, bool retval, const char *message)
{
	struct arg_spec s;
	char err[256] = "";

	CHECK_EQ_INT(arg_spec_parse(text, retval, &s, err, sizeof(err)), -EINVAL);
	CHECK_EQ_STR(err, message);
	CHECK(strchr(err, '\n') == NULL);
}

/* The items of s as a spec writes them, comma-separated. */
static const char *formats(const struct arg_spec *s, char *buf, size_t len)
{
	char one[32];

	buf[0] = '\0';
	for (unsigned i = 0; i < s->n_items; i++) {
		strncat(buf, i ? "," : "", len - strlen(buf) - 1);
		strncat(buf, arg_item_format(&s->items[i], one, sizeof(one)), len - strlen(buf) - 1);
	}
	return buf;
}

static void test_uftrace_syntax(void)
{
	struct arg_spec s = parse_ok("foo@arg1/s,arg2,fparg1/f64", false);
	char buf[256];

	CHECK_EQ_STR(s.glob, "foo");
	CHECK_EQ_INT(s.n_items, 3);
	CHECK_EQ_STR(formats(&s, buf, sizeof(buf)), "arg1/s,arg2/i64,fparg1/f64");
	s = parse_ok("b*@arg1/i32,arg2/u8,arg3/x,arg4/c,arg5/p,arg7/d16,fparg2/f32,fparg3", false);
	CHECK_EQ_STR(formats(&s, buf, sizeof(buf)),
		     "arg1/i32,arg2/u8,arg3/x64,arg4/c,arg5/p,arg7/i16,fparg2/f32,fparg3/f64");
	s = parse_ok("open*@retval", true);
	CHECK_EQ_INT(s.items[0].source, ARG_SRC_RET);
	s = parse_ok("sqrt@retval/f64", true);
	CHECK_EQ_INT(s.items[0].source, ARG_SRC_FPRET);
	CHECK_EQ_STR(formats(&s, buf, sizeof(buf)), "retval/f64");
	s = parse_ok("name@retval/s", true);
	CHECK_EQ_INT(s.items[0].cls, ARG_CLASS_STR);
}

static void test_errors(void)
{
	check_error("foo@arg9/q", false, "--args 'foo@arg9/q': unknown format 'q'");
	check_error("foo", false, "--args 'foo': no '@' (FUNC@arg1,...)");
	check_error("@arg1", false, "--args '@arg1': no function before '@'");
	check_error("foo@arg0", false, "--args 'foo@arg0': arg0: arguments count from 1");
	check_error("foo@arg17", false, "--args 'foo@arg17': arg17: at most arg16");
	check_error("foo@fparg9", false,
		    "--args 'foo@fparg9': fparg9: at most fparg8 (the FP argument registers)");
	check_error("foo@bar", false, "--args 'foo@bar': bar: unknown argument (argN, fpargN or retval)");
	check_error("foo@arg1,,arg2", false, "--args 'foo@arg1,,arg2': empty item");
	check_error("foo@arg1/", false, "--args 'foo@arg1/': empty format after '/'");
	check_error("foo@arg1/i12", false, "--args 'foo@arg1/i12': unknown format 'i12'");
	check_error("foo@arg1/f64", false, "--args 'foo@arg1/f64': a float is an fpargN (or retval/f64)");
	check_error("foo@fparg1/s", false, "--args 'foo@fparg1/s': an fpargN is f32 or f64");
	check_error("foo@retval", false, "--args 'foo@retval': retval goes in --retval");
	check_error("foo@arg1", true, "--retval 'foo@arg1': --retval takes retval only");
	check_error("f@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9", false,
		    "--args 'f@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9': more than 8 items");
}

static void test_glob(void)
{
	struct arg_spec s = parse_ok("open*@arg1/s", false);

	CHECK(arg_spec_matches(&s, "open"));
	CHECK(arg_spec_matches(&s, "open64"));
	CHECK(!arg_spec_matches(&s, "fopen"));
	s = parse_ok("a@b@arg1", false); /* the last '@' splits: a glob may hold one */
	CHECK_EQ_STR(s.glob, "a@b");
}

static void test_desc_round_trip(void)
{
	struct arg_spec s = parse_ok("f@arg1/s,arg2/u8,arg16/x32,fparg8/f32,arg3/i16,arg4/c", false);
	struct arg_spec r = parse_ok("f@retval/f32", true);
	struct arg_item back;
	char name[16];

	s.items[s.n_items++] = r.items[0];
	for (unsigned i = 0; i < s.n_items; i++) {
		CHECK_EQ_INT(arg_desc_decode(arg_item_desc(&s.items[i]), &back), 0);
		CHECK_EQ_INT(back.source, s.items[i].source);
		CHECK_EQ_INT(back.index, s.items[i].index);
		CHECK_EQ_INT(back.cls, s.items[i].cls);
		CHECK_EQ_INT(back.size, s.items[i].size);
	}
	CHECK_EQ_STR(arg_item_name(&s.items[3], name, sizeof(name)), "fparg8");
	CHECK_EQ_STR(arg_item_name(&s.items[6], name, sizeof(name)), "retval");
	CHECK_EQ_INT(arg_desc_decode(0, &back), -EINVAL);                      /* no class */
	CHECK_EQ_INT(arg_desc_decode(17ull << 8 | 1 << 2, &back), -EINVAL);   /* arg17 */
	CHECK_EQ_INT(arg_desc_decode((1ull << 2 | ARG_SRC_RET) << 6 | 1 << 2, &back), -EINVAL);
	CHECK_EQ_INT(arg_desc_decode(1ull << 8 | 15 << 2, &back), -EINVAL);   /* unknown class */
	CHECK_EQ_INT(arg_desc_decode(~0ull, &back), -EINVAL);
}

static void test_value_cut(void)
{
	struct arg_item i32 = { .cls = ARG_CLASS_INT, .size = 4 }, u8 = { .cls = ARG_CLASS_UINT, .size = 1 };

	CHECK_EQ_U64(arg_item_value(&i32, 0xdeadbeefffffffffull), UINT64_MAX);
	CHECK_EQ_U64(arg_item_value(&i32, 0x7fffffffull), 0x7fffffffull);
	CHECK_EQ_U64(arg_item_value(&u8, 0x1ffull), 0xffull);
}

int main(void)
{
	RUN_TEST(test_uftrace_syntax);
	RUN_TEST(test_errors);
	RUN_TEST(test_glob);
	RUN_TEST(test_desc_round_trip);
	RUN_TEST(test_value_cut);
	return unit_summary();
}
