/*
 * test_sinks.c — the engine's attention sinks (GPT-OSS) and chunked local
 * attention (Llama 4), alone, together, and as real layers use them:
 * GPT-OSS's sinks with a window of 128 (and its full layers), Llama 4's
 * chunks with RoPE (llama3 scaling with equal factors, as Scout).
 *
 * Each case computes a random problem three ways: attn_compute (the full
 * path when scores or patterns are shown, the online one otherwise; both
 * again split over a runner on another workspace, which must be bit for
 * bit the same), attn_compute_naive, and a float64 reference written here
 * from docs/API.md's formulas. Both float32 answers must match the
 * reference within RTOL of each output's scale. Sizes go past a block of
 * query rows (128) and a tile of keys (256), so that the skipped key
 * blocks of a chunk and the online path's running sum (which starts from
 * the sink) meet several tiles. Sink logits go far above and below the
 * scores, and scores far past exp's range (integer weights, so that they
 * are exact and the check stays tight). A batch's sequences equal their
 * own calls, bit for bit.
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

/* x[i] = amp · u, or with `exact` an integer of [−amp, amp] */
static void fill(float *x, size_t count, double amp, int exact, uint64_t *st) {
    for (size_t i = 0; i < count; i++)
        x[i] = exact ? (float)floor(rnd(st) * (amp + 1.0) + 0.5) : (float)(amp * rnd(st));
}

/* ---- a problem -------------------------------------------------------------- */

enum { POS_DEFAULT, POS_OFFSET, POS_SHUFFLED, POS_PACKED };
enum {
    SINK_NONE,
    SINK_TAME,  /* within the scores' range */
    SINK_HIGH,  /* 1000: every weight underflows to exactly 0 */
    SINK_LOW,   /* −1000: as no sink */
    SINK_MIXED, /* ±1000 head by head, and one tame */
    SINK_WILD   /* integers in ±400, among exact scores in the thousands */
};

typedef struct cfg {
    size_t n, dm, h, g, dh;
    attn_mask_kind mask;
    int dead_rows; /* custom mask: every third row masked whole */
    attn_rope rope;
    size_t window, chunk;
    int sinks;
    int positions;
    int exact;    /* integer embeddings and weights, scale 1/4: exact scores */
    size_t m;     /* context rows through w_qkv's K and V, or 0 */
    size_t n2[2]; /* the other sequences of the batch check (0: none) */
} cfg;

typedef struct seq {
    float *E, *C;
    unsigned char *allowed;
    unsigned *pos;
    attn_input in;
} seq;

typedef struct problem {
    cfg c;
    attn_weights w;
    float *w_qkv, *b_qkv, *w_o, *b_o, *sinks;
    size_t heads[16];
    seq s[3]; /* s[0] the problem's; s[1], s[2] for batches */
    size_t count;
} problem;

static void seq_make(seq *s, const problem *p, size_t n, uint64_t *st) {
    const cfg *c = &p->c;
    const size_t dm = c->dm, m = c->m ? c->m : n;
    memset(s, 0, sizeof *s);
    s->E = xcalloc(n * dm, sizeof(float));
    fill(s->E, n * dm, c->exact ? 8.0 : 1.0, c->exact, st);
    if (c->m) {
        s->C = xcalloc(m * dm, sizeof(float));
        fill(s->C, m * dm, 1.0, 0, st);
    }
    if (c->mask == ATTN_MASK_CUSTOM) {
        s->allowed = xcalloc(n * m, 1);
        for (size_t q = 0; q < n; q++)
            for (size_t k = 0; k < m; k++)
                s->allowed[q * m + k] = !(c->dead_rows && q % 3 == 1) && rnd(st) > -0.4;
    }
    if (c->positions != POS_DEFAULT) {
        s->pos = xcalloc(n, sizeof(unsigned));
        for (size_t t = 0; t < n; t++)
            s->pos[t] = c->positions == POS_OFFSET   ? 500000u + (unsigned)t
                        : c->positions == POS_PACKED ? (unsigned)(t % 150) /* sequences of 150 */
                                                     : (unsigned)t;
        if (c->positions == POS_SHUFFLED) /* a permutation: not increasing */
            for (size_t t = n - 1; t > 0; t--) {
                size_t u = (size_t)((rnd(st) + 1.0) / 2.0 * (double)(t + 1)) % (t + 1);
                unsigned x = s->pos[t];
                s->pos[t] = s->pos[u], s->pos[u] = x;
            }
    }
    s->in = (attn_input){.weights = &p->w,
                         .embeddings = s->E,
                         .n_tokens = n,
                         .mask = {c->mask, s->allowed},
                         .scale = c->exact ? 0.25f : (float)(1.0 / sqrt((double)c->dh)),
                         .heads = p->heads,
                         .n_heads_out = c->h,
                         .positions = s->pos,
                         .context = s->C,
                         .n_context = c->m};
}

static void problem_make(problem *p, const cfg *c, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->c = *c;
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;
    const size_t dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, cols = hd + 2 * g * dh;
    p->w_qkv = xcalloc(dm * cols, sizeof(float));
    p->b_qkv = xcalloc(cols, sizeof(float));
    if (c->exact) { /* scores are integers below 2^24 / 4: exact in float32 */
        fill(p->w_qkv, dm * cols, 1.0, 1, &st);
        fill(p->b_qkv, cols, 2.0, 1, &st);
    } else {
        fill(p->w_qkv, dm * cols, 1.0 / sqrt((double)dm), 0, &st);
        fill(p->b_qkv, cols, 0.5, 0, &st);
    }
    p->w_o = xcalloc(hd * dm, sizeof(float));
    fill(p->w_o, hd * dm, 1.0 / sqrt((double)hd), 0, &st);
    p->b_o = xcalloc(dm, sizeof(float));
    fill(p->b_o, dm, 0.5, 0, &st);
    if (c->sinks != SINK_NONE) {
        p->sinks = xcalloc(h, sizeof(float));
        for (size_t i = 0; i < h; i++)
            switch (c->sinks) {
            case SINK_TAME: p->sinks[i] = (float)(2.0 * rnd(&st)); break;
            case SINK_HIGH: p->sinks[i] = 1000.0f; break;
            case SINK_LOW: p->sinks[i] = -1000.0f; break;
            case SINK_MIXED: p->sinks[i] = i == 1 ? 0.5f : i % 2 ? -1000.0f : 1000.0f; break;
            default: p->sinks[i] = (float)floor(400.0 * rnd(&st)); break;
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
                          .rope = c->rope,
                          .window = c->window,
                          .sinks = p->sinks,
                          .chunk = c->chunk};
    for (size_t i = 0; i < h && i < 16; i++)
        p->heads[i] = i;
    seq_make(&p->s[0], p, c->n, &st);
    p->count = 1;
    for (size_t j = 0; j < 2 && c->n2[j]; j++)
        seq_make(&p->s[p->count++], p, c->n2[j], &st);
}

static void problem_free(problem *p) {
    free(p->w_qkv), free(p->b_qkv), free(p->w_o), free(p->b_o), free(p->sinks);
    for (size_t i = 0; i < 3; i++)
        free(p->s[i].E), free(p->s[i].C), free(p->s[i].allowed), free(p->s[i].pos);
}

/* ---- outputs -------------------------------------------------------------- */

enum { O_S, O_P, O_Z, O_D, O_E, O_COUNT };
static const char *const out_names[O_COUNT] = {"scores", "patterns", "head_outputs", "delta",
                                               "embeddings"};
#define WANT_ALL    ((1u << O_COUNT) - 1)
#define WANT_ONLINE ((1u << O_Z) | (1u << O_D) | (1u << O_E))

typedef struct outputs {
    float *buf[O_COUNT];
    size_t count[O_COUNT];
    attn_output o;
} outputs;

static void counts_of(size_t count[O_COUNT], const problem *p, const attn_input *in) {
    const size_t n = in->n_tokens, m = in->context ? in->n_context : n, h = p->c.h;
    const size_t cnt[O_COUNT] = {h * n * m, h * n * m, h * n * p->c.dh, n * p->c.dm, n * p->c.dm};
    memcpy(count, cnt, sizeof cnt);
}

static void outputs_make(outputs *o, const problem *p, const attn_input *in, unsigned want) {
    memset(o, 0, sizeof *o);
    counts_of(o->count, p, in);
    for (int b = 0; b < O_COUNT; b++)
        if (want & (1u << b)) o->buf[b] = xcalloc(o->count[b], sizeof(float));
    o->o = (attn_output){.scores = o->buf[O_S],
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

/* RoPE's f_t, Hugging Face's _compute_llama3_parameters for llama3. */
static double ref_freq(const attn_rope *r, size_t t) {
    double inv = 1.0 / pow(r->theta, (double)(2 * t) / (double)r->dims);
    if (r->scaling != ATTN_ROPE_SCALING_LLAMA3) return inv;
    double old = r->original_max_position, wavelen = 2.0 * M_PI / inv;
    if (wavelen < old / r->high_freq_factor) return inv;
    if (wavelen > old / r->low_freq_factor) return inv / r->factor;
    if (r->high_freq_factor == r->low_freq_factor) return inv; /* no band in between */
    double smooth =
        (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1.0 - smooth) * inv / r->factor + smooth * inv;
}

/* x: one head's row, rotated by position p ("half": rotate_half). */
static void ref_rotate(double *x, double p, const attn_rope *r) {
    const size_t half = r->dims / 2;
    for (size_t t = 0; t < half; t++) {
        double ang = p * ref_freq(r, t), cs = cos(ang), sn = sin(ang);
        double a = x[t], b = x[t + half];
        x[t] = a * cs - b * sn;
        x[t + half] = b * cs + a * sn;
    }
}

static double ref_pos(const attn_input *in, size_t t) {
    return in->positions ? (double)in->positions[t] : (double)t;
}

/* ref[b]: doubles laid out as outputs' buf[b], every head in order.
 *   S = scale · Q·Kᵀ, −∞ where the mask, the window or the chunk removes
 *   the key (⌊p_q / c⌋ ≠ ⌊p_k / c⌋); P[q][k] = exp(S[q][k]) / (Σ exp(S[q][·])
 *   + exp(s_i)) over the allowed keys, 0 for a row with none. */
static void ref_compute(double *ref[O_COUNT], const problem *p, const attn_input *in) {
    const cfg *c = &p->c;
    const size_t n = in->n_tokens, dm = c->dm, h = c->h, g = c->g ? c->g : h, dh = c->dh;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const int cross = in->context != NULL;
    const size_t m = cross ? in->n_context : n;
    const float *X = cross ? in->context : in->embeddings;
    size_t count[O_COUNT];
    counts_of(count, p, in);
    for (int b = 0; b < O_COUNT; b++)
        ref[b] = xcalloc(count[b], sizeof(double));
    double *Z = xcalloc(n * hd, sizeof(double));
    double *Q = xcalloc(n * dh, sizeof(double)), *K = xcalloc(m * dh, sizeof(double));
    double *V = xcalloc(m * dh, sizeof(double));
    for (size_t i = 0; i < h; i++) {
        const size_t u = i * g / h;
        for (size_t t = 0; t < n; t++)
            for (size_t e = 0; e < dh; e++) {
                double a = p->b_qkv[i * dh + e];
                for (size_t x = 0; x < dm; x++)
                    a += (double)in->embeddings[t * dm + x] * p->w_qkv[x * ld + i * dh + e];
                Q[t * dh + e] = a;
            }
        for (size_t t = 0; t < m; t++)
            for (size_t e = 0; e < dh; e++) {
                const size_t ck = hd + u * dh + e, cv = hd + gd + u * dh + e;
                double a = p->b_qkv[ck], v = p->b_qkv[cv];
                for (size_t x = 0; x < dm; x++) {
                    a += (double)X[t * dm + x] * p->w_qkv[x * ld + ck];
                    v += (double)X[t * dm + x] * p->w_qkv[x * ld + cv];
                }
                K[t * dh + e] = a, V[t * dh + e] = v;
            }
        if (c->rope.dims && !cross) {
            for (size_t t = 0; t < n; t++)
                ref_rotate(Q + t * dh, ref_pos(in, t), &c->rope);
            for (size_t t = 0; t < m; t++)
                ref_rotate(K + t * dh, ref_pos(in, t), &c->rope);
        }
        const double sink = p->sinks ? (double)p->sinks[i] : -INFINITY;
        double *S = ref[O_S] + i * n * m, *P = ref[O_P] + i * n * m;
        for (size_t q = 0; q < n; q++) {
            double max = -INFINITY;
            for (size_t k = 0; k < m; k++) {
                int ok = in->mask.kind == ATTN_MASK_CAUSAL   ? k <= q
                         : in->mask.kind == ATTN_MASK_CUSTOM ? in->mask.allowed[q * m + k]
                                                             : 1;
                if (!cross && c->window && fabs(ref_pos(in, q) - ref_pos(in, k)) >= c->window)
                    ok = 0;
                if (!cross && c->chunk &&
                    floor(ref_pos(in, q) / (double)c->chunk) !=
                        floor(ref_pos(in, k) / (double)c->chunk))
                    ok = 0;
                double d = 0.0;
                for (size_t e = 0; e < dh; e++)
                    d += Q[q * dh + e] * K[k * dh + e];
                S[q * m + k] = ok ? (double)in->scale * d : -INFINITY;
                if (S[q * m + k] > max) max = S[q * m + k];
            }
            /* the sink's share, and the keys', against the larger of the
             * two maxima: e^(s − top) / (Σ e^(S − top) + e^(sink − top)) */
            double top = fmax(max, sink), sum = max == -INFINITY ? 0.0 : exp(sink - top);
            for (size_t k = 0; k < m; k++) {
                P[q * m + k] = max == -INFINITY ? 0.0 : exp(S[q * m + k] - top);
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
            double d = p->b_o[e];
            for (size_t x = 0; x < hd; x++)
                d += Z[t * hd + x] * p->w_o[x * dm + e];
            ref[O_D][t * dm + e] = d;
            ref[O_E][t * dm + e] = (double)in->embeddings[t * dm + e] + d;
        }
    free(Z), free(Q), free(K), free(V);
}

/* got vs ref: −inf exactly where the reference has it, else within rtol of
 * the output's largest magnitude (test_variants.c's rule). */
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

/* Sequence 0 of p with the outputs `want`: unsplit, split (bit for bit the
 * same), naive; both against the float64 reference. Then, when the problem
 * has more sequences, all of them as one batch (split), each bit for bit
 * its own call. *fast gets the unsplit outputs. */
static void check_problem(outputs *fast, const problem *p, unsigned want) {
    const attn_input *in = &p->s[0].in;
    double *ref[O_COUNT];
    ref_compute(ref, p, in);
    outputs split, naive;
    outputs_make(fast, p, in, want);
    outputs_make(&split, p, in, want);
    outputs_make(&naive, p, in, want);
    attn_workspace *ws = attn_workspace_create(), *ws2 = attn_workspace_create();
    attn_workspace *ws3 = attn_workspace_create();
    attn_error err;
    ck_assert_msg(attn_compute(&fast->o, ws, in, &err) == 0, "%s", err.message);
    ck_assert_uint_le(attn_workspace_bytes(ws), attn_input_workspace_need(in));
    split_runner r = {.caller_ws = ws2, .other_ws = ws3};
    atomic_init(&r.next, 0);
    attn_runner runner = {.run = split_run, .ctx = &r};
    ck_assert_msg(attn_compute_with(&split.o, ws2, in, &runner, &err) == 0, "%s", err.message);
    float *scratch = xcalloc(attn_naive_scratch_need(in), sizeof(float));
    attn_compute_naive(&naive.o, scratch, in);
    for (int b = 0; b < O_COUNT; b++) {
        if (!(want & (1u << b))) continue;
        ck_assert_msg(memcmp(fast->buf[b], split.buf[b], fast->count[b] * sizeof(float)) == 0,
                      "%s: split differs from unsplit", out_names[b]);
        close_check("fast", out_names[b], fast->buf[b], ref[b], fast->count[b]);
        close_check("naive", out_names[b], naive.buf[b], ref[b], naive.count[b]);
    }
    if (p->count > 1) {
        outputs one[3], batch[3];
        attn_output outs[3];
        attn_input ins[3];
        for (size_t i = 0; i < p->count; i++) {
            ins[i] = p->s[i].in;
            outputs_make(&one[i], p, &ins[i], want);
            outputs_make(&batch[i], p, &ins[i], want);
            outs[i] = batch[i].o;
            ck_assert_int_eq(attn_compute(&one[i].o, ws, &ins[i], NULL), 0);
        }
        atomic_init(&r.next, 0);
        ck_assert_int_eq(attn_compute_batch(outs, ws2, ins, p->count, &runner, &err, NULL), 0);
        for (size_t i = 0; i < p->count; i++) {
            for (int b = 0; b < O_COUNT; b++)
                if (want & (1u << b))
                    ck_assert_msg(
                        !memcmp(one[i].buf[b], batch[i].buf[b], one[i].count[b] * sizeof(float)),
                        "sequence %zu %s: batch differs from alone", i, out_names[b]);
            outputs_free(&one[i]), outputs_free(&batch[i]);
        }
    }
    free(scratch);
    attn_workspace_destroy(ws), attn_workspace_destroy(ws2), attn_workspace_destroy(ws3);
    outputs_free(&split), outputs_free(&naive);
    for (int b = 0; b < O_COUNT; b++)
        free(ref[b]);
}

/* Both paths (every output; then online: Z, ΔE, E'), for two seeds. */
static void check_cfg(const cfg *c) {
    for (uint64_t seed = 1; seed <= 2; seed++) {
        problem p;
        problem_make(&p, c, seed);
        outputs full, online;
        check_problem(&full, &p, WANT_ALL);
        check_problem(&online, &p, WANT_ONLINE);
        outputs_free(&full), outputs_free(&online);
        problem_free(&p);
    }
}

static cfg base(size_t n) {
    return (cfg){.n = n, .dm = 16, .h = 4, .dh = 8, .mask = ATTN_MASK_CAUSAL};
}

static const attn_rope ROPE_HALF = {.dims = 8, .theta = 10000.0, .style = ATTN_ROPE_HALF};

/* ---- sinks -------------------------------------------------------------------- */

START_TEST(test_sinks) {
    cfg c = base(300);
    c.sinks = SINK_TAME;
    c.n2[0] = 37, c.n2[1] = 260;
    check_cfg(&c);
    c.g = 2, c.mask = ATTN_MASK_NONE, c.positions = POS_SHUFFLED;
    check_cfg(&c);
    c.n = 600, c.g = 1; /* past two tiles of keys */
    check_cfg(&c);
}
END_TEST

/* Sink logits far above every score (each weight exactly 0), far below (no
 * sink at all), both head by head, and among scores far past exp's range. */
START_TEST(test_sinks_extreme) {
    cfg c = base(300);
    c.sinks = SINK_HIGH;
    check_cfg(&c);
    c.sinks = SINK_LOW;
    check_cfg(&c);
    c.sinks = SINK_MIXED, c.mask = ATTN_MASK_NONE;
    check_cfg(&c);
    c.sinks = SINK_WILD, c.exact = 1; /* |S| in the thousands */
    check_cfg(&c);
    c.mask = ATTN_MASK_CAUSAL, c.n2[0] = 140;
    check_cfg(&c);

    /* a sink of 1000: every pattern and head output exactly 0; a sink of
     * −1000: the full path's patterns are those of no sink, to the bit */
    for (int k = 0; k < 2; k++) {
        cfg d = base(300);
        d.sinks = k ? SINK_LOW : SINK_HIGH;
        problem p;
        problem_make(&p, &d, 9);
        outputs got;
        outputs_make(&got, &p, &p.s[0].in, WANT_ALL);
        attn_workspace *ws = attn_workspace_create();
        ck_assert_int_eq(attn_compute(&got.o, ws, &p.s[0].in, NULL), 0);
        if (!k) {
            for (size_t x = 0; x < got.count[O_P]; x++)
                ck_assert(got.buf[O_P][x] == 0.0f);
            for (size_t x = 0; x < got.count[O_Z]; x++)
                ck_assert(got.buf[O_Z][x] == 0.0f);
        } else {
            outputs none;
            outputs_make(&none, &p, &p.s[0].in, WANT_ALL);
            p.w.sinks = NULL;
            ck_assert_int_eq(attn_compute(&none.o, ws, &p.s[0].in, NULL), 0);
            ck_assert(!memcmp(none.buf[O_P], got.buf[O_P], got.count[O_P] * sizeof(float)));
            outputs_free(&none);
        }
        outputs_free(&got);
        attn_workspace_destroy(ws);
        problem_free(&p);
    }
}
END_TEST

/* Dead rows stay all zeros with a sink; the other rows sum to less than 1
 * (and more than 0), by the sink's share exactly. */
START_TEST(test_sinks_dead_rows) {
    cfg c = base(300);
    c.mask = ATTN_MASK_CUSTOM, c.dead_rows = 1;
    c.sinks = SINK_TAME;
    c.window = 40;
    check_cfg(&c);
    problem p;
    problem_make(&p, &c, 4);
    outputs o;
    check_problem(&o, &p, WANT_ALL);
    const size_t n = c.n;
    for (size_t i = 0; i < c.h; i++)
        for (size_t q = 0; q < n; q++) {
            const float *row = o.buf[O_P] + (i * n + q) * n;
            double sum = 0.0;
            for (size_t k = 0; k < n; k++)
                sum += row[k];
            if (q % 3 == 1) {
                ck_assert_msg(sum == 0.0, "dead row %zu of head %zu sums to %g", q, i, sum);
                for (size_t e = 0; e < c.dh; e++)
                    ck_assert(o.buf[O_Z][(i * n + q) * c.dh + e] == 0.0f);
            } else if (sum != 0.0) {
                ck_assert_msg(sum < 1.0 && sum > 0.0, "row %zu sums to %.9g", q, sum);
            }
        }
    outputs_free(&o);
    problem_free(&p);
}
END_TEST

/* Sinks do not read positions: with a context they apply as they are. */
START_TEST(test_sinks_context) {
    cfg c = base(150);
    c.mask = ATTN_MASK_NONE, c.m = 300;
    c.sinks = SINK_TAME;
    c.g = 2;
    check_cfg(&c);
    c.mask = ATTN_MASK_CUSTOM, c.dead_rows = 1, c.m = 70;
    check_cfg(&c);
}
END_TEST

/* ---- chunks -------------------------------------------------------------------- */

START_TEST(test_chunk) {
    cfg c = base(600);
    c.chunk = 100; /* blocks of 128 rows across chunk boundaries */
    c.n2[0] = 250, c.n2[1] = 9;
    check_cfg(&c);
    c.mask = ATTN_MASK_NONE; /* both sides of the query, within its chunk */
    check_cfg(&c);
    c.positions = POS_PACKED; /* positions restart */
    check_cfg(&c);
    c.positions = POS_SHUFFLED, c.chunk = 64;
    check_cfg(&c);
    c.positions = POS_OFFSET, c.mask = ATTN_MASK_CAUSAL, c.chunk = 256;
    check_cfg(&c);
    c.chunk = 1, c.positions = POS_DEFAULT; /* each query its own key */
    check_cfg(&c);
    c.chunk = 7, c.mask = ATTN_MASK_CUSTOM, c.dead_rows = 1;
    check_cfg(&c);
}
END_TEST

/* A chunk of at least every position is no chunk, to the bit. */
START_TEST(test_chunk_whole) {
    cfg c = base(300);
    c.chunk = 300;
    problem p;
    problem_make(&p, &c, 3);
    outputs a, b;
    outputs_make(&a, &p, &p.s[0].in, WANT_ALL);
    outputs_make(&b, &p, &p.s[0].in, WANT_ALL);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&a.o, ws, &p.s[0].in, NULL), 0);
    p.w.chunk = 0;
    ck_assert_int_eq(attn_compute(&b.o, ws, &p.s[0].in, NULL), 0);
    for (int k = 0; k < O_COUNT; k++)
        ck_assert_msg(!memcmp(a.buf[k], b.buf[k], a.count[k] * sizeof(float)), "%s", out_names[k]);
    outputs_free(&a), outputs_free(&b);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* Chunk and window together (each narrows the other), with sinks. */
START_TEST(test_chunk_window_sinks) {
    cfg c = base(700);
    c.chunk = 200, c.window = 90;
    check_cfg(&c);
    c.sinks = SINK_TAME, c.mask = ATTN_MASK_NONE, c.positions = POS_SHUFFLED;
    check_cfg(&c);
}
END_TEST

/* The engine ignores a chunk beside a context (the caller refuses it), as
 * it does a window: the results are those without it. */
START_TEST(test_chunk_context_ignored) {
    cfg c = base(20);
    c.mask = ATTN_MASK_NONE, c.m = 300, c.positions = POS_SHUFFLED;
    problem p;
    problem_make(&p, &c, 5);
    outputs a, b;
    outputs_make(&a, &p, &p.s[0].in, WANT_ALL);
    outputs_make(&b, &p, &p.s[0].in, WANT_ALL);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(attn_compute(&a.o, ws, &p.s[0].in, NULL), 0);
    p.w.chunk = 2;
    ck_assert_int_eq(attn_compute(&b.o, ws, &p.s[0].in, NULL), 0);
    for (int k = 0; k < O_COUNT; k++)
        ck_assert(!memcmp(a.buf[k], b.buf[k], a.count[k] * sizeof(float)));
    outputs_free(&a), outputs_free(&b);
    attn_workspace_destroy(ws);
    problem_free(&p);
}
END_TEST

/* ---- layers as the models use them ----------------------------------------------- */

/* GPT-OSS: grouped K/V heads, RoPE, sinks, a window of 128 on every other
 * layer, the full causal attention on the rest. */
START_TEST(test_gpt_oss_layer) {
    cfg c = base(600);
    c.h = 8, c.g = 2, c.dm = 32;
    c.rope = ROPE_HALF;
    c.sinks = SINK_TAME;
    c.window = 128;
    c.n2[0] = 129, c.n2[1] = 300;
    check_cfg(&c);
    c.window = 0;
    check_cfg(&c);
}
END_TEST

/* Llama 4: RoPE with llama3 scaling of equal factors (Scout's 1 and 1),
 * chunks of attention, grouped K/V heads; positions continuing a
 * sequence past a chunk boundary. */
START_TEST(test_llama4_layer) {
    cfg c = base(700);
    c.h = 8, c.g = 2, c.dm = 32;
    c.rope = (attn_rope){.dims = 8,
                         .theta = 500000.0,
                         .style = ATTN_ROPE_HALF,
                         .scaling = ATTN_ROPE_SCALING_LLAMA3,
                         .factor = 16.0,
                         .low_freq_factor = 1.0,
                         .high_freq_factor = 1.0,
                         .original_max_position = 300.0};
    c.chunk = 256;
    c.n2[0] = 300;
    check_cfg(&c);
    c.positions = POS_OFFSET; /* 500000 …: chunks from 499968 */
    check_cfg(&c);
}
END_TEST

/* ---- work ---------------------------------------------------------------------- */

/* A chunk makes the work linear in n: attn_input_flops counts the key
 * blocks computed, and doubling n past the chunk doubles it. */
START_TEST(test_chunk_flops) {
    attn_weights w = {.d_model = 64, .n_heads = 4, .d_head = 16, .chunk = 1024};
    float dummy = 0.0f;
    attn_input in = {.weights = &w, .embeddings = &dummy, .mask = {ATTN_MASK_CAUSAL, NULL}};
    in.n_tokens = 4096;
    double f4 = attn_input_flops(&in);
    in.n_tokens = 8192;
    double f8 = attn_input_flops(&in);
    in.n_tokens = 12288;
    double f12 = attn_input_flops(&in);
    ck_assert_msg(f12 - f8 == f8 - f4, "not linear: %g then %g", f8 - f4, f12 - f8);
    ck_assert(f8 < 2.01 * f4);
    /* per block of 128 rows: at most its chunk up to its last row, 1024
     * keys; without the chunk, causal attention over 8192 costs about 4
     * times as much */
    in.n_tokens = 8192;
    w.chunk = 0;
    double causal = attn_input_flops(&in);
    ck_assert(causal > 3.0 * f8);
    /* sinks cost nothing per pair */
    static const float sinks[4] = {0.5f, 1, 2, 3};
    w.chunk = 1024, w.sinks = sinks;
    ck_assert(attn_input_flops(&in) == f8);
}
END_TEST

static Suite *sinks_suite(void) {
    Suite *s = suite_create("sinks");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sinks);
    tcase_add_test(tc, test_sinks_extreme);
    tcase_add_test(tc, test_sinks_dead_rows);
    tcase_add_test(tc, test_sinks_context);
    tcase_add_test(tc, test_chunk);
    tcase_add_test(tc, test_chunk_whole);
    tcase_add_test(tc, test_chunk_window_sinks);
    tcase_add_test(tc, test_chunk_context_ignored);
    tcase_add_test(tc, test_gpt_oss_layer);
    tcase_add_test(tc, test_llama4_layer);
    tcase_add_test(tc, test_chunk_flops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(sinks_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
