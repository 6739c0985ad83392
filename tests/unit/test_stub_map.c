// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/sampling/stub_map.c: samples in stubs moved to their
 * function, and the stubs' exit landings told apart.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <string.h>

#include "daemon/sampling/stub_map.h"
#include "tests/unit/unit.h"
#include "trampolines/trampoline_layout.h"

#define REGION 0x7f0000100000ull          /* slot 0: the region thunk */
#define SLOT1 (REGION + STUB_SLOT_SIZE)
#define SLOT2 (REGION + 2 * STUB_SLOT_SIZE)
#define FUNC1 0x401000ull
#define FUNC2 0x402000ull

static struct stub_map *two_stubs(void)
{
	struct stub_map *m = stub_map_new();

	CHECK_EQ_INT(stub_map_add(m, SLOT2, FUNC2, 4), 0); /* out of order on purpose */
	CHECK_EQ_INT(stub_map_add(m, SLOT1, FUNC1, 8), 0);
	return m;
}

static void test_refuses_unaligned(void)
{
	struct stub_map *m = stub_map_new();

	CHECK_EQ_INT(stub_map_add(m, SLOT1 + 8, FUNC1, 0), -EINVAL);
	CHECK_EQ_INT(stub_map_add(m, 0, FUNC1, 0), -EINVAL);
	stub_map_free(m);
}

/* A hostile agent's tables cannot grow the map without bound. */
static void test_bounded(void)
{
	struct stub_map *m = stub_map_new();
	uint32_t added = 0;

	for (uint32_t i = 1; i <= STUB_MAP_MAX; i++)
		added += stub_map_add(m, REGION + (uint64_t)i * STUB_SLOT_SIZE, FUNC1, 0) == 0;
	CHECK_EQ_INT(added, STUB_MAP_MAX);
	CHECK_EQ_INT(stub_map_add(m, REGION, FUNC1, 0), -ENOSPC);
	stub_map_free(m);
}

static void test_call_to_thunk_is_the_entry(void)
{
	struct stub_map *m = two_stubs();
	uint64_t regs[24] = { 0 };

	regs[PERF_REG_X86_IP] = SLOT2;
	regs[PERF_REG_X86_SP] = 0x7ffc0000;
	CHECK(stub_map_relocate_sample(m, regs, NULL, 0, 0));
	CHECK_EQ_U64(regs[PERF_REG_X86_IP], FUNC2);
	CHECK_EQ_U64(regs[PERF_REG_X86_SP], 0x7ffc0000);
	stub_map_free(m);
}

static void test_prologue_maps_at_same_offset(void)
{
	struct stub_map *m = two_stubs();
	uint64_t regs[24] = { 0 };

	regs[PERF_REG_X86_IP] = SLOT1 + STUB_RELOCATED_OFFSET + 7; /* within the 8 kept bytes */
	CHECK(stub_map_relocate_sample(m, regs, NULL, 0, 0));
	CHECK_EQ_U64(regs[PERF_REG_X86_IP], FUNC1 + 7);
	/* past the kept bytes (a widened branch, the jump back): no equivalent place */
	regs[PERF_REG_X86_IP] = SLOT2 + STUB_RELOCATED_OFFSET + 4;
	CHECK(!stub_map_relocate_sample(m, regs, NULL, 0, 0));
	CHECK_EQ_U64(regs[PERF_REG_X86_IP], SLOT2 + STUB_RELOCATED_OFFSET + 4);
	stub_map_free(m);
}

/* In the thunk, [sp] is the calling stub's slot+5: the function is about to be entered. */
static void test_thunk_pops_the_stub_return(void)
{
	struct stub_map *m = two_stubs();
	uint64_t regs[24] = { 0 }, stack[2] = { SLOT2 + STUB_LANDING_OFFSET, 0x401234 };

	regs[PERF_REG_X86_IP] = REGION;
	regs[PERF_REG_X86_SP] = 0x7ffc0000;
	CHECK(stub_map_relocate_sample(m, regs, (const uint8_t *)stack, 0x7ffc0000, sizeof(stack)));
	CHECK_EQ_U64(regs[PERF_REG_X86_IP], FUNC2);
	CHECK_EQ_U64(regs[PERF_REG_X86_SP], 0x7ffc0008);
	/* a value on the stack that is no stub's: left alone */
	stack[0] = 0x401234;
	regs[PERF_REG_X86_IP] = REGION;
	regs[PERF_REG_X86_SP] = 0x7ffc0000;
	CHECK(!stub_map_relocate_sample(m, regs, (const uint8_t *)stack, 0x7ffc0000, sizeof(stack)));
	/* sp outside the copy: nothing read */
	regs[PERF_REG_X86_SP] = 0x7ffb0000;
	CHECK(!stub_map_relocate_sample(m, regs, (const uint8_t *)stack, 0x7ffc0000, sizeof(stack)));
	stub_map_free(m);
}

static void test_other_code_untouched_and_clear(void)
{
	struct stub_map *m = two_stubs();
	uint64_t regs[24] = { 0 };

	regs[PERF_REG_X86_IP] = FUNC1 + 3;
	CHECK(!stub_map_relocate_sample(m, regs, NULL, 0, 0));
	regs[PERF_REG_X86_IP] = SLOT2 + STUB_SLOT_SIZE; /* the slot after the last one */
	CHECK(!stub_map_relocate_sample(m, regs, NULL, 0, 0));
	stub_map_clear(m);
	regs[PERF_REG_X86_IP] = SLOT1;
	CHECK(!stub_map_relocate_sample(m, regs, NULL, 0, 0));
	stub_map_free(m);
}

/* The agent's code in stubs is profiling overhead; copied prologue bytes are the function's. */
static void test_agent_code_in_stubs(void)
{
	struct stub_map *m = two_stubs();

	CHECK(stub_map_is_agent_code(m, SLOT1)); /* call region_thunk */
	CHECK(stub_map_is_agent_code(m, SLOT1 + STUB_LANDING_OFFSET)); /* the landing */
	CHECK(stub_map_is_agent_code(m, SLOT2 + STUB_RELOCATED_OFFSET - 1));
	CHECK(!stub_map_is_agent_code(m, SLOT1 + STUB_RELOCATED_OFFSET)); /* kept bytes */
	CHECK(!stub_map_is_agent_code(m, SLOT1 + STUB_RELOCATED_OFFSET + 7));
	CHECK(stub_map_is_agent_code(m, SLOT1 + STUB_RELOCATED_OFFSET + 8)); /* the jump back */
	CHECK(stub_map_is_agent_code(m, SLOT2 + STUB_RELOCATED_OFFSET + 4));
	CHECK(stub_map_is_agent_code(m, REGION)); /* the region thunk */
	CHECK(stub_map_is_agent_code(m, REGION + 6));
	CHECK(!stub_map_is_agent_code(m, FUNC1));
	CHECK(!stub_map_is_agent_code(m, SLOT2 + STUB_SLOT_SIZE));
	stub_map_clear(m);
	CHECK(!stub_map_is_agent_code(m, SLOT1));
	stub_map_free(m);
}

/*
 * On its landing (slot+5) the function has returned into the exit path: no
 * place in the function (the pipeline takes the real return address), and
 * the value every hijacked return slot of its calls holds.
 */
static void test_landing_is_the_exit_path(void)
{
	struct stub_map *m = two_stubs();
	uint64_t regs[24] = { 0 };

	regs[PERF_REG_X86_IP] = SLOT1 + STUB_LANDING_OFFSET;
	regs[PERF_REG_X86_SP] = 0x7ffc0000;
	CHECK(!stub_map_relocate_sample(m, regs, NULL, 0, 0));
	CHECK_EQ_U64(regs[PERF_REG_X86_IP], SLOT1 + STUB_LANDING_OFFSET);
	CHECK(stub_map_is_landing(m, SLOT1 + STUB_LANDING_OFFSET));
	CHECK(stub_map_is_landing(m, SLOT2 + STUB_LANDING_OFFSET));
	CHECK(!stub_map_is_landing(m, SLOT1));
	CHECK(!stub_map_is_landing(m, SLOT1 + STUB_RELOCATED_OFFSET));
	CHECK(!stub_map_is_landing(m, REGION + STUB_LANDING_OFFSET)); /* the thunk's slot */
	CHECK(!stub_map_is_landing(m, SLOT2 + STUB_SLOT_SIZE + STUB_LANDING_OFFSET));
	CHECK(!stub_map_is_landing(m, FUNC1 + STUB_LANDING_OFFSET));
	stub_map_clear(m);
	CHECK(!stub_map_is_landing(m, SLOT1 + STUB_LANDING_OFFSET));
	stub_map_free(m);
}

int main(void)
{
	RUN_TEST(test_refuses_unaligned);
	RUN_TEST(test_bounded);
	RUN_TEST(test_call_to_thunk_is_the_entry);
	RUN_TEST(test_prologue_maps_at_same_offset);
	RUN_TEST(test_thunk_pops_the_stub_return);
	RUN_TEST(test_other_code_untouched_and_clear);
	RUN_TEST(test_agent_code_in_stubs);
	RUN_TEST(test_landing_is_the_exit_path);
	return unit_summary();
}
