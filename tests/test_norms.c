/*
 * test_norms.c — the engine's norms and query temperature (attention.h's
 * attn_norm, attn_qk_norm, attn_temperature; docs/API.md, "Attention of
 * 2025–2026 models"): the input norm (layer, rms, offset 0 and 1), post_norm,
 * qk_norm (per head and over all of Q and K), Llama 4's temperature and the
 * `normed` output, alone and as real layers combine them (Qwen3, Gemma 3,
 * OLMo 2, a Llama 4 NoPE layer).
 *
 * Each case computes a random problem as test_variants.c does: attn_compute
 * (the full path when scores or patterns are shown, else the online one),
 * the same split over a runner on other workspaces (bit for bit equal),
 * a batch holding it beside a shorter sequence (its results bit for bit its
 * own call's), attn_compute_naive, and a float64 reference written here
 * from the contract's formulas. Both float32 answers must match the
 * reference within RTOL of each output's scale. Then stacks against
 * attn_stack_naive (per layer normed), listed heads alone against all, a
 * context (only the queries normalised), and the work count.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/naive.h"
#include "tests/split_runner.h"

#define RTOL 2e-5

static void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (!p) ck_abort_msg("calloc(%zu, %zu) failed", count, size);
    return p;
}

/* A uniform double in [-1, 1) from a 64-bit state (xorshift*). */
static double rnd(uint64_t *st) {
    uint64_t x = *st;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *st = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}

static float *random_floats(size_t count, double amp, double base, uint64_t *st) {
    float *x = xcalloc(count, sizeof(float));
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(base + amp * rnd(st));
    return x;
}

/* ---- a problem ------------------------------------------------------------ */

/* A norm as the case wants it: its type, whether it has a weight and a
 * bias, its offset and eps (0: the contract's default). */
typedef struct norm_cfg {
    attn_norm_type type;
    int weight, bias;
    double offset, eps;
} norm_cfg;

typedef struct cfg {
    size_t n, dm, h, g, dh;
    attn_mask_kind mask;
    int w_o, bias;
    attn_rope rope;
    int positions; /* offset and shuffled positions */
    size_t m, dc;  /* a context of m rows through w_kv; 0: none */
    double amp;    /* of the embeddings */
    double offset; /* added to every embedding: a mean for the layer norm to take off */
    norm_cfg norm, post_norm;
    norm_cfg qk;   /* type RMS: qk_norm */
    int qk_all;    /* scope all */
    double temp_f; /* temperature's floor_scale; 0: none */
    double temp_a;
} cfg;

typedef struct problem {
    cfg c;
    attn_weights w;
    attn_input in;
    float *E, *C, *w_qkv, *b_qkv, *w_kv, *b_kv, *w_o, *b_o;
    float *nw, *nb, *pw, *pb, *qw, *kw;
    unsigned *pos;
    size_t heads[16];
} problem;

static attn_norm norm_make(const norm_cfg *nc, float **w, float **b, size_t d, uint64_t *st) {
    attn_norm nm = {.type = nc->type, .offset = nc->offset};
    if (nc->type == ATTN_NORM_NONE) return nm;
    nm.eps = nc->eps > 0.0 ? nc->eps : nc->type == ATTN_NORM_LAYER ? 1e-5 : 1e-6;
    /* weights near 1 (offset 0) or near 0 (offset 1, as Gemma stores them) */
    if (nc->weight) nm.weight = *w = random_floats(d, 0.5, nc->offset != 0.0 ? 0.0 : 1.0, st);
    if (nc->bias) nm.bias = *b = random_floats(d, 0.5, 0.0, st);
    return nm;
}

static void problem_make(problem *p, const cfg *c, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    const size_t n = c->n, dm = c->dm, h = c->h, g = c->g ? c->g : c->h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, dc = c->m ? c->dc : dm;
    const int cross = c->m > 0;
    p->E = random_floats(n * dm, c->amp, c->offset, &st);
    const size_t wcols = cross ? hd : hd + 2 * gd;
    p->w_qkv = random_floats(dm * wcols, 1.0 / sqrt((double)dm), 0.0, &st);
    if (c->bias) p->b_qkv = random_floats(wcols, 0.5, 0.0, &st);
    if (cross) {
        p->C = random_floats(c->m * dc, c->amp, c->offset, &st);
        p->w_kv = random_floats(dc * 2 * gd, 1.0 / sqrt((double)dc), 0.0, &st);
        if (c->bias) p->b_kv = random_floats(2 * gd, 0.5, 0.0, &st);
    }
    if (c->w_o) {
        p->w_o = random_floats(hd * dm, 1.0 / sqrt((double)hd), 0.0, &st);
        p->b_o = random_floats(dm, 0.5, 0.0, &st);
    }
    if (c->positions) {
        p->pos = xcalloc(n, sizeof(unsigned));
        for (size_t t = 0; t < n; t++)
            p->pos[t] = 3000u + (unsigned)t;
        for (size_t t = n - 1; t > 0; t--) { /* a permutation */
            size_t u = (size_t)((rnd(&st) + 1.0) / 2.0 * (double)(t + 1)) % (t + 1);
            unsigned x = p->pos[t];
            p->pos[t] = p->pos[u], p->pos[u] = x;
        }
    }
    p->w = (attn_weights){.d_model = dm,
                          .n_heads = h,
                          .d_head = dh,
                          .n_kv_heads = c->g,
                          .w_qkv = p->w_qkv,
                          .b_qkv = p->b_qkv,
                          .w_o = p->w_o,
                          .b_o = p->b_o,
                          .d_context = cross ? dc : 0,
                          .w_kv = p->w_kv,
                          .b_kv = p->b_kv,
                          .rope = c->rope};
    p->w.norm = norm_make(&c->norm, &p->nw, &p->nb, dm, &st);
    p->w.post_norm = norm_make(&c->post_norm, &p->pw, &p->pb, dm, &st);
    if (c->qk.type == ATTN_NORM_RMS) {
        float *unused = NULL;
        p->w.qk_norm.q = norm_make(&c->qk, &p->qw, &unused, c->qk_all ? hd : dh, &st);
        p->w.qk_norm.k = norm_make(&c->qk, &p->kw, &unused, c->qk_all ? gd : dh, &st);
        p->w.qk_norm.all = c->qk_all;
    }
    p->w.temperature = (attn_temperature){.floor_scale = c->temp_f, .attn_scale = c->temp_a};
    for (size_t i = 0; i < h && i < 16; i++)
        p->heads[i] = i;
    p->in = (attn_input){.weights = &p->w,
                         .embeddings = p->E,
                         .n_tokens = n,
                         .mask = {c->mask, NULL},
                         .scale = (float)(1.0 / sqrt((double)dh)),
                         .heads = p->heads,
                         .n_heads_out = h,
                         .positions = p->pos,
                         .context = p->C,
                         .n_context = c->m};
}

static void problem_free(problem *p) {
    free(p->E), free(p->C), free(p->w_qkv), free(p->b_qkv), free(p->w_kv), free(p->b_kv);
    free(p->w_o), free(p->b_o), free(p->pos);
    free(p->nw), free(p->nb), free(p->pw), free(p->pb), free(p->qw), free(p->kw);
}

/* ---- outputs -------------------------------------------------------------- */

enum { O_Q, O_K, O_V, O_QR, O_KR, O_S, O_P, O_Z, O_D, O_E, O_N, O_COUNT };
static const char *const out_names[O_COUNT] = {"q",     "k",          "v",        "q_raw",
                                               "k_raw", "scores",     "patterns", "head_outputs",
                                               "delta", "embeddings", "normed"};
#define WANT_ALL    ((1u << O_COUNT) - 1)
#define WANT_ONLINE ((1u << O_Z) | (1u << O_D) | (1u << O_E))
#define WANT_QK     ((1u << O_Q) | (1u << O_K) | (1u << O_QR) | (1u << O_KR) | (1u << O_V))

typedef struct outputs {
    float *buf[O_COUNT];
    size_t count[O_COUNT];
    attn_output o;
} outputs;

static void counts_of(size_t count[O_COUNT], const problem *p, size_t n, size_t hs) {
    const size_t m = p->c.m ? p->c.m : n, dh = p->c.dh, dm = p->c.dm;
    const size_t cnt[O_COUNT] = {hs * n * dh, hs * m * dh, hs * m * dh, hs * n * dh,
                                 hs * m * dh, hs * n * m,  hs * n * m,  hs * n * dh,
                                 n * dm,      n * dm,      n * dm};
    memcpy(count, cnt, sizeof cnt);
}

static void outputs_make(outputs *o, const problem *p, const attn_input *in, unsigned want) {
    memset(o, 0, sizeof *o);
    counts_of(o->count, p, in->n_tokens, in->n_heads_out);
    for (int b = 0; b < O_COUNT; b++)
        if (want & (1u << b)) o->buf[b] = xcalloc(o->count[b], sizeof(float));
    o->o = (attn_output){.q = o->buf[O_Q],
                         .k = o->buf[O_K],
                         .v = o->buf[O_V],
                         .q_raw = o->buf[O_QR],
                         .k_raw = o->buf[O_KR],
                         .scores = o->buf[O_S],
                         .patterns = o->buf[O_P],
                         .head_outputs = o->buf[O_Z],
                         .delta = o->buf[O_D],
                         .embeddings = o->buf[O_E],
                         .normed = o->buf[O_N]};
}

static void outputs_free(outputs *o) {
    for (int b = 0; b < O_COUNT; b++)
        free(o->buf[b]);
}

/* ---- the float64 reference ------------------------------------------------- */

/* y ← N(x) over d values, from the contract: layer (x − mean) / sqrt(var +
 * eps) · w + b; rms x / sqrt(mean(x²) + eps) · (offset + w). */
static void ref_norm(double *y, const double *x, size_t d, const attn_norm *nm) {
    double mean = 0.0, var = 0.0;
    if (nm->type == ATTN_NORM_LAYER) {
        for (size_t c = 0; c < d; c++)
            mean += x[c] / (double)d;
        for (size_t c = 0; c < d; c++)
            var += (x[c] - mean) * (x[c] - mean) / (double)d;
        for (size_t c = 0; c < d; c++)
            y[c] = (x[c] - mean) / sqrt(var + nm->eps) * (nm->weight ? nm->weight[c] : 1.0) +
                   (nm->bias ? nm->bias[c] : 0.0);
        return;
    }
    double ms = 0.0;
    for (size_t c = 0; c < d; c++)
        ms += x[c] * x[c] / (double)d;
    for (size_t c = 0; c < d; c++)
        y[c] = x[c] / sqrt(ms + nm->eps) * (nm->weight ? nm->offset + nm->weight[c] : 1.0);
}

/* Hugging Face's rotate_half RoPE (no scaling here). */
static void ref_rotate(double *x, double p, const attn_rope *r) {
    const size_t half = r->dims / 2;
    double y[64];
    for (size_t c = 0; c < r->dims; c++) {
        size_t t = c % half;
        double ang = p / pow(r->theta, (double)(2 * t) / (double)r->dims);
        double rot = c < half ? -x[c + half] : x[c - half];
        y[c] = x[c] * cos(ang) + rot * sin(ang);
    }
    memcpy(x, y, r->dims * sizeof(double));
}

static double ref_pos(const problem *p, size_t t) {
    return p->pos ? (double)p->pos[t] : (double)t;
}

/* ref[b]: doubles laid out as outputs' buf[b], every head listed in order. */
static void ref_compute(double *ref[O_COUNT], const problem *p) {
    const cfg *c = &p->c;
    const attn_weights *w = &p->w;
    const size_t n = c->n, dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh;
    const int cross = c->m > 0;
    const size_t m = cross ? c->m : n, dc = cross ? c->dc : dm;
    size_t count[O_COUNT];
    counts_of(count, p, n, h);
    for (int b = 0; b < O_COUNT; b++)
        ref[b] = xcalloc(count[b], sizeof(double));
    /* N(E), and the rows K and V come from */
    double *NE = ref[O_N], *X = xcalloc(m * dc, sizeof(double));
    for (size_t t = 0; t < n; t++) {
        double row[256];
        for (size_t x = 0; x < dm; x++)
            row[x] = p->E[t * dm + x];
        if (w->norm.type != ATTN_NORM_NONE)
            ref_norm(NE + t * dm, row, dm, &w->norm);
        else
            memcpy(NE + t * dm, row, dm * sizeof(double));
    }
    for (size_t t = 0; t < m; t++)
        for (size_t x = 0; x < dc; x++)
            X[t * dc + x] = cross ? (double)p->C[t * dc + x] : NE[t * dm + x];
    /* the whole projections: Q n × hd, K and V m × gd */
    double *Q = xcalloc(n * hd, sizeof(double)), *K = xcalloc(m * gd, sizeof(double));
    double *V = xcalloc(m * gd, sizeof(double)), *Z = xcalloc(n * hd, sizeof(double));
    const size_t ldq = cross ? hd : hd + 2 * gd, ldkv = cross ? 2 * gd : hd + 2 * gd;
    const float *wkv = cross ? p->w_kv : p->w_qkv + hd;
    const float *bkv = cross ? p->b_kv : p->b_qkv ? p->b_qkv + hd : NULL;
    for (size_t t = 0; t < n; t++)
        for (size_t col = 0; col < hd; col++) {
            double a = p->b_qkv ? p->b_qkv[col] : 0.0;
            for (size_t x = 0; x < dm; x++)
                a += NE[t * dm + x] * p->w_qkv[x * ldq + col];
            Q[t * hd + col] = a;
        }
    for (size_t t = 0; t < m; t++)
        for (size_t col = 0; col < gd; col++) {
            double a = bkv ? bkv[col] : 0.0, v = bkv ? bkv[gd + col] : 0.0;
            for (size_t x = 0; x < dc; x++) {
                a += X[t * dc + x] * wkv[x * ldkv + col];
                v += X[t * dc + x] * wkv[x * ldkv + gd + col];
            }
            K[t * gd + col] = a, V[t * gd + col] = v;
        }
    /* qk_norm: per head (weights dh), or over the whole row (weights hd, gd) */
    if (w->qk_norm.q.type == ATTN_NORM_RMS) {
        const size_t qw = w->qk_norm.all ? hd : dh, kw = w->qk_norm.all ? gd : dh;
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < hd / qw; e++)
                ref_norm(Q + t * hd + e * qw, Q + t * hd + e * qw, qw, &w->qk_norm.q);
        for (size_t t = 0; t < m; t++)
            for (size_t e = 0; e < gd / kw; e++)
                ref_norm(K + t * gd + e * kw, K + t * gd + e * kw, kw, &w->qk_norm.k);
    }
    for (size_t i = 0; i < h; i++) {
        const size_t u = i * g / h;
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < dh; e++)
                ref[O_QR][i * n * dh + t * dh + e] = Q[t * hd + i * dh + e];
        for (size_t t = 0; t < m; t++)
            for (size_t e = 0; e < dh; e++) {
                ref[O_KR][i * m * dh + t * dh + e] = K[t * gd + u * dh + e];
                ref[O_K][i * m * dh + t * dh + e] = K[t * gd + u * dh + e];
                ref[O_V][i * m * dh + t * dh + e] = V[t * gd + u * dh + e];
            }
        double *q = ref[O_Q] + i * n * dh, *k = ref[O_K] + i * m * dh;
        memcpy(q, ref[O_QR] + i * n * dh, n * dh * sizeof(double));
        if (c->rope.dims && !cross) {
            for (size_t t = 0; t < n; t++)
                ref_rotate(q + t * dh, ref_pos(p, t), &c->rope);
            for (size_t t = 0; t < m; t++)
                ref_rotate(k + t * dh, ref_pos(p, t), &c->rope);
        }
        /* Llama 4's temperature: log(⌊(p + 1) / F⌋ + 1) · a + 1 */
        for (size_t t = 0; c->temp_f > 0.0 && t < n; t++) {
            double f = log(floor((ref_pos(p, t) + 1.0) / c->temp_f) + 1.0) * c->temp_a + 1.0;
            for (size_t e = 0; e < dh; e++)
                q[t * dh + e] *= f;
        }
        if (!c->rope.dims || cross) { /* no RoPE: q_raw and k_raw are q and k */
            memcpy(ref[O_QR] + i * n * dh, q, n * dh * sizeof(double));
        }
        double *S = ref[O_S] + i * n * m, *P = ref[O_P] + i * n * m;
        for (size_t qi = 0; qi < n; qi++) {
            double max = -INFINITY, sum = 0.0;
            for (size_t ki = 0; ki < m; ki++) {
                int ok = c->mask == ATTN_MASK_CAUSAL ? ki <= qi : 1;
                double d = 0.0;
                for (size_t e = 0; e < dh; e++)
                    d += q[qi * dh + e] * k[ki * dh + e];
                S[qi * m + ki] = ok ? (double)p->in.scale * d : -INFINITY;
                if (ok && S[qi * m + ki] > max) max = S[qi * m + ki];
            }
            for (size_t ki = 0; ki < m; ki++) {
                P[qi * m + ki] = max == -INFINITY ? 0.0 : exp(S[qi * m + ki] - max);
                sum += P[qi * m + ki];
            }
            for (size_t ki = 0; ki < m; ki++)
                P[qi * m + ki] = sum > 0.0 ? P[qi * m + ki] / sum : 0.0;
            for (size_t e = 0; e < dh; e++) {
                double z = 0.0;
                for (size_t ki = 0; ki < m; ki++)
                    z += P[qi * m + ki] * ref[O_V][i * m * dh + ki * dh + e];
                Z[qi * hd + i * dh + e] = z;
                ref[O_Z][i * n * dh + qi * dh + e] = z;
            }
        }
    }
    for (size_t t = 0; t < n; t++) {
        double *d = ref[O_D] + t * dm;
        for (size_t e = 0; e < dm; e++) {
            d[e] = p->b_o ? p->b_o[e] : 0.0;
            if (p->w_o)
                for (size_t x = 0; x < hd; x++)
                    d[e] += Z[t * hd + x] * p->w_o[x * dm + e];
            else
                d[e] += Z[t * hd + e];
        }
        if (w->post_norm.type != ATTN_NORM_NONE) ref_norm(d, d, dm, &w->post_norm);
        for (size_t e = 0; e < dm; e++)
            ref[O_E][t * dm + e] = (double)p->E[t * dm + e] + d[e];
    }
    free(X), free(Q), free(K), free(V), free(Z);
}

/* got vs ref, count values: −inf exactly where the reference has it, else
 * within RTOL of the output's largest magnitude. */
static void close_check(const char *who, const char *what, const float *got, const double *ref,
                        size_t count) {
    double scale = 0.0;
    for (size_t x = 0; x < count; x++)
        if (isfinite(ref[x]) && fabs(ref[x]) > scale) scale = fabs(ref[x]);
    for (size_t x = 0; x < count; x++) {
        if (isinf(ref[x])) {
            if (got[x] != (float)ref[x])
                ck_abort_msg("%s %s[%zu]: got %g, want -inf", who, what, x, (double)got[x]);
            continue;
        }
        double err = fabs((double)got[x] - ref[x]);
        if (!(err <= RTOL * fabs(ref[x]) + RTOL * scale))
            ck_abort_msg("%s %s[%zu]: got %.9g, want %.9g (err %g, scale %g)", who, what, x,
                         (double)got[x], ref[x], err, scale);
    }
}

/* ---- one case --------------------------------------------------------------- */

static void same_bits(const outputs *a, const outputs *b, unsigned want, const char *who) {
    for (int x = 0; x < O_COUNT; x++)
        if (want & (1u << x))
            ck_assert_msg(memcmp(a->buf[x], b->buf[x], a->count[x] * sizeof(float)) == 0,
                          "%s: %s differs", who, out_names[x]);
}

/* Computes p with the outputs `want`: unsplit, split and in a batch (bit
 * for bit the same), naive; checked against the float64 reference. */
static void check_problem(const problem *p, unsigned want) {
    if (p->w.norm.type == ATTN_NORM_NONE) want &= ~(1u << O_N); /* test_normed_alone's */
    double *ref[O_COUNT];
    ref_compute(ref, p);
    outputs fast, split, naive, batched, other;
    outputs_make(&fast, p, &p->in, want);
    outputs_make(&split, p, &p->in, want);
    outputs_make(&naive, p, &p->in, want);
    outputs_make(&batched, p, &p->in, want);

    attn_workspace *ws = attn_workspace_create(), *ws2 = attn_workspace_create();
    attn_workspace *ws3 = attn_workspace_create();
    attn_error err;
    ck_assert_msg(attn_compute(&fast.o, ws, &p->in, &err) == 0, "%s", err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws), attn_input_workspace_need(&p->in));
    split_runner r = {.caller_ws = ws2, .other_ws = ws3};
    atomic_init(&r.next, 0);
    attn_runner runner = {.run = split_run, .ctx = &r};
    ck_assert_msg(attn_compute_with(&split.o, ws2, &p->in, &runner, &err) == 0, "%s", err.message);
    /* a batch: a shorter sequence (its first rows) first, then this one */
    attn_input ins[2] = {p->in, p->in};
    ins[0].n_tokens = p->c.n > 20 ? p->c.n - 17 : p->c.n;
    outputs_make(&other, p, &ins[0], want);
    attn_output outs[2] = {other.o, batched.o};
    size_t failed;
    attn_workspace *ws4 = attn_workspace_create();
    ck_assert_msg(attn_compute_batch(outs, ws4, ins, 2, &runner, &err, &failed) == 0, "%s",
                  err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws4), attn_batch_workspace_need(ins, 2));
    float *scratch = xcalloc(attn_naive_scratch_need(&p->in), sizeof(float));
    attn_compute_naive(&naive.o, scratch, &p->in);

    same_bits(&fast, &split, want, "split");
    same_bits(&fast, &batched, want, "batch");
    for (int b = 0; b < O_COUNT; b++) {
        if (!(want & (1u << b))) continue;
        close_check("fast", out_names[b], fast.buf[b], ref[b], fast.count[b]);
        close_check("naive", out_names[b], naive.buf[b], ref[b], naive.count[b]);
    }
    free(scratch);
    attn_workspace_destroy(ws), attn_workspace_destroy(ws2), attn_workspace_destroy(ws3);
    attn_workspace_destroy(ws4);
    outputs_free(&fast), outputs_free(&split), outputs_free(&naive), outputs_free(&batched);
    outputs_free(&other);
    for (int b = 0; b < O_COUNT; b++)
        free(ref[b]);
}

/* Both paths (every output; then online: Z, ΔE, E'), q and k alone (the
 * projection's steps without attending), for two seeds. */
static void check_cfg(const cfg *c) {
    for (uint64_t seed = 1; seed <= 2; seed++) {
        problem p;
        problem_make(&p, c, seed);
        check_problem(&p, WANT_ALL);
        check_problem(&p, WANT_ONLINE);
        check_problem(&p, WANT_QK | (1u << O_N));
        problem_free(&p);
    }
}

static const attn_rope ROPE_HALF = {.dims = 8, .theta = 10000.0, .style = ATTN_ROPE_HALF};

static cfg base(size_t n) {
    return (cfg){.n = n,
                 .dm = 16,
                 .h = 4,
                 .dh = 8,
                 .mask = ATTN_MASK_CAUSAL,
                 .w_o = 1,
                 .bias = 1,
                 .amp = 1.0,
                 .offset = 0.3};
}

/* ---- each alone ----------------------------------------------------------------- */

START_TEST(test_norm_layer) {
    cfg c = base(300); /* GPT-2's ln_1 */
    c.norm = (norm_cfg){ATTN_NORM_LAYER, 1, 1, 0.0, 0.0};
    check_cfg(&c);
    c.norm = (norm_cfg){ATTN_NORM_LAYER, 0, 0, 0.0, 0.0}; /* OLMo 1: neither */
    c.amp = 20.0, c.offset = 5.0;
    check_cfg(&c);
}
END_TEST

START_TEST(test_norm_rms) {
    cfg c = base(300);
    c.rope = ROPE_HALF;
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    check_cfg(&c);
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6}; /* Gemma: offset 1 */
    c.g = 2;
    check_cfg(&c);
    c.norm = (norm_cfg){ATTN_NORM_RMS, 0, 0, 1.0, 0.5}; /* no weight: 1, whatever the offset */
    c.mask = ATTN_MASK_NONE, c.w_o = 0, c.dm = 32;
    check_cfg(&c);
}
END_TEST

START_TEST(test_post_norm) {
    cfg c = base(290);
    c.post_norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    check_cfg(&c);
    c.post_norm = (norm_cfg){ATTN_NORM_LAYER, 1, 1, 0.0, 1e-3};
    c.w_o = 0, c.dm = 32; /* ΔE = Z + b_o */
    check_cfg(&c);
}
END_TEST

START_TEST(test_qk_norm_head) {
    cfg c = base(280);
    c.g = 2;
    c.rope = ROPE_HALF;
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    check_cfg(&c);
    c.qk.offset = 1.0, c.positions = 1;
    check_cfg(&c);
}
END_TEST

START_TEST(test_qk_norm_all) {
    cfg c = base(270);
    c.g = 2;
    c.rope = ROPE_HALF;
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    c.qk_all = 1;
    check_cfg(&c);
}
END_TEST

START_TEST(test_temperature) {
    cfg c = base(260);
    c.temp_f = 8.0, c.temp_a = 0.1;
    check_cfg(&c);
    c.positions = 1, c.temp_f = 1000.0, c.temp_a = 0.5; /* positions 3000 …: factors 2.1 – 2.2 */
    check_cfg(&c);
}
END_TEST

/* ---- as real layers combine them -------------------------------------------------- */

START_TEST(test_qwen3_layer) { /* rms norm + per-head rms qk_norm, GQA, RoPE */
    cfg c = base(300);
    c.h = 4, c.g = 2, c.dm = 24;
    c.rope = ROPE_HALF;
    c.bias = 0;
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 1e-6};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 1e-6};
    check_cfg(&c);
}
END_TEST

START_TEST(test_gemma3_layer) { /* rms offset 1 norm + post_norm + qk_norm offset 1 */
    cfg c = base(300);
    c.g = 2;
    c.rope = ROPE_HALF;
    c.bias = 0;
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    c.post_norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    check_cfg(&c);
}
END_TEST

START_TEST(test_olmo2_layer) { /* post_norm + qk_norm over all of Q and K */
    cfg c = base(300);
    c.rope = ROPE_HALF;
    c.bias = 0;
    c.post_norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 1e-6};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 1e-6};
    c.qk_all = 1;
    check_cfg(&c);
}
END_TEST

START_TEST(test_llama4_nope_layer) { /* temperature + weightless per-head qk_norm, no RoPE */
    cfg c = base(300);
    c.g = 2;
    c.bias = 0;
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 1e-5};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 0, 0, 0.0, 1e-6};
    c.temp_f = 8.0, c.temp_a = 0.1;
    c.positions = 1;
    check_cfg(&c);
}
END_TEST

/* With a context, the norm takes the queries' rows alone; qk_norm takes K
 * from the context's rows too. */
START_TEST(test_context) {
    cfg c = base(150);
    c.mask = ATTN_MASK_NONE;
    c.m = 280, c.dc = 24;
    c.norm = (norm_cfg){ATTN_NORM_LAYER, 1, 1, 0.0, 0.0};
    c.post_norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
    check_cfg(&c);
    c.qk_all = 1, c.g = 2;
    check_cfg(&c);
}
END_TEST

/* Listed heads alone (their own sgemms reading N(E)) agree with every
 * head's to rounding; scope all projects them whole, so to the bit. */
START_TEST(test_listed_heads) {
    for (int all = 0; all <= 1; all++) {
        cfg c = base(200);
        c.g = 2;
        c.rope = ROPE_HALF;
        c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 0.0, 0.0};
        c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 0.0};
        c.qk_all = all;
        problem p;
        problem_make(&p, &c, 3);
        unsigned want = WANT_QK | (1u << O_S) | (1u << O_N);
        outputs every, some, some_normed;
        outputs_make(&every, &p, &p.in, want);
        attn_workspace *ws = attn_workspace_create();
        ck_assert_int_eq(attn_compute(&every.o, ws, &p.in, NULL), 0);
        p.heads[0] = 3, p.heads[1] = 1, p.in.n_heads_out = 2;
        outputs_make(&some, &p, &p.in, want);
        outputs_make(&some_normed, &p, &p.in, want & ~(1u << O_N)); /* N(E) in scratch */
        ck_assert_int_eq(attn_compute(&some.o, ws, &p.in, NULL), 0);
        ck_assert_uint_le(attn_workspace_bytes(ws), attn_input_workspace_need(&p.in));
        ck_assert_int_eq(attn_compute(&some_normed.o, ws, &p.in, NULL), 0);
        for (int b = 0; b < O_N; b++) {
            if (!(want & (1u << b))) continue;
            ck_assert(memcmp(some.buf[b], some_normed.buf[b], some.count[b] * sizeof(float)) == 0);
            size_t per = some.count[b] / 2;
            for (size_t j = 0; j < 2; j++) {
                double *as_ref = xcalloc(per, sizeof(double));
                for (size_t x = 0; x < per; x++)
                    as_ref[x] = every.buf[b][p.heads[j] * per + x];
                close_check("listed", out_names[b], some.buf[b] + j * per, as_ref, per);
                if (all && b != O_S)
                    ck_assert(memcmp(some.buf[b] + j * per, every.buf[b] + p.heads[j] * per,
                                     per * sizeof(float)) == 0);
                free(as_ref);
            }
        }
        ck_assert(memcmp(some.buf[O_N], every.buf[O_N], some.count[O_N] * sizeof(float)) == 0);
        outputs_free(&every), outputs_free(&some), outputs_free(&some_normed);
        attn_workspace_destroy(ws);
        problem_free(&p);
    }
}
END_TEST

/* `normed` alone: N(E), nothing else computed; a layer without a norm
 * leaves it alone. */
START_TEST(test_normed_alone) {
    cfg c = base(40);
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 0.0};
    problem p;
    problem_make(&p, &c, 9);
    double *ref[O_COUNT];
    ref_compute(ref, &p);
    outputs o;
    outputs_make(&o, &p, &p.in, 1u << O_N);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&o.o, ws, &p.in, NULL), 0);
    close_check("alone", "normed", o.buf[O_N], ref[O_N], o.count[O_N]);
    p.w.norm.type = ATTN_NORM_NONE;
    memset(o.buf[O_N], 0, o.count[O_N] * sizeof(float));
    ck_assert_int_eq(attn_compute(&o.o, ws, &p.in, NULL), 0);
    for (size_t x = 0; x < o.count[O_N]; x++)
        ck_assert(o.buf[O_N][x] == 0.0f);
    outputs_free(&o);
    attn_workspace_destroy(ws);
    for (int b = 0; b < O_COUNT; b++)
        free(ref[b]);
    problem_free(&p);
}
END_TEST

/* ---- stacks ------------------------------------------------------------------------- */

/* Three layers as Gemma 3 and OLMo 2 stack them, two sequences: every
 * layer's delta, embeddings and normed against attn_stack_naive, the batch
 * against each sequence's stack alone, bit for bit. */
START_TEST(test_stack) {
    problem p[3];
    cfg c = base(150);
    c.g = 2, c.rope = ROPE_HALF, c.bias = 0;
    c.norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    c.post_norm = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    c.qk = (norm_cfg){ATTN_NORM_RMS, 1, 0, 1.0, 1e-6};
    problem_make(&p[0], &c, 1);
    c.norm.type = ATTN_NORM_NONE, c.qk.offset = 0.0, c.qk_all = 1, c.post_norm.offset = 0.0;
    problem_make(&p[1], &c, 2);
    c.rope = (attn_rope){0}, c.qk_all = 0, c.qk.weight = 0, c.temp_f = 4.0, c.temp_a = 0.2;
    c.norm = (norm_cfg){ATTN_NORM_LAYER, 1, 1, 0.0, 0.0};
    problem_make(&p[2], &c, 3);
    const attn_weights *layers[3] = {&p[0].w, &p[1].w, &p[2].w};
    attn_stack st = {.layers = layers, .n_layers = 3};
    const size_t L = 3, dm = c.dm;
    attn_input ins[2] = {p[0].in, p[0].in};
    ins[1].n_tokens = 131;
    attn_output lo[3][2], lo1[3][1];
    const attn_output *louts[3], *louts1[3];
    float *bufs[3][2][3], *one[3][3];
    for (size_t l = 0; l < L; l++) {
        for (size_t i = 0; i < 2; i++) {
            for (int k = 0; k < 3; k++)
                bufs[l][i][k] = xcalloc(ins[i].n_tokens * dm, sizeof(float));
            lo[l][i] = (attn_output){
                .delta = bufs[l][i][0], .embeddings = bufs[l][i][1], .normed = bufs[l][i][2]};
        }
        for (int k = 0; k < 3; k++)
            one[l][k] = xcalloc(ins[1].n_tokens * dm, sizeof(float));
        lo1[l][0] = (attn_output){.delta = one[l][0], .embeddings = one[l][1], .normed = one[l][2]};
        louts[l] = lo[l], louts1[l] = lo1[l];
    }
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    ck_assert_msg(attn_compute_stack(louts, NULL, ws, ins, 2, &st, NULL, &err, NULL, NULL) == 0,
                  "%s", err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws), attn_stack_workspace_need(ins, 2, &st));
    ck_assert(attn_compute_stack(louts1, NULL, ws, &ins[1], 1, &st, NULL, &err, NULL, NULL) == 0);
    for (size_t l = 0; l < L; l++)
        for (int k = 0; k < 3; k++)
            ck_assert_msg(memcmp(one[l][k], bufs[l][1][k], ins[1].n_tokens * dm * sizeof(float)) ==
                              0,
                          "layer %zu output %d: batch differs from alone", l, k);
    for (size_t i = 0; i < 2; i++) {
        const size_t n = ins[i].n_tokens;
        attn_naive_layer nl[3];
        double *r[3][3];
        for (size_t l = 0; l < L; l++) {
            for (int k = 0; k < 3; k++)
                r[l][k] = xcalloc(n * dm, sizeof(double));
            nl[l] = (attn_naive_layer){.delta = r[l][0], .embeddings = r[l][1], .normed = r[l][2]};
        }
        double *scratch = xcalloc(attn_stack_naive_scratch(&ins[i], &st), sizeof(double));
        attn_stack_naive(nl, NULL, scratch, &ins[i], i, &st);
        static const char *const names[3] = {"delta", "embeddings", "normed"};
        for (size_t l = 0; l < L; l++)
            for (int k = 0; k < 3; k++) {
                if (k == 2 && p[l].w.norm.type == ATTN_NORM_NONE) continue;
                close_check("stack", names[k], bufs[l][i][k], r[l][k], n * dm);
            }
        for (size_t l = 0; l < L; l++)
            for (int k = 0; k < 3; k++)
                free(r[l][k]);
        free(scratch);
    }
    for (size_t l = 0; l < L; l++) {
        for (int k = 0; k < 3; k++) {
            free(one[l][k]);
            for (size_t i = 0; i < 2; i++)
                free(bufs[l][i][k]);
        }
        problem_free(&p[l]);
    }
    attn_workspace_destroy(ws);
}
END_TEST

/* ---- work ------------------------------------------------------------------------- */

/* Each norm, qk_norm and the temperature add to the count, by the
 * coordinates they take. */
START_TEST(test_flops) {
    attn_weights w = {.d_model = 64, .n_heads = 4, .n_kv_heads = 2, .d_head = 16};
    float dummy = 0.0f;
    attn_input in = {.weights = &w, .embeddings = &dummy, .n_tokens = 1000};
    const double plain = attn_input_flops(&in);
    w.norm = (attn_norm){.type = ATTN_NORM_RMS, .eps = 1e-6};
    const double normed = attn_input_flops(&in);
    ck_assert(normed > plain + 1000.0 * 64 * 10);
    w.post_norm = w.norm;
    const double post = attn_input_flops(&in);
    ck_assert(post - normed == normed - plain);
    w.qk_norm.q = w.qk_norm.k = w.norm;
    const double qk = attn_input_flops(&in);
    ck_assert(qk > post + 1000.0 * (4 + 2) * 16 * 10);
    w.temperature.floor_scale = 8.0;
    ck_assert(attn_input_flops(&in) > qk);
}
END_TEST

static Suite *norms_suite(void) {
    Suite *s = suite_create("norms");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_norm_layer);
    tcase_add_test(tc, test_norm_rms);
    tcase_add_test(tc, test_post_norm);
    tcase_add_test(tc, test_qk_norm_head);
    tcase_add_test(tc, test_qk_norm_all);
    tcase_add_test(tc, test_temperature);
    tcase_add_test(tc, test_qwen3_layer);
    tcase_add_test(tc, test_gemma3_layer);
    tcase_add_test(tc, test_olmo2_layer);
    tcase_add_test(tc, test_llama4_nope_layer);
    tcase_add_test(tc, test_context);
    tcase_add_test(tc, test_listed_heads);
    tcase_add_test(tc, test_normed_alone);
    tcase_add_test(tc, test_stack);
    tcase_add_test(tc, test_flops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(norms_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
