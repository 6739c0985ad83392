// SPDX-License-Identifier: MIT
/*
 * `profctl snapshot ID [-o FILE]`: the current window of a flight-recorder
 * session (profctl run/attach --ring SIZE) written to a new file while the
 * session records on. profctl creates the file with the user's rights and
 * passes it to profd, which never opens a client's path. The window lands
 * in a temporary file beside FILE, renamed into place only when profd has
 * written it all: on any refusal nothing is left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profctl/profctl.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

static const char snapshot_usage[] =
	"usage: profctl snapshot ID [-o FILE]   (IDs: profctl status; the session needs --ring)\n";

static int parse_args(int argc, char **argv, uint64_t *id, const char **out)
{
	const char *id_arg = NULL;
	char *end;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
			if (++i == argc)
				return -EINVAL;
			*out = argv[i];
		} else if (!id_arg) {
			id_arg = argv[i];
		} else {
			return -EINVAL;
		}
	}
	if (!id_arg)
		return -EINVAL;
	errno = 0;
	*id = strtoull(id_arg, &end, 10);
	return errno || !*id || *end || id_arg[0] == '-' ? -EINVAL : 0;
}

/* Asks profd to write the window into fd; prints its refusal. 0 with *bytes, or -1. */
static int ask_snapshot(uint64_t id, int fd, uint64_t *bytes)
{
	Profd__SnapshotRequest req = PROFD__SNAPSHOT_REQUEST__INIT;
	Profd__SnapshotReply *reply;
	struct frame_header h;
	uint8_t buf[32], *payload = NULL;

	req.session_id = id;
	if (profctl_ask(FRAME_SNAPSHOT_REQUEST, buf, profd__snapshot_request__pack(&req, buf), fd,
			&h, &payload))
		return -1;
	if (h.type != FRAME_SNAPSHOT_REPLY) {
		if (h.type == FRAME_ERROR)
			profctl_print_refusal(payload, h.length);
		else
			fprintf(stderr, "profctl: unexpected %s frame from profd\n",
				frame_type_name(h.type));
		free(payload);
		return -1;
	}
	reply = profd__snapshot_reply__unpack(NULL, h.length, payload);
	free(payload);
	if (!reply) {
		fprintf(stderr, "profctl: malformed snapshot reply from profd\n");
		return -1;
	}
	*bytes = reply->bytes;
	profd__snapshot_reply__free_unpacked(reply, NULL);
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], stamp[32];
	const char *out = NULL;
	time_t now = time(NULL);
	uint64_t id, bytes = 0;
	int fd, rc;

	if (parse_args(argc, argv, &id, &out)) {
		fprintf(stderr, "%s", snapshot_usage);
		return 2;
	}
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
	if (out)
		snprintf(path, sizeof(path), "%s", out);
	else
		snprintf(path, sizeof(path), "profd-%" PRIu64 "-snapshot-%s.pftrace", id, stamp);
	snprintf(tmp, sizeof(tmp), "%s.partial-%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "profctl: cannot write the snapshot to %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	rc = ask_snapshot(id, fd, &bytes);
	close(fd);
	if (rc == 0 && rename(tmp, path) != 0) {
		fprintf(stderr, "profctl: cannot write the snapshot to %s: %s\n", path,
			strerror(errno));
		rc = -1;
	}
	if (rc) {
		unlink(tmp);
		return 1;
	}
	printf("profctl: snapshot of session %" PRIu64 ": %s (%" PRIu64 " bytes)\n", id, path,
	       bytes);
	return 0;
}
