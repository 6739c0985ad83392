// SPDX-License-Identifier: MIT
/*
 * DWARF unwinder of copied user stacks over libdwfl. Owns one Dwfl per target
 * process: its modules come from the mappings this file tracks, its thread
 * state from callbacks that serve only the sample being unwound. Never reads
 * the live process except the vdso image, and never trusts a register or a
 * stack byte: memory outside the copy ends the walk, and every walk is bounded
 * by the caller's max and by SP strictly increasing from frame to frame.
 * The target's ELF files are read with ELF_C_READ, never mmapped (a file
 * truncated underneath cannot SIGBUS the daemon), from descriptors opened
 * when their mapping was added, shared with the session's other processes
 * (daemon/sampling/unwind_files.h).
 */
#include "daemon/sampling/dwarf_unwind.h"

#include <asm/perf_regs.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/proc_maps_line.h"
#include "daemon/sampling/unwind_files.h"
#include "daemon/symbols/debug_file.h"

#define DWARF_NREGS 17        /* x86-64 DWARF 0-15 (rax .. r15), 16 = return address (rip) */
#define DWARF_REG_SP 7
#define MIN_USER_PC 4096      /* a caller below the first page ends the chain (as in sampler.c) */
#define PAGE_MASK_4K 0xfffull

/* perf's PERF_REG_X86_* index of each x86-64 DWARF register number. */
static const uint8_t dwarf_to_perf[DWARF_NREGS] = {
	PERF_REG_X86_AX,  PERF_REG_X86_DX,  PERF_REG_X86_CX,  PERF_REG_X86_BX,
	PERF_REG_X86_SI,  PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,
	PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10, PERF_REG_X86_R11,
	PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15,
	PERF_REG_X86_IP,
};

/* One ELF image of the target, as reported to libdwfl (its Dwfl_Module's userdata). */
struct module {
	char *path;             /* as the target maps it */
	struct unwind_file *file; /* opened with the mapping; NULL for the vdso */
	uint64_t low, high;     /* the image's addresses in the target */
	uint64_t bias;
	Dwfl_Module *dwfl_mod;  /* in the current Dwfl, or NULL */
};

/* The unwind in progress: what the thread callbacks serve. */
struct sample_state {
	const uint64_t *regs;
	uint64_t regs_mask;
	uint64_t sp;
	const uint8_t *stack;
	size_t stack_size;
	uint64_t *pcs;
	size_t max, n;
	uint64_t last_sp;
	const struct dwarf_memory_fix *fix; /* NULL: the copy as it is */
};

struct dwarf_unwinder {
	pid_t pid;
	Dwfl *dwfl;             /* NULL until the first (re)build */
	bool rebuild;           /* a module was dropped: build a new Dwfl before unwinding */
	struct unwind_files *shared; /* the session's files (NULL: this process's alone) */
	Elf *arch;              /* a bare x86-64 ELF header: names the architecture */
	Elf64_Ehdr arch_ehdr;   /* the bytes arch reads; must outlive every Dwfl */
	struct module **mods;   /* each allocated alone: libdwfl points at them */
	size_t n_mods, cap_mods;
	struct sample_state cur;
	struct dwarf_unwind_stats stats;
};

/* ---- libdwfl callbacks ------------------------------------------------------ */

static int open_regular(const char *file);

/* Whether the ELF file at fd has a .debug_frame and, given one, the build id (want, len). */
static bool frame_file_fits(int fd, const unsigned char *want, int len)
{
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	bool found = false;
	const void *id;
	size_t shstrndx;
	GElf_Shdr sh;

	if (!e || elf_getshdrstrndx(e, &shstrndx) < 0 ||
	    (len > 0 && (dwelf_elf_gnu_build_id(e, &id) != len || memcmp(id, want, (size_t)len))))
		goto out;
	while (!found && (scn = elf_nextscn(e, scn))) {
		const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;

		found = name && (strcmp(name, ".debug_frame") == 0 ||
				 strcmp(name, ".zdebug_frame") == 0);
	}
out:
	elf_end(e);
	return found;
}

/* path opened if it is a debug file with a .debug_frame for the build id; else -1. */
static int try_frame_file(const char *path, const unsigned char *id, int id_len, char **name)
{
	int fd = open_regular(path);

	if (fd < 0)
		return -1;
	if (!frame_file_fits(fd, id, id_len) || !(*name = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * libdwfl asks for a module's debug file only for its .debug_frame (the
 * unwinder needs nothing else of it; symbols are daemon/symbols'), when
 * .eh_frame did not unwind a frame: in every process, its first frames in
 * ld.so. Its standard search opens the file and keeps it, and libdw then
 * decompresses every .debug_* section: ~10 ms a process for ld.so, though
 * Debian's debug files have no .debug_frame. So the search is ours and
 * offers only a file with one: /usr/lib/debug/.build-id/xx/yyyy.debug, then
 * the debuglink's DIR/NAME, DIR/.debug/NAME, /usr/lib/debug/DIR/NAME, whose
 * build id must be the module's. With DEBUGINFOD_URLS, libdwfl's search
 * with downloads (never by default: it would download from the sampling path).
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  GElf_Addr base, const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	struct module *m = *userdata;
	const unsigned char *id;
	char path[PATH_MAX];
	GElf_Addr id_at;
	int len, fd = -1;

	if (urls && *urls)
		return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
						    debuglink_file, debuglink_crc,
						    debuginfo_file_name);
	if (m && m->file && m->file->no_debug_file)
		return -1; /* searched for another process of the session */
	len = dwfl_module_build_id(mod, &id, &id_at);
	if (len < 2)
		return -1; /* no build id to check a debug file against */
	if (debug_file_build_id_path(path, sizeof(path), NULL, id, (size_t)len) == 0)
		fd = try_frame_file(path, id, len, debuginfo_file_name);
	for (unsigned int i = 0; fd < 0 && file_name && debuglink_file &&
				 !strchr(debuglink_file, '/') && i < DEBUG_FILE_DEBUGLINK_PLACES; i++)
		if (debug_file_debuglink_path(path, sizeof(path), i, NULL, file_name,
					      debuglink_file) == 0)
			fd = try_frame_file(path, id, len, debuginfo_file_name);
	if (fd < 0 && m && m->file)
		m->file->no_debug_file = true;
	return fd;
}

static bool is_vdso(const struct module *m)
{
	return m->file == NULL;
}

/* Opens a regular file without blocking on FIFOs or devices; returns fd or -errno. */
static int open_regular(const char *file)
{
	struct stat st;
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOEXEC;
	}
	return fd;
}

/*
 * libdwfl asks for a module's ELF the first time a walk reaches it. It gets
 * the file opened with the mapping (the file as it was then, whatever the
 * session's processes did since), through its one libelf handle: no
 * descriptor for libdwfl to close. The vdso is read from /proc/PID/mem. A
 * module we dropped has no userdata.
 */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct module *m = *userdata;

	if (!m)
		return -1;
	if (is_vdso(m))
		return dwfl_linux_proc_find_elf(mod, userdata, modname, base, file_name, elfp);
	*elfp = unwind_file_elf(m->file);
	if (!*elfp)
		return -1;
	/* the name steers the .gnu_debuglink search: /usr/lib/debug/DIR, not .../proc/PID/root */
	*file_name = strdup(m->path);
	return -1;
}

static char *default_debuginfo_path; /* NULL: libdwfl's default search path */

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.debuginfo_path = &default_debuginfo_path,
};

/* One thread: the sample's. Its state comes from struct sample_state. */
static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct dwarf_unwinder *u = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return u->pid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

/* Memory is the stack copy, and nothing else. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	const struct sample_state *c = &((struct dwarf_unwinder *)arg)->cur;

	(void)dwfl;
	if (c->stack_size < sizeof(*result) || addr < c->sp ||
	    addr - c->sp > c->stack_size - sizeof(*result))
		return false;
	memcpy(result, c->stack + (addr - c->sp), sizeof(*result));
	if (c->fix) {
		uint64_t v = *result;

		c->fix->fix(c->fix->ctx, addr, &v);
		*result = v;
	}
	return true;
}

/* perf order to DWARF order; registers the sample lacks stay unknown to libdwfl. */
static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct sample_state *c = &((struct dwarf_unwinder *)thread_arg)->cur;
	Dwarf_Word v;
	int i;

	for (i = 0; i < DWARF_NREGS; i++) {
		if (!(c->regs_mask & (1ull << dwarf_to_perf[i])))
			continue;
		v = c->regs[dwarf_to_perf[i]];
		if (!dwfl_thread_state_registers(thread, i, 1, &v))
			return false;
	}
	dwfl_thread_state_register_pc(thread, c->regs[PERF_REG_X86_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- modules ----------------------------------------------------------------- */

/* Reports m to u->dwfl (inside dwfl_report_begin*() .. dwfl_report_end()). */
static bool report_module(struct dwarf_unwinder *u, struct module *m)
{
	char name[48];
	void **userdata;

	/* dwfl_linux_proc_find_elf reads "[vdso: PID]" from /proc/PID/mem */
	snprintf(name, sizeof(name), "[vdso: %d]", (int)u->pid);
	m->dwfl_mod = dwfl_report_module(u->dwfl, is_vdso(m) ? name : m->path, m->low, m->high);
	if (!m->dwfl_mod)
		return false;
	/* libdwfl takes the bias as low - (first PT_LOAD's p_vaddr & -p_align): m->bias */
	dwfl_module_info(m->dwfl_mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = m;
	return true;
}

/* The target's file: /proc/PID/root/PATH, PATH, then /proc/PID/map_files/START-END. */
static int open_target_file(pid_t pid, const char *path, uint64_t start, uint64_t end,
			    char *file, size_t len)
{
	int fd = -ENOENT, mapped;

	if (path[0] == '/') {
		snprintf(file, len, "/proc/%d/root%s", (int)pid, path);
		fd = open_regular(file);
		if (fd >= 0)
			return fd;
		snprintf(file, len, "%s", path);
		fd = open_regular(file);
		if (fd >= 0)
			return fd;
	}
	snprintf(file, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
	mapped = open_regular(file);
	/* a failing path reports its own error rather than map_files' */
	return mapped >= 0 || path[0] != '/' ? mapped : fd;
}

/*
 * Where the file mapped at start from file offset pgoff lies: its load bias
 * (through the PT_LOAD holding pgoff, else the first one; 0 for ET_EXEC) and
 * its image [low, high), computed as libdwfl does.
 */
static void elf_layout(const struct unwind_file *f, uint64_t start, uint64_t pgoff,
		       struct module *m)
{
	uint64_t vlow = 0, vhigh = 0, bias = 0, page_off;
	bool found = false, contains;

	for (size_t i = 0; i < f->n_loads; i++) {
		const struct unwind_load *ph = &f->loads[i];

		if (i == 0)
			vlow = ph->align > 1 ? ph->vaddr & -ph->align : ph->vaddr;
		page_off = ph->offset & ~PAGE_MASK_4K;
		contains = pgoff >= page_off &&
			   pgoff - page_off < ph->offset - page_off + ph->filesz;
		if (i == 0 || (!found && contains)) {
			bias = start - pgoff - (ph->vaddr - ph->offset);
			found = contains; /* the first PT_LOAD is only the fallback */
		}
		if (ph->vaddr + ph->memsz > vhigh)
			vhigh = ph->vaddr + ph->memsz;
	}
	m->bias = f->is_exec ? 0 : bias;
	m->low = m->bias + vlow;
	m->high = m->bias + vhigh;
}

static void module_free(struct module *m)
{
	void **userdata;

	if (!m)
		return;
	if (m->dwfl_mod) { /* the Dwfl outlives m until the rebuild: make it forget m */
		dwfl_module_info(m->dwfl_mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
		*userdata = NULL;
	}
	unwind_file_put(m->file);
	free(m->path);
	free(m);
}

/* Forgets the modules overlapping [low, high): the Dwfl holding them must be rebuilt. */
static void drop_overlapping(struct dwarf_unwinder *u, uint64_t low, uint64_t high)
{
	size_t i, k = 0;

	for (i = 0; i < u->n_mods; i++) {
		if (u->mods[i]->low < high && low < u->mods[i]->high) {
			module_free(u->mods[i]);
			u->rebuild = true;
			continue;
		}
		u->mods[k++] = u->mods[i];
	}
	u->n_mods = k;
}

static bool have_module(const struct dwarf_unwinder *u, const struct module *m)
{
	const struct module *o;
	size_t i;

	for (i = 0; i < u->n_mods; i++) {
		o = u->mods[i];
		if (o->low == m->low && o->high == m->high && o->bias == m->bias &&
		    strcmp(o->path, m->path) == 0)
			return true;
	}
	return false;
}

/* Takes m (freed on failure). */
static int push_module(struct dwarf_unwinder *u, struct module *m)
{
	struct module **v;

	if (u->n_mods == u->cap_mods) {
		size_t cap = u->cap_mods ? 2 * u->cap_mods : 32;

		v = realloc(u->mods, cap * sizeof(*v));
		if (!v) {
			module_free(m);
			return -ENOMEM;
		}
		u->mods = v;
		u->cap_mods = cap;
	}
	u->mods[u->n_mods++] = m;
	return 0;
}

/* A module for path, taking a reference to file (NULL for the vdso) whatever happens. */
static struct module *module_new(const char *path, struct unwind_file *file)
{
	struct module *m = calloc(1, sizeof(*m));

	if (!m) {
		unwind_file_put(file);
		return NULL;
	}
	m->file = file;
	m->path = strdup(path);
	if (!m->path) {
		module_free(m);
		return NULL;
	}
	return m;
}

/* Ends the Dwfl, and with it every module's Dwfl_Module. */
static void end_dwfl(struct dwarf_unwinder *u)
{
	size_t i;

	if (u->dwfl)
		dwfl_end(u->dwfl);
	u->dwfl = NULL;
	for (i = 0; i < u->n_mods; i++)
		u->mods[i]->dwfl_mod = NULL;
}

/*
 * A fresh Dwfl with every module: the only way to take a module out of
 * libdwfl while keeping the others. Their files are opened again lazily.
 */
static int build_dwfl(struct dwarf_unwinder *u)
{
	size_t i;

	end_dwfl(u);
	u->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!u->dwfl)
		return -ENOMEM;
	if (!dwfl_attach_state(u->dwfl, u->arch, u->pid, &thread_callbacks, u)) {
		end_dwfl(u);
		return -EINVAL;
	}
	dwfl_report_begin(u->dwfl);
	for (i = 0; i < u->n_mods; i++)
		if (!report_module(u, u->mods[i]))
			break;
	dwfl_report_end(u->dwfl, NULL, NULL);
	if (i < u->n_mods) {
		end_dwfl(u);
		return -ENOMEM;
	}
	u->rebuild = false;
	u->stats.rebuilds++;
	return 0;
}

/* Adds m (taken) to the list and to the live Dwfl, unless a rebuild will. */
static int add_module(struct dwarf_unwinder *u, struct module *m)
{
	bool ok;
	int rc;

	if (have_module(u, m)) {
		module_free(m); /* another segment of a file we have */
		return 0;
	}
	drop_overlapping(u, m->low, m->high);
	rc = push_module(u, m);
	if (rc < 0 || !u->dwfl || u->rebuild)
		return rc;
	dwfl_report_begin_add(u->dwfl);
	ok = report_module(u, m);
	dwfl_report_end(u->dwfl, NULL, NULL);
	if (ok)
		return 0;
	u->rebuild = true; /* out of memory in libdwfl: try again from scratch */
	return -ENOMEM;
}

/* Names that never are ELF files: anonymous memory and the kernel's special mappings. */
static bool pseudo_mapping(const char *path)
{
	return !path || !*path || strcmp(path, "//anon") == 0 ||
	       (path[0] == '[' && strcmp(path, "[vdso]") != 0);
}

void dwarf_unwinder_share_files(struct dwarf_unwinder *u, struct unwind_files *files)
{
	u->shared = files;
}

int dwarf_unwinder_add_mapping(struct dwarf_unwinder *u, uint64_t start, uint64_t end,
			       uint64_t pgoff, const char *path)
{
	return dwarf_unwinder_add_mapping_id(u, start, end, pgoff, path, NULL);
}

int dwarf_unwinder_add_mapping_id(struct dwarf_unwinder *u, uint64_t start, uint64_t end,
				  uint64_t pgoff, const char *path, const struct unwind_file_id *id)
{
	struct unwind_file *file;
	struct module *m;
	char name[4200];
	int fd, rc;

	if (!u || start >= end)
		return -EINVAL;
	if (pseudo_mapping(path))
		return 0;
	if (strcmp(path, "[vdso]") == 0) {
		m = module_new(path, NULL);
		if (!m)
			return -ENOMEM;
		m->low = start;
		m->high = end;
		return add_module(u, m);
	}
	file = unwind_files_find(u->shared, id);
	if (!file) {
		fd = open_target_file(u->pid, path, start, end, name, sizeof(name));
		file = fd < 0 ? NULL : unwind_file_open(u->shared, id, fd, &rc);
		if (!file) {
			u->stats.bad_mappings++;
			return fd < 0 ? fd : rc;
		}
	}
	m = module_new(path, file);
	if (!m)
		return -ENOMEM;
	elf_layout(m->file, start, pgoff, m);
	return add_module(u, m);
}

int dwarf_unwinder_copy_modules(struct dwarf_unwinder *u, const struct dwarf_unwinder *from)
{
	for (size_t i = 0; i < from->n_mods; i++) {
		const struct module *f = from->mods[i];
		struct module *m = module_new(f->path, f->file ? unwind_file_ref(f->file) : NULL);
		int rc;

		if (!m)
			return -ENOMEM;
		m->low = f->low;
		m->high = f->high;
		m->bias = f->bias;
		rc = add_module(u, m);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int dwarf_unwinder_load_maps_text(struct dwarf_unwinder *u, const char *text, size_t len)
{
	char path[PATH_MAX + 64];
	struct proc_maps_line l;
	struct unwind_file_id id;
	size_t off = 0;

	while (proc_maps_line_next_exec(text, len, &off, &l, path, sizeof(path))) {
		id = (struct unwind_file_id){ (uint64_t)l.major << 32 | l.minor, l.inode };
		/* failures are counted in bad_mappings; the other mappings still help */
		dwarf_unwinder_add_mapping_id(u, l.start, l.end, l.pgoff, path, &id);
	}
	return 0;
}

int dwarf_unwinder_load_proc_maps(struct dwarf_unwinder *u)
{
	char *text;
	size_t len;
	int err;

	if (!u)
		return -EINVAL;
	err = proc_maps_text_read(u->pid, &text, &len);
	if (err)
		return err;
	dwarf_unwinder_load_maps_text(u, text, len);
	free(text);
	return 0;
}

/*
 * A caller with the pc of the frame below it, in code no module holds:
 * libdwfl got there by its frame-pointer guess (no CFI), and a stack of
 * repeated words (a frame pointer that is data) lets that guess climb the
 * whole copy, one identical [unknown] frame per step. Recursion repeats a
 * pc too, but in a module's code, which CFI unwinds; only a recursive JIT
 * function loses its deeper frames to this.
 */
static bool repeats_unknown_pc(const struct dwarf_unwinder *u, Dwarf_Addr pc)
{
	return u->cur.n > 0 && u->cur.pcs[u->cur.n - 1] == pc && !dwfl_addrmodule(u->dwfl, pc);
}

/*
 * One frame, leaf first. Stops at max, at a caller in page 0, when SP does
 * not grow, at an unknown pc repeated.
 */
static int on_frame(Dwfl_Frame *frame, void *arg)
{
	struct dwarf_unwinder *u = arg;
	struct sample_state *c = &u->cur;
	Dwarf_Addr pc;
	Dwarf_Word sp;

	if (!dwfl_frame_pc(frame, &pc, NULL))
		return DWARF_CB_ABORT;
	if (c->n == 0) {
		sp = c->regs[PERF_REG_X86_SP];
	} else {
		if (pc < MIN_USER_PC || dwfl_frame_reg(frame, DWARF_REG_SP, &sp) != 0)
			return DWARF_CB_ABORT;
		if (sp <= c->last_sp || repeats_unknown_pc(u, pc)) {
			u->stats.stopped_loop++;
			return DWARF_CB_ABORT;
		}
	}
	c->pcs[c->n++] = pc;
	c->last_sp = sp;
	if (c->n == c->max) {
		u->stats.stopped_max++;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

int dwarf_unwinder_unwind(struct dwarf_unwinder *u, const uint64_t *regs, uint64_t regs_mask,
			  uint64_t sp, const uint8_t *stack, size_t stack_size, uint64_t *pcs,
			  size_t max, size_t *n)
{
	return dwarf_unwinder_unwind_fixed(u, regs, regs_mask, sp, stack, stack_size, NULL, pcs,
					   max, n);
}

int dwarf_unwinder_unwind_fixed(struct dwarf_unwinder *u, const uint64_t *regs,
				uint64_t regs_mask, uint64_t sp, const uint8_t *stack,
				size_t stack_size, const struct dwarf_memory_fix *fix,
				uint64_t *pcs, size_t max, size_t *n)
{
	const uint64_t need = (1ull << PERF_REG_X86_IP) | (1ull << PERF_REG_X86_SP);
	int rc;

	if (!u || !regs || !pcs || !n || max == 0 || (stack_size && !stack) ||
	    (regs_mask & need) != need)
		return -EINVAL;
	*n = 0;
	if (!u->dwfl || u->rebuild) {
		rc = build_dwfl(u);
		if (rc < 0)
			return rc;
	}
	u->cur = (struct sample_state){ .regs = regs, .regs_mask = regs_mask, .sp = sp,
					.stack = stack, .stack_size = stack_size, .pcs = pcs,
					.max = max, .fix = fix };
	/* -1 is also how libdwfl reports an ordinary end of the stack */
	dwfl_getthread_frames(u->dwfl, u->pid, on_frame, u);
	if (u->cur.n == 0)
		pcs[u->cur.n++] = regs[PERF_REG_X86_IP]; /* libdwfl refused even the first frame */
	*n = u->cur.n;
	u->cur = (struct sample_state){ 0 }; /* keep no pointer into the caller's sample */
	u->stats.unwinds++;
	u->stats.frames += *n;
	return 0;
}

struct dwarf_unwinder *dwarf_unwinder_new(pid_t pid)
{
	struct dwarf_unwinder *u;
	int rc;

	if (pid <= 0) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->pid = pid;
	elf_version(EV_CURRENT);
	memcpy(u->arch_ehdr.e_ident, ELFMAG, SELFMAG);
	u->arch_ehdr.e_ident[EI_CLASS] = ELFCLASS64;
	u->arch_ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
	u->arch_ehdr.e_ident[EI_VERSION] = EV_CURRENT;
	u->arch_ehdr.e_type = ET_CORE;
	u->arch_ehdr.e_machine = EM_X86_64;
	u->arch_ehdr.e_version = EV_CURRENT;
	u->arch_ehdr.e_ehsize = sizeof(u->arch_ehdr);
	u->arch = elf_memory((char *)&u->arch_ehdr, sizeof(u->arch_ehdr));
	rc = u->arch ? build_dwfl(u) : -EINVAL;
	if (rc < 0) {
		dwarf_unwinder_free(u);
		errno = -rc;
		return NULL;
	}
	u->stats.rebuilds = 0; /* the first build is no rebuild */
	return u;
}

void dwarf_unwinder_free(struct dwarf_unwinder *u)
{
	size_t i;

	if (!u)
		return;
	end_dwfl(u); /* before arch: the Dwfl's backend was made from it */
	if (u->arch)
		elf_end(u->arch);
	for (i = 0; i < u->n_mods; i++)
		module_free(u->mods[i]);
	free(u->mods);
	free(u);
}

void dwarf_unwinder_get_stats(const struct dwarf_unwinder *u, struct dwarf_unwind_stats *out)
{
	*out = u->stats;
	out->modules = u->n_mods;
}
