/*
 * attend_online.c — the attend phase's online path: Z_i by tiles of keys.
 *
 * Taken when neither scores nor patterns are shown: only Z is needed, so no
 * row of n scores is ever held. Per block of B query rows r0 … r1 of head i
 * (attend.c), and per key block k0 … k1 of K keys from the block's kbeg
 * to its kend (causal: kend = r1; a window: the keys within its reach):
 *
 *   T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ    B × K tile, sgemm
 *   the score rules (softcap, ALiBi, mask, window, chunk); online softmax
 *   (kernels.c): running row max m and sum l; when m
 *   grows, l and the row of Z already accumulated are rescaled by
 *   exp(m_old − m), also when that underflows to 0 (a jump past exp's range)
 *   Z[r0:r1] += T · V_i[k0:k1]               sgemm, beta 1
 *
 * Causal: a tile's keys before the block's first row are one product for
 * all its rows, the rest of the tile (on the diagonal) goes by sub-blocks
 * of ATTN_SUB_Q query rows, each to its own last row's key, as on the full
 * path (attend_full.c): at n = 128 a head's two products are 62.5 % of the
 * square. The cut depends on the shape alone.
 *
 * Z stays the average so far (T holds weights over l): no final division;
 * rows with nothing allowed stay exactly 0. A head's sink is a key whose V
 * is 0, seen before the first tile: each row starts at m = s_i, l = 1 and
 * Z = 0, so that the sum carries it from the start and nothing is kept
 * for a last pass. Scratch: one B × K tile and 2B
 * floats, never n × n: memory is linear in n.
 *
 * A tile whose allowed scores overflow is computed again from the block's
 * rows of Q multiplied by the scale first, as on the full path
 * (attend_full.c), and so are the block's tiles after it.
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
    /* With a sink the rows are "seen" from the start (kernels.h): Z starts
     * at 0, and every tile adds to it. */
    const int sunk = b->sink != -INFINITY;
    for (size_t x = 0; x < rb; x++)
        m[x] = b->sink, l[x] = sunk ? 1.0f : 0.0f;
    for (size_t x = 0; sunk && x < rb; x++)
        memset(zr + x * b->ldz, 0, sz->dh * sizeof(float));
    /* Causal: in each key tile, the keys before the block's first row are
     * one rectangle for all its rows; the keys from there on (the tile's
     * part of the diagonal square) go by sub-blocks of ATTN_SUB_Q rows,
     * each to its own last row's key, as on the full path. */
    const size_t sub = causal ? ATTN_SUB_Q : rb;
    const size_t ldq = sz->ldq, ldkv = sz->ldkv, dh = sz->dh;
    const int ldz = (int)b->ldz;
    float alpha = pl->in->scale;
    for (size_t k0 = b->kbeg; k0 < b->kend; k0 += ATTN_BLOCK_K) {
        const size_t kb = attn_min(ATTN_BLOCK_K, b->kend - k0), k1 = k0 + kb;
        const size_t kd = causal ? attn_min(k1, r0 > k0 ? r0 : k0) : k0;
        const int first = k0 == b->kbeg && !sunk;
        /* T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ: the rectangle k0 … kd,
         * (m, n, k) = (rb, kd − k0, dh), then each sub-block's kd … se,
         * (m, n, k) = (sb, se − kd, dh). What no sgemm writes is past each
         * row's last allowed key: the score pass fills it with −inf. */
        for (;;) {
            if (kd > k0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)(kd - k0),
                            (int)dh, alpha, b->q + r0 * ldq, (int)ldq, b->k + k0 * ldkv, (int)ldkv,
                            0.0f, t, (int)ldt);
            for (size_t s0 = 0; s0 < rb; s0 += sub) {
                const size_t sb = attn_min(sub, rb - s0);
                const size_t se = causal ? attn_min(k1, r0 + s0 + sb) : k1;
                if (se <= kd) continue;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)sb, (int)(se - kd),
                            (int)dh, alpha, b->q + (r0 + s0) * ldq, (int)ldq, b->k + kd * ldkv,
                            (int)ldkv, 0.0f, t + s0 * ldt + (kd - k0), (int)ldt);
            }
            if (!attn_score_tile(t, ldt, &b->rules, r0, rb, k0, kb)) break;
            if (!attn_rescale_block_q(pl, b, &alpha)) return ATTN_FAIL_NONFINITE;
        }
        /* Turns T into weights over the running sum and rescales zr to it,
         * before T·V adds to it. */
        attn_softmax_online(t, ldt, m, l, zr, b->ldz, dh, rb, kb, r0, k0, causal);
        /* Z[r0:r1] (+)= T · V_i[k0:k1], by the same cut: the rectangle,
         * (m, n, k) = (rb, dh, kd − k0), then each sub-block's keys,
         * (m, n, k) = (sb, dh, se − kd). The first key tile overwrites what
         * the caller's buffer held (beta 0). */
        if (kd > k0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)dh, (int)(kd - k0),
                        1.0f, t, (int)ldt, b->v + k0 * ldkv, (int)ldkv, first ? 0.0f : 1.0f, zr,
                        ldz);
        for (size_t s0 = 0; s0 < rb; s0 += sub) {
            const size_t sb = attn_min(sub, rb - s0);
            const size_t se = causal ? attn_min(k1, r0 + s0 + sb) : k1;
            if (se <= kd) {
                if (first && kd == k0) /* no key of this tile for these rows: Z starts at 0 */
                    for (size_t x = s0; x < s0 + sb; x++)
                        memset(zr + x * b->ldz, 0, dh * sizeof(float));
                continue;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sb, (int)dh, (int)(se - kd),
                        1.0f, t + s0 * ldt + (kd - k0), (int)ldt, b->v + kd * ldkv, (int)ldkv,
                        first && kd == k0 ? 0.0f : 1.0f, zr + s0 * b->ldz, ldz);
        }
    }
    return 0;
}
