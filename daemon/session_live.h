/* SPDX-License-Identifier: MIT */
/*
 * profctl top's live figures: a LiveRequest answered with LiveFigures, the
 * session's exact per-function figures as they are now, over every process
 * and thread, cumulative (the client takes the differences). Reads the
 * session and never changes it; keeps only its last answer. Never serves a
 * session to anyone but its own client, its owner or root.
 */
#ifndef PROFD_SESSION_LIVE_H
#define PROFD_SESSION_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/server.h"

struct session_live;

/*
 * A FRAME_LIVE_REQUEST on c: from the session's own client (c->session set;
 * the request names that session or none), or as the first frame of a new
 * connection, which names a session its peer may see (profctl top
 * --session) and is closed after the answer. Answers FRAME_LIVE_FIGURES,
 * or FRAME_ERROR for a malformed request or a session that is not the
 * peer's (said the same way as a missing one).
 */
void session_live_request(struct server *srv, struct conn *c, const uint8_t *payload, size_t len);

/* The session's cached answer (struct session.live); NULL is fine. */
void session_live_free(struct session_live *l);

#endif
