/* SPDX-License-Identifier: MIT */
/*
 * CPU sampling of one target process with perf_event_open: one cpu-clock
 * event per (target, CPU) with inherit (threads created later are followed),
 * CLOCK_MONOTONIC timestamps, frame-pointer user callchains, MMAP2/COMM/
 * FORK/EXIT side records, one mmap ring per CPU, and optionally a copy of
 * each sample's user registers and stack for DWARF unwinding (see
 * daemon/sampling/dwarf_unwind.h). Reading parses records defensively (sizes checked
 * against the ring) and hands them to callbacks.
 */
#ifndef PROFD_SAMPLER_H
#define PROFD_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sampler;

struct sampler_config {
	pid_t pid;             /* target process */
	uint32_t freq_hz;      /* samples per second per thread (cpu-clock) */
	bool enable_on_exec;   /* true: target is stopped before exec; counting starts at exec */
	size_t ring_pages;     /* data pages per CPU ring (power of two); 0 = default (512 KiB,
				  4 MiB with copy_stack) */
	bool copy_stack;       /* also sample user registers (SAMPLER_REGS_MASK) and the
				  top stack_bytes of the user stack (PERF_SAMPLE_REGS_USER |
				  PERF_SAMPLE_STACK_USER) */
	uint32_t stack_bytes;  /* bytes of stack copied per sample: a multiple of 8 up to
				  SAMPLER_MAX_STACK_BYTES; 0 = SAMPLER_DEFAULT_STACK_BYTES */
	bool kernel_callchain; /* also sample time spent in the kernel and hand over the
				  kernel part of callchains (sampler_sample.kernel_callchain);
				  when perf_event_open refuses that (EACCES/EPERM), the
				  sampler falls back to user space only, see sampler_warning */
};

#define SAMPLER_DEFAULT_STACK_BYTES 8192u
#define SAMPLER_MAX_STACK_BYTES 65528u   /* the kernel wants < 65535 and 8-aligned */

/*
 * User registers are indexed by perf's x86-64 numbering (PERF_REG_X86_AX ..
 * PERF_REG_X86_R15 in <asm/perf_regs.h>). SAMPLER_REGS_MASK asks for all of
 * them but DS, ES, FS and GS, which the kernel refuses for 64-bit tasks:
 * AX BX CX DX SI DI BP SP IP FLAGS CS SS (bits 0-11) and R8-R15 (bits 16-23).
 */
#define SAMPLER_REGS_MAX 24
#define SAMPLER_REGS_MASK 0xff0fffull

#define SAMPLER_MAX_CALLCHAIN 127

struct sampler_sample {
	uint64_t time;         /* CLOCK_MONOTONIC ns */
	uint32_t pid, tid, cpu;
	bool user_mode;        /* sample ip was in user space */
	uint64_t ip;
	size_t n_callchain;    /* user frames only, leaf first, PERF_CONTEXT_* markers removed */
	const uint64_t *callchain; /* callchain[0] == ip (the kernel stores the interrupted
				      user ip first) for user-mode samples; for kernel-mode
				      ones the user pc the thread entered the kernel from;
				      callers below 4096 (the 0 ending a frame-pointer walk)
				      dropped; valid during the callback */
	/* with kernel_callchain only (otherwise 0 and NULL): */
	size_t n_kernel_callchain; /* kernel frames, leaf first, markers removed; 0 when the
				      sample has none (kernel_callchain off or refused) */
	const uint64_t *kernel_callchain; /* for a kernel-mode sample [0] == ip; valid during
					     the callback */
	/* with copy_stack only (otherwise regs_mask 0, stack NULL, stack_size 0): */
	uint64_t regs_mask;    /* which regs[] are valid (bit i = PERF_REG_X86_* i); 0 when
				  the kernel had no 64-bit user registers (kernel thread,
				  32-bit task) */
	uint64_t regs[SAMPLER_REGS_MAX]; /* user registers at the sample; regs[PERF_REG_X86_IP]
					    == ip for user-mode samples */
	uint64_t stack_addr;   /* user address of stack[0]: the sampled SP (regs[PERF_REG_X86_SP]),
				  0 without registers */
	const uint8_t *stack;  /* copy of [stack_addr, stack_addr + stack_size); unaligned; valid
				  during the callback only */
	size_t stack_size;     /* bytes the kernel could copy (dyn_size): <= stack_bytes, less near
				  the stack's top end */
};

struct sampler_mmap {
	uint64_t time;
	uint32_t pid, tid;
	uint64_t start, len, pgoff;
	uint32_t prot, flags;
	uint32_t maj, min;   /* the file's device and inode (MMAP2); all 0: not known */
	uint64_t ino;
	const char *filename;
};

struct sampler_callbacks {
	void (*sample)(void *ctx, const struct sampler_sample *s);
	void (*mmap)(void *ctx, const struct sampler_mmap *m);
	void (*comm)(void *ctx, uint32_t pid, uint32_t tid, const char *comm, uint64_t time);
	void (*task)(void *ctx, bool is_exit, uint32_t pid, uint32_t tid, uint64_t time);
	/* A FORK record (also passed to task): ppid/ptid created pid/tid. */
	void (*fork)(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint64_t time);
	void (*lost)(void *ctx, uint32_t cpu, uint64_t lost, uint64_t time);
};

/*
 * Opens the events. Returns NULL with errno set and a one-line reason in
 * err (e.g. "perf_event_open(pid 123, cpu 0): Permission denied; perf_event_paranoid=3").
 * With enable_on_exec the target must be single-threaded (blocked before
 * execve). Otherwise every thread listed in /proc/PID/task gets one event per
 * CPU, redirected into that CPU's ring; threads they create later are followed
 * (inherit), threads created while sampler_open runs by a thread not yet
 * opened are missed. Records other than samples may be slightly out of time
 * order within a ring (a sample interrupting the writer of another record).
 * EINVAL also comes from a bad config (stack_bytes not a multiple of 8 or
 * above SAMPLER_MAX_STACK_BYTES). With copy_stack each sample costs about
 * stack_bytes of ring space: size ring_pages for the rate times the read
 * interval. A sampler is used by one thread at a time; there is no global state.
 */
struct sampler *sampler_open(const struct sampler_config *cfg, char *err, size_t errlen);

/* The ring descriptors (one per CPU) to poll for readability; returns their count. */
size_t sampler_fds(const struct sampler *s, const int **fds);

/* Drains every ring, calling cb for each record. Returns records read or negative errno. */
int sampler_read(struct sampler *s, const struct sampler_callbacks *cb, void *ctx);

/*
 * Losses no LOST record told of. The kernel writes a ring's LOST record
 * just before the next record that fits in that ring, so what a CPU's ring
 * lost after the target's last record there (it moved to another CPU, or
 * exited) stays untold. Each event's own count (PERF_FORMAT_LOST, kernels
 * since 6.0) against its ring's records: the difference goes to cb->lost
 * (time: now) and the stats. Inherited events' losses (children threads and
 * processes) are known only from the records. Call after the last
 * sampler_read; a later call reports only what is new.
 */
void sampler_report_untold_losses(struct sampler *s, const struct sampler_callbacks *cb,
				  void *ctx);

/* Counters since sampler_open (sampler_read adds to them). */
struct sampler_stats {
	uint64_t records;          /* records parsed and handed to callbacks */
	uint64_t samples;
	uint64_t lost;             /* samples the kernel dropped (LOST, LOST_SAMPLES) */
	uint64_t malformed;        /* records, or rest of a ring's data, skipped as malformed */
	uint64_t throttled;        /* THROTTLE records: the kernel lowered the rate */
	uint64_t truncated_chains; /* callchains (user or kernel part) cut to
				      SAMPLER_MAX_CALLCHAIN frames */
	uint64_t kernel_samples;   /* samples that carried kernel frames */
};

void sampler_get_stats(const struct sampler *s, struct sampler_stats *out);

/*
 * NULL, or why the sampler does less than its config asked, e.g. "kernel
 * frames refused: perf_event_open(pid 12, cpu 0): Permission denied;
 * perf_event_paranoid=2; sampling user space only". Valid until sampler_close.
 */
const char *sampler_warning(const struct sampler *s);

/* Whether samples carry kernel frames (kernel_callchain asked and granted). */
bool sampler_has_kernel_callchain(const struct sampler *s);

/*
 * Parses the records in [tail, head) of a perf data area of size bytes (a
 * power of two, positions taken modulo size) exactly as sampler_read parses
 * each ring, with cpu reported in lost callbacks. Exposed for tests and
 * fuzzing: data may be arbitrary bytes. Adds to *stats. Returns the number of
 * records parsed, or -EINVAL (bad size) / -ENOMEM.
 */
int sampler_parse(const void *data, size_t size, uint64_t tail, uint64_t head, uint32_t cpu,
		  const struct sampler_callbacks *cb, void *ctx, struct sampler_stats *stats);

/*
 * sampler_parse for the rings of a sampler opened with copy_stack: samples
 * then also hold the registers' ABI and values (SAMPLER_REGS_MASK) and the
 * stack copy (size, data, dyn_size). Same returns.
 */
int sampler_parse_copy_stack(const void *data, size_t size, uint64_t tail, uint64_t head,
			     uint32_t cpu, const struct sampler_callbacks *cb, void *ctx,
			     struct sampler_stats *stats);

/* What sampler_parse_with parses and reports, as the sampler's config says. */
struct sampler_parse_options {
	bool copy_stack;       /* samples hold REGS_USER and STACK_USER parts */
	bool kernel_callchain; /* report kernel frames (n_kernel_callchain) */
};

/* sampler_parse with the options given; same returns. */
int sampler_parse_with(const void *data, size_t size, uint64_t tail, uint64_t head, uint32_t cpu,
		       const struct sampler_parse_options *opt, const struct sampler_callbacks *cb,
		       void *ctx, struct sampler_stats *stats);

/* Enables counting (for a target that is already running). */
int sampler_enable(struct sampler *s);
/*
 * Samples pid too, from now on, into the same rings (attach --children: a
 * descendant that ran before the attach inherited no event). Its threads as
 * /proc lists them now, and those they start. 0 or a negative errno (the
 * events opened so far stay).
 */
int sampler_add_process(struct sampler *s, pid_t pid);

void sampler_close(struct sampler *s);

#endif
