// SPDX-License-Identifier: MIT
/*
 * libprofagent.so entry points: the constructor that connects to profd
 * (socket and token from the environment), instruments the selected
 * functions, reports them and starts the flusher; the destructor that drains
 * and says goodbye; and, when the daemon dies, the original code put back
 * from inside. Whatever fails here, the target runs on unchanged: the
 * agent goes quiet, it never exits or aborts the process.
 */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/arg_auto.h"
#include "agent/arg_capture.h"
#include "agent/flusher.h"
#include "agent/instrument.h"
#include "agent/module_preset.h"
#include "agent/thread_start.h"
#include "agent/world_stop.h"
#include "trampolines/trampoline_layout.h"
#include "common/func_filter.h"
#include "common/hex.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define AGENT_PROTOCOL_VERSION 1
#define CONFIG_TIMEOUT_MS 10000
#define UNPATCH_TRIES 3
#define UNPATCH_RETRY_NS (20 * 1000 * 1000)

#if defined(__x86_64__)
/* Read by the entry trampoline's slow path (trampolines/x86_64.S): bytes of xsave area. */
uint64_t profagent_xsave_area_size = 4096;
#endif

/*
 * The agent's one session at a time (a process holds one agent). Written by
 * the constructor/destructor or by profctl's remote calls, never concurrently.
 */
enum agent_state { AGENT_IDLE, AGENT_PREPARED, AGENT_ACTIVE, AGENT_UNPATCHED };

static struct {
	enum agent_state state;
	int sock;
	int link;                     /* our end of a socket pair for profd, until attach takes it */
	/*
	 * attach --children: our end of a pair whose other end profd holds,
	 * shared with every process forked from here: a child hands profd its
	 * own link through it (it has no socket path to connect to).
	 */
	int spawner;
	struct instrument_plan plan;
	struct func_filter *filter;   /* kept for modules loaded later */
	struct table_cursor { size_t functions, skipped, warnings, patches; uint32_t matched; } sent;
	/* --auto-args: the functions profd was asked about (the later ones by the flusher) */
	bool auto_args;
	size_t auto_asked;
	int atfork_registered;
	/*
	 * Forked children: with follow_children (the daemon's word) a child keeps
	 * recording from its first instruction and connects on its own, at its
	 * first slow path or exit (fork_pending), to the socket it was given
	 * (path, token: none for an agent reached through a link).
	 */
	int follow_children;
	/* the config came from the environment: forked children do not wait for profd either */
	int config_known;
	int fork_pending;
	/* the flusher thread may wait for a slow path (flusher_start_deferred): forked children's too */
	bool defer_flusher;
	uint64_t flusher_delay_ns; /* how long it waits at least (flusher_delay_from_env) */
	pid_t forked_from;
	struct event_clock_pair fork_pair; /* read at fork: the child's events start there */
	char path[108];
	char token[64];
} agent = { .sock = -1, .link = -1, .spawner = -1 };

/*
 * Before anything can be patched, and wherever the agent's objects are linked
 * (unit tests too): the size depends on XCR0, and AMX tile state makes it
 * 11 KiB on some machines, far past any fixed default.
 */
#if defined(__x86_64__)
/*
 * The kernel's AT_MINSIGSTKSZ (Linux 5.14+) is a signal frame's size, which
 * holds the XSAVE image of every user state component it supports: never
 * less than CPUID 0xd's size for what XCR0 enables. Read from the auxiliary
 * vector it costs nothing, where the two cpuid instructions trap to the
 * hypervisor in a VM (6.7 us of every process of a tree, bench/README.md).
 */
__attribute__((constructor(101))) static void xsave_size_init(void)
{
	unsigned int eax, ebx, ecx, edx;
	unsigned long frame = getauxval(AT_MINSIGSTKSZ);

	if (frame > 0 && frame < (1u << 20))
		profagent_xsave_area_size = frame + 64;
	else if (__get_cpuid_count(0xd, 0, &eax, &ebx, &ecx, &edx) && ebx > 0)
		profagent_xsave_area_size = ebx + 64;
}
#endif

/* What of /proc/self/cmdline a hello carries (profd's reads are capped the same). */
#define HELLO_CMDLINE_MAX 4096

/*
 * The command line as exec gave it, for the process start's hello: what
 * /proc/self/cmdline holds until the program changes it, from the argv
 * glibc hands ELF constructors. A process's /proc files read while it runs
 * cost its parent's reap (release_task's dcache walk). Used once; an
 * attach or a forked child reads /proc (the program may have set its title).
 */
static struct {
	uint8_t bytes[HELLO_CMDLINE_MAX];
	size_t len;
} start_cmdline;

static void start_cmdline_set(int argc, char **argv)
{
	size_t len = 0;

	for (int i = 0; argv && i < argc && argv[i] && len < sizeof(start_cmdline.bytes); i++) {
		size_t n = strlen(argv[i]) + 1;

		if (n > sizeof(start_cmdline.bytes) - len)
			n = sizeof(start_cmdline.bytes) - len; /* cut as a capped read would */
		memcpy(start_cmdline.bytes + len, argv[i], n);
		len += n;
	}
	start_cmdline.len = len;
}

/* config_known: we patch without waiting for a reply (profd closes the connection to refuse). */
static int send_hello(int fd, const char *token, pid_t forked_from, bool config_known)
{
	Profd__AgentHello hello = PROFD__AGENT_HELLO__INIT;
	uint8_t buf[512 + HELLO_CMDLINE_MAX], cmdline[HELLO_CMDLINE_MAX];
	int cfd = -1;
	ssize_t n = (ssize_t)start_cmdline.len;

	if (n > 0)
		memcpy(cmdline, start_cmdline.bytes, (size_t)n);
	else if ((cfd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) >= 0)
		n = read(cfd, cmdline, sizeof(cmdline));
	start_cmdline.len = 0;

	hello.agent_token = (char *)token;
	hello.pid = getpid();
	hello.forked_from = forked_from;
	hello.protocol_version = AGENT_PROTOCOL_VERSION;
	hello.config_known = config_known;
	hello.parent = (int32_t)getppid();
	if (cfd >= 0)
		close(cfd);
	if (n > 0) {
		hello.cmdline.data = cmdline;
		hello.cmdline.len = (size_t)n;
	}
	if (profd__agent_hello__get_packed_size(&hello) > sizeof(buf))
		return -EMSGSIZE;
	return frame_send(fd, FRAME_AGENT_HELLO, buf, profd__agent_hello__pack(&hello, buf), -1);
}

/*
 * The config `profctl run` handed down (PROFD_AGENT_CONFIG: a packed
 * AgentConfig in hex, the same profd would send, with the module presets
 * profctl read), or NULL: then we ask profd and wait. With it, a new
 * process of the tree patches at once, and its start costs no round trip
 * to a daemon that may be busy or descheduled.
 */
static Profd__AgentConfig *config_from_env(void)
{
	const char *hex = getenv("PROFD_AGENT_CONFIG");
	Profd__AgentConfig *cfg = NULL;
	uint8_t *buf;
	size_t len;

	if (!hex || !(buf = hex_decode(hex, &len)))
		return NULL;
	cfg = profd__agent_config__unpack(NULL, len, buf);
	free(buf);
	return cfg;
}

static Profd__AgentConfig *receive_config(int fd)
{
	struct frame_header hdr;
	uint8_t *payload = NULL;
	Profd__AgentConfig *cfg = NULL;

	if (frame_recv(fd, &hdr, &payload, NULL, CONFIG_TIMEOUT_MS) < 0)
		return NULL;
	if (hdr.type == FRAME_AGENT_CONFIG)
		cfg = profd__agent_config__unpack(NULL, hdr.length, payload);
	free(payload);
	return cfg;
}

/*
 * The table's scratch: on the stack when it is small, as a process of a
 * tree with a narrow glob has it. Its first send is the flusher thread's
 * first allocation otherwise, and glibc gives that thread an arena of its
 * own (a 64 MiB reservation mapped and trimmed: ~0.1 ms per process).
 */
#define TABLE_STACK_ENTRIES 16
#define TABLE_STACK_BYTES 4096

struct table_scratch {
	Profd__InstrumentedFunction fns[TABLE_STACK_ENTRIES];
	Profd__InstrumentedFunction *fn_ptrs[TABLE_STACK_ENTRIES];
	Profd__InstrumentedFunction untimed[TABLE_STACK_ENTRIES];
	Profd__InstrumentedFunction *untimed_ptrs[TABLE_STACK_ENTRIES];
	Profd__SkippedFunction sk[TABLE_STACK_ENTRIES];
	Profd__SkippedFunction *sk_ptrs[TABLE_STACK_ENTRIES];
	uint8_t buf[TABLE_STACK_BYTES];
};

/* n zeroed elements of size: from the scratch array when they fit, else calloc'ed. */
static void *table_array(void *scratch, size_t n, size_t size)
{
	if (n <= TABLE_STACK_ENTRIES) {
		memset(scratch, 0, n * size);
		return scratch;
	}
	return calloc(n, size);
}

static void table_array_free(void *p, const struct table_scratch *scratch)
{
	if ((const uint8_t *)p < (const uint8_t *)scratch ||
	    (const uint8_t *)p >= (const uint8_t *)(scratch + 1))
		free(p);
}

/* A written patch made for its stub's flags only (no function timed through it). */
static bool patch_untimed(const struct pending_patch *pp)
{
	return pp->function < 0 && pp->written;
}

static size_t count_untimed(const struct pending_patch *patches, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += patch_untimed(&patches[i]);
	return k;
}

/*
 * The untimed patches of [0, n): their stubs, so that profd's stub map
 * knows every stub a sample can be taken in. Returns how many went into
 * out and ptrs (count_untimed's, from table_array).
 */
static size_t table_untimed_stubs(const struct pending_patch *patches, size_t n,
				  Profd__InstrumentedFunction *out, Profd__InstrumentedFunction **ptrs)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!patch_untimed(&patches[i]))
			continue;
		profd__instrumented_function__init(&out[k]);
		out[k].address = patches[i].function_address;
		out[k].stub = patches[i].jump.target;
		out[k].stub_same_offsets = patches[i].same_offsets;
		ptrs[k] = &out[k];
		k++;
	}
	return k;
}

static int send_function_table(int fd, const struct instrument_report *r,
			       const struct pending_patch *patches, size_t n_patches)
{
	size_t n_listed = 0, n_sk = r->n_skipped + r->n_functions + 1;
	size_t n_untimed = count_untimed(patches, n_patches);
	struct table_scratch scratch;
	Profd__FunctionTable table = PROFD__FUNCTION_TABLE__INIT;
	Profd__InstrumentedFunction *fns = table_array(scratch.fns, r->n_functions + 1,
							sizeof(*fns));
	Profd__InstrumentedFunction **fn_ptrs = table_array(scratch.fn_ptrs, r->n_functions + 1,
							     sizeof(*fn_ptrs));
	Profd__SkippedFunction *sk = table_array(scratch.sk, n_sk, sizeof(*sk));
	Profd__SkippedFunction **sk_ptrs = table_array(scratch.sk_ptrs, n_sk, sizeof(*sk_ptrs));
	Profd__InstrumentedFunction *untimed = table_array(scratch.untimed, n_untimed,
							    sizeof(*untimed));
	Profd__InstrumentedFunction **untimed_ptrs = table_array(scratch.untimed_ptrs, n_untimed,
								  sizeof(*untimed_ptrs));
	uint8_t *buf = NULL;
	size_t len;
	int err = -ENOMEM;

	if (!fns || !fn_ptrs || !sk || !sk_ptrs || !untimed || !untimed_ptrs)
		goto out;
	for (size_t i = 0; i < r->n_functions; i++) {
		const struct instrumented_function *f = &r->functions[i];

		if (f->dropped) { /* dropped at commit: listed with the skipped */
			profd__skipped_function__init(&sk[r->n_skipped + i]);
			sk[r->n_skipped + i].name = f->name;
			sk[r->n_skipped + i].module = (char *)f->module;
			sk[r->n_skipped + i].reason = (char *)f->dropped;
			continue;
		}
		profd__instrumented_function__init(&fns[n_listed]);
		fns[n_listed].id = f->id;
		fns[n_listed].name = f->name;
		fns[n_listed].module = (char *)f->module;
		fns[n_listed].address = f->address;
		fns[n_listed].size = f->size;
		fns[n_listed].stub = f->stub;
		fns[n_listed].stub_same_offsets = (uint32_t)f->stub_same_offsets;
		fn_ptrs[n_listed] = &fns[n_listed];
		n_listed++;
	}
	for (size_t i = 0; i < r->n_skipped; i++) {
		profd__skipped_function__init(&sk[i]);
		sk[i].name = r->skipped[i].name;
		sk[i].module = (char *)r->skipped[i].module;
		sk[i].reason = (char *)r->skipped[i].reason;
	}
	for (size_t i = 0; i < r->n_skipped + r->n_functions; i++)
		if (sk[i].base.descriptor)
			sk_ptrs[table.n_skipped++] = &sk[i];
	table.n_functions = n_listed;
	table.functions = fn_ptrs;
	table.skipped = sk_ptrs;
	table.matched = r->matched;
	table.patch_time_ns = r->elapsed_ns;
	table.n_warnings = r->n_warnings;
	table.warnings = r->warnings;
	table.modules_scanned = r->modules_scanned;
	table.exit_trampoline = (uintptr_t)profagent_exit_trampoline;
	table.n_untimed_stubs = table_untimed_stubs(patches, n_patches, untimed, untimed_ptrs);
	table.untimed_stubs = untimed_ptrs;
	len = profd__function_table__get_packed_size(&table);
	while (len > FRAME_PAYLOAD_MAX && table.n_skipped > 0) {
		table.n_skipped /= 2; /* the daemon is told how many matched; the rest is detail */
		len = profd__function_table__get_packed_size(&table);
	}
	buf = len <= sizeof(scratch.buf) ? scratch.buf : malloc(len);
	if (!buf)
		goto out;
	profd__function_table__pack(&table, buf);
	err = flusher_send_frame(fd, FRAME_FUNCTION_TABLE, buf, len);
out:
	table_array_free(buf, &scratch);
	table_array_free(fns, &scratch);
	table_array_free(fn_ptrs, &scratch);
	table_array_free(sk, &scratch);
	table_array_free(sk_ptrs, &scratch);
	table_array_free(untimed, &scratch);
	table_array_free(untimed_ptrs, &scratch);
	return err;
}


/* What was not sent yet: the whole table first, then what modules loaded later added. */
static int send_table_from_plan(void *ctx, int sock)
{
	const struct instrument_plan *plan = ctx;
	const struct instrument_report *r = &plan->report;
	struct instrument_report news = *r;
	int err;

	news.functions += agent.sent.functions;
	news.n_functions -= agent.sent.functions;
	news.skipped += agent.sent.skipped;
	news.n_skipped -= agent.sent.skipped;
	news.warnings += agent.sent.warnings;
	news.n_warnings -= agent.sent.warnings;
	news.matched -= agent.sent.matched;
	err = send_function_table(sock, &news, plan->patches + agent.sent.patches,
				  plan->n_patches - agent.sent.patches);
	if (err >= 0)
		agent.sent = (struct table_cursor){ r->n_functions, r->n_skipped, r->n_warnings,
						    plan->n_patches, r->matched };
	/* a module loaded later is patched already: its values come with profd's answer */
	if (err >= 0 && agent.auto_args && agent.auto_asked < r->n_functions &&
	    arg_auto_ask(sock, ctx, agent.auto_asked) == 0)
		agent.auto_asked = r->n_functions;
	return err;
}

/* The flusher took a frame of profd's: the answer to arg_auto_ask, or an earlier late one. */
static int agent_daemon_frame(void *ctx, int sock, uint32_t type, const uint8_t *payload,
			      size_t len)
{
	if (type != FRAME_AUTO_ARGS || agent.state != AGENT_ACTIVE)
		return -EPROTO;
	return arg_auto_late(sock, ctx, payload, len);
}

/* A thread in dlopen/dlclose passed _dl_debug_state: the new module's code runs nowhere yet. */
static void agent_update_modules(void)
{
	int added = 0;

	if (agent.state != AGENT_ACTIVE || !agent.filter)
		return;
	flusher_table_lock();
	/* again under the lock: the flusher may have unpatched everything meanwhile */
	if (agent.state == AGENT_ACTIVE)
		added = instrument_update_modules(agent.filter, &agent.plan) > 0;
	flusher_table_unlock(added);
}

/*
 * On the flusher thread, once the daemon is gone (recording is off): the
 * program should not go on through trampolines that record nothing, and no
 * profctl will detach, so the original bytes go back from here with every
 * other thread stopped (world_stop_others). Where they may not be stopped
 * (a tracer, seccomp, Yama) the patches stay as pass-through, for a later
 * attach to remove (profagent_reset_stale). The table lock keeps a dlopen
 * from patching meanwhile. The socket is the flusher's to close.
 */
static void agent_daemon_lost(void *ctx)
{
	int err = -EAGAIN;

	(void)ctx;
	flusher_table_lock();
	agent.sock = -1;
	/* a thread that would not stop (D state, vfork) may a moment later */
	for (int i = 0; i < UNPATCH_TRIES && err && err != -EPERM && err != -ECANCELED; i++) {
		if (i)
			nanosleep(&(struct timespec){ 0, UNPATCH_RETRY_NS }, NULL);
		err = world_stop_others();
	}
	if (!err) {
		/* profctl may have detached meanwhile: it stops the threads from outside */
		if (agent.state == AGENT_ACTIVE && instrument_unpatch(&agent.plan) == 0)
			agent.state = AGENT_UNPATCHED; /* else left to profagent_reset_stale */
		world_resume_others();
	}
	flusher_table_unlock(0);
}

static uint32_t plan_functions(void *ctx)
{
	return (uint32_t)((struct instrument_plan *)ctx)->report.n_functions;
}

static const struct flusher_ops agent_flusher_ops = {
	.send_table = send_table_from_plan,
	.functions = plan_functions,
	.lost = agent_daemon_lost,
	.frame = agent_daemon_frame,
};

static void agent_forked_connect(bool at_exit);

/*
 * A process's flusher thread starts at a slow path once it has lived this
 * long (or its rings fill), where starting one is safe: a short process of
 * a tree (a compiler's driver, a shell's `$(...)`, a test's helper) starts
 * none, its exit drain sends all. Most of what bench/process_tree.sh's
 * process paid beyond its start (150-300 us, bench/README.md).
 */
#define FLUSHER_DEFER_NS (20ull * 1000 * 1000)
#define FLUSHER_DEFER_MAX_MS 60000

/*
 * PROFD_FLUSHER_DELAY_MS, else FLUSHER_DEFER_NS: a test that must tell a
 * process under the delay from one past it on a loaded machine (whose
 * scheduler may hold a process of a millisecond for tens) makes it wide.
 */
static uint64_t flusher_delay_from_env(void)
{
	const char *ms = getenv("PROFD_FLUSHER_DELAY_MS");
	char *end;
	unsigned long v = ms ? strtoul(ms, &end, 10) : 0;

	if (!ms || !*ms || *end || v > FLUSHER_DEFER_MAX_MS)
		return FLUSHER_DEFER_NS;
	return (uint64_t)v * 1000 * 1000;
}

enum flusher_start_mode { FLUSHER_NOW, FLUSHER_DEFERRABLE, FLUSHER_INHERITED, FLUSHER_AT_EXIT };

/*
 * Deferred (a run's process and any forked child; an attach's process has
 * its thread at once) when it may start threads from its slow paths (not Go,
 * whose runtime.exit hook waits for the thread; no function timed where
 * malloc's lock may be held: thread_start_plan_allows).
 */
static int flusher_start_as(int sock, enum flusher_start_mode mode)
{
	/* the session's first start decides, for its forked children too */
	if (mode == FLUSHER_NOW || mode == FLUSHER_DEFERRABLE)
		agent.defer_flusher = !agent.plan.report.go_exit_hooked &&
				      thread_start_plan_allows(&agent.plan.report);
	if (mode == FLUSHER_NOW) /* an attach: the target's environment is not the session's */
		agent.flusher_delay_ns = FLUSHER_DEFER_NS;
	if (mode == FLUSHER_AT_EXIT)
		return flusher_start_at_exit(sock, &agent_flusher_ops, &agent.plan);
	if (mode != FLUSHER_NOW && agent.defer_flusher)
		return flusher_start_deferred(sock, &agent_flusher_ops, &agent.plan,
					      agent.flusher_delay_ns);
	return flusher_start(sock, &agent_flusher_ops, &agent.plan);
}

/*
 * The signal mask a thread's first slow path saw (its state being set up):
 * its usual one. A server's threads often block the signals another thread
 * handles; only a handled signal blocked beyond that may mean its handler
 * runs (thread_start_safe_here). 0 for a thread whose state was set up elsewhere.
 */
static __thread uint64_t thread_usual_mask __attribute__((tls_model("initial-exec")));

/*
 * rt_sigprocmask without libc: its wrappers may be instrumented, and the
 * thread's first call has no state to record them with yet.
 */
static void signals_mask(int how, const uint64_t *set, uint64_t *old)
{
#if defined(__x86_64__)
	long ret;
	register long sigsetsize __asm__("r10") = sizeof(*set);

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_rt_sigprocmask), "D"((long)how), "S"(set), "d"(old),
			   "r"(sigsetsize)
			 : "rcx", "r11", "memory");
	(void)ret;
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = how;
	register long x1 __asm__("x1") = (long)set;
	register long x2 __asm__("x2") = (long)old;
	register long x3 __asm__("x3") = sizeof(*set);
	register long x8 __asm__("x8") = SYS_rt_sigprocmask;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x3), "r"(x8) : "memory");
#else
#error "signals_mask: no raw syscall for this architecture"
#endif
}

/*
 * The trampoline's slow path, with every vector register saved. It runs
 * ordinary C that takes locks and allocates (a thread's state, new modules),
 * so every signal is blocked meanwhile: a handler that left it by siglongjmp
 * would leave a lock held or the thread guarded for good. A handler that ran
 * just before the block may have attached the thread already.
 */
int profagent_enter_slow(int reason)
{
	const uint64_t all = ~0ull;
	uintptr_t saved_guard;
	uint64_t saved_mask;
	int again = 0;

	signals_mask(SIG_SETMASK, &all, &saved_mask);
	saved_guard = agent_thread_guard;
	/* a child that recorded nothing and execs has nothing to send: its new image connects */
	if (agent.fork_pending && reason != HOOK_SLOW_EXEC) {
		agent_thread_guard = AGENT_GUARD_AGENT;
		agent_forked_connect(reason == HOOK_SLOW_EXIT);
		agent_thread_guard = saved_guard;
	}
	if (reason == HOOK_SLOW_THREAD) {
		if (!agent_current_thread && !saved_guard) {
			profagent_thread_attach_slow(); /* leaves the guard set if it fails */
			thread_usual_mask = saved_mask;
		}
		again = 1; /* ask the enter hook again, now that the thread has its state */
	} else if (reason == HOOK_SLOW_MEMORY) {
		struct agent_thread *t = agent_current_thread;

		agent_thread_guard = AGENT_GUARD_AGENT;
		if (t && t->want_agg_page)
			threads_map_agg_page(t, t->want_agg_page - 1);
		if (t && t->want_ready)
			segments_populate(t);
		if (t && t->want_spare)
			segments_refill_spare(t);
		agent_thread_guard = saved_guard;
		again = 1;
	} else if (reason == HOOK_SLOW_MODULES) {
		agent_thread_guard = AGENT_GUARD_AGENT;
		agent_update_modules();
		agent_thread_guard = saved_guard;
	} else if (reason == HOOK_SLOW_EXIT && agent.state == AGENT_ACTIVE) {
		/* the destructor's work: _exit runs none (a vfork child's flusher is its parent's) */
		agent_thread_guard = AGENT_GUARD_AGENT;
		flusher_exit_drain("process exit (_exit)");
		agent_thread_guard = saved_guard;
	} else if (reason == HOOK_SLOW_EXEC && agent.state == AGENT_ACTIVE) {
		agent_thread_guard = AGENT_GUARD_AGENT;
		flusher_exec_flush();
		agent_thread_guard = saved_guard;
	}
	/* not where the loader (MODULES) or an exit calls: only a thread's own calls */
	if ((reason == HOOK_SLOW_MEMORY || reason == HOOK_SLOW_THREAD) && !saved_guard &&
	    !agent_thread_guard && agent.state == AGENT_ACTIVE && flusher_deferred()) {
		agent_thread_guard = AGENT_GUARD_AGENT;
		flusher_start_if_due(saved_mask & ~thread_usual_mask);
		agent_thread_guard = 0;
	}
	signals_mask(SIG_SETMASK, &saved_mask, NULL);
	return again;
}

/*
 * Fork (the child, before fork returns in it): only async-signal-safe work,
 * the parent may have had threads holding any lock. Without follow_children
 * the child keeps running what it inherited but records nothing. With it,
 * the calling thread records on from its first instruction here, into its
 * own figures and (once connected) its own stream: the parent's connection,
 * flusher and rings are forgotten, and the connection is made later, in
 * agent_forked_connect, outside this handler.
 */
static void atfork_child(void)
{
	int follow = agent.state == AGENT_ACTIVE && agent.follow_children &&
		     (agent.path[0] || agent.spawner >= 0);

	flusher_forget_after_fork();
	agent.sock = -1;
	agent.link = -1;
	if (!follow) {
		hooks_set_recording(0);
		agent.state = AGENT_IDLE;
		return;
	}
	flusher_read_clock_pair(&agent.fork_pair);
	segments_after_fork();
	threads_after_fork();
	agent.sent = (struct table_cursor){ 0 };
	agent.forked_from = (pid_t)syscall(SYS_getppid);
	agent.fork_pending = 1;
}

/*
 * A forked child's first slow path (or its exit): its own connection to
 * profd, its hello as the parent's fork (it sends the inherited table
 * again), its flusher. Signals are blocked (the slow path) and the guard
 * held. When profd does not take it, the child records nothing more; the
 * patches stay as pass-through. At its exit (at_exit: its destructor, or
 * _exit's hook, which a signal handler may have called), no thread: the
 * exit drain sends what it has (flusher_start_at_exit).
 */
/* A link of our own, its profd end handed over through the spawner; our end, or -errno. */
static int spawner_connect(void)
{
	int sv[2], err;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	/* profd knows us by the pair's SO_PEERCRED: its creator, this process */
	err = frame_send(agent.spawner, FRAME_AGENT_LINK, NULL, 0, sv[1]);
	close(sv[1]);
	if (err < 0) {
		close(sv[0]);
		return err;
	}
	return sv[0];
}

static void agent_forked_connect(bool at_exit)
{
	Profd__AgentConfig *cfg = NULL;
	int sock, follow = 0;

	agent.fork_pending = 0;
	sock = agent.path[0] ? frame_connect_unix(agent.path) : spawner_connect();
	if (sock >= 0 && send_hello(sock, agent.token, agent.forked_from, agent.config_known) >= 0) {
		if (agent.config_known) /* its parent's config holds: profd closes to refuse */
			follow = 1;
		else if ((cfg = receive_config(sock)))
			follow = cfg->follow_children;
	}
	if (follow && flusher_start_as(sock, at_exit ? FLUSHER_AT_EXIT : FLUSHER_INHERITED) == 0) {
		agent.sock = sock;
		flusher_release(&agent.fork_pair);
	} else {
		hooks_set_recording(0);
		agent.state = AGENT_UNPATCHED; /* nobody will unpatch: pass-through, quiet */
		if (sock >= 0)
			close(sock);
	}
	if (cfg)
		profd__agent_config__free_unpacked(cfg, NULL);
}

/* The pair's end profctl did not take to profd: an attach that gave up before it connected. */
static void agent_link_close(void)
{
	if (agent.link >= 0)
		close(agent.link);
	agent.link = -1;
}

/* "" connects through the socket pair profagent_link_open made; else to the socket at path. */
static int agent_connect(const char *path)
{
	int fd = agent.link;

	if (path[0]) {
		agent_link_close(); /* made, but profctl could not hand it over */
		return frame_connect_unix(path);
	}
	agent.link = -1;
	return fd >= 0 ? fd : -ENOTCONN;
}

static void agent_close(void)
{
	if (agent.sock >= 0)
		close(agent.sock);
	agent.sock = -1;
	if (agent.spawner >= 0) /* forked children keep their copies while they record */
		close(agent.spawner);
	agent.spawner = -1;
	agent_link_close();
	instrument_plan_free(&agent.plan);
	func_filter_free(agent.filter);
	agent.filter = NULL;
	agent.sent = (struct table_cursor){ 0 };
	agent.auto_args = false;
	agent.auto_asked = 0;
	agent.config_known = 0;
	agent.state = AGENT_IDLE;
}

/* The loader's: where the main thread's stack ends (glibc's pthread_getattr_np starts there). */
extern void *__libc_stack_end;

/* The main thread's stack from the maps the plan read, for its first call (threads.c). */
static void main_stack_from_maps(const struct proc_maps *maps)
{
	struct rlimit rl;
	uint64_t lo, hi;

	if (!getrlimit(RLIMIT_STACK, &rl) &&
	    !proc_maps_main_stack(maps, (uint64_t)(uintptr_t)__libc_stack_end, rl.rlim_cur,
				  (uint64_t)sysconf(_SC_PAGESIZE), &lo, &hi))
		threads_set_main_stack((uintptr_t)lo, (uintptr_t)hi);
}

/* Says hello; the config is preset (then nothing is awaited) or profd's reply; NULL on failure. */
static Profd__AgentConfig *agent_handshake(const char *token, Profd__AgentConfig *preset)
{
	if (send_hello(agent.sock, token, 0, preset != NULL) < 0)
		return NULL;
	agent.config_known = preset != NULL;
	return preset ? preset : receive_config(agent.sock);
}

/*
 * Connects, gets the patterns (preset: the environment's, still the
 * caller's; else profd's), builds every stub; nothing is patched yet.
 */
static int agent_prepare(const char *path, const char *token, Profd__AgentConfig *preset,
			 enum flusher_start_mode flusher_mode)
{
	Profd__AgentConfig *cfg;
	struct func_filter *filter = NULL;
	struct module_presets presets = { 0 };
	char err_text[256];
	bool auto_args;
	int err;

	if (agent.state != AGENT_IDLE)
		return -EBUSY;
	if (threads_init() || (!agent.atfork_registered && pthread_atfork(NULL, NULL, atfork_child)))
		return -ENOMEM;
	agent.atfork_registered = 1;
	agent.sock = agent_connect(path);
	if (agent.sock < 0)
		return agent.sock;
	if (!(cfg = agent_handshake(token, preset))) {
		agent_close();
		return -ECONNREFUSED;
	}
	segments_set_budget(cfg->buffer_size);
	agent.follow_children = cfg->follow_children;
	/* a forked child connects where we did (a link cannot be shared: it does not follow) */
	snprintf(agent.path, sizeof(agent.path), "%s", path);
	snprintf(agent.token, sizeof(agent.token), "%s", token);
	hooks_set_filters(cfg->min_duration_ticks, cfg->max_depth);
	/* specs profd checked: a refusal (an architecture without capture) is a warning of the table */
	arg_capture_configure(cfg->arg_specs, cfg->n_arg_specs, cfg->retval_specs,
			      cfg->n_retval_specs, cfg->args_string_max);
	err = func_filter_parse((const char *const *)cfg->func_patterns, cfg->n_func_patterns,
				&filter, err_text, sizeof(err_text));
	auto_args = cfg->auto_args;
	if (cfg == preset) /* profctl's (the caller's until we return): profd sends none */
		presets = (struct module_presets){ cfg->preset_modules, cfg->n_preset_modules };
	else
		profd__agent_config__free_unpacked(cfg, NULL);
	if (!err) {
		instrument_set_presets(module_presets_lookup, &presets);
		err = instrument_prepare(filter, &agent.plan);
		instrument_set_presets(NULL, NULL);
	}
	if (!err)
		main_stack_from_maps(&agent.plan.maps);
	agent.filter = filter;
	/* before the flusher takes the socket and before anything is patched: every call has values */
	if (!err && auto_args &&
	    arg_auto_query(agent.sock, &agent.plan, 0, ARG_AUTO_TIMEOUT_MS, err_text,
			   sizeof(err_text)) < 0)
		instrument_report_warn(&agent.plan.report, err_text);
	/* asked, answered or not: an answer that comes late is installed then */
	agent.auto_args = auto_args;
	agent.auto_asked = agent.plan.report.n_functions;
	if (!err)
		err = flusher_start_as(agent.sock, flusher_mode);
	if (err) {
		agent_close();
		return err;
	}
	agent.state = AGENT_PREPARED;
	return 0;
}

/* Threads keep their rings across sessions: what an earlier session left is not ours. */
static void forget_earlier_session(struct agent_thread *t, void *ctx)
{
	(void)ctx;
	uint64_t state = atomic_load(&t->committed);

	for (uint64_t k = atomic_load(&t->tail) / SEGMENT_SPAN; k < state_head(state) / SEGMENT_SPAN;
	     k++)
		segments_release(t, k);
	atomic_store(&t->tail, state_head(state));
	threads_clear_aggregates(t);
	t->drops_reported = 0;
	t->flusher_stage = FLUSHER_STAGE_NEW;
	for (uint32_t i = 0; i < state_depth(state); i++) {
		/*
		 * still returns through us, recorded no more: no function, and of
		 * its flags only how it signs its return (aarch64), so that
		 * x86_64.S's exit fast path, which tests the flags alone, leaves it
		 */
		t->shadow[i].func_id = 0;
		t->shadow[i].flags &= SHADOW_SIGNS_RA_A | SHADOW_SIGNS_RA_B;
	}
}

/* Patches (all other threads stopped, or none yet); allocates nothing. */
static int agent_commit(const uint64_t *ips, size_t n_ips, int all_or_nothing)
{
	struct event_clock_pair pair;
	int written;

	if (agent.state != AGENT_PREPARED)
		return -EINVAL;
	written = instrument_commit(&agent.plan, ips, n_ips, all_or_nothing);
	if (written == -EAGAIN)
		return written;
	threads_for_each_stopped(forget_earlier_session, NULL);
	flusher_read_clock_pair(&pair);
	hooks_set_recording(1);
	agent.state = AGENT_ACTIVE;
	/* last: a flusher whose daemon is gone unpatches once released, and must see ACTIVE */
	flusher_release(&pair);
	return written;
}

/*
 * profctl attach, step 0 (other threads running): a socket pair to reach
 * profd by, for a target that cannot open profd's socket (another user) or
 * see it (another mount namespace). The agent keeps one end; the other's
 * number is returned for profctl to take (pidfd_getfd, with its ptrace
 * rights), hand to profd and close here. Returns it, or a negative errno.
 */
__attribute__((visibility("default"))) int profagent_link_open(void)
{
	int sv[2];

	if (agent.state != AGENT_IDLE)
		return -EBUSY;
	agent_link_close();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	agent.link = sv[0];
	return sv[1];
}

/*
 * profctl attach --children, after step 0: the spawner pair (see agent.spawner);
 * returns the number of the end for profctl to hand to profd, or -errno.
 */
__attribute__((visibility("default"))) int profagent_spawner_open(void)
{
	int sv[2];

	if (agent.state != AGENT_IDLE)
		return -EBUSY;
	if (agent.spawner >= 0)
		close(agent.spawner);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	agent.spawner = sv[0];
	return sv[1];
}

/*
 * profctl attach, step 1 (other threads running): connect to profd and
 * present the session token, given as one string "SOCKET_PATH\nTOKEN" (one
 * block of data for the remote call), then build the stubs. An empty
 * SOCKET_PATH takes the link profagent_link_open made. Returns 0 or a
 * negative errno.
 */
__attribute__((visibility("default"))) int profagent_attach(const char *socket_and_token)
{
	char path[256];
	const char *nl = strchr(socket_and_token, '\n');
	int err;

	if (!nl || (size_t)(nl - socket_and_token) >= sizeof(path))
		return -EINVAL;
	memcpy(path, socket_and_token, (size_t)(nl - socket_and_token));
	path[nl - socket_and_token] = '\0';
	agent_thread_guard = 1;
	err = agent_prepare(path, nl + 1, NULL, FLUSHER_NOW); /* a running process: no deferring */
	agent_thread_guard = 0;
	return err;
}

/*
 * profctl attach, step 2 (every other thread stopped at ips[]): write the
 * jumps. With all_or_nothing, -EAGAIN and nothing written when a thread is
 * executing bytes to be replaced (profctl lets the threads move and retries);
 * else such functions are skipped. Returns how many jumps were written.
 */
__attribute__((visibility("default"))) int profagent_commit(const uint64_t *ips, size_t n_ips,
							   int all_or_nothing)
{
	int r;

	agent_thread_guard = 1;
	r = agent_commit(ips, n_ips, all_or_nothing);
	agent_thread_guard = 0;
	return r;
}

/* profctl detach, step 1 (every other thread stopped): original bytes back. */
__attribute__((visibility("default"))) int profagent_unpatch(void)
{
	int err;

	if (agent.state != AGENT_ACTIVE)
		return -EINVAL;
	agent_thread_guard = 1;
	hooks_set_recording(0);
	err = instrument_unpatch(&agent.plan);
	agent.state = AGENT_UNPATCHED;
	agent_thread_guard = 0;
	return err;
}

/*
 * profctl detach, step 2 (other threads running): final drain, goodbye,
 * flusher gone, socket closed. The stubs stay mapped: frames may still
 * return through them. A later attach starts over.
 */
__attribute__((visibility("default"))) int profagent_stop(void)
{
	int err;

	if (agent.state == AGENT_IDLE)
		agent_link_close(); /* attach gave up before its step 1 */
	if (agent.state != AGENT_UNPATCHED && agent.state != AGENT_PREPARED)
		return -EINVAL;
	agent_thread_guard = 1;
	if (agent.state == AGENT_PREPARED) /* attach gave up between its steps */
		flusher_release(&(struct event_clock_pair){ 0, 0 });
	err = flusher_stop("detach", true);
	if (!err)
		agent_close();
	agent_thread_guard = 0;
	return err;
}

/*
 * profctl attach, before step 1, with every other thread stopped: a session
 * whose daemon went away (killed, or it ended the session) left its patches;
 * put the bytes back and forget it. Returns 0 when the agent is free,
 * -EBUSY when a live session is using it.
 */
__attribute__((visibility("default"))) int profagent_reset_stale(void)
{
	if (agent.state == AGENT_IDLE)
		return 0;
	if (!flusher_lost())
		return -EBUSY;
	agent_thread_guard = 1;
	hooks_set_recording(0);
	if (agent.state == AGENT_ACTIVE)
		instrument_unpatch(&agent.plan);
	flusher_stop("stale", false); /* the flusher thread has returned: the join does not wait */
	agent_close();
	agent_thread_guard = 0;
	return 0;
}

/*
 * Preloaded into a qemu-user guest by `profctl run` (PROFD_AGENT_GUEST, set
 * with LD_PRELOAD through QEMU_SET_ENV): a program it execs runs on the host
 * (qemu follows no exec), whose loader cannot load us and would say so on
 * the program's stderr. So LD_PRELOAD loses its first entry, ours.
 */
static void guest_forget_preload(void)
{
	const char *preload = getenv("LD_PRELOAD");
	const char *rest = preload ? strchr(preload, ':') : NULL;

	if (!getenv("PROFD_AGENT_GUEST"))
		return;
	unsetenv("PROFD_AGENT_GUEST");
	if (rest && rest[1])
		setenv("LD_PRELOAD", rest + 1, 1);
	else
		unsetenv("LD_PRELOAD");
}

/* glibc calls ELF constructors with the program's argc, argv and environment */
__attribute__((constructor)) static void agent_start(int argc, char **argv, char **envp)
{
	const char *path = getenv("PROFD_AGENT_SOCKET");
	const char *token = getenv("PROFD_AGENT_TOKEN");
	Profd__AgentConfig *preset;

	(void)envp;
	guest_forget_preload();
	if (!path || !token)
		return; /* dlopen'ed by profctl attach: it calls profagent_attach */
	agent_thread_guard = 1; /* agent code runs: instrumented calls pass through */
	start_cmdline_set(argc, argv);
	agent.flusher_delay_ns = flusher_delay_from_env();
	preset = config_from_env();
	if (agent_prepare(path, token, preset, FLUSHER_DEFERRABLE) == 0)
		agent_commit(NULL, 0, 0); /* process start: no other thread runs our code yet */
	if (preset)
		profd__agent_config__free_unpacked(preset, NULL);
	agent_thread_guard = 0;
}

__attribute__((destructor)) static void agent_stop(void)
{
	if (agent.fork_pending) { /* a forked child that recorded nothing yet: its figures still go */
		agent_thread_guard = 1;
		agent_forked_connect(true);
	}
	if (agent.state != AGENT_ACTIVE)
		return;
	agent_thread_guard = 1;
	flusher_exit_drain("process exit");
}
