/* SPDX-License-Identifier: MIT */
/*
 * The functions a session knows by id: the tables its agents sent, checked
 * before any id from them is used as an index. Each agent (a new one after
 * an exec) numbers its functions from 1; the session gives them ids after
 * those of the agents before it. Every byte of a table is the agent's, i.e.
 * hostile: ids are bounded, a later table may only add ids above the earlier
 * ones. Not thread-safe (the daemon's loop owns it).
 */
#ifndef PROFD_FUNC_REGISTRY_H
#define PROFD_FUNC_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "profd.pb-c.h"

/* Bounds what a hostile table can make the daemon allocate (32 MiB of pointers). */
#define FUNC_REGISTRY_MAX_ID (1u << 22)

struct func_registry {
	char **names;             /* index = session-wide id; [0] stays NULL */
	uint32_t n_funcs;         /* highest session-wide id given */
	Profd__FunctionTable **tables; /* every table accepted, kept for the summary */
	size_t n_tables;
	uint32_t agent_base;      /* session id = agent_base + the current agent's id */
	uint32_t agent_n_funcs;   /* highest id of the current agent */
	bool agent_has_table;
};

/* A new agent connected: its ids start after every id given so far. */
void func_registry_new_agent(struct func_registry *r);

/*
 * Takes a table from the current agent. On success (0) the registry owns t,
 * and named(ctx, session_id, f) was called for each function it newly names.
 * -EBADMSG: ids out of range, or not above the earlier tables' (t untouched,
 * still the caller's); -ENOMEM.
 */
int func_registry_add(struct func_registry *r, Profd__FunctionTable *t,
		      void (*named)(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f),
		      void *ctx);

/*
 * The session-wide id of the current agent's id, or 0 when it names no
 * function. Inline: profd asks it for every event.
 */
static inline uint32_t func_registry_session_id(const struct func_registry *r, uint32_t agent_id)
{
	if (agent_id == 0 || agent_id > r->agent_n_funcs || !r->names[r->agent_base + agent_id])
		return 0;
	return r->agent_base + agent_id;
}

/* The name of a session-wide id, or NULL. */
const char *func_registry_name(const struct func_registry *r, uint32_t id);

void func_registry_free(struct func_registry *r);

#endif
