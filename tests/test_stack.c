/*
 * test_stack.c — attn_compute_stack: L attention layers on the residual
 * stream, E_{l+1} = E_l + ΔE_l.
 *
 * Each case is a random stack (L = 1, 2, 3, 5) whose layers mix today's
 * variants (grouped K/V heads, RoPE with scaling, ALiBi, a window, a
 * soft-cap, their own scales, no w_o; GPT-OSS's sinks and windows, Llama
 * 4's chunks and NoPE layer, L = 4), under causal, full and custom
 * masks, positions and a context shared by every layer, over two
 * sequences of lengths past a block of query rows (128) and a tile of keys
 * (256), so that both attend paths run. Every layer's reported outputs and
 * the stack's E_L and E_L − E_0 are checked against attn_stack_naive's
 * float64 reference within RTOL of each output's scale (test_variants.c's
 * rule); a batch's sequences equal their stacks alone, and a run split over
 * two threads equals the unsplit one, bit for bit. Then: a one-layer stack
 * is attn_compute_batch; hidden states per layer; the workspace bound,
 * which does not grow with L; the work; a stop between layers; a failure
 * naming its sequence and layer; scores far past exp's range in a later
 * layer, as the residual grows.
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

#define RTOL 1e-5

enum { MAX_L = 5, MAX_SEQ = 2 };

static void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size);
    if (!p) ck_abort_msg("calloc(%zu, %zu) failed", count, size);
    return p;
}

/* A uniform double in [-1, 1) (xorshift*). */
static double rnd(uint64_t *st) {
    uint64_t x = *st;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *st = x;
    return (double)((x * 2685821657736338717ull) >> 11) / 4503599627370496.0 - 1.0;
}

static float *random_floats(size_t count, double amp, uint64_t *st) {
    float *x = xcalloc(count, sizeof(float));
    for (size_t i = 0; i < count; i++)
        x[i] = (float)(amp * rnd(st));
    return x;
}

/* ---- a stack and its sequences ------------------------------------------- */

typedef struct layer_cfg {
    attn_rope rope;
    int alibi; /* standard slopes */
    size_t window;
    float softcap;
    float scale;  /* the weight set's own */
    int no_w_o;   /* identity (hd == dm) */
    double o_amp; /* w_o's amplitude, × 1/sqrt(hd); 0: 1 */
    double sinks; /* h sink logits of this amplitude, or 0: none */
    size_t chunk;
} layer_cfg;

typedef struct model {
    size_t L, dm, h, g, dh, dc; /* dc: a context's width through w_kv, or 0 */
    attn_weights w[MAX_L];
    const attn_weights *ptr[MAX_L];
    float *bufs[MAX_L][8];
} model;

static void model_make(model *md, size_t L, size_t h, size_t g, size_t dh, size_t dc,
                       const layer_cfg *lc, uint64_t seed) {
    memset(md, 0, sizeof *md);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    const size_t dm = h * dh, hd = h * dh, gd = g * dh;
    md->L = L, md->dm = dm, md->h = h, md->g = g, md->dh = dh, md->dc = dc;
    for (size_t l = 0; l < L; l++) {
        float **b = md->bufs[l];
        const size_t cols = dc ? hd : hd + 2 * gd;
        b[0] = random_floats(dm * cols, 1.0 / sqrt((double)dm), &st);
        b[1] = random_floats(cols, 0.5, &st);
        if (!lc[l].no_w_o) {
            double amp = lc[l].o_amp != 0.0 ? lc[l].o_amp : 1.0;
            b[2] = random_floats(hd * dm, amp / sqrt((double)hd), &st);
            b[3] = random_floats(dm, 0.5, &st);
        }
        if (dc) {
            b[4] = random_floats(dc * 2 * gd, 1.0 / sqrt((double)dc), &st);
            b[5] = random_floats(2 * gd, 0.5, &st);
        }
        if (lc[l].alibi) {
            b[6] = xcalloc(h, sizeof(float));
            attn_alibi_slopes(b[6], h);
        }
        if (lc[l].sinks != 0.0) b[7] = random_floats(h, lc[l].sinks, &st);
        md->w[l] = (attn_weights){.d_model = dm,
                                  .n_heads = h,
                                  .d_head = dh,
                                  .n_kv_heads = g,
                                  .w_qkv = b[0],
                                  .b_qkv = b[1],
                                  .w_o = b[2],
                                  .b_o = b[3],
                                  .d_context = dc,
                                  .w_kv = b[4],
                                  .b_kv = b[5],
                                  .rope = lc[l].rope,
                                  .alibi = b[6],
                                  .window = lc[l].window,
                                  .softcap = lc[l].softcap,
                                  .scale = lc[l].scale,
                                  .sinks = b[7],
                                  .chunk = lc[l].chunk};
        md->ptr[l] = &md->w[l];
    }
}

static void model_free(model *md) {
    for (size_t l = 0; l < MAX_L; l++)
        for (int k = 0; k < 8; k++)
            free(md->bufs[l][k]);
}

typedef struct seq {
    float *E, *C;
    unsigned char *allowed;
    unsigned *pos;
    size_t heads[3];
    attn_input in;
} seq;

/* n tokens; a context of m rows (0: none); positions offset and
 * permuted when asked; heads h−1, 0, h−1 listed. */
static void seq_make(seq *s, const model *md, size_t n, attn_mask_kind mask, int positions,
                     size_t m, double amp, uint64_t seed) {
    memset(s, 0, sizeof *s);
    uint64_t st = seed * 0x2545f4914f6cdd1dull + 7;
    const size_t keys = m ? m : n;
    s->E = random_floats(n * md->dm, amp, &st);
    if (m) s->C = random_floats(m * (md->dc ? md->dc : md->dm), amp, &st);
    if (mask == ATTN_MASK_CUSTOM) {
        s->allowed = xcalloc(n * keys, 1);
        for (size_t q = 0; q < n; q++)
            for (size_t k = 0; k < keys; k++)
                s->allowed[q * keys + k] = q % 7 != 3 && rnd(&st) > -0.5; /* some dead rows */
    }
    if (positions) {
        s->pos = xcalloc(n, sizeof(unsigned));
        for (size_t t = 0; t < n; t++)
            s->pos[t] = 1000u + (unsigned)t;
        for (size_t t = n - 1; t > 0; t--) {
            size_t u = (size_t)((rnd(&st) + 1.0) / 2.0 * (double)(t + 1)) % (t + 1);
            unsigned x = s->pos[t];
            s->pos[t] = s->pos[u], s->pos[u] = x;
        }
    }
    s->heads[0] = md->h - 1, s->heads[1] = 0, s->heads[2] = md->h - 1;
    s->in = (attn_input){.embeddings = s->E,
                         .n_tokens = n,
                         .mask = {mask, s->allowed},
                         .scale = 0.3f,
                         .heads = s->heads,
                         .n_heads_out = 3,
                         .positions = s->pos,
                         .context = s->C,
                         .n_context = m};
}

static void seq_free(seq *s) {
    free(s->E), free(s->C), free(s->allowed), free(s->pos);
}

/* ---- a run's outputs ----------------------------------------------------- */

enum { R_S, R_P, R_Z, R_D, R_E, R_COUNT };
static const char *r_name[R_COUNT] = {"scores", "patterns", "head_outputs", "delta", "embeddings"};
#define WANT_FULL   ((1u << R_COUNT) - 1)
#define WANT_ONLINE ((1u << R_D) | (1u << R_E))

typedef struct results {
    size_t L, count;
    float *buf[MAX_L][MAX_SEQ][R_COUNT];
    size_t len[MAX_SEQ][R_COUNT];
    attn_output outs[MAX_L][MAX_SEQ];
    const attn_output *lp[MAX_L];
    float *fd[MAX_SEQ], *fe[MAX_SEQ];
    float *fr[MAX_SEQ]; /* rollouts, n × n, or NULL */
    size_t rlen[MAX_SEQ];
    attn_stack_output fin[MAX_SEQ];
} results;

/* Outputs `want` of the layers in `layers` (a bit per layer), and the
 * finals when asked; every buffer filled with a pattern first. */
static results *results_make(const model *md, const attn_input *ins, size_t count, unsigned want,
                             unsigned layers, int finals) {
    results *r = xcalloc(1, sizeof *r);
    r->L = md->L, r->count = count;
    for (size_t i = 0; i < count; i++) {
        const size_t n = ins[i].n_tokens, m = ins[i].context ? ins[i].n_context : n;
        const size_t hs = ins[i].n_heads_out;
        r->len[i][R_S] = r->len[i][R_P] = hs * n * m;
        r->len[i][R_Z] = hs * n * md->dh;
        r->len[i][R_D] = r->len[i][R_E] = n * md->dm;
        if (finals) {
            r->fd[i] = xcalloc(n * md->dm, sizeof(float));
            r->fe[i] = xcalloc(n * md->dm, sizeof(float));
            r->fin[i] = (attn_stack_output){r->fd[i], r->fe[i], NULL};
        }
    }
    for (size_t l = 0; l < md->L; l++) {
        if (!(layers >> l & 1)) continue;
        for (size_t i = 0; i < count; i++) {
            float **b = r->buf[l][i];
            for (int k = 0; k < R_COUNT; k++)
                if (want >> k & 1) {
                    b[k] = xcalloc(r->len[i][k], sizeof(float));
                    memset(b[k], 0x7f, r->len[i][k] * sizeof(float));
                }
            r->outs[l][i] = (attn_output){.scores = b[R_S],
                                          .patterns = b[R_P],
                                          .head_outputs = b[R_Z],
                                          .delta = b[R_D],
                                          .embeddings = b[R_E]};
        }
        r->lp[l] = r->outs[l];
    }
    return r;
}

/* A rollout asked of every sequence (the finals made), filled with a
 * pattern first. */
static void results_roll(results *r, const attn_input *ins) {
    for (size_t i = 0; i < r->count; i++) {
        const size_t nn = ins[i].n_tokens * ins[i].n_tokens;
        r->fr[i] = xcalloc(nn, sizeof(float));
        r->rlen[i] = nn;
        memset(r->fr[i], 0x7f, nn * sizeof(float));
        r->fin[i].rollout = r->fr[i];
    }
}

static void results_free(results *r) {
    for (size_t l = 0; l < MAX_L; l++)
        for (size_t i = 0; i < MAX_SEQ; i++)
            for (int k = 0; k < R_COUNT; k++)
                free(r->buf[l][i][k]);
    for (size_t i = 0; i < MAX_SEQ; i++)
        free(r->fd[i]), free(r->fe[i]), free(r->fr[i]);
    free(r);
}

/* Sequence a of x equals sequence b of y, every buffer, bit for bit. */
static void results_same(const results *x, size_t a, const results *y, size_t b, const char *who) {
    for (size_t l = 0; l < x->L; l++)
        for (int k = 0; k < R_COUNT; k++)
            if (x->buf[l][a][k] &&
                memcmp(x->buf[l][a][k], y->buf[l][b][k], x->len[a][k] * sizeof(float)))
                ck_abort_msg("%s: layer %zu %s differs", who, l, r_name[k]);
    if (x->fr[a] && y->fr[b])
        ck_assert_msg(!memcmp(x->fr[a], y->fr[b], x->rlen[a] * sizeof(float)),
                      "%s: rollout differs", who);
    if (x->fd[a] && y->fd[b]) {
        ck_assert_msg(!memcmp(x->fd[a], y->fd[b], x->len[a][R_D] * sizeof(float)),
                      "%s: final delta differs", who);
        ck_assert_msg(!memcmp(x->fe[a], y->fe[b], x->len[a][R_E] * sizeof(float)),
                      "%s: final embeddings differ", who);
    }
}

/* ---- the checks against the reference ------------------------------------ */

/* got vs ref: −inf exactly where the reference has it, else within RTOL of
 * the output's largest magnitude (test_variants.c's rule). */
static void close_check(const char *what, size_t l, const float *got, const double *ref,
                        size_t count, double rtol) {
    double scale = 0.0;
    for (size_t x = 0; x < count; x++)
        if (isfinite(ref[x]) && fabs(ref[x]) > scale) scale = fabs(ref[x]);
    for (size_t x = 0; x < count; x++) {
        if (isinf(ref[x])) {
            if (got[x] != (float)ref[x])
                ck_abort_msg("layer %zu %s[%zu]: got %g, want -inf", l, what, x, (double)got[x]);
            continue;
        }
        double err = fabs((double)got[x] - ref[x]);
        if (!(err <= rtol * fabs(ref[x]) + rtol * scale))
            ck_abort_msg("layer %zu %s[%zu]: got %.9g, want %.9g (err %g, scale %g)", l, what, x,
                         (double)got[x], ref[x], err, scale);
    }
}

/* Every output of r against the reference; returns the largest finite
 * |score| of the reference's last layer (every head). */
static double check_reference(const results *r, const attn_input *ins, const attn_stack *st,
                              double rtol) {
    double top = 0.0;
    for (size_t i = 0; i < r->count; i++) {
        const attn_input *in = &ins[i];
        const attn_weights *w = st->layers[0];
        const size_t n = in->n_tokens, m = in->context ? in->n_context : n;
        const size_t h = w->n_heads, dh = w->d_head, dm = w->d_model;
        attn_naive_layer lay[MAX_L];
        for (size_t l = 0; l < st->n_layers; l++)
            lay[l] = (attn_naive_layer){.scores = xcalloc(h * n * m, sizeof(double)),
                                        .patterns = xcalloc(h * n * m, sizeof(double)),
                                        .head_outputs = xcalloc(h * n * dh, sizeof(double)),
                                        .delta = xcalloc(n * dm, sizeof(double)),
                                        .embeddings = xcalloc(n * dm, sizeof(double))};
        double *final = xcalloc(n * dm, sizeof(double));
        double *scratch = xcalloc(attn_stack_naive_scratch(in, st), sizeof(double));
        attn_stack_naive(lay, st->hidden_states ? NULL : final, scratch, in, i, st);
        double *fd = xcalloc(n * dm, sizeof(double));
        for (size_t x = 0; x < n * dm; x++)
            fd[x] = final[x] - (double)(in->embeddings ? in->embeddings[x] : 0.0f);
        for (size_t l = 0; l < st->n_layers; l++) {
            const float *const *b = (const float *const *)r->buf[l][i];
            for (size_t j = 0; j < in->n_heads_out; j++) {
                const size_t hi = in->heads[j];
                if (b[R_S])
                    close_check("scores", l, b[R_S] + j * n * m, lay[l].scores + hi * n * m, n * m,
                                rtol);
                if (b[R_P])
                    close_check("patterns", l, b[R_P] + j * n * m, lay[l].patterns + hi * n * m,
                                n * m, rtol);
                if (b[R_Z])
                    close_check("head_outputs", l, b[R_Z] + j * n * dh,
                                lay[l].head_outputs + hi * n * dh, n * dh, rtol);
            }
            if (b[R_D]) close_check("delta", l, b[R_D], lay[l].delta, n * dm, rtol);
            if (b[R_E]) close_check("embeddings", l, b[R_E], lay[l].embeddings, n * dm, rtol);
        }
        if (r->fe[i] && !st->hidden_states)
            close_check("final embeddings", st->n_layers, r->fe[i], final, n * dm, rtol);
        /* E_L − E_0 is a difference: its scale is that of E_L */
        if (r->fd[i] && !st->hidden_states) {
            double scale = 0.0;
            for (size_t x = 0; x < n * dm; x++)
                scale = fmax(scale, fabs(final[x]));
            for (size_t x = 0; x < n * dm; x++)
                if (!(fabs((double)r->fd[i][x] - fd[x]) <= 2 * rtol * scale))
                    ck_abort_msg("final delta[%zu]: got %.9g, want %.9g", x, (double)r->fd[i][x],
                                 fd[x]);
        }
        if (r->fr[i]) {
            const double *pats[MAX_L];
            for (size_t l = 0; l < st->n_layers; l++)
                pats[l] = lay[l].patterns;
            double *R = xcalloc(n * n, sizeof(double)), *rs = xcalloc(2 * n * n, sizeof(double));
            attn_rollout_naive(R, rs, pats, n, h, st->n_layers);
            close_check("rollout", st->n_layers, r->fr[i], R, n * n, rtol);
            free(R), free(rs);
        }
        const attn_naive_layer *last = &lay[st->n_layers - 1];
        for (size_t x = 0; x < h * n * m; x++)
            if (isfinite(last->scores[x])) top = fmax(top, fabs(last->scores[x]));
        for (size_t l = 0; l < st->n_layers; l++)
            free(lay[l].scores), free(lay[l].patterns), free(lay[l].head_outputs),
                free(lay[l].delta), free(lay[l].embeddings);
        free(final), free(scratch), free(fd);
    }
    return top;
}

/* ---- the cases ------------------------------------------------------------- */

typedef struct stack_case {
    size_t L, h, g, dh, dc;
    layer_cfg lc[MAX_L];
    float scales[MAX_L]; /* used when any is nonzero */
    attn_mask_kind mask;
    int positions;
    size_t n[MAX_SEQ], m; /* m: context rows, or 0 */
} stack_case;

/* Macros, not constants: a static initializer may not read another object. */
#define LLAMA3                                                                                     \
    {                                                                                              \
        .dims = 8, .theta = 500000.0, .style = ATTN_ROPE_HALF,                                     \
        .scaling = ATTN_ROPE_SCALING_LLAMA3, .factor = 8.0, .low_freq_factor = 1.0,                \
        .high_freq_factor = 4.0, .original_max_position = 64.0                                     \
    }
#define LINEAR                                                                                     \
    {                                                                                              \
        .dims = 4, .theta = 10000.0, .style = ATTN_ROPE_INTERLEAVED,                               \
        .scaling = ATTN_ROPE_SCALING_LINEAR, .factor = 2.0                                         \
    }

#define SCOUT                                                                                      \
    {                                                                                              \
        .dims = 8, .theta = 500000.0, .style = ATTN_ROPE_HALF,                                     \
        .scaling = ATTN_ROPE_SCALING_LLAMA3, .factor = 16.0, .low_freq_factor = 1.0,               \
        .high_freq_factor = 1.0, .original_max_position = 64.0                                     \
    }

static const stack_case cases[] = {
    /* one layer, causal */
    {.L = 1, .h = 4, .g = 4, .dh = 8, .mask = ATTN_MASK_CAUSAL, .n = {40, 29}},
    /* GQA; RoPE (llama3) then ALiBi with a soft-cap; its own scales; no mask; past a tile */
    {.L = 2,
     .h = 4,
     .g = 2,
     .dh = 8,
     .lc = {{.rope = LLAMA3}, {.alibi = 1, .softcap = 5.0f, .scale = 0.2f}},
     .scales = {0.0f, 0.25f},
     .mask = ATTN_MASK_NONE,
     .positions = 1,
     .n = {300, 130}},
    /* multi-query; a window, RoPE (linear, interleaved), then no w_o; the sequences' scale */
    {.L = 3,
     .h = 4,
     .g = 1,
     .dh = 8,
     .lc = {{.window = 40}, {.rope = LINEAR}, {.no_w_o = 1}},
     .mask = ATTN_MASK_CAUSAL,
     .n = {260, 13}},
    /* five layers over one context through w_kv, a custom mask, soft-caps and scales */
    {.L = 5,
     .h = 2,
     .g = 2,
     .dh = 16,
     .dc = 24,
     .lc = {{.softcap = 3.0f}, {.window = 0}, {.softcap = 8.0f}, {.scale = 0.5f}, {.no_w_o = 1}},
     .scales = {0.0f, 0.1f, 0.0f, 0.0f, 0.4f},
     .mask = ATTN_MASK_CUSTOM,
     .n = {150, 20},
     .m = 140},
    /* GPT-OSS: sinks on every layer, a window of 128 on every other one */
    {.L = 4,
     .h = 4,
     .g = 2,
     .dh = 8,
     .lc = {{.rope = LLAMA3, .sinks = 2.0, .window = 128},
            {.rope = LLAMA3, .sinks = 2.0},
            {.rope = LLAMA3, .sinks = 2.0, .window = 128},
            {.rope = LLAMA3, .sinks = 2.0}},
     .mask = ATTN_MASK_CAUSAL,
     .n = {300, 140}},
    /* Llama 4: chunks with RoPE (Scout's llama3 factors) on three layers,
     * then one without RoPE (NoPE) attending to everything before it;
     * positions shuffled */
    {.L = 4,
     .h = 4,
     .g = 1,
     .dh = 8,
     .lc = {{.rope = SCOUT, .chunk = 100},
            {.rope = SCOUT, .chunk = 100},
            {.rope = SCOUT, .chunk = 100},
            {.window = 0}},
     .mask = ATTN_MASK_CAUSAL,
     .positions = 1,
     .n = {300, 90}},
};

typedef struct fixture {
    model md;
    seq s[MAX_SEQ];
    attn_input ins[MAX_SEQ];
    attn_stack st;
} fixture;

static void fixture_make(fixture *f, const stack_case *c, uint64_t seed) {
    model_make(&f->md, c->L, c->h, c->g, c->dh, c->dc, c->lc, seed);
    for (size_t i = 0; i < MAX_SEQ; i++) {
        seq_make(&f->s[i], &f->md, c->n[i], c->mask, c->positions, c->m, 1.0, seed * 3 + i);
        f->ins[i] = f->s[i].in;
    }
    int scaled = 0;
    for (size_t l = 0; l < c->L; l++)
        scaled |= c->scales[l] != 0.0f;
    f->st =
        (attn_stack){.layers = f->md.ptr, .n_layers = c->L, .scales = scaled ? c->scales : NULL};
}

static void fixture_free(fixture *f) {
    for (size_t i = 0; i < MAX_SEQ; i++)
        seq_free(&f->s[i]);
    model_free(&f->md);
}

static void compute_ok(results *r, attn_workspace *ws, const attn_input *ins, size_t count,
                       const attn_stack *st, const attn_runner *runner) {
    attn_error err;
    size_t failed, layer;
    int rc = attn_compute_stack(r->lp, r->fd[0] ? r->fin : NULL, ws, ins, count, st, runner, &err,
                                &failed, &layer);
    ck_assert_msg(rc == 0, "layer %zu: %s", layer, err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws), attn_stack_workspace_need(ins, count, st));
}

/* Every case: every layer reported with every output (the full path), then
 * ΔE and E' of layers 0 and L−1 only (the online path); each against the
 * reference, the batch against each sequence alone, split against unsplit. */
START_TEST(test_stacks) {
    const stack_case *c = &cases[_i];
    fixture f;
    fixture_make(&f, c, 11 + (uint64_t)_i);
    const unsigned all = (1u << c->L) - 1, ends = 1u | 1u << (c->L - 1);
    const unsigned wants[2] = {WANT_FULL, WANT_ONLINE}, layers[2] = {all, ends};
    for (int k = 0; k < 2; k++) {
        attn_workspace *ws = attn_workspace_create(), *ws2 = attn_workspace_create();
        attn_workspace *ws3 = attn_workspace_create();
        results *r = results_make(&f.md, f.ins, MAX_SEQ, wants[k], layers[k], 1);
        compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
        check_reference(r, f.ins, &f.st, RTOL);

        split_runner sr = {.caller_ws = ws2, .other_ws = ws3};
        atomic_init(&sr.next, 0);
        attn_runner runner = {.run = split_run, .ctx = &sr};
        results *split = results_make(&f.md, f.ins, MAX_SEQ, wants[k], layers[k], 1);
        compute_ok(split, ws2, f.ins, MAX_SEQ, &f.st, &runner);
        for (size_t i = 0; i < MAX_SEQ; i++)
            results_same(split, i, r, i, "split");

        for (size_t i = 0; i < MAX_SEQ; i++) {
            attn_workspace *ws1 = attn_workspace_create();
            results *one = results_make(&f.md, &f.ins[i], 1, wants[k], layers[k], 1);
            compute_ok(one, ws1, &f.ins[i], 1, &f.st, NULL);
            results_same(one, 0, r, i, "alone");
            results_free(one);
            attn_workspace_destroy(ws1);
        }
        results_free(r), results_free(split);
        attn_workspace_destroy(ws), attn_workspace_destroy(ws2), attn_workspace_destroy(ws3);
    }
    fixture_free(&f);
}
END_TEST

/* A one-layer stack is attn_compute_batch, bit for bit: the layer's outputs
 * and the finals (ΔE_0 and E_1). */
START_TEST(test_one_layer_is_batch) {
    fixture f;
    fixture_make(&f, &cases[0], 5);
    attn_workspace *ws = attn_workspace_create();
    results *r = results_make(&f.md, f.ins, MAX_SEQ, WANT_FULL, 1u, 1);
    compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
    results *b = results_make(&f.md, f.ins, MAX_SEQ, WANT_FULL, 1u, 0);
    attn_input ins[MAX_SEQ];
    for (size_t i = 0; i < MAX_SEQ; i++)
        ins[i] = f.ins[i], ins[i].weights = f.md.ptr[0];
    ck_assert_int_eq(attn_compute_batch(b->outs[0], ws, ins, MAX_SEQ, NULL, NULL, NULL), 0);
    for (size_t i = 0; i < MAX_SEQ; i++) {
        results_same(r, i, b, i, "batch");
        const size_t bytes = r->len[i][R_D] * sizeof(float);
        ck_assert(!memcmp(r->fd[i], b->buf[0][i][R_D], bytes));
        ck_assert(!memcmp(r->fe[i], b->buf[0][i][R_E], bytes));
    }
    ck_assert(attn_stack_flops(f.ins, MAX_SEQ, &f.st) == attn_batch_flops(ins, MAX_SEQ));
    results_free(r), results_free(b);
    attn_workspace_destroy(ws);
    fixture_free(&f);
}
END_TEST

/* Hidden states: layer l reads its own matrix; only the reported layers
 * (2 then 0 of 3 here, by the bits) are written, and the finals never. */
START_TEST(test_hidden_states) {
    fixture f;
    fixture_make(&f, &cases[2], 21);
    float *hidden[MAX_SEQ * 3];
    uint64_t st = 99;
    for (size_t i = 0; i < MAX_SEQ; i++)
        for (size_t l = 0; l < 3; l++)
            hidden[i * 3 + l] = random_floats(f.ins[i].n_tokens * f.md.dm, 1.5, &st);
    f.st.hidden_states = (const float *const *)hidden;
    attn_workspace *ws = attn_workspace_create();
    for (int k = 0; k < 2; k++) {
        results *r = results_make(&f.md, f.ins, MAX_SEQ, k ? WANT_ONLINE : WANT_FULL, 5u, 1);
        memset(r->fe[0], 0x7f, r->len[0][R_E] * sizeof(float));
        compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
        check_reference(r, f.ins, &f.st, RTOL);
        for (size_t x = 0; x < r->len[0][R_E]; x++)
            ck_assert_uint_eq(((uint32_t *)(void *)r->fe[0])[x], 0x7f7f7f7fu);
        results_free(r);
    }
    for (size_t i = 0; i < MAX_SEQ * 3; i++)
        free(hidden[i]);
    attn_workspace_destroy(ws);
    fixture_free(&f);
}
END_TEST

/* Rollouts over self-attention stacks of mixed features, a custom mask
 * with dead rows among them: with the listed heads (h−1, 0, h−1: every
 * layer widened, its outputs copied out) and with every head in order (the
 * patterns where the caller wants them); reporting every layer, none, or
 * the first alone; with hidden states. Each against the reference, split
 * against unsplit and the batch against each sequence alone. */
static const stack_case roll_cases[] = {
    {.L = 1, .h = 4, .g = 4, .dh = 8, .mask = ATTN_MASK_CAUSAL, .n = {40, 29}},
    {.L = 3,
     .h = 4,
     .g = 2,
     .dh = 8,
     .lc = {{.rope = LLAMA3}, {.window = 40}, {.alibi = 1, .softcap = 5.0f}},
     .mask = ATTN_MASK_CUSTOM,
     .positions = 1,
     .n = {140, 30}},
    /* test_stacks' second case: GQA, RoPE then ALiBi and a soft-cap, its own
     * scales, no mask, past a tile */
    {.L = 2,
     .h = 4,
     .g = 2,
     .dh = 8,
     .lc = {{.rope = LLAMA3}, {.alibi = 1, .softcap = 5.0f, .scale = 0.2f}},
     .scales = {0.0f, 0.25f},
     .mask = ATTN_MASK_NONE,
     .positions = 1,
     .n = {300, 130}},
    /* sinks (rows of the patterns sum to less than 1, dead rows to 0) and
     * chunks, under a custom mask with dead rows */
    {.L = 2,
     .h = 4,
     .g = 2,
     .dh = 8,
     .lc = {{.sinks = 3.0, .window = 50}, {.rope = SCOUT, .chunk = 60, .sinks = 1.0}},
     .mask = ATTN_MASK_CUSTOM,
     .positions = 1,
     .n = {140, 30}},
};

START_TEST(test_rollout) {
    const stack_case *c = &roll_cases[_i / 6];
    const int identity = _i % 2, shape = _i / 2 % 3;
    fixture f;
    fixture_make(&f, c, 41 + (uint64_t)_i);
    f.st.rollout = 1;
    size_t every[8];
    for (size_t j = 0; j < c->h; j++)
        every[j] = j;
    for (size_t i = 0; identity && i < MAX_SEQ; i++)
        f.ins[i].heads = every, f.ins[i].n_heads_out = c->h;
    float *hidden[MAX_SEQ * MAX_L] = {0};
    uint64_t st = 5;
    if (shape == 2) { /* hidden states, layer 0 reported */
        for (size_t i = 0; i < MAX_SEQ; i++)
            for (size_t l = 0; l < c->L; l++)
                hidden[i * c->L + l] = random_floats(f.ins[i].n_tokens * f.md.dm, 1.5, &st);
        f.st.hidden_states = (const float *const *)hidden;
    }
    const unsigned layers = shape == 0 ? (1u << c->L) - 1 : shape == 1 ? 0u : 1u;
    attn_workspace *ws = attn_workspace_create(), *ws2 = attn_workspace_create();
    attn_workspace *ws3 = attn_workspace_create();
    results *r = results_make(&f.md, f.ins, MAX_SEQ, WANT_FULL, layers, 1);
    results_roll(r, f.ins);
    compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
    check_reference(r, f.ins, &f.st, RTOL);

    split_runner sr = {.caller_ws = ws2, .other_ws = ws3};
    atomic_init(&sr.next, 0);
    attn_runner runner = {.run = split_run, .ctx = &sr};
    results *split = results_make(&f.md, f.ins, MAX_SEQ, WANT_FULL, layers, 1);
    results_roll(split, f.ins);
    compute_ok(split, ws2, f.ins, MAX_SEQ, &f.st, &runner);
    for (size_t i = 0; i < MAX_SEQ; i++) {
        results_same(split, i, r, i, "split");
        attn_workspace *ws1 = attn_workspace_create();
        attn_stack alone = f.st;
        const float *own[MAX_L];
        for (size_t l = 0; shape == 2 && l < c->L; l++)
            own[l] = hidden[i * c->L + l];
        if (shape == 2) alone.hidden_states = own;
        results *one = results_make(&f.md, &f.ins[i], 1, WANT_FULL, layers, 1);
        results_roll(one, &f.ins[i]);
        compute_ok(one, ws1, &f.ins[i], 1, &alone, NULL);
        results_same(one, 0, r, i, "alone");
        results_free(one);
        attn_workspace_destroy(ws1);
    }
    /* a rollout's row sums to 1 */
    for (size_t i = 0; i < MAX_SEQ; i++) {
        const size_t n = f.ins[i].n_tokens;
        for (size_t q = 0; q < n; q++) {
            double sum = 0.0;
            for (size_t k = 0; k < n; k++)
                sum += r->fr[i][q * n + k];
            ck_assert_msg(fabs(sum - 1.0) < 1e-4, "row %zu sums to %.9g", q, sum);
        }
    }
    results_free(r), results_free(split);
    for (size_t x = 0; x < MAX_SEQ * MAX_L; x++)
        free(hidden[x]);
    attn_workspace_destroy(ws), attn_workspace_destroy(ws2), attn_workspace_destroy(ws3);
    fixture_free(&f);
}
END_TEST

/* The workspace bound: what the computation takes is at most the need,
 * the need is the largest layer's batch and two streams, and five layers
 * of the same weight sets need no more than two. */
START_TEST(test_workspace_bound) {
    fixture f;
    fixture_make(&f, &cases[3], 31);
    attn_stack two = f.st;
    two.n_layers = 2;
    const attn_weights *repeat[MAX_L] = {f.md.ptr[0], f.md.ptr[1], f.md.ptr[0], f.md.ptr[1],
                                         f.md.ptr[0]};
    attn_stack five = two;
    five.layers = repeat, five.n_layers = 5, five.scales = NULL;
    ck_assert_uint_eq(attn_stack_workspace_need(f.ins, MAX_SEQ, &five),
                      attn_stack_workspace_need(f.ins, MAX_SEQ, &two));
    size_t need = attn_stack_workspace_need(f.ins, MAX_SEQ, &f.st), most = 0;
    for (size_t l = 0; l < f.md.L; l++) {
        attn_input ins[MAX_SEQ];
        for (size_t i = 0; i < MAX_SEQ; i++)
            ins[i] = f.ins[i], ins[i].weights = f.md.ptr[l];
        size_t b = attn_batch_workspace_need(ins, MAX_SEQ);
        if (b > most) most = b;
    }
    const size_t streams = 2 * (f.ins[0].n_tokens + f.ins[1].n_tokens) * f.md.dm * sizeof(float);
    ck_assert_uint_ge(need, most + streams);
    ck_assert_uint_le(need, most + streams + 4096);
    for (int want = 0; want < 2; want++) {
        attn_workspace *ws = attn_workspace_create();
        results *r = results_make(&f.md, f.ins, MAX_SEQ, want ? WANT_FULL : WANT_ONLINE, 31u, 1);
        compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
        ck_assert_uint_le(attn_workspace_bytes(ws), need);
        results_free(r);
        attn_workspace_destroy(ws);
    }
    /* the work: every layer's */
    double sum = 0.0;
    for (size_t l = 0; l < f.md.L; l++) {
        attn_input ins[MAX_SEQ];
        for (size_t i = 0; i < MAX_SEQ; i++)
            ins[i] = f.ins[i], ins[i].weights = f.md.ptr[l];
        sum += attn_batch_flops(ins, MAX_SEQ);
    }
    ck_assert(attn_stack_flops(f.ins, MAX_SEQ, &f.st) == sum);
    fixture_free(&f);
}
END_TEST

/* The final outputs a sequence asks for stand in for its streams: with
 * the final embeddings only, the delta only, one of each, or none beside
 * both, every output is bit for bit that of the stack with both finals,
 * and the workspace is the need less one stream for each final borrowed.
 * Two, three and five layers: the last layer reads either buffer. */
START_TEST(test_finals_borrowed) {
    const stack_case *c = &cases[1 + _i];
    fixture f;
    fixture_make(&f, c, 71 + (uint64_t)_i);
    const unsigned ends = 1u | 1u << (c->L - 1);
    attn_workspace *ws = attn_workspace_create();
    results *ref = results_make(&f.md, f.ins, MAX_SEQ, WANT_ONLINE, ends, 1);
    compute_ok(ref, ws, f.ins, MAX_SEQ, &f.st, NULL);
    attn_workspace_destroy(ws);
    const size_t need = attn_stack_workspace_need(f.ins, MAX_SEQ, &f.st);
    /* per sequence: bit 0 the final delta asked for, bit 1 the embeddings */
    static const unsigned asks[][MAX_SEQ] = {{2, 2}, {1, 1}, {2, 1}, {0, 3}, {0, 2}};
    for (size_t a = 0; a < sizeof asks / sizeof asks[0]; a++) {
        results *r = results_make(&f.md, f.ins, MAX_SEQ, WANT_ONLINE, ends, 1);
        size_t borrowed = 0;
        for (size_t i = 0; i < MAX_SEQ; i++) {
            const size_t rows = r->len[i][R_E] * sizeof(float);
            if (!(asks[a][i] & 1)) r->fin[i].delta = NULL;
            if (!(asks[a][i] & 2)) r->fin[i].embeddings = NULL;
            borrowed += (size_t)__builtin_popcount(asks[a][i]) * ((rows + 63) / 64 * 64);
        }
        ws = attn_workspace_create();
        attn_error err;
        ck_assert_int_eq(
            attn_compute_stack(r->lp, r->fin, ws, f.ins, MAX_SEQ, &f.st, NULL, &err, NULL, NULL),
            0);
        ck_assert_uint_ge(attn_workspace_bytes(ws), need - borrowed);
        ck_assert_uint_le(attn_workspace_bytes(ws), need - borrowed + 63);
        for (size_t i = 0; i < MAX_SEQ; i++) {
            const size_t bytes = r->len[i][R_E] * sizeof(float);
            if (asks[a][i] & 1) ck_assert(!memcmp(r->fd[i], ref->fd[i], bytes));
            if (asks[a][i] & 2) ck_assert(!memcmp(r->fe[i], ref->fe[i], bytes));
            float *fd = r->fd[i];
            r->fd[i] = NULL; /* the layers only: the finals not asked for are not written */
            results_same(r, i, ref, i, "borrowed finals");
            r->fd[i] = fd;
        }
        results_free(r);
        attn_workspace_destroy(ws);
    }
    results_free(ref);
    fixture_free(&f);
}
END_TEST

/* A stop that says yes at its question number stop_at (from 0). */
typedef struct stopper {
    size_t stop_at;
    atomic_size_t asked;
} stopper;

static int stop_at_question(void *ctx) {
    stopper *s = ctx;
    return atomic_fetch_add(&s->asked, 1) == s->stop_at;
}

/* Stopped at layer 1's first question: ATTN_ERR_STOPPED at layer 1, layer
 * 0's outputs complete (those of the stack not stopped). */
START_TEST(test_stop_between_layers) {
    fixture f;
    fixture_make(&f, &cases[2], 41);
    attn_workspace *ws = attn_workspace_create();
    attn_stack one = f.st;
    one.n_layers = 1;
    stopper count = {.stop_at = SIZE_MAX};
    atomic_init(&count.asked, 0);
    attn_runner never = {.ctx = &count, .stop = stop_at_question};
    results *r1 = results_make(&f.md, f.ins, MAX_SEQ, WANT_ONLINE, 1u, 0);
    compute_ok(r1, ws, f.ins, MAX_SEQ, &one, &never);
    const size_t layer0 = atomic_load(&count.asked);
    ck_assert_uint_gt(layer0, 1);

    stopper st = {.stop_at = layer0};
    atomic_init(&st.asked, 0);
    attn_runner stopping = {.ctx = &st, .stop = stop_at_question};
    results *r = results_make(&f.md, f.ins, MAX_SEQ, WANT_ONLINE, 7u, 1);
    attn_error err;
    size_t failed, layer;
    ck_assert_int_eq(attn_compute_stack(r->lp, r->fin, ws, f.ins, MAX_SEQ, &f.st, &stopping, &err,
                                        &failed, &layer),
                     -1);
    ck_assert_ptr_eq(err.code, ATTN_ERR_STOPPED);
    ck_assert_uint_eq(layer, 1);
    ck_assert_uint_eq(failed, MAX_SEQ);
    for (size_t i = 0; i < MAX_SEQ; i++)
        for (int k = R_D; k <= R_E; k++)
            ck_assert(!memcmp(r->buf[0][i][k], r1->buf[0][i][k], r->len[i][k] * sizeof(float)));
    results_free(r), results_free(r1);
    attn_workspace_destroy(ws);
    fixture_free(&f);
}
END_TEST

/* Sequence 1's scores overflow in layer 1 only (sequence 0's rows stay 0
 * through layer 0, which has no biases): non_finite_number, naming both. */
START_TEST(test_nonfinite_names_layer) {
    static const layer_cfg lc[3];
    model md;
    model_make(&md, 3, 2, 2, 8, 0, lc, 51);
    for (size_t l = 0; l < 3; l++) {
        md.w[l].b_qkv = NULL, md.w[l].b_o = NULL;
        if (l == 1)
            for (size_t x = 0; x < md.dm * 3 * md.dm; x++)
                md.bufs[1][0][x] *= 1e20f;
    }
    seq s[2];
    attn_input ins[2];
    for (size_t i = 0; i < 2; i++) {
        seq_make(&s[i], &md, 20, ATTN_MASK_CAUSAL, 0, 0, 1.0, 52 + i);
        ins[i] = s[i].in;
    }
    memset(s[0].E, 0, 20 * md.dm * sizeof(float));
    attn_stack st = {.layers = md.ptr, .n_layers = 3};
    attn_workspace *ws = attn_workspace_create();
    for (int k = 0; k < 2; k++) {
        results *r = results_make(&md, ins, 2, k ? WANT_ONLINE : WANT_FULL, 7u, 1);
        attn_error err;
        size_t failed, layer;
        ck_assert_int_eq(
            attn_compute_stack(r->lp, r->fin, ws, ins, 2, &st, NULL, &err, &failed, &layer), -1);
        ck_assert_ptr_eq(err.code, ATTN_ERR_NONFINITE);
        ck_assert_uint_eq(failed, 1);
        ck_assert_uint_eq(layer, 1);
        results_free(r);
    }
    /* layers that differ in shape: refused, naming the first */
    md.w[2].n_kv_heads = 1;
    results *r = results_make(&md, ins, 2, WANT_ONLINE, 4u, 0);
    attn_error err;
    size_t failed, layer;
    ck_assert_int_eq(attn_compute_stack(r->lp, NULL, ws, ins, 2, &st, NULL, &err, &failed, &layer),
                     -1);
    ck_assert_ptr_eq(err.code, ATTN_ERR_NOMEM);
    ck_assert_uint_eq(layer, 2);
    results_free(r);
    attn_workspace_destroy(ws);
    for (size_t i = 0; i < 2; i++)
        seq_free(&s[i]);
    model_free(&md);
}
END_TEST

/* The residual grows layer by layer (w_o amplifies), so that the last
 * layer's scores lie far past exp's range (|S| in the thousands): both
 * paths against the reference. */
START_TEST(test_growing_residual) {
    stack_case c = {.L = 3,
                    .h = 2,
                    .g = 2,
                    .dh = 16,
                    .lc = {{.o_amp = 16.0}, {.o_amp = 16.0}, {.window = 0}},
                    .scales = {0.0f, 0.0f, 4.0f},
                    .mask = ATTN_MASK_CAUSAL,
                    .n = {270, 30}};
    fixture f;
    fixture_make(&f, &c, 61);
    for (int k = 0; k < 2; k++) {
        attn_workspace *ws = attn_workspace_create();
        results *r = results_make(&f.md, f.ins, MAX_SEQ, k ? WANT_ONLINE : WANT_FULL, 7u, 1);
        compute_ok(r, ws, f.ins, MAX_SEQ, &f.st, NULL);
        /* float32 rounds a score of |S| ~ 2000 by ~|S|·2⁻²⁴·dh, which moves P, Z and
         * ΔE by as much relative to their scale: 1e-3, not RTOL */
        double top = check_reference(r, f.ins, &f.st, 1e-3);
        ck_assert_msg(top > 1000.0, "the last layer's scores reach only %g", top);
        results_free(r);
        attn_workspace_destroy(ws);
    }
    fixture_free(&f);
}
END_TEST

static Suite *stack_suite(void) {
    Suite *s = suite_create("stack");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_stacks, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_one_layer_is_batch);
    tcase_add_test(tc, test_hidden_states);
    tcase_add_loop_test(tc, test_rollout, 0, 6 * (int)(sizeof roll_cases / sizeof roll_cases[0]));
    tcase_add_test(tc, test_workspace_bound);
    tcase_add_loop_test(tc, test_finals_borrowed, 0, 3);
    tcase_add_test(tc, test_stop_between_layers);
    tcase_add_test(tc, test_nonfinite_names_layer);
    tcase_add_test(tc, test_growing_residual);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(stack_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
