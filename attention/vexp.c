/*
 * vexp.c — the softmax's row primitives on SLEEF's vector exp (vexp.h).
 *
 * Three paths, chosen per call by CPU feature (no global state of ours):
 *
 *   avx2     8 lanes: SLEEF's expf8_u10avx2 inlined (exp8, below, the
 *            library's bits), max/sum/scale by AVX intrinsics. Compiled with a target attribute
 * (the rest of the project stays baseline x86-64), entered only after
 *            __builtin_cpu_supports says avx2 and fma.
 *   sse      4 lanes: SLEEF's own dispatcher Sleef_expf4_u10 (SSE2 or
 *            SSE4.1 inside), plain C for the rest.
 *   scalar   not x86: Sleef_expf_u10 per element.
 *
 * A row's tail (count not a multiple of the width) is padded with
 * −INFINITY (AVX2: a masked load and store, nothing read or written past
 * the row; SSE: a small buffer): exp(−inf) == 0 adds nothing to the sum
 * and −inf never wins a max, so the tail needs no separate scalar code.
 * Every path is the same u10 algorithm (≤ 1 ulp); results may differ in the
 * last bit between paths, never by more than the bound.
 */
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "attention/vexp.h"

#if defined(__x86_64__) || defined(__i386__)
#define ATTN_VEXP_X86 1
#endif

/* ---- avx2 + fma ---------------------------------------------------------- */

#ifdef ATTN_VEXP_X86
/* Each AVX2 function carries the target itself (an attribute, which gcc and
 * clang both honour; clang ignores `#pragma GCC target`), so the rest of the
 * file stays baseline x86-64 and runs anywhere. */
#define AVX2_FMA __attribute__((target("avx2,fma")))

/* sleef.h declares the 256-bit functions only when AVX is on for the whole
 * file; this is its prototype, under the same target as its callers. */
AVX2_FMA __m256 Sleef_tanhf8_u10avx2(__m256);

/* SLEEF 3.5.1's expf8_u10avx2 (Copyright Naoki Shibata and contributors,
 * Boost Software License 1.0, as libsleef3 itself), inlined: its
 * operations in its order, on its constants (the bits of libsleef's own,
 * read from its code), so that every result is the library's to the bit,
 * ≤ 1 ulp (tests check both). Called out of line it took 88 µs where this
 * takes 56 on GPT-2 n = 128's ~99,000 scores, a fifth more per vector than
 * the row's other passes together: the call keeps the loop from
 * overlapping one vector's polynomial with the next's. */
AVX2_FMA static inline __m256 exp8(__m256 d) {
    const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(d, _mm256_set1_ps(0x1.715476p+0f)));
    const __m256 qf = _mm256_cvtepi32_ps(q);
    __m256 s = _mm256_fmadd_ps(qf, _mm256_set1_ps(-0x1.62e4p-1f), d);
    s = _mm256_fmadd_ps(qf, _mm256_set1_ps(-0x1.7f7d1cp-20f), s);
    __m256 u = _mm256_fmadd_ps(s, _mm256_set1_ps(0x1.a057b4p-13f), _mm256_set1_ps(0x1.6d2d92p-10f));
    u = _mm256_fmadd_ps(u, s, _mm256_set1_ps(0x1.11114cp-7f));
    u = _mm256_fmadd_ps(u, s, _mm256_set1_ps(0x1.5554f4p-5f));
    u = _mm256_fmadd_ps(u, s, _mm256_set1_ps(0x1.555556p-3f));
    u = _mm256_fmadd_ps(u, s, _mm256_set1_ps(0x1p-1f));
    u = _mm256_add_ps(_mm256_fmadd_ps(u, _mm256_mul_ps(s, s), s), _mm256_set1_ps(1.0f));
    /* u · 2^q as two factors 2^⌊q/2⌋ · 2^(q − ⌊q/2⌋), each a normal float */
    const __m256i one = _mm256_set1_epi32(0x3f800000), m = _mm256_srai_epi32(q, 1);
    u = _mm256_mul_ps(u, _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(m, 23), one)));
    u = _mm256_mul_ps(u, _mm256_castsi256_ps(
                             _mm256_add_epi32(_mm256_slli_epi32(_mm256_sub_epi32(q, m), 23), one)));
    u = _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_set1_ps(-104.0f), _CMP_LT_OS), u);
    return _mm256_blendv_ps(u, _mm256_set1_ps(INFINITY),
                            _mm256_cmp_ps(_mm256_set1_ps(100.0f), d, _CMP_LT_OS));
}

AVX2_FMA static float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

AVX2_FMA static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* The lanes of a tail of rem < 8 floats: all ones in lanes 0 … rem−1. */
AVX2_FMA static __m256i tail_mask8(size_t rem) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), lane);
}

/* x[0 … rem), the other lanes −inf: a masked load (no read past the row),
 * not a copy through memory */
AVX2_FMA static __m256 load_tail8(const float *x, size_t rem) {
    const __m256i mask = tail_mask8(rem);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x, mask),
                            _mm256_castsi256_ps(mask));
}

AVX2_FMA static void store_tail8(float *y, __m256 v, size_t rem) {
    _mm256_maskstore_ps(y, tail_mask8(rem), v);
}

AVX2_FMA static float vmax_avx2(const float *x, size_t count) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    size_t k = 0;
    for (; k + 16 <= count; k += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + k));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + k + 8));
    }
    for (; k + 8 <= count; k += 8)
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + k));
    if (k < count) m1 = _mm256_max_ps(m1, load_tail8(x + k, count - k));
    return hmax8(_mm256_max_ps(m0, m1));
}

AVX2_FMA static float vexp_shift_sum_avx2(float *y, const float *x, float shift, size_t count) {
    const __m256 sh = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 8 <= count; k += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + k), sh));
        _mm256_storeu_ps(y + k, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (k < count) {
        __m256 e = exp8(_mm256_sub_ps(load_tail8(x + k, count - k), sh));
        store_tail8(y + k, e, count - k);
        acc = _mm256_add_ps(acc, e); /* the pad's lanes are exp(−inf) == 0 */
    }
    return hsum8(acc);
}

AVX2_FMA static void vscale_avx2(float *y, float a, size_t count) {
    const __m256 va = _mm256_set1_ps(a);
    size_t k = 0;
    for (; k + 8 <= count; k += 8)
        _mm256_storeu_ps(y + k, _mm256_mul_ps(_mm256_loadu_ps(y + k), va));
    for (; k < count; k++)
        y[k] *= a;
}

AVX2_FMA static void vsoftcap_avx2(float *y, float cap, size_t count) {
    const __m256 c = _mm256_set1_ps(cap), inv = _mm256_set1_ps(1.0f / cap);
    size_t k = 0;
    for (; k + 8 <= count; k += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(y + k), inv);
        _mm256_storeu_ps(y + k, _mm256_mul_ps(c, Sleef_tanhf8_u10avx2(x)));
    }
    for (; k < count; k++)
        y[k] = cap * Sleef_tanhf_u10(y[k] * (1.0f / cap));
}

static int have_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* ---- sse (SLEEF's 4-wide dispatcher) -------------------------------------- */

static float vexp_shift_sum_sse(float *y, const float *x, float shift, size_t count) {
    const __m128 sh = _mm_set1_ps(shift);
    __m128 acc = _mm_setzero_ps();
    size_t k = 0;
    for (; k + 4 <= count; k += 4) {
        __m128 e = Sleef_expf4_u10(_mm_sub_ps(_mm_loadu_ps(x + k), sh));
        _mm_storeu_ps(y + k, e);
        acc = _mm_add_ps(acc, e);
    }
    if (k < count) {
        float pad[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(pad, x + k, (count - k) * sizeof(float));
        __m128 e = Sleef_expf4_u10(_mm_sub_ps(_mm_loadu_ps(pad), sh));
        _mm_storeu_ps(pad, e);
        memcpy(y + k, pad, (count - k) * sizeof(float));
        acc = _mm_add_ps(acc, e);
    }
    float lanes[4];
    _mm_storeu_ps(lanes, acc);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}
#endif /* ATTN_VEXP_X86 */

/* ---- the entry points ------------------------------------------------------- */

float attn_vmax(const float *x, size_t count) {
#ifdef ATTN_VEXP_X86
    if (have_avx2()) return vmax_avx2(x, count);
#endif
    float m = -INFINITY;
    for (size_t k = 0; k < count; k++)
        m = x[k] > m ? x[k] : m;
    return m;
}

float attn_vexp_shift_sum(float *y, const float *x, float shift, size_t count) {
#ifdef ATTN_VEXP_X86
    if (have_avx2()) return vexp_shift_sum_avx2(y, x, shift, count);
    return vexp_shift_sum_sse(y, x, shift, count);
#else
    float sum = 0.0f;
    for (size_t k = 0; k < count; k++)
        sum += y[k] = Sleef_expf_u10(x[k] - shift);
    return sum;
#endif
}

void attn_vscale(float *y, float a, size_t count) {
#ifdef ATTN_VEXP_X86
    if (have_avx2()) {
        vscale_avx2(y, a, count);
        return;
    }
#endif
    for (size_t k = 0; k < count; k++)
        y[k] *= a;
}

void attn_vsoftcap(float *y, float cap, size_t count) {
#ifdef ATTN_VEXP_X86
    if (have_avx2()) {
        vsoftcap_avx2(y, cap, count);
        return;
    }
#endif
    /* y / cap as y · (1/cap) on every path, so that the paths agree */
    for (size_t k = 0; k < count; k++)
        y[k] = cap * Sleef_tanhf_u10(y[k] * (1.0f / cap));
}

void attn_vexp(float *y, const float *x, size_t count) {
    (void)attn_vexp_shift_sum(y, x, 0.0f, count);
}

const char *attn_vexp_path(void) {
#ifdef ATTN_VEXP_X86
    return have_avx2() ? "avx2" : "sse";
#else
    return "scalar";
#endif
}
