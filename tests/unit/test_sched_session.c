// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/sched/sched_session.c and the writer's scheduler
 * events (viewer-export/perfetto_sched.c): probe records go in, the trace
 * comes out on a memfd and is decoded here field by field, apart from the
 * trace reader (test_trace_stream reads them back through it): SystemInfo
 * first, sched_switch / sched_waking / task_newtask / sched_process_free
 * with their fields, BOOTTIME timestamps, per-CPU chaining, other processes'
 * tasks hidden or shown, the target's off-CPU clocks, per-function sums and
 * the session's counts.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/sched/sched_session.h"
#include "tests/unit/unit.h"
#include "tests/unit/offcpu_check.h"
#include "viewer-export/perfetto_writer.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x80
#endif

#define T0 1000000000000ull /* CLOCK_MONOTONIC ns, as the probe gives them */
#define TARGET 1000
#define HIDDEN PERFETTO_SCHED_HIDDEN_TID

/* Field numbers: protos/perfetto/trace/ftrace/{ftrace_event_bundle,ftrace_event,sched,task}.proto, system_info.proto. */
enum {
	TP_FTRACE_EVENTS = 1, TP_SYSTEM_INFO = 45,
	FB_CPU = 1, FB_EVENT = 2, FB_LOST = 3,
	FE_TIMESTAMP = 1, FE_PID = 2,
	FE_SWITCH = 4, FE_WAKING = 20, FE_NEWTASK = 235, FE_FREE = 240,
	/* sched_switch */
	SW_PREV_COMM = 1, SW_PREV_PID, SW_PREV_PRIO, SW_PREV_STATE, SW_NEXT_COMM, SW_NEXT_PID,
	SW_NEXT_PRIO,
	/* sched_waking */
	WK_COMM = 1, WK_PID, WK_PRIO, WK_SUCCESS, WK_TARGET_CPU,
	/* task_newtask */
	NT_PID = 1, NT_COMM, NT_CLONE_FLAGS,
	/* sched_process_free */
	FR_COMM = 1, FR_PID, FR_PRIO,
};

/* ---- a minimal protobuf reader ------------------------------------------------ */

struct pb {
	const uint8_t *p, *end;
};

static bool pb_varint(struct pb *b, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	while (b->p < b->end && shift < 64) {
		uint8_t c = *b->p++;

		*v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return true;
		shift += 7;
	}
	return false;
}

/*
 * The next field: a varint in *v, or a length-delimited one in *sub (else
 * empty, p NULL). False at the end or on bad bytes.
 */
static bool pb_next(struct pb *b, uint32_t *field, uint64_t *v, struct pb *sub)
{
	uint64_t tag, len;

	*sub = (struct pb){ 0 };
	*v = 0;
	if (b->p >= b->end || !pb_varint(b, &tag))
		return false;
	*field = (uint32_t)(tag >> 3);
	switch (tag & 7) {
	case 0:
		return pb_varint(b, v);
	case 1:
		if (b->end - b->p < 8)
			return false;
		b->p += 8;
		return true;
	case 2:
		if (!pb_varint(b, &len) || len > (uint64_t)(b->end - b->p))
			return false;
		*sub = (struct pb){ b->p, b->p + len };
		b->p += len;
		*v = len;
		return true;
	case 5:
		if (b->end - b->p < 4)
			return false;
		b->p += 4;
		return true;
	}
	return false;
}

static void pb_str(const struct pb *s, char *out, size_t size)
{
	size_t n = (size_t)(s->end - s->p);

	if (n >= size)
		n = size - 1;
	memcpy(out, s->p, n);
	out[n] = '\0';
}

/* ---- the trace, decoded ---------------------------------------------------------- */

#define MAX_EVENTS 2048
#define MAX_FIELDS 8

struct ev {
	uint32_t cpu;           /* of its bundle */
	bool lost;              /* its bundle says events were lost */
	uint64_t ts;
	int64_t pid;            /* FtraceEvent.pid: who was running */
	uint32_t kind;          /* FE_SWITCH, FE_WAKING, FE_NEWTASK, FE_FREE */
	bool has[MAX_FIELDS];
	int64_t f[MAX_FIELDS];  /* the event's varint fields by number */
	char s[MAX_FIELDS][48]; /* its string fields */
};

struct trace {
	uint8_t *bytes;
	size_t len;
	int packets;
	int system_info_at, first_bundle_at; /* packet index, -1: none */
	int n_system_info, n_bundles;
	char sysname[64], release[256];
	size_t n;
	struct ev ev[MAX_EVENTS];
};

static void decode_event(struct pb b, uint32_t cpu, bool lost, struct trace *t)
{
	struct ev *e = t->n < MAX_EVENTS ? &t->ev[t->n++] : NULL;
	struct pb sub, inner;
	uint32_t field, f;
	uint64_t v, iv;

	CHECK(e != NULL);
	if (!e)
		return;
	*e = (struct ev){ .cpu = cpu, .lost = lost, .pid = -1 };
	while (pb_next(&b, &field, &v, &sub)) {
		if (field == FE_TIMESTAMP) {
			e->ts = v;
		} else if (field == FE_PID) {
			e->pid = (int32_t)v;
		} else {
			CHECK_EQ_INT(e->kind, 0); /* one event per FtraceEvent */
			e->kind = field;
			while (pb_next(&sub, &f, &iv, &inner)) {
				if (f >= MAX_FIELDS)
					continue;
				e->has[f] = true;
				e->f[f] = (int64_t)iv;
				if (inner.p)
					pb_str(&inner, e->s[f], sizeof(e->s[f]));
			}
		}
	}
	CHECK(b.p == b.end);
}

static void decode_bundle(struct pb b, struct trace *t)
{
	struct pb copy = b, sub;
	uint32_t field, cpu = UINT32_MAX;
	uint64_t v;
	bool lost = false;

	while (pb_next(&copy, &field, &v, &sub)) { /* cpu and lost_events first */
		if (field == FB_CPU)
			cpu = (uint32_t)v;
		if (field == FB_LOST)
			lost = v != 0;
	}
	CHECK(cpu != UINT32_MAX);
	while (pb_next(&b, &field, &v, &sub))
		if (field == FB_EVENT)
			decode_event(sub, cpu, lost, t);
}

static void decode_system_info(struct pb b, struct trace *t)
{
	struct pb sub, un;
	uint32_t field;
	uint64_t v;

	while (pb_next(&b, &field, &v, &sub)) {
		if (field != 1) /* utsname */
			continue;
		while (pb_next(&sub, &field, &v, &un)) {
			if (field == 1)
				pb_str(&un, t->sysname, sizeof(t->sysname));
			if (field == 3)
				pb_str(&un, t->release, sizeof(t->release));
		}
	}
}

/* Bundles go out CPU by CPU: events back in time order (stable: a free stays after its switch). */
static void sort_by_time(struct trace *t)
{
	for (size_t i = 1; i < t->n; i++) {
		struct ev e = t->ev[i];
		size_t j = i;

		for (; j > 0 && t->ev[j - 1].ts > e.ts; j--)
			t->ev[j] = t->ev[j - 1];
		t->ev[j] = e;
	}
}

/* Every packet of the file (a Trace: field 1, repeated), its events in time order. */
static void decode_trace(struct trace *t)
{
	struct pb file = { t->bytes, t->bytes + t->len }, pkt, sub;
	uint32_t field;
	uint64_t v;

	t->system_info_at = t->first_bundle_at = -1;
	while (pb_next(&file, &field, &v, &pkt)) {
		CHECK_EQ_INT(field, 1);
		while (pb_next(&pkt, &field, &v, &sub)) {
			if (field == TP_SYSTEM_INFO) {
				if (t->system_info_at < 0)
					t->system_info_at = t->packets;
				t->n_system_info++;
				decode_system_info(sub, t);
			} else if (field == TP_FTRACE_EVENTS) {
				if (t->first_bundle_at < 0)
					t->first_bundle_at = t->packets;
				t->n_bundles++;
				decode_bundle(sub, t);
			}
		}
		CHECK(pkt.p == pkt.end);
		t->packets++;
	}
	CHECK(file.p == file.end);
	sort_by_time(t);
}

/* The i-th event of kind (0: the first), or NULL (a failed check). */
static const struct ev *nth(const struct trace *t, uint32_t kind, int i)
{
	for (size_t k = 0; k < t->n; k++)
		if (t->ev[k].kind == kind && i-- == 0)
			return &t->ev[k];
	CHECK(!"no such event");
	return NULL;
}

static int count_kind(const struct trace *t, uint32_t kind)
{
	int n = 0;

	for (size_t k = 0; k < t->n; k++)
		n += t->ev[k].kind == kind;
	return n;
}

/* ---- a session writing to a memfd -------------------------------------------------- */

struct fixture {
	int fd;
	struct perfetto_writer *w;
	struct sched_session *ss;
};

static void fx_open(struct fixture *fx, bool see_other_tasks)
{
	fx->fd = memfd_create("sched-test", MFD_CLOEXEC);
	CHECK(fx->fd >= 0);
	fx->w = perfetto_writer_new(fx->fd);
	CHECK(fx->w != NULL);
	fx->ss = sched_session_new(&(struct sched_session_config){
		.target = TARGET, .writer = fx->w, .see_other_tasks = see_other_tasks });
	CHECK(fx->ss != NULL);
}

static void read_all(int fd, struct trace *t)
{
	struct stat st;

	CHECK_EQ_INT(fstat(fd, &st), 0);
	t->len = (size_t)st.st_size;
	t->bytes = malloc(t->len + 1);
	CHECK(t->bytes != NULL);
	CHECK_EQ_INT(pread(fd, t->bytes, t->len, 0), (long long)t->len);
}

/* Flushes, frees the session and writer, decodes the file. */
static struct trace *fx_close(struct fixture *fx)
{
	struct trace *t = calloc(1, sizeof(*t));

	CHECK(t != NULL);
	sched_session_free(fx->ss);
	CHECK_EQ_INT(perfetto_writer_free(fx->w), 0);
	read_all(fx->fd, t);
	close(fx->fd);
	decode_trace(t);
	return t;
}

static void trace_free(struct trace *t)
{
	free(t->bytes);
	free(t);
}

/* ---- probe records ------------------------------------------------------------------ */

struct task {
	uint32_t tid, tgid;
	const char *comm;
	int32_t prio;
};

static const struct task main_thread = { TARGET, TARGET, "target", 120 };
static const struct task worker = { TARGET + 1, TARGET, "worker", 125 };
static const struct task other = { 2000, 2000, "secretproc", 110 };
static const struct task daemon_task = { 3000, 3000, "otherd", 100 };
static const struct task idle = { 0, 0, "swapper/1", 120 };

static void set_comm(char *dst, const char *src)
{
	size_t n = strnlen(src, SCHED_COMM_LEN);

	memset(dst, 0, SCHED_COMM_LEN);
	memcpy(dst, src, n);
}

static struct sched_record rec(uint32_t kind, uint64_t ts, uint32_t cpu, const struct task *prev,
			       const struct task *next, uint32_t prev_state, uint32_t target_cpu)
{
	struct sched_record r = { .ts = ts, .kind = kind, .cpu = cpu,
				  .prev_tid = prev->tid, .prev_tgid = prev->tgid,
				  .next_tid = next->tid, .next_tgid = next->tgid,
				  .prev_prio = prev->prio, .next_prio = next->prio,
				  .prev_state = prev_state, .target_cpu = target_cpu };

	set_comm(r.prev_comm, prev->comm);
	set_comm(r.next_comm, next->comm);
	return r;
}

static void sw(struct fixture *fx, uint64_t ts, uint32_t cpu, const struct task *prev,
	       uint32_t prev_state, const struct task *next)
{
	struct sched_record r = rec(SCHED_RECORD_SWITCH, ts, cpu, prev, next, prev_state, 0);

	sched_session_record(fx->ss, &r);
}

static void waking(struct fixture *fx, uint64_t ts, uint32_t cpu, const struct task *waker,
		   const struct task *woken, uint32_t target_cpu)
{
	struct sched_record r = rec(SCHED_RECORD_WAKING, ts, cpu, waker, woken, 0, target_cpu);

	sched_session_record(fx->ss, &r);
}

static void wakeup_new(struct fixture *fx, uint64_t ts, uint32_t cpu, const struct task *parent,
		       const struct task *task, uint32_t target_cpu)
{
	struct sched_record r = rec(SCHED_RECORD_WAKEUP_NEW, ts, cpu, parent, task, 0, target_cpu);

	sched_session_record(fx->ss, &r);
}

static void check_switch(const struct ev *e, int64_t prev_pid, const char *prev_comm,
			 int64_t prev_prio, int64_t prev_state, int64_t next_pid,
			 const char *next_comm, int64_t next_prio)
{
	if (!e)
		return;
	CHECK_EQ_INT(e->kind, FE_SWITCH);
	CHECK_EQ_INT(e->pid, prev_pid); /* the task running when the switch happened */
	CHECK_EQ_INT(e->f[SW_PREV_PID], prev_pid);
	CHECK_EQ_STR(e->s[SW_PREV_COMM], prev_comm);
	CHECK_EQ_INT(e->f[SW_PREV_PRIO], prev_prio);
	CHECK_EQ_INT(e->f[SW_PREV_STATE], prev_state); /* absent: 0 */
	CHECK_EQ_INT(e->f[SW_NEXT_PID], next_pid);
	CHECK_EQ_STR(e->s[SW_NEXT_COMM], next_comm);
	CHECK_EQ_INT(e->f[SW_NEXT_PRIO], next_prio);
}

/* ---- the trace ---------------------------------------------------------------------- */

/* Trace processor decodes prev_state by the kernel's version: SystemInfo must come first. */
static void test_system_info_before_first_bundle(void)
{
	struct fixture fx;
	struct utsname u;
	struct trace *t;

	fx_open(&fx, false);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);
	perfetto_writer_flush(fx.w);
	sw(&fx, T0 + 200, 1, &idle, 0, &main_thread); /* a second flush: no second SystemInfo */
	t = fx_close(&fx);
	CHECK_EQ_INT(uname(&u), 0);
	CHECK_EQ_INT(t->n_system_info, 1);
	CHECK_EQ_INT(t->n_bundles, 2);
	CHECK(t->system_info_at >= 0);
	CHECK(t->system_info_at < t->first_bundle_at);
	CHECK_EQ_STR(t->sysname, "Linux");
	CHECK_EQ_STR(t->release, u.release);
	trace_free(t);
}

/* A CPU's events go out early past 16 KiB, but never before the SystemInfo. */
static void test_system_info_before_early_bundle(void)
{
	struct fixture fx;
	struct trace *t;
	int n = 1000; /* ~60 bytes each */

	fx_open(&fx, false);
	for (int i = 0; i < n; i++)
		sw(&fx, T0 + 100 * (uint64_t)i, 1, i & 1 ? &idle : &main_thread, i & 1 ? 0 : 1,
		   i & 1 ? &main_thread : &idle);
	perfetto_writer_flush(fx.w);
	for (int i = 0; i < n; i++)
		sw(&fx, T0 + 100 * (uint64_t)(n + i), 1, i & 1 ? &idle : &main_thread, i & 1 ? 0 : 1,
		   i & 1 ? &main_thread : &idle);
	t = fx_close(&fx);
	CHECK_EQ_INT(t->n, 2 * n);
	CHECK_EQ_INT(t->n_system_info, 1);
	CHECK(t->n_bundles >= 4); /* the second half went out in bundles of its own, too */
	CHECK(t->system_info_at >= 0 && t->system_info_at < t->first_bundle_at);
	trace_free(t);
}

/* No scheduler event, no SystemInfo and no bundle. */
static void test_nothing_written_without_events(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	t = fx_close(&fx);
	CHECK_EQ_INT(t->n_system_info, 0);
	CHECK_EQ_INT(t->n_bundles, 0);
	trace_free(t);
}

static void test_switch_fields(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);       /* S */
	sw(&fx, T0 + 200, 1, &idle, 0, &worker);
	sw(&fx, T0 + 300, 1, &worker, SCHED_STATE_PREEMPTED, &main_thread);
	sw(&fx, T0 + 400, 1, &main_thread, 0, &worker);     /* R: prev_state not written */
	t = fx_close(&fx);
	CHECK_EQ_INT(count_kind(t, FE_SWITCH), 4);
	check_switch(nth(t, FE_SWITCH, 0), TARGET, "target", 120, 1, 0, "swapper/1", 120);
	check_switch(nth(t, FE_SWITCH, 1), 0, "swapper/1", 120, 0, TARGET + 1, "worker", 125);
	check_switch(nth(t, FE_SWITCH, 2), TARGET + 1, "worker", 125, 0x100, TARGET, "target", 120);
	check_switch(nth(t, FE_SWITCH, 3), TARGET, "target", 120, 0, TARGET + 1, "worker", 125);
	CHECK(!nth(t, FE_SWITCH, 3) || !nth(t, FE_SWITCH, 3)->has[SW_PREV_STATE]);
	for (size_t i = 0; i < t->n; i++)
		CHECK_EQ_INT(t->ev[i].cpu, 1);
	trace_free(t);
}

/* A CPU's events go in that CPU's bundle. */
static void test_events_bundled_per_cpu(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, true);
	sw(&fx, T0 + 100, 0, &main_thread, 1, &idle);
	sw(&fx, T0 + 110, 3, &idle, 0, &worker);
	waking(&fx, T0 + 120, 3, &worker, &main_thread, 0);
	t = fx_close(&fx);
	CHECK_EQ_INT(t->n_bundles, 2);
	CHECK_EQ_INT(t->n, 3);
	for (size_t i = 0; i < t->n; i++) {
		if (t->ev[i].kind == FE_SWITCH && t->ev[i].f[SW_PREV_PID] == TARGET)
			CHECK_EQ_INT(t->ev[i].cpu, 0);
		else
			CHECK_EQ_INT(t->ev[i].cpu, 3);
	}
	trace_free(t);
}

static int64_t boot_minus_mono(void)
{
	struct timespec b, m;

	clock_gettime(CLOCK_BOOTTIME, &b);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return (int64_t)(b.tv_sec - m.tv_sec) * 1000000000 + (b.tv_nsec - m.tv_nsec);
}

static void check_boottime(const struct trace *t, uint64_t mono_ts, int64_t offset)
{
	const struct ev *e = nth(t, FE_SWITCH, 0);
	int64_t err;

	if (!e)
		return;
	err = (int64_t)e->ts - ((int64_t)mono_ts + offset);
	if (err < -5000000 || err > 5000000)
		fprintf(stderr, "  written %" PRIu64 ", mono %" PRIu64 " + offset %" PRId64
			" (off by %" PRId64 " ns)\n", e->ts, mono_ts, offset, err);
	CHECK(err >= -5000000 && err <= 5000000);
}

/* Timestamps are given in CLOCK_MONOTONIC and written in BOOTTIME, as ftrace's are. */
static void test_timestamps_boottime(void)
{
	struct fixture fx;
	struct trace *t;
	int64_t offset = boot_minus_mono();

	fx_open(&fx, false);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);
	t = fx_close(&fx);
	check_boottime(t, T0 + 100, offset);
	trace_free(t);
}

/*
 * Switches 1 ns apart, a flush between each two: their written times keep
 * their order. The BOOTTIME offset is measured again at every flush, and a
 * measurement falls short of the true offset by the time between its two
 * clock reads, which varies by more than 1 ns from one flush to the next: a
 * smaller one taken as it came moved a flush's events before the last
 * flush's, and the importer found the CPU's switches out of order.
 */
static void test_timestamps_keep_order_across_flushes(void)
{
	struct fixture fx;
	struct trace *t;
	int n = 2000, out_of_order = 0; /* MAX_EVENTS */
	uint64_t last = 0;

	fx_open(&fx, true);
	for (int i = 0; i < n; i++) {
		sw(&fx, T0 + (uint64_t)i, 1, i & 1 ? &idle : &main_thread, i & 1 ? 0 : 1,
		   i & 1 ? &main_thread : &idle);
		perfetto_writer_flush(fx.w);
	}
	t = fx_close(&fx);
	CHECK_EQ_INT(t->n, n);
	for (size_t i = 0; i < t->n; i++) {
		out_of_order += t->ev[i].ts <= last;
		last = t->ev[i].ts;
	}
	CHECK_EQ_INT(out_of_order, 0);
	trace_free(t);
}

/* In a time namespace whose BOOTTIME runs 1000 s ahead: the only way to see the offset added
 * on a machine that never slept (where BOOTTIME and MONOTONIC agree). */
#define NS_BOOT_AHEAD_S 1000

static void write_in_child(int fd)
{
	struct perfetto_writer *w = perfetto_writer_new(fd);
	struct fixture fx = { .fd = fd, .w = w };

	if (!w)
		_exit(2);
	fx.ss = sched_session_new(&(struct sched_session_config){ .target = TARGET, .writer = w });
	if (!fx.ss)
		_exit(2);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);
	sched_session_free(fx.ss);
	_exit(perfetto_writer_free(w) ? 2 : 0);
}

/* 0: written by a grandchild in the namespace; 77: no time namespaces here. */
static int write_in_time_namespace(int fd)
{
	pid_t child = fork(), grandchild;
	int st;

	if (child < 0)
		return -errno;
	if (child == 0) {
		FILE *f;

		if (unshare(CLONE_NEWTIME) != 0)
			_exit(77);
		f = fopen("/proc/self/timens_offsets", "w");
		if (!f || fprintf(f, "boottime %d 0\n", NS_BOOT_AHEAD_S) < 0 || fclose(f) != 0)
			_exit(77);
		grandchild = fork(); /* the namespace is its children's */
		if (grandchild == 0)
			write_in_child(fd);
		if (grandchild < 0 || waitpid(grandchild, &st, 0) != grandchild)
			_exit(3);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 4);
	}
	if (waitpid(child, &st, 0) != child)
		return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 5;
}

static void test_timestamps_boottime_in_time_namespace(void)
{
	int fd = memfd_create("sched-timens", MFD_CLOEXEC);
	int64_t offset = boot_minus_mono() + (int64_t)NS_BOOT_AHEAD_S * 1000000000;
	struct trace *t = calloc(1, sizeof(*t));
	int ret;

	CHECK(fd >= 0 && t != NULL);
	ret = write_in_time_namespace(fd);
	if (ret == 77) {
		printf("skip: no time namespace (unshare(CLONE_NEWTIME) needs Linux 5.6 and CAP_SYS_ADMIN)\n");
	} else {
		CHECK_EQ_INT(ret, 0);
		read_all(fd, t);
		decode_trace(t);
		check_boottime(t, T0 + 100, offset);
	}
	close(fd);
	trace_free(t);
}

/* A task as the trace should name it. */
struct shown {
	int64_t pid;
	const char *comm;
	int64_t prio;
};

/*
 * Only switches of the target's threads reach profd: on a CPU, the task a
 * target's thread handed the CPU to (`handed`) is the prev of the next
 * switch to one, whatever ran between (with the state the record gives: the
 * real prev's). A CPU with nothing before names the record's prev (`first`).
 */
static void check_chaining(bool see_other_tasks, struct shown handed, struct shown first)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, see_other_tasks);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &other);
	sw(&fx, T0 + 200, 1, &daemon_task, 1, &main_thread); /* daemon_task ran after other */
	sw(&fx, T0 + 300, 0, &daemon_task, 0, &worker);
	t = fx_close(&fx);
	check_switch(nth(t, FE_SWITCH, 0), TARGET, "target", 120, 1, handed.pid, handed.comm,
		     handed.prio);
	check_switch(nth(t, FE_SWITCH, 1), handed.pid, handed.comm, handed.prio, 1, TARGET, "target",
		     120);
	check_switch(nth(t, FE_SWITCH, 2), first.pid, first.comm, first.prio, 0, TARGET + 1, "worker",
		     125);
	trace_free(t);
}

static void test_chaining_names_who_ran(void)
{
	check_chaining(true, (struct shown){ 2000, "secretproc", 110 },
		       (struct shown){ 3000, "otherd", 100 });
}

/* One placeholder per CPU, chained like any task. */
static void test_chaining_hidden(void)
{
	check_chaining(false, (struct shown){ HIDDEN + 1, "another task", 120 },
		       (struct shown){ HIDDEN + 0, "another task", 120 });
}

/* Every kind of event with another process's task in it. */
static void feed_other_tasks(struct fixture *fx)
{
	sw(fx, T0 + 100, 1, &other, 1, &main_thread);
	sw(fx, T0 + 200, 1, &main_thread, 1, &idle);
	waking(fx, T0 + 300, 0, &other, &main_thread, 1);
	waking(fx, T0 + 400, 1, &main_thread, &daemon_task, 0);
	sw(fx, T0 + 500, 1, &idle, 0, &main_thread);
	sw(fx, T0 + 600, 1, &main_thread, SCHED_STATE_PREEMPTED, &daemon_task);
	wakeup_new(fx, T0 + 700, 1, &main_thread, &(struct task){ 4000, 4000, "childproc", 120 }, 0);
}

/* Whether pid is named anywhere: as the running task or as an event's task. */
static bool any_pid(const struct trace *t, int64_t pid)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct ev *e = &t->ev[i];

		if (e->pid == pid)
			return true;
		switch (e->kind) {
		case FE_SWITCH:
			if (e->f[SW_PREV_PID] == pid || e->f[SW_NEXT_PID] == pid)
				return true;
			break;
		case FE_WAKING:
			if (e->f[WK_PID] == pid)
				return true;
			break;
		case FE_NEWTASK:
			if (e->f[NT_PID] == pid)
				return true;
			break;
		case FE_FREE:
			if (e->f[FR_PID] == pid)
				return true;
			break;
		}
	}
	return false;
}

static bool in_file(const struct trace *t, const char *s)
{
	return memmem(t->bytes, t->len, s, strlen(s)) != NULL;
}

/* A client that may not see other processes sees "another task" on each CPU, and idle. */
static void test_other_tasks_hidden(void)
{
	struct sched_session_stats st;
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, false);
	feed_other_tasks(&fx);
	sched_session_get_stats(fx.ss, &st);
	t = fx_close(&fx);
	CHECK(!in_file(t, "secretproc"));
	CHECK(!in_file(t, "otherd"));
	CHECK(!in_file(t, "childproc"));
	CHECK(!any_pid(t, 2000) && !any_pid(t, 3000) && !any_pid(t, 4000));
	check_switch(nth(t, FE_SWITCH, 0), HIDDEN + 1, "another task", 120, 1, TARGET, "target", 120);
	check_switch(nth(t, FE_SWITCH, 1), TARGET, "target", 120, 1, 0, "swapper/1", 120);
	check_switch(nth(t, FE_SWITCH, 3), TARGET, "target", 120, 0x100, HIDDEN + 1, "another task",
		     120);
	if ((e = nth(t, FE_WAKING, 0))) {
		CHECK_EQ_INT(e->pid, HIDDEN + 0); /* the waker, on cpu 0 */
		CHECK_EQ_INT(e->f[WK_PID], TARGET);
	}
	if ((e = nth(t, FE_WAKING, 1))) {
		CHECK_EQ_INT(e->pid, TARGET);
		CHECK_EQ_INT(e->f[WK_PID], HIDDEN + 0); /* the woken, on its target cpu 0 */
		CHECK_EQ_STR(e->s[WK_COMM], "another task");
		CHECK_EQ_INT(e->f[WK_PRIO], 120);
	}
	/* a child process the client may not see: not even that it began */
	CHECK_EQ_INT(count_kind(t, FE_NEWTASK), 0);
	CHECK_EQ_U64(st.hidden, 4);
	trace_free(t);
}

/* A client that may see them sees them. */
static void test_other_tasks_visible(void)
{
	struct sched_session_stats st;
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, true);
	feed_other_tasks(&fx);
	sched_session_get_stats(fx.ss, &st);
	t = fx_close(&fx);
	CHECK(in_file(t, "secretproc"));
	CHECK(in_file(t, "otherd"));
	CHECK(in_file(t, "childproc"));
	CHECK(any_pid(t, 2000) && any_pid(t, 3000) && any_pid(t, 4000));
	CHECK(!any_pid(t, HIDDEN) && !any_pid(t, HIDDEN + 1));
	check_switch(nth(t, FE_SWITCH, 0), 2000, "secretproc", 110, 1, TARGET, "target", 120);
	CHECK_EQ_U64(st.hidden, 0);
	trace_free(t);
}

/* sched_waking: in the waker's context (FtraceEvent.pid), naming the woken and its CPU. */
static void test_waking_fields(void)
{
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, true);
	waking(&fx, T0 + 100, 0, &other, &worker, 1);
	t = fx_close(&fx);
	if ((e = nth(t, FE_WAKING, 0))) {
		CHECK_EQ_INT(e->cpu, 0);
		CHECK_EQ_INT(e->pid, 2000);
		CHECK_EQ_INT(e->f[WK_PID], TARGET + 1);
		CHECK_EQ_STR(e->s[WK_COMM], "worker");
		CHECK_EQ_INT(e->f[WK_PRIO], 125);
		CHECK_EQ_INT(e->f[WK_SUCCESS], 1);
		CHECK_EQ_INT(e->f[WK_TARGET_CPU], 1);
	}
	trace_free(t);
}

/*
 * A new task is written as a waking of it by its creator, never as a
 * task_newtask: trace processor would start a second thread (or process)
 * beside the one the track descriptors made for the same tid.
 */
static void test_new_task_is_a_waking(void)
{
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, true);
	wakeup_new(&fx, T0 + 100, 1, &main_thread, &worker, 0);
	wakeup_new(&fx, T0 + 200, 1, &main_thread, &(struct task){ 4000, 4000, "childproc", 120 },
		   0);
	t = fx_close(&fx);
	CHECK_EQ_INT(count_kind(t, FE_NEWTASK), 0);
	CHECK_EQ_INT(count_kind(t, FE_WAKING), 2);
	if ((e = nth(t, FE_WAKING, 0))) {
		CHECK_EQ_INT(e->pid, TARGET); /* the creator runs: the waker */
		CHECK_EQ_INT(e->f[WK_PID], TARGET + 1);
		CHECK_EQ_STR(e->s[WK_COMM], "worker");
	}
	if ((e = nth(t, FE_WAKING, 1)))
		CHECK_EQ_INT(e->f[WK_PID], 4000);
	trace_free(t);
}

/* A target's thread switched out dead (X, or Z) is freed after that switch; others are not. */
static void test_dead_thread_freed(void)
{
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, false);
	sw(&fx, T0 + 50, 1, &idle, 0, &worker);
	sw(&fx, T0 + 100, 1, &worker, 0x10, &idle);       /* X */
	sw(&fx, T0 + 150, 0, &other, 0x10, &main_thread); /* another process's task: no free */
	sw(&fx, T0 + 200, 0, &main_thread, 0x20, &idle);  /* Z, never back: never freed */
	sw(&fx, T0 + 300, 1, &idle, 0, &worker);          /* a new thread reusing the tid */
	sw(&fx, T0 + 400, 1, &worker, 1, &idle);          /* S: no free */
	t = fx_close(&fx);
	/*
	 * Freed when its tid comes back, just before: freed at its death, the
	 * importer would make a second thread of whatever names it later.
	 */
	CHECK_EQ_INT(count_kind(t, FE_FREE), 1);
	if ((e = nth(t, FE_FREE, 0))) {
		CHECK_EQ_INT(e->cpu, 1);
		CHECK_EQ_INT(e->f[FR_PID], TARGET + 1);
	}
	for (size_t i = 0; i + 1 < t->n; i++)
		if (t->ev[i].kind == FE_FREE) { /* right before the switch that brings it back */
			CHECK(t->ev[i + 1].kind == FE_SWITCH);
			CHECK_EQ_INT(t->ev[i + 1].f[SW_NEXT_PID], TARGET + 1);
			CHECK_EQ_U64(t->ev[i].ts, t->ev[i + 1].ts);
		}
	trace_free(t);
}

/*
 * A pid the kernel reused: the newer process's main thread (the same tid)
 * ran on CPU 1 before profd started that process in the writer (its FORK
 * record or agent read late), at an earlier time. The older one's end must
 * not make CPU 1 forget who runs there: the next switch, from a task of no
 * followed process, still names the main thread as prev (else the importer
 * counts mismatched_sched_switch_tids). Where it ran before the end, it is
 * forgotten (test_dead_thread_freed's case).
 */
/* Per CPU, in the order written: each switch's prev is the last switch's next (the importer's rule). */
static int chain_breaks(const struct trace *t)
{
	int64_t last_next[8];
	bool seen[8] = { false };
	int breaks = 0;

	for (size_t k = 0; k < t->n; k++) {
		const struct ev *e = &t->ev[k];

		if (e->kind != FE_SWITCH || e->cpu >= 8)
			continue;
		breaks += seen[e->cpu] && e->f[SW_PREV_PID] != last_next[e->cpu];
		last_next[e->cpu] = e->f[SW_NEXT_PID];
		seen[e->cpu] = true;
	}
	return breaks;
}

static void test_reused_pid_keeps_the_newer_thread_running(void)
{
	uint64_t older = PERFETTO_PROC(TARGET, 0), newer = PERFETTO_PROC(TARGET, 1);
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, true);
	CHECK_EQ_INT(perfetto_writer_process(fx.w, older, "target"), 0);
	CHECK_EQ_INT(perfetto_writer_thread(fx.w, older, TARGET, "target"), 0);
	sw(&fx, T0 + 100, 0, &idle, 0, &main_thread);      /* the older one, on CPU 0 */
	sw(&fx, T0 + 300, 1, &idle, 0, &main_thread);      /* the newer one, on CPU 1 */
	CHECK_EQ_INT(perfetto_writer_process_start(fx.w, newer, T0 + 200), 0);
	sw(&fx, T0 + 400, 1, &other, 1, &daemon_task);      /* no followed task leaves */
	sw(&fx, T0 + 500, 0, &other, 1, &daemon_task);
	t = fx_close(&fx);
	CHECK_EQ_INT(count_kind(t, FE_SWITCH), 5);
	CHECK_EQ_INT(chain_breaks(t), 0);
	for (size_t k = 0; k < t->n; k++) {
		e = &t->ev[k];
		if (e->kind != FE_SWITCH || e->ts - t->ev[0].ts < 250)
			continue;
		if (e->cpu == 1) /* CPU 1's task is the newer process's: it ran on */
			CHECK_EQ_INT(e->f[SW_PREV_PID], TARGET);
		else /* CPU 0's, the older one's: handed over at its end */
			CHECK_EQ_INT(e->f[SW_PREV_PID], 2000);
	}
	CHECK((e = nth(t, FE_SWITCH, 1)) != NULL);
	if (e && e->cpu == 0) { /* the older one's end, dead, to the task the record names */
		CHECK_EQ_INT(e->f[SW_PREV_PID], TARGET);
		CHECK_EQ_INT(e->f[SW_PREV_STATE], 0x10);
		CHECK_EQ_INT(e->f[SW_NEXT_PID], 2000);
		CHECK_EQ_U64(e->ts - nth(t, FE_SWITCH, 0)->ts, 100);
	}
	trace_free(t);
}

/*
 * A reused pid's older process ends while its thread was the last switched
 * in on a CPU, and the CPU's next switch names an untraced task leaving
 * (the older thread's own last switch out was never routed): the chain
 * stays whole (test_pid_reuse: mismatched_sched_switch_tids=1).
 */
static void test_ended_task_hands_over(void)
{
	uint64_t older = PERFETTO_PROC(TARGET, 0), newer = PERFETTO_PROC(TARGET, 1);
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, true);
	CHECK_EQ_INT(perfetto_writer_thread(fx.w, older, TARGET, "target"), 0);
	sw(&fx, T0 + 100, 1, &daemon_task, 0, &main_thread);
	CHECK_EQ_INT(perfetto_writer_process_start(fx.w, newer, T0 + 200), 0);
	sw(&fx, T0 + 150, 1, &other, 1, &daemon_task);      /* an earlier record, written late */
	sw(&fx, T0 + 900, 1, &daemon_task, 1, &idle);
	t = fx_close(&fx);
	CHECK_EQ_INT(chain_breaks(t), 0);
	for (size_t k = 1; k < t->n; k++) /* in time order */
		CHECK(t->ev[k].ts >= t->ev[k - 1].ts);
	trace_free(t);
}

/* The ring lost records: the next flush's bundles say so, once. */
static void test_lost_marks_next_bundles(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	sched_session_set_lost(fx.ss, 0);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);
	perfetto_writer_flush(fx.w);
	sched_session_set_lost(fx.ss, 3);
	sw(&fx, T0 + 200, 1, &idle, 0, &main_thread);
	sw(&fx, T0 + 210, 0, &idle, 0, &worker);
	perfetto_writer_flush(fx.w);
	sched_session_set_lost(fx.ss, 3); /* no more lost */
	sw(&fx, T0 + 300, 1, &main_thread, 1, &idle);
	t = fx_close(&fx);
	CHECK_EQ_INT(t->n, 4);
	CHECK(!t->ev[0].lost);
	CHECK(t->ev[1].lost && t->ev[2].lost);
	CHECK(!t->ev[3].lost);
	trace_free(t);
}

/* ---- the target's clocks, per-function sums, counts ---------------------------------- */

static void test_switches_drive_clocks(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, true);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);         /* blocked */
	waking(&fx, T0 + 150, 0, &other, &main_thread, 1);
	sw(&fx, T0 + 170, 1, &idle, 0, &main_thread);
	sw(&fx, T0 + 100, 0, &worker, SCHED_STATE_PREEMPTED, &other);
	sw(&fx, T0 + 130, 0, &daemon_task, 0, &worker);
	sw(&fx, T0 + 200, 0, &worker, 0, &daemon_task);       /* R: runnable too */
	sw(&fx, T0 + 210, 0, &daemon_task, 0, &worker);
	sw(&fx, T0 + 300, 0, &worker, 2, &idle);              /* D: blocked */
	sw(&fx, T0 + 340, 0, &idle, 0, &worker);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET), T0 + 120), 20, 0);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET), T0 + 200), 70, 20);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET + 1), T0 + 400), 80, 40);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, 2000), T0 + 400), 0, 0); /* not the target's */
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, 3000), T0 + 400), 0, 0);
	sched_session_thread_gone(fx.ss, TARGET);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET), T0 + 500), 0, 0);
	t = fx_close(&fx);
	trace_free(t);
}

/*
 * A dead thread's last switch-out starts no off-CPU time; once the
 * watermark passes it, the thread's clock is forgotten.
 */
static void test_dead_switch_stops_clock(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	sw(&fx, T0 + 50, 1, &idle, 0, &worker);
	sw(&fx, T0 + 60, 1, &worker, 1, &idle);
	sw(&fx, T0 + 80, 1, &idle, 0, &worker);
	sw(&fx, T0 + 100, 1, &worker, 0x10, &idle);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET + 1), T0 + 500), 20, 0);
	sched_session_watermark(fx.ss, T0 + 600);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET + 1), T0 + 700), 0, 0);
	t = fx_close(&fx);
	trace_free(t);
}

/*
 * A new thread under a dead thread's tid before the watermark passed the
 * dead one's last switch (the kernel's tids wrap): the watermark keeps the
 * new thread's clock, so its call gets its off-CPU time, not 0.
 */
static void test_reused_tid_keeps_clock(void)
{
	struct offcpu_time at_enter, at_exit;
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	sw(&fx, T0 + 50, 1, &idle, 0, &worker);
	sw(&fx, T0 + 100, 1, &worker, 0x10, &idle);  /* the old thread, never off */
	sw(&fx, T0 + 250, 0, &idle, 0, &worker);     /* the new one */
	sw(&fx, T0 + 300, 0, &worker, 1, &idle);
	sw(&fx, T0 + 350, 0, &idle, 0, &worker);
	at_enter = offcpu_thread_before(sched_session_clock(fx.ss, TARGET + 1), T0 + 260);
	sched_session_watermark(fx.ss, T0 + 400);
	at_exit = offcpu_thread_before(sched_session_clock(fx.ss, TARGET + 1), T0 + 450);
	CHECK_EQ_U64(at_exit.off_ns - at_enter.off_ns, 50);
	t = fx_close(&fx);
	trace_free(t);
}

/* Switches the watermark passed are applied (a read before them sees them). */
static void test_watermark_passes_through(void)
{
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	sw(&fx, T0 + 100, 1, &main_thread, 1, &idle);
	sw(&fx, T0 + 170, 1, &idle, 0, &main_thread);
	sched_session_watermark(fx.ss, T0 + 200);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET), T0 + 150), 70, 0);
	t = fx_close(&fx);
	trace_free(t);
}

/* A call's off time is at most its duration, its runnable time at most its off time. */
static void test_func_sums_clamped(void)
{
	struct sched_func_time ft;
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	CHECK(!sched_session_func_time(fx.ss, 3, &ft));
	sched_session_call(fx.ss, 3, 100, &(struct offcpu_time){ 30, 10 });
	sched_session_call(fx.ss, 3, 50, &(struct offcpu_time){ 80, 90 }); /* off 50, runnable 50 */
	sched_session_call(fx.ss, 3, 40, &(struct offcpu_time){ 10, 20 }); /* runnable 10 */
	sched_session_call(fx.ss, 1000, 7, &(struct offcpu_time){ 0, 0 }); /* the table grows */
	CHECK(sched_session_func_time(fx.ss, 3, &ft));
	CHECK_EQ_U64(ft.calls, 3);
	CHECK_EQ_U64(ft.off_ns, 30 + 50 + 10);
	CHECK_EQ_U64(ft.runnable_ns, 10 + 50 + 10);
	CHECK(sched_session_func_time(fx.ss, 1000, &ft));
	CHECK_EQ_U64(ft.calls, 1);
	CHECK_EQ_U64(ft.off_ns, 0);
	CHECK(!sched_session_func_time(fx.ss, 4, &ft));   /* between: never called */
	CHECK(!sched_session_func_time(fx.ss, 5000, &ft)); /* past the table */
	t = fx_close(&fx);
	trace_free(t);
}

static void test_stats_counted(void)
{
	struct sched_session_stats st;
	struct perfetto_writer_stats ws;
	struct fixture fx;
	struct trace *t;

	fx_open(&fx, false);
	/* 4 switches, 2 wakings, 1 new task (a hidden child process: not written); 4 hidden */
	feed_other_tasks(&fx);
	/* + a switch (its free waits for the tid to come back), and before it a switch to
	 * main_thread (CPU 1 ran another) */
	sw(&fx, T0 + 800, 1, &main_thread, 0x10, &idle);
	sched_session_get_stats(fx.ss, &st);
	perfetto_writer_get_stats(fx.w, &ws);
	t = fx_close(&fx);
	CHECK_EQ_U64(st.switches, 5);
	CHECK_EQ_U64(st.wakeups, 2);
	CHECK_EQ_U64(st.hidden, 4);
	CHECK_EQ_U64(st.lost, 0);
	CHECK_EQ_U64(ws.sched_repaired, 1);
	CHECK_EQ_U64(ws.sched_events, 8);
	CHECK_EQ_INT(t->n, 8);
	trace_free(t);
}

/* Records profd must not trust: CPUs past the limit, unknown kinds, comms without a NUL. */
static void test_bad_records(void)
{
	struct sched_session_stats st;
	struct sched_record r;
	struct fixture fx;
	struct trace *t;
	const struct ev *e;

	fx_open(&fx, true);
	sw(&fx, T0 + 100, PERFETTO_SCHED_MAX_CPUS, &main_thread, 1, &idle);
	waking(&fx, T0 + 110, 0, &other, &main_thread, PERFETTO_SCHED_MAX_CPUS);
	r = rec(99, T0 + 120, 0, &main_thread, &idle, 0, 0);
	sched_session_record(fx.ss, &r);
	r = rec(SCHED_RECORD_SWITCH, T0 + 130, 1, &main_thread, &other, 1, 0);
	memcpy(r.prev_comm, "0123456789abcdef", SCHED_COMM_LEN); /* all 16 bytes, no NUL */
	memcpy(r.next_comm, "fedcba9876543210", SCHED_COMM_LEN);
	sched_session_record(fx.ss, &r);
	sched_session_get_stats(fx.ss, &st);
	CHECK_TIME(offcpu_thread_before(sched_session_clock(fx.ss, TARGET), T0 + 125), 0, 0); /* none applied */
	t = fx_close(&fx);
	CHECK_EQ_U64(st.switches, 1);
	CHECK_EQ_U64(st.wakeups, 0);
	CHECK_EQ_INT(t->n, 1);
	if ((e = nth(t, FE_SWITCH, 0))) {
		CHECK_EQ_STR(e->s[SW_PREV_COMM], "0123456789abcdef");
		CHECK_EQ_STR(e->s[SW_NEXT_COMM], "fedcba9876543210");
	}
	trace_free(t);
}

int main(void)
{
	RUN_TEST(test_system_info_before_first_bundle);
	RUN_TEST(test_system_info_before_early_bundle);
	RUN_TEST(test_nothing_written_without_events);
	RUN_TEST(test_switch_fields);
	RUN_TEST(test_events_bundled_per_cpu);
	RUN_TEST(test_timestamps_boottime);
	RUN_TEST(test_timestamps_boottime_in_time_namespace);
	RUN_TEST(test_timestamps_keep_order_across_flushes);
	RUN_TEST(test_chaining_names_who_ran);
	RUN_TEST(test_chaining_hidden);
	RUN_TEST(test_other_tasks_hidden);
	RUN_TEST(test_other_tasks_visible);
	RUN_TEST(test_waking_fields);
	RUN_TEST(test_new_task_is_a_waking);
	RUN_TEST(test_dead_thread_freed);
	RUN_TEST(test_reused_pid_keeps_the_newer_thread_running);
	RUN_TEST(test_ended_task_hands_over);
	RUN_TEST(test_lost_marks_next_bundles);
	RUN_TEST(test_switches_drive_clocks);
	RUN_TEST(test_dead_switch_stops_clock);
	RUN_TEST(test_reused_tid_keeps_clock);
	RUN_TEST(test_watermark_passes_through);
	RUN_TEST(test_func_sums_clamped);
	RUN_TEST(test_stats_counted);
	RUN_TEST(test_bad_records);
	return unit_summary();
}
