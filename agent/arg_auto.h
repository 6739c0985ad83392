/* SPDX-License-Identifier: MIT */
/*
 * --auto-args in the agent: profd describes the prepared functions from
 * their DWARF (FRAME_AUTO_ARGS_QUERY / FRAME_AUTO_ARGS); the agent installs
 * the capture before it patches, so every call carries its values. A module
 * loaded later (dlopen) is patched at once without values; the flusher asks
 * and installs the answer when it comes (arg_auto_ask, arg_auto_late).
 */
#ifndef PROFD_ARG_AUTO_H
#define PROFD_ARG_AUTO_H

#include <stddef.h>

#include "agent/instrument.h"

/* How long the agent waits for profd's answer before it patches without it. */
#define ARG_AUTO_TIMEOUT_MS 2000

/*
 * Sends profd plan's functions from index `first` on, waits up to
 * timeout_ms for its answer and installs it (arg_capture_install, then
 * STUB_FLAG_ARGS on each stub: they must not be patched yet, or be patched
 * with the flag still off). Call on the thread that owns sock, before the
 * flusher reads from it. Returns how many functions got a capture, or a
 * negative errno (-ETIMEDOUT: no answer in time; -ENOTSUP: no capture on
 * this architecture; -EBADMSG: a malformed answer) with one line in why for
 * the table's warnings. Nothing is patched by it.
 */
int arg_auto_query(int sock, struct instrument_plan *plan, size_t first, int timeout_ms,
		   char *why, size_t whylen);

/*
 * Sends profd the query of plan's functions from index `first` on and
 * returns without waiting: the answer comes to arg_auto_late. On the
 * flusher thread, under the table lock (the plan does not change). Returns
 * 0 or a negative errno (-ENOMEM, -EMSGSIZE, a send's).
 */
int arg_auto_ask(int sock, const struct instrument_plan *plan, size_t first);

/*
 * profd's FRAME_AUTO_ARGS payload for functions already patched and maybe
 * running: each capture installed, then its stub's flag set (the hooks
 * read the flag with acquire before the entry: agent/hooks.c enter_slow),
 * so that a function records values from its next call on. Then tells
 * profd, for each, how many calls it had made by then (FRAME_AUTO_ARGS_LATE,
 * on sock: read from the threads' figures as the flag was set, so a call in
 * flight then may count either way). On the flusher thread, under the
 * table lock. Returns how many functions got a capture, or a negative errno.
 */
int arg_auto_late(int sock, struct instrument_plan *plan, const uint8_t *payload, size_t len);

#endif
