/* SPDX-License-Identifier: MIT */
/*
 * From perf samples to trace samples for one session: each sample is held
 * until the agent's events have reached its time, so that the thread's open
 * instrumented calls are known exactly (daemon/sampling/call_stacks.h); then the
 * return addresses our trampolines hijacked are put back into its stack
 * copy, it is unwound (DWARF, else the kernel's frame-pointer chain),
 * symbolized without any trampoline frame, told apart as profiling overhead
 * or charged to the innermost open call as self time, and written. Held
 * samples are bounded in bytes.
 */
#ifndef PROFD_SAMPLE_PIPELINE_H
#define PROFD_SAMPLE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/sampling/overhead.h"

struct call_stacks;
struct demangle_cache;
struct dwarf_unwinder;
struct kernel_symbols;
struct perfetto_writer;
struct sampler_sample;
struct stub_map;
struct symbolizer;

struct sample_pipeline_config {
	pid_t target;                     /* samples of other processes are ignored */
	struct perfetto_writer *writer;
	struct symbolizer *symbols;
	struct dwarf_unwinder *unwinder;  /* NULL: frame-pointer callchains only */
	struct demangle_cache *demangled;
	struct call_stacks *calls;        /* the session's replay of the agent's events */
	struct stub_map *stubs;           /* the agent's stubs, to unwind samples taken in them */
	/*
	 * The kernel's symbols, asked for at the first kernel frame (they take
	 * 60-130 ms to read); NULL, or returning NULL: kernel frames are not written.
	 */
	const struct kernel_symbols *(*kernel)(void *ctx);
	void *kernel_ctx;
	/*
	 * NULL, or whether kernel(kernel_ctx) would wait for the table's reading
	 * (daemon/symbols/kernel_symbols_job.h): then a sample with kernel
	 * frames is resolved when released, as any, but written only when the
	 * table is there (at a rings_read, a later sample, or the flush, which
	 * waits for it), its frames and kind unchanged.
	 */
	bool (*kernel_pending)(void *ctx);
	/*
	 * An agent is on its way (`run` preloads it): it patches before its
	 * table reaches profd, so samples wait for it even before its hello,
	 * as they wait for a live agent's events (at most SAMPLE_HOLD_MAX_NS:
	 * a program that never gets one, static or setuid, is only late).
	 */
	bool agent_expected;
};

/* Returns NULL with errno set (ENOMEM). Everything in cfg must outlive the pipeline. */
struct sample_pipeline *sample_pipeline_new(const struct sample_pipeline_config *cfg);
/* Resolves and writes what is still held, then frees. */
void sample_pipeline_free(struct sample_pipeline *p);

/*
 * An agent is sending events (exit_trampoline: the value its hijacked slots
 * hold) or, with live false, none will come any more: everything held is
 * written now and later samples are written as they arrive.
 */
void sample_pipeline_set_agent(struct sample_pipeline *p, bool live, uint64_t exit_trampoline);

/* A sample from the sampler (copied: it is held at least until the rings are read). */
void sample_pipeline_add(struct sample_pipeline *p, const struct sampler_sample *smp);

/*
 * Every ring was drained from `started` on: every side record (MMAP2, COMM)
 * older than that is in. Without an agent, held samples up to then are
 * written now.
 */
void sample_pipeline_rings_read(struct sample_pipeline *p, uint64_t started);

/*
 * tid's events are about to move past ts: its held samples taken before ts
 * are written now, against the calls open before that event. O(1) when none.
 */
void sample_pipeline_thread_reached(struct sample_pipeline *p, uint32_t tid, uint64_t ts);

/*
 * While no sample is added or released: sample_pipeline_thread_reached(p,
 * tid, ts) does nothing for every ts <= this (UINT64_MAX: for every ts).
 */
uint64_t sample_pipeline_thread_due(struct sample_pipeline *p, uint32_t tid);

/* Every event up to ts was applied: held samples up to ts are written. */
void sample_pipeline_watermark(struct sample_pipeline *p, uint64_t ts);

/*
 * Writes held samples taken before ts now, with the calls known so far
 * (counted in released_early): for an agent whose events stopped coming.
 */
void sample_pipeline_release_older(struct sample_pipeline *p, uint64_t ts);

/* Writes every held sample now, with the calls known so far. */
void sample_pipeline_flush(struct sample_pipeline *p);
/*
 * sample_pipeline_flush, then gives back what holding took (a process of a
 * tree that will take no more samples keeps ~100 bytes, not ~8 KiB); the
 * next sample held takes it again.
 */
void sample_pipeline_trim(struct sample_pipeline *p);

struct sample_pipeline_stats {
	uint64_t written;           /* samples written to the trace */
	uint64_t empty;             /* samples with no frame left to write */
	uint64_t in_calls;          /* written while an instrumented call was open on the thread */
	uint64_t returns_repaired;  /* hijacked return addresses put back into stack copies */
	uint64_t returns_unrepaired; /* hijacked return addresses left (the walk stopped there) */
	uint64_t held_peak;         /* most samples held at once */
	uint64_t released_early;    /* written before the agent's events reached them (memory bound) */
	/*
	 * Written samples by whose cost they are: [OVERHEAD_NONE] the program's,
	 * the others profiling overhead (daemon/sampling/overhead.h), marked so in the
	 * trace and charged to no call's self time. They add up to written.
	 */
	uint64_t by_kind[OVERHEAD_KINDS];
};

void sample_pipeline_get_stats(const struct sample_pipeline *p, struct sample_pipeline_stats *out);

/*
 * Thread tid is now named name (perf COMM): the agent's own threads'
 * samples are profiling overhead (daemon/sampling/overhead.h), also those taken
 * before the name came and still held.
 */
void sample_pipeline_thread_named(struct sample_pipeline *p, uint32_t tid, const char *name);

/* Samples written so far. */
uint64_t sample_pipeline_written(const struct sample_pipeline *p);

/* Samples charged to func_id as the innermost open instrumented call. */
uint64_t sample_pipeline_self_samples(const struct sample_pipeline *p, uint32_t func_id);

#endif
