/*
 * naive.c — the float32 reference of the attention block (naive.h).
 *
 * For every head i in 0 … h−1, in turn, with one set of per-head scratch:
 * Q_i, and K, V of its K/V head u = i / (h/g), by triple loops over the
 * packed w_qkv (a K/V head is recomputed for each head of its group: the
 * reference is plain, not fast), S = scale·Q·Kᵀ, the mask as
 * −INFINITY, a stable softmax with expf, Z_i = P·V into the columns
 * i·dh … of Z. Per-head outputs are copied to every slot j listing head i.
 * Then ΔE = Z·Wo + bo (Z when Wo is absent) and E' = E + ΔE.
 *
 * Scratch (floats): Q, K, V  3 · n × dh;  S, P  2 · n × n;  Z  n × hd;
 * ΔE  n × dm.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/naive.h"

static int allowed(const attn_mask *m, size_t n, size_t q, size_t k) {
    switch (m->kind) {
    case ATTN_MASK_CAUSAL: return k <= q;
    case ATTN_MASK_NONE: return 1;
    case ATTN_MASK_CUSTOM: return m->allowed[q * n + k] != 0;
    }
    return 0;
}

size_t attn_naive_scratch_floats(size_t n, size_t dm, size_t h, size_t dh) {
    /* Every factor below SIZE_MAX/8 keeps all products and sums in range. */
    const size_t lim = (size_t)1 << (sizeof(size_t) * 4 - 2);
    if (n >= lim || dm >= lim || h >= lim || dh >= lim || h * dh >= lim) return SIZE_MAX;
    return 3 * n * dh + 2 * n * n + n * h * dh + n * dm;
}

/*
 * out: as attn_compute;  scratch: attn_naive_scratch_floats floats;
 * E: n × dm;  w_qkv: dm × (hd + 2gd);  w_o: hd × dm
 */
void attn_compute_naive(const attn_output *out, float *scratch, const attn_input *in) {
    const attn_weights *w = in->weights;
    const size_t n = in->n_tokens, dm = w->d_model, h = w->n_heads, dh = w->d_head;
    const size_t g = w->n_kv_heads ? w->n_kv_heads : h;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const float *E = in->embeddings;
    float *Q = scratch, *K = Q + n * dh, *V = K + n * dh;
    float *S = V + n * dh, *P = S + n * n, *Z = P + n * n, *D = Z + n * hd;

    for (size_t i = 0; i < h; i++) {
        /* Q, K, V: n × dh, columns i·dh, hd + u·dh, hd + gd + u·dh of E·w_qkv */
        const size_t u = i / (h / g);
        for (size_t t = 0; t < n; t++) {
            for (size_t c = 0; c < dh; c++) {
                size_t cq = i * dh + c, ck = hd + u * dh + c, cv = hd + gd + u * dh + c;
                float q = 0.0f, k = 0.0f, v = 0.0f;
                for (size_t x = 0; x < dm; x++) {
                    q += E[t * dm + x] * w->w_qkv[x * ld + cq];
                    k += E[t * dm + x] * w->w_qkv[x * ld + ck];
                    v += E[t * dm + x] * w->w_qkv[x * ld + cv];
                }
                if (w->b_qkv) q += w->b_qkv[cq], k += w->b_qkv[ck], v += w->b_qkv[cv];
                Q[t * dh + c] = q, K[t * dh + c] = k, V[t * dh + c] = v;
            }
        }
        /* S: n × n = scale · Q · Kᵀ, −inf where masked */
        for (size_t q = 0; q < n; q++) {
            for (size_t k = 0; k < n; k++) {
                float dot = 0.0f;
                for (size_t c = 0; c < dh; c++)
                    dot += Q[q * dh + c] * K[k * dh + c];
                S[q * n + k] = allowed(&in->mask, n, q, k) ? in->scale * dot : -INFINITY;
            }
        }
        /* P: n × n, row softmax; a row with nothing allowed is all zeros */
        for (size_t q = 0; q < n; q++) {
            float max = -INFINITY, sum = 0.0f;
            for (size_t k = 0; k < n; k++)
                if (S[q * n + k] > max) max = S[q * n + k];
            for (size_t k = 0; k < n; k++) {
                float s = S[q * n + k];
                P[q * n + k] = (s == -INFINITY) ? 0.0f : expf(s - max);
                sum += P[q * n + k];
            }
            for (size_t k = 0; k < n; k++)
                P[q * n + k] = sum > 0.0f ? P[q * n + k] / sum : 0.0f;
        }
        /* Z[:, i·dh …]: n × dh = P · V */
        for (size_t q = 0; q < n; q++) {
            for (size_t c = 0; c < dh; c++) {
                float z = 0.0f;
                for (size_t k = 0; k < n; k++)
                    z += P[q * n + k] * V[k * dh + c];
                Z[q * hd + i * dh + c] = z;
            }
        }
        for (size_t j = 0; j < in->n_heads_out; j++) {
            if (in->heads[j] != i) continue;
            if (out->q) memcpy(out->q + j * n * dh, Q, n * dh * sizeof(float));
            if (out->k) memcpy(out->k + j * n * dh, K, n * dh * sizeof(float));
            if (out->v) memcpy(out->v + j * n * dh, V, n * dh * sizeof(float));
            if (out->scores) memcpy(out->scores + j * n * n, S, n * n * sizeof(float));
            if (out->patterns) memcpy(out->patterns + j * n * n, P, n * n * sizeof(float));
            if (out->head_outputs)
                for (size_t t = 0; t < n; t++)
                    memcpy(out->head_outputs + j * n * dh + t * dh, Z + t * hd + i * dh,
                           dh * sizeof(float));
        }
    }
    /* D: n × dm = Z · w_o + b_o (Z itself when w_o is absent: hd == dm) */
    for (size_t t = 0; t < n; t++) {
        for (size_t c = 0; c < dm; c++) {
            float d = 0.0f;
            if (w->w_o)
                for (size_t x = 0; x < hd; x++)
                    d += Z[t * hd + x] * w->w_o[x * dm + c];
            else
                d = Z[t * hd + c];
            D[t * dm + c] = w->b_o ? d + w->b_o[c] : d;
        }
    }
    if (out->delta) memcpy(out->delta, D, n * dm * sizeof(float));
    if (out->embeddings)
        for (size_t x = 0; x < n * dm; x++)
            out->embeddings[x] = E[x] + D[x];
}
