/*
 * test_access.c — API keys and CORS, on the built server over real HTTP.
 *
 *   keys     --api-keys-file: every route but the probes (/healthz,
 *            /readyz, /v2/health/live, /v2/health/ready) and the teaching
 *            page (/: it holds no secret, and asks for the key), as the
 *            start-up log lists them, answers 401 unauthorized (with
 *            WWW-Authenticate: Bearer) unless the request carries a key
 *            of the file as Authorization: Bearer;
 *            near misses are refused; keys never reach the log; SIGHUP
 *            loads a new file, and a bad one leaves the old keys in force;
 *            a server whose key file cannot be read does not start.
 *   reflect  nothing a request carries comes back in a header or goes to
 *            the log, and no path reaches a file.
 *   leaks    the harness's check of every error body (http_harness.h)
 *            refuses a path, a key and a pointer when fed one, and lets
 *            the server's own error bodies and harmless look-alikes by.
 *   cors     --cors-origin: an allowed Origin gets Access-Control-Allow-*
 *            headers on every answer and a 204 to its preflight (no key
 *            needed for the preflight); any other origin gets none, and a
 *            server without --cors-origin never sends them.
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/http_harness.h"

static const char tiny[] =
    "{\"embeddings\":[[1,0],[0,1]],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],"
    "\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]}}";

static void finish(hs_server *s) {
    char why[512];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "server: %s", why);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Status of one request with an optional Authorization value. */
static long status_with(unsigned port, const char *method, const char *path,
                        const char *authorization, hs_response *keep) {
    char line[300];
    const char *headers[2] = {NULL, NULL};
    if (authorization) {
        snprintf(line, sizeof line, "Authorization: %s", authorization);
        headers[0] = line;
    }
    hs_response r;
    int post = strcmp(method, "POST") == 0;
    hs_request(NULL, port, method, path, headers, post ? tiny : NULL, post ? strlen(tiny) : 0, &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    long status = r.status;
    if (keep)
        *keep = r;
    else
        hs_response_free(&r);
    return status;
}

START_TEST(api_keys) {
    char path[] = "/tmp/attn-keys-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_file(path, "# keys for the test\nkey-one\n\n   \nsecond_key \r\n");
    hs_server s;
    const char *const args[] = {"--api-keys-file", path, NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);

    ck_assert_int_eq(status_with(s.port, "GET", "/healthz", NULL, NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/readyz", NULL, NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/", NULL, NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/v2/health/live", NULL, NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/v2/health/ready", NULL, NULL), 200);
    char *started = hs_log(&s);
    ck_assert_ptr_nonnull(strstr(started, "api keys: 2 loaded; required on every route but "
                                          "/healthz, /readyz, /, /v2/health/live, "
                                          "/v2/health/ready\n"));
    free(started);

    hs_response r;
    ck_assert_int_eq(status_with(s.port, "GET", "/metrics", NULL, &r), 401);
    char *www = hs_header(&r, "WWW-Authenticate");
    ck_assert_ptr_nonnull(www);
    ck_assert_str_eq(www, "Bearer");
    free(www);
    ck_assert_ptr_nonnull(strstr(r.body, "\"code\":\"unauthorized\""));
    hs_response_free(&r);

    static const char *const refused[] = {NULL,
                                          "Bearer",
                                          "Bearer ",
                                          "Bearer key-on",
                                          "Bearer key-one-more",
                                          "Basic key-one",
                                          "key-one",
                                          "Bearer second_key2",
                                          "Bearer KEY-ONE"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert_msg(status_with(s.port, "POST", "/v1/attention", refused[i], NULL) == 401,
                      "%s let through", refused[i] ? refused[i] : "no header");
        ck_assert_int_eq(status_with(s.port, "GET", "/v1/models", refused[i], NULL), 401);
    }
    ck_assert_int_eq(status_with(s.port, "POST", "/v1/attention", "Bearer key-one", NULL), 200);
    ck_assert_int_eq(status_with(s.port, "POST", "/v1/attention", "bearer second_key", NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models", "Bearer  key-one ", NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/nowhere", "Bearer key-one", NULL), 404);

    /* SIGHUP: a new file replaces the keys; a file without keys changes nothing */
    write_file(path, "third-key\n");
    hs_signal(&s, SIGHUP);
    ck_assert(hs_wait_log(&s, "api keys: reloaded, 1 key\n", 10));
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models", "Bearer third-key", NULL), 200);
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models", "Bearer key-one", NULL), 401);
    write_file(path, "# nothing\n");
    hs_signal(&s, SIGHUP);
    ck_assert(hs_wait_log(&s, "failed, the keys before stay in force", 10));
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models", "Bearer third-key", NULL), 200);

    char *log = hs_log(&s);
    ck_assert_ptr_nonnull(log);
    ck_assert_ptr_null(strstr(log, "key-one"));
    ck_assert_ptr_null(strstr(log, "third-key"));
    ck_assert_ptr_null(strstr(log, "second_key"));
    ck_assert_ptr_nonnull(strstr(log, "failed, the keys before stay in force"));
    free(log);
    finish(&s);

    /* a key file that cannot be read: no start */
    unlink(path);
    ck_assert_int_ne(hs_start(&s, args), 0);
}
END_TEST

START_TEST(cors) {
    hs_server s;
    static const char *const args[] = {"--cors-origin",
                                       "https://teach.example,http://localhost:5173", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);

    hs_response r;
    const char *ok[] = {"Origin: http://localhost:5173", NULL};
    hs_request(NULL, s.port, "POST", "/v1/attention", ok, tiny, strlen(tiny), &r);
    ck_assert_int_eq(r.status, 200);
    char *acao = hs_header(&r, "Access-Control-Allow-Origin");
    char *vary = hs_header(&r, "Vary");
    char *expose = hs_header(&r, "Access-Control-Expose-Headers");
    ck_assert_ptr_nonnull(acao);
    ck_assert_str_eq(acao, "http://localhost:5173");
    ck_assert_ptr_nonnull(vary);
    ck_assert_ptr_nonnull(expose);
    ck_assert_ptr_nonnull(strstr(expose, "X-Request-Id"));
    free(acao), free(vary), free(expose);
    hs_response_free(&r);

    const char *preflight[] = {"Origin: https://teach.example",
                               "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: content-type, authorization", NULL};
    hs_request(NULL, s.port, "OPTIONS", "/v1/attention", preflight, NULL, 0, &r);
    ck_assert_int_eq(r.status, 204);
    char *methods = hs_header(&r, "Access-Control-Allow-Methods");
    char *headers = hs_header(&r, "Access-Control-Allow-Headers");
    acao = hs_header(&r, "Access-Control-Allow-Origin");
    ck_assert_ptr_nonnull(methods);
    ck_assert_ptr_nonnull(strstr(methods, "POST"));
    ck_assert_ptr_nonnull(headers);
    ck_assert_ptr_nonnull(strstr(headers, "Authorization"));
    ck_assert_ptr_nonnull(strstr(headers, "Content-Type"));
    ck_assert_str_eq(acao, "https://teach.example");
    free(methods), free(headers), free(acao);
    hs_response_free(&r);

    /* another origin: no CORS headers, and OPTIONS is no preflight for it */
    const char *evil[] = {"Origin: https://evil.example", "Access-Control-Request-Method: POST",
                          NULL};
    hs_request(NULL, s.port, "OPTIONS", "/v1/attention", evil, NULL, 0, &r);
    ck_assert_int_eq(r.status, 405);
    ck_assert_ptr_null(hs_header(&r, "Access-Control-Allow-Origin"));
    hs_response_free(&r);
    hs_request(NULL, s.port, "GET", "/healthz", evil, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(hs_header(&r, "Access-Control-Allow-Origin"));
    hs_response_free(&r);
    finish(&s);

    /* without --cors-origin: never */
    ck_assert_int_eq(hs_start(&s, NULL), 0);
    hs_request(NULL, s.port, "GET", "/healthz", ok, NULL, 0, &r);
    ck_assert_ptr_null(hs_header(&r, "Access-Control-Allow-Origin"));
    hs_response_free(&r);
    hs_request(NULL, s.port, "OPTIONS", "/v1/attention", preflight, NULL, 0, &r);
    ck_assert_int_eq(r.status, 405);
    hs_response_free(&r);
    finish(&s);
}
END_TEST

/* Keys and CORS together: the preflight needs no key, the request does,
 * and its 401 still carries the CORS headers the browser needs to read it. */
START_TEST(keys_and_cors) {
    char path[] = "/tmp/attn-keys-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "k1\n", 3), 3);
    close(fd);
    hs_server s;
    const char *const args[] = {"--api-keys-file", path, "--cors-origin", "*", NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);
    hs_response r;
    const char *preflight[] = {"Origin: https://any.example", "Access-Control-Request-Method: POST",
                               NULL};
    hs_request(NULL, s.port, "OPTIONS", "/v1/attention", preflight, NULL, 0, &r);
    ck_assert_int_eq(r.status, 204);
    char *acao = hs_header(&r, "Access-Control-Allow-Origin");
    ck_assert_str_eq(acao, "*");
    free(acao);
    hs_response_free(&r);
    const char *origin[] = {"Origin: https://any.example", NULL};
    hs_request(NULL, s.port, "POST", "/v1/attention", origin, tiny, strlen(tiny), &r);
    ck_assert_int_eq(r.status, 401);
    acao = hs_header(&r, "Access-Control-Allow-Origin");
    ck_assert_ptr_nonnull(acao);
    free(acao);
    hs_response_free(&r);
    finish(&s);
    unlink(path);
}
END_TEST

/* What a request carries never comes back in a header nor goes to the log,
 * and no path reaches a file: the server serves what it embeds only. */
START_TEST(nothing_reflected) {
    hs_server s;
    ck_assert_int_eq(hs_start(&s, NULL), 0);
    static const char marker[] = "BODY-MARKER-5f1c";
    char body[512];
    snprintf(body, sizeof body,
             "{\"tokens\":[\"%s\",\"b\"],\"embeddings\":[[1,0],[0,1]],\"weights\":{\"heads\":[{"
             "\"w_q\":[[1,0],[0,1]],\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]}}",
             marker);
    const char *headers[] = {"X-Request-Id: <script>HDR-MARKER</script>",
                             "Origin: https://HDR-MARKER.example", NULL};
    hs_response r;
    hs_request(NULL, s.port, "POST", "/v1/attention", headers, body, strlen(body), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, marker)); /* the tokens are echoed in the body */
    ck_assert_ptr_null(strstr(r.headers, marker));
    ck_assert_ptr_null(strstr(r.headers, "HDR-MARKER"));
    hs_response_free(&r);
    /* an error about the body names the field, not the content */
    snprintf(body, sizeof body, "{\"tokens\":[\"%s\"],\"embeddings\":\"%s\"}", marker, marker);
    hs_request(NULL, s.port, "POST", "/v1/attention", headers, body, strlen(body), &r);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_null(strstr(r.headers, marker));
    hs_response_free(&r);

    static const char *const paths[] = {"/../../../../etc/passwd",
                                        "/v1/../../etc/passwd",
                                        "/%2e%2e/%2e%2e/etc/passwd",
                                        "/v1/openapi.yaml/../x",
                                        "/v1/models/..%2f..%2fetc%2fpasswd",
                                        "//etc/passwd",
                                        "/README.md",
                                        "/api/openapi.yaml"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        hs_request(NULL, s.port, "GET", paths[i], NULL, NULL, 0, &r);
        ck_assert_msg(r.status == 404 || r.status == 400, "%s: %ld", paths[i], r.status);
        ck_assert_msg(!strstr(r.body, "root:") && !strstr(r.body, "attention-server"),
                      "%s served a file", paths[i]);
        hs_response_free(&r);
    }
    char *log = hs_log(&s);
    ck_assert_ptr_nonnull(log);
    ck_assert_ptr_null(strstr(log, marker));
    ck_assert_ptr_null(strstr(log, "HDR-MARKER"));
    free(log);
    char why[512];
    ck_assert_msg(hs_finish(&s, why, sizeof why) == 0, "server: %s", why);
}
END_TEST

/* The check the harness runs on every error body refuses what it should.
 * Fed by hand: the server leaks none of it. The harness learns the key
 * file and the models directory from the server's arguments. */
START_TEST(leak_check_refuses) {
    char keys[] = "/tmp/attn-leak-keys-XXXXXX";
    int fd = mkstemp(keys);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_file(keys, "leak-check-key-0123\nk7\n");
    const char *models = getenv("ATTN_TEST_MODELS_DIR");
    if (!models) models = "build/models";
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(models, real));
    hs_server s;
    const char *const args[] = {"--api-keys-file", keys, "--models-dir", models, NULL};
    ck_assert_int_eq(hs_start(&s, args), 0);

    /* the server's own: a 401 and a 404 read through the harness (which
     * checks them) and checked again here */
    hs_response r;
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models/nope", NULL, &r), 401);
    char why[256];
    ck_assert_msg(!hs_leak_find(r.body, r.len, why, sizeof why), "%s in %s", why, r.body);
    hs_response_free(&r);
    ck_assert_int_eq(status_with(s.port, "GET", "/v1/models/nope", "Bearer k7", &r), 404);
    ck_assert_msg(!hs_leak_find(r.body, r.len, why, sizeof why), "%s in %s", why, r.body);
    hs_response_free(&r);

    char model_file[PATH_MAX + 64];
    snprintf(model_file, sizeof model_file, "cannot open %s/demo-4d.safetensors", real);
    const char *const leaking[] = {
        model_file,
        keys,
        "{\"error\":\"models: /tmp/attn-models-1/m.safetensors: a short file\"}",
        "no such file /work/x",
        "a path at /home/someone",
        "{\"message\":\"Bearer leak-check-key-0123 refused\"}",
        "the key k7 is wrong",
        "a buffer at 0xdeadbeef00",
        "a pointer 0X7FFD5E3C",
        "ptr=7ffd5e3c1a20,",
    };
    for (size_t i = 0; i < sizeof leaking / sizeof *leaking; i++)
        ck_assert_msg(hs_leak_find(leaking[i], strlen(leaking[i]), why, sizeof why),
                      "not refused: %s", leaking[i]);
    ck_assert_msg(hs_leak_find("0xdeadbeef00", 12, why, sizeof why) && strstr(why, "0xdeadbeef00"),
                  "the reason does not name it: %s", why);

    const char *const harmless[] = {
        "{\"error\":{\"code\":\"unknown_field\",\"path\":\"/weights/norm\"}}",
        "{\"error\":{\"path\":\"/weights/tmp/0/w_q\"}}",
        "the limit of 1099511627776 bytes",
        "no model named demo-4d.safetensors",
        "k77 and ak7 are no keys",
        "a byte 0x1f, a word deadbeefcafe",
        "GET /v1/models lists them",
    };
    for (size_t i = 0; i < sizeof harmless / sizeof *harmless; i++)
        ck_assert_msg(!hs_leak_find(harmless[i], strlen(harmless[i]), why, sizeof why),
                      "refused (%s): %s", why, harmless[i]);
    finish(&s);
    unlink(keys);
}
END_TEST

static Suite *access_suite(void) {
    Suite *s = suite_create("access");
    TCase *tc = tcase_create("access");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, api_keys);
    tcase_add_test(tc, cors);
    tcase_add_test(tc, keys_and_cors);
    tcase_add_test(tc, nothing_reflected);
    tcase_add_test(tc, leak_check_refuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(access_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
