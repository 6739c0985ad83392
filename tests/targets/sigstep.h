/* SPDX-License-Identifier: MIT */
/*
 * What sigstep_target.c (the program under test) and sigstep_tracer.c (the
 * ptrace harness it starts) share: struct sigstep_ctl, in a memfd both map,
 * the modes of a probe run and what a visit can find wrong. They are built
 * as two programs, so the tracer checks the struct's size against the
 * target's. Nothing in here may allocate or refer to either program's code.
 */
#ifndef PROFD_SIGSTEP_H
#define PROFD_SIGSTEP_H

#include <stdint.h>
#include <sys/types.h>

#include "stub_landing.h"

#define SIGSTEP_UNUSED __attribute__((unused))
#define N_PASSES 4

static const char *const pass_names[N_PASSES + 1] SIGSTEP_UNUSED = {
	"", "handler calls ss_ functions", "handler on a sigaltstack",
	"nested SA_NODEFER handlers", "handler leaves by siglongjmp",
};

/* The instrumented functions, in the order of ss_calls[]. */
enum ss_id {
	SS_OUTER, SS_INNER, SS_RECURSE, SS_JUMP_OUTER, SS_JUMP_LEAF, SS_AFTER_JUMP, SS_CATCH,
	SS_BT_OUTER, SS_BT, SS_REGS_LEAF, SS_HANDLER_WORK, SS_SETTLE, SS_ARGS,
	SS_INTS, SS_COUNT
};
static const char *const ss_names[SS_COUNT] SIGSTEP_UNUSED = {
	"ss_outer", "ss_inner", "ss_recurse", "ss_jump_outer", "ss_jump_leaf", "ss_after_jump",
	"ss_catch", "ss_bt_outer", "ss_bt", "ss_regs_leaf", "ss_handler_work", "ss_settle",
	"ss_args", "ss_ints",
};

/* What the worker does after its begin marker; the tracer sets it while the worker is stopped. */
enum mode { MODE_SETUP = 1, MODE_LEARN, MODE_VISIT, MODE_RETIRE, MODE_DONE };

enum category { CAT_ENTER, CAT_EXIT, CAT_TRAMP, CAT_STUB, CAT_OTHER, N_CATS };
static const char *const cat_names[N_CATS] SIGSTEP_UNUSED = {
	"enter hook", "exit hook", "trampolines", "stubs", "other",
};

/*
 * What went wrong in one visit: the worker's checks, then the tracer's own.
 * After any of them the thread is retired and a fresh one continues. (A
 * handler's calls that pass through a hook are no failure: the agent counts
 * them as dropped, and the script checks that count.)
 */
#define OUT_PROBE 0x01      /* a probe call returned a wrong value */
#define OUT_REGS 0x02       /* a register changed across an instrumented call */
#define OUT_BACKTRACE 0x04  /* backtrace() did not see the true callers */
#define OUT_HANDLER 0x08    /* the handler ran the wrong number of times or computed wrong */
#define OUT_FLOW 0x10       /* the probe was abandoned, or was not when it should have been */
#define OUT_LOST 0x20       /* the probe's own calls went unrecorded: the thread stopped */
#define OUT_CRASH 0x40      /* the worker died of a signal */
#define OUT_DIVERGED 0x80   /* the next probe no longer ran the learned path */
#define OUT_MOVED 0x100     /* the worker came back to its loop on a moved stack */
static const char *const out_words[] SIGSTEP_UNUSED = {
	"wrong return values", "registers changed", "backtrace() saw wrong callers",
	"the handler went wrong", "wrong control flow", "the thread stopped recording its calls",
	"the worker crashed", "the probe's path changed",
	"the worker came back on a moved stack (a wrong return address)",
};

struct pass_stats {
	unsigned steps;   /* instructions in one probe (learned) */
	unsigned planned; /* of them in profiler code */
	unsigned cats[N_CATS];
	unsigned visited, failed, fatal, skipped;
	int complete;
};

struct sigstep_ctl {
	uint32_t size; /* sizeof(struct sigstep_ctl) as the target was built */

	/* the target, before it starts the tracer: where things are in it */
	pid_t pid;
	uintptr_t mark_begin, mark_end; /* the worker stops on their int3: rip = marker + 1 */
	uintptr_t entries[SS_COUNT];     /* each ss_ function's first instruction */
	uintptr_t calls;                 /* &ss_calls[0] */
	uintptr_t hijacked_return;       /* what ss_settle's hijacked slot holds; 0 unprofiled */

	/* target <-> tracer, each written while the other waits */
	pid_t tid;          /* the current worker, once warmed up */
	int warm_up_failed;
	int mode, pass;     /* tracer -> worker, while it is stopped at its begin marker */
	unsigned outcome;   /* worker -> tracer: OUT_* of the last probe */
	char detail[512];
	int respawn;        /* tracer -> main: the worker is retiring, start another */
	/*
	 * tracer -> pass 4's handler: the ss_ call entered but not yet counted
	 * where the signal was sent (-1: none), its return slot and its count
	 * then. The handler, which may run later (signals blocked), counts the
	 * call if it is still uncounted but recorded.
	 */
	int inflight;
	uintptr_t inflight_slot;
	long inflight_calls;

	/* tracer -> target's summary */
	unsigned respawns;
	unsigned visits_repeated; /* the probe took another path: made again (sigstep_tracer.c) */
	struct pass_stats stats[N_PASSES + 1];
	int stopped;        /* the tracer gave up before the end */
	int windows;        /* failing address ranges reported */
	int skip;           /* ptrace not possible here */
	char skip_reason[200];
	unsigned long singlesteps, stops;
	double learn_s, visit_s;
};

#endif
