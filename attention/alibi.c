/*
 * alibi.c — the standard ALiBi slopes (attention.h).
 *
 * As the ALiBi paper and BLOOM's build_alibi_tensor: for h a power of two,
 * the geometric sequence m_i = 2^(−8(i+1)/h); otherwise the sequence of the
 * largest power of two p below h, followed by the odd terms of the
 * sequence for 2p, 2^(−4(2j+1)/p), until there are h. Computed in double
 * by exp2 of exact rationals, then rounded once.
 */
#include <math.h>

#include "attention/attention.h"

void attn_alibi_slopes(float *slopes, size_t h) {
    size_t p = 1;
    while (p * 2 <= h)
        p *= 2;
    for (size_t i = 0; i < p && i < h; i++)
        slopes[i] = (float)exp2(-8.0 * (double)(i + 1) / (double)p);
    for (size_t j = 0; p + j < h; j++)
        slopes[p + j] = (float)exp2(-4.0 * (double)(2 * j + 1) / (double)p);
}
