// SPDX-License-Identifier: MIT
/*
 * Stub regions near each module and the entry patches (see patcher.h). The
 * relocation itself is trampolines/relocator_x86_64.c; this file owns where
 * code lives and how it is written.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/patcher.h"
#include "trampolines/relocator_x86_64.h"
#include "trampolines/trampoline_layout.h"

#define REL32_REACH ((int64_t)INT32_MAX - (1 << 20)) /* keep a margin for rounding */

static int in_rel32_reach(uint64_t from, uint64_t to)
{
	int64_t d = (int64_t)(to - from);

	return d > -REL32_REACH && d < REL32_REACH;
}

static int region_reaches(uint64_t start, size_t size, uint64_t code_lo, uint64_t code_hi)
{
	return in_rel32_reach(code_lo, start) && in_rel32_reach(code_hi, start + size) &&
	       in_rel32_reach(code_lo, start + size) && in_rel32_reach(code_hi, start);
}

static void *try_map_at(uint64_t addr, size_t size)
{
	void *p = mmap((void *)addr, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if ((uint64_t)p != addr) { /* kernels before 4.17 ignore MAP_FIXED_NOREPLACE */
		munmap(p, size);
		return NULL;
	}
	return p;
}

struct gap_candidate {
	uint64_t start;
	uint64_t distance;
};

static int candidate_cmp(const void *a, const void *b)
{
	const struct gap_candidate *x = a, *y = b;

	return x->distance < y->distance ? -1 : x->distance > y->distance;
}

/* The end of each free gap that faces the module; nearest first. */
static size_t list_candidates(const struct proc_maps *maps, uint64_t code_lo, uint64_t code_hi,
			      size_t size, struct gap_candidate *out, size_t max)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	size_t n = 0;

	for (size_t i = 0; i + 1 < maps->n && n < max; i++) {
		uint64_t gap_lo = maps->maps[i].end, gap_hi = maps->maps[i + 1].start;
		uint64_t cand;

		if (gap_hi <= gap_lo || gap_hi - gap_lo < size + 2 * page)
			continue;
		cand = gap_hi <= code_lo ? gap_hi - page - size : gap_lo + page;
		cand &= ~(page - 1);
		if (!region_reaches(cand, size, code_lo, code_hi))
			continue;
		out[n].start = cand;
		out[n].distance = cand > code_lo ? cand - code_lo : code_lo - cand;
		n++;
	}
	qsort(out, n, sizeof(*out), candidate_cmp);
	return n;
}

/* Slot 0: `jmp *8(%rip)` and the address of the generic entry trampoline. */
static void stub_region_write_thunk(uint8_t *thunk)
{
	static const uint8_t jmp_indirect[] = { 0xff, 0x25, 0x02, 0x00, 0x00, 0x00, 0xcc, 0xcc };
	uint64_t entry = (uint64_t)(uintptr_t)profagent_entry_trampoline;

	_Static_assert(sizeof(jmp_indirect) == STUB_THUNK_POINTER_OFFSET, "thunk layout");
	memcpy(thunk, jmp_indirect, sizeof(jmp_indirect));
	memcpy(thunk + STUB_THUNK_POINTER_OFFSET, &entry, sizeof(entry));
}

int stub_region_map(const struct proc_maps *maps, uint64_t code_lo, uint64_t code_hi,
		    size_t n_slots, struct stub_region *r)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = ((n_slots + 1) * STUB_SLOT_SIZE + page - 1) & ~(page - 1);
	struct gap_candidate cands[64];
	size_t n = list_candidates(maps, code_lo, code_hi, size, cands, 64);
	void *base = NULL;

	for (size_t i = 0; i < n && !base; i++)
		base = try_map_at(cands[i].start, size);
	r->far = !base;
	if (!base) {
		base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED)
			return -ENOMEM;
	}
	r->base = base;
	r->size = size;
	r->n_slots = n_slots;
	stub_region_write_thunk(r->base);
	return 0;
}

uint64_t stub_region_slot_entry(const struct stub_region *r, size_t slot)
{
	return (uint64_t)(uintptr_t)(r->base + (slot + 1) * STUB_SLOT_SIZE);
}

static void put_rel32(uint8_t *at, uint64_t next_insn, uint64_t target)
{
	int32_t rel = (int32_t)(int64_t)(target - next_insn);

	memcpy(at, &rel, sizeof(rel));
}

int stub_region_fill(struct stub_region *r, size_t slot, uint64_t func_addr, size_t func_size,
		     uint32_t func_id, uint32_t flags, struct stub_fill *fill,
		     const char **reason)
{
	uint8_t *s = r->base + (slot + 1) * STUB_SLOT_SIZE;
	uint64_t sa = (uint64_t)(uintptr_t)s;
	struct stub_desc desc = { .relocated = sa + STUB_RELOCATED_OFFSET, .func_id = func_id,
				  .flags = flags };
	struct relocation reloc = { 0 };
	int err;

	size_t jump_len = r->far ? PATCH_ABS64_LEN : RELOCATOR_JMP_REL32_LEN;

	if (!r->far && !in_rel32_reach(func_addr + RELOCATOR_JMP_REL32_LEN, sa)) {
		*reason = "no stub memory within reach of a 5-byte jump";
		return -ERANGE;
	}
	memset(s, 0xcc, STUB_SLOT_SIZE);
	err = relocator_relocate((const uint8_t *)(uintptr_t)func_addr, func_size, func_addr,
				 jump_len, sa + STUB_RELOCATED_OFFSET, s + STUB_RELOCATED_OFFSET,
				 STUB_RELOCATED_MAX, &reloc);
	if (err) {
		memset(s, 0xcc, STUB_SLOT_SIZE);
		if (r->far && err == -ERANGE && func_size < PATCH_ABS64_LEN)
			*reason = "no stub memory within 2 GiB, and shorter than a 14-byte absolute jump";
		else
			*reason = reloc.skip_reason ? reloc.skip_reason : "relocation failed";
		return err;
	}
	s[0] = 0xe8; /* call region_thunk: pushes the relocated prologue's address */
	put_rel32(s + 1, sa + STUB_RELOCATED_OFFSET, (uint64_t)(uintptr_t)r->base);
	memcpy(s + STUB_DESC_OFFSET, &desc, sizeof(desc));
	fill->patch_len = reloc.patch_len;
	fill->same_offsets_len = reloc.same_offsets_len;
	return 0;
}

int stub_region_seal(struct stub_region *r)
{
	__builtin___clear_cache((char *)r->base, (char *)r->base + r->size);
	return mprotect(r->base, r->size, PROT_READ | PROT_EXEC) ? -errno : 0;
}

static int pages_relock(struct patch_writer *w)
{
	int err = 0;

	if (w->hi > w->lo && mprotect((void *)w->lo, w->hi - w->lo, w->prot))
		err = -errno;
	w->lo = w->hi = 0;
	return err;
}

static int pages_unlock(struct patch_writer *w, uint64_t lo, uint64_t hi)
{
	const struct proc_map *m = proc_maps_find(w->maps, lo);

	if (!m || hi > m->end)
		return -EFAULT; /* beyond the mapping: the caller narrows the range */
	if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	w->lo = lo;
	w->hi = hi;
	w->prot = m->prot;
	return 0;
}

void patcher_encode_jump(uint8_t *jmp, const struct code_patch *p)
{
	static const uint8_t jmp_rip_indirect[6] = { 0xff, 0x25, 0, 0, 0, 0 };

	if (p->len == PATCH_ABS64_LEN) {
		memcpy(jmp, jmp_rip_indirect, sizeof(jmp_rip_indirect));
		memcpy(jmp + sizeof(jmp_rip_indirect), &p->target, sizeof(p->target));
	} else {
		jmp[0] = 0xe9;
		put_rel32(jmp + 1, p->address + RELOCATOR_JMP_REL32_LEN, p->target);
	}
}

void patch_writer_init(struct patch_writer *w, const struct proc_maps *maps)
{
	*w = (struct patch_writer){ .maps = maps };
}

int patch_writer_write(struct patch_writer *w, uint64_t addr, const void *bytes, size_t len)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t lo = addr & ~(page - 1);
	uint64_t hi = (addr + len + page - 1) & ~(page - 1);
	int err = 0;

	if (lo < w->lo || hi > w->hi) {
		err = pages_relock(w);
		/* unlock ahead: patches come in address order, often on the same pages */
		if (!err)
			err = pages_unlock(w, lo, hi > lo + 64 * page ? hi : lo + 64 * page);
		if (err == -EFAULT)
			err = pages_unlock(w, lo, hi);
		if (err)
			return err;
	}
	memcpy((void *)(uintptr_t)addr, bytes, len);
	return 0;
}

int patch_writer_finish(struct patch_writer *w)
{
	return pages_relock(w);
}
