// SPDX-License-Identifier: MIT
/*
 * `profctl run`: starts CMD stopped before exec, sets up the session with
 * profd (output descriptor passed, sampling armed on exec), releases CMD with
 * the agent preloaded, waits for it, and prints the session summary on
 * stderr. CMD's stdin/stdout/stderr are its own; its exit status is ours.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/module_preset.h"
#include "common/func_filter.h"
#include "common/hex.h"
#include "profctl/profctl.h"
#include "profctl/session_client.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define REPLY_TIMEOUT_MS 10000
/* PROFD_AGENT_CONFIG's value at most (an environment string may hold 128 KiB) */
#define AGENT_CONFIG_HEX_MAX (64 * 1024)
/* The config with its module presets, packed: within AGENT_CONFIG_HEX_MAX once in hex */
#define AGENT_CONFIG_PRESETS_MAX (AGENT_CONFIG_HEX_MAX / 2 - 1)

struct run_state {
	struct profile_options opt;
	char **argv;      /* CMD ARGS..., NULL-terminated */
	struct session_client client;
	char agent_path[PATH_MAX + 64];
	int foreign;      /* CMD runs under qemu-user: the agent goes through QEMU_SET_ENV */
	pid_t child;
	int go_pipe;      /* write end: the child waits on it before exec */
	int exec_error_pipe; /* read end: errno of a failed exec, or EOF on success */
};

static const char run_usage[] =
	"usage: profctl run [--funcs GLOBS] [--freq HZ] [-o FILE] [--duration S] [--call-graph fp|dwarf[,BYTES]|auto] [--mmap-pages N] [--buffer-size SIZE] [--min-duration DUR] [--max-depth N] [--trace-compression deflate|zstd|none] [--ring SIZE] [--sched on|off] [--no-inherit] [--args SPEC] [--retval SPEC] [--args-string-max N] [--auto-args] [-v] -- CMD "
	"[ARGS...]\n";

static int parse_run_options(int argc, char **argv, struct run_state *rs)
{
	int first = profile_options_parse(argc, argv, &rs->opt, run_usage, true);

	if (first < 0)
		return first;
	if (rs->opt.children) {
		fprintf(stderr, "profctl: --children is attach's: run follows every process its "
			"command starts (--no-inherit: the first only)\n");
		return -EINVAL;
	}
	if (first >= argc) {
		fprintf(stderr, "profctl: run needs a command after '--'\n%s", run_usage);
		return -EINVAL;
	}
	rs->argv = argv + first;
	return 0;
}

/* Like execvp's search, so "command not found" is said before anything starts. */
int profctl_find_command(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL;
	int found = 0;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return access(cmd, X_OK) == 0 ? 0 : -errno;
	}
	copy = strdup(path && path[0] ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		struct stat st;

		snprintf(out, len, "%s/%s", dir[0] ? dir : ".", cmd);
		found = access(out, X_OK) == 0 && stat(out, &st) == 0 && S_ISREG(st.st_mode);
	}
	free(copy);
	return found ? 0 : -ENOENT;
}

static void set_preload(const char *agent)
{
	const char *old = getenv("LD_PRELOAD");
	size_t len = strlen(agent) + (old ? strlen(old) : 0) + 2;
	char *v = malloc(len);

	if (!v)
		return;
	snprintf(v, len, "%s%s%s", agent, old && old[0] ? ":" : "", old ? old : "");
	setenv("LD_PRELOAD", v, 1);
	free(v);
}

/*
 * The go message, up to its end (the pipe closed), in reads of whatever the
 * pipe holds (a byte at a time was 85 reads on each run's path): NULL when
 * empty, unreadable or past its bound.
 */
static char *read_go_message(int fd)
{
	size_t n = 0, cap = 0;
	char *buf = NULL, *grown;
	ssize_t r;

	do {
		if (n + 1 >= cap) {
			cap = cap ? cap * 2 : 4096;
			if (cap > 2 * AGENT_CONFIG_HEX_MAX || !(grown = realloc(buf, cap)))
				break;
			buf = grown;
		}
		r = read(fd, buf + n, cap - n - 1);
		n += r > 0 ? (size_t)r : 0;
	} while (r > 0 || (r < 0 && errno == EINTR));
	if (!buf || n == 0 || r != 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* The next line of *rest (its newline cut), *rest past it; NULL when there is none. */
static char *next_line(char **rest)
{
	char *line = *rest, *nl;

	if (!line || !line[0])
		return NULL;
	nl = strchr(line, '\n');
	*rest = nl ? nl + 1 : line + strlen(line);
	if (nl)
		*nl = '\0';
	return line;
}

/* The config in hex unpacked, NULL when it is not one. */
static Profd__AgentConfig *config_unhex(const char *hex)
{
	size_t len;
	uint8_t *buf = hex_decode(hex, &len);
	Profd__AgentConfig *cfg = buf ? profd__agent_config__unpack(NULL, len, buf) : NULL;

	free(buf);
	return cfg;
}

/* Presets of the modules this process has loaded, made for some patterns. */
struct preset_set {
	char **patterns; /* borrowed: the run's options, or the config's */
	size_t n_patterns;
	const struct func_filter *filter;
	Profd__PresetModule **mods;
	size_t n;
};

/* Adds the preset of one of our modules (named by path: not our program, not the vdso). */
static int add_module_preset(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct preset_set *set = ctx;
	Profd__PresetModule *pm, **grown;
	char err[256];

	(void)size;
	if (info->dlpi_name[0] != '/' ||
	    !(pm = module_preset_new(set->filter, info->dlpi_name, err, sizeof(err))))
		return 0;
	grown = realloc(set->mods, (set->n + 1) * sizeof(*set->mods));
	if (!grown) {
		module_preset_free(pm);
		return 0;
	}
	set->mods = grown;
	set->mods[set->n++] = pm;
	return 0;
}

/* 0, or -EINVAL when the patterns are no filter (the set is then empty). */
static int preset_set_make(struct preset_set *set, char **patterns, size_t n_patterns)
{
	struct func_filter *filter = NULL;
	char err[256];

	*set = (struct preset_set){ .patterns = patterns, .n_patterns = n_patterns };
	if (func_filter_parse((const char *const *)patterns, n_patterns, &filter, err,
			      sizeof(err)))
		return -EINVAL;
	set->filter = filter;
	dl_iterate_phdr(add_module_preset, set);
	set->filter = NULL;
	func_filter_free(filter);
	return 0;
}

static void preset_set_free(struct preset_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		module_preset_free(set->mods[i]);
	free(set->mods);
	*set = (struct preset_set){ 0 };
}

static bool preset_set_for(const struct preset_set *set, const Profd__AgentConfig *cfg)
{
	if (set->n_patterns != cfg->n_func_patterns)
		return false;
	for (size_t i = 0; i < set->n_patterns; i++)
		if (strcmp(set->patterns[i], cfg->func_patterns[i]) != 0)
			return false;
	return true;
}

/* Moves the set's presets into cfg in order, each while the config stays under its bound. */
static void preset_set_attach(struct preset_set *set, Profd__AgentConfig *cfg)
{
	size_t packed = profd__agent_config__get_packed_size(cfg);
	Profd__PresetModule **grown =
		realloc(cfg->preset_modules, (cfg->n_preset_modules + set->n + 1) * sizeof(*grown));

	if (grown)
		cfg->preset_modules = grown;
	for (size_t i = 0; i < set->n; i++) {
		size_t len = profd__preset_module__get_packed_size(set->mods[i]) + 8; /* tag, length */

		if (!grown || packed + len > AGENT_CONFIG_PRESETS_MAX) {
			module_preset_free(set->mods[i]); /* a glob matching most of it */
			continue;
		}
		cfg->preset_modules[cfg->n_preset_modules++] = set->mods[i];
		packed += len;
	}
	set->n = 0;
}

/*
 * The agents' config with the presets of the modules this process has
 * loaded (the loader, libc, the agent's own libraries among them, as the
 * target's processes will load them: the same files, as its environment
 * finds them), in hex; NULL when there is none to add (the config then goes
 * as it is). Every process of the tree takes them instead of reading those
 * files at its start (agent/module_preset.h). made: presets made before the
 * config came (while profd started the session), taken if made for its
 * patterns.
 */
static char *config_with_presets(const char *hex, struct preset_set *made)
{
	Profd__AgentConfig *cfg = config_unhex(hex);
	struct preset_set now = { 0 }, *set = made;
	char *out = NULL;
	uint8_t *buf = NULL;

	if (!cfg)
		return NULL;
	if (!preset_set_for(made, cfg)) {
		preset_set_make(&now, cfg->func_patterns, cfg->n_func_patterns);
		set = &now;
	}
	preset_set_attach(set, cfg);
	if (cfg->n_preset_modules && (buf = malloc(profd__agent_config__get_packed_size(cfg))))
		out = hex_encode(buf, profd__agent_config__pack(cfg, buf));
	free(buf);
	preset_set_free(&now);
	profd__agent_config__free_unpacked(cfg, NULL);
	return out;
}

/*
 * In the child: wait for the go (three lines: the session token, or "-" for
 * no agent, the daemon's socket path and the agents' config in hex, possibly
 * empty, all known only after the fork), then become CMD. With the config
 * in the environment the agent of every process of the tree patches
 * without waiting for profd's reply.
 */
static void child_main(struct run_state *rs, int go_read, int err_write)
{
	char *msg, *rest, *token, *socket_path, *config, *with_presets;
	struct preset_set made = { 0 };
	int err;

	/*
	 * The presets while profd starts the session (1.9 ms of a short
	 * program's run, on its path when made after the go).
	 */
	if (!rs->foreign)
		preset_set_make(&made, rs->opt.patterns, rs->opt.n_patterns);
	rest = msg = read_go_message(go_read);
	close(go_read);
	token = next_line(&rest);
	socket_path = next_line(&rest);
	if (!token || !socket_path)
		_exit(127); /* profctl gave up before starting us */
	config = next_line(&rest); /* NULL: none */
	if (strcmp(token, "-") != 0) {
		if (rs->foreign)
			foreign_arch_preload(rs->agent_path); /* prepare() checked the path */
		else
			set_preload(rs->agent_path);
		setenv("PROFD_AGENT_SOCKET", socket_path, 1);
		setenv("PROFD_AGENT_TOKEN", token, 1);
		with_presets =
			config && config[0] && !rs->foreign ? config_with_presets(config, &made) : NULL;
		if (with_presets || (config && config[0]))
			setenv("PROFD_AGENT_CONFIG", with_presets ? with_presets : config, 1);
		free(with_presets);
	}
	free(msg);
	preset_set_free(&made);
	execvp(rs->argv[0], rs->argv);
	err = errno;
	if (write(err_write, &err, sizeof(err)) != sizeof(err))
		_exit(127);
	_exit(127);
}

static int fork_target(struct run_state *rs)
{
	int go[2], exec_err[2];

	if (pipe2(go, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC))
		return -errno;
	rs->child = fork();
	if (rs->child < 0)
		return -errno;
	if (rs->child == 0) {
		close(go[1]);
		close(exec_err[0]);
		child_main(rs, go[0], exec_err[1]);
	}
	close(go[0]);
	close(exec_err[1]);
	rs->go_pipe = go[1];
	rs->exec_error_pipe = exec_err[0];
	return 0;
}

static int announce_target(struct run_state *rs)
{
	Profd__TargetForked msg = PROFD__TARGET_FORKED__INIT;
	Profd__SamplingReady *ready;
	uint8_t buf[64], *reply = NULL;
	uint32_t len;
	int err;

	msg.pid = rs->child;
	err = frame_send(rs->client.link.fd, FRAME_TARGET_FORKED, buf,
			 profd__target_forked__pack(&msg, buf), -1);
	if (err < 0)
		return err;
	err = session_client_expect(&rs->client, FRAME_SAMPLING_READY, &reply, &len,
				    REPLY_TIMEOUT_MS);
	if (err)
		return err;
	ready = profd__sampling_ready__unpack(NULL, len, reply);
	free(reply);
	if (ready && ready->warning && ready->warning[0])
		fprintf(stderr, "profctl: warning: %s\n", ready->warning);
	if (ready && ready->sched_unavailable && ready->sched_unavailable[0]) {
		fprintf(stderr, "profctl: no scheduler states: %s\n", ready->sched_unavailable);
		rs->client.sched_told = true;
	}
	if (ready)
		profd__sampling_ready__free_unpacked(ready, NULL);
	return 0;
}

/* Writes all of buf (a pipe may take it in parts); 0 or -EPIPE. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Releases the child; returns 0 once it has exec'ed, or its exec errno. */
static int release_target(struct run_state *rs, const char *token)
{
	const char *config = rs->client.agent_config_hex;
	int exec_errno = 0;
	char msg[512];
	int len = snprintf(msg, sizeof(msg), "%s\n%s\n", token, rs->client.link.socket_path);

	if (config && strlen(config) + 1 >= AGENT_CONFIG_HEX_MAX)
		config = NULL; /* the agents ask profd instead */
	if (len >= (int)sizeof(msg) || write_all(rs->go_pipe, msg, (size_t)len) ||
	    (config && write_all(rs->go_pipe, config, strlen(config))))
		return -EPIPE;
	close(rs->go_pipe);
	rs->go_pipe = -1;
	if (read(rs->exec_error_pipe, &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno)) {
		fprintf(stderr, "profctl: cannot execute %s: %s\n", rs->argv[0],
			strerror(exec_errno));
		return -exec_errno;
	}
	return 0;
}

static int wait_target(struct run_state *rs, int *status)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		pid_t r = waitpid(rs->child, status, rs->opt.duration_s ? WNOHANG : 0);

		if (r == rs->child)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (!rs->opt.duration_s)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec >= (time_t)rs->opt.duration_s)
			return -ETIMEDOUT; /* profiling ends, the target runs on */
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

static const char *command_name(const struct run_state *rs)
{
	const char *base = strrchr(rs->argv[0], '/');

	return base ? base + 1 : rs->argv[0];
}

/* A shell would say so, but the shell's child is profctl, which exits normally. */
static void report_killed(const struct run_state *rs, int status)
{
	const char *abbrev = sigabbrev_np(WTERMSIG(status));

	fprintf(stderr, "profctl: %s (PID %d) was killed by signal %d (SIG%s)%s\n",
		command_name(rs), (int)rs->child, WTERMSIG(status), abbrev ? abbrev : "?",
		WCOREDUMP(status) ? ", core dumped" : "");
}

static int prepare(struct run_state *rs)
{
	char cmd_path[PATH_MAX], dir[PATH_MAX], arch[32];

	if (profile_patterns_check(&rs->opt))
		return -EINVAL;
	if (profctl_find_command(rs->argv[0], cmd_path, sizeof(cmd_path))) {
		fprintf(stderr, "profctl: %s: command not found\n", rs->argv[0]);
		return -ENOENT;
	}
	if (profctl_self_dir(dir, sizeof(dir)))
		return -ELIBACC;
	rs->foreign = foreign_arch_of(cmd_path, arch, sizeof(arch)) > 0;
	/* qemu-ARCH PROG: qemu itself is often static, the program is what counts */
	if (rs->opt.n_patterns && !rs->foreign && strncmp(command_name(rs), "qemu-", 5) != 0 &&
	    command_is_static(cmd_path)) {
		fprintf(stderr, "profctl: %s is statically linked: functions cannot be "
				"instrumented; sampling and scheduler states only\n",
			command_name(rs));
		rs->opt.n_patterns = 0; /* the session goes on, without the agent */
	}
	snprintf(rs->agent_path, sizeof(rs->agent_path), "%s%s%s/libprofagent.so", dir,
		 rs->foreign ? "/" : "", rs->foreign ? arch : "");
	if (rs->opt.n_patterns && access(rs->agent_path, R_OK)) {
		fprintf(stderr, "profctl: agent %s: %s%s\n", rs->agent_path, strerror(errno),
			rs->foreign ? " (the agent for the command's architecture: make ARCH=...)" : "");
		return -ELIBACC;
	}
	if (rs->opt.n_patterns && rs->foreign && strchr(rs->agent_path, ',')) {
		fprintf(stderr, "profctl: agent %s: a comma in its path cannot pass through "
				"qemu's QEMU_SET_ENV\n", rs->agent_path);
		return -ELIBACC;
	}
	/*
	 * qemu-user aborts (an assertion in its TCG) when a forked child starts
	 * a thread the way the agent's flusher starts in a followed child.
	 */
	if ((rs->foreign || strncmp(command_name(rs), "qemu-", 5) == 0) && !rs->opt.no_inherit &&
	    rs->opt.n_patterns) {
		fprintf(stderr, "profctl: %s runs under qemu-user: the processes it starts are "
				"not followed (as with --no-inherit)\n", command_name(rs));
		rs->opt.no_inherit = true;
	}
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct run_state rs = { .go_pipe = -1, .exec_error_pipe = -1 };
	char token[128] = "-";
	int status = 0, err, finished;

	if (parse_run_options(argc, argv, &rs))
		return 2;
	err = prepare(&rs);
	if (err)
		return err == -ENOENT ? 127 : 2; /* 127: the shell's "command not found" */
	session_client_init(&rs.client, &rs.opt);
	err = fork_target(&rs);
	if (!err)
		err = session_client_open_output(&rs.client, command_name(&rs), rs.child);
	if (!err)
		err = session_client_start(&rs.client, command_name(&rs), 0, token, sizeof(token));
	if (!err)
		err = announce_target(&rs);
	if (!err && rs.opt.n_patterns == 0)
		snprintf(token, sizeof(token), "-"); /* sampling only: no agent */
	if (!err)
		err = release_target(&rs, token);
	if (err) {
		if (rs.child > 0) {
			kill(rs.child, SIGKILL);
			waitpid(rs.child, NULL, 0);
		}
		session_client_close(&rs.client);
		return err == -ENOENT || err == -EACCES ? 127 : 1;
	}
	/* Ctrl-C is for CMD; profctl stays to finalize the trace */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	err = wait_target(&rs, &status);
	if (!err && WIFSIGNALED(status))
		report_killed(&rs, status);
	/* profd gone (said in one line): the command's own failure, else 1 */
	finished = session_client_finish(&rs.client, status);
	if (err == -ETIMEDOUT)
		waitpid(rs.child, &status, 0);
	session_client_close(&rs.client);
	return finished && !exit_code(status) ? 1 : exit_code(status);
}
