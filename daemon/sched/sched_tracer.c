// SPDX-License-Identifier: MIT
/* The scheduler probe's loader and ring reader (see sched_tracer.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "daemon/sched/sched_tracer.h"
#include "sched.skel.h"

struct sched_tracer {
	struct sched_bpf *skel;
	struct ring_buffer *ring;
	sched_record_fn fn; /* of the drain in progress */
	void *ctx;
	unsigned n_targets;
};

/* libbpf's own messages would go to profd's stderr: the reason we give is one line. */
static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

/* BTF tracepoints need 5.5, the BPF ring buffer 5.8. */
static bool kernel_too_old(char *release, size_t len)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	snprintf(release, len, "%s", u.release);
	return major < 5 || (major == 5 && minor < 8);
}

static void explain(int err, const char *step, char *why, size_t len)
{
	char release[65];

	if (kernel_too_old(release, sizeof(release)))
		snprintf(why, len, "kernel %s is older than 5.8 (BPF ring buffer, BTF tracepoints)",
			 release);
	else if (access("/sys/kernel/btf/vmlinux", R_OK))
		snprintf(why, len, "the kernel has no BTF (/sys/kernel/btf/vmlinux)");
	else if (err == -EPERM || err == -EACCES)
		snprintf(why, len, "%s: not permitted (needs CAP_BPF and CAP_PERFMON; "
			 "a lockdown kernel refuses it to everybody)", step);
	else
		snprintf(why, len, "%s: %s", step, strerror(-err));
}

static int on_ring_record(void *ctx, void *data, size_t size)
{
	struct sched_tracer *t = ctx;

	if (size >= sizeof(struct sched_record))
		t->fn(t->ctx, data);
	return 0;
}

struct sched_tracer *sched_tracer_open(char *why, size_t len)
{
	struct sched_tracer *t = calloc(1, sizeof(*t));
	int err;

	if (!t) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	libbpf_set_print(quiet_libbpf);
	t->skel = sched_bpf__open();
	if (!t->skel) {
		explain(-errno, "opening the BPF program", why, len);
		goto fail;
	}
	err = sched_bpf__load(t->skel);
	if (err) {
		explain(err, "loading the BPF program", why, len);
		goto fail;
	}
	err = sched_bpf__attach(t->skel);
	if (err) {
		explain(err, "attaching to the sched tracepoints", why, len);
		goto fail;
	}
	t->ring = ring_buffer__new(bpf_map__fd(t->skel->maps.events), on_ring_record, t, NULL);
	if (!t->ring) {
		explain(-errno, "mapping the BPF ring buffer", why, len);
		goto fail;
	}
	return t;
fail:
	sched_tracer_close(t);
	return NULL;
}

void sched_tracer_close(struct sched_tracer *t)
{
	if (!t)
		return;
	ring_buffer__free(t->ring);
	sched_bpf__destroy(t->skel);
	free(t);
}

int sched_tracer_fd(const struct sched_tracer *t)
{
	return ring_buffer__epoll_fd(t->ring);
}

int sched_tracer_add(struct sched_tracer *t, pid_t tgid)
{
	__u32 key = (__u32)tgid;
	struct sched_target v = { 0 };

	if (bpf_map__update_elem(t->skel->maps.targets, &key, sizeof(key), &v, sizeof(v), BPF_NOEXIST))
		return -errno;
	/* after the entry: a task through the hint is always found */
	t->skel->bss->hint[key % SCHED_HINT_SLOTS]++;
	t->skel->bss->n_targets = ++t->n_targets;
	return 0;
}

void sched_tracer_remove(struct sched_tracer *t, pid_t tgid)
{
	__u32 key = (__u32)tgid;

	if (bpf_map__delete_elem(t->skel->maps.targets, &key, sizeof(key), 0) == 0) {
		t->skel->bss->hint[key % SCHED_HINT_SLOTS]--;
		t->skel->bss->n_targets = --t->n_targets;
	}
}

unsigned sched_tracer_targets(const struct sched_tracer *t)
{
	return t->n_targets;
}

uint64_t sched_tracer_lost(const struct sched_tracer *t, pid_t tgid)
{
	__u32 key = (__u32)tgid;
	struct sched_target v;

	if (bpf_map__lookup_elem(t->skel->maps.targets, &key, sizeof(key), &v, sizeof(v), 0))
		return 0;
	return v.lost;
}

int sched_tracer_drain(struct sched_tracer *t, sched_record_fn fn, void *ctx)
{
	int n;

	t->fn = fn;
	t->ctx = ctx;
	n = ring_buffer__consume(t->ring);
	t->fn = NULL;
	return n;
}
