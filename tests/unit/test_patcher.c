// SPDX-License-Identifier: MIT
/*
 * Patching and trampolines end to end inside this process: a function is
 * copied into executable memory, given a stub (near, with a 5-byte jump, or
 * far, with a 14-byte absolute jump), patched, called, and must return the
 * same result while the hooks record exactly one enter and one exit, and count
 * the call in its function's figures.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/agent_thread.h"
#include "agent/patcher.h"
#include "agent/proc_maps.h"
#include "trampolines/trampoline_layout.h"
#include "trampolines/relocator_x86_64.h"
#include "unit.h"

/* long f(long a, long b) { return (a + 2 * b) * 3; } with a frame: 19 bytes */
static const uint8_t sample_function[] = {
	0x55,                   /* push %rbp */
	0x48, 0x89, 0xe5,       /* mov %rsp,%rbp */
	0x48, 0x89, 0xf8,       /* mov %rdi,%rax */
	0x48, 0x01, 0xf0,       /* add %rsi,%rax */
	0x48, 0x01, 0xf0,       /* add %rsi,%rax */
	0x48, 0x6b, 0xc0, 0x03, /* imul $3,%rax,%rax */
	0x5d,                   /* pop %rbp */
	0xc3,                   /* ret */
};

typedef long (*sample_fn)(long, long);

/* A function that returns its own return address, read after a branch (unseen by the scanner). */
static const uint8_t return_reader_function[] = {
	0x55,                   /* push %rbp */
	0x48, 0x89, 0xe5,       /* mov %rsp,%rbp */
	0xeb, 0x00,             /* jmp .+2 */
	0x48, 0x8b, 0x45, 0x08, /* mov 8(%rbp),%rax */
	0x5d,                   /* pop %rbp */
	0xc3,                   /* ret */
};

static uint8_t *map_code(const uint8_t *bytes, size_t len)
{
	uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (code == MAP_FAILED)
		return NULL;
	memset(code, 0xcc, 4096);
	memcpy(code, bytes, len);
	mprotect(code, 4096, PROT_READ | PROT_EXEC);
	return code;
}

static uint8_t *map_function(void)
{
	return map_code(sample_function, sizeof(sample_function));
}

/* Stubs and patch for the function of `size` bytes at code: 0, or -1 on a setup failure. */
static int patch_code(uint8_t *code, size_t size, uint32_t func_id,
		      const struct proc_maps *placement, int *far, uint32_t *patch_len_out,
		      uint64_t *stub_out)
{
	struct proc_maps real;
	struct stub_region region;
	struct code_patch patch;
	struct patch_writer w;
	uint8_t jump[PATCH_FAR_LEN];
	const char *why = NULL;
	struct stub_fill fill = { 0 };
	uint64_t addr = (uint64_t)(uintptr_t)code;

	if (stub_region_map(placement, addr, addr + 4096, 1, &region))
		return -1;
	*far = region.far;
	if (stub_region_fill(&region, 0, addr, size, func_id, 0, &fill, &why)) {
		fprintf(stderr, "fill: %s\n", why);
		return -1;
	}
	stub_region_seal(&region);
	patch = (struct code_patch){ addr, stub_region_slot_entry(&region, 0),
				     (uint32_t)fill.jump_len };
	*patch_len_out = patch.len;
	*stub_out = patch.target;
	if (proc_maps_load(&real))
		return -1;
	patcher_encode_jump(jump, &patch);
	patch_writer_init(&w, &real);
	if (patch_writer_write(&w, addr, jump, patch.len) || patch_writer_finish(&w))
		return -1;
	proc_maps_free(&real);
	return 0;
}

/* Stubs, patch, call: returns the function's result, or -1 on a setup failure. */
static long patch_and_call(uint8_t *code, const struct proc_maps *placement, int *far,
			   uint32_t *patch_len_out)
{
	uint64_t stub;

	if (patch_code(code, sizeof(sample_function), 7, placement, far, patch_len_out, &stub))
		return -1;
	return ((sample_fn)(uintptr_t)code)(5, 7);
}

static void test_near_stub_rel32_jump(void)
{
	uint8_t *code = map_function();
	struct proc_maps maps;
	uint32_t len = 0;
	int far = -1;

	CHECK(code != NULL && proc_maps_load(&maps) == 0);
	CHECK_EQ_INT(patch_and_call(code, &maps, &far, &len), (5 + 14) * 3);
	CHECK_EQ_INT(far, 0);
	CHECK_EQ_INT(len, 5);
	CHECK_EQ_INT(code[0], 0xe9);
	proc_maps_free(&maps);
}

static void test_far_stub_absolute_jump(void)
{
	/* one mapping over the whole address space: no gap anywhere near */
	struct proc_map everything = { 0, UINT64_C(1) << 47, PROT_READ };
	struct proc_maps no_gaps = { &everything, 1 };
	uint8_t *code = map_function();
	uint32_t len = 0;
	int far = -1;

	CHECK(code != NULL);
	CHECK_EQ_INT(patch_and_call(code, &no_gaps, &far, &len), (5 + 14) * 3);
	CHECK_EQ_INT(far, 1);
	CHECK_EQ_INT(len, PATCH_FAR_LEN);
	CHECK_EQ_INT(code[0], 0xff);
	CHECK_EQ_INT(code[1], 0x25);
}

/* Unit `pos` of t's ring, in the segment its span maps to (as agent/flusher.c reads it). */
static const struct event_record *ring_unit(struct agent_thread *t, uint64_t pos)
{
	struct event_record *seg = atomic_load(&t->seg_map[(pos / SEGMENT_SPAN) % SEGMENT_SLOTS]);

	return seg ? &seg[pos % SEGMENT_SPAN] : NULL;
}

/* func_id's figures on t; NULL before its first call. */
static struct func_agg *thread_agg(struct agent_thread *t, uint32_t func_id)
{
	struct func_agg *page = atomic_load(&t->agg_pages[func_id / AGG_PAGE_FUNCS]);

	return page ? &page[func_id % AGG_PAGE_FUNCS] : NULL;
}

static void test_hooks_record_enter_and_exit(void)
{
	uint8_t *code = map_function();
	struct proc_maps maps;
	struct agent_thread *t;
	uint32_t len = 0;
	int far = -1;

	CHECK(code != NULL && proc_maps_load(&maps) == 0 && threads_init() == 0);
	atomic_store(&agent_recording, 1);
	CHECK_EQ_INT(patch_and_call(code, &maps, &far, &len), (5 + 14) * 3);
	atomic_store(&agent_recording, 0);
	t = agent_current_thread;
	CHECK(t != NULL);
	if (t) {
		const struct event_record *enter = ring_unit(t, 0), *exit_rec = ring_unit(t, 2);
		struct event_enter_frame frame;

		/* enter, its frame, exit */
		CHECK_EQ_INT(state_head(atomic_load(&t->committed)), 3);
		CHECK(enter != NULL && exit_rec != NULL);
		if (!enter || !exit_rec)
			goto out;
		CHECK_EQ_INT(enter->func_id, 7);
		CHECK_EQ_INT(enter->kind, EVENT_ENTER);
		memcpy(&frame, ring_unit(t, 1), sizeof(frame));
		/* the caller's return address, from a slot on this thread's stack */
		CHECK(frame.return_slot >= t->stack_lo && frame.return_slot < t->stack_hi);
		CHECK(frame.return_address != 0 &&
		      frame.return_address != (uintptr_t)profagent_exit_trampoline &&
		      frame.return_address != t->landing[0]);
		CHECK_EQ_INT(exit_rec->kind, EVENT_EXIT);
		CHECK(exit_rec->tsc >= enter->tsc);
		CHECK_EQ_INT(state_depth(atomic_load(&t->committed)), 0);
		/* shadow[-1], which the x86-64 fast paths read without a depth test */
		CHECK(t->shadow_floor.return_slot == (uintptr_t *)UINTPTR_MAX);
#if defined(__x86_64__)
		/* the exit's fast path took this call at depth 1: its ticks went to the floor */
		CHECK(t->shadow_floor.child_ticks >= exit_rec->tsc - enter->tsc &&
		      exit_rec->tsc > enter->tsc);
#endif
	}
out:
	proc_maps_free(&maps);
}

/*
 * The same call in its function's figures, timed from the same TSC readings
 * as its events (entered is exited + open, which only the flusher counts).
 */
static void test_hooks_count_the_call(void)
{
	struct agent_thread *t = agent_current_thread; /* the call of the test above */
	const struct event_record *enter, *exit_rec;
	struct func_agg *a;
	uint64_t ticks;

	CHECK(t != NULL);
	if (!t)
		return;
	a = thread_agg(t, 7);
	enter = ring_unit(t, 0);
	exit_rec = ring_unit(t, 2);
	CHECK(a != NULL && enter != NULL && exit_rec != NULL);
	if (!a || !enter || !exit_rec)
		return;
	ticks = exit_rec->tsc - enter->tsc;
	/* the owner's plain fields: this thread is their owner */
	CHECK_EQ_U64(a->exited, 1);
	CHECK_EQ_U64(a->untimed, 0);
	CHECK_EQ_U64(a->unrecorded, 0);
	CHECK_EQ_U64(a->total_ticks, ticks);
	CHECK_EQ_U64(a->self_ticks, ticks); /* it calls nothing instrumented */
	CHECK_EQ_U64(a->max_ticks, ticks);
	/* its EXIT is in the ring: its bucket is profd's to count (daemon/events/event_hist.h) */
	for (uint32_t b = 0; b < AGG_BUCKETS; b++)
		CHECK_EQ_INT(a->hist[b], 0);
	CHECK_EQ_U64(thread_drops(t), 0);
}

/*
 * x86-64: the hook hijacks a timed call's return with its stub's landing
 * (slot+5, what the stub's call pushed), which jumps through the region's
 * thunk to the exit trampoline; the call still returns to its caller.
 */
static void test_hijack_is_the_stub_landing(void)
{
	uint8_t *code = map_code(return_reader_function, sizeof(return_reader_function));
	struct proc_maps maps;
	uint64_t stub = 0, region, exit;
	uint32_t len = 0;
	int32_t rel;
	int far = -1;
	uintptr_t seen;

	CHECK(code != NULL && proc_maps_load(&maps) == 0);
	CHECK_EQ_INT(patch_code(code, sizeof(return_reader_function), 8, &maps, &far, &len, &stub),
		     0);
	region = stub - STUB_SLOT_SIZE;
	CHECK_EQ_INT(((uint8_t *)(uintptr_t)stub)[STUB_LANDING_OFFSET], 0xff);
	CHECK_EQ_INT(((uint8_t *)(uintptr_t)stub)[STUB_LANDING_OFFSET + 1], 0x25);
	memcpy(&rel, (uint8_t *)(uintptr_t)stub + STUB_LANDING_OFFSET + 2, sizeof(rel));
	CHECK_EQ_U64(stub + STUB_RELOCATED_OFFSET + rel, region + STUB_THUNK_EXIT_POINTER_OFFSET);
	memcpy(&exit, (uint8_t *)(uintptr_t)region + STUB_THUNK_EXIT_POINTER_OFFSET, sizeof(exit));
	CHECK_EQ_U64(exit, (uint64_t)(uintptr_t)profagent_exit_trampoline);
	atomic_store(&agent_recording, 1);
	seen = (uintptr_t)((long (*)(void))(uintptr_t)code)();
	atomic_store(&agent_recording, 0);
	CHECK_EQ_U64(seen, stub + STUB_LANDING_OFFSET);
	CHECK_EQ_INT(state_depth(atomic_load(&agent_current_thread->committed)), 0);
	proc_maps_free(&maps);
}

int main(void)
{
	RUN_TEST(test_near_stub_rel32_jump);
	RUN_TEST(test_far_stub_absolute_jump);
	RUN_TEST(test_hooks_record_enter_and_exit);
	RUN_TEST(test_hooks_count_the_call);
	RUN_TEST(test_hijack_is_the_stub_landing);
	return unit_summary();
}
