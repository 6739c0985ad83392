// SPDX-License-Identifier: MIT
/*
 * Profiling overhead (see overhead.h). The names matched here are the
 * agent's ABI with its trampolines (trampolines/x86_64.S) and the name
 * agent/flusher.c gives its thread; they change together.
 */
#include <string.h>

#include "daemon/sampling/overhead.h"
#include "viewer-export/perfetto_writer.h"

#define AGENT_FILE "libprofagent.so"
#define AGENT_THREAD_NAME "profd-flusher"

/*
 * The file name, whole: "/usr/lib/profd/libprofagent.so", or with " (deleted)"
 * after it, or the memfd an attach hands the agent over in
 * ("/memfd:libprofagent.so (deleted)": profctl/agent_inject.c).
 */
bool overhead_is_agent_mapping(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	size_t n = strlen(AGENT_FILE);

	base = base ? base + 1 : path;
	if (base && strncmp(base, "memfd:", 6) == 0)
		base += 6;
	return base && strncmp(base, AGENT_FILE, n) == 0 && (base[n] == '\0' || base[n] == ' ');
}

enum overhead_frame overhead_frame_of(const char *mapping_path, const char *function)
{
	static const char *const hooks[] = {
		"profagent_entry_trampoline", "profagent_exit_trampoline",
		"profagent_enter_hook", "profagent_exit_hook",
	};

	if (!overhead_is_agent_mapping(mapping_path))
		return OVERHEAD_FRAME_PROGRAM;
	for (size_t i = 0; function && i < sizeof(hooks) / sizeof(hooks[0]); i++)
		if (strcmp(function, hooks[i]) == 0)
			return OVERHEAD_FRAME_HOOK;
	if (function && strcmp(function, "profagent_enter_slow") == 0)
		return OVERHEAD_FRAME_SLOW;
	return OVERHEAD_FRAME_AGENT;
}

bool overhead_thread_is_agent(const char *name)
{
	return name && strcmp(name, AGENT_THREAD_NAME) == 0;
}

enum overhead_kind overhead_classify(bool agent_thread, const enum overhead_frame *frames,
				     size_t n)
{
	bool in_agent = false;

	if (agent_thread)
		return OVERHEAD_FLUSHER;
	for (size_t k = n; k-- > 0;) { /* from the leaf outwards: the innermost says which */
		if (frames[k] == OVERHEAD_FRAME_HOOK)
			return OVERHEAD_HOOKS;
		if (frames[k] == OVERHEAD_FRAME_SLOW)
			return OVERHEAD_AGENT;
		in_agent |= frames[k] == OVERHEAD_FRAME_AGENT;
	}
	return in_agent ? OVERHEAD_AGENT : OVERHEAD_NONE;
}

const char *overhead_kind_name(enum overhead_kind kind)
{
	switch (kind) {
	case OVERHEAD_HOOKS:
		return PERFETTO_OVERHEAD_HOOKS;
	case OVERHEAD_FLUSHER:
		return PERFETTO_OVERHEAD_FLUSHER;
	case OVERHEAD_AGENT:
		return PERFETTO_OVERHEAD_AGENT;
	default:
		return NULL;
	}
}
