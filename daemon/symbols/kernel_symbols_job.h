/* SPDX-License-Identifier: MIT */
/*
 * The kernel's symbols read by a thread of their own: from /proc/kallsyms,
 * 60-130 ms of a CPU (most of it the kernel formatting 120,000 lines), or
 * from the copy an earlier daemon saved (kernel_symbols_cache.h), ~10 ms. A session that samples starts one when it
 * starts, and its target runs meanwhile; the first sample with kernel frames
 * that cannot wait is held (daemon/sampling/sample_pipeline.h) until the
 * table is there. Owns the thread and its result until finished.
 */
#ifndef PROFD_KERNEL_SYMBOLS_JOB_H
#define PROFD_KERNEL_SYMBOLS_JOB_H

#include <stdbool.h>
#include <stddef.h>

struct kernel_symbols;
struct kernel_symbols_job;

/*
 * Starts reading path, or with NULL the running kernel's table as
 * kernel_symbols_load_cached gives it (its copy in KERNEL_SYMBOLS_CACHE_DIR
 * when current). NULL with errno when no thread could start.
 */
struct kernel_symbols_job *kernel_symbols_job_start(const char *path);

/* Whether the thread is done (the finish would not wait). Never blocks. */
bool kernel_symbols_job_done(const struct kernel_symbols_job *job);

/*
 * Waits for the thread if it is still reading, frees the job, and returns
 * the table (the caller's reference) or NULL with the load's one-line reason
 * in err.
 */
struct kernel_symbols *kernel_symbols_job_finish(struct kernel_symbols_job *job, char *err,
						 size_t errlen);

#endif
