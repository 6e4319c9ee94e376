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
 *   angle(p, t) = p · f_t; each row of the table holds cos, then sin.
 *
 * Accuracy at large positions: the angle is computed in double, never in
 * float. p < 2^31 is exact in a double and f_t has a relative error of a
 * few ulps (pow, then the scaling), so p · f_t is within ~1e-6 rad of the
 * exact angle even at p = 2^31 (|p · f_t| ≤ 2^31, ulp 2^−22). glibc's sin
 * and cos reduce any double argument exactly (no 2π truncation), so cos
 * and sin come out within one float rounding of their true values. In
 * float32, p · f_t alone would be off by up to 64 rad at p = 2^31 (the ulp
 * of floats below 2^31 is 128), and already by 0.016 rad at p = 500000:
 * every Q and K of such a position would be rotated wrongly.
 */
#include <math.h>

#include "attention/plan.h"

void attn_rope_frequencies(double *freq, const attn_rope *rope) {
    const size_t half = rope->dims / 2;
    const double s = rope->factor, l = rope->low_freq_factor, u = rope->high_freq_factor;
    const double L = rope->original_max_position;
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
        }
        freq[t] = f;
    }
}

void attn_rope_angles(float *angles, size_t ldangles, const double *freq, size_t dims,
                      const unsigned *pos, size_t rows) {
    const size_t half = dims / 2;
    for (size_t r = 0; r < rows; r++) {
        float *cs = angles + r * ldangles, *sn = cs + half;
        const double p = (double)pos[r];
        for (size_t t = 0; t < half; t++) {
            double a = p * freq[t];
            cs[t] = (float)cos(a);
            sn[t] = (float)sin(a);
        }
    }
}
