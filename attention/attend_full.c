/*
 * attend_full.c — the attend phase's full path: S_i and P_i by whole rows.
 *
 * Taken when scores or patterns are shown, and then by every head, so that
 * ΔE is bit for bit the same whichever heads are listed. Per block of B
 * query rows r0 … r1 of head i (attend.c), only its keys kbeg … kend are
 * computed (causal: kend = r1, the blocks above the diagonal are never
 * computed; a window: the keys within reach of the block's positions):
 *
 *   S_i[r0:r1, kbeg:kend] = scale · Q_i[r0:r1] · K_i[kbeg:kend]ᵀ   sgemm,
 *       straight into the caller's scores (else patterns) rows, else B × m
 *       scratch
 *   the score rules (softcap, ALiBi, mask, window, chunk; kernels.c), fused
 *   row softmax (vexp.c), the head's sink in its sum, into patterns or the
 *   scratch
 *   Z[r0:r1] = P_i[r0:r1, kbeg:kend] · V_i[kbeg:kend]               sgemm
 *
 * Causal: the keys before the block's first row are one rectangle for all
 * its rows (one sgemm each way); the square on the diagonal goes by
 * sub-blocks of ATTN_SUB_Q query rows, each over the keys up to its own
 * last row, so that the triangle above the diagonal is not computed
 * either. At n = 128 a head is one block, all diagonal, and its two
 * products cost 62.5 % of the full square in sub-blocks of 32 (a small
 * sgemm costs more per FLOP: 16 rows gained nothing more, 64 less;
 * bench/README.md (a)). The cut depends on the shape alone, as every
 * task's does.
 *
 * Nothing past what the plan's outputs need runs: without patterns and Z,
 * the block ends with the masked scores.
 *
 * Scores whose product overflows: OpenBLAS applies `scale` (alpha) to the
 * sum Q·Kᵀ it has accumulated, so |q·k| past FLT_MAX is ±inf (or NaN)
 * even when scale·q·k is finite. A block whose allowed scores are not
 * finite is computed once more from its rows of Q multiplied by the scale
 * first (attn_rescale_block_q, attend.c), when the scale is below 1; only
 * if that overflows too is it an error. Every other block keeps the
 * rounding of alpha.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/plan.h"

/* rows × [0 … cols) of x (stride ldx) outside [kbeg, kend) ← value */
static void fill_outside(float *x, size_t ldx, size_t rows, size_t cols, size_t kbeg, size_t kend,
                         float value) {
    for (size_t r = 0; r < rows; r++) {
        float *xr = x + r * ldx;
        for (size_t k = 0; k < kbeg; k++)
            xr[k] = value;
        for (size_t k = kend; k < cols; k++)
            xr[k] = value;
    }
}

/*
 * b->s: n × m (the head's scores) or NULL, b->p: n × m (its patterns) or
 * NULL, b->z: n × dh (stride ldz) or NULL; all three written only in rows
 * r0 … r0+rb. S goes to s, else into p (softmax in place), else into the
 * B × m scratch rows; P goes to p, else into the scratch rows. Only keys
 * kbeg … kend are computed; the caller's rows get −inf and 0 elsewhere.
 * Q_i: n × dh, stride ldq; K_i, V_i: m × dh, stride ldkv.
 */
int attn_full_block(const attn_plan *pl, const attn_block *b) {
    const attn_sizes *sz = &pl->sz;
    const size_t m = sz->m, r0 = b->r0, rb = b->rb, kbeg = b->kbeg, kend = b->kend;
    const size_t kb = kend - kbeg, ldq = sz->ldq, ldkv = sz->ldkv, dh = sz->dh;
    const int causal = pl->in->mask.kind == ATTN_MASK_CAUSAL;
    /* Causal: the keys before the block's first row, kbeg … kd, are one
     * rectangle for all its rows; the square kd … kend on the diagonal goes
     * by sub-blocks, each to its last row's key. */
    const size_t sub = causal ? ATTN_SUB_Q : rb;
    const size_t kd = causal ? attn_min(kend, r0 > kbeg ? r0 : kbeg) : kbeg;
    float *rows = b->scratch.rows;
    float *sd = b->s ? b->s + r0 * m : b->p ? b->p + r0 * m : rows;
    if (sd != rows) fill_outside(sd, m, rb, m, kbeg, kend, -INFINITY);
    if (kb) {
        float alpha = pl->in->scale;
        for (;;) {
            /* S[r0:r1, kbeg:kd] = alpha · Q_i[r0:r1] · K_i[kbeg:kd]ᵀ;
             * (m, n, k) = (rb, kd − kbeg, dh) */
            if (kd > kbeg)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)(kd - kbeg),
                            (int)dh, alpha, b->q + r0 * ldq, (int)ldq, b->k + kbeg * ldkv,
                            (int)ldkv, 0.0f, sd + kbeg, (int)m);
            for (size_t s0 = 0; s0 < rb; s0 += sub) {
                const size_t sb = attn_min(sub, rb - s0);
                const size_t se = causal ? attn_min(kend, r0 + s0 + sb) : kend;
                if (se <= kd)
                    continue; /* the rows' keys past kd are masked: the score pass's −inf */
                /* (m, n, k) = (sb, se − kd, dh) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)sb, (int)(se - kd),
                            (int)dh, alpha, b->q + (r0 + s0) * ldq, (int)ldq, b->k + kd * ldkv,
                            (int)ldkv, 0.0f, sd + s0 * m + kd, (int)m);
            }
            if (!attn_score_tile(sd + kbeg, m, &b->rules, r0, rb, kbeg, kb)) break;
            if (!attn_rescale_block_q(pl, b, &alpha)) return ATTN_FAIL_NONFINITE;
        }
    }
    if (!b->p && !b->z) return 0;
    float *pd = b->p ? b->p + r0 * m : rows;
    if (pd != rows) fill_outside(pd, m, rb, m, kbeg, kend, 0.0f);
    attn_softmax_block(pd + kbeg, m, sd + kbeg, m, rb, kb, r0, kbeg, causal, b->sink);
    if (!b->z) return 0;
    float *zr = b->z + r0 * b->ldz;
    const int ldz = (int)b->ldz;
    /* Z[r0:r1] = P[r0:r1, kbeg:kd] · V_i[kbeg:kd], then each sub-block adds
     * P[.., kd:se] · V_i[kd:se] (or starts with it: beta 0 with no rectangle) */
    if (kd > kbeg) /* (m, n, k) = (rb, dh, kd − kbeg) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)dh, (int)(kd - kbeg),
                    1.0f, pd + kbeg, (int)m, b->v + kbeg * ldkv, (int)ldkv, 0.0f, zr, ldz);
    for (size_t s0 = 0; s0 < rb; s0 += sub) {
        const size_t sb = attn_min(sub, rb - s0);
        const size_t se = causal ? attn_min(kend, r0 + s0 + sb) : kend;
        if (se <= kd) {
            if (kd == kbeg) /* no key for these rows: Z is 0 */
                for (size_t r = s0; r < s0 + sb; r++)
                    memset(zr + r * b->ldz, 0, dh * sizeof(float));
            continue;
        }
        /* (m, n, k) = (sb, dh, se − kd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sb, (int)dh, (int)(se - kd),
                    1.0f, pd + s0 * m + kd, (int)m, b->v + kd * ldkv, (int)ldkv,
                    kd > kbeg ? 1.0f : 0.0f, zr + s0 * b->ldz, ldz);
    }
    return 0;
}
