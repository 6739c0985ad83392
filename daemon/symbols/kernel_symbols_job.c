// SPDX-License-Identifier: MIT
/*
 * The kernel's symbols read on a thread (see kernel_symbols_job.h). The
 * thread touches nothing but its job: the path, the table it builds and the
 * reason it fails; the done flag publishes them (release, acquire).
 */
#include "daemon/symbols/kernel_symbols_job.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/kernel_symbols_cache.h"

struct kernel_symbols_job {
	pthread_t thread;
	char *path;
	struct kernel_symbols *table;
	char err[256];
	atomic_bool done;
};

static void job_free(struct kernel_symbols_job *job)
{
	free(job->path);
	free(job);
}

static void *read_table(void *arg)
{
	struct kernel_symbols_job *job = arg;

	job->table = job->path ? kernel_symbols_load(job->path, job->err, sizeof(job->err))
			       : kernel_symbols_load_cached(KERNEL_SYMBOLS_CACHE_DIR, job->err,
							    sizeof(job->err));
	atomic_store_explicit(&job->done, true, memory_order_release);
	return NULL;
}

struct kernel_symbols_job *kernel_symbols_job_start(const char *path)
{
	struct kernel_symbols_job *job = calloc(1, sizeof(*job));
	sigset_t all, old;
	int err;

	if (!job)
		return NULL;
	if (path && !(job->path = strdup(path))) {
		free(job);
		errno = ENOMEM;
		return NULL;
	}
	/* the daemon's signals (SIGTERM, SIGCHLD ...) stay the main thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&job->thread, NULL, read_table, job);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		free(job->path);
		free(job);
		errno = err;
		return NULL;
	}
	return job;
}

bool kernel_symbols_job_done(const struct kernel_symbols_job *job)
{
	return atomic_load_explicit(&job->done, memory_order_acquire);
}

struct kernel_symbols *kernel_symbols_job_finish(struct kernel_symbols_job *job, char *err,
						 size_t errlen)
{
	struct kernel_symbols *table;

	pthread_join(job->thread, NULL);
	table = job->table;
	if (!table)
		snprintf(err, errlen, "%s", job->err);
	job_free(job);
	return table;
}
