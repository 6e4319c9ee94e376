/*
 * kernels.h — internal to attention/: the element-wise kernels between the
 * GEMMs of attn_compute. Pure functions on caller-owned buffers: no
 * allocation, no logging, no global state. Argument order: outputs, inputs,
 * sizes. Letters as in attention.h; `rows`, `cols` and leading dimensions
 * (`ld*`, in floats) are explicit because most buffers are column slices of
 * a wider matrix.
 */
#ifndef ATTENTION_KERNELS_H
#define ATTENTION_KERNELS_H

#include "attention/attention.h"
#include <stddef.h>

/* x[r·ldx + c] += b[c]        x: rows × cols (stride ldx), b: cols */
void attn_add_bias_rows(float *x, const float *b, size_t rows, size_t cols, size_t ldx);

/* dst[r·ldd + c] = src[r·lds + c]        rows × cols */
void attn_copy_block(float *dst, size_t ldd, const float *src, size_t lds, size_t rows,
                     size_t cols);

/* out[x] = a[x] + b[x]        count floats; out may alias a or b */
void attn_add(float *out, const float *a, const float *b, size_t count);

/* What the score pass applies to a block's scaled scores, in this order:
 * soft-capping, ALiBi, then the mask, the window and the chunk (−INFINITY). */
typedef struct attn_score_rules {
    const attn_mask *mask;
    size_t m;            /* keys: the row length of a custom mask */
    const unsigned *pos; /* the positions of queries and keys, or NULL (none needed) */
    size_t window;       /* w, or 0 */
    size_t chunk;        /* c, or 0 (read only with pos) */
    float softcap;       /* c, or 0 */
    float slope;         /* the head's ALiBi slope, or 0 */
} attn_score_rules;

/*
 * s: rows × cols tile of scaled scores (stride lds), s[r][c] the score of
 * query q0 + r and key k0 + c. Applies the rules: s ← c · tanh(s / c),
 * s −= slope · |p_q − p_k|, and −INFINITY where the mask, the window or
 * the chunk removes the key (causal: k > q). Returns 0, or -1 when an allowed score
 * is not finite (the scores overflowed float32), before soft-capping (which
 * would make ±inf finite) or after ALiBi: −INFINITY must mean "masked" and
 * nothing else downstream.
 */
int attn_score_tile(float *s, size_t lds, const attn_score_rules *rules, size_t q0, size_t rows,
                    size_t k0, size_t cols);

/*
 * p: rows × cols (stride ldp), s: rows × cols (stride lds); p may be s (in
 * place). Row-wise softmax of masked scores, row r being query q0 + r and
 * column c key k0 + c: p[r][c] = exp(s[r][c] − m_r) / Σ_c' exp(s[r][c'] − m_r),
 * m_r the row's maximum over its allowed entries. Entries equal to
 * −INFINITY are masked and come out exactly 0; a row with no allowed entry
 * comes out all 0 (not NaN). With `causal` set, keys past q are known
 * masked: they are not read and come out 0. A finite `sink` (the head's
 * sink logit; −INFINITY: none) joins every row's sum and its maximum, so
 * that a row with an allowed key sums to less than 1; a row with none
 * stays all 0.
 */
void attn_softmax_block(float *p, size_t ldp, const float *s, size_t lds, size_t rows, size_t cols,
                        size_t q0, size_t k0, int causal, float sink);

/*
 * One step of the online softmax over a tile of keys k0 … k0+cols.
 * t: rows × cols (stride ldt), masked scores in, weights out: exp(t − m_r)
 * divided by the running sum including this tile (masked: exactly 0;
 * causal: keys past q not read, 0). m, l: rows, the running max and sum of
 * each row (start at −INFINITY, 0; with a sink logit s, at s and 1, z
 * then starting at 0: the sink is a key whose V is 0). z: rows × dh (stride ldz), the average
 * of the V rows so far, scaled here by l_old / l_new, which is 0 when the
 * max grew by more than exp's range (rows with nothing allowed yet are not
 * read). The caller then adds t · V_tile to z, which leaves z the average
 * over every key seen: no final division.
 */
void attn_softmax_online(float *t, size_t ldt, float *m, float *l, float *z, size_t ldz, size_t dh,
                         size_t rows, size_t cols, size_t q0, size_t k0, int causal);

/*
 * RoPE on rows × heads blocks of dh columns: x: rows × (heads · dh)
 * (stride ldx), head e at columns e·dh; angles: rows × dims (stride
 * ldangles), per row cos(p·f_t) for t < dims/2, then sin(p·f_t). Pair t of
 * a head is (t, t + dims/2) for ATTN_ROPE_HALF, (2t, 2t + 1) for
 * ATTN_ROPE_INTERLEAVED: (a, b) → (a·cos − b·sin, a·sin + b·cos);
 * columns dims … dh stay as they are.
 */
void attn_rope_rows(float *x, size_t ldx, const float *angles, size_t ldangles, size_t rows,
                    size_t heads, size_t dh, size_t dims, attn_rope_style style);

#endif
