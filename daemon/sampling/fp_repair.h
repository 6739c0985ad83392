/* SPDX-License-Identifier: MIT */
/*
 * Frame-pointer chain repair: the kernel's `--call-graph fp` chains read the
 * return slots the agent hijacked, so each hijacked call shows as the exit
 * trampoline's address instead of its caller's. This module puts the open
 * calls' real return addresses back. Pure: no symbols, no session state.
 */
#ifndef PROFD_FP_REPAIR_H
#define PROFD_FP_REPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/sampling/call_stacks.h"

/*
 * chain: n return addresses, leaf first (cap: room for the insertions),
 * each hijacked slot already written as exit_trampoline. open: the thread's
 * depth open calls at the sample's time, outermost first. Returns the new
 * length; *repaired counts the addresses put back.
 */
size_t fp_chain_repair(uint64_t *chain, size_t n, size_t cap, uint64_t exit_trampoline,
		       const struct call_frame *open, size_t depth, size_t insert_at,
		       uint64_t *repaired);

#endif
