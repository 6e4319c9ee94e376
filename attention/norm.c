/*
 * norm.c — the norms and the query temperature of 2025–2026 layers
 * (attention.h's attn_norm, attn_qk_norm, attn_temperature; docs/API.md,
 * "Attention of 2025–2026 models"), and where the phases apply them:
 *
 *   norm         N(E): each row of E (the queries' rows with a context) before
 *                the projection. batch.c normalises a row as it packs it for
 *                the stacked product (its copy of E, made whole whenever the
 *                layer has a norm), so the norm costs the one pass over E the
 *                packing makes; a sequence that projects only its listed
 *                heads reads its rows from attn_call.normed_e, normalised
 *                once. The `normed` output is written from E by its own pass.
 *   qk_norm      Q and K after the projection and biases, before RoPE
 *                (project.c's attn_project_rest, on the calling thread: a norm
 *                over all of a row's heads needs the whole row, which the
 *                projection's column tiles do not hold; so with qk_norm RoPE
 *                is not applied in the tiles).
 *   temperature  Q's rows, after RoPE (there is none beside it, the caller's
 *                rule) and so before q_raw is copied: a layer without RoPE
 *                shows q_raw = q, temperature included.
 *   post_norm    ΔE's rows after the bias, before E' = E + ΔE (batch.c: a run
 *                of row tasks after ΔE's column tiles).
 *
 * Every kernel computes a row from that row alone, in double, by a fixed
 * order of operations: a row's result is the same whatever rows surround it,
 * alone or in a batch, split or not. Sums of squares go over four partial
 * sums, so that the loop is not one chain of dependent adds.
 */
#include <math.h>

#include "attention/plan.h"

/* Σ x[c] over d values, by four partial sums in a fixed order. */
static double row_sum(const float *x, size_t d) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t c = 0;
    for (; c + 4 <= d; c += 4)
        s0 += x[c], s1 += x[c + 1], s2 += x[c + 2], s3 += x[c + 3];
    for (; c < d; c++)
        s0 += x[c];
    return (s0 + s1) + (s2 + s3);
}

/* Σ (x[c] − mean)² over d values, likewise. */
static double row_squares(const float *x, size_t d, double mean) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t c = 0;
    for (; c + 4 <= d; c += 4) {
        const double a = x[c] - mean, b = x[c + 1] - mean;
        const double e = x[c + 2] - mean, f = x[c + 3] - mean;
        s0 += a * a, s1 += b * b, s2 += e * e, s3 += f * f;
    }
    for (; c < d; c++)
        s0 += (x[c] - mean) * (x[c] - mean);
    return (s0 + s1) + (s2 + s3);
}

/* dst[0 … d) ← N(x[0 … d)); dst may be x. */
static void norm_row(float *dst, const float *x, size_t d, const attn_norm *nm) {
    const float *w = nm->weight, *b = nm->bias;
    const double mean = nm->type == ATTN_NORM_LAYER ? row_sum(x, d) / (double)d : 0.0;
    const double r = 1.0 / sqrt(row_squares(x, d, mean) / (double)d + nm->eps);
    if (nm->type == ATTN_NORM_LAYER) {
        if (w && b)
            for (size_t c = 0; c < d; c++)
                dst[c] = (float)((x[c] - mean) * r * w[c] + b[c]);
        else if (w)
            for (size_t c = 0; c < d; c++)
                dst[c] = (float)((x[c] - mean) * r * w[c]);
        else if (b)
            for (size_t c = 0; c < d; c++)
                dst[c] = (float)((x[c] - mean) * r + b[c]);
        else
            for (size_t c = 0; c < d; c++)
                dst[c] = (float)((x[c] - mean) * r);
        return;
    }
    const double off = nm->offset;
    if (w)
        for (size_t c = 0; c < d; c++)
            dst[c] = (float)(x[c] * r * (off + w[c]));
    else
        for (size_t c = 0; c < d; c++)
            dst[c] = (float)(x[c] * r);
}

void attn_norm_rows(float *dst, size_t ldd, const float *x, size_t ldx, size_t rows, size_t d,
                    const attn_norm *nm) {
    for (size_t r = 0; r < rows; r++)
        norm_row(dst + r * ldd, x + r * ldx, d, nm);
}

/* x: rows × (groups · width), stride ldx: each row's groups normalised
 * apart, all by the same weights (width long). */
static void norm_groups(float *x, size_t ldx, size_t rows, size_t groups, size_t width,
                        const attn_norm *nm) {
    for (size_t r = 0; r < rows; r++)
        for (size_t e = 0; e < groups; e++)
            norm_row(x + r * ldx + e * width, x + r * ldx + e * width, width, nm);
}

/* The temperature of position p: log(⌊(p + 1) / F⌋ + 1) · a + 1 (Hugging
 * Face's Llama4TextAttention, attn_scales). */
static float temperature_of(const attn_temperature *t, double p) {
    return (float)(log(floor((p + 1.0) / t->floor_scale) + 1.0) * t->attn_scale + 1.0);
}

void attn_temperature_rows(float *x, size_t ldx, size_t cols, const unsigned *pos, size_t rows,
                           const attn_temperature *t) {
    for (size_t r = 0; r < rows; r++) {
        const float f = temperature_of(t, pos ? (double)pos[r] : (double)r);
        for (size_t c = 0; c < cols; c++)
            x[r * ldx + c] *= f;
    }
}

int attn_has_qk_norm(const attn_weights *w) {
    return w->qk_norm.q.type != ATTN_NORM_NONE;
}

int attn_norm_needs_whole(const attn_weights *w) {
    return attn_has_qk_norm(w) && w->qk_norm.all;
}

void attn_qk_step(const attn_plan *pl, float *x, size_t ldx, size_t heads, unsigned part) {
    const attn_weights *w = pl->in->weights;
    const attn_sizes *sz = &pl->sz;
    const size_t rows = part == ATTN_PART_Q ? sz->n : sz->m;
    if (part == ATTN_PART_V) return;
    if (attn_has_qk_norm(w)) {
        const attn_norm *nm = part == ATTN_PART_Q ? &w->qk_norm.q : &w->qk_norm.k;
        /* scope all: the caller gives every head at once (attn_norm_needs_whole) */
        if (w->qk_norm.all)
            norm_groups(x, ldx, rows, 1, heads * sz->dh, nm);
        else
            norm_groups(x, ldx, rows, heads, sz->dh, nm);
    }
    if (part == ATTN_PART_Q && !sz->rope) attn_temperature_step(pl, x, ldx, heads);
}

void attn_temperature_step(const attn_plan *pl, float *x, size_t ldx, size_t heads) {
    const attn_temperature *t = &pl->in->weights->temperature;
    if (t->floor_scale > 0.0)
        attn_temperature_rows(x, ldx, heads * pl->sz.dh, pl->in->positions, pl->sz.n, t);
}

void attn_norm_outputs(const attn_output *outs, const attn_input *ins, size_t count) {
    for (size_t i = 0; i < count; i++) {
        const attn_weights *w = ins[i].weights;
        if (outs[i].normed && w->norm.type != ATTN_NORM_NONE)
            attn_norm_rows(outs[i].normed, w->d_model, ins[i].embeddings, w->d_model,
                           ins[i].n_tokens, w->d_model, &w->norm);
    }
}

/* What a coordinate costs, in flops of time as compute.c counts them
 * (bench/README.md, (i)): `make -C bench cost`'s second table, a computation
 * with and without the rule on one thread by CPU time, against a 512³ sgemm
 * at 83 – 99 GFLOP/s; medians of five runs, then rounded up: a norm's passes
 * in double, ~1.1 ns (E's norm with its packing 102 flops, per-head qk_norm
 * 98, post_norm 77: one constant for the three); the temperature's multiply,
 * ~0.3 ns (27). */
enum { COST_NORM_COORD = 110, COST_TEMPERATURE_COORD = 30 };

double attn_norm_flops(const attn_input *in) {
    const attn_weights *w = in->weights;
    const double n = (double)in->n_tokens, dm = (double)w->d_model, dh = (double)w->d_head;
    const double h = (double)w->n_heads, g = (double)(w->n_kv_heads ? w->n_kv_heads : w->n_heads);
    const double m = in->context ? (double)in->n_context : n;
    double f = 0.0;
    if (w->norm.type != ATTN_NORM_NONE) f += n * dm * COST_NORM_COORD;
    if (w->post_norm.type != ATTN_NORM_NONE) f += n * dm * COST_NORM_COORD;
    if (attn_has_qk_norm(w)) f += (n * h + m * g) * dh * COST_NORM_COORD;
    if (w->temperature.floor_scale > 0.0) f += n * h * dh * COST_TEMPERATURE_COORD;
    return f;
}
