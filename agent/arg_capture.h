/* SPDX-License-Identifier: MIT */
/*
 * --args/--retval in the agent: the session's specs, matched against each
 * instrumented function when its stub is built (STUB_FLAG_ARGS), the table
 * of what to capture per function id, and the capture itself, which the
 * hooks' slow enter and slow exit call (agent/arg_capture_hot.c: built like
 * the hooks, general registers only, no libc, no lock, no allocation).
 * A function's entry in the table is written before its stub is patched,
 * or (--auto-args for a module loaded later) before its stub's flag is set,
 * which the hooks read with acquire; it never changes while they may read it.
 */
#ifndef PROFD_ARG_CAPTURE_H
#define PROFD_ARG_CAPTURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arg_spec.h"
#include "agent/agent_thread.h"
#include "proto/event_wire.h"

/* What to capture for one item, precomputed (the hook does no decoding). */
struct arg_cap {
	uint32_t desc;    /* arg_item_desc() */
	uint8_t source;   /* enum arg_source */
	uint8_t index;
	uint8_t cls;      /* enum arg_class */
	uint8_t size;
	int16_t word;     /* ARG_SRC_INT: ENTER_INT_ARG_WORD(index), the word by the return slot */
};

struct arg_func {
	uint8_t n_enter, n_exit;   /* 0 and 0: no spec */
	uint16_t enter_units;      /* ring units the ENTER's values may take at most */
	uint16_t exit_units;
	uint8_t ints_only;         /* every enter item an integer argument, no string: arg_capture_ints */
	struct arg_cap enter[ARG_SPEC_ITEMS_MAX];
	struct arg_cap exit[1];
};

/*
 * One captured value in the ring after its ENTER's frame (or its EXIT): a
 * string's bytes follow it in str_units more units. The record's kind
 * carries how many units follow (ARG_KIND_UNITS_SHIFT).
 */
struct arg_unit {
	uint64_t value;    /* the register (or stack word): the pointer for a string */
	uint32_t desc;
	uint16_t str_len;  /* bytes copied */
	uint8_t str_units;
	uint8_t str_flags; /* EVENT_STR_CUT, EVENT_STR_INVALID */
};
_Static_assert(sizeof(struct arg_unit) == 16, "one ring unit");
_Static_assert(offsetof(struct arg_unit, desc) == 8 && offsetof(struct arg_unit, str_flags) == 15,
	       "arg_capture_ints stores desc and the string fields as one word");

#define ARG_KIND_UNITS_SHIFT 8
/* Units one call's values take at most (the rest of a long string is cut). */
#define ARG_UNITS_MAX 48
_Static_assert(ARG_UNITS_MAX == ARG_SAVE_UNITS, "agent/agent_thread.h keeps as many per depth");
#define ARG_STRING_MAX_DEFAULT 64
#define ARG_STRING_MAX_LIMIT 256

/* Pages of AGG_PAGE_FUNCS entries, as the aggregates (agent/agent_thread.h). */
#define ARG_PAGE_FUNCS 64
#define ARG_PAGES (1u << 14)
extern struct arg_func *_Atomic arg_pages[ARG_PAGES];
/* Bytes a string is copied up to (--args-string-max); set before patching. */
extern uint32_t arg_string_max;

/* The capture of func_id, NULL when it has none. */
static inline const struct arg_func *arg_func_get(uint32_t func_id)
{
	struct arg_func *page;

	if (func_id >= ARG_PAGE_FUNCS * ARG_PAGES)
		return NULL;
	page = atomic_load_explicit(&arg_pages[func_id / ARG_PAGE_FUNCS], memory_order_acquire);
	return page ? &page[func_id % ARG_PAGE_FUNCS] : NULL;
}

/*
 * The session's specs (AgentConfig), parsed again (profd checked them).
 * Returns 0, or -EINVAL (a spec does not parse) or -ENOTSUP (an
 * architecture without capture: neither x86-64 nor aarch64); then no spec applies and
 * arg_capture_unmatched() reports the reason.
 */
int arg_capture_configure(char **args, size_t n_args, char **retvals, size_t n_retvals,
			  uint32_t string_max);

/*
 * Whether any spec applies to the function `name` with id func_id: its
 * table entry is filled and STUB_FLAG_ARGS returned (0 when none applies or
 * memory is short). Single-threaded setup (instrument_prepare).
 */
uint32_t arg_capture_attach(uint32_t func_id, const char *name);

/* Whether this architecture captures values (x86-64 and aarch64). */
bool arg_capture_supported(void);

/*
 * --auto-args: profd's capture for func_id (arg_item_desc() words: argN and
 * fpargN items to enter, at most one retval item to exit), put in its
 * table entry unless an explicit spec filled it already (that one wins).
 * Returns 1 when installed (the caller then sets STUB_FLAG_ARGS with
 * release ordering: the hooks read the entry once they see the flag), 0
 * when left as it was, -EINVAL (a descriptor names no valid item, or too
 * many), -ENOMEM, -ENOTSUP (no capture on this architecture). One thread
 * at a time (the setup thread, or the flusher under the table lock), before
 * the function is patched or with its flag still off.
 */
int arg_capture_install(uint32_t func_id, const uint32_t *enter, size_t n_enter,
			const uint32_t *exit, size_t n_exit);

/*
 * Calls fn for each spec no function matched so far (for the report's
 * warnings), or once with the reason every spec was refused (retval -1).
 */
void arg_capture_unmatched(void (*fn)(void *ctx, const char *text, int retval), void *ctx);

/* Forgets the specs and the table (a new session). */
void arg_capture_reset(void);

/*
 * agent/arg_capture_hot.c, from the hooks' slow paths: the values of f's
 * enter (return_slot: the hooked call's, the saved registers around it) or
 * exit (slot: rsp - 8 as the function returned) into out, which has room
 * for f->enter_units / f->exit_units. tid: the calling thread, whose memory
 * a string is read through. Returns the units written.
 */
uint32_t arg_capture_enter(const struct arg_func *f, const uintptr_t *return_slot,
			   struct arg_unit *out, uint32_t tid);
uint32_t arg_capture_exit(const struct arg_func *f, const uintptr_t *slot, struct arg_unit *out,
			  uint32_t tid);

/*
 * arg_capture_enter for a function whose enter items are all integer
 * arguments (f->ints_only), inlined in the hooks' path with a spec: one
 * unit each, two stores. Returns the units written (f->n_enter).
 */
static inline uint32_t arg_capture_ints(const struct arg_func *f, const uintptr_t *return_slot,
					struct arg_unit *out)
{
	uint32_t n = f->n_enter; /* once: the stores below may alias f, as far as the compiler knows */

	for (uint32_t i = 0; i < n; i++) {
		uint64_t meta = f->enter[i].desc; /* str_len, str_units, str_flags: 0 */

		out[i].value = return_slot[f->enter[i].word];
		__builtin_memcpy(&out[i].desc, &meta, sizeof(meta));
	}
	return n;
}

/* n units from src to dst, without libc (the hooks call none). */
void arg_units_copy(void *dst, const void *src, uint32_t n);

/*
 * agent/arg_capture.c, for the flusher: the VALUES item of the n units at
 * units (proto/event_wire.h), appended at p. p has EVENT_VALUES_WORST.
 */
uint8_t *arg_encode_values(struct event_encoder *enc, uint8_t *p, const struct arg_unit *units,
			   uint32_t n);

#endif
