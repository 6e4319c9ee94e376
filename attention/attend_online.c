/*
 * attend_online.c — the attend phase's online path: Z_i by tiles of keys.
 *
 * Taken when neither scores nor patterns are shown: only Z is needed, so no
 * row of n scores is ever held. Per block of B query rows r0 … r1 of head i
 * (attend.c), and per key block k0 … k1 of K keys from the block's kbeg
 * to its kend (causal: kend = r1; a window: the keys within its reach):
 *
 *   T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ    B × K tile, sgemm
 *   the score rules (softcap, ALiBi, mask, window); online softmax
 *   (kernels.c): running row max m and sum l; when m
 *   grows, l and the row of Z already accumulated are rescaled by
 *   exp(m_old − m), also when that underflows to 0 (a jump past exp's range)
 *   Z[r0:r1] += T · V_i[k0:k1]               sgemm, beta 1
 *
 * Z stays the average so far (T holds weights over l): no final division;
 * rows with nothing allowed stay exactly 0. Scratch: one B × K tile and 2B
 * floats, never n × n: memory is linear in n.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/plan.h"

/* b->z: n × dh (stride ldz), the head's, gets Z_i in rows r0 … r0+rb;
 * b->scratch.tile: bq × bk, then m: bq, l: bq. Q_i: n × dh, stride ldq;
 * K_i, V_i: m × dh, stride ldkv. */
int attn_online_block(const attn_plan *pl, const attn_block *b) {
    const attn_sizes *sz = &pl->sz;
    if (!b->z) return 0;
    const size_t r0 = b->r0, rb = b->rb, ldt = sz->bk;
    const int causal = pl->in->mask.kind == ATTN_MASK_CAUSAL;
    float *t = b->scratch.tile, *m = t + sz->bq * ldt, *l = m + sz->bq;
    float *zr = b->z + r0 * b->ldz;
    if (b->kbeg == b->kend) { /* no key for any row of the block: Z is 0 */
        for (size_t x = 0; x < rb; x++)
            memset(zr + x * b->ldz, 0, sz->dh * sizeof(float));
        return 0;
    }
    for (size_t x = 0; x < rb; x++)
        m[x] = -INFINITY, l[x] = 0.0f;
    for (size_t k0 = b->kbeg; k0 < b->kend; k0 += ATTN_BLOCK_K) {
        size_t kb = attn_min(ATTN_BLOCK_K, b->kend - k0);
        /* T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ;  (m, n, k) = (rb, kb, dh) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kb, (int)sz->dh,
                    pl->in->scale, b->q + r0 * sz->ldq, (int)sz->ldq, b->k + k0 * sz->ldkv,
                    (int)sz->ldkv, 0.0f, t, (int)ldt);
        if (attn_score_tile(t, ldt, &b->rules, r0, rb, k0, kb)) return ATTN_FAIL_NONFINITE;
        /* Turns T into weights over the running sum and rescales zr to it,
         * before T·V adds to it. */
        attn_softmax_online(t, ldt, m, l, zr, b->ldz, sz->dh, rb, kb, r0, k0, causal);
        /* Z[r0:r1] (+)= T · V_i[k0:k1];  (m, n, k) = (rb, dh, kb); the first
         * key block overwrites what the caller's buffer held. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)sz->dh, (int)kb, 1.0f,
                    t, (int)ldt, b->v + k0 * sz->ldkv, (int)sz->ldkv, k0 == b->kbeg ? 0.0f : 1.0f,
                    zr, (int)b->ldz);
    }
    return 0;
}
