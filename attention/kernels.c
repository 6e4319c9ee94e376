/*
 * kernels.c — the element-wise kernels of the attention block (see
 * kernels.h). Everything between the GEMMs lives here: bias rows, strided
 * copies, the mask and the stable softmax. No -ffast-math anywhere: the mask
 * is made of real infinities and the code relies on expf(-inf) == 0 and on
 * comparisons with -INFINITY behaving as IEEE says.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "attention/kernels.h"

/* x: rows × cols (stride ldx), b: cols */
void attn_add_bias_rows(float *x, const float *b, size_t rows, size_t cols, size_t ldx) {
    for (size_t r = 0; r < rows; r++) {
        float *xr = x + r * ldx;
        for (size_t c = 0; c < cols; c++)
            xr[c] += b[c];
    }
}

/* dst: rows × cols (stride ldd), src: rows × cols (stride lds) */
void attn_copy_block(float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                     size_t cols) {
    for (size_t r = 0; r < rows; r++)
        memcpy(dst + r * ldd, src + r * lds, cols * sizeof(float));
}

/* out, a, b: count */
void attn_add(float *out, const float *a, const float *b, size_t count) {
    for (size_t x = 0; x < count; x++)
        out[x] = a[x] + b[x];
}

/* Is any of x[0 … count) infinite or NaN? An OR of comparisons, so that
 * the compiler may vectorise it (a float sum could not be reordered). */
static int any_not_finite(const float *x, size_t count) {
    unsigned bad = 0;
    for (size_t k = 0; k < count; k++)
        bad |= !(fabsf(x[k]) <= FLT_MAX);
    return bad != 0;
}

/* s: n × n */
int attn_mask_apply(float *s, const attn_mask *mask, size_t n) {
    int bad = 0;
    for (size_t q = 0; q < n; q++) {
        float *sr = s + q * n;
        switch (mask->kind) {
        case ATTN_MASK_NONE:
            bad |= any_not_finite(sr, n);
            break;
        case ATTN_MASK_CAUSAL:
            bad |= any_not_finite(sr, q + 1);
            for (size_t k = q + 1; k < n; k++)
                sr[k] = -INFINITY;
            break;
        case ATTN_MASK_CUSTOM:
            for (size_t k = 0; k < n; k++) {
                if (!mask->allowed[q * n + k])
                    sr[k] = -INFINITY;
                else
                    bad |= !(fabsf(sr[k]) <= FLT_MAX);
            }
            break;
        }
    }
    return bad ? -1 : 0;
}

/* p, s: n × n; p may equal s */
void attn_softmax_rows(float *p, const float *s, size_t n, int causal) {
    for (size_t q = 0; q < n; q++) {
        const float *sr = s + q * n;
        float *pr = p + q * n;
        size_t len = causal ? q + 1 : n; /* keys past len are masked */

        /* Subtract the row max over allowed keys so that expf cannot
         * overflow; masked entries are -inf and never win the max. */
        float max = -INFINITY;
        for (size_t k = 0; k < len; k++)
            if (sr[k] > max) max = sr[k];
        if (max == -INFINITY) { /* no allowed key: all zeros, not 0/0 */
            memset(pr, 0, n * sizeof(float));
            continue;
        }
        float sum = 0.0f;
        for (size_t k = 0; k < len; k++) {
            /* expf(-inf - max) is exactly 0: masked weights stay 0. */
            float e = sr[k] == -INFINITY ? 0.0f : expf(sr[k] - max);
            pr[k] = e;
            sum += e;
        }
        for (size_t k = len; k < n; k++)
            pr[k] = 0.0f;
        /* sum >= 1 here (the max contributes expf(0) == 1). */
        float inv = 1.0f / sum;
        for (size_t k = 0; k < len; k++)
            pr[k] *= inv;
    }
}
