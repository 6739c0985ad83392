/* SPDX-License-Identifier: MIT */
/*
 * The modules whose code may run holding a lock that pthread_create, dlopen
 * or malloc take again: libc, the loader, libpthread, libdl and the
 * allocators. profctl's remote calls wait until no thread is in them
 * (profctl/inject.c); the agent starts no thread from a call timed in them
 * (agent/thread_start.c). libc only, no state.
 */
#ifndef PROFD_LOCK_MODULES_H
#define PROFD_LOCK_MODULES_H

#include <stdbool.h>

/* Whether the module at path (a full path or a file name: its last part is matched) is one. */
bool lock_module_path(const char *path);

#endif
