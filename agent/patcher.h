/* SPDX-License-Identifier: MIT */
/*
 * Stubs and code patching: maps stub regions within +-2 GiB of a module,
 * fills one 64-byte slot per function (entry code + relocated prologue +
 * descriptor, see trampolines/trampoline_layout.h) and writes the 5-byte
 * `jmp rel32` over each function's entry, restoring page protections after.
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
	int far; /* out of rel32 reach: functions get a 14-byte absolute jump */
};

/* `jmp *0(%rip); .quad stub`: for stubs out of rel32 reach, on long enough prologues. */
#define PATCH_ABS64_LEN 14

/*
 * Maps a region of n_slots within reach (rel32) of every address in
 * [code_lo, code_hi), or, when no such space exists, anywhere (r->far set).
 * Returns 0 or -ENOMEM.
 */
int stub_region_map(const struct proc_maps *maps, uint64_t code_lo, uint64_t code_hi,
		    size_t n_slots, struct stub_region *r);

/*
 * Fills slot `slot` for the function at func_addr (func_size bytes,
 * readable). On success *fill says how many entry bytes the jump replaces.
 * On failure returns a negative errno and *reason says why (static or
 * thread-local text).
 */
struct stub_fill {
	size_t patch_len;        /* entry bytes the jump replaces */
	size_t same_offsets_len; /* relocator's same_offsets_len: stub pcs that map back */
};

int stub_region_fill(struct stub_region *r, size_t slot, uint64_t func_addr, size_t func_size,
		     uint32_t func_id, uint32_t flags, struct stub_fill *fill,
		     const char **reason);

/* Address a function's jmp must target for slot `slot`. */
uint64_t stub_region_slot_entry(const struct stub_region *r, size_t slot);

/* Makes the region read+execute. */
int stub_region_seal(struct stub_region *r);

struct code_patch {
	uint64_t address;  /* function entry */
	uint64_t target;   /* slot entry */
	uint32_t len;      /* RELOCATOR_JMP_REL32_LEN, or PATCH_ABS64_LEN from a far region */
};

/* The jump bytes (p->len of them) that send p->address to p->target. */
void patcher_encode_jump(uint8_t *out, const struct code_patch *p);

/*
 * Writes code bytes over read-only text: unlocks the pages a write touches
 * (and some ahead: writes come in address order), restores each range's
 * protection from maps when moving on and at finish. Allocates nothing, so
 * it can run while every other thread of the process is stopped.
 */
struct patch_writer {
	const struct proc_maps *maps;
	uint64_t lo, hi;   /* pages currently writable */
	int prot;          /* their protection to restore */
};

void patch_writer_init(struct patch_writer *w, const struct proc_maps *maps);
int patch_writer_write(struct patch_writer *w, uint64_t addr, const void *bytes, size_t len);
int patch_writer_finish(struct patch_writer *w);

#endif
