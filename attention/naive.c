/*
 * naive.c — the float32 reference of the attention block (naive.h).
 *
 * For every head i in 0 … h−1, in turn, with one set of per-head scratch:
 * Q_i from E, and K, V of its K/V head u = i / (h/g) from E or the context,
 * by triple loops over the weights (a K/V head is recomputed for each head
 * of its group: the reference is plain, not fast); RoPE row by row, its
 * angle p·f_t in double; S = scale·Q·Kᵀ, soft-capped, minus ALiBi's
 * m_i·|p_q − p_k|, −INFINITY where the mask, the window or the chunk
 * removes the key; a stable softmax with expf, the head's sink in its max
 * and sum, Z_i = P·V into the columns i·dh … of Z.
 * Per-head outputs are copied to every slot j listing head i. Then
 * ΔE = Z·Wo + bo (Z when Wo is absent) and E' = E + ΔE.
 *
 * Scratch (floats): Q  n × dh;  K, V  2 · m × dh;  S, P  2 · n × m;
 * Z  n × hd;  ΔE  n × dm;  RoPE's frequencies  tables · dims/2 doubles
 * (LONGROPE's two, the sequence's own picked by its positions; cos and sin
 * times the attention factor, as the engine's table).
 *
 * attn_stack_naive, below, is the same block in double (layer64), its E_l
 * kept in double from layer to layer: the reference of a stack's tests.
 *
 * Norms and temperature, written plainly apart from norm.c: the rows Q, K
 * and V are projected from are N(E) (a context's stay as they are);
 * qk_norm takes each head's rows of Q and K right after their biases
 * (scope all: by the RMS of the whole projection's row, found by projecting
 * that row whole once more); the temperature multiplies Q's rows after
 * RoPE; post_norm takes ΔE's rows after b_o.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/naive.h"
#include "attention/plan.h"

/* ---- norms and temperature ------------------------------------------------ */

/* y ← N(x), d values (y may be x), in double; float32 rows in and out. */
static void norm_f(float *y, const float *x, size_t d, const attn_norm *nm) {
    double mean = 0.0, var = 0.0;
    if (nm->type == ATTN_NORM_LAYER) {
        for (size_t c = 0; c < d; c++)
            mean += x[c];
        mean /= (double)d;
    }
    for (size_t c = 0; c < d; c++)
        var += ((double)x[c] - mean) * ((double)x[c] - mean);
    double r = 1.0 / sqrt(var / (double)d + nm->eps);
    for (size_t c = 0; c < d; c++) {
        double v = ((double)x[c] - mean) * r;
        if (nm->type == ATTN_NORM_LAYER) {
            if (nm->weight) v *= nm->weight[c];
            if (nm->bias) v += nm->bias[c];
        } else if (nm->weight) {
            v *= nm->offset + nm->weight[c];
        }
        y[c] = (float)v;
    }
}

/* The same in double. */
static void norm_d(double *y, const double *x, size_t d, const attn_norm *nm) {
    double mean = 0.0, var = 0.0;
    if (nm->type == ATTN_NORM_LAYER) {
        for (size_t c = 0; c < d; c++)
            mean += x[c];
        mean /= (double)d;
    }
    for (size_t c = 0; c < d; c++)
        var += (x[c] - mean) * (x[c] - mean);
    double r = 1.0 / sqrt(var / (double)d + nm->eps);
    for (size_t c = 0; c < d; c++) {
        double v = (x[c] - mean) * r;
        if (nm->type == ATTN_NORM_LAYER) {
            if (nm->weight) v *= nm->weight[c];
            if (nm->bias) v += nm->bias[c];
        } else if (nm->weight) {
            v *= nm->offset + nm->weight[c];
        }
        y[c] = v;
    }
}

/* 1/sqrt(mean(a²) + eps) of a = x · W + b over `cols` columns: one row of a
 * whole projection, for qk_norm's scope all. x: dx values, xf's or xd's. */
static double rms_all(const float *xf, const double *xd, size_t dx, const float *w, size_t ldw,
                      const float *b, size_t cols, double eps) {
    double sum = 0.0;
    for (size_t col = 0; col < cols; col++) {
        double a = b ? b[col] : 0.0;
        for (size_t x = 0; x < dx; x++)
            a += (xf ? (double)xf[x] : xd[x]) * w[x * ldw + col];
        sum += a * a;
    }
    return 1.0 / sqrt(sum / (double)cols + eps);
}

/* One row of one head of Q or K through qk_norm: its head's own RMS (r < 0)
 * or the whole row's r; weights from column `col0` (scope all: the head's
 * place in the projection). */
static void qk_row_d(double *y, size_t dh, const attn_norm *nm, double r, size_t col0) {
    if (r < 0.0) {
        norm_d(y, y, dh, nm);
        return;
    }
    for (size_t c = 0; c < dh; c++)
        y[c] *= nm->weight ? r * (nm->offset + nm->weight[col0 + c]) : r;
}

static double temperature(const attn_temperature *t, double p) {
    return log(floor((p + 1.0) / t->floor_scale) + 1.0) * t->attn_scale + 1.0;
}

/* Position of token t: the input's, or t. */
static double position(const attn_input *in, size_t t) {
    return in->positions ? (double)in->positions[t] : (double)t;
}

/* Whether query q may attend to key k: the mask, then the window, then
 * the chunk (⌊p_q / c⌋ = ⌊p_k / c⌋, the positions being integers). */
static int allowed(const attn_input *in, size_t m, size_t q, size_t k) {
    const attn_mask *mk = &in->mask;
    int ok = mk->kind == ATTN_MASK_CAUSAL   ? k <= q
             : mk->kind == ATTN_MASK_CUSTOM ? mk->allowed[q * m + k] != 0
                                            : 1;
    size_t w = in->weights->window, c = in->weights->chunk;
    if (ok && w && !in->context) ok = fabs(position(in, q) - position(in, k)) < (double)w;
    if (ok && c && !in->context)
        ok = floor(position(in, q) / (double)c) == floor(position(in, k) / (double)c);
    return ok;
}

/* Head i's sink logit, or −INFINITY: none. */
static double sink_of(const attn_weights *w, size_t i) {
    return w->sinks ? (double)w->sinks[i] : -INFINITY;
}

size_t attn_naive_scratch_floats(size_t n, size_t dm, size_t h, size_t dh) {
    /* Every factor below SIZE_MAX/8 keeps all products and sums in range. */
    const size_t lim = (size_t)1 << (sizeof(size_t) * 4 - 2);
    if (n >= lim || dm >= lim || h >= lim || dh >= lim || h * dh >= lim) return SIZE_MAX;
    return 3 * n * dh + 2 * n * n + n * h * dh + n * dm;
}

size_t attn_naive_scratch_need(const attn_input *in) {
    const attn_weights *w = in->weights;
    const size_t n = in->n_tokens, m = in->context ? in->n_context : n;
    const size_t lim = (size_t)1 << (sizeof(size_t) * 4 - 2);
    const size_t dm = w->d_model, h = w->n_heads, dh = w->d_head;
    if (n >= lim || m >= lim || dm >= lim || h >= lim || dh >= lim || h * dh >= lim)
        return SIZE_MAX;
    /* RoPE's doubles take 2 floats each, and one more aligns them; then N(E) */
    return n * dh + 2 * m * dh + 2 * n * m + n * h * dh + n * dm +
           attn_rope_tables(&w->rope) * (w->rope.dims / 2) * 2 + 1 +
           (w->norm.type != ATTN_NORM_NONE ? n * dm : 0);
}

/* x: the row of one head's Q or K at position p, rotated in place. */
static void rotate(float *x, double p, const attn_rope *rope, const double *freq, double af) {
    const size_t half = rope->dims / 2;
    for (size_t t = 0; t < half; t++) {
        size_t ia = rope->style == ATTN_ROPE_HALF ? t : 2 * t;
        size_t ib = rope->style == ATTN_ROPE_HALF ? t + half : 2 * t + 1;
        float c = (float)(af * cos(p * freq[t])), s = (float)(af * sin(p * freq[t]));
        float a = x[ia], b = x[ib];
        x[ia] = a * c - b * s;
        x[ib] = a * s + b * c;
    }
}

/*
 * out: as attn_compute;  scratch: attn_naive_scratch_need(in) floats;
 * E: n × dm;  C: m × dc;  w_qkv: dm × (hd + 2gd) (Q alone, dm × hd, with
 * w_kv: dc × 2gd);  w_o: hd × dm
 */
void attn_compute_naive(const attn_output *out, float *scratch, const attn_input *in) {
    const attn_weights *w = in->weights;
    const size_t n = in->n_tokens, dm = w->d_model, h = w->n_heads, dh = w->d_head;
    const size_t g = w->n_kv_heads ? w->n_kv_heads : h;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const int cross = in->context != NULL;
    const size_t m = cross ? in->n_context : n;
    const float *E = in->embeddings; /* N(E) with a norm, below */
    /* The weights of Q, and of K and V: columns, strides and rows */
    const float *wq = w->w_qkv, *wkv = w->w_kv ? w->w_kv : w->w_qkv + hd;
    const float *bq = w->b_qkv, *bkv = w->w_kv ? w->b_kv : w->b_qkv ? w->b_qkv + hd : NULL;
    const size_t ldwq = w->w_kv ? hd : ld, ldwkv = w->w_kv ? 2 * gd : ld;
    const size_t dx = cross && w->w_kv ? w->d_context : dm;
    const int rope = w->rope.dims && !cross;
    float *Q = scratch, *K = Q + n * dh, *V = K + m * dh;
    float *S = V + m * dh, *P = S + n * m, *Z = P + n * m, *D = Z + n * hd;
    float *end = D + n * dm;
    if ((uintptr_t)end % sizeof(double)) end++; /* the spare float of the need */
    double *freq = (double *)(void *)end;       /* tables · dims/2 doubles: 2 floats each */
    float *after_freq = (float *)(void *)(freq + attn_rope_tables(&w->rope) * (w->rope.dims / 2));
    const double af = attn_rope_attention_factor(&w->rope);
    if (rope) {
        attn_rope_frequencies(freq, &w->rope);
        freq += w->rope.dims / 2 * attn_rope_table_of(&w->rope, in->positions, n);
    }
    if (w->norm.type != ATTN_NORM_NONE) { /* N(E): n × dm, after RoPE's doubles */
        float *NE = after_freq;
        for (size_t t = 0; t < n; t++)
            norm_f(NE + t * dm, E + t * dm, dm, &w->norm);
        if (out->normed) memcpy(out->normed, NE, n * dm * sizeof(float));
        E = NE;
    }
    const float *X = cross ? in->context : E; /* K and V come from X */
    const attn_qk_norm *qn = &w->qk_norm;
    const attn_temperature *temp = &w->temperature;

    for (size_t i = 0; i < h; i++) {
        const size_t u = i / (h / g);
        /* Q: n × dh, columns i·dh of E·Wq; K, V: m × dh, columns u·dh and
         * gd + u·dh of X·Wkv */
        for (size_t t = 0; t < n; t++) {
            for (size_t c = 0; c < dh; c++) {
                float q = 0.0f;
                for (size_t x = 0; x < dm; x++)
                    q += E[t * dm + x] * wq[x * ldwq + i * dh + c];
                Q[t * dh + c] = bq ? q + bq[i * dh + c] : q;
            }
        }
        for (size_t t = 0; t < m; t++) {
            for (size_t c = 0; c < dh; c++) {
                size_t ck = u * dh + c, cv = gd + u * dh + c;
                float k = 0.0f, v = 0.0f;
                for (size_t x = 0; x < dx; x++) {
                    k += X[t * dx + x] * wkv[x * ldwkv + ck];
                    v += X[t * dx + x] * wkv[x * ldwkv + cv];
                }
                if (bkv) k += bkv[ck], v += bkv[cv];
                K[t * dh + c] = k, V[t * dh + c] = v;
            }
        }
        /* qk_norm, each row of the head: by its own RMS, or the whole row's */
        for (size_t t = 0; qn->q.type != ATTN_NORM_NONE && t < n; t++) {
            if (!qn->all) {
                norm_f(Q + t * dh, Q + t * dh, dh, &qn->q);
                continue;
            }
            double r = rms_all(E + t * dm, NULL, dm, wq, ldwq, bq, hd, qn->q.eps);
            for (size_t c = 0; c < dh; c++)
                Q[t * dh + c] =
                    (float)(Q[t * dh + c] *
                            (qn->q.weight ? r * (qn->q.offset + qn->q.weight[i * dh + c]) : r));
        }
        for (size_t t = 0; qn->k.type != ATTN_NORM_NONE && t < m; t++) {
            if (!qn->all) {
                norm_f(K + t * dh, K + t * dh, dh, &qn->k);
                continue;
            }
            double r = rms_all(X + t * dx, NULL, dx, wkv, ldwkv, bkv, gd, qn->k.eps);
            for (size_t c = 0; c < dh; c++)
                K[t * dh + c] =
                    (float)(K[t * dh + c] *
                            (qn->k.weight ? r * (qn->k.offset + qn->k.weight[u * dh + c]) : r));
        }
        for (size_t t = 0; temp->floor_scale > 0.0 && !rope && t < n; t++)
            for (size_t c = 0; c < dh; c++)
                Q[t * dh + c] *= (float)temperature(temp, position(in, t));
        for (size_t j = 0; j < in->n_heads_out; j++) {
            if (in->heads[j] != i) continue;
            if (out->q_raw) memcpy(out->q_raw + j * n * dh, Q, n * dh * sizeof(float));
            if (out->k_raw) memcpy(out->k_raw + j * m * dh, K, m * dh * sizeof(float));
        }
        for (size_t t = 0; rope && t < n; t++) {
            rotate(Q + t * dh, position(in, t), &w->rope, freq, af);
            rotate(K + t * dh, position(in, t), &w->rope, freq, af);
            for (size_t c = 0; temp->floor_scale > 0.0 && c < dh; c++)
                Q[t * dh + c] *= (float)temperature(temp, position(in, t));
        }
        /* S: n × m = scale · Q · Kᵀ, soft-capped, minus ALiBi; −inf where
         * the mask or the window removes the key */
        for (size_t q = 0; q < n; q++) {
            for (size_t k = 0; k < m; k++) {
                float dot = 0.0f;
                for (size_t c = 0; c < dh; c++)
                    dot += Q[q * dh + c] * K[k * dh + c];
                float sc = in->scale * dot;
                if (w->softcap != 0.0f) sc = w->softcap * tanhf(sc / w->softcap);
                if (w->alibi && !cross)
                    sc -= w->alibi[i] * (float)fabs(position(in, q) - position(in, k));
                S[q * m + k] = allowed(in, m, q, k) ? sc : -INFINITY;
            }
        }
        /* P: n × m, row softmax, the head's sink in the max and the sum;
         * a row with nothing allowed is all zeros */
        const float sink = (float)sink_of(w, i);
        for (size_t q = 0; q < n; q++) {
            float max = -INFINITY, sum = 0.0f;
            for (size_t k = 0; k < m; k++)
                if (S[q * m + k] > max) max = S[q * m + k];
            const int alive = max != -INFINITY;
            if (alive && sink > max) max = sink;
            for (size_t k = 0; k < m; k++) {
                float sc = S[q * m + k];
                P[q * m + k] = (sc == -INFINITY) ? 0.0f : expf(sc - max);
                sum += P[q * m + k];
            }
            if (alive && sink != -INFINITY) sum += expf(sink - max);
            for (size_t k = 0; k < m; k++)
                P[q * m + k] = sum > 0.0f ? P[q * m + k] / sum : 0.0f;
        }
        /* Z[:, i·dh …]: n × dh = P · V */
        for (size_t q = 0; q < n; q++) {
            for (size_t c = 0; c < dh; c++) {
                float z = 0.0f;
                for (size_t k = 0; k < m; k++)
                    z += P[q * m + k] * V[k * dh + c];
                Z[q * hd + i * dh + c] = z;
            }
        }
        for (size_t j = 0; j < in->n_heads_out; j++) {
            if (in->heads[j] != i) continue;
            if (out->q) memcpy(out->q + j * n * dh, Q, n * dh * sizeof(float));
            if (out->k) memcpy(out->k + j * m * dh, K, m * dh * sizeof(float));
            if (out->v) memcpy(out->v + j * m * dh, V, m * dh * sizeof(float));
            if (out->scores) memcpy(out->scores + j * n * m, S, n * m * sizeof(float));
            if (out->patterns) memcpy(out->patterns + j * n * m, P, n * m * sizeof(float));
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
        if (w->post_norm.type != ATTN_NORM_NONE) norm_f(D + t * dm, D + t * dm, dm, &w->post_norm);
    }
    if (out->delta) memcpy(out->delta, D, n * dm * sizeof(float));
    if (out->embeddings)
        for (size_t x = 0; x < n * dm; x++)
            out->embeddings[x] = in->embeddings[x] + D[x];
}

/* ---- the float64 reference of a stack ------------------------------------- */

size_t attn_stack_naive_scratch(const attn_input *in, const attn_stack *stack) {
    const attn_weights *w = stack->layers[0];
    const size_t n = in->n_tokens, m = in->context ? in->n_context : n;
    const size_t lim = (size_t)1 << (sizeof(size_t) * 4 - 2);
    const size_t dm = w->d_model, h = w->n_heads, dh = w->d_head;
    if (n >= lim || m >= lim || dm >= lim || h >= lim || dh >= lim || h * dh >= lim)
        return SIZE_MAX;
    size_t freqs = 0;
    for (size_t l = 0; l < stack->n_layers; l++) {
        const attn_rope *rope = &stack->layers[l]->rope;
        if (attn_rope_tables(rope) * (rope->dims / 2) > freqs)
            freqs = attn_rope_tables(rope) * (rope->dims / 2);
    }
    /* E_l, E_{l+1}, Q, K, V, S, P, Z, ΔE, N(E_l), RoPE's frequencies */
    return 4 * n * dm + n * dh + 2 * m * dh + 2 * n * m + n * h * dh + freqs;
}

/* One layer in double: D (n × dm) = ΔE of X (n × dm) through w; per-head
 * results kept where lo asks. */
static void layer64(const attn_naive_layer *lo, double *D, double *scratch, const double *X,
                    const attn_input *in, const attn_weights *w, double scale) {
    const size_t n = in->n_tokens, dm = w->d_model, h = w->n_heads, dh = w->d_head;
    const size_t g = w->n_kv_heads ? w->n_kv_heads : h;
    const size_t hd = h * dh, gd = g * dh, ld = hd + 2 * gd;
    const int cross = in->context != NULL;
    const size_t m = cross ? in->n_context : n;
    const float *wq = w->w_qkv, *wkv = w->w_kv ? w->w_kv : w->w_qkv + hd;
    const float *bq = w->b_qkv, *bkv = w->w_kv ? w->b_kv : w->b_qkv ? w->b_qkv + hd : NULL;
    const size_t ldwq = w->w_kv ? hd : ld, ldwkv = w->w_kv ? 2 * gd : ld;
    const size_t dx = cross && w->w_kv ? w->d_context : dm;
    const int rope = w->rope.dims && !cross;
    double *Q = scratch, *K = Q + n * dh, *V = K + m * dh, *S = V + m * dh, *P = S + n * m;
    double *Z = P + n * m, *NX = Z + n * hd, *freq = NX + n * dm;
    const double af = attn_rope_attention_factor(&w->rope);
    if (rope) {
        attn_rope_frequencies(freq, &w->rope);
        freq += w->rope.dims / 2 * attn_rope_table_of(&w->rope, in->positions, n);
    }
    if (w->norm.type != ATTN_NORM_NONE) { /* Q, K and V from N(X) */
        for (size_t t = 0; t < n; t++)
            norm_d(NX + t * dm, X + t * dm, dm, &w->norm);
        if (lo && lo->normed) memcpy(lo->normed, NX, n * dm * sizeof(double));
        X = NX;
    }
    const attn_qk_norm *qn = &w->qk_norm;
    const attn_temperature *temp = &w->temperature;
    for (size_t i = 0; i < h; i++) {
        const size_t u = i / (h / g);
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < dh; c++) {
                double q = bq ? bq[i * dh + c] : 0.0;
                for (size_t x = 0; x < dm; x++)
                    q += X[t * dm + x] * wq[x * ldwq + i * dh + c];
                Q[t * dh + c] = q;
            }
        for (size_t t = 0; t < m; t++)
            for (size_t c = 0; c < dh; c++) {
                size_t ck = u * dh + c, cv = gd + u * dh + c;
                double k = bkv ? bkv[ck] : 0.0, v = bkv ? bkv[cv] : 0.0;
                for (size_t x = 0; x < dx; x++) {
                    double e = cross ? in->context[t * dx + x] : X[t * dm + x];
                    k += e * wkv[x * ldwkv + ck];
                    v += e * wkv[x * ldwkv + cv];
                }
                K[t * dh + c] = k, V[t * dh + c] = v;
            }
        /* qk_norm: each head's row by its RMS, or by the whole row's (scope all) */
        for (size_t t = 0; qn->q.type != ATTN_NORM_NONE && t < n; t++)
            qk_row_d(Q + t * dh, dh, &qn->q,
                     qn->all ? rms_all(NULL, X + t * dm, dm, wq, ldwq, bq, hd, qn->q.eps) : -1.0,
                     i * dh);
        for (size_t t = 0; qn->k.type != ATTN_NORM_NONE && t < m; t++)
            qk_row_d(K + t * dh, dh, &qn->k,
                     !qn->all ? -1.0
                     : cross
                         ? rms_all(in->context + t * dx, NULL, dx, wkv, ldwkv, bkv, gd, qn->k.eps)
                         : rms_all(NULL, X + t * dm, dm, wkv, ldwkv, bkv, gd, qn->k.eps),
                     u * dh);
        /* RoPE: coordinate a pairs with b (half: t, t + dims/2; interleaved: 2t, 2t + 1) */
        const size_t half = w->rope.dims / 2;
        for (size_t t = 0; rope && t < n; t++)
            for (size_t f = 0; f < half; f++) {
                size_t a = w->rope.style == ATTN_ROPE_HALF ? f : 2 * f;
                size_t b = w->rope.style == ATTN_ROPE_HALF ? f + half : 2 * f + 1;
                double ang = position(in, t) * freq[f], cs = af * cos(ang), sn = af * sin(ang);
                double qa = Q[t * dh + a], qb = Q[t * dh + b];
                double ka = K[t * dh + a], kb = K[t * dh + b];
                Q[t * dh + a] = qa * cs - qb * sn, Q[t * dh + b] = qa * sn + qb * cs;
                K[t * dh + a] = ka * cs - kb * sn, K[t * dh + b] = ka * sn + kb * cs;
            }
        for (size_t t = 0; temp->floor_scale > 0.0 && t < n; t++) /* after RoPE, if any */
            for (size_t c = 0; c < dh; c++)
                Q[t * dh + c] *= temperature(temp, position(in, t));
        for (size_t q = 0; q < n; q++) {
            double max = -INFINITY, sum = 0.0;
            for (size_t k = 0; k < m; k++) {
                double s = 0.0;
                for (size_t c = 0; c < dh; c++)
                    s += Q[q * dh + c] * K[k * dh + c];
                s *= scale;
                if (w->softcap != 0.0f) s = w->softcap * tanh(s / w->softcap);
                if (w->alibi && !cross) s -= w->alibi[i] * fabs(position(in, q) - position(in, k));
                S[q * m + k] = allowed(in, m, q, k) ? s : -INFINITY;
                if (S[q * m + k] > max) max = S[q * m + k];
            }
            const double sink = sink_of(w, i);
            const int alive = max != -INFINITY;
            if (alive && sink > max) max = sink;
            for (size_t k = 0; k < m; k++) {
                P[q * m + k] = S[q * m + k] == -INFINITY ? 0.0 : exp(S[q * m + k] - max);
                sum += P[q * m + k];
            }
            if (alive && sink != -INFINITY) sum += exp(sink - max);
            for (size_t k = 0; k < m; k++)
                P[q * m + k] = sum > 0.0 ? P[q * m + k] / sum : 0.0;
            for (size_t c = 0; c < dh; c++) {
                double z = 0.0;
                for (size_t k = 0; k < m; k++)
                    z += P[q * m + k] * V[k * dh + c];
                Z[q * hd + i * dh + c] = z;
                if (lo && lo->head_outputs) lo->head_outputs[(i * n + q) * dh + c] = z;
            }
        }
        if (lo && lo->scores) memcpy(lo->scores + i * n * m, S, n * m * sizeof(double));
        if (lo && lo->patterns) memcpy(lo->patterns + i * n * m, P, n * m * sizeof(double));
    }
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < dm; c++) {
            double d = w->b_o ? w->b_o[c] : 0.0;
            if (w->w_o)
                for (size_t x = 0; x < hd; x++)
                    d += Z[t * hd + x] * w->w_o[x * dm + c];
            else
                d += Z[t * hd + c];
            D[t * dm + c] = d;
        }
    for (size_t t = 0; w->post_norm.type != ATTN_NORM_NONE && t < n; t++)
        norm_d(D + t * dm, D + t * dm, dm, &w->post_norm);
}

void attn_stack_naive(const attn_naive_layer *layers, double *final, double *scratch,
                      const attn_input *in, size_t seq, const attn_stack *stack) {
    const size_t L = stack->n_layers, n = in->n_tokens, dm = stack->layers[0]->d_model;
    double *E = scratch, *D = E + n * dm, *rest = D + n * dm;
    for (size_t x = 0; !stack->hidden_states && x < n * dm; x++)
        E[x] = in->embeddings[x];
    for (size_t l = 0; l < L; l++) {
        const attn_weights *w = stack->layers[l];
        const float *hidden = stack->hidden_states ? stack->hidden_states[seq * L + l] : NULL;
        for (size_t x = 0; hidden && x < n * dm; x++)
            E[x] = hidden[x];
        double scale = stack->scales ? (stack->scales[l] != 0.0f ? stack->scales[l]
                                        : w->scale > 0.0f        ? w->scale
                                                                 : 1.0 / sqrt((double)w->d_head))
                                     : in->scale;
        const attn_naive_layer *lo = layers ? &layers[l] : NULL;
        attn_input lin = *in; /* the rules read the layer's weights */
        lin.weights = w;
        layer64(lo, D, rest, E, &lin, w, scale);
        for (size_t x = 0; x < n * dm; x++) {
            E[x] += D[x];
            if (lo && lo->delta) lo->delta[x] = D[x];
            if (lo && lo->embeddings) lo->embeddings[x] = E[x];
        }
    }
    if (final) memcpy(final, E, n * dm * sizeof(double));
}

void attn_rollout_naive(double *R, double *scratch, const double *const *patterns, size_t n,
                        size_t h, size_t n_layers) {
    double *a = scratch, *prod = scratch + n * n;
    for (size_t l = 0; l < n_layers; l++) {
        /* Â_l: the heads' mean halved, plus I halved, each row over its sum */
        for (size_t q = 0; q < n; q++) {
            double sum = 0.0;
            for (size_t k = 0; k < n; k++) {
                double mean = 0.0;
                for (size_t i = 0; i < h; i++)
                    mean += patterns[l][i * n * n + q * n + k];
                a[q * n + k] = 0.5 * mean / (double)h + (q == k ? 0.5 : 0.0);
                sum += a[q * n + k];
            }
            for (size_t k = 0; k < n; k++)
                a[q * n + k] /= sum;
        }
        if (l == 0) {
            memcpy(R, a, n * n * sizeof *R);
            continue;
        }
        /* R = Â_l · R */
        for (size_t q = 0; q < n; q++)
            for (size_t k = 0; k < n; k++) {
                double s = 0.0;
                for (size_t j = 0; j < n; j++)
                    s += a[q * n + j] * R[j * n + k];
                prod[q * n + k] = s;
            }
        memcpy(R, prod, n * n * sizeof *R);
    }
}
