/*
 * test_variants.c — the engine's variants of today's models: grouped K/V
 * heads with RoPE, ALiBi, sliding windows, soft-capping, positions and
 * cross-attention, alone and as real layers combine them (Mistral, BLOOM,
 * Gemma 2, Whisper).
 *
 * Each case computes a random problem three ways: attn_compute (the full
 * path when scores or patterns are shown, the online one otherwise, and
 * both again split over a runner on other workspaces, which must be bit
 * for bit the same), attn_compute_naive, and a float64 reference written
 * here straight from docs/API.md's formulas (its own RoPE frequencies,
 * llama3 scaling and ALiBi slopes). Both float32 answers must match the
 * reference within RTOL of each output's scale. Sizes go past a block of
 * query rows (128) and a tile of keys (256), so that the skipped blocks of
 * a window and the online rescaling are exercised.
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
#include "tests/rope_ref.h"
#include "tests/split_runner.h"

#define RTOL 1e-5

/* ck_ only on failure: a passing ck_assert records its location, a write
 * to check's runner, and this is called in the hot loops. */
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

static void fill(float *x, size_t count, double amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(amp * rnd(st));
}

/* ---- a problem ------------------------------------------------------------ */

enum { POS_DEFAULT, POS_SHUFFLED, POS_OFFSET, POS_PACKED, POS_HUGE };
enum { ALIBI_NONE, ALIBI_STANDARD, ALIBI_STEEP };

typedef struct cfg {
    size_t n, dm, h, g, dh;
    attn_mask_kind mask;
    int dead_rows; /* custom mask: every third row masked whole */
    int w_o, bias;
    attn_rope rope;
    int alibi;
    size_t window;
    float softcap;
    float scale; /* 0: 1/sqrt(dh) */
    int positions;
    size_t m, dc; /* context rows and width; m = 0: self-attention */
    int w_kv;     /* context through its own weights (else w_qkv's K, V columns) */
    double amp;   /* of the embeddings */
} cfg;

typedef struct problem {
    cfg c;
    attn_weights w;
    attn_input in;
    float *E, *C, *w_qkv, *b_qkv, *w_kv, *b_kv, *w_o, *b_o, *alibi;
    unsigned char *allowed;
    unsigned *pos;
    size_t heads[16];
} problem;

static void problem_make(problem *p, const cfg *c, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    const size_t n = c->n, dm = c->dm, h = c->h, g = c->g ? c->g : c->h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, m = c->m ? c->m : n, dc = c->m ? c->dc : dm;
    const int cross = c->m > 0, apart = cross && c->w_kv;
    p->E = xcalloc(n * dm, sizeof(float));
    fill(p->E, n * dm, c->amp, &st);
    size_t wcols = apart ? hd : hd + 2 * gd;
    p->w_qkv = xcalloc(dm * wcols, sizeof(float));
    fill(p->w_qkv, dm * wcols, 1.0 / sqrt((double)dm), &st);
    if (c->bias) {
        p->b_qkv = xcalloc(wcols, sizeof(float));
        fill(p->b_qkv, wcols, 0.5, &st);
    }
    if (cross) {
        p->C = xcalloc(m * dc, sizeof(float));
        fill(p->C, m * dc, c->amp, &st);
    }
    if (apart) {
        p->w_kv = xcalloc(dc * 2 * gd, sizeof(float));
        fill(p->w_kv, dc * 2 * gd, 1.0 / sqrt((double)dc), &st);
        if (c->bias) {
            p->b_kv = xcalloc(2 * gd, sizeof(float));
            fill(p->b_kv, 2 * gd, 0.5, &st);
        }
    }
    if (c->w_o) {
        p->w_o = xcalloc(hd * dm, sizeof(float));
        fill(p->w_o, hd * dm, 1.0 / sqrt((double)hd), &st);
        p->b_o = xcalloc(dm, sizeof(float));
        fill(p->b_o, dm, 0.5, &st);
    }
    if (c->alibi == ALIBI_STANDARD) {
        p->alibi = xcalloc(h, sizeof(float));
        attn_alibi_slopes(p->alibi, h);
    } else if (c->alibi == ALIBI_STEEP) { /* penalties far past exp's range */
        p->alibi = xcalloc(h, sizeof(float));
        for (size_t i = 0; i < h; i++)
            p->alibi[i] = (float)(4.0 / (double)(i + 1));
    }
    if (c->mask == ATTN_MASK_CUSTOM) {
        p->allowed = xcalloc(n * m, 1);
        for (size_t q = 0; q < n; q++)
            for (size_t k = 0; k < m; k++)
                p->allowed[q * m + k] = !(c->dead_rows && q % 3 == 1) && rnd(&st) > -0.4;
    }
    if (c->positions != POS_DEFAULT) {
        p->pos = xcalloc(n, sizeof(unsigned));
        for (size_t t = 0; t < n; t++) {
            switch (c->positions) {
            case POS_SHUFFLED: p->pos[t] = (unsigned)t; break;
            case POS_OFFSET: p->pos[t] = 500000u + (unsigned)t; break;
            case POS_PACKED: p->pos[t] = (unsigned)(t % 150); break; /* sequences of 150 */
            case POS_HUGE: p->pos[t] = 2147483647u - (unsigned)(n - 1 - t) * 3; break;
            }
        }
        if (c->positions == POS_SHUFFLED) /* a permutation: not increasing */
            for (size_t t = n - 1; t > 0; t--) {
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
                          .d_context = apart ? dc : 0,
                          .w_kv = p->w_kv,
                          .b_kv = p->b_kv,
                          .rope = c->rope,
                          .alibi = p->alibi,
                          .window = c->window,
                          .softcap = c->softcap};
    for (size_t i = 0; i < h && i < 16; i++)
        p->heads[i] = i;
    p->in = (attn_input){.weights = &p->w,
                         .embeddings = p->E,
                         .n_tokens = n,
                         .mask = {c->mask, p->allowed},
                         .scale = c->scale != 0.0f ? c->scale : (float)(1.0 / sqrt((double)dh)),
                         .heads = p->heads,
                         .n_heads_out = h,
                         .positions = p->pos,
                         .context = p->C,
                         .n_context = c->m};
}

static void problem_free(problem *p) {
    free(p->E), free(p->C), free(p->w_qkv), free(p->b_qkv), free(p->w_kv), free(p->b_kv);
    free(p->w_o), free(p->b_o), free(p->alibi), free(p->allowed), free(p->pos);
}

/* ---- outputs -------------------------------------------------------------- */

enum { O_Q, O_K, O_V, O_QR, O_KR, O_S, O_P, O_Z, O_D, O_E, O_COUNT };
static const char *const out_names[O_COUNT] = {
    "q", "k", "v", "q_raw", "k_raw", "scores", "patterns", "head_outputs", "delta", "embeddings"};
#define WANT_ALL    ((1u << O_COUNT) - 1)
#define WANT_ONLINE ((1u << O_Z) | (1u << O_D) | (1u << O_E))

typedef struct outputs {
    float *buf[O_COUNT];
    size_t count[O_COUNT];
    attn_output o;
} outputs;

static void counts_of(size_t count[O_COUNT], const problem *p) {
    const size_t n = p->c.n, m = p->c.m ? p->c.m : n, dh = p->c.dh, hs = p->in.n_heads_out;
    const size_t cnt[O_COUNT] = {hs * n * dh, hs * m * dh, hs * m * dh, hs * n * dh, hs * m * dh,
                                 hs * n * m,  hs * n * m,  hs * n * dh, n * p->c.dm, n * p->c.dm};
    memcpy(count, cnt, sizeof cnt);
}

static void outputs_make(outputs *o, const problem *p, unsigned want) {
    memset(o, 0, sizeof *o);
    counts_of(o->count, p);
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
                         .embeddings = o->buf[O_E]};
}

static void outputs_free(outputs *o) {
    for (int b = 0; b < O_COUNT; b++)
        free(o->buf[b]);
}

/* ---- the float64 reference ------------------------------------------------- */

/* RoPE's f_t, from the contract's formulas (Hugging Face's names); yarn
 * and longrope (its long factors when `lng`) from tests/rope_ref.c. */
static double ref_freq(const attn_rope *r, size_t t, int lng) {
    if (r->scaling == ATTN_ROPE_SCALING_YARN) return rope_ref_yarn_freq(r, t);
    if (r->scaling == ATTN_ROPE_SCALING_LONGROPE) return rope_ref_longrope_freq(r, t, lng);
    double inv = 1.0 / pow(r->theta, (double)(2 * t) / (double)r->dims);
    if (r->scaling == ATTN_ROPE_SCALING_LINEAR) return inv / r->factor;
    if (r->scaling != ATTN_ROPE_SCALING_LLAMA3) return inv;
    double old = r->original_max_position;
    double low_wavelen = old / r->low_freq_factor, high_wavelen = old / r->high_freq_factor;
    double wavelen = 2.0 * M_PI / inv;
    if (wavelen < high_wavelen) return inv;
    if (wavelen > low_wavelen) return inv / r->factor;
    /* u = l: no band in between; λ_t = L/l exactly keeps f_t, as Hugging
     * Face's first step does before its σ (0/0 there) */
    if (r->high_freq_factor == r->low_freq_factor) return inv;
    double smooth =
        (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1.0 - smooth) * inv / r->factor + smooth * inv;
}

/* x: one head's row, rotated by position p (Hugging Face's rotate_half
 * for "half": x·cos + rotate_half(x)·sin, rotate_half = [−x2, x1]), cos
 * and sin times HF's attention_scaling; longrope's long factors when lng. */
static void ref_rotate(double *x, double p, const attn_rope *r, int lng) {
    const size_t half = r->dims / 2;
    const double a = rope_ref_attention_factor(r);
    double *y = xcalloc(r->dims, sizeof(double));
    for (size_t c = 0; c < r->dims; c++) {
        size_t t = r->style == ATTN_ROPE_HALF ? c % half : c / 2;
        double ang = p * ref_freq(r, t, lng), cs = a * cos(ang), sn = a * sin(ang);
        double rot; /* rotate_half(x)[c], or the interleaved pair's */
        if (r->style == ATTN_ROPE_HALF)
            rot = c < half ? -x[c + half] : x[c - half];
        else
            rot = c % 2 == 0 ? -x[c + 1] : x[c - 1];
        y[c] = x[c] * cs + rot * sn;
    }
    memcpy(x, y, r->dims * sizeof(double));
    free(y);
}

static double ref_pos(const problem *p, size_t t) {
    return p->pos ? (double)p->pos[t] : (double)t;
}

/* ref[b]: doubles laid out as outputs' buf[b], every head listed in order. */
static void ref_compute(double *ref[O_COUNT], const problem *p) {
    const cfg *c = &p->c;
    const size_t n = c->n, dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const int cross = c->m > 0, apart = cross && c->w_kv;
    const size_t m = cross ? c->m : n, dc = cross ? c->dc : dm;
    const float *X = cross ? p->C : p->E;
    size_t count[O_COUNT];
    counts_of(count, p);
    for (int b = 0; b < O_COUNT; b++)
        ref[b] = xcalloc(count[b], sizeof(double));
    double *Z = xcalloc(n * hd, sizeof(double));
    double *Q = xcalloc(n * dh, sizeof(double)), *K = xcalloc(m * dh, sizeof(double));
    double *V = xcalloc(m * dh, sizeof(double));
    for (size_t i = 0; i < h; i++) {
        size_t u = i * g / h; /* the contract's ⌊i·g / h⌋ */
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < dh; e++) {
                size_t col = i * dh + e, ldq = apart ? hd : ld;
                double a = p->b_qkv ? p->b_qkv[col] : 0.0;
                for (size_t x = 0; x < dm; x++)
                    a += (double)p->E[t * dm + x] * p->w_qkv[x * ldq + col];
                Q[t * dh + e] = a;
            }
        for (size_t t = 0; t < m; t++)
            for (size_t e = 0; e < dh; e++) {
                size_t ck = u * dh + e, cv = gd + u * dh + e;
                const float *W = apart ? p->w_kv : p->w_qkv + hd, *B = NULL;
                size_t ldw = apart ? 2 * gd : ld;
                if (apart)
                    B = p->b_kv;
                else if (p->b_qkv)
                    B = p->b_qkv + hd;
                double a = B ? B[ck] : 0.0, v = B ? B[cv] : 0.0;
                for (size_t x = 0; x < dc; x++) {
                    a += (double)X[t * dc + x] * W[x * ldw + ck];
                    v += (double)X[t * dc + x] * W[x * ldw + cv];
                }
                K[t * dh + e] = a, V[t * dh + e] = v;
            }
        memcpy(ref[O_QR] + i * n * dh, Q, n * dh * sizeof(double));
        memcpy(ref[O_KR] + i * m * dh, K, m * dh * sizeof(double));
        if (c->rope.dims && !cross) {
            int lng = rope_ref_long(&c->rope, p->pos, n);
            for (size_t t = 0; t < n; t++)
                ref_rotate(Q + t * dh, ref_pos(p, t), &c->rope, lng);
            for (size_t t = 0; t < m; t++)
                ref_rotate(K + t * dh, ref_pos(p, t), &c->rope, lng);
        }
        memcpy(ref[O_Q] + i * n * dh, Q, n * dh * sizeof(double));
        memcpy(ref[O_K] + i * m * dh, K, m * dh * sizeof(double));
        memcpy(ref[O_V] + i * m * dh, V, m * dh * sizeof(double));
        double *S = ref[O_S] + i * n * m, *P = ref[O_P] + i * n * m;
        for (size_t q = 0; q < n; q++) {
            double max = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < m; k++) {
                int ok = c->mask == ATTN_MASK_CAUSAL   ? k <= q
                         : c->mask == ATTN_MASK_CUSTOM ? p->allowed[q * m + k]
                                                       : 1;
                double dist = fabs(ref_pos(p, q) - ref_pos(p, k));
                if (c->window && dist >= (double)c->window) ok = 0;
                double d = 0.0;
                for (size_t e = 0; e < dh; e++)
                    d += Q[q * dh + e] * K[k * dh + e];
                double s = (double)p->in.scale * d;
                if (c->softcap != 0.0f) s = c->softcap * tanh(s / c->softcap);
                if (p->alibi) s -= (double)p->alibi[i] * dist;
                S[q * m + k] = ok ? s : -INFINITY;
                if (ok && s > max) max = s;
            }
            for (size_t k = 0; k < m; k++) {
                P[q * m + k] = max == -INFINITY ? 0.0 : exp(S[q * m + k] - max);
                sum += P[q * m + k];
            }
            for (size_t k = 0; k < m; k++)
                P[q * m + k] = sum > 0.0 ? P[q * m + k] / sum : 0.0;
            for (size_t e = 0; e < dh; e++) {
                double z = 0.0;
                for (size_t k = 0; k < m; k++)
                    z += P[q * m + k] * V[k * dh + e];
                Z[q * hd + i * dh + e] = z;
                ref[O_Z][i * n * dh + q * dh + e] = z;
            }
        }
    }
    for (size_t t = 0; t < n; t++)
        for (size_t e = 0; e < dm; e++) {
            double d = p->b_o ? p->b_o[e] : 0.0;
            if (p->w_o)
                for (size_t x = 0; x < hd; x++)
                    d += Z[t * hd + x] * p->w_o[x * dm + e];
            else
                d = Z[t * hd + e];
            ref[O_D][t * dm + e] = d;
            ref[O_E][t * dm + e] = (double)p->E[t * dm + e] + d;
        }
    free(Z), free(Q), free(K), free(V);
}

/* got vs ref, count values: −inf exactly where the reference has it, else
 * within RTOL of the output's largest magnitude. */
static void close_check(const char *who, const char *what, const float *got, const double *ref,
                        size_t count) {
    double scale = 0.0;
    for (size_t x = 0; x < count; x++)
        if (isfinite(ref[x]) && fabs(ref[x]) > scale) scale = fabs(ref[x]);
    for (size_t x = 0; x < count; x++) {
        /* ck_abort only on a failure: a passing ck_assert writes to
         * check's pipe, and there are millions of values */
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

/* Two threads claim the tasks of a run, the caller on its workspace and
 * one more on its own, so that tasks run out of order and away from the
 * caller's scratch. */

/* ---- one case --------------------------------------------------------------- */

/* Computes p with the outputs `want`: fast unsplit, fast split (bit for bit
 * the same), naive; both checked against the float64 reference. */
static void check_problem(const problem *p, unsigned want) {
    double *ref[O_COUNT];
    ref_compute(ref, p);
    outputs fast, split, naive;
    outputs_make(&fast, p, want);
    outputs_make(&split, p, want);
    outputs_make(&naive, p, want);

    attn_workspace *ws = attn_workspace_create(), *ws2 = attn_workspace_create();
    attn_workspace *ws3 = attn_workspace_create();
    attn_error err;
    ck_assert_msg(attn_compute(&fast.o, ws, &p->in, &err) == 0, "%s", err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws), attn_input_workspace_need(&p->in));
    split_runner r = {.caller_ws = ws2, .other_ws = ws3};
    atomic_init(&r.next, 0);
    attn_runner runner = {.run = split_run, .ctx = &r};
    ck_assert_msg(attn_compute_with(&split.o, ws2, &p->in, &runner, &err) == 0, "%s", err.message);
    size_t nfl = attn_naive_scratch_need(&p->in);
    float *scratch = xcalloc(nfl, sizeof(float));
    attn_compute_naive(&naive.o, scratch, &p->in);

    for (int b = 0; b < O_COUNT; b++) {
        if (!(want & (1u << b))) continue;
        ck_assert_msg(memcmp(fast.buf[b], split.buf[b], fast.count[b] * sizeof(float)) == 0,
                      "%s: split differs from unsplit", out_names[b]);
        /* The reference lists every head; the problem does too. */
        close_check("fast", out_names[b], fast.buf[b], ref[b], fast.count[b]);
        close_check("naive", out_names[b], naive.buf[b], ref[b], naive.count[b]);
    }
    free(scratch);
    attn_workspace_destroy(ws), attn_workspace_destroy(ws2), attn_workspace_destroy(ws3);
    outputs_free(&fast), outputs_free(&split), outputs_free(&naive);
    for (int b = 0; b < O_COUNT; b++)
        free(ref[b]);
}

/* Both paths (every output; then online: Z, ΔE, E'), for a few seeds. */
static void check_cfg(const cfg *c) {
    for (uint64_t seed = 1; seed <= 2; seed++) {
        problem p;
        problem_make(&p, c, seed);
        check_problem(&p, WANT_ALL);
        check_problem(&p, WANT_ONLINE);
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
                 .amp = 1.0};
}

/* ---- RoPE --------------------------------------------------------------------- */

START_TEST(test_rope_styles) {
    cfg c = base(40);
    c.g = 2;
    c.rope = ROPE_HALF;
    check_cfg(&c);
    c.rope.style = ATTN_ROPE_INTERLEAVED;
    check_cfg(&c);
    c.rope.dims = 4; /* partial rotary: the last 4 of 8 coordinates stay */
    c.rope.style = ATTN_ROPE_HALF;
    check_cfg(&c);
    c.dh = 6, c.dm = 12, c.rope.dims = 2; /* an odd number of pairs per head */
    check_cfg(&c);
}
END_TEST

START_TEST(test_rope_scaling) {
    cfg c = base(300);
    c.rope = (attn_rope){.dims = 8,
                         .theta = 500000.0,
                         .style = ATTN_ROPE_HALF,
                         .scaling = ATTN_ROPE_SCALING_LLAMA3,
                         .factor = 8.0,
                         .low_freq_factor = 1.0,
                         .high_freq_factor = 4.0,
                         .original_max_position =
                             300.0}; /* λ_t = 6.3, 167, 4443, 118000: all three bands */
    c.positions = POS_OFFSET;
    check_cfg(&c);
    c.rope.scaling = ATTN_ROPE_SCALING_LINEAR, c.rope.factor = 4.0;
    check_cfg(&c);
}
END_TEST

/* llama3 with u = l (Llama 4 Scout's 1 and 1): every frequency is f_t or
 * f_t / s, none between, and none NaN — also where λ_t = L/l exactly. */
START_TEST(test_rope_llama3_equal_factors) {
    cfg c = base(300);
    c.rope =
        (attn_rope){.dims = 8,
                    .theta = 500000.0,
                    .style = ATTN_ROPE_HALF,
                    .scaling = ATTN_ROPE_SCALING_LLAMA3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 1.0,
                    .original_max_position = 300.0}; /* λ_t = 6.3, 167 kept; 4443, 118000 divided */
    c.positions = POS_OFFSET;
    check_cfg(&c);
    /* λ_0 = 2π / θ^0 = 2π = L / l to the last bit: f_0 is kept */
    c.rope.original_max_position = 2.0 * M_PI;
    c.rope.low_freq_factor = c.rope.high_freq_factor = 1.0;
    check_cfg(&c);
    c.rope.style = ATTN_ROPE_INTERLEAVED, c.positions = POS_SHUFFLED;
    check_cfg(&c);
}
END_TEST

/* Positions near 2^31 with θ = 500000: angles of ~2·10^9 rad must still be
 * exact to float32's precision (float32 p·f_t would be off by radians). */
START_TEST(test_rope_huge_positions) {
    cfg c = base(50);
    c.rope = (attn_rope){.dims = 8, .theta = 500000.0, .style = ATTN_ROPE_HALF};
    c.positions = POS_HUGE;
    check_cfg(&c);
    c.positions = POS_SHUFFLED; /* any order */
    check_cfg(&c);
}
END_TEST

/* ---- long-context RoPE: yarn and longrope ------------------------------------ */

/* GPT-OSS's yarn (θ 150000, factor 32, original 4096, beta 32 and 1,
 * truncate false) on 64 dims, at positions 500000 … and near 2^31: the
 * ramp's ends 8.1 and 17.4 fall between pairs; a = 0.1 · ln 32 + 1. */
START_TEST(test_rope_yarn_gpt_oss) {
    ck_assert(fabs(rope_ref_attention_factor(
                       &(attn_rope){.scaling = ATTN_ROPE_SCALING_YARN, .factor = 32.0}) -
                   (0.1 * log(32.0) + 1.0)) < 1e-15);
    cfg c = base(150);
    c.dh = 64, c.dm = 64, c.h = 2, c.g = 1;
    c.rope = (attn_rope){.dims = 64,
                         .theta = 150000.0,
                         .style = ATTN_ROPE_HALF,
                         .scaling = ATTN_ROPE_SCALING_YARN,
                         .factor = 32.0,
                         .original_max_position = 4096.0,
                         .beta_fast = 32.0,
                         .beta_slow = 1.0,
                         .untruncated = 1};
    c.positions = POS_OFFSET;
    check_cfg(&c);
    c.positions = POS_HUGE;
    check_cfg(&c);
    c.rope.untruncated = 0; /* the ends rounded outward: 8 and 18 */
    c.positions = POS_SHUFFLED;
    check_cfg(&c);
}
END_TEST

/* Qwen's yarn (θ 10^6, factor 4, original 32768, the betas by default),
 * partial and interleaved too; DeepSeek's mscale / mscale_all_dim ratio
 * and an attention factor given. */
START_TEST(test_rope_yarn_qwen) {
    cfg c = base(200);
    c.dh = 16, c.dm = 32, c.h = 4, c.g = 2;
    c.rope = (attn_rope){.dims = 16,
                         .theta = 1000000.0,
                         .style = ATTN_ROPE_HALF,
                         .scaling = ATTN_ROPE_SCALING_YARN,
                         .factor = 4.0,
                         .original_max_position = 32768.0};
    c.positions = POS_OFFSET;
    check_cfg(&c);
    c.rope.dims = 10, c.rope.style = ATTN_ROPE_INTERLEAVED; /* partial rotary */
    c.rope.mscale = 1.0, c.rope.mscale_all_dim = 0.5;       /* a = (0.1 ln 4 + 1)/(0.05 ln 4 + 1) */
    check_cfg(&c);
    c.rope.attention_factor = 0.75, c.positions = POS_DEFAULT;
    check_cfg(&c);
    c.rope.attention_factor = 0, c.rope.factor = 0.5; /* s ≤ 1: a = 1, f_t / s above the ramp */
    check_cfg(&c);
}
END_TEST

/* Phi-4-mini-like longrope: partial rotary (12 of 16), θ 10000, factor 32,
 * original L: the short factors for a sequence whose positions stay below
 * L, the long ones from max(p) + 1 > L on — at the boundary and at
 * positions 500000 …; a = sqrt(1 + ln 32 / ln L). */
START_TEST(test_rope_longrope_phi4) {
    float shortf[6], longf[6];
    for (size_t t = 0; t < 6; t++) {
        shortf[t] = 1.0f + 0.25f * (float)t;
        longf[t] = 1.0f + 7.5f * (float)(t * t);
    }
    cfg c = base(100);
    c.dh = 16, c.dm = 32, c.h = 4, c.g = 2;
    c.rope = (attn_rope){.dims = 12,
                         .theta = 10000.0,
                         .style = ATTN_ROPE_HALF,
                         .scaling = ATTN_ROPE_SCALING_LONGROPE,
                         .factor = 32.0,
                         .original_max_position = 100.0,
                         .short_factor = shortf,
                         .long_factor = longf};
    ck_assert(!rope_ref_long(&c.rope, NULL, 100) && rope_ref_long(&c.rope, NULL, 101));
    check_cfg(&c); /* positions 0 … 99: short */
    c.n = 101;     /* 0 … 100: long */
    check_cfg(&c);
    c.positions = POS_OFFSET; /* 500000 …: long */
    check_cfg(&c);
    c.rope.original_max_position = 4096.0, c.n = 60, c.positions = POS_SHUFFLED;
    check_cfg(&c);                                           /* short */
    c.rope.factor = 0, c.rope.style = ATTN_ROPE_INTERLEAVED; /* no factor: a = 1 */
    check_cfg(&c);
    c.rope.attention_factor = 1.25, c.positions = POS_HUGE; /* given; long */
    check_cfg(&c);
}
END_TEST

/* q_raw and k_raw are Q and K before the rotation; with listed heads only
 * (the partial projection) and with all. */
START_TEST(test_rope_raw) {
    cfg c = base(30);
    c.g = 2;
    c.rope = ROPE_HALF;
    problem p;
    problem_make(&p, &c, 7);
    unsigned qk = (1u << O_Q) | (1u << O_K) | (1u << O_QR) | (1u << O_KR) | (1u << O_V);
    check_problem(&p, qk);
    p.heads[0] = 3, p.heads[1] = 1, p.heads[2] = 3, p.heads[3] = 0;
    outputs a, b;
    outputs_make(&a, &p, qk);
    outputs_make(&b, &p, qk | (1u << O_E)); /* the whole projection, rotated in tiles */
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&a.o, ws, &p.in, NULL), 0);
    ck_assert_int_eq(attn_compute(&b.o, ws, &p.in, NULL), 0);
    for (int o = O_Q; o <= O_KR; o++) { /* own sgemms vs tiles: to rounding */
        double *as_ref = xcalloc(a.count[o], sizeof(double));
        for (size_t x = 0; x < a.count[o]; x++)
            as_ref[x] = b.buf[o][x];
        close_check("listed", out_names[o], a.buf[o], as_ref, a.count[o]);
        free(as_ref);
    }
    /* rotation happened: q differs from q_raw, beyond position 0 */
    ck_assert(memcmp(a.buf[O_Q] + c.dh, a.buf[O_QR] + c.dh, c.dh * sizeof(float)) != 0);
    outputs_free(&a), outputs_free(&b);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* ---- ALiBi, windows, soft-capping ------------------------------------------- */

START_TEST(test_alibi_slopes) {
    /* BLOOM's get_alibi_slopes for 8 and for 6 heads */
    float s8[8], s6[6];
    attn_alibi_slopes(s8, 8);
    for (int i = 0; i < 8; i++)
        ck_assert(s8[i] == (float)pow(2.0, -(double)(i + 1)));
    attn_alibi_slopes(s6, 6);
    const double want6[6] = {pow(2.0, -2), pow(2.0, -4), pow(2.0, -6),
                             pow(2.0, -8), pow(2.0, -1), pow(2.0, -3)};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(s6[i] == (float)want6[i], "slope %d: %g", i, (double)s6[i]);
}
END_TEST

START_TEST(test_alibi) {
    cfg c = base(300); /* BLOOM: ALiBi + causal, no RoPE */
    c.alibi = ALIBI_STANDARD;
    check_cfg(&c);
    c.alibi = ALIBI_STEEP; /* −4 · 299: weights past exp's range */
    c.mask = ATTN_MASK_NONE;
    c.positions = POS_SHUFFLED;
    check_cfg(&c);
}
END_TEST

START_TEST(test_window) {
    cfg c = base(600);
    c.window = 100;
    check_cfg(&c);
    c.mask = ATTN_MASK_NONE; /* both sides of the query */
    check_cfg(&c);
    c.positions = POS_PACKED; /* positions restart: blocks see two stretches */
    check_cfg(&c);
    c.positions = POS_SHUFFLED;
    c.window = 50;
    check_cfg(&c);
    c.window = 1; /* only the query itself */
    c.positions = POS_DEFAULT;
    c.mask = ATTN_MASK_CAUSAL;
    check_cfg(&c);
}
END_TEST

/* Dead rows: a custom mask that leaves rows empty, inside a window. */
START_TEST(test_window_dead_rows) {
    cfg c = base(300);
    c.mask = ATTN_MASK_CUSTOM, c.dead_rows = 1;
    c.window = 40;
    c.alibi = ALIBI_STANDARD;
    check_cfg(&c);
}
END_TEST

START_TEST(test_softcap) {
    cfg c = base(300);
    c.softcap = 5.0f;
    check_cfg(&c);
    c.amp = 5.0; /* raw scores in the tens, capped at ±5 */
    check_cfg(&c);
    c.softcap = 50.0f, c.scale = 0.0625f;
    c.mask = ATTN_MASK_NONE;
    check_cfg(&c);
}
END_TEST

/* ---- cross-attention ------------------------------------------------------- */

START_TEST(test_context) {
    cfg c = base(150); /* Whisper: Q from the tokens, K and V from the audio */
    c.mask = ATTN_MASK_NONE;
    c.m = 300, c.dc = 24, c.w_kv = 1;
    check_cfg(&c);
    c.g = 2, c.m = 7;
    check_cfg(&c);
    c.mask = ATTN_MASK_CUSTOM, c.dead_rows = 1, c.m = 270;
    check_cfg(&c);
    c.w_kv = 0, c.dc = c.dm; /* self-attention weights over another sequence */
    c.mask = ATTN_MASK_NONE;
    check_cfg(&c);
    c.bias = 0, c.w_o = 0, c.dm = 32, c.dc = 32;
    check_cfg(&c);
}
END_TEST

/* The rules that read positions are the caller's to refuse with a context
 * (docs/API.md); given anyway, with m > n keys and positions of n tokens,
 * the engine ignores them rather than read positions past n. */
START_TEST(test_context_ignores_position_rules) {
    cfg c = base(20);
    c.mask = ATTN_MASK_NONE;
    c.m = 300, c.dc = 24, c.w_kv = 1;
    c.positions = POS_SHUFFLED;
    problem p;
    problem_make(&p, &c, 5);
    outputs plain, ruled;
    outputs_make(&plain, &p, WANT_ALL);
    outputs_make(&ruled, &p, WANT_ALL);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&plain.o, ws, &p.in, NULL), 0);
    p.w.window = 2, p.w.rope = ROPE_HALF;
    float slopes[4] = {1, 1, 1, 1};
    p.w.alibi = slopes;
    ck_assert_int_eq(attn_compute(&ruled.o, ws, &p.in, NULL), 0);
    for (int b = 0; b < O_COUNT; b++)
        ck_assert_msg(memcmp(plain.buf[b], ruled.buf[b], plain.count[b] * sizeof(float)) == 0, "%s",
                      out_names[b]);
    p.w.alibi = NULL;
    outputs_free(&plain), outputs_free(&ruled);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* ---- layers as today's models combine them ----------------------------------- */

START_TEST(test_mistral_layer) { /* GQA + RoPE + window, causal */
    cfg c = base(700);
    c.h = 8, c.g = 2, c.dm = 32, c.dh = 8;
    c.rope = ROPE_HALF;
    c.window = 160;
    check_cfg(&c);
    c.positions = POS_OFFSET;
    check_cfg(&c);
}
END_TEST

START_TEST(test_gemma2_layer) { /* softcap + GQA + window, its own scale */
    cfg c = base(400);
    c.h = 4, c.g = 2;
    c.rope = ROPE_HALF;
    c.softcap = 50.0f;
    c.window = 100;
    c.scale = 0.25f;
    c.amp = 4.0;
    check_cfg(&c);
}
END_TEST

START_TEST(test_all_heads_listed_subsets) {
    /* listed heads of a grouped, rotated, windowed layer: the partial
     * projection and per-head outputs agree with every head's */
    cfg c = base(200);
    c.h = 4, c.g = 2;
    c.rope = ROPE_HALF;
    c.window = 64;
    c.alibi = ALIBI_STANDARD;
    problem p;
    problem_make(&p, &c, 3);
    outputs all, some;
    unsigned want = (1u << O_Q) | (1u << O_K) | (1u << O_S) | (1u << O_P) | (1u << O_Z);
    outputs_make(&all, &p, want);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&all.o, ws, &p.in, NULL), 0);
    p.heads[0] = 2, p.heads[1] = 3, p.in.n_heads_out = 2;
    outputs_make(&some, &p, want);
    ck_assert_int_eq(attn_compute(&some.o, ws, &p.in, NULL), 0);
    /* A listed head's projection is its own sgemm, not a tile of the
     * whole one: equal to rounding, not to the bit. */
    for (int b = 0; b < O_COUNT; b++) {
        if (!(want & (1u << b))) continue;
        size_t per = some.count[b] / 2;
        double *as_ref = xcalloc(2 * per, sizeof(double));
        for (size_t x = 0; x < 2 * per; x++)
            as_ref[x] = all.buf[b][2 * per + x];
        close_check("listed", out_names[b], some.buf[b], as_ref, 2 * per);
        free(as_ref);
    }
    outputs_free(&all), outputs_free(&some);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* ---- work and memory ---------------------------------------------------------- */

/* A pair costs what its score rules cost: soft-capping (a tanh), ALiBi
 * and a window (a scalar pass) each count, so that a shape where they are
 * all the work — 128 heads one wide over 8192 tokens, no mask, softcap and
 * ALiBi: about 40 s of one core (bench/README.md, (i)) — counts as that
 * much, far over 1e11, and not as its 3.4e10 GEMM flops. */
START_TEST(test_rule_flops) {
    static float slopes[128];
    attn_alibi_slopes(slopes, 128);
    attn_weights w = {.d_model = 1, .n_heads = 128, .d_head = 1};
    float dummy = 0.0f;
    attn_input in = {
        .weights = &w, .embeddings = &dummy, .n_tokens = 8192, .mask = {ATTN_MASK_NONE, NULL}};
    const double plain = attn_input_flops(&in);
    w.alibi = slopes;
    const double alibi = attn_input_flops(&in);
    w.softcap = 30.0f;
    const double both = attn_input_flops(&in);
    w.alibi = NULL;
    const double softcap = attn_input_flops(&in);
    const double pairs = 128.0 * 8192 * 8192;
    ck_assert(plain > pairs * 4.0 * 20); /* softmax: far more than 4 · dh a pair */
    ck_assert(alibi > plain + pairs * 100);
    ck_assert(softcap > alibi + pairs * 300);
    ck_assert(both >= softcap);
    ck_assert(both > 1e12);
}
END_TEST

/* A window makes the work linear in n: attn_input_flops counts the key
 * blocks computed, and doubling n past the window doubles it. */
START_TEST(test_window_flops) {
    attn_weights w = {.d_model = 64, .n_heads = 4, .d_head = 16, .window = 256};
    float dummy = 0.0f;
    attn_input in = {.weights = &w, .embeddings = &dummy, .mask = {ATTN_MASK_CAUSAL, NULL}};
    in.n_tokens = 4096;
    double f4 = attn_input_flops(&in);
    in.n_tokens = 8192;
    double f8 = attn_input_flops(&in);
    in.n_tokens = 12288;
    double f12 = attn_input_flops(&in);
    ck_assert_msg(f12 - f8 == f8 - f4, "not linear: %g then %g", f8 - f4, f12 - f8);
    in.n_tokens = 8192;
    /* per block of 128 rows: at most 256 + 128 keys, 4 heads; a pair costs
     * Q·Kᵀ and P·V (4 · dh) and its softmax and score rules (under 400
     * more: compute.c), a row at most 2 key tiles of 200 */
    double proj = 2.0 * 8192 * (64 + 128) * 64;
    ck_assert(f8 - proj <= 4.0 * 8192 * ((256 + 128) * (4.0 * 16 + 400) + 2 * 200));
    w.window = 0; /* causal alone: only the blocks up to the diagonal */
    double causal = attn_input_flops(&in), full = attn_flops(8192, 64, 4, 16, 0);
    in.mask.kind = ATTN_MASK_NONE;
    double none = attn_input_flops(&in);
    ck_assert(causal < 0.51 * (none - proj) + proj);
    ck_assert(causal > 0.49 * (none - proj) + proj);
    /* the GEMMs are a floor, and a pair costs far more than its 4 · dh */
    ck_assert(none > 2.0 * full);
}
END_TEST

/* Grouped K/V: the workspace holds K and V of g heads, not h. */
START_TEST(test_grouped_workspace) {
    attn_weights w = {.d_model = 4096, .n_heads = 32, .n_kv_heads = 8, .d_head = 128};
    float dummy = 0.0f;
    attn_input in = {.weights = &w, .embeddings = &dummy, .n_tokens = 4096};
    size_t grouped = attn_input_workspace_need(&in);
    w.n_kv_heads = 32;
    size_t full = attn_input_workspace_need(&in);
    /* Q stays n·hd; K and V shrink from 2·n·hd to 2·n·hd/4, over n = 4096
     * rows padded to 4104 (12 rows, ATTN_ROWS_QUANTUM) */
    size_t kv_saved = 2 * 4104 * (4096 - 1024) * sizeof(float);
    ck_assert_uint_eq(full - grouped, kv_saved);
}
END_TEST

static Suite *variants_suite(void) {
    Suite *s = suite_create("variants");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rope_styles);
    tcase_add_test(tc, test_rope_scaling);
    tcase_add_test(tc, test_rope_llama3_equal_factors);
    tcase_add_test(tc, test_rope_huge_positions);
    tcase_add_test(tc, test_rope_raw);
    tcase_add_test(tc, test_rope_yarn_gpt_oss);
    tcase_add_test(tc, test_rope_yarn_qwen);
    tcase_add_test(tc, test_rope_longrope_phi4);
    tcase_add_test(tc, test_alibi_slopes);
    tcase_add_test(tc, test_alibi);
    tcase_add_test(tc, test_window);
    tcase_add_test(tc, test_window_dead_rows);
    tcase_add_test(tc, test_softcap);
    tcase_add_test(tc, test_context);
    tcase_add_test(tc, test_context_ignores_position_rules);
    tcase_add_test(tc, test_mistral_layer);
    tcase_add_test(tc, test_gemma2_layer);
    tcase_add_test(tc, test_all_heads_listed_subsets);
    tcase_add_test(tc, test_window_flops);
    tcase_add_test(tc, test_rule_flops);
    tcase_add_test(tc, test_grouped_workspace);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(variants_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
