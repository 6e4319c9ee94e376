/*
 * test_batch.c — api/batch.h: POST /v1/attention/batch decoded, bound,
 * computed through attn_compute_batch and encoded, without a server.
 *
 * Random batches (lengths, masks, positions, labels, variants, contexts of
 * a cross-attention weight set, encodings, outputs, heads) answer, for
 * every sequence, byte for byte what the single request of that sequence
 * answers without the shared fields, and the shared fields as the single
 * answers do; one small batch is checked against a float64 reference
 * written here; every refusal with its status, code and path; the limits
 * over the batch.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "attention/attention.h"
#include "tests/batch_build.h"
#include "tests/json_build.h"
#include "tests/json_edit.h"

static const api_limits limits = {.max_tokens = 256,
                                  .max_heads = 16,
                                  .max_d_model = 64,
                                  .max_flops = 1e12,
                                  .max_response_bytes = (size_t)1 << 28,
                                  .max_workspace_bytes = (size_t)1 << 28,
                                  .max_json_depth = 32,
                                  .max_string_bytes = 1 << 16,
                                  .max_batch = 16};

static char *dump(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* dump, freeing the tree. */
static char *dump_take(json_t *j) {
    char *s = dump(j);
    json_decref(j);
    return s;
}

/* The single answer of `body`, computed on its own (malloc'd text). */
static char *single_answer(const json_t *body, size_t *len) {
    char *text = dump(body);
    api_call *req = NULL;
    attn_error err;
    ck_assert_msg(
        api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err) == 0,
        "single decode: %s at %s: %s (%.400s)", err.code, err.path, err.message, text);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_msg(attn_compute(api_call_outputs(req), ws, api_call_inputs(req), &err) == 0, "%s",
                  err.message);
    char *answer = api_call_encode(req, len, NULL, &err);
    ck_assert_msg(answer != NULL, "%s", err.message);
    attn_workspace_destroy(ws);
    api_call_free(req);
    free(text);
    return answer;
}

/* The batch's answer; `outputs` the block its outputs come from (or NULL). */
static char *batch_answer(const char *text, attn_workspace *outputs, size_t *len) {
    api_call *b = NULL;
    attn_error err;
    ck_assert_msg(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err) == 0,
                  "batch decode: %s at %s: %s (%.400s)", err.code, err.path, err.message, text);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(api_call_alloc_outputs(b, outputs, &err), 0);
    size_t failed = 99;
    ck_assert_msg(attn_compute_batch(api_call_outputs(b), ws, api_call_inputs(b), api_call_count(b),
                                     NULL, &err, &failed) == 0,
                  "%s", err.message);
    char *answer = api_call_encode(b, len, NULL, &err);
    ck_assert_msg(answer != NULL, "%s", err.message);
    attn_workspace_destroy(ws);
    api_call_free(b);
    return answer;
}

/* Every sequence of the batch answers as its single request. */
static void check_against_singles(const json_t *body, const char *answer, size_t len) {
    static tb_part parts[64], seqs[64], single_parts[64];
    static const char *const shared[] = {"model",  "d_model",  "n_heads", "n_kv_heads",
                                         "d_head", "n_layers", "scale",   "heads"};
    long n = tb_parts(answer, len, parts, 64);
    ck_assert_int_eq(n, 9);
    const tb_part *sp = tb_find(parts, n, "sequences");
    ck_assert_ptr_nonnull(sp);
    size_t count = json_array_size(json_object_get(body, "sequences"));
    ck_assert_int_eq(tb_parts(sp->value, sp->value_len, seqs, 64), (long)count);
    for (size_t i = 0; i < count; i++) {
        json_t *single = tb_single(body, i);
        size_t slen;
        char *s = single_answer(single, &slen);
        char *want = tb_strip_shared(s, slen);
        ck_assert_msg(strlen(want) == seqs[i].value_len &&
                          !memcmp(want, seqs[i].value, seqs[i].value_len),
                      "sequence %zu:\n batch  %.*s\n single %s", i, (int)seqs[i].value_len,
                      seqs[i].value, want);
        /* the shared fields, in order, as the single answer has them */
        long sn = tb_parts(s, slen, single_parts, 64);
        for (size_t k = 0; k < 8; k++) {
            const tb_part *a = tb_find(parts, n, shared[k]),
                          *b = tb_find(single_parts, sn, shared[k]);
            ck_assert_msg(a && b && a->value_len == b->value_len &&
                              !memcmp(a->value, b->value, a->value_len),
                          "shared %s differs", shared[k]);
            ck_assert_ptr_eq(a, &parts[k]);
        }
        free(want);
        free(s);
        json_decref(single);
    }
}

static void random_rounds(tb_kind kind, unsigned seed, int rounds) {
    attn_workspace *outputs = attn_workspace_create();
    for (int r = 0; r < rounds; r++) {
        json_t *body = tb_random_batch(&seed, kind, NULL, 0, 6, 7);
        char *text = dump(body);
        size_t len;
        char *answer = batch_answer(text, r % 2 ? outputs : NULL, &len);
        check_against_singles(body, answer, len);
        free(answer);
        free(text);
        json_decref(body);
    }
    attn_workspace_destroy(outputs);
}

START_TEST(test_random_inline_batches_answer_as_singles) {
    random_rounds(TB_INLINE, 12345u, 60);
}
END_TEST

START_TEST(test_random_cross_batches_answer_as_singles) {
    random_rounds(TB_CROSS, 777u, 40);
}
END_TEST

/* ---- a float64 reference ------------------------------------------------------ */

/* One head, d_model = d_head = 2, no w_o (the identity); E' = E + P·V. */
static void reference(const double *e, size_t n, const double wq[4], const double wk[4],
                      const double wv[4], const unsigned char *allowed, double *out) {
    double q[16][2], k[16][2], v[16][2];
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < 2; c++) {
            q[t][c] = e[t * 2] * wq[c] + e[t * 2 + 1] * wq[2 + c];
            k[t][c] = e[t * 2] * wk[c] + e[t * 2 + 1] * wk[2 + c];
            v[t][c] = e[t * 2] * wv[c] + e[t * 2 + 1] * wv[2 + c];
        }
    for (size_t a = 0; a < n; a++) {
        double s[16], most = -INFINITY, sum = 0;
        for (size_t b = 0; b < n; b++) {
            s[b] = allowed[a * n + b] ? (q[a][0] * k[b][0] + q[a][1] * k[b][1]) / sqrt(2.0)
                                      : -INFINITY;
            if (s[b] > most) most = s[b];
        }
        for (size_t b = 0; b < n; b++)
            sum += s[b] == -INFINITY ? 0 : exp(s[b] - most);
        for (size_t c = 0; c < 2; c++) {
            double z = 0;
            for (size_t b = 0; b < n; b++)
                if (s[b] != -INFINITY) z += exp(s[b] - most) / sum * v[b][c];
            out[a * 2 + c] = e[a * 2 + c] + z;
        }
    }
}

START_TEST(test_batch_against_float64) {
    const double wq[4] = {0.5, -0.25, 1, 0.75}, wk[4] = {-0.5, 1, 0.25, 0.5},
                 wv[4] = {1, 0.5, -1, 0.25};
    const double e0[] = {1, 2, -1, 0.5, 0.25, -2}, e1[] = {0.5, 0.5, 3, -1};
    const unsigned char causal3[] = {1, 0, 0, 1, 1, 0, 1, 1, 1}, custom2[] = {0, 1, 1, 1};
    const char *text =
        "{\"weights\":{\"heads\":[{\"w_q\":[[0.5,-0.25],[1,0.75]],\"w_k\":[[-0.5,1],[0.25,0.5]],"
        "\"w_v\":[[1,0.5],[-1,0.25]]}]},\"return\":[\"embeddings\"],"
        "\"sequences\":[{\"embeddings\":[[1,2],[-1,0.5],[0.25,-2]]},"
        "{\"embeddings\":[[0.5,0.5],[3,-1]],\"mask\":[[0,1],[1,1]]}]}";
    size_t len;
    char *answer = batch_answer(text, NULL, &len);
    json_t *a = json_loadb(answer, len, 0, NULL);
    ck_assert_ptr_nonnull(a);
    double want[6];
    for (size_t s = 0; s < 2; s++) {
        size_t n = s ? 2 : 3;
        reference(s ? e1 : e0, n, wq, wk, wv, s ? custom2 : causal3, want);
        json_t *got =
            json_object_get(json_array_get(json_object_get(a, "sequences"), s), "embeddings");
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < 2; c++) {
                double g = json_number_value(json_array_get(json_array_get(got, t), c));
                ck_assert_msg(fabs(g - want[t * 2 + c]) < 1e-5, "seq %zu [%zu][%zu]: %g vs %g", s,
                              t, c, g, want[t * 2 + c]);
            }
    }
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(a, "sequences"), 0), "mask")),
                     "causal");
    json_decref(a);
    free(answer);
}
END_TEST

/* ---- refusals ----------------------------------------------------------------- */

static void expect_error_text(const char *text, const api_limits *lim, int status, const char *code,
                              const char *path) {
    api_call *b = (api_call *)1;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(API_CALL_BATCH, text, strlen(text), lim, &b, &err);
    ck_assert_msg(rc == -1, "expected %s at %s, but decode succeeded: %.300s", code, path, text);
    ck_assert_ptr_null(b);
    ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                      strcmp(err.path, path) == 0,
                  "expected %d %s at \"%s\", got %d %s at \"%s\" (%s) for %.300s", status, code,
                  path, err.status, err.code, err.path, err.message, text);
}

/* Takes the tree. */
static void expect_error(json_t *body, const api_limits *lim, int status, const char *code,
                         const char *path) {
    char *text = dump(body);
    expect_error_text(text, lim, status, code, path);
    free(text);
    json_decref(body);
}

/* 5 sequences of 2 or 3 tokens, d_model 4, two heads of width 2, inline. */
static json_t *base(void) {
    json_t *heads = json_array(), *seqs = json_array();
    for (size_t i = 0; i < 2; i++)
        json_array_append_new(heads, json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(4, 2, 10 * i),
                                               "w_k", tj_matrix(4, 2, 10 * i + 3), "w_v",
                                               tj_matrix(4, 2, 10 * i + 5)));
    for (size_t i = 0; i < 5; i++)
        json_array_append_new(seqs, json_pack("{s:o}", "embeddings", tj_matrix(2 + i % 2, 4, i)));
    return json_pack("{s:{s:o}, s:o}", "weights", "heads", heads, "sequences", seqs);
}

static json_t *with(json_t *body, const char *path, const char *value) {
    if (!value) {
        tj_del(body, path);
        return body;
    }
    json_error_t jerr;
    json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON %s", value);
    tj_put(body, path, v);
    return body;
}

START_TEST(test_refusals) {
    static const struct {
        const char *path, *value, *path2, *value2;
        int status;
        const char *code, *where;
    } cases[] = {
        {"/sequences", NULL, NULL, NULL, 400, "missing_field", "/sequences"},
        {"/sequences", "{}", NULL, NULL, 400, "wrong_type", "/sequences"},
        {"/sequences", "\"s\"", NULL, NULL, 400, "wrong_type", "/sequences"},
        {"/sequences/1", "[]", NULL, NULL, 400, "wrong_type", "/sequences/1"},
        {"/sequences/4", "7", NULL, NULL, 400, "wrong_type", "/sequences/4"},
        {"/sequences", "[]", NULL, NULL, 422, "dimension_mismatch", "/sequences"},
        {"/sequences/3/embeddings", NULL, NULL, NULL, 400, "missing_field",
         "/sequences/3/embeddings"},
        {"/sequences/3/embeddings", NULL, "/sequences/3/tokens", "[\"a\",\"b\"]", 400,
         "missing_field", "/sequences/3/embeddings"},
        {"/sequences/2/embeddings", "[[1,2,3,4],[1,2,3]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/2/embeddings/1"},
        {"/sequences/3/embeddings", "[[1,2,3,4],[1,2,\"x\",4]]", NULL, NULL, 400, "wrong_type",
         "/sequences/3/embeddings/1/2"},
        {"/sequences/3/embeddings", "[[1,2,3,4],[1,2,1e39,4]]", NULL, NULL, 422,
         "non_finite_number", "/sequences/3/embeddings/1/2"},
        {"/sequences/3/embeddings", "[[1,2,3],[1,2,3]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/3/embeddings"},
        {"/sequences/0/embeddings", "[[1,2,3],[1,2,3]]", NULL, NULL, 422, "dimension_mismatch",
         "/weights/heads/0/w_q"},
        {"/sequences/0/mask", "[[1,0],[1]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/0/mask/1"},
        {"/sequences/1/mask", "[[1,0,1],[1,1,1],[1,1,1],[0,0,0]]", NULL, NULL, 422,
         "dimension_mismatch", "/sequences/1/mask"},
        {"/sequences/2/mask", "[[1,0],[1,2]]", NULL, NULL, 400, "wrong_type",
         "/sequences/2/mask/1/1"},
        {"/sequences/2/mask", "[[1,0,1],[1,1,1]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/2/mask/0"},
        {"/sequences/3/mask", "\"diagonal\"", NULL, NULL, 400, "invalid_value",
         "/sequences/3/mask"},
        {"/sequences/2/mask", "5", NULL, NULL, 400, "wrong_type", "/sequences/2/mask"},
        /* a shared mask that fits sequence 0 but not sequence 1 (3 tokens): the error
         * points into the sequence that has no mask of its own */
        {"/mask", "[[1,1],[1,1]]", NULL, NULL, 422, "dimension_mismatch", "/sequences/1"},
        {"/mask", "[[1,1,1],[1,1,1],[1,1,1]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/0"},
        {"/mask", "[[1,1],[1,1]]", "/sequences/1/mask", "\"none\"", 422, "dimension_mismatch",
         "/sequences/3"},
        {"/mask", "5", NULL, NULL, 400, "wrong_type", "/mask"},
        {"/mask", "\"upper\"", NULL, NULL, 400, "invalid_value", "/mask"},
        {"/sequences/3/tokens", "[\"a\"]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/3/tokens"},
        {"/sequences/3/tokens", "[\"a\",3]", NULL, NULL, 400, "wrong_type",
         "/sequences/3/tokens/1"},
        {"/sequences/4/positions", "[0,-1]", NULL, NULL, 422, "out_of_range",
         "/sequences/4/positions/1"},
        {"/sequences/4/positions", "[0]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/4/positions"},
        {"/sequences/2/context_tokens", "[\"a\"]", NULL, NULL, 422, "invalid_combination",
         "/sequences/2/context_tokens"},
        {"/sequences/2/context", "[[1,2,3]]", NULL, NULL, 422, "dimension_mismatch",
         "/sequences/2/context"},
        {"/sequences/2/context", "[[1,2,3,4]]", "/sequences/2/mask", "\"causal\"", 422,
         "invalid_combination", "/sequences/2/mask"},
        {"/sequences/3/embedding", "[[1]]", NULL, NULL, 400, "unknown_field",
         "/sequences/3/embedding"},
        {"/sequences/3/model", "\"m\"", NULL, NULL, 400, "unknown_field", "/sequences/3/model"},
        {"/embeddings", "[[1,2,3,4]]", NULL, NULL, 400, "unknown_field", "/embeddings"},
        {"/model", "\"demo-4d\"", NULL, NULL, 400, "invalid_value", ""},
        {"/weights", NULL, NULL, NULL, 400, "missing_field", ""},
        {"/weights", "[]", NULL, NULL, 400, "wrong_type", "/weights"},
        {"/select_heads", "[2]", NULL, NULL, 422, "out_of_range", "/select_heads/0"},
        {"/select_heads", "[0.5]", NULL, NULL, 400, "wrong_type", "/select_heads/0"},
        {"/return", "[\"p\"]", NULL, NULL, 400, "invalid_value", "/return/0"},
        {"/scale", "0", NULL, NULL, 422, "out_of_range", "/scale"},
        {"/encoding", "\"hex\"", NULL, NULL, 400, "invalid_value", "/encoding"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *b = with(base(), cases[i].path, cases[i].value);
        if (cases[i].path2) b = with(b, cases[i].path2, cases[i].value2);
        expect_error(b, &limits, cases[i].status, cases[i].code, cases[i].where);
    }
    expect_error_text("{\"weights\":{}, \"sequences\":[", &limits, 400, "invalid_json", "");
    expect_error_text("[1]", &limits, 400, "invalid_json", "");
    expect_error_text("{\"model\":\"m\",\"sequences\":[{\"embeddings\":[[1,1e39]]}]}", &limits, 422,
                      "non_finite_number", "/sequences/0/embeddings/0/1");
    /* duplicate keys in a sequence are the body's, as anywhere */
    expect_error_text(
        "{\"model\":\"m\",\"sequences\":[{\"embeddings\":[[1]],\"embeddings\":[[1]]}]}", &limits,
        400, "invalid_json", "");
}
END_TEST

/* Parts of docs/API.md not served yet ("Layers", "Explaining attention"):
 * each is refused today with a 400 at its own place. */
START_TEST(test_not_served_yet) {
    static const struct {
        const char *path, *value, *code, *where;
    } cases[] = {
        {"/terms_for", "{\"head\":1,\"query\":1,\"key\":0}", "unknown_field", "/terms_for"},
        {"/return", "[\"head_deltas\"]", "invalid_value", "/return/0"},
        {"/return", "[\"value_norms\"]", "invalid_value", "/return/0"},
        {"/return", "[\"entropy\"]", "invalid_value", "/return/0"},
        {"/return", "[\"score_terms\"]", "invalid_value", "/return/0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(with(base(), cases[i].path, cases[i].value), &limits, 400, cases[i].code,
                     cases[i].where);
}
END_TEST

/* Sinks and a chunk in a batch's weight set: served, and refused as in
 * /v1/attention (not h long, a chunk of 0, a chunk beside a context). */
START_TEST(test_sinks_chunk) {
    json_t *ok = with(with(base(), "/weights/sinks", "[0.5,-1]"), "/weights/chunk", "2");
    api_call *req = NULL;
    attn_error err;
    char *text = json_dumps(ok, JSON_COMPACT);
    ck_assert_msg(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &req, &err) ==
                      0,
                  "%s at %s", err.message, err.path);
    ck_assert_uint_eq(api_call_inputs(req)->weights->chunk, 2);
    ck_assert(api_call_inputs(req)->weights->sinks[1] == -1.0f);
    api_call_free(req);
    free(text);
    json_decref(ok);
    expect_error(with(base(), "/weights/sinks", "[0.5]"), &limits, 422, "dimension_mismatch",
                 "/weights/sinks");
    expect_error(with(base(), "/weights/chunk", "0"), &limits, 422, "out_of_range",
                 "/weights/chunk");
    expect_error(with(with(base(), "/weights/chunk", "2"), "/sequences/2/context", "[[1,2,3,4]]"),
                 &limits, 422, "invalid_combination", "/sequences/2/context");
}
END_TEST

/* base() as a stack of two layers, its weight set twice (new reference). */
static json_t *stacked(void) {
    json_t *b = base(), *w = json_incref(json_object_get(b, "weights"));
    json_object_set_new(b, "weights", json_pack("{s:[o,o]}", "layers", json_deep_copy(w), w));
    return b;
}

/* A batch's stack, refused at the field that is wrong: the layers listed,
 * the hidden states (in every sequence or none, one per layer, each n ×
 * d_model), a layer that differs, a rollout with a context. */
START_TEST(test_stack_refusals) {
    static const char h3[] = "[[[1,2,3,4],[1,2,3,4],[1,2,3,4]],[[1,2,3,4],[1,2,3,4],[1,2,3,4]]]";
    static const char h2[] = "[[[1,2,3,4],[1,2,3,4]],[[1,2,3,4],[1,2,3,4]]]";
    static const struct {
        const char *path, *value, *path2, *value2;
        int status;
        const char *code, *where;
    } cases[] = {
        {"/layers", "[2]", NULL, NULL, 422, "out_of_range", "/layers/0"},
        {"/layers", "[1,1]", NULL, NULL, 422, "out_of_range", "/layers/1"},
        {"/layers", "[]", NULL, NULL, 422, "out_of_range", "/layers"},
        {"/layers", "[0.5]", NULL, NULL, 400, "wrong_type", "/layers/0"},
        {"/layers", "{}", NULL, NULL, 400, "wrong_type", "/layers"},
        {"/sequences/1/hidden_states", h3, NULL, NULL, 422, "invalid_combination",
         "/sequences/0/hidden_states"},
        {"/sequences/1/hidden_states", "[[[1,2,3,4],[1,2,3,4],[1,2,3,4]]]", NULL, NULL, 422,
         "dimension_mismatch", "/sequences/1/hidden_states"},
        {"/sequences/1/hidden_states", "{}", NULL, NULL, 400, "wrong_type",
         "/sequences/1/hidden_states"},
        {"/sequences/0/hidden_states", h2, "/sequences/1/hidden_states", h2, 422,
         "dimension_mismatch", "/sequences/1/hidden_states/0"},
        {"/weights/layers/1/heads/1", NULL, NULL, NULL, 422, "dimension_mismatch",
         "/weights/layers/1"},
        {"/weights/layers/1/heads/0/w_q", "[[1,2],[3,4]]", NULL, NULL, 422, "dimension_mismatch",
         "/weights/layers/1/heads/0/w_q"},
        {"/weights/layers/1/window", "0", NULL, NULL, 422, "out_of_range",
         "/weights/layers/1/window"},
        {"/weights/layers", "[]", NULL, NULL, 422, "dimension_mismatch", "/weights/layers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *b = with(stacked(), cases[i].path, cases[i].value);
        if (cases[i].path2) b = with(b, cases[i].path2, cases[i].value2);
        expect_error(b, &limits, cases[i].status, cases[i].code, cases[i].where);
    }
    /* hidden states in all sequences but one */
    json_t *b = stacked();
    for (size_t i = 1; i < 5; i++) {
        char p[64];
        snprintf(p, sizeof p, "/sequences/%zu/hidden_states", i);
        b = with(b, p, i % 2 ? h3 : h2);
    }
    expect_error(b, &limits, 422, "invalid_combination", "/sequences/0/hidden_states");
    /* a rollout of sequences with a context */
    b = with(stacked(), "/return", "[\"embeddings\",\"rollout\"]");
    b = with(b, "/sequences/3/context", "[[1,2,3,4]]");
    b = with(b, "/mask", "\"none\"");
    expect_error(b, &limits, 422, "invalid_value", "/return/1");
}
END_TEST

/* A batch's return may name every output once, all eleven of them. */
START_TEST(test_stack_return_every_output) {
    json_t *b = with(stacked(), "/return",
                     "[\"q\",\"k\",\"v\",\"q_raw\",\"k_raw\",\"scores\",\"patterns\","
                     "\"head_outputs\",\"delta\",\"embeddings\",\"rollout\"]");
    char *text = dump(b);
    size_t len;
    char *answer = batch_answer(text, NULL, &len);
    json_t *a = json_loadb(answer, len, 0, NULL);
    ck_assert_ptr_nonnull(a);
    const json_t *s0 = json_array_get(json_object_get(a, "sequences"), 0);
    ck_assert_ptr_nonnull(json_object_get(s0, "rollout"));
    ck_assert_uint_eq(json_array_size(json_object_get(s0, "layers")), 2);
    json_decref(a);
    free(answer);
    free(text);
    json_decref(b);
}
END_TEST

/* Stacks in a batch: random batches' inline weights as three layers (the
 * second at another scale, the third with its heads in reverse), with the
 * layers listed, a rollout, hidden states in every sequence; every
 * sequence answers as its single request, byte for byte. */
START_TEST(test_stack_batches_answer_as_singles) {
    unsigned seed = 4321;
    attn_workspace *outputs = attn_workspace_create();
    for (int r = 0; r < 12; r++) {
        json_t *body = tb_random_batch(&seed, TB_INLINE, NULL, 0, 4, 7);
        json_t *w = json_object_get(body, "weights");
        json_t *w1 = json_deep_copy(w), *w2 = json_deep_copy(w);
        json_object_set_new(w1, "scale", json_real(0.25 + 0.125 * (r % 4)));
        json_t *heads = json_object_get(w2, "heads"), *rev = json_array();
        for (size_t i = json_array_size(heads); i-- > 0;)
            json_array_append(rev, json_array_get(heads, i));
        if (!json_object_get(w2, "kv_heads"))
            json_object_set_new(w2, "heads", rev);
        else
            json_decref(rev);
        json_object_set_new(body, "weights", json_pack("{s:[O,o,o]}", "layers", w, w1, w2));
        json_object_set_new(
            body, "return",
            r % 2 ? json_pack("[s,s,s,s]", "patterns", "delta", "rollout", "embeddings")
                  : json_pack("[s,s]", "scores", "embeddings"));
        if (r % 3 == 1) json_object_set_new(body, "layers", json_pack("[i,i]", 2, 0));
        if (r % 4 == 2) { /* hidden states: three n × d_model matrices a sequence */
            json_t *seqs = json_object_get(body, "sequences");
            for (size_t i = 0; i < json_array_size(seqs); i++) {
                json_t *s = json_array_get(seqs, i), *e = json_object_get(s, "embeddings");
                json_t *shape = json_object_get(e, "shape"); /* a tensor object's */
                size_t n = shape ? (size_t)json_integer_value(json_array_get(shape, 0))
                                 : json_array_size(e);
                size_t dm = shape ? (size_t)json_integer_value(json_array_get(shape, 1))
                                  : json_array_size(json_array_get(e, 0));
                json_t *hidden = json_array();
                for (size_t l = 0; l < 3; l++)
                    json_array_append_new(hidden, tj_matrix(n, dm, 100 * r + 10 * i + l));
                json_object_set_new(s, "hidden_states", hidden);
            }
        }
        char *text = dump(body);
        size_t len;
        char *answer = batch_answer(text, r % 2 ? outputs : NULL, &len);
        json_t *a = json_loadb(answer, len, 0, NULL);
        ck_assert_int_eq(json_integer_value(json_object_get(a, "n_layers")), 3);
        const json_t *s0 = json_array_get(json_object_get(a, "sequences"), 0);
        ck_assert_uint_eq(json_array_size(json_object_get(s0, "layers")), r % 3 == 1 ? 2 : 3);
        ck_assert(!(r % 2) == !json_object_get(s0, "rollout"));
        json_decref(a);
        check_against_singles(body, answer, len);
        free(answer);
        free(text);
        json_decref(body);
    }
    attn_workspace_destroy(outputs);
}
END_TEST

/* A named model: decode leaves the binding to the caller. */
START_TEST(test_named_model_binds) {
    const char *text = "{\"model\":\"x\",\"sequences\":[{\"embeddings\":[[1,0]]},"
                       "{\"embeddings\":[[1,0,0]]}]}";
    api_call *b = NULL;
    attn_error err;
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err),
                     0);
    ck_assert_str_eq(api_call_model(b, NULL), "x");
    size_t name_len = 0;
    ck_assert_ptr_nonnull(api_call_model(b, &name_len));
    ck_assert_uint_eq(name_len, 1);
    float w_qkv[2 * 6] = {1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1};
    attn_weights w = {.d_model = 2, .n_heads = 1, .d_head = 2, .w_qkv = w_qkv};
    ck_assert_int_eq(api_call_bind(b, &(api_model_ref){NULL, &w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     -1);
    ck_assert_str_eq(err.code, "dimension_mismatch");
    ck_assert_str_eq(err.path, "/sequences/1/embeddings");
    api_call_free(b);
}
END_TEST

/* ---- limits ------------------------------------------------------------------- */

START_TEST(test_limits) {
    api_limits lim = limits;
    /* max_batch: 5 is fine at 5, too many at 4, on the text and after it */
    lim.max_batch = 5;
    char *text = dump_take(base());
    api_call *b = NULL;
    attn_error err;
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &lim, &b, &err), 0);
    api_call_free(b);
    free(text);
    lim.max_batch = 4;
    expect_error(base(), &lim, 422, "limit_exceeded", "/sequences");
    /* max_tokens: 2+3+2+3+2 = 12 tokens in all; each sequence at most 3 */
    lim = limits;
    lim.max_tokens = 12;
    text = dump_take(base());
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &lim, &b, &err), 0);
    api_call_free(b);
    free(text);
    lim.max_tokens = 11;
    expect_error(base(), &lim, 422, "limit_exceeded", "/sequences");
    lim.max_tokens = 3;
    expect_error(with(base(), "/sequences",
                      "[{\"embeddings\":[[1,2,3,4]]},{\"embeddings\":[[1,2,3,4],[1,2,3,4],"
                      "[1,2,3,4],[0,0,0,0]]}]"),
                 &lim, 422, "limit_exceeded", "/sequences/1/embeddings");
    /* a sequence's labels longer than max_tokens, refused on the text */
    lim.max_tokens = 3;
    expect_error(with(with(base(), "/sequences/1/tokens", "[\"a\",\"b\",\"c\",\"d\"]"),
                      "/sequences/4", NULL),
                 &lim, 422, "limit_exceeded", "/sequences/1/tokens");
    /* work: the sum over the sequences */
    text = dump_take(base());
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err),
                     0);
    double total = api_call_cost(b), sum = 0;
    for (size_t i = 0; i < api_call_count(b); i++)
        sum += attn_input_flops(&api_call_inputs(b)[i]);
    ck_assert(total == sum && total > 0);
    api_call_free(b);
    lim = limits;
    lim.max_flops = total;
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &lim, &b, &err), 0);
    api_call_free(b);
    lim.max_flops = total - 1;
    expect_error_text(text, &lim, 422, "limit_exceeded", "");
    /* a response limit over the whole batch: its bound at and one below */
    lim = limits;
    size_t len;
    char *answer = batch_answer(text, NULL, &len);
    size_t lo = 0, hi = (size_t)1 << 28;
    while (lo + 1 < hi) { /* the least limit that passes */
        size_t mid = lo + (hi - lo) / 2;
        lim.max_response_bytes = mid;
        int ok = api_call_decode_json(API_CALL_BATCH, text, strlen(text), &lim, &b, &err) == 0;
        if (ok) api_call_free(b);
        if (ok)
            hi = mid;
        else
            lo = mid;
    }
    ck_assert_uint_ge(hi, len);
    lim.max_response_bytes = len - 1;
    expect_error_text(text, &lim, 422, "limit_exceeded", "/return");
    free(answer);
    /* scratch: the batch's need */
    lim = limits;
    lim.max_workspace_bytes = 1;
    expect_error_text(text, &lim, 422, "limit_exceeded", "");
    free(text);
    /* the scan's two limits, at the value that breaks them, as /v1 names them */
    lim = limits;
    lim.max_json_depth = 8;
    lim.max_string_bytes = 64;
    expect_error_text("{\"model\":\"m\",\"sequences\":[{\"embeddings\":[[1]],\"tokens\":"
                      "[[[[[[[[1]]]]]]]]}]}",
                      &lim, 422, "limit_exceeded", "/sequences/0/tokens/0/0/0/0/0");
    text = "{\"model\":\"m\",\"sequences\":[{\"embeddings\":[[1]],\"tokens\":[\""
           "0123456789012345678901234567890123456789012345678901234567890123456789\"]}]}";
    expect_error_text(text, &lim, 422, "limit_exceeded", "/sequences/0/tokens/0");
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &lim, &b, &err), -1);
    ck_assert_msg(strstr(err.message, "max_string_bytes = 64"), "%s", err.message);
}
END_TEST

START_TEST(test_non_finite_names_sequence) {
    /* scores of 1e20 · 1e20 overflow in sequence 1 only */
    const char *text = "{\"weights\":{\"heads\":[{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}]},"
                       "\"return\":[\"scores\"],\"sequences\":[{\"embeddings\":[[1]]},"
                       "{\"embeddings\":[[1e20]]}]}";
    api_call *b = NULL;
    attn_error err;
    ck_assert_int_eq(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err),
                     0);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(api_call_alloc_outputs(b, NULL, &err), 0);
    size_t failed = 0, len;
    int rc = attn_compute_batch(api_call_outputs(b), ws, api_call_inputs(b), api_call_count(b),
                                NULL, &err, &failed);
    if (rc != 0) {
        ck_assert_uint_eq(failed, 1);
        api_call_name_failure(b, failed, &err);
    } else {
        ck_assert_ptr_null(api_call_encode(b, &len, NULL, &err));
    }
    ck_assert_int_eq(err.status ? err.status : 422, 422);
    ck_assert_str_eq(err.path, "/sequences/1");
    ck_assert_msg(strstr(err.message, "sequences[1]") != NULL, "%s", err.message);
    attn_workspace_destroy(ws);
    api_call_free(b);
}
END_TEST

/* Each sequence's embeddings, context and mask, and the shared mask, are
 * lifted from the text: batches of many more numbers than the scan lets
 * jansson see as values (values_max: 2,560 for these limits) are accepted. */
START_TEST(test_sequences_lifted) {
    /* two heads of 16 over d_model 32, no w_o */
    json_t *heads = json_array();
    for (size_t i = 0; i < 2; i++)
        json_array_append_new(heads,
                              json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(32, 16, i), "w_k",
                                        tj_matrix(32, 16, i + 1), "w_v", tj_matrix(32, 16, i + 2)));
    json_t *seqs = json_array();
    for (size_t i = 0; i < 10; i++) { /* 10 × 25 × 32 numbers, 10 × 25 × 25 mask cells */
        json_t *mask = json_array();
        for (size_t q = 0; q < 25; q++) {
            json_t *row = json_array();
            for (size_t k = 0; k < 25; k++)
                json_array_append_new(row, json_integer(k <= q));
            json_array_append_new(mask, row);
        }
        json_array_append_new(
            seqs, json_pack("{s:o, s:o}", "embeddings", tj_matrix(25, 32, i), "mask", mask));
    }
    json_t *body = json_pack("{s:{s:O}, s:o}", "weights", "heads", heads, "sequences", seqs);
    char *text = dump_take(body);
    api_call *b = NULL;
    attn_error err;
    ck_assert_msg(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err) == 0,
                  "%s at %s: %s", err.code, err.path, err.message);
    ck_assert_uint_eq(api_call_count(b), 10);
    ck_assert_int_eq(api_call_inputs(b)[9].mask.kind, ATTN_MASK_CUSTOM);
    api_call_free(b);
    free(text);
    /* contexts of 200 rows, and a shared mask of 20 × 200 */
    seqs = json_array();
    for (size_t i = 0; i < 4; i++)
        json_array_append_new(seqs, json_pack("{s:o, s:o}", "embeddings", tj_matrix(20, 32, i),
                                              "context", tj_matrix(200, 32, i + 9)));
    json_t *mask = json_array();
    for (size_t q = 0; q < 20; q++) {
        json_t *row = json_array();
        for (size_t k = 0; k < 200; k++)
            json_array_append_new(row, json_boolean(k % 3));
        json_array_append_new(mask, row);
    }
    body = json_pack("{s:{s:o}, s:o, s:o}", "weights", "heads", heads, "sequences", seqs, "mask",
                     mask);
    text = dump_take(body);
    ck_assert_msg(api_call_decode_json(API_CALL_BATCH, text, strlen(text), &limits, &b, &err) == 0,
                  "%s at %s: %s", err.code, err.path, err.message);
    ck_assert_uint_eq(api_call_inputs(b)[3].n_context, 200);
    ck_assert(!api_call_inputs(b)[3].mask.allowed[0] && api_call_inputs(b)[3].mask.allowed[1]);
    api_call_free(b);
    free(text);
}
END_TEST

START_TEST(test_array_rank) {
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/0/embeddings"), 2);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/17/context"), 2);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/3/mask"), 3);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/mask"), 3);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/weights/heads/1/w_q"), 2);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/weights/b_o"), 1);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/embeddings"), 0);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/x/embeddings"), 0);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/1/positions"), 0);
    ck_assert_int_eq(api_call_array_rank(API_CALL_BATCH, "/sequences/1/embeddings/0"), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("batch");
    TCase *decode = tcase_create("decode"), *numbers = tcase_create("numbers");
    tcase_add_test(decode, test_refusals);
    tcase_add_test(decode, test_not_served_yet);
    tcase_add_test(decode, test_sinks_chunk);
    tcase_add_test(decode, test_stack_refusals);
    tcase_add_test(numbers, test_stack_return_every_output);
    tcase_add_test(numbers, test_stack_batches_answer_as_singles);
    tcase_add_test(decode, test_named_model_binds);
    tcase_add_test(decode, test_limits);
    tcase_add_test(decode, test_array_rank);
    tcase_add_test(decode, test_sequences_lifted);
    tcase_add_test(numbers, test_random_inline_batches_answer_as_singles);
    tcase_add_test(numbers, test_random_cross_batches_answer_as_singles);
    tcase_add_test(numbers, test_batch_against_float64);
    tcase_add_test(numbers, test_non_finite_names_sequence);
    tcase_set_timeout(numbers, 60);
    suite_add_tcase(s, decode);
    suite_add_tcase(s, numbers);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
