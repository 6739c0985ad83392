// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for profctl/http_serve.c's request parser and reply
 * builder (the bytes any local program may send to `profctl open`). Checks
 * that a parsed request points inside the input, that only a well-formed
 * GET of the one path served sends the file, and that every reply fits.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/http_serve.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static void check_within(struct http_str s, const char *buf, size_t size)
{
	CHECK(!s.p || (s.p >= buf && s.p + s.len <= buf + size));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct http_site site = {
		.path = "/t.pftrace", .origin = "https://ui.perfetto.dev", .port = 9001,
		.size = 1 << 20,
	};
	char *buf = malloc(size ? size : 1); /* exact size: ASan sees any overrun */
	struct http_request req;
	struct http_reply r;
	int err;

	memcpy(buf, data, size);
	err = http_request_parse(buf, size, &req);
	CHECK(err == 0 || err == -EINVAL);
	if (!err) {
		check_within(req.method, buf, size);
		check_within(req.target, buf, size);
		check_within(req.host, buf, size);
		check_within(req.origin, buf, size);
		CHECK(req.target.len > 0 && req.target.p[0] == '/');
		CHECK(!req.http11 || req.host.p);
	}
	http_reply_build(err ? NULL : &req, &site, 0, &r);
	CHECK(r.head_len < sizeof(r.head));
	CHECK(!r.sends_file || (r.status == 200 && r.file_len == site.size && !err &&
				req.target.len == strlen(site.path) &&
				memcmp(req.target.p, site.path, req.target.len) == 0 &&
				req.method.len == 3 && memcmp(req.method.p, "GET", 3) == 0));
	CHECK(err == 0 || r.status == 400);
	free(buf);
	return 0;
}
