// SPDX-License-Identifier: MIT
/*
 * libprofagent.so entry points: the constructor that connects to profd
 * (socket and token from the environment), instruments the selected
 * functions, reports them and starts the flusher; the destructor that drains
 * and says goodbye. Whatever fails here, the target runs on unchanged: the
 * agent goes quiet, it never exits or aborts the process.
 */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/flusher.h"
#include "agent/instrument.h"
#include "common/func_filter.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define AGENT_PROTOCOL_VERSION 1
#define CONFIG_TIMEOUT_MS 10000

/* Read by the entry trampoline's slow path (trampolines/x86_64.S): bytes of xsave area. */
uint64_t profagent_xsave_area_size = 4096;

static int agent_socket = -1;

static void xsave_size_init(void)
{
	unsigned int eax, ebx, ecx, edx;

	if (__get_cpuid_count(0xd, 0, &eax, &ebx, &ecx, &edx) && ebx > 0)
		profagent_xsave_area_size = ebx + 64;
}

static int agent_connect(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int send_hello(int fd, const char *token)
{
	Profd__AgentHello hello = PROFD__AGENT_HELLO__INIT;
	uint8_t buf[512];

	hello.agent_token = (char *)token;
	hello.pid = getpid();
	hello.protocol_version = AGENT_PROTOCOL_VERSION;
	if (profd__agent_hello__get_packed_size(&hello) > sizeof(buf))
		return -EMSGSIZE;
	return frame_send(fd, FRAME_AGENT_HELLO, buf, profd__agent_hello__pack(&hello, buf), -1);
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

static int send_function_table(int fd, const struct instrument_report *r)
{
	Profd__FunctionTable table = PROFD__FUNCTION_TABLE__INIT;
	Profd__InstrumentedFunction *fns = calloc(r->n_functions + 1, sizeof(*fns));
	Profd__InstrumentedFunction **fn_ptrs = calloc(r->n_functions + 1, sizeof(*fn_ptrs));
	Profd__SkippedFunction *sk = calloc(r->n_skipped + 1, sizeof(*sk));
	Profd__SkippedFunction **sk_ptrs = calloc(r->n_skipped + 1, sizeof(*sk_ptrs));
	uint8_t *buf = NULL;
	size_t len;
	int err = -ENOMEM;

	if (!fns || !fn_ptrs || !sk || !sk_ptrs)
		goto out;
	for (size_t i = 0; i < r->n_functions; i++) {
		profd__instrumented_function__init(&fns[i]);
		fns[i].id = r->functions[i].id;
		fns[i].name = r->functions[i].name;
		fns[i].module = (char *)r->functions[i].module;
		fns[i].address = r->functions[i].address;
		fns[i].size = r->functions[i].size;
		fn_ptrs[i] = &fns[i];
	}
	for (size_t i = 0; i < r->n_skipped; i++) {
		profd__skipped_function__init(&sk[i]);
		sk[i].name = r->skipped[i].name;
		sk[i].module = (char *)r->skipped[i].module;
		sk[i].reason = (char *)r->skipped[i].reason;
		sk_ptrs[i] = &sk[i];
	}
	table.n_functions = r->n_functions;
	table.functions = fn_ptrs;
	table.n_skipped = r->n_skipped;
	table.skipped = sk_ptrs;
	table.matched = r->matched;
	table.patch_time_ns = r->elapsed_ns;
	table.n_warnings = r->n_warnings;
	table.warnings = r->warnings;
	table.modules_scanned = r->modules_scanned;
	len = profd__function_table__get_packed_size(&table);
	while (len > FRAME_PAYLOAD_MAX && table.n_skipped > 0) {
		table.n_skipped /= 2; /* the daemon is told how many matched; the rest is detail */
		len = profd__function_table__get_packed_size(&table);
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	profd__function_table__pack(&table, buf);
	err = frame_send(fd, FRAME_FUNCTION_TABLE, buf, len, -1);
out:
	free(buf);
	free(fns);
	free(fn_ptrs);
	free(sk);
	free(sk_ptrs);
	return err;
}

/* Fork: the child keeps running what it inherited but records nothing. */
static void atfork_child(void)
{
	atomic_store(&agent_recording, 0);
	flusher_forget_after_fork();
	agent_socket = -1;
}

static int agent_instrument(int fd, const Profd__AgentConfig *cfg)
{
	struct instrument_report report;
	struct func_filter *filter = NULL;
	char err_text[256];
	int err;

	err = func_filter_parse((const char *const *)cfg->func_patterns, cfg->n_func_patterns,
				&filter, err_text, sizeof(err_text));
	if (err)
		return err;
	err = instrument_all(filter, &report);
	func_filter_free(filter);
	if (err)
		return err;
	err = send_function_table(fd, &report);
	instrument_report_free(&report);
	return err;
}

__attribute__((constructor)) static void agent_start(void)
{
	const char *path = getenv("PROFD_AGENT_SOCKET");
	const char *token = getenv("PROFD_AGENT_TOKEN");
	Profd__AgentConfig *cfg;
	struct event_clock_pair pair;
	int fd;

	if (!path || !token)
		return;
	agent_thread_guard = 1; /* agent code runs: instrumented calls pass through */
	xsave_size_init();
	fd = agent_connect(path);
	if (fd < 0)
		goto out;
	if (send_hello(fd, token) < 0 || !(cfg = receive_config(fd))) {
		close(fd);
		goto out;
	}
	if (threads_init() || pthread_atfork(NULL, NULL, atfork_child) ||
	    agent_instrument(fd, cfg) < 0) {
		profd__agent_config__free_unpacked(cfg, NULL);
		close(fd);
		goto out;
	}
	profd__agent_config__free_unpacked(cfg, NULL);
	flusher_read_clock_pair(&pair);
	if (flusher_start(fd, &pair) == 0) {
		agent_socket = fd;
		atomic_store(&agent_recording, 1);
	}
out:
	agent_thread_guard = 0;
}

__attribute__((destructor)) static void agent_stop(void)
{
	if (agent_socket < 0)
		return;
	agent_thread_guard = 1;
	flusher_stop("process exit");
}
