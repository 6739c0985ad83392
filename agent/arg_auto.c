// SPDX-License-Identifier: MIT
/*
 * --auto-args in the agent: before anything is patched, ask profd (which
 * reads the DWARF: the agent never links libdw) what to capture for the
 * functions just prepared, install its answer in the capture table and set
 * STUB_FLAG_ARGS on their stubs. Runs on the setup thread that owns the
 * socket (the constructor, profctl attach's step 1), before the flusher
 * starts; never waits longer than its bound, and never fails the session:
 * without an answer the functions record no values and a warning says so.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/arg_auto.h"
#include "agent/arg_capture.h"
#include "agent/patcher.h"
#include "trampolines/trampoline_layout.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

/* The query of report's functions from `first` on (not the dropped ones); -ENOMEM, -EMSGSIZE. */
static int send_query(int sock, const struct instrument_report *r, size_t first)
{
	Profd__AutoArgsQuery q = PROFD__AUTO_ARGS_QUERY__INIT;
	size_t n = r->n_functions - first, len;
	Profd__AutoArgsFunction *fns = calloc(n + 1, sizeof(*fns));
	Profd__AutoArgsFunction **ptrs = calloc(n + 1, sizeof(*ptrs));
	uint8_t *buf = NULL;
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
	len = profd__auto_args_query__get_packed_size(&q);
	if (len > FRAME_PAYLOAD_MAX) {
		err = -EMSGSIZE;
		goto out;
	}
	if (!(buf = malloc(len + 1)))
		goto out;
	profd__auto_args_query__pack(&q, buf);
	err = frame_send(sock, FRAME_AUTO_ARGS_QUERY, buf, len, -1);
out:
	free(buf);
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

/* Installs profd's answer; returns how many functions got values, or a negative errno. */
static int install(struct instrument_plan *plan, size_t first, const Profd__AutoArgs *a)
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
		else if (r_inst && !(err = stub_flag_set(&w, f)))
			n++;
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
		err = install(plan, first, a);
	if (err == -ETIMEDOUT)
		snprintf(why, whylen, "--auto-args: profd did not answer within %d ms: "
			 "calls carry no values", timeout_ms);
	else if (err < 0)
		snprintf(why, whylen, "--auto-args: no values recorded (%s)", strerror(-err));
	if (a)
		profd__auto_args__free_unpacked(a, NULL);
	free(payload);
	return err;
}
