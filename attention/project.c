/*
 * project.c — the projection phase: QKV = E · w_qkv + b_qkv.
 *
 *   QKV   n × 3hd   columns [Q_0 … Q_{h-1} | K_0 … | V_0 …] as w_qkv's
 *
 * When (nearly) all of QKV is used — ΔE is wanted, or every head is listed
 * and Q, K and V are all needed — it is one GEMM cut in tiles, one task each
 * (tasks.c). Otherwise only the blocks of the listed heads' needed parts are
 * computed, each n × dh by its own sgemm reading its columns of w_qkv in
 * place, on the calling thread. Then the q, k, v outputs are copied out of
 * QKV, for every listed position (a head listed twice is copied twice).
 *
 * Later phases read Q_i, K_i, V_i in place out of QKV (stride 3hd).
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

/* qkv[:, col … col+dh]: n × dh (stride 3hd)  ←  E: n × dm,
 * w_qkv[:, col … col+dh]: dm × dh (stride 3hd), b_qkv[col …]: dh */
static void project_block(const attn_plan *pl, float *qkv, size_t col) {
    const attn_sizes *sz = &pl->sz;
    const attn_weights *w = pl->in->weights;
    /* (m, n, k) = (n, dh, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sz->n, (int)sz->dh, (int)sz->dm,
                1.0f, pl->in->embeddings, (int)sz->dm, w->w_qkv + col, (int)sz->ld, 0.0f, qkv + col,
                (int)sz->ld);
    if (w->b_qkv) attn_add_bias_rows(qkv + col, w->b_qkv + col, sz->n, sz->dh, sz->ld);
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
            if (pl->parts & ATTN_PART_Q) project_block(pl, c->qkv, i * sz->dh);
            if (pl->parts & ATTN_PART_K) project_block(pl, c->qkv, sz->hd + i * sz->dh);
            if (pl->parts & ATTN_PART_V) project_block(pl, c->qkv, 2 * sz->hd + i * sz->dh);
        }
    }
    const attn_output *out = &pl->out;
    const size_t ndh = sz->n * sz->dh;
    for (size_t j = 0; j < sz->hs; j++) {
        const float *qi = c->qkv + in->heads[j] * sz->dh;
        if (out->q) attn_copy_block(out->q + j * ndh, sz->dh, qi, sz->ld, sz->n, sz->dh);
        if (out->k) attn_copy_block(out->k + j * ndh, sz->dh, qi + sz->hd, sz->ld, sz->n, sz->dh);
        if (out->v)
            attn_copy_block(out->v + j * ndh, sz->dh, qi + 2 * sz->hd, sz->ld, sz->n, sz->dh);
    }
    return 0;
}
