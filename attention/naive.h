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

/*
 * The float64 reference of a stack (attention.h's attn_stack), for one
 * sequence: every layer in turn by the formulas of attention.h in double,
 * E_l kept in double from layer to layer. Per layer l, layers[l] (or
 * layers NULL) says what to keep, each NULL or, every head in order (not
 * the listed ones):
 *
 *   scores, patterns   h × n × m      (scores −INFINITY where masked)
 *   head_outputs       h × n × dh
 *   delta, embeddings  n × dm         ΔE_l, E_{l+1} (or hidden + ΔE_l)
 *   normed             n × dm         N(E_l), with the layer's norm
 */
typedef struct attn_naive_layer {
    double *scores, *patterns, *head_outputs, *delta, *embeddings;
    double *normed;
} attn_naive_layer;

/* Doubles of scratch attn_stack_naive needs (SIZE_MAX when that overflows). */
size_t attn_stack_naive_scratch(const attn_input *in, const attn_stack *stack);

/* Sequence `seq` of the stack, its input `in` (hidden_states[seq·L + l]
 * when the stack has them): layers as above; final E_L into `final`
 * (n × dm, or NULL); scratch: attn_stack_naive_scratch doubles. */
void attn_stack_naive(const attn_naive_layer *layers, double *final, double *scratch,
                      const attn_input *in, size_t seq, const attn_stack *stack);

/* Attention rollout in double (attention.h's attn_stack_output.rollout):
 * R (n × n) = Â_{L−1} · … · Â_0 from patterns[l], every head's pattern of
 * layer l (h × n × n); scratch: 2 · n · n doubles. */
void attn_rollout_naive(double *R, double *scratch, const double *const *patterns, size_t n,
                        size_t h, size_t n_layers);

#endif
