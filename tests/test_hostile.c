/*
 * test_hostile.c — the built server against clients that break the rules,
 * over raw sockets on 127.0.0.1.
 *
 *   framing   RFC 9112's faults libmicrohttpd lets through (two lengths,
 *             a length with chunked, an unknown coding, no Host, NUL
 *             bytes): the contract's JSON error, then the connection
 *             closed, so no smuggled request behind is ever answered;
 *             an encoded slash (%2F) is no path separator; dot segments,
 *             sent as they are, reach no file; chunk sizes past 64 bits,
 *             chunk extensions, bodies of one-byte chunks; request lines
 *             and header blocks past libmicrohttpd's buffer;
 *             libmicrohttpd's own refusals counted by their real status.
 *   slow      headers or a body (chunked too) sent a byte at a time, or
 *             never, end at --connection-timeout with a 408; header-only
 *             POSTs announcing 64 MiB hold none of the body budget;
 *             connections over --max-connections are refused at once.
 *   gone      clients that leave while their jobs wait or run: the jobs
 *             are dropped (499, attn_jobs_dropped_total), a full queue of
 *             them gives its places to the next clients, and a load that
 *             stops and starts again at 64 connections gets no 503.
 *   drain     SIGTERM while 300 keep-alive connections ask for a model's
 *             weights (which a worker writes): the server exits 0 each time.
 *
 * The heavy requests name the built-in gpt2-small-shape model, from
 * $ATTN_TEST_MODELS_DIR (make test sets it).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/fixtures.h"
#include "tests/http_harness.h"

static const char tiny[] =
    "{\"embeddings\":[[1,0],[0,1]],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],"
    "\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]}}";

static void start(hs_server *s, const char *const *extra) {
    const char *dir = getenv("ATTN_TEST_MODELS_DIR");
    const char *args[24] = {"--models-dir", dir ? dir : "build/models"};
    size_t n = 2;
    for (; extra && *extra && n < 23; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    ck_assert_int_eq(hs_start(s, args), 0);
}

static void finish(hs_server *s) {
    char why[2048];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "%s", why);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A POST /v1/attention head with the given extra header lines. */
static char *post_head(const char *extra, size_t content_length) {
    char *h = NULL;
    if (asprintf(&h,
                 "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n",
                 extra, content_length) < 0)
        return NULL;
    return h;
}

/* Sends `req` and reads until the server closes (up to timeout_s): the
 * whole exchange, every response in it. */
static char *exchange_raw(unsigned port, const char *req, size_t len, double timeout_s) {
    char *got = hs_raw(port, req, len, timeout_s);
    ck_assert_ptr_nonnull(got);
    return got;
}

/* Status lines in a stream of answers: "HTTP/1.1 " at its start or right
 * after a body, not inside a message. */
static int answers_in(const char *raw) {
    int n = 0;
    for (const char *p = strstr(raw, "HTTP/1.1 "); p; p = strstr(p + 1, "HTTP/1.1 "))
        n += p == raw || p[-1] != ' ';
    return n;
}

/* One JSON error answer, of status and code, with a request id, and the
 * connection closed behind it (nothing more came). */
static void assert_one_error(const char *raw, const char *status_line, const char *code) {
    ck_assert_msg(strncmp(raw, status_line, strlen(status_line)) == 0, "got: %.400s", raw);
    char want[80];
    snprintf(want, sizeof want, "\"code\":\"%s\"", code);
    ck_assert_msg(strstr(raw, want), "got: %.400s", raw);
    ck_assert_msg(strstr(raw, "\r\nX-Request-Id: "), "got: %.400s", raw);
    ck_assert_msg(strstr(raw, "\r\nContent-Type: application/json"), "got: %.400s", raw);
    ck_assert_msg(answers_in(raw) == 1, "more than one answer: %.800s", raw);
}

/* The status of a raw answer, or -1. */
static long raw_status(const char *raw) {
    return raw && strncmp(raw, "HTTP/1.1 ", 9) == 0 ? strtol(raw + 9, NULL, 10) : -1;
}

/* The body of a raw answer (after its header block), or "". */
static const char *raw_body(const char *raw) {
    const char *b = raw ? strstr(raw, "\r\n\r\n") : NULL;
    return b ? b + 4 : "";
}

/* The head of a chunked POST /v1/attention. */
static const char chunked_head[] = "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   "Content-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";

/* ------------------------------------------------------------ framing */

static const char smuggled[] = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

START_TEST(framing_refused) {
    hs_server s;
    start(&s, NULL);
    char req[2048];
    /* two lengths: the bytes past the first body must never be a request */
    snprintf(req, sizeof req,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n%s%s",
             strlen(tiny), strlen(tiny) + strlen(smuggled), tiny, smuggled);
    char *raw = exchange_raw(s.port, req, strlen(req), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    ck_assert_ptr_null(strstr(raw, "\"models\""));
    free(raw);

    /* the same length twice is one length */
    snprintf(req, sizeof req,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(tiny), strlen(tiny), tiny);
    raw = exchange_raw(s.port, req, strlen(req), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    free(raw);

    /* a length and chunked: refused, and the connection closed (RFC 9112 §6.1) */
    snprintf(req, sizeof req,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n%s",
             strlen(tiny), tiny, smuggled);
    raw = exchange_raw(s.port, req, strlen(req), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    ck_assert_ptr_nonnull(strstr(raw, "\r\nConnection: close"));
    free(raw);

    /* codings it does not read: 501 at once, not a wait for the body's end
     * until the connection's timeout (30 s, past this read's deadline) */
    static const char *const codings[] = {"gzip", "identity, chunked", "chunked, gzip"};
    for (size_t i = 0; i < sizeof codings / sizeof *codings; i++) {
        snprintf(req, sizeof req,
                 "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 "Content-Type: application/json\r\nTransfer-Encoding: %s\r\n\r\nabc",
                 codings[i]);
        raw = exchange_raw(s.port, req, strlen(req), 20);
        assert_one_error(raw, "HTTP/1.1 501", "not_implemented");
        free(raw);
    }
    /* two Transfer-Encoding headers */
    snprintf(req, sizeof req,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    raw = exchange_raw(s.port, req, strlen(req), 5);
    assert_one_error(raw, "HTTP/1.1 501", "not_implemented");
    free(raw);

    /* HTTP/1.1 without Host, or with two; HTTP/1.0 without is fine */
    static const char no_host[] = "GET /healthz HTTP/1.1\r\n\r\n";
    raw = exchange_raw(s.port, no_host, strlen(no_host), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    free(raw);
    static const char two_hosts[] = "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    raw = exchange_raw(s.port, two_hosts, strlen(two_hosts), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    free(raw);
    static const char old[] = "GET /healthz HTTP/1.0\r\n\r\n";
    raw = exchange_raw(s.port, old, strlen(old), 5);
    ck_assert_msg(strstr(raw, " 200 OK\r\n"), "got: %.300s", raw);
    free(raw);
    /* Transfer-Encoding in HTTP/1.0 is faulty framing */
    static const char old_chunked[] =
        "POST /v1/attention HTTP/1.0\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    raw = exchange_raw(s.port, old_chunked, strlen(old_chunked), 5);
    ck_assert_msg(strstr(raw, " 400 Bad Request\r\n") && strstr(raw, "\"bad_request\""),
                  "got: %.300s", raw);
    free(raw);

    /* a space before the colon: not a length here, but one to a proxy */
    snprintf(req, sizeof req,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length : %zu\r\n\r\n%s",
             strlen(smuggled), smuggled);
    raw = exchange_raw(s.port, req, strlen(req), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    ck_assert_ptr_null(strstr(raw, "\"models\""));
    free(raw);
    /* "chunked " is not chunked to libmicrohttpd: refused, not waited on */
    static const char spaced[] = "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "Content-Type: application/json\r\nTransfer-Encoding: chunked \r\n"
                                 "\r\n2\r\n{}\r\n0\r\n\r\n";
    raw = exchange_raw(s.port, spaced, strlen(spaced), 20);
    assert_one_error(raw, "HTTP/1.1 501", "not_implemented");
    free(raw);
    /* two Authorization headers: which one counts is not for a proxy to guess */
    static const char two_keys[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\n"
                                   "Authorization: Bearer b\r\n\r\n";
    raw = exchange_raw(s.port, two_keys, strlen(two_keys), 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    free(raw);
    /* HTTP/1.2 is HTTP/1.1: Host is needed */
    static const char v12[] = "GET /healthz HTTP/1.2\r\n\r\n";
    raw = exchange_raw(s.port, v12, strlen(v12), 5);
    ck_assert_msg(strstr(raw, " 400 ") && strstr(raw, "\"bad_request\""), "got: %.300s", raw);
    free(raw);

    /* and the server serves as before */
    ck_assert_int_eq(hs_wait_metric(s.port,
                                    "attn_http_requests_total{route=\"attention\","
                                    "code=\"501\"} ",
                                    5, 5),
                     5);
    finish(&s);
}
END_TEST

/* A header folded onto a second line (obs-fold, RFC 9112 §5.2) is refused,
 * and said so: not read as part of its value, nor as a header of its own. */
START_TEST(folded_header_refused) {
    hs_server s;
    ck_assert_int_eq(hs_start(&s, NULL), 0);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Folded: one\r\n"
                              " two\r\n\r\n";
    char *raw = hs_raw(s.port, req, sizeof req - 1, 10.0);
    ck_assert_msg(raw && strncmp(raw, "HTTP/1.1 400", 12) == 0 && strstr(raw, "\"bad_request\"") &&
                      strstr(raw, "folded"),
                  "got: %.300s", raw ? raw : "(nothing)");
    free(raw);
    ck_assert(hs_wait_served(s.port, "/healthz", 5));
    finish(&s);
}
END_TEST

/* A NUL byte cuts nothing: "%00" in a path is no model of the name before
 * it, and a key with a NUL in it is no key. */
START_TEST(nul_bytes_refused) {
    char keys[] = "/tmp/attn-hostile-keys-XXXXXX";
    int kfd = mkstemp(keys);
    ck_assert_int_ge(kfd, 0);
    ck_assert_int_eq(write(kfd, "k2\n", 3), 3);
    close(kfd);
    hs_server s;
    const char *const args[] = {"--api-keys-file", keys, NULL};
    start(&s, args);

    static const char ok[] =
        "GET /v1/models/demo-4d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k2\r\n"
        "Connection: close\r\n\r\n";
    char *raw = exchange_raw(s.port, ok, strlen(ok), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    free(raw);

    static const char path_nul[] =
        "GET /v1/models/demo-4d%00x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k2\r\n"
        "Connection: close\r\n\r\n";
    raw = exchange_raw(s.port, path_nul, strlen(path_nul), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 404", 12) == 0 && strstr(raw, "\"not_found\""),
                  "got: %.300s", raw);
    ck_assert_ptr_null(strstr(raw, "\"d_model\""));
    free(raw);

    static const char post_nul[] =
        "POST /v1/attention%00x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k2\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    raw = exchange_raw(s.port, post_nul, strlen(post_nul), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 404", 12) == 0, "got: %.300s", raw);
    free(raw);

    static const char query_nul[] =
        "GET /v1/models/demo-4d?weights=true%00x HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer k2\r\nConnection: close\r\n\r\n";
    raw = exchange_raw(s.port, query_nul, strlen(query_nul), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 400", 12) == 0, "got: %.300s", raw);
    free(raw);

    static const char key_nul[] = "GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                                  "Authorization: Bearer k2\0junk\r\nConnection: close\r\n\r\n";
    raw = exchange_raw(s.port, key_nul, sizeof key_nul - 1, 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 401", 12) == 0 && strstr(raw, "\"unauthorized\""),
                  "got: %.300s", raw);
    free(raw);

    /* a NUL in the request line: in the target, in the method */
    static const char target_nul[] = "GET /v1/models/demo-4d\0zz HTTP/1.1\r\nHost: x\r\n"
                                     "Authorization: Bearer k2\r\n\r\n";
    raw = exchange_raw(s.port, target_nul, sizeof target_nul - 1, 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    ck_assert_ptr_null(strstr(raw, "\"d_model\""));
    free(raw);
    static const char method_nul[] = "GET\0X /v1/models HTTP/1.1\r\nHost: x\r\n"
                                     "Authorization: Bearer k2\r\n\r\n";
    raw = exchange_raw(s.port, method_nul, sizeof method_nul - 1, 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    free(raw);
    /* spaces between method and target, or before the version, are fine */
    static const char spaces[] = "GET  /v1/models/demo-4d HTTP/1.1\r\nHost: x\r\n"
                                 "Authorization: Bearer k2\r\nConnection: close\r\n\r\n";
    raw = exchange_raw(s.port, spaces, strlen(spaces), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.300s", raw);
    free(raw);

    static const char header_nul[] = "GET /v1/models HTTP/1.1\r\nHost: x\r\n"
                                     "Authorization: Bearer k2\r\nX-Note: a\0b\r\n\r\n";
    raw = exchange_raw(s.port, header_nul, sizeof header_nul - 1, 5);
    assert_one_error(raw, "HTTP/1.1 400", "bad_request");
    free(raw);
    finish(&s);
    unlink(keys);
}
END_TEST

/* GET path, or POST it with body when body is not NULL: the status, and
 * the body in *out (free it). */
static long ask(unsigned port, const char *path, const char *body, char **out) {
    hs_response r;
    hs_request(NULL, port, body ? "POST" : "GET", path, NULL, body, body ? strlen(body) : 0, &r);
    long status = r.status;
    *out = strdup(r.body ? r.body : "");
    hs_response_free(&r);
    return status;
}

/* An encoded slash is no path separator: "demo-4d%2Fready" is one
 * segment, which names no model (a model's name has no '%'), answered in
 * its route family's error form; other escapes still decode. */
START_TEST(encoded_slash_is_no_separator) {
    hs_server s;
    start(&s, NULL);
    static const char infer[] = "{\"inputs\":[{\"name\":\"embeddings\",\"datatype\":\"FP32\","
                                "\"shape\":[1,4],\"data\":[1,2,3,4]}]}";
    char *b;
    ck_assert_int_eq(ask(s.port, "/v2/models/demo-4d/ready", NULL, &b), 200);
    free(b);
    ck_assert_int_eq(ask(s.port, "/v2/models/demo-4d/infer", infer, &b), 200);
    free(b);
    static const char *const v2_unknown[] = {
        "/v2/models/demo-4d%2Fready", "/v2/models/demo-4d%2fready", "/v2/models/demo%2F4d/ready",
        "/v2/models/demo%2F4d", "/v2/models/demo-4d%2F"};
    for (size_t i = 0; i < sizeof v2_unknown / sizeof v2_unknown[0]; i++) {
        long st = ask(s.port, v2_unknown[i], NULL, &b);
        /* the Open Inference Protocol's form: {"error": "message"} */
        ck_assert_msg(st == 404 && strncmp(b, "{\"error\":\"", 10) == 0, "%s: %ld %s",
                      v2_unknown[i], st, b);
        free(b);
    }
    long st = ask(s.port, "/v2/models/demo%2F4d/infer", infer, &b);
    ck_assert_msg(st == 404 && strncmp(b, "{\"error\":\"", 10) == 0, "%ld %s", st, b);
    free(b);
    /* the path of a model's metadata, which takes no POST: no inference */
    st = ask(s.port, "/v2/models/demo-4d%2Finfer", infer, &b);
    ck_assert_msg(st >= 400 && !strstr(b, "\"outputs\""), "%ld %s", st, b);
    free(b);
    static const char *const v1_unknown[] = {"/v1/models/demo-4d%2Fx", "/v1/models/demo%2F4d",
                                             "/v1/models/demo%2f4d", "/v1/models/demo-4d%2F"};
    for (size_t i = 0; i < sizeof v1_unknown / sizeof v1_unknown[0]; i++) {
        st = ask(s.port, v1_unknown[i], NULL, &b);
        ck_assert_msg(st == 404 && strstr(b, "{\"error\":{\"code\":\"unknown_model\""),
                      "%s: %ld %s", v1_unknown[i], st, b);
        free(b);
    }
    /* other escapes decode, in the path and in the query */
    st = ask(s.port, "/v1/models/demo%2D4d", NULL, &b);
    ck_assert_msg(st == 200 && strstr(b, "\"d_model\":4") && !strstr(b, "\"w_q\""), "%ld %s", st,
                  b);
    free(b);
    st = ask(s.port, "/v1/models/demo-4d?weights=tr%75e", NULL, &b);
    ck_assert_msg(st == 200 && strstr(b, "\"w_q\""), "%ld %s", st, b);
    free(b);
    st = ask(s.port, "/v2/models/demo%2d4d/ready", NULL, &b);
    ck_assert_msg(st == 200 && strcmp(b, "{\"name\":\"demo-4d\",\"ready\":true}") == 0, "%ld %s",
                  st, b);
    free(b);
    finish(&s);
}
END_TEST

/* Traversal targets as sent, dot segments and all (libcurl removes them):
 * no route reads a file, a model's name is looked up among the models
 * loaded, and a path of more segments than its route's names nothing. Each
 * is answered in its route family's error form, never with a 200. */
START_TEST(raw_traversal) {
    hs_server s;
    start(&s, NULL);
    static const struct {
        const char *method, *target;
        long status;
        const char *form; /* the start of the body */
    } cases[] = {
        {"GET", "/v1/models/../../etc/passwd", 404, "{\"error\":{\"code\":\"not_found\""},
        {"GET", "/v1/models/../demo-4d", 404, "{\"error\":{\"code\":\"not_found\""},
        {"GET", "/v1/models/%2e%2e/%2e%2e/etc/passwd", 404, "{\"error\":{\"code\":\"not_found\""},
        {"GET", "/v1/models/..%2f..%2fetc%2fpasswd", 404, "{\"error\":{\"code\":\"unknown_model\""},
        {"GET", "/v1/models/..%2F..%2Fetc%2Fpasswd?weights=true", 404,
         "{\"error\":{\"code\":\"unknown_model\""},
        {"GET", "/v1/models/..", 404, "{\"error\":{\"code\":\"unknown_model\""},
        {"GET", "/v1/models/..?weights=true", 404, "{\"error\":{\"code\":\"unknown_model\""},
        {"GET", "/../../etc/passwd", 404, "{\"error\":{\"code\":\"not_found\""},
        {"GET", "/v1/openapi.yaml/../../../etc/passwd", 404, "{\"error\":{\"code\":\"not_found\""},
        {"GET", "/v2/models/../infer", 405, "{\"error\":\""},
        {"POST", "/v2/models/../infer", 404, "{\"error\":\""},
        {"GET", "/v2/models/../ready", 404, "{\"error\":\""},
        {"GET", "/v2/models/..", 404, "{\"error\":\""},
        {"GET", "/v2/models/demo-4d/../../../etc/passwd", 404, "{\"error\":\""},
        {"GET", "/v2/models/..%2f..%2fetc%2fpasswd/ready", 404, "{\"error\":\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int post = strcmp(cases[i].method, "POST") == 0;
        char req[512];
        snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n%s",
                 cases[i].method, cases[i].target,
                 post ? "Content-Type: application/json\r\nContent-Length: 2\r\n" : "",
                 post ? "{}" : "");
        char *raw = exchange_raw(s.port, req, strlen(req), 10);
        const char *body = raw_body(raw);
        ck_assert_msg(raw_status(raw) == cases[i].status &&
                          strncmp(body, cases[i].form, strlen(cases[i].form)) == 0,
                      "%s %s: %.400s", cases[i].method, cases[i].target, raw);
        ck_assert_msg(!strstr(raw, "root:") && !strstr(raw, "\"d_model\""), "%s: %.400s",
                      cases[i].target, raw);
        free(raw);
    }
    /* and a model is served as before */
    static const char ok[] =
        "GET /v1/models/demo-4d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char *raw = exchange_raw(s.port, ok, strlen(ok), 10);
    ck_assert_msg(raw_status(raw) == 200 && strstr(raw, "\"d_model\":4"), "%.300s", raw);
    free(raw);
    finish(&s);
}
END_TEST

/* What libmicrohttpd answers itself (in HTML, see the README) is counted by
 * its real status, not as a client that hung up. */
START_TEST(library_errors_counted) {
    hs_server s;
    start(&s, NULL);
    static const char bad_chunk[] =
        "POST /v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n";
    char *raw = exchange_raw(s.port, bad_chunk, strlen(bad_chunk), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 400", 12) == 0, "got: %.300s", raw);
    free(raw);
    /* a header block larger than libmicrohttpd's buffer: 431 */
    size_t big = 70000;
    char *req = malloc(big + 200);
    int n = snprintf(req, 200, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    strcpy(req + n + big, "\r\n\r\n");
    raw = exchange_raw(s.port, req, strlen(req), 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 431", 12) == 0, "got: %.300s", raw);
    free(raw);
    free(req);
    ck_assert_int_eq(
        hs_wait_metric(s.port, "attn_http_requests_total{route=\"attention\",code=\"400\"} ", 1, 5),
        1);
    ck_assert_int_eq(
        hs_wait_metric(s.port, "attn_http_requests_total{route=\"other\",code=\"431\"} ", 1, 5), 1);
    ck_assert_int_eq(
        hs_metric(s.port, "attn_http_requests_total{route=\"attention\",code=\"499\"} "), -1);
    finish(&s);
}
END_TEST

/* Chunk sizes past 64 bits are libmicrohttpd's 413 (counted by it); one of
 * 2^63 − 1 is a body that never ends, held only for what arrives, and
 * dropped, its share of the budget given back, once past
 * --max-body-bytes. Chunk extensions are read past, and a body of
 * thousands of one-byte chunks is read whole and gives its share back. */
START_TEST(chunk_sizes_and_extensions) {
    hs_server s;
    static const char *const args[] = {"--max-body-bytes", "128k", "--max-inflight-bytes", "1m",
                                       NULL};
    start(&s, args);
    const char *head = chunked_head;
    size_t hl = strlen(head);
    char req[4096];
    /* extensions on a chunk and on the last one */
    static const char *const exts[] = {";x=y", ";x=\"a b\"", ";a;b=c"};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++) {
        snprintf(req, sizeof req, "%s%zx%s\r\n%s\r\n0%s\r\n\r\n", head, strlen(tiny), exts[i], tiny,
                 exts[i]);
        int efd = hs_raw_open(s.port);
        ck_assert_int_eq(hs_raw_send(efd, req, strlen(req)), 0);
        char *raw = hs_raw_recv(efd, 10);
        ck_assert_msg(raw_status(raw) == 200 && strstr(raw, "\"n_tokens\":2"), "%s: %.400s",
                      exts[i], raw);
        free(raw);
        close(efd);
    }

    /* one-byte chunks: the tiny request and spaces, past the first piece
     * (64 KiB) so that the copy grows */
    enum { BODY = 100000 };
    char *body = malloc(BODY), *chunks = malloc(hl + BODY * 6 + 8), *c = chunks;
    memset(body, ' ', BODY);
    memcpy(body, tiny, strlen(tiny));
    memcpy(c, head, hl);
    c += hl;
    for (size_t i = 0; i < BODY; i++) {
        memcpy(c, "1\r\n", 3);
        c[3] = body[i];
        memcpy(c + 4, "\r\n", 2);
        c += 6;
    }
    memcpy(c, "0\r\n\r\n", 5);
    c += 5;
    int fd = hs_raw_open(s.port);
    ck_assert_int_eq(hs_raw_send(fd, chunks, (size_t)(c - chunks)), 0);
    char *raw = hs_raw_recv(fd, 30);
    ck_assert_msg(raw_status(raw) == 200 && strstr(raw, "\"n_tokens\":2"), "%.400s", raw);
    free(raw);
    close(fd);
    free(body);
    free(chunks);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 10), 0);

    /* sizes past 64 bits: libmicrohttpd's 413, nothing read behind them */
    static const char *const too_large[] = {"FFFFFFFFFFFFFFFFFF", "10000000000000000"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(req, sizeof req, "%s%s\r\n%s\r\n0\r\n\r\n%s", head, too_large[i], tiny, smuggled);
        char *raw = exchange_raw(s.port, req, strlen(req), 10);
        ck_assert_msg(raw_status(raw) == 413 && answers_in(raw) == 1, "%s: %.400s", too_large[i],
                      raw);
        free(raw);
    }
    ck_assert_int_eq(hs_wait_metric(s.port,
                                    "attn_http_requests_total{route=\"attention\",code=\"413\"} ",
                                    2, 10),
                     2);

    /* 2^63 − 1: what arrives is held, rounded up to a first piece, until
     * it passes --max-body-bytes; then nothing is, while the client sends
     * on */
    fd = hs_raw_open(s.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(hs_raw_send(fd, head, hl), 0);
    ck_assert_int_eq(hs_raw_send(fd, "7FFFFFFFFFFFFFFF\r\n", 18), 0);
    ck_assert_int_eq(hs_raw_send(fd, tiny, strlen(tiny)), 0);
    long reserved = hs_wait_metric_at_least(s.port, "\nattn_body_bytes_reserved ", 1, 10);
    ck_assert_msg(reserved > 0 && reserved <= 65536, "reserved %ld", reserved);
    char *spaces = malloc(200000);
    memset(spaces, ' ', 200000);
    ck_assert_int_eq(hs_raw_send(fd, spaces, 200000), 0);
    free(spaces);
    reserved = hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 10);
    ck_assert_msg(reserved == 0, "%ld bytes reserved for a body past --max-body-bytes", reserved);
    hs_raw_reset(fd);

    /* and the server serves on */
    hs_response r;
    hs_request(NULL, s.port, "POST", "/v1/attention", NULL, tiny, strlen(tiny), &r);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    hs_response_free(&r);
    finish(&s);
}
END_TEST

/* A request line longer than libmicrohttpd's 32 KiB buffer is its 414; a
 * header block is its 431 when the buffer cannot hold it, or its
 * headers' records with it (a few hundred short headers fit, thousands
 * do not, however short). Each is answered, the connection closed, and
 * the server serves on. */
START_TEST(long_request_line_and_headers) {
    hs_server s;
    start(&s, NULL);
    size_t big = 40000;
    char *req = malloc(big + 200);
    int n = snprintf(req, 200, "GET /healthz?");
    memset(req + n, 'a', big);
    strcpy(req + n + big, " HTTP/1.1\r\nHost: x\r\n\r\n");
    char *raw = exchange_raw(s.port, req, strlen(req), 10);
    ck_assert_msg(raw_status(raw) == 414 && answers_in(raw) == 1, "got: %.300s", raw);
    free(raw);
    n = snprintf(req, 200, "GET /");
    memset(req + n, 'a', big);
    strcpy(req + n + big, " HTTP/1.1\r\nHost: x\r\n\r\n");
    raw = exchange_raw(s.port, req, strlen(req), 10);
    ck_assert_msg(raw_status(raw) == 414, "got: %.300s", raw);
    free(raw);
    free(req);

    static const struct {
        int count;
        long status;
    } blocks[] = {{200, 200}, {2500, 431}, {5000, 431}};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        char *h = NULL;
        size_t hlen = 0;
        FILE *f = open_memstream(&h, &hlen);
        fputs("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", f);
        for (int i = 0; i < blocks[b].count; i++)
            fprintf(f, "X-H%d: v\r\n", i);
        fputs("\r\n", f);
        fclose(f);
        /* 2500 of them are under 32 KiB, 5000 over */
        ck_assert(blocks[b].count != 2500 || hlen < 32768);
        ck_assert(blocks[b].count != 5000 || hlen > 32768);
        raw = exchange_raw(s.port, h, hlen, 10);
        ck_assert_msg(raw_status(raw) == blocks[b].status && answers_in(raw) == 1,
                      "%d headers: %.300s", blocks[b].count, raw);
        free(raw);
        free(h);
    }
    ck_assert_msg(hs_wait_served(s.port, "/healthz", 10), "not served after");
    ck_assert_int_eq(
        hs_wait_metric(s.port, "attn_http_requests_total{route=\"other\",code=\"431\"} ", 2, 10),
        2);
    /* found in the request line: no callback, not counted (README) */
    ck_assert_int_eq(hs_metric(s.port, "code=\"414\"} "), -1);
    finish(&s);
}
END_TEST

/* --------------------------------------------------------------- slow */

/* Sends head at once, then data a byte every `gap` seconds for at most
 * `total` seconds; returns the seconds until the server closed the
 * connection (what it answered in *answer), or -1 if it never did. */
static double trickle(unsigned port, const char *head, const char *data, double gap, double total,
                      char **answer) {
    double t0 = now_s(); /* not after the server's clock starts */
    int fd = hs_raw_open(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    size_t len = strlen(data), i = 0;
    double closed = -1;
    *answer = NULL;
    while (now_s() - t0 < total) {
        if (i < len && send(fd, data + i, 1, MSG_NOSIGNAL) != 1) break;
        i++;
        char buf[1];
        if (recv(fd, buf, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 && (closed = now_s() - t0) >= 0) break;
        usleep((useconds_t)(gap * 1e6));
    }
    if (closed < 0) closed = now_s() - t0 < total ? now_s() - t0 : -1;
    *answer = hs_raw_recv(fd, 1.0);
    close(fd);
    return closed;
}

START_TEST(slow_headers_end) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout", "2", NULL};
    start(&s, args);
    char *answer;
    /* a request line and headers a byte every 0.2 s: never idle, but late;
     * closed (-1: not within 15 s), and not before the deadline */
    double t = trickle(s.port, "",
                       "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
                       0.2, 15, &answer);
    ck_assert_msg(t > 1.5, "closed after %.2f s", t);
    ck_assert_msg(answer && strstr(answer, "HTTP/1.1 408") && strstr(answer, "\"request_timeout\""),
                  "answer: %s", answer ? answer : "(none)");
    free(answer);
    /* the next request on a kept connection: its headers are due too */
    int fd = hs_raw_open(s.port);
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(hs_raw_send(fd, get, strlen(get)), 0);
    char *raw = hs_raw_recv(fd, 5);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 200", 12) == 0, "got: %.200s", raw);
    free(raw);
    /* a byte every 0.2 s until the server closes, 15 s at most */
    int closed = 0;
    for (int i = 0; i < 75 && !closed; i++) {
        closed = send(fd, "G", 1, MSG_NOSIGNAL) != 1;
        if (!closed) usleep(200000);
    }
    ck_assert_msg(closed, "a trickled second request was kept 15 s");
    close(fd);
    ck_assert_int_ge(hs_wait_metric(s.port, "\nattn_connections_timed_out_total ", 2, 5), 2);
    finish(&s);
}
END_TEST

/* A chunked body trickled a byte at a time, or one whose last chunk never
 * comes (a chunk of 2^63 − 1 bytes swallows it), ends at
 * --connection-timeout with a 408, and gives back its share of the budget. */
START_TEST(slow_chunked_body) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout", "2", NULL};
    start(&s, args);
    char *answer, *first = NULL;
    ck_assert_int_ge(asprintf(&first, "%s1000\r\n", chunked_head), 0);
    char spaces[100];
    memset(spaces, ' ', sizeof spaces - 1);
    spaces[sizeof spaces - 1] = '\0';
    /* of a chunk of 4096 bytes, 99 a byte every 0.2 s: never idle, but late */
    double t = trickle(s.port, first, spaces, 0.2, 15, &answer);
    ck_assert_msg(t > 1.5, "closed after %.2f s (-1: never)", t);
    ck_assert_msg(answer && strstr(answer, "HTTP/1.1 408") && strstr(answer, "\"request_timeout\""),
                  "answer: %s", answer ? answer : "(none)");
    free(answer);
    free(first);

    char *req = NULL;
    ck_assert_int_ge(asprintf(&req, "%s7FFFFFFFFFFFFFFF\r\n%s\r\n0\r\n\r\n", chunked_head, tiny),
                     0);
    double t0 = now_s();
    char *raw = exchange_raw(s.port, req, strlen(req), 15);
    ck_assert_msg(raw_status(raw) == 408 && strstr(raw, "\"request_timeout\"") &&
                      now_s() - t0 > 1.5 && answers_in(raw) == 1,
                  "after %.2f s: %.300s", now_s() - t0, raw);
    free(raw);
    free(req);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 10), 0);
    ck_assert_int_ge(hs_wait_metric(s.port,
                                    "attn_http_requests_total{route=\"attention\","
                                    "code=\"408\"} ",
                                    2, 10),
                     2);
    ck_assert_msg(hs_wait_served(s.port, "/healthz", 10), "not served after");
    finish(&s);
}
END_TEST

/* --max-connections trickling clients hold every connection only until
 * their deadline, and one over the limit is refused at once, not queued
 * in the kernel's backlog. */
START_TEST(connection_limit_and_slow_headers) {
    hs_server s;
    static const char *const args[] = {
        "--connection-timeout", "2", "--max-connections", "20", "--io-threads", "2", NULL};
    start(&s, args);
    enum { N = 20 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        /* the metrics request is a connection too: read before the last,
         * which is opened again until the metrics one is gone */
        if (i == N - 1) ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_connections ", N, 5), N);
        for (int tries = 0;; tries++) {
            fds[i] = hs_raw_open(s.port);
            ck_assert_int_ge(fds[i], 0);
            ck_assert_int_eq(hs_raw_send(fds[i], "G", 1), 0);
            char *early = i == N - 1 ? hs_raw_recv(fds[i], 0.2) : NULL;
            int refused = early && early[0] == 0 && recv(fds[i], early, 1, MSG_DONTWAIT) == 0;
            free(early);
            if (!refused) break;
            ck_assert_msg(tries < 20, "the last slow client was never taken");
            close(fds[i]);
            usleep(50000);
        }
    }
    /* one over the limit is closed without an answer: were it left in the
     * kernel's backlog instead, it would be served once the slow ones go
     * (2 s), within this read's deadline */
    char *raw = hs_raw(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35, 10);
    ck_assert_msg(raw == NULL || raw[0] == 0, "a connection over the limit was served: %s", raw);
    free(raw);
    /* the trickling ones go at their deadline, and others are served */
    for (int i = 0; i < N; i++) {
        char *raw = hs_raw_recv(fds[i], 6);
        ck_assert_msg(raw && strstr(raw, "408"), "client %d got: %s", i, raw ? raw : "(none)");
        free(raw);
        close(fds[i]);
    }
    ck_assert_msg(hs_wait_served(s.port, "/healthz", 2), "not served after the slow clients went");
    ck_assert_int_ge(hs_metric(s.port, "\nattn_connections_refused_total "), 1);
    finish(&s);
}
END_TEST

/* POSTs announcing 64 MiB and sending nothing: they hold none of the body
 * budget, so other POSTs go on, and they end at their deadline though no
 * byte comes to wake anything. */
START_TEST(header_only_posts) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout", "2", "--max-inflight-bytes", "64m",
                                       NULL};
    start(&s, args);
    enum { N = 8 };
    int fds[N];
    char *head = post_head("", (size_t)64 << 20);
    for (int i = 0; i < N; i++) {
        fds[i] = hs_raw_open(s.port);
        ck_assert_int_eq(hs_raw_send(fds[i], head, strlen(head)), 0);
    }
    free(head);
    /* their headers read (each one's exchange in flight, and this request's) */
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_http_requests_in_flight ", N + 1, 10),
                     N + 1);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_body_bytes_reserved "), 0);
    for (int i = 0; i < 3; i++) {
        hs_response r;
        hs_request(NULL, s.port, "POST", "/v1/attention", NULL, tiny, strlen(tiny), &r);
        ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
        hs_response_free(&r);
    }
    /* each ends with the server's 408 (not libmicrohttpd's silent close a
     * second later, nor never) */
    for (int i = 0; i < N; i++) {
        char *raw = hs_raw_recv(fds[i], 20);
        ck_assert_msg(raw && strstr(raw, "HTTP/1.1 408"), "got: %s", raw ? raw : "(none)");
        free(raw);
        close(fds[i]);
    }
    /* one that sends a little and stops holds only what it sent, rounded
     * up to a first piece, not the 64 MiB it announced */
    int fd = hs_raw_open(s.port);
    head = post_head("", (size_t)64 << 20);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, "{\"embeddings\": [", 16), 0);
    free(head);
    long reserved = hs_wait_metric_at_least(s.port, "\nattn_body_bytes_reserved ", 1, 10);
    ck_assert_msg(reserved > 0 && reserved <= 65536, "reserved %ld", reserved);
    close(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 5), 0);
    finish(&s);
}
END_TEST

/* Clients that send part of a large body and close at once, many in a
 * row, so that each one's end of stream arrives with its last bytes: every
 * reservation goes back long before --connection-timeout, and the next
 * POST is served. libmicrohttpd's edge-triggered epoll missed such an end
 * of stream (a short read counts as drained), keeping the connection and
 * its share of the budget until the timeout. */
START_TEST(vanished_bodies_give_back) {
    hs_server s;
    static const char *const args[] = {"--connection-timeout",
                                       "120",
                                       "--max-inflight-bytes",
                                       "32m",
                                       "--max-body-bytes",
                                       "8m",
                                       NULL};
    start(&s, args);
    enum { N = 30, PART = 3000000 };
    char *head = post_head("", 6000000);
    size_t hlen = strlen(head);
    char *req = malloc(hlen + PART);
    memcpy(req, head, hlen);
    memset(req + hlen, ' ', PART);
    free(head);
    for (int i = 0; i < N; i++) {
        int fd = hs_raw_open(s.port);
        ck_assert_int_ge(fd, 0);
        (void)hs_raw_send(fd, req, hlen + PART); /* may break on a 503's close */
        close(fd);
    }
    free(req);
    long reserved = hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 20);
    ck_assert_msg(reserved == 0, "%ld bytes still reserved for clients that left", reserved);
    hs_response r;
    hs_request(NULL, s.port, "POST", "/v1/attention", NULL, tiny, strlen(tiny), &r);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    hs_response_free(&r);
    finish(&s);
}
END_TEST

/* --------------------------------------------------------------- gone */

static int send_post(unsigned port, const char *body, const char *id) {
    int fd = hs_raw_open(port);
    ck_assert_int_ge(fd, 0);
    char extra[96];
    snprintf(extra, sizeof extra, "X-Request-Id: %s\r\n", id);
    char *head = post_head(extra, strlen(body));
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, body, strlen(body)), 0);
    free(head);
    return fd;
}

/* The status of the one answer on fd. */
static long answer_status(int fd, double timeout_s) {
    char *raw = hs_raw_recv(fd, timeout_s);
    long st = raw && strncmp(raw, "HTTP/1.1 ", 9) == 0 ? strtol(raw + 9, NULL, 10) : -1;
    free(raw);
    return st;
}

/* A full queue whose clients all left: the next clients are all served,
 * and the ones that left are logged 499 and counted. */
START_TEST(gone_clients_give_way) {
    hs_server s;
    static const char *const args[] = {"--workers", "1", "--queue-depth", "4", NULL};
    start(&s, args);
    /* ~1 s a job on one worker: the queue fills long before it drains */
    char *body = tf_heavy_body(2048);
    enum { Q = 5 };
    int fds[Q];
    /* one running (taken by the worker before the others come), four queued */
    for (int i = 0; i < Q; i++) {
        char id[32];
        snprintf(id, sizeof id, "left-%d", i);
        fds[i] = send_post(s.port, body, id);
        if (i == 0) ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 10), 1);
    }
    ck_assert_int_eq(hs_wait_metric_at_least(s.port, "\nattn_queue_depth ", 4, 10), 4);
    for (int i = 0; i < Q; i++)
        close(fds[i]);
    /* as many as the queue holds: the job that ran may not have stopped */
    for (int i = 0; i < Q - 1; i++) {
        char id[32];
        snprintf(id, sizeof id, "next-%d", i);
        fds[i] = send_post(s.port, body, id);
    }
    for (int i = 0; i < Q - 1; i++) {
        long st = answer_status(fds[i], 30);
        ck_assert_msg(st == 200, "next client %d: status %ld", i, st);
        close(fds[i]);
    }
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_jobs_dropped_total ", 4, 10), 4);
    int gone = 0;
    for (int i = 0; i < Q; i++) {
        char id[32];
        snprintf(id, sizeof id, "left-%d", i);
        char *line = hs_wait_access_line(&s, id, 10);
        gone += line && strstr(line, " 499 0B ");
        free(line);
    }
    char *log = hs_log(&s);
    ck_assert_msg(gone >= 4, "%d of the clients that left logged 499:\n%s", gone, log);
    free(log);
    free(body);
    finish(&s);
}
END_TEST

/* A running computation whose client leaves stops between its phases. */
START_TEST(gone_client_stops_running_job) {
    hs_server s;
    static const char *const args[] = {"--workers", "2", NULL};
    start(&s, args);
    char *body = tf_heavy_body(4096);
    int fd = send_post(s.port, body, "runner");
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 20), 1);
    close(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_jobs_dropped_total ", 1, 20), 1);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 0, 5), 0);
    char *line = hs_wait_access_line(&s, "runner", 10);
    ck_assert_msg(line && strstr(line, " 499 "), "%s", line ? line : "(no line)");
    free(line);
    free(body);
    finish(&s);
}
END_TEST

/* A load of 64 connections that stops and starts again (a warm-up, then
 * the measurement; or a proxy that timed out): with the default queue of
 * 64, the second round gets no 503 from the first round's dead jobs. */
START_TEST(load_restart_no_503) {
    hs_server s;
    start(&s, NULL);
    char *body = tf_heavy_body(256);
    enum { C = 64 };
    int fds[C];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < C; i++) {
            char id[32];
            snprintf(id, sizeof id, "round%d-%d", round, i);
            fds[i] = send_post(s.port, body, id);
        }
        if (round == 0) {
            ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_queue_depth ", 50, 20), 50);
            for (int i = 0; i < C; i++)
                hs_raw_reset(fds[i]);
        }
    }
    int ok = 0, refused = 0;
    for (int i = 0; i < C; i++) {
        long st = answer_status(fds[i], 60);
        ok += st == 200;
        refused += st == 503;
        close(fds[i]);
    }
    ck_assert_msg(ok == C, "%d of %d served, %d refused 503", ok, C, refused);
    free(body);
    finish(&s);
}
END_TEST

/* -------------------------------------------------------------- drain */

/* SIGTERM as 300 keep-alive connections each ask for a model's weights: a
 * request that arrives once the drain has counted what is in flight must
 * be answered (503 shutting_down) and never suspended, or stopping the
 * daemon aborts the process. */
START_TEST(sigterm_with_keepalive_weights) {
    enum { C = 300, RUNS = 6 };
    static const char health[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char weights[] = "GET /v1/models/demo-4d?weights=true HTTP/1.1\r\nHost: x\r\n\r\n";
    int *fds = malloc(C * sizeof *fds);
    for (int run = 0; run < RUNS; run++) {
        hs_server s;
        start(&s, NULL);
        for (int i = 0; i < C; i++) {
            fds[i] = hs_raw_open(s.port);
            ck_assert_int_ge(fds[i], 0);
            ck_assert_int_eq(hs_raw_send(fds[i], health, strlen(health)), 0);
        }
        for (int i = 0; i < C; i++) {
            long st = answer_status(fds[i], 10);
            ck_assert_int_eq(st, 200);
        }
        hs_signal(&s, SIGTERM);
        for (int i = 0; i < C; i++)
            send(fds[i], weights, strlen(weights), MSG_NOSIGNAL);
        for (int i = 0; i < C; i++) {
            long st = answer_status(fds[i], 10);
            ck_assert_msg(st == -1 || st == 200 || st == 503, "status %ld", st);
            close(fds[i]);
        }
        int status = hs_wait(&s, 20);
        ck_assert_msg(status == 0, "run %d: the server exited with %d", run, status);
        finish(&s);
    }
    free(fds);
}
END_TEST

static Suite *hostile_suite(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("framing");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, framing_refused);
    tcase_add_test(tc, nul_bytes_refused);
    tcase_add_test(tc, folded_header_refused);
    tcase_add_test(tc, encoded_slash_is_no_separator);
    tcase_add_test(tc, library_errors_counted);
    tcase_add_test(tc, raw_traversal);
    tcase_add_test(tc, chunk_sizes_and_extensions);
    tcase_add_test(tc, long_request_line_and_headers);
    suite_add_tcase(s, tc);
    tc = tcase_create("slow");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, slow_headers_end);
    tcase_add_test(tc, slow_chunked_body);
    tcase_add_test(tc, connection_limit_and_slow_headers);
    tcase_add_test(tc, header_only_posts);
    tcase_add_test(tc, vanished_bodies_give_back);
    suite_add_tcase(s, tc);
    tc = tcase_create("gone");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, gone_clients_give_way);
    tcase_add_test(tc, gone_client_stops_running_job);
    tcase_add_test(tc, load_restart_no_503);
    suite_add_tcase(s, tc);
    tc = tcase_create("drain");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, sigterm_with_keepalive_weights);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(hostile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
