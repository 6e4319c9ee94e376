/*
 * tensor.c — a tensor's shape as text and its values as float32
 * (tensor.h). The half and bfloat16 conversions are exact: every half and
 * every bfloat16 is a float32, so no rounding happens here.
 */
#include "store/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *store_tensor_shape_text(const store_tensor *t, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < t->rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? ", " : "", t->shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
    return buf;
}

static float bits_to_f32(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float store_f16_to_f32(unsigned short h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;

    if (exp == 0x1F) /* inf, or NaN with its payload kept */
        return bits_to_f32(sign | 0x7F800000u | mant << 13);
    if (exp != 0) /* normal: rebias 15 → 127 */
        return bits_to_f32(sign | (exp + 112) << 23 | mant << 13);
    if (mant == 0) return bits_to_f32(sign); /* ±0 */
    /* Subnormal: mant · 2^-24, a normal float; shift it up until its leading
     * bit reaches the implicit position. */
    int e = -1;
    do {
        mant <<= 1;
        e++;
    } while ((mant & 0x400u) == 0);
    return bits_to_f32(sign | (uint32_t)(112 - e) << 23 | (mant & 0x3FFu) << 13);
}

float store_bf16_to_f32(unsigned short b) {
    return bits_to_f32((uint32_t)b << 16);
}

int store_tensor_read_f32(float *out, const store_tensor *t, const char *path, attn_error *err) {
    /* The data may be unaligned (the header length is any number): bytes. */
    const unsigned char *src = t->data;
    if (t->dtype == STORE_DTYPE_F32) {
        if (t->count) memcpy(out, src, t->count * sizeof(float));
    } else {
        float (*convert)(unsigned short) =
            t->dtype == STORE_DTYPE_F16 ? store_f16_to_f32 : store_bf16_to_f32;
        for (size_t i = 0; i < t->count; i++)
            out[i] = convert((unsigned short)(src[2 * i] | src[2 * i + 1] << 8));
    }
    return store_tensor_check_finite(out, t, path, err);
}

int store_tensor_check_finite(const float *v, const store_tensor *t, const char *path,
                              attn_error *err) {
    for (size_t i = 0; i < t->count; i++)
        if (!isfinite(v[i]))
            return store_error_set(
                err, path, "tensor '%s' holds a non-finite value (%s) at element %zu", t->name,
                isnan(v[i]) ? "NaN"
                : v[i] > 0  ? "inf"
                            : "-inf",
                i);
    return 0;
}
