/*
 * rope.c — RoPE's frequencies and angles (plan.h); the rotation itself is
 * attn_rope_rows (kernels.c), run in the projection's tiles (project.c).
 *
 *   f_t = θ^(−2t/dims), t < dims/2, then the scaling:
 *     linear   f_t / s
 *     llama3   with λ_t = 2π / f_t: f_t where λ_t < L/u, f_t / s where
 *              λ_t > L/l, else (1 − σ)·f_t/s + σ·f_t, σ = (L/λ_t − l)/(u − l)
 *              (Hugging Face's _compute_llama3_parameters); u = l (Llama 4
 *              Scout) has no band in between: f_t / s where λ_t > L/l, else
 *              f_t, even at λ_t = L/l exactly, where Hugging Face's σ is 0/0
 *              and its first step (f_t unless λ_t > L/l) is kept here
 *     yarn     (f_t / s)·r_t + f_t·(1 − r_t), the ramp r_t = clamp((t − lo) /
 *              (hi − lo), 0, 1) between the correction dimensions of beta_fast
 *              (lo) and beta_slow (hi), d(β) = dims · ln(L / (2π·β)) / (2 ln θ),
 *              lo floored and hi ceiled unless untruncated, then lo ≥ 0 and
 *              hi ≤ dims − 1, hi + 0.001 when they meet (Hugging Face's
 *              _compute_yarn_parameters, in double where it uses float32)
 *     longrope f_t / short_factor[t], or f_t / long_factor[t] for a sequence
 *              whose largest position p has p + 1 > L (HF's
 *              _compute_longrope_parameters with its seq_len = max(p) + 1):
 *              both tables are made, each sequence picks its own
 *              (attn_rope_table_of), so that a batch's sequences are each
 *              what they would be alone
 *   angle(p, t) = p · f_t; each row of the table holds a·cos, then a·sin,
 *   with a the attention factor (1 but for yarn and longrope; attention.h):
 *   as Hugging Face multiplies its cos and sin by attention_scaling, only
 *   the rotated coordinates of Q and K carry it, and a = 1 leaves the table
 *   as it was bit for bit.
 *
 * Accuracy at large positions: the angle is computed in double, never in
 * float. p < 2^31 is exact in a double and f_t has a relative error of a
 * few ulps (pow, then the scaling), so p · f_t is within ~1e-6 rad of the
 * exact angle even at p = 2^31 (|p · f_t| ≤ 2^31, ulp 2^−22). glibc's sin
 * and cos reduce any double argument exactly (no 2π truncation), so cos
 * and sin come out within one float rounding of their true values. In
 * float32, p · f_t alone would be off by up to 64 rad at p = 2^31 (the ulp
 * of floats below 2^31 is 128), and already by 0.016 rad at p = 500000:
 * every Q and K of such a position would be rotated wrongly. yarn's and
 * longrope's f_t are the same pow and a few more double operations (the
 * ramp's blend, a division by a factor list's float), so the bound holds
 * for them too, and a · cos(p · f_t) is rounded to float once.
 */
#include <math.h>

#include "attention/plan.h"

/* YaRN's mscale(s, m) = 0.1 · m · ln s + 1, 1 for s ≤ 1. */
static double yarn_mscale(double s, double m) {
    return s <= 1.0 ? 1.0 : 0.1 * m * log(s) + 1.0;
}

/* YaRN's correction dimension of β rotations over the original context. */
static double yarn_dim(double beta, double dims, double theta, double L) {
    return dims * log(L / (beta * 2.0 * M_PI)) / (2.0 * log(theta));
}

size_t attn_rope_tables(const attn_rope *rope) {
    return rope->scaling == ATTN_ROPE_SCALING_LONGROPE ? 2 : 1;
}

double attn_rope_attention_factor(const attn_rope *rope) {
    if (rope->attention_factor > 0) return rope->attention_factor;
    const double s = rope->factor > 0 ? rope->factor : 1.0;
    switch (rope->scaling) {
    case ATTN_ROPE_SCALING_YARN:
        if (rope->mscale != 0 && rope->mscale_all_dim != 0)
            return yarn_mscale(s, rope->mscale) / yarn_mscale(s, rope->mscale_all_dim);
        return yarn_mscale(s, 1.0);
    case ATTN_ROPE_SCALING_LONGROPE:
        return s <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log(rope->original_max_position));
    default: return 1.0;
    }
}

size_t attn_rope_table_of(const attn_rope *rope, const unsigned *pos, size_t n) {
    if (rope->scaling != ATTN_ROPE_SCALING_LONGROPE || n == 0) return 0;
    double last = (double)(n - 1);
    if (pos) {
        unsigned top = 0;
        for (size_t r = 0; r < n; r++)
            if (pos[r] > top) top = pos[r];
        last = (double)top;
    }
    return last + 1.0 > rope->original_max_position;
}

/* freq[0 … dims/2) ← f_t of the scalings that have one table. */
static void frequencies(double *freq, const attn_rope *rope) {
    const size_t half = rope->dims / 2;
    const double s = rope->factor, l = rope->low_freq_factor, u = rope->high_freq_factor;
    const double L = rope->original_max_position;
    double lo = 0, hi = 0;
    if (rope->scaling == ATTN_ROPE_SCALING_YARN) {
        const double dims = (double)rope->dims;
        lo = yarn_dim(rope->beta_fast > 0 ? rope->beta_fast : 32.0, dims, rope->theta, L);
        hi = yarn_dim(rope->beta_slow > 0 ? rope->beta_slow : 1.0, dims, rope->theta, L);
        if (!rope->untruncated) lo = floor(lo), hi = ceil(hi);
        lo = fmax(lo, 0.0), hi = fmin(hi, dims - 1.0);
        if (lo == hi) hi += 0.001; /* as Hugging Face: no 0/0 */
    }
    for (size_t t = 0; t < half; t++) {
        double f = pow(rope->theta, -(double)(2 * t) / (double)rope->dims);
        switch (rope->scaling) {
        case ATTN_ROPE_SCALING_NONE: break;
        case ATTN_ROPE_SCALING_LINEAR: f /= s; break;
        case ATTN_ROPE_SCALING_LLAMA3: {
            double lambda = 2.0 * M_PI / f;
            if (lambda > L / l) {
                f /= s;
            } else if (!(lambda < L / u) && u > l) {
                double sigma = (L / lambda - l) / (u - l);
                f = (1.0 - sigma) * f / s + sigma * f;
            }
            break;
        }
        case ATTN_ROPE_SCALING_YARN: {
            /* e: the share of f_t kept (extrapolated), 1 below lo, 0 above hi */
            double e = 1.0 - fmin(fmax(((double)t - lo) / (hi - lo), 0.0), 1.0);
            f = f / s * (1.0 - e) + f * e;
            break;
        }
        case ATTN_ROPE_SCALING_LONGROPE: break; /* attn_rope_frequencies */
        }
        freq[t] = f;
    }
}

void attn_rope_frequencies(double *freq, const attn_rope *rope) {
    frequencies(freq, rope);
    if (rope->scaling != ATTN_ROPE_SCALING_LONGROPE) return;
    const size_t half = rope->dims / 2;
    for (size_t t = 0; t < half; t++) {
        freq[half + t] = freq[t] / (double)rope->long_factor[t];
        freq[t] /= (double)rope->short_factor[t];
    }
}

void attn_rope_angles(float *angles, size_t ldangles, const double *freq, double a, size_t dims,
                      const unsigned *pos, size_t rows) {
    const size_t half = dims / 2;
    for (size_t r = 0; r < rows; r++) {
        float *cs = angles + r * ldangles, *sn = cs + half;
        const double p = (double)pos[r];
        for (size_t t = 0; t < half; t++) {
            double x = p * freq[t];
            cs[t] = (float)(a * cos(x));
            sn[t] = (float)(a * sin(x));
        }
    }
}
