/* SPDX-License-Identifier: MIT */
/*
 * C++ demangling for names shown in traces (slices and sample frames), with
 * a cache keyed by the mangled string's address: symbolizer and function
 * table names are stable, so each is demangled once.
 */
#ifndef PROFD_DEMANGLE_H
#define PROFD_DEMANGLE_H

struct demangle_cache;

struct demangle_cache *demangle_cache_new(void);
void demangle_cache_free(struct demangle_cache *c);

/*
 * The readable form of name (`ex_thrower(int)` for `_Z10ex_throweri`), or
 * name itself when it is not a mangled C++ name or cannot be demangled. A
 * suffix from the first '@' on ("@plt", "@VERSION") is kept after the
 * readable form.
 * The result lives until demangle_cache_free. name must outlive the cache.
 */
const char *demangle_cached(struct demangle_cache *c, const char *name);

#endif
