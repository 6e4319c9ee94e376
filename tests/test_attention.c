/*
 * test_attention.c — the check suite of attention/.
 *
 * Every case compares attn_compute (the BLAS path) and attn_compute_naive
 * (the float32 triple-loop reference) against a float64 reference written
 * here, independently of both (ref_compute below), or against numbers
 * worked out by hand (the 我爱你 example).
 *
 * Tolerance (close_check): an element passes when
 *
 *     |got − ref| <= 1e-5 · |ref|  +  1e-5 · max_j |ref_j|
 *
 * i.e. relative error 1e-5, with an absolute floor of 1e-5 of the largest
 * magnitude of the same output, so that entries near 0 (softmax tails,
 * cancelling sums) are judged against the scale of their matrix rather
 * than against themselves. −INFINITY (masked scores) must match exactly,
 * and masked pattern weights are checked to be exactly 0.0f elsewhere.
 */
#include <cblas.h>
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <sleef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "attention/attention.h"
#include "attention/naive.h"
#include "attention/vexp.h"

#define RTOL 1e-5

/* ---- small helpers ------------------------------------------------------- */

/* In the hot loops, and in helpers they call, check's ck_assert is only
 * reached on failure (if (!ok) ck_abort_msg): each ck_assert that passes
 * records its location, a write to the runner, which hundreds of thousands
 * of times would be seconds of the suite's run. */
static void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (!p) ck_abort_msg("calloc(%zu, %zu) failed", count, size);
    return p;
}

/* The code of attn_compute's error (attn_compute_with's, with a runner),
 * or NULL when it succeeds. A failure must return -1 and fill the error as
 * the engine does: one of its codes, status 0, a message, no path. */
static const char *compute_error(const attn_output *out, attn_workspace *ws, const attn_input *in,
                                 const attn_runner *runner) {
    attn_error err;
    memset(&err, 0x5a, sizeof err);
    int rc =
        runner ? attn_compute_with(out, ws, in, runner, &err) : attn_compute(out, ws, in, &err);
    if (rc == 0) return NULL;
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(err.code == ATTN_ERR_NOMEM || err.code == ATTN_ERR_NONFINITE ||
                      err.code == ATTN_ERR_STOPPED,
                  "not one of the engine's codes");
    ck_assert_int_eq(err.status, 0);
    ck_assert(err.message[0] != '\0');
    ck_assert_str_eq(err.path, "");
    return err.code;
}

/* Deterministic uniform numbers in [-1, 1) (xorshift64*). */
static double rnd(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *state = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}

static void fill(float *x, size_t count, double amp, uint64_t *state) {
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(amp * rnd(state));
}

static int mask_allows(const attn_mask *m, size_t n, size_t q, size_t k) {
    if (m->kind == ATTN_MASK_CAUSAL) return k <= q;
    if (m->kind == ATTN_MASK_NONE) return 1;
    return m->allowed[q * n + k] != 0;
}

/* got: count floats vs ref: count doubles, with the tolerance above. */
static void close_check(const char *what, const float *got, const double *ref, size_t count) {
    double scale = 0.0;
    for (size_t i = 0; i < count; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > scale) scale = fabs(ref[i]);
    for (size_t i = 0; i < count; i++) {
        /* ck_assert only on failure: check records every passing assert
         * (a write to its log), which large outputs make slow. */
        if (isinf(ref[i])) {
            if (got[i] != (float)ref[i])
                ck_abort_msg("%s[%zu]: got %.9g, want %g", what, i, (double)got[i], ref[i]);
            continue;
        }
        double err = fabs((double)got[i] - ref[i]);
        if (!(err <= RTOL * fabs(ref[i]) + RTOL * scale))
            ck_abort_msg("%s[%zu]: got %.9g, want %.9g (err %.3g, scale %.3g)", what, i,
                         (double)got[i], ref[i], err, scale);
    }
}

/* ---- a problem: weights, embeddings, mask, head list ------------------------ */

typedef struct problem {
    attn_weights w;
    attn_input in;
    float *w_qkv, *b_qkv, *w_o, *b_o, *E;
    unsigned char *allowed;
    size_t heads[16];
} problem;

typedef struct shape {
    size_t n, dm, h, dh;
    int b_qkv, w_o, b_o;
    size_t g; /* K/V heads; 0 = h */
} shape;

/* Random weights of scale 1/sqrt(dm) so that every output stays O(1). */
static void problem_make(problem *p, shape s, attn_mask_kind mask, uint64_t seed) {
    memset(p, 0, sizeof(*p));
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t hd = s.h * s.dh, ld = hd + 2 * (s.g ? s.g : s.h) * s.dh; /* w_qkv: dm × ld */
    p->w = (attn_weights){.d_model = s.dm, .n_heads = s.h, .d_head = s.dh, .n_kv_heads = s.g};
    p->w_qkv = xcalloc(s.dm * ld, sizeof(float));
    fill(p->w_qkv, s.dm * ld, 1.0 / sqrt((double)s.dm), &st);
    p->w.w_qkv = p->w_qkv;
    if (s.b_qkv) {
        p->b_qkv = xcalloc(ld, sizeof(float));
        fill(p->b_qkv, ld, 0.5, &st);
        p->w.b_qkv = p->b_qkv;
    }
    if (s.w_o) {
        p->w_o = xcalloc(hd * s.dm, sizeof(float));
        fill(p->w_o, hd * s.dm, 1.0 / sqrt((double)hd), &st);
        p->w.w_o = p->w_o;
    }
    if (s.b_o) {
        p->b_o = xcalloc(s.dm, sizeof(float));
        fill(p->b_o, s.dm, 0.5, &st);
        p->w.b_o = p->b_o;
    }
    p->E = xcalloc(s.n * s.dm, sizeof(float));
    fill(p->E, s.n * s.dm, 1.0, &st);
    p->allowed = xcalloc(s.n * s.n, 1);
    for (size_t q = 0; q < s.n; q++) /* random, diagonal always allowed */
        for (size_t k = 0; k < s.n; k++)
            p->allowed[q * s.n + k] = k == q || rnd(&st) > 0.0;
    for (size_t i = 0; i < s.h && i < 16; i++)
        p->heads[i] = i;
    p->in = (attn_input){
        .weights = &p->w,
        .embeddings = p->E,
        .n_tokens = s.n,
        .mask = {.kind = mask, .allowed = mask == ATTN_MASK_CUSTOM ? p->allowed : NULL},
        .scale = (float)(1.0 / sqrt((double)s.dh)),
        .heads = p->heads,
        .n_heads_out = s.h < 16 ? s.h : 16};
}

static void problem_free(problem *p) {
    free(p->w_qkv), free(p->b_qkv), free(p->w_o), free(p->b_o), free(p->E), free(p->allowed);
}

/* ---- outputs: every buffer, sized for hs slots ------------------------------ */

enum { O_Q, O_K, O_V, O_S, O_P, O_Z, O_D, O_E, O_COUNT };
static const char *const o_name[O_COUNT] = {
    "q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"};

typedef struct outputs {
    float *buf[O_COUNT];
    size_t count[O_COUNT]; /* floats */
} outputs;

static void outputs_sizes(size_t count[O_COUNT], const attn_input *in) {
    size_t n = in->n_tokens, hs = in->n_heads_out, dh = in->weights->d_head;
    size_t dm = in->weights->d_model;
    count[O_Q] = count[O_K] = count[O_V] = count[O_Z] = hs * n * dh;
    count[O_S] = count[O_P] = hs * n * n;
    count[O_D] = count[O_E] = n * dm;
}

static void outputs_make(outputs *o, const attn_input *in) {
    outputs_sizes(o->count, in);
    for (int b = 0; b < O_COUNT; b++)
        o->buf[b] = xcalloc(o->count[b], sizeof(float));
}

static void outputs_free(outputs *o) {
    for (int b = 0; b < O_COUNT; b++)
        free(o->buf[b]);
}

/* The attn_output asking for the buffers whose bit is set in `want`. */
static attn_output outputs_view(const outputs *o, unsigned want) {
    float *v[O_COUNT];
    for (int b = 0; b < O_COUNT; b++)
        v[b] = (want >> b) & 1 ? o->buf[b] : NULL;
    return (attn_output){.q = v[O_Q],
                         .k = v[O_K],
                         .v = v[O_V],
                         .scores = v[O_S],
                         .patterns = v[O_P],
                         .head_outputs = v[O_Z],
                         .delta = v[O_D],
                         .embeddings = v[O_E]};
}
#define WANT_ALL ((1u << O_COUNT) - 1)

/* ---- the float64 reference ---------------------------------------------------- */

typedef struct ref64 {
    double *buf[O_COUNT]; /* same layout as outputs */
} ref64;

/*
 * Straight from the formulas of API.md, in double: per head i, Q_i from
 * columns i·dh of w_qkv, K and V from those of its K/V head u = i / (h/g)
 * (columns hd + u·dh and hd + g·dh + u·dh, g = n_kv_heads or h);
 * S_i = scale·Q_i·K_uᵀ (−inf where masked); P_i the stable softmax (a row
 * with nothing allowed: zeros); Z_i = P_i·V_u; ΔE = [Z_1 … Z_h]·Wo + bo;
 * E' = E + ΔE. Per-head outputs by slot, k and v those of the K/V head.
 */
static void ref_compute(ref64 *r, const attn_input *in) {
    const attn_weights *w = in->weights;
    size_t n = in->n_tokens, dm = w->d_model, h = w->n_heads, dh = w->d_head;
    size_t g = w->n_kv_heads ? w->n_kv_heads : h;
    size_t hd = h * dh, ld = hd + 2 * g * dh, hs = in->n_heads_out;
    size_t count[O_COUNT];
    outputs_sizes(count, in);
    for (int b = 0; b < O_COUNT; b++)
        r->buf[b] = xcalloc(count[b], sizeof(double));

    double *qkv = xcalloc(n * ld, sizeof(double)); /* n × ld */
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < ld; c++) {
            double a = w->b_qkv ? w->b_qkv[c] : 0.0;
            for (size_t x = 0; x < dm; x++)
                a += (double)in->embeddings[t * dm + x] * w->w_qkv[x * ld + c];
            qkv[t * ld + c] = a;
        }
    /* head i's columns of Q, K, V in a row of qkv */
    size_t *cq = xcalloc(h, sizeof(size_t)), *ck = xcalloc(h, sizeof(size_t));
    size_t *cv = xcalloc(h, sizeof(size_t));
    for (size_t i = 0; i < h; i++) {
        size_t u = i / (h / g);
        cq[i] = i * dh, ck[i] = hd + u * dh, cv[i] = hd + g * dh + u * dh;
    }
    double *S = xcalloc(h * n * n, sizeof(double)), *P = xcalloc(h * n * n, sizeof(double));
    double *Z = xcalloc(n * hd, sizeof(double)); /* n × hd */
    for (size_t i = 0; i < h; i++) {
        double *s = S + i * n * n, *p = P + i * n * n;
        for (size_t q = 0; q < n; q++) {
            double max = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < n; k++) {
                double d = 0.0;
                for (size_t c = 0; c < dh; c++)
                    d += qkv[q * ld + cq[i] + c] * qkv[k * ld + ck[i] + c];
                s[q * n + k] = mask_allows(&in->mask, n, q, k) ? (double)in->scale * d : -INFINITY;
                if (s[q * n + k] > max) max = s[q * n + k];
            }
            for (size_t k = 0; k < n; k++) {
                p[q * n + k] = isinf(s[q * n + k]) ? 0.0 : exp(s[q * n + k] - max);
                sum += p[q * n + k];
            }
            for (size_t k = 0; k < n; k++)
                p[q * n + k] = sum > 0 ? p[q * n + k] / sum : 0.0;
            for (size_t c = 0; c < dh; c++) {
                double z = 0.0;
                for (size_t k = 0; k < n; k++)
                    z += p[q * n + k] * qkv[k * ld + cv[i] + c];
                Z[q * hd + i * dh + c] = z;
            }
        }
    }
    for (size_t j = 0; j < hs; j++) {
        size_t i = in->heads[j];
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < dh; c++) {
                size_t o = j * n * dh + t * dh + c;
                r->buf[O_Q][o] = qkv[t * ld + cq[i] + c];
                r->buf[O_K][o] = qkv[t * ld + ck[i] + c];
                r->buf[O_V][o] = qkv[t * ld + cv[i] + c];
                r->buf[O_Z][o] = Z[t * hd + i * dh + c];
            }
        memcpy(r->buf[O_S] + j * n * n, S + i * n * n, n * n * sizeof(double));
        memcpy(r->buf[O_P] + j * n * n, P + i * n * n, n * n * sizeof(double));
    }
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < dm; c++) {
            double d = w->b_o ? w->b_o[c] : 0.0;
            if (w->w_o)
                for (size_t x = 0; x < hd; x++)
                    d += Z[t * hd + x] * w->w_o[x * dm + c];
            else
                d += Z[t * hd + c];
            r->buf[O_D][t * dm + c] = d;
            r->buf[O_E][t * dm + c] = in->embeddings[t * dm + c] + d;
        }
    free(qkv), free(S), free(P), free(Z), free(cq), free(ck), free(cv);
}

static void ref_free(ref64 *r) {
    for (int b = 0; b < O_COUNT; b++)
        free(r->buf[b]);
}

/* Compares the outputs selected by `want` with the reference. */
static void outputs_check(const char *who, const outputs *o, const ref64 *r, unsigned want) {
    char what[96];
    for (int b = 0; b < O_COUNT; b++) {
        if (!((want >> b) & 1)) continue;
        snprintf(what, sizeof what, "%s %s", who, o_name[b]);
        close_check(what, o->buf[b], r->buf[b], o->count[b]);
    }
}

/* Runs both paths on `in` with every output, checks them against the
 * float64 reference, and leaves the engine's outputs in *o (caller frees). */
static void run_and_check(outputs *o, const attn_input *in) {
    ref64 r;
    ref_compute(&r, in);
    outputs_make(o, in);
    attn_output view = outputs_view(o, WANT_ALL);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(attn_compute(&view, ws, in, NULL), 0);
    attn_workspace_destroy(ws);
    outputs_check("blas", o, &r, WANT_ALL);

    outputs nv;
    outputs_make(&nv, in);
    attn_output nview = outputs_view(&nv, WANT_ALL);
    const attn_weights *w = in->weights;
    float *scratch = xcalloc(
        attn_naive_scratch_floats(in->n_tokens, w->d_model, w->n_heads, w->d_head), sizeof(float));
    attn_compute_naive(&nview, scratch, in);
    free(scratch);
    outputs_check("naive", &nv, &r, WANT_ALL);
    outputs_free(&nv);
    ref_free(&r);
}

/* Masked entries: scores exactly −inf, weights exactly 0; allowed weights
 * positive; every row with an allowed key sums to 1, others are all 0. */
static void pattern_rules(const outputs *o, const attn_input *in) {
    size_t n = in->n_tokens;
    for (size_t j = 0; j < in->n_heads_out; j++)
        for (size_t q = 0; q < n; q++) {
            const float *s = o->buf[O_S] + j * n * n + q * n, *p = o->buf[O_P] + j * n * n + q * n;
            double sum = 0.0;
            int any = 0;
            for (size_t k = 0; k < n; k++) { /* ck_ only on failure, as in close_check */
                if (isnan(p[k]) || isnan(s[k])) ck_abort_msg("NaN at [%zu][%zu]", q, k);
                if (mask_allows(&in->mask, n, q, k)) {
                    any = 1;
                    if (!isfinite(s[k]) || !(p[k] >= 0.0f))
                        ck_abort_msg("allowed [%zu][%zu]: s %g p %g", q, k, (double)s[k],
                                     (double)p[k]);
                } else {
                    if (s[k] != -INFINITY) ck_abort_msg("score [%zu][%zu] not -inf", q, k);
                    if (p[k] != 0.0f)
                        ck_abort_msg("masked weight [%zu][%zu] = %g", q, k, (double)p[k]);
                }
                sum += p[k];
            }
            if (any && !(fabs(sum - 1.0) < 1e-6)) ck_abort_msg("row %zu sums to %.9g", q, sum);
            if (!any && sum != 0.0) ck_abort_msg("row %zu, no key allowed, sums to %.9g", q, sum);
        }
}

/* ---- 1. the worked example 我爱你 --------------------------------------------- */

/*
 * Three tokens 我 爱 你 in d_model 4, one head of width 4, no mask, scale
 * 1/2, no W_o (h·dh == dm, so ΔE = Z). Weights chosen so that every product
 * can be followed by hand: w_v maps e = (a, b, c, d) to (a, −c, b, 2d).
 */
START_TEST(test_worked_example) {
    static const float E[3][4] = {{0.1f, -0.2f, 0.3f, 0.1f},  /* 我 */
                                  {-0.1f, 0.2f, 0.2f, -0.3f}, /* 爱 */
                                  {0.2f, 0.1f, -0.1f, 0.2f}}; /* 你 */
    static const float Wq[4][4] = {{1, 0, 2, 0}, {0, 1, 0, -1}, {-1, 0, 1, 0}, {0, 2, 0, 1}};
    static const float Wk[4][4] = {{0, 1, 0, 1}, {1, 0, -1, 0}, {0, 0, 1, 2}, {2, -1, 0, 0}};
    static const float Wv[4][4] = {{1, 0, 0, 0}, {0, 0, 1, 0}, {0, -1, 0, 0}, {0, 0, 0, 2}};

    /* Q = E·Wq, e.g. Q[0][0] = 0.1·1 + 0.3·(−1) = −0.2, Q[0][2] = 0.1·2 + 0.3·1 = 0.5 */
    static const double Q[3][4] = {
        {-0.2, 0.0, 0.5, 0.3}, {-0.3, -0.4, 0.0, -0.5}, {0.3, 0.5, 0.3, 0.1}};
    /* K = E·Wk, e.g. K[0][3] = 0.1·1 + 0.3·2 = 0.7 */
    static const double K[3][4] = {
        {0.0, 0.0, 0.5, 0.7}, {-0.4, 0.2, 0.0, 0.3}, {0.5, 0.0, -0.2, 0.0}};
    /* V = (a, −c, b, 2d) of each row of E */
    static const double V[3][4] = {
        {0.1, -0.3, -0.2, 0.2}, {-0.1, -0.2, 0.2, -0.6}, {0.2, 0.1, 0.1, 0.4}};
    /* S = ½·Q·Kᵀ, e.g. S[0][0] = ½(0.5·0.5 + 0.3·0.7) = 0.23 */
    static const double S[3][3] = {
        {0.23, 0.085, -0.1}, {-0.175, -0.055, -0.075}, {0.11, 0.005, 0.045}};
    double P[3][3];
    for (int q = 0; q < 3; q++) { /* softmax by hand: exp(s) / Σ exp(s) */
        double z = exp(S[q][0]) + exp(S[q][1]) + exp(S[q][2]);
        for (int k = 0; k < 3; k++)
            P[q][k] = exp(S[q][k]) / z;
    }
    /* spot values of the row above: P[0] = (0.387005, 0.334768, 0.278227) */
    ck_assert(fabs(P[0][0] - 0.387004987615) < 1e-11 && fabs(P[0][2] - 0.278227070553) < 1e-11);
    /* Z = P·V, e.g. Z[0][0] = 0.387005·0.1 − 0.334768·0.1 + 0.278227·0.2 */
    static const double Z[3][4] = {
        {0.0608691186889, -0.155232377596, 0.0173752978987, -0.012168939355},
        {0.0644311489143, -0.128371459141, 0.0420756080783, -0.0106505667055},
        {0.0695642482228, -0.136166648842, 0.0259998094095, 0.0122056705491}};
    /* E' = E + ΔE, ΔE = Z (no W_o) */
    static const double E2[3][4] = {
        {0.160869118689, -0.355232377596, 0.317375297899, 0.087831060645},
        {-0.0355688510857, 0.0716285408591, 0.242075608078, -0.310650566705},
        {0.269564248223, -0.0361666488419, -0.0740001905905, 0.212205670549}};

    /* Pack w_qkv: dm × 3hd = [Wq | Wk | Wv]. */
    float w_qkv[4 * 12];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            w_qkv[r * 12 + c] = Wq[r][c];
            w_qkv[r * 12 + 4 + c] = Wk[r][c];
            w_qkv[r * 12 + 8 + c] = Wv[r][c];
        }
    attn_weights w = {.d_model = 4, .n_heads = 1, .d_head = 4, .w_qkv = w_qkv};
    size_t heads[1] = {0};
    attn_input in = {.weights = &w,
                     .embeddings = &E[0][0],
                     .n_tokens = 3,
                     .mask = {.kind = ATTN_MASK_NONE},
                     .scale = 0.5f,
                     .heads = heads,
                     .n_heads_out = 1};

    for (int path = 0; path < 2; path++) {
        const char *who = path ? "naive" : "blas";
        outputs o;
        outputs_make(&o, &in);
        attn_output view = outputs_view(&o, WANT_ALL);
        if (path == 0) {
            attn_workspace *ws = attn_workspace_create();
            ck_assert_int_eq(attn_compute(&view, ws, &in, NULL), 0);
            attn_workspace_destroy(ws);
        } else {
            float scratch[256];
            ck_assert_uint_le(attn_naive_scratch_floats(3, 4, 1, 4), 256);
            attn_compute_naive(&view, scratch, &in);
        }
        char what[64];
        snprintf(what, sizeof what, "%s Q", who), close_check(what, o.buf[O_Q], &Q[0][0], 12);
        snprintf(what, sizeof what, "%s K", who), close_check(what, o.buf[O_K], &K[0][0], 12);
        snprintf(what, sizeof what, "%s V", who), close_check(what, o.buf[O_V], &V[0][0], 12);
        snprintf(what, sizeof what, "%s S", who), close_check(what, o.buf[O_S], &S[0][0], 9);
        snprintf(what, sizeof what, "%s P", who), close_check(what, o.buf[O_P], &P[0][0], 9);
        snprintf(what, sizeof what, "%s Z", who), close_check(what, o.buf[O_Z], &Z[0][0], 12);
        snprintf(what, sizeof what, "%s dE", who), close_check(what, o.buf[O_D], &Z[0][0], 12);
        snprintf(what, sizeof what, "%s E'", who), close_check(what, o.buf[O_E], &E2[0][0], 12);
        outputs_free(&o);
    }
}
END_TEST

/* ---- 2. masks ---------------------------------------------------------------- */

static const attn_mask_kind mask_kinds[] = {ATTN_MASK_CAUSAL, ATTN_MASK_NONE, ATTN_MASK_CUSTOM};

START_TEST(test_masks) {
    problem p;
    problem_make(&p, (shape){.n = 7, .dm = 8, .h = 2, .dh = 4, .b_qkv = 1, .w_o = 1, .b_o = 1},
                 mask_kinds[_i], 11 + _i);
    outputs o;
    run_and_check(&o, &p.in);
    pattern_rules(&o, &p.in);
    outputs_free(&o);
    problem_free(&p);
}
END_TEST

/* A custom mask with a row that allows nothing: that row is 0 in P and Z
 * (not NaN), so ΔE's row is just b_o. */
START_TEST(test_mask_empty_row) {
    problem p;
    shape s = {.n = 5, .dm = 8, .h = 2, .dh = 4, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem_make(&p, s, ATTN_MASK_CUSTOM, 5);
    memset(p.allowed + 2 * s.n, 0, s.n); /* row 2: nothing */
    memset(p.allowed + 4 * s.n, 0, s.n); /* row 4: only key 0 */
    p.allowed[4 * s.n + 0] = 1;
    outputs o;
    run_and_check(&o, &p.in);
    pattern_rules(&o, &p.in);
    for (int b = 0; b < O_COUNT; b++)
        for (size_t x = 0; x < o.count[b]; x++)
            ck_assert(!isnan(o.buf[b][x]));
    for (size_t j = 0; j < s.h; j++) {
        for (size_t k = 0; k < s.n; k++) {
            ck_assert(o.buf[O_P][j * s.n * s.n + 2 * s.n + k] == 0.0f);
            ck_assert(o.buf[O_S][j * s.n * s.n + 2 * s.n + k] == -INFINITY);
        }
        ck_assert(o.buf[O_P][j * s.n * s.n + 4 * s.n + 0] == 1.0f);
        for (size_t c = 0; c < s.dh; c++)
            ck_assert(o.buf[O_Z][j * s.n * s.dh + 2 * s.dh + c] == 0.0f);
    }
    for (size_t c = 0; c < s.dm; c++) {
        ck_assert(o.buf[O_D][2 * s.dm + c] == p.b_o[c]);
        ck_assert(o.buf[O_E][2 * s.dm + c] == p.E[2 * s.dm + c] + p.b_o[c]);
    }
    outputs_free(&o);
    problem_free(&p);
}
END_TEST

/* ---- 3. biases and W_o ----------------------------------------------------------- */

START_TEST(test_biases) {
    /* _i: bit 0 b_qkv, bit 1 b_o (with w_o); compare against the reference,
     * and check that the biases moved the result (so they were applied). */
    problem p;
    shape s = {.n = 6, .dm = 12, .h = 3, .dh = 4, .b_qkv = _i & 1, .w_o = 1, .b_o = (_i >> 1) & 1};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 21);
    outputs o, plain;
    run_and_check(&o, &p.in);
    p.w.b_qkv = NULL, p.w.b_o = NULL;
    run_and_check(&plain, &p.in);
    int moved = 0;
    for (size_t x = 0; x < o.count[O_E]; x++)
        moved |= o.buf[O_E][x] != plain.buf[O_E][x];
    ck_assert_int_eq(moved, _i != 0);
    outputs_free(&o), outputs_free(&plain);
    problem_free(&p);
}
END_TEST

/* W_o absent (h·dh == dm) is the identity: bit for bit the same as an
 * explicit identity matrix, with and without b_o. */
START_TEST(test_identity_wo) {
    problem p;
    shape s = {.n = 6, .dm = 8, .h = 2, .dh = 4, .b_qkv = 1, .w_o = 0, .b_o = _i};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 31);
    outputs a, b;
    run_and_check(&a, &p.in);
    float *eye = xcalloc(s.dm * s.dm, sizeof(float));
    for (size_t x = 0; x < s.dm; x++)
        eye[x * s.dm + x] = 1.0f;
    p.w.w_o = eye;
    run_and_check(&b, &p.in);
    for (int o = 0; o < O_COUNT; o++)
        for (size_t x = 0; x < a.count[o]; x++)
            ck_assert_msg(a.buf[o][x] == b.buf[o][x], "%s[%zu] differs", o_name[o], x);
    free(eye);
    outputs_free(&a), outputs_free(&b);
    problem_free(&p);
}
END_TEST

/* ---- 4. shapes: h = 1, 2, 12, GPT-2 width -------------------------------------- */

static const shape shapes[] = {
    {.n = 5, .dm = 8, .h = 1, .dh = 8, .b_qkv = 1, .w_o = 0, .b_o = 0},
    {.n = 1, .dm = 4, .h = 1, .dh = 4, .b_qkv = 0, .w_o = 1, .b_o = 1}, /* one token */
    {.n = 7, .dm = 8, .h = 2, .dh = 4, .b_qkv = 0, .w_o = 0, .b_o = 1},
    {.n = 6, .dm = 10, .h = 2, .dh = 3, .b_qkv = 1, .w_o = 1, .b_o = 1}, /* hd != dm */
    {.n = 9, .dm = 48, .h = 12, .dh = 4, .b_qkv = 1, .w_o = 0, .b_o = 0},
    {.n = 9, .dm = 48, .h = 12, .dh = 4, .b_qkv = 1, .w_o = 1, .b_o = 1},
    {.n = 16, .dm = 768, .h = 12, .dh = 64, .b_qkv = 1, .w_o = 1, .b_o = 1}, /* GPT-2 small */
};

START_TEST(test_shapes) {
    for (int m = 0; m < 3; m++) {
        problem p;
        problem_make(&p, shapes[_i], mask_kinds[m], 41 + _i);
        outputs o;
        run_and_check(&o, &p.in);
        pattern_rules(&o, &p.in);
        outputs_free(&o);
        problem_free(&p);
    }
}
END_TEST

/* ---- 5. select_heads --------------------------------------------------------------- */

/* Subsets and orders; per-head outputs follow the list, delta and
 * embeddings always use all heads (equal to the run with every head). */
static const size_t head_lists[][4] = {{1, 0}, {1}, {2, 0, 2}, {0}, {2, 1, 0}};
static const size_t head_counts[] = {2, 1, 3, 0, 3};

START_TEST(test_select_heads) {
    problem p;
    shape s = {.n = 6, .dm = 12, .h = 3, .dh = 4, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 51);
    outputs all;
    run_and_check(&all, &p.in); /* heads 0, 1, 2 */

    memcpy(p.heads, head_lists[_i], sizeof head_lists[_i]);
    p.in.n_heads_out = head_counts[_i];
    outputs o;
    run_and_check(&o, &p.in);
    for (size_t j = 0; j < p.in.n_heads_out; j++) { /* slot j is head heads[j] of the full run */
        size_t i = p.heads[j];
        ck_assert(!memcmp(o.buf[O_P] + j * s.n * s.n, all.buf[O_P] + i * s.n * s.n,
                          s.n * s.n * sizeof(float)));
        ck_assert(!memcmp(o.buf[O_Q] + j * s.n * s.dh, all.buf[O_Q] + i * s.n * s.dh,
                          s.n * s.dh * sizeof(float)));
    }
    ck_assert(!memcmp(o.buf[O_D], all.buf[O_D], o.count[O_D] * sizeof(float)));
    ck_assert(!memcmp(o.buf[O_E], all.buf[O_E], o.count[O_E] * sizeof(float)));

    /* Per-head outputs only (no delta/embeddings): only the listed heads are
     * computed, on the per-block projection path; same values. */
    ref64 r;
    ref_compute(&r, &p.in);
    outputs ph;
    outputs_make(&ph, &p.in);
    unsigned want = WANT_ALL & ~(1u << O_D) & ~(1u << O_E);
    attn_output view = outputs_view(&ph, want);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&view, ws, &p.in, NULL), 0);
    attn_workspace_destroy(ws);
    outputs_check("per-head only", &ph, &r, want);
    ref_free(&r);
    outputs_free(&ph);
    outputs_free(&o), outputs_free(&all);
    problem_free(&p);
}
END_TEST

/* ---- 6. stability: scores around 1000 ---------------------------------------------- */

/*
 * Small integers everywhere, so Q, K and the scores are exact in float32 and
 * the only rounding is in the softmax. Scores reach ~1000: without the row
 * max subtracted, expf overflows to inf and P becomes NaN. Tokens 1 and 3
 * are equal, so some rows split their weight evenly between two keys.
 */
START_TEST(test_large_scores) {
    static const float E[4][4] = {{3, 1, -2, 4}, {2, -3, 1, 1}, {-1, 2, 3, -2}, {2, -3, 1, 1}};
    float w_qkv[4 * 12] = {0};
    for (int r = 0; r < 4; r++) {
        w_qkv[r * 12 + r] = 4.0f;           /* W_q = 4·I */
        w_qkv[r * 12 + 4 + r] = 4.0f;       /* W_k = 4·I */
        w_qkv[r * 12 + 8 + (3 - r)] = 1.0f; /* W_v reverses the row */
    }
    attn_weights w = {.d_model = 4, .n_heads = 1, .d_head = 4, .w_qkv = w_qkv};
    size_t heads[1] = {0};
    attn_input in = {.weights = &w,
                     .embeddings = &E[0][0],
                     .n_tokens = 4,
                     .mask = {.kind = mask_kinds[_i]},
                     .scale = 2.0f,
                     .heads = heads,
                     .n_heads_out = 1};
    unsigned char allowed[16];
    for (int x = 0; x < 16; x++)
        allowed[x] = (x % 5) != 1;
    in.mask.allowed = allowed;
    outputs o;
    run_and_check(&o, &in);
    pattern_rules(&o, &in);
    float smax = 0.0f;
    for (size_t x = 0; x < 16; x++)
        if (isfinite(o.buf[O_S][x]) && fabsf(o.buf[O_S][x]) > smax) smax = fabsf(o.buf[O_S][x]);
    ck_assert_msg(smax >= 900.0f, "scores only reach %g", (double)smax);
    ck_assert(o.buf[O_S][0] == 960.0f);     /* 2 · 16 · (9+1+4+16) exactly */
    if (mask_kinds[_i] == ATTN_MASK_NONE) { /* row 1: keys 1 and 3 tie */
        ck_assert(o.buf[O_P][4 + 1] == 0.5f && o.buf[O_P][4 + 3] == 0.5f);
    }
    outputs_free(&o);
}
END_TEST

/* ---- 7. outputs not asked for are not touched; work not asked for not done --------- */

#define GUARD 16
static const float canary = 1234.5f;

/* Every subset of the 8 outputs, for two head lists: the outputs given are
 * right, the floats around them untouched. */
START_TEST(test_null_outputs) {
    problem p;
    shape s = {.n = 5, .dm = 8, .h = 2, .dh = 4, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 61);
    static const size_t lists[2][2] = {{1, 0}, {1, 1}};
    p.in.n_heads_out = _i == 2 ? 1 : 2;
    memcpy(p.heads, lists[_i & 1], sizeof lists[0]);
    ref64 r;
    ref_compute(&r, &p.in);
    size_t count[O_COUNT];
    outputs_sizes(count, &p.in);
    float *raw[O_COUNT];
    outputs o;
    for (int b = 0; b < O_COUNT; b++) {
        raw[b] = xcalloc(count[b] + 2 * GUARD, sizeof(float));
        o.buf[b] = raw[b] + GUARD;
        o.count[b] = count[b];
    }
    attn_workspace *ws = attn_workspace_create();
    for (unsigned want = 0; want <= WANT_ALL; want++) {
        for (int b = 0; b < O_COUNT; b++)
            for (size_t x = 0; x < count[b] + 2 * GUARD; x++)
                raw[b][x] = canary;
        attn_output view = outputs_view(&o, want);
        ck_assert_int_eq(attn_compute(&view, ws, &p.in, NULL), 0);
        char who[32];
        snprintf(who, sizeof who, "want %#x", want);
        outputs_check(who, &o, &r, want);
        for (int b = 0; b < O_COUNT; b++)
            for (size_t x = 0; x < count[b] + 2 * GUARD; x++) {
                int inside = x >= GUARD && x < GUARD + count[b] && ((want >> b) & 1);
                if (!inside && raw[b][x] != canary)
                    ck_abort_msg("want %#x: %s[%td] written", want, o_name[b],
                                 (ptrdiff_t)x - GUARD);
            }
    }
    attn_workspace_destroy(ws);
    for (int b = 0; b < O_COUNT; b++)
        free(raw[b]);
    ref_free(&r);
    problem_free(&p);
}
END_TEST

/* Scratch reveals the work: no scratch past QKV when only q/k/v are wanted
 * or when scores and patterns both go to the caller; and never an n × n
 * buffer, whatever is asked (rows of B × n or a B × K tile at most). n is
 * large so that n × n floats would dominate. */
START_TEST(test_work_not_asked) {
    problem p;
    shape s = {.n = 1024, .dm = 8, .h = 4, .dh = 2, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 71);
    p.in.n_heads_out = 2;
    outputs o;
    outputs_make(&o, &p.in);
    const size_t nn = s.n * s.n * sizeof(float);
    const size_t qkv = s.n * 3 * s.h * s.dh * sizeof(float);
    struct {
        unsigned want;
        int scratch; /* beyond QKV and the slot table */
    } cases[] = {
        {1u << O_Q, 0},
        {(1u << O_Q) | (1u << O_K) | (1u << O_V), 0},
        {1u << O_S, 0},
        {1u << O_P, 0},
        {(1u << O_S) | (1u << O_P) | (1u << O_Z), 0},
        {1u << O_Z, 1},
        {(1u << O_S) | (1u << O_Z), 1},
        {1u << O_E, 1},
        {WANT_ALL, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        attn_workspace *ws = attn_workspace_create();
        attn_output view = outputs_view(&o, cases[c].want);
        ck_assert_int_eq(attn_compute(&view, ws, &p.in, NULL), 0);
        size_t bytes = attn_workspace_bytes(ws);
        if (cases[c].scratch)
            ck_assert_msg(bytes > qkv + 1024 && bytes < nn / 4, "want %#x: %zu bytes",
                          cases[c].want, bytes);
        else
            /* QKV padded to 12 rows, the batch of one's plan and call */
            ck_assert_msg(bytes <= qkv + 4096, "want %#x: %zu bytes", cases[c].want, bytes);
        ck_assert_uint_le(bytes, attn_workspace_need(s.n, s.dm, s.h, s.dh));
        attn_workspace_destroy(ws);
    }
    ck_assert_uint_lt(attn_workspace_need(s.n, s.dm, s.h, s.dh), nn / 4);
    outputs_free(&o);
    problem_free(&p);
}
END_TEST

/* ---- 8. threads and the workspace ---------------------------------------------------- */

typedef struct thread_job {
    const attn_input *in;
    const outputs *expect;
    int mismatches, failures;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *job = arg;
    attn_workspace *ws = attn_workspace_create();
    outputs o = {0};
    outputs_sizes(o.count, job->in);
    for (int b = 0; b < O_COUNT; b++)
        o.buf[b] = calloc(o.count[b], sizeof(float));
    for (int it = 0; it < 20 && ws; it++) {
        attn_output view = outputs_view(&o, WANT_ALL);
        if (attn_compute(&view, ws, job->in, NULL) != 0) job->failures++;
        for (int b = 0; b < O_COUNT; b++)
            if (memcmp(o.buf[b], job->expect->buf[b], o.count[b] * sizeof(float)))
                job->mismatches++;
    }
    if (!ws) job->failures++;
    for (int b = 0; b < O_COUNT; b++)
        free(o.buf[b]);
    attn_workspace_destroy(ws);
    return NULL;
}

START_TEST(test_threads) {
    problem p;
    shape s = {.n = 48, .dm = 64, .h = 4, .dh = 16, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem_make(&p, s, ATTN_MASK_CAUSAL, 81);
    outputs expect;
    run_and_check(&expect, &p.in);
    enum { T = 4 };
    pthread_t th[T];
    thread_job jobs[T];
    for (int t = 0; t < T; t++) {
        jobs[t] = (thread_job){.in = &p.in, .expect = &expect};
        ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(jobs[t].failures, 0);
        ck_assert_int_eq(jobs[t].mismatches, 0);
    }
    outputs_free(&expect);
    problem_free(&p);
}
END_TEST

START_TEST(test_workspace_grows) {
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_nonnull(ws);
    ck_assert_uint_eq(attn_workspace_bytes(ws), 0);
    problem small, big;
    problem_make(&small, (shape){.n = 4, .dm = 8, .h = 2, .dh = 4, .w_o = 1}, ATTN_MASK_CAUSAL, 91);
    problem_make(&big, (shape){.n = 64, .dm = 8, .h = 2, .dh = 4, .w_o = 1}, ATTN_MASK_CAUSAL, 92);
    ref64 rs, rb;
    ref_compute(&rs, &small.in), ref_compute(&rb, &big.in);
    outputs os, ob;
    outputs_make(&os, &small.in), outputs_make(&ob, &big.in);
    attn_output vs = outputs_view(&os, WANT_ALL), vb = outputs_view(&ob, WANT_ALL);

    ck_assert_int_eq(attn_compute(&vs, ws, &small.in, NULL), 0);
    size_t b1 = attn_workspace_bytes(ws);
    ck_assert_uint_gt(b1, 0);
    ck_assert_uint_le(b1, attn_workspace_need(4, 8, 2, 4));
    ck_assert_int_eq(attn_compute(&vs, ws, &small.in, NULL), 0); /* same size: reused */
    ck_assert_uint_eq(attn_workspace_bytes(ws), b1);
    ck_assert_int_eq(attn_compute(&vb, ws, &big.in, NULL), 0); /* grows */
    size_t b2 = attn_workspace_bytes(ws);
    ck_assert_uint_gt(b2, b1);
    ck_assert_uint_le(b2, attn_workspace_need(64, 8, 2, 4));
    memset(os.buf[O_E], 0, os.count[O_E] * sizeof(float));
    ck_assert_int_eq(attn_compute(&vs, ws, &small.in, NULL), 0); /* never shrinks */
    ck_assert_uint_eq(attn_workspace_bytes(ws), b2);
    outputs_check("small after big", &os, &rs, WANT_ALL);
    outputs_check("big", &ob, &rb, WANT_ALL);

    /* trim: kept when within the bound, freed above it, and usable again */
    attn_workspace_trim(ws, b2);
    ck_assert_uint_eq(attn_workspace_bytes(ws), b2);
    attn_workspace_trim(ws, b1);
    ck_assert_uint_eq(attn_workspace_bytes(ws), 0);
    ck_assert_int_eq(attn_compute(&vb, ws, &big.in, NULL), 0);
    ck_assert_uint_eq(attn_workspace_bytes(ws), b2);
    outputs_check("big after trim", &ob, &rb, WANT_ALL);

    /* no workspace at all: an error, as a failed growth, never a fault */
    ck_assert_ptr_null(attn_workspace_reserve(NULL, 64));
    ck_assert_uint_eq(attn_workspace_bytes(NULL), 0);
    ck_assert_ptr_eq(compute_error(&vs, NULL, &small.in, NULL), ATTN_ERR_NOMEM);

    outputs_free(&os), outputs_free(&ob);
    ref_free(&rs), ref_free(&rb);
    problem_free(&small), problem_free(&big);
    attn_workspace_destroy(ws);
    attn_workspace_destroy(NULL); /* allowed, like free(NULL) */
}
END_TEST

/* ---- 9. sizes: flops, workspace need, overflow ------------------------------------------ */

START_TEST(test_sizes) {
    /* 3 tokens, dm 4, one head of 4: E·w_qkv 2·3·12·4 = 288, Q·Kᵀ and P·V
     * 2·3·3·4 = 72 each, w_o 2·3·4·4 = 96. */
    ck_assert(attn_flops(3, 4, 1, 4, 0) == 432.0);
    ck_assert(attn_flops(3, 4, 1, 4, 1) == 528.0);
    /* GPT-2 small block at n = 1024 */
    double f = 2.0 * 1024 * 2304 * 768 + 12 * 2 * (2.0 * 1024 * 1024 * 64) + 2.0 * 1024 * 768 * 768;
    ck_assert(attn_flops(1024, 768, 12, 64, 1) == f);
    ck_assert(attn_flops(SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, 1) > 1e70); /* no overflow */

    size_t need = attn_workspace_need(3, 4, 1, 4);
    ck_assert_uint_ge(need, (3 * 12 + 9 + 3 * 4) * sizeof(float) + sizeof(size_t));
    ck_assert_uint_eq(attn_workspace_need(SIZE_MAX / 2, 4, 1, 4), SIZE_MAX);
    ck_assert_uint_eq(attn_workspace_need(1 << 20, 4, SIZE_MAX / 4, 4), SIZE_MAX);
    /* linear in n: no n × n scratch, so n = 2³³ (n² · 4 overflows) is sized */
    size_t huge = attn_workspace_need((size_t)1 << 33, 4, 1, 4);
    ck_assert_uint_lt(huge, SIZE_MAX);
    /* per row: QKV 12, Z 4, ΔE 4, E's padded copy 4 floats; 128 rows of P; positions;
     * the two packed products' maps of rows (2 × 8 bytes) */
    ck_assert_uint_le(huge, ((size_t)1 << 33) * 4 * (12 + 4 + 4 + 4 + 128 + 1 + 4) + 4096);

    /* A size that overflows makes attn_compute fail cleanly, touching nothing. */
    float dummy = canary, w_qkv[12] = {0};
    attn_weights w = {.d_model = 4, .n_heads = 1, .d_head = 4, .w_qkv = w_qkv};
    attn_input in = {.weights = &w,
                     .embeddings = &dummy,
                     .n_tokens = SIZE_MAX / 2,
                     .mask = {.kind = ATTN_MASK_CAUSAL},
                     .scale = 1.0f};
    attn_output out = {.embeddings = &dummy};
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NOMEM);
    ck_assert_str_eq(ATTN_ERR_NOMEM, "out_of_memory"); /* the contract's code, as it is */
    ck_assert_uint_eq(attn_workspace_bytes(ws), 0);
    ck_assert(dummy == canary);
    attn_output none = {0}; /* nothing asked: nothing to size, nothing done */
    ck_assert_int_eq(attn_compute(&none, ws, &in, NULL), 0);
    ck_assert_uint_eq(attn_workspace_bytes(ws), 0);
    attn_workspace_destroy(ws);
}
END_TEST

/*
 * Scores that overflow float32 where attention is allowed are an error, not
 * a masked key: d_model 1, W = 1, tokens 1 and 1e20 give S = [[1, 1e20],
 * [1e20, inf]]. Only a mask that hides S[1][1] makes it computable. A
 * −inf score (w_k = −1) is refused alike, and so is inf · 0 = NaN.
 */
START_TEST(test_overflowing_scores) {
    float e[2] = {1.0f, 1e20f};
    float qkv_pos[3] = {1, 1, 1}, qkv_neg[3] = {1, -1, 1};
    attn_weights w = {.d_model = 1, .n_heads = 1, .d_head = 1, .w_qkv = qkv_pos};
    unsigned char hide_11[4] = {1, 1, 1, 0}, all[4] = {1, 1, 1, 1};
    size_t head0 = 0;
    attn_input in = {.weights = &w,
                     .embeddings = e,
                     .n_tokens = 2,
                     .scale = 1.0f,
                     .heads = &head0,
                     .n_heads_out = 1};
    float patterns[4], scores[4], emb[2];
    attn_output out = {.scores = scores, .patterns = patterns, .embeddings = emb};
    attn_workspace *ws = attn_workspace_create();

    in.mask = (attn_mask){ATTN_MASK_CUSTOM, hide_11};
    ck_assert_int_eq(attn_compute(&out, ws, &in, NULL), 0);
    ck_assert(scores[3] == -INFINITY && patterns[3] == 0.0f);
    ck_assert(patterns[2] == 1.0f); /* row 1 keeps key 0 only */

    in.mask = (attn_mask){ATTN_MASK_CUSTOM, all};
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NONFINITE);
    in.mask = (attn_mask){ATTN_MASK_NONE, NULL};
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NONFINITE);
    in.mask = (attn_mask){ATTN_MASK_CAUSAL, NULL};
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NONFINITE);
    /* the same through the heads that only feed ΔE */
    in.n_heads_out = 0;
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NONFINITE);
    in.n_heads_out = 1;

    /* S[1][1] = 1e20 · −1e20 = −inf: not a mask, an overflow */
    w.w_qkv = qkv_neg;
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NONFINITE);

    /* Q = 3e38 · 2 = inf, K = 0: S = inf · 0 = NaN */
    float e_big[2] = {3e38f, 3e38f}, qkv_nan[6] = {1, 0, 1, 1, 0, 1}, w_o[2] = {1, 1};
    attn_weights wn = {.d_model = 2, .n_heads = 1, .d_head = 1, .w_qkv = qkv_nan, .w_o = w_o};
    attn_input inn = {.weights = &wn,
                      .embeddings = e_big,
                      .n_tokens = 1,
                      .scale = 1.0f,
                      .mask = {ATTN_MASK_NONE, NULL},
                      .heads = &head0,
                      .n_heads_out = 1};
    attn_output outn = {.patterns = patterns};
    ck_assert_ptr_eq(compute_error(&outn, ws, &inn, NULL), ATTN_ERR_NONFINITE);
    ck_assert_str_eq(ATTN_ERR_NONFINITE, "non_finite_number"); /* the contract's code */
    attn_workspace_destroy(ws);
}
END_TEST

/*
 * Scores whose product overflows but whose scaled value does not: OpenBLAS
 * applies the scale to the sum it accumulated, so |q·k| past FLT_MAX is
 * ±inf before the scale; the engine then computes the block again from Q
 * scaled first. E = [[2e19, 2e19], [2e19, −3e19]], Q = K = V = E, scale
 * 1/4: S = [[2e38, −5e37], [−5e37, 3.25e38]], every score finite. With
 * soft-capping (c = 1) the raw overflow must not turn into ±c either; at
 * scale 1 nothing can save it: an error, with or without soft-capping.
 */
START_TEST(test_overflow_rescued_by_scale) {
    float e[4] = {2e19f, 2e19f, 2e19f, -3e19f};
    float qkv[12] = {1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1}; /* [I | I | I] */
    size_t head0 = 0;
    for (int capped = 0; capped < 2; capped++) {
        attn_weights w = {.d_model = 2, .n_heads = 1, .d_head = 2, .w_qkv = qkv};
        w.softcap = capped ? 1.0f : 0.0f;
        attn_input in = {.weights = &w,
                         .embeddings = e,
                         .n_tokens = 2,
                         .scale = 0.25f,
                         .mask = {ATTN_MASK_NONE, NULL},
                         .heads = &head0,
                         .n_heads_out = 1};
        double s[4], p[4], want[4];
        for (int q = 0; q < 2; q++)
            for (int k = 0; k < 2; k++) {
                double d =
                    0.25 * ((double)e[2 * q] * e[2 * k] + (double)e[2 * q + 1] * e[2 * k + 1]);
                s[2 * q + k] = capped ? tanh(d) : d;
            }
        for (int q = 0; q < 2; q++) {
            double mx = fmax(s[2 * q], s[2 * q + 1]), a = exp(s[2 * q] - mx),
                   b = exp(s[2 * q + 1] - mx);
            p[2 * q] = a / (a + b), p[2 * q + 1] = b / (a + b);
            for (int c = 0; c < 2; c++)
                want[2 * q + c] = e[2 * q + c] + p[2 * q] * e[c] + p[2 * q + 1] * e[2 + c];
        }
        attn_workspace *ws = attn_workspace_create();
        for (int path = 0; path < 2; path++) { /* full (scores shown), online */
            float scores[4], patterns[4], emb[4];
            attn_output out = {.embeddings = emb};
            if (path == 0) out.scores = scores, out.patterns = patterns;
            ck_assert_ptr_null(compute_error(&out, ws, &in, NULL));
            for (int x = 0; x < 4; x++) {
                ck_assert_msg(fabs(emb[x] - want[x]) <= 1e-5 * fabs(want[x]) + 1e14,
                              "softcap %d path %d: E'[%d] %g, expected %g", capped, path, x, emb[x],
                              want[x]);
                if (path) continue;
                ck_assert_msg(fabs(scores[x] - s[x]) <= 1e-5 * fabs(s[x]), "S[%d] %g, expected %g",
                              x, scores[x], s[x]);
                ck_assert_msg(fabs(patterns[x] - p[x]) <= 1e-6, "P[%d] %g, expected %g", x,
                              patterns[x], p[x]);
            }
        }
        in.scale = 1.0f; /* S[1][1] = 1.3e39: past float32, no scale to take first */
        float patterns[4], emb[4];
        attn_output outp = {.patterns = patterns}, oute = {.embeddings = emb};
        ck_assert_ptr_eq(compute_error(&outp, ws, &in, NULL), ATTN_ERR_NONFINITE);
        ck_assert_ptr_eq(compute_error(&oute, ws, &in, NULL), ATTN_ERR_NONFINITE);
        attn_workspace_destroy(ws);
    }
}
END_TEST

/*
 * The same on the online path's second key tile only: n = 300 tokens of
 * width 1, all 1 but the last, 1e20; scale 1e-30. The last row's own score
 * is 1e-30 · 1e40 = 1e10 (its product overflows), every other score at most
 * 1e-10: the last token attends to itself alone, the others evenly to all.
 */
START_TEST(test_overflow_rescued_late_tile) {
    enum { N = 300 };
    float e[N], qkv[3] = {1, 1, 1};
    for (int t = 0; t < N; t++)
        e[t] = t == N - 1 ? 1e20f : 1.0f;
    attn_weights w = {.d_model = 1, .n_heads = 1, .d_head = 1, .w_qkv = qkv};
    attn_input in = {.weights = &w,
                     .embeddings = e,
                     .n_tokens = N,
                     .scale = 1e-30f,
                     .mask = {ATTN_MASK_NONE, NULL},
                     .heads = NULL,
                     .n_heads_out = 0};
    double mean = 0;
    for (int t = 0; t < N; t++)
        mean += e[t];
    mean /= N;
    attn_workspace *ws = attn_workspace_create();
    static float patterns[N * N];
    size_t head0 = 0;
    for (int path = 0; path < 2; path++) {
        float emb[N];
        attn_output out = {.embeddings = emb};
        if (path == 0) in.heads = &head0, in.n_heads_out = 1, out.patterns = patterns;
        ck_assert_ptr_null(compute_error(&out, ws, &in, NULL));
        for (int t = 0; t < N; t++) {
            double want = e[t] + (t == N - 1 ? 1e20 : mean);
            ck_assert_msg(fabs(emb[t] - want) <= 1e-5 * want, "path %d: E'[%d] %g, expected %g",
                          path, t, emb[t], want);
        }
        if (path == 0) ck_assert(patterns[N * N - 1] == 1.0f);
        in.heads = NULL, in.n_heads_out = 0;
    }
    attn_workspace_destroy(ws);
}
END_TEST

/* ---- 10. the vector exp ---------------------------------------------------------------- */

/* Distance in float ulps between got and the double `want` (rounded): 0
 * when equal, counted on the ordered integer line so that denormals and
 * the step to 0 count as they should. */
static double ulps(float got, double want) {
    float w = (float)want;
    if (got == w) return 0.0;
    if (isinf(w) || isinf(got)) return INFINITY;
    int32_t a, b;
    memcpy(&a, &got, 4), memcpy(&b, &w, 4);
    double d = fabs((double)a - (double)b); /* both >= 0 here: exp is positive */
    /* (float)want is itself up to ½ ulp off: judge against the exact value */
    double ulp = (double)nextafterf(w, INFINITY) - (double)w;
    return fmin(d, fabs((double)got - want) / ulp + 0.5);
}

START_TEST(test_vexp) {
    enum { N = 20000 };
    static float x[N], y[N], z[N];
    size_t count = 0;
    static const float special[] = {-INFINITY, -1e30f, -1000.0f, -104.0f, -103.9f, -100.0f,
                                    -87.4f,    -87.0f, -20.0f,   -1.0f,   -1e-7f,  -0.0f,
                                    0.0f,      1e-30f, 1e-7f,    0.5f,    1.0f,    10.0f,
                                    88.0f,     88.72f, 88.7228f, 89.0f,   1000.0f, INFINITY};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        x[count++] = special[k];
    uint64_t st = 3;
    while (count < N / 2) /* a sweep over the whole useful range */
        x[count++] = (float)(-110.0 + 200.0 * (rnd(&st) + 1.0) / 2.0);
    while (count < N) /* and densely where the softmax lives */
        x[count++] = (float)(-20.0 * (rnd(&st) + 1.0) / 2.0);
    /* odd lengths and offsets: every tail size of every SIMD width */
    for (size_t len = 0; len < 40; len++) {
        attn_vexp(y, x + len, len);
        for (size_t k = 0; k < len; k++)
            if (!(ulps(y[k], exp((double)x[len + k])) <= 1.0))
                ck_abort_msg("len %zu: exp(%a) = %a", len, (double)x[len + k], (double)y[k]);
    }
    attn_vexp(y, x, N);
    double worst = 0.0;
    for (size_t k = 0; k < N; k++) {
        double want = exp((double)x[k]);
        double e = ulps(y[k], want);
        if (!(e <= 1.0))
            ck_abort_msg("exp(%a) = %a, want %a (%g ulp, path %s)", (double)x[k], (double)y[k],
                         want, e, attn_vexp_path());
        float ef = expf(x[k]);
        if (y[k] != ef && !(fabs((double)y[k] - (double)ef) <=
                            2.0 * ((double)nextafterf(ef, INFINITY) - (double)ef)))
            ck_abort_msg("exp(%a): %a vs expf %a", (double)x[k], (double)y[k], (double)ef);
        if (e > worst) worst = e;
    }
    ck_assert(y[0] == 0.0f);                                     /* exp(−inf) is exactly 0 */
    ck_assert(y[11] == 1.0f && y[12] == 1.0f);                   /* exp(±0) == 1 */
    ck_assert(isinf(y[sizeof special / sizeof special[0] - 1])); /* overflow: inf */
    /* the fused form: exp(x − shift) and its sum */
    for (size_t k = 0; k < 37; k++)
        z[k] = -0.25f * (float)k;
    z[5] = -INFINITY;
    double sum = 0.0;
    for (size_t k = 0; k < 37; k++)
        sum += exp((double)z[k] - 1.5);
    float got = attn_vexp_shift_sum(y, z, 1.5f, 37);
    ck_assert(y[5] == 0.0f);
    ck_assert_msg(fabs(got - sum) <= 1e-6 * sum, "sum %.9g want %.9g", (double)got, sum);
    ck_assert(attn_vmax(z, 37) == 0.0f && attn_vmax(z, 0) == -INFINITY);
    fprintf(stderr, "vexp: path %s, worst %.3f ulp over %d values\n", attn_vexp_path(), worst, N);
}
END_TEST

#if defined(__x86_64__) || defined(__i386__)
/* sleef.h declares the 256-bit functions only for files built with AVX */
__attribute__((target("avx2,fma"))) __m256 Sleef_expf8_u10avx2(__m256);

/* exp of x[0 … 8) by libsleef's own expf8_u10avx2 */
__attribute__((target("avx2,fma"))) static void sleef_exp8(float *y, const float *x) {
    _mm256_storeu_ps(y, Sleef_expf8_u10avx2(_mm256_loadu_ps(x)));
}
#endif

/* The AVX2 path inlines SLEEF's expf8_u10avx2: its results are the
 * library's to the bit, over a sweep of every exponent and sign (a float
 * pattern every 4099, which leaves no exponent out) and the edges of its
 * ranges: underflow to 0 below −104, subnormal results, overflow above
 * 88.72 and its cut to inf above 100, NaN. */
START_TEST(test_vexp_sleef_bits) {
#if defined(__x86_64__) || defined(__i386__)
    if (strcmp(attn_vexp_path(), "avx2") != 0) return;
    enum { N = 1u << 20 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    ck_assert(x && y);
    size_t count = 0;
    static const float edge[] = {
        -104.0f,   -103.99999f, -104.00001f, -87.33655f, -87.4f, -95.0f,   88.72283f, 88.7229f,
        99.99999f, 100.0f,      100.00001f,  -0.0f,      0.0f,   INFINITY, -INFINITY, NAN};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++)
        x[count++] = edge[k];
    for (uint64_t b = 0; b <= 0xffffffffu && count < N; b += 4099) {
        uint32_t u = (uint32_t)b;
        memcpy(&x[count++], &u, sizeof u);
    }
    while (count % 8)
        x[count++] = 0.5f;
    attn_vexp(y, x, count);
    for (size_t k = 0; k < count; k += 8) {
        float want[8];
        sleef_exp8(want, x + k);
        for (size_t l = 0; l < 8; l++)
            if (memcmp(&want[l], &y[k + l], sizeof(float)))
                ck_abort_msg("exp(%a) = %a, libsleef %a", (double)x[k + l], (double)y[k + l],
                             (double)want[l]);
    }
    free(x), free(y);
#endif
}
END_TEST

/* ---- 11. blocked and online paths ------------------------------------------------------- */

/*
 * n larger than a block and not a multiple of one (blocks of 128 query rows
 * and 256 keys): every mask, with and without w_o, with a head list. The
 * custom mask has fully masked rows inside a row block and at a block edge,
 * rows whose only allowed keys are in a later key tile (the running max
 * starts at −inf for a whole tile) or in the first only, and a band of rows
 * with a whole key tile masked. Checked: the full path (patterns shown), the
 * online path (no scores, no patterns) and the float64 reference, which the
 * two must each match; the online Z against the full Z.
 */
static void mask_rows_edge(problem *p, size_t n) {
    unsigned char *a = p->allowed;
    memset(a + 3 * n, 0, n);   /* nothing allowed, inside the first row block */
    memset(a + 127 * n, 0, n); /* at the last row of a block */
    memset(a + 128 * n, 0, n); /* and the first of the next */
    memset(a + 5 * n, 0, n);   /* only a key in the second key tile */
    a[5 * n + n - 2] = 1;
    memset(a + 200 * n, 0, n); /* only key 0 */
    a[200 * n] = 1;
    for (size_t q = 140; q < 180; q++) /* the whole first key tile masked */
        memset(a + q * n, 0, 256);
}

/* The checks of one problem, full path and online: see above. Rows with
 * no allowed key must give a Z of exactly 0 on the online path. */
static void online_check(const problem *p) {
    const size_t n = p->in.n_tokens, dh = p->w.d_head, hs = p->in.n_heads_out;
    ref64 r;
    ref_compute(&r, &p->in);
    outputs full, onl;
    outputs_make(&full, &p->in), outputs_make(&onl, &p->in);
    attn_workspace *ws = attn_workspace_create();
    attn_output vf = outputs_view(&full, WANT_ALL);
    ck_assert_int_eq(attn_compute(&vf, ws, &p->in, NULL), 0);
    outputs_check("full", &full, &r, WANT_ALL);
    pattern_rules(&full, &p->in);
    unsigned want = WANT_ALL & ~(1u << O_S) & ~(1u << O_P);
    attn_output vo = outputs_view(&onl, want);
    ck_assert_int_eq(attn_compute(&vo, ws, &p->in, NULL), 0);
    outputs_check("online", &onl, &r, want);
    /* head outputs only: online, per-block projections */
    outputs_free(&onl);
    outputs_make(&onl, &p->in);
    vo = outputs_view(&onl, 1u << O_Z);
    ck_assert_int_eq(attn_compute(&vo, ws, &p->in, NULL), 0);
    outputs_check("online Z only", &onl, &r, 1u << O_Z);
    /* online against full, and masked rows exactly 0 */
    double *zf = xcalloc(full.count[O_Z], sizeof(double));
    for (size_t x = 0; x < full.count[O_Z]; x++)
        zf[x] = full.buf[O_Z][x];
    close_check("online vs full Z", onl.buf[O_Z], zf, full.count[O_Z]);
    free(zf);
    for (size_t q = 0; q < n && p->in.mask.kind == ATTN_MASK_CUSTOM; q++) {
        if (memchr(p->in.mask.allowed + q * n, 1, n)) continue;
        for (size_t j = 0; j < hs; j++)
            for (size_t c = 0; c < dh; c++)
                if (onl.buf[O_Z][j * n * dh + q * dh + c] != 0.0f)
                    ck_abort_msg("dead row %zu: z = %g", q,
                                 (double)onl.buf[O_Z][j * n * dh + q * dh + c]);
    }
    attn_workspace_destroy(ws);
    outputs_free(&full), outputs_free(&onl);
    ref_free(&r);
}

static void online_case(shape s, attn_mask_kind mask, float scale_mul, const size_t *heads,
                        size_t hs, uint64_t seed) {
    problem p;
    problem_make(&p, s, mask, seed);
    if (mask == ATTN_MASK_CUSTOM) mask_rows_edge(&p, s.n);
    p.in.scale *= scale_mul; /* larger scores: the running max moves more */
    memcpy(p.heads, heads, hs * sizeof(size_t));
    p.in.n_heads_out = hs;
    online_check(&p);
    problem_free(&p);
}

START_TEST(test_online_blocks) {
    static const size_t lists[][3] = {{0, 1, 2}, {2, 0, 2}, {1}};
    static const size_t counts[] = {3, 3, 1};
    shape s = {.n = 300, .dm = 24, .h = 3, .dh = 8, .b_qkv = 1, .w_o = _i & 1, .b_o = 1};
    for (int m = 0; m < 3; m++)
        online_case(s, mask_kinds[m], _i >= 2 ? 6.0f : 1.0f, lists[(_i + m) % 3],
                    counts[(_i + m) % 3], 101 + (uint64_t)(_i * 3 + m));
}
END_TEST

/* n a multiple of the blocks, and n below one block (one tile, clamped). */
START_TEST(test_online_sizes) {
    static const size_t ns[] = {256, 512, 129, 17};
    static const size_t all[2] = {0, 1};
    shape s = {.n = ns[_i], .dm = 16, .h = 2, .dh = 8, .b_qkv = 1, .w_o = 1, .b_o = 1};
    for (int m = 0; m < 2; m++) /* causal, none (custom rows need n > 200) */
        online_case(s, mask_kinds[m], 1.0f, all, 2, 131 + (uint64_t)_i);
}
END_TEST

/*
 * Linear memory: n = 4096, d_model 64, 2 heads, embeddings only. The
 * workspace is QKV (n × 3hd), Z (n × hd), ΔE and a padded copy of E (n × dm
 * each, batch.c) plus a small tile, far below one
 * n × n float buffer (64 MiB); it doubles, not quadruples, with n; and
 * attn_workspace_need bounds it. The GPT-2 block at n = 8192 needs well
 * under 200 MB.
 */
START_TEST(test_linear_memory) {
    const size_t n = 4096;
    shape s = {.n = n, .dm = 64, .h = 2, .dh = 32, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem p;
    problem_make(&p, s, ATTN_MASK_CAUSAL, 141);
    p.in.n_heads_out = 0;
    float *emb = xcalloc(n * s.dm, sizeof(float));
    attn_output out = {.embeddings = emb};
    attn_workspace *ws = attn_workspace_create();
    size_t bytes[2];
    for (int half = 1; half >= 0; half--) { /* n/2, then n: grows 2× */
        p.in.n_tokens = half ? n / 2 : n;
        ck_assert_int_eq(attn_compute(&out, ws, &p.in, NULL), 0);
        bytes[half] = attn_workspace_bytes(ws);
        ck_assert_uint_le(bytes[half], attn_workspace_need(p.in.n_tokens, s.dm, s.h, s.dh));
    }
    size_t nn = n * n * sizeof(float);
    /* QKV and Z, ΔE before E' (batch.c's stacked ΔE), E padded to 12 rows; the
     * maps of the packed rows, 8 bytes a row for QKV and for ΔE */
    size_t expect = (n + 8) * (((3 + 1) * s.h * s.dh + 2 * s.dm) * sizeof(float) + 2 * 8);
    ck_assert_msg(bytes[0] < nn / 8, "%zu bytes at n = %zu", bytes[0], n);
    ck_assert_msg(bytes[0] <= expect + 256 * 1024, "%zu bytes, QKV + Z + ΔE + E = %zu", bytes[0],
                  expect);
    ck_assert_msg(bytes[0] < 2 * bytes[1] + 256 * 1024, "n/2: %zu, n: %zu", bytes[1], bytes[0]);
    /* the bound adds the worst outputs' B × n rows of P to what was taken */
    ck_assert_uint_lt(attn_workspace_need(n, s.dm, s.h, s.dh), nn / 6);
    ck_assert_uint_lt(attn_workspace_need(8192, 768, 12, 64), (size_t)200 * 1000 * 1000);
    /* spot-check rows against float64: the last (attends to every key) and 0 */
    for (size_t q = 0; q < n; q += n - 1) {
        size_t hd = s.h * s.dh, ld = 3 * hd;
        double *qkv = xcalloc(n * ld, sizeof(double)), zrow[64] = {0};
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < ld; c++) {
                double a = p.b_qkv[c];
                for (size_t x = 0; x < s.dm; x++)
                    a += (double)p.E[t * s.dm + x] * p.w_qkv[x * ld + c];
                qkv[t * ld + c] = a;
            }
        for (size_t i = 0; i < s.h; i++) {
            double max = -INFINITY, sum = 0.0, *e = xcalloc(q + 1, sizeof(double));
            for (size_t k = 0; k <= q; k++) {
                double d = 0.0;
                for (size_t c = 0; c < s.dh; c++)
                    d += qkv[q * ld + i * s.dh + c] * qkv[k * ld + hd + i * s.dh + c];
                e[k] = d * p.in.scale;
                max = e[k] > max ? e[k] : max;
            }
            for (size_t k = 0; k <= q; k++)
                sum += e[k] = exp(e[k] - max);
            for (size_t c = 0; c < s.dh; c++) {
                double z = 0.0;
                for (size_t k = 0; k <= q; k++)
                    z += e[k] / sum * qkv[k * ld + 2 * hd + i * s.dh + c];
                zrow[i * s.dh + c] = z;
            }
            free(e);
        }
        double want[64];
        for (size_t c = 0; c < s.dm; c++) {
            double d = p.b_o[c];
            for (size_t x = 0; x < hd; x++)
                d += zrow[x] * p.w_o[x * s.dm + c];
            want[c] = p.E[q * s.dm + c] + d;
        }
        close_check("n = 4096 row", emb + q * s.dm, want, s.dm);
        free(qkv);
    }
    attn_workspace_destroy(ws);
    free(emb);
    problem_free(&p);
}
END_TEST

/* ---- 12. attn_compute_with: heads as tasks on other threads ------------------------------ */

/*
 * A runner for tests: `threads` threads (the caller and threads-1 others,
 * each with its own workspace) claim tasks from a shared counter; with one
 * thread the tasks run on the caller, last first. Counts how often each
 * task ran and on which workspace.
 */
enum { RUN_MAX_THREADS = 4, RUN_MAX_TASKS = 64, RUN_MAX_RUNS = 8 };

typedef struct test_runner {
    int threads;
    attn_workspace *caller_ws;
    attn_workspace *ws[RUN_MAX_THREADS]; /* [0] unused: the caller's */
    size_t runs;                         /* calls of run */
    size_t counts[RUN_MAX_RUNS];         /* tasks of each run */
    atomic_int ran[RUN_MAX_TASKS];       /* per task, in the last run */
    atomic_int other_ws;                 /* tasks run on another workspace, all runs */
    /* one run */
    attn_task_fn task;
    void *arg;
    size_t count;
    atomic_size_t next;
} test_runner;

typedef struct runner_thread {
    test_runner *r;
    attn_workspace *ws;
} runner_thread;

static void runner_claim(test_runner *r, attn_workspace *ws) {
    for (size_t t; (t = atomic_fetch_add(&r->next, 1)) < r->count;) {
        atomic_fetch_add(&r->ran[t], 1);
        if (ws != r->caller_ws) atomic_fetch_add(&r->other_ws, 1);
        r->task(r->arg, t, ws);
    }
}

static void *runner_thread_main(void *arg) {
    runner_thread *rt = arg;
    runner_claim(rt->r, rt->ws);
    return NULL;
}

static void test_run(void *ctx, attn_task_fn task, void *arg, size_t count) {
    test_runner *r = ctx;
    ck_assert_uint_le(count, RUN_MAX_TASKS);
    if (r->runs < RUN_MAX_RUNS) r->counts[r->runs] = count;
    r->runs++;
    for (size_t t = 0; t < RUN_MAX_TASKS; t++)
        atomic_store(&r->ran[t], 0);
    if (r->threads == 1) {
        for (size_t t = count; t-- > 0;) {
            atomic_fetch_add(&r->ran[t], 1);
            task(arg, t, r->caller_ws);
        }
        goto check;
    }
    r->task = task, r->arg = arg, r->count = count;
    atomic_store(&r->next, 0);
    pthread_t th[RUN_MAX_THREADS];
    runner_thread rt[RUN_MAX_THREADS];
    for (int k = 1; k < r->threads; k++) {
        rt[k] = (runner_thread){.r = r, .ws = r->ws[k]};
        ck_assert_int_eq(pthread_create(&th[k], NULL, runner_thread_main, &rt[k]), 0);
    }
    runner_claim(r, r->caller_ws);
    for (int k = 1; k < r->threads; k++)
        pthread_join(th[k], NULL);
check: /* every task exactly once */
    for (size_t t = 0; t < count; t++)
        if (atomic_load(&r->ran[t]) != 1)
            ck_abort_msg("task %zu of %zu ran %d times", t, count, atomic_load(&r->ran[t]));
}

static void test_runner_init(test_runner *r, int threads, attn_workspace *caller_ws) {
    memset(r, 0, sizeof *r);
    r->threads = threads;
    r->caller_ws = caller_ws;
    for (int k = 1; k < threads; k++)
        ck_assert_ptr_nonnull(r->ws[k] = attn_workspace_create());
    for (size_t t = 0; t < RUN_MAX_TASKS; t++)
        atomic_init(&r->ran[t], 0);
    atomic_init(&r->other_ws, 0);
    atomic_init(&r->next, 0);
}

static void test_runner_free(test_runner *r) {
    for (int k = 1; k < r->threads; k++)
        attn_workspace_destroy(r->ws[k]);
}

/* Output sets: the full path (scores or patterns shown) and the online one. */
static const unsigned with_wants[] = {
    WANT_ALL,
    WANT_ALL & ~(1u << O_S) & ~(1u << O_P),  /* online, every output else */
    1u << O_E,                               /* online, ΔE only */
    (1u << O_P) | (1u << O_E),               /* the API's default */
    (1u << O_S) | (1u << O_Z),               /* full, scores in rows scratch */
    1u << O_Z,                               /* online, listed heads only */
    (1u << O_S) | (1u << O_P) | (1u << O_Z), /* full, no ΔE */
};

/* attn_compute_with on 1, 2 and 4 threads: bit for bit attn_compute, every
 * task run once, for every output set and the mask kind _i % 3, with and
 * without w_o, for several head lists. */
START_TEST(test_runner_bitwise) {
    static const size_t lists[][5] = {{0, 1, 2, 3}, {2, 0, 2}, {3}, {0}, {1, 3, 1, 0, 2}};
    static const size_t counts[] = {4, 3, 1, 0, 5};
    attn_mask_kind mask = mask_kinds[_i % 3];
    int w_o = _i < 3;
    /* n spans three blocks of query rows and two key tiles; no w_o: hd == dm */
    shape s = {.n = 300, .dm = 32, .h = 4, .dh = 8, .b_qkv = 1, .w_o = w_o, .b_o = 1};
    problem p;
    problem_make(&p, s, mask, 151 + (uint64_t)_i);
    if (mask == ATTN_MASK_CUSTOM) mask_rows_edge(&p, s.n);
    attn_workspace *ws = attn_workspace_create(), *ws_with = attn_workspace_create();
    for (size_t l = 0; l < sizeof counts / sizeof counts[0]; l++) {
        memcpy(p.heads, lists[l], counts[l] * sizeof(size_t));
        p.in.n_heads_out = counts[l];
        for (size_t wi = 0; wi < sizeof with_wants / sizeof with_wants[0]; wi++) {
            outputs serial;
            outputs_make(&serial, &p.in);
            attn_output vs = outputs_view(&serial, with_wants[wi]);
            ck_assert_int_eq(attn_compute(&vs, ws, &p.in, NULL), 0);
            static const int thread_counts[] = {1, 2, 4};
            for (int k = 0; k < 3; k++) {
                test_runner r;
                test_runner_init(&r, thread_counts[k], ws_with);
                attn_runner runner = {.run = test_run, .ctx = &r};
                outputs o;
                outputs_make(&o, &p.in);
                for (int b = 0; b < O_COUNT; b++) /* what a serial run would leave */
                    memset(o.buf[b], 0x7f, o.count[b] * sizeof(float));
                attn_output vo = outputs_view(&o, with_wants[wi]);
                ck_assert_int_eq(attn_compute_with(&vo, ws_with, &p.in, &runner, NULL), 0);
                for (int b = 0; b < O_COUNT; b++)
                    if ((with_wants[wi] >> b) & 1)
                        ck_assert_msg(!memcmp(o.buf[b], serial.buf[b], o.count[b] * sizeof(float)),
                                      "list %zu, want %#x, %d threads: %s differs", l,
                                      with_wants[wi], thread_counts[k], o_name[b]);
                for (size_t t = 0; r.runs && t < RUN_MAX_TASKS; t++)
                    if (atomic_load(&r.ran[t]) > 1)
                        ck_abort_msg("task %zu ran %d times", t, atomic_load(&r.ran[t]));
                outputs_free(&o);
                test_runner_free(&r);
            }
            outputs_free(&serial);
        }
    }
    attn_workspace_destroy(ws), attn_workspace_destroy(ws_with);
    problem_free(&p);
}
END_TEST

/* The tasks the runner gets, each run exactly once: the projection's and
 * ΔE's tiles, and one per block of 128 query rows of each distinct head
 * needed (a single head too); no runner for a projection of listed heads
 * only, and none when nothing past the projection is asked for. Other
 * threads' workspaces grow by rows and a tile only, far below QKV. */
START_TEST(test_runner_tasks) {
    shape s = {.n = 512, .dm = 64, .h = 4, .dh = 16, .b_qkv = 1, .w_o = 1, .b_o = 1};
    const size_t blocks = 4; /* 512 / 128 */
    problem p;
    problem_make(&p, s, ATTN_MASK_CAUSAL, 171);
    attn_workspace *ws = attn_workspace_create();
    test_runner r;
    test_runner_init(&r, 4, ws);
    attn_runner runner = {.run = test_run, .ctx = &r};
    outputs o;
    outputs_make(&o, &p.in);

    p.in.n_heads_out = 0; /* ΔE only: every head */
    attn_output v = outputs_view(&o, 1u << O_E);
    ck_assert_int_eq(attn_compute_with(&v, ws, &p.in, &runner, NULL), 0);
    ck_assert_uint_eq(r.runs, 3);
    ck_assert_uint_ge(r.counts[0], 8); /* projection tiles: enough for 4 threads */
    ck_assert_uint_eq(r.counts[1], s.h * blocks);
    ck_assert_uint_ge(r.counts[2], 8); /* ΔE tiles */
    size_t qkv = s.n * 3 * s.h * s.dh * sizeof(float);
    for (int k = 1; k < 4; k++)
        ck_assert_uint_lt(attn_workspace_bytes(r.ws[k]), qkv / 2);

    static const size_t dup[3] = {2, 2, 1}; /* patterns of heads 2, 2, 1: two heads */
    memcpy(p.heads, dup, sizeof dup);
    p.in.n_heads_out = 3;
    v = outputs_view(&o, 1u << O_P);
    ck_assert_int_eq(attn_compute_with(&v, ws, &p.in, &runner, NULL), 0);
    ck_assert_uint_eq(r.runs, 4);
    ck_assert_uint_eq(r.counts[3], 2 * blocks);
    ck_assert(!memcmp(o.buf[O_P], o.buf[O_P] + s.n * s.n, s.n * s.n * sizeof(float)));

    p.in.n_heads_out = 1; /* one head: still split, by query rows */
    ck_assert_int_eq(attn_compute_with(&v, ws, &p.in, &runner, NULL), 0);
    ck_assert_uint_eq(r.runs, 5);
    ck_assert_uint_eq(r.counts[4], blocks);
    v = outputs_view(&o, 1u << O_Q); /* nothing past the projection: no runner */
    p.in.n_heads_out = 3;
    ck_assert_int_eq(attn_compute_with(&v, ws, &p.in, &runner, NULL), 0);
    ck_assert_uint_eq(r.runs, 5);

    outputs_free(&o);
    test_runner_free(&r);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* A projection or ΔE of at most 256 rows is cut into full-height tiles:
 * 2 of them up to 4096 columns, else as many of at most 1024 columns as it
 * takes (rather than 12 or more narrow ones, each re-packing the rows);
 * split bit for bit as serial, with RoPE rotating whole heads in the
 * tiles. */
START_TEST(test_runner_few_tiles) {
    static const struct {
        shape s;
        size_t proj, delta; /* tiles */
    } cases[] = {
        {{.n = 100, .dm = 512, .h = 8, .dh = 64, .b_qkv = 1, .w_o = 1, .b_o = 1}, 2, 2},
        {{.n = 256, .dm = 512, .h = 8, .dh = 64, .b_qkv = 1, .w_o = 1, .b_o = 1}, 2, 2},
        {{.n = 16, .dm = 64, .h = 32, .dh = 64, .b_qkv = 1, .w_o = 1, .b_o = 1}, 6, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int rope = 0; rope < 2; rope++) {
            shape s = cases[k].s;
            problem p;
            problem_make(&p, s, ATTN_MASK_CAUSAL, 181 + k);
            if (rope) p.w.rope = (attn_rope){.dims = s.dh, .theta = 10000.0};
            p.in.n_heads_out = 0;
            attn_workspace *ws = attn_workspace_create(), *ws_with = attn_workspace_create();
            outputs serial, o;
            outputs_make(&serial, &p.in), outputs_make(&o, &p.in);
            attn_output vs = outputs_view(&serial, 1u << O_E), vo = outputs_view(&o, 1u << O_E);
            ck_assert_int_eq(attn_compute(&vs, ws, &p.in, NULL), 0);
            test_runner r;
            test_runner_init(&r, 2, ws_with);
            attn_runner runner = {.run = test_run, .ctx = &r};
            ck_assert_int_eq(attn_compute_with(&vo, ws_with, &p.in, &runner, NULL), 0);
            /* the runner gets only runs of more than one task: RoPE's table (rows by 64)
             * first, then the projection, the heads, ΔE */
            size_t first = rope && s.n > 64;
            ck_assert_uint_eq(r.runs, first + 2 + (cases[k].delta > 1));
            ck_assert_uint_eq(r.counts[first], cases[k].proj);
            if (cases[k].delta > 1) ck_assert_uint_eq(r.counts[first + 2], cases[k].delta);
            ck_assert(!memcmp(o.buf[O_E], serial.buf[O_E], o.count[O_E] * sizeof(float)));
            test_runner_free(&r);
            outputs_free(&serial), outputs_free(&o);
            attn_workspace_destroy(ws), attn_workspace_destroy(ws_with);
            problem_free(&p);
        }
}
END_TEST

/* The runner's stop is asked before each phase and each task: whenever it
 * first says yes, the computation ends with ATTN_ERR_STOPPED; once it is
 * never asked past its last question, the computation ends well. A phase
 * it says yes to before its run does not run. */
typedef struct stopping_runner {
    test_runner r;
    size_t stop_at; /* the question (from 0) that stop says yes to */
    atomic_size_t asked;
} stopping_runner;

static int stop_at_question(void *ctx) {
    stopping_runner *sr = ctx;
    return atomic_fetch_add(&sr->asked, 1) == sr->stop_at;
}

START_TEST(test_runner_stop) {
    shape s = {.n = 512, .dm = 64, .h = 4, .dh = 16, .b_qkv = 1, .w_o = 1, .b_o = 1};
    problem p;
    problem_make(&p, s, ATTN_MASK_CAUSAL, 172);
    attn_workspace *ws = attn_workspace_create();
    outputs o;
    outputs_make(&o, &p.in);
    p.in.n_heads_out = 0; /* ΔE only: three phases */
    attn_output v = outputs_view(&o, 1u << O_E);
    /* every question, with one that never says yes */
    stopping_runner all = {.stop_at = SIZE_MAX};
    atomic_init(&all.asked, 0);
    test_runner_init(&all.r, 2, ws);
    attn_runner never = {.run = test_run, .ctx = &all, .stop = stop_at_question};
    ck_assert_ptr_eq(compute_error(&v, ws, &p.in, &never), NULL);
    const size_t questions = atomic_load(&all.asked);
    ck_assert_uint_eq(all.r.runs, 3);
    ck_assert_uint_gt(questions, 3 + 4 * 4); /* the phases, and at least each head's blocks */
    test_runner_free(&all.r);
    for (size_t at = 0; at <= questions; at++) {
        stopping_runner sr = {.stop_at = at};
        atomic_init(&sr.asked, 0);
        test_runner_init(&sr.r, 2, ws);
        /* sr.r is the struct's first member: one ctx serves run and stop */
        attn_runner runner = {.run = test_run, .ctx = &sr, .stop = stop_at_question};
        const char *code = compute_error(&v, ws, &p.in, &runner);
        ck_assert_ptr_eq(code, at < questions ? ATTN_ERR_STOPPED : NULL);
        /* said yes at the first question: nothing ran */
        if (at == 0) ck_assert_uint_eq(sr.r.runs, 0);
        test_runner_free(&sr.r);
    }
    /* with no run (the tasks in turn on this thread) the stop is asked all the same */
    stopping_runner alone = {.stop_at = 5};
    atomic_init(&alone.asked, 0);
    attn_runner serial = {.run = NULL, .ctx = &alone, .stop = stop_at_question};
    ck_assert_ptr_eq(compute_error(&v, ws, &p.in, &serial), ATTN_ERR_STOPPED);
    outputs_free(&o);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* One head of three overflows (S[1][1] = 1e40): every runner reports it,
 * on the full path and the online one, listed or only feeding ΔE. */
START_TEST(test_runner_nonfinite) {
    float e[2] = {1.0f, 1e20f};
    /* w_qkv: 1 × 9, [q0 q1 q2 | k0 k1 k2 | v0 v1 v2]; head 1 overflows */
    float w_qkv[9] = {1e-30f, 1.0f, 1e-30f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    float w_o[3] = {1, 1, 1};
    attn_weights w = {.d_model = 1, .n_heads = 3, .d_head = 1, .w_qkv = w_qkv, .w_o = w_o};
    size_t heads[3] = {0, 1, 2};
    attn_input in = {.weights = &w,
                     .embeddings = e,
                     .n_tokens = 2,
                     .scale = 1.0f,
                     .mask = {ATTN_MASK_NONE, NULL},
                     .heads = heads,
                     .n_heads_out = 3};
    float patterns[3 * 4], z[3 * 2], emb[2];
    attn_output full = {.patterns = patterns, .embeddings = emb};
    attn_output onl = {.head_outputs = z, .embeddings = emb};
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_eq(compute_error(&full, ws, &in, NULL), ATTN_ERR_NONFINITE);
    ck_assert_ptr_eq(compute_error(&onl, ws, &in, NULL), ATTN_ERR_NONFINITE);
    static const int thread_counts[] = {1, 2, 4};
    for (int k = 0; k < 3; k++) {
        test_runner r;
        test_runner_init(&r, thread_counts[k], ws);
        attn_runner runner = {.run = test_run, .ctx = &r};
        in.n_heads_out = 3;
        ck_assert_ptr_eq(compute_error(&full, ws, &in, &runner), ATTN_ERR_NONFINITE);
        ck_assert_ptr_eq(compute_error(&onl, ws, &in, &runner), ATTN_ERR_NONFINITE);
        in.n_heads_out = 0;
        ck_assert_ptr_eq(compute_error(&onl, ws, &in, &runner), ATTN_ERR_NONFINITE);
        ck_assert_uint_eq(r.runs, 3);
        test_runner_free(&r);
    }
    /* heads 0 and 2 alone are fine */
    heads[0] = 2, heads[1] = 0;
    in.n_heads_out = 2;
    attn_output zonly = {.head_outputs = z};
    test_runner r;
    test_runner_init(&r, 2, ws);
    attn_runner runner = {.run = test_run, .ctx = &r};
    ck_assert_int_eq(attn_compute_with(&zonly, ws, &in, &runner, NULL), 0);
    test_runner_free(&r);
    attn_workspace_destroy(ws);
}
END_TEST

/*
 * The online path keeps Z a weighted average of V rows as it goes, so it
 * cannot overflow where the full path does not: n identical rows with V
 * near FLT_MAX / n would make an unnormalised Σ exp · V reach n · max|V|.
 */
START_TEST(test_online_no_overflow) {
    enum { N = 1000 };
    static float e[N * 2];
    for (size_t t = 0; t < N; t++)
        e[2 * t] = 1e36f, e[2 * t + 1] = 1.0f;
    /* w_q = w_k = 0 (all scores 0, uniform weights), w_v = I */
    float w_qkv[2 * 6] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};
    attn_weights w = {.d_model = 2, .n_heads = 1, .d_head = 2, .w_qkv = w_qkv};
    size_t head0 = 0;
    attn_input in = {.weights = &w,
                     .embeddings = e,
                     .n_tokens = N,
                     .scale = 1.0f,
                     .mask = {ATTN_MASK_NONE, NULL},
                     .heads = &head0,
                     .n_heads_out = 1};
    static float z_full[N * 2], z_online[N * 2], patterns[N * N];
    attn_output full = {.patterns = patterns, .head_outputs = z_full};
    attn_output online = {.head_outputs = z_online};
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&full, ws, &in, NULL), 0);
    ck_assert_int_eq(attn_compute(&online, ws, &in, NULL), 0);
    for (size_t i = 0; i < 2 * N; i++) {
        ck_assert_msg(isfinite(z_online[i]), "online z[%zu] = %g", i, (double)z_online[i]);
        ck_assert_msg(fabsf(z_online[i] - z_full[i]) <= 1e-5f * fabsf(z_full[i]),
                      "z[%zu]: online %g, full %g", i, (double)z_online[i], (double)z_full[i]);
    }
    attn_workspace_destroy(ws);
}
END_TEST

/* ---- 13. score gaps past exp's range on the online path ----------------------------- */

/*
 * The online softmax rescales what it accumulated by exp(m_old − m_new)
 * when a key tile raises a row's max; past a gap of ~88 that factor is 0
 * in float32 and the old average must go, not stay under the new one.
 * Large-norm tokens make such gaps in real models (the first token of
 * Llama-family models).
 *
 * The reproduction: 300 tokens, one head, d 2, W_q = W_k = W_v = I, tokens
 * 280 and 299 = (12, 1), the others (0, 1), causal, scale 1. Row 299 sees
 * scores 1 in the first key tile and 145 at keys 280 and 299 in the
 * second (row 280 likewise at key 280): Z = (12, 1), on either path.
 */
enum { REPRO_N = 300 };

static void repro_embeddings(float *e) {
    for (size_t t = 0; t < REPRO_N; t++)
        e[2 * t] = t == 280 || t == 299 ? 12.0f : 0.0f, e[2 * t + 1] = 1.0f;
}

START_TEST(test_online_gap_repro) {
    static float e[REPRO_N * 2], z_full[REPRO_N * 2], z_online[REPRO_N * 2];
    static float patterns[REPRO_N * REPRO_N];
    repro_embeddings(e);
    float w_qkv[2 * 6] = {1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1}; /* [I | I | I] */
    attn_weights w = {.d_model = 2, .n_heads = 1, .d_head = 2, .w_qkv = w_qkv};
    size_t head0 = 0;
    attn_input in = {.weights = &w,
                     .embeddings = e,
                     .n_tokens = REPRO_N,
                     .scale = 1.0f,
                     .mask = {ATTN_MASK_CAUSAL, NULL},
                     .heads = &head0,
                     .n_heads_out = 1};
    attn_output full = {.patterns = patterns, .head_outputs = z_full};
    attn_output online = {.head_outputs = z_online};
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&full, ws, &in, NULL), 0);
    ck_assert_int_eq(attn_compute(&online, ws, &in, NULL), 0);
    attn_workspace_destroy(ws);
    for (size_t t = 280; t < REPRO_N; t += 19) /* the spike rows: keys 280 (and 299) win */
        for (size_t c = 0; c < 2; c++) {
            float want = c == 0 ? 12.0f : 1.0f;
            ck_assert_msg(fabsf(z_full[2 * t + c] - want) <= 1e-5f, "full z[%zu][%zu] = %g", t, c,
                          (double)z_full[2 * t + c]);
            ck_assert_msg(fabsf(z_online[2 * t + c] - want) <= 1e-5f, "online z[%zu][%zu] = %g", t,
                          c, (double)z_online[2 * t + c]);
        }
    ref64 r;
    ref_compute(&r, &in);
    close_check("online z", z_online, r.buf[O_Z], REPRO_N * 2);
    close_check("full z", z_full, r.buf[O_Z], REPRO_N * 2);
    ref_free(&r);
}
END_TEST

/* The same request through api/ (decode with inline weights, compute, the
 * request's head_outputs): what a client of POST /v1/attention gets. */
START_TEST(test_online_gap_repro_api) {
    static float e[REPRO_N * 2];
    repro_embeddings(e);
    size_t cap = 64 + REPRO_N * 16 + 512, len = 0;
    char *body = xcalloc(cap, 1);
    len += (size_t)snprintf(body + len, cap - len, "{\"embeddings\": [");
    for (size_t t = 0; t < REPRO_N; t++)
        len += (size_t)snprintf(body + len, cap - len, "%s[%g, %g]", t ? ", " : "",
                                (double)e[2 * t], (double)e[2 * t + 1]);
    len += (size_t)snprintf(body + len, cap - len,
                            "], \"weights\": {\"heads\": [{\"w_q\": [[1, 0], [0, 1]], "
                            "\"w_k\": [[1, 0], [0, 1]], \"w_v\": [[1, 0], [0, 1]]}]}, "
                            "\"mask\": \"causal\", \"scale\": 1, \"return\": [\"head_outputs\"]}");
    ck_assert_uint_lt(len, cap);
    const api_limits limits = {.max_tokens = 4096,
                               .max_heads = 64,
                               .max_d_model = 4096,
                               .max_flops = 1e12,
                               .max_response_bytes = (size_t)1 << 30,
                               .max_workspace_bytes = (size_t)1 << 30};
    api_call *req = NULL;
    attn_error err;
    ck_assert_msg(api_call_decode_json(API_CALL_ATTENTION, body, len, &limits, &req, &err) == 0,
                  "decode: %s at %s", err.message, err.path);
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    const attn_output *out = api_call_outputs(req);
    ck_assert_ptr_nonnull(out->head_outputs);
    ck_assert_ptr_null(out->patterns); /* the online path */
    ck_assert_ptr_null(out->scores);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(out, ws, api_call_inputs(req), NULL), 0);
    attn_workspace_destroy(ws);
    const float *z = out->head_outputs + 299 * 2;
    ck_assert_msg(fabsf(z[0] - 12.0f) <= 1e-5f && fabsf(z[1] - 1.0f) <= 1e-5f,
                  "z[299] = (%g, %g), want (12, 1)", (double)z[0], (double)z[1]);
    api_call_free(req);
    free(body);
}
END_TEST

/*
 * Spikes: tokens whose scores are hundreds apart from the rest, placed in
 * every key tile (256 keys) and in several blocks of query rows (128), so
 * that a later tile raises a row's max far past exp's range, or lies far
 * below it. d_model 8, 2 heads of 4, scale 1. Embedding columns: 0 the
 * spike s_t (0 for most tokens), 1 a constant 1, 2 a query term a_t, 3 a
 * key term b_t (0 on spikes), 4-7 random (V only). Head i: Q = (c_i, a, 0,
 * 0), K = (s, b, 0, 0) with c_0 = 1, c_1 = −1, so score(q, k) = c_i · s_k
 * exactly on a spike and a_q · b_k (|·| <= 3) elsewhere: head 0 sees the
 * spikes as given, head 1 mirrored (what was far above is far below). V
 * reads every column (the spike scaled down), with a bias; W_o random or
 * none. The spike scores are exact in float32, so the float64 reference
 * and the engine agree to rounding even where two spikes tie.
 */
static const struct {
    size_t pos;
    float s;
} spikes[] = {{5, 100},   {130, -200}, {280, 220}, {299, 220}, {300, 250},
              {301, 250}, {600, -300}, {700, 400}, {900, 400}, {950, 150}};

/* Custom-mask rows: dead ones, and rows whose only keys sit in late tiles
 * or pit spikes of far-apart scores against each other across tiles. */
static const size_t gap_dead[] = {3, 127, 128, 999};

static void gap_mask_rows(unsigned char *a, size_t n) {
    const size_t only[][4] = {
        {5, 600, SIZE_MAX},        /* 100 then −300 (head 1: −100 then 300) */
        {600, 950, SIZE_MAX},      /* −300 then 150: a jump of 450 in the last tile */
        {700, 900, 950, SIZE_MAX}, /* 400 and 400 tie across tiles 2 and 3 */
        {998, 997, SIZE_MAX},      /* only the last tile, no spike */
        {5, 300, 620, SIZE_MAX},   /* 100, then 250, then an O(1) key far below */
        {130, 299, 999, SIZE_MAX}, /* −200 then 220 (head 1: 200 then −220) */
        {n - 1, SIZE_MAX},         /* only the last key */
    };
    for (size_t d = 0; d < sizeof gap_dead / sizeof gap_dead[0]; d++)
        if (gap_dead[d] < n) memset(a + gap_dead[d] * n, 0, n);
    for (size_t q = 140; q < 180 && n > 256; q++) /* the whole first key tile masked */
        memset(a + q * n, 0, 256);
    for (size_t x = 0; x < sizeof only / sizeof only[0]; x++) {
        size_t q = 210 + 10 * x;
        memset(a + q * n, 0, n);
        for (size_t k = 0; k < 4 && only[x][k] != SIZE_MAX; k++)
            if (only[x][k] < n) a[q * n + only[x][k]] = 1;
    }
}

static void gap_problem_make(problem *p, size_t n, attn_mask_kind mask, int w_o, uint64_t seed) {
    enum { DM = 8, H = 2, DH = 4, HD = H * DH, LD = 3 * HD };
    shape s = {.n = n, .dm = DM, .h = H, .dh = DH, .b_qkv = 1, .w_o = w_o, .b_o = 1};
    problem_make(p, s, mask, seed);
    uint64_t st = seed * 0xD1B54A32D192ED03ull + 7;
    float *w = p->w_qkv; /* DM × LD */
    for (size_t x = 0; x < DM; x++)
        for (size_t c = 0; c < 2 * HD; c++) /* Q and K: only the entries set below */
            w[x * LD + c] = 0.0f;
    for (size_t i = 0; i < H; i++) {
        w[1 * LD + i * DH] = i == 0 ? 1.0f : -1.0f;          /* Q_i col 0 = c_i */
        w[2 * LD + i * DH + 1] = 1.0f;                       /* Q_i col 1 = a */
        w[0 * LD + HD + i * DH] = 1.0f;                      /* K_i col 0 = s */
        w[3 * LD + HD + i * DH + 1] = i == 0 ? 1.0f : -1.0f; /* K_i col 1 = ±b */
    }
    for (size_t c = 2 * HD; c < LD; c++)
        w[0 * LD + c] /= 256.0f; /* V: the spike scaled to O(1) */
    for (size_t c = 0; c < 2 * HD; c++)
        p->b_qkv[c] = 0.0f; /* exact scores: no Q or K bias */
    for (size_t t = 0; t < n; t++) {
        float *e = p->E + t * DM;
        e[0] = 0.0f, e[1] = 1.0f;
        e[2] = (float)(2.0 * rnd(&st)), e[3] = (float)(1.5 * rnd(&st));
    }
    for (size_t k = 0; k < sizeof spikes / sizeof spikes[0]; k++)
        if (spikes[k].pos < n)
            p->E[spikes[k].pos * DM] = spikes[k].s, p->E[spikes[k].pos * DM + 3] = 0.0f;
    if (mask == ATTN_MASK_CUSTOM) gap_mask_rows(p->allowed, n);
    p->in.scale = 1.0f;
}

/* The largest rise of a row's running max from one key tile (256 keys) to
 * a later one, and the largest fall of a tile's max below it, over every
 * row and head of p (from the formula above, in double): the gaps that
 * test_online_gaps must exercise. */
static void gap_extremes(float *up, float *down, const problem *p) {
    const size_t n = p->in.n_tokens, dm = p->w.d_model;
    double u = 0.0, d = 0.0;
    for (size_t i = 0; i < 2; i++)
        for (size_t q = 0; q < n; q++) {
            double run = -INFINITY;
            for (size_t k0 = 0; k0 < n; k0 += 256) {
                double tmax = -INFINITY;
                for (size_t k = k0; k < k0 + 256 && k < n; k++) {
                    if (!mask_allows(&p->in.mask, n, q, k)) continue;
                    const float *eq = p->E + q * dm, *ek = p->E + k * dm;
                    double c = i == 0 ? 1.0 : -1.0;
                    double sc = c * ek[0] + (double)eq[2] * c * ek[3];
                    if (sc > tmax) tmax = sc;
                }
                if (tmax == -INFINITY) continue;
                if (run != -INFINITY && tmax - run > u) u = tmax - run;
                if (run != -INFINITY && run - tmax > d) d = run - tmax;
                if (tmax > run) run = tmax;
            }
        }
    *up = (float)u, *down = (float)d;
}

/* _i: n in {300, 640, 1000} × W_o or not; every mask kind each. Full and
 * online paths against float64 and each other (online_check), then the
 * online path on 3 threads, bit for bit the serial one. */
START_TEST(test_online_gaps) {
    static const size_t ns[] = {300, 640, 1000};
    const size_t n = ns[_i / 2];
    for (int m = 0; m < 3; m++) {
        problem p;
        gap_problem_make(&p, n, mask_kinds[m], _i & 1, 211 + (uint64_t)(_i * 3 + m));
        float up, down;
        gap_extremes(&up, &down, &p);
        ck_assert_msg(up > 100.0f && down > 100.0f, "gaps only %g up, %g down", (double)up,
                      (double)down);
        online_check(&p);

        outputs ser, par;
        outputs_make(&ser, &p.in), outputs_make(&par, &p.in);
        unsigned want = (1u << O_Z) | (1u << O_E);
        attn_output vs = outputs_view(&ser, want), vp = outputs_view(&par, want);
        attn_workspace *ws = attn_workspace_create();
        ck_assert_int_eq(attn_compute(&vs, ws, &p.in, NULL), 0);
        test_runner r;
        test_runner_init(&r, 3, ws);
        attn_runner runner = {.run = test_run, .ctx = &r};
        ck_assert_int_eq(attn_compute_with(&vp, ws, &p.in, &runner, NULL), 0);
        test_runner_free(&r);
        ck_assert(memcmp(ser.buf[O_Z], par.buf[O_Z], ser.count[O_Z] * sizeof(float)) == 0);
        ck_assert(memcmp(ser.buf[O_E], par.buf[O_E], ser.count[O_E] * sizeof(float)) == 0);
        attn_workspace_destroy(ws);
        outputs_free(&ser), outputs_free(&par);
        problem_free(&p);
    }
}
END_TEST

/* ---- 13. grouped K/V heads: g = 1 (multi-query), 2, h ---------------------------------- */

/* (h, g) of the grouped tests; the lists mix groups, share K/V heads among
 * listed heads and repeat one (so that only some heads are projected). */
static const size_t grouped_hg[][2] = {{4, 1}, {4, 2}, {4, 4}, {8, 1}, {8, 2}, {8, 8}};
static const size_t grouped_lists[2][5] = {{3, 2, 0, 3}, {7, 1, 6, 2, 7}};
static const size_t grouped_counts[2] = {4, 5};

static shape grouped_shape(int c, size_t n, int w_o) {
    size_t h = grouped_hg[c][0];
    /* no w_o: hd == dm */
    return (shape){.n = n,
                   .dm = h * 8,
                   .h = h,
                   .dh = 8,
                   .b_qkv = 1,
                   .w_o = w_o,
                   .b_o = 1,
                   .g = grouped_hg[c][1]};
}

static void grouped_list(problem *p, int c) {
    int l = grouped_hg[c][0] == 8;
    memcpy(p->heads, grouped_lists[l], grouped_counts[l] * sizeof(size_t));
    p->in.n_heads_out = grouped_counts[l];
}

/*
 * Both paths against the float64 reference (which finds head i's K/V head
 * itself): the full one (patterns shown) and the online one (every output
 * but S and P, Z alone, ΔE and E' alone), n = 300 (three blocks of query
 * rows, two key tiles), every mask kind (custom: dead rows and a masked
 * key tile), scores scaled up 8× (and by 1 on w_o's loop), and the naive
 * reference too, on every listed head and on all heads.
 */
START_TEST(test_grouped) {
    const int c = _i % 6, w_o = _i / 6;
    for (int m = 0; m < 3; m++) {
        problem p;
        problem_make(&p, grouped_shape(c, 300, w_o), mask_kinds[m], 401 + (uint64_t)(_i * 3 + m));
        if (mask_kinds[m] == ATTN_MASK_CUSTOM) mask_rows_edge(&p, 300);
        p.in.scale *= w_o ? 1.0f : 8.0f;
        grouped_list(&p, c);
        online_check(&p);
        /* ΔE and E' alone: the online path, every head projected by one GEMM */
        ref64 r;
        ref_compute(&r, &p.in);
        outputs o;
        outputs_make(&o, &p.in);
        attn_output v = outputs_view(&o, 1u << O_E);
        attn_workspace *ws = attn_workspace_create();
        ck_assert_int_eq(attn_compute(&v, ws, &p.in, NULL), 0);
        outputs_check("online E only", &o, &r, 1u << O_E);
        attn_workspace_destroy(ws);
        outputs_free(&o);
        ref_free(&r);
        if (m == 0) { /* the naive reference, listed heads and all heads */
            p.in.n_tokens = 40;
            run_and_check(&o, &p.in);
            outputs_free(&o);
            for (size_t i = 0; i < p.w.n_heads; i++)
                p.heads[i] = i;
            p.in.n_heads_out = p.w.n_heads;
            run_and_check(&o, &p.in);
            outputs_free(&o);
        }
        problem_free(&p);
    }
}
END_TEST

/* Scores of several hundreds (exact small integers in Q and K, as
 * test_large_scores), h = 4 heads on g = 2 K/V heads whose K differ: a
 * head reading the wrong K/V head gets other scores, and the softmax must
 * still subtract each row's max. */
START_TEST(test_grouped_large_scores) {
    enum { N = 4, DM = 4, H = 4, G = 2, DH = 4, LD = H * DH + 2 * G * DH };
    static const float E[N][DM] = {{3, 1, -2, 4}, {2, -3, 1, 1}, {-1, 2, 3, -2}, {2, -3, 1, 1}};
    float w_qkv[DM * LD] = {0}, w_o[H * DH * DM] = {0};
    for (int x = 0; x < H * DH; x++) /* ΔE = Σ_i Z_i */
        w_o[x * DM + x % DH] = 1.0f;
    for (int r = 0; r < DM; r++) {
        for (int i = 0; i < H; i++)
            w_qkv[r * LD + i * DH + r] = (float)(4 - i);  /* W_q_i = (4 − i)·I */
        w_qkv[r * LD + H * DH + r] = 4.0f;                /* W_k_0 = 4·I */
        w_qkv[r * LD + H * DH + DH + (3 - r)] = 3.0f;     /* W_k_1 reverses, ×3 */
        w_qkv[r * LD + H * DH + G * DH + (3 - r)] = 1.0f; /* W_v_0 reverses */
        w_qkv[r * LD + H * DH + G * DH + DH + r] = 2.0f;  /* W_v_1 = 2·I */
    }
    attn_weights w = {
        .d_model = DM, .n_heads = H, .d_head = DH, .n_kv_heads = G, .w_qkv = w_qkv, .w_o = w_o};
    size_t heads[H] = {0, 1, 2, 3};
    attn_input in = {.weights = &w,
                     .embeddings = &E[0][0],
                     .n_tokens = N,
                     .mask = {.kind = mask_kinds[_i]},
                     .scale = 2.0f,
                     .heads = heads,
                     .n_heads_out = H};
    unsigned char allowed[N * N];
    for (int x = 0; x < N * N; x++)
        allowed[x] = (x % 5) != 1;
    in.mask.allowed = allowed;
    outputs o;
    run_and_check(&o, &in);
    pattern_rules(&o, &in);
    ck_assert(o.buf[O_S][0] == 960.0f);     /* head 0, K/V head 0: 2·4·4·30 */
    ck_assert(o.buf[O_S][N * N] == 720.0f); /* head 1, K/V head 0: 2·3·4·30 */
    ck_assert(o.buf[O_S][2 * N * N] ==
              240.0f); /* head 2, K/V head 1: 2·2·3·(e₀ · reversed e₀ = 20) */
    outputs_free(&o);
}
END_TEST

/* attn_compute_with on 1, 2 and 4 threads is bit for bit attn_compute with
 * g = 1 and 2 K/V heads (every output set, mask _i % 3, with and without
 * w_o), and the serial outputs match the float64 reference. */
START_TEST(test_grouped_runner_bitwise) {
    static const size_t lists[][5] = {{0, 1, 2, 3}, {3, 2, 3}, {1}, {2, 0, 3, 1, 2}};
    static const size_t counts[] = {4, 3, 1, 5};
    attn_mask_kind mask = mask_kinds[_i % 3];
    int w_o = _i < 3;
    for (size_t g = 1; g <= 2; g++) {
        shape s = {.n = 300, .dm = 32, .h = 4, .dh = 8, .b_qkv = 1, .w_o = w_o, .b_o = 1, .g = g};
        problem p;
        problem_make(&p, s, mask, 451 + (uint64_t)(_i * 2) + g);
        if (mask == ATTN_MASK_CUSTOM) mask_rows_edge(&p, s.n);
        attn_workspace *ws = attn_workspace_create(), *ws_with = attn_workspace_create();
        for (size_t l = 0; l < sizeof counts / sizeof counts[0]; l++) {
            memcpy(p.heads, lists[l], counts[l] * sizeof(size_t));
            p.in.n_heads_out = counts[l];
            ref64 r;
            ref_compute(&r, &p.in);
            for (size_t wi = 0; wi < sizeof with_wants / sizeof with_wants[0]; wi++) {
                outputs serial;
                outputs_make(&serial, &p.in);
                attn_output vs = outputs_view(&serial, with_wants[wi]);
                ck_assert_int_eq(attn_compute(&vs, ws, &p.in, NULL), 0);
                outputs_check("serial", &serial, &r, with_wants[wi]);
                static const int thread_counts[] = {1, 2, 4};
                for (int k = 0; k < 3; k++) {
                    test_runner tr;
                    test_runner_init(&tr, thread_counts[k], ws_with);
                    attn_runner runner = {.run = test_run, .ctx = &tr};
                    outputs o;
                    outputs_make(&o, &p.in);
                    for (int b = 0; b < O_COUNT; b++)
                        memset(o.buf[b], 0x7f, o.count[b] * sizeof(float));
                    attn_output vo = outputs_view(&o, with_wants[wi]);
                    ck_assert_int_eq(attn_compute_with(&vo, ws_with, &p.in, &runner, NULL), 0);
                    for (int b = 0; b < O_COUNT; b++)
                        if ((with_wants[wi] >> b) & 1)
                            ck_assert_msg(
                                !memcmp(o.buf[b], serial.buf[b], o.count[b] * sizeof(float)),
                                "g %zu, list %zu, want %#x, %d threads: %s differs", g, l,
                                with_wants[wi], thread_counts[k], o_name[b]);
                    outputs_free(&o);
                    test_runner_free(&tr);
                }
                outputs_free(&serial);
            }
            ref_free(&r);
        }
        attn_workspace_destroy(ws), attn_workspace_destroy(ws_with);
        problem_free(&p);
    }
}
END_TEST

/*
 * n_kv_heads = h is bit for bit n_kv_heads = 0 (the same weights), on every
 * output set. And grouping is Llama's repeat_kv: the h-head weights whose
 * K and V of head i are the grouped K_u, V_u, u = i / (h/g), give what the
 * grouped weights give (within the tolerance: the GEMMs differ in width).
 */
START_TEST(test_grouped_equal) {
    const int c = _i; /* grouped_hg */
    const size_t h = grouped_hg[c][0], g = grouped_hg[c][1], dh = 8;
    attn_mask_kind mask = mask_kinds[_i % 3];
    problem p;
    problem_make(&p, grouped_shape(c, 300, 1), mask, 501 + (uint64_t)_i);
    grouped_list(&p, c);
    attn_workspace *ws = attn_workspace_create();
    /* the same weights as multi-head: g = h only, where the layouts agree */
    if (g == h) {
        attn_weights w0 = p.w;
        w0.n_kv_heads = 0;
        attn_input in0 = p.in;
        in0.weights = &w0;
        for (size_t wi = 0; wi < sizeof with_wants / sizeof with_wants[0]; wi++) {
            outputs a, b;
            outputs_make(&a, &p.in), outputs_make(&b, &p.in);
            attn_output va = outputs_view(&a, with_wants[wi]),
                        vb = outputs_view(&b, with_wants[wi]);
            ck_assert_int_eq(attn_compute(&va, ws, &p.in, NULL), 0);
            ck_assert_int_eq(attn_compute(&vb, ws, &in0, NULL), 0);
            for (int o = 0; o < O_COUNT; o++)
                ck_assert_msg(!memcmp(a.buf[o], b.buf[o], a.count[o] * sizeof(float)),
                              "want %#x: %s differs", with_wants[wi], o_name[o]);
            outputs_free(&a), outputs_free(&b);
        }
    }
    /* repeat_kv: [Q | K_u(0) … K_u(h-1) | V_u(0) … V_u(h-1)] */
    const size_t dm = p.w.d_model, hd = h * dh, ld = hd + 2 * g * dh, ldm = 3 * hd;
    float *wm = xcalloc(dm * ldm, sizeof(float)), *bm = xcalloc(ldm, sizeof(float));
    for (size_t col = 0; col < ldm; col++) {
        size_t from = col; /* Q columns as they are */
        if (col >= hd) {
            size_t part = (col - hd) / hd, i = (col - hd) % hd / dh, x = col % dh;
            from = hd + part * g * dh + i / (h / g) * dh + x;
        }
        for (size_t r = 0; r < dm; r++)
            wm[r * ldm + col] = p.w_qkv[r * ld + from];
        bm[col] = p.b_qkv[from];
    }
    attn_weights wmh = p.w;
    wmh.n_kv_heads = 0, wmh.w_qkv = wm, wmh.b_qkv = bm;
    attn_input inm = p.in;
    inm.weights = &wmh;
    for (int path = 0; path < 2; path++) {
        unsigned want = path ? WANT_ALL : WANT_ALL & ~(1u << O_S) & ~(1u << O_P);
        outputs a, b;
        outputs_make(&a, &p.in), outputs_make(&b, &p.in);
        attn_output va = outputs_view(&a, want), vb = outputs_view(&b, want);
        ck_assert_int_eq(attn_compute(&va, ws, &p.in, NULL), 0);
        ck_assert_int_eq(attn_compute(&vb, ws, &inm, NULL), 0);
        for (int o = 0; o < O_COUNT; o++) {
            if (!((want >> o) & 1)) continue;
            double *ref = xcalloc(b.count[o], sizeof(double));
            for (size_t x = 0; x < b.count[o]; x++)
                ref[x] = b.buf[o][x];
            close_check(o_name[o], a.buf[o], ref, a.count[o]);
            free(ref);
        }
        outputs_free(&a), outputs_free(&b);
    }
    free(wm), free(bm);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/*
 * Sizes: Q, K, V scratch is n × (hd + 2gd), so g < h needs n·2(h − g)·dh
 * floats less, in attn_workspace_need_grouped and in what a call takes;
 * the projection's flops shrink by 2n·2(h − g)·dh·dm and nothing else. A g
 * that does not divide h fails as a size. The grouped call's ΔE is checked
 * against the reference too.
 */
START_TEST(test_grouped_sizes) {
    const size_t n = 256, dm = 32, dh = 8;
    for (int c = 0; c < 6; c++) {
        const size_t h = grouped_hg[c][0], g = grouped_hg[c][1];
        const size_t rows = 264; /* n, padded to 12 rows (ATTN_ROWS_QUANTUM) */
        const size_t kv_share = rows * 2 * (h - g) * dh * sizeof(float); /* a multiple of 64 */
        ck_assert_uint_eq(attn_workspace_need_grouped(n, dm, h, 0, dh),
                          attn_workspace_need(n, dm, h, dh));
        ck_assert_uint_eq(attn_workspace_need_grouped(n, dm, h, g, dh) + kv_share,
                          attn_workspace_need(n, dm, h, dh));
        ck_assert(attn_flops_grouped(n, dm, h, 0, dh, 1) == attn_flops(n, dm, h, dh, 1));
        ck_assert(attn_flops_grouped(n, dm, h, g, dh, 1) + 2.0 * n * 2 * (h - g) * dh * dm ==
                  attn_flops(n, dm, h, dh, 1));
        /* what a call takes: ΔE alone, every slice but the rows one */
        size_t bytes[2];
        for (int grouped = 0; grouped < 2; grouped++) {
            shape s = grouped_shape(c, n, 1);
            s.dm = dm, s.g = grouped ? g : 0;
            problem p;
            problem_make(&p, s, ATTN_MASK_CAUSAL, 551 + (uint64_t)c);
            outputs o;
            outputs_make(&o, &p.in);
            attn_output v = outputs_view(&o, 1u << O_E);
            attn_workspace *ws = attn_workspace_create();
            ck_assert_int_eq(attn_compute(&v, ws, &p.in, NULL), 0);
            bytes[grouped] = attn_workspace_bytes(ws);
            ck_assert_uint_le(bytes[grouped], attn_workspace_need_grouped(n, dm, h, s.g, dh));
            ref64 r;
            ref_compute(&r, &p.in);
            outputs_check("E", &o, &r, 1u << O_E);
            ref_free(&r);
            attn_workspace_destroy(ws);
            outputs_free(&o);
            problem_free(&p);
        }
        ck_assert_uint_eq(bytes[1] + kv_share, bytes[0]);
    }
    ck_assert_uint_eq(attn_workspace_need_grouped(8, 4, 4, 3, 4), SIZE_MAX); /* 3 ∤ 4 */
    ck_assert_uint_eq(attn_workspace_need_grouped(8, 4, 4, 8, 4), SIZE_MAX); /* g > h */
    float dummy = canary, w_qkv[4 * 40] = {0};
    attn_weights w = {.d_model = 4, .n_heads = 4, .d_head = 4, .n_kv_heads = 3, .w_qkv = w_qkv};
    attn_input in = {.weights = &w,
                     .embeddings = &dummy,
                     .n_tokens = 1,
                     .mask = {.kind = ATTN_MASK_CAUSAL},
                     .scale = 1.0f};
    attn_output out = {.embeddings = &dummy};
    attn_workspace *ws = attn_workspace_create();
    ck_assert_ptr_eq(compute_error(&out, ws, &in, NULL), ATTN_ERR_NOMEM);
    ck_assert(dummy == canary);
    attn_workspace_destroy(ws);
}
END_TEST

static Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_worked_example);
    tcase_add_loop_test(tc, test_masks, 0, 3);
    tcase_add_test(tc, test_mask_empty_row);
    tcase_add_loop_test(tc, test_biases, 0, 4);
    tcase_add_loop_test(tc, test_identity_wo, 0, 2);
    tcase_add_loop_test(tc, test_shapes, 0, (int)(sizeof shapes / sizeof shapes[0]));
    tcase_add_loop_test(tc, test_select_heads, 0,
                        (int)(sizeof head_counts / sizeof head_counts[0]));
    tcase_add_loop_test(tc, test_large_scores, 0, 3);
    tcase_add_loop_test(tc, test_null_outputs, 0, 3);
    tcase_add_test(tc, test_work_not_asked);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_workspace_grows);
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_overflowing_scores);
    tcase_add_test(tc, test_overflow_rescued_by_scale);
    tcase_add_test(tc, test_overflow_rescued_late_tile);
    tcase_add_test(tc, test_online_no_overflow);
    tcase_add_test(tc, test_vexp);
    tcase_add_test(tc, test_vexp_sleef_bits);
    tcase_add_loop_test(tc, test_online_blocks, 0, 4);
    tcase_add_loop_test(tc, test_online_sizes, 0, 4);
    tcase_add_test(tc, test_linear_memory);
    tcase_add_loop_test(tc, test_runner_bitwise, 0, 6);
    tcase_add_test(tc, test_runner_tasks);
    tcase_add_test(tc, test_runner_few_tiles);
    tcase_add_test(tc, test_runner_nonfinite);
    tcase_add_test(tc, test_runner_stop);
    tcase_add_test(tc, test_online_gap_repro);
    tcase_add_test(tc, test_online_gap_repro_api);
    tcase_add_loop_test(tc, test_online_gaps, 0, 6);
    tcase_add_loop_test(tc, test_grouped, 0, 12);
    tcase_add_loop_test(tc, test_grouped_large_scores, 0, 3);
    tcase_add_loop_test(tc, test_grouped_runner_bitwise, 0, 6);
    tcase_add_loop_test(tc, test_grouped_equal, 0, 6);
    tcase_add_test(tc, test_grouped_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* OpenBLAS on one thread, as the server runs it (server/main.c): its
     * own threads, spinning between products, would take the cores from
     * the multi-threaded cases' threads, and from suites run beside. */
    openblas_set_num_threads(1);
    SRunner *sr = srunner_create(attention_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
