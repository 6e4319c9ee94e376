/*
 * test_oip.c — the Open Inference Protocol's call (api/call.h of kind
 * API_CALL_OIP: codec_oip.c) decoded, bound and encoded, without a server: padded batches (right
 * and left padding, holes, a row of padding only) against float64 references written here,
 * positions given and by rank (ALiBi makes them matter), cross-attention
 * with a context and its mask, binary outputs bit for bit those of
 * attn_compute on each sequence unpadded, an answer read from its outputs'
 * block (api_answer) allocating nothing large and giving the body's bytes,
 * the limits (--max-response-bytes to the byte), and refusals with their
 * statuses.
 */
#include <check.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "api/oip.h"
#include "attention/attention.h"
#include "server/route.h"
#include "tests/alloc_count.h"
#include "tests/oip_client.h"

enum { DM = 4, H = 2, DH = 2, DC = 3 };

static float w_qkv[DM * 3 * H * DH], b_qkv[3 * H * DH], w_o[H * DH * DM], b_o[DM], slopes[H];
static float xq[DM * H * DH], xb_q[H * DH], w_kv[DC * 2 * H * DH], b_kv[2 * H * DH];
static attn_weights self_w, cross_w;
static api_oip_model self_m, cross_m;
/* A stack of three layers (stack_m): self_w, it at another scale and
 * without ALiBi, and it with a window. */
static attn_weights stack_w[3];
static const attn_weights *stack_layers[3] = {&stack_w[0], &stack_w[1], &stack_w[2]};
static api_oip_model stack_m;

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 16,
                                  .max_d_model = 64,
                                  .max_flops = 1e12,
                                  .max_response_bytes = (size_t)1 << 26,
                                  .max_workspace_bytes = (size_t)1 << 26,
                                  .max_batch = 64};

/* An infer request's call, decoded and bound to m, its outputs made: 0,
 * or -1 with *err (nothing to free). */
static int oip_call(const char *body, size_t len, long long hl, const api_oip_model *m,
                    const api_limits *lim, api_call **out, attn_error *err) {
    api_call_body b = {body, len, hl, m->name};
    if (api_call_decode(API_CALL_OIP, &b, lim, out, err) != 0) return -1;
    api_model_ref ref = {
        m->name, m->weights, m->mask, NULL, m->n_layers > 1 ? stack_layers : NULL, m->n_layers};
    if (api_call_bind(*out, &ref, lim, err) == 0 && api_call_alloc_outputs(*out, NULL, err) == 0)
        return 0;
    api_call_free(*out);
    *out = NULL;
    return -1;
}

/* Multiples of 1/16 in [-1, 1): exact in float32. */
static void fill(float *v, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 7u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((int)(x >> 20) % 32 - 16) / 16.0f;
    }
}

static void setup(void) {
    fill(w_qkv, sizeof w_qkv / sizeof *w_qkv, 1);
    fill(b_qkv, sizeof b_qkv / sizeof *b_qkv, 2);
    fill(w_o, sizeof w_o / sizeof *w_o, 3);
    fill(b_o, DM, 4);
    slopes[0] = 0.5f;
    slopes[1] = 0.25f;
    self_w = (attn_weights){.d_model = DM,
                            .n_heads = H,
                            .d_head = DH,
                            .n_kv_heads = H,
                            .w_qkv = w_qkv,
                            .b_qkv = b_qkv,
                            .w_o = w_o,
                            .b_o = b_o,
                            .alibi = slopes};
    self_m = (api_oip_model){"tiny", &self_w, ATTN_MASK_CAUSAL, 1};
    fill(xq, sizeof xq / sizeof *xq, 5);
    fill(xb_q, H * DH, 6);
    fill(w_kv, sizeof w_kv / sizeof *w_kv, 7);
    fill(b_kv, 2 * H * DH, 8);
    cross_w = (attn_weights){.d_model = DM,
                             .n_heads = H,
                             .d_head = DH,
                             .n_kv_heads = H,
                             .w_qkv = xq,
                             .b_qkv = xb_q,
                             .w_o = w_o,
                             .b_o = b_o,
                             .d_context = DC,
                             .w_kv = w_kv,
                             .b_kv = b_kv};
    cross_m = (api_oip_model){"cross", &cross_w, ATTN_MASK_NONE, 1};
    stack_w[0] = stack_w[1] = stack_w[2] = self_w;
    stack_w[1].scale = 0.3f;
    stack_w[1].alibi = NULL;
    stack_w[2].window = 2;
    stack_m = (api_oip_model){"stack", &stack_w[0], ATTN_MASK_CAUSAL, 3};
}

/* The float64 reference of one unpadded sequence: n rows of e, m context
 * rows of c (NULL: self-attention), positions p (NULL: 0 … n−1), every
 * head. Outputs as attention.h lays them out, hs = H. */
typedef struct ref_out {
    double q[H * 16 * DH], k[H * 16 * DH], v[H * 16 * DH], s[H * 16 * 16], p[H * 16 * 16],
        z[H * 16 * DH], delta[16 * DM], emb[16 * DM];
} ref_out;

static void reference(ref_out *o, const attn_weights *w, const float *e, size_t n, const float *c,
                      size_t m, const long long *pos, int causal, double scale) {
    size_t hd = H * DH;
    if (!c) m = n;
    for (size_t hh = 0; hh < H; hh++) {
        for (size_t i = 0; i < n; i++)
            for (size_t d = 0; d < DH; d++) {
                double a = w->b_qkv[hh * DH + d];
                for (size_t x = 0; x < DM; x++)
                    a += (double)e[i * DM + x] * w->w_qkv[x * (c ? hd : 3 * hd) + hh * DH + d];
                o->q[(hh * n + i) * DH + d] = a;
            }
        for (size_t j = 0; j < m; j++)
            for (size_t d = 0; d < DH; d++) {
                double kk, vv;
                if (c) {
                    kk = w->b_kv[hh * DH + d], vv = w->b_kv[hd + hh * DH + d];
                    for (size_t x = 0; x < DC; x++) {
                        kk += (double)c[j * DC + x] * w->w_kv[x * 2 * hd + hh * DH + d];
                        vv += (double)c[j * DC + x] * w->w_kv[x * 2 * hd + hd + hh * DH + d];
                    }
                } else {
                    kk = w->b_qkv[hd + hh * DH + d], vv = w->b_qkv[2 * hd + hh * DH + d];
                    for (size_t x = 0; x < DM; x++) {
                        kk += (double)e[j * DM + x] * w->w_qkv[x * 3 * hd + hd + hh * DH + d];
                        vv += (double)e[j * DM + x] * w->w_qkv[x * 3 * hd + 2 * hd + hh * DH + d];
                    }
                }
                o->k[(hh * m + j) * DH + d] = kk;
                o->v[(hh * m + j) * DH + d] = vv;
            }
        for (size_t i = 0; i < n; i++) {
            double mx = -INFINITY, sum = 0;
            double *s = o->s + (hh * n + i) * m, *p = o->p + (hh * n + i) * m;
            for (size_t j = 0; j < m; j++) {
                double a = 0;
                for (size_t d = 0; d < DH; d++)
                    a += o->q[(hh * n + i) * DH + d] * o->k[(hh * m + j) * DH + d];
                a *= scale;
                if (w->alibi) {
                    double pi = pos ? (double)pos[i] : (double)i,
                           pj = pos ? (double)pos[j] : (double)j;
                    a -= w->alibi[hh] * fabs(pi - pj);
                }
                s[j] = causal && j > i ? -INFINITY : a;
                if (s[j] > mx) mx = s[j];
            }
            for (size_t j = 0; j < m; j++)
                sum += p[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx);
            for (size_t j = 0; j < m; j++)
                p[j] /= sum;
            for (size_t d = 0; d < DH; d++) {
                double a = 0;
                for (size_t j = 0; j < m; j++)
                    a += p[j] * o->v[(hh * m + j) * DH + d];
                o->z[(hh * n + i) * DH + d] = a;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        for (size_t x = 0; x < DM; x++) {
            double a = w->b_o[x];
            for (size_t hh = 0; hh < H; hh++)
                for (size_t d = 0; d < DH; d++)
                    a += o->z[(hh * n + i) * DH + d] * w->w_o[(hh * DH + d) * DM + x];
            o->delta[i * DM + x] = a;
            o->emb[i * DM + x] = e[i * DM + x] + a;
        }
}

/* Decode, compute (no runner), encode; the answer parsed into *res. 0, or
 * the error's status. */
static int run(const api_oip_model *m, const oc_body *b, char **answer, oc_result *res,
               attn_error *err) {
    api_call *r;
    if (oip_call(b->data, b->len, b->json_len ? (long long)b->json_len : -1, m, &limits, &r, err) !=
        0)
        return err->status;
    attn_workspace *ws = attn_workspace_create();
    size_t failed;
    ck_assert_msg(api_call_compute(r, ws, NULL, err, &failed) == 0, "%s", err->message);
    attn_workspace_destroy(ws);
    size_t len, json_len;
    *answer = api_call_encode(r, &len, &json_len, err);
    ck_assert_ptr_nonnull(*answer);
    api_call_free(r);
    ck_assert_int_eq(oc_parse(res, *answer, len, json_len ? (long long)json_len : -1), 0);
    return 0;
}

static const char *names[8] = {"q",     "k",         "v", "scores", "patterns", "head_outputs",
                               "delta", "embeddings"};

static int near(double got, double want) {
    return fabs(got - want) <= 1e-5 * (1 + fabs(want));
}

/* B rows of n tokens (real[b·n + i]), positions or NULL, against the
 * reference of each real sequence; context rows (cm per row, creal) for
 * the cross model. JSON outputs (binary ones with `binary`). */
static void check_padded(const api_oip_model *m, size_t B, size_t n, const int32_t *real,
                         const int64_t *pos, size_t cm, const int32_t *creal, int causal,
                         double scale, const char *params, int binary) {
    float emb[4 * 8 * DM], ctx[4 * 8 * DC];
    fill(emb, B * n * DM, (unsigned)(17 + n));
    fill(ctx, B * cm * DC, 23);
    oc_input ins[5] = {{"embeddings", "FP32", 3, {(long long)B, (long long)n, DM}, emb, binary},
                       {"attention_mask", "INT32", 2, {(long long)B, (long long)n}, real, 0}};
    size_t n_in = 2;
    if (pos)
        ins[n_in++] = (oc_input){"positions", "INT64", 2, {(long long)B, (long long)n}, pos, 0};
    if (cm) {
        ins[n_in++] = (oc_input){"context", "FP32", 3, {(long long)B, (long long)cm, DC}, ctx, 1};
        ins[n_in++] =
            (oc_input){"context_mask", "INT32", 2, {(long long)B, (long long)cm}, creal, 0};
    }
    oc_output outs[8];
    for (size_t k = 0; k < 8; k++)
        outs[k] = (oc_output){names[k], binary};
    oc_body body;
    oc_build(&body, "t", ins, n_in, outs, 8, params, 0);
    char *answer;
    oc_result res;
    attn_error err;
    ck_assert_msg(run(m, &body, &answer, &res, &err) == 0, "%s", err.message);
    size_t M = cm ? cm : n;
    for (size_t k = 0; k < 8; k++) {
        size_t count, rank;
        long long shape[4];
        int was_bin;
        float *v = oc_output_values(&res, names[k], &count, shape, &rank, &was_bin);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(was_bin, binary);
        ck_assert_int_eq(shape[0], (long long)B);
        size_t cols = k == 3 || k == 4 ? M : k < 6 ? DH : DM;
        size_t rows = k == 1 || k == 2 ? M : n;
        size_t heads = k < 6 ? H : 1;
        ck_assert_uint_eq(count, B * heads * rows * cols);
        for (size_t b = 0; b < B; b++) {
            size_t idx[8], rt = 0, cidx[8], mr = 0;
            long long cp[8];
            float ce[8 * DM], cc[8 * DC];
            for (size_t i = 0; i < n; i++)
                if (real[b * n + i]) {
                    idx[rt] = i;
                    cp[rt] = pos ? pos[b * n + i] : (long long)rt;
                    memcpy(ce + rt * DM, emb + (b * n + i) * DM, sizeof(float) * DM);
                    rt++;
                }
            for (size_t j = 0; j < M; j++)
                if (cm ? creal[b * cm + j] : real[b * n + j]) {
                    cidx[mr] = j;
                    if (cm) memcpy(cc + mr * DC, ctx + (b * cm + j) * DC, sizeof(float) * DC);
                    mr++;
                }
            ref_out ro;
            if (rt) reference(&ro, m->weights, ce, rt, cm ? cc : NULL, mr, cp, causal, scale);
            const double *want[8] = {ro.q, ro.k, ro.v, ro.s, ro.p, ro.z, ro.delta, ro.emb};
            size_t wrows = k == 1 || k == 2 ? mr : rt, wcols = k == 3 || k == 4 ? mr : cols;
            for (size_t hh = 0; hh < heads; hh++)
                for (size_t i = 0; i < rows; i++) {
                    long ci = -1;
                    const size_t *ri = k == 1 || k == 2 ? cidx : idx;
                    for (size_t t = 0; t < wrows; t++)
                        if (ri[t] == i) ci = (long)t;
                    for (size_t j = 0; j < cols; j++) {
                        float g = v[((b * heads + hh) * rows + i) * cols + j];
                        if (ci < 0) {
                            ck_assert_msg(g == 0.0f, "%s row %zu token %zu: padding not 0",
                                          names[k], b, i);
                            continue;
                        }
                        long cj = (long)j;
                        if (k == 3 || k == 4) {
                            cj = -1;
                            for (size_t t = 0; t < mr; t++)
                                if (cidx[t] == j) cj = (long)t;
                        }
                        if (cj < 0) {
                            if (k == 4)
                                ck_assert(g == 0.0f);
                            else
                                ck_assert_msg(g == (binary ? -INFINITY : -FLT_MAX),
                                              "scores: padded key %g", g);
                            continue;
                        }
                        double w = want[k][(hh * wrows + (size_t)ci) * wcols + (size_t)cj];
                        if (isinf(w))
                            ck_assert(g == (binary ? -INFINITY : -FLT_MAX));
                        else
                            ck_assert_msg(near(g, w), "%s row %zu [%zu][%zu][%zu]: %.9g, want %.9g",
                                          names[k], b, hh, i, j, g, w);
                    }
                }
        }
        free(v);
    }
    oc_result_free(&res);
    free(answer);
    oc_body_free(&body);
}

static const int32_t real_3x4[] = {1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0};

START_TEST(padded_against_reference) {
    double sc = 1 / sqrt(2.0);
    check_padded(&self_m, 3, 4, real_3x4, NULL, 0, NULL, 1, sc, NULL, 0);
    check_padded(&self_m, 3, 4, real_3x4, NULL, 0, NULL, 1, sc, NULL, 1);
    check_padded(&self_m, 3, 4, real_3x4, NULL, 0, NULL, 0, 0.75,
                 "{\"mask\":\"none\",\"scale\":0.75}", 0);
}
END_TEST

START_TEST(positions_given_and_by_rank) {
    static const int64_t pos[] = {5, 6, 0, 0, 9, 2, 9, 40, 0, 0, 0, 0};
    check_padded(&self_m, 3, 4, real_3x4, pos, 0, NULL, 1, 1 / sqrt(2.0), NULL, 0);
}
END_TEST

START_TEST(cross_attention) {
    static const int32_t creal[] = {1, 1, 1, 0, 0, 1, 1, 1, 1, 1};
    check_padded(&cross_m, 2, 4, real_3x4, NULL, 5, creal, 0, 1 / sqrt(2.0), NULL, 0);
    check_padded(&cross_m, 2, 4, real_3x4, NULL, 5, creal, 0, 1 / sqrt(2.0), NULL, 1);
}
END_TEST

/* Binary outputs are exactly attn_compute's for each sequence alone. */
START_TEST(bitwise_against_unpadded) {
    enum { B = 3, N = 4 };
    float emb[B * N * DM];
    fill(emb, B * N * DM, 99);
    oc_input ins[2] = {{"embeddings", "FP32", 3, {B, N, DM}, emb, 1},
                       {"attention_mask", "INT32", 2, {B, N}, real_3x4, 1}};
    oc_output outs[2] = {{"patterns", 1}, {"embeddings", 1}};
    oc_body body;
    oc_build(&body, NULL, ins, 2, outs, 2, "{\"select_heads\":[1]}", 0);
    char *answer;
    oc_result res;
    attn_error err;
    ck_assert_msg(run(&self_m, &body, &answer, &res, &err) == 0, "%s", err.message);
    size_t count, rank;
    long long shape[4];
    int bin;
    float *pat = oc_output_values(&res, "patterns", &count, shape, &rank, &bin);
    float *out = oc_output_values(&res, "embeddings", &count, shape, &rank, &bin);
    attn_workspace *ws = attn_workspace_create();
    for (size_t b = 0; b < B; b++) {
        float e[N * DM], p[N * N], o[N * DM];
        size_t idx[N], rt = 0, head = 1;
        for (size_t i = 0; i < N; i++)
            if (real_3x4[b * N + i]) {
                memcpy(e + rt * DM, emb + (b * N + i) * DM, sizeof(float) * DM);
                idx[rt++] = i;
            }
        if (!rt) continue;
        attn_input in = {.weights = &self_w,
                         .embeddings = e,
                         .n_tokens = rt,
                         .mask = {ATTN_MASK_CAUSAL, NULL},
                         .scale = (float)(1 / sqrt(2.0)),
                         .heads = &head,
                         .n_heads_out = 1};
        attn_output ao = {.patterns = p, .embeddings = o};
        ck_assert_int_eq(attn_compute(&ao, ws, &in, &err), 0);
        for (size_t i = 0; i < rt; i++) {
            ck_assert(memcmp(out + (b * N + idx[i]) * DM, o + i * DM, sizeof(float) * DM) == 0);
            for (size_t j = 0; j < rt; j++)
                ck_assert(memcmp(pat + (b * N + idx[i]) * N + idx[j], p + i * rt + j,
                                 sizeof(float)) == 0);
        }
    }
    attn_workspace_destroy(ws);
    free(pat);
    free(out);
    oc_result_free(&res);
    free(answer);
    oc_body_free(&body);
}
END_TEST

/* A stack under /v2: the per-head outputs gain a layer axis after the
 * batch axis, for the layers the parameter lists in its order; delta and
 * embeddings are E_L − E_0 and E_L; rollout is [B, n, n]. Each row's
 * numbers are, bit for bit, its real tokens' stack alone (padded places
 * 0), and the answer read as it streams from the outputs is the body's. */
START_TEST(stack_layer_axis) {
    enum { B = 3, N = 4, L = 3, LL = 2 };
    const size_t listed[LL] = {2, 0};
    float emb[B * N * DM];
    fill(emb, B * N * DM, 77);
    oc_input ins[2] = {{"embeddings", "FP32", 3, {B, N, DM}, emb, 1},
                       {"attention_mask", "INT32", 2, {B, N}, real_3x4, 1}};
    oc_output outs[4] = {{"patterns", 1}, {"delta", 0}, {"rollout", 1}, {"scores", 0}};
    oc_body body;
    oc_build(&body, NULL, ins, 2, outs, 4, "{\"layers\":\"2,0\",\"select_heads\":[1]}", 0);
    char *answer;
    oc_result res;
    attn_error err;
    ck_assert_msg(run(&stack_m, &body, &answer, &res, &err) == 0, "%s", err.message);
    size_t count, rank;
    long long shape[5];
    int bin;
    float *pat = oc_output_values(&res, "patterns", &count, shape, &rank, &bin);
    ck_assert_uint_eq(rank, 5);
    ck_assert(shape[0] == B && shape[1] == LL && shape[2] == 1 && shape[3] == N && shape[4] == N);
    float *sc = oc_output_values(&res, "scores", &count, shape, &rank, &bin);
    float *delta = oc_output_values(&res, "delta", &count, shape, &rank, &bin);
    ck_assert(rank == 3 && shape[2] == DM);
    float *roll = oc_output_values(&res, "rollout", &count, shape, &rank, &bin);
    ck_assert(rank == 3 && shape[0] == B && shape[1] == N && shape[2] == N);
    attn_workspace *ws = attn_workspace_create();
    for (size_t b = 0; b < B; b++) {
        float e[N * DM], p[L][N * N], s[L][N * N], d[N * DM], r[N * N];
        size_t idx[N], rt = 0, head = 1;
        for (size_t i = 0; i < N; i++)
            if (real_3x4[b * N + i]) {
                memcpy(e + rt * DM, emb + (b * N + i) * DM, sizeof(float) * DM);
                idx[rt++] = i;
            }
        attn_input in = {.embeddings = e,
                         .n_tokens = rt,
                         .mask = {ATTN_MASK_CAUSAL, NULL},
                         .heads = &head,
                         .n_heads_out = 1};
        attn_output lo[L] = {{0}};
        const attn_output *lp[L] = {NULL};
        for (size_t j = 0; j < LL; j++) {
            lo[listed[j]] = (attn_output){.patterns = p[listed[j]], .scores = s[listed[j]]};
            lp[listed[j]] = &lo[listed[j]];
        }
        float zeros[L] = {0};
        attn_stack st = {.layers = stack_layers, .n_layers = L, .scales = zeros, .rollout = 1};
        attn_stack_output fin = {.delta = d, .rollout = r};
        if (rt)
            ck_assert_int_eq(attn_compute_stack(lp, &fin, ws, &in, 1, &st, NULL, &err, NULL, NULL),
                             0);
        for (size_t q = 0; q < N; q++) {
            size_t iq = 0;
            int real_q = rt && real_3x4[b * N + q];
            while (real_q && idx[iq] != q)
                iq++;
            for (size_t x = 0; x < DM; x++)
                ck_assert(delta[(b * N + q) * DM + x] == (real_q ? d[iq * DM + x] : 0.0f));
            for (size_t k = 0; k < N; k++) {
                size_t ik = 0;
                int real_k = real_q && real_3x4[b * N + k];
                while (real_k && idx[ik] != k)
                    ik++;
                ck_assert(roll[(b * N + q) * N + k] == (real_k ? r[iq * rt + ik] : 0.0f));
                for (size_t j = 0; j < LL; j++) {
                    const size_t at = ((b * LL + j) * N + q) * N + k;
                    ck_assert(pat[at] == (real_k ? p[listed[j]][iq * rt + ik] : 0.0f));
                    const float want = real_k   ? s[listed[j]][iq * rt + ik]
                                       : real_q ? -INFINITY /* a padded key */
                                                : 0.0f;     /* a padded query's row */
                    ck_assert_msg(sc[at] == (want == -INFINITY ? -FLT_MAX : want),
                                  "row %zu layer %zu [%zu][%zu]: %.9g, want %.9g", b, j, q, k,
                                  (double)sc[at], (double)want); /* JSON data */
                }
            }
        }
    }
    attn_workspace_destroy(ws);
    free(pat), free(sc), free(delta), free(roll);
    oc_result_free(&res);

    /* rows all padding: no sequence to compute, every output 0 */
    {
        const int32_t none[2 * N] = {0};
        oc_input pad_ins[2] = {{"embeddings", "FP32", 3, {2, N, DM}, emb, 1},
                               {"attention_mask", "INT32", 2, {2, N}, none, 1}};
        oc_body pb;
        oc_build(&pb, NULL, pad_ins, 2, outs, 4, "{\"layers\":[1]}", 0);
        char *pa;
        oc_result pr;
        ck_assert_msg(run(&stack_m, &pb, &pa, &pr, &err) == 0, "%s", err.message);
        float *rp = oc_output_values(&pr, "rollout", &count, shape, &rank, &bin);
        ck_assert(rank == 3 && count == 2 * N * N);
        for (size_t x = 0; x < count; x++)
            ck_assert(rp[x] == 0.0f);
        free(rp);
        oc_result_free(&pr);
        free(pa);
        oc_body_free(&pb);
    }

    /* the answer read from the outputs as it streams: the body's bytes */
    api_call *c;
    attn_workspace *block = attn_workspace_create(), *cws = attn_workspace_create();
    ck_assert_int_eq(
        api_call_decode(API_CALL_OIP,
                        &(api_call_body){body.data, body.len,
                                         body.json_len ? (long long)body.json_len : -1, "stack"},
                        &limits, &c, &err),
        0);
    api_model_ref ref = {"stack", &stack_w[0], ATTN_MASK_CAUSAL, NULL, stack_layers, 3};
    ck_assert_int_eq(api_call_bind(c, &ref, &limits, &err), 0);
    ck_assert(api_call_streams(c));
    ck_assert_int_eq(api_call_alloc_outputs(c, block, &err), 0);
    size_t failed;
    ck_assert_int_eq(api_call_compute(c, cws, NULL, &err, &failed), 0);
    api_answer *a = api_answer_create(c, block, &err);
    ck_assert_ptr_nonnull(a);
    api_call_free(c); /* the answer outlives the call */
    size_t len = api_answer_length(a);
    char *got = malloc(len);
    ck_assert_uint_eq(api_answer_read(a, 0, got, len), len);
    ck_assert(memcmp(got, answer, len) == 0);
    free(got);
    api_answer_destroy(a);
    attn_workspace_destroy(cws);
    free(answer);
    oc_body_free(&body);
}
END_TEST

/* The call of a padded batch of self_m: rows of 400 tokens, right-padded,
 * left-padded and all padding, every output, the even ones as bytes, the
 * odd ones as bytes too when `all_binary` (else as JSON); bound under
 * `lim` (NULL: the default ones, with room), its outputs in `block` (NULL:
 * none made). 0, or the error's status. */
enum { BIG_B = 3, BIG_N = 400 };
static int big_call(int all_binary, const api_limits *lim, attn_workspace *block, api_call **out,
                    attn_error *err) {
    static float emb[BIG_B * BIG_N * DM];
    static int32_t real[BIG_B * BIG_N];
    fill(emb, BIG_B * BIG_N * DM, 11);
    for (size_t t = 0; t < BIG_N; t++) {
        real[t] = t < 300;
        real[BIG_N + t] = t >= 7;
        real[2 * BIG_N + t] = 0;
    }
    oc_input ins[2] = {{"embeddings", "FP32", 3, {BIG_B, BIG_N, DM}, emb, 1},
                       {"attention_mask", "INT32", 2, {BIG_B, BIG_N}, real, 0}};
    oc_output outs[8];
    for (size_t k = 0; k < 8; k++)
        outs[k] = (oc_output){names[k], all_binary || k % 2 == 0};
    oc_body body;
    oc_build(&body, "big-call-id2", ins, 2, outs, 8, NULL, 0);
    api_limits big = limits;
    big.max_tokens = BIG_B * BIG_N;
    big.max_response_bytes = (size_t)1 << 30;
    api_call_body b = {body.data, body.len, (long long)body.json_len, self_m.name};
    api_model_ref ref = {self_m.name, self_m.weights, self_m.mask, NULL, NULL, 0};
    int rc = api_call_decode(API_CALL_OIP, &b, lim ? lim : &big, out, err);
    oc_body_free(&body);
    if (rc == 0) rc = api_call_bind(*out, &ref, lim ? lim : &big, err);
    if (rc == 0 && block) rc = api_call_alloc_outputs(*out, block, err);
    if (rc == 0 && block) {
        size_t failed;
        attn_workspace *ws = attn_workspace_create();
        rc = attn_compute_batch(api_call_outputs(*out), ws, api_call_inputs(*out),
                                api_call_count(*out), NULL, err, &failed);
        attn_workspace_destroy(ws);
    }
    if (rc == 0) return 0;
    api_call_free(*out);
    *out = NULL;
    return err->status;
}

/*
 * An answer of binary tensors is read from the outputs' block (api_answer):
 * reading it whole, in pieces of any size, allocates nothing large — no
 * copy of a tensor — and gives the bytes api_call_encode writes as one
 * body. Of bytes alone, making the answer allocates nothing large either,
 * and the body holds the answer once (no scratch copy of each binary
 * output besides it). Bytes and JSON numbers mixed, then bytes alone.
 */
START_TEST(binary_answer_read_from_outputs) {
    for (int all_binary = 0; all_binary < 2; all_binary++) {
        api_call *c;
        attn_error err;
        attn_workspace *block = attn_workspace_create();
        ck_assert_int_eq(big_call(all_binary, NULL, block, &c, &err), 0);
        ck_assert(api_call_streams(c));
        size_t outputs = attn_workspace_bytes(block), len, json_len;
        size_t before = ac_current();
        ck_assert_uint_ge(before, outputs); /* the block, counted */
        ac_reset_peak();
        char *body = api_call_encode(c, &len, &json_len, &err);
        ck_assert_ptr_nonnull(body);
        ck_assert_uint_gt(len - json_len, (size_t)1 << 20);
        if (all_binary) ck_assert_uint_ne(json_len % sizeof(float), 0); /* floats cut in pieces */
        /* bytes alone: the body and nothing more (JSON numbers are written
         * as the other answers write them, into a buffer reserved at their
         * widest) */
        if (all_binary)
            ck_assert_msg(ac_peak() - before <= len + 1,
                          "encoding a body of %zu bytes held %zu at its peak", len,
                          ac_peak() - before);
        api_call_free(c);

        ck_assert_int_eq(big_call(all_binary, NULL, block, &c, &err), 0);
        before = ac_current();
        ac_reset_peak();
        api_answer *a = api_answer_create(c, block, &err); /* the block is the answer's now */
        ck_assert_ptr_nonnull(a);
        api_call_free(c);
        ck_assert_uint_eq(api_answer_length(a), len);
        ck_assert_uint_eq(api_answer_json_length(a), json_len);
        if (all_binary) /* a header of a few hundred bytes */
            ck_assert_msg(ac_peak() == before, "making the answer held %zu bytes at its peak",
                          ac_peak() - before);
        static const size_t pieces[] = {1, 3, 4093, 65536 + 3, (size_t)1 << 20};
        char *got = malloc(len + 1);
        before = ac_current();
        ac_reset_peak();
        for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
            size_t at = 0, n;
            memset(got, 0, len);
            /* the first megabyte in tiny pieces only: a byte at a time is slow */
            while ((n = api_answer_read(a, at, got + at,
                                        at < ((size_t)1 << 20) || pieces[p] > 3 ? pieces[p]
                                                                                : len - at)) > 0)
                at += n;
            ck_assert_uint_eq(at, len);
            ck_assert_msg(memcmp(got, body, len) == 0, "pieces of %zu: not the body's bytes",
                          pieces[p]);
        }
        ck_assert_uint_eq(api_answer_read(a, len, got, 16), 0);
        ck_assert_uint_eq(ac_peak(), before); /* reading allocates nothing large */
        free(got);
        free(body);
        size_t held = ac_current();
        api_answer_destroy(a);
        /* its block went with it (and a header of JSON numbers) */
        if (all_binary)
            ck_assert_uint_eq(held - ac_current(), outputs);
        else
            ck_assert_uint_gt(held - ac_current(), outputs);
    }
}
END_TEST

/* --max-response-bytes against a /v2 answer: binary tensors count their
 * bytes and the header to the byte, so a limit of exactly the answer's
 * length takes it and one byte less refuses it; JSON numbers count at
 * their widest, so an answer with them is at most its bound. */
START_TEST(response_limit_to_the_byte) {
    for (int all_binary = 0; all_binary < 2; all_binary++) {
        api_call *c;
        attn_error err;
        attn_workspace *block = attn_workspace_create();
        ck_assert_int_eq(big_call(all_binary, NULL, block, &c, &err), 0);
        size_t len, json_len;
        char *body = api_call_encode(c, &len, &json_len, &err);
        ck_assert_ptr_nonnull(body);
        free(body);
        api_call_free(c);
        attn_workspace_destroy(block);
        api_limits lim = limits;
        lim.max_tokens = BIG_B * BIG_N;
        lim.max_response_bytes = len;
        ck_assert_int_eq(big_call(all_binary, &lim, NULL, &c, &err), all_binary ? 0 : 422);
        api_call_free(c);
        if (!all_binary) {
            ck_assert_str_eq(err.path, "/outputs");
            continue; /* the bound counts numbers at their widest */
        }
        lim.max_response_bytes = len - 1;
        ck_assert_int_eq(big_call(all_binary, &lim, NULL, &c, &err), 422);
        ck_assert_str_eq(err.code, "limit_exceeded");
        ck_assert_str_eq(err.path, "/outputs");
        ck_assert_msg(strstr(err.message, "max_response_bytes"), "%s", err.message);
    }
}
END_TEST

/* A request's status from its decode and bind (0 when accepted). */
static int status_of(const api_oip_model *m, const char *json, long long hl, const void *bin,
                     size_t bin_len, const api_limits *lim) {
    size_t jl = strlen(json);
    char *body = malloc(jl + bin_len + 1);
    memcpy(body, json, jl);
    if (bin_len) memcpy(body + jl, bin, bin_len);
    api_call *r = NULL;
    attn_error err = {0};
    int rc = oip_call(body, jl + bin_len, hl, m, lim, &r, &err);
    /* the body is not needed once decoded */
    memset(body, 0, jl + bin_len);
    free(body);
    api_call_free(r);
    if (rc == 0) return 0;
    ck_assert_int_ne(err.status, 0);
    size_t len;
    char *text = api_oip_error_json(&err, &len);
    json_t *j = json_loadb(text, len, 0, NULL);
    ck_assert(j && json_is_string(json_object_get(j, "error")) && json_object_size(j) == 1);
    json_decref(j);
    free(text);
    return err.status;
}

#define E1 "{\"name\":\"embeddings\",\"shape\":[1,1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}"
#define C1 "{\"name\":\"context\",\"shape\":[1,2,3],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5,6]}"

START_TEST(refusals) {
    ck_assert_int_eq(status_of(&self_m, "{\"inputs\":[" E1 "]}", -1, NULL, 0, &limits), 0);
    ck_assert_int_eq(status_of(&cross_m, "{\"inputs\":[" E1 "," C1 "]}", -1, NULL, 0, &limits), 0);
    /* rows all padding make no sequence, and their widths must still be the
     * model's: the embeddings', and a cross-attention context's */
#define PAD "{\"name\":\"attention_mask\",\"shape\":[1,1],\"datatype\":\"INT32\",\"data\":[0]}"
    ck_assert_int_eq(status_of(&self_m, "{\"inputs\":[" E1 "," PAD "]}", -1, NULL, 0, &limits), 0);
    ck_assert_int_eq(status_of(&self_m,
                               "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,1,5],"
                               "\"datatype\":\"FP32\",\"data\":[1,2,3,4,5]}," PAD "]}",
                               -1, NULL, 0, &limits),
                     422);
    ck_assert_int_eq(status_of(&cross_m,
                               "{\"inputs\":[" E1 "," PAD ",{\"name\":\"context\",\"shape\":"
                               "[1,1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
                               -1, NULL, 0, &limits),
                     422);
#undef PAD
    /* cross-attention: context missing, causal, width, its mask's shape, a
     * row with tokens and no context */
    ck_assert_int_eq(status_of(&cross_m, "{\"inputs\":[" E1 "]}", -1, NULL, 0, &limits), 400);
    ck_assert_int_eq(status_of(&cross_m,
                               "{\"inputs\":[" E1 "," C1 "],\"parameters\":{\"mask\":\"causal\"}}",
                               -1, NULL, 0, &limits),
                     422);
    ck_assert_int_eq(
        status_of(&cross_m,
                  "{\"inputs\":[" E1
                  ",{\"name\":\"context\",\"shape\":[1,3,2],\"datatype\":\"FP32\",\"data\":[1,2,"
                  "3,4,5,6]}]}",
                  -1, NULL, 0, &limits),
        422);
    ck_assert_int_eq(
        status_of(&cross_m,
                  "{\"inputs\":[" E1 "," C1
                  ",{\"name\":\"context_mask\",\"shape\":[1,3],\"datatype\":\"INT32\",\"data\":[1,"
                  "1,1]}]}",
                  -1, NULL, 0, &limits),
        422);
    ck_assert_int_eq(
        status_of(&cross_m,
                  "{\"inputs\":[" E1 "," C1
                  ",{\"name\":\"context_mask\",\"shape\":[1,2],\"datatype\":\"BOOL\",\"data\":["
                  "false,false]}]}",
                  -1, NULL, 0, &limits),
        422);
    ck_assert_int_eq(
        status_of(&cross_m,
                  "{\"inputs\":[" E1
                  ",{\"name\":\"context\",\"shape\":[1,2,3],\"datatype\":\"INT32\",\"data\":[1,2,"
                  "3,4,5,6]}]}",
                  -1, NULL, 0, &limits),
        400);
    /* limits over the whole request */
    api_limits tight = limits;
    tight.max_tokens = 3;
    ck_assert_int_eq(
        status_of(&self_m,
                  "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,2,4],\"datatype\":\"FP32\","
                  "\"data\":[1,2,3,4,1,2,3,4,1,2,3,4,1,2,3,4]}]}",
                  -1, NULL, 0, &tight),
        422);
    tight = limits;
    tight.max_response_bytes = 100;
    ck_assert_int_eq(status_of(&self_m, "{\"inputs\":[" E1 "]}", -1, NULL, 0, &tight), 422);
    tight = limits;
    tight.max_flops = 1;
    ck_assert_int_eq(status_of(&self_m, "{\"inputs\":[" E1 "]}", -1, NULL, 0, &tight), 422);
    /* binary framing: header length past the body, sizes that do not sum */
    static const float four[4] = {1, 2, 3, 4};
    const char *bj = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\","
                     "\"parameters\":{\"binary_data_size\":16}}]}";
    long long bl = (long long)strlen(bj);
    ck_assert_int_eq(status_of(&self_m, bj, bl, four, 16, &limits), 0);
    ck_assert_int_eq(status_of(&self_m, bj, bl + 17, four, 16, &limits), 400);
    ck_assert_int_eq(status_of(&self_m, bj, bl, four, 12, &limits), 400);
    ck_assert_int_eq(status_of(&self_m, bj, bl - 1, four, 16, &limits), 400);
    /* a NaN in binary data */
    float nan4[4] = {1, NAN, 3, 4};
    ck_assert_int_eq(status_of(&self_m, bj, bl, nan4, 16, &limits), 422);
    /* BOOL mask in bytes: one byte each, values 0 or 1 */
    const char *mj = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":\"FP32\","
                     "\"data\":[1,2,3,4]},{\"name\":\"attention_mask\",\"shape\":[1],\"datatype\":"
                     "\"BOOL\",\"parameters\":{\"binary_data_size\":1}}]}";
    ck_assert_int_eq(status_of(&self_m, mj, (long long)strlen(mj), "\1", 1, &limits), 0);
    ck_assert_int_eq(status_of(&self_m, mj, (long long)strlen(mj), "\2", 1, &limits), 422);
    /* Triton's own request parameters are accepted and ignored */
    ck_assert_int_eq(status_of(&self_m,
                               "{\"inputs\":[" E1
                               "],\"parameters\":{\"priority\":1,\"timeout\":5,\"sequence_id\":0}}",
                               -1, NULL, 0, &limits),
                     0);
}
END_TEST

/* The error of a refused request (status 0 in it when accepted). */
static attn_error error_of(const api_oip_model *m, const char *json, const api_limits *lim) {
    api_call *r = NULL;
    attn_error err = {0};
    size_t len = strlen(json);
    char *body = malloc(len ? len : 1);
    memcpy(body, json, len);
    if (oip_call(body, len, -1, m, lim, &r, &err) == 0)
        err.status = 0;
    else
        ck_assert_int_ne(err.status, 0);
    api_call_free(r);
    free(body);
    return err;
}

/* A JSON text of `count` copies of `item` joined by commas, in a malloc'd
 * string between `head` and `tail`. */
static char *repeat(const char *head, const char *item, size_t count, const char *tail) {
    size_t hl = strlen(head), il = strlen(item), tl = strlen(tail);
    char *s = malloc(hl + count * (il + 1) + tl + 1), *p = s;
    memcpy(p, head, hl);
    p += hl;
    for (size_t i = 0; i < count; i++) {
        if (i) *p++ = ',';
        memcpy(p, item, il);
        p += il;
    }
    memcpy(p, tail, tl + 1);
    return s;
}

/* The scan before jansson: depth, string length and the values in all are
 * held to the limits as /v1's are; the rows of data are read from the
 * text, integers exactly. */
START_TEST(header_scanned_within_limits) {
    api_limits lim = limits;
    lim.max_json_depth = 16;
    lim.max_string_bytes = 64;
    ck_assert_int_eq(error_of(&self_m, "{\"inputs\":[" E1 "]}", &lim).status, 0);
    char deep[256];
    int at = snprintf(deep, sizeof deep, "{\"inputs\":[" E1 "],\"parameters\":{\"x\":");
    for (int i = 0; i < 40; i++)
        deep[at++] = '[';
    for (int i = 0; i < 40; i++)
        deep[at++] = ']';
    strcpy(deep + at, "}}");
    attn_error e = error_of(&self_m, deep, &lim);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "limit_exceeded");
    char id[200];
    memset(id, 'x', 100);
    id[100] = '\0';
    char *body = repeat("{\"id\":\"", id, 1, "\",\"inputs\":[" E1 "]}");
    e = error_of(&self_m, body, &lim);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "limit_exceeded");
    ck_assert_str_eq(e.path, "/id");
    free(body);
    /* 5000 BOOL cells: more values than a request of 64 tokens can hold */
    body = repeat("{\"inputs\":[" E1 ",{\"name\":\"attention_mask\",\"shape\":[1,5000],"
                  "\"datatype\":\"BOOL\",\"data\":[",
                  "true", 5000, "]}]}");
    e = error_of(&self_m, body, &lim);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "limit_exceeded");
    free(body);
    /* many numbers are lifted, not counted: 64 tokens × 4 of them is fine, nested or flat */
    body = repeat("{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,64,4],\"datatype\":\"FP32\","
                  "\"data\":[[",
                  "[1,2,3,4]", 64, "]]}]}");
    ck_assert_int_eq(error_of(&self_m, body, &lim).status, 0);
    free(body);
    /* an integer past float32's 2^24 is read exactly */
    e = error_of(&self_m,
                 "{\"inputs\":[" E1 ",{\"name\":\"positions\",\"shape\":[1,1],\"datatype\":"
                 "\"INT64\",\"data\":[4294967297]}]}",
                 &lim);
    ck_assert_int_eq(e.status, 422);
    ck_assert_msg(strstr(e.message, "4294967297"), "%s", e.message);
    ck_assert_int_eq(error_of(&self_m,
                              "{\"inputs\":[" E1 ",{\"name\":\"positions\",\"shape\":[1,1],"
                              "\"datatype\":\"INT64\",\"data\":[[2147483647]]}]}",
                              &lim)
                         .status,
                     0);
}
END_TEST

/* A declared shape allocates nothing before its data is counted. */
START_TEST(shapes_checked_before_allocation) {
    static const char *ctx[] = {"[1,1073741824,3]", "[1,1099511627776,3]", "[1,100,3]"};
    api_limits wide = limits;
    wide.max_tokens = SIZE_MAX / 64;
    for (size_t i = 0; i < 3; i++) {
        char *body = repeat("{\"inputs\":[" E1 ",{\"name\":\"context\",\"datatype\":\"FP32\","
                            "\"data\":[1,2,3],\"shape\":",
                            ctx[i], 1, "}]}");
        attn_error e = error_of(&cross_m, body, &limits);
        ck_assert_int_eq(e.status, 422);
        ck_assert_str_eq(e.code, "limit_exceeded");
        ck_assert_msg(strstr(e.message, "max_tokens = 64"), "%s", e.message);
        e = error_of(&cross_m, body, &wide);
        ck_assert_int_eq(e.status, 422);
        ck_assert_str_eq(e.code, "dimension_mismatch");
        free(body);
    }
    attn_error e = error_of(&cross_m,
                            "{\"inputs\":[" E1 "," C1
                            ",{\"name\":\"context_mask\",\"shape\":[1,2],\"datatype\":\"INT32\","
                            "\"data\":[1]}]}",
                            &limits);
    ck_assert_int_eq(e.status, 422);
}
END_TEST

/* Numbers as /v1 reads them; NUL bytes kept; what is echoed is counted in
 * the response's bound; nested data follows the shape; select_heads the
 * same status whether a string or an array. */
START_TEST(numbers_echo_nesting_heads) {
    attn_error e = error_of(&self_m,
                            "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                            "\"FP32\",\"data\":[1,2,1e999,4]}]}",
                            &limits);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "non_finite_number");
    ck_assert_int_eq(error_of(&self_m,
                              "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                              "\"FP32\",\"data\":[1,2,1180591620717411303424,4]}]}",
                              &limits)
                         .status,
                     0);
    const char *nul = "{\"id\":\"a\\u0000b\",\"inputs\":[" E1 "]}";
    oc_body b = {strdup(nul), strlen(nul), 0};
    char *text;
    oc_result res;
    ck_assert_int_eq(run(&self_m, &b, &text, &res, &e), 0);
    const json_t *id = json_object_get(res.json, "id");
    ck_assert_uint_eq(json_string_length(id), 3);
    ck_assert_int_eq(memcmp(json_string_value(id), "a\0b", 3), 0);
    oc_result_free(&res);
    free(text);
    oc_body_free(&b);

    api_limits tight = limits;
    tight.max_response_bytes = 20000;
    char *big = malloc(90001);
    memset(big, 'x', 90000);
    big[90000] = '\0';
    char *body = repeat("{\"id\":\"", big, 1, "\",\"inputs\":[" E1 "]}");
    e = error_of(&self_m, body, &tight);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "limit_exceeded");
    free(body);
    free(big);

    e = error_of(&self_m,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,2,4],\"datatype\":\"FP32\","
                 "\"data\":[[1,2,3],[4,1,2,3,4]]}]}",
                 &limits);
    ck_assert_int_eq(e.status, 422);
    ck_assert_str_eq(e.code, "dimension_mismatch");
    ck_assert_int_eq(
        error_of(&self_m,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,2,4],\"datatype\":"
                 "\"FP32\",\"data\":[[[1,2,3,4],[4,1,2,3]]]}]}",
                 &limits)
            .status,
        0);

    static const struct {
        const char *sel;
        int status;
    } heads[] = {{"\"-1\"", 422}, {"[-1]", 422},  {"\"0,9\"", 422}, {"[0,9]", 422},
                 {"\"x\"", 400},  {"[0.5]", 400}, {"\"0,1\"", 0},   {"[0,1]", 0}};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char *q =
            repeat("{\"inputs\":[" E1 "],\"parameters\":{\"select_heads\":", heads[i].sel, 1, "}}");
        ck_assert_msg(error_of(&self_m, q, &limits).status == heads[i].status, "%s", heads[i].sel);
        free(q);
    }
}
END_TEST

/* The error of a refused request with `bin` after its JSON header. */
static attn_error error_bin(const api_oip_model *m, const char *json, const void *bin,
                            size_t bin_len, const api_limits *lim) {
    size_t jl = strlen(json);
    char *body = malloc(jl + bin_len + 1);
    memcpy(body, json, jl);
    if (bin_len) memcpy(body + jl, bin, bin_len);
    api_call *r = NULL;
    attn_error err = {0};
    ck_assert_int_eq(oip_call(body, jl + bin_len, (long long)jl, m, lim, &r, &err), -1);
    api_call_free(r);
    free(body);
    return err;
}

/* Sizes and values a message shows are those sent, however large: not
 * the double they were read into (2^63 − 1 reads as 2^63, 2^53 + 1 as
 * 2^53), nor SIZE_MAX for a size past it. */
START_TEST(numbers_quoted_as_sent) {
    static const struct {
        const api_oip_model *m;
        const char *json, *want;
    } cases[] = {
        {&self_m,
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,9223372036854775807],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         "embeddings rows have 9223372036854775807 numbers (d_model), over the limit max_d_model "
         "= 64"},
        {&self_m,
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[9007199254740993,1,4],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         "the batch has 9007199254740993 rows, over the limit max_batch = 64"},
        {&self_m,
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,9007199254740993,4],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         "the batch holds 1 × 9007199254740993 tokens (padding included)"},
        {&self_m,
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[9007199254740993,4],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3,4]}]}",
         "the batch holds 1 × 9007199254740993 tokens (padding included)"},
        {&self_m,
         "{\"inputs\":[" E1 ",{\"name\":\"attention_mask\",\"shape\":[1,"
         "9223372036854775807],\"datatype\":\"INT32\",\"data\":[1]}]}",
         "input attention_mask has shape [1, 9223372036854775807], which does not fit"},
        {&self_m,
         "{\"inputs\":[" E1 ",{\"name\":\"positions\",\"shape\":[18446744073709549567, 1],"
         "\"datatype\":\"INT64\",\"data\":[1]}]}",
         "input positions has shape [18446744073709549567, 1], which does not fit"},
        {&cross_m,
         "{\"inputs\":[" E1 ",{\"name\":\"context\",\"shape\":[1,9007199254740993,3],"
         "\"datatype\":\"FP32\",\"data\":[1,2,3]}]}",
         "context has 1 × 9007199254740993 rows (padding included)"},
        {&self_m,
         "{\"inputs\":[" E1 ",{\"name\":\"positions\",\"shape\":[1,1],\"datatype\":"
         "\"INT64\",\"data\":[9223372036854775807]}]}",
         "positions[0] = 9223372036854775807 is not in 0 … 2^31 − 1"},
        {&self_m,
         "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,2,4],\"datatype\":\"FP32\","
         "\"data\":[1,2,3,4,5,6,7,8]},{\"name\":\"positions\",\"shape\":[1,2],\"datatype\":"
         "\"INT64\",\"data\":[[0,-9007199254740993]]}]}",
         "positions[1] = -9007199254740993 is not in 0 … 2^31 − 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        attn_error e = error_of(cases[i].m, cases[i].json, &limits);
        ck_assert_msg(e.status == 422 && strstr(e.message, cases[i].want), "%s: %d %s",
                      cases[i].json, e.status, e.message);
    }

    /* binary_data_size, however far past the bytes left */
    static const char *const sizes[] = {"9223372036854775807", "18446744073709551615",
                                        "18446744073709551616", "123456789012345678901234567890",
                                        "1e30"};
    static const float four[4] = {1, 2, 3, 4};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char json[256], want[160];
        snprintf(json, sizeof json,
                 "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                 "\"FP32\",\"parameters\":{\"binary_data_size\":%s}}]}",
                 sizes[i]);
        snprintf(want, sizeof want,
                 "inputs[0] claims %s bytes of binary data; only 16 are left after the JSON header",
                 sizes[i]);
        attn_error e = error_bin(&self_m, json, four, 16, &limits);
        ck_assert_msg(e.status == 400 && strcmp(e.message, want) == 0, "%s: %d %s", sizes[i],
                      e.status, e.message);
    }
    /* INT64 positions in bytes, exactly */
    const char *pj = "{\"inputs\":[" E1 ",{\"name\":\"positions\",\"shape\":[1,1],\"datatype\":"
                     "\"INT64\",\"parameters\":{\"binary_data_size\":8}}]}";
    int64_t big = INT64_MAX;
    attn_error e = error_bin(&self_m, pj, &big, 8, &limits);
    ck_assert_msg(e.status == 422 && strstr(e.message, "positions[0] = 9223372036854775807 is"),
                  "%d %s", e.status, e.message);
}
END_TEST

/*
 * A shape whose product overflows 64 bits is refused as too large where it
 * is read, and so is a binary input whose size in bytes overflows: a
 * wrapped count would otherwise pass for a small one (the data sent may
 * even match it) and the request be sized by its shape. Under limits this
 * wide nothing else stands in the way, and such a request would reach an
 * allocation of 2^62 bytes.
 */
START_TEST(shape_products_overflow) {
    api_limits wide = limits;
    wide.max_tokens = wide.max_batch = wide.max_d_model = SIZE_MAX;
    /* (2^62 + 1024) × 4 wraps to 4096: the count of values sent */
    char *wraps = repeat("{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4611686018427388928,4],"
                         "\"datatype\":\"FP32\",\"data\":[",
                         "0", 4096, "]}]}");
    const char *const shapes[] = {"[4294967296,4294967296,4]", "[1e30,1,4]",
                                  "[3037000500,3037000500,2]", "[4611686018427387904,4]",
                                  "[18446744073709551615,2]"};
    for (int lim = 0; lim < 2; lim++) {
        const api_limits *l = lim ? &wide : &limits;
        for (size_t i = 0; i <= sizeof shapes / sizeof *shapes; i++) {
            char *body = i < sizeof shapes / sizeof *shapes
                             ? repeat("{\"inputs\":[{\"name\":\"embeddings\",\"datatype\":\"FP32\","
                                      "\"data\":[],\"shape\":",
                                      shapes[i], 1, "}]}")
                             : strdup(wraps);
            attn_error e = error_of(&self_m, body, l);
            ck_assert_msg(e.status == 422 && strcmp(e.code, "limit_exceeded") == 0 &&
                              strcmp(e.path, "/inputs/0") == 0 &&
                              strcmp(e.message, "inputs[0] is too large") == 0,
                          "%s (limits %s): %d %s %s %s", body, lim ? "wide" : "tight", e.status,
                          e.code, e.path, e.message);
            free(body);
        }
    }
    free(wraps);
    /* a mask's shape too: refused as too large, not as a mismatch */
    attn_error e = error_of(&self_m,
                            "{\"inputs\":[" E1 ",{\"name\":\"attention_mask\",\"shape\":"
                            "[4294967296,4294967296],\"datatype\":\"INT32\",\"data\":[1]}]}",
                            &limits);
    ck_assert_msg(e.status == 422 && strcmp(e.code, "limit_exceeded") == 0 &&
                      strcmp(e.path, "/inputs/1") == 0,
                  "%d %s %s %s", e.status, e.code, e.path, e.message);

    /* binary: 2^62 floats are 2^64 bytes, which wraps to the 0 claimed;
     * 2^62 + 1024 of them wrap to the 4096 bytes that follow */
    static const unsigned char zeros[4096];
    static const struct {
        const char *json, *shape;
        size_t bytes;
    } bins[] = {
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4611686018427387904,1],"
         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":0}}]}",
         "[4611686018427387904, 1]", 0},
        {"{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[4611686018427388928,1],"
         "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":4096}}]}",
         "[4611686018427388928, 1]", 4096},
    };
    for (size_t i = 0; i < sizeof bins / sizeof *bins; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "input embeddings has shape %s of FP32: 18446744073709551615 bytes, but "
                 "binary_data_size is %zu",
                 bins[i].shape, bins[i].bytes);
        e = error_bin(&self_m, bins[i].json, zeros, bins[i].bytes, &wide);
        ck_assert_msg(e.status == 422 && strcmp(e.code, "dimension_mismatch") == 0 &&
                          strcmp(e.message, want) == 0,
                      "%s: %d %s %s", bins[i].json, e.status, e.code, e.message);
        /* under the usual limits its token count is refused first */
        e = error_bin(&self_m, bins[i].json, zeros, bins[i].bytes, &limits);
        ck_assert_msg(e.status == 422 && strcmp(e.code, "limit_exceeded") == 0, "%s: %d %s %s",
                      bins[i].json, e.status, e.code, e.message);
    }
}
END_TEST

START_TEST(metadata) {
    size_t len;
    char *text = api_oip_model_metadata(&cross_m, &len);
    json_t *j = json_loadb(text, len, 0, NULL);
    free(text);
    const json_t *ins = json_object_get(j, "inputs");
    ck_assert_uint_eq(json_array_size(ins), 5);
    const json_t *c = json_array_get(ins, 3);
    ck_assert_str_eq(json_string_value(json_object_get(c, "name")), "context");
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(c, "shape"), 2)), DC);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ins, 4), "name")),
                     "context_mask");
    /* no rollout for cross-attention: its outputs are the other 8 */
    ck_assert_uint_eq(json_array_size(json_object_get(j, "outputs")), 8);
    json_decref(j);
    /* a stack's per-head outputs: [B, L', h, n, …]; rollout [B, n, n] */
    text = api_oip_model_metadata(&stack_m, &len);
    j = json_loadb(text, len, 0, NULL);
    free(text);
    const json_t *outs = json_object_get(j, "outputs");
    ck_assert_uint_eq(json_array_size(outs), 9);
    for (size_t i = 0; i < 9; i++) {
        const json_t *t = json_array_get(outs, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        size_t rank = json_array_size(json_object_get(t, "shape"));
        int top = !strcmp(name, "embeddings") || !strcmp(name, "delta") || !strcmp(name, "rollout");
        ck_assert_msg(rank == (top ? 3u : 5u), "%s: rank %zu", name, rank);
    }
    json_decref(j);
    text = api_oip_server_metadata(&len);
    ck_assert_ptr_nonnull(strstr(text, "\"binary_tensor_data\""));
    free(text);
}
END_TEST

/* Nested JSON data reads as its flat row-major order; no heads selected
 * gives per-head outputs of no head; no outputs asked gives none. */
START_TEST(nested_data_and_empty_selections) {
    const char *flat = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,4],\"datatype\":"
                       "\"FP32\",\"data\":[1,0.5,-1,0.25,0,1,0.5,-0.5]}],\"outputs\":[{\"name\":"
                       "\"embeddings\"}]}";
    const char *nested = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,4],\"datatype\":"
                         "\"FP32\",\"data\":[[1,0.5,-1,0.25],[0,1,0.5,-0.5]]}],\"outputs\":[{"
                         "\"name\":\"embeddings\"}]}";
    oc_body a = {strdup(flat), strlen(flat), 0}, b = {strdup(nested), strlen(nested), 0};
    char *ta, *tb;
    oc_result ra, rb;
    attn_error err;
    ck_assert_int_eq(run(&self_m, &a, &ta, &ra, &err), 0);
    ck_assert_int_eq(run(&self_m, &b, &tb, &rb, &err), 0);
    ck_assert_str_eq(ta, tb);
    oc_result_free(&ra);
    oc_result_free(&rb);
    free(ta);
    free(tb);
    oc_body_free(&a);
    oc_body_free(&b);

    const char *none = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[2,4],\"datatype\":"
                       "\"FP32\",\"data\":[1,0.5,-1,0.25,0,1,0.5,-0.5]}],\"outputs\":[{\"name\":"
                       "\"patterns\"},{\"name\":\"delta\"}],\"parameters\":{\"select_heads\":[]}}";
    oc_body c = {strdup(none), strlen(none), 0};
    char *tc;
    oc_result rc;
    ck_assert_int_eq(run(&self_m, &c, &tc, &rc, &err), 0);
    size_t count, rank;
    long long shape[4];
    int bin;
    float *p = oc_output_values(&rc, "patterns", &count, shape, &rank, &bin);
    ck_assert_uint_eq(rank, 3);
    ck_assert_int_eq(shape[0], 0);
    ck_assert_uint_eq(count, 0);
    free(p);
    float *d = oc_output_values(&rc, "delta", &count, shape, &rank, &bin);
    ck_assert_uint_eq(count, 2 * DM);
    free(d);
    oc_result_free(&rc);
    free(tc);
    oc_body_free(&c);

    const char *no_out = "{\"inputs\":[{\"name\":\"embeddings\",\"shape\":[1,4],\"datatype\":"
                         "\"FP32\",\"data\":[1,2,3,4]}],\"outputs\":[]}";
    oc_body e = {strdup(no_out), strlen(no_out), 0};
    char *te;
    oc_result re;
    ck_assert_int_eq(run(&self_m, &e, &te, &re, &err), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(re.json, "outputs")), 0);
    oc_result_free(&re);
    free(te);
    oc_body_free(&e);
}
END_TEST

START_TEST(routes) {
    ck_assert_int_eq(srv_route_find("/v2"), SRV_ROUTE_V2);
    ck_assert_int_eq(srv_route_find("/v2/health/live"), SRV_ROUTE_V2_LIVE);
    ck_assert_int_eq(srv_route_find("/v2/health/ready"), SRV_ROUTE_V2_READY);
    ck_assert_int_eq(srv_route_find("/v2/models/demo-4d"), SRV_ROUTE_V2_MODEL);
    ck_assert_int_eq(srv_route_find("/v2/models/demo-4d/ready"), SRV_ROUTE_V2_MODEL_READY);
    ck_assert_int_eq(srv_route_find("/v2/models/demo-4d/infer"), SRV_ROUTE_V2_INFER);
    const char *other[] = {"/v2/",
                           "/v2/models",
                           "/v2/models/",
                           "/v2/models//infer",
                           "/v2/models/a/b",
                           "/v2/models/a/infer/",
                           "/v2/models/a/versions/1/infer",
                           "/v2/health",
                           "/V2"};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        ck_assert_msg(srv_route_find(other[i]) == SRV_ROUTE_OTHER, "%s", other[i]);
        ck_assert_msg(srv_route_oip(SRV_ROUTE_OTHER, other[i]) || other[i][1] == 'V', "%s",
                      other[i]);
    }
    ck_assert(!srv_route_oip(SRV_ROUTE_OTHER, "/v1/x"));
    ck_assert(!srv_route_oip(SRV_ROUTE_OTHER, "/v2x"));
    ck_assert(!srv_route_oip(SRV_ROUTE_MODEL, "/v1/models/a"));
    ck_assert(srv_route_oip(SRV_ROUTE_V2_INFER, "/v2/models/a/infer"));
    size_t len;
    const char *name = srv_route_v2_model_name("/v2/models/gpt2-small-shape/infer", &len);
    ck_assert_uint_eq(len, strlen("gpt2-small-shape"));
    ck_assert(strncmp(name, "gpt2-small-shape", len) == 0);
    name = srv_route_v2_model_name("/v2/models/demo-4d", &len);
    ck_assert_uint_eq(len, 7);
    ck_assert(srv_route_allows(SRV_ROUTE_V2_INFER, "POST"));
    ck_assert(!srv_route_allows(SRV_ROUTE_V2_INFER, "GET"));
    ck_assert(srv_route_allows(SRV_ROUTE_V2_MODEL, "HEAD"));
    ck_assert(srv_route_open(SRV_ROUTE_V2_LIVE) && srv_route_open(SRV_ROUTE_V2_READY));
    ck_assert(!srv_route_open(SRV_ROUTE_V2) && !srv_route_open(SRV_ROUTE_V2_INFER));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("oip");
    TCase *tc = tcase_create("oip");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, padded_against_reference);
    tcase_add_test(tc, positions_given_and_by_rank);
    tcase_add_test(tc, cross_attention);
    tcase_add_test(tc, bitwise_against_unpadded);
    tcase_add_test(tc, stack_layer_axis);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, metadata);
    tcase_add_test(tc, routes);
    tcase_add_test(tc, nested_data_and_empty_selections);
    tcase_add_test(tc, header_scanned_within_limits);
    tcase_add_test(tc, shapes_checked_before_allocation);
    tcase_add_test(tc, numbers_echo_nesting_heads);
    tcase_add_test(tc, numbers_quoted_as_sent);
    tcase_add_test(tc, binary_answer_read_from_outputs);
    tcase_add_test(tc, response_limit_to_the_byte);
    tcase_add_test(tc, shape_products_overflow);
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
