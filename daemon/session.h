/* SPDX-License-Identifier: MIT */
/*
 * One profiling session: the client (profctl) that asked for it, the target,
 * its agent connection, the sampler and symbolizer, and the Perfetto writer
 * on the client's descriptor. Turns agent events and perf records into trace
 * packets as they arrive and finalizes the trace whatever way the session ends.
 */
#ifndef PROFD_SESSION_H
#define PROFD_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/server.h"

/* A client frame (first or later) on a client connection. */
void session_client_frame(struct server *srv, struct conn *c, uint32_t type,
			  const uint8_t *payload, size_t len);
/* An agent frame; the first must be FRAME_AGENT_HELLO. */
void session_agent_frame(struct server *srv, struct conn *c, uint32_t type,
			 const uint8_t *payload, size_t len);
/* A frame on a spawner (attach --children): a forked child's link (FRAME_AGENT_LINK + fd). */
void session_spawner_frame(struct server *srv, struct conn *c, uint32_t type);
/* The connection went away (EOF, error, or protocol violation). */
void session_conn_closed(struct server *srv, struct conn *c);
/* Periodic work: read perf rings, flush the trace, deadlines. */
void session_tick_all(struct server *srv);
/*
 * Ends the sessions whose target exited once every agent said goodbye (or
 * the grace ran out), after reading what agents sent so far (server_settle).
 * From the tick, and from the loop when srv->sessions_may_end; never from
 * inside a walk of the sessions or connections.
 */
void session_end_ready(struct server *srv);
/* Hands the scheduler probe's records to their sessions (on the tick, and when its ring fills). */
void session_sched_drain(struct server *srv);
/* Finalizes every session (daemon shutdown). */
void session_finish_all(struct server *srv);
/* Sessions open now (for the service manager's STATUS=). */
int session_count(const struct server *srv);

#endif
