// SPDX-License-Identifier: MIT
/*
 * --auto-args in the agent: before anything is patched, ask profd (which
 * reads the DWARF: the agent never links libdw) what to capture for the
 * functions just prepared, install its answer in the capture table and set
 * STUB_FLAG_ARGS on their stubs. Runs on the setup thread that owns the
 * socket (the constructor, profctl attach's step 1), before the flusher
 * starts; never waits longer than its bound, and never fails the session:
 * without an answer the functions record no values and a warning says so.
 * A module loaded later is patched by the thread in dlopen, which must not
 * wait for profd: the flusher asks for it (arg_auto_ask) and installs the
 * answer once it comes (arg_auto_late), the functions already running.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_thread.h"
#include "agent/arg_auto.h"
#include "agent/arg_capture.h"
#include "agent/patcher.h"
#include "trampolines/trampoline_layout.h"
#include "agent/flusher.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

/* m packed and sent as one frame of type; 0, -EMSGSIZE, -ENOMEM or the send's error. */
static int send_message(int sock, uint32_t type, const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf;
	int err;

	if (len > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	if (!(buf = malloc(len + 1)))
		return -ENOMEM;
	protobuf_c_message_pack(m, buf);
	err = flusher_send_frame(sock, type, buf, len);
	free(buf);
	return err;
}

/* The query of report's functions from `first` on (not the dropped ones); -ENOMEM, -EMSGSIZE. */
static int send_query(int sock, const struct instrument_report *r, size_t first)
{
	Profd__AutoArgsQuery q = PROFD__AUTO_ARGS_QUERY__INIT;
	size_t n = r->n_functions - first;
	Profd__AutoArgsFunction *fns = calloc(n + 1, sizeof(*fns));
	Profd__AutoArgsFunction **ptrs = calloc(n + 1, sizeof(*ptrs));
	int err = -ENOMEM;

	if (!fns || !ptrs)
		goto out;
	for (size_t i = first; i < r->n_functions; i++) {
		const struct instrumented_function *f = &r->functions[i];

		if (f->dropped)
			continue;
		profd__auto_args_function__init(&fns[q.n_functions]);
		fns[q.n_functions].id = f->id;
		fns[q.n_functions].name = f->name;
		fns[q.n_functions].module = (char *)f->module;
		fns[q.n_functions].elf_address = f->address - f->base;
		ptrs[q.n_functions] = &fns[q.n_functions];
		q.n_functions++;
	}
	q.functions = ptrs;
	err = send_message(sock, FRAME_AUTO_ARGS_QUERY, &q.base);
out:
	free(ptrs);
	free(fns);
	return err;
}

/*
 * The stub's flags with STUB_FLAG_ARGS: after the table entry (release,
 * pairs with the hooks' read of desc->flags and then arg_func_get()). The
 * slot is sealed read+exec: the patch writer opens its page for the store.
 */
static int stub_flag_set(struct patch_writer *w, const struct instrumented_function *f)
{
	struct stub_desc *desc = (struct stub_desc *)(uintptr_t)(f->stub - STUB_CODE_OFFSET +
								 STUB_DESC_OFFSET);
	uint32_t flags = desc->flags | STUB_FLAG_ARGS;

	atomic_thread_fence(memory_order_release);
	return patch_writer_write(w, (uint64_t)(uintptr_t)&desc->flags, &flags, sizeof(flags));
}

/*
 * Installs profd's answer for ids past `first`; the ids that got values go
 * to installed[] when not NULL (room for every function of a). Returns how
 * many functions got values, or a negative errno.
 */
static int install(struct instrument_plan *plan, size_t first, const Profd__AutoArgs *a,
		   uint32_t *installed)
{
	struct instrument_report *r = &plan->report;
	struct patch_writer w;
	int n = 0, err = 0;

	patch_writer_init(&w, &plan->maps);
	for (size_t i = 0; i < a->n_functions && !err; i++) {
		const Profd__AutoArgsCapture *c = a->functions[i];
		struct instrumented_function *f;
		int r_inst;

		/* ids are 1 + the index (instrument.c report_add): profd's word is checked */
		if (c->id <= first || c->id > r->n_functions) {
			err = -EBADMSG;
			break;
		}
		f = &r->functions[c->id - 1];
		if (f->dropped || !f->stub)
			continue;
		r_inst = arg_capture_install(c->id, c->enter, c->n_enter, c->exit, c->n_exit);
		if (r_inst < 0)
			err = r_inst;
		else if (r_inst && !(err = stub_flag_set(&w, f))) {
			if (installed)
				installed[n] = c->id;
			n++;
		}
	}
	if (patch_writer_finish(&w) && !err)
		err = -EIO;
	return err ? err : n;
}

int arg_auto_query(int sock, struct instrument_plan *plan, size_t first, int timeout_ms,
		   char *why, size_t whylen)
{
	struct frame_header hdr;
	uint8_t *payload = NULL;
	Profd__AutoArgs *a = NULL;
	int err;

	why[0] = '\0';
	if (!arg_capture_supported()) {
		snprintf(why, whylen, "--auto-args: not supported on this architecture "
			 "(x86-64 and aarch64 only): no values recorded");
		return -ENOTSUP;
	}
	if (plan->report.n_functions <= first)
		return 0;
	err = send_query(sock, &plan->report, first);
	if (!err)
		err = frame_recv(sock, &hdr, &payload, NULL, timeout_ms);
	if (!err && hdr.type != FRAME_AUTO_ARGS)
		err = -EPROTO;
	if (!err && !(a = profd__auto_args__unpack(NULL, hdr.length, payload)))
		err = -EBADMSG;
	if (!err)
		err = install(plan, first, a, NULL);
	if (err == -ETIMEDOUT)
		snprintf(why, whylen, "--auto-args: profd did not answer within %d ms: "
			 "calls carry no values until it does", timeout_ms);
	else if (err < 0)
		snprintf(why, whylen, "--auto-args: no values recorded (%s)", strerror(-err));
	if (a)
		profd__auto_args__free_unpacked(a, NULL);
	free(payload);
	return err;
}

int arg_auto_ask(int sock, const struct instrument_plan *plan, size_t first)
{
	if (!arg_capture_supported() || plan->report.n_functions <= first)
		return 0;
	return send_query(sock, &plan->report, first);
}

/* The calls of ids[0..n) made so far on the threads walked: counts[i] grows. */
struct calls_before {
	const uint32_t *ids;
	uint64_t *counts;
	size_t n;
};

/* t's calls of each function: returned or untimed (its figures), and open on its shadow stack. */
static void count_calls_before(struct agent_thread *t, void *ctx)
{
	struct calls_before *cb = ctx;
	uint32_t depth = state_depth(atomic_load_explicit(&t->committed, memory_order_acquire));

	for (size_t i = 0; i < cb->n; i++) {
		uint32_t id = cb->ids[i];
		/* pairs with the release in threads_map_agg_page() */
		struct func_agg *page = id < AGG_PAGE_FUNCS * AGG_PAGES ?
			atomic_load_explicit(&t->agg_pages[id / AGG_PAGE_FUNCS], memory_order_acquire) :
			NULL;

		if (page)
			cb->counts[i] += __atomic_load_n(&page[id % AGG_PAGE_FUNCS].exited,
							 __ATOMIC_RELAXED) +
					 __atomic_load_n(&page[id % AGG_PAGE_FUNCS].untimed,
							 __ATOMIC_RELAXED);
		/* an entry's figures pointer is cleared as its call returns (hooks.c agg_close) */
		for (uint32_t k = 0; k < depth && k < AGENT_SHADOW_CAPACITY; k++)
			cb->counts[i] += t->shadow[k].func_id == id &&
					 __atomic_load_n(&t->shadow[k].agg, __ATOMIC_RELAXED);
	}
}

/* FRAME_AUTO_ARGS_LATE: how many calls each of ids[0..n) made before its values were installed. */
static int send_late(int sock, const uint32_t *ids, size_t n)
{
	Profd__AutoArgsLate late = PROFD__AUTO_ARGS_LATE__INIT;
	Profd__AutoArgsLateFunction *fns = calloc(n, sizeof(*fns));
	Profd__AutoArgsLateFunction **ptrs = calloc(n, sizeof(*ptrs));
	uint64_t *counts = calloc(n, sizeof(*counts));
	struct calls_before cb = { ids, counts, n };
	int err = -ENOMEM;

	if (!fns || !ptrs || !counts)
		goto out;
	/* the flags went out before the figures are read (the writes were system calls) */
	atomic_thread_fence(memory_order_seq_cst);
	threads_for_each(count_calls_before, &cb);
	for (size_t i = 0; i < n; i++) {
		profd__auto_args_late_function__init(&fns[i]);
		fns[i].id = ids[i];
		fns[i].calls_before = counts[i];
		ptrs[i] = &fns[i];
	}
	late.n_functions = n;
	late.functions = ptrs;
	err = send_message(sock, FRAME_AUTO_ARGS_LATE, &late.base);
out:
	free(counts);
	free(ptrs);
	free(fns);
	return err;
}

int arg_auto_late(int sock, struct instrument_plan *plan, const uint8_t *payload, size_t len)
{
	Profd__AutoArgs *a = profd__auto_args__unpack(NULL, len, payload);
	uint32_t *ids = NULL;
	int n = -EBADMSG, err;

	if (!a)
		return n;
	n = -ENOMEM;
	if ((ids = calloc(a->n_functions + 1, sizeof(*ids))))
		n = install(plan, 0, a, ids);
	if (n > 0 && (err = send_late(sock, ids, (size_t)n)) < 0)
		n = err;
	free(ids);
	profd__auto_args__free_unpacked(a, NULL);
	return n;
}
