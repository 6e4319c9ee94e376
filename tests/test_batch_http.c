/*
 * test_batch_http.c — POST /v1/attention/batch over real HTTP, against the
 * built server on the built-in models ($ATTN_TEST_MODELS_DIR, else
 * build/models).
 *
 * Random batches of named models (demo-4d, gpt2-small-shape) and of inline
 * weights, self- and cross-attention, answer for every sequence byte for
 * byte what POST /v1/attention answers for it without the shared fields;
 * refusals carry their status, code and path; --max-batch and
 * ATTN_MAX_BATCH bound the sequences; the route has its method, headers
 * and metrics label.
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/batch_build.h"
#include "tests/fixtures.h"
#include "tests/http_harness.h"

static void start(hs_server *s, const char *const *extra) {
    const char *dir = getenv("ATTN_TEST_MODELS_DIR");
    const char *args[16] = {"--models-dir", dir ? dir : "build/models", "--workers", "2"};
    size_t n = 4;
    for (; extra && *extra && n < 15; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    ck_assert_int_eq(hs_start(s, args), 0);
}

static void finish(hs_server *s) {
    char why[2048];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "%s", why);
}

static void post(CURL *c, unsigned port, const char *path, const char *body, hs_response *r) {
    ck_assert_int_eq(hs_request(c, port, "POST", path, NULL, body, strlen(body), r), CURLE_OK);
}

static void check_rounds(CURL *c, unsigned port, tb_kind kind, const char *model, size_t dm,
                         unsigned seed, int rounds, size_t max_seqs, size_t max_n) {
    static tb_part parts[64], seqs[64];
    for (int round = 0; round < rounds; round++) {
        json_t *body = tb_random_batch(&seed, kind, model, dm, max_seqs, max_n);
        char *text = json_dumps(body, JSON_COMPACT);
        hs_response r;
        post(c, port, "/v1/attention/batch", text, &r);
        ck_assert_msg(r.status == 200, "%ld %s for %.300s", r.status, r.body, text);
        char *timing = hs_header(&r, "Server-Timing");
        ck_assert_msg(timing && strstr(timing, "queue;dur=") && strstr(timing, "compute;dur=") &&
                          strstr(timing, "encode;dur="),
                      "Server-Timing: %s", timing ? timing : "(none)");
        free(timing);
        long n = tb_parts(r.body, r.len, parts, 64);
        const tb_part *sp = tb_find(parts, n, "sequences");
        ck_assert_ptr_nonnull(sp);
        size_t count = json_array_size(json_object_get(body, "sequences"));
        ck_assert_int_eq(tb_parts(sp->value, sp->value_len, seqs, 64), (long)count);
        for (size_t i = 0; i < count; i++) {
            json_t *single = tb_single(body, i);
            char *stext = json_dumps(single, JSON_COMPACT);
            hs_response one;
            post(c, port, "/v1/attention", stext, &one);
            ck_assert_msg(one.status == 200, "%ld %s", one.status, one.body);
            char *want = tb_strip_shared(one.body, one.len);
            ck_assert_msg(strlen(want) == seqs[i].value_len &&
                              !memcmp(want, seqs[i].value, seqs[i].value_len),
                          "round %d, sequence %zu:\n batch  %.300s\n single %.300s", round, i,
                          seqs[i].value, want);
            /* the shared fields as the single answer has them */
            static tb_part sparts[64];
            long sn = tb_parts(one.body, one.len, sparts, 64);
            static const char *const shared[] = {"model",  "d_model",  "n_heads", "n_kv_heads",
                                                 "d_head", "n_layers", "scale",   "heads"};
            for (size_t k = 0; k < 8; k++) {
                const tb_part *a = tb_find(parts, n, shared[k]),
                              *b = tb_find(sparts, sn, shared[k]);
                ck_assert_msg(a && b && a->value_len == b->value_len &&
                                  !memcmp(a->value, b->value, a->value_len),
                              "shared %s differs", shared[k]);
            }
            free(want);
            hs_response_free(&one);
            free(stext);
            json_decref(single);
        }
        hs_response_free(&r);
        free(text);
        json_decref(body);
    }
}

START_TEST(test_random_batches_over_http) {
    hs_server s;
    start(&s, NULL);
    CURL *c = curl_easy_init();
    check_rounds(c, s.port, TB_MODEL, "demo-4d", 4, 4242u, 12, 8, 9);
    check_rounds(c, s.port, TB_MODEL, "gpt2-small-shape", 768, 99u, 3, 5, 6);
    /* large enough (over SRV_JOB_SPLIT_FLOPS) to be split over the idle worker */
    check_rounds(c, s.port, TB_MODEL, "gpt2-small-shape", 768, 7u, 2, 12, 24);
    check_rounds(c, s.port, TB_INLINE, NULL, 0, 31337u, 12, 8, 9);
    check_rounds(c, s.port, TB_CROSS, NULL, 0, 2718u, 8, 6, 7);
    /* the route's own label in the metrics */
    ck_assert_int_gt(
        hs_metric(s.port, "attn_http_requests_total{route=\"attention_batch\",code=\"200\"} "), 0);
    curl_easy_cleanup(c);
    finish(&s);
}
END_TEST

static void expect(unsigned port, const char *body, long status, const char *code,
                   const char *path) {
    hs_response r;
    post(NULL, port, "/v1/attention/batch", body, &r);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    json_t *e = json_object_get(j, "error");
    ck_assert_msg(
        r.status == status && e && !strcmp(json_string_value(json_object_get(e, "code")), code) &&
            !strcmp(json_string_value(json_object_get(e, "path")), path),
        "expected %ld %s at %s, got %ld %s for %.200s", status, code, path, r.status, r.body, body);
    json_decref(j);
    hs_response_free(&r);
}

/* n sequences of `tokens` rows of 4 numbers for demo-4d. */
static char *demo_batch(size_t n, size_t tokens) {
    size_t cap = 64 + n * (32 + tokens * 16);
    char *b = malloc(cap), *w = b;
    w += sprintf(w, "{\"model\":\"demo-4d\",\"sequences\":[");
    for (size_t i = 0; i < n; i++) {
        w += sprintf(w, "%s{\"embeddings\":[", i ? "," : "");
        for (size_t t = 0; t < tokens; t++)
            w += sprintf(w, "%s[1,0,%zu,1]", t ? "," : "", t);
        w += sprintf(w, "]}");
    }
    sprintf(w, "]}");
    return b;
}

/* A small batch is answered on the polling thread like a small single
 * (attn_inline_total counts it); a body over 4 KiB, or any batch with
 * --inline-max-flops 0, goes to the pool. */
START_TEST(test_small_batches_inline) {
    hs_server s;
    start(&s, NULL);
    char *small = demo_batch(2, 3), *large = demo_batch(64, 8);
    ck_assert_uint_gt(strlen(large), 4096);
    long before = hs_metric(s.port, "\nattn_inline_total ");
    ck_assert_int_eq(before, 0);
    hs_response r;
    post(NULL, s.port, "/v1/attention/batch", small, &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_inline_total "), 1);
    post(NULL, s.port, "/v1/attention/batch", large, &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_inline_total "), 1);
    finish(&s);

    static const char *const never[] = {"--inline-max-flops", "0", NULL};
    start(&s, never);
    post(NULL, s.port, "/v1/attention/batch", small, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    ck_assert_int_eq(hs_metric(s.port, "\nattn_inline_total "), 0);
    finish(&s);
    free(small), free(large);
}
END_TEST

START_TEST(test_refusals_over_http) {
    hs_server s;
    const char *args[] = {"--max-batch", "4", "--max-tokens", "10", "--max-body-bytes", "4k", NULL};
    start(&s, args);
    unsigned p = s.port;
    char *b = demo_batch(4, 2);
    hs_response r;
    post(NULL, p, "/v1/attention/batch", b, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    free(b);
    b = demo_batch(5, 1); /* one sequence too many */
    expect(p, b, 422, "limit_exceeded", "/sequences");
    free(b);
    b = demo_batch(4, 3); /* 12 tokens in all, over 10; each within */
    expect(p, b, 422, "limit_exceeded", "/sequences");
    free(b);
    b = demo_batch(1, 11); /* one sequence over */
    expect(p, b, 422, "limit_exceeded", "/sequences/0/embeddings");
    free(b);
    expect(p, "{\"model\":\"nope\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]}]}", 404,
           "unknown_model", "/model");
    expect(p, "{\"model\":\"bad name!\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]}]}", 400,
           "invalid_value", "/model");
    expect(
        p,
        "{\"model\":\"demo-4d\",\"weights\":{\"heads\":[]},\"sequences\":[{\"embeddings\":[[1]]}]"
        "}",
        400, "invalid_value", "");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":{}}", 400, "wrong_type", "/sequences");
    expect(p, "{\"model\":\"demo-4d\"}", 400, "missing_field", "/sequences");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},[1]]}", 400,
           "wrong_type", "/sequences/1");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[]}", 422, "dimension_mismatch", "/sequences");
    expect(p,
           "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},{\"embeddings\":[[1,"
           "2,3,4]]},{\"embeddings\":[[1,2,3,4]]},{\"tokens\":[\"a\"]}]}",
           422, "no_vocabulary", "/sequences/3/embeddings"); /* demo-4d has none */
    expect(p,
           "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},{\"mask\":"
           "\"none\"}]}",
           400, "missing_field", "/sequences/1/embeddings");
    expect(p,
           "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},{\"embeddings\":[[1,"
           "2,3,4]]},{\"embeddings\":[[1,2,3,4],[1,2]]}]}",
           422, "dimension_mismatch", "/sequences/2/embeddings/1");
    expect(p,
           "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},{\"embeddings\":[[1,"
           "2,3]]}]}",
           422, "dimension_mismatch", "/sequences/1/embeddings");
    expect(p,
           "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]],\"mask\":[[1,1]]}]}",
           422, "dimension_mismatch", "/sequences/0/mask/0");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]],\"scale\":2}]}",
           400, "unknown_field", "/sequences/0/scale");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]],\"mask\":7}]}",
           400, "wrong_type", "/sequences/0/mask");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[{\"embeddings\":\"x\"}]}", 400, "wrong_type",
           "/sequences/0/embeddings");
    expect(p, "{\"model\":\"demo-4d\",\"sequences\":[1", 400, "invalid_json", "");
    b = demo_batch(200, 1); /* over the body limit, refused from its Content-Length */
    ck_assert_uint_gt(strlen(b), 4096);
    expect(p, b, 413, "body_too_large", "");
    free(b);
    finish(&s);

    /* the work limit over the whole batch: each sequence of 2 alone is within it */
    const char *small[] = {"--max-flops", "2000", NULL};
    start(&s, small);
    b = demo_batch(1, 2);
    post(NULL, s.port, "/v1/attention/batch", b, &r);
    ck_assert_msg(r.status == 200, "%s", r.body);
    hs_response_free(&r);
    free(b);
    b = demo_batch(8, 2);
    expect(s.port, b, 422, "limit_exceeded", "");
    free(b);
    finish(&s);
}
END_TEST

START_TEST(test_max_batch_flag_and_env) {
    hs_server s;
    char *b2 = demo_batch(2, 1), *b3 = demo_batch(3, 1), *b300 = demo_batch(300, 1);
    hs_response r;
    /* the default, 256 */
    start(&s, NULL);
    char *b256 = demo_batch(256, 1);
    post(NULL, s.port, "/v1/attention/batch", b256, &r);
    ck_assert_msg(r.status == 200, "%ld %.200s", r.status, r.body);
    hs_response_free(&r);
    expect(s.port, b300, 422, "limit_exceeded", "/sequences");
    finish(&s);
    /* the environment */
    setenv("ATTN_MAX_BATCH", "2", 1);
    start(&s, NULL);
    post(NULL, s.port, "/v1/attention/batch", b2, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    expect(s.port, b3, 422, "limit_exceeded", "/sequences");
    finish(&s);
    /* the flag wins over it */
    const char *args[] = {"--max-batch", "3", NULL};
    start(&s, args);
    post(NULL, s.port, "/v1/attention/batch", b3, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    finish(&s);
    unsetenv("ATTN_MAX_BATCH");
    /* out of bounds at start */
    const char *zero[] = {"--max-batch", "0", NULL};
    ck_assert_int_ne(hs_start(&s, zero), 0);
    free(b2);
    free(b3);
    free(b256);
    free(b300);
}
END_TEST

/* A running batch whose client leaves stops between its phases and is
 * counted dropped, as a single request is (test_hostile.c). */
START_TEST(test_gone_client_drops_batch) {
    hs_server s;
    start(&s, NULL);
    /* 16 sequences of 512 zero rows of gpt2-small-shape: seconds of work */
    size_t len;
    char *b = tf_heavy_batch(16, 512, &len);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
             "X-Request-Id: batch-runner\r\nContent-Length: %zu\r\n\r\n",
             len);
    int fd = hs_raw_open(s.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, b, len), 0);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 1, 20), 1);
    close(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_jobs_dropped_total ", 1, 20), 1);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_workers_busy ", 0, 5), 0);
    char *line = hs_wait_access_line(&s, "batch-runner", 10);
    ck_assert_msg(line && strstr(line, " 499 "), "%s", line ? line : "(no line)");
    free(line);
    free(b);
    finish(&s);
}
END_TEST

START_TEST(test_route) {
    hs_server s;
    start(&s, NULL);
    hs_response r;
    ck_assert_int_eq(hs_request(NULL, s.port, "GET", "/v1/attention/batch", NULL, NULL, 0, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 405);
    char *allow = hs_header(&r, "Allow");
    ck_assert_str_eq(allow, "POST");
    free(allow);
    hs_response_free(&r);
    const char *text[] = {"Content-Type: text/plain", NULL};
    ck_assert_int_eq(hs_request(NULL, s.port, "POST", "/v1/attention/batch", text, "{}", 2, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 415);
    hs_response_free(&r);
    ck_assert_int_eq(hs_request(NULL, s.port, "POST", "/v1/attention/batch/", NULL, "{}", 2, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 404);
    hs_response_free(&r);
    finish(&s);
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("batch_http");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_random_batches_over_http);
    tcase_add_test(tc, test_refusals_over_http);
    tcase_add_test(tc, test_small_batches_inline);
    tcase_add_test(tc, test_max_batch_flag_and_env);
    tcase_add_test(tc, test_route);
    tcase_add_test(tc, test_gone_client_drops_batch);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
