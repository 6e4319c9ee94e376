/*
 * test_oip_http.c — the Open Inference Protocol (KServe v2) over real HTTP:
 * metadata, health and readiness; padded batches answered bit for bit as
 * POST /v1/attention answers each real sequence unpadded (its base64
 * outputs against the binary tensors of /v2, byte for byte), with the
 * padded rows 0; the binary tensor data extension both ways as
 * tritonclient writes and reads it (tests/oip_client.h), a binary answer
 * of megabytes checked against the bytes recorded for it, and every output
 * the same as bytes and as JSON; every refusal with its status and the
 * protocol's {"error": "..."} body.
 *
 * Each test writes its models (the built-in ones) into a fresh directory,
 * starts the built server on a loopback port and stops it with hs_finish,
 * which fails on a non-zero exit or a sanitizer report.
 */
#include <check.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/base64.h"
#include "tests/fixtures.h"
#include "tests/http_harness.h"
#include "tests/oip_client.h"

static char dir[256];
static hs_server srv;

/* extra: up to 8 more arguments, NULL-terminated (may be NULL). */
static void start_with(const char *const *names, const char *const *extra) {
    tf_models_dir(dir, sizeof dir, "oip", names);
    const char *args[11] = {"--models-dir", dir};
    for (size_t i = 0; extra && extra[i] && i < 8; i++)
        args[2 + i] = extra[i];
    ck_assert_int_eq(hs_start(&srv, args), 0);
}

static void start(void) {
    const char *names[] = {"demo-4d", "gpt2-small-shape", "llama-small-shape", NULL};
    start_with(names, NULL);
}

static void finish(void) {
    char why[2048];
    ck_assert_msg(hs_finish(&srv, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(tf_remove_dir(dir), 0);
}

/* An answer's body as JSON, its status checked. */
static json_t *get_json(const char *method, const char *path, long want) {
    hs_response r;
    ck_assert_int_eq(hs_request(NULL, srv.port, method, path, NULL, NULL, 0, &r), CURLE_OK);
    ck_assert_msg(r.status == want, "%s %s: %ld, want %ld: %s", method, path, r.status, want,
                  r.body);
    json_t *j = r.len ? json_loadb(r.body, r.len, 0, NULL) : json_null();
    ck_assert_msg(j != NULL, "%s %s: not JSON: %s", method, path, r.body);
    hs_response_free(&r);
    return j;
}

/* A protocol error: status, and a body that is exactly {"error": string}. */
static void check_error_body(const hs_response *r, long want, const char *what) {
    ck_assert_msg(r->status == want, "%s: status %ld, want %ld: %s", what, r->status, want,
                  r->body);
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    ck_assert_msg(j && json_is_object(j) && json_object_size(j) == 1 &&
                      json_is_string(json_object_get(j, "error")),
                  "%s: not the protocol's error body: %s", what, r->body);
    json_decref(j);
}

/* POST /v2/models/{model}/infer as tritonclient sends it: no Content-Type,
 * Inference-Header-Content-Length when bytes follow. */
static void post_v2(const char *model, const oc_body *b, hs_response *r) {
    char path[128], hl[64];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", b->json_len);
    const char *headers[] = {"Content-Type:", b->json_len ? hl : NULL, NULL};
    ck_assert_int_eq(hs_request(NULL, srv.port, "POST", path, headers, b->data, b->len, r),
                     CURLE_OK);
}

/* A raw body with its own headers. */
static void post_raw(const char *model, const char *const *headers, const char *body, size_t len,
                     hs_response *r) {
    char path[128];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    ck_assert_int_eq(hs_request(NULL, srv.port, "POST", path, headers, body, len, r), CURLE_OK);
}

static oc_result parse_answer(const hs_response *r) {
    ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
    char *hl = hs_header(r, "Inference-Header-Content-Length");
    oc_result res;
    ck_assert_int_eq(oc_parse(&res, r->body, r->len, hl ? atoll(hl) : -1), 0);
    char *ct = hs_header(r, "Content-Type");
    ck_assert_ptr_nonnull(ct);
    ck_assert_str_eq(ct, hl ? "application/octet-stream" : "application/json");
    free(ct);
    free(hl);
    return res;
}

/* Pseudo-random floats in [-1, 1), exact in float32. */
static void fill(float *v, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((int)(x >> 16) % 256) / 256.0f;
    }
}

static const char *all_names[] = {"q",     "k",         "v", "scores", "patterns", "head_outputs",
                                  "delta", "embeddings"};

/* Output `name` of /v1's base64 answer j, decoded. */
static float *v1_output(const json_t *j, const char *name, size_t *count) {
    const json_t *t = json_object_get(j, name);
    ck_assert_msg(t != NULL, "/v1 answer lacks %s", name);
    const char *data = json_string_value(json_object_get(t, "data"));
    size_t len = strlen(data), n, bad;
    ck_assert_int_eq(api_base64_decoded_length(data, len, &n), 0);
    float *v = malloc(n ? n : 1);
    ck_assert_int_eq(api_base64_decode(v, data, len, &bad), 0);
    *count = n / sizeof(float);
    return v;
}

/* POST /v1/attention for rows × dm embeddings (and positions) with `extra`
 * fields; every output, base64. */
static json_t *post_v1(const char *model, const float *emb, size_t rows, size_t dm,
                       const int64_t *pos, const char *extra) {
    json_t *req = json_pack("{s:s,s:s}", "model", model, "encoding", "base64");
    json_t *e = json_array(), *ret = json_array();
    for (size_t i = 0; i < rows; i++) {
        json_t *row = json_array();
        for (size_t c = 0; c < dm; c++)
            json_array_append_new(row, json_real(emb[i * dm + c]));
        json_array_append_new(e, row);
    }
    json_object_set_new(req, "embeddings", e);
    for (size_t k = 0; k < 8; k++)
        json_array_append_new(ret, json_string(all_names[k]));
    json_object_set_new(req, "return", ret);
    if (pos) {
        json_t *p = json_array();
        for (size_t i = 0; i < rows; i++)
            json_array_append_new(p, json_integer(pos[i]));
        json_object_set_new(req, "positions", p);
    }
    if (extra) {
        json_t *x = json_loads(extra, 0, NULL);
        ck_assert_ptr_nonnull(x);
        json_object_update(req, x);
        json_decref(x);
    }
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    hs_response r;
    ck_assert_int_eq(
        hs_request(NULL, srv.port, "POST", "/v1/attention", NULL, text, strlen(text), &r),
        CURLE_OK);
    free(text);
    ck_assert_msg(r.status == 200, "/v1: %ld %s", r.status, r.body);
    json_t *j = json_loadb(r.body, r.len, 0, NULL);
    hs_response_free(&r);
    return j;
}

/* A padded batch through /v2 (every output, binary) against /v1 for each
 * real sequence unpadded, bit for bit; padded rows 0; padded keys masked. */
typedef struct batch_case {
    const char *model;
    size_t dm, hs, dh; /* hs: heads returned */
    size_t B, n;
    const int32_t *real; /* B × n, or NULL: no attention_mask */
    int mask_bool;       /* send the mask as BOOL */
    const int64_t *pos;  /* B × n, or NULL */
    int batch_axis;
    const char *v2_params; /* the request's parameters, or NULL */
    const char *v1_extra;  /* the same for /v1 */
    int json_inputs;       /* embeddings as JSON data rather than bytes */
} batch_case;

static void check_batch(const batch_case *c) {
    size_t B = c->B, n = c->n, dm = c->dm;
    float *emb = malloc(B * n * dm * sizeof *emb);
    fill(emb, B * n * dm, (unsigned)(B * 31 + n));
    uint8_t *mb = malloc(B * n);
    for (size_t i = 0; i < B * n; i++)
        mb[i] = c->real ? (uint8_t)c->real[i] : 1;
    oc_input ins[3];
    size_t n_in = 0;
    long long s3[3] = {(long long)B, (long long)n, (long long)dm};
    long long s2[2] = {(long long)B, (long long)n};
    ins[n_in] = (oc_input){"embeddings", "FP32", c->batch_axis ? 3 : 2, {0}, emb, !c->json_inputs};
    memcpy(ins[n_in].shape, c->batch_axis ? s3 : s3 + 1, ins[n_in].rank * sizeof(long long));
    n_in++;
    if (c->real) {
        ins[n_in] = (oc_input){"attention_mask",
                               c->mask_bool ? "BOOL" : "INT32",
                               c->batch_axis ? 2 : 1,
                               {0},
                               c->mask_bool ? (void *)mb : c->real,
                               0};
        memcpy(ins[n_in].shape, c->batch_axis ? s2 : s2 + 1, ins[n_in].rank * sizeof(long long));
        n_in++;
    }
    if (c->pos) {
        ins[n_in] = (oc_input){"positions", "INT64", c->batch_axis ? 2 : 1, {0}, c->pos, 1};
        memcpy(ins[n_in].shape, c->batch_axis ? s2 : s2 + 1, ins[n_in].rank * sizeof(long long));
        n_in++;
    }
    oc_output outs[8];
    for (size_t k = 0; k < 8; k++)
        outs[k] = (oc_output){all_names[k], 1};
    oc_body body;
    oc_build(&body, "batch-1", ins, n_in, outs, 8, c->v2_params, 0);
    hs_response r;
    post_v2(c->model, &body, &r);
    oc_result res = parse_answer(&r);
    ck_assert_str_eq(json_string_value(json_object_get(res.json, "id")), "batch-1");
    ck_assert_str_eq(json_string_value(json_object_get(res.json, "model_name")), c->model);

    float *got[8];
    for (size_t k = 0; k < 8; k++) {
        size_t count, rank;
        long long shape[4];
        int was_bin;
        got[k] = oc_output_values(&res, all_names[k], &count, shape, &rank, &was_bin);
        ck_assert_ptr_nonnull(got[k]);
        ck_assert(was_bin);
        int per_head = k < 6;
        size_t want_rank = (per_head ? 3 : 2) + (c->batch_axis ? 1 : 0);
        ck_assert_uint_eq(rank, want_rank);
        size_t a = c->batch_axis ? 1 : 0;
        if (c->batch_axis) ck_assert_int_eq(shape[0], (long long)B);
        if (per_head) {
            ck_assert_int_eq(shape[a], (long long)c->hs);
            ck_assert_int_eq(shape[a + 1], (long long)n);
            ck_assert_int_eq(shape[a + 2], (long long)(k == 3 || k == 4 ? n : c->dh));
        } else {
            ck_assert_int_eq(shape[a], (long long)n);
            ck_assert_int_eq(shape[a + 1], (long long)dm);
        }
    }
    for (size_t b = 0; b < B; b++) {
        size_t idx[64], rt = 0;
        for (size_t i = 0; i < n; i++)
            if (mb[b * n + i]) idx[rt++] = i;
        size_t per[8];
        for (size_t k = 0; k < 8; k++)
            per[k] = k < 6 ? c->hs * n * (k == 3 || k == 4 ? n : c->dh) : n * dm;
        if (rt == 0) {
            for (size_t k = 0; k < 8; k++)
                for (size_t e = 0; e < per[k]; e++) /* ck_ only on failure: a hot loop */
                    if (got[k][b * per[k] + e] != 0.0f)
                        ck_abort_msg("row %zu (all padding) %s", b, all_names[k]);
            continue;
        }
        float *cemb = malloc(rt * dm * sizeof *cemb);
        int64_t cpos[64];
        for (size_t i = 0; i < rt; i++) {
            memcpy(cemb + i * dm, emb + (b * n + idx[i]) * dm, dm * sizeof *cemb);
            if (c->pos) cpos[i] = c->pos[b * n + idx[i]];
        }
        json_t *v1 = post_v1(c->model, cemb, rt, dm, c->pos ? cpos : NULL, c->v1_extra);
        free(cemb);
        for (size_t k = 0; k < 8; k++) {
            size_t count;
            float *want = v1_output(v1, all_names[k], &count);
            const float *g = got[k] + b * per[k];
            size_t width = k < 6 ? (k == 3 || k == 4 ? n : c->dh) : dm;
            size_t wwant = k < 6 ? (k == 3 || k == 4 ? rt : c->dh) : dm;
            size_t heads = k < 6 ? c->hs : 1;
            for (size_t hh = 0; hh < heads; hh++)
                for (size_t i = 0; i < n; i++) {
                    /* the compact row of token i, or -1 for padding */
                    long ci = -1;
                    for (size_t t = 0; t < rt; t++)
                        if (idx[t] == i) ci = (long)t;
                    for (size_t col = 0; col < width; col++) {
                        float gv = g[(hh * n + i) * width + col];
                        /* k and v rows are keys: their own padding rule */
                        int square = k == 3 || k == 4;
                        /* ck_ only on failure: a passing ck_assert records its
                         * location, a write to check's runner, for every number */
                        if (ci < 0) {
                            if (gv != 0.0f)
                                ck_abort_msg("row %zu %s: padded token %zu not 0", b, all_names[k],
                                             i);
                            continue;
                        }
                        long cc = (long)col;
                        if (square) {
                            cc = -1;
                            for (size_t t = 0; t < rt; t++)
                                if (idx[t] == col) cc = (long)t;
                            if (cc < 0) {
                                if (k == 3 && !(isinf(gv) && gv < 0))
                                    ck_abort_msg("row %zu scores: padded key not -inf", b);
                                if (k != 3 && gv != 0.0f)
                                    ck_abort_msg("row %zu patterns: padded key", b);
                                continue;
                            }
                        }
                        float wv = want[(hh * (k < 6 ? rt : rt) + (size_t)ci) * wwant + (size_t)cc];
                        if (memcmp(&gv, &wv, sizeof gv) != 0)
                            ck_abort_msg("row %zu %s head %zu token %zu col %zu: %.9g, /v1 %.9g", b,
                                         all_names[k], hh, i, col, gv, wv);
                    }
                }
            free(want);
        }
        json_decref(v1);
    }
    for (size_t k = 0; k < 8; k++)
        free(got[k]);
    oc_result_free(&res);
    hs_response_free(&r);
    oc_body_free(&body);
    free(emb);
    free(mb);
}

START_TEST(metadata_and_health) {
    start();
    json_t *j = get_json("GET", "/v2", 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "attention-server");
    ck_assert(json_is_string(json_object_get(j, "version")));
    const json_t *ext = json_object_get(j, "extensions");
    int found = 0;
    for (size_t i = 0; i < json_array_size(ext); i++)
        found |= strcmp(json_string_value(json_array_get(ext, i)), "binary_tensor_data") == 0;
    ck_assert(found);
    json_decref(j);
    j = get_json("GET", "/v2/health/live", 200);
    ck_assert(json_is_true(json_object_get(j, "live")));
    json_decref(j);
    j = get_json("GET", "/v2/health/ready", 200);
    ck_assert(json_is_true(json_object_get(j, "ready")));
    json_decref(j);
    j = get_json("GET", "/v2/models/gpt2-small-shape/ready", 200);
    ck_assert(json_is_true(json_object_get(j, "ready")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "gpt2-small-shape");
    ck_assert_uint_eq(json_object_size(j), 2);
    json_decref(j);

    j = get_json("GET", "/v2/models/gpt2-small-shape", 200);
    ck_assert_str_eq(json_string_value(json_object_get(j, "name")), "gpt2-small-shape");
    ck_assert(json_is_string(json_object_get(j, "platform")));
    const char *in_names[] = {"embeddings", "attention_mask", "positions"};
    const char *in_types[] = {"FP32", "INT32", "INT64"};
    const json_t *ins = json_object_get(j, "inputs");
    ck_assert_uint_eq(json_array_size(ins), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *t = json_array_get(ins, i);
        ck_assert_str_eq(json_string_value(json_object_get(t, "name")), in_names[i]);
        ck_assert_str_eq(json_string_value(json_object_get(t, "datatype")), in_types[i]);
        const json_t *s = json_object_get(t, "shape");
        ck_assert_uint_eq(json_array_size(s), i == 0 ? 3 : 2);
        ck_assert_int_eq(json_integer_value(json_array_get(s, 0)), -1);
        ck_assert_int_eq(json_integer_value(json_array_get(s, 1)), -1);
        if (i == 0) ck_assert_int_eq(json_integer_value(json_array_get(s, 2)), 768);
    }
    const json_t *outs = json_object_get(j, "outputs");
    ck_assert_uint_eq(json_array_size(outs), 9);
    for (size_t i = 0; i < 9; i++) {
        const json_t *t = json_array_get(outs, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        ck_assert_str_eq(json_string_value(json_object_get(t, "datatype")), "FP32");
        const json_t *s = json_object_get(t, "shape");
        size_t rank = json_array_size(s);
        long long last = json_integer_value(json_array_get(s, rank - 1));
        if (!strcmp(name, "embeddings") || !strcmp(name, "delta"))
            ck_assert(rank == 3 && last == 768);
        else if (!strcmp(name, "rollout"))
            ck_assert(rank == 3 && last == -1);
        else if (!strcmp(name, "patterns") || !strcmp(name, "scores"))
            ck_assert(rank == 4 && last == -1);
        else
            ck_assert(rank == 4 && last == 64);
    }
    json_decref(j);

    hs_response r;
    ck_assert_int_eq(
        hs_request(NULL, srv.port, "GET", "/v2/models/no-such-model", NULL, NULL, 0, &r), CURLE_OK);
    check_error_body(&r, 404, "unknown model");
    hs_response_free(&r);
    ck_assert_int_eq(
        hs_request(NULL, srv.port, "GET", "/v2/models/no-such-model/ready", NULL, NULL, 0, &r),
        CURLE_OK);
    check_error_body(&r, 404, "unknown model ready");
    hs_response_free(&r);
    const char *unknown[] = {"/v2/", "/v2/models", "/v2/models/demo-4d/versions/1",
                             "/v2/models/demo-4d/infer/x", "/v2/health"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        ck_assert_int_eq(hs_request(NULL, srv.port, "GET", unknown[i], NULL, NULL, 0, &r),
                         CURLE_OK);
        check_error_body(&r, 404, unknown[i]);
        hs_response_free(&r);
    }
    ck_assert_int_eq(hs_request(NULL, srv.port, "POST", "/v2", NULL, "{}", 2, &r), CURLE_OK);
    check_error_body(&r, 405, "POST /v2");
    hs_response_free(&r);
    ck_assert_int_eq(
        hs_request(NULL, srv.port, "GET", "/v2/models/demo-4d/infer", NULL, NULL, 0, &r), CURLE_OK);
    check_error_body(&r, 405, "GET infer");
    char *allow = hs_header(&r, "Allow");
    ck_assert_str_eq(allow, "POST");
    free(allow);
    hs_response_free(&r);
    /* /v1 keeps its own error form */
    ck_assert_int_eq(hs_request(NULL, srv.port, "GET", "/v1/nothing", NULL, NULL, 0, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 404);
    ck_assert_ptr_nonnull(strstr(r.body, "\"code\":\"not_found\""));
    hs_response_free(&r);
    finish();
}
END_TEST

static const int32_t real_4x5[] = {
    1, 1, 1, 0, 0, /* right padding */
    0, 0, 1, 1, 1, /* left padding */
    1, 0, 1, 0, 1, /* holes */
    0, 0, 0, 0, 0, /* all padding */
};

START_TEST(padded_batch_gpt2) {
    start();
    batch_case c = {"gpt2-small-shape", 768, 12, 64, 4, 5, real_4x5, 0, NULL, 1, NULL, NULL, 0};
    check_batch(&c);
    /* the mask as BOOL, and every parameter; select_heads as a string */
    c.mask_bool = 1;
    c.v2_params = "{\"mask\":\"none\",\"scale\":0.3,\"select_heads\":\"3, 0,7\"}";
    c.v1_extra = "{\"mask\":\"none\",\"scale\":0.3,\"select_heads\":[3,0,7]}";
    c.hs = 3;
    check_batch(&c);
    c.v2_params = "{\"mask\":\"causal\",\"select_heads\":[11,2]}";
    c.v1_extra = "{\"mask\":\"causal\",\"select_heads\":[11,2]}";
    c.hs = 2;
    c.json_inputs = 1;
    check_batch(&c);
    finish();
}
END_TEST

START_TEST(single_row_and_no_batch_axis) {
    start();
    static const int32_t one[] = {0, 1, 1, 1};
    batch_case c = {"gpt2-small-shape", 768, 12, 64, 1, 4, one, 0, NULL, 1, NULL, NULL, 0};
    check_batch(&c);
    c.batch_axis = 0;
    check_batch(&c);
    c.real = NULL; /* no attention_mask: every token real */
    check_batch(&c);
    c.batch_axis = 1;
    check_batch(&c);
    finish();
}
END_TEST

/* A small infer request is answered on the polling thread like a small
 * /v1 one (attn_inline_total counts it); a body over 4 KiB goes to the
 * pool. */
START_TEST(small_infer_inline) {
    start();
    static const char tiny[] = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,3,4],"
                               "\"datatype\":\"FP32\",\"data\":[0.1,-0.2,0.3,0.1,-0.1,0.2,"
                               "0.2,-0.3,0.2,0.1,-0.1,0.2]}]}";
    const char *json[] = {"Content-Type: application/json", NULL};
    ck_assert_int_eq(hs_metric(srv.port, "\nattn_inline_total "), 0);
    hs_response r;
    post_raw("demo-4d", json, tiny, strlen(tiny), &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    ck_assert_int_eq(hs_metric(srv.port, "\nattn_inline_total "), 1);

    /* 4 rows of 64 tokens of demo-4d: the same work's kind, over 4 KiB */
    size_t cap = 256 + 4 * 64 * 4 * 8, used;
    char *large = malloc(cap);
    used = (size_t)snprintf(large, cap,
                            "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4,64,4],"
                            "\"datatype\":\"FP32\",\"data\":[");
    for (size_t i = 0; i < 4 * 64 * 4; i++)
        used += (size_t)snprintf(large + used, cap - used, "%s0.25", i ? "," : "");
    used += (size_t)snprintf(large + used, cap - used, "]}]}");
    ck_assert_uint_gt(used, 4096);
    post_raw("demo-4d", json, large, used, &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    ck_assert_int_eq(hs_metric(srv.port, "\nattn_inline_total "), 1);
    /* the body may name the model, as Triton's examples do: the path's, or a 400 */
    static const char named[] = "{\"model_name\":\"demo-4d\",\"model_version\":\"1\",\"inputs\":"
                                "[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                                "\"FP32\",\"data\":[1,0,0,1]}]}";
    post_raw("demo-4d", json, named, strlen(named), &r);
    ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
    hs_response_free(&r);
    static const char other[] = "{\"model_name\":\"gpt2-small-shape\",\"inputs\":[{\"name\":"
                                "\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\","
                                "\"data\":[1,0,0,1]}]}";
    post_raw("demo-4d", json, other, strlen(other), &r);
    check_error_body(&r, 400, "a model_name other than the path's");
    hs_response_free(&r);
    free(large);
    finish();
}
END_TEST

START_TEST(positions_rope_gqa) {
    start();
    static const int64_t pos[] = {7, 8, 9, 100, 0, 3, 1, 2};
    static const int32_t real[] = {1, 1, 1, 0, 0, 1, 1, 1};
    /* without positions, a left-padded row counts its real tokens from 0 */
    batch_case c = {"llama-small-shape", 2048, 32, 64, 2, 4, real, 0, NULL, 1, NULL, NULL, 0};
    check_batch(&c);
    c.pos = pos;
    check_batch(&c);
    finish();
}
END_TEST

/* tritonclient's defaults: outputs not named → binary_data_output: true,
 * the default outputs (patterns, embeddings) as bytes; id echoed. */
START_TEST(triton_defaults_and_json_outputs) {
    start();
    float emb[3 * 4];
    fill(emb, 12, 5);
    oc_input in = {"embeddings", "FP32", 2, {3, 4}, emb, 1};
    oc_body b;
    oc_build(&b, "req-42", &in, 1, NULL, 0, NULL, 1);
    hs_response r;
    post_v2("demo-4d", &b, &r);
    oc_result res = parse_answer(&r);
    ck_assert_str_eq(json_string_value(json_object_get(res.json, "id")), "req-42");
    const json_t *outs = json_object_get(res.json, "outputs");
    ck_assert_uint_eq(json_array_size(outs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(outs, 0), "name")),
                     "patterns");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(outs, 1), "name")),
                     "embeddings");
    ck_assert_uint_eq(res.bin_len, (9 + 12) * sizeof(float));
    oc_result_free(&res);
    hs_response_free(&r);
    oc_body_free(&b);

    /* JSON outputs, JSON inputs, no Inference-Header-Content-Length; a
     * padded key's score is -3.4028235e38 in JSON */
    static const int32_t real[] = {1, 0, 1};
    oc_input ins[2] = {{"embeddings", "FP32", 2, {3, 4}, emb, 0},
                       {"attention_mask", "INT32", 1, {3}, real, 0}};
    oc_output o[2] = {{"scores", -1}, {"embeddings", 0}};
    oc_build(&b, NULL, ins, 2, o, 2, NULL, 0);
    ck_assert_uint_eq(b.json_len, 0);
    post_v2("demo-4d", &b, &r);
    ck_assert_ptr_null(hs_header(&r, "Inference-Header-Content-Length"));
    res = parse_answer(&r);
    ck_assert_ptr_null(json_object_get(res.json, "id"));
    const json_t *scores = json_array_get(json_object_get(res.json, "outputs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(scores, "name")), "scores");
    const json_t *data = json_object_get(scores, "data");
    ck_assert_uint_eq(json_array_size(data), 9);
    /* query 0, key 1 (padding): masked */
    ck_assert((float)json_real_value(json_array_get(data, 1)) == -FLT_MAX);
    /* query 1 is padding: 0 */
    for (size_t k = 3; k < 6; k++)
        ck_assert(json_number_value(json_array_get(data, k)) == 0);
    ck_assert_ptr_nonnull(strstr(r.body, "-3.4028235e38"));
    oc_result_free(&res);
    hs_response_free(&r);
    oc_body_free(&b);

    /* application/json and application/octet-stream are both accepted */
    const char *json_body = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                            "\"FP32\",\"data\":[[0.1,0.2,0.3,0.4]]}]}";
    const char *types[] = {"Content-Type: application/json",
                           "Content-Type: application/octet-stream"};
    for (size_t i = 0; i < 2; i++) {
        const char *h[] = {types[i], NULL};
        post_raw("demo-4d", h, json_body, strlen(json_body), &r);
        ck_assert_msg(r.status == 200, "%s: %ld %s", types[i], r.status, r.body);
        hs_response_free(&r);
    }
    finish();
}
END_TEST

/* One refusal: the body sent with its header length, the status and the
 * protocol's error body expected. */
typedef struct bad_case {
    const char *what;
    const char *json;
    const char *bin; /* bytes after the JSON, or NULL */
    size_t bin_len;
    long long header_len; /* -1: the JSON's own length (when bin), -2: no header */
    long status;
} bad_case;

static void check_bad(const char *model, const bad_case *c) {
    size_t jl = strlen(c->json);
    char *body = malloc(jl + c->bin_len + 1);
    memcpy(body, c->json, jl);
    if (c->bin) memcpy(body + jl, c->bin, c->bin_len);
    char hl[64];
    snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %lld",
             c->header_len == -1 ? (long long)jl : c->header_len);
    const char *h[] = {"Content-Type:", c->header_len == -2 ? NULL : hl, NULL};
    hs_response r;
    post_raw(model, h, body, jl + c->bin_len, &r);
    check_error_body(&r, c->status, c->what);
    hs_response_free(&r);
    free(body);
}

#define EMB14 "{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}"
#define EMB_BIN(size)                                                                              \
    "{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"parameters\":{"              \
    "\"binary_data_size\":" #size "}}"

START_TEST(refusals) {
    start();
    static const float four[4] = {0.5f, 0.25f, -1, 2};
    const bad_case cases[] = {
        {"not JSON", "{\"inputs\":", NULL, 0, -2, 400},
        {"not an object", "[1]", NULL, 0, -2, 400},
        {"unknown field", "{\"inputs\":[" EMB14 "],\"extra\":1}", NULL, 0, -2, 400},
        {"no inputs", "{\"outputs\":[]}", NULL, 0, -2, 400},
        {"no embeddings",
         "{\"inputs\":[{\"name\":\"positions\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[0]}]"
         "}",
         NULL, 0, -2, 400},
        {"unknown input",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"tokens\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[0]}]}",
         NULL, 0, -2, 400},
        {"context on a self-attention model",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"context\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         NULL, 0, -2, 400},
        {"duplicate input", "{\"inputs\":[" EMB14 "," EMB14 "]}", NULL, 0, -2, 400},
        {"wrong datatype FP64",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP64\",\"data\":[1,"
         "2,3,4]}]}",
         NULL, 0, -2, 400},
        {"mask INT64",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"attention_mask\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[1]}]}",
         NULL, 0, -2, 400},
        {"positions INT32",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"positions\",\"shape\":[1],\"datatype\":\"INT32\",\"data\":[1]}]}",
         NULL, 0, -2, 400},
        {"data not numbers",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,"
         "2,\"3\",4]}]}",
         NULL, 0, -2, 400},
        {"shape product != data length",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,"
         "2,3]}]}",
         NULL, 0, -2, 422},
        {"d_model disagrees",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,3],\"datatype\":\"FP32\",\"data\":[1,"
         "2,3]}]}",
         NULL, 0, -2, 422},
        {"rank 1 embeddings",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4],\"datatype\":\"FP32\",\"data\":[1,2,"
         "3,4]}]}",
         NULL, 0, -2, 422},
        {"mask shape disagrees",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"attention_mask\",\"shape\":[2],\"datatype\":\"INT32\",\"data\":[1,1]}]}",
         NULL, 0, -2, 422},
        {"mask value 2",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"attention_mask\",\"shape\":[1],\"datatype\":\"INT32\",\"data\":[2]}]}",
         NULL, 0, -2, 422},
        {"negative position",
         "{\"inputs\":[" EMB14
         ",{\"name\":\"positions\",\"shape\":[1],\"datatype\":\"INT64\",\"data\":[-1]}]}",
         NULL, 0, -2, 422},
        {"unknown output", "{\"inputs\":[" EMB14 "],\"outputs\":[{\"name\":\"logits\"}]}", NULL, 0,
         -2, 400},
        {"duplicate output",
         "{\"inputs\":[" EMB14 "],\"outputs\":[{\"name\":\"q\"},{\"name\":\"q\"}]}", NULL, 0, -2,
         400},
        {"binary_data not a boolean",
         "{\"inputs\":[" EMB14
         "],\"outputs\":[{\"name\":\"q\",\"parameters\":{\"binary_data\":1}}]}",
         NULL, 0, -2, 400},
        {"bad mask parameter", "{\"inputs\":[" EMB14 "],\"parameters\":{\"mask\":\"diagonal\"}}",
         NULL, 0, -2, 400},
        {"scale not a number", "{\"inputs\":[" EMB14 "],\"parameters\":{\"scale\":\"big\"}}", NULL,
         0, -2, 400},
        {"scale not positive", "{\"inputs\":[" EMB14 "],\"parameters\":{\"scale\":-1}}", NULL, 0,
         -2, 422},
        {"select_heads malformed string",
         "{\"inputs\":[" EMB14 "],\"parameters\":{\"select_heads\":\"0,,1\"}}", NULL, 0, -2, 400},
        {"select_heads not a list", "{\"inputs\":[" EMB14 "],\"parameters\":{\"select_heads\":1}}",
         NULL, 0, -2, 400},
        {"select_heads out of range",
         "{\"inputs\":[" EMB14 "],\"parameters\":{\"select_heads\":[1]}}", NULL, 0, -2, 422},
        {"select_heads string out of range",
         "{\"inputs\":[" EMB14 "],\"parameters\":{\"select_heads\":\"0,5\"}}", NULL, 0, -2, 422},
        {"binary_data_output not a boolean",
         "{\"inputs\":[" EMB14 "],\"parameters\":{\"binary_data_output\":\"yes\"}}", NULL, 0, -2,
         400},
        {"id not a string", "{\"id\":7,\"inputs\":[" EMB14 "]}", NULL, 0, -2, 400},
        {"header length past the body", "{\"inputs\":[" EMB_BIN(16) "]}", (const char *)four, 16,
         100000, 400},
        {"header length not a number", "{\"inputs\":[" EMB14 "]}", NULL, 0, -3, 400},
        {"binary size past the rest", "{\"inputs\":[" EMB_BIN(20) "]}", (const char *)four, 16, -1,
         400},
        {"binary bytes left over", "{\"inputs\":[" EMB_BIN(12) "]}", (const char *)four, 16, -1,
         400},
        {"binary without the header", "{\"inputs\":[" EMB_BIN(16) "]}", NULL, 0, -2, 400},
        {"binary size != shape × datatype", "{\"inputs\":[" EMB_BIN(12) "]}", (const char *)four,
         12, -1, 422},
        {"both data and binary_data_size",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":16},\"data\":[1,2,3,4]}]}",
         (const char *)four, 16, -1, 400},
        {"negative binary_data_size", "{\"inputs\":[" EMB_BIN(-4) "]}", NULL, 0, -1, 400},
        {"non-finite float32",
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,"
         "2,3,1e39]}]}",
         NULL, 0, -2, 422},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].header_len == -3) {
            const char *h[] = {"Content-Type:", "Inference-Header-Content-Length: ten", NULL};
            hs_response r;
            post_raw("demo-4d", h, cases[i].json, strlen(cases[i].json), &r);
            check_error_body(&r, 400, cases[i].what);
            hs_response_free(&r);
            continue;
        }
        check_bad("demo-4d", &cases[i]);
    }
    /* unknown model, a name no model can have, 415 */
    bad_case ok = {"unknown model", "{\"inputs\":[" EMB14 "]}", NULL, 0, -2, 404};
    check_bad("no-such-model", &ok);
    ok.what = "invalid model name";
    check_bad("bad%20name", &ok);
    const char *h[] = {"Content-Type: text/plain", NULL};
    hs_response r;
    post_raw("demo-4d", h, ok.json, strlen(ok.json), &r);
    check_error_body(&r, 415, "text/plain");
    hs_response_free(&r);
    finish();
}
END_TEST

/* POST /v2/models/demo-4d/infer over a raw socket, with the header lines
 * `headers` (each ending in CRLF) and the body: the answer's status, and
 * its body (up to a NUL) in *answer, malloc'd. */
static long post_v2_raw(const char *headers, const char *body, size_t len, char **answer) {
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "POST /v2/models/demo-4d/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Content-Length: %zu\r\n%s\r\n",
                      len, headers);
    ck_assert(hn > 0 && (size_t)hn < sizeof head);
    int fd = hs_raw_open(srv.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(hs_raw_send(fd, head, (size_t)hn), 0);
    ck_assert_int_eq(hs_raw_send(fd, body, len), 0);
    char *raw = hs_raw_recv(fd, 10);
    close(fd);
    long status = 0;
    ck_assert_msg(raw && sscanf(raw, "HTTP/1.1 %ld", &status) == 1, "got: %s",
                  raw ? raw : "(none)");
    const char *b = strstr(raw, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    *answer = strdup(b + 4);
    free(raw);
    return status;
}

/* Two Inference-Header-Content-Length headers: of different values they
 * are refused, whichever comes first, as two Content-Lengths of different
 * values are; the same value twice is that value, as for Content-Length. */
START_TEST(header_length_twice) {
    const char *names[] = {"demo-4d", NULL};
    start_with(names, NULL);
    static const float four[4] = {0.5f, 0.25f, -1, 2};
    static const char json[] = "{\"inputs\":[" EMB_BIN(16) "]}";
    size_t jl = sizeof json - 1;
    char body[sizeof json + 16];
    memcpy(body, json, jl);
    memcpy(body + jl, four, 16);
    char lines[256], *answer;
    /* the right length first, then another */
    snprintf(lines, sizeof lines,
             "Inference-Header-Content-Length: %zu\r\nInference-Header-Content-Length: %zu\r\n", jl,
             jl + 4);
    long status = post_v2_raw(lines, body, jl + 16, &answer);
    json_t *j = json_loads(answer, 0, NULL);
    ck_assert_msg(status == 400 && j && json_object_size(j) == 1 &&
                      strstr(json_string_value(json_object_get(j, "error")), "different values"),
                  "%ld: %s", status, answer);
    json_decref(j);
    free(answer);
    /* another first, then the right one */
    snprintf(lines, sizeof lines,
             "Inference-Header-Content-Length: %zu\r\nInference-Header-Content-Length: %zu\r\n",
             jl + 4, jl);
    status = post_v2_raw(lines, body, jl + 16, &answer);
    ck_assert_msg(status == 400 && strstr(answer, "different values"), "%ld: %s", status, answer);
    free(answer);
    /* one that is not a length beside one that is */
    snprintf(lines, sizeof lines,
             "Inference-Header-Content-Length: %zu\r\ninference-header-content-length: ten\r\n",
             jl);
    status = post_v2_raw(lines, body, jl + 16, &answer);
    ck_assert_msg(status == 400 && strstr(answer, "different values"), "%ld: %s", status, answer);
    free(answer);
    /* the same value twice (blanks around it aside), and once */
    snprintf(lines, sizeof lines,
             "Inference-Header-Content-Length: %zu\r\nInference-Header-Content-Length: %zu \r\n",
             jl, jl);
    status = post_v2_raw(lines, body, jl + 16, &answer);
    ck_assert_msg(status == 200, "%ld: %s", status, answer);
    free(answer);
    snprintf(lines, sizeof lines, "Inference-Header-Content-Length: %zu\r\n", jl);
    status = post_v2_raw(lines, body, jl + 16, &answer);
    ck_assert_msg(status == 200, "%ld: %s", status, answer);
    free(answer);
    finish();
}
END_TEST

/* An Inference-Header-Content-Length past the body is shown as sent,
 * however large: not through a double, nor cut to a long long. */
START_TEST(header_length_as_sent) {
    const char *names[] = {"demo-4d", NULL};
    start_with(names, NULL);
    static const char json[] = "{\"inputs\":[" EMB14 "]}";
    static const char *const lengths[] = {"9223372036854775807",
                                          "9223372036854775808",
                                          "18446744073709551615",
                                          "18446744073709551616",
                                          "100000000000000000000000000000",
                                          "0099"};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        char lines[128], want[160], *answer;
        snprintf(lines, sizeof lines, "Inference-Header-Content-Length: %s\r\n", lengths[i]);
        long status = post_v2_raw(lines, json, sizeof json - 1, &answer);
        snprintf(want, sizeof want,
                 "Inference-Header-Content-Length is %s, past the body's %zu bytes", lengths[i],
                 sizeof json - 1);
        json_t *j = json_loads(answer, 0, NULL);
        const char *msg = json_string_value(json_object_get(j, "error"));
        ck_assert_msg(status == 400 && msg && strcmp(msg, want) == 0, "%s: %ld %s", lengths[i],
                      status, answer);
        json_decref(j);
        free(answer);
    }
    finish();
}
END_TEST

/* Sizes and values in the body are shown as sent, however large: a shape,
 * a binary_data_size, a position of 2^63 − 1 (which a double reads as
 * 2^63) and past it. */
START_TEST(sizes_as_sent) {
    const char *names[] = {"demo-4d", NULL};
    start_with(names, NULL);
    static const struct {
        const char *json;
        int binary; /* with its length in Inference-Header-Content-Length, and 16 bytes */
        const char *want;
    } cases[] = {
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,9223372036854775807],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         0, "embeddings rows have 9223372036854775807 numbers (d_model)"},
        {"{\"inputs\":[" EMB14 ",{\"name\":\"attention_mask\",\"shape\":[9223372036854775807],"
         "\"datatype\":\"INT32\",\"data\":[1]}]}",
         0, "input attention_mask has shape [9223372036854775807], which"},
        {"{\"inputs\":[" EMB14 ",{\"name\":\"positions\",\"shape\":[1],\"datatype\":\"INT64\","
         "\"data\":[9223372036854775807]}]}",
         0, "positions[0] = 9223372036854775807 is not"},
        {"{\"inputs\":[" EMB_BIN(9223372036854775807) "]}", 1,
         "inputs[0] claims 9223372036854775807 bytes of binary data; only 16 are left"},
        {"{\"inputs\":[" EMB_BIN(18446744073709551616) "]}", 1,
         "inputs[0] claims 18446744073709551616 bytes of binary data; only 16 are left"},
    };
    static const float four[4] = {0.5f, 0.25f, -1, 2};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t jl = strlen(cases[i].json);
        char body[512], lines[128] = "Content-Type: application/json\r\n", *answer;
        memcpy(body, cases[i].json, jl);
        if (cases[i].binary) {
            memcpy(body + jl, four, 16);
            snprintf(lines, sizeof lines, "Inference-Header-Content-Length: %zu\r\n", jl);
        }
        long status = post_v2_raw(lines, body, jl + (cases[i].binary ? 16 : 0), &answer);
        json_t *j = json_loads(answer, 0, NULL);
        const char *msg = json_string_value(json_object_get(j, "error"));
        ck_assert_msg(status >= 400 && msg && strstr(msg, cases[i].want), "%s: %ld %s",
                      cases[i].json, status, answer);
        json_decref(j);
        free(answer);
    }
    finish();
}
END_TEST

/* Shapes whose product overflows 64 bits, in JSON data or in binary: a 422
 * in the protocol's form, the shape refused where it is read (the message
 * names the input), and the server serving after. */
START_TEST(shape_overflow) {
    const char *names[] = {"demo-4d", NULL};
    start_with(names, NULL);
    static const char *const shapes[] = {"[4294967296,4294967296,4]", "[1e30,1,4]",
                                         "[3037000500,3037000500,2]", "[4611686018427387904,4]"};
    char json[512], *answer;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        snprintf(json, sizeof json,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":%s,\"datatype\":\"FP32\","
                 "\"data\":[1,2,3,4]}]}",
                 shapes[i]);
        long status =
            post_v2_raw("Content-Type: application/json\r\n", json, strlen(json), &answer);
        ck_assert_msg(status == 422 &&
                          strcmp(answer, "{\"error\":\"inputs[0] is too large\"}") == 0,
                      "%s: %ld %s", shapes[i], status, answer);
        free(answer);
    }
    /* (2^62 + 1024) × 4 wraps to 4096, the count of values sent */
    size_t cap = 16384, n = (size_t)snprintf(json, sizeof json,
                                             "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":"
                                             "[4611686018427388928,4],\"datatype\":\"FP32\","
                                             "\"data\":[0");
    char *wraps = malloc(cap);
    memcpy(wraps, json, n);
    for (int k = 1; k < 4096; k++) {
        memcpy(wraps + n, ",0", 2);
        n += 2;
    }
    memcpy(wraps + n, "]}]}", 4);
    n += 4;
    long status = post_v2_raw("Content-Type: application/json\r\n", wraps, n, &answer);
    ck_assert_msg(status == 422 && strcmp(answer, "{\"error\":\"inputs[0] is too large\"}") == 0,
                  "wrapping to the data sent: %ld %s", status, answer);
    free(answer);
    free(wraps);
    /* a mask's */
    snprintf(json, sizeof json,
             "{\"inputs\":[" EMB14 ",{\"name\":\"attention_mask\",\"shape\":[4294967296,"
             "4294967296],\"datatype\":\"INT32\",\"data\":[1]}]}");
    status = post_v2_raw("Content-Type: application/json\r\n", json, strlen(json), &answer);
    ck_assert_msg(status == 422 && strcmp(answer, "{\"error\":\"inputs[1] is too large\"}") == 0,
                  "mask: %ld %s", status, answer);
    free(answer);
    /* binary: 2^62 + 1024 floats are 2^64 + 4096 bytes, which wraps to the
     * 4096 that follow; over max_tokens first */
    n = (size_t)snprintf(json, sizeof json,
                         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4611686018427388928,1],"
                         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":4096}}]}");
    char *body = calloc(1, n + 4096), lines[96];
    memcpy(body, json, n);
    snprintf(lines, sizeof lines, "Inference-Header-Content-Length: %zu\r\n", n);
    status = post_v2_raw(lines, body, n + 4096, &answer);
    ck_assert_msg(status == 422 && strstr(answer, "over the limit max_tokens"), "binary: %ld %s",
                  status, answer);
    free(answer);
    free(body);
    /* and served after */
    snprintf(json, sizeof json, "{\"inputs\":[" EMB14 "]}");
    status = post_v2_raw("Content-Type: application/json\r\n", json, strlen(json), &answer);
    ck_assert_msg(status == 200, "%ld %s", status, answer);
    free(answer);
    finish();
}
END_TEST

START_TEST(limits_and_keys) {
    const char *names[] = {"demo-4d", NULL};
    char keys[] = "/tmp/attn-oip-keys-XXXXXX";
    int fd = mkstemp(keys);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "k1\n", 3), 3);
    close(fd);
    const char *extra[] = {"--api-keys-file",
                           keys,
                           "--max-tokens",
                           "4",
                           "--max-batch",
                           "3",
                           "--max-body-bytes",
                           "300",
                           NULL};
    static char big[400];
    memset(big, ' ', sizeof big - 1);
    start_with(names, extra);
    hs_response r;
    /* a body over --max-body-bytes, announced by its Content-Length */
    const char *auth0[] = {"Authorization: Bearer k1", NULL};
    post_raw("demo-4d", auth0, big, sizeof big - 1, &r);
    check_error_body(&r, 413, "body too large");
    hs_response_free(&r);
    /* probes need no key; the rest do, answered in the protocol's form */
    ck_assert_int_eq(hs_request(NULL, srv.port, "GET", "/v2/health/ready", NULL, NULL, 0, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    ck_assert_int_eq(hs_request(NULL, srv.port, "GET", "/v2", NULL, NULL, 0, &r), CURLE_OK);
    check_error_body(&r, 401, "no key");
    hs_response_free(&r);
    const char *auth[] = {"Authorization: Bearer k1", "Content-Type:", NULL};
    const char *body = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,3,4],\"datatype\":"
                       "\"FP32\",\"data\":[1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4]}]}";
    post_raw("demo-4d", auth + 1, body, strlen(body), &r);
    check_error_body(&r, 401, "infer without key");
    hs_response_free(&r);
    /* 2 × 3 tokens, padding included, over --max-tokens 4 */
    post_raw("demo-4d", auth, body, strlen(body), &r);
    check_error_body(&r, 422, "over max_tokens");
    hs_response_free(&r);
    /* 4 rows of one token: within --max-tokens 4, over --max-batch 3 */
    const char *rows = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4,1,4],\"datatype\":"
                       "\"FP32\",\"data\":[1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4]}]}";
    post_raw("demo-4d", auth, rows, strlen(rows), &r);
    check_error_body(&r, 422, "batch over --max-batch");
    ck_assert_msg(strstr(r.body, "max_batch = 3"), "%s", r.body);
    hs_response_free(&r);
    const char *fine = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                       "\"FP32\",\"data\":[1,2,3,4]}]}";
    post_raw("demo-4d", auth, fine, strlen(fine), &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    finish();
    unlink(keys);
}
END_TEST

/* A heavy infer, posted from a thread: its status when it is answered. */
typedef struct heavy {
    unsigned port;
    const oc_body *body;
    long status;
} heavy;

static void *heavy_thread(void *arg) {
    heavy *hv = arg;
    char hl[64];
    snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", hv->body->json_len);
    const char *headers[] = {"Content-Type:", hl, NULL};
    hs_response r;
    hs_request(NULL, hv->port, "POST", "/v2/models/gpt2-small-shape/infer", headers, hv->body->data,
               hv->body->len, &r);
    hv->status = r.status;
    hs_response_free(&r);
    return NULL;
}

/* While draining: readiness 503 (server and model), new work refused, both
 * in the protocol's form; the infers in flight are answered. */
START_TEST(drain) {
    const char *names[] = {"gpt2-small-shape", NULL};
    const char *extra[] = {"--workers", "1", NULL};
    start_with(names, extra);
    enum { N = 1024, D = 768, K = 2 };
    float *emb = malloc((size_t)N * D * sizeof *emb);
    fill(emb, (size_t)N * D, 3);
    oc_input in = {"embeddings", "FP32", 2, {N, D}, emb, 1};
    oc_output out = {"embeddings", 1};
    oc_body body;
    oc_build(&body, NULL, &in, 1, &out, 1, NULL, 0);
    /* A draining server closes each connection after its answer and
     * accepts no new one: one kept-alive connection per question asked. */
    enum { Q = 4 };
    CURL *conn[Q];
    hs_response r;
    for (int i = 0; i < Q; i++) {
        conn[i] = curl_easy_init();
        hs_request(conn[i], srv.port, "GET", "/v2/health/live", NULL, NULL, 0, &r);
        ck_assert_int_eq(r.status, 200);
        hs_response_free(&r);
    }
    heavy hv[K];
    pthread_t t[K];
    for (int i = 0; i < K; i++) {
        hv[i] = (heavy){srv.port, &body, 0};
        pthread_create(&t[i], NULL, heavy_thread, &hv[i]);
    }
    /* both received: in flight with this connection's request */
    long in_flight = 0;
    for (int i = 0; i < 1000 && in_flight < K + 1; i++) {
        hs_request(conn[0], srv.port, "GET", "/metrics", NULL, NULL, 0, &r);
        in_flight = hs_metric_value(r.body, "\nattn_http_requests_in_flight ");
        hs_response_free(&r);
        if (in_flight < K + 1) usleep(10000);
    }
    ck_assert_int_ge(in_flight, K + 1);
    hs_signal(&srv, SIGTERM);
    /* ready until the drain begins, then not */
    hs_request(conn[0], srv.port, "GET", "/v2/health/ready", NULL, NULL, 0, &r);
    for (int i = 0; i < 1000 && r.status == 200; i++) {
        hs_response_free(&r);
        usleep(10000);
        hs_request(conn[0], srv.port, "GET", "/v2/health/ready", NULL, NULL, 0, &r);
    }
    check_error_body(&r, 503, "ready while draining");
    char *ra = hs_header(&r, "Retry-After");
    ck_assert_ptr_nonnull(ra);
    free(ra);
    hs_response_free(&r);
    hs_request(conn[1], srv.port, "GET", "/v2/models/gpt2-small-shape/ready", NULL, NULL, 0, &r);
    check_error_body(&r, 503, "model ready while draining");
    hs_response_free(&r);
    const char *small = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,768],"
                        "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":3072}}]}";
    hs_request(conn[2], srv.port, "POST", "/v2/models/gpt2-small-shape/infer", NULL, small,
               strlen(small), &r);
    check_error_body(&r, 503, "infer while draining");
    hs_response_free(&r);
    hs_request(conn[3], srv.port, "GET", "/v2/health/live", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    hs_response_free(&r);
    for (int i = 0; i < Q; i++)
        curl_easy_cleanup(conn[i]);
    for (int i = 0; i < K; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(hv[i].status, 200);
    }
    ck_assert_int_eq(hs_wait(&srv, 60), 0);
    finish();
    oc_body_free(&body);
    free(emb);
}
END_TEST

/* A /v2 body that stops coming is answered 408 in the protocol's form; the
 * header's limits and numbers as the API tests check them, over HTTP. */
START_TEST(late_body_and_header_limits) {
    const char *names[] = {"demo-4d", NULL};
    const char *extra[] = {"--connection-timeout", "1", "--max-string-bytes", "64", NULL};
    start_with(names, extra);
    int fd = hs_raw_open(srv.port);
    static const char head[] = "POST /v2/models/demo-4d/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                               "{\"inputs\":[";
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    char *raw = hs_raw_recv(fd, 6);
    close(fd);
    ck_assert_msg(raw && strstr(raw, "HTTP/1.1 408"), "got: %s", raw ? raw : "(none)");
    const char *body = strstr(raw, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    json_t *j = json_loads(body + 4, 0, NULL);
    ck_assert_msg(j && json_object_size(j) == 1 && json_is_string(json_object_get(j, "error")),
                  "not the protocol's error body: %s", body + 4);
    json_decref(j);
    free(raw);

    /* A connection kept alive after a /v2 infer: a late /v1 body is answered
     * in /v1's form again, not the protocol's. */
    static const char v2[] = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],"
                             "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}";
    char both[1024];
    snprintf(both, sizeof both,
             "POST /v2/models/demo-4d/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s"
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":",
             strlen(v2), v2);
    fd = hs_raw_open(srv.port);
    ck_assert_int_eq(hs_raw_send(fd, both, strlen(both)), 0);
    raw = hs_raw_recv(fd, 6);
    ck_assert_msg(raw && strstr(raw, "HTTP/1.1 200"), "got: %s", raw ? raw : "(none)");
    free(raw);
    raw = hs_raw_recv(fd, 6);
    close(fd);
    const char *second = raw ? strstr(raw, "HTTP/1.1 408") : NULL;
    ck_assert_msg(second, "got: %s", raw ? raw : "(none)");
    body = strstr(second, "\r\n\r\n");
    ck_assert_ptr_nonnull(body);
    j = json_loads(body + 4, 0, NULL);
    ck_assert_msg(j && json_is_object(json_object_get(j, "error")) &&
                      json_is_string(json_object_get(json_object_get(j, "error"), "code")),
                  "not /v1's error body: %s", body + 4);
    json_decref(j);
    free(raw);

    static const struct {
        const char *json;
        long status;
    } cases[] = {
        {"{\"id\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\","
         "\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":["
         "1,2,3,4]}]}",
         422},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":["
         "1,2,1e999,4]}]}",
         422},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":["
         "1,2,1180591620717411303424,4]}]}",
         200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hs_response r;
        const char *headers[] = {"Content-Type: application/json", NULL};
        post_raw("demo-4d", headers, cases[i].json, strlen(cases[i].json), &r);
        if (cases[i].status == 200)
            ck_assert_msg(r.status == 200, "%s: %ld %s", cases[i].json, r.status, r.body);
        else
            check_error_body(&r, cases[i].status, cases[i].json);
        hs_response_free(&r);
    }
    finish();
}
END_TEST

/* FNV-1a 64 of n bytes. */
static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Binary answers are the bytes they were before their tensors were sent
 * from the outputs themselves: recorded from the server that copied them
 * into one body. demo-4d with small integers for embeddings makes q, k, v
 * and scores exact (sums of a few small integers, times 0.5), the same on
 * every machine and BLAS kernel. Rows right- and left-padded and with
 * holes (scores of padded keys −∞), the outputs in an order of their own,
 * and a header whose length is not a multiple of 4, so that the blocks
 * libmicrohttpd sends cut floats; megabytes, so that it sends many. */
START_TEST(binary_answers_unchanged) {
    const char *names[] = {"demo-4d", NULL};
    start_with(names, NULL);
    enum { B = 3, N = 700, DM = 4 };
    float *emb = malloc((size_t)B * N * DM * sizeof *emb);
    int32_t *real = malloc((size_t)B * N * sizeof *real);
    uint32_t x = 7;
    for (size_t i = 0; i < (size_t)B * N * DM; i++) {
        x = x * 1664525u + 1013904223u;
        emb[i] = (float)((int)(x >> 29) % 5 - 2);
    }
    for (size_t t = 0; t < N; t++) {
        real[t] = t < 600;            /* right padding */
        real[N + t] = t >= 50;        /* left padding */
        real[2 * N + t] = t % 3 != 1; /* holes */
    }
    oc_input ins[2] = {{"embeddings", "FP32", 3, {B, N, DM}, emb, 1},
                       {"attention_mask", "INT32", 2, {B, N}, real, 1}};
    oc_output outs[4] = {{"scores", 1}, {"v", 1}, {"q", 1}, {"k", 1}};
    oc_body body;
    oc_build(&body, "golden-binary-07", ins, 2, outs, 4, NULL, 0);
    hs_response r;
    post_v2("demo-4d", &body, &r);
    ck_assert_msg(r.status == 200, "status %ld: %s", r.status, r.body);
    char *hl = hs_header(&r, "Inference-Header-Content-Length");
    ck_assert_ptr_nonnull(hl);
    size_t json_len = (size_t)atoll(hl);
    free(hl);
    ck_assert_uint_ne(json_len % 4, 0);
    static const char header[] =
        "{\"model_name\":\"demo-4d\",\"model_version\":\"1\",\"id\":\"golden-binary-07\","
        "\"outputs\":[{\"name\":\"scores\",\"datatype\":\"FP32\",\"shape\":[3,1,700,700],"
        "\"parameters\":{\"binary_data_size\":5880000}},{\"name\":\"v\",\"datatype\":\"FP32\","
        "\"shape\":[3,1,700,4],\"parameters\":{\"binary_data_size\":33600}},{\"name\":\"q\","
        "\"datatype\":\"FP32\",\"shape\":[3,1,700,4],\"parameters\":{\"binary_data_size\":33600}},"
        "{\"name\":\"k\",\"datatype\":\"FP32\",\"shape\":[3,1,700,4],\"parameters\":{"
        "\"binary_data_size\":33600}}]}";
    ck_assert_uint_eq(json_len, sizeof header - 1);
    ck_assert_int_eq(memcmp(r.body, header, json_len), 0);
    ck_assert_uint_eq(r.len, json_len + 5880000 + 3 * 33600);
    ck_assert_msg(fnv1a(r.body, r.len) == 0xbae3176648d65083ull, "FNV-1a %016llx",
                  (unsigned long long)fnv1a(r.body, r.len));
    hs_response_free(&r);
    oc_body_free(&body);

    /* Every output, 300 tokens a row: as bytes, as JSON numbers, and every
     * other one each way in one answer, the same floats (−∞ is −FLT_MAX in
     * JSON). */
    enum { N2 = 300 };
    ins[0].shape[1] = ins[1].shape[1] = N2;
    for (size_t t = 0; t < N2; t++) {
        real[t] = t < 250;
        real[N2 + t] = t >= 20;
        real[2 * N2 + t] = t % 3 != 1;
    }
    float *want[8] = {0};
    size_t want_count[8];
    for (int form = 0; form < 3; form++) {
        oc_output o[8];
        for (size_t k = 0; k < 8; k++)
            o[k] = (oc_output){all_names[k], form == 0 || (form == 2 && k % 2)};
        oc_build(&body, "every-output", ins, 2, o, 8, NULL, 0);
        post_v2("demo-4d", &body, &r);
        oc_result res = parse_answer(&r);
        for (size_t k = 0; k < 8; k++) {
            size_t count, rank;
            long long shape[4];
            int was_bin;
            float *v = oc_output_values(&res, all_names[k], &count, shape, &rank, &was_bin);
            ck_assert_ptr_nonnull(v);
            ck_assert_int_eq(was_bin, o[k].binary);
            if (form == 0) {
                want[k] = v, want_count[k] = count;
                continue;
            }
            ck_assert_uint_eq(count, want_count[k]);
            for (size_t i = 0; i < count; i++) {
                float g = v[i], w = want[k][i];
                if (!was_bin && w == -INFINITY) w = -FLT_MAX;
                if (memcmp(&g, &w, sizeof g) != 0) /* ck_ only on failure: a hot loop */
                    ck_abort_msg("%s[%zu]: %.9g as %s, %.9g as bytes", all_names[k], i, g,
                                 was_bin ? "bytes" : "JSON", want[k][i]);
            }
            free(v);
        }
        oc_result_free(&res);
        hs_response_free(&r);
        oc_body_free(&body);
    }
    for (size_t k = 0; k < 8; k++)
        free(want[k]);
    free(emb);
    free(real);
    finish();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("oip_http");
    TCase *tc = tcase_create("oip_http");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, metadata_and_health);
    tcase_add_test(tc, padded_batch_gpt2);
    tcase_add_test(tc, single_row_and_no_batch_axis);
    tcase_add_test(tc, small_infer_inline);
    tcase_add_test(tc, positions_rope_gqa);
    tcase_add_test(tc, triton_defaults_and_json_outputs);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, header_length_twice);
    tcase_add_test(tc, header_length_as_sent);
    tcase_add_test(tc, sizes_as_sent);
    tcase_add_test(tc, shape_overflow);
    tcase_add_test(tc, limits_and_keys);
    tcase_add_test(tc, drain);
    tcase_add_test(tc, late_body_and_header_limits);
    tcase_add_test(tc, binary_answers_unchanged);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
