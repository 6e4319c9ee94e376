/*
 * naive.h — the plain float32 reference of attn_compute, for tests and
 * benchmarks (as llm.c keeps matmul_forward_naive beside the fast path).
 * Triple loops, no BLAS, every head always computed, in the order the
 * formulas of attention.h are written. Slow on purpose: it is the
 * comparison, not a fallback.
 */
#ifndef ATTENTION_NAIVE_H
#define ATTENTION_NAIVE_H

#include "attention/attention.h"
#include <stddef.h>

/* Floats of scratch attn_compute_naive needs (SIZE_MAX when that
 * overflows): for `in`, and for a self-attention input of these sizes
 * without RoPE. */
size_t attn_naive_scratch_need(const attn_input *in);
size_t attn_naive_scratch_floats(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head);

/*
 * Same contract as attn_compute: fills the non-NULL outputs of `out`.
 * `scratch` is caller-owned, attn_naive_scratch_need(in) floats.
 */
void attn_compute_naive(const attn_output *out, float *scratch, const attn_input *in);

#endif
