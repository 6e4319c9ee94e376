/*
 * test_api_variants.c — api/'s side of today's attention: grouped K/V
 * heads, RoPE, ALiBi, windows, soft-capping, a weight set's scale,
 * positions and cross-attention context (docs/API.md, "Today's
 * attention").
 *
 * Each field is checked valid and broken one value at a time (status,
 * code and JSON path); the packed buffers of the bound attn_input against
 * the JSON values, cell by cell; the response's shapes and fields; and the
 * numbers of GQA with RoPE, of ALiBi with a window and soft-capping, and
 * of cross-attention against float64 references written here.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "attention/attention.h"
#include "tests/fixtures.h"
#include "tests/json_build.h"
#include "tests/json_edit.h"

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 16,
                                  .max_d_model = 64,
                                  .max_flops = 1e12,
                                  .max_response_bytes = (size_t)1 << 28,
                                  .max_workspace_bytes = (size_t)1 << 28};

/* n tokens of width dm; h heads of width dh, each with w_q, w_k, w_v of
 * kv_rows rows for K and V; no w_o (so h·dh should be dm, or give one). */
static json_t *request_kv(size_t n, size_t dm, size_t h, size_t dh, size_t kv_rows) {
    json_t *heads = json_array();
    for (size_t i = 0; i < h; i++)
        json_array_append_new(heads,
                              json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(dm, dh, 1000 * (i + 1)),
                                        "w_k", tj_matrix(kv_rows, dh, 1000 * (i + 1) + 100), "w_v",
                                        tj_matrix(kv_rows, dh, 1000 * (i + 1) + 200)));
    return json_pack("{s:o, s:{s:o}}", "embeddings", tj_matrix(n, dm, 7), "weights", "heads",
                     heads);
}

/* 3 tokens, d_model 4, 2 heads of width 2. */
static json_t *base(void) {
    return request_kv(3, 4, 2, 2, 4);
}

/* h query heads of width dh (w_q only) over d_model dm, g K/V heads of
 * kv_rows rows; w_o of hd × dm. */
static json_t *grouped(size_t n, size_t dm, size_t h, size_t g, size_t dh, size_t kv_rows) {
    json_t *heads = json_array(), *kv = json_array();
    for (size_t i = 0; i < h; i++)
        json_array_append_new(heads, json_pack("{s:o}", "w_q", tj_matrix(dm, dh, 1000 * (i + 1))));
    for (size_t u = 0; u < g; u++)
        json_array_append_new(kv,
                              json_pack("{s:o, s:o}", "w_k", tj_matrix(kv_rows, dh, 500 + 50 * u),
                                        "w_v", tj_matrix(kv_rows, dh, 700 + 30 * u)));
    return json_pack("{s:o, s:{s:o, s:o, s:o}}", "embeddings", tj_matrix(n, dm, 7), "weights",
                     "heads", heads, "kv_heads", kv, "w_o", tj_matrix(h * dh, dm, 31));
}

static char *dump(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Takes the tree. */
static void expect_error(json_t *body, int status, const char *code, const char *path) {
    char *text = dump(body);
    api_call *req = (api_call *)1;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err);
    ck_assert_msg(rc == -1, "expected %s at %s, but decode succeeded: %.300s", code, path, text);
    ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                      strcmp(err.path, path) == 0,
                  "expected %d %s at \"%s\", got %d %s at \"%s\" (%s) for %.300s", status, code,
                  path, err.status, err.code, err.path, err.message, text);
    free(text);
    json_decref(body);
}

/* Takes the tree. */
static api_call *decode_ok(json_t *body) {
    api_call *req = NULL;
    attn_error err;
    char *text = dump(body);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err);
    ck_assert_msg(rc == 0, "decode failed: %d %s at \"%s\": %s", err.status, err.code, err.path,
                  err.message);
    free(text);
    json_decref(body);
    return req;
}

/* Computes a bound request; its parsed response. */
static json_t *respond(api_call *req) {
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    size_t len = 0;
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    int rc = attn_compute(api_call_outputs(req), ws, api_call_inputs(req), &err);
    ck_assert_msg(rc == 0, "compute failed: %s", err.message);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, &len, NULL, &err);
    ck_assert_msg(text != NULL, "encode failed: %s", err.message);
    json_t *resp = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_ptr_nonnull(resp);
    free(text);
    return resp;
}

/* m[r][c] of a nested array. */
static double cell(const json_t *m, size_t r, size_t c) {
    return tf_num(json_array_get(json_array_get(m, r), c));
}

static void check_shape3(const json_t *v, size_t a, size_t b, size_t c) {
    ck_assert_msg(json_is_array(v) && json_array_size(v) == a, "outer size");
    for (size_t i = 0; i < a; i++) {
        const json_t *m = json_array_get(v, i);
        ck_assert_uint_eq(json_array_size(m), b);
        for (size_t r = 0; r < b; r++)
            ck_assert_uint_eq(json_array_size(json_array_get(m, r)), c);
    }
}

/* ---- each field, valid and broken ------------------------------------------ */

typedef struct edit {
    const char *path; /* tj_put's */
    const char *json; /* the value put there; NULL: deleted */
} edit;

/* Applies up to three edits to body (returned). */
static json_t *edited(json_t *body, const edit *e, size_t count) {
    for (size_t i = 0; i < count && e[i].path; i++) {
        if (e[i].json == NULL) {
            tj_del(body, e[i].path);
            continue;
        }
        json_error_t jerr;
        json_t *v = json_loads(e[i].json, JSON_DECODE_ANY, &jerr);
        ck_assert_msg(v != NULL, "bad test JSON %s: %s", e[i].json, jerr.text);
        tj_put(body, e[i].path, v);
    }
    return body;
}

START_TEST(test_weight_variants_refused) {
    static const struct {
        edit e[3];
        int status;
        const char *code, *path;
    } cases[] = {
        {{{"/weights/rope", "1"}}, 400, "wrong_type", "/weights/rope"},
        {{{"/weights/rope", "{\"thetta\":2}"}}, 400, "unknown_field", "/weights/rope/thetta"},
        {{{"/weights/rope", "{\"theta\":0}"}}, 422, "out_of_range", "/weights/rope/theta"},
        {{{"/weights/rope", "{\"theta\":-5}"}}, 422, "out_of_range", "/weights/rope/theta"},
        {{{"/weights/rope", "{\"theta\":\"1e4\"}"}}, 400, "wrong_type", "/weights/rope/theta"},
        {{{"/weights/rope", "{\"dims\":1}"}}, 422, "out_of_range", "/weights/rope/dims"},
        {{{"/weights/rope", "{\"dims\":0}"}}, 422, "out_of_range", "/weights/rope/dims"},
        {{{"/weights/rope", "{\"dims\":4}"}}, 422, "out_of_range", "/weights/rope/dims"},
        {{{"/weights/rope", "{\"dims\":1.5}"}}, 400, "wrong_type", "/weights/rope/dims"},
        {{{"/weights/rope", "{\"theta\":1e39}"}}, 422, "non_finite_number", "/weights/rope/theta"},
        {{{"/weights/rope", "{\"dims\":\"2\"}"}}, 400, "wrong_type", "/weights/rope/dims"},
        {{{"/weights/rope", "{\"style\":\"full\"}"}}, 400, "invalid_value", "/weights/rope/style"},
        {{{"/weights/rope", "{\"style\":1}"}}, 400, "wrong_type", "/weights/rope/style"},
        {{{"/weights/rope", "{\"scaling\":[]}"}}, 400, "wrong_type", "/weights/rope/scaling"},
        {{{"/weights/rope", "{\"scaling\":{\"factor\":2}}"}},
         400,
         "missing_field",
         "/weights/rope/scaling/type"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"dynamic\",\"factor\":2}}"}},
         400,
         "invalid_value",
         "/weights/rope/scaling/type"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"linear\"}}"}},
         400,
         "missing_field",
         "/weights/rope/scaling/factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"linear\",\"factor\":0}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/factor"},
        {{{"/weights/rope",
           "{\"scaling\":{\"type\":\"linear\",\"factor\":2,\"low_freq_factor\":1}}"}},
         400,
         "unknown_field",
         "/weights/rope/scaling/low_freq_factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
                            "\"high_freq_factor\":2,\"original_max_position_embeddings\":8192}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/high_freq_factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,"
                            "\"high_freq_factor\":4}}"}},
         400,
         "missing_field",
         "/weights/rope/scaling/original_max_position_embeddings"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,"
                            "\"high_freq_factor\":4,\"original_max_position_embeddings\":-1}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/original_max_position_embeddings"},
        /* yarn and longrope (base(): d_head 2, so dims/2 = 1) */
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":0,"
                            "\"original_max_position_embeddings\":4096}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":4}}"}},
         400,
         "missing_field",
         "/weights/rope/scaling/original_max_position_embeddings"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":4,"
                            "\"original_max_position_embeddings\":64,\"beta_fast\":0}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/beta_fast"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":4,"
                            "\"original_max_position_embeddings\":64,\"truncate\":0}}"}},
         400,
         "wrong_type",
         "/weights/rope/scaling/truncate"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":4,"
                            "\"original_max_position_embeddings\":64,\"low_freq_factor\":1}}"}},
         400,
         "unknown_field",
         "/weights/rope/scaling/low_freq_factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":4,"
                            "\"original_max_position_embeddings\":64,\"attention_factor\":0}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/attention_factor"},
        /* mscale(e^10, -1) = 0: a would be 1/0 */
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"yarn\",\"factor\":22026.465794806718,"
                            "\"original_max_position_embeddings\":64,\"mscale\":1,"
                            "\"mscale_all_dim\":-1}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1,2],"
                            "\"long_factor\":[4],\"original_max_position_embeddings\":64}}"}},
         422,
         "dimension_mismatch",
         "/weights/rope/scaling/short_factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1],"
                            "\"long_factor\":[0],\"original_max_position_embeddings\":64}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/long_factor/0"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[-1],"
                            "\"long_factor\":[2],\"original_max_position_embeddings\":64}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/short_factor/0"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1],"
                            "\"original_max_position_embeddings\":64}}"}},
         400,
         "missing_field",
         "/weights/rope/scaling/long_factor"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1],"
                            "\"long_factor\":[2],\"original_max_position_embeddings\":64,"
                            "\"factor\":-2}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling/factor"},
        /* s > 1 with L = 1: ln L = 0 under the default a */
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1],"
                            "\"long_factor\":[2],\"original_max_position_embeddings\":1,"
                            "\"factor\":2}}"}},
         422,
         "out_of_range",
         "/weights/rope/scaling"},
        {{{"/weights/rope", "{\"scaling\":{\"type\":\"longrope\",\"short_factor\":[1],"
                            "\"long_factor\":[2],\"original_max_position_embeddings\":64,"
                            "\"beta_fast\":2}}"}},
         400,
         "unknown_field",
         "/weights/rope/scaling/beta_fast"},
        {{{"/weights/alibi", "\"yes\""}}, 400, "wrong_type", "/weights/alibi"},
        {{{"/weights/alibi", "[0.5]"}}, 422, "dimension_mismatch", "/weights/alibi"},
        {{{"/weights/alibi", "[0.5,0.25,0.125]"}}, 422, "dimension_mismatch", "/weights/alibi"},
        {{{"/weights/alibi", "[0.5,\"a\"]"}}, 400, "wrong_type", "/weights/alibi/1"},
        {{{"/weights/window", "0"}}, 422, "out_of_range", "/weights/window"},
        {{{"/weights/window", "-3"}}, 422, "out_of_range", "/weights/window"},
        {{{"/weights/window", "2.5"}}, 400, "wrong_type", "/weights/window"},
        {{{"/weights/window", "\"2\""}}, 400, "wrong_type", "/weights/window"},
        {{{"/weights/softcap", "0"}}, 422, "out_of_range", "/weights/softcap"},
        {{{"/weights/softcap", "-30"}}, 422, "out_of_range", "/weights/softcap"},
        {{{"/weights/softcap", "true"}}, 400, "wrong_type", "/weights/softcap"},
        {{{"/weights/softcap", "1e39"}}, 422, "non_finite_number", "/weights/softcap"},
        {{{"/weights/scale", "0"}}, 422, "out_of_range", "/weights/scale"},
        {{{"/weights/scale", "-1"}}, 422, "out_of_range", "/weights/scale"},
        {{{"/weights/scale", "null"}}, 400, "wrong_type", "/weights/scale"},
        {{{"/weights/kv_heads", "{}"}}, 400, "wrong_type", "/weights/kv_heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(edited(base(), cases[i].e, 3), cases[i].status, cases[i].code, cases[i].path);

    /* an odd d_head needs dims: one head of 3 over d_model 3 */
    expect_error(edited(request_kv(2, 3, 1, 3, 3), (edit[]){{"/weights/rope", "{}"}}, 1), 422,
                 "out_of_range", "/weights/rope");
    api_call_free(decode_ok(
        edited(request_kv(2, 3, 1, 3, 3), (edit[]){{"/weights/rope", "{\"dims\":2}"}}, 1)));
}
END_TEST

START_TEST(test_kv_heads_refused) {
    static const struct {
        edit e[3];
        int status;
        const char *code, *path;
    } cases[] = {
        {{{"/weights/kv_heads", "[]"}}, 422, "dimension_mismatch", "/weights/kv_heads"},
        {{{"/weights/kv_heads", "{}"}}, 400, "wrong_type", "/weights/kv_heads"},
        {{{"/weights/kv_heads/0", "[]"}}, 400, "wrong_type", "/weights/kv_heads/0"},
        {{{"/weights/kv_heads/1/w_x", "[[1]]"}}, 400, "unknown_field", "/weights/kv_heads/1/w_x"},
        {{{"/weights/kv_heads/1/w_v", NULL}}, 400, "missing_field", "/weights/kv_heads/1/w_v"},
        {{{"/weights/kv_heads/0/w_k", NULL}}, 400, "missing_field", "/weights/kv_heads/0/w_k"},
        {{{"/weights/kv_heads/1/w_k", "[[1],[2],[3]]"}},
         422,
         "dimension_mismatch",
         "/weights/kv_heads/1/w_k"},
        {{{"/weights/kv_heads/0/w_v", "[[1,2],[1,2],[1,2],[1,2]]"}},
         422,
         "dimension_mismatch",
         "/weights/kv_heads/0/w_v"},
        {{{"/weights/kv_heads/0/b_k", "[1,2]"}},
         422,
         "dimension_mismatch",
         "/weights/kv_heads/0/b_k"},
        {{{"/weights/kv_heads/0/b_v", "\"x\""}}, 400, "wrong_type", "/weights/kv_heads/0/b_v"},
        /* K and V are the K/V heads' alone */
        {{{"/weights/heads/2/w_k", "[[1],[2],[3],[4]]"}},
         400,
         "unknown_field",
         "/weights/heads/2/w_k"},
        {{{"/weights/heads/0/w_v", "[[1],[2],[3],[4]]"}},
         400,
         "unknown_field",
         "/weights/heads/0/w_v"},
        {{{"/weights/heads/3/b_k", "[1]"}}, 400, "unknown_field", "/weights/heads/3/b_k"},
        {{{"/weights/heads/1/b_v", "[1]"}}, 400, "unknown_field", "/weights/heads/1/b_v"},
        /* 3 K/V heads do not divide 4 heads */
        {{{"/weights/kv_heads", "[{\"w_k\":[[1],[2],[3],[4]],\"w_v\":[[1],[2],[3],[4]]},"
                                "{\"w_k\":[[1],[2],[3],[4]],\"w_v\":[[1],[2],[3],[4]]},"
                                "{\"w_k\":[[1],[2],[3],[4]],\"w_v\":[[1],[2],[3],[4]]}]"}},
         422,
         "dimension_mismatch",
         "/weights/kv_heads"},
        /* without kv_heads, w_k is required again */
        {{{"/weights/kv_heads", NULL}}, 400, "missing_field", "/weights/heads/0/w_k"},
    };
    /* 4 heads of width 1 over d_model 4, 2 K/V heads */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(edited(grouped(3, 4, 4, 2, 1, 4), cases[i].e, 3), cases[i].status,
                     cases[i].code, cases[i].path);
    /* g = h and g = 1 are fine; g > h does not divide */
    api_call_free(decode_ok(grouped(3, 4, 4, 4, 1, 4)));
    api_call_free(decode_ok(grouped(3, 4, 4, 1, 1, 4)));
    expect_error(grouped(3, 4, 2, 4, 1, 4), 422, "dimension_mismatch", "/weights/kv_heads");
    /* over the head limit on the text */
    api_limits few = limits;
    few.max_heads = 4;
    json_t *r = grouped(3, 4, 4, 4, 1, 4);
    json_array_append(tj_at(r, "weights/kv_heads"),
                      json_array_get(tj_at(r, "weights/kv_heads"), 0));
    char *text = dump(r);
    api_call *req = NULL;
    attn_error err;
    ck_assert_int_eq(api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &few, &req, &err),
                     -1);
    ck_assert_str_eq(err.code, "limit_exceeded");
    ck_assert_str_eq(err.path, "/weights/kv_heads");
    free(text);
    json_decref(r);
}
END_TEST

START_TEST(test_positions_and_context_refused) {
    static const struct {
        edit e[3];
        int status;
        const char *code, *path;
    } cases[] = {
        {{{"/positions", "3"}}, 400, "wrong_type", "/positions"},
        {{{"/positions", "[0,1]"}}, 422, "dimension_mismatch", "/positions"},
        {{{"/positions", "[0,1,2,3]"}}, 422, "dimension_mismatch", "/positions"},
        {{{"/positions", "[0,-1,2]"}}, 422, "out_of_range", "/positions/1"},
        {{{"/positions", "[0,1,2147483648]"}}, 422, "out_of_range", "/positions/2"},
        {{{"/positions", "[0,0.5,1]"}}, 400, "wrong_type", "/positions/1"},
        {{{"/positions", "[0,\"1\",2]"}}, 400, "wrong_type", "/positions/1"},
        {{{"/positions", "[0,1,null,5]"}}, 400, "wrong_type", "/positions/2"},
        {{{"/context", "\"c\""}}, 400, "wrong_type", "/context"},
        {{{"/context", "[[1,2,3,4],[1,2]]"}}, 422, "dimension_mismatch", "/context/1"},
        {{{"/context", "[[1,2,3,4]]"}, {"/mask", "\"causal\""}},
         422,
         "invalid_combination",
         "/mask"},
        {{{"/context", "[[1,2,3,4]]"}, {"/weights/rope", "{}"}},
         422,
         "invalid_combination",
         "/weights/rope"},
        {{{"/context", "[[1,2,3,4]]"}, {"/weights/alibi", "true"}},
         422,
         "invalid_combination",
         "/weights/alibi"},
        {{{"/context", "[[1,2,3,4]]"}, {"/weights/window", "2"}},
         422,
         "invalid_combination",
         "/weights/window"},
        /* false is no ALiBi: nothing to refuse */
        {{{"/context", "[[1,2,3,4]]"}, {"/weights/alibi", "false"}, {"/mask", "\"causal\""}},
         422,
         "invalid_combination",
         "/mask"},
        /* the mask is n × m */
        {{{"/context", "[[1,2,3,4]]"}, {"/mask", "[[1,1,1],[1,1,1],[1,1,1]]"}},
         422,
         "dimension_mismatch",
         "/mask/0"},
        {{{"/context", "[[1,2,3,4],[0,0,0,0]]"}, {"/mask", "[[1,0],[0,1]]"}},
         422,
         "dimension_mismatch",
         "/mask"},
        /* w_k and w_v have d_context rows: a context of width 3 */
        {{{"/context", "[[1,2,3]]"}}, 422, "dimension_mismatch", "/weights/heads/0/w_k"},
        {{{"/context_tokens", "[\"a\"]"}}, 422, "invalid_combination", "/context_tokens"},
        {{{"/context", "[[1,2,3,4]]"}, {"/context_tokens", "[\"a\",\"b\"]"}},
         422,
         "dimension_mismatch",
         "/context_tokens"},
        {{{"/context", "[[1,2,3,4]]"}, {"/context_tokens", "[1]"}},
         400,
         "wrong_type",
         "/context_tokens/0"},
        {{{"/context", "[[1,2,3,4]]"}, {"/context_tokens", "\"a\""}},
         400,
         "wrong_type",
         "/context_tokens"},
        {{{"/return", "[\"k_raw\",\"q_rot\"]"}}, 400, "invalid_value", "/return/1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(edited(base(), cases[i].e, 3), cases[i].status, cases[i].code, cases[i].path);

    /* the largest position and a context within the limits pass */
    api_call_free(decode_ok(edited(base(), (edit[]){{"/positions", "[2147483647,0,7]"}}, 1)));
    api_call_free(decode_ok(edited(base(), (edit[]){{"/context", "[[1,2,3,4]]"}}, 1)));
    /* context rows count against max_tokens (64 here); its width against max_d_model */
    json_t *r = base();
    tj_put(r, "/context", tj_matrix(65, 4, 3));
    expect_error(r, 422, "limit_exceeded", "/context");
    r = request_kv(3, 4, 2, 2, 65);
    tj_put(r, "/context", tj_matrix(1, 65, 3));
    expect_error(r, 422, "limit_exceeded", "/context");
    /* a context as a tensor object, like any matrix */
    r = request_kv(3, 4, 2, 2, 2);
    tj_put(r, "/context",
           json_pack("{s:s,s:[i,i],s:s}", "dtype", "float32", "shape", 1, 2, "data",
                     "AACAPwAAAEA=")); /* [1, 2] */
    api_call *req = decode_ok(r);
    ck_assert_uint_eq(api_call_inputs(req)->n_context, 1);
    ck_assert(api_call_inputs(req)->context[0] == 1.0f && api_call_inputs(req)->context[1] == 2.0f);
    api_call_free(req);
}
END_TEST

/* A refused number is quoted exactly: one past a bound must not read as a
 * value inside it (2147483648 printed as 2.14748e+09). */
START_TEST(test_refused_numbers_quoted_exactly) {
    static const struct {
        edit e[1];
        const char *path, *quoted;
    } cases[] = {
        {{{"/positions", "[0,1,2147483648]"}}, "/positions/2", "2147483648"},
        {{{"/positions", "[0,2147483647.5,1]"}}, "/positions/1", "2147483647.5"},
        {{{"/weights/window", "9007199254740994"}}, "/weights/window", "9007199254740994"},
        {{{"/weights/rope", "{\"dims\":1234567}"}}, "/weights/rope/dims", "1234567"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *body = edited(base(), cases[i].e, 1);
        char *text = dump(body);
        const char *seen;
        api_call *req = NULL;
        attn_error err;
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err), -1);
        ck_assert_str_eq(err.path, cases[i].path);
        seen = strstr(err.message, cases[i].quoted);
        ck_assert_msg(seen != NULL, "\"%s\" does not quote %s", err.message, cases[i].quoted);
        free(text);
        json_decref(body);
    }
}
END_TEST

/* ---- packing ---------------------------------------------------------------- */

/* The JSON number at path's (r, c). */
static float at(json_t *body, const char *path, size_t r, size_t c) {
    json_t *m = tj_at(body, path);
    ck_assert_msg(m != NULL, "no %s", path);
    return (float)cell(m, r, c);
}

START_TEST(test_grouped_packing) {
    /* h 4 of width 1, g 2, d_model 4; a bias on K/V head 1 and on head 2's q */
    size_t dm = 4, h = 4, g = 2, dh = 1, hd = 4, gd = 2, ld = hd + 2 * gd;
    json_t *r = grouped(3, dm, h, g, dh, dm);
    tj_put(r, "/weights/kv_heads/1/b_v", tj_vector(1, 77));
    tj_put(r, "/weights/heads/2/b_q", tj_vector(1, 78));
    json_t *copy = json_deep_copy(r);
    api_call *req = decode_ok(r);
    const attn_weights *w = api_call_inputs(req)->weights;

    ck_assert_uint_eq(w->n_heads, h);
    ck_assert_uint_eq(w->n_kv_heads, g);
    ck_assert_ptr_null(w->w_kv);
    ck_assert_ptr_null(w->b_kv);
    for (size_t row = 0; row < dm; row++) {
        for (size_t i = 0; i < h; i++) {
            char p[64];
            snprintf(p, sizeof p, "weights/heads/%zu/w_q", i);
            ck_assert(w->w_qkv[row * ld + i * dh] == at(copy, p, row, 0));
        }
        for (size_t u = 0; u < g; u++) {
            char pk[64], pv[64];
            snprintf(pk, sizeof pk, "weights/kv_heads/%zu/w_k", u);
            snprintf(pv, sizeof pv, "weights/kv_heads/%zu/w_v", u);
            ck_assert(w->w_qkv[row * ld + hd + u * dh] == at(copy, pk, row, 0));
            ck_assert(w->w_qkv[row * ld + hd + gd + u * dh] == at(copy, pv, row, 0));
        }
    }
    ck_assert_ptr_nonnull(w->b_qkv);
    for (size_t c = 0; c < ld; c++) {
        float want = c == 2 ? (float)tj_val(78) : c == hd + gd + 1 ? (float)tj_val(77) : 0.0f;
        ck_assert_msg(w->b_qkv[c] == want, "b_qkv[%zu]", c);
    }
    api_call_free(req);
    json_decref(copy);
}
END_TEST

START_TEST(test_cross_packing) {
    /* 2 heads of width 2 over d_model 4; K/V heads of a context of width 3 */
    size_t dm = 4, dc = 3, h = 2, dh = 2, hd = 4, gd = 4;
    json_t *r = request_kv(3, dm, h, dh, dc);
    tj_put(r, "/context", tj_matrix(5, dc, 9));
    tj_put(r, "/weights/heads/1/b_k", tj_vector(2, 60));
    json_t *copy = json_deep_copy(r);
    api_call *req = decode_ok(r);
    const attn_input *in = api_call_inputs(req);
    const attn_weights *w = in->weights;

    ck_assert_uint_eq(in->n_context, 5);
    ck_assert_ptr_nonnull(in->context);
    for (size_t i = 0; i < 5 * dc; i++)
        ck_assert(in->context[i] == at(copy, "context", i / dc, i % dc));
    ck_assert_uint_eq(w->d_context, dc);
    ck_assert_ptr_nonnull(w->w_kv);
    for (size_t i = 0; i < h; i++) {
        char pq[64], pk[64], pv[64];
        snprintf(pq, sizeof pq, "weights/heads/%zu/w_q", i);
        snprintf(pk, sizeof pk, "weights/heads/%zu/w_k", i);
        snprintf(pv, sizeof pv, "weights/heads/%zu/w_v", i);
        for (size_t c = 0; c < dh; c++) {
            for (size_t row = 0; row < dm; row++) /* w_qkv is dm × hd: Q alone */
                ck_assert(w->w_qkv[row * hd + i * dh + c] == at(copy, pq, row, c));
            for (size_t row = 0; row < dc; row++) { /* w_kv is dc × 2gd */
                ck_assert(w->w_kv[row * 2 * gd + i * dh + c] == at(copy, pk, row, c));
                ck_assert(w->w_kv[row * 2 * gd + gd + i * dh + c] == at(copy, pv, row, c));
            }
        }
    }
    ck_assert_ptr_null(w->b_qkv); /* no b_q */
    ck_assert_ptr_nonnull(w->b_kv);
    for (size_t c = 0; c < 2 * gd; c++)
        ck_assert(w->b_kv[c] == (c == 2 || c == 3 ? (float)tj_val(60 + c - 2) : 0.0f));
    /* the mask defaults to none with a context, not to causal */
    ck_assert_int_eq(in->mask.kind, ATTN_MASK_NONE);
    api_call_free(req);
    json_decref(copy);
}
END_TEST

/* text as JSON (new reference); fails the test when it is not. */
static json_t *parsed(const char *text) {
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
    return v;
}

START_TEST(test_variants_bound) {
    json_t *r = base();
    tj_put(r, "/weights/rope",
           json_pack("{s:f,s:i,s:s,s:{s:s,s:f,s:f,s:f,s:f}}", "theta", 500000.0, "dims", 2, "style",
                     "interleaved", "scaling", "type", "llama3", "factor", 8.0, "low_freq_factor",
                     1.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 8192.0));
    tj_put(r, "/weights/window", json_integer(2));
    tj_put(r, "/weights/softcap", json_real(30));
    tj_put(r, "/weights/alibi", json_true());
    tj_put(r, "/positions", json_pack("[i,i,i]", 5, 9, 10));
    api_call *req = decode_ok(r);
    const attn_input *in = api_call_inputs(req);
    const attn_weights *w = in->weights;
    ck_assert_uint_eq(w->rope.dims, 2);
    ck_assert(w->rope.theta == 500000.0);
    ck_assert_int_eq(w->rope.style, ATTN_ROPE_INTERLEAVED);
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(w->rope.factor == 8 && w->rope.low_freq_factor == 1 &&
              w->rope.high_freq_factor == 4 && w->rope.original_max_position == 8192);
    ck_assert_uint_eq(w->window, 2);
    ck_assert(w->softcap == 30.0f);
    /* the paper's slopes for 2 heads: 2^(−8·1/2), 2^(−8·2/2) */
    ck_assert_ptr_nonnull(w->alibi);
    ck_assert(w->alibi[0] == 0x1p-4f && w->alibi[1] == 0x1p-8f);
    ck_assert_ptr_nonnull(in->positions);
    ck_assert(in->positions[0] == 5 && in->positions[1] == 9 && in->positions[2] == 10);
    ck_assert_ptr_null(in->context);
    api_call_free(req);

    /* defaults: theta 10000, dims d_head, half, no scaling; alibi false is none;
     * linear scaling; slopes given */
    r = base();
    tj_put(r, "/weights/rope",
           json_pack("{s:{s:s,s:f}}", "scaling", "type", "linear", "factor", 4.0));
    tj_put(r, "/weights/alibi", json_pack("[f,f]", 0.75, -0.5));
    req = decode_ok(r);
    w = api_call_inputs(req)->weights;
    ck_assert(w->rope.theta == 10000.0);
    ck_assert_uint_eq(w->rope.dims, 2);
    ck_assert_int_eq(w->rope.style, ATTN_ROPE_HALF);
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LINEAR);
    ck_assert(w->rope.factor == 4.0);
    ck_assert(w->alibi[0] == 0.75f && w->alibi[1] == -0.5f);
    ck_assert_uint_eq(w->window, 0);
    ck_assert(w->softcap == 0.0f);
    api_call_free(req);

    /* yarn: every field; then its defaults (betas 0 = 32 and 1, truncate) */
    r = base();
    tj_put(r, "/weights/rope",
           parsed("{\"theta\": 150000, \"scaling\": {\"type\": \"yarn\", \"factor\": 32, "
                  "\"original_max_position_embeddings\": 4096, \"beta_fast\": 16, "
                  "\"beta_slow\": 2, \"mscale\": 0.5, \"mscale_all_dim\": 1, "
                  "\"attention_factor\": 1.25, \"truncate\": false}}"));
    req = decode_ok(r);
    w = api_call_inputs(req)->weights;
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_YARN);
    ck_assert(w->rope.factor == 32 && w->rope.original_max_position == 4096 &&
              w->rope.beta_fast == 16 && w->rope.beta_slow == 2 && w->rope.mscale == 0.5 &&
              w->rope.mscale_all_dim == 1 && w->rope.attention_factor == 1.25 &&
              w->rope.untruncated == 1);
    api_call_free(req);
    r = base();
    tj_put(r, "/weights/rope",
           parsed("{\"scaling\": {\"type\": \"yarn\", \"factor\": 4, "
                  "\"original_max_position_embeddings\": 64}}"));
    req = decode_ok(r);
    w = api_call_inputs(req)->weights;
    ck_assert(w->rope.beta_fast == 0 && w->rope.beta_slow == 0 && w->rope.mscale == 0 &&
              w->rope.attention_factor == 0 && w->rope.untruncated == 0);
    ck_assert(fabs(attn_rope_attention_factor(&w->rope) - (0.1 * log(4.0) + 1.0)) < 1e-15);
    api_call_free(req);

    /* longrope: its lists (a tensor object too), factor and attention factor optional */
    r = base();
    tj_put(r, "/weights/rope",
           parsed("{\"scaling\": {\"type\": \"longrope\", \"short_factor\": [1.5], "
                  "\"long_factor\": {\"dtype\": \"float32\", \"shape\": [1], "
                  "\"data\": \"AACAQA==\"}, \"original_max_position_embeddings\": 4096, "
                  "\"factor\": 32}}"));
    req = decode_ok(r);
    w = api_call_inputs(req)->weights;
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LONGROPE);
    ck_assert(w->rope.short_factor[0] == 1.5f && w->rope.long_factor[0] == 4.0f);
    ck_assert(w->rope.factor == 32 && w->rope.original_max_position == 4096);
    ck_assert(fabs(attn_rope_attention_factor(&w->rope) - sqrt(1 + log(32.0) / log(4096.0))) <
              1e-15);
    api_call_free(req);

    r = base();
    tj_put(r, "/weights/alibi", json_false());
    req = decode_ok(r);
    w = api_call_inputs(req)->weights;
    ck_assert_ptr_null(w->alibi);
    ck_assert_uint_eq(w->rope.dims, 0);
    ck_assert_ptr_null(api_call_inputs(req)->positions);
    api_call_free(req);
}
END_TEST

/* The answer to base() with positions 5, 9, 10 and this RoPE (d_head 2:
 * one pair, f_0 = 1, λ_0 = 2π). */
static json_t *rope_answer(json_t *rope) {
    json_t *r = base();
    tj_put(r, "/weights/rope", rope);
    tj_put(r, "/positions", json_pack("[i,i,i]", 5, 9, 10));
    tj_put(r, "/return", json_pack("[s,s,s]", "q", "k", "patterns"));
    api_call *req = decode_ok(r);
    json_t *resp = respond(req);
    api_call_free(req);
    return resp;
}

/* llama3 with high_freq_factor = low_freq_factor (Llama 4 Scout's 1 and
 * 1): no band in between, so f_0 is f_0 / s where λ_0 > L/l and f_0
 * itself where λ_0 ≤ L/l, λ_0 = L/l exactly included (no 0/0). */
START_TEST(test_llama3_equal_factors) {
    json_t *plain = rope_answer(json_object());
    json_t *linear =
        rope_answer(json_pack("{s:{s:s,s:f}}", "scaling", "type", "linear", "factor", 8.0));
    ck_assert(!json_equal(plain, linear));
    const struct {
        double L;
        const json_t *want;
    } cases[] = {
        {2.0 * M_PI, plain}, /* λ_0 = L/l exactly */
        {7.0, plain},        /* λ_0 < L/u */
        {6.0, linear},       /* λ_0 > L/l */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *got =
            rope_answer(json_pack("{s:{s:s,s:f,s:f,s:f,s:f}}", "scaling", "type", "llama3",
                                  "factor", 8.0, "low_freq_factor", 1.0, "high_freq_factor", 1.0,
                                  "original_max_position_embeddings", cases[i].L));
        ck_assert_msg(json_equal(got, cases[i].want), "L = %.17g: %s", cases[i].L, dump(got));
        json_decref(got);
    }
    /* the decoded factors; then u < l is refused at high_freq_factor */
    json_t *r = base();
    tj_put(r, "/weights/rope",
           json_pack("{s:{s:s,s:f,s:f,s:f,s:f}}", "scaling", "type", "llama3", "factor", 16.0,
                     "low_freq_factor", 1.0, "high_freq_factor", 1.0,
                     "original_max_position_embeddings", 8192.0));
    api_call *req = decode_ok(r);
    const attn_rope *rope = &api_call_inputs(req)->weights->rope;
    ck_assert_int_eq(rope->scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(rope->low_freq_factor == 1.0 && rope->high_freq_factor == 1.0);
    api_call_free(req);
    r = base();
    tj_put(r, "/weights/rope",
           json_pack("{s:{s:s,s:f,s:f,s:f,s:f}}", "scaling", "type", "llama3", "factor", 16.0,
                     "low_freq_factor", 1.0, "high_freq_factor", 0.999,
                     "original_max_position_embeddings", 8192.0));
    expect_error(r, 422, "out_of_range", "/weights/rope/scaling/high_freq_factor");
    json_decref(plain), json_decref(linear);
}
END_TEST

/* ---- scale ------------------------------------------------------------------ */

START_TEST(test_scale_precedence) {
    static const struct {
        const char *request, *weights;
        float want;
    } cases[] = {
        {NULL, NULL, 0.70710677f}, /* 1/sqrt(2) */
        {NULL, "0.25", 0.25f},
        {"0.5", "0.25", 0.5f},
        {"0.5", NULL, 0.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *r = base();
        edit e[2] = {{cases[i].request ? "/scale" : NULL, cases[i].request},
                     {cases[i].weights ? "/weights/scale" : NULL, cases[i].weights}};
        if (cases[i].request) edited(r, e, 1);
        if (cases[i].weights) edited(r, e + 1, 1);
        api_call *req = decode_ok(r);
        ck_assert_msg(api_call_inputs(req)->scale == cases[i].want, "case %zu: %g", i,
                      api_call_inputs(req)->scale);
        json_t *resp = respond(req);
        ck_assert((float)tf_num(json_object_get(resp, "scale")) == cases[i].want);
        json_decref(resp);
        api_call_free(req);
    }
}
END_TEST

/* ---- numbers, against float64 ------------------------------------------------ */

/* RoPE "half" of row x (width dh, dims rotated) at position p, in place. */
static void rope_half(double *x, size_t dims, double theta, double p) {
    for (size_t t = 0; t < dims / 2; t++) {
        double f = pow(theta, -2.0 * (double)t / (double)dims), a = x[t], b = x[t + dims / 2];
        x[t] = a * cos(p * f) - b * sin(p * f);
        x[t + dims / 2] = a * sin(p * f) + b * cos(p * f);
    }
}

/* GQA (h 4, g 2, d_head 4) with RoPE over 3 dims of 4 … no: dims 2 of 4
 * (partial), given positions, causal: q, q_raw, k, k_raw and patterns of
 * every head against a float64 recomputation of docs/API.md's formulas. */
START_TEST(test_grouped_rope_numbers) {
    const size_t n = 3, dm = 8, h = 4, g = 2, dh = 4, dims = 2;
    const double theta = 100.0, pos[3] = {4, 5, 9};
    json_t *r = grouped(n, dm, h, g, dh, dm);
    tj_put(r, "/weights/rope", json_pack("{s:f,s:i}", "theta", theta, "dims", (int)dims));
    tj_put(r, "/positions", json_pack("[i,i,i]", 4, 5, 9));
    tj_put(r, "/return", json_pack("[s,s,s,s,s]", "q", "k", "q_raw", "k_raw", "patterns"));
    json_t *copy = json_deep_copy(r);
    api_call *req = decode_ok(r);
    json_t *resp = respond(req);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_kv_heads")), 2);
    check_shape3(json_object_get(resp, "q_raw"), h, n, dh);
    check_shape3(json_object_get(resp, "k_raw"), h, n, dh);
    json_t *emb = json_object_get(copy, "embeddings");

    for (size_t i = 0; i < h; i++) {
        size_t u = i / (h / g); /* consecutive heads share a K/V head */
        double q[3][4], k[3][4], qr[3][4], kr[3][4];
        char pq[64], pk[64];
        snprintf(pq, sizeof pq, "weights/heads/%zu/w_q", i);
        snprintf(pk, sizeof pk, "weights/kv_heads/%zu/w_k", u);
        for (size_t t = 0; t < n; t++) {
            for (size_t c = 0; c < dh; c++) {
                q[t][c] = k[t][c] = 0;
                for (size_t j = 0; j < dm; j++) {
                    q[t][c] += cell(emb, t, j) * cell(tj_at(copy, pq), j, c);
                    k[t][c] += cell(emb, t, j) * cell(tj_at(copy, pk), j, c);
                }
                qr[t][c] = q[t][c], kr[t][c] = k[t][c];
            }
            rope_half(q[t], dims, theta, pos[t]);
            rope_half(k[t], dims, theta, pos[t]);
        }
        json_t *gq = json_array_get(json_object_get(resp, "q"), i);
        json_t *gk = json_array_get(json_object_get(resp, "k"), i);
        json_t *gqr = json_array_get(json_object_get(resp, "q_raw"), i);
        json_t *gkr = json_array_get(json_object_get(resp, "k_raw"), i);
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < dh; c++) {
                ck_assert_msg(fabs(cell(gq, t, c) - q[t][c]) < 1e-5, "q %zu %zu %zu", i, t, c);
                ck_assert_msg(fabs(cell(gk, t, c) - k[t][c]) < 1e-5, "k %zu %zu %zu", i, t, c);
                ck_assert(fabs(cell(gqr, t, c) - qr[t][c]) < 1e-5);
                ck_assert(fabs(cell(gkr, t, c) - kr[t][c]) < 1e-5);
            }
        json_t *gp = json_array_get(json_object_get(resp, "patterns"), i);
        for (size_t t = 0; t < n; t++) {
            double s[3], mx = -INFINITY, sum = 0;
            for (size_t kk = 0; kk <= t; kk++) {
                s[kk] = 0;
                for (size_t c = 0; c < dh; c++)
                    s[kk] += q[t][c] * k[kk][c];
                s[kk] *= 0.5; /* 1/sqrt(4) */
                if (s[kk] > mx) mx = s[kk];
            }
            for (size_t kk = 0; kk <= t; kk++)
                sum += exp(s[kk] - mx);
            for (size_t kk = 0; kk < n; kk++) {
                double want = kk <= t ? exp(s[kk] - mx) / sum : 0.0;
                ck_assert_msg(fabs(cell(gp, t, kk) - want) < 1e-5, "P %zu %zu %zu: %g vs %g", i, t,
                              kk, cell(gp, t, kk), want);
            }
        }
    }
    json_decref(resp);
    json_decref(copy);
    api_call_free(req);
}
END_TEST

/* ALiBi (given slopes), a window of 2 and soft-capping, no mask, positions
 * given: the final scores and patterns of both heads. */
START_TEST(test_alibi_window_softcap_numbers) {
    const size_t n = 4, dh = 2;
    const double slopes[2] = {0.5, 0.25}, c = 1.5, pos[4] = {0, 1, 3, 4};
    json_t *r = request_kv(n, 4, 2, dh, 4);
    tj_put(r, "/weights/alibi", json_pack("[f,f]", slopes[0], slopes[1]));
    tj_put(r, "/weights/window", json_integer(2));
    tj_put(r, "/weights/softcap", json_real(c));
    tj_put(r, "/positions", json_pack("[i,i,i,i]", 0, 1, 3, 4));
    tj_put(r, "/mask", json_string("none"));
    tj_put(r, "/return", json_pack("[s,s]", "scores", "patterns"));
    json_t *copy = json_deep_copy(r);
    api_call *req = decode_ok(r);
    json_t *resp = respond(req);
    json_t *emb = json_object_get(copy, "embeddings");
    for (size_t i = 0; i < 2; i++) {
        char pq[64], pk[64];
        double q[4][2] = {{0}}, k[4][2] = {{0}};
        snprintf(pq, sizeof pq, "weights/heads/%zu/w_q", i);
        snprintf(pk, sizeof pk, "weights/heads/%zu/w_k", i);
        for (size_t t = 0; t < n; t++)
            for (size_t cc = 0; cc < dh; cc++)
                for (size_t j = 0; j < 4; j++) {
                    q[t][cc] += cell(emb, t, j) * cell(tj_at(copy, pq), j, cc);
                    k[t][cc] += cell(emb, t, j) * cell(tj_at(copy, pk), j, cc);
                }
        json_t *gs = json_array_get(json_object_get(resp, "scores"), i);
        json_t *gp = json_array_get(json_object_get(resp, "patterns"), i);
        for (size_t t = 0; t < n; t++) {
            double s[4], mx = -INFINITY, sum = 0;
            int allowed[4];
            for (size_t kk = 0; kk < n; kk++) {
                double d = fabs(pos[t] - pos[kk]);
                s[kk] = (q[t][0] * k[kk][0] + q[t][1] * k[kk][1]) / sqrt(2.0);
                s[kk] = c * tanh(s[kk] / c) - slopes[i] * d;
                allowed[kk] = d < 2;
                if (allowed[kk] && s[kk] > mx) mx = s[kk];
            }
            for (size_t kk = 0; kk < n; kk++)
                if (allowed[kk]) sum += exp(s[kk] - mx);
            for (size_t kk = 0; kk < n; kk++) {
                json_t *got = json_array_get(json_array_get(gs, t), kk);
                if (!allowed[kk]) {
                    ck_assert_msg(json_is_null(got), "score %zu %zu %zu is not null", i, t, kk);
                    ck_assert(cell(gp, t, kk) == 0.0);
                    continue;
                }
                ck_assert_msg(fabs(tf_num(got) - s[kk]) < 1e-5, "S %zu %zu %zu: %g vs %g", i, t, kk,
                              tf_num(got), s[kk]);
                ck_assert(fabs(cell(gp, t, kk) - exp(s[kk] - mx) / sum) < 1e-5);
            }
        }
    }
    json_decref(resp);
    json_decref(copy);
    api_call_free(req);
}
END_TEST

/* Cross-attention: 3 tokens of width 4 attend to 5 context rows of width 3
 * with a custom n × m mask; shapes, fields and the numbers of every output. */
START_TEST(test_cross_numbers) {
    const size_t n = 3, m = 5, dm = 4, dc = 3, dh = 2;
    json_t *r = request_kv(n, dm, 2, dh, dc);
    tj_put(r, "/context", tj_matrix(m, dc, 9));
    tj_put(r, "/context_tokens", json_pack("[s,s,s,s,s]", "a", "b", "c", "d", "\xc3\xa9"));
    tj_put(r, "/weights/heads/1/b_v", tj_vector(2, 3));
    json_t *mask = json_array();
    for (size_t t = 0; t < n; t++) {
        json_t *row = json_array();
        for (size_t k = 0; k < m; k++)
            json_array_append_new(row, json_boolean((t + k) % 3 != 0));
        json_array_append_new(mask, row);
    }
    tj_put(r, "/mask", mask);
    tj_put(r, "/select_heads", json_pack("[i]", 1));
    tj_put(r, "/return",
           json_pack("[s,s,s,s,s,s,s,s]", "q", "k", "v", "k_raw", "scores", "patterns",
                     "head_outputs", "embeddings"));
    json_t *copy = json_deep_copy(r);
    api_call *req = decode_ok(r);
    json_t *resp = respond(req);

    ck_assert_int_eq(tf_num(json_object_get(resp, "n_tokens")), n);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_context")), m);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_kv_heads")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "custom");
    ck_assert(json_equal(json_object_get(resp, "context_tokens"), tj_at(copy, "context_tokens")));
    check_shape3(json_object_get(resp, "q"), 1, n, dh);
    check_shape3(json_object_get(resp, "k"), 1, m, dh);
    check_shape3(json_object_get(resp, "v"), 1, m, dh);
    check_shape3(json_object_get(resp, "k_raw"), 1, m, dh);
    check_shape3(json_object_get(resp, "head_outputs"), 1, n, dh);
    ck_assert_uint_eq(json_array_size(json_object_get(resp, "embeddings")), n);

    json_t *emb = json_object_get(copy, "embeddings"), *ctx = json_object_get(copy, "context");
    double q[3][2] = {{0}}, k[5][2] = {{0}}, v[5][2] = {{0}};
    for (size_t c = 0; c < dh; c++) {
        for (size_t t = 0; t < n; t++)
            for (size_t j = 0; j < dm; j++)
                q[t][c] += cell(emb, t, j) * cell(tj_at(copy, "weights/heads/1/w_q"), j, c);
        for (size_t s = 0; s < m; s++) {
            for (size_t j = 0; j < dc; j++) {
                k[s][c] += cell(ctx, s, j) * cell(tj_at(copy, "weights/heads/1/w_k"), j, c);
                v[s][c] += cell(ctx, s, j) * cell(tj_at(copy, "weights/heads/1/w_v"), j, c);
            }
            v[s][c] += tj_val(3 + c);
        }
    }
    json_t *gk = json_array_get(json_object_get(resp, "k"), 0);
    json_t *gv = json_array_get(json_object_get(resp, "v"), 0);
    json_t *gkr = json_array_get(json_object_get(resp, "k_raw"), 0);
    for (size_t s = 0; s < m; s++)
        for (size_t c = 0; c < dh; c++) {
            ck_assert(fabs(cell(gk, s, c) - k[s][c]) < 1e-5);
            ck_assert(fabs(cell(gkr, s, c) - k[s][c]) < 1e-5); /* no RoPE: the same */
            ck_assert(fabs(cell(gv, s, c) - v[s][c]) < 1e-5);
        }
    json_t *gs = json_array_get(json_object_get(resp, "scores"), 0);
    json_t *gp = json_array_get(json_object_get(resp, "patterns"), 0);
    json_t *gz = json_array_get(json_object_get(resp, "head_outputs"), 0);
    for (size_t t = 0; t < n; t++) {
        double s[5], mx = -INFINITY, sum = 0, z[2] = {0, 0};
        for (size_t kk = 0; kk < m; kk++) {
            s[kk] = (q[t][0] * k[kk][0] + q[t][1] * k[kk][1]) / sqrt(2.0);
            if ((t + kk) % 3 != 0 && s[kk] > mx) mx = s[kk];
        }
        for (size_t kk = 0; kk < m; kk++)
            if ((t + kk) % 3 != 0) sum += exp(s[kk] - mx);
        for (size_t kk = 0; kk < m; kk++) {
            json_t *got = json_array_get(json_array_get(gs, t), kk);
            if ((t + kk) % 3 == 0) {
                ck_assert(json_is_null(got));
                ck_assert(cell(gp, t, kk) == 0.0);
                continue;
            }
            double p = exp(s[kk] - mx) / sum;
            ck_assert(fabs(tf_num(got) - s[kk]) < 1e-5);
            ck_assert(fabs(cell(gp, t, kk) - p) < 1e-5);
            z[0] += p * v[kk][0], z[1] += p * v[kk][1];
        }
        ck_assert(fabs(cell(gz, t, 0) - z[0]) < 1e-5 && fabs(cell(gz, t, 1) - z[1]) < 1e-5);
    }
    json_decref(resp);
    json_decref(copy);
    api_call_free(req);
}
END_TEST

/* The response limit's bound holds with a context: every output asked for,
 * at the bound the request passes and its body fits, one byte under fails. */
START_TEST(test_cross_response_bound) {
    json_t *r = request_kv(3, 4, 2, 2, 3);
    tj_put(r, "/context", tj_matrix(7, 3, 9));
    tj_put(r, "/context_tokens",
           json_pack("[s,s,s,s,s,s,s]", "x", "\x01", "y", "z", "w", "v", "\"quoted\""));
    tj_put(r, "/return",
           json_pack("[s,s,s,s,s,s,s,s,s,s]", "q", "k", "v", "q_raw", "k_raw", "scores", "patterns",
                     "head_outputs", "delta", "embeddings"));
    for (int base64 = 0; base64 < 2; base64++) {
        json_t *body = json_deep_copy(r);
        if (base64) tj_put(body, "/encoding", json_string("base64"));
        char *text = dump(body);
        json_decref(body);
        api_limits tiny = limits;
        tiny.max_response_bytes = 1;
        api_call *req = NULL;
        attn_error err;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &tiny, &req, &err), -1);
        size_t bound = 0, len = 0;
        ck_assert_int_eq(sscanf(strstr(err.message, "need up to "), "need up to %zu", &bound), 1);
        api_limits at_bound = limits;
        at_bound.max_response_bytes = bound;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &at_bound, &req, &err), 0);
        attn_workspace *ws = attn_workspace_create();
        ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
        ck_assert_int_eq(attn_compute(api_call_outputs(req), ws, api_call_inputs(req), &err), 0);
        attn_workspace_destroy(ws);
        char *out = api_call_encode(req, &len, NULL, &err);
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(len <= bound, "body %zu over its bound %zu", len, bound);
        /* the bound is within the widest numbers' slack of the body */
        ck_assert_msg(bound - len < 16 * 400, "bound %zu far from %zu", bound, len);
        free(out);
        api_call_free(req);
        api_limits under = limits;
        under.max_response_bytes = bound - 1;
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &under, &req, &err), -1);
        ck_assert_str_eq(err.path, "/return");
        free(text);
    }
    json_decref(r);
}
END_TEST

/* ---- model weights: what needs the weights is checked at bind --------------- */

START_TEST(test_model_variants_bind) {
    /* a cross-attention model: 2 heads of 2 over d_model 4, context width 3 */
    json_t *inline_body = request_kv(3, 4, 2, 2, 3);
    tj_put(inline_body, "/context", tj_matrix(2, 3, 9));
    api_call *owner = decode_ok(inline_body);
    const attn_weights *cross = api_call_inputs(owner)->weights;
    attn_error err;

    struct {
        const char *body;
        const char *path, *code;
    } refused[] = {
        {"{\"model\":\"c\",\"embeddings\":[[1,2,3,4]]}", "/context", "invalid_combination"},
        {"{\"model\":\"c\",\"embeddings\":[[1,2,3,4]],\"context\":[[1,2,3,4]]}", "/context",
         "dimension_mismatch"},
    };
    for (size_t i = 0; i < 2; i++) {
        api_call *req = NULL;
        ck_assert_int_eq(api_call_decode_json(API_CALL_ATTENTION, refused[i].body,
                                              strlen(refused[i].body), &limits, &req, &err),
                         0);
        ck_assert_int_eq(
            api_call_bind(req, &(api_model_ref){NULL, cross, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                          &limits, &err),
            -1);
        ck_assert_int_eq(err.status, 422);
        ck_assert_str_eq(err.code, refused[i].code);
        ck_assert_str_eq(err.path, refused[i].path);
        api_call_free(req);
    }
    /* with its context: the model's causal default becomes none */
    const char *ok = "{\"model\":\"c\",\"embeddings\":[[1,2,3,4]],\"context\":[[1,2,3],[0,1,0]],"
                     "\"context_tokens\":[\"p\",\"q\"]}";
    api_call *req = NULL;
    ck_assert_int_eq(api_call_decode_json(API_CALL_ATTENTION, ok, strlen(ok), &limits, &req, &err),
                     0);
    ck_assert_int_eq(api_call_bind(req,
                                   &(api_model_ref){NULL, cross, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     0);
    ck_assert_int_eq(api_call_inputs(req)->mask.kind, ATTN_MASK_NONE);
    ck_assert_uint_eq(api_call_inputs(req)->n_context, 2);
    json_t *resp = respond(req);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_context")), 2);
    check_shape3(json_object_get(resp, "patterns"), 2, 1, 2);
    json_decref(resp);
    api_call_free(req);

    /* a self-attention model with RoPE, ALiBi or a window refuses a context
     * at /context (the request cannot change the model); a plain one takes
     * a context as wide as d_model */
    attn_weights self = *cross;
    api_call *self_owner = decode_ok(base());
    self = *api_call_inputs(self_owner)->weights;
    const char *with_ctx = "{\"model\":\"s\",\"embeddings\":[[1,2,3,4]],\"context\":[[1,2,3,4]]}";
    const char *narrow = "{\"model\":\"s\",\"embeddings\":[[1,2,3,4]],\"context\":[[1,2,3]]}";
    float slopes[2] = {0.5f, 0.25f};
    for (int variant = 0; variant < 5; variant++) {
        attn_weights w = self;
        const char *body = variant == 4 ? narrow : with_ctx;
        if (variant == 1) w.rope = (attn_rope){.dims = 2, .theta = 10000};
        if (variant == 2) w.alibi = slopes;
        if (variant == 3) w.window = 4;
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, body, strlen(body), &limits, &req, &err), 0);
        int rc = api_call_bind(req, &(api_model_ref){NULL, &w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                               &limits, &err);
        if (variant == 0) {
            ck_assert_msg(rc == 0, "%s", err.message);
            ck_assert_ptr_null(api_call_inputs(req)->weights->w_kv);
        } else {
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(err.path, "/context");
            ck_assert_str_eq(err.code, variant == 4 ? "dimension_mismatch" : "invalid_combination");
        }
        api_call_free(req);
    }
    /* a model's scale is the default; the request's wins */
    attn_weights scaled = self;
    scaled.scale = 0.125f;
    const char *plain = "{\"model\":\"s\",\"embeddings\":[[1,2,3,4]]}";
    const char *asked = "{\"model\":\"s\",\"embeddings\":[[1,2,3,4]],\"scale\":2}";
    req = NULL;
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, plain, strlen(plain), &limits, &req, &err), 0);
    ck_assert_int_eq(api_call_bind(req,
                                   &(api_model_ref){NULL, &scaled, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     0);
    ck_assert(api_call_inputs(req)->scale == 0.125f);
    api_call_free(req);
    req = NULL;
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, asked, strlen(asked), &limits, &req, &err), 0);
    ck_assert_int_eq(api_call_bind(req,
                                   &(api_model_ref){NULL, &scaled, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     0);
    ck_assert(api_call_inputs(req)->scale == 2.0f);
    api_call_free(req);
    api_call_free(self_owner);
    api_call_free(owner);
}
END_TEST

/* The work and scratch limits hold for the bound input as the engine
 * counts it: attn_input_flops and attn_input_workspace_need, with the
 * context's rows and the grouped projection. */
START_TEST(test_limits_on_bound_input) {
    json_t *bodies[3] = {grouped(6, 4, 4, 2, 1, 4), base(), request_kv(3, 4, 2, 2, 3)};
    tj_put(bodies[1], "/weights/window", json_integer(1));
    tj_put(bodies[2], "/context", tj_matrix(40, 3, 9));
    for (size_t b = 0; b < 3; b++) {
        char *text = dump(bodies[b]);
        api_call *req = NULL;
        attn_error err;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err), 0);
        double flops = attn_input_flops(api_call_inputs(req));
        size_t scratch = attn_input_workspace_need(api_call_inputs(req));
        ck_assert(api_call_cost(req) == flops);
        api_call_free(req);
        api_limits at = limits, over = limits;
        at.max_flops = flops, over.max_flops = nextafter(flops, 0);
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &at, &req, &err), 0);
        api_call_free(req);
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &over, &req, &err), -1);
        ck_assert_str_eq(err.code, "limit_exceeded");
        at = over = limits;
        at.max_workspace_bytes = scratch, over.max_workspace_bytes = scratch - 1;
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &at, &req, &err), 0);
        api_call_free(req);
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &over, &req, &err), -1);
        ck_assert(strstr(err.message, "max_workspace_bytes") != NULL);
        free(text);
        json_decref(bodies[b]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("api_variants");
    TCase *decode = tcase_create("decode"), *numbers = tcase_create("numbers");
    tcase_add_test(decode, test_weight_variants_refused);
    tcase_add_test(decode, test_kv_heads_refused);
    tcase_add_test(decode, test_positions_and_context_refused);
    tcase_add_test(decode, test_refused_numbers_quoted_exactly);
    tcase_add_test(decode, test_grouped_packing);
    tcase_add_test(decode, test_cross_packing);
    tcase_add_test(decode, test_variants_bound);
    tcase_add_test(decode, test_llama3_equal_factors);
    tcase_add_test(decode, test_model_variants_bind);
    tcase_add_test(decode, test_limits_on_bound_input);
    tcase_add_test(numbers, test_scale_precedence);
    tcase_add_test(numbers, test_grouped_rope_numbers);
    tcase_add_test(numbers, test_alibi_window_softcap_numbers);
    tcase_add_test(numbers, test_cross_numbers);
    tcase_add_test(numbers, test_cross_response_bound);
    suite_add_tcase(s, decode);
    suite_add_tcase(s, numbers);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
