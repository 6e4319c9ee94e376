/*
 * test_batch_engine.c — attn_compute_batch: many sequences through one
 * weight set, each bit for bit what attn_compute gives it alone.
 *
 * A batch is random sequences of one model: lengths 1 … 300 (across
 * blocks of 128 query rows and tiles of 256 keys), masks, dead rows,
 * positions, listed heads and wanted outputs of their own, contexts of
 * their own m. Each batch is computed three ways — every sequence alone by
 * attn_compute, the batch on this thread, the batch over a runner that runs
 * its tasks in a shuffled order on two threads and two other workspaces —
 * and every output of every sequence must be equal to the bit (memcmp).
 * Some batches are also checked against a float64 reference written here
 * from docs/API.md's formulas, so that "equal to the single call" is not
 * equal to a wrong answer. The workspace a batch grows never exceeds
 * attn_batch_workspace_need.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "attention/attention.h"
#include "tests/rope_ref.h"

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

/* A uniform integer in [0, k). */
static size_t pick(uint64_t *st, size_t k) {
    return (size_t)((rnd(st) + 1.0) / 2.0 * (double)k) % k;
}

static void fill(float *x, size_t count, double amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(amp * rnd(st));
}

/* ---- a model ---------------------------------------------------------------- */

enum { CROSS_NONE, CROSS_W_KV, CROSS_W_QKV };

typedef struct model_cfg {
    size_t dm, h, g, dh;
    int w_o, bias;
    attn_rope rope;
    int alibi;
    size_t window;
    float softcap;
    int cross; /* CROSS_*: sequences have contexts, through w_kv or w_qkv's K, V */
    size_t dc; /* with CROSS_W_KV */
    int mixed; /* with CROSS_W_QKV: some sequences have no context */
} model_cfg;

typedef struct model {
    model_cfg c;
    attn_weights w;
    float *w_qkv, *b_qkv, *w_kv, *b_kv, *w_o, *b_o, *alibi;
} model;

static void model_make(model *md, const model_cfg *c, uint64_t *st) {
    memset(md, 0, sizeof *md);
    md->c = *c;
    const size_t dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, apart = c->cross == CROSS_W_KV;
    size_t wcols = apart ? hd : hd + 2 * gd;
    md->w_qkv = xcalloc(dm * wcols, sizeof(float));
    fill(md->w_qkv, dm * wcols, 1.0 / sqrt((double)dm), st);
    if (c->bias) {
        md->b_qkv = xcalloc(wcols, sizeof(float));
        fill(md->b_qkv, wcols, 0.5, st);
    }
    if (apart) {
        md->w_kv = xcalloc(c->dc * 2 * gd, sizeof(float));
        fill(md->w_kv, c->dc * 2 * gd, 1.0 / sqrt((double)c->dc), st);
        if (c->bias) {
            md->b_kv = xcalloc(2 * gd, sizeof(float));
            fill(md->b_kv, 2 * gd, 0.5, st);
        }
    }
    if (c->w_o) {
        md->w_o = xcalloc(hd * dm, sizeof(float));
        fill(md->w_o, hd * dm, 1.0 / sqrt((double)hd), st);
    }
    if (c->bias) {
        md->b_o = xcalloc(dm, sizeof(float));
        fill(md->b_o, dm, 0.5, st);
    }
    if (c->alibi) {
        md->alibi = xcalloc(h, sizeof(float));
        attn_alibi_slopes(md->alibi, h);
    }
    md->w = (attn_weights){.d_model = dm,
                           .n_heads = h,
                           .d_head = dh,
                           .n_kv_heads = c->g,
                           .w_qkv = md->w_qkv,
                           .b_qkv = md->b_qkv,
                           .w_o = md->w_o,
                           .b_o = md->b_o,
                           .d_context = apart ? c->dc : 0,
                           .w_kv = md->w_kv,
                           .b_kv = md->b_kv,
                           .rope = c->rope,
                           .alibi = md->alibi,
                           .window = c->window,
                           .softcap = c->softcap};
}

static void model_free(model *md) {
    free(md->w_qkv), free(md->b_qkv), free(md->w_kv), free(md->b_kv), free(md->w_o);
    free(md->b_o), free(md->alibi);
}

/* ---- a sequence and its outputs ---------------------------------------------- */

enum { O_Q, O_K, O_V, O_QR, O_KR, O_S, O_P, O_Z, O_D, O_E, O_COUNT };
static const char *const out_names[O_COUNT] = {
    "q", "k", "v", "q_raw", "k_raw", "scores", "patterns", "head_outputs", "delta", "embeddings"};
#define WANT_ALL     ((1u << O_COUNT) - 1)
#define WANT_DEFAULT ((1u << O_P) | (1u << O_E))
#define WANT_ONLINE  ((1u << O_Z) | (1u << O_D) | (1u << O_E))

enum { POS_DEFAULT, POS_SHUFFLED, POS_OFFSET, POS_PACKED, POS_COUNT };

typedef struct seq {
    size_t n, m; /* m: context rows, 0 without */
    attn_mask_kind mask;
    int dead_rows;
    int positions;
    size_t heads[40], hs;
    unsigned want;
    double amp;
} seq;

typedef struct outputs {
    float *buf[O_COUNT];
    size_t count[O_COUNT];
    attn_output o;
} outputs;

/* A batch: its model, its sequences' data, inputs and three sets of outputs. */
typedef struct batch {
    const model *md;
    size_t count;
    seq *s;
    float *E_all; /* every sequence's E, one after the other (or each its own) */
    float **E, **C;
    unsigned char **allowed;
    unsigned **pos;
    attn_input *ins;
    outputs *single, *flat, *split;
} batch;

static void counts_of(size_t count[O_COUNT], const model *md, const seq *s) {
    const size_t n = s->n, m = s->m ? s->m : n, dh = md->c.dh, hs = s->hs, dm = md->c.dm;
    const size_t cnt[O_COUNT] = {hs * n * dh, hs * m * dh, hs * m * dh, hs * n * dh, hs * m * dh,
                                 hs * n * m,  hs * n * m,  hs * n * dh, n * dm,      n * dm};
    memcpy(count, cnt, sizeof cnt);
}

/* Buffers filled with `byte`, so that a value left unwritten differs. */
static void outputs_make(outputs *o, const model *md, const seq *s, int byte) {
    memset(o, 0, sizeof *o);
    counts_of(o->count, md, s);
    for (int b = 0; b < O_COUNT; b++)
        if (s->want & (1u << b)) {
            o->buf[b] = xcalloc(o->count[b], sizeof(float));
            memset(o->buf[b], byte, o->count[b] * sizeof(float));
        }
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

/* The data of sequence i: E (inside E_all when `together`), C, mask, positions. */
static void batch_make(batch *b, const model *md, seq *s, size_t count, int together,
                       uint64_t *st) {
    memset(b, 0, sizeof *b);
    b->md = md, b->count = count, b->s = s;
    const size_t dm = md->c.dm, dc = md->c.cross == CROSS_W_KV ? md->c.dc : dm;
    size_t rows = 0;
    for (size_t i = 0; i < count; i++)
        rows += s[i].n;
    b->E_all = together ? xcalloc(rows * dm, sizeof(float)) : NULL;
    b->E = xcalloc(count, sizeof(float *)), b->C = xcalloc(count, sizeof(float *));
    b->allowed = xcalloc(count, sizeof(unsigned char *));
    b->pos = xcalloc(count, sizeof(unsigned *));
    b->ins = xcalloc(count, sizeof(attn_input));
    b->single = xcalloc(count, sizeof(outputs));
    b->flat = xcalloc(count, sizeof(outputs));
    b->split = xcalloc(count, sizeof(outputs));
    size_t row = 0;
    for (size_t i = 0; i < count; i++) {
        const seq *q = &s[i];
        const size_t n = q->n, m = q->m ? q->m : n;
        b->E[i] = together ? b->E_all + row * dm : xcalloc(n * dm, sizeof(float));
        row += n;
        fill(b->E[i], n * dm, q->amp, st);
        if (q->m) {
            b->C[i] = xcalloc(m * dc, sizeof(float));
            fill(b->C[i], m * dc, q->amp, st);
        }
        if (q->mask == ATTN_MASK_CUSTOM) {
            b->allowed[i] = xcalloc(n * m, 1);
            for (size_t x = 0; x < n; x++)
                for (size_t k = 0; k < m; k++)
                    b->allowed[i][x * m + k] = !(q->dead_rows && x % 3 == 1) && rnd(st) > -0.4;
        }
        if (q->positions != POS_DEFAULT) {
            b->pos[i] = xcalloc(n, sizeof(unsigned));
            for (size_t t = 0; t < n; t++)
                b->pos[i][t] = q->positions == POS_OFFSET   ? 500000u + (unsigned)t
                               : q->positions == POS_PACKED ? (unsigned)(t % 50)
                                                            : (unsigned)t;
            if (q->positions == POS_SHUFFLED)
                for (size_t t = n - 1; t > 0; t--) {
                    size_t u = pick(st, t + 1);
                    unsigned x = b->pos[i][t];
                    b->pos[i][t] = b->pos[i][u], b->pos[i][u] = x;
                }
        }
        b->ins[i] = (attn_input){.weights = &md->w,
                                 .embeddings = b->E[i],
                                 .n_tokens = n,
                                 .mask = {q->mask, b->allowed[i]},
                                 .scale = (float)(1.0 / sqrt((double)md->c.dh)),
                                 .heads = q->heads,
                                 .n_heads_out = q->hs,
                                 .positions = b->pos[i],
                                 .context = b->C[i],
                                 .n_context = q->m};
        outputs_make(&b->single[i], md, q, 0);
        outputs_make(&b->flat[i], md, q, 0xff);
        outputs_make(&b->split[i], md, q, 0x7f);
    }
}

static void batch_free(batch *b) {
    for (size_t i = 0; i < b->count; i++) {
        if (!b->E_all) free(b->E[i]);
        free(b->C[i]), free(b->allowed[i]), free(b->pos[i]);
        outputs_free(&b->single[i]), outputs_free(&b->flat[i]), outputs_free(&b->split[i]);
    }
    free(b->E_all), free(b->E), free(b->C), free(b->allowed), free(b->pos), free(b->ins);
    free(b->single), free(b->flat), free(b->split);
}

static attn_output *outs_of(const outputs *o, size_t count) {
    attn_output *outs = xcalloc(count, sizeof(attn_output));
    for (size_t i = 0; i < count; i++)
        outs[i] = o[i].o;
    return outs;
}

/* ---- a runner: tasks in a shuffled order, on two threads ---------------------- */

typedef struct shuffle_runner {
    attn_workspace *ws[2]; /* the other thread's, then the caller's when `caller_own` */
    attn_workspace *caller_ws;
    attn_task_fn task;
    void *arg;
    size_t count, *order;
    atomic_size_t next;
    uint64_t st;
    int stop_at; /* ask stop: nonzero from this call on (0: never) */
    int asked;
} shuffle_runner;

static void shuffle_claim(shuffle_runner *r, attn_workspace *ws) {
    for (size_t t; (t = atomic_fetch_add(&r->next, 1)) < r->count;)
        r->task(r->arg, r->order[t], ws);
}

static void *shuffle_thread(void *arg) {
    shuffle_runner *r = arg;
    shuffle_claim(r, r->ws[0]);
    return NULL;
}

static void shuffle_run(void *ctx, attn_task_fn task, void *arg, size_t count) {
    shuffle_runner *r = ctx;
    r->task = task, r->arg = arg, r->count = count;
    r->order = xcalloc(count, sizeof(size_t));
    for (size_t t = 0; t < count; t++)
        r->order[t] = t;
    for (size_t t = count - 1; t > 0; t--) {
        size_t u = pick(&r->st, t + 1), x = r->order[t];
        r->order[t] = r->order[u], r->order[u] = x;
    }
    atomic_store(&r->next, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, shuffle_thread, r), 0);
    shuffle_claim(r, r->caller_ws);
    pthread_join(th, NULL);
    free(r->order);
}

static int shuffle_stop(void *ctx) {
    shuffle_runner *r = ctx;
    r->asked++;
    return r->stop_at && r->asked >= r->stop_at;
}

/* ---- the float64 reference ------------------------------------------------------ */

/* yarn and longrope (its long factors when lng) from tests/rope_ref.c */
static double ref_freq(const attn_rope *r, size_t t, int lng) {
    if (r->scaling == ATTN_ROPE_SCALING_YARN) return rope_ref_yarn_freq(r, t);
    if (r->scaling == ATTN_ROPE_SCALING_LONGROPE) return rope_ref_longrope_freq(r, t, lng);
    double inv = 1.0 / pow(r->theta, (double)(2 * t) / (double)r->dims);
    if (r->scaling == ATTN_ROPE_SCALING_LINEAR) return inv / r->factor;
    return inv;
}

/* x: one head's row, rotated by position p (Hugging Face's rotate_half),
 * cos and sin times HF's attention_scaling. */
static void ref_rotate(double *x, double p, const attn_rope *r, int lng) {
    const size_t half = r->dims / 2;
    const double a = rope_ref_attention_factor(r);
    double y[64];
    for (size_t c = 0; c < r->dims; c++) {
        size_t t = r->style == ATTN_ROPE_HALF ? c % half : c / 2;
        double ang = p * ref_freq(r, t, lng), cs = a * cos(ang), sn = a * sin(ang), rot;
        if (r->style == ATTN_ROPE_HALF)
            rot = c < half ? -x[c + half] : x[c - half];
        else
            rot = c % 2 == 0 ? -x[c + 1] : x[c - 1];
        y[c] = x[c] * cs + rot * sn;
    }
    memcpy(x, y, r->dims * sizeof(double));
}

/* got (float) vs want (double), count values: −inf exactly where wanted,
 * else within RTOL of the output's largest magnitude. */
static void close_check(size_t i, const char *what, const float *got, const double *want,
                        size_t count) {
    double scale = 0.0;
    for (size_t x = 0; x < count; x++)
        if (isfinite(want[x]) && fabs(want[x]) > scale) scale = fabs(want[x]);
    for (size_t x = 0; x < count; x++) {
        if (isinf(want[x])) {
            if (got[x] != (float)want[x])
                ck_abort_msg("sequence %zu %s[%zu]: got %g, want -inf", i, what, x, (double)got[x]);
            continue;
        }
        double err = fabs((double)got[x] - want[x]);
        if (!(err <= RTOL * fabs(want[x]) + RTOL * scale))
            ck_abort_msg("sequence %zu %s[%zu]: got %.9g, want %.9g", i, what, x, (double)got[x],
                         want[x]);
    }
}

/* Sequence i of b against the formulas, every output it wants. */
static void ref_check(const batch *b, size_t i) {
    const model *md = b->md;
    const model_cfg *c = &md->c;
    const seq *s = &b->s[i];
    const attn_input *in = &b->ins[i];
    const size_t n = s->n, dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const int cross = s->m > 0, apart = cross && c->cross == CROSS_W_KV;
    const size_t m = cross ? s->m : n, dc = apart ? c->dc : dm;
    const float *X = cross ? b->C[i] : b->E[i];
    double *Q = xcalloc(h * n * dh, sizeof(double)), *QR = xcalloc(h * n * dh, sizeof(double));
    double *K = xcalloc(h * m * dh, sizeof(double)), *KR = xcalloc(h * m * dh, sizeof(double));
    double *V = xcalloc(h * m * dh, sizeof(double)), *Z = xcalloc(n * hd, sizeof(double));
    double *S = xcalloc(h * n * m, sizeof(double)), *P = xcalloc(h * n * m, sizeof(double));
    double *D = xcalloc(n * dm, sizeof(double)), *EE = xcalloc(n * dm, sizeof(double));
    for (size_t hi = 0; hi < h; hi++) {
        size_t u = hi * g / h;
        double *q = Q + hi * n * dh, *k = K + hi * m * dh, *v = V + hi * m * dh;
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < dh; e++) {
                size_t col = hi * dh + e, ldq = apart ? hd : ld;
                double a = md->b_qkv ? md->b_qkv[col] : 0.0;
                for (size_t x = 0; x < dm; x++)
                    a += (double)b->E[i][t * dm + x] * md->w_qkv[x * ldq + col];
                q[t * dh + e] = a;
            }
        for (size_t t = 0; t < m; t++)
            for (size_t e = 0; e < dh; e++) {
                size_t ck = u * dh + e, cv = gd + u * dh + e;
                const float *W = apart ? md->w_kv : md->w_qkv + hd, *B = NULL;
                size_t ldw = apart ? 2 * gd : ld;
                if (apart)
                    B = md->b_kv;
                else if (md->b_qkv)
                    B = md->b_qkv + hd;
                double a = B ? B[ck] : 0.0, vv = B ? B[cv] : 0.0;
                for (size_t x = 0; x < dc; x++) {
                    a += (double)X[t * dc + x] * W[x * ldw + ck];
                    vv += (double)X[t * dc + x] * W[x * ldw + cv];
                }
                k[t * dh + e] = a, v[t * dh + e] = vv;
            }
        memcpy(QR + hi * n * dh, q, n * dh * sizeof(double));
        memcpy(KR + hi * m * dh, k, m * dh * sizeof(double));
        if (c->rope.dims && !cross) {
            /* longrope: the sequence's own factors, by its own positions */
            int lng = rope_ref_long(&c->rope, in->positions, n);
            for (size_t t = 0; t < n; t++)
                ref_rotate(q + t * dh, in->positions ? in->positions[t] : (double)t, &c->rope, lng);
            for (size_t t = 0; t < m; t++)
                ref_rotate(k + t * dh, in->positions ? in->positions[t] : (double)t, &c->rope, lng);
        }
        for (size_t x = 0; x < n; x++) {
            double max = -INFINITY, sum = 0.0;
            double *sr = S + hi * n * m + x * m, *pr = P + hi * n * m + x * m;
            for (size_t y = 0; y < m; y++) {
                int ok = s->mask == ATTN_MASK_CAUSAL   ? y <= x
                         : s->mask == ATTN_MASK_CUSTOM ? b->allowed[i][x * m + y]
                                                       : 1;
                double px = in->positions ? in->positions[x] : (double)x;
                double py = in->positions && !cross ? in->positions[y] : (double)y;
                double dist = cross ? 0.0 : fabs(px - py);
                if (c->window && !cross && dist >= (double)c->window) ok = 0;
                double dd = 0.0;
                for (size_t e = 0; e < dh; e++)
                    dd += q[x * dh + e] * k[y * dh + e];
                double sc = (double)in->scale * dd;
                if (c->softcap != 0.0f) sc = c->softcap * tanh(sc / c->softcap);
                if (md->alibi && !cross) sc -= (double)md->alibi[hi] * dist;
                sr[y] = ok ? sc : -INFINITY;
                if (ok && sc > max) max = sc;
            }
            for (size_t y = 0; y < m; y++) {
                pr[y] = max == -INFINITY ? 0.0 : exp(sr[y] - max);
                sum += pr[y];
            }
            for (size_t y = 0; y < m; y++)
                pr[y] = sum > 0.0 ? pr[y] / sum : 0.0;
            for (size_t e = 0; e < dh; e++) {
                double zz = 0.0;
                for (size_t y = 0; y < m; y++)
                    zz += pr[y] * v[y * dh + e];
                Z[x * hd + hi * dh + e] = zz;
            }
        }
    }
    for (size_t t = 0; t < n; t++)
        for (size_t e = 0; e < dm; e++) {
            double d = md->b_o ? md->b_o[e] : 0.0;
            if (md->w_o)
                for (size_t x = 0; x < hd; x++)
                    d += Z[t * hd + x] * md->w_o[x * dm + e];
            else
                d += Z[t * hd + e];
            D[t * dm + e] = d;
            EE[t * dm + e] = (double)b->E[i][t * dm + e] + d;
        }
    /* the listed heads' slices of the per-head outputs */
    const outputs *o = &b->flat[i];
    for (size_t j = 0; j < s->hs; j++) {
        size_t hi = s->heads[j];
        double *zh = xcalloc(n * dh, sizeof(double));
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < dh; e++)
                zh[t * dh + e] = Z[t * hd + hi * dh + e];
        const double *src[O_COUNT] = {
            Q + hi * n * dh,  K + hi * m * dh, V + hi * m * dh, QR + hi * n * dh,
            KR + hi * m * dh, S + hi * n * m,  P + hi * n * m,  zh};
        const size_t per[O_COUNT] = {n * dh, m * dh, m * dh, n * dh, m * dh, n * m, n * m, n * dh};
        for (int x = O_Q; x <= O_Z; x++)
            if (o->buf[x]) close_check(i, out_names[x], o->buf[x] + j * per[x], src[x], per[x]);
        free(zh);
    }
    if (o->buf[O_D]) close_check(i, "delta", o->buf[O_D], D, n * dm);
    if (o->buf[O_E]) close_check(i, "embeddings", o->buf[O_E], EE, n * dm);
    free(Q), free(QR), free(K), free(KR), free(V), free(Z), free(S), free(P), free(D), free(EE);
}

/* ---- the check -------------------------------------------------------------- */

/* Every sequence alone, the batch on this thread, the batch shuffled over
 * two threads: all outputs equal to the bit; the flat one against the
 * reference when `ref`. */
static void check_batch(batch *b, int ref, uint64_t seed) {
    attn_workspace *ws = attn_workspace_create(), *wb = attn_workspace_create();
    attn_workspace *w2 = attn_workspace_create(), *w3 = attn_workspace_create();
    attn_error err = {0};
    size_t most = 0; /* what attn_compute of the largest may reserve */
    for (size_t i = 0; i < b->count; i++) {
        ck_assert_msg(attn_compute(&b->single[i].o, ws, &b->ins[i], &err) == 0, "%s", err.message);
        size_t need = attn_input_workspace_need(&b->ins[i]);
        most = need > most ? need : most;
    }
    ck_assert_msg(attn_workspace_bytes(ws) <= most, "alone: reserved %zu, need says %zu",
                  attn_workspace_bytes(ws), most);
    attn_output *flat = outs_of(b->flat, b->count), *split = outs_of(b->split, b->count);
    size_t failed = 12345;
    ck_assert_msg(attn_compute_batch(flat, wb, b->ins, b->count, NULL, &err, &failed) == 0, "%s",
                  err.message);
    ck_assert_uint_eq(failed, b->count);
    size_t need = attn_batch_workspace_need(b->ins, b->count);
    ck_assert_msg(attn_workspace_bytes(wb) <= need, "reserved %zu, need says %zu",
                  attn_workspace_bytes(wb), need);
    shuffle_runner r = {.ws = {w3}, .caller_ws = w2, .st = seed * 7919 + 3};
    attn_runner runner = {.run = shuffle_run, .ctx = &r, .stop = shuffle_stop};
    ck_assert_msg(attn_compute_batch(split, w2, b->ins, b->count, &runner, &err, &failed) == 0,
                  "%s", err.message);
    for (size_t i = 0; i < b->count; i++)
        for (int x = 0; x < O_COUNT; x++) {
            if (!b->single[i].buf[x]) continue;
            size_t bytes = b->single[i].count[x] * sizeof(float);
            if (memcmp(b->single[i].buf[x], b->flat[i].buf[x], bytes) != 0) {
                size_t e = 0;
                while (!memcmp(b->single[i].buf[x] + e, b->flat[i].buf[x] + e, sizeof(float)))
                    e++;
                ck_abort_msg("seed %llu, sequence %zu of %zu (n %zu, m %zu): %s[%zu] is %.9g, "
                             "attn_compute's %.9g",
                             (unsigned long long)seed, i, b->count, b->s[i].n, b->s[i].m,
                             out_names[x], e, (double)b->flat[i].buf[x][e],
                             (double)b->single[i].buf[x][e]);
            }
            if (memcmp(b->flat[i].buf[x], b->split[i].buf[x], bytes) != 0)
                ck_abort_msg("seed %llu, sequence %zu: %s split differs from unsplit",
                             (unsigned long long)seed, i, out_names[x]);
        }
    if (ref)
        for (size_t i = 0; i < b->count; i++)
            ref_check(b, i);
    free(flat), free(split);
    attn_workspace_destroy(ws), attn_workspace_destroy(wb), attn_workspace_destroy(w2);
    attn_workspace_destroy(w3);
}

/* ---- random batches ------------------------------------------------------------- */

static const attn_rope ROPE_HALF = {.dims = 8, .theta = 10000.0, .style = ATTN_ROPE_HALF};

static model_cfg small_model(void) {
    return (model_cfg){.dm = 16, .h = 4, .dh = 8, .w_o = 1, .bias = 1};
}

/* The models the random batches draw from. */
static model_cfg model_variant(int v) {
    model_cfg c = small_model();
    switch (v) {
    case 0: break; /* GPT-2's kind: biases, w_o */
    case 1: /* Mistral's: GQA, RoPE, window */ c.g = 2, c.rope = ROPE_HALF, c.window = 40; break;
    case 2: /* BLOOM's and Gemma 2's rules: ALiBi, softcap */ c.alibi = 1, c.softcap = 5.0f; break;
    case 3: /* partial, interleaved, scaled RoPE; no biases */
        c.rope = (attn_rope){.dims = 4,
                             .theta = 500000.0,
                             .style = ATTN_ROPE_INTERLEAVED,
                             .scaling = ATTN_ROPE_SCALING_LINEAR,
                             .factor = 4.0};
        c.bias = 0;
        break;
    case 4: /* Whisper's cross-attention: contexts of their own m, through w_kv */
        c.cross = CROSS_W_KV, c.dc = 24, c.g = 2;
        break;
    case 5: /* contexts through w_qkv's K and V, beside sequences without */
        c.cross = CROSS_W_QKV, c.mixed = 1;
        break;
    case 6: /* GPT-OSS's yarn (its ramp, a = 0.1 ln 32 + 1), grouped heads */
        c.g = 2;
        c.rope = (attn_rope){.dims = 8,
                             .theta = 150000.0,
                             .style = ATTN_ROPE_HALF,
                             .scaling = ATTN_ROPE_SCALING_YARN,
                             .factor = 32.0,
                             .original_max_position = 4096.0,
                             .untruncated = 1};
        break;
    case 7: { /* Phi's partial longrope: sequences of a batch below and past L = 150
               * (their lengths, 0 … 49 packed, 500000 …), each with its own factors */
        static const float shortf[2] = {1.0f, 1.5f}, longf[2] = {2.0f, 24.0f};
        c.rope = (attn_rope){.dims = 4,
                             .theta = 10000.0,
                             .style = ATTN_ROPE_HALF,
                             .scaling = ATTN_ROPE_SCALING_LONGROPE,
                             .factor = 16.0,
                             .original_max_position = 150.0,
                             .short_factor = shortf,
                             .long_factor = longf};
        break;
    }
    default: /* no w_o (hd = dm), no biases */ c.w_o = 0, c.bias = 0, c.dm = 32; break;
    }
    return c;
}
#define MODEL_VARIANTS 9

static size_t random_length(uint64_t *st) {
    static const size_t edges[] = {1, 2, 3, 127, 128, 129, 255, 256, 257, 300};
    return rnd(st) < 0.0 ? edges[pick(st, sizeof edges / sizeof edges[0])] : 1 + pick(st, 300);
}

static void random_seq(seq *s, const model_cfg *c, uint64_t *st) {
    memset(s, 0, sizeof *s);
    s->n = random_length(st);
    s->amp = 1.0;
    int cross = c->cross != CROSS_NONE && !(c->mixed && rnd(st) < 0.0);
    if (cross) s->m = random_length(st);
    static const attn_mask_kind kinds[] = {ATTN_MASK_CAUSAL, ATTN_MASK_NONE, ATTN_MASK_CUSTOM};
    s->mask = cross ? kinds[1 + pick(st, 2)] : kinds[pick(st, 3)];
    s->dead_rows = s->mask == ATTN_MASK_CUSTOM && rnd(st) < 0.0;
    s->positions = cross ? POS_DEFAULT : (int)pick(st, POS_COUNT);
    s->hs = pick(st, c->h + 3); /* none, some, all, some twice */
    for (size_t j = 0; j < s->hs; j++)
        s->heads[j] = pick(st, c->h);
    static const unsigned wants[] = {
        WANT_DEFAULT, WANT_ALL,
        WANT_ONLINE,  0,
        1u << O_Q,    (1u << O_Q) | (1u << O_K) | (1u << O_V) | (1u << O_KR)};
    size_t w = pick(st, 8);
    s->want = w < 6 ? wants[w] : (unsigned)pick(st, 1u << O_COUNT);
}

/* `batches` random batches of at most `most` sequences of each model. */
static void random_batches(int variant, size_t batches, size_t most, int ref) {
    for (uint64_t k = 0; k < batches; k++) {
        uint64_t seed = (uint64_t)variant * 1000 + k + 1, st = seed * 0x9e3779b97f4a7c15ull + 1;
        model_cfg c = model_variant(variant);
        model md;
        model_make(&md, &c, &st);
        size_t count = 1 + pick(&st, most);
        seq *s = xcalloc(count, sizeof(seq));
        for (size_t i = 0; i < count; i++)
            random_seq(&s[i], &c, &st);
        batch b;
        batch_make(&b, &md, s, count, rnd(&st) < 0.0, &st);
        check_batch(&b, ref && k == 0, seed);
        batch_free(&b);
        free(s);
        model_free(&md);
    }
}

START_TEST(test_random_batches) {
    random_batches(_i, 24, 8, 1);
}
END_TEST

/* ---- particular batches ---------------------------------------------------------- */

/* A batch of `count` sequences of model c, all of length n (0: random),
 * wanting `want`, every head listed. */
static void uniform_batch(const model_cfg *c, size_t count, size_t n, unsigned want, int together,
                          int ref, uint64_t seed) {
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    model md;
    model_make(&md, c, &st);
    seq *s = xcalloc(count, sizeof(seq));
    for (size_t i = 0; i < count; i++) {
        random_seq(&s[i], c, &st);
        if (n) s[i].n = n;
        s[i].want = want;
        s[i].hs = c->h;
        for (size_t j = 0; j < c->h; j++)
            s[i].heads[j] = j;
    }
    batch b;
    batch_make(&b, &md, s, count, together, &st);
    check_batch(&b, ref, seed);
    batch_free(&b);
    free(s);
    model_free(&md);
}

START_TEST(test_batch_of_one) {
    for (int v = 0; v < MODEL_VARIANTS; v++) {
        model_cfg c = model_variant(v);
        uniform_batch(&c, 1, 0, WANT_ALL, 0, 1, 40 + (uint64_t)v);
        uniform_batch(&c, 1, 1, WANT_DEFAULT, 1, 0, 50 + (uint64_t)v); /* one token */
    }
}
END_TEST

/* Calls of more than one row tile with a tail (n = 270, 541; 540 has none)
 * read E and write ΔE in place but for their last row tile (batch.c): bit
 * for bit what they give in a batch, for each output set, within
 * attn_input_workspace_need (check_batch); with RoPE, a context, no w_o. */
START_TEST(test_long_alone) {
    static const int variants[] = {0, 1, 4, 6};
    static const unsigned wants[] = {WANT_DEFAULT, WANT_ONLINE, 1u << O_D, 1u << O_E, WANT_ALL};
    static const size_t lengths[] = {270, 541, 540};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
            uint64_t seed = 7000 + v * 10 + w, st = seed * 0x9e3779b97f4a7c15ull + 1;
            model_cfg c = model_variant(variants[v]);
            model md;
            model_make(&md, &c, &st);
            seq s[3];
            for (size_t i = 0; i < 3; i++) {
                random_seq(&s[i], &c, &st);
                s[i].n = lengths[i];
                s[i].want = wants[w];
            }
            batch b;
            batch_make(&b, &md, s, 3, w % 2, &st);
            check_batch(&b, w == 0, seed);
            batch_free(&b);
            model_free(&md);
        }
}
END_TEST

/* 64 sequences of 3 tokens of 4 dimensions, and of one token */
START_TEST(test_many_tiny) {
    model_cfg c = {.dm = 4, .h = 2, .dh = 2, .w_o = 1, .bias = 1};
    uniform_batch(&c, 64, 3, WANT_DEFAULT, 1, 1, 60);
    uniform_batch(&c, 64, 3, WANT_ALL, 0, 0, 61);
    uniform_batch(&c, 64, 3, WANT_ONLINE, 0, 0, 62);
    uniform_batch(&c, 64, 1, WANT_DEFAULT, 0, 0, 63);
    c.rope = (attn_rope){.dims = 2, .theta = 10000.0, .style = ATTN_ROPE_HALF};
    uniform_batch(&c, 64, 3, WANT_ALL, 1, 1, 64);
}
END_TEST

/* GPT-2's widths: 768, 12 heads of 64, at a few sequences */
START_TEST(test_gpt2_widths) {
    model_cfg c = {.dm = 768, .h = 12, .dh = 64, .w_o = 1, .bias = 1};
    uint64_t st = 77;
    model md;
    model_make(&md, &c, &st);
    seq s[4];
    const size_t lengths[4] = {1, 16, 130, 40};
    for (size_t i = 0; i < 4; i++) {
        random_seq(&s[i], &c, &st);
        s[i].n = lengths[i];
        s[i].want = i == 3 ? WANT_ALL : WANT_DEFAULT;
        s[i].mask = ATTN_MASK_CAUSAL;
    }
    batch b;
    batch_make(&b, &md, s, 4, 1, &st);
    check_batch(&b, 0, 77);
    ref_check(&b, 1);
    batch_free(&b);
    model_free(&md);
}
END_TEST

/*
 * Packed rows: a sequence's full blocks of 12 rows and its tail rows in
 * the halves of shared blocks (slots 0 … 5, 6 … 11), among other
 * sequences' tails. Every pair of lengths 1 … 30 (tails of every size in
 * the first and second tail blocks, ahead and behind), each against the
 * sequences alone and the float64 reference, with RoPE rotating the rows
 * where they land, by three kinds of outputs.
 */
static void pair_batch(const model_cfg *c, const model *md, size_t n0, size_t n1, size_t m0,
                       size_t m1, unsigned want, uint64_t seed) {
    uint64_t st = seed;
    seq s[2];
    const size_t n[2] = {n0, n1}, m[2] = {m0, m1};
    for (size_t i = 0; i < 2; i++) {
        random_seq(&s[i], c, &st);
        s[i].n = n[i], s[i].m = m[i];
        s[i].want = want;
        s[i].amp = 1.0;
        if (m[i] && s[i].mask == ATTN_MASK_CAUSAL) s[i].mask = ATTN_MASK_NONE;
    }
    batch b;
    batch_make(&b, md, s, 2, (n0 + n1) % 2, &st);
    check_batch(&b, 1, seed);
    batch_free(&b);
}

static const unsigned pair_wants[3] = {WANT_DEFAULT, WANT_ONLINE, WANT_ALL};

START_TEST(test_length_pairs) {
    model_cfg c = model_variant(1); /* GQA, RoPE, biases, w_o */
    uint64_t st = 123;
    model md;
    model_make(&md, &c, &st);
    for (size_t a = 1; a <= 30; a++)
        for (size_t x = 1; x <= 30; x++)
            pair_batch(&c, &md, a, x, 0, 0, pair_wants[(a + x) % 3], 1000 * a + x);
    model_free(&md);
}
END_TEST

/* Contexts: the queries' and the keys' rows packed apart, lengths 1 … 30 */
START_TEST(test_length_pairs_cross) {
    for (int v = 4; v <= 5; v++) {
        model_cfg c = model_variant(v);
        c.mixed = 0;
        uint64_t st = 124 + (uint64_t)v;
        model md;
        model_make(&md, &c, &st);
        for (size_t k = 0; k < 150; k++) {
            size_t n0 = 1 + pick(&st, 30), n1 = 1 + pick(&st, 30);
            size_t m0 = 1 + pick(&st, 30), m1 = 1 + pick(&st, 30);
            pair_batch(&c, &md, n0, n1, m0, m1, pair_wants[k % 3], 7000 * (uint64_t)v + k);
        }
        model_free(&md);
    }
}
END_TEST

/* Many tails: 2 … 40 sequences of lengths 1 … 30, so that tails fill tail
 * blocks far from the first, next to sequences whose tails are empty;
 * some with heads of their own (outside the packed rows). Every model. */
START_TEST(test_many_tails) {
    for (int v = 0; v < MODEL_VARIANTS; v++)
        for (uint64_t k = 0; k < 6; k++) {
            uint64_t seed = 9000 + (uint64_t)v * 100 + k, st = seed * 0x9e3779b97f4a7c15ull + 1;
            model_cfg c = model_variant(v);
            model md;
            model_make(&md, &c, &st);
            size_t count = 2 + pick(&st, 39);
            seq *s = xcalloc(count, sizeof(seq));
            for (size_t i = 0; i < count; i++) {
                random_seq(&s[i], &c, &st);
                s[i].n = rnd(&st) < -0.6 ? 12 * (1 + pick(&st, 2)) : 1 + pick(&st, 30);
                if (s[i].m) s[i].m = 1 + pick(&st, 30);
                if (k % 2) s[i].want = pair_wants[pick(&st, 3)];
            }
            batch b;
            batch_make(&b, &md, s, count, k % 3 == 0, &st);
            check_batch(&b, 1, seed);
            batch_free(&b);
            free(s);
            model_free(&md);
        }
}
END_TEST

/* GPT-2's block at 64 sequences of 16 tokens (64 full blocks, 256 tail
 * rows in 22 shared blocks) */
START_TEST(test_gpt2_64x16) {
    model_cfg c = {.dm = 768, .h = 12, .dh = 64, .w_o = 1, .bias = 1};
    uint64_t st = 78;
    model md;
    model_make(&md, &c, &st);
    seq s[64];
    for (size_t i = 0; i < 64; i++) {
        random_seq(&s[i], &c, &st);
        s[i].n = 16;
        s[i].want = WANT_DEFAULT;
        s[i].mask = ATTN_MASK_CAUSAL;
        s[i].positions = POS_DEFAULT;
    }
    batch b;
    batch_make(&b, &md, s, 64, 1, &st);
    check_batch(&b, 0, 78);
    ref_check(&b, 0), ref_check(&b, 37), ref_check(&b, 63);
    batch_free(&b);
    model_free(&md);
}
END_TEST

/* What the packed rows rest on (attention/batch.c): in a row-major sgemm
 * of 12k rows, a row's bits depend only on the half of its block of 12
 * it sits in (slots 0 … 5 or 6 … 11), not on the block, the call's length
 * or the other rows. Checked here for the shapes of the small models and
 * GPT-2's ΔE column tile, so that a BLAS whose kernels differ fails here
 * first, by name. */
START_TEST(test_sgemm_halves) {
    static const int shapes[][2] = {{16, 48}, {32, 96}, {768, 192}};
    for (size_t sh = 0; sh < 3; sh++) {
        const int K = shapes[sh][0], N = shapes[sh][1], rows = 12 * 11;
        uint64_t st = 31 + sh;
        float *a = xcalloc((size_t)rows * K, sizeof(float)), *w = xcalloc((size_t)K * N, 4);
        float *c = xcalloc((size_t)rows * N, sizeof(float)), *x = xcalloc((size_t)K, 4);
        float *ref = xcalloc(2 * (size_t)N, sizeof(float));
        fill(w, (size_t)K * N, 0.2, &st), fill(x, (size_t)K, 1.0, &st);
        for (int half = 0; half < 2; half++) { /* row x at slot 0 and 6 of one block */
            fill(a, 12 * (size_t)K, 1.0, &st);
            memcpy(a + (size_t)half * 6 * K, x, (size_t)K * sizeof(float));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 12, N, K, 1.0f, a, K, w, N, 0.0f,
                        c, N);
            memcpy(ref + half * N, c + (size_t)half * 6 * N, (size_t)N * sizeof(float));
        }
        for (int blocks = 1; blocks <= 11; blocks += 5)
            for (int p = 0; p < 12 * blocks; p += 1 + (blocks > 1) * 4) {
                fill(a, (size_t)rows * K, 1.0, &st);
                memcpy(a + (size_t)p * K, x, (size_t)K * sizeof(float));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 12 * blocks, N, K, 1.0f, a,
                            K, w, N, 0.0f, c, N);
                ck_assert_msg(
                    !memcmp(c + (size_t)p * N, ref + (p % 12 >= 6) * N, (size_t)N * sizeof(float)),
                    "K %d, N %d: row at %d of %d rows differs from its half's", K, N, p,
                    12 * blocks);
            }
        free(a), free(w), free(c), free(x), free(ref);
    }
}
END_TEST

/* Sequences 2 and 4 overflow their scores: the batch fails with
 * ATTN_ERR_NONFINITE and names the first, on this thread and split. */
START_TEST(test_nonfinite) {
    model_cfg c = small_model();
    uint64_t st = 99;
    model md;
    model_make(&md, &c, &st);
    for (int path = 0; path < 2; path++) {
        seq s[6];
        for (size_t i = 0; i < 6; i++) {
            random_seq(&s[i], &c, &st);
            s[i].want = path ? WANT_ALL : WANT_ONLINE;
            s[i].amp = i == 2 || i == 4 ? 1e30 : 1.0;
        }
        batch b;
        batch_make(&b, &md, s, 6, 0, &st);
        attn_output *outs = outs_of(b.flat, 6);
        attn_workspace *ws = attn_workspace_create(), *w3 = attn_workspace_create();
        attn_error err = {0};
        size_t failed = 0;
        ck_assert_int_eq(attn_compute_batch(outs, ws, b.ins, 6, NULL, &err, &failed), -1);
        ck_assert_ptr_eq(err.code, ATTN_ERR_NONFINITE);
        ck_assert_uint_eq(failed, 2);
        shuffle_runner r = {.ws = {w3}, .caller_ws = ws, .st = 5};
        attn_runner runner = {.run = shuffle_run, .ctx = &r};
        failed = 0;
        ck_assert_int_eq(attn_compute_batch(outs, ws, b.ins, 6, &runner, &err, &failed), -1);
        ck_assert_ptr_eq(err.code, ATTN_ERR_NONFINITE);
        ck_assert_uint_eq(failed, 2);
        ck_assert_int_eq(attn_compute_batch(outs, ws, b.ins, 6, NULL, NULL, NULL), -1);
        free(outs);
        attn_workspace_destroy(ws), attn_workspace_destroy(w3);
        batch_free(&b);
    }
    model_free(&md);
}
END_TEST

/* count 0 is a success that touches nothing; a stop ends the batch; a NULL
 * workspace is out of memory, for the batch (failed = count) */
START_TEST(test_edges) {
    attn_error err = {0};
    size_t failed = 7;
    ck_assert_int_eq(attn_compute_batch(NULL, NULL, NULL, 0, NULL, &err, &failed), 0);
    ck_assert_uint_eq(failed, 0);
    ck_assert_uint_eq(attn_batch_workspace_need(NULL, 0), 0);
    ck_assert(attn_batch_flops(NULL, 0) == 0.0);

    model_cfg c = small_model();
    uint64_t st = 11;
    model md;
    model_make(&md, &c, &st);
    seq s[3];
    for (size_t i = 0; i < 3; i++) {
        random_seq(&s[i], &c, &st);
        s[i].want = WANT_ALL;
    }
    batch b;
    batch_make(&b, &md, s, 3, 0, &st);
    attn_output *outs = outs_of(b.flat, 3);
    ck_assert_int_eq(attn_compute_batch(outs, NULL, b.ins, 3, NULL, &err, &failed), -1);
    ck_assert_ptr_eq(err.code, ATTN_ERR_NOMEM);
    ck_assert_uint_eq(failed, 3);
    attn_workspace *ws = attn_workspace_create(), *w3 = attn_workspace_create();
    for (int at = 1; at <= 3; at++) { /* before the projection, the attention, the output */
        shuffle_runner r = {.ws = {w3}, .caller_ws = ws, .st = 5, .stop_at = at};
        attn_runner runner = {.run = shuffle_run, .ctx = &r, .stop = shuffle_stop};
        ck_assert_int_eq(attn_compute_batch(outs, ws, b.ins, 3, &runner, &err, &failed), -1);
        ck_assert_ptr_eq(err.code, ATTN_ERR_STOPPED);
        ck_assert_uint_eq(failed, 3);
    }
    double sum = 0.0;
    for (size_t i = 0; i < 3; i++)
        sum += attn_input_flops(&b.ins[i]);
    ck_assert(attn_batch_flops(b.ins, 3) == sum);
    free(outs);
    attn_workspace_destroy(ws), attn_workspace_destroy(w3);
    batch_free(&b);
    model_free(&md);
}
END_TEST

/* The stacked Q, K, V, Z and ΔE are linear in the batch's rows: the need
 * of 64 sequences of 16 tokens is about that of one of 1024 plus the copies
 * of E and ΔE in packed rows (a call alone keeps only its last row tile's:
 * it reads E and writes ΔE in place) and the sequences' own rows of QKV
 * and Z (their tails share blocks), not 64 times one's. */
START_TEST(test_workspace_need) {
    attn_weights w = {.d_model = 768, .n_heads = 12, .d_head = 64, .w_o = (const float *)1};
    float dummy = 0.0f;
    attn_input ins[64];
    for (size_t i = 0; i < 64; i++)
        ins[i] = (attn_input){.weights = &w, .embeddings = &dummy, .n_tokens = 16};
    attn_input one = {.weights = &w, .embeddings = &dummy, .n_tokens = 1024};
    size_t batch = attn_batch_workspace_need(ins, 64), single = attn_input_workspace_need(&one);
    const size_t copies = 2 * (64 + 22) * 12 * 768 * sizeof(float); /* E and ΔE, 1032 rows */
    const size_t own = 1024 * (2304 + 768) * sizeof(float);         /* QKV and Z, in order */
    ck_assert_msg(batch > single && batch < single + copies + own + copies / 4,
                  "batch %zu, one of 1024: %zu", batch, single);
    /* one of 1024 alone: Q, K, V (1032 × 2304), Z (1032 × 768), and E's and ΔE's last row
     * tile (the rows from 960 on: 72 × 768 each), with a few slices */
    const size_t alone = (1032 * 2304 + 1032 * 768 + 2 * 72 * 768) * sizeof(float);
    ck_assert_msg(single >= alone && single < alone + alone / 8, "one of 1024: %zu, expected %zu",
                  single, alone);
    w.n_heads = SIZE_MAX / 2; /* sizes that overflow saturate */
    ck_assert_uint_eq(attn_batch_workspace_need(ins, 64), SIZE_MAX);
}
END_TEST

/* Sequences of two weight sets (which the caller must not mix) are still
 * each what attn_compute gives them. */
START_TEST(test_two_weight_sets) {
    model_cfg c = small_model();
    uint64_t st = 21;
    model md, md2;
    model_make(&md, &c, &st);
    model_make(&md2, &c, &st);
    seq s[3];
    for (size_t i = 0; i < 3; i++) {
        random_seq(&s[i], &c, &st);
        s[i].want = WANT_ALL;
    }
    batch b;
    batch_make(&b, &md, s, 3, 0, &st);
    b.ins[1].weights = &md2.w;
    check_batch(&b, 0, 21);
    batch_free(&b);
    model_free(&md), model_free(&md2);
}
END_TEST

static Suite *batch_suite(void) {
    Suite *s = suite_create("batch_engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_random_batches, 0, MODEL_VARIANTS);
    tcase_add_test(tc, test_batch_of_one);
    tcase_add_test(tc, test_long_alone);
    tcase_add_test(tc, test_many_tiny);
    tcase_add_test(tc, test_gpt2_widths);
    tcase_add_test(tc, test_sgemm_halves);
    tcase_add_test(tc, test_length_pairs);
    tcase_add_test(tc, test_length_pairs_cross);
    tcase_add_test(tc, test_many_tails);
    tcase_add_test(tc, test_gpt2_64x16);
    tcase_add_test(tc, test_nonfinite);
    tcase_add_test(tc, test_edges);
    tcase_add_test(tc, test_workspace_need);
    tcase_add_test(tc, test_two_weight_sets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    /* as the server (server/main.c): OpenBLAS's own threads would split a
     * product's rows at places of their own (batch.c) */
    openblas_set_num_threads(1);
    SRunner *sr = srunner_create(batch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
