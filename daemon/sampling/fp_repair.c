// SPDX-License-Identifier: MIT
/*
 * Frame-pointer chain repair (see fp_repair.h). The chain gives no slot
 * addresses, so which open call each hijacked entry stands for is inferred
 * from the counts: entries and open calls are both in call order.
 */
#include <string.h>

#include "daemon/sampling/fp_repair.h"

/*
 * More hijacked entries than open calls (hijacked > depth): the sample
 * caught calls whose ENTER profd places after it. The agent reads the
 * clock before it hijacks, but the clock's conversion to the sample's time
 * is good to a few hundred ns, so a sample right after an entry can be
 * released before that call is open. Those are the newest calls, the
 * innermost entries: they stay the exit trampoline (never written as a
 * frame, counted unrepaired) and the open calls take the entries outside
 * them. (Taking the innermost entries put every caller one call off.)
 *
 * Fewer (depth > hijacked): the chain skips the slot of a function that
 * has no frame record, nearly always the leaf (compilers omit its frame
 * pointer first). The entries take the outermost open calls, and the
 * return addresses of the innermost calls the chain skipped go in at
 * insert_at: right after the sampled pc, where the leaf's caller belongs,
 * or after the function a stub stood for when the sample is in the agent's
 * entry path.
 */
size_t fp_chain_repair(uint64_t *chain, size_t n, size_t cap, uint64_t exit_trampoline,
		       const struct call_frame *open, size_t depth, size_t insert_at,
		       uint64_t *repaired)
{
	size_t hijacked = 0, unknown, next, skipped;

	*repaired = 0;
	for (size_t k = 1; k < n; k++)
		hijacked += chain[k] == exit_trampoline;
	if (!hijacked || !depth || n == 0)
		return n;
	unknown = hijacked > depth ? hijacked - depth : 0;
	skipped = depth > hijacked ? depth - hijacked : 0;
	next = depth - skipped; /* open[next - 1] takes the innermost entry it can */
	for (size_t k = 1; k < n && next > 0; k++) {
		if (chain[k] != exit_trampoline)
			continue;
		if (unknown) {
			unknown--;
			continue;
		}
		chain[k] = open[--next].return_address;
		(*repaired)++;
	}
	if (insert_at > n)
		insert_at = n;
	if (skipped > cap - n)
		skipped = cap - n;
	memmove(chain + insert_at + skipped, chain + insert_at, (n - insert_at) * sizeof(chain[0]));
	for (size_t i = 0; i < skipped; i++)
		chain[insert_at + i] = open[depth - 1 - i].return_address;
	return n + skipped;
}
