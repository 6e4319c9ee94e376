/*
 * rope_ref.c — see rope_ref.h. Each function follows the Python it names,
 * in double throughout (HF computes its frequencies in float32; the
 * engine, like this file, in double).
 */
#include "tests/rope_ref.h"

#include <math.h>

/* find_correction_dim: the dimension whose frequency turns num_rotations
 * times over the original context. */
static double find_correction_dim(double num_rotations, double dim, double base, double max_pos) {
    return (dim * log(max_pos / (num_rotations * 2 * M_PI))) / (2 * log(base));
}

/* find_correction_range, with truncate (floor / ceil) by default. */
static void find_correction_range(double *low, double *high, double low_rot, double high_rot,
                                  double dim, double base, double max_pos, int truncate) {
    double lo = find_correction_dim(low_rot, dim, base, max_pos);
    double hi = find_correction_dim(high_rot, dim, base, max_pos);
    if (truncate) lo = floor(lo), hi = ceil(hi);
    *low = lo > 0 ? lo : 0;
    *high = hi < dim - 1 ? hi : dim - 1;
}

/* linear_ramp_factor(min, max, dim)[t] */
static double linear_ramp_factor(double min, double max, size_t t) {
    if (min == max) max += 0.001; /* Prevent singularity */
    double v = ((double)t - min) / (max - min);
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

double rope_ref_yarn_freq(const attn_rope *r, size_t t) {
    const double dim = (double)r->dims, base = r->theta, factor = r->factor;
    double beta_fast = r->beta_fast != 0 ? r->beta_fast : 32; /* `or 32` */
    double beta_slow = r->beta_slow != 0 ? r->beta_slow : 1;
    double pos_freqs = pow(base, (double)(2 * t) / dim);
    double inv_freq_extrapolation = 1.0 / pos_freqs;
    double inv_freq_interpolation = 1.0 / (factor * pos_freqs);
    double low, high;
    find_correction_range(&low, &high, beta_fast, beta_slow, dim, base, r->original_max_position,
                          !r->untruncated);
    double inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, t);
    return inv_freq_interpolation * (1 - inv_freq_extrapolation_factor) +
           inv_freq_extrapolation * inv_freq_extrapolation_factor;
}

double rope_ref_longrope_freq(const attn_rope *r, size_t t, int long_) {
    double ext = long_ ? (double)r->long_factor[t] : (double)r->short_factor[t];
    double inv_freq_shape = (double)(2 * t) / (double)r->dims;
    return 1.0 / (ext * pow(r->theta, inv_freq_shape));
}

/* get_mscale(scale, mscale) */
static double get_mscale(double scale, double mscale) {
    if (scale <= 1) return 1.0;
    return 0.1 * mscale * log(scale) + 1.0;
}

double rope_ref_attention_factor(const attn_rope *r) {
    if (r->attention_factor != 0) return r->attention_factor; /* given */
    if (r->scaling == ATTN_ROPE_SCALING_YARN) {
        if (r->mscale != 0 && r->mscale_all_dim != 0)
            return get_mscale(r->factor, r->mscale) / get_mscale(r->factor, r->mscale_all_dim);
        return get_mscale(r->factor, 1);
    }
    if (r->scaling == ATTN_ROPE_SCALING_LONGROPE) {
        double factor = r->factor != 0 ? r->factor : 1; /* absent: 1 (docs/API.md) */
        if (factor <= 1.0) return 1.0;
        return sqrt(1 + log(factor) / log(r->original_max_position));
    }
    return 1.0;
}

int rope_ref_long(const attn_rope *r, const unsigned *pos, size_t n) {
    if (r->scaling != ATTN_ROPE_SCALING_LONGROPE || n == 0) return 0;
    double max = 0;
    for (size_t t = 0; t < n; t++) {
        double p = pos ? (double)pos[t] : (double)t;
        if (p > max) max = p;
    }
    return max + 1 > r->original_max_position;
}
