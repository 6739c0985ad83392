// SPDX-License-Identifier: MIT
/*
 * perf_event_open CPU sampler of one target: owns the events (one per
 * thread and CPU) and one mmap ring per CPU. The only ring field written is
 * data_tail. Ring contents are parsed as untrusted bytes: every size and
 * field is checked against the record before use (user register and stack
 * copies included). Kernel frames are only asked for, and only handed on,
 * with kernel_callchain. No global state.
 */
#include "daemon/sampling/sampler.h"

#include <asm/perf_regs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_RING_BYTES (512u << 10)
#define DEFAULT_STACK_RING_BYTES (4u << 20) /* platform-notes: no loss at ~7k samples/s */
#define SCRATCH_BYTES 65536     /* perf_event_header.size is 16 bits */
#define SAMPLE_ID_BYTES 24      /* sample_id_all trailer for TID | TIME | CPU */
#define SAMPLE_FIXED_BYTES 48   /* header, ip, pid/tid, time, cpu/res, nr */
#define SAMPLE_TYPE \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | \
	 PERF_SAMPLE_CALLCHAIN)
#define SAMPLE_TYPE_STACK (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)

_Static_assert(SAMPLER_REGS_MAX == PERF_REG_X86_64_MAX, "regs[] is indexed by PERF_REG_X86_*");
_Static_assert((SAMPLER_REGS_MASK & ((1ull << PERF_REG_X86_DS) | (1ull << PERF_REG_X86_ES) |
				     (1ull << PERF_REG_X86_FS) | (1ull << PERF_REG_X86_GS))) == 0,
	       "the kernel refuses DS/ES/FS/GS for 64-bit tasks");

struct sampler_ring {
	int fd;                             /* the CPU's first event; others SET_OUTPUT here */
	uint32_t cpu;
	void *base;                         /* metadata page, then the data area */
	size_t map_len;
	struct perf_event_mmap_page *meta;
	const uint8_t *data;
	uint64_t size;                      /* power of two */
	uint64_t lost_told;                 /* samples its LOST records counted */
};

struct sampler {
	struct sampler_ring *rings;
	int *ring_fds;
	size_t n_rings;
	int *fds;                           /* every event, ring owners included */
	uint32_t *fd_ring;                  /* fds[i] writes into rings[fd_ring[i]] */
	size_t n_fds, cap_fds;
	bool no_lost_format;                /* a kernel before 6.0: no PERF_FORMAT_LOST */
	struct sampler_stats stats;
	struct sampler_parse_options parse; /* as opened: kernel_callchain off after a refusal */
	uint8_t *scratch;                   /* a record that wraps the ring end */
	uint64_t chain[SAMPLER_MAX_CALLCHAIN];
	uint64_t kernel_chain[SAMPLER_MAX_CALLCHAIN];
	char warning[512];                  /* "" or what sampler_warning returns */
	struct sampler_config cfg;          /* as opened: sampler_add_process opens alike */
};

/* What one parse pass reports to. */
struct parse_ctx {
	const struct sampler_callbacks *cb;
	void *ctx;
	uint32_t cpu;
	struct sampler_stats *stats;
	uint64_t *chain;                    /* SAMPLER_MAX_CALLCHAIN entries */
	uint64_t *kernel_chain;             /* SAMPLER_MAX_CALLCHAIN entries */
	struct sampler_parse_options opt;
};

struct sample_id {
	uint32_t pid, tid;
	uint64_t time;
};

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* ---- record parsing ------------------------------------------------------ */

/*
 * Splits a raw callchain into its user part and (with kernel_callchain) its
 * kernel part; hv/guest parts and the PERF_CONTEXT_* markers are dropped, and
 * so are user callers in the never-mapped first page (the 0 a frame-pointer
 * walk reads at the outermost frame); the user leaf is always kept. The
 * kernel part comes first, so a full kernel part must not end the walk.
 */
static void split_callchain(const struct parse_ctx *pc, const uint8_t *ips, uint64_t nr,
			    struct sampler_sample *s)
{
	uint64_t context = 0, i, ip;
	size_t n_user = 0, n_kernel = 0;
	bool kernel_cut = false;

	for (i = 0; i < nr; i++) {
		ip = rd64(ips + i * 8);
		if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
			context = ip;
		} else if (context == (uint64_t)PERF_CONTEXT_KERNEL) {
			if (!pc->opt.kernel_callchain || kernel_cut)
				continue;
			if (n_kernel < SAMPLER_MAX_CALLCHAIN)
				pc->kernel_chain[n_kernel++] = ip;
			else
				kernel_cut = true;
		} else if (context == (uint64_t)PERF_CONTEXT_USER && (n_user == 0 || ip >= 4096)) {
			if (n_user == SAMPLER_MAX_CALLCHAIN) {
				pc->stats->truncated_chains++;
				break;
			}
			pc->chain[n_user++] = ip;
		}
	}
	pc->stats->truncated_chains += kernel_cut;
	s->n_callchain = n_user;
	s->callchain = pc->chain;
	s->n_kernel_callchain = n_kernel;
	s->kernel_callchain = n_kernel ? pc->kernel_chain : NULL;
}

/*
 * The REGS_USER then STACK_USER parts at rec[off, size): u64 abi, then (abi
 * not NONE) one u64 per bit of SAMPLER_REGS_MASK in bit order; u64 size, then
 * (size not 0) size bytes of stack and the u64 dyn_size that is valid of them.
 */
static int parse_user_stack(const uint8_t *rec, size_t size, size_t off, struct sampler_sample *s)
{
	const size_t n_regs = (size_t)__builtin_popcountll(SAMPLER_REGS_MASK);
	uint64_t abi, len, dyn;
	unsigned int bit;

	if (off > size || size - off < 8)
		return -EINVAL;
	abi = rd64(rec + off);
	off += 8;
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		if (abi != PERF_SAMPLE_REGS_ABI_32 && abi != PERF_SAMPLE_REGS_ABI_64)
			return -EINVAL;
		if ((size - off) / 8 < n_regs)
			return -EINVAL;
		for (bit = 0; bit < SAMPLER_REGS_MAX; bit++) {
			if (SAMPLER_REGS_MASK & (1ull << bit)) {
				s->regs[bit] = rd64(rec + off);
				off += 8;
			}
		}
		/* a 32-bit task's registers mean nothing to an x86-64 unwinder */
		if (abi == PERF_SAMPLE_REGS_ABI_64)
			s->regs_mask = SAMPLER_REGS_MASK;
	}
	if (size - off < 8)
		return -EINVAL;
	len = rd64(rec + off);
	off += 8;
	if (len == 0)
		return 0;
	if (len > size - off || size - off - len < 8)
		return -EINVAL;
	dyn = rd64(rec + off + len);
	if (dyn > len)
		return -EINVAL;
	s->stack = rec + off;
	s->stack_size = (size_t)dyn;
	s->stack_addr = s->regs_mask ? s->regs[PERF_REG_X86_SP] : 0;
	return 0;
}

static int parse_sample(const struct parse_ctx *pc, const uint8_t *rec, size_t size)
{
	struct sampler_sample s = { 0 };
	struct perf_event_header hdr;
	uint64_t nr;

	if (size < SAMPLE_FIXED_BYTES)
		return -EINVAL;
	nr = rd64(rec + 40);
	if (nr > (size - SAMPLE_FIXED_BYTES) / 8)
		return -EINVAL;
	if (pc->opt.copy_stack &&
	    parse_user_stack(rec, size, SAMPLE_FIXED_BYTES + (size_t)nr * 8, &s) < 0)
		return -EINVAL;
	memcpy(&hdr, rec, sizeof(hdr));
	s.ip = rd64(rec + 8);
	s.pid = rd32(rec + 16);
	s.tid = rd32(rec + 20);
	s.time = rd64(rec + 24);
	s.cpu = rd32(rec + 32);
	s.user_mode = (hdr.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
	split_callchain(pc, rec + SAMPLE_FIXED_BYTES, nr, &s);
	pc->stats->samples++;
	pc->stats->kernel_samples += s.n_kernel_callchain > 0;
	if (pc->cb->sample)
		pc->cb->sample(pc->ctx, &s);
	return 0;
}

/* The trailer sample_id_all appends; body_min is the record's fixed body. */
static int read_sample_id(const uint8_t *rec, size_t size, size_t body_min, struct sample_id *id)
{
	const uint8_t *p;

	if (size < sizeof(struct perf_event_header) + body_min + SAMPLE_ID_BYTES)
		return -EINVAL;
	p = rec + size - SAMPLE_ID_BYTES;
	id->pid = rd32(p);
	id->tid = rd32(p + 4);
	id->time = rd64(p + 8);
	return 0;
}

/* A NUL-terminated string inside rec[off, end), or NULL. */
static const char *record_string(const uint8_t *rec, size_t off, size_t end)
{
	if (off >= end || !memchr(rec + off, '\0', end - off))
		return NULL;
	return (const char *)rec + off;
}

/* MMAP2 body: pid, tid, addr, len, pgoff, 24 bytes of maj/min/ino (or build id), prot, flags. */
static int parse_mmap2(const struct parse_ctx *pc, const uint8_t *rec, size_t size)
{
	struct perf_event_header hdr;
	struct sampler_mmap m;
	struct sample_id id;

	if (read_sample_id(rec, size, 64, &id) < 0)
		return -EINVAL;
	m.filename = record_string(rec, 72, size - SAMPLE_ID_BYTES);
	if (!m.filename)
		return -EINVAL;
	m.time = id.time;
	m.pid = rd32(rec + 8);
	m.tid = rd32(rec + 12);
	m.start = rd64(rec + 16);
	m.len = rd64(rec + 24);
	m.pgoff = rd64(rec + 32);
	m.prot = rd32(rec + 64);
	m.flags = rd32(rec + 68);
	m.maj = m.min = 0;
	m.ino = 0;
	memcpy(&hdr, rec, sizeof(hdr));
	if (!(hdr.misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) { /* else a build id is there */
		m.maj = rd32(rec + 40);
		m.min = rd32(rec + 44);
		m.ino = rd64(rec + 48);
	}
	if (pc->cb->mmap)
		pc->cb->mmap(pc->ctx, &m);
	return 0;
}

/* Legacy MMAP (only if the kernel ignored mmap2): no prot, data maps flagged in misc. */
static int parse_mmap(const struct parse_ctx *pc, const uint8_t *rec, size_t size)
{
	struct perf_event_header hdr;
	struct sampler_mmap m;
	struct sample_id id;

	if (read_sample_id(rec, size, 32, &id) < 0)
		return -EINVAL;
	m.filename = record_string(rec, 40, size - SAMPLE_ID_BYTES);
	if (!m.filename)
		return -EINVAL;
	memcpy(&hdr, rec, sizeof(hdr));
	m.time = id.time;
	m.pid = rd32(rec + 8);
	m.tid = rd32(rec + 12);
	m.start = rd64(rec + 16);
	m.len = rd64(rec + 24);
	m.pgoff = rd64(rec + 32);
	m.prot = (hdr.misc & PERF_RECORD_MISC_MMAP_DATA) ? PROT_READ : PROT_READ | PROT_EXEC;
	m.flags = 0;
	m.maj = m.min = 0;
	m.ino = 0;
	if (pc->cb->mmap)
		pc->cb->mmap(pc->ctx, &m);
	return 0;
}

static int parse_comm(const struct parse_ctx *pc, const uint8_t *rec, size_t size)
{
	struct sample_id id;
	const char *comm;

	if (read_sample_id(rec, size, 8, &id) < 0)
		return -EINVAL;
	comm = record_string(rec, 16, size - SAMPLE_ID_BYTES);
	if (!comm)
		return -EINVAL;
	if (pc->cb->comm)
		pc->cb->comm(pc->ctx, rd32(rec + 8), rd32(rec + 12), comm, id.time);
	return 0;
}

/* FORK/EXIT body: pid, ppid, tid, ptid, time. */
static int parse_task(const struct parse_ctx *pc, const uint8_t *rec, size_t size, bool is_exit)
{
	struct sample_id id;

	if (read_sample_id(rec, size, 24, &id) < 0)
		return -EINVAL;
	if (pc->cb->task)
		pc->cb->task(pc->ctx, is_exit, rd32(rec + 8), rd32(rec + 16), rd64(rec + 24));
	/* FORK and EXIT bodies: pid, ppid, tid, ptid, time */
	if (!is_exit && pc->cb->fork)
		pc->cb->fork(pc->ctx, rd32(rec + 8), rd32(rec + 12), rd32(rec + 16), rd64(rec + 24));
	return 0;
}

/* LOST body: id, lost. LOST_SAMPLES body: lost. */
static int parse_lost(const struct parse_ctx *pc, const uint8_t *rec, size_t size, size_t at)
{
	struct sample_id id;
	uint64_t lost;

	if (read_sample_id(rec, size, at, &id) < 0)
		return -EINVAL;
	lost = rd64(rec + at);
	pc->stats->lost += lost;
	if (pc->cb->lost)
		pc->cb->lost(pc->ctx, pc->cpu, lost, id.time);
	return 0;
}

/* One complete record (size from its header, already checked >= 8). */
static int parse_record(const struct parse_ctx *pc, const uint8_t *rec, size_t size)
{
	struct perf_event_header hdr;

	memcpy(&hdr, rec, sizeof(hdr));
	switch (hdr.type) {
	case PERF_RECORD_SAMPLE:
		return parse_sample(pc, rec, size);
	case PERF_RECORD_MMAP2:
		return parse_mmap2(pc, rec, size);
	case PERF_RECORD_MMAP:
		return parse_mmap(pc, rec, size);
	case PERF_RECORD_COMM:
		return parse_comm(pc, rec, size);
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		return parse_task(pc, rec, size, hdr.type == PERF_RECORD_EXIT);
	case PERF_RECORD_LOST:
		return parse_lost(pc, rec, size, 16);
	case PERF_RECORD_LOST_SAMPLES:
		return parse_lost(pc, rec, size, 8);
	case PERF_RECORD_THROTTLE:
		pc->stats->throttled++;
		return 0;
	default:
		return 0; /* UNTHROTTLE and record types we did not ask for */
	}
}

/* ---- ring walking ---------------------------------------------------------- */

static void ring_copy(const uint8_t *data, uint64_t size, uint64_t pos, void *dst, size_t len)
{
	size_t off = (size_t)(pos & (size - 1));
	size_t first = len < size - off ? len : (size_t)(size - off);

	memcpy(dst, data + off, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

/*
 * Parses [tail, head). A framing error (size below the header, beyond the
 * data, beyond the ring) loses sync, so the rest of the data is skipped; a
 * record whose fields do not fit its size is skipped alone. Both count as
 * malformed. Returns the records parsed; the whole range is consumed.
 */
static int ring_parse(const struct parse_ctx *pc, const uint8_t *data, uint64_t size,
		      uint64_t tail, uint64_t head, uint8_t *scratch)
{
	struct perf_event_header hdr;
	int n = 0;

	if (head - tail > size) {
		pc->stats->malformed++;
		return 0;
	}
	while (head - tail >= sizeof(hdr)) {
		const uint8_t *rec;
		uint64_t off = tail & (size - 1);

		ring_copy(data, size, tail, &hdr, sizeof(hdr));
		if (hdr.size < sizeof(hdr) || hdr.size > head - tail)
			break;
		if (off + hdr.size <= size) {
			rec = data + off;
		} else {
			ring_copy(data, size, tail, scratch, hdr.size);
			rec = scratch;
		}
		if (parse_record(pc, rec, hdr.size) == 0) {
			pc->stats->records++;
			n++;
		} else {
			pc->stats->malformed++;
		}
		tail += hdr.size;
	}
	if (tail != head)
		pc->stats->malformed++;
	return n;
}

int sampler_parse_with(const void *data, size_t size, uint64_t tail, uint64_t head, uint32_t cpu,
		       const struct sampler_parse_options *opt, const struct sampler_callbacks *cb,
		       void *ctx, struct sampler_stats *stats)
{
	uint64_t chain[SAMPLER_MAX_CALLCHAIN], kernel_chain[SAMPLER_MAX_CALLCHAIN];
	struct parse_ctx pc = { cb, ctx, cpu, stats, chain, kernel_chain, { false, false } };
	uint8_t *scratch;
	int n;

	if (!data || !opt || !cb || !stats || size < 8 || (size & (size - 1)))
		return -EINVAL;
	pc.opt = *opt;
	scratch = malloc(SCRATCH_BYTES);
	if (!scratch)
		return -ENOMEM;
	n = ring_parse(&pc, data, size, tail, head, scratch);
	free(scratch);
	return n;
}

int sampler_parse(const void *data, size_t size, uint64_t tail, uint64_t head, uint32_t cpu,
		  const struct sampler_callbacks *cb, void *ctx, struct sampler_stats *stats)
{
	const struct sampler_parse_options opt = { .copy_stack = false };

	return sampler_parse_with(data, size, tail, head, cpu, &opt, cb, ctx, stats);
}

int sampler_parse_copy_stack(const void *data, size_t size, uint64_t tail, uint64_t head,
			     uint32_t cpu, const struct sampler_callbacks *cb, void *ctx,
			     struct sampler_stats *stats)
{
	const struct sampler_parse_options opt = { .copy_stack = true };

	return sampler_parse_with(data, size, tail, head, cpu, &opt, cb, ctx, stats);
}

int sampler_read(struct sampler *s, const struct sampler_callbacks *cb, void *ctx)
{
	struct parse_ctx pc = { cb, ctx, 0, NULL, NULL, NULL, { false, false } };
	int total = 0;
	size_t i;

	if (!s || !cb)
		return -EINVAL;
	pc.stats = &s->stats;
	pc.chain = s->chain;
	pc.kernel_chain = s->kernel_chain;
	pc.opt = s->parse;
	for (i = 0; i < s->n_rings; i++) {
		struct sampler_ring *r = &s->rings[i];
		/* acquire pairs with the kernel's smp_wmb() before it publishes data_head */
		uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = __atomic_load_n(&r->meta->data_tail, __ATOMIC_RELAXED);

		uint64_t lost_before = s->stats.lost;

		pc.cpu = r->cpu;
		total += ring_parse(&pc, r->data, r->size, tail, head, s->scratch);
		r->lost_told += s->stats.lost - lost_before;
		/* release: our reads of the records finish before the kernel reuses the space */
		__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
	}
	return total;
}

void sampler_report_untold_losses(struct sampler *s, const struct sampler_callbacks *cb,
				  void *ctx)
{
	struct timespec now;

	if (!s || s->no_lost_format)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	for (size_t i = 0; i < s->n_rings; i++) {
		struct sampler_ring *r = &s->rings[i];
		uint64_t counted = 0;

		for (size_t k = 0; k < s->n_fds; k++) {
			uint64_t v[2]; /* value, lost */

			if (s->fd_ring[k] == i && read(s->fds[k], v, sizeof(v)) == sizeof(v))
				counted += v[1];
		}
		if (counted <= r->lost_told)
			continue; /* told in full (inherited events' losses are only told) */
		s->stats.lost += counted - r->lost_told;
		if (cb && cb->lost)
			cb->lost(ctx, r->cpu, counted - r->lost_told,
				 (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
		r->lost_told = counted;
	}
}

void sampler_get_stats(const struct sampler *s, struct sampler_stats *out)
{
	*out = s->stats;
}

const char *sampler_warning(const struct sampler *s)
{
	return s->warning[0] ? s->warning : NULL;
}

bool sampler_has_kernel_callchain(const struct sampler *s)
{
	return s->parse.kernel_callchain;
}

/* ---- opening ------------------------------------------------------------- */

static void read_sysctl(const char *name, char *buf, size_t len)
{
	char path[128];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	if (n <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static void open_error(char *err, size_t errlen, int e, const struct sampler_config *cfg,
		       pid_t tid, int cpu)
{
	char who[48], hint[160] = "", val[32];

	if (tid == cfg->pid)
		snprintf(who, sizeof(who), "pid %d", (int)cfg->pid);
	else
		snprintf(who, sizeof(who), "pid %d tid %d", (int)cfg->pid, (int)tid);
	if (e == EACCES || e == EPERM) {
		read_sysctl("perf_event_paranoid", val, sizeof(val));
		snprintf(hint, sizeof(hint), "; perf_event_paranoid=%s", val);
	} else if (e == ESRCH) {
		snprintf(hint, sizeof(hint), "; no such process");
	} else if (e == EINVAL) {
		read_sysctl("perf_event_max_sample_rate", val, sizeof(val));
		snprintf(hint, sizeof(hint), "; freq %u Hz, perf_event_max_sample_rate=%s%s",
			 cfg->freq_hz, val, cfg->copy_stack ? ", user regs and stack copy" : "");
	} else if (e == ENOENT || e == EOPNOTSUPP || e == ENODEV) {
		snprintf(hint, sizeof(hint), "; cpu-clock events unavailable");
	} else if (e == EMFILE) {
		snprintf(hint, sizeof(hint), "; RLIMIT_NOFILE too low for threads x CPUs events");
	}
	snprintf(err, errlen, "perf_event_open(%s, cpu %d): %s%s", who, cpu, strerror(e), hint);
}

static void make_attr(const struct sampler_config *cfg, size_t ring_bytes,
		      struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = cfg->freq_hz;
	a->sample_type = SAMPLE_TYPE;
	if (cfg->copy_stack) {
		a->sample_type |= SAMPLE_TYPE_STACK;
		a->sample_regs_user = SAMPLER_REGS_MASK;
		a->sample_stack_user = cfg->stack_bytes ? cfg->stack_bytes
							: SAMPLER_DEFAULT_STACK_BYTES;
	}
	a->inherit = 1;
	a->disabled = 1;
	a->enable_on_exec = cfg->enable_on_exec;
	/* kernel samples need perf_event_paranoid <= 1 or CAP_PERFMON */
	a->exclude_kernel = !cfg->kernel_callchain;
	a->exclude_hv = 1;
	a->exclude_callchain_kernel = !cfg->kernel_callchain;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->mmap = 1;
	a->mmap2 = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->sample_id_all = 1;
	a->watermark = 1;
	a->wakeup_watermark = (uint32_t)(ring_bytes / 4);
}

/* Online CPUs from /sys (e.g. "0-3,6"), else 0 .. nprocs-1. Returns the count. */
static size_t online_cpus(int **out)
{
	long nprocs = sysconf(_SC_NPROCESSORS_CONF);
	size_t cap = nprocs > 0 ? (size_t)nprocs : 1, n = 0;
	char buf[1024], *p = buf, *end;
	int *cpus = malloc(cap * sizeof(*cpus));
	long a, b;
	FILE *f;

	if (!cpus)
		return 0;
	f = fopen("/sys/devices/system/cpu/online", "re");
	if (f && fgets(buf, sizeof(buf), f)) {
		while (*p && *p != '\n') {
			a = b = strtol(p, &end, 10);
			if (end == p)
				break;
			if (*end == '-')
				b = strtol(end + 1, &end, 10);
			for (; a <= b && n < cap; a++)
				cpus[n++] = (int)a;
			p = *end == ',' ? end + 1 : end;
		}
	}
	if (f)
		fclose(f);
	if (n == 0)
		for (; n < cap; n++)
			cpus[n] = (int)n;
	*out = cpus;
	return n;
}

/* The threads to open: the pid alone before exec, else every entry of /proc/PID/task. */
static size_t target_threads(const struct sampler_config *cfg, pid_t **out)
{
	size_t n = 0, cap = 16;
	pid_t *tids = malloc(cap * sizeof(*tids)), *t;
	struct dirent *de;
	char path[64];
	DIR *dir;

	if (!tids)
		return 0;
	tids[n++] = cfg->pid;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)cfg->pid);
	dir = cfg->enable_on_exec ? NULL : opendir(path);
	while (dir && (de = readdir(dir))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || tid == cfg->pid)
			continue;
		if (n == cap) {
			t = realloc(tids, 2 * cap * sizeof(*tids));
			if (!t)
				break;
			tids = t;
			cap *= 2;
		}
		tids[n++] = tid;
	}
	if (dir)
		closedir(dir);
	*out = tids;
	return n;
}

static int push_fd(struct sampler *s, int fd, const struct sampler_ring *r)
{
	if (s->n_fds == s->cap_fds) {
		size_t cap = s->cap_fds ? s->cap_fds * 2 : 16;
		int *v = realloc(s->fds, cap * sizeof(*v));
		uint32_t *w = v ? realloc(s->fd_ring, cap * sizeof(*w)) : NULL;

		if (v)
			s->fds = v;
		if (!w)
			return -ENOMEM;
		s->fd_ring = w;
		s->cap_fds = cap;
	}
	s->fd_ring[s->n_fds] = (uint32_t)(r - s->rings);
	s->fds[s->n_fds++] = fd;
	return 0;
}

/*
 * One event, with its own count of lost samples (PERF_FORMAT_LOST) where the
 * kernel has it; a kernel before 6.0 refuses the bit (EINVAL): then without.
 */
static int open_event(struct sampler *s, struct perf_event_attr *attr, pid_t tid, int cpu)
{
	int fd;

	if (!s->no_lost_format)
		attr->read_format |= PERF_FORMAT_LOST;
	fd = (int)syscall(SYS_perf_event_open, attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 && errno == EINVAL && !s->no_lost_format) {
		s->no_lost_format = true;
		attr->read_format &= ~(uint64_t)PERF_FORMAT_LOST;
		fd = (int)syscall(SYS_perf_event_open, attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	}
	return fd;
}

static int map_ring(struct sampler_ring *r, const struct sampler_config *cfg, size_t ring_bytes,
		    char *err, size_t errlen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char val[32];

	r->map_len = page + ring_bytes;
	r->base = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		int e = errno;

		r->base = NULL;
		read_sysctl("perf_event_mlock_kb", val, sizeof(val));
		snprintf(err, errlen, "mmap(pid %d, cpu %u, %zu KiB ring): %s; perf_event_mlock_kb=%s",
			 (int)cfg->pid, r->cpu, ring_bytes >> 10, strerror(e), val);
		return -e;
	}
	r->meta = r->base;
	r->data = (const uint8_t *)r->base + page;
	r->size = ring_bytes;
	/* kernels since 4.1 say where the data area is; trust them only if consistent */
	if (r->meta->data_size == ring_bytes && r->meta->data_offset == page)
		r->data = (const uint8_t *)r->base + r->meta->data_offset;
	return 0;
}

/* Opens the events of one CPU: the first owns the ring, the others write into it. */
static int open_cpu(struct sampler *s, struct sampler_ring *r, const struct sampler_config *cfg,
		    const pid_t *tids, size_t n_tids, size_t ring_bytes, char *err, size_t errlen)
{
	struct perf_event_attr attr;
	size_t i;
	int fd, e;

	make_attr(cfg, ring_bytes, &attr);
	for (i = 0; i < n_tids; i++) {
		fd = open_event(s, &attr, tids[i], (int)r->cpu);
		if (fd < 0 && errno == ESRCH && tids[i] != cfg->pid)
			continue; /* that thread exited since we listed it */
		if (fd < 0) {
			e = errno;
			open_error(err, errlen, e, cfg, tids[i], (int)r->cpu);
			return -e;
		}
		if (push_fd(s, fd, r) < 0) {
			close(fd);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		if (r->fd < 0) {
			r->fd = fd;
			e = map_ring(r, cfg, ring_bytes, err, errlen);
			if (e < 0)
				return e;
		} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) < 0) {
			e = errno;
			snprintf(err, errlen, "PERF_EVENT_IOC_SET_OUTPUT(pid %d tid %d, cpu %u): %s",
				 (int)cfg->pid, (int)tids[i], r->cpu, strerror(e));
			return -e;
		}
	}
	return 0;
}

static int check_config(const struct sampler_config *cfg, size_t *ring_bytes, char *err,
			size_t errlen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (cfg->pid <= 0 || cfg->freq_hz == 0) {
		snprintf(err, errlen, "sampler: bad config (pid %d, freq %u Hz)", (int)cfg->pid,
			 cfg->freq_hz);
		return -EINVAL;
	}
	if (cfg->ring_pages & (cfg->ring_pages - 1) || cfg->ring_pages > (1u << 20)) {
		snprintf(err, errlen, "sampler: ring_pages %zu is not a power of two <= 2^20",
			 cfg->ring_pages);
		return -EINVAL;
	}
	if (cfg->copy_stack &&
	    (cfg->stack_bytes % 8 || cfg->stack_bytes > SAMPLER_MAX_STACK_BYTES)) {
		snprintf(err, errlen, "sampler: stack_bytes %u is not a multiple of 8 <= %u",
			 cfg->stack_bytes, SAMPLER_MAX_STACK_BYTES);
		return -EINVAL;
	}
	*ring_bytes = cfg->ring_pages ? cfg->ring_pages * page
		      : cfg->copy_stack ? DEFAULT_STACK_RING_BYTES : DEFAULT_RING_BYTES;
	if (*ring_bytes < page)
		*ring_bytes = page;
	return 0;
}

static struct sampler *sampler_alloc(size_t n_cpus, const int *cpus)
{
	struct sampler *s = calloc(1, sizeof(*s));
	size_t i;

	if (!s)
		return NULL;
	s->rings = calloc(n_cpus, sizeof(*s->rings));
	s->ring_fds = calloc(n_cpus, sizeof(*s->ring_fds));
	s->scratch = malloc(SCRATCH_BYTES);
	if (!s->rings || !s->ring_fds || !s->scratch) {
		sampler_close(s);
		return NULL;
	}
	s->n_rings = n_cpus;
	for (i = 0; i < n_cpus; i++) {
		s->rings[i].fd = -1;
		s->rings[i].cpu = (uint32_t)cpus[i];
	}
	return s;
}

/* What one attempt at opening the events works with. */
struct open_plan {
	const int *cpus;
	size_t n_cpus;
	const pid_t *tids;
	size_t n_tids;
	size_t ring_bytes;
};

/* Opens every event of cfg; NULL with *e set (and err written) on failure. */
static struct sampler *open_events(const struct sampler_config *cfg, const struct open_plan *plan,
				   char *err, size_t errlen, int *e)
{
	struct sampler *s = sampler_alloc(plan->n_cpus, plan->cpus);
	size_t i;

	*e = -ENOMEM;
	if (!s) {
		snprintf(err, errlen, "sampler: out of memory");
		return NULL;
	}
	s->parse.copy_stack = cfg->copy_stack;
	s->parse.kernel_callchain = cfg->kernel_callchain;
	for (i = 0; i < plan->n_cpus; i++) {
		*e = open_cpu(s, &s->rings[i], cfg, plan->tids, plan->n_tids, plan->ring_bytes, err,
			      errlen);
		if (*e < 0) {
			sampler_close(s);
			return NULL;
		}
		s->ring_fds[i] = s->rings[i].fd;
	}
	return s;
}

/* Kernel frames refused: the same events for user space only, saying why. */
static struct sampler *open_user_only(const struct sampler_config *cfg,
				      const struct open_plan *plan, char *err, size_t errlen,
				      int *e)
{
	struct sampler_config user_only = *cfg;
	char why[256];
	struct sampler *s;

	snprintf(why, sizeof(why), "%s", err);
	user_only.kernel_callchain = false;
	s = open_events(&user_only, plan, err, errlen, e);
	if (s)
		snprintf(s->warning, sizeof(s->warning),
			 "kernel frames refused: %s; sampling user space only", why);
	return s;
}

struct sampler *sampler_open(const struct sampler_config *cfg, char *err, size_t errlen)
{
	struct open_plan plan = { 0 };
	struct sampler *s = NULL;
	int *cpus = NULL, e;
	pid_t *tids = NULL;

	e = check_config(cfg, &plan.ring_bytes, err, errlen);
	if (e < 0)
		goto out;
	e = -ENOMEM;
	snprintf(err, errlen, "sampler: out of memory");
	plan.n_cpus = online_cpus(&cpus);
	plan.n_tids = target_threads(cfg, &tids);
	plan.cpus = cpus;
	plan.tids = tids;
	if (!plan.n_cpus || !plan.n_tids)
		goto out;
	s = open_events(cfg, &plan, err, errlen, &e);
	if (!s && cfg->kernel_callchain && (e == -EACCES || e == -EPERM))
		s = open_user_only(cfg, &plan, err, errlen, &e);
	if (s) {
		s->cfg = *cfg;
		s->cfg.kernel_callchain = s->parse.kernel_callchain;
	}
out:
	free(cpus);
	free(tids);
	if (!s)
		errno = -e;
	return s;
}

size_t sampler_fds(const struct sampler *s, const int **fds)
{
	*fds = s->ring_fds;
	return s->n_rings;
}

/* pid's threads on one CPU, into its ring, counting at once; ESRCH for a thread gone. */
static int add_on_cpu(struct sampler *s, struct sampler_ring *r, const struct sampler_config *cfg,
		      const pid_t *tids, size_t n)
{
	struct perf_event_attr attr;

	make_attr(cfg, r->size, &attr);
	for (size_t i = 0; i < n && r->fd >= 0; i++) {
		int fd = open_event(s, &attr, tids[i], (int)r->cpu);

		if (fd < 0 && errno == ESRCH)
			continue;
		if (fd < 0)
			return -errno;
		if (push_fd(s, fd, r) < 0) {
			close(fd);
			return -ENOMEM;
		}
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) < 0 ||
		    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0)
			return -errno;
	}
	return 0;
}

int sampler_add_process(struct sampler *s, pid_t pid)
{
	struct sampler_config cfg = s->cfg;
	pid_t *tids = NULL;
	size_t n;
	int e = 0;

	cfg.pid = pid;
	cfg.enable_on_exec = false;
	n = target_threads(&cfg, &tids);
	for (size_t i = 0; i < s->n_rings && n && !e; i++)
		e = add_on_cpu(s, &s->rings[i], &cfg, tids, n);
	free(tids);
	return n ? e : -ENOMEM;
}

int sampler_enable(struct sampler *s)
{
	size_t i;

	for (i = 0; i < s->n_fds; i++)
		if (ioctl(s->fds[i], PERF_EVENT_IOC_ENABLE, 0) < 0)
			return -errno;
	return 0;
}

void sampler_close(struct sampler *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->n_rings; i++)
		if (s->rings[i].base)
			munmap(s->rings[i].base, s->rings[i].map_len);
	for (i = 0; i < s->n_fds; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s->fd_ring);
	free(s->rings);
	free(s->ring_fds);
	free(s->scratch);
	free(s);
}
