// SPDX-License-Identifier: MIT
/*
 * The ptrace harness of tests/integration/test_signal_steps.sh, started by
 * sigstep_target (never by hand) with the shared struct sigstep_ctl. It
 * seizes the target's worker thread, single-steps one probe per pass to
 * learn its instructions, then for each instruction in profiler code
 * (libprofagent.so, anonymous executable mappings = stubs, the patched first
 * bytes of ss_ functions) stops the worker exactly before it (a hardware
 * breakpoint counted to the right occurrence) and delivers SIGUSR1 there.
 * It names what broke by pass, step, rip and symbol+offset, retires broken
 * workers and carries on with the next one main starts. Never touches the
 * target's memory except to read it.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sigstep.h"

/* A hang, not a time limit: a visit takes well under a millisecond. */
#define WATCHDOG_SECONDS 30
/* Where a patched jump and its relocated neighbours lie in each ss_ function. */
#define PATCHED_ENTRY_BYTES 16
#define MAX_RESPAWNS 20000

static struct sigstep_ctl *ctl;

/* ---- where code lies, and its names ------------------------------------- */

struct map_entry {
	uintptr_t lo, hi, offset;
	char perms[8];
	char path[PATH_MAX];
};

struct sym {
	uintptr_t value;
	const char *name;
};

struct elf_file {
	char path[PATH_MAX];
	uintptr_t bias;
	struct sym *syms;
	size_t n;
};

/* One address the probe runs in profiler code, and what its visits found. */
struct rip_stat {
	uintptr_t rip;
	unsigned visits, failed, mask;
	char base[128]; /* "libprofagent.so profagent_exit_hook", "stub of ss_inner" */
	uintptr_t off;
};

struct step {
	uintptr_t rip, rsp;
	int counted; /* this instruction counted the ss_ call entered last */
};

struct visit {
	unsigned step, occurrence, stat;
	int cat;
	int inflight;           /* the ss_ call entered but not yet counted at this step, or -1 */
	unsigned inflight_step; /* where it was entered: rsp there is its return slot */
};

struct tracer {
	pid_t pid, tid;
	int tids_fd, go_fd; /* main sends each worker's tid; the worker waits for 'g' */
	struct map_entry *maps;
	size_t n_maps;
	struct elf_file files[16];
	size_t n_files;
	struct step *steps;
	size_t n_steps, cap_steps;
	uintptr_t *first_rips; /* the first learned pass, which every other must repeat */
	size_t n_first_rips;
	struct visit *visits;
	size_t n_visits;
	struct rip_stat *stats;
	size_t n_stats;
	unsigned *hash; /* rip -> stats index + 1, open addressing */
	size_t hash_cap;
	int from_pass, from_visit, verbose;
	char **skip, **only;
	size_t n_skip, n_only;
	int attached;      /* tid is seized */
	int at_begin;      /* the worker is stopped at its begin marker: it can be let go */
	uintptr_t begin_rsp;
	intptr_t rsp_delta; /* a respawned worker's stack against the learned one */
	int crash_sig;     /* the worker died of it: handed on when it is let go */
	char fatal_printed[32][128]; /* the symbols this pass has a FATAL line for */
	int n_fatal_printed;
};

static int maps_read(struct tracer *tr)
{
	char name[64], line[PATH_MAX + 128];
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", tr->pid);
	f = fopen(name, "r");
	if (!f)
		return -errno;
	tr->n_maps = 0;
	while (fgets(line, sizeof(line), f)) {
		struct map_entry *m;
		unsigned long lo, hi, off;
		int pos = 0;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &pos) < 4)
			continue;
		tr->maps = realloc(tr->maps, (tr->n_maps + 1) * sizeof(*tr->maps));
		m = &tr->maps[tr->n_maps++];
		*m = (struct map_entry){ .lo = lo, .hi = hi, .offset = off };
		memcpy(m->perms, perms, sizeof(m->perms));
		snprintf(m->path, sizeof(m->path), "%s", pos ? line + pos : "");
		m->path[strcspn(m->path, "\n")] = '\0';
	}
	fclose(f);
	return 0;
}

static const struct map_entry *maps_find(const struct tracer *tr, uintptr_t addr)
{
	for (size_t i = 0; i < tr->n_maps; i++)
		if (addr >= tr->maps[i].lo && addr < tr->maps[i].hi)
			return &tr->maps[i];
	return NULL;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* Function symbols of one mapped file (.symtab, else .dynsym); the file stays mapped. */
static struct elf_file *elf_file_get(struct tracer *tr, const struct map_entry *m)
{
	struct elf_file *ef;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const Elf64_Sym *s;
	const unsigned char *base;
	const char *strtab;
	struct stat st;
	int fd, pick = -1;
	size_t n;

	for (size_t i = 0; i < tr->n_files; i++)
		if (strcmp(tr->files[i].path, m->path) == 0)
			return &tr->files[i];
	if (tr->n_files == sizeof(tr->files) / sizeof(tr->files[0]))
		return NULL;
	ef = &tr->files[tr->n_files++];
	memset(ef, 0, sizeof(*ef));
	memcpy(ef->path, m->path, sizeof(ef->path));
	fd = open(m->path, O_RDONLY);
	if (fd < 0)
		return ef;
	base = fstat(fd, &st) == 0 ? mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (!base || base == MAP_FAILED || (size_t)st.st_size < sizeof(*eh))
		return ef;
	eh = (const Elf64_Ehdr *)base;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(*sh) > (size_t)st.st_size)
		return ef;
	sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	for (int i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && pick < 0))
			pick = i;
	if (pick < 0 || sh[pick].sh_link >= eh->e_shnum)
		return ef;
	s = (const Elf64_Sym *)(base + sh[pick].sh_offset);
	strtab = (const char *)base + sh[sh[pick].sh_link].sh_offset;
	n = sh[pick].sh_size / sizeof(*s);
	ef->syms = calloc(n ? n : 1, sizeof(*ef->syms));
	for (size_t i = 0; i < n; i++)
		if (ELF64_ST_TYPE(s[i].st_info) == STT_FUNC && s[i].st_value)
			ef->syms[ef->n++] = (struct sym){ s[i].st_value, strtab + s[i].st_name };
	qsort(ef->syms, ef->n, sizeof(*ef->syms), sym_cmp);
	if (eh->e_type == ET_DYN)
		for (size_t i = 0; i < tr->n_maps; i++)
			if (strcmp(tr->maps[i].path, m->path) == 0 && tr->maps[i].offset == 0) {
				ef->bias = tr->maps[i].lo;
				break;
			}
	return ef;
}

/* "libprofagent.so profagent_exit_hook" and the offset into it. */
static void symbolize(struct tracer *tr, uintptr_t addr, char *base, size_t len, uintptr_t *off)
{
	const struct map_entry *m = maps_find(tr, addr);
	const struct elf_file *ef = m && m->path[0] == '/' ? elf_file_get(tr, m) : NULL;
	size_t lo = 0, hi = ef ? ef->n : 0;

	if (!hi) { /* no symbols: the mapping, and the offset into it */
		snprintf(base, len, "[%.64s %s]", m && m->path[0] ? m->path : "anon",
			 m ? m->perms : "unmapped");
		*off = m ? addr - m->lo : addr;
		return;
	}
	while (lo < hi) { /* past the last symbol at or below addr */
		size_t mid = (lo + hi) / 2;

		if (ef->syms[mid].value <= addr - ef->bias)
			lo = mid + 1;
		else
			hi = mid;
	}
	*off = addr - ef->bias - (lo ? ef->syms[lo - 1].value : 0);
	snprintf(base, len, "%.60s%s%.60s", strrchr(m->path, '/') + 1, lo ? " " : "",
		 lo ? ef->syms[lo - 1].name : "");
}

static int is_agent_map(const struct map_entry *m)
{
	const char *slash = m ? strrchr(m->path, '/') : NULL;

	return slash && strncmp(slash + 1, "libprofagent.so", 15) == 0;
}

static int is_stub_map(const struct map_entry *m)
{
	return m && !m->path[0] && strchr(m->perms, 'x');
}

static uintptr_t probe_entry_address(int id)
{
	return ctl->entries[id];
}

/* Which ss_ function's patched first bytes rip lies in, or -1. */
static int probe_entry_index(uintptr_t rip)
{
	for (int i = 0; i < SS_COUNT; i++)
		if (rip - probe_entry_address(i) < PATCHED_ENTRY_BYTES)
			return i;
	return -1;
}

/* ---- ptrace plumbing ------------------------------------------------------ */

static volatile sig_atomic_t watchdog_fired;

static void on_alarm(int sig)
{
	(void)sig;
	watchdog_fired = 1;
}

struct stop {
	int gone; /* the thread exited or was killed: status says how */
	int status;
	int sig;  /* the signal of a signal-delivery-stop, 0 for other stops */
	struct user_regs_struct regs;
};

static int tracer_wait(struct tracer *tr, struct stop *s)
{
	memset(s, 0, sizeof(*s));
	for (;;) {
		pid_t r = waitpid(tr->tid, &s->status, __WALL);

		if (r == tr->tid)
			break;
		if (r < 0 && errno == EINTR && watchdog_fired)
			return -ETIMEDOUT;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
	ctl->stops++;
	if (WIFEXITED(s->status) || WIFSIGNALED(s->status)) {
		s->gone = 1;
		return 0;
	}
	if (WIFSTOPPED(s->status) && (s->status >> 16) == 0)
		s->sig = WSTOPSIG(s->status);
	return ptrace(PTRACE_GETREGS, tr->tid, NULL, &s->regs) ? -errno : 0;
}

static int tracer_resume(struct tracer *tr, int request, int sig)
{
	tr->at_begin = 0;
	return ptrace(request, tr->tid, NULL, (void *)(long)sig) ? -errno : 0;
}

static int hw_breakpoint_set(struct tracer *tr, uintptr_t addr)
{
	/* DR7 bit 0 enables DR0 for this thread; R/W0 = 00 (execute), LEN0 = 00 */
	if (ptrace(PTRACE_POKEUSER, tr->tid, offsetof(struct user, u_debugreg[0]), addr) ||
	    ptrace(PTRACE_POKEUSER, tr->tid, offsetof(struct user, u_debugreg[7]), 1))
		return -errno;
	return 0;
}

static int hw_breakpoint_clear(struct tracer *tr)
{
	long off = offsetof(struct user, u_debugreg[7]);

	return ptrace(PTRACE_POKEUSER, tr->tid, off, 0) ? -errno : 0;
}

static int at_marker(const struct stop *s, uintptr_t marker)
{
	return !s->gone && s->sig == SIGTRAP && s->regs.rip == marker + 1;
}

static void stop_describe(struct tracer *tr, const struct stop *s, char *buf, size_t len)
{
	char base[128];
	uintptr_t off;

	if (s->gone) {
		if (WIFSIGNALED(s->status))
			snprintf(buf, len, "the process was killed by %s",
				 strsignal(WTERMSIG(s->status)));
		else
			snprintf(buf, len, "the thread exited (status %d)", WEXITSTATUS(s->status));
		return;
	}
	symbolize(tr, s->regs.rip, base, sizeof(base), &off);
	snprintf(buf, len, "%s %s at rip 0x%llx (%s+0x%lx), rsp 0x%llx",
		 s->sig ? "signal" : "stop", s->sig ? strsignal(s->sig) : "event",
		 (unsigned long long)s->regs.rip, base, (unsigned long)off,
		 (unsigned long long)s->regs.rsp);
}

/* Continues until the given marker; SIGUSR1 raised inside handlers is handed on. */
static int run_to_marker(struct tracer *tr, int sig, uintptr_t marker, struct stop *s)
{
	int err = tracer_resume(tr, PTRACE_CONT, sig);

	while (!err) {
		err = tracer_wait(tr, s);
		if (err || s->gone)
			return err ? err : -ESRCH;
		if (at_marker(s, marker)) {
			tr->at_begin = marker == ctl->mark_begin;
			return 0;
		}
		if (s->sig != SIGUSR1)
			return -EPROTO;
		err = tracer_resume(tr, PTRACE_CONT, SIGUSR1);
	}
	return err;
}

/* ---- learning one probe ----------------------------------------------------- */

static unsigned stat_for(struct tracer *tr, uintptr_t rip, int *is_new)
{
	size_t h = (rip * 0x9e3779b97f4a7c15ull) >> 40;

	if (!tr->hash) {
		tr->hash_cap = 1 << 16;
		tr->hash = calloc(tr->hash_cap, sizeof(*tr->hash));
	}
	for (;; h++) {
		unsigned *slot = &tr->hash[h & (tr->hash_cap - 1)];

		if (!*slot) {
			tr->stats = realloc(tr->stats, (tr->n_stats + 1) * sizeof(*tr->stats));
			memset(&tr->stats[tr->n_stats], 0, sizeof(*tr->stats));
			tr->stats[tr->n_stats].rip = rip;
			*slot = ++tr->n_stats;
			*is_new = 1;
			return *slot - 1;
		}
		if (tr->stats[*slot - 1].rip == rip) {
			*is_new = 0;
			return *slot - 1;
		}
	}
}

/*
 * Which profiler category a step falls in, or -1 outside profiler code. Hook
 * code is put with the trampoline that last ran: whatever the hooks' helpers
 * are called, the enter path and the exit path stay apart.
 */
static int step_category(struct tracer *tr, uintptr_t rip, int *last_tramp)
{
	const struct map_entry *m = maps_find(tr, rip);
	char base[128];
	uintptr_t off;

	if (probe_entry_index(rip) >= 0)
		return CAT_OTHER;
	if (is_stub_map(m))
		return CAT_STUB;
	if (!is_agent_map(m) || !strchr(m->perms, 'x'))
		return -1;
	symbolize(tr, rip, base, sizeof(base), &off);
	if (strstr(base, "entry_trampoline")) {
		*last_tramp = CAT_ENTER;
		return CAT_TRAMP;
	}
	if (strstr(base, "exit_trampoline")) {
		*last_tramp = CAT_EXIT;
		return CAT_TRAMP;
	}
	return *last_tramp >= 0 ? *last_tramp : CAT_OTHER;
}

/* The target's count of calls to ss_ function id. */
static long calls_read(const struct tracer *tr, int id)
{
	return ptrace(PTRACE_PEEKDATA, tr->tid, (void *)(ctl->calls + id * sizeof(long)), NULL);
}

/*
 * The worker is stopped at the begin marker: single-step it to the end
 * marker. Between an ss_ function's entry and the instruction that counts
 * the call (in the function or, relocated, in its stub) the call is entered
 * but not counted: that instruction is found by watching its counter.
 */
static int learn_probe(struct tracer *tr, struct stop *s)
{
	int err = 0, inflight = -1;
	long before = 0;

	tr->n_steps = 0;
	tr->rsp_delta = 0;
	ctl->mode = MODE_LEARN;
	memset(s, 0, sizeof(*s)); /* the worker sits at the begin marker */
	if (ptrace(PTRACE_GETREGS, tr->tid, NULL, &s->regs))
		return -errno;
	while (!err) {
		struct step *st;
		int id = probe_entry_index(s->regs.rip);

		if (tr->n_steps == tr->cap_steps) {
			tr->cap_steps = tr->cap_steps ? 2 * tr->cap_steps : 1 << 16;
			tr->steps = realloc(tr->steps, tr->cap_steps * sizeof(*tr->steps));
		}
		st = &tr->steps[tr->n_steps++];
		*st = (struct step){ s->regs.rip, s->regs.rsp, 0 };
		if (id >= 0 && st->rip == probe_entry_address(id)) {
			inflight = id;
			before = calls_read(tr, id);
		}
		err = tracer_resume(tr, PTRACE_SINGLESTEP, 0);
		if (!err)
			err = tracer_wait(tr, s);
		ctl->singlesteps++;
		if (!err && (s->gone || s->sig != SIGTRAP))
			err = -EPROTO;
		if (!err && inflight >= 0 && calls_read(tr, inflight) != before) {
			st->counted = 1;
			inflight = -1;
		}
		if (!err && at_marker(s, ctl->mark_end))
			return 0;
	}
	return err;
}

static void stat_name(struct tracer *tr, struct rip_stat *st, int cat, uintptr_t stub_entry,
		      const char *stub_owner)
{
	if (cat == CAT_STUB && st->rip >= stub_entry && st->rip < stub_entry + STUB_SLOT_SIZE) {
		snprintf(st->base, sizeof(st->base), "stub of %s", stub_owner);
		st->off = st->rip - stub_entry;
	} else if (cat == CAT_STUB) {
		snprintf(st->base, sizeof(st->base), "stub region thunk");
		st->off = st->rip - maps_find(tr, st->rip)->lo;
	} else {
		symbolize(tr, st->rip, st->base, sizeof(st->base), &st->off);
	}
}

/* Profiler steps of the learned probe, each with the occurrence of its rip so far. */
static void plan_visits(struct tracer *tr, struct pass_stats *ps)
{
	int last_tramp = -1, inflight = -1;
	unsigned inflight_step = 0;
	uintptr_t stub_entry = 0;
	char stub_owner[128] = "?";

	free(tr->visits);
	tr->visits = calloc(tr->n_steps, sizeof(*tr->visits));
	tr->n_visits = 0;

	for (size_t k = 0; k < tr->n_steps; k++) {
		uintptr_t rip = tr->steps[k].rip;
		const struct map_entry *prev = k ? maps_find(tr, tr->steps[k - 1].rip) : NULL;
		int cat = step_category(tr, rip, &last_tramp), is_new, id = probe_entry_index(rip);
		struct rip_stat *st;
		struct visit *v;

		if (cat == CAT_STUB && prev && !is_stub_map(prev) && !is_agent_map(prev)) {
			char base[128];
			uintptr_t off;

			/*
			 * A patched jump landed here, or the function's ret on its
			 * landing (slot+5): this stub serves that function.
			 */
			stub_entry = rip & ~(uintptr_t)(STUB_SLOT_SIZE - 1);
			symbolize(tr, tr->steps[k - 1].rip, base, sizeof(base), &off);
			snprintf(stub_owner, sizeof(stub_owner), "%s",
				 strchr(base, ' ') ? strchr(base, ' ') + 1 : base);
		}
		if (cat >= 0) {
			v = &tr->visits[tr->n_visits++];
			*v = (struct visit){ .step = k, .cat = cat, .inflight = inflight,
					     .inflight_step = inflight_step };
			v->stat = stat_for(tr, rip, &is_new);
			st = &tr->stats[v->stat];
			v->occurrence = ++st->visits; /* for now; it counts visits later */
			if (is_new)
				stat_name(tr, st, cat, stub_entry, stub_owner);
			ps->cats[cat]++;
		}
		if (id >= 0 && rip == probe_entry_address(id)) {
			inflight = id;
			inflight_step = k;
		}
		if (tr->steps[k].counted)
			inflight = -1;
	}
	ps->planned = tr->n_visits;
	ps->steps = tr->n_steps;
	for (size_t i = 0; i < tr->n_stats; i++)
		tr->stats[i].visits = 0;
}

/* ---- visits and what they found --------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* "profagent_exit_hook+0x9b", "stub of ss_inner+0x5": what --skip takes */
static void rip_label(const struct rip_stat *st, char *buf, size_t len)
{
	const char *sp = strchr(st->base, ' ');

	snprintf(buf, len, "%s+0x%lx", strncmp(st->base, "stub", 4) && sp ? sp + 1 : st->base,
		 (unsigned long)st->off);
}

/* The ss_ function the probe entered last before step k, and how many it entered. */
static const char *last_ss_entered(const struct tracer *tr, size_t k, int *nth)
{
	int id = -1;

	*nth = 0;
	for (size_t i = 0; i <= k; i++) {
		int e = probe_entry_index(tr->steps[i].rip);

		if (e >= 0 && tr->steps[i].rip == probe_entry_address(e)) {
			id = e;
			(*nth)++;
		}
	}
	return id >= 0 ? ss_names[id] : "no ss_ function yet";
}

static void outcome_text(unsigned mask, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(out_words) / sizeof(out_words[0]) && n < len; i++)
		if (mask & (1u << i))
			n += snprintf(buf + n, len - n, "%s%s", n ? "; " : "", out_words[i]);
}

/* Counts a failed visit; the first fatal one per function and pass gets a line of its own. */
static void visit_failed(struct tracer *tr, int pass, size_t v, unsigned mask, const char *why)
{
	const struct visit *vi = &tr->visits[v];
	struct rip_stat *st = &tr->stats[vi->stat];
	char label[160];
	const char *in;
	int nth, i;

	st->failed++;
	st->mask |= mask;
	ctl->stats[pass].failed++;
	if (tr->verbose) {
		rip_label(st, label, sizeof(label));
		printf("visit pass %d %zu step %u rip 0x%lx %s: %s\n", pass, v + 1, vi->step,
		       (unsigned long)st->rip, label, why);
	}
	ctl->stats[pass].fatal++;
	for (i = 0; i < tr->n_fatal_printed; i++)
		if (strcmp(tr->fatal_printed[i], st->base) == 0)
			return;
	if (i == sizeof(tr->fatal_printed) / sizeof(tr->fatal_printed[0]))
		return;
	memcpy(tr->fatal_printed[tr->n_fatal_printed++], st->base, sizeof(st->base));
	rip_label(st, label, sizeof(label));
	in = last_ss_entered(tr, vi->step, &nth);
	printf("FATAL pass %d (%s) visit %zu/%zu step %u: signal before rip 0x%lx %s [%s], "
	       "in the probe's call #%d (%s): %s\n",
	       pass, pass_names[pass], v + 1, tr->n_visits, vi->step, (unsigned long)st->rip,
	       label, cat_names[vi->cat], nth, in, why);
}

enum { VISIT_OK, VISIT_RETIRE, VISIT_STOP, VISIT_AGAIN };
/*
 * How often one visit may find the probe on another path before that counts
 * as a failure. The agent's hooks take a slow path now and then whatever the
 * timing (a thread's ring moves to a new segment every few hundred probes),
 * so a learned occurrence can be missed once; the signal was not sent then,
 * and the visit is simply made again.
 */
#define VISIT_TRIES 3

/* For pass 4's handler: the call it may abandon between its entry and its count. */
static void inflight_publish(struct tracer *tr, const struct visit *vi)
{
	ctl->inflight = vi->inflight;
	if (vi->inflight < 0)
		return;
	ctl->inflight_slot = tr->steps[vi->inflight_step].rsp + tr->rsp_delta;
	ctl->inflight_calls = calls_read(tr, vi->inflight);
}

/*
 * Runs the worker from the begin marker to the occurrence-th time it is
 * about to execute rip and sends SIGUSR1 there, then on to whatever stops
 * it next: the end marker normally. Returns 0 or -errno with *s the stop.
 */
static int visit_inject(struct tracer *tr, const struct visit *vi, struct stop *s,
			unsigned *fail, char *why, size_t len)
{
	const struct step *want = &tr->steps[vi->step];
	unsigned hits = 0;
	int injected = 0;
	int err = hw_breakpoint_set(tr, want->rip);

	if (!err)
		err = tracer_resume(tr, PTRACE_CONT, 0);
	while (!err) {
		err = tracer_wait(tr, s);
		if (err || s->gone)
			return err ? err : -ESRCH;
		if (!injected && s->sig == SIGTRAP && s->regs.rip == want->rip) {
			if (++hits < vi->occurrence) {
				err = tracer_resume(tr, PTRACE_CONT, 0);
				continue;
			}
			err = hw_breakpoint_clear(tr);
			if (!err && s->regs.rsp != want->rsp + tr->rsp_delta) {
				/*
				 * No signal sent: the probe can finish, and the worker
				 * checks it as an unsignalled run (no handler run, and
				 * in pass 4 no siglongjmp either: sigstep_target.c).
				 */
				*fail = OUT_DIVERGED;
				ctl->mode = MODE_LEARN;
				snprintf(why, len, "harness: rsp 0x%llx there, learned 0x%lx",
					 (unsigned long long)s->regs.rsp,
					 (unsigned long)(want->rsp + tr->rsp_delta));
				return run_to_marker(tr, 0, ctl->mark_end, s);
			}
			injected = 1;
			if (!err)
				inflight_publish(tr, vi);
			if (!err)
				err = tracer_resume(tr, PTRACE_CONT, SIGUSR1);
		} else if (injected && s->sig == SIGUSR1) { /* raised by the nested handler */
			err = tracer_resume(tr, PTRACE_CONT, SIGUSR1);
		} else {
			break; /* a marker, or a crash */
		}
	}
	if (!err && !injected) {
		*fail = OUT_DIVERGED;
		ctl->mode = MODE_LEARN; /* stopped before its checks: see above */
		snprintf(why, len, "harness: the probe ran the instruction %u times, not %u", hits,
			 vi->occurrence);
		err = hw_breakpoint_clear(tr);
	}
	return err;
}

/*
 * One visit, from the begin marker back to it (after the worker's own
 * checks). VISIT_RETIRE: the worker thread is broken but stopped where it
 * can be let go (at the begin marker, or with tr->crash_sig to die of);
 * VISIT_STOP: no way on; VISIT_AGAIN: the probe took another path, no signal
 * was sent, and the worker passed its checks (but the handler's, which did
 * not run) and is back at its loop.
 */
static int visit_one(struct tracer *tr, int pass, size_t v)
{
	const struct visit *vi = &tr->visits[v];
	uintptr_t begin_rsp = tr->steps[0].rsp + tr->rsp_delta;
	unsigned fail = 0;
	struct stop s;
	char why[600] = "", desc[400];
	int err;

	ctl->mode = MODE_VISIT;
	ctl->pass = pass;
	ctl->inflight = -1;
	watchdog_fired = 0;
	alarm(WATCHDOG_SECONDS);
	err = visit_inject(tr, vi, &s, &fail, why, sizeof(why));
	if (!err && at_marker(&s, ctl->mark_end))
		err = run_to_marker(tr, 0, ctl->mark_begin, &s); /* the worker's checks */
	alarm(0);
	if ((!err || err == -EPROTO) && !s.gone && s.sig && !at_marker(&s, ctl->mark_begin)) {
		stop_describe(tr, &s, desc, sizeof(desc));
		snprintf(why, sizeof(why), "the worker crashed: %s", desc);
		fail = OUT_CRASH;
		tr->crash_sig = s.sig; /* it dies of it once let go */
		err = 0;
	} else if (!err && at_marker(&s, ctl->mark_begin)) {
		tr->at_begin = 1; /* maybe without passing the end marker: see the rsp */
		/* its handler did not run: no signal was sent; everything else must hold */
		if (fail == OUT_DIVERGED && !(ctl->outcome & ~OUT_HANDLER) &&
		    s.regs.rsp == begin_rsp)
			return VISIT_AGAIN;
		if (!fail && s.regs.rsp != begin_rsp) {
			/* a wrong return took it back to its loop: its checks mean nothing */
			fail = OUT_MOVED;
			snprintf(why, sizeof(why),
				 "the worker came back to its loop with rsp 0x%llx, not 0x%lx",
				 (unsigned long long)s.regs.rsp, (unsigned long)begin_rsp);
		}
		if (!fail) {
			fail = ctl->outcome;
			snprintf(why, sizeof(why), "%s", ctl->detail);
		}
	} else if (!err) {
		err = -EPROTO;
	}
	if (err) {
		if (err == -ETIMEDOUT)
			snprintf(desc, sizeof(desc), "the worker hangs (no stop in %d s)",
				 WATCHDOG_SECONDS);
		else
			stop_describe(tr, &s, desc, sizeof(desc));
		visit_failed(tr, pass, v, OUT_CRASH, desc);
		return VISIT_STOP;
	}
	tr->stats[vi->stat].visits++;
	if (fail)
		visit_failed(tr, pass, v, fail, why);
	return fail ? VISIT_RETIRE : VISIT_OK;
}

static int stat_addr_cmp(const void *a, const void *b)
{
	const struct rip_stat *x = *(struct rip_stat *const *)a, *y = *(struct rip_stat *const *)b;

	return x->rip < y->rip ? -1 : x->rip > y->rip;
}

/* Failing instructions of this pass, as runs of consecutive addresses within one symbol. */
static void report_windows(struct tracer *tr, int pass)
{
	struct rip_stat **sorted = calloc(tr->n_stats + 1, sizeof(*sorted));
	size_t n = 0;
	char words[300];

	for (size_t i = 0; i < tr->n_stats; i++)
		if (tr->stats[i].visits)
			sorted[n++] = &tr->stats[i];
	qsort(sorted, n, sizeof(*sorted), stat_addr_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		unsigned visits = 0, failed = 0;

		for (j = i; j < n && sorted[j]->failed && sorted[j]->mask == sorted[i]->mask &&
			    strcmp(sorted[j]->base, sorted[i]->base) == 0;
		     j++) {
			visits += sorted[j]->visits;
			failed += sorted[j]->failed;
		}
		if (j == i) {
			j++;
			continue;
		}
		outcome_text(sorted[i]->mask, words, sizeof(words));
		printf("FAIL pass %d (%s): %s+0x%lx..+0x%lx (%zu instructions, %u of %u visits): "
		       "%s\n",
		       pass, pass_names[pass], sorted[i]->base, (unsigned long)sorted[i]->off,
		       (unsigned long)sorted[j - 1]->off, j - i, failed, visits, words);
		ctl->windows++;
	}
	for (size_t i = 0; i < tr->n_stats; i++)
		tr->stats[i].visits = tr->stats[i].failed = tr->stats[i].mask = 0;
	free(sorted);
}

/* --skip names exact instructions; --only keeps those whose name contains a word given. */
static int skipped(const struct tracer *tr, const struct rip_stat *st)
{
	char label[160];
	int kept = !tr->n_only;

	rip_label(st, label, sizeof(label));
	for (size_t i = 0; i < tr->n_skip; i++)
		if (strcmp(tr->skip[i], label) == 0)
			return 1;
	for (size_t i = 0; i < tr->n_only && !kept; i++)
		kept = strstr(st->base, tr->only[i]) != NULL;
	return !kept;
}

static int list_add(char ***list, size_t *n, char *arg)
{
	for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ",")) {
		*list = realloc(*list, (*n + 1) * sizeof(**list));
		if (!*list)
			return -1;
		(*list)[(*n)++] = tok;
	}
	return 0;
}

/* Seizes the worker main has just warmed up and lets it go to its begin marker. */
static int worker_attach(struct tracer *tr)
{
	struct stop s;
	pid_t tid = 0;
	int err;

	if (read(tr->tids_fd, &tid, sizeof(tid)) != sizeof(tid) || tid <= 0)
		return -ECHILD;
	tr->tid = tid;
	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)PTRACE_O_EXITKILL)) {
		err = -errno;
		ctl->skip = 1;
		snprintf(ctl->skip_reason, sizeof(ctl->skip_reason),
			 "cannot ptrace the worker thread: %s", strerror(-err));
		return write(tr->go_fd, "s", 1) == 1 ? err : -EIO;
	}
	tr->attached = 1;
	if (write(tr->go_fd, "g", 1) != 1)
		return -EIO;
	alarm(WATCHDOG_SECONDS);
	err = tracer_wait(tr, &s);
	alarm(0);
	if (err || !at_marker(&s, ctl->mark_begin)) {
		printf("FATAL harness: the worker did not reach its first probe\n");
		return err ? err : -EPROTO;
	}
	tr->at_begin = 1;
	tr->begin_rsp = s.regs.rsp;
	return 0;
}

/* Lets the worker go, to its end (the crash it had, or a clean return). */
static int worker_release(struct tracer *tr, int mode)
{
	int sig = tr->crash_sig;

	tr->crash_sig = 0;
	if (!tr->attached)
		return 0;
	tr->attached = 0;
	if (!sig && !tr->at_begin) {
		kill(tr->pid, SIGKILL); /* stopped mid-probe: nothing to go on from */
		return -EPROTO;
	}
	ctl->mode = mode;
	return ptrace(PTRACE_DETACH, tr->tid, NULL, (void *)(long)sig) ? -errno : 0;
}

/* The pass's handler installed and run once, outside profiler code: from begin to begin. */
static int pass_setup_run(struct tracer *tr, int pass)
{
	struct stop s;
	int err;

	ctl->mode = MODE_SETUP;
	ctl->pass = pass;
	ctl->inflight = -1;
	alarm(WATCHDOG_SECONDS);
	err = run_to_marker(tr, 0, ctl->mark_end, &s);
	if (!err)
		err = run_to_marker(tr, 0, ctl->mark_begin, &s);
	alarm(0);
	if (!err && ctl->outcome) {
		printf("FATAL pass %d (%s): the handler alone, outside profiler code: %s\n", pass,
		       pass_names[pass], ctl->detail);
		return -EPROTO;
	}
	if (err) {
		char why[400];

		stop_describe(tr, &s, why, sizeof(why));
		printf("FATAL pass %d (%s): harness: running the handler alone: %s\n", pass,
		       pass_names[pass], why);
	}
	return err;
}

/* A broken worker retires; main starts a fresh one, which takes over the learned probe. */
static int worker_replace(struct tracer *tr, int pass)
{
	int again = ctl->respawns < MAX_RESPAWNS;
	int err;

	ctl->respawn = again;
	err = worker_release(tr, MODE_RETIRE);
	if (err || !again) {
		printf("FATAL pass %d (%s): harness: cannot retire the broken worker: %s\n", pass,
		       pass_names[pass], err ? strerror(-err) : "too many retired already");
		return -1;
	}
	ctl->respawns++;
	err = worker_attach(tr);
	if (err) {
		printf("FATAL pass %d (%s): harness: no fresh worker to go on with: %s\n", pass,
		       pass_names[pass], strerror(-err));
		return -1;
	}
	if (pass_setup_run(tr, pass))
		return -1;
	tr->rsp_delta = (intptr_t)(tr->begin_rsp - tr->steps[0].rsp);
	return 0;
}

/* Learns the probe for this pass; it must be the first pass's, instruction for instruction. */
static int pass_learn(struct tracer *tr, int pass)
{
	struct stop s;
	int err;

	alarm(WATCHDOG_SECONDS * 4);
	err = learn_probe(tr, &s);
	if (!err)
		err = run_to_marker(tr, 0, ctl->mark_begin, &s);
	alarm(0);
	if (err) {
		char why[400];

		stop_describe(tr, &s, why, sizeof(why));
		printf("FATAL pass %d (%s): harness: learning the probe: %s\n", pass,
		       pass_names[pass], why);
		return err;
	}
	if (ctl->outcome) {
		printf("FATAL pass %d (%s): the probe without a signal: %s\n", pass,
		       pass_names[pass], ctl->detail);
		return -EPROTO;
	}
	if (!tr->first_rips) {
		tr->first_rips = malloc(tr->n_steps * sizeof(*tr->first_rips));
		for (size_t k = 0; k < tr->n_steps; k++)
			tr->first_rips[k] = tr->steps[k].rip;
		tr->n_first_rips = tr->n_steps;
		return 0;
	}
	for (size_t k = 0; k < tr->n_steps && tr->n_steps == tr->n_first_rips; k++)
		if (tr->steps[k].rip != tr->first_rips[k])
			goto differs;
	if (tr->n_steps == tr->n_first_rips)
		return 0;
differs:
	printf("FATAL pass %d (%s): harness: the probe ran another path than in the first pass "
	       "(%zu instructions, then %zu)\n",
	       pass, pass_names[pass], tr->n_first_rips, tr->n_steps);
	return -EPROTO;
}

/* One pass, from the begin marker back to it. Returns non-zero when the tracer must stop. */
static int run_pass(struct tracer *tr, int pass)
{
	struct pass_stats *ps = &ctl->stats[pass];
	double t0 = now_s();

	tr->n_fatal_printed = 0;
	if (pass_setup_run(tr, pass) || pass_learn(tr, pass) || maps_read(tr))
		return -1;
	plan_visits(tr, ps);
	ctl->learn_s += now_s() - t0;
	t0 = now_s();
	for (size_t v = 0; v < tr->n_visits; v++) {
		int r;

		if ((pass == tr->from_pass && (int)v < tr->from_visit) ||
		    skipped(tr, &tr->stats[tr->visits[v].stat])) {
			ps->skipped++;
			continue;
		}
		r = visit_one(tr, pass, v);
		for (int tries = 1; r == VISIT_AGAIN; tries++) {
			ctl->visits_repeated++;
			r = tries < VISIT_TRIES ? visit_one(tr, pass, v) : VISIT_RETIRE;
			if (r == VISIT_RETIRE && tries == VISIT_TRIES)
				visit_failed(tr, pass, v, OUT_DIVERGED,
					     "harness: another path on every try");
		}
		ps->visited++;
		if (r == VISIT_STOP || (r == VISIT_RETIRE && worker_replace(tr, pass))) {
			ctl->visit_s += now_s() - t0;
			report_windows(tr, pass);
			return -1;
		}
	}
	ctl->visit_s += now_s() - t0;
	ps->complete = 1;
	report_windows(tr, pass);
	return 0;
}

static int tracer_main(struct tracer *tr)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: waitpid returns */
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGALRM, &sa, NULL);
	err = worker_attach(tr);
	if (err)
		return ctl->skip ? 0 : 1;
	if (maps_read(tr))
		return 1;
	for (int pass = tr->from_pass; pass <= N_PASSES; pass++)
		if (run_pass(tr, pass)) {
			ctl->stopped = 1;
			break;
		}
	ctl->respawn = 0;
	return worker_release(tr, MODE_DONE) ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------ */

/* argv: CTL_FD TIDS_FD GO_FD, then the options the target was given */
static int parse_args(int argc, char **argv, struct tracer *tr, int *ctl_fd)
{
	tr->from_pass = 1;
	if (argc < 4 || sscanf(argv[1], "%d", ctl_fd) != 1 ||
	    sscanf(argv[2], "%d", &tr->tids_fd) != 1 || sscanf(argv[3], "%d", &tr->go_fd) != 1)
		return -1;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%d:%d", &tr->from_pass, &tr->from_visit) != 2 ||
			    tr->from_pass < 1 || tr->from_pass > N_PASSES || tr->from_visit < 1)
				return -1;
			tr->from_visit--; /* visits are numbered from 1 in the reports */
		} else if (strcmp(argv[i], "--verbose") == 0) {
			tr->verbose = 1;
		} else if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc) {
			if (list_add(&tr->skip, &tr->n_skip, argv[++i]))
				return -1;
		} else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
			if (list_add(&tr->only, &tr->n_only, argv[++i]))
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct tracer tr;
	int ctl_fd;

	if (parse_args(argc, argv, &tr, &ctl_fd)) {
		fprintf(stderr, "usage: sigstep_target [--verbose] [--from PASS:VISIT] "
				"[--skip SYMBOL+0xOFF,...] [--only WORD,...]\n");
		return 2;
	}
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, ctl_fd, 0);
	if (ctl == MAP_FAILED || ctl->size != sizeof(*ctl)) {
		fprintf(stderr, "sigstep_tracer: not the state of this build's sigstep_target\n");
		return 2;
	}
	tr.pid = ctl->pid;
	return tracer_main(&tr);
}
