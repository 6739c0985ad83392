// SPDX-License-Identifier: MIT
/*
 * The sample pipeline (see sample_pipeline.h). Held samples live in
 * buckets by thread, each bucket sorted by time, so that the per-event
 * check of sample_pipeline_thread_reached costs one comparison.
 */
#include <asm/perf_regs.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sampling/call_stacks.h"
#include "daemon/symbols/demangle.h"
#include "daemon/sampling/dwarf_unwind.h"
#include "daemon/sampling/fp_repair.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/sampling/overhead.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sampling/sampler.h"
#include "daemon/sampling/stub_map.h"
#include "daemon/symbols/symbols.h"
#include "viewer-export/perfetto_writer.h"

#define HELD_BUCKETS 1024            /* power of two */
#define HELD_BYTES_MAX (64u << 20)   /* ~7,000 samples with 8 KiB stacks */
#define AGENT_TIDS_MAX 16            /* the agent's threads remembered (one flusher per agent) */
#define OVERHEAD_FRAMES 2            /* the marks above an overhead sample's stack */
#define DEFERRED_BYTES_MAX (16u << 20) /* then the kernel's table is waited for */

struct held_sample {
	struct held_sample *next;
	struct sampler_sample smp; /* callchain and stack point into data */
	size_t bytes;
	uint8_t data[];
};

/*
 * A sample resolved but for its kernel frames, while the kernel's table is
 * read (cfg.kernel_pending): its user frames (the overhead marks' room
 * before them) and its kernel pcs, written once the table is there.
 */
struct deferred_sample {
	uint64_t time;
	uint32_t cpu, pid, tid;
	enum overhead_kind kind;
	size_t n_frames, n_kernel;
	struct perfetto_frame *frames; /* OVERHEAD_FRAMES + n_frames + n_kernel of room */
	uint64_t *kernel;
};

struct sample_pipeline {
	struct sample_pipeline_config cfg;
	struct deferred_sample *deferred;
	size_t n_deferred, cap_deferred, deferred_bytes;
	bool agent_live;
	uint64_t exit_trampoline;
	struct held_sample **held; /* HELD_BUCKETS of them from the first sample held, else NULL */
	size_t n_held, held_bytes;
	uint64_t *self_by_func;
	size_t n_self_by_func;
	uint32_t agent_tids[AGENT_TIDS_MAX]; /* threads named as the agent's, oldest first */
	size_t n_agent_tids;
	struct sample_pipeline_stats stats;
};

struct sample_pipeline *sample_pipeline_new(const struct sample_pipeline_config *cfg)
{
	struct sample_pipeline *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->cfg = *cfg;
	return p;
}

static struct held_sample **bucket_of(struct sample_pipeline *p, uint32_t tid)
{
	return &p->held[(tid * 2654435761u) & (HELD_BUCKETS - 1)];
}

/* ---- putting hijacked return addresses back ---------------------------------------- */

/*
 * A value the agent writes into a hijacked return slot: on x86-64 the
 * function's exit landing in its stub, on aarch64 the exit trampoline.
 */
static bool is_hijack(struct sample_pipeline *p, uint64_t v)
{
	return (p->exit_trampoline && v == p->exit_trampoline) ||
	       (p->cfg.stubs && stub_map_is_landing(p->cfg.stubs, v));
}

/*
 * Landings in a stack become the exit trampoline's address, which the rest
 * of this file knows as "hijacked, or just returned into the exit path".
 * (The entry trampoline's frame, which a frame-pointer chain may run
 * through, returns into the relocated prologue, not to the landing its
 * stub's call pushed: trampolines/x86_64.S rewrites that word first.)
 */
static void landings_as_exit(struct sample_pipeline *p, uint64_t *pcs, size_t n)
{
	for (size_t k = 0; p->cfg.stubs && p->exit_trampoline && k < n; k++)
		if (stub_map_is_landing(p->cfg.stubs, pcs[k]))
			pcs[k] = p->exit_trampoline;
}

/* Our exit path: the trampoline has put a 0 placeholder where the return address will go. */
static bool in_exit_path(struct sample_pipeline *p, uint64_t ip)
{
	struct symbol_info info;

	symbolizer_lookup(p->cfg.symbols, ip, &info);
	return info.function && (strcmp(info.function, "profagent_exit_hook") == 0 ||
				 strcmp(info.function, "profagent_exit_trampoline") == 0);
}

struct return_fixer {
	struct sample_pipeline *p;
	uint32_t tid;
	bool exit_path;
};

/* A word the unwinder reads: a hijacked return slot gets its real value back. */
static void fix_return_slot(void *ctx, uint64_t addr, uint64_t *value)
{
	struct return_fixer *f = ctx;
	uint64_t real;

	if (!is_hijack(f->p, *value) && !(*value == 0 && f->exit_path))
		return;
	if (!call_stacks_return_at(f->p->cfg.calls, f->tid, addr, &real))
		return;
	*value = real;
	f->p->stats.returns_repaired++;
}

/*
 * Sampled on a landing or the exit trampoline's first instruction: the call
 * has just returned into the exit path and its slot is right below sp; the
 * sample is really at the caller's return address.
 */
static void leave_exit_trampoline(struct sample_pipeline *p, const struct sampler_sample *smp,
				  uint64_t *regs)
{
	uint64_t real;

	if (call_stacks_return_at(p->cfg.calls, smp->tid, smp->stack_addr - sizeof(uint64_t),
				  &real)) {
		regs[PERF_REG_X86_IP] = real;
		p->stats.returns_repaired++;
	}
}

/*
 * A frame-pointer chain through a stub (the entry trampoline's frame returns
 * into it): that frame is the function the stub stands for, just entered.
 * As a return address it becomes entry + 1, so that pc - 1 names the
 * function. A leaf in a region thunk, shared by the region's stubs, names no
 * function without the stack (fp samples carry none): it becomes 0, no
 * frame, and the sample stays the hooks' cost (leaf_owner reads the pc
 * sampled). Returns the index of the innermost such frame, 0 if none.
 */
static size_t chain_leave_stubs(struct sample_pipeline *p, uint64_t *chain, size_t n)
{
	size_t innermost = 0;
	uint64_t func;

	for (size_t k = n; k-- > 0;) {
		if (!stub_map_function_at(p->cfg.stubs, chain[k], &func)) {
			if (k == 0 && stub_map_is_agent_code(p->cfg.stubs, chain[0]))
				chain[0] = 0;
			continue;
		}
		chain[k] = k == 0 ? func : func + 1;
		innermost = k;
	}
	return innermost;
}

/* ---- unwinding and writing ------------------------------------------------------------ */

/* DWARF where it reaches further than the frame-pointer chain. Returns the pcs, leaf first. */
static size_t unwind_sample(struct sample_pipeline *p, const struct sampler_sample *smp,
			    uint64_t *pcs, const struct call_frame *open, size_t depth)
{
	size_t n_chain = smp->n_callchain < SAMPLER_MAX_CALLCHAIN ? smp->n_callchain
								 : SAMPLER_MAX_CALLCHAIN;
	uint64_t regs[SAMPLER_REGS_MAX], dwarf_pcs[SAMPLER_MAX_CALLCHAIN];
	struct return_fixer fixer = { .p = p, .tid = smp->tid };
	struct dwarf_memory_fix fix = { fix_return_slot, &fixer };
	size_t n_dwarf = 0, stub_frame = 0;

	if (p->cfg.unwinder && smp->regs_mask && smp->stack_size) {
		memcpy(regs, smp->regs, sizeof(regs));
		if (p->cfg.stubs)
			stub_map_relocate_sample(p->cfg.stubs, regs, smp->stack, smp->stack_addr,
						 smp->stack_size);
		if (p->exit_trampoline && is_hijack(p, regs[PERF_REG_X86_IP]))
			leave_exit_trampoline(p, smp, regs);
		else if (p->exit_trampoline)
			fixer.exit_path = in_exit_path(p, regs[PERF_REG_X86_IP]);
		if (dwarf_unwinder_unwind_fixed(p->cfg.unwinder, regs, smp->regs_mask,
						smp->stack_addr, smp->stack, smp->stack_size,
						p->exit_trampoline ? &fix : NULL, dwarf_pcs,
						SAMPLER_MAX_CALLCHAIN, &n_dwarf) == 0 &&
		    n_dwarf >= n_chain) {
			memcpy(pcs, dwarf_pcs, n_dwarf * sizeof(pcs[0]));
			landings_as_exit(p, pcs, n_dwarf);
			/* a leaf in a stub's own code (its call, its jump back): no frame */
			if (p->cfg.stubs)
				chain_leave_stubs(p, pcs, n_dwarf);
			return n_dwarf;
		}
	}
	memcpy(pcs, smp->callchain, n_chain * sizeof(pcs[0]));
	landings_as_exit(p, pcs, n_chain);
	if (p->cfg.stubs)
		stub_frame = chain_leave_stubs(p, pcs, n_chain);
	if (p->exit_trampoline) {
		uint64_t repaired;

		n_chain = fp_chain_repair(pcs, n_chain, SAMPLER_MAX_CALLCHAIN, p->exit_trampoline,
					  open, depth, stub_frame + 1, &repaired);
		p->stats.returns_repaired += repaired;
	}
	return n_chain;
}

/*
 * A pc in our trampolines: the exit trampoline is a return address we could
 * not put back (the caller's pc - 1 falls before it, so look up pc itself),
 * the entry one a sample taken on its way in.
 */
static bool is_trampoline_frame(struct sample_pipeline *p, uint64_t pc,
				const struct symbol_info *info)
{
	struct symbol_info exact;

	if (!overhead_is_agent_mapping(info->mapping_path))
		return false;
	symbolizer_lookup(p->cfg.symbols, pc, &exact);
	return exact.function && (strcmp(exact.function, "profagent_exit_trampoline") == 0 ||
				  strcmp(exact.function, "profagent_entry_trampoline") == 0);
}

static struct perfetto_frame frame_of(struct sample_pipeline *p, const struct symbol_info *info,
				      uint64_t rel_pc)
{
	return (struct perfetto_frame){
		.function = demangle_cached(p->cfg.demangled, info->function),
		.rel_pc = rel_pc,
		.mapping_path = info->mapping_path,
		.build_id = info->build_id,
		.build_id_len = info->build_id_len,
		.map_start = info->map_start,
		.map_end = info->map_end,
		.map_pgoff = info->map_pgoff,
		.load_bias = info->load_bias,
	};
}

/* The kernel part (pcs, leaf first) goes on top of the user frames, outermost first. */
static size_t append_kernel_frames(struct sample_pipeline *p, const uint64_t *kernel,
				   size_t n_kernel, struct perfetto_frame *frames, size_t n,
				   size_t cap)
{
	const struct kernel_symbols *ks =
		n_kernel && p->cfg.kernel ? p->cfg.kernel(p->cfg.kernel_ctx) : NULL;

	for (size_t k = n_kernel; ks && k-- > 0 && n < cap;) {
		struct symbol_info info;

		kernel_symbols_lookup(ks, kernel[k], &info);
		frames[n++] = frame_of(p, &info, info.rel_pc);
	}
	return n;
}

/* One of the frames that mark a sample as profiling overhead (perfetto_writer.h). */
static struct perfetto_frame overhead_mark(const char *name, uint64_t rel_pc)
{
	return (struct perfetto_frame){ .function = name, .rel_pc = rel_pc,
					.mapping_path = PERFETTO_OVERHEAD_MAPPING,
					.map_end = OVERHEAD_KINDS };
}

static bool is_agent_thread(const struct sample_pipeline *p, uint32_t tid)
{
	for (size_t i = 0; i < p->n_agent_tids; i++)
		if (p->agent_tids[i] == tid)
			return true;
	return false;
}

/*
 * Whose code the leaf is: the pc sampled, before unwinding moved it out of a
 * stub or the exit trampoline's first instruction to the function's place
 * (to find its callers). A stub is the agent's code but for the prologue
 * instructions copied into it, the function's own work.
 */
static enum overhead_frame leaf_owner(struct sample_pipeline *p, const struct sampler_sample *smp,
				      const struct symbol_info *leaf)
{
	uint64_t sampled = smp->n_callchain ? smp->callchain[0] : smp->regs[PERF_REG_X86_IP];

	if ((p->cfg.stubs && stub_map_is_agent_code(p->cfg.stubs, sampled)) ||
	    (p->exit_trampoline && sampled == p->exit_trampoline))
		return OVERHEAD_FRAME_HOOK;
	return overhead_frame_of(leaf->mapping_path, leaf->function);
}

/*
 * Writes a sample whose user frames are at all[OVERHEAD_FRAMES ..] (n of
 * them; all has room for cap frames), the kernel's on top, under the
 * overhead marks when kind says it is the profiler's cost. Returns the kind
 * counted (OVERHEAD_NONE for a sample with no frame at all).
 */
static enum overhead_kind emit_sample(struct sample_pipeline *p, uint64_t time, uint32_t cpu,
				      uint32_t pid, uint32_t tid, struct perfetto_frame *all,
				      size_t n, size_t cap, const uint64_t *kernel, size_t n_kernel,
				      enum overhead_kind kind)
{
	struct perfetto_frame *frames = all + OVERHEAD_FRAMES;

	n = append_kernel_frames(p, kernel, n_kernel, frames, n, cap - OVERHEAD_FRAMES);
	if (n == 0) {
		/*
		 * A sample all the same (its CPU time is the thread's), under one
		 * marker frame: a skip record (sample_skipped_reason) would be an
		 * import error for trace processor (perf_samples_skipped).
		 */
		p->stats.empty++;
		p->stats.written++;
		all[0] = overhead_mark(PERFETTO_NOT_UNWOUND, 0);
		perfetto_writer_sample(p->cfg.writer, time, cpu, (pid_t)pid, (pid_t)tid, all, 1);
		return OVERHEAD_NONE;
	}
	if (kind != OVERHEAD_NONE) {
		all[0] = overhead_mark(PERFETTO_OVERHEAD_ROOT, 0);
		all[1] = overhead_mark(overhead_kind_name(kind), kind);
		frames = all;
		n += OVERHEAD_FRAMES;
	}
	perfetto_writer_sample(p->cfg.writer, time, cpu, (pid_t)pid, (pid_t)tid, frames, n);
	p->stats.written++;
	p->stats.by_kind[kind]++;
	return kind;
}

static bool kernel_pending(const struct sample_pipeline *p)
{
	return p->cfg.kernel_pending && p->cfg.kernel_pending(p->cfg.kernel_ctx);
}

/* Writes the deferred samples, in the order they came (waiting for the table if it is read). */
static void write_deferred(struct sample_pipeline *p)
{
	for (size_t i = 0; i < p->n_deferred; i++) {
		struct deferred_sample *d = &p->deferred[i];
		size_t cap = OVERHEAD_FRAMES + d->n_frames + d->n_kernel;

		emit_sample(p, d->time, d->cpu, d->pid, d->tid, d->frames, d->n_frames, cap,
			    d->kernel, d->n_kernel, d->kind);
		free(d->frames);
	}
	p->n_deferred = 0;
	p->deferred_bytes = 0;
}

/*
 * Keeps the sample for write_deferred. Returns 0, or -ENOMEM (then it is
 * written now, the table waited for). The kind is decided now, as the
 * caller charges the sample's self time now: the kernel frames never
 * change it, only make a sample non-empty.
 */
static int defer_sample(struct sample_pipeline *p, const struct sampler_sample *smp,
			const struct perfetto_frame *all, size_t n, enum overhead_kind kind)
{
	size_t room = OVERHEAD_FRAMES + n + smp->n_kernel_callchain;
	size_t bytes = room * sizeof(struct perfetto_frame) +
		       smp->n_kernel_callchain * sizeof(uint64_t);
	struct deferred_sample *d;

	if (p->deferred_bytes + bytes > DEFERRED_BYTES_MAX)
		return -ENOMEM;
	if (p->n_deferred == p->cap_deferred) {
		size_t cap = p->cap_deferred ? 2 * p->cap_deferred : 64;
		struct deferred_sample *v = realloc(p->deferred, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->deferred = v;
		p->cap_deferred = cap;
	}
	d = &p->deferred[p->n_deferred];
	*d = (struct deferred_sample){ .time = smp->time, .cpu = smp->cpu, .pid = smp->pid,
				       .tid = smp->tid, .kind = kind, .n_frames = n,
				       .n_kernel = smp->n_kernel_callchain,
				       .frames = malloc(bytes) };
	if (!d->frames)
		return -ENOMEM;
	d->kernel = (uint64_t *)(d->frames + room);
	memcpy(d->frames + OVERHEAD_FRAMES, all + OVERHEAD_FRAMES, n * sizeof(*all));
	memcpy(d->kernel, smp->kernel_callchain, d->n_kernel * sizeof(uint64_t));
	p->n_deferred++;
	p->deferred_bytes += bytes;
	return 0;
}

/*
 * Writes the sample: its stack under the overhead marks when it is the
 * profiler's cost; one with kernel frames is kept while the kernel's table
 * is read. Returns whose cost it is (OVERHEAD_NONE when nothing was written
 * either).
 */
static enum overhead_kind write_sample(struct sample_pipeline *p,
				       const struct sampler_sample *smp, const uint64_t *pcs,
				       size_t n_pcs)
{
	struct perfetto_frame all[OVERHEAD_FRAMES + 2 * SAMPLER_MAX_CALLCHAIN];
	struct perfetto_frame *frames = all + OVERHEAD_FRAMES;
	enum overhead_frame owners[SAMPLER_MAX_CALLCHAIN]; /* root first, trampolines too */
	enum overhead_kind kind;
	size_t n = 0, n_owners = 0;

	/* perf gives leaf first; Perfetto wants the root first */
	for (size_t k = n_pcs; k-- > 0 && n < SAMPLER_MAX_CALLCHAIN;) {
		uint64_t pc = pcs[k];
		struct symbol_info info;
		bool is_leaf = k == 0;

		if (pc == 0) { /* the exit trampoline's placeholder slot, or a region thunk's leaf */
			if (is_leaf)
				owners[n_owners++] = OVERHEAD_FRAME_HOOK;
			continue;
		}
		/* a return address points after its call: look up the call itself */
		symbolizer_lookup(p->cfg.symbols, is_leaf ? pc : pc - 1, &info);
		if (is_leaf)
			owners[n_owners++] = leaf_owner(p, smp, &info);
		else if (pc != p->exit_trampoline) /* else a return address not put back */
			owners[n_owners++] = overhead_frame_of(info.mapping_path, info.function);
		if (is_trampoline_frame(p, pc, &info)) {
			p->stats.returns_unrepaired += pc == p->exit_trampoline;
			continue; /* our code standing in for a return address: never a frame */
		}
		frames[n++] = frame_of(p, &info, is_leaf ? info.rel_pc : info.rel_pc + 1);
	}
	kind = overhead_classify(is_agent_thread(p, smp->tid), owners, n_owners);
	if (smp->n_kernel_callchain && kernel_pending(p)) {
		if (defer_sample(p, smp, all, n, kind) == 0)
			return kind; /* as written with its kernel frames: never empty */
		write_deferred(p); /* no room to keep it: the table is waited for */
	} else if (p->n_deferred && !kernel_pending(p)) {
		write_deferred(p); /* the table is there: the kept ones first */
	}
	return emit_sample(p, smp->time, smp->cpu, smp->pid, smp->tid, all, n,
			   sizeof(all) / sizeof(all[0]), smp->kernel_callchain,
			   smp->n_kernel_callchain, kind);
}

static void charge_self_time(struct sample_pipeline *p, struct call_frame *open, size_t depth)
{
	uint32_t func;

	if (depth == 0)
		return;
	p->stats.in_calls++;
	open[depth - 1].self_samples++;
	func = open[depth - 1].func_id;
	if (func >= p->n_self_by_func) {
		size_t n = (size_t)func * 2 + 16;
		uint64_t *grown = realloc(p->self_by_func, n * sizeof(*grown));

		if (!grown)
			return;
		memset(grown + p->n_self_by_func, 0, (n - p->n_self_by_func) * sizeof(*grown));
		p->self_by_func = grown;
		p->n_self_by_func = n;
	}
	p->self_by_func[func]++;
}

static void resolve(struct sample_pipeline *p, const struct sampler_sample *smp)
{
	uint64_t pcs[SAMPLER_MAX_CALLCHAIN];
	size_t depth = 0, n_pcs;
	struct call_frame *open = p->cfg.calls ? call_stacks_open(p->cfg.calls, smp->tid, &depth)
					       : NULL;

	n_pcs = unwind_sample(p, smp, pcs, open, depth);
	if (write_sample(p, smp, pcs, n_pcs) == OVERHEAD_NONE) /* overhead is no call's self time */
		charge_self_time(p, open, depth);
}

/* ---- holding samples until the events reach them ---------------------------------------- */

static void release_held(struct sample_pipeline *p, struct held_sample *h)
{
	p->n_held--;
	p->held_bytes -= h->bytes;
	resolve(p, &h->smp);
	free(h);
}

/* Writes the bucket's samples of tid (every tid when all) taken at or before `until`. */
static void release_bucket(struct sample_pipeline *p, struct held_sample **bucket, uint32_t tid,
			   bool all, uint64_t until)
{
	for (struct held_sample **l = bucket; *l && (*l)->smp.time <= until;) {
		struct held_sample *h = *l;

		if (!all && h->smp.tid != tid) {
			l = &h->next;
			continue;
		}
		*l = h->next;
		release_held(p, h);
	}
}

static void release_until(struct sample_pipeline *p, uint64_t until)
{
	/* n_held: every use of the buckets is behind it, so they may be NULL */
	for (size_t i = 0; i < HELD_BUCKETS && p->n_held; i++)
		release_bucket(p, &p->held[i], 0, true, until);
}

static struct held_sample *hold_copy(const struct sampler_sample *smp)
{
	size_t chain_bytes = smp->n_callchain * sizeof(uint64_t);
	size_t kernel_bytes = smp->n_kernel_callchain * sizeof(uint64_t);
	size_t bytes = sizeof(struct held_sample) + chain_bytes + kernel_bytes + smp->stack_size;
	struct held_sample *h = malloc(bytes);

	if (!h)
		return NULL;
	h->next = NULL;
	h->smp = *smp;
	h->bytes = bytes;
	memcpy(h->data, smp->callchain, chain_bytes);
	if (kernel_bytes)
		memcpy(h->data + chain_bytes, smp->kernel_callchain, kernel_bytes);
	if (smp->stack_size)
		memcpy(h->data + chain_bytes + kernel_bytes, smp->stack, smp->stack_size);
	h->smp.callchain = (const uint64_t *)h->data;
	h->smp.kernel_callchain = kernel_bytes ? (const uint64_t *)(h->data + chain_bytes) : NULL;
	h->smp.stack = smp->stack_size ? h->data + chain_bytes + kernel_bytes : NULL;
	return h;
}

static void hold(struct sample_pipeline *p, const struct sampler_sample *smp)
{
	struct held_sample *h, **l;

	if (p->held_bytes + sizeof(*h) + smp->stack_size > HELD_BYTES_MAX) {
		p->stats.released_early += p->n_held;
		release_until(p, UINT64_MAX);
	}
	h = p->held || (p->held = calloc(HELD_BUCKETS, sizeof(*p->held))) ? hold_copy(smp) : NULL;
	if (!h) {
		p->stats.released_early++;
		resolve(p, smp);
		return;
	}
	/* samples arrive nearly in time order: the place is near the end */
	for (l = bucket_of(p, smp->tid); *l && (*l)->smp.time <= smp->time; l = &(*l)->next)
		;
	h->next = *l;
	*l = h;
	p->held_bytes += h->bytes;
	if (++p->n_held > p->stats.held_peak)
		p->stats.held_peak = p->n_held;
}

/* ---- interface ------------------------------------------------------------------------ */

void sample_pipeline_add(struct sample_pipeline *p, const struct sampler_sample *smp)
{
	if ((pid_t)smp->pid != p->cfg.target)
		return; /* a child process inherited the event */
	hold(p, smp);
}

void sample_pipeline_rings_read(struct sample_pipeline *p, uint64_t started)
{
	if (!p->agent_live && !p->cfg.agent_expected)
		release_until(p, started);
	if (p->n_deferred && !kernel_pending(p))
		write_deferred(p);
}

void sample_pipeline_thread_reached(struct sample_pipeline *p, uint32_t tid, uint64_t ts)
{
	struct held_sample **bucket;

	if (p->n_held == 0)
		return;
	bucket = bucket_of(p, tid);
	if (*bucket && (*bucket)->smp.time < ts)
		release_bucket(p, bucket, tid, false, ts - 1);
}

uint64_t sample_pipeline_thread_due(struct sample_pipeline *p, uint32_t tid)
{
	const struct held_sample *h = p->n_held ? *bucket_of(p, tid) : NULL;

	return h ? h->smp.time : UINT64_MAX;
}

void sample_pipeline_watermark(struct sample_pipeline *p, uint64_t ts)
{
	release_until(p, ts);
}

void sample_pipeline_release_older(struct sample_pipeline *p, uint64_t ts)
{
	size_t before = p->n_held;

	release_until(p, ts);
	p->stats.released_early += before - p->n_held;
}

void sample_pipeline_flush(struct sample_pipeline *p)
{
	release_until(p, UINT64_MAX);
	write_deferred(p);
}

void sample_pipeline_trim(struct sample_pipeline *p)
{
	sample_pipeline_flush(p);
	free(p->held);
	p->held = NULL;
	free(p->deferred);
	p->deferred = NULL;
	p->cap_deferred = 0;
}

void sample_pipeline_set_agent(struct sample_pipeline *p, bool live, uint64_t exit_trampoline)
{
	if (!live) /* the rings were read before the agent's end was seen */
		sample_pipeline_flush(p);
	p->agent_live = live;
	if (exit_trampoline)
		p->exit_trampoline = exit_trampoline;
}

void sample_pipeline_free(struct sample_pipeline *p)
{
	if (!p)
		return;
	sample_pipeline_trim(p);
	free(p->self_by_func);
	free(p);
}

void sample_pipeline_get_stats(const struct sample_pipeline *p, struct sample_pipeline_stats *out)
{
	*out = p->stats;
}

void sample_pipeline_thread_named(struct sample_pipeline *p, uint32_t tid, const char *name)
{
	bool agent = overhead_thread_is_agent(name);
	size_t i = 0;

	while (i < p->n_agent_tids && p->agent_tids[i] != tid)
		i++;
	if (agent == (i < p->n_agent_tids))
		return;
	if (!agent || p->n_agent_tids == AGENT_TIDS_MAX) { /* renamed, or the oldest goes */
		i = agent ? 0 : i;
		memmove(&p->agent_tids[i], &p->agent_tids[i + 1],
			(--p->n_agent_tids - i) * sizeof(p->agent_tids[0]));
	}
	if (agent)
		p->agent_tids[p->n_agent_tids++] = tid;
}

uint64_t sample_pipeline_written(const struct sample_pipeline *p)
{
	return p->stats.written;
}

uint64_t sample_pipeline_self_samples(const struct sample_pipeline *p, uint32_t func_id)
{
	return func_id < p->n_self_by_func ? p->self_by_func[func_id] : 0;
}
