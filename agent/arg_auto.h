/* SPDX-License-Identifier: MIT */
/*
 * --auto-args in the agent: profd describes the prepared functions from
 * their DWARF (FRAME_AUTO_ARGS_QUERY / FRAME_AUTO_ARGS); the agent installs
 * the capture before it patches, so every call carries its values.
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

#endif
