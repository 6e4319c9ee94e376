/*
 * kernels.c — the element-wise kernels of the attention block (see
 * kernels.h). Everything between the GEMMs lives here: bias rows, strided
 * copies, the mask and the stable softmax (whole rows, and the online form
 * over key tiles; exp on SLEEF through vexp.c). No -ffast-math anywhere: the
 * mask is made of real infinities and the code relies on exp(-inf) == 0 and on
 * comparisons with -INFINITY behaving as IEEE says.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/vexp.h"

/* gcc's -O2 vectorises only loops of known trip count ("very cheap" cost
 * model); RoPE's pairs loop, E + ΔE, the scores' finite check and the mask's
 * fill need the dynamic one (gcc 12: 16-byte vectors, versioned for
 * aliasing; scalar, the check and the fill were 2 % of GPT-2 at n = 128).
 * clang vectorises them at -O2 as they are. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORISE __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define VECTORISE
#endif

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
VECTORISE void attn_add(float *out, const float *a, const float *b, size_t count) {
    for (size_t x = 0; x < count; x++)
        out[x] = a[x] + b[x];
}

/* Is any of x[0 … count) infinite or NaN? An OR of comparisons, so that
 * the compiler may vectorise it (a float sum could not be reordered). */
VECTORISE static int any_not_finite(const float *x, size_t count) {
    unsigned bad = 0;
    for (size_t k = 0; k < count; k++)
        bad |= !(fabsf(x[k]) <= FLT_MAX);
    return bad != 0;
}

/* x[0 … count) ← value; a loop gcc vectorises (a row's masked keys). */
VECTORISE static void fill(float *x, float value, size_t count) {
    for (size_t k = 0; k < count; k++)
        x[k] = value;
}

/* Allowed keys of query q in a tile starting at key k0, cols wide, for the
 * causal mask: columns 0 … len-1. */
static size_t causal_len(size_t q, size_t k0, size_t cols) {
    if (q < k0) return 0;
    return q - k0 + 1 < cols ? q - k0 + 1 : cols;
}

/* s: rows × cols (stride lds); the mask alone, m keys per row of a custom
 * mask. */
static int mask_tile(float *s, size_t lds, const attn_mask *mask, size_t m, size_t q0, size_t rows,
                     size_t k0, size_t cols) {
    int bad = 0;
    for (size_t r = 0; r < rows; r++) {
        float *sr = s + r * lds;
        size_t q = q0 + r;
        switch (mask->kind) {
        case ATTN_MASK_NONE: bad |= any_not_finite(sr, cols); break;
        case ATTN_MASK_CAUSAL: {
            size_t len = causal_len(q, k0, cols);
            bad |= any_not_finite(sr, len);
            fill(sr + len, -INFINITY, cols - len);
            break;
        }
        case ATTN_MASK_CUSTOM: {
            const unsigned char *ok = mask->allowed + q * m + k0;
            for (size_t c = 0; c < cols; c++) {
                if (!ok[c])
                    sr[c] = -INFINITY;
                else
                    bad |= !(fabsf(sr[c]) <= FLT_MAX);
            }
            break;
        }
        }
    }
    return bad ? -1 : 0;
}

/* |a − b| of two positions, exact (they are below 2^31, so is it) */
static unsigned pos_distance(unsigned a, unsigned b) {
    return a > b ? a - b : b - a;
}

/* The positions [lo, hi) of query q's chunk, ⌊p_q / c⌋·c …, with c the
 * chunk (0: none, or no positions: every key's); compared per key instead
 * of a division per pair. */
typedef struct chunk_span {
    unsigned long long lo, hi;
} chunk_span;

static chunk_span chunk_of(size_t chunk, const unsigned *pos, unsigned pq) {
    if (!chunk || !pos) return (chunk_span){0, ULLONG_MAX};
    unsigned long long lo = pq - pq % chunk;
    return (chunk_span){lo, lo + chunk};
}

/* Is an allowed one of the row's first len raw scores infinite or NaN?
 * Soft-capping would make it finite (tanh(±inf) = ±1), so it is asked
 * before; the scalar loop runs only for a row that has one somewhere. */
static int allowed_not_finite(const float *sr, size_t len, const unsigned char *ok, size_t w,
                              const unsigned *pos, unsigned pq, size_t k0, chunk_span cs) {
    if (!any_not_finite(sr, len)) return 0;
    for (size_t c = 0; c < len; c++)
        if (!(fabsf(sr[c]) <= FLT_MAX) && !(ok && !ok[c]) &&
            !(w && pos && pos_distance(pq, pos[k0 + c]) >= w) &&
            !(pos && (pos[k0 + c] < cs.lo || pos[k0 + c] >= cs.hi)))
            return 1;
    return 0;
}

/* s: rows × cols (stride lds) */
int attn_score_tile(float *s, size_t lds, const attn_score_rules *rules, size_t q0, size_t rows,
                    size_t k0, size_t cols) {
    const attn_mask *mask = rules->mask;
    if (!rules->window && !rules->chunk && rules->softcap == 0.0f && rules->slope == 0.0f)
        return mask_tile(s, lds, mask, rules->m, q0, rows, k0, cols);
    const unsigned *pos = rules->pos;
    const size_t w = rules->window;
    const float slope = rules->slope;
    int bad = 0;
    for (size_t r = 0; r < rows; r++) {
        float *sr = s + r * lds;
        const size_t q = q0 + r;
        /* causal: keys past q are masked, not computed on */
        size_t len = mask->kind == ATTN_MASK_CAUSAL ? causal_len(q, k0, cols) : cols;
        const unsigned char *ok =
            mask->kind == ATTN_MASK_CUSTOM ? mask->allowed + q * rules->m + k0 : NULL;
        const unsigned pq = pos ? pos[q] : 0;
        const chunk_span cs = chunk_of(rules->chunk, pos, pq);
        if (rules->softcap != 0.0f) {
            bad |= allowed_not_finite(sr, len, ok, w, pos, pq, k0, cs);
            attn_vsoftcap(sr, rules->softcap, len);
        }
        for (size_t c = 0; c < len; c++) {
            /* Without positions (a context) the distance and the chunk
             * play no part. */
            unsigned pk = pos ? pos[k0 + c] : 0;
            unsigned d = pos ? pos_distance(pq, pk) : 0;
            if ((ok && !ok[c]) || (w && d >= w) || pk < cs.lo || pk >= cs.hi) {
                sr[c] = -INFINITY;
                continue;
            }
            /* d < 2^31 converts to the nearest float: ALiBi's penalty is
             * within half an ulp of slope · |p_q − p_k| */
            float v = sr[c] - slope * (float)d;
            bad |= !(fabsf(v) <= FLT_MAX);
            sr[c] = v;
        }
        fill(sr + len, -INFINITY, cols - len);
    }
    return bad ? -1 : 0;
}

/* p: rows × cols (stride ldp), s: rows × cols (stride lds); p may equal s */
void attn_softmax_block(float *p, size_t ldp, const float *s, size_t lds, size_t rows, size_t cols,
                        size_t q0, size_t k0, int causal, float sink) {
    for (size_t r = 0; r < rows; r++) {
        const float *sr = s + r * lds;
        float *pr = p + r * ldp;
        size_t len = causal ? causal_len(q0 + r, k0, cols) : cols; /* keys past len: masked */

        /* Subtract the row max over allowed keys so that exp cannot
         * overflow; masked entries are -inf and never win the max. */
        float max = attn_vmax(sr, len);
        if (max == -INFINITY) { /* no allowed key: all zeros, not 0/0 */
            memset(pr, 0, cols * sizeof(float));
            continue;
        }
        /* A sink above the row's scores is its maximum (Hugging Face's
         * GPT-OSS takes the max over the scores and the sink together):
         * exp(sink − max) cannot overflow, and a score far below the sink
         * underflows to the 0 it nearly is. */
        const int sunk = sink != -INFINITY;
        if (sunk && sink > max) max = sink;
        /* exp(-inf - max) is exactly 0: masked weights stay 0. The sum is
         * >= 1 (the max contributes exp(0) == 1, the sink's or a key's). */
        float sum = attn_vexp_shift_sum(pr, sr, max, len);
        if (sunk) sum += expf(sink - max);
        memset(pr + len, 0, (cols - len) * sizeof(float));
        attn_vscale(pr, 1.0f / sum, len);
    }
}

/* t: rows × cols (stride ldt), m, l: rows, z: rows × dh (stride ldz) */
void attn_softmax_online(float *t, size_t ldt, float *m, float *l, float *z, size_t ldz, size_t dh,
                         size_t rows, size_t cols, size_t q0, size_t k0, int causal) {
    for (size_t r = 0; r < rows; r++) {
        float *tr = t + r * ldt;
        size_t len = causal ? causal_len(q0 + r, k0, cols) : cols;
        float tmax = attn_vmax(tr, len);
        if (tmax == -INFINITY) { /* nothing allowed in this tile: weights 0 */
            memset(tr, 0, cols * sizeof(float));
            continue;
        }
        /* The weights so far were taken against the old max: f brings them
         * to the new one. A row is "seen" once a tile had an allowed key;
         * before that m is −inf, l is 0 and z holds nothing of ours. */
        int seen = m[r] != -INFINITY;
        float f = 1.0f;
        if (tmax > m[r]) {
            if (seen) f = expf(m[r] - tmax);
            m[r] = tmax;
        }
        float l_old = l[r] * f;
        /* l_new >= 1: this tile's max, or an earlier one, weighs exp(0). */
        float l_new = l_old + attn_vexp_shift_sum(tr, tr, m[r], len);
        /* z stays the weighted average of the V rows seen so far (weights
         * summing to 1), so it never grows past max |V| on its way, as an
         * unnormalised Σ exp · V could (n · max |V| overflows first).
         * Rescaled whenever the row was seen, also when f (so l_old)
         * underflowed to 0: a max that jumps by more than exp's range
         * (~88) must wipe the old average, not leave it for T · V to add
         * to. */
        if (seen) attn_vscale(z + r * ldz, l_old / l_new, dh);
        attn_vscale(tr, 1.0f / l_new, len);
        l[r] = l_new;
        memset(tr + len, 0, (cols - len) * sizeof(float));
    }
}

/* x: rows × (heads · dh) (stride ldx), angles: rows × dims (stride ldangles) */
VECTORISE void attn_rope_rows(float *x, size_t ldx, const float *angles, size_t ldangles,
                              size_t rows, size_t heads, size_t dh, size_t dims,
                              attn_rope_style style) {
    const size_t half = dims / 2;
    for (size_t r = 0; r < rows; r++) {
        const float *restrict cs = angles + r * ldangles, *restrict sn = cs + half;
        for (size_t e = 0; e < heads; e++) {
            float *xr = x + r * ldx + e * dh;
            if (style == ATTN_ROPE_HALF) {
                /* contiguous halves, not aliasing the table: the loop
                 * vectorises */
                float *restrict a = xr, *restrict b = xr + half;
                for (size_t t = 0; t < half; t++) {
                    float at = a[t], bt = b[t];
                    a[t] = at * cs[t] - bt * sn[t];
                    b[t] = at * sn[t] + bt * cs[t];
                }
            } else {
                for (size_t t = 0; t < half; t++) {
                    float at = xr[2 * t], bt = xr[2 * t + 1];
                    xr[2 * t] = at * cs[t] - bt * sn[t];
                    xr[2 * t + 1] = at * sn[t] + bt * cs[t];
                }
            }
        }
    }
}
