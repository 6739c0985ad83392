// SPDX-License-Identifier: MIT
/* The modules that may hold libc's and the loader's locks (see lock_modules.h). */
#include "common/lock_modules.h"

#include <fnmatch.h>
#include <string.h>

static const char *const lock_module_globs[] = {
	"libc.so*", "libc-*.so", "ld-*.so*", "ld64.so*", "libpthread.so*", "libpthread-*.so",
	"libdl.so*", "libjemalloc*.so*", "libtcmalloc*.so*", "libmimalloc*.so*",
};

bool lock_module_path(const char *path)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;

	for (size_t i = 0; i < sizeof(lock_module_globs) / sizeof(lock_module_globs[0]); i++)
		if (fnmatch(lock_module_globs[i], name, 0) == 0)
			return true;
	return false;
}
