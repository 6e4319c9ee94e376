/*
 * rollout.c — attention rollout (Abnar & Zuidema, 2020) over a stack's
 * layers, for stack.c:
 *
 *   Ā_l = the mean over all h heads of layer l's patterns
 *   Â_l = Ā_l / 2 + I / 2, each row divided by its sum
 *   R   = Â_{L−1} · … · Â_0
 *
 * Ā_l needs every head's pattern, whatever the heads a request lists and
 * whatever it asks for: a layer of a sequence with a rollout is computed
 * over all h heads in order ("widened"), its per-head outputs into this
 * sequence's scratch, and the listed heads' are copied out afterwards. A
 * request that lists every head in order and asks for the patterns gets
 * them written where it wants them, and nothing is copied.
 *
 * R goes by ping-pong between the caller's n × n and one of the scratch,
 * so that the last layer's product lands in the caller's. Each layer's
 * step is one run of tasks, a block of ROLLOUT_ROWS rows of one sequence
 * each: Â's rows of the block, then those rows of Â · R, one sgemm. The
 * blocks depend on n alone, so every runner makes the same sgemm calls and
 * the result is bit for bit the same whatever the threads or the batch.
 *
 * Scratch of one sequence (attn_rollout_floats): the heads 0 … h−1 (as
 * size_t), Â, R's other buffer, the h patterns, and the other widened
 * per-head outputs when the listed heads are not all of them in order.
 */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "attention/plan.h"

/* Query rows per rollout task. */
#define ROLLOUT_ROWS 128

/* The per-head outputs, by their place in attn_output. */
enum { K_Q, K_K, K_V, K_Q_RAW, K_K_RAW, K_SCORES, K_PATTERNS, K_HEAD_OUTPUTS, KINDS };

static float **kind_of(attn_output *o, int k) {
    switch (k) {
    case K_Q: return &o->q;
    case K_K: return &o->k;
    case K_V: return &o->v;
    case K_Q_RAW: return &o->q_raw;
    case K_K_RAW: return &o->k_raw;
    case K_SCORES: return &o->scores;
    case K_PATTERNS: return &o->patterns;
    default: return &o->head_outputs;
    }
}

/* Floats of one head's output of kind k: n × dh or n × n (self-attention). */
static size_t per_head(int k, size_t n, size_t dh) {
    return k == K_SCORES || k == K_PATTERNS ? n * n : n * dh;
}

/* Whether the input lists every head, in order. */
static int all_heads(const attn_input *in, size_t h) {
    if (in->n_heads_out != h) return 0;
    for (size_t j = 0; j < h; j++)
        if (in->heads[j] != j) return 0;
    return 1;
}

static size_t round_floats(size_t floats) {
    return attn_slice_round(floats * sizeof(float)) / sizeof(float);
}

int attn_rollout_floats(size_t *floats, const attn_input *in, const attn_weights *w) {
    const size_t n = in->n_tokens, h = w->n_heads, dh = w->d_head;
    size_t nn, hd, sum = round_floats(h * sizeof(size_t) / sizeof(float) + 1);
    if (__builtin_mul_overflow(n, n, &nn) || __builtin_mul_overflow(n, h * dh, &hd) ||
        nn > SIZE_MAX / sizeof(float) / (h + 8) || hd > SIZE_MAX / sizeof(float) / 8)
        return -1;
    /* the patterns of every head, Â and R's other buffer, and, widened,
     * scores and the six n × dh outputs of every head */
    size_t each = round_floats(h * nn) + 2 * round_floats(nn);
    if (!all_heads(in, h)) each += round_floats(h * nn) + 6 * round_floats(hd);
    return __builtin_add_overflow(sum, each, floats) ? -1 : 0;
}

void attn_rollout_widen(attn_rollout_seq *s, attn_input *lin, attn_output *lout) {
    const attn_weights *w = lin->weights;
    const size_t n = lin->n_tokens, h = w->n_heads, dh = w->d_head;
    /* Â and R's other buffer first: R must stay put from layer to layer,
     * whatever each layer widens */
    size_t *heads = (size_t *)(void *)s->scratch;
    s->mean = s->scratch + round_floats(h * sizeof(size_t) / sizeof(float) + 1);
    s->other = s->mean + round_floats(n * n);
    float *at = s->other + round_floats(n * n);
    for (size_t j = 0; j < h; j++)
        heads[j] = j;
    s->listed = *lin;
    s->wanted = *lout;
    s->widened = !all_heads(lin, h);
    if (s->widened) {
        for (int k = 0; k < KINDS; k++) {
            float **dst = kind_of(lout, k);
            if (*dst == NULL && k != K_PATTERNS) continue;
            *dst = at;
            at += round_floats(h * per_head(k, n, dh));
        }
        lin->heads = heads;
        lin->n_heads_out = h;
    } else if (lout->patterns == NULL) {
        lout->patterns = at;
    }
    s->patterns = lout->patterns;
    s->n = n;
    s->h = h;
}

void attn_rollout_pick(const attn_rollout_seq *s, const attn_output *wide) {
    if (!s->widened) return;
    const attn_input *in = &s->listed;
    const size_t dh = in->weights->d_head;
    for (int k = 0; k < KINDS; k++) {
        attn_output wanted = s->wanted, from = *wide;
        float *dst = *kind_of(&wanted, k), *src = *kind_of(&from, k);
        if (dst == NULL) continue;
        const size_t size = per_head(k, s->n, dh);
        for (size_t j = 0; j < in->n_heads_out; j++)
            memcpy(dst + j * size, src + in->heads[j] * size, size * sizeof(float));
    }
}

/* One layer's step over the sequences' blocks of rows. */
typedef struct rollout_run {
    attn_rollout_seq *seqs;
    size_t count;
    size_t *first; /* count + 1: the first task of each sequence */
    int layer0;    /* R = Â_0 */
} rollout_run;

static size_t blocks(size_t n) {
    return (n + ROLLOUT_ROWS - 1) / ROLLOUT_ROWS;
}

/* Rows q0 … q1 of Â, from the h patterns; a row is Ā/2 + I/2 over its sum,
 * which is at least 1/2: a dead row (no key allowed) becomes e_q. */
static void mean_rows(const attn_rollout_seq *s, float *a, size_t q0, size_t q1) {
    const size_t n = s->n, nn = n * n;
    const float half_mean = 0.5f / (float)s->h;
    for (size_t q = q0; q < q1; q++) {
        float *row = a + q * n;
        memcpy(row, s->patterns + q * n, n * sizeof(float));
        for (size_t i = 1; i < s->h; i++)
            cblas_saxpy((int)n, 1.0f, s->patterns + i * nn + q * n, 1, row, 1);
        double sum = 0.5;
        for (size_t k = 0; k < n; k++) {
            row[k] *= half_mean;
            sum += row[k];
        }
        row[q] += 0.5f;
        const float inv = (float)(1.0 / sum);
        for (size_t k = 0; k < n; k++)
            row[k] *= inv;
    }
}

static void rollout_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const rollout_run *r = arg;
    size_t i = 0;
    while (t >= r->first[i + 1])
        i++;
    const attn_rollout_seq *s = &r->seqs[i];
    const size_t n = s->n, q0 = (t - r->first[i]) * ROLLOUT_ROWS;
    const size_t q1 = q0 + ROLLOUT_ROWS < n ? q0 + ROLLOUT_ROWS : n;
    if (r->layer0) {
        mean_rows(s, s->to, q0, q1);
        return;
    }
    mean_rows(s, s->mean, q0, q1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(q1 - q0), (int)n, (int)n, 1.0f,
                s->mean + q0 * n, (int)n, s->from, (int)n, 0.0f, s->to + q0 * n, (int)n);
}

int attn_rollout_step(attn_rollout_seq *seqs, size_t count, size_t layer, size_t n_layers,
                      float *const *results, size_t *first, const attn_runner *runner) {
    first[0] = 0;
    for (size_t i = 0; i < count; i++) {
        attn_rollout_seq *s = &seqs[i];
        first[i + 1] = first[i] + (results[i] ? blocks(s->n) : 0);
        if (!results[i]) continue;
        /* the product of layer l sits in the caller's buffer when l and
         * L − 1 have the same parity, so that the last one does */
        float *mine = results[i], *spare = s->other;
        s->to = (n_layers - 1 - layer) % 2 == 0 ? mine : spare;
        s->from = s->to == mine ? spare : mine;
    }
    rollout_run r = {seqs, count, first, layer == 0};
    const size_t tasks = first[count];
    if (runner && runner->stop && runner->stop(runner->ctx)) return ATTN_FAIL_STOPPED;
    if (runner && runner->run && tasks > 1)
        runner->run(runner->ctx, rollout_task, &r, tasks);
    else
        for (size_t t = 0; t < tasks; t++)
            rollout_task(&r, t, NULL);
    return 0;
}

double attn_rollout_flops(size_t n, size_t h, size_t n_layers) {
    const double nn = (double)n * (double)n;
    /* per layer: the mean of h patterns and the row sums, and Â · R */
    return (double)n_layers * (nn * ((double)h + 3.0)) + (double)(n_layers - 1) * 2.0 * nn * n;
}
