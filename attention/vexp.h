/*
 * vexp.h — internal to attention/: the vectorised row primitives of the
 * softmax (row max, exp with a shift and its sum, scaling) and of
 * soft-capping, on SLEEF's exp and tanh with at most 1 ulp of error.
 *
 * The SIMD width is chosen at run time on every call (a cached CPUID bit
 * read by __builtin_cpu_supports, no state of ours): AVX2 + FMA when the
 * CPU has them, else SLEEF's 4-wide dispatcher (SSE2 at worst, which every
 * x86-64 has). Other architectures use SLEEF's scalar expf. The binary
 * therefore never executes an instruction the CPU lacks.
 *
 * IEEE semantics throughout (never -ffast-math): exp(−inf) == 0 exactly, so
 * masked scores (−INFINITY) come out as weight 0 with no special case.
 */
#ifndef ATTENTION_VEXP_H
#define ATTENTION_VEXP_H

#include <stddef.h>

/* y[x] = exp(x[x])        count floats; y may alias x. ≤ 1 ulp. */
void attn_vexp(float *y, const float *x, size_t count);

/* max of x[0 … count), −INFINITY when count == 0; x holds no NaN. */
float attn_vmax(const float *x, size_t count);

/* y[k] = exp(x[k] − shift), returns Σ_k y[k]        count floats; y may
 * alias x. shift is finite; x[k] == −INFINITY gives exactly 0. */
float attn_vexp_shift_sum(float *y, const float *x, float shift, size_t count);

/* y[k] *= a        count floats */
void attn_vscale(float *y, float a, size_t count);

/* y[k] = cap · tanh(y[k] / cap), soft-capping        count floats; cap > 0.
 * ≤ 1 ulp in the tanh; ±inf gives ±cap, NaN stays NaN. */
void attn_vsoftcap(float *y, float cap, size_t count);

/* Name of the SIMD path attn_vexp takes on this CPU ("avx2", "sse", "scalar"),
 * for benchmarks and logs. */
const char *attn_vexp_path(void);

#endif
