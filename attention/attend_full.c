/*
 * attend_full.c — the attend phase's full path: S_i and P_i by whole rows.
 *
 * Taken when scores or patterns are shown, and then by every head, so that
 * ΔE is bit for bit the same whichever heads are listed. Per block of B
 * query rows r0 … r1 of head i (attend.c), kend = r1 when causal (the
 * blocks above the diagonal are all masked, never computed), else n:
 *
 *   S_i[r0:r1, 0:kend] = scale · Q_i[r0:r1] · K_i[0:kend]ᵀ    sgemm, straight
 *       into the caller's scores (else patterns) rows, else B × n scratch
 *   mask (−inf), fused row softmax (vexp.c) into patterns or the scratch
 *   Z[r0:r1] = P_i[r0:r1, 0:kend] · V_i[0:kend]                sgemm
 *
 * Nothing past what the plan's outputs need runs: without patterns and Z,
 * the block ends with the masked scores.
 */
#include <cblas.h>

#include "attention/kernels.h"
#include "attention/plan.h"

/*
 * b->s: n × n (the head's scores) or NULL, b->p: n × n (its patterns) or
 * NULL, b->z: n × dh (stride ldz) or NULL; all three written only in rows
 * r0 … r0+rb. S goes to s, else into p (softmax in place), else into the
 * B × n scratch rows; P goes to p, else into the scratch rows.
 * Q_i, K_i, V_i: n × dh each, stride ld.
 */
static int full_block(const attn_plan *pl, const attn_block *b) {
    const attn_sizes *sz = &pl->sz;
    const size_t n = sz->n, r0 = b->r0, rb = b->rb, kend = b->kend;
    float *rows = b->scratch.rows;
    float *sd = b->s ? b->s + r0 * n : b->p ? b->p + r0 * n : rows;
    /* S[r0:r1, 0:kend] = scale · Q_i[r0:r1] · K_i[0:kend]ᵀ;  (m, n, k) = (rb, kend, dh) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kend, (int)sz->dh,
                pl->in->scale, b->q + r0 * sz->ld, (int)sz->ld, b->k, (int)sz->ld, 0.0f, sd,
                (int)n);
    /* The caller's rows get −inf up to n; scratch rows only need kend. */
    size_t scols = sd == rows ? kend : n;
    if (attn_mask_tile(sd, n, &pl->in->mask, n, r0, rb, 0, scols)) return ATTN_FAIL_NONFINITE;
    if (!b->p && !b->z) return 0;
    float *pd = b->p ? b->p + r0 * n : rows;
    attn_softmax_block(pd, n, sd, n, rb, b->p ? n : kend, r0,
                       pl->in->mask.kind == ATTN_MASK_CAUSAL);
    if (!b->z) return 0;
    /* Z[r0:r1] = P[r0:r1, 0:kend] · V_i[0:kend];  (m, n, k) = (rb, dh, kend) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)sz->dh, (int)kend, 1.0f,
                pd, (int)n, b->v, (int)sz->ld, 0.0f, b->z + r0 * b->ldz, (int)b->ldz);
    return 0;
}

int attn_attend_full(const attn_plan *pl, attn_call *c) {
    return attn_attend(pl, c, full_block);
}
