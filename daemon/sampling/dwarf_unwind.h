/* SPDX-License-Identifier: MIT */
/*
 * DWARF (.eh_frame / .debug_frame) unwinding of user stacks copied by the
 * sampler (sampler_config.copy_stack), through libdwfl: one Dwfl per target
 * process holding its ELF modules. An unwind reads memory from the copied
 * stack only, never from the live process, so it works after the sample and
 * even after the target exited (as long as the files were opened before).
 */
#ifndef PROFD_DWARF_UNWIND_H
#define PROFD_DWARF_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dwarf_unwinder;
struct unwind_files;
struct unwind_file_id;

/*
 * A new unwinder for process pid, with no modules yet: add them with
 * dwarf_unwinder_load_proc_maps (running process) and/or
 * dwarf_unwinder_add_mapping (from MMAP2 records). Returns NULL with errno
 * set (ENOMEM, or EINVAL when libdwfl refuses). Not thread-safe: one thread
 * at a time per unwinder; unwinders of different processes are independent.
 */
struct dwarf_unwinder *dwarf_unwinder_new(pid_t pid);
void dwarf_unwinder_free(struct dwarf_unwinder *u);

/*
 * Records an executable mapping of path at [start, end) from file offset
 * pgoff. The ELF file is opened now, from /proc/PID/root/PATH, else PATH,
 * else /proc/PID/map_files/START-END, so add mappings while the target
 * lives; the descriptor is kept (one per module) and read, never mmapped,
 * when a walk first needs the module. Several mappings of one file make one
 * module; a module overlapping others (dlclose, then dlopen at the same
 * place; exec) replaces them. "[vdso]" is read from /proc/PID/mem when first
 * needed. Anonymous and other pseudo mappings ("[anon]", "//anon", "[heap]",
 * NULL, "") are ignored. Returns 0, or -EINVAL (start >= end), -ENOENT or
 * -EACCES (no file), -ENOEXEC (not an x86-64 ELF executable or shared
 * object), -ENOMEM.
 */
int dwarf_unwinder_add_mapping(struct dwarf_unwinder *u, uint64_t start, uint64_t end,
			       uint64_t pgoff, const char *path);

/*
 * Shares the files of the mappings added from now on with the other
 * unwinders of files (daemon/sampling/unwind_files.h; it must outlive u):
 * a mapping of a file one of them opened is not opened again.
 */
void dwarf_unwinder_share_files(struct dwarf_unwinder *u, struct unwind_files *files);

/*
 * dwarf_unwinder_add_mapping of the file the kernel names id (perf MMAP2's
 * device and inode; NULL: not known), shared when the unwinder shares files.
 */
int dwarf_unwinder_add_mapping_id(struct dwarf_unwinder *u, uint64_t start, uint64_t end,
				  uint64_t pgoff, const char *path, const struct unwind_file_id *id);

/*
 * Adds from's modules to u, their files shared: a forked child's mappings
 * are its parent's (perf reports none for them). 0 or -ENOMEM.
 */
int dwarf_unwinder_copy_modules(struct dwarf_unwinder *u, const struct dwarf_unwinder *from);

/*
 * Adds every executable mapping of /proc/PID/maps. Returns 0, or the negative
 * errno of opening that file (-ENOENT: no such process). Files that cannot
 * be loaded are skipped (counted in dwarf_unwind_stats.bad_mappings).
 */
int dwarf_unwinder_load_proc_maps(struct dwarf_unwinder *u);

/*
 * dwarf_unwinder_load_proc_maps from text, a /proc/PID/maps file read
 * already (proc_maps_text_read: read once for the unwinder and the
 * symbolizer). Returns 0; the files it cannot load are counted.
 */
int dwarf_unwinder_load_maps_text(struct dwarf_unwinder *u, const char *text, size_t len);

/*
 * Unwinds one sample. regs: user registers indexed by perf's x86-64
 * numbering (PERF_REG_X86_*, as in sampler_sample.regs), regs_mask says
 * which are valid; IP and SP are required, BP, BX and R12-R15 are needed
 * for frames that restore them. stack: a copy of the user memory
 * [sp, sp + stack_size) (any size, any content; NULL when stack_size is 0).
 * Fills pcs[0 .. *n) leaf first like a perf callchain: pcs[0] is the
 * sampled IP, the others are return addresses (subtract 1 to find the call).
 * The walk stops at the outermost frame, at max frames, at a frame without
 * unwind info, when it needs memory outside the copy, or when SP fails to
 * increase (a loop). Returns 0 (then *n >= 1), or -EINVAL (NULL arguments,
 * max 0, IP or SP missing from regs_mask), -ENOMEM (rebuilding libdwfl's
 * session after a module was replaced failed; the next call retries).
 */
int dwarf_unwinder_unwind(struct dwarf_unwinder *u, const uint64_t *regs, uint64_t regs_mask,
			  uint64_t sp, const uint8_t *stack, size_t stack_size, uint64_t *pcs,
			  size_t max, size_t *n);

/*
 * Sees every word the unwinder reads from the stack copy and may replace it:
 * how the daemon shows a return address our trampoline hijacked as the real
 * one. fix(ctx, addr, &value) gets the word's user address and its value.
 */
struct dwarf_memory_fix {
	void (*fix)(void *ctx, uint64_t addr, uint64_t *value);
	void *ctx;
};

/* dwarf_unwinder_unwind with every stack read passed through fix (NULL: none). */
int dwarf_unwinder_unwind_fixed(struct dwarf_unwinder *u, const uint64_t *regs,
				uint64_t regs_mask, uint64_t sp, const uint8_t *stack,
				size_t stack_size, const struct dwarf_memory_fix *fix,
				uint64_t *pcs, size_t max, size_t *n);

/* Counters since dwarf_unwinder_new. */
struct dwarf_unwind_stats {
	uint64_t unwinds;       /* successful dwarf_unwinder_unwind calls */
	uint64_t frames;        /* pcs returned by them */
	uint64_t stopped_max;   /* walks cut at max frames */
	uint64_t stopped_loop;  /* walks stopped: SP did not increase, or an unknown pc repeated */
	uint64_t modules;       /* ELF modules held now (vdso included) */
	uint64_t rebuilds;      /* libdwfl sessions rebuilt after a module was replaced */
	uint64_t bad_mappings;  /* mappings whose file could not be loaded */
};

void dwarf_unwinder_get_stats(const struct dwarf_unwinder *u, struct dwarf_unwind_stats *out);

#endif
