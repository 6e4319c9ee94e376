/*
 * project.c — the projection phase: QKV = E · w_qkv + b_qkv.
 *
 *   QKV   n × (hd + 2gd)   columns [Q_0 … Q_{h-1} | K_0 … K_{g-1} | V_0 … V_{g-1}]
 *                          as w_qkv's
 *
 * When (nearly) all of QKV is used — ΔE is wanted, or every head is listed
 * and Q, K and V are all needed — it is one GEMM cut in tiles, one task each
 * (tasks.c). Otherwise only the blocks of the listed heads' needed parts are
 * computed, each n × dh by its own sgemm reading its columns of w_qkv in
 * place, on the calling thread; a K/V head shared by several listed heads
 * is projected once. Then the q, k, v outputs are copied out of QKV, for
 * every listed position (a head listed twice is copied twice; a listed
 * head's k and v are those of its K/V head).
 *
 * Later phases read Q_i, K_u(i), V_u(i) in place out of QKV (stride ld).
 */
#include <cblas.h>

#include "attention/kernels.h"
#include "attention/plan.h"

/* attn_task_fn, tile t of QKV = E · w_qkv + b_qkv. */
static void project_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_call *c = arg;
    const attn_sizes *sz = &c->pl->sz;
    const attn_weights *w = c->pl->in->weights;
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&c->tiles, t, &r0, &rb, &c0, &cb);
    float *dst = c->qkv + r0 * sz->ld + c0;
    /* (m, n, k) = (rb, cb, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)cb, (int)sz->dm, 1.0f,
                c->pl->in->embeddings + r0 * sz->dm, (int)sz->dm, w->w_qkv + c0, (int)sz->ld, 0.0f,
                dst, (int)sz->ld);
    if (w->b_qkv) attn_add_bias_rows(dst, w->b_qkv + c0, rb, cb, sz->ld);
}

/* qkv[:, col … col+dh]: n × dh (stride ld)  ←  E: n × dm,
 * w_qkv[:, col … col+dh]: dm × dh (stride ld), b_qkv[col …]: dh */
static void project_block(const attn_plan *pl, float *qkv, size_t col) {
    const attn_sizes *sz = &pl->sz;
    const attn_weights *w = pl->in->weights;
    /* (m, n, k) = (n, dh, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sz->n, (int)sz->dh, (int)sz->dm,
                1.0f, pl->in->embeddings, (int)sz->dm, w->w_qkv + col, (int)sz->ld, 0.0f, qkv + col,
                (int)sz->ld);
    if (w->b_qkv) attn_add_bias_rows(qkv + col, w->b_qkv + col, sz->n, sz->dh, sz->ld);
}

/* Whether listed position j is the first whose head uses its K/V head (so
 * that a group's K and V are projected once). */
static int kv_first(const attn_plan *pl, size_t j) {
    const attn_sizes *sz = &pl->sz;
    size_t u = attn_kv_head(sz, pl->in->heads[j]);
    for (size_t e = 0; e < j; e++)
        if (attn_kv_head(sz, pl->in->heads[e]) == u) return 0;
    return 1;
}

int attn_project(const attn_plan *pl, attn_call *c) {
    const attn_sizes *sz = &pl->sz;
    const attn_input *in = pl->in;
    const unsigned all = ATTN_PART_Q | ATTN_PART_K | ATTN_PART_V;
    if (pl->stage == ATTN_STAGE_DELTA || (c->distinct == sz->h && pl->parts == all)) {
        c->tiles = attn_tiling_make(sz->n, sz->ld);
        int rc = attn_run(c, project_task, c->tiles.nr * c->tiles.nc);
        if (rc) return rc;
    } else {
        for (size_t j = 0; j < sz->hs; j++) {
            size_t i = in->heads[j];
            if (c->slot[i] != j) continue; /* projected at its first position */
            if (pl->parts & ATTN_PART_Q) project_block(pl, c->qkv, attn_col_q(sz, i));
            if (kv_first(pl, j)) {
                if (pl->parts & ATTN_PART_K) project_block(pl, c->qkv, attn_col_k(sz, i));
                if (pl->parts & ATTN_PART_V) project_block(pl, c->qkv, attn_col_v(sz, i));
            }
        }
    }
    const attn_output *out = &pl->out;
    const size_t ndh = sz->n * sz->dh;
    for (size_t j = 0; j < sz->hs; j++) {
        size_t i = in->heads[j];
        if (out->q)
            attn_copy_block(out->q + j * ndh, sz->dh, c->qkv + attn_col_q(sz, i), sz->ld, sz->n,
                            sz->dh);
        if (out->k)
            attn_copy_block(out->k + j * ndh, sz->dh, c->qkv + attn_col_k(sz, i), sz->ld, sz->n,
                            sz->dh);
        if (out->v)
            attn_copy_block(out->v + j * ndh, sz->dh, c->qkv + attn_col_v(sz, i), sz->ld, sz->n,
                            sz->dh);
    }
    return 0;
}
