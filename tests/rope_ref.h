/*
 * rope_ref.h — the float64 reference of RoPE's long-context scalings for
 * the engine's suites (test_variants.c, test_batch_engine.c), written from
 * Hugging Face's modeling_rope_utils.py (_compute_yarn_parameters,
 * _compute_longrope_parameters, and the longrope frequency update of its
 * rotary embeddings), not from attention/rope.c: the engine's numbers are
 * checked against these, so they must not share its code.
 */
#ifndef TESTS_ROPE_REF_H
#define TESTS_ROPE_REF_H

#include <stddef.h>

#include "attention/attention.h"

/* inv_freq[t] of a YARN rope: HF's linear ramp between the interpolated
 * (f_t / s) and extrapolated (f_t) frequencies. */
double rope_ref_yarn_freq(const attn_rope *r, size_t t);

/* inv_freq[t] of a LONGROPE rope, from its long factors when `long_`. */
double rope_ref_longrope_freq(const attn_rope *r, size_t t, int long_);

/* HF's attention_factor (attention_scaling): the given one, else YaRN's
 * get_mscale or LongRoPE's sqrt(1 + ln s / ln L); 1 for other scalings. */
double rope_ref_attention_factor(const attn_rope *r);

/* Whether a LONGROPE sequence at positions pos[0 … n) (NULL: 0 … n−1)
 * uses its long factors: HF's seq_len = max(position_ids) + 1 > L. */
int rope_ref_long(const attn_rope *r, const unsigned *pos, size_t n);

#endif
