/* SPDX-License-Identifier: MIT */
/*
 * Profiling overhead: which samples are the profiler's own cost (the agent's
 * stubs, trampolines and hooks, its flusher thread, its start-up and slow
 * paths) rather than the program's. Pure functions of what the sample
 * pipeline already knows (the thread's name, whose code each frame is);
 * nothing here reads the target.
 */
#ifndef PROFD_OVERHEAD_H
#define PROFD_OVERHEAD_H

#include <stdbool.h>
#include <stddef.h>

enum overhead_kind {
	OVERHEAD_NONE = 0,  /* the program's own */
	OVERHEAD_HOOKS,     /* a stub, a trampoline, the enter/exit hook: the per-call cost */
	OVERHEAD_FLUSHER,   /* the agent's flusher thread: draining, zstd, sending */
	OVERHEAD_AGENT,     /* the agent's start-up, its slow paths, its destructor */
	OVERHEAD_KINDS
};

/* Whose code one frame of a sample is. */
enum overhead_frame {
	OVERHEAD_FRAME_PROGRAM = 0, /* the program, or a library it called */
	OVERHEAD_FRAME_AGENT,       /* libprofagent.so, none of the kinds below */
	OVERHEAD_FRAME_HOOK,        /* agent code of every instrumented call: stub, trampoline,
				       profagent_enter_hook, profagent_exit_hook */
	OVERHEAD_FRAME_SLOW,        /* profagent_enter_slow: a thread's first call, new modules */
};

/*
 * Whose code a symbolized pc is, from its mapping's path and its function
 * (either may be NULL). Stub code lies in anonymous memory: the caller asks
 * daemon/sampling/stub_map.h about it first.
 */
enum overhead_frame overhead_frame_of(const char *mapping_path, const char *function);

/* Whether a mapping's path is the agent's (installed, deleted, or the memfd of an attach). */
bool overhead_is_agent_mapping(const char *mapping_path);

/* Whether a thread of this name is the agent's own (agent/flusher.c names it). */
bool overhead_thread_is_agent(const char *name);

/*
 * The kind of one sample. agent_thread: it was taken on a thread of the
 * agent (all of it is the flusher's). frames: whose code each frame is, root
 * first (as the trace has them), n of them. A sample with any frame of the
 * agent is overhead: of the kind of the innermost hook or slow-path frame,
 * OVERHEAD_AGENT when there is neither (start-up, the destructor, and the
 * libc or libzstd calls made from them); else it is the program's.
 */
enum overhead_kind overhead_classify(bool agent_thread, const enum overhead_frame *frames,
				     size_t n);

/* "hooks", "flusher", "agent" (the names the trace and profctl use); NULL for NONE. */
const char *overhead_kind_name(enum overhead_kind kind);

#endif
