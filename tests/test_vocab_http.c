/*
 * test_vocab_http.c — models with a vocabulary over real HTTP: tokens sent
 * without embeddings, in POST /v1/attention and in a batch's sequences,
 * and a model's vocabulary in GET /v1/models (docs/API.md, "Vocabularies").
 *
 * Each test writes its own models directory under /tmp with
 * store_file_write: "vocab-4d" (2 heads of 2, with b_qkv and w_o, a
 * vocabulary of 6 tokens, a position table of 5 rows and dimension names)
 * and "plain-4d" (the same weights, no vocabulary), starts the built
 * server on it ($ATTN_SERVER_BIN) on a loopback port and stops it with
 * hs_finish, which fails on a non-zero exit or a sanitizer report.
 *
 * Every answer to tokens is checked twice: equal, byte for byte once
 * parsed, to the answer to the same request with the embeddings the test
 * builds itself (token row + position row, in float64 rounded to float32:
 * one float32 addition), and its patterns and embeddings within 1e-5 of a
 * float64 attention computed here from the weights written.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/safetensors.h"
#include "tests/fixtures.h"
#include "tests/http_harness.h"

enum { DM = 4, H = 2, DH = 2, V = 6, P = 5, QKV = 3 * H * DH };

static const char *const vocab[V] = {"a",         "fluffy", "blue", "creature", "\xc3\xa9t\xc3\xa9",
                                     "say \"hi\""};
static const char *const vocab_json =
    "[\"a\",\"fluffy\",\"blue\",\"creature\",\"\xc3\xa9t\xc3\xa9\",\"say \\\"hi\\\"\"]";
static const char *const dims[DM] = {"x0", "x1", "x2", "x3"};

static float w_qkv[DM * QKV], b_qkv[QKV], w_o[H * DH * DM], tok[V * DM], pos[P * DM];

/* Values of a few binary digits, far from each other's roundings. */
static void tables_fill(void) {
    for (int i = 0; i < DM * QKV; i++)
        w_qkv[i] = (float)((i * 37) % 19 - 9) / 16.0f;
    for (int i = 0; i < QKV; i++)
        b_qkv[i] = (float)((i * 5) % 7 - 3) / 64.0f;
    for (int i = 0; i < H * DH * DM; i++)
        w_o[i] = (float)((i * 11) % 13 - 6) / 8.0f;
    for (int i = 0; i < V * DM; i++)
        tok[i] = (float)((i * 29) % 23 - 11) / 10.0f; /* not exact in binary */
    for (int i = 0; i < P * DM; i++)
        pos[i] = (float)((i * 7) % 17 - 8) / 30.0f;
}

static void write_model(const char *dir, const char *name, int with_vocab) {
    char path[512], dims_json[128];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
    snprintf(dims_json, sizeof dims_json, "[\"%s\",\"%s\",\"%s\",\"%s\"]", dims[0], dims[1],
             dims[2], dims[3]);
    store_metadata meta[] = {
        {"n_heads", "2"}, {"name", name}, {"vocabulary", vocab_json}, {"dimensions", dims_json}};
    static const size_t s_qkv[] = {DM, QKV}, s_b[] = {QKV}, s_o[] = {H * DH, DM}, s_tok[] = {V, DM},
                        s_pos[] = {P, DM};
    store_write_tensor t[] = {
        {"w_qkv", STORE_DTYPE_F32, 2, s_qkv, w_qkv, NULL, NULL},
        {"b_qkv", STORE_DTYPE_F32, 1, s_b, b_qkv, NULL, NULL},
        {"w_o", STORE_DTYPE_F32, 2, s_o, w_o, NULL, NULL},
        {"token_embeddings", STORE_DTYPE_F32, 2, s_tok, tok, NULL, NULL},
        {"position_embeddings", STORE_DTYPE_F32, 2, s_pos, pos, NULL, NULL},
    };
    attn_error err;
    ck_assert_msg(
        store_file_write(path, meta, with_vocab ? 4 : 2, t, with_vocab ? 5 : 3, NULL, &err) == 0,
        "%s", err.message);
}

static char dir[256];
static hs_server server;

static void start_with(const char *const *extra) {
    tables_fill();
    tf_temp_dir(dir, sizeof dir, "vocab");
    write_model(dir, "vocab-4d", 1);
    write_model(dir, "plain-4d", 0);
    const char *args[16] = {"--models-dir", dir};
    size_t n = 2;
    for (; extra && *extra && n < 15; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    ck_assert_int_eq(hs_start(&server, args), 0);
}

static void stop(void) {
    char why[2048];
    ck_assert_msg(hs_finish(&server, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(tf_remove_dir(dir), 0);
}

/* GET or POST; the answer parsed, its status checked. */
static json_t *call(const char *method, const char *path, const char *body, long want_status) {
    hs_response r;
    ck_assert_int_eq(
        hs_request(NULL, server.port, method, path, NULL, body, body ? strlen(body) : 0, &r),
        CURLE_OK);
    ck_assert_msg(r.status == want_status, "%s %s: status %ld, want %ld: %.600s", method, path,
                  r.status, want_status, r.body);
    json_error_t jerr;
    json_t *j = json_loadb(r.body, r.len, 0, &jerr);
    ck_assert_msg(j != NULL, "%s %s: not JSON: %s", method, path, jerr.text);
    hs_response_free(&r);
    return j;
}

/* The error of a refused request: its code and path checked, and that its
 * message holds `says` (NULL: anything). */
static void expect_error(const char *path, const char *body, long status, const char *code,
                         const char *at, const char *says) {
    json_t *r = call("POST", path, body, status);
    json_t *e = json_object_get(r, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), code);
    ck_assert_str_eq(json_string_value(json_object_get(e, "path")), at);
    const char *message = json_string_value(json_object_get(e, "message"));
    ck_assert_msg(!says || strstr(message, says), "message '%s' does not say '%s'", message, says);
    json_decref(r);
}

/* The row of token s, by a linear search of the list written. */
static int row_of(const char *s) {
    for (int t = 0; t < V; t++)
        if (strcmp(vocab[t], s) == 0) return t;
    ck_abort_msg("no token %s", s);
    return -1;
}

/* E for tokens at positions (NULL: 0 … n−1), as the contract says: the
 * token row plus the position row, one float32 addition (float64 then
 * rounded: the same number). */
static void embeddings_of(float *e, const char *const *tokens, const int *positions, int n) {
    for (int i = 0; i < n; i++) {
        int t = row_of(tokens[i]), p = positions ? positions[i] : i;
        for (int j = 0; j < DM; j++)
            e[i * DM + j] = (float)((double)tok[t * DM + j] + (double)pos[p * DM + j]);
    }
}

/* Appends `"tokens":[…]` (JSON-escaped by jansson), `"positions":[…]`
 * when given and `"embeddings":…` when e is not NULL, inside an object. */
static void append_sequence(char *buf, size_t cap, const char *const *tokens, const int *positions,
                            int n, const float *e) {
    size_t used = strlen(buf);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_string(tokens[i]));
    char *text = json_dumps(arr, JSON_COMPACT);
    used += (size_t)snprintf(buf + used, cap - used, "\"tokens\":%s", text);
    free(text);
    json_decref(arr);
    if (positions) {
        used += (size_t)snprintf(buf + used, cap - used, ",\"positions\":[");
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? "," : "", positions[i]);
        used += (size_t)snprintf(buf + used, cap - used, "]");
    }
    if (e) {
        used += (size_t)snprintf(buf + used, cap - used, ",\"embeddings\":[");
        for (int i = 0; i < n; i++) {
            used += (size_t)snprintf(buf + used, cap - used, "%s[", i ? "," : "");
            for (int j = 0; j < DM; j++)
                used += (size_t)snprintf(buf + used, cap - used, "%s%.9g", j ? "," : "",
                                         (double)e[i * DM + j]);
            used += (size_t)snprintf(buf + used, cap - used, "]");
        }
        used += (size_t)snprintf(buf + used, cap - used, "]");
    }
    ck_assert_uint_lt(used, cap - 1);
}

static const char *const all_outputs =
    "[\"q\",\"k\",\"v\",\"scores\",\"patterns\",\"head_outputs\",\"delta\",\"embeddings\"]";

/* {"model":…,"return":all,<sequence>} */
static char *single_body(const char *model, const char *const *tokens, const int *positions, int n,
                         const float *e) {
    char *buf = malloc(8192);
    snprintf(buf, 8192, "{\"model\":\"%s\",\"return\":%s,", model, all_outputs);
    append_sequence(buf, 8192, tokens, positions, n, e);
    strcat(buf, "}");
    return buf;
}

/* Causal multi-head attention in float64 from the weights written:
 * patterns [H][n][n] and E' [n][DM]. */
static void reference(const float *e, int n, double *patterns, double *out) {
    double q[16][H * DH], k[16][H * DH], v[16][H * DH], z[16][H * DH];
    for (int i = 0; i < n; i++)
        for (int c = 0; c < H * DH; c++) {
            double sq = b_qkv[c], sk = b_qkv[H * DH + c], sv = b_qkv[2 * H * DH + c];
            for (int j = 0; j < DM; j++) {
                sq += (double)e[i * DM + j] * w_qkv[j * QKV + c];
                sk += (double)e[i * DM + j] * w_qkv[j * QKV + H * DH + c];
                sv += (double)e[i * DM + j] * w_qkv[j * QKV + 2 * H * DH + c];
            }
            q[i][c] = sq;
            k[i][c] = sk;
            v[i][c] = sv;
        }
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++) {
            double s[16], max = -INFINITY, sum = 0;
            for (int kk = 0; kk <= i; kk++) {
                s[kk] = 0;
                for (int d = 0; d < DH; d++)
                    s[kk] += q[i][h * DH + d] * k[kk][h * DH + d];
                s[kk] /= sqrt((double)DH);
                if (s[kk] > max) max = s[kk];
            }
            for (int kk = 0; kk <= i; kk++)
                sum += (s[kk] = exp(s[kk] - max));
            for (int kk = 0; kk < n; kk++)
                patterns[(h * n + i) * n + kk] = kk <= i ? s[kk] / sum : 0;
            for (int d = 0; d < DH; d++) {
                double acc = 0;
                for (int kk = 0; kk <= i; kk++)
                    acc += patterns[(h * n + i) * n + kk] * v[kk][h * DH + d];
                z[i][h * DH + d] = acc;
            }
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < DM; j++) {
            double acc = e[i * DM + j];
            for (int c = 0; c < H * DH; c++)
                acc += z[i][c] * w_o[c * DM + j];
            out[i * DM + j] = acc;
        }
}

/* r's patterns and embeddings (of n tokens from e) against the reference. */
static void expect_reference(const json_t *r, const float *e, int n) {
    double patterns[H * 16 * 16], out[16 * DM];
    reference(e, n, patterns, out);
    const json_t *p = json_object_get(r, "patterns"), *emb = json_object_get(r, "embeddings");
    ck_assert_uint_eq(json_array_size(p), H);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < n; i++)
            for (int kk = 0; kk < n; kk++) {
                double got = json_number_value(json_array_get(
                    json_array_get(json_array_get(p, (size_t)h), (size_t)i), (size_t)kk));
                ck_assert_msg(fabs(got - patterns[(h * n + i) * n + kk]) < 1e-5,
                              "patterns[%d][%d][%d] = %.9g, want %.9g", h, i, kk, got,
                              patterns[(h * n + i) * n + kk]);
            }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < DM; j++) {
            double got =
                json_number_value(json_array_get(json_array_get(emb, (size_t)i), (size_t)j));
            ck_assert_msg(fabs(got - out[i * DM + j]) < 1e-5,
                          "embeddings[%d][%d] = %.9g, want %.9g", i, j, got, out[i * DM + j]);
        }
}

/* Tokens (at positions) alone answer as their embeddings, built here, do;
 * and as the float64 reference. */
static void expect_tokens_answer(const char *const *tokens, const int *positions, int n) {
    float e[16 * DM];
    embeddings_of(e, tokens, positions, n);
    char *by_tokens = single_body("vocab-4d", tokens, positions, n, NULL);
    char *by_embeddings = single_body("vocab-4d", tokens, positions, n, e);
    json_t *a = call("POST", "/v1/attention", by_tokens, 200);
    json_t *b = call("POST", "/v1/attention", by_embeddings, 200);
    ck_assert_msg(json_equal(a, b), "tokens answer differently from their embeddings: %s",
                  by_tokens);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "n_tokens")), n);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "d_model")), DM);
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(json_string_value(json_array_get(json_object_get(a, "tokens"), (size_t)i)),
                         tokens[i]);
    expect_reference(a, e, n);
    json_decref(a);
    json_decref(b);
    free(by_tokens);
    free(by_embeddings);
}

START_TEST(tokens_alone) {
    start_with(NULL);
    const char *const t1[] = {"a", "fluffy", "blue", "creature"};
    expect_tokens_answer(t1, NULL, 4);
    const char *const t2[] = {"say \"hi\"", "\xc3\xa9t\xc3\xa9", "a", "a", "blue"};
    expect_tokens_answer(t2, NULL, 5); /* every row of the position table */
    const char *const t3[] = {"creature"};
    expect_tokens_answer(t3, NULL, 1);

    /* positions pick the rows of the position table, in any order */
    const int p1[] = {3, 0, 4, 4};
    expect_tokens_answer(t1, p1, 4);

    /* with both, the embeddings win and tokens are labels */
    float e[4 * DM];
    for (int i = 0; i < 4 * DM; i++)
        e[i] = (float)(i % 5) / 4.0f - 0.5f;
    char *both = single_body("vocab-4d", t1, NULL, 4, e);
    json_t *r = call("POST", "/v1/attention", both, 200);
    expect_reference(r, e, 4);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "tokens"), 1)), "fluffy");
    json_decref(r);
    free(both);

    /* tokens that no model file could hold are merely labels with embeddings */
    const char *const odd[] = {"a", "nope"};
    char *labels = single_body("vocab-4d", odd, NULL, 2, e);
    r = call("POST", "/v1/attention", labels, 200);
    expect_reference(r, e, 2);
    json_decref(r);
    free(labels);
    stop();
}
END_TEST

START_TEST(tokens_refused) {
    start_with(NULL);
    const char *P_ = "/v1/attention";
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"fluffy\",\"pink\",\"blue\"]}",
                 422, "unknown_token", "/tokens/2", "\"pink\"");
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"fluffy\",\"pink\",\"blue\"]}",
                 422, "unknown_token", "/tokens/2", "vocab-4d");
    /* exact bytes: no case folding, no trimming, a NUL is a byte */
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"A\"]}", 422, "unknown_token",
                 "/tokens/0", "\"A\"");
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a \"]}", 422, "unknown_token",
                 "/tokens/0", NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"blue\",\"a\\u0000\"]}", 422,
                 "unknown_token", "/tokens/1", "\\u0000");
    /* a long token is shortened in the message */
    char body[1024];
    snprintf(body, sizeof body, "{\"model\":\"vocab-4d\",\"tokens\":[\"%0300d\"]}", 7);
    json_t *r = call("POST", P_, body, 422);
    const char *message =
        json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    ck_assert_ptr_nonnull(strstr(message, "…"));
    ck_assert_uint_lt(strlen(message), 200);
    json_decref(r);

    /* past the position table: at /tokens/i without positions, else at /positions/i */
    expect_error(P_,
                 "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"blue\","
                 "\"a\"]}",
                 422, "position_out_of_range", "/tokens/5", "5 positions");
    expect_error(P_,
                 "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"blue\",\"a\"],\"positions\":[4,0,"
                 "5]}",
                 422, "position_out_of_range", "/positions/2", "5 positions");

    /* no vocabulary, inline weights, nothing at all */
    expect_error(P_, "{\"model\":\"plain-4d\",\"tokens\":[\"a\",\"blue\"]}", 422, "no_vocabulary",
                 "/embeddings", "model plain-4d has no vocabulary: send embeddings");
    expect_error(P_,
                 "{\"weights\":{\"heads\":[{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}]},"
                 "\"tokens\":[\"a\"]}",
                 400, "missing_field", "/embeddings", NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[]}", 422, "dimension_mismatch",
                 "/embeddings", "no rows");
    expect_error(P_, "{\"model\":\"vocab-4d\",\"embeddings\":[]}", 422, "dimension_mismatch",
                 "/embeddings", "no rows");
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",7]}", 400, "wrong_type",
                 "/tokens/1", NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":\"a\"}", 400, "wrong_type", "/tokens",
                 NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\"}", 400, "missing_field", "/embeddings", NULL);
    /* the rest of the request is checked against the model's width as ever */
    expect_error(P_,
                 "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"blue\"],\"mask\":[[1,0],[1,1],[1,"
                 "1]]}",
                 422, "dimension_mismatch", "/mask", NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"blue\"],\"positions\":[0]}", 422,
                 "dimension_mismatch", "/positions", NULL);
    expect_error(P_, "{\"model\":\"vocab-4d\",\"tokens\":[\"a\"],\"context\":[[1,2,3]]}", 422,
                 "dimension_mismatch", "/context", NULL);
    stop();
}
END_TEST

/* A batch: one sequence's tokens, another's embeddings, a third's tokens at
 * positions; equal to the batch of their embeddings built here. */
START_TEST(batch_tokens) {
    start_with(NULL);
    const char *const t0[] = {"a", "fluffy", "blue", "creature"};
    const char *const t2[] = {"blue", "a"};
    const int p2[] = {4, 2};
    float e0[4 * DM], e1[3 * DM], e2[2 * DM];
    embeddings_of(e0, t0, NULL, 4);
    for (int i = 0; i < 3 * DM; i++)
        e1[i] = (float)(i % 7) / 8.0f - 0.4f;
    embeddings_of(e2, t2, p2, 2);
    char by_tokens[8192], by_embeddings[8192];
    char *bodies[2] = {by_tokens, by_embeddings};
    for (int k = 0; k < 2; k++) {
        char *b = bodies[k];
        snprintf(b, 8192, "{\"model\":\"vocab-4d\",\"return\":%s,\"sequences\":[{", all_outputs);
        append_sequence(b, 8192, t0, NULL, 4, k ? e0 : NULL);
        strcat(b, "},{");
        append_sequence(b, 8192, t0, NULL, 3, e1); /* embeddings: tokens are labels */
        strcat(b, "},{");
        append_sequence(b, 8192, t2, p2, 2, k ? e2 : NULL);
        strcat(b, "}]}");
    }
    json_t *a = call("POST", "/v1/attention/batch", by_tokens, 200);
    json_t *b = call("POST", "/v1/attention/batch", by_embeddings, 200);
    ck_assert_msg(json_equal(a, b), "a batch of tokens answers differently from its embeddings");
    json_t *seqs = json_object_get(a, "sequences");
    ck_assert_uint_eq(json_array_size(seqs), 3);
    expect_reference(json_array_get(seqs, 0), e0, 4);
    expect_reference(json_array_get(seqs, 1), e1, 3);
    expect_reference(json_array_get(seqs, 2), e2, 2);
    json_decref(a);
    json_decref(b);

    const char *B = "/v1/attention/batch";
    expect_error(B,
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[\"a\"]},{\"tokens\":[\"a\","
                 "\"blue\",\"mauve\"]}]}",
                 422, "unknown_token", "/sequences/1/tokens/2", "\"mauve\"");
    expect_error(B,
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[\"a\"],\"positions\":[9]}]}",
                 422, "position_out_of_range", "/sequences/0/positions/0", NULL);
    expect_error(B,
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[\"a\"]},{\"tokens\":[\"a\","
                 "\"a\",\"a\",\"a\",\"a\",\"a\"]}]}",
                 422, "position_out_of_range", "/sequences/1/tokens/5", NULL);
    expect_error(B, "{\"model\":\"plain-4d\",\"sequences\":[{\"tokens\":[\"a\"]}]}", 422,
                 "no_vocabulary", "/sequences/0/embeddings", "plain-4d");
    expect_error(B, "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[]}]}", 422,
                 "dimension_mismatch", "/sequences/0/embeddings", NULL);
    expect_error(B,
                 "{\"weights\":{\"heads\":[{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}]},"
                 "\"sequences\":[{\"tokens\":[\"a\"]}]}",
                 400, "missing_field", "/sequences/0/embeddings", NULL);
    stop();
}
END_TEST

/* --max-tokens counts tokens as it counts embeddings rows; the response
 * limit holds for ?vocabulary=true as for ?weights=true. */
START_TEST(limits) {
    const char *const args[] = {"--max-tokens", "4", "--max-response-bytes", "1500", NULL};
    start_with(args);
    const char *const t[] = {"a", "fluffy", "blue", "creature"};
    char *ok = single_body("vocab-4d", t, NULL, 4, NULL);
    /* all outputs of 4 tokens do not fit 1500 bytes: the default ones do */
    char *cut = strstr(ok, "\"return\":");
    memmove(cut, strchr(cut, ']') + 2, strlen(strchr(cut, ']') + 2) + 1);
    json_t *r = call("POST", "/v1/attention", ok, 200);
    json_decref(r);
    free(ok);
    expect_error("/v1/attention",
                 "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"a\",\"a\",\"a\",\"a\"]}", 422,
                 "limit_exceeded", "/tokens", "max_tokens");
    expect_error("/v1/attention/batch",
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[\"a\",\"a\",\"a\"]},"
                 "{\"tokens\":[\"a\",\"a\"]}]}",
                 422, "limit_exceeded", "/sequences", "max_tokens");
    expect_error("/v1/attention",
                 "{\"model\":\"vocab-4d\",\"tokens\":[\"a\",\"a\",\"a\",\"a\"],\"return\":"
                 "[\"q\",\"k\",\"v\",\"scores\",\"patterns\",\"head_outputs\",\"delta\"]}",
                 422, "limit_exceeded", "/return", NULL);

    r = call("GET", "/v1/models/vocab-4d", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(r, "vocabulary_size")), V);
    json_decref(r);
    r = call("GET", "/v1/models/vocab-4d?vocabulary=true", NULL, 422);
    json_t *e = json_object_get(r, "error");
    ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "limit_exceeded");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(e, "message")), "vocabulary"));
    json_decref(r);
    stop();
}
END_TEST

/* --max-d-model holds for the rows tokens stand for as for sent rows. */
START_TEST(width_limit) {
    const char *const args[] = {"--max-d-model", "2", NULL};
    start_with(args);
    expect_error("/v1/attention", "{\"model\":\"vocab-4d\",\"tokens\":[\"a\"]}", 422,
                 "limit_exceeded", "/tokens", "max_d_model");
    expect_error("/v1/attention/batch",
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"embeddings\":[[1,2,3,4]]},"
                 "{\"tokens\":[\"a\"]}]}",
                 422, "limit_exceeded", "/sequences/0/embeddings", "max_d_model");
    expect_error("/v1/attention/batch",
                 "{\"model\":\"vocab-4d\",\"sequences\":[{\"tokens\":[\"a\"]}]}", 422,
                 "limit_exceeded", "/sequences/0/tokens", "max_d_model");
    stop();
}
END_TEST

/* A float of a JSON answer, exactly as float32. */
static float json_float(const json_t *v) {
    return (float)json_number_value(v);
}

static void expect_table(const json_t *m, const float *want, int rows) {
    ck_assert_uint_eq(json_array_size(m), (size_t)rows);
    for (int i = 0; i < rows; i++) {
        const json_t *row = json_array_get(m, (size_t)i);
        ck_assert_uint_eq(json_array_size(row), DM);
        for (int j = 0; j < DM; j++)
            ck_assert_msg(json_float(json_array_get(row, (size_t)j)) == want[i * DM + j],
                          "[%d][%d] = %.9g, want %.9g", i, j,
                          json_number_value(json_array_get(row, (size_t)j)),
                          (double)want[i * DM + j]);
    }
}

static void expect_vocab_fields(const json_t *m, int with_vocab) {
    if (!with_vocab) {
        ck_assert_ptr_null(json_object_get(m, "vocabulary_size"));
        ck_assert_ptr_null(json_object_get(m, "n_positions"));
        ck_assert_ptr_null(json_object_get(m, "dimensions"));
        ck_assert_ptr_null(json_object_get(m, "vocabulary"));
        return;
    }
    ck_assert_int_eq(json_integer_value(json_object_get(m, "vocabulary_size")), V);
    ck_assert_int_eq(json_integer_value(json_object_get(m, "n_positions")), P);
    const json_t *d = json_object_get(m, "dimensions");
    ck_assert_uint_eq(json_array_size(d), DM);
    for (int j = 0; j < DM; j++)
        ck_assert_str_eq(json_string_value(json_array_get(d, (size_t)j)), dims[j]);
}

START_TEST(models_show_vocabulary) {
    start_with(NULL);
    json_t *list = call("GET", "/v1/models", NULL, 200);
    const json_t *models = json_object_get(list, "models");
    ck_assert_uint_eq(json_array_size(models), 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *m = json_array_get(models, i);
        const char *name = json_string_value(json_object_get(m, "name"));
        expect_vocab_fields(m, strcmp(name, "vocab-4d") == 0);
    }
    json_decref(list);

    json_t *m = call("GET", "/v1/models/vocab-4d", NULL, 200);
    expect_vocab_fields(m, 1);
    ck_assert_ptr_null(json_object_get(m, "vocabulary"));
    ck_assert_ptr_null(json_object_get(m, "weights"));
    json_decref(m);
    m = call("GET", "/v1/models/vocab-4d?vocabulary=false", NULL, 200);
    ck_assert_ptr_null(json_object_get(m, "vocabulary"));
    json_decref(m);
    m = call("GET", "/v1/models/plain-4d", NULL, 200);
    expect_vocab_fields(m, 0);
    json_decref(m);
    m = call("GET", "/v1/models/plain-4d?vocabulary=true", NULL, 200);
    expect_vocab_fields(m, 0);
    json_decref(m);

    static const char *const with[] = {"/v1/models/vocab-4d?vocabulary=true",
                                       "/v1/models/vocab-4d?vocabulary=1",
                                       "/v1/models/vocab-4d?weights=true&vocabulary=true"};
    for (size_t k = 0; k < 3; k++) {
        m = call("GET", with[k], NULL, 200);
        expect_vocab_fields(m, 1);
        ck_assert((json_object_get(m, "weights") != NULL) == (k == 2));
        const json_t *v = json_object_get(m, "vocabulary");
        ck_assert_uint_eq(json_object_size(v), 3);
        const json_t *tokens = json_object_get(v, "tokens");
        ck_assert_uint_eq(json_array_size(tokens), V);
        for (int t = 0; t < V; t++)
            ck_assert_str_eq(json_string_value(json_array_get(tokens, (size_t)t)), vocab[t]);
        expect_table(json_object_get(v, "embeddings"), tok, V);
        expect_table(json_object_get(v, "position_embeddings"), pos, P);
        json_decref(m);
    }
    json_t *r = call("GET", "/v1/models/vocab-4d?vocabulary=yes", NULL, 400);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "error"), "code")),
                     "invalid_value");
    json_decref(r);
    stop();
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *suite = suite_create("vocab_http");
    TCase *tc = tcase_create("vocabulary");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tokens_alone);
    tcase_add_test(tc, tokens_refused);
    tcase_add_test(tc, batch_tokens);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, width_limit);
    tcase_add_test(tc, models_show_vocabulary);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
