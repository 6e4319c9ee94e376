/*
 * compute.c — attn_compute: the plan of one call, its call, and its sizes.
 *
 * A call reads as its phases (plan.h), each a function of the plan:
 *
 *   plan      which outputs are non-NULL → how far to go (attn_stage), by
 *             which path (attn_path), which parts of QKV, which slices
 *   project   QKV = E · w_qkv + b_qkv                         project.c
 *             (Q of every head, K and V of every K/V head)
 *   attend    per head: S, P, Z on the full or the online path, K and V
 *             read in place from the head's K/V head
 *             (attend.c, attend_full.c, attend_online.c)
 *   output    ΔE = Z · w_o + b_o,  E' = E + ΔE                output.c
 *
 * attn_compute_with is a batch of one (batch.c drives the phases), so
 * that a sequence's rows go through the same sgemm rows alone and in any
 * batch. Work not asked for is not done: without delta/embeddings only the
 * listed heads are projected and attended; with only q/k/v nothing past
 * the projection runs; without patterns and head outputs nothing past the
 * scores. When scores or patterns are shown, every head takes the full
 * path (so that ΔE does not depend on which heads are listed), else the
 * online one. When w_o is NULL, Z is written directly into ΔE's rows and
 * no Z scratch exists.
 *
 * Memory: everything lives in the caller's workspace, one block carved by a
 * table of slice sizes (WS_* here for the call's own, B_* in batch.c for
 * the stacked rows), each size computed with overflow checks. No slice is
 * n × n. A head listed twice is computed once and copied.
 *
 * Threads: no globals, no static state. Each phase is one run of tasks
 * (tasks.c); attn_compute runs them in turn, attn_compute_with hands them
 * to the caller's runner, with bit for bit the same results. OpenBLAS's own
 * thread count is the server's business (see bench/README.md); this module
 * never sets it. Errors: the phases return small ints (ATTN_FAIL_*); only
 * attn_fail_error turns them into the caller's attn_error.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "attention/attention.h"
#include "attention/plan.h"

const char ATTN_ERR_NOMEM[] = "out_of_memory";
const char ATTN_ERR_NONFINITE[] = "non_finite_number";
const char ATTN_ERR_STOPPED[] = "stopped";

/* ---- sizes, overflow-checked ------------------------------------------ */

/* By the compilers' overflow builtins (gcc and clang): a check by division
 * was a 64-bit divide per product, ~5 % of a 3 × 4 call's time. */
static int size_mul(size_t *r, size_t a, size_t b) {
    return __builtin_mul_overflow(a, b, r) ? -1 : 0;
}

static int size_add(size_t *r, size_t a, size_t b) {
    return __builtin_add_overflow(a, b, r) ? -1 : 0;
}

/* *bytes = rows · cols floats */
static int floats_bytes(size_t *bytes, size_t rows, size_t cols) {
    size_t count;
    if (size_mul(&count, rows, cols)) return -1;
    return size_mul(bytes, count, sizeof(float));
}

/* The sizes of n tokens, h heads of dh sharing g K/V heads (0 = h), whose
 * keys are m rows (a context's, when `cross`; else m = n); -1 when hd + 2gd
 * overflows, or when g does not divide h. Blocks are clamped to n and m so
 * that a tiny call carves a tiny workspace. */
static int sizes_make(attn_sizes *sz, size_t n, size_t dm, size_t h, size_t g, size_t dh, size_t hs,
                      int cross, size_t m) {
    g = g ? g : h;
    if (h && (g > h || h % g)) return -1;
    size_t hd, gd, kv, ld;
    if (size_mul(&hd, h, dh) || size_mul(&gd, g, dh) || size_mul(&kv, gd, 2) ||
        size_add(&ld, hd, kv))
        return -1;
    m = cross ? m : n;
    /* every field named: a literal that leaves some to zero is cleared
     * whole first (plan.h, attn_zero) */
    *sz = (attn_sizes){.n = n,
                       .dm = dm,
                       .h = h,
                       .dh = dh,
                       .g = g,
                       .hd = hd,
                       .gd = gd,
                       .ld = ld,
                       .m = m,
                       .dc = dm,
                       .cross = cross,
                       .ldq = cross ? hd : ld,
                       .ldkv = cross ? kv : ld,
                       .hs = hs,
                       .bq = attn_min(ATTN_BLOCK_Q, n),
                       .bk = attn_min(ATTN_BLOCK_K, m),
                       .blocks = attn_div_up(n, ATTN_BLOCK_Q),
                       .rope = 0,
                       .freqs = 0,
                       .own_positions = 0};
    return 0;
}

/* Whether a rule of `in` reads the tokens' positions. */
static int reads_positions(const attn_input *in) {
    const attn_weights *w = in->weights;
    return w->rope.dims || w->alibi || w->window || w->chunk;
}

/* The sizes of `in`'s call. */
int attn_sizes_of(attn_sizes *sz, const attn_input *in) {
    const attn_weights *w = in->weights;
    if (sizes_make(sz, in->n_tokens, w->d_model, w->n_heads, w->n_kv_heads, w->d_head,
                   in->n_heads_out, in->context != NULL, in->n_context))
        return -1;
    sz->dc = in->context && w->w_kv ? w->d_context : w->d_model;
    sz->rope = in->context ? 0 : w->rope.dims; /* none with a context (the caller's rule) */
    sz->freqs = sz->rope ? attn_rope_tables(&w->rope) * (sz->rope / 2) : 0;
    sz->own_positions = !in->positions && reads_positions(in);
    return 0;
}

/* *bytes = the size of slice s; -1 on overflow. */
int attn_slice_bytes(size_t *bytes, int s, const attn_sizes *sz) {
    size_t a, b;
    switch (s) {
    case WS_QKV:
        if (!sz->cross) return floats_bytes(bytes, sz->n, sz->ld);
        /* Q, then KV: each rounded so that KV starts aligned */
        if (floats_bytes(&a, sz->n, sz->hd) || floats_bytes(&b, sz->m, sz->ldkv)) return -1;
        a = attn_slice_round(a);
        return size_add(bytes, a, b);
    case WS_ROWS: return floats_bytes(bytes, sz->bq, sz->m);
    case WS_TILE:
        *bytes = (sz->bq * sz->bk + 2 * sz->bq) * sizeof(float); /* small constants */
        return 0;
    case WS_Z: return floats_bytes(bytes, sz->n, sz->hd);
    case WS_SLOT: return size_mul(bytes, sz->h, 2 * sizeof(size_t));
    case WS_RANGE: return size_mul(bytes, sz->blocks, 2 * sizeof(size_t));
    case WS_POS: return size_mul(bytes, sz->own_positions ? sz->n : 0, sizeof(unsigned));
    case WS_ROPE:
        /* freqs doubles, rounded up to the alignment, then n × dims floats */
        a = attn_slice_round(sz->freqs * sizeof(double));
        if (floats_bytes(&b, sz->n, sz->rope)) return -1;
        return size_add(bytes, a, b);
    }
    return -1;
}

/* Sum of the slices, each rounded up to ATTN_WS_ALIGN; -1 on overflow. */
int attn_slice_total(size_t *total, const size_t bytes[WS_COUNT]) {
    size_t t = 0;
    for (int s = 0; s < WS_COUNT; s++) {
        size_t b = bytes[s];
        if (size_add(&b, b, ATTN_WS_ALIGN - 1)) return -1;
        b -= b % ATTN_WS_ALIGN;
        if (size_add(&t, t, b)) return -1;
    }
    *total = t;
    return 0;
}

/* ---- the plan ---------------------------------------------------------- */

static attn_stage stage_of(const attn_output *o) {
    if (o->delta || o->embeddings) return ATTN_STAGE_DELTA;
    if (o->head_outputs) return ATTN_STAGE_Z;
    if (o->patterns) return ATTN_STAGE_PATTERNS;
    if (o->scores) return ATTN_STAGE_SCORES;
    if (o->q || o->k || o->v || o->q_raw || o->k_raw) return ATTN_STAGE_QKV;
    return ATTN_STAGE_NOTHING;
}

/* The plan of `out` on `in` (plan.h). */
int attn_plan_make(attn_plan *pl, size_t *total, const attn_output *out, const attn_input *in) {
    const attn_weights *w = in->weights;
    if (attn_sizes_of(&pl->sz, in)) return -1;
    pl->in = in;
    pl->out = *out;
    attn_output *o = &pl->out;
    if (pl->sz.hs == 0) /* per-head outputs of no head: nothing to show */
        o->q = o->k = o->v = o->q_raw = o->k_raw = o->scores = o->patterns = o->head_outputs = NULL;
    pl->stage = stage_of(o);
    /* The caller's scores or patterns, even with no head listed: ΔE must
     * not depend on the list. */
    pl->path = out->scores || out->patterns ? ATTN_PATH_FULL : ATTN_PATH_ONLINE;
    const int qk = pl->stage >= ATTN_STAGE_SCORES, zs = pl->stage >= ATTN_STAGE_Z;
    pl->parts = (o->q || o->q_raw || qk ? ATTN_PART_Q : 0) |
                (o->k || o->k_raw || qk ? ATTN_PART_K : 0) | (o->v || zs ? ATTN_PART_V : 0);
    /* RoPE rotates Q and K in the projection's tiles, unless they are to
     * be shown unrotated first or qk_norm comes before it (norm.c). */
    const int rope = pl->sz.rope && (pl->parts & (ATTN_PART_Q | ATTN_PART_K));
    pl->rope_in_tiles = rope && !o->q_raw && !o->k_raw && !attn_has_qk_norm(w);

    /* P needs rows of scratch for a head whose patterns are not shown but
     * whose Z is needed. */
    const int full = pl->path == ATTN_PATH_FULL, all = pl->stage == ATTN_STAGE_DELTA;
    int need[WS_COUNT];
    need[WS_QKV] = pl->parts != 0;
    need[WS_ROWS] = full && zs && (!o->patterns || all);
    need[WS_TILE] = !full && zs;
    need[WS_Z] = all && w->w_o != NULL;
    need[WS_SLOT] = pl->sz.hs > 0 || qk;
    need[WS_RANGE] = qk;
    need[WS_POS] = pl->sz.own_positions && (qk || rope);
    need[WS_ROPE] = rope;
    for (int s = 0; s < WS_COUNT; s++) {
        pl->bytes[s] = 0;
        if (need[s] && attn_slice_bytes(&pl->bytes[s], s, &pl->sz)) return -1;
    }
    return attn_slice_total(total, pl->bytes);
}

/* ---- the call ------------------------------------------------------------ */

void attn_call_init(attn_call *c, const attn_plan *pl, attn_workspace *ws,
                    const attn_runner *runner, float *const slice[WS_COUNT]) {
    const attn_sizes *sz = &pl->sz;
    attn_zero(c, sizeof *c);
    c->pl = pl, c->runner = runner, c->ws = ws;
    atomic_init(&c->rc, 0);
    c->qkv = slice[WS_QKV];
    if (c->qkv) {
        c->q = c->qkv;
        c->kv = sz->cross ? (float *)(void *)((unsigned char *)c->qkv +
                                              attn_slice_round(sz->n * sz->hd * sizeof(float)))
                          : c->qkv + sz->hd;
    }
    c->pos = pl->in->positions;
    if (slice[WS_POS]) {
        unsigned *pos = (unsigned *)(void *)slice[WS_POS];
        for (size_t t = 0; t < sz->n; t++)
            pos[t] = (unsigned)t;
        c->pos = pos;
    }
    /* A context's keys have no positions (the caller refuses the rules
     * that read them): never index the n positions by m keys. */
    if (!reads_positions(pl->in) || sz->cross) c->pos = NULL;
    if (slice[WS_ROPE]) {
        c->freq = (double *)(void *)slice[WS_ROPE];
        c->angles = (float *)(void *)((unsigned char *)slice[WS_ROPE] +
                                      attn_slice_round(sz->freqs * sizeof(double)));
        const attn_rope *rope = &pl->in->weights->rope;
        attn_rope_frequencies(c->freq, rope);
        c->freq += sz->rope / 2 * attn_rope_table_of(rope, c->pos, sz->n);
    }
    c->range = (size_t *)(void *)slice[WS_RANGE];
    for (size_t blk = 0; c->range && blk < sz->blocks; blk++)
        attn_block_keys(pl, c->pos, blk, &c->range[2 * blk], &c->range[2 * blk + 1]);
    c->scratch = (attn_scratch){.rows = slice[WS_ROWS], .tile = slice[WS_TILE]};
    c->slot = (size_t *)(void *)slice[WS_SLOT];
    c->order = c->slot ? c->slot + sz->h : NULL;

    /* slot[i]: first position of head i in the list; later ones copy it. */
    if (c->slot) {
        for (size_t i = 0; i < sz->h; i++)
            c->slot[i] = SIZE_MAX;
        for (size_t j = 0; j < sz->hs; j++) {
            size_t i = pl->in->heads[j];
            if (c->slot[i] == SIZE_MAX) c->slot[i] = j, c->distinct++;
        }
    }
    /* Where [Z_1 … Z_h] goes when ΔE is wanted: with no w_o, ΔE = Z, so
     * straight into the caller's delta (or embeddings, finished in place). */
    if (pl->stage == ATTN_STAGE_DELTA) {
        c->d = pl->out.delta ? pl->out.delta : pl->out.embeddings;
        c->zall = pl->in->weights->w_o ? slice[WS_Z] : c->d;
    }
}

/* Fills *err for a phase's ATTN_FAIL_*; returns -1. */
int attn_fail_error(attn_error *err, int rc) {
    switch (rc) {
    case ATTN_FAIL_NONFINITE:
        return attn_error_set(
            err, 0, ATTN_ERR_NONFINITE, "",
            "the attention scores overflow float32: the embeddings, the weights, the "
            "scale or the ALiBi penalties are too large");
    case ATTN_FAIL_STOPPED:
        return attn_error_set(err, 0, ATTN_ERR_STOPPED, "",
                              "the computation was stopped before it ended");
    default:
        return attn_error_set(err, 0, ATTN_ERR_NOMEM, "",
                              "memory for this computation could not be had; retry later");
    }
}

int attn_compute(const attn_output *out, attn_workspace *ws, const attn_input *in,
                 attn_error *err) {
    return attn_compute_with(out, ws, in, NULL, err);
}

int attn_compute_with(const attn_output *out, attn_workspace *ws, const attn_input *in,
                      const attn_runner *runner, attn_error *err) {
    /* A batch of one: the rows of its sgemms are laid out as in any batch,
     * which is what makes a batch's sequences equal to the bit to their
     * own calls (batch.c). */
    return attn_compute_batch(out, ws, in, 1, runner, err, NULL);
}

/* ---- sizes for limits, metrics and benchmarks ---------------------------- */

double attn_flops(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head, int has_w_o) {
    return attn_flops_grouped(n_tokens, d_model, n_heads, n_heads, d_head, has_w_o);
}

double attn_flops_grouped(size_t n_tokens, size_t d_model, size_t n_heads, size_t n_kv_heads,
                          size_t d_head, int has_w_o) {
    double n = (double)n_tokens, dm = (double)d_model, h = (double)n_heads;
    double g = (double)(n_kv_heads ? n_kv_heads : n_heads);
    double dh = (double)d_head, hd = h * dh, gd = g * dh;
    double f = 2.0 * n * (hd + 2.0 * gd) * dm; /* E · w_qkv */
    f += h * 2.0 * n * n * dh;                 /* Q_i · K_u(i)ᵀ */
    f += h * 2.0 * n * dh * n;                 /* P_i · V_u(i) */
    if (has_w_o) f += 2.0 * n * dm * hd;       /* Z · w_o */
    return f;
}

size_t attn_workspace_need(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head) {
    return attn_workspace_need_grouped(n_tokens, d_model, n_heads, n_heads, d_head);
}

/* The batch of one input of these sizes, for the worst outputs. Linear in
 * n: no path keeps an n × n buffer (the caller's scores/patterns excepted). */
size_t attn_workspace_need_grouped(size_t n_tokens, size_t d_model, size_t n_heads,
                                   size_t n_kv_heads, size_t d_head) {
    attn_weights w = {
        .d_model = d_model, .n_heads = n_heads, .d_head = d_head, .n_kv_heads = n_kv_heads};
    attn_input in = {.weights = &w, .n_tokens = n_tokens};
    return attn_batch_workspace_need(&in, 1);
}

/*
 * What a (query, key) pair and a row cost besides their GEMMs, in flops of
 * time: a flop here is the time one flop takes in a large sgemm on the same
 * thread, so that a count limits time whatever the shape. Measured by
 * `make -C bench cost` (bench/README.md, (i)) on heads one wide, where
 * these are all the work, then rounded up: at 85 GFLOP/s one ns is 85
 * flops.
 *   PAIR      exp, max, sum and scale of softmax, the pattern's store (the
 *             count assumes every output): ~1.3 ns a pair
 *   RULES     the scalar pass of the score rules (softcap, ALiBi, a window,
 *             a chunk, a custom mask): the mask byte, the distance, ALiBi's term,
 *             the finite check: ~1.5 ns a pair more
 *   SOFTCAP   tanh (SLEEF's, 8 lanes): ~4.5 ns a pair more
 *   ROPE_ROW  RoPE of one row of one head: a rotation of `dims`
 *             coordinates, ~6 flops each with the angle's table
 *   ROW       a query row's per-block setup (max, 1/sum, the row's -inf
 *             fill) besides its pairs
 */
enum {
    COST_PAIR = 120,
    COST_PAIR_RULES = 140,
    COST_PAIR_SOFTCAP = 420,
    COST_ROPE_COORD = 6,
    COST_ROW = 200,
};

double attn_input_flops(const attn_input *in) {
    attn_plan pl;
    pl.in = in;
    if (attn_sizes_of(&pl.sz, in)) return INFINITY;
    const attn_sizes *sz = &pl.sz;
    const attn_weights *w = in->weights;
    const double dh = (double)sz->dh, hd = (double)sz->hd, gd = (double)sz->gd;
    double f;
    if (sz->cross) /* E · Wq, C · Wkv */
        f = 2.0 * (double)sz->n * hd * (double)sz->dm +
            2.0 * (double)sz->m * 2.0 * gd * (double)sz->dc;
    else /* E · w_qkv */
        f = 2.0 * (double)sz->n * (double)sz->ld * (double)sz->dm;
    /* Q_i · K_u(i)ᵀ and P_i · V_u(i) over each block's keys, for every head */
    double pairs = 0.0, row_blocks = 0.0;
    for (size_t blk = 0; blk < sz->blocks; blk++) {
        size_t kbeg, kend, rb = attn_min(ATTN_BLOCK_Q, sz->n - blk * ATTN_BLOCK_Q);
        attn_block_keys(&pl, in->positions, blk, &kbeg, &kend);
        pairs += (double)rb * (double)(kend - kbeg);
        /* a row meets its keys a tile at a time on the online path */
        row_blocks += (double)rb * (double)((kend - kbeg + ATTN_BLOCK_K - 1) / ATTN_BLOCK_K);
    }
    double pair = 4.0 * dh + COST_PAIR;
    if (w->softcap != 0.0f || w->alibi || w->window || w->chunk ||
        in->mask.kind == ATTN_MASK_CUSTOM)
        pair += COST_PAIR_RULES;
    if (w->softcap != 0.0f) pair += COST_PAIR_SOFTCAP;
    f += (double)sz->h * (pairs * pair + row_blocks * COST_ROW);
    if (sz->rope) /* Q of h heads, K of g, each row */
        f += (double)(sz->h + sz->g) * (double)sz->n * (double)sz->rope * COST_ROPE_COORD;
    if (w->w_o) f += 2.0 * (double)sz->n * (double)sz->dm * hd; /* Z · w_o */
    f += attn_norm_flops(in);                                   /* norms and temperature (norm.c) */
    return f;
}

/* The batch of one, for the worst outputs (batch.c). */
size_t attn_input_workspace_need(const attn_input *in) {
    return attn_batch_workspace_need(in, 1);
}
