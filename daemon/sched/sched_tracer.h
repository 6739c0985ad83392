/* SPDX-License-Identifier: MIT */
/*
 * The scheduler probe (daemon/sched/sched.bpf.c), one per profd: loaded
 * when the first session asks for scheduler events and unloaded after the
 * last, so the kernel runs none of it while nobody profiles. Owns the BPF
 * skeleton, the kernel-side filter of target processes (by tgid) and the
 * ring buffer; hands each record to the caller, who finds its session.
 */
#ifndef PROFD_SCHED_TRACER_H
#define PROFD_SCHED_TRACER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/sched/sched_record.h"

struct sched_tracer;

/*
 * Loads and attaches the probe. NULL on failure, with a one-line reason in
 * why ("no kernel BTF (/sys/kernel/btf/vmlinux): ...", "loading the BPF
 * program needs CAP_BPF and CAP_PERFMON", ...).
 */
struct sched_tracer *sched_tracer_open(char *why, size_t len);
void sched_tracer_close(struct sched_tracer *t);

/* Pollable (EPOLLIN) when the ring is filling up; profd otherwise polls on its tick. */
int sched_tracer_fd(const struct sched_tracer *t);

/* Starts (or stops) recording the threads of process tgid. 0 or a negative errno. */
int sched_tracer_add(struct sched_tracer *t, pid_t tgid);
void sched_tracer_remove(struct sched_tracer *t, pid_t tgid);
/* Processes being recorded now. */
unsigned sched_tracer_targets(const struct sched_tracer *t);
/* Records of tgid the ring had no room for, so far. */
uint64_t sched_tracer_lost(const struct sched_tracer *t, pid_t tgid);

typedef void (*sched_record_fn)(void *ctx, const struct sched_record *r);
/* Hands every record in the ring to fn, oldest first. Returns how many, or a negative errno. */
int sched_tracer_drain(struct sched_tracer *t, sched_record_fn fn, void *ctx);

#endif
