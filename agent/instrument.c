// SPDX-License-Identifier: MIT
/*
 * Module walk, selection and patching (see instrument.h). Setup-time code:
 * it allocates freely and runs with the calling thread's guard set, so the
 * functions it patches (mprotect, memcpy, ...) may be called mid-way.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/elf_symbols.h"
#include "agent/arg_capture.h"
#include "agent/instrument.h"
#include "agent/jit_callers.h"
#include "agent/patcher.h"
#include "agent/proc_maps.h"
#include "trampolines/trampoline_layout.h"

struct module_list {
	struct loaded_module *items;
	size_t n, cap;
};

/*
 * Functions whose callers do not follow the System V call ABI (lazy binding,
 * TLS descriptors preserve every register) or that are never called.
 */
static const char *const non_abi_functions[] = {
	"_dl_runtime_resolve*", "_dl_runtime_profile*", "_dl_tlsdesc_*", "__tls_get_addr",
	"_start", "_dl_start*", "__restore_rt", "_init", "_fini", "__morestack", "__x86.*",
};

/*
 * Functions that keep their own return address for later (setjmp family,
 * getcontext) or return twice on one stack (vfork): a hijacked address
 * there would be used after its shadow entry is gone.
 */
static const char *const return_address_keepers[] = {
	"setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "_longjmp_unwind",
	"vfork", "__vfork", "getcontext", "__getcontext", "swapcontext", "__swapcontext",
	"savectx", "__libc_vfork",
};

/* They look at their return address to know who called (RTLD_NEXT, the caller's RUNPATH). */
static const char *const caller_sensitive_functions[] = {
	"dlopen", "dlsym", "dlvsym", "dlmopen", "__dlopen", "__dlsym", "__dlvsym",
};

/*
 * Entered before a stack walk or unwind: patched whatever the user selected,
 * so that hijacked return addresses are put back first (agent/hooks.c).
 * stack_walk_name_flags sorts names out by their first byte: '_', 'b', 'e', 'p'.
 */
static const char *const unwinder_functions[] = {
	"_Unwind_RaiseException", "_Unwind_Resume", "_Unwind_Resume_or_Rethrow",
	"_Unwind_ForcedUnwind", "_Unwind_Backtrace", "backtrace", "pthread_exit",
};

/* Go's exit (assembly): runtime.exit.abi0 since Go 1.17's register ABI, runtime.exit before. */
static bool is_go_exit(const char *name)
{
	return name[0] == 'r' &&
	       (strcmp(name, "runtime.exit.abi0") == 0 || strcmp(name, "runtime.exit") == 0);
}

/* The STUB_FLAG_* of a function so named outside Go code, 0 for most. */
static uint32_t stack_walk_name_flags(const char *name)
{
	/* every name below: most go here */
	if (name[0] != '_' && name[0] != 'b' && name[0] != 'e' && name[0] != 'p')
		return 0;
	for (size_t i = 0; i < sizeof(unwinder_functions) / sizeof(unwinder_functions[0]); i++)
		if (strcmp(unwinder_functions[i], name) == 0)
			return STUB_FLAG_UNWINDER;
	if (strcmp(name, "__cxa_begin_catch") == 0)
		return STUB_FLAG_CATCH;
	if (strcmp(name, "_dl_debug_state") == 0)
		return STUB_FLAG_MODULES;
	if (strcmp(name, "_exit") == 0 || strcmp(name, "_Exit") == 0)
		return STUB_FLAG_PROCESS_EXIT;
	if (strcmp(name, "execve") == 0 || strcmp(name, "execveat") == 0 ||
	    strcmp(name, "fexecve") == 0)
		return STUB_FLAG_PROCESS_EXEC;
	return 0;
}

/* Returns the STUB_FLAG_* a function gets whatever the user selected, 0 for most. */
static uint32_t stack_walk_flags(const struct elf_symbols *syms, const struct elf_function *fn)
{
	if (elf_symbols_is_go(syms, fn->value, fn->size))
		return is_go_exit(fn->name) ? STUB_FLAG_GO_EXIT : 0;
	return stack_walk_name_flags(fn->name);
}

static const char *non_abi_reason(const char *name)
{
	for (size_t i = 0; i < sizeof(non_abi_functions) / sizeof(non_abi_functions[0]); i++)
		if (fnmatch(non_abi_functions[i], name, 0) == 0)
			return "not called through the standard ABI (loader, TLS or signal glue)";
	for (size_t i = 0; i < sizeof(return_address_keepers) / sizeof(return_address_keepers[0]);
	     i++)
		if (strcmp(return_address_keepers[i], name) == 0)
			return "saves its own return address or returns twice (setjmp, vfork, contexts)";
	for (size_t i = 0;
	     i < sizeof(caller_sensitive_functions) / sizeof(caller_sensitive_functions[0]); i++)
		if (strcmp(caller_sensitive_functions[i], name) == 0)
			return "finds its caller from its return address (dlopen/dlsym RTLD_NEXT)";
	return NULL;
}

/*
 * Go's runtime walks goroutine stacks by return address (stack copying, GC,
 * tracebacks, panics): a hijacked one is "fatal error: unknown caller pc".
 */
#define GO_CODE_REASON "Go code: Go's runtime reads its return addresses (stack growth, GC, tracebacks)"
#define GO_MODULE_REASON                                                                          \
	"in a Go module without runtime.text/etext symbols (stripped): cannot be told apart " \
	"from Go code, whose runtime reads return addresses"

/*
 * Runtimes with generated code whose stack walkers read, as the pc of their
 * exit frame, the return address of the C++ function that code called: a
 * hijacked one is fatal (found by running them: node under
 * '_ZN2v88internal*' dies in InnerPointerToCodeCache "Check failed:
 * maybe_code.has_value()", java under libjvm.so globs in frame::sender).
 * V8's generated code enters C++ through CEntry, into its C++ builtins and
 * runtime functions, which all have CEntry's signature (int, Address*,
 * Isolate*); its embedded builtins are generated code themselves. HotSpot's
 * interpreter, stubs and JIT call into libjvm's C++ from many classes (frames
 * the walker reads pc = sp[-1] of), which the ELF cannot tell apart: libjvm
 * is instrumented, and the enter hook leaves those calls unhijacked by their
 * caller (STUB_FLAG_JIT_CALLERS, agent/jit_callers.h), as it does for V8's
 * other C++ (irregexp's stack check rewrites its return address).
 */
static const char *runtime_frame_reason(const struct elf_symbols *syms,
					const struct elf_function *fn)
{
	if (!syms->has_v8)
		return NULL;
	if (syms->v8_blob_hi ? fn->value < syms->v8_blob_hi && fn->value + fn->size > syms->v8_blob_lo :
			       strncmp(fn->name, "Builtins_", 9) == 0)
		return "V8's embedded builtins (generated code): V8 walks their frames by return address";
	if (fnmatch("_ZN2v88internal*Builtin_*EiPmPNS0_7IsolateE", fn->name, 0) == 0 ||
	    fnmatch("_ZN2v88internal*Runtime_*EiPmPNS0_7IsolateE", fn->name, 0) == 0)
		return "a V8 C++ builtin or runtime function, called from generated code: V8 reads "
		       "its return address as its exit frame's pc";
	return NULL;
}

/* GCC's hot/cold splitting: NAME.cold or NAME.cold.N is a jump target, not a function. */
static int is_cold_fragment(const char *name)
{
	const char *dot = strstr(name, ".cold");

	return dot && (dot[5] == '\0' || dot[5] == '.');
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int is_own_module(const struct dl_phdr_info *info)
{
	uint64_t self = (uint64_t)(uintptr_t)instrument_prepare;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && self >= lo && self < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

static char *module_path(const char *dl_name)
{
	char buf[4096];
	ssize_t n;

	if (dl_name && dl_name[0])
		return strdup(dl_name);
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

static int collect_module(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct module_list *list = ctx;
	struct loaded_module m = { .base = info->dlpi_addr };

	(void)size;
	if (is_own_module(info) || strncmp(info->dlpi_name, "linux-vdso", 10) == 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && m.n_segs < LOADED_MODULE_MAX_SEGMENTS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		m.seg_lo[m.n_segs] = info->dlpi_addr + ph->p_vaddr;
		m.seg_hi[m.n_segs] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		m.n_segs++;
	}
	if (m.n_segs == 0)
		return 0;
	m.path = module_path(info->dlpi_name);
	if (!m.path)
		return 0;
	if (list->n == list->cap) {
		size_t ncap = list->cap ? list->cap * 2 : 8;
		struct loaded_module *n = realloc(list->items, ncap * sizeof(*n));

		if (!n) {
			free(m.path);
			return 1;
		}
		list->items = n;
		list->cap = ncap;
	}
	list->items[list->n++] = m;
	return 0;
}

static int grow(void **items, size_t *cap, size_t n, size_t elem)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8; /* small first: a process of a tree has a few */
	p = realloc(*items, ncap * elem);
	if (!p)
		return -ENOMEM;
	*items = p;
	*cap = ncap;
	return 0;
}

static const char *report_keep_string(struct instrument_report *r, const char *s)
{
	char *copy;

	if (grow((void **)&r->strings, &r->cap_strings, r->n_strings, sizeof(char *)))
		return NULL;
	copy = strdup(s);
	if (copy)
		r->strings[r->n_strings++] = copy;
	return copy;
}

static void report_warn(struct instrument_report *r, const char *fmt, const char *a,
			const char *b)
{
	char buf[512];
	char **n = realloc(r->warnings, (r->n_warnings + 1) * sizeof(char *));

	if (!n)
		return;
	r->warnings = n;
	snprintf(buf, sizeof(buf), fmt, a, b);
	r->warnings[r->n_warnings] = strdup(buf);
	if (r->warnings[r->n_warnings])
		r->n_warnings++;
}

void instrument_report_warn(struct instrument_report *r, const char *text)
{
	report_warn(r, "%s%s", text, "");
}

/* reason may be thread-local (the relocator's): it is copied. */
static void report_skip(struct instrument_report *r, const char *name, const char *module,
			const char *reason)
{
	struct skipped_function *s;

	if (grow((void **)&r->skipped, &r->cap_skipped, r->n_skipped, sizeof(*s)))
		return;
	s = &r->skipped[r->n_skipped];
	s->name = strdup(name);
	s->module = module;
	s->reason = report_keep_string(r, reason);
	if (s->name && s->reason)
		r->n_skipped++;
}

static int report_add(struct instrument_report *r, const char *name, const char *module,
		      uint64_t address, uint64_t size)
{
	struct instrumented_function *f;

	if (grow((void **)&r->functions, &r->cap_functions, r->n_functions, sizeof(*f)))
		return -ENOMEM;
	f = &r->functions[r->n_functions];
	f->id = (uint32_t)r->n_functions + 1;
	f->name = strdup(name);
	f->module = module;
	f->address = address;
	f->size = size;
	f->dropped = NULL;
	if (!f->name)
		return -ENOMEM;
	r->n_functions++;
	return 0;
}

static int in_exec_segment(const struct loaded_module *m, uint64_t lo, uint64_t hi)
{
	for (int i = 0; i < m->n_segs; i++)
		if (lo >= m->seg_lo[i] && hi <= m->seg_hi[i])
			return 1;
	return 0;
}

/* Why fn cannot be patched before even trying its bytes, or NULL. */
/*
 * The bytes a patch may cover: the symbol's size, or, for a function shorter
 * than the jump (`ret`, `xor eax,eax; ret`), that plus the alignment padding
 * after it, up to the next symbol and within the executable segment.
 */
static uint64_t patchable_size(const struct loaded_module *m, const struct elf_symbols *syms,
			       size_t i)
{
	const struct elf_function *fn = &syms->functions[i];
	uint64_t addr = m->base + fn->value, room = 32;

	if (fn->size >= PATCH_NEAR_LEN)
		return fn->size;
	if (fn->next - fn->value < room)
		room = fn->next - fn->value;
	while (room > fn->size && !in_exec_segment(m, addr, addr + room))
		room--;
	if (room <= fn->size)
		return fn->size;
	return fn->size + stub_padding_after((const uint8_t *)(uintptr_t)addr, room, fn->size);
}

/* Why fn's code cannot be patched, whoever wants it, or NULL. */
static const char *precheck_code(const struct loaded_module *m, const struct elf_symbols *syms,
				 size_t i)
{
	const struct elf_function *fn = &syms->functions[i];
	uint64_t addr = m->base + fn->value;
	const char *why = non_abi_reason(fn->name);

	if (why)
		return why;
	if (is_cold_fragment(fn->name))
		return "a compiler-split cold fragment, entered by a jump, not a call";
	if (fn->is_ifunc)
		return "IFUNC resolver: the implementation it selects has no symbol here";
	if (fn->is_variant_pcs)
		return "SVE/SME vector calling convention (variant PCS): arguments in z/p registers";
	if (!in_exec_segment(m, addr, addr + fn->size))
		return "not inside an executable segment";
	if (patchable_size(m, syms, i) < PATCH_NEAR_LEN)
		return "function shorter than the entry jump, with no padding after it";
	return NULL;
}

/* Why fn cannot be timed, or NULL. */
static const char *precheck(const struct loaded_module *m, const struct elf_symbols *syms,
			    size_t i)
{
	const struct elf_function *fn = &syms->functions[i];

	const char *why;

	if (elf_symbols_is_go(syms, fn->value, fn->size))
		return syms->go_text_hi ? GO_CODE_REASON : GO_MODULE_REASON;
	why = runtime_frame_reason(syms, fn);
	return why ? why : precheck_code(m, syms, i);
}

struct picked_function {
	size_t index;   /* into syms.functions */
	int selected;   /* by the user's patterns: timed, listed */
	uint32_t flags; /* STUB_FLAG_*: patched for the shadow stack's sake */
};

struct module_job {
	const struct func_filter *filter;
	int module_selected; /* some include of the filter applies to its file */
	int saw_mangled;     /* a C++ name was matched (demangled if the process can) */
	const struct loaded_module *module;
	const char *module_name;
	struct elf_symbols syms;
	struct picked_function *picked;
	size_t n_picked;
	struct stub_region region;
	int new_region; /* it mapped it (else it shares the walk's open one) */
	size_t slots_used;
	uint32_t module_index;
	struct instrument_plan *plan;
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/*
 * C++ names match in either form (`_Z10ex_throweri` or `ex_thrower(int)`),
 * through the program's own libstdc++ when it has one: the agent links none.
 */
static int selected_by_filter(const struct func_filter *filter, const char *module,
			      const char *name)
{
	static demangle_fn demangle; /* set once, during single-threaded setup */
	static int looked_up;
	char *plain;
	int status = -1, match;

	if (func_filter_match(filter, module, name))
		return 1;
	if (name[0] != '_' || name[1] != 'Z')
		return 0;
	if (!looked_up) {
		demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		looked_up = 1;
	}
	if (!demangle || !(plain = demangle(name, NULL, NULL, &status)))
		return 0;
	match = status == 0 && func_filter_match(filter, module, plain);
	free(plain);
	return match;
}

/*
 * What module_pick may take, by name alone (elf_symbols_load_selected): the
 * user's selection and the stack walkers. The module's other symbols are
 * never sorted or copied, at each process start of a tree.
 */
static bool module_may_pick(void *ctx, const char *name)
{
	struct module_job *job = ctx;

	job->saw_mangled |= job->module_selected && name[0] == '_' && name[1] == 'Z';
	return stack_walk_name_flags(name) || is_go_exit(name) ||
	       (job->module_selected && selected_by_filter(job->filter, job->module->path, name));
}

static void module_pick(struct module_job *job, struct instrument_report *r)
{
	job->picked = malloc((job->syms.n_functions + 1) * sizeof(*job->picked));
	job->n_picked = 0;
	for (size_t i = 0; job->picked && i < job->syms.n_functions; i++) {
		const struct elf_function *fn = &job->syms.functions[i];
		int selected = job->module_selected &&
			       selected_by_filter(job->filter, job->module->path, fn->name);
		uint32_t flags = stack_walk_flags(&job->syms, fn);
		const char *why;

		if (!selected && !flags)
			continue;
		if (selected && (job->syms.has_v8 || job->syms.has_hotspot))
			flags |= STUB_FLAG_JIT_CALLERS;
		r->matched += selected;
		why = precheck(job->module, &job->syms, i);
		if (why && selected)
			report_skip(r, fn->name, job->module_name, why);
		/* for its flag, never timed */
		if (flags & (STUB_FLAG_GO_EXIT | STUB_FLAG_PROCESS_EXIT | STUB_FLAG_PROCESS_EXEC)) {
			selected = 0;
			why = precheck_code(job->module, &job->syms, i);
		}
		if (why && selected)
			continue;
		else if (why)
			report_warn(r, "%s: unwinder %s left unpatched", job->module_name, fn->name);
		else
			job->picked[job->n_picked++] = (struct picked_function){ i, selected, flags };
		if (!why && (flags & STUB_FLAG_GO_EXIT))
			r->go_exit_hooked = true;
	}
}

/*
 * A runtime's compiled C++ for the enter hook (STUB_FLAG_JIT_CALLERS): the
 * module's text, but for V8 its embedded builtins, by their blob symbols or,
 * without them, the span of the Builtins_ functions. HotSpot's generated
 * code (interpreter, stubs, JIT) lives in its code cache, outside libjvm.
 */
static void register_runtime_native_code(struct module_job *job, struct instrument_report *r)
{
	const struct loaded_module *m = job->module;
	uint64_t lo = job->syms.v8_blob_lo, hi = job->syms.v8_blob_hi;

	if (!hi) {
		lo = job->syms.v8_builtins_lo;
		hi = job->syms.v8_builtins_hi;
	}
	if (!jit_callers_add(m->seg_lo[0], m->seg_hi[m->n_segs - 1], m->base + lo, m->base + hi))
		return;
	report_warn(r, "%s: %s", job->module_name,
		    "too many runtimes loaded: calls from its generated code are hijacked as any");
	for (size_t k = 0; k < job->n_picked; k++)
		job->picked[k].flags &= ~STUB_FLAG_JIT_CALLERS;
}

/* Another symbol's entry inside [addr, addr + patch_len) would be overwritten. */
static int next_entry_overlaps(const struct elf_symbols *syms, size_t i, size_t patch_len)
{
	return syms->functions[i].next < syms->functions[i].value + patch_len;
}

static struct pending_patch *plan_add_patch(struct instrument_plan *plan)
{
	if (grow((void **)&plan->patches, &plan->cap_patches, plan->n_patches,
		 sizeof(*plan->patches)))
		return NULL;
	return &plan->patches[plan->n_patches++];
}

/* Builds the stub of one picked function; returns -ENOMEM only when the plan cannot grow. */
static int module_prepare_one(struct module_job *job, const struct picked_function *p,
			      struct instrument_report *r)
{
	const struct elf_function *fn = &job->syms.functions[p->index];
	uint64_t addr = job->module->base + fn->value;
	int unwinder = p->flags & (STUB_FLAG_UNWINDER | STUB_FLAG_MODULES | STUB_FLAG_GO_EXIT |
				   STUB_FLAG_PROCESS_EXIT | STUB_FLAG_PROCESS_EXEC);
	int timed = p->selected && !unwinder;
	uint32_t id = timed ? (uint32_t)r->n_functions + 1 : 0;
	const char *why = NULL;
	struct stub_fill fill = { 0 };
	struct pending_patch *pp;
	uint64_t stub = stub_region_slot_entry(&job->region, job->slots_used);
	uint32_t flags;

	/* a function's figures live at its id (agent_thread.h): the fast paths never check it */
	if (id >= AGG_PAGE_FUNCS * AGG_PAGES) {
		report_skip(r, fn->name, job->module_name,
			    "past the 1,048,575 functions one process can time");
		return 0;
	}
	/* --args/--retval: only functions a spec names leave the hooks' fast path */
	flags = p->flags | (timed ? arg_capture_attach(id, fn->name) : 0);

	if (stub_region_fill(&job->region, job->slots_used, addr,
			     patchable_size(job->module, &job->syms, p->index), id, flags,
			     &fill, &why)) {
		if (p->selected)
			report_skip(r, fn->name, job->module_name, why);
		return 0;
	}
	if (next_entry_overlaps(&job->syms, p->index, fill.patch_len)) {
		if (p->selected)
			report_skip(r, fn->name, job->module_name,
				    "another function's entry lies inside the patched bytes");
		return 0;
	}
	if (p->selected && unwinder)
		report_skip(r, fn->name, job->module_name,
			    p->flags & STUB_FLAG_MODULES
				    ? "the loader's debugger hook: patched to see modules loaded later"
				    : "walks the stack: patched only to restore return addresses, not timed");
	pp = plan_add_patch(job->plan);
	if (!pp || (timed && report_add(r, fn->name, job->module_name, addr, fn->size)))
		return -ENOMEM;
	if (timed) {
		r->functions[r->n_functions - 1].stub = stub;
		r->functions[r->n_functions - 1].base = job->module->base;
		r->functions[r->n_functions - 1].stub_same_offsets = fill.same_offsets_len;
	}
	pp->jump.address = addr + fill.jump_offset;
	pp->jump.target = stub;
	pp->jump.len = (uint32_t)fill.jump_len;
	memcpy(pp->original, (const void *)(uintptr_t)pp->jump.address, pp->jump.len);
	pp->function = timed ? (int64_t)r->n_functions - 1 : -1;
	pp->module = job->module_index;
	pp->written = 0;
	pp->function_address = addr;
	pp->same_offsets = (uint32_t)fill.same_offsets_len;
	job->slots_used++;
	return 0;
}

/* Seals the region the walk kept open (instrument_plan.open_region), if any. */
static int plan_seal_open_region(struct instrument_plan *plan)
{
	int err = plan->open_region.base ? stub_region_seal(&plan->open_region) : 0;

	plan->open_region = (struct stub_region){ 0 };
	plan->open_used = 0;
	return err;
}

/* The open region, when it reaches m and has room for n stubs; 0 then, else -1. */
static int plan_take_open_region(struct instrument_plan *plan, const struct loaded_module *m,
				 size_t n, struct module_job *job)
{
	if (!stub_region_reaches(&plan->open_region, m->seg_lo[0], m->seg_hi[m->n_segs - 1]) ||
	    stub_region_capacity(&plan->open_region) - plan->open_used < n)
		return -1;
	job->region = plan->open_region;
	job->slots_used = plan->open_used;
	return 0;
}

static int module_plan(struct module_job *job, const struct proc_maps *maps,
		       struct instrument_report *r)
{
	const struct loaded_module *m = job->module;
	struct instrument_plan *plan = job->plan;
	int err;

	if (job->n_picked == 0)
		return 0;
	if (!plan_take_open_region(plan, m, job->n_picked, job))
		goto fill;
	err = plan_seal_open_region(plan);
	if (err)
		return err;
	if (stub_region_map(maps, m->seg_lo[0], m->seg_hi[m->n_segs - 1], job->n_picked,
			    &job->region)) {
		for (size_t k = 0; k < job->n_picked; k++)
			if (job->picked[k].selected)
				report_skip(r, job->syms.functions[job->picked[k].index].name,
					    job->module_name, "no memory for stubs");
		return 0;
	}
	if (job->region.far)
		report_warn(r, "%s: no free memory within 2 GiB: %s", job->module_name,
			    "14-byte absolute jumps, longer prologues only");
	job->new_region = 1;
	plan->open_region = job->region;
	plan->open_used = 0;
fill:
	for (size_t k = 0; k < job->n_picked; k++)
		if (module_prepare_one(job, &job->picked[k], r))
			return -ENOMEM;
	plan->open_used = job->slots_used;
	return 0;
}

static int plan_add_module(struct instrument_plan *plan, const struct loaded_module *m)
{
	if (grow((void **)&plan->modules, &plan->cap_modules, plan->n_modules,
		 sizeof(*plan->modules)))
		return -ENOMEM;
	plan->modules[plan->n_modules++] = (struct known_module){ m->base, m->seg_lo[0], 0 };
	return 0;
}

/* The selected loads made already (instrument_set_presets), and what they are asked with. */
static instrument_preset_fn preset_fn;
static void *preset_ctx;

void instrument_set_presets(instrument_preset_fn fn, void *ctx)
{
	preset_fn = fn;
	preset_ctx = ctx;
}

int instrument_selected_load(const struct func_filter *filter, const char *path,
			     struct elf_symbols *out, int *mangled, char *err, size_t errlen)
{
	struct loaded_module m = { .path = (char *)path };
	struct module_job job = { .filter = filter, .module = &m,
				  .module_selected = func_filter_module_may_match(filter, path) };
	int ret = elf_symbols_load_selected(path, module_may_pick, &job, out, err, errlen);

	*mangled = job.saw_mangled;
	return ret;
}

/* Its stub region, if it mapped one, is added to maps: the next module plans with it. */
static void module_instrument(const struct loaded_module *m, const struct func_filter *filter,
			      struct proc_maps *maps, struct instrument_plan *plan)
{
	struct instrument_report *r = &plan->report;
	struct module_job job = { .filter = filter, .module = m, .plan = plan,
				  .module_index = (uint32_t)plan->n_modules,
				  .module_selected = func_filter_module_may_match(filter, m->path) };
	char err[256] = "";

	if (plan_add_module(plan, m))
		return;

	r->modules_scanned++;
	job.module_name = report_keep_string(r, m->path);
	if (!job.module_name)
		return;
	if ((!preset_fn || preset_fn(preset_ctx, m->path, &job.syms)) &&
	    elf_symbols_load_selected(m->path, module_may_pick, &job, &job.syms, err, sizeof(err))) {
		report_warn(r, "%s: cannot read symbols: %s", m->path, err);
		return;
	}
	module_pick(&job, r);
	if ((job.syms.has_v8 || job.syms.has_hotspot) && job.n_picked)
		register_runtime_native_code(&job, r);
	if (module_plan(&job, maps, r))
		report_warn(r, "%s: %s", m->path, "out of memory while preparing stubs");
	free(job.picked);
	elf_symbols_free(&job.syms);
	if (job.new_region && proc_maps_insert(maps, (uint64_t)(uintptr_t)job.region.base,
						(uint64_t)(uintptr_t)job.region.base + job.region.size,
						PROT_READ | PROT_EXEC))
		proc_maps_free(maps); /* no memory: the next module reads them again */
}

static int plan_knows(const struct instrument_plan *plan, const struct loaded_module *m)
{
	for (size_t i = 0; i < plan->n_modules; i++)
		if (!plan->modules[i].gone && plan->modules[i].base == m->base &&
		    plan->modules[i].text_lo == m->seg_lo[0])
			return 1;
	return 0;
}

/* Instruments the modules of list[0..n) that the plan has not seen yet. */
static int plan_modules(const struct func_filter *filter, const struct loaded_module *list,
			size_t n, struct instrument_plan *plan)
{
	int err, seal_err;

	proc_maps_free(&plan->maps);
	err = proc_maps_load(&plan->maps);
	for (size_t i = 0; i < n && !err; i++) {
		if (plan_knows(plan, &list[i]))
			continue;
		/* the stub regions it maps go into the maps: read once per process start */
		module_instrument(&list[i], filter, &plan->maps, plan);
		if (!plan->maps.maps)
			err = proc_maps_load(&plan->maps);
	}
	/* nothing runs the stubs before the commit: one seal for the walk's last region */
	seal_err = plan_seal_open_region(plan);
	return err ? err : seal_err;
}

/* Instruments the modules loaded now that the plan has not seen yet. */
static int plan_new_modules(const struct func_filter *filter, struct instrument_plan *plan)
{
	struct module_list list = { 0 };
	int err;

	dl_iterate_phdr(collect_module, &list);
	err = plan_modules(filter, list.items, list.n, plan);
	for (size_t i = 0; i < list.n; i++)
		free(list.items[i].path);
	free(list.items);
	return err;
}

/* A --args/--retval spec no instrumented function matched: the user should know. */
static void warn_unmatched_spec(void *ctx, const char *text, int retval)
{
	if (retval < 0) /* every spec refused, and why */
		report_warn(ctx, "%s%s", text, "");
	else
		report_warn(ctx, "%s '%s': matches no instrumented function (of the modules loaded "
			    "at start)", retval ? "--retval" : "--args", text);
}

int instrument_prepare(const struct func_filter *filter, struct instrument_plan *plan)
{
	uint64_t start = now_ns();
	int err;

	memset(plan, 0, sizeof(*plan));
	err = plan_new_modules(filter, plan);
	if (!err)
		arg_capture_unmatched(warn_unmatched_spec, &plan->report);
	plan->report.elapsed_ns = now_ns() - start;
	return err;
}

int instrument_prepare_modules(const struct func_filter *filter,
			       const struct loaded_module *modules, size_t n,
			       struct instrument_plan *plan)
{
	uint64_t start = now_ns();
	int err;

	memset(plan, 0, sizeof(*plan));
	err = plan_modules(filter, modules, n, plan);
	plan->report.elapsed_ns = now_ns() - start;
	return err;
}

static int module_still_loaded(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct known_module *k = ctx;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (info->dlpi_addr == k->base && ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
		    info->dlpi_addr + ph->p_vaddr == k->text_lo)
			return 1;
	}
	return 0;
}

/* dlclose: the module's code may be gone, or another module mapped in its place. */
static void plan_forget_unloaded(struct instrument_plan *plan)
{
	for (size_t i = 0; i < plan->n_modules; i++) {
		struct known_module *k = &plan->modules[i];

		if (k->gone || dl_iterate_phdr(module_still_loaded, k))
			continue;
		k->gone = 1;
		for (size_t p = 0; p < plan->n_patches; p++)
			if (plan->patches[p].module == i)
				plan->patches[p].written = 0;
	}
}

static int thread_inside(const struct pending_patch *pp, const uint64_t *ips, size_t n_ips);

static int commit_range(struct instrument_plan *plan, size_t from, const uint64_t *ips,
			size_t n_ips);

int instrument_update_modules(const struct func_filter *filter, struct instrument_plan *plan)
{
	size_t first_patch = plan->n_patches, first_function = plan->report.n_functions;
	int err;

	plan_forget_unloaded(plan);
	err = plan_new_modules(filter, plan);
	if (err)
		return err;
	/* nobody runs the new modules' code yet: no thread to wait for */
	err = commit_range(plan, first_patch, NULL, 0);
	return err < 0 ? err : (int)(plan->report.n_functions - first_function);
}

static int thread_inside(const struct pending_patch *pp, const uint64_t *ips, size_t n_ips)
{
	for (size_t i = 0; i < n_ips; i++)
		if (ips[i] > pp->jump.address && ips[i] < pp->jump.address + pp->jump.len)
			return 1;
	return 0;
}

int instrument_commit(struct instrument_plan *plan, const uint64_t *ips, size_t n_ips,
		      int all_or_nothing)
{
	for (size_t i = 0; all_or_nothing && i < plan->n_patches; i++)
		if (thread_inside(&plan->patches[i], ips, n_ips))
			return -EAGAIN;
	return commit_range(plan, 0, ips, n_ips);
}

/* Writes the jumps of patches [from, n_patches). */
static int commit_range(struct instrument_plan *plan, size_t from, const uint64_t *ips,
			size_t n_ips)
{
	struct patch_writer w;
	int written = 0, err = 0;

	patch_writer_init(&w, &plan->maps);
	for (size_t i = from; i < plan->n_patches && !err; i++) {
		struct pending_patch *pp = &plan->patches[i];
		uint8_t jump[PATCH_MAX_LEN];

		if (thread_inside(pp, ips, n_ips)) {
			if (pp->function >= 0)
				plan->report.functions[pp->function].dropped =
					"a thread was executing its first bytes at attach";
			continue;
		}
		patcher_encode_jump(jump, &pp->jump);
		err = patch_writer_write(&w, pp->jump.address, jump, pp->jump.len);
		pp->written = !err;
		written += !err;
	}
	if (patch_writer_finish(&w) && !err)
		err = -errno;
	/* what could not be written is not instrumented */
	for (size_t i = from; i < plan->n_patches; i++)
		if (!plan->patches[i].written && plan->patches[i].function >= 0 &&
		    !plan->report.functions[plan->patches[i].function].dropped)
			plan->report.functions[plan->patches[i].function].dropped =
				"its code could not be made writable";
	return err ? err : written;
}

int instrument_unpatch(struct instrument_plan *plan)
{
	struct patch_writer w;
	int err = 0;

	patch_writer_init(&w, &plan->maps);
	for (size_t i = 0; i < plan->n_patches; i++) {
		struct pending_patch *pp = &plan->patches[i];

		if (pp->written && !patch_writer_write(&w, pp->jump.address, pp->original,
						       pp->jump.len))
			pp->written = 0;
		else if (pp->written)
			err = -EFAULT;
	}
	if (patch_writer_finish(&w) && !err)
		err = -errno;
	return err;
}

void instrument_plan_free(struct instrument_plan *plan)
{
	instrument_report_free(&plan->report);
	proc_maps_free(&plan->maps);
	free(plan->patches);
	free(plan->modules);
	memset(plan, 0, sizeof(*plan));
}

void instrument_report_free(struct instrument_report *r)
{
	for (size_t i = 0; i < r->n_functions; i++)
		free(r->functions[i].name);
	for (size_t i = 0; i < r->n_skipped; i++)
		free(r->skipped[i].name);
	for (size_t i = 0; i < r->n_strings; i++)
		free(r->strings[i]);
	for (size_t i = 0; i < r->n_warnings; i++)
		free(r->warnings[i]);
	free(r->functions);
	free(r->skipped);
	free(r->strings);
	free(r->warnings);
	memset(r, 0, sizeof(*r));
}
