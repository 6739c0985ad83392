// SPDX-License-Identifier: MIT
/*
 * The --args/--retval spec language and the wire descriptor of one value
 * (common/arg_spec.h). Parsing never allocates; every error is one line
 * that quotes the option and the spec as the user wrote them.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/arg_spec.h"

static int spec_error(char *err, size_t errlen, bool retval, const char *text, const char *fmt, ...)
{
	char why[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (err && errlen)
		snprintf(err, errlen, "%s '%s': %s", retval ? "--retval" : "--args", text, why);
	return -EINVAL;
}

/* "argN"/"fpargN"/"retval" (len bytes at s) into source and index; a reason on failure. */
static const char *parse_location(const char *s, size_t len, struct arg_item *it)
{
	const char *digits;
	unsigned long n;
	char *end;

	if (len == 6 && !strncmp(s, "retval", 6)) {
		it->source = ARG_SRC_RET;
		it->index = 0;
		return NULL;
	}
	if (len > 5 && !strncmp(s, "fparg", 5)) {
		it->source = ARG_SRC_FP;
		digits = s + 5;
	} else if (len > 3 && !strncmp(s, "arg", 3)) {
		it->source = ARG_SRC_INT;
		digits = s + 3;
	} else {
		return "unknown argument (argN, fpargN or retval)";
	}
	if (*digits < '0' || *digits > '9')
		return "unknown argument (argN, fpargN or retval)";
	n = strtoul(digits, &end, 10);
	if (end != s + len)
		return "unknown argument (argN, fpargN or retval)";
	if (n == 0)
		return "arguments count from 1";
	if (it->source == ARG_SRC_INT && n > ARG_INT_INDEX_MAX)
		return "at most arg16";
	if (it->source == ARG_SRC_FP && n > ARG_FP_INDEX_MAX)
		return "at most fparg8 (the FP argument registers)";
	it->index = (uint8_t)n;
	return NULL;
}

/* d i u x with an optional size (8 16 32 64); 0, or -1 when it is not one of those. */
static int parse_int_format(const char *f, struct arg_item *it)
{
	static const struct {
		char c;
		uint8_t cls;
	} classes[] = { { 'd', ARG_CLASS_INT }, { 'i', ARG_CLASS_INT }, { 'u', ARG_CLASS_UINT },
			{ 'x', ARG_CLASS_HEX } };

	for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++) {
		if (f[0] != classes[k].c)
			continue;
		it->cls = classes[k].cls;
		if (!f[1] || !strcmp(f + 1, "64"))
			it->size = 8;
		else if (!strcmp(f + 1, "32"))
			it->size = 4;
		else if (!strcmp(f + 1, "16"))
			it->size = 2;
		else if (!strcmp(f + 1, "8"))
			it->size = 1;
		else
			return -1;
		return 0;
	}
	return -1;
}

/* The format after '/' (NULL: none) into class and size; a reason on failure. */
static const char *parse_format(const char *f, struct arg_item *it, char *why, size_t len)
{
	bool fp = it->source == ARG_SRC_FP;

	it->cls = fp ? ARG_CLASS_FLOAT : ARG_CLASS_INT;
	it->size = 8;
	if (!f)
		return NULL;
	if (!strcmp(f, "f") || !strcmp(f, "f64") || !strcmp(f, "f32")) {
		if (it->source == ARG_SRC_INT)
			return "a float is an fpargN (or retval/f64)";
		it->source = fp ? ARG_SRC_FP : ARG_SRC_FPRET;
		it->cls = ARG_CLASS_FLOAT;
		it->size = !strcmp(f, "f32") ? 4 : 8;
		return NULL;
	}
	if (!strcmp(f, "s") || !strcmp(f, "c") || !strcmp(f, "p")) {
		it->cls = f[0] == 's' ? ARG_CLASS_STR : f[0] == 'c' ? ARG_CLASS_CHAR : ARG_CLASS_PTR;
		it->size = f[0] == 'c' ? 1 : 8;
	} else if (parse_int_format(f, it)) {
		snprintf(why, len, "unknown format '%s'", f);
		return why;
	}
	if (fp)
		return "an fpargN is f32 or f64";
	return NULL;
}

/* One item "LOC[/FMT]" of len bytes at s. */
static const char *parse_item(const char *s, size_t len, bool retval, struct arg_item *it,
			      char *why, size_t whylen)
{
	char buf[64];
	const char *slash, *bad;
	size_t loc_len;

	if (len == 0)
		return "empty item";
	if (len >= sizeof(buf))
		return "item too long";
	memcpy(buf, s, len);
	buf[len] = '\0';
	slash = strchr(buf, '/');
	loc_len = slash ? (size_t)(slash - buf) : len;
	memset(it, 0, sizeof(*it));
	if ((bad = parse_location(buf, loc_len, it))) {
		snprintf(why, whylen, "%.*s: %s", (int)loc_len,
			 buf, bad);
		return why;
	}
	if (retval != (it->source == ARG_SRC_RET))
		return retval ? "--retval takes retval only" : "retval goes in --retval";
	if (slash && !slash[1])
		return "empty format after '/'";
	return parse_format(slash ? slash + 1 : NULL, it, why, whylen);
}

int arg_spec_parse(const char *text, bool retval, struct arg_spec *out, char *err, size_t errlen)
{
	const char *at = strrchr(text, '@'), *p, *comma, *bad;
	char why[128];
	size_t glob_len;

	memset(out, 0, sizeof(*out));
	if (!at)
		return spec_error(err, errlen, retval, text, "no '@' (FUNC@%s)",
				  retval ? "retval" : "arg1,...");
	glob_len = (size_t)(at - text);
	if (glob_len == 0)
		return spec_error(err, errlen, retval, text, "no function before '@'");
	if (glob_len >= sizeof(out->glob))
		return spec_error(err, errlen, retval, text, "function glob too long");
	memcpy(out->glob, text, glob_len);
	for (p = at + 1;; p = comma + 1) {
		comma = strchr(p, ',');
		if (out->n_items == ARG_SPEC_ITEMS_MAX)
			return spec_error(err, errlen, retval, text, "more than %d items",
					  ARG_SPEC_ITEMS_MAX);
		bad = parse_item(p, comma ? (size_t)(comma - p) : strlen(p), retval,
				 &out->items[out->n_items], why, sizeof(why));
		if (bad)
			return spec_error(err, errlen, retval, text, "%s", bad);
		out->n_items++;
		if (!comma)
			return 0;
	}
}

bool arg_spec_matches(const struct arg_spec *spec, const char *func_name)
{
	return fnmatch(spec->glob, func_name, 0) == 0;
}

uint64_t arg_item_desc(const struct arg_item *item)
{
	unsigned log2 = item->size >= 8 ? 3 : item->size >= 4 ? 2 : item->size >= 2 ? 1 : 0;

	return ((uint64_t)item->index << 2 | item->source) << 6 | (uint64_t)item->cls << 2 | log2;
}

int arg_desc_decode(uint64_t desc, struct arg_item *item)
{
	uint64_t where = desc >> 6;

	memset(item, 0, sizeof(*item));
	item->cls = (uint8_t)(desc >> 2 & 15);
	item->size = (uint8_t)(1u << (desc & 3));
	item->source = (uint8_t)(where & 3);
	if (where >> 2 > ARG_INT_INDEX_MAX || item->cls == 0 || item->cls > ARG_CLASS_ENUM)
		return -EINVAL;
	item->index = (uint8_t)(where >> 2);
	if ((item->source == ARG_SRC_RET || item->source == ARG_SRC_FPRET) != (item->index == 0))
		return -EINVAL;
	if (item->source == ARG_SRC_FP && item->index > ARG_FP_INDEX_MAX)
		return -EINVAL;
	if (item->cls == ARG_CLASS_FLOAT && item->size < 4)
		return -EINVAL;
	return 0;
}

const char *arg_item_name(const struct arg_item *item, char *buf, size_t len)
{
	if (item->name)
		return item->name;
	if (item->source == ARG_SRC_RET || item->source == ARG_SRC_FPRET)
		return "retval";
	snprintf(buf, len, "%s%u", item->source == ARG_SRC_FP ? "fparg" : "arg", item->index);
	return buf;
}

const char *arg_item_format(const struct arg_item *item, char *buf, size_t len)
{
	static const char *const cls[] = { "?", "i", "u", "x", "c", "f", "p", "s", "b", "e" };
	char name[16];
	const char *c = item->cls <= ARG_CLASS_ENUM ? cls[item->cls] : "?";

	if (item->cls == ARG_CLASS_INT || item->cls == ARG_CLASS_UINT ||
	    item->cls == ARG_CLASS_HEX || item->cls == ARG_CLASS_FLOAT)
		snprintf(buf, len, "%s/%s%u", arg_item_name(item, name, sizeof(name)), c,
			 item->size * 8u);
	else
		snprintf(buf, len, "%s/%s", arg_item_name(item, name, sizeof(name)), c);
	return buf;
}
