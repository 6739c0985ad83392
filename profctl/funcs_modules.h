/* SPDX-License-Identifier: MIT */
/*
 * The modules `profctl funcs` looks at, without running the workload: those
 * a process has mapped (/proc/PID/maps), or those a command loads at start
 * (the dynamic loader's own answer: LD_TRACE_LOADED_OBJECTS=1, as ldd does,
 * with the agent preloaded as `profctl run` preloads it). Each file's
 * segments are mapped read-only here so the agent's code (agent/instrument.c)
 * can read its functions' bytes as it would in the process.
 */
#ifndef PROFD_FUNCS_MODULES_H
#define PROFD_FUNCS_MODULES_H

#include <stddef.h>
#include <sys/types.h>

#include "agent/instrument.h"

struct funcs_modules {
	struct loaded_module *items;
	size_t n, cap;
	char **notes; /* one line per module left out, and why */
	size_t n_notes;
};

/* Executable file mappings of pid, in address order. 0, or a negative errno after one line. */
int funcs_modules_of_pid(pid_t pid, struct funcs_modules *m);
/* cmd (found in PATH) and the libraries it loads at start. 0, or a negative errno after one line. */
int funcs_modules_of_command(char *const argv[], const char *agent_path, struct funcs_modules *m);
void funcs_modules_free(struct funcs_modules *m);

#endif
