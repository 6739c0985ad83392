// SPDX-License-Identifier: MIT
/*
 * Function ids and names from the agents' tables (see func_registry.h).
 * Nothing here trusts a table: every id is checked before it indexes names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/events/func_registry.h"

void func_registry_new_agent(struct func_registry *r)
{
	r->agent_base = r->n_funcs;
	r->agent_n_funcs = 0;
	r->agent_has_table = false;
}

/* Ids are the agent's: dense from 1 except where a function was dropped at attach. */
static uint32_t table_max_id(const Profd__FunctionTable *t)
{
	uint32_t max = 0;

	for (size_t i = 0; i < t->n_functions; i++) {
		if (!t->functions[i] || t->functions[i]->id == 0 ||
		    t->functions[i]->id > FUNC_REGISTRY_MAX_ID)
			return UINT32_MAX;
		if (t->functions[i]->id > max)
			max = t->functions[i]->id;
	}
	return max;
}

/* Room for this agent's ids up to new_max (its first table, or more after a dlopen). */
static int grow(struct func_registry *r, Profd__FunctionTable *t, uint32_t new_max)
{
	Profd__FunctionTable **tables = realloc(r->tables, (r->n_tables + 1) * sizeof(*tables));
	uint32_t old_max = r->agent_has_table ? r->agent_n_funcs : 0;
	size_t first_new = (size_t)r->agent_base + old_max + 1; /* ids start at 1 */
	size_t n_names = (size_t)r->agent_base + new_max + 1;
	bool first_ever = !r->names;
	char **names;

	if (!tables)
		return -ENOMEM;
	r->tables = tables;
	names = realloc(r->names, n_names * sizeof(char *));
	if (!names)
		return -ENOMEM;
	r->names = names;
	if (first_ever)
		names[0] = NULL;
	if (n_names > first_new)
		memset(names + first_new, 0, (n_names - first_new) * sizeof(char *));
	r->tables[r->n_tables++] = t;
	return 0;
}

int func_registry_add(struct func_registry *r, Profd__FunctionTable *t,
		      void (*named)(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f),
		      void *ctx)
{
	uint32_t max_id = table_max_id(t);
	uint32_t old_max = r->agent_has_table ? r->agent_n_funcs : 0;
	int err;

	/* a later table (a module loaded later) only adds ids above the earlier ones */
	if (t->n_functions == 0 && max_id == 0)
		max_id = old_max;
	if (max_id == UINT32_MAX || max_id < old_max ||
	    (r->agent_has_table && t->n_functions && max_id == old_max) ||
	    (uint64_t)r->agent_base + max_id > UINT32_MAX - 1)
		return -EBADMSG;
	err = grow(r, t, max_id);
	if (err)
		return err;
	/* before the names: named() may look them up */
	r->n_funcs = r->agent_base + max_id;
	r->agent_n_funcs = max_id;
	r->agent_has_table = true;
	for (size_t i = 0; i < t->n_functions; i++) {
		const Profd__InstrumentedFunction *f = t->functions[i];
		uint32_t id = r->agent_base + f->id;

		if (f->id <= old_max || r->names[id] || !f->name)
			continue; /* an id already named names nothing new */
		r->names[id] = strdup(f->name);
		if (r->names[id] && named)
			named(ctx, id, f);
	}
	return 0;
}

const char *func_registry_name(const struct func_registry *r, uint32_t id)
{
	return r->names && id <= r->n_funcs ? r->names[id] : NULL;
}

void func_registry_free(struct func_registry *r)
{
	for (uint32_t i = 0; r->names && i <= r->n_funcs; i++)
		free(r->names[i]);
	free(r->names);
	for (size_t i = 0; i < r->n_tables; i++)
		profd__function_table__free_unpacked(r->tables[i], NULL);
	free(r->tables);
	memset(r, 0, sizeof(*r));
}
