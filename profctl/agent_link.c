// SPDX-License-Identifier: MIT
/*
 * What the agent's objects that profctl links (instrument, patcher, ELF
 * symbols, relocator: `profctl funcs`) need of the rest of the agent. The
 * stubs they build point at the entry and exit trampolines but are never run
 * here: an address is all they need. Linked into profctl only, never beside the agent.
 */
#include <stdlib.h>

#include "trampolines/trampoline_layout.h"

void profagent_entry_trampoline(void)
{
	abort();
}

void profagent_exit_trampoline(void)
{
	abort();
}
