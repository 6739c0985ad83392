// SPDX-License-Identifier: MIT
/*
 * Stub regions near each module and the writing of entry patches (see
 * patcher.h): where code lives and how it is written. What goes in a slot
 * and the jumps' encoding are the architecture's (agent/stub_slot_$(ARCH).c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/patcher.h"
#include "trampolines/trampoline_layout.h"

static int region_reaches(uint64_t start, size_t size, uint64_t code_lo, uint64_t code_hi,
			  int64_t reach)
{
	return code_in_reach(code_lo, start, reach) && code_in_reach(code_hi, start + size, reach) &&
	       code_in_reach(code_lo, start + size, reach) && code_in_reach(code_hi, start, reach);
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
			      size_t size, int64_t reach, struct gap_candidate *out, size_t max)
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
		if (!region_reaches(cand, size, code_lo, code_hi, reach))
			continue;
		out[n].start = cand;
		out[n].distance = cand > code_lo ? cand - code_lo : code_lo - cand;
		n++;
	}
	qsort(out, n, sizeof(*out), candidate_cmp);
	return n;
}

int stub_region_map(const struct proc_maps *maps, uint64_t code_lo, uint64_t code_hi,
		    size_t n_slots, struct stub_region *r)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size = ((n_slots + 1) * STUB_SLOT_SIZE + page - 1) & ~(page - 1);
	static const int64_t reaches[] = { STUB_NEAR_REACH, STUB_FAR_REACH };
	struct gap_candidate cands[64];
	void *base = NULL;

	for (size_t k = 0; k < sizeof(reaches) / sizeof(reaches[0]) && !base; k++) {
		size_t n = list_candidates(maps, code_lo, code_hi, size, reaches[k], cands, 64);

		for (size_t i = 0; i < n && !base; i++)
			base = try_map_at(cands[i].start, size);
		r->far = k > 0;
	}
	if (!base) { /* anywhere: the far jump may reach it (x86-64), else slots fail */
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

size_t stub_region_capacity(const struct stub_region *r)
{
	return r->size / STUB_SLOT_SIZE - 1;
}

int stub_region_reaches(const struct stub_region *r, uint64_t code_lo, uint64_t code_hi)
{
	return r->base && !r->far &&
	       region_reaches((uint64_t)(uintptr_t)r->base, r->size, code_lo, code_hi,
			      STUB_NEAR_REACH);
}

uint64_t stub_region_slot_entry(const struct stub_region *r, size_t slot)
{
	return (uint64_t)(uintptr_t)(r->base + (slot + 1) * STUB_SLOT_SIZE);
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

void patch_writer_init(struct patch_writer *w, const struct proc_maps *maps)
{
	*w = (struct patch_writer){ .maps = maps, .mem_fd = PATCH_MEM_UNTRIED };
}

/*
 * x86-64: through /proc/self/mem, which writes read-only pages as a
 * debugger does (a private copy of the page, its protection unchanged):
 * an mprotect pair per range split and merged the mapping, and every
 * mprotect that adds or keeps PROT_EXEC is an MMAP record for each perf
 * event and for profd to take in (~10 a process start, the module's
 * text twice each). 1 when written, 0 when the caller writes through
 * mprotect (/proc not there or read-only, the kernel's proc_mem.force_override,
 * seccomp): from then on for this writer.
 */
static int mem_write(struct patch_writer *w, uint64_t addr, const void *bytes, size_t len)
{
#if defined(__x86_64__)
	if (w->mem_fd == PATCH_MEM_UNTRIED)
		w->mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (w->mem_fd < 0)
		return 0;
	if (pwrite(w->mem_fd, bytes, len, (off_t)addr) == (ssize_t)len)
		return 1;
	close(w->mem_fd);
	w->mem_fd = -1;
#else
	/* aarch64: an aligned instruction is written by one store (see patch_writer_write) */
	(void)w, (void)addr, (void)bytes, (void)len;
#endif
	return 0;
}

int patch_writer_write(struct patch_writer *w, uint64_t addr, const void *bytes, size_t len)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t lo = addr & ~(page - 1);
	uint64_t hi = (addr + len + page - 1) & ~(page - 1);
	int err = 0;

	if (mem_write(w, addr, bytes, len))
		return 0;
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
	if (len == 4 && addr % 4 == 0) { /* one instruction (aarch64): one store */
		uint32_t word;

		memcpy(&word, bytes, sizeof(word));
		__atomic_store_n((uint32_t *)(uintptr_t)addr, word, __ATOMIC_RELAXED);
	} else {
		memcpy((void *)(uintptr_t)addr, bytes, len);
	}
	__builtin___clear_cache((char *)(uintptr_t)addr, (char *)(uintptr_t)(addr + len));
	return 0;
}

int patch_writer_finish(struct patch_writer *w)
{
	if (w->mem_fd >= 0)
		close(w->mem_fd);
	w->mem_fd = PATCH_MEM_UNTRIED;
	return pages_relock(w);
}
