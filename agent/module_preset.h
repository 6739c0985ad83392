/* SPDX-License-Identifier: MIT */
/*
 * Module presets (AgentConfig.preset_modules): the selected symbol load of a
 * module (agent/elf_symbols.h) for a session's patterns, made once by
 * `profctl run` for the modules every process of its tree loads (the loader,
 * libc, the agent's own libraries) instead of by every process at its start.
 * An agent takes a preset only for the very file it was made from (path,
 * device, inode, size, modification and change times); any other module, or
 * that file changed, is read as without presets. Linked into the agent and
 * into profctl. A preset comes from the target's environment: it is checked
 * before use, never trusted to be well formed.
 */
#ifndef PROFD_MODULE_PRESET_H
#define PROFD_MODULE_PRESET_H

#include <stddef.h>

#include "agent/elf_symbols.h"
#include "common/func_filter.h"
#include "profd.pb-c.h"

/* PresetFunction.marks */
#define PRESET_IFUNC 1u
#define PRESET_GLOBAL 2u
#define PRESET_VARIANT_PCS 4u

/*
 * profctl: the preset of the module at path for filter, as instrumenting it
 * would read it (instrument_selected_load). NULL with a one-line reason in
 * err: unreadable (as the agent would find it), C++ names matched (their
 * choice depends on the process's demangler), the file changed while it was
 * read, or no memory. Free with module_preset_free.
 */
Profd__PresetModule *module_preset_new(const struct func_filter *filter, const char *path,
				       char *err, size_t errlen);
void module_preset_free(Profd__PresetModule *pm);

/* The presets a config carried, for module_presets_lookup (they stay the config's). */
struct module_presets {
	Profd__PresetModule *const *items;
	size_t n;
};

/*
 * An instrument_preset_fn (agent/instrument.h) over a struct module_presets:
 * 0 and *out (freed with elf_symbols_free) when a preset was made from the
 * file at path as it is now, else -ENOENT; -EINVAL for a malformed preset,
 * -ENOMEM. One stat(2) when a preset names path.
 */
int module_presets_lookup(void *presets, const char *path, struct elf_symbols *out);

#endif
