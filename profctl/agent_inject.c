// SPDX-License-Identifier: MIT
/*
 * Getting the agent into a running process and out again, for `profctl
 * attach` and `profctl detach` (contract in profctl/agent_inject.h): the
 * remote calls into libc and the agent, in their order, over profctl/inject.h.
 * Whatever fails, the target runs on with every byte it had.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mono_clock.h"
#include "profctl/agent_inject.h"
#include "profctl/inject.h"
#include "proto/frame.h"
#include "proto/frame_io.h"

/* dlopen'ed from a memfd, the agent maps as /memfd:libprofagent.so; from a path, under its own name */
#define AGENT_MODULE "*libprofagent.so*"
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

/* Closes a descriptor we made in the target: nothing of ours stays in /proc/PID/fd. */
static void close_in_target(struct inject_target *t, int fd)
{
	uint64_t args[1] = { (uint64_t)fd };
	char ignored_err[128];
	int ignored;

	call_in_target(t, "libc.so*", "close", args, 1, NULL, 0, false, &ignored, ignored_err,
		       sizeof(ignored_err));
}

/* dlopen(path) as the target sees path; *handle 0 when its dlopen failed. */
static int dlopen_in_target(struct inject_target *t, const char *path, uint64_t *handle,
			    char *err, size_t errlen)
{
	uint64_t args[2] = { INJECT_DATA_ADDR, RTLD_NOW };
	uint64_t addr;
	int r = inject_resolve(t, "libc.so*", "dlopen", &addr, err, errlen);

	*handle = 0;
	if (!r) /* dlopen allocates: the other threads run, so no lock they hold can block it */
		r = inject_call(t, addr, args, 2, path, strlen(path) + 1, true, CALL_TIMEOUT_MS,
				handle, err, errlen);
	return r;
}

static int copy_file(const char *path, int out)
{
	int in = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat st;
	off_t off = 0;

	if (in < 0 || fstat(in, &st))
		rc = -errno;
	while (!rc && off < st.st_size)
		if (sendfile(out, in, &off, (size_t)(st.st_size - off)) <= 0)
			rc = errno ? -errno : -EIO;
	if (in >= 0)
		close(in);
	return rc;
}

/*
 * A memfd made by the target's libc and filled from here (pidfd_getfd): the
 * agent needs no path in the target's mount namespace, nor one its user may
 * read. Returns its descriptor in the target; -ENOENT (no memfd_create in
 * its libc) and -ENOSYS (no pidfd_getfd) say to load from the path instead.
 */
static int agent_memfd(struct inject_target *t, const char *agent_path, char *err, size_t errlen)
{
	static const char name[] = "libprofagent.so";
	uint64_t args[2] = { INJECT_DATA_ADDR, MFD_CLOEXEC };
	int remote, local, r;

	r = call_in_target(t, "libc.so*", "memfd_create", args, 2, name, sizeof(name), false,
			   &remote, err, errlen);
	if (!r && remote < 0) {
		snprintf(err, errlen, "memfd_create failed in the target");
		r = -ENOMEM;
	}
	if (r)
		return r;
	local = inject_take_fd(t, remote, err, errlen);
	r = local < 0 ? local : copy_file(agent_path, local);
	if (local >= 0)
		close(local);
	if (r && local >= 0)
		snprintf(err, errlen, "cannot copy %s into the target: %s", agent_path, strerror(-r));
	if (r)
		close_in_target(t, remote);
	return r ? r : remote;
}

/*
 * dlopen in the target, unless an earlier attach left the agent there: from
 * a memfd through /proc/self/fd/N, or, where that cannot be made, from
 * agent_path (which must then exist in the target's view).
 */
static int load_agent(struct inject_target *t, const char *agent_path, char *err, size_t errlen)
{
	char fd_path[64];
	uint64_t handle;
	int memfd, r;

	if (inject_has_module(t, AGENT_MODULE))
		return 0;
	memfd = agent_memfd(t, agent_path, err, errlen);
	if (memfd == -ENOENT || memfd == -ENOSYS) {
		r = dlopen_in_target(t, agent_path, &handle, err, errlen);
		if (!r && !handle)
			snprintf(err, errlen, "the target could not load %s (dlopen failed)",
				 agent_path);
		return r ? r : (handle ? 0 : -ENOEXEC);
	}
	if (memfd < 0)
		return memfd;
	snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", memfd);
	r = dlopen_in_target(t, fd_path, &handle, err, errlen);
	close_in_target(t, memfd); /* the mapping keeps the memfd alive */
	if (!r && !handle)
		snprintf(err, errlen, "the target could not load the agent from a memfd (dlopen of "
			 "%s failed: no /proc in its mount namespace?)", fd_path);
	return r ? r : (handle ? 0 : -ENOEXEC);
}

/*
 * The agent's connection to profd: a socket pair made in the target (by the
 * agent's opener: its link, or its children's spawner), whose profd end we
 * take (pidfd_getfd) and hand to profd (in frame) on the session's own
 * connection, then close in the target. Neither the target's uid nor its
 * mount namespace matter. -ENOENT (an older agent) and -ENOSYS (no
 * pidfd_getfd) say to connect to the socket path instead.
 */
static int link_agent(struct inject_target *t, int daemon_fd, const char *opener,
		      uint32_t frame, char *err, size_t errlen)
{
	int remote, local, r;

	r = call_in_target(t, AGENT_MODULE, opener, NULL, 0, NULL, 0, false,
			   &remote, err, errlen);
	if (!r && remote < 0) {
		snprintf(err, errlen, "the agent could not make its link: %s", strerror(-remote));
		r = remote;
	}
	if (r)
		return r;
	local = inject_take_fd(t, remote, err, errlen);
	close_in_target(t, remote);
	if (local < 0)
		return local;
	r = frame_send(daemon_fd, frame, NULL, 0, local);
	close(local);
	if (r)
		snprintf(err, errlen, "cannot hand the agent's link to profd: %s", strerror(-r));
	return r;
}

#define COMMIT_TRIES 50

/*
 * Every thread stopped, none may be inside bytes about to change: while one
 * is, let them all run a moment (inject_run_briefly) and try
 * again; the last try patches around such threads instead.
 */
static int commit_patches(struct inject_target *t, int *patched, double *pause_ms, char *err,
			  size_t errlen)
{
	int r = 0;
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
		/*
		 * Every thread moves on, the one inside the bytes too: a usleep called
		 * in the target left that one where it was (in a single-threaded target
		 * looping on the function, every try found it there again).
		 */
		r = inject_run_briefly(t, err, errlen);
	}
	return r;
}

/* The agent joins the session: through a link where it can, else the socket path. */
static int join_session(struct inject_target *t, const struct agent_inject_session *sess,
			char *err, size_t errlen)
{
	char connect_info[512];
	uint64_t args[1] = { INJECT_DATA_ADDR };
	int r = link_agent(t, sess->daemon_fd, "profagent_link_open", FRAME_AGENT_LINK, err,
			   errlen), ret;

	if (r && r != -ENOENT && r != -ENOSYS)
		return r;
	/*
	 * Children forked later reach profd as their parent did: with a link, a
	 * pair of their own handed over through the spawner; else by the path.
	 */
	if (!r && sess->children &&
	    (r = link_agent(t, sess->daemon_fd, "profagent_spawner_open", FRAME_SPAWNER_LINK,
			    err, errlen)))
		return r;
	/* an empty path: the link */
	snprintf(connect_info, sizeof(connect_info), "%s\n%s", r ? sess->socket_path : "",
		 sess->token);
	r = call_in_target(t, AGENT_MODULE, "profagent_attach", args, 1, connect_info,
			   strlen(connect_info) + 1, true, &ret, err, errlen);
	if (!r && ret < 0) {
		snprintf(err, errlen, "the agent could not start: %s", strerror(-ret));
		r = ret;
	}
	return r;
}

int agent_inject_start(pid_t pid, const char *agent_path, const struct agent_inject_session *sess,
		       int *patched, double *pause_ms, char *err, size_t errlen)
{
	struct inject_target *t;
	int r, ret = 0;

	r = inject_attach(pid, &t, err, errlen);
	if (r)
		return r;
	r = inject_module_file(t, agent_path);
	if (!r)
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
		r = join_session(t, sess, err, errlen);
	if (!r)
		r = commit_patches(t, patched, pause_ms, err, errlen);
	if (r && ret == 0 && inject_has_module(t, AGENT_MODULE)) {
		int ignored; /* the agent is ours but could not start or patch: let it leave */

		call_in_target(t, AGENT_MODULE, "profagent_stop", NULL, 0, NULL, 0, true, &ignored,
			       err + strlen(err), errlen - strlen(err));
	}
	inject_detach(t);
	return r;
}

/* Original bytes back with every thread stopped, then the agent drains and leaves. */
int agent_inject_remove(pid_t pid, const char *agent_path, char *err, size_t errlen)
{
	struct inject_target *t;
	int r, ret = 0;

	r = inject_attach(pid, &t, err, errlen);
	if (r)
		return r;
	if (inject_module_file(t, agent_path)) {
		snprintf(err, errlen, "out of memory");
		inject_detach(t);
		return -ENOMEM;
	}
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
