// SPDX-License-Identifier: MIT
/*
 * Getting the agent into a running process and out again, for `profctl
 * attach` and `profctl detach` (contract in profctl/agent_inject.h): the
 * remote calls into libc and the agent, in their order, over profctl/inject.h.
 * Whatever fails, the target runs on with every byte it had.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mono_clock.h"
#include "profctl/agent_inject.h"
#include "profctl/inject.h"

#define AGENT_MODULE "libprofagent.so*"
#define CALL_TIMEOUT_MS 15000

/* Calls symbol in the module; *ret is the int it returned. */
static int call_in_target(struct inject_target *t, const char *module, const char *symbol,
			  const uint64_t *args, int nargs, const void *data, size_t data_len,
			  bool others_run, int *ret, char *err, size_t errlen)
{
	uint64_t addr, rax = 0;
	int r = inject_resolve(t, module, symbol, &addr, err, errlen);

	if (!r)
		r = inject_call(t, addr, args, nargs, data, data_len, others_run, CALL_TIMEOUT_MS,
				&rax, err, errlen);
	*ret = (int)(int32_t)rax;
	return r;
}

/* dlopen in the target, unless an earlier attach left the agent there. */
static int load_agent(struct inject_target *t, const char *agent_path, char *err, size_t errlen)
{
	uint64_t args[2] = { INJECT_DATA_ADDR, RTLD_NOW };
	uint64_t addr, handle = 0;
	int r;

	if (inject_has_module(t, AGENT_MODULE))
		return 0;
	r = inject_resolve(t, "libc.so*", "dlopen", &addr, err, errlen);
	if (!r) /* dlopen allocates: the other threads run, so no lock they hold can block it */
		r = inject_call(t, addr, args, 2, agent_path, strlen(agent_path) + 1, true,
				CALL_TIMEOUT_MS, &handle, err, errlen);
	if (!r && handle == 0) {
		snprintf(err, errlen, "the target could not load %s (dlopen failed)", agent_path);
		r = -ENOEXEC;
	}
	return r;
}

#define COMMIT_TRIES 50

/*
 * Every thread stopped, none may be inside bytes about to change: while one
 * is, let them all run a moment (a 1 ms sleep on the calling thread) and try
 * again; the last try patches around such threads instead.
 */
static int commit_patches(struct inject_target *t, int *patched, double *pause_ms, char *err,
			  size_t errlen)
{
	uint64_t sleep_args[1] = { 1000 };
	int r = 0, slept;
	uint64_t t0;

	for (int try = 0; try < COMMIT_TRIES && !r; try++) {
		uint64_t *ips = NULL, args[3] = { INJECT_DATA_ADDR, 0, try < COMMIT_TRIES - 1 };
		size_t n_ips = 0;

		t0 = mono_clock_ns();
		r = inject_thread_ips(t, &ips, &n_ips);
		args[1] = n_ips;
		if (!r)
			r = call_in_target(t, AGENT_MODULE, "profagent_commit", args, 3, ips,
					   n_ips * sizeof(*ips), false, patched, err, errlen);
		*pause_ms = (double)(mono_clock_ns() - t0) / 1e6;
		free(ips);
		if (!r && *patched < 0 && *patched != -EAGAIN)
			snprintf(err, errlen, "the agent could not patch: %s", strerror(-*patched));
		if (r || *patched != -EAGAIN)
			return r ? r : (*patched < 0 ? *patched : 0);
		r = call_in_target(t, "libc.so*", "usleep", sleep_args, 1, NULL, 0, true, &slept,
				   err, errlen);
	}
	return r;
}

int agent_inject_start(pid_t pid, const char *agent_path, const char *socket_path,
			const char *token, int *patched, double *pause_ms, char *err, size_t errlen)
{
	struct inject_target *t;
	char connect_info[512];
	uint64_t args[1] = { INJECT_DATA_ADDR };
	int r, ret = 0;

	r = inject_attach(pid, &t, err, errlen);
	if (r)
		return r;
	snprintf(connect_info, sizeof(connect_info), "%s\n%s", socket_path, token);
	r = load_agent(t, agent_path, err, errlen);
	if (!r) /* an earlier session whose daemon died may have left its patches */
		r = call_in_target(t, AGENT_MODULE, "profagent_reset_stale", NULL, 0, NULL, 0,
				   false, &ret, err, errlen);
	if (!r && ret == -EBUSY) {
		snprintf(err, errlen, "PID %d is already being profiled by another session",
			 (int)pid);
		r = -EBUSY;
	}
	if (!r)
		r = call_in_target(t, AGENT_MODULE, "profagent_attach", args, 1, connect_info,
				   strlen(connect_info) + 1, true, &ret, err, errlen);
	if (!r && ret < 0) {
		snprintf(err, errlen, "the agent could not start: %s", strerror(-ret));
		r = ret;
	}
	if (!r)
		r = commit_patches(t, patched, pause_ms, err, errlen);
	if (r && ret == 0 && inject_has_module(t, AGENT_MODULE)) {
		int ignored; /* the agent started but could not patch: let it leave */

		call_in_target(t, AGENT_MODULE, "profagent_stop", NULL, 0, NULL, 0, true, &ignored,
			       err + strlen(err), errlen - strlen(err));
	}
	inject_detach(t);
	return r;
}

/* Original bytes back with every thread stopped, then the agent drains and leaves. */
int agent_inject_remove(pid_t pid, char *err, size_t errlen)
{
	struct inject_target *t;
	int r, ret = 0;

	r = inject_attach(pid, &t, err, errlen);
	if (r)
		return r;
	if (!inject_has_module(t, AGENT_MODULE)) {
		snprintf(err, errlen, "PID %d has no profd agent", (int)pid);
		inject_detach(t);
		return -ENOENT;
	}
	r = call_in_target(t, AGENT_MODULE, "profagent_unpatch", NULL, 0, NULL, 0, false, &ret,
			   err, errlen);
	if (!r && ret < 0 && ret != -EINVAL) {
		snprintf(err, errlen, "the agent could not restore the code: %s", strerror(-ret));
		r = ret;
	}
	if (!r)
		r = call_in_target(t, AGENT_MODULE, "profagent_stop", NULL, 0, NULL, 0, true, &ret,
				   err, errlen);
	inject_detach(t);
	if (!r && ret == -EINVAL) {
		snprintf(err, errlen, "the agent in PID %d is not profiling", (int)pid);
		return -EINVAL;
	}
	return r;
}
