/* SPDX-License-Identifier: MIT */
/*
 * --auto-args in profd: answers an agent's FRAME_AUTO_ARGS_QUERY with what
 * to capture for each function its DWARF describes (daemon/symbols/
 * dwarf_params.h), and keeps those descriptions so that the values become
 * named slice arguments (the parameter's name, an enum's enumerator). Owns
 * the session's open debug info (one per module file, read through the
 * target's /proc/PID/root, as the target sees it). Never trusts the agent:
 * a module must be mapped in the process, ids are bounded. Not
 * thread-safe (the daemon's loop owns it).
 */
#ifndef PROFD_AUTO_ARGS_H
#define PROFD_AUTO_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/arg_spec.h"
#include "daemon/symbols/dwarf_params.h"

struct auto_args;
/* One agent's descriptions by its function ids; owned by the struct auto_args. */
struct auto_args_names;

/* Over the session, for the summary. */
struct auto_args_stats {
	uint32_t functions;   /* asked about */
	uint32_t described;   /* DWARF has their subprogram */
	uint32_t explicit;    /* an explicit --args/--retval spec names them: it wins */
	uint32_t unplaced;    /* parameters DWARF names but no register holds exactly */
	uint32_t capped;      /* placed, but past the ARG_SPEC_ITEMS_MAX values a call records */
	uint64_t ns;          /* profd's time answering (DWARF opens and lookups) */
	uint32_t late;        /* installed after patching (a module loaded later) */
	uint64_t late_calls;  /* the calls those made before, without values */
};

/* The late ones the summary names, with their calls before: "NAME N". */
#define AUTO_ARGS_LATE_NAMED 4
#define AUTO_ARGS_LATE_TEXT 96

/*
 * The session's state; arg_specs/retval_specs are its explicit specs (checked
 * already; one that does not parse is ignored). debug_root NULL: the
 * target's /usr/lib/debug. NULL with errno on failure.
 */
struct auto_args *auto_args_new(char **arg_specs, size_t n_arg_specs, char **retval_specs,
				size_t n_retval_specs, const char *debug_root);
void auto_args_free(struct auto_args *aa);

/*
 * Answers the query (payload b[0..len), the agent's) of process pid: *reply
 * (malloc'ed, an AutoArgs message; the caller frees it) and *names, the
 * descriptions for naming its values: those of the *names given (its
 * earlier queries, NULL for none) and the new ones. Returns 0, -EBADMSG (a
 * malformed query), -ENOMEM.
 */
int auto_args_answer(struct auto_args *aa, pid_t pid, const uint8_t *b, size_t len,
		     uint8_t **reply, size_t *reply_len, struct auto_args_names **names);

/*
 * The parameter (or return value) an item of function func_id's values is,
 * or NULL when DWARF did not describe it (then the item's own name holds).
 */
const struct dwarf_value *auto_args_value(const struct auto_args_names *n, uint32_t func_id,
					  const struct arg_item *item);

/*
 * An enum's value as text: its enumerator, "A|B" for flags made of
 * enumerators, else the number. Returns the length written (< len).
 */
size_t auto_args_enum_text(const struct dwarf_value *v, uint64_t value, char *buf, size_t len);

void auto_args_get_stats(const struct auto_args *aa, struct auto_args_stats *out);

/*
 * An agent installed the capture of function `name` after patching it
 * (FRAME_AUTO_ARGS_LATE), its calls_before calls made without values.
 */
void auto_args_late(struct auto_args *aa, const char *name, uint64_t calls_before);

/* The i-th late function as "NAME N" (i < AUTO_ARGS_LATE_NAMED), NULL past the ones named. */
const char *auto_args_late_named(const struct auto_args *aa, uint32_t i);

#endif
