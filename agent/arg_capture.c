// SPDX-License-Identifier: MIT
/*
 * --args/--retval in the agent, outside the hooks: the session's specs, the
 * per-function table the hooks read (filled before a stub is patched, never
 * changed while it is), and the flusher's encoding of captured values into
 * the EVENTS stream (proto/event_wire.h). The capture itself is
 * agent/arg_capture_hot.c's. An entry is written by one thread at a time:
 * the setup thread, or, under the flusher's table lock, the thread in
 * dlopen (arg_capture_attach) and the flusher (arg_capture_install).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/arg_capture.h"
#include "trampolines/trampoline_layout.h"

#define ARG_SPECS_MAX 64

struct arg_capture_spec {
	struct arg_spec spec;
	int retval;
	unsigned matched;
	char text[160];
};

static struct {
	struct arg_capture_spec specs[ARG_SPECS_MAX];
	size_t n_specs;
	char refused[192]; /* why no spec applies, "" when they do */
} cap;

struct arg_func *_Atomic arg_pages[ARG_PAGES];
/* arg_pages[arg_pages_end..] are NULL: a reset does not fault in 128 KiB to find them so */
static uint32_t arg_pages_end;
uint32_t arg_string_max = ARG_STRING_MAX_DEFAULT;

static int add_specs(char **texts, size_t n, int retval, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		struct arg_capture_spec *s = &cap.specs[cap.n_specs];

		if (cap.n_specs == ARG_SPECS_MAX) {
			snprintf(err, errlen, "more than %d argument specs", ARG_SPECS_MAX);
			return -EINVAL;
		}
		if (arg_spec_parse(texts[i], retval, &s->spec, err, errlen))
			return -EINVAL;
		s->retval = retval;
		s->matched = 0;
		snprintf(s->text, sizeof(s->text), "%s", texts[i]);
		cap.n_specs++;
	}
	return 0;
}

int arg_capture_configure(char **args, size_t n_args, char **retvals, size_t n_retvals,
			  uint32_t string_max)
{
	char *err = cap.refused;
	size_t errlen = sizeof(cap.refused);

	arg_capture_reset();
	/* --auto-args installs specs later (arg_capture_install): the limit holds for them too */
	arg_string_max = string_max ? string_max : ARG_STRING_MAX_DEFAULT;
	if (arg_string_max > ARG_STRING_MAX_LIMIT)
		arg_string_max = ARG_STRING_MAX_LIMIT;
	if (!n_args && !n_retvals)
		return 0;
	if (!arg_capture_supported()) {
		/* the trampolines save what capture needs, the reading is not written yet: no garbage */
		snprintf(err, errlen, "--args/--retval: not supported on this architecture "
			 "(x86-64 and aarch64 only): no values recorded");
		return -ENOTSUP;
	}
	if (add_specs(args, n_args, 0, err, errlen) || add_specs(retvals, n_retvals, 1, err, errlen)) {
		cap.n_specs = 0;
		return -EINVAL;
	}
	return 0;
}

/* Ring units one item may take: its unit, and a string's bytes. */
static uint32_t cap_units(const struct arg_cap *c)
{
	return 1 + (c->cls == ARG_CLASS_STR ? (arg_string_max + 15) / 16 : 0);
}

static void cap_set(struct arg_cap *c, const struct arg_item *it)
{
	*c = (struct arg_cap){ .desc = (uint32_t)arg_item_desc(it), .source = it->source,
			       .index = it->index, .cls = it->cls, .size = it->size };
	if (it->source == ARG_SRC_INT)
		c->word = (int16_t)ENTER_INT_ARG_WORD(it->index);
}

/* Adds s's items to f (an item already there, by where it lives, stays as the first spec said). */
static void merge_spec(struct arg_func *f, const struct arg_capture_spec *s)
{
	for (unsigned i = 0; i < s->spec.n_items; i++) {
		const struct arg_item *it = &s->spec.items[i];
		struct arg_cap *list = s->retval ? f->exit : f->enter;
		uint8_t *n = s->retval ? &f->n_exit : &f->n_enter;
		unsigned max = s->retval ? 1 : ARG_SPEC_ITEMS_MAX, k;

		for (k = 0; k < *n; k++)
			if (list[k].source == it->source && list[k].index == it->index)
				break;
		if (k < *n || *n == max)
			continue;
		cap_set(&list[(*n)++], it);
	}
}

/* f's room in the ring and whether the hooks may copy its items inline (arg_capture_ints). */
static void func_sizes(struct arg_func *f)
{
	uint32_t units = 0;

	for (unsigned i = 0; i < f->n_enter; i++)
		units += cap_units(&f->enter[i]);
	f->enter_units = (uint16_t)(units < ARG_UNITS_MAX ? units : ARG_UNITS_MAX);
	f->ints_only = units == f->n_enter; /* a string takes more than one */
	for (unsigned i = 0; i < f->n_enter; i++)
		f->ints_only &= f->enter[i].source == ARG_SRC_INT;
	f->exit_units = (uint16_t)(f->n_exit ? cap_units(&f->exit[0]) : 0);
}

static struct arg_func *table_slot(uint32_t func_id)
{
	struct arg_func *page;

	if (func_id >= ARG_PAGE_FUNCS * ARG_PAGES)
		return NULL;
	page = atomic_load_explicit(&arg_pages[func_id / ARG_PAGE_FUNCS], memory_order_relaxed);
	if (!page) {
		page = calloc(ARG_PAGE_FUNCS, sizeof(*page));
		if (!page)
			return NULL;
		/* release: the entries' zeros before the page (pairs with arg_func_get's acquire) */
		atomic_store_explicit(&arg_pages[func_id / ARG_PAGE_FUNCS], page,
				      memory_order_release);
		if (func_id / ARG_PAGE_FUNCS >= arg_pages_end)
			arg_pages_end = func_id / ARG_PAGE_FUNCS + 1;
	}
	return &page[func_id % ARG_PAGE_FUNCS];
}

uint32_t arg_capture_attach(uint32_t func_id, const char *name)
{
	struct arg_func f = { 0 }, *slot;

	if (!cap.n_specs || !func_id)
		return 0;
	if ((slot = table_slot(func_id)))
		*slot = f; /* an id a skipped function had is given again: no stale spec */
	for (size_t i = 0; i < cap.n_specs; i++) {
		if (!arg_spec_matches(&cap.specs[i].spec, name))
			continue;
		cap.specs[i].matched++;
		merge_spec(&f, &cap.specs[i]);
	}
	if (!f.n_enter && !f.n_exit)
		return 0;
	func_sizes(&f);
	if (!slot)
		return 0;
	*slot = f; /* before the stub is patched: no hook reads it yet */
	return STUB_FLAG_ARGS;
}

bool arg_capture_supported(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

/* descs[0..n) as caps: false when one names no valid item (the whole answer is then refused) */
static bool caps_from_descs(struct arg_cap *caps, const uint32_t *descs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct arg_item it;

		if (arg_desc_decode(descs[i], &it))
			return false;
		cap_set(&caps[i], &it);
	}
	return true;
}

int arg_capture_install(uint32_t func_id, const uint32_t *enter, size_t n_enter,
			const uint32_t *exit, size_t n_exit)
{
	struct arg_func f = { 0 }, *slot;

	if (!arg_capture_supported())
		return -ENOTSUP;
	if (!func_id || n_enter > ARG_SPEC_ITEMS_MAX || n_exit > 1)
		return -EINVAL;
	if (!n_enter && !n_exit)
		return 0;
	if (!caps_from_descs(f.enter, enter, n_enter) || !caps_from_descs(f.exit, exit, n_exit))
		return -EINVAL;
	for (size_t i = 0; i < n_exit; i++)
		if (f.exit[i].source != ARG_SRC_RET && f.exit[i].source != ARG_SRC_FPRET)
			return -EINVAL;
	for (size_t i = 0; i < n_enter; i++)
		if (f.enter[i].source != ARG_SRC_INT && f.enter[i].source != ARG_SRC_FP)
			return -EINVAL;
	if (!(slot = table_slot(func_id)))
		return -ENOMEM;
	if (slot->n_enter || slot->n_exit)
		return 0; /* an explicit --args/--retval spec matched it: it wins */
	f.n_enter = (uint8_t)n_enter;
	f.n_exit = (uint8_t)n_exit;
	func_sizes(&f); /* integers only (most C parameters): the hooks' inline copy */
	*slot = f; /* before its flag: the caller publishes STUB_FLAG_ARGS with release after */
	return 1;
}

void arg_capture_unmatched(void (*fn)(void *ctx, const char *text, int retval), void *ctx)
{
	if (cap.refused[0]) {
		fn(ctx, cap.refused, -1);
		return;
	}
	for (size_t i = 0; i < cap.n_specs; i++)
		if (!cap.specs[i].matched)
			fn(ctx, cap.specs[i].text, cap.specs[i].retval);
}

void arg_capture_reset(void)
{
	/* pages stay: a thread may still return through a stub of the last session */
	for (uint32_t p = 0; p < arg_pages_end; p++) {
		struct arg_func *page = atomic_load_explicit(&arg_pages[p], memory_order_relaxed);

		if (page)
			memset(page, 0, ARG_PAGE_FUNCS * sizeof(*page));
	}
	cap.n_specs = 0;
	cap.refused[0] = '\0';
	arg_string_max = ARG_STRING_MAX_DEFAULT;
}

/* One captured value's payload (proto/event_wire.h, EVENT_VALUES). */
static uint8_t *encode_value(uint8_t *p, const struct arg_unit *u)
{
	struct arg_item it;

	if (arg_desc_decode(u->desc, &it)) /* cannot happen: the hook copied a valid one */
		it = (struct arg_item){ .cls = ARG_CLASS_HEX, .size = 8 };
	p = event_put_varint(p, u->desc);
	switch (it.cls) {
	case ARG_CLASS_INT:
		return event_put_varint(p, event_zigzag((int64_t)arg_item_value(&it, u->value)));
	case ARG_CLASS_FLOAT:
		memcpy(p, &u->value, it.size); /* little-endian: the low 4 bytes are the f32 */
		return p + it.size;
	case ARG_CLASS_STR:
		if (u->str_flags & EVENT_STR_INVALID)
			return event_put_varint(event_put_varint(p, EVENT_STR_INVALID), u->value);
		p = event_put_varint(p, (uint64_t)u->str_len << 2 | (u->str_flags & EVENT_STR_CUT));
		memcpy(p, u + 1, u->str_len);
		return p + u->str_len;
	default:
		return event_put_varint(p, arg_item_value(&it, u->value));
	}
}

uint8_t *arg_encode_values(struct event_encoder *enc, uint8_t *p, const struct arg_unit *units,
			   uint32_t n)
{
	uint32_t values = 0;

	for (uint32_t k = 0; k < n && values < EVENT_VALUES_MAX; k += 1 + units[k].str_units)
		values++;
	if (!values)
		return p;
	p = event_encode_values_tag(enc, p, values);
	for (uint32_t k = 0, v = 0; v < values; k += 1 + units[k].str_units, v++)
		p = encode_value(p, &units[k]);
	return p;
}
