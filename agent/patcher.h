/* SPDX-License-Identifier: MIT */
/*
 * Stubs and code patching: maps stub regions within reach of a module's
 * entry jumps, fills one slot per function (entry code + relocated prologue
 * + descriptor, see trampolines/trampoline_layout.h) and writes the jump
 * over each function's entry, restoring page protections after. The
 * architecture's half (slot code, jumps, reach) is agent/stub_slot_$(ARCH).c;
 * agent/patcher.c owns where code lives and how it is written.
 */
#ifndef PROFD_PATCHER_H
#define PROFD_PATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/proc_maps.h"

struct stub_region {
	uint8_t *base;
	size_t size;
	size_t n_slots;
	int far; /* out of the short jump's reach: functions get the long one */
};

#if defined(__x86_64__)
/* `jmp rel32`: a stub within +-2 GiB. */
#define PATCH_NEAR_LEN 5
/* `jmp *0(%rip); .quad stub`: for stubs out of rel32 reach, on long enough prologues. */
#define PATCH_FAR_LEN 14
#define STUB_NEAR_REACH ((int64_t)INT32_MAX - (1 << 20)) /* a margin for rounding */
#define STUB_FAR_REACH INT64_MAX
#elif defined(__aarch64__)
/* `b stub`: within +-128 MiB. */
#define PATCH_NEAR_LEN 4
/* `adrp x16; add x16; br x16`: within +-4 GiB. */
#define PATCH_FAR_LEN 12
#define STUB_NEAR_REACH ((int64_t)(128 << 20) - (1 << 20))
#define STUB_FAR_REACH ((int64_t)(4ll << 30) - (1 << 20))
#endif
/* The original bytes a patch replaces: a landing pad kept in place, then the jump. */
#define PATCH_MAX_LEN 16

/* Whether code at `from` reaches `to` with a jump of +-reach bytes. */
static inline int code_in_reach(uint64_t from, uint64_t to, int64_t reach)
{
	int64_t d = (int64_t)(to - from);

	return d > -reach && d < reach;
}

/*
 * Maps a region of n_slots within the short jump's reach of every address in
 * [code_lo, code_hi), or, when no such space exists, within the long one's
 * (r->far set). Returns 0 or -ENOMEM.
 */
int stub_region_map(const struct proc_maps *maps, uint64_t code_lo, uint64_t code_hi,
		    size_t n_slots, struct stub_region *r);

/*
 * Fills slot `slot` for the function at func_addr (func_size bytes,
 * readable). On success *fill says where the jump goes and how many entry
 * bytes the copy displaced. On failure returns a negative errno and *reason
 * says why (static or thread-local text). (agent/stub_slot_$(ARCH).c)
 */
struct stub_fill {
	size_t patch_len;        /* entry bytes the copy displaced (the jump's and any before) */
	size_t same_offsets_len; /* relocator's same_offsets_len: stub pcs that map back */
	size_t jump_offset;      /* the jump goes at func_addr + this: after a landing pad */
	size_t jump_len;         /* PATCH_NEAR_LEN or PATCH_FAR_LEN */
};

int stub_region_fill(struct stub_region *r, size_t slot, uint64_t func_addr, size_t func_size,
		     uint32_t func_id, uint32_t flags, struct stub_fill *fill,
		     const char **reason);

/*
 * Bytes of alignment padding after a function of func_size bytes in
 * code[0..avail) that a patch may cover too (x86-64: a function shorter than
 * its jump). (agent/stub_slot_$(ARCH).c)
 */
size_t stub_padding_after(const uint8_t *code, size_t avail, size_t func_size);

/* Slot 0: the jump to the generic entry trampoline. (agent/stub_slot_$(ARCH).c) */
void stub_region_write_thunk(uint8_t *thunk);

/* Slots the region has, its thunk's left out. */
size_t stub_region_capacity(const struct stub_region *r);

/* Whether every address of [code_lo, code_hi) reaches r with the short jump. */
int stub_region_reaches(const struct stub_region *r, uint64_t code_lo, uint64_t code_hi);

/* Address a function's jmp must target for slot `slot`. */
uint64_t stub_region_slot_entry(const struct stub_region *r, size_t slot);

/* Makes the region read+execute. */
int stub_region_seal(struct stub_region *r);

struct code_patch {
	uint64_t address;  /* function entry */
	uint64_t target;   /* slot entry */
	uint32_t len;      /* the stub_fill's jump_len */
};

/* The jump bytes (p->len of them) that send p->address to p->target. (stub_slot_$(ARCH).c) */
void patcher_encode_jump(uint8_t *out, const struct code_patch *p);

/*
 * Writes code bytes over read-only text: on x86-64 through /proc/self/mem
 * (the mapping untouched), else, or where that is refused, it unlocks the
 * pages a write touches (and some ahead: writes come in address order) and
 * restores each range's protection from maps when moving on and at finish
 * (a 4-byte aligned write is one store, which instruction fetch on another
 * CPU sees whole; the caches are made coherent after each write).
 * Allocates nothing, so it can run while every other thread of the process
 * is stopped. finish closes what the writer opened.
 */
struct patch_writer {
	const struct proc_maps *maps;
	uint64_t lo, hi;   /* pages currently writable */
	int prot;          /* their protection to restore */
	int mem_fd;        /* /proc/self/mem, PATCH_MEM_UNTRIED, or -1: refused */
};
#define PATCH_MEM_UNTRIED (-2)

void patch_writer_init(struct patch_writer *w, const struct proc_maps *maps);
int patch_writer_write(struct patch_writer *w, uint64_t addr, const void *bytes, size_t len);
int patch_writer_finish(struct patch_writer *w);

#endif
