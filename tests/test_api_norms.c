/*
 * test_api_norms.c — api/'s side of a weight set's norm, post_norm, qk_norm
 * and temperature, and of the output `normed` (docs/API.md, "Attention of
 * 2025–2026 models"): the packed attn_weights against the JSON values; the
 * answer's normed (absent for a layer without a norm; per layer in a
 * stack), q and q_raw against a float64 reference of the contract's
 * formulas; and the refusals at their JSON paths, inside a stack's layer
 * and a batch too. The simple refusals are data-driven cases
 * (tests/cases/weights_norm_*, weights_qk_norm_*, weights_temperature_*).
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "attention/attention.h"
#include "tests/json_build.h"

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 16,
                                  .max_d_model = 64,
                                  .max_flops = 1e12,
                                  .max_batch = 8,
                                  .max_response_bytes = (size_t)1 << 28,
                                  .max_workspace_bytes = (size_t)1 << 28};

/* 3 tokens, d_model 4, 2 heads of width 2, no w_o. */
static json_t *weight_set(void) {
    json_t *heads = json_array();
    for (size_t i = 0; i < 2; i++)
        json_array_append_new(heads,
                              json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(4, 2, 1000 * (i + 1)),
                                        "w_k", tj_matrix(4, 2, 1000 * (i + 1) + 100), "w_v",
                                        tj_matrix(4, 2, 1000 * (i + 1) + 200)));
    return json_pack("{s:o}", "heads", heads);
}

static json_t *request(json_t *weights, const char *returns) {
    return json_pack("{s:o, s:o, s:o}", "embeddings", tj_matrix(3, 4, 7), "weights", weights,
                     "return", json_loads(returns, 0, NULL));
}

static char *dump(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Takes the tree. */
static void expect_error(api_call_kind kind, json_t *body, int status, const char *code,
                         const char *path) {
    char *text = dump(body);
    api_call *req = NULL;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(kind, text, strlen(text), &limits, &req, &err);
    ck_assert_msg(rc == -1, "expected %s at %s, but decode succeeded: %.300s", code, path, text);
    ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                      strcmp(err.path, path) == 0,
                  "expected %d %s at \"%s\", got %d %s at \"%s\" (%s)", status, code, path,
                  err.status, err.code, err.path, err.message);
    free(text);
    json_decref(body);
}

/* Decodes, binds, computes and encodes; the parsed answer. Takes the tree. */
static json_t *answer(json_t *body) {
    char *text = dump(body);
    api_call *c = NULL;
    attn_error err;
    ck_assert_msg(api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &c, &err) ==
                      0,
                  "decode: %s at %s", err.message, err.path);
    /* inline weights: bound by the decode */
    ck_assert_int_eq(api_call_alloc_outputs(c, NULL, &err), 0);
    attn_workspace *ws = attn_workspace_create();
    size_t failed;
    ck_assert_msg(api_call_compute(c, ws, NULL, &err, &failed) == 0, "compute: %s", err.message);
    size_t len;
    char *out = api_call_encode(c, &len, NULL, &err);
    ck_assert_ptr_nonnull(out);
    json_t *resp = json_loadb(out, len, 0, NULL);
    ck_assert_ptr_nonnull(resp);
    free(out), free(text);
    attn_workspace_destroy(ws);
    api_call_free(c);
    json_decref(body);
    return resp;
}

static double cell(const json_t *m, size_t r, size_t c) {
    return json_number_value(json_array_get(json_array_get(m, r), c));
}

/* rms with offset 1 and a weight: normed against x / sqrt(mean(x²) + eps) · (1 + w). */
START_TEST(test_normed_values) {
    json_t *w = weight_set();
    json_object_set_new(w, "norm",
                        json_pack("{s:s, s:[f,f,f,f], s:f, s:i}", "type", "rms", "weight", 0.5, 0.0,
                                  -0.5, 1.0, "eps", 1e-3, "offset", 1));
    json_t *resp = answer(request(w, "[\"normed\", \"embeddings\"]"));
    const json_t *normed = json_object_get(resp, "normed");
    ck_assert_ptr_nonnull(normed);
    const double wt[4] = {0.5, 0.0, -0.5, 1.0};
    for (size_t r = 0; r < 3; r++) {
        double ms = 0.0;
        for (size_t c = 0; c < 4; c++)
            ms += tj_val(7 + r * 4 + c) * tj_val(7 + r * 4 + c) / 4.0;
        for (size_t c = 0; c < 4; c++) {
            double want = tj_val(7 + r * 4 + c) / sqrt(ms + 1e-3) * (1.0 + wt[c]);
            ck_assert_msg(fabs(cell(normed, r, c) - want) < 1e-5 * (1 + fabs(want)),
                          "normed[%zu][%zu] = %g, want %g", r, c, cell(normed, r, c), want);
        }
    }
    json_decref(resp);
}
END_TEST

/* qk_norm per head without weights: each head's row of q_raw has RMS 1
 * (eps aside); without rope q_raw is q, temperature included. */
START_TEST(test_qk_norm_and_temperature) {
    json_t *w = weight_set();
    json_object_set_new(w, "qk_norm", json_pack("{s:s, s:s}", "type", "rms", "scope", "head"));
    json_object_set_new(w, "temperature",
                        json_pack("{s:f, s:f}", "floor_scale", 1.0, "attn_scale", 0.5));
    json_t *body = request(w, "[\"q\", \"q_raw\"]");
    json_object_set_new(body, "positions", json_pack("[i,i,i]", 0, 5, 40));
    json_t *resp = answer(body);
    const json_t *q = json_object_get(resp, "q"), *qr = json_object_get(resp, "q_raw");
    ck_assert(json_equal(q, qr));
    const double pos[3] = {0, 5, 40};
    for (size_t i = 0; i < 2; i++)
        for (size_t r = 0; r < 3; r++) {
            const json_t *m = json_array_get(q, i);
            double f = log(floor(pos[r] + 1.0) + 1.0) * 0.5 + 1.0;
            double a = cell(m, r, 0) / f, b = cell(m, r, 1) / f;
            ck_assert_msg(fabs((a * a + b * b) / 2.0 - 1.0) < 1e-4, "head %zu row %zu: %g", i, r,
                          (a * a + b * b) / 2.0);
        }
    json_decref(resp);
}
END_TEST

/* A stack: normed in the layers that have a norm, absent in the others
 * and at the top. */
START_TEST(test_stack_normed) {
    json_t *l0 = weight_set(), *l1 = weight_set();
    json_object_set_new(l0, "norm", json_pack("{s:s}", "type", "layer"));
    json_object_set_new(l1, "post_norm", json_pack("{s:s}", "type", "rms"));
    json_t *resp =
        answer(request(json_pack("{s:[o,o]}", "layers", l0, l1), "[\"normed\", \"delta\"]"));
    const json_t *layers = json_object_get(resp, "layers");
    ck_assert_uint_eq(json_array_size(layers), 2);
    ck_assert_ptr_nonnull(json_object_get(json_array_get(layers, 0), "normed"));
    ck_assert_ptr_null(json_object_get(json_array_get(layers, 1), "normed"));
    ck_assert_ptr_nonnull(json_object_get(json_array_get(layers, 1), "delta"));
    ck_assert_ptr_null(json_object_get(resp, "normed"));
    /* layer norm without weight or bias: each row's mean 0 */
    const json_t *n0 = json_object_get(json_array_get(layers, 0), "normed");
    for (size_t r = 0; r < 3; r++) {
        double s = 0.0;
        for (size_t c = 0; c < 4; c++)
            s += cell(n0, r, c);
        ck_assert(fabs(s) < 1e-5);
    }
    json_decref(resp);
}
END_TEST

/* Refusals at their places: a stack's layer, a batch's weights. */
START_TEST(test_refusals_placed) {
    json_t *l0 = weight_set(), *l1 = weight_set();
    json_object_set_new(l1, "qk_norm",
                        json_pack("{s:s, s:s, s:[f,f,f]}", "type", "rms", "scope", "all",
                                  "k_weight", 1.0, 1.0, 1.0));
    expect_error(API_CALL_ATTENTION, request(json_pack("{s:[o,o]}", "layers", l0, l1), "[]"), 422,
                 "dimension_mismatch", "/weights/layers/1/qk_norm/k_weight");
    json_t *w = weight_set();
    json_object_set_new(w, "post_norm", json_pack("{s:s, s:f}", "type", "layer", "eps", -1.0));
    json_t *batch =
        json_pack("{s:o, s:[{s:o}]}", "weights", w, "sequences", "embeddings", tj_matrix(3, 4, 7));
    expect_error(API_CALL_BATCH, batch, 422, "out_of_range", "/weights/post_norm/eps");
    w = weight_set();
    json_object_set_new(w, "norm", json_pack("{s:s, s:s}", "type", "rms", "eps", "small"));
    expect_error(API_CALL_ATTENTION, request(w, "[]"), 400, "wrong_type", "/weights/norm/eps");
    w = weight_set();
    json_object_set_new(w, "temperature", json_pack("[f]", 1.0));
    expect_error(API_CALL_ATTENTION, request(w, "[]"), 400, "wrong_type", "/weights/temperature");
}
END_TEST

static Suite *api_norms_suite(void) {
    Suite *s = suite_create("api_norms");
    TCase *tc = tcase_create("norms");
    tcase_add_test(tc, test_normed_values);
    tcase_add_test(tc, test_qk_norm_and_temperature);
    tcase_add_test(tc, test_stack_normed);
    tcase_add_test(tc, test_refusals_placed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(api_norms_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
