// SPDX-License-Identifier: MIT
/*
 * profctl/http_serve.c's pure half: the strict request parser and the reply
 * each request gets (status, CORS headers, what goes out of the file).
 */
#include <errno.h>
#include <string.h>

#include "profctl/http_serve.h"
#include "unit.h"

static const struct http_site site = {
	.path = "/t.pftrace", .origin = "https://ui.perfetto.dev", .port = 9001, .size = 1234,
};

static int parse(const char *head, struct http_request *req)
{
	return http_request_parse(head, strlen(head), req);
}

static bool str_eq(struct http_str s, const char *lit)
{
	return s.p && s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

/* The reply to a head; -1 when it did not parse (then the 400 reply). */
static int status_of(const char *head, struct http_reply *r)
{
	struct http_request req;
	int err = parse(head, &req);

	http_reply_build(err ? NULL : &req, &site, 0, r);
	return r->status;
}

static bool has_line(const struct http_reply *r, const char *line)
{
	char want[256];

	snprintf(want, sizeof(want), "\r\n%s\r\n", line);
	return memmem(r->head, r->head_len, want, strlen(want)) != NULL;
}

static void test_parse_ui_fetch(void)
{
	struct http_request req;

	CHECK_EQ_INT(parse("GET /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
			   "Origin:  https://ui.perfetto.dev \t\r\nAccept: */*\r\n\r\n", &req), 0);
	CHECK(str_eq(req.method, "GET"));
	CHECK(str_eq(req.target, "/t.pftrace"));
	CHECK(str_eq(req.host, "127.0.0.1:9001"));
	CHECK(str_eq(req.origin, "https://ui.perfetto.dev")); /* spaces around trimmed */
	CHECK(req.http11);
}

static void test_parse_header_names_any_case(void)
{
	struct http_request req;

	CHECK_EQ_INT(parse("OPTIONS /t.pftrace HTTP/1.0\r\nACCESS-CONTROL-REQUEST-METHOD: GET\r\n"
			   "access-control-request-private-network: true\r\n\r\n", &req), 0);
	CHECK(str_eq(req.preflight_method, "GET"));
	CHECK(str_eq(req.preflight_private, "true"));
	CHECK(!req.http11);
	CHECK(!req.host.p); /* 1.0 may leave it out */
}

static void test_parse_rejects_malformed(void)
{
	static const char *const bad[] = {
		"GARBAGE\r\n\r\n",
		"GET /t.pftrace HTTP/1.1\nHost: a\n\n",            /* bare LF */
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\r\n\r\n",     /* bare CR */
		"GET /t.pftrace HTTP/1.1\r\n\r\n",                 /* 1.1 without Host */
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET  /t.pftrace HTTP/1.1\r\nHost: a\r\n\r\n",     /* two spaces */
		"GET t.pftrace HTTP/1.1\r\nHost: a\r\n\r\n",       /* not origin-form */
		"GET http://127.0.0.1:9001/t.pftrace HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /t.pftrace HTTP/2.0\r\nHost: a\r\n\r\n",
		"GET /t.pftrace\r\n\r\n",                          /* HTTP/0.9 */
		"GET /t.pftrace HTTP/1.1\r\nHost : a\r\n\r\n",     /* space before the colon */
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
		"GET /t.pftrace HTTP/1.1\r\nHost: a\x01\r\n\r\n",   /* a control byte */
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\n\r\nextra", /* past the blank line */
		"GET /t.pftrace HTTP/1.1\r\nHost: a\r\n",          /* no blank line */
		"",
	};
	struct http_request req;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &req) != -EINVAL)
			fprintf(stderr, "accepted bad head %zu\n", i);
		CHECK_EQ_INT(parse(bad[i], &req), -EINVAL);
	}
}

static void test_parse_rejects_nul(void)
{
	static const char head[] = "GET /t.pftrace HTTP/1.1\r\nHost: a\0b\r\n\r\n";
	struct http_request req;

	CHECK_EQ_INT(http_request_parse(head, sizeof(head) - 1, &req), -EINVAL);
}

static void test_get_sends_the_file(void)
{
	struct http_reply r;

	CHECK_EQ_INT(status_of("GET /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
			       "Origin: https://ui.perfetto.dev\r\n\r\n", &r), 200);
	CHECK(r.sends_file);
	CHECK_EQ_U64(r.file_len, 1234);
	CHECK(has_line(&r, "Access-Control-Allow-Origin: https://ui.perfetto.dev"));
	CHECK(has_line(&r, "Cache-Control: no-cache"));
	CHECK(has_line(&r, "Content-Length: 1234"));
	CHECK(has_line(&r, "Connection: close"));
	CHECK(r.head_len > 4 && memcmp(r.head + r.head_len - 4, "\r\n\r\n", 4) == 0);
}

static void test_head_sends_no_body(void)
{
	struct http_reply r;

	CHECK_EQ_INT(status_of("HEAD /t.pftrace HTTP/1.1\r\nHost: localhost:9001\r\n\r\n", &r), 200);
	CHECK(!r.sends_file);
	CHECK_EQ_U64(r.file_len, 0);
	CHECK(has_line(&r, "Content-Length: 1234"));
}

static void test_preflight(void)
{
	struct http_reply r;

	CHECK_EQ_INT(status_of("OPTIONS /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
			       "Origin: https://ui.perfetto.dev\r\nAccess-Control-Request-Method: GET\r\n"
			       "Access-Control-Request-Private-Network: true\r\n\r\n", &r), 204);
	CHECK(!r.sends_file);
	CHECK(has_line(&r, "Access-Control-Allow-Origin: https://ui.perfetto.dev"));
	CHECK(has_line(&r, "Access-Control-Allow-Methods: GET, HEAD, OPTIONS"));
	CHECK(has_line(&r, "Access-Control-Allow-Private-Network: true"));
	CHECK(!memmem(r.head, r.head_len, "Content-Length", 14)); /* never in a 204 */

	status_of("OPTIONS /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r);
	CHECK(!memmem(r.head, r.head_len, "Private-Network", 15));
}

static void test_refusals(void)
{
	struct http_reply r;

	CHECK_EQ_INT(status_of("GET /other HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 404);
	CHECK_EQ_INT(status_of("GET /t.pftrace?x HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 404);
	CHECK_EQ_INT(status_of("GET /../t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 404);
	CHECK_EQ_INT(status_of("POST /status HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 404);
	CHECK_EQ_INT(status_of("DELETE /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 405);
	CHECK(has_line(&r, "Allow: GET, HEAD, OPTIONS"));
	CHECK_EQ_INT(status_of("get /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n\r\n", &r), 405);
	CHECK_EQ_INT(status_of("GET /t.pftrace HTTP/1.1\r\nHost: evil.example:9001\r\n\r\n", &r), 403);
	CHECK_EQ_INT(status_of("GET /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9002\r\n\r\n", &r), 403);
	CHECK_EQ_INT(status_of("GET /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\n"
			       "Origin: https://evil.example\r\n\r\n", &r), 403);
	CHECK(!r.sends_file);
}

static void test_bad_request_body(void)
{
	struct http_reply r;

	CHECK_EQ_INT(status_of("GARBAGE\r\n\r\n", &r), 400);
	CHECK(!r.sends_file);
	CHECK(has_line(&r, "Content-Length: 16"));
	CHECK(r.head_len > 16 && memcmp(r.head + r.head_len - 16, "400 Bad Request\n", 16) == 0);
}

int main(void)
{
	RUN_TEST(test_parse_ui_fetch);
	RUN_TEST(test_parse_header_names_any_case);
	RUN_TEST(test_parse_rejects_malformed);
	RUN_TEST(test_parse_rejects_nul);
	RUN_TEST(test_get_sends_the_file);
	RUN_TEST(test_head_sends_no_body);
	RUN_TEST(test_preflight);
	RUN_TEST(test_refusals);
	RUN_TEST(test_bad_request_body);
	return unit_summary();
}
