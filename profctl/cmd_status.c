// SPDX-License-Identifier: MIT
/*
 * `profctl status` lists the sessions of the running profd (the system
 * service, or $PROFD_SOCKET) and `profctl stop ID` ends one. Private daemons
 * that `profctl run` starts for itself serve one session each and are not
 * listed. profd decides what a caller may see: another user's sessions show
 * only their id and owner.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/profctl.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

static void print_session(const Profd__SessionStatus *s)
{
	if (s->details_hidden) {
		printf("%6" PRIu64 "  (a session of uid %u)\n", s->id, s->owner_uid);
		return;
	}
	printf("%6" PRIu64 "  %-6s %7d %-16s %6u %12" PRIu64 " %10" PRIu64 " %10" PRIu64
	       " %8" PRIu64 " %8.1f  %s\n",
	       s->id, s->attach ? "attach" : "run", s->target_pid, s->target ? s->target : "",
	       s->functions, s->events, s->events_per_s, s->events_dropped, s->samples,
	       s->running_ms / 1000.0, s->output ? s->output : "");
}

int cmd_status(int argc, char **argv)
{
	Profd__StatusRequest req = PROFD__STATUS_REQUEST__INIT;
	Profd__StatusReply *reply;
	struct frame_header h;
	uint8_t buf[16], *payload = NULL;
	int err;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: profctl status\n");
		return 2;
	}
	err = profctl_ask(FRAME_STATUS_REQUEST, buf, profd__status_request__pack(&req, buf), -1, &h,
			&payload);
	if (err)
		return 1;
	if (h.type != FRAME_STATUS_REPLY) {
		err = h.type == FRAME_ERROR ? profctl_print_refusal(payload, h.length) : -EPROTO;
		free(payload);
		return 1;
	}
	reply = profd__status_reply__unpack(NULL, h.length, payload);
	free(payload);
	if (!reply) {
		fprintf(stderr, "profctl: malformed status reply from profd\n");
		return 1;
	}
	printf("profd %d: %zu session%s\n", reply->profd_pid, reply->n_sessions,
	       reply->n_sessions == 1 ? "" : "s");
	if (reply->n_sessions)
		printf("%6s  %-6s %7s %-16s %6s %12s %10s %10s %8s %8s  %s\n", "ID", "MODE", "PID",
		       "TARGET", "FUNCS", "EVENTS", "EVENTS/S", "DROPPED", "SAMPLES", "SECONDS",
		       "OUTPUT");
	for (size_t i = 0; i < reply->n_sessions; i++)
		print_session(reply->sessions[i]);
	profd__status_reply__free_unpacked(reply, NULL);
	return 0;
}

int cmd_stop(int argc, char **argv)
{
	Profd__StopRequest req = PROFD__STOP_REQUEST__INIT;
	Profd__StopReply *reply;
	struct frame_header h;
	uint8_t buf[32], *payload = NULL;
	char *end;
	int err;

	if (argc != 2 || !(req.session_id = strtoull(argv[1], &end, 10)) || *end) {
		fprintf(stderr, "usage: profctl stop ID   (IDs: profctl status)\n");
		return 2;
	}
	err = profctl_ask(FRAME_STOP_REQUEST, buf, profd__stop_request__pack(&req, buf), -1, &h,
			&payload);
	if (err)
		return 1;
	if (h.type != FRAME_STOP_REPLY) {
		if (h.type == FRAME_ERROR)
			profctl_print_refusal(payload, h.length);
		free(payload);
		return 1;
	}
	reply = profd__stop_reply__unpack(NULL, h.length, payload);
	free(payload);
	printf("profctl: %s\n", reply && reply->message ? reply->message : "stopped");
	if (reply)
		profd__stop_reply__free_unpacked(reply, NULL);
	return 0;
}
