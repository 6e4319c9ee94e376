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

/*
 * s: n × n scores. Writes −INFINITY where query q may not attend to key k.
 * Returns 0, or -1 when an allowed score is not finite (the scores overflowed
 * float32): −INFINITY must mean "masked" and nothing else downstream.
 */
int attn_mask_apply(float *s, const attn_mask *mask, size_t n);

/*
 * p, s: n × n (p may be s: in place). Row-wise softmax of masked scores:
 * p[q][k] = exp(s[q][k] − m_q) / Σ_k' exp(s[q][k'] − m_q), m_q the row's
 * maximum over the row's allowed entries. Entries equal to −INFINITY are
 * masked and come out exactly 0; a row with no allowed entry comes out all
 * 0 (not NaN). With `causal` set, keys k > q are known masked: they are not
 * read and come out 0.
 */
void attn_softmax_rows(float *p, const float *s, size_t n, int causal);

#endif
