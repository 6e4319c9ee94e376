/*
 * output.c — the output phase: ΔE = Z · w_o + b_o, then E' = E + ΔE.
 *
 *   Z    n × hd   [Z_1 … Z_h] (c->zall), written by the attend phase
 *   ΔE   n × dm   into the caller's delta, else straight into embeddings
 *   E'   n × dm   = E + ΔE, in the same tiles
 *
 * One GEMM cut in tiles of ΔE, one task each (tasks.c). Without w_o, the
 * attend phase already wrote Z into ΔE's buffer (hd == dm): only the bias
 * and E' remain. Runs only when delta or embeddings are asked for.
 */
#include <cblas.h>

#include "attention/kernels.h"
#include "attention/plan.h"

float *attn_delta_row(const attn_call *c, size_t r) {
    const size_t dm = c->pl->sz.dm;
    return c->d_last && r >= c->d_from ? c->d_last + (r - c->d_from) * dm : c->d + r * dm;
}

/* attn_task_fn, tile t of ΔE = Z · w_o + b_o (Z already in d without w_o),
 * then E' = E + ΔE. */
void attn_output_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_call *c = arg;
    const attn_sizes *sz = &c->pl->sz;
    const attn_weights *w = c->pl->in->weights;
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&c->tiles, t, &r0, &rb, &c0, &cb);
    float *d = attn_delta_row(c, r0) + c0; /* a tile's rows are all in one of the two */
    if (w->w_o) {
        /* ΔE starts as the bias and Z · w_o adds to it (beta 1), as in project.c */
        if (w->b_o) attn_copy_block(d, sz->dm, w->b_o + c0, 0, rb, cb);
        /* (m, n, k) = (rb, cb, hd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)cb, (int)sz->hd, 1.0f,
                    c->zall + r0 * sz->hd, (int)sz->hd, w->w_o + c0, (int)sz->dm,
                    w->b_o ? 1.0f : 0.0f, d, (int)sz->dm);
    } else if (w->b_o) {
        attn_add_bias_rows(d, w->b_o + c0, rb, cb, sz->dm);
    }
    float *e = c->pl->out.embeddings;
    if (!e) return;
    const float *e0 = c->pl->in->embeddings;
    for (size_t r = r0; r < r0 + rb; r++)
        attn_add(e + r * sz->dm + c0, e0 + r * sz->dm + c0, attn_delta_row(c, r) + c0, cb);
}

size_t attn_output_tiles(const attn_plan *pl, attn_call *c) {
    c->tiles = attn_tiling_make(pl->sz.n, pl->sz.dm);
    return c->tiles.nr * c->tiles.nc;
}
