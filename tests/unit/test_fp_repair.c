// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/sampling/fp_repair.c: frame-pointer chains whose
 * hijacked slots read the exit trampoline get the open calls' return
 * addresses back, in call order, whatever the counts on either side.
 */
#include <string.h>

#include "daemon/sampling/fp_repair.h"
#include "tests/unit/unit.h"

#define TRAMP 0x7f0000001000ull
#define CAP 16

/* open call i returns to 0x400000 + 0x10 * (i + 1): outermost first */
static void open_calls(struct call_frame *open, size_t depth)
{
	memset(open, 0, depth * sizeof(*open));
	for (size_t i = 0; i < depth; i++)
		open[i].return_address = 0x400000 + 0x10 * (i + 1);
}

/* As many entries as open calls: innermost entry, innermost call. */
static void test_counts_equal(void)
{
	struct call_frame open[3];
	uint64_t chain[CAP] = { 0x500000, TRAMP, 0x500100, TRAMP, TRAMP, 0x500200 }, repaired;
	size_t n;

	open_calls(open, 3);
	n = fp_chain_repair(chain, 6, CAP, TRAMP, open, 3, 1, &repaired);
	CHECK_EQ_INT(n, 6);
	CHECK_EQ_U64(repaired, 3);
	CHECK_EQ_U64(chain[1], 0x400030);
	CHECK_EQ_U64(chain[3], 0x400020);
	CHECK_EQ_U64(chain[4], 0x400010);
	CHECK_EQ_U64(chain[5], 0x500200);
}

/*
 * One entry more than open calls: the sample came right after a call's
 * entry that profd places after it (the clock's conversion). The newest,
 * innermost entry is the unknown one; the others keep their calls.
 */
static void test_entry_not_open_yet(void)
{
	struct call_frame open[2];
	uint64_t chain[CAP] = { 0x500000, TRAMP, TRAMP, TRAMP, 0x500200 }, repaired;
	size_t n;

	open_calls(open, 2);
	n = fp_chain_repair(chain, 5, CAP, TRAMP, open, 2, 1, &repaired);
	CHECK_EQ_INT(n, 5);
	CHECK_EQ_U64(repaired, 2);
	CHECK_EQ_U64(chain[1], TRAMP); /* unknown: left for the writer to drop, counted */
	CHECK_EQ_U64(chain[2], 0x400020);
	CHECK_EQ_U64(chain[3], 0x400010);
	CHECK_EQ_U64(chain[4], 0x500200);
}

/* Fewer entries: the leaf kept no frame record; its caller goes in after the pc. */
static void test_leaf_without_frame(void)
{
	struct call_frame open[3];
	uint64_t chain[CAP] = { 0x500000, TRAMP, TRAMP, 0x500200 }, repaired;
	size_t n;

	open_calls(open, 3);
	n = fp_chain_repair(chain, 4, CAP, TRAMP, open, 3, 1, &repaired);
	CHECK_EQ_INT(n, 5);
	CHECK_EQ_U64(repaired, 2);
	CHECK_EQ_U64(chain[0], 0x500000);
	CHECK_EQ_U64(chain[1], 0x400030); /* inserted: the innermost call's return */
	CHECK_EQ_U64(chain[2], 0x400020);
	CHECK_EQ_U64(chain[3], 0x400010);
	CHECK_EQ_U64(chain[4], 0x500200);
}

/* Nothing hijacked, or nothing open: the chain is left as it is. */
static void test_nothing_to_repair(void)
{
	struct call_frame open[1];
	uint64_t chain[CAP] = { 0x500000, 0x500100 }, hijacked[CAP] = { 0x500000, TRAMP }, repaired;

	open_calls(open, 1);
	CHECK_EQ_INT(fp_chain_repair(chain, 2, CAP, TRAMP, open, 1, 1, &repaired), 2);
	CHECK_EQ_U64(chain[1], 0x500100);
	CHECK_EQ_INT(fp_chain_repair(hijacked, 2, CAP, TRAMP, open, 0, 1, &repaired), 2);
	CHECK_EQ_U64(hijacked[1], TRAMP);
	CHECK_EQ_U64(repaired, 0);
}

/* No room for every skipped call: as many as fit, the chain never overruns. */
static void test_capacity_bound(void)
{
	struct call_frame open[6];
	uint64_t chain[5] = { 0x500000, TRAMP, 0x500200, 0x500300 }, repaired;
	size_t n;

	open_calls(open, 6);
	n = fp_chain_repair(chain, 4, 5, TRAMP, open, 6, 1, &repaired);
	CHECK_EQ_INT(n, 5);
	CHECK_EQ_U64(chain[1], 0x400060);
	CHECK_EQ_U64(chain[2], 0x400010); /* the one entry: the outermost call */
	CHECK_EQ_U64(chain[4], 0x500300);
}

int main(void)
{
	RUN_TEST(test_counts_equal);
	RUN_TEST(test_entry_not_open_yet);
	RUN_TEST(test_leaf_without_frame);
	RUN_TEST(test_nothing_to_repair);
	RUN_TEST(test_capacity_bound);
	return unit_summary();
}
