/*
 * project.c — the projection phase: QKV = E · w_qkv + b_qkv, then RoPE.
 *
 *   QKV   n × (hd + 2gd)   columns [Q_0 … Q_{h-1} | K_0 … K_{g-1} | V_0 … V_{g-1}]
 *                          as w_qkv's
 *
 * With a context (cross-attention) it is two products, Q = E · Wq + bq
 * (n × hd) and KV = C · Wkv + bkv (m × 2gd), Wkv being w_kv or, without
 * it, w_qkv's K and V columns.
 *
 * When (nearly) all of QKV is used — ΔE is wanted, or every head is listed
 * and Q, K and V are all needed — each product is one GEMM cut in tiles,
 * one task each (tasks.c). Otherwise only the blocks of the listed heads'
 * needed parts are computed, each n × dh by its own sgemm reading its
 * columns of the weights in place, on the calling thread; a K/V head
 * shared by several listed heads is projected once.
 *
 * RoPE: the table of cos and sin of the call's positions is made first,
 * once for every head (rope.c, tasks over rows), then each tile rotates
 * the Q and K heads it holds while they are in cache (the tiles' columns
 * are then whole heads). When q_raw or k_raw are shown, they are copied
 * out first and the rotation runs after, over what was projected.
 *
 * Then the q, k, v outputs are copied out of QKV, for every listed
 * position (a head listed twice is copied twice; a listed head's k and v
 * are those of its K/V head). Later phases read Q_i, K_u(i), V_u(i) in
 * place out of QKV.
 */
#include <cblas.h>

#include "attention/kernels.h"
#include "attention/plan.h"

/* The products of the call: 1 (self-attention) or 2 (Q, then KV). */
static size_t proj_make(attn_proj pr[2], const attn_plan *pl, const attn_call *c) {
    const attn_sizes *sz = &pl->sz;
    const attn_input *in = pl->in;
    const attn_weights *w = in->weights;
    const size_t dh = sz->dh;
    /* every field named: a literal that leaves some to zero is cleared whole
     * first (plan.h, attn_zero) */
    /* the listed heads' own sgemms read N(E) when the layer has a norm (norm.c) */
    const float *e = c->normed_e ? c->normed_e : in->embeddings;
    if (!sz->cross) {
        pr[0] = (attn_proj){.x = e,
                            .rows = sz->n,
                            .k = sz->dm,
                            .w = w->w_qkv,
                            .ldw = sz->ld,
                            .b = w->b_qkv,
                            .dst = c->qkv,
                            .ldd = sz->ld,
                            .cols = sz->ld,
                            .rope_heads = sz->rope ? sz->h + sz->g : 0,
                            /* whole heads per tile whenever there is RoPE,
                             * rotated in the tiles or not, so that the tiles
                             * are the same for every plan of a shape */
                            .tiles = attn_tiling_aligned(sz->n, sz->ld, sz->rope ? dh : 1),
                            .x_last = NULL,
                            .x_from = 0};
        return 1;
    }
    const int apart = w->w_kv != NULL;
    pr[0] = (attn_proj){.x = e,
                        .rows = sz->n,
                        .k = sz->dm,
                        .w = w->w_qkv,
                        .ldw = apart ? sz->hd : sz->ld,
                        .b = w->b_qkv,
                        .dst = c->q,
                        .ldd = sz->hd,
                        .cols = sz->hd,
                        .rope_heads = 0,
                        .tiles = attn_tiling_make(sz->n, sz->hd),
                        .x_last = NULL,
                        .x_from = 0};
    pr[1] = (attn_proj){.x = in->context,
                        .rows = sz->m,
                        .k = sz->dc,
                        .w = apart ? w->w_kv : w->w_qkv + sz->hd,
                        .ldw = apart ? sz->ldkv : sz->ld,
                        .b = apart      ? w->b_kv
                             : w->b_qkv ? w->b_qkv + sz->hd
                                        : NULL,
                        .dst = c->kv,
                        .ldd = sz->ldkv,
                        .cols = sz->ldkv,
                        .rope_heads = 0,
                        .tiles = attn_tiling_make(sz->m, sz->ldkv),
                        .x_last = NULL,
                        .x_from = 0};
    return 2;
}

/* attn_task_fn, rows 64t … of RoPE's table. */
#define ANGLE_ROWS 64
size_t attn_angles_tasks(const attn_plan *pl) {
    return pl->bytes[WS_ROPE] ? attn_div_up(pl->sz.n, ANGLE_ROWS) : 0;
}

void attn_angles_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_call *c = arg;
    const attn_sizes *sz = &c->pl->sz;
    size_t r0 = t * ANGLE_ROWS, rows = attn_min(ANGLE_ROWS, sz->n - r0);
    attn_rope_angles(c->angles + r0 * sz->rope, sz->rope, c->freq,
                     attn_rope_attention_factor(&c->pl->in->weights->rope), sz->rope, c->pos + r0,
                     rows);
}

/* Rotates rows r0 … r0+rows of `heads` heads from column col0 of Q or K
 * (x: stride ldx) by their positions' angles. */
static void rope_rotate(const attn_call *c, float *x, size_t ldx, size_t r0, size_t rows,
                        size_t heads) {
    const attn_sizes *sz = &c->pl->sz;
    attn_rope_rows(x + r0 * ldx, ldx, c->angles + r0 * sz->rope, sz->rope, rows, heads, sz->dh,
                   sz->rope, c->pl->in->weights->rope.style);
}

/* attn_task_fn, tile t of all the products' tiles, in order. */
void attn_project_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_call *c = arg;
    const attn_proj *p = c->proj;
    size_t count0 = p->tiles.nr * p->tiles.nc;
    if (t >= count0) t -= count0, p++;
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&p->tiles, t, &r0, &rb, &c0, &cb);
    float *dst = p->dst + r0 * p->ldd + c0;
    const float *x =
        p->x_last && r0 >= p->x_from ? p->x_last + (r0 - p->x_from) * p->k : p->x + r0 * p->k;
    /* The tile starts as the bias and the product adds to it (beta 1): no
     * pass over it after, and none of OpenBLAS's to zero it first. */
    if (p->b) attn_copy_block(dst, p->ldd, p->b + c0, 0, rb, cb);
    /* (m, n, k) = (rb, cb, k) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)cb, (int)p->k, 1.0f, x,
                (int)p->k, p->w + c0, (int)p->ldw, p->b ? 1.0f : 0.0f, dst, (int)p->ldd);
    if (!c->pl->rope_in_tiles || !p->rope_heads) return;
    /* The tile's columns are whole heads (tiling aligned to dh). */
    const size_t dh = c->pl->sz.dh, e0 = c0 / dh, e1 = attn_min((c0 + cb) / dh, p->rope_heads);
    if (e1 > e0) rope_rotate(c, p->dst + e0 * dh, p->ldd, r0, rb, e1 - e0);
}

/* dst[:, col … col+dh] of product p: rows × dh, by one sgemm. */
static void project_cols(const attn_proj *p, size_t col, size_t dh) {
    /* as project_task: the bias first, then the product added to it */
    if (p->b) attn_copy_block(p->dst + col, p->ldd, p->b + col, 0, p->rows, dh);
    /* (m, n, k) = (rows, dh, k) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->rows, (int)dh, (int)p->k, 1.0f,
                p->x, (int)p->k, p->w + col, (int)p->ldw, p->b ? 1.0f : 0.0f, p->dst + col,
                (int)p->ldd);
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

/* The K/V product and the column offset of KV's column 0 in it. */
static const attn_proj *kv_proj(const attn_plan *pl, const attn_proj *pr, size_t *off) {
    *off = pl->sz.cross ? 0 : pl->sz.hd;
    return pl->sz.cross ? &pr[1] : &pr[0];
}

/* Applies f to the (Q or K) blocks of heads the partial path projected:
 * each listed head's Q, each of their K/V heads' K once. */
static void listed_blocks(const attn_plan *pl, attn_call *c, const attn_proj *pr,
                          void (*f)(const attn_plan *, attn_call *, const attn_proj *, size_t col,
                                    unsigned part)) {
    const attn_sizes *sz = &pl->sz;
    size_t off;
    const attn_proj *kvp = kv_proj(pl, pr, &off);
    for (size_t j = 0; j < sz->hs; j++) {
        size_t i = pl->in->heads[j];
        if (c->slot[i] != j) continue; /* at its first position */
        if (pl->parts & ATTN_PART_Q) f(pl, c, &pr[0], attn_col_q(sz, i), ATTN_PART_Q);
        if (!kv_first(pl, j)) continue;
        if (pl->parts & ATTN_PART_K) f(pl, c, kvp, off + attn_col_k(sz, i), ATTN_PART_K);
        if (pl->parts & ATTN_PART_V) f(pl, c, kvp, off + attn_col_v(sz, i), ATTN_PART_V);
    }
}

static void block_project(const attn_plan *pl, attn_call *c, const attn_proj *p, size_t col,
                          unsigned part) {
    (void)c, (void)part;
    project_cols(p, col, pl->sz.dh);
}

/* qk_norm and temperature (norm.c) of one listed block */
static void block_qk(const attn_plan *pl, attn_call *c, const attn_proj *p, size_t col,
                     unsigned part) {
    (void)c;
    attn_qk_step(pl, p->dst + col, p->ldd, 1, part);
}

static void block_temperature(const attn_plan *pl, attn_call *c, const attn_proj *p, size_t col,
                              unsigned part) {
    (void)c;
    if (part == ATTN_PART_Q) attn_temperature_step(pl, p->dst + col, p->ldd, 1);
}

static void block_rotate(const attn_plan *pl, attn_call *c, const attn_proj *p, size_t col,
                         unsigned part) {
    if (part != ATTN_PART_V) rope_rotate(c, p->dst + col, p->ldd, 0, pl->sz.n, 1);
}

/* out: hs × rows × dh, the listed heads' blocks from `src` (stride ld),
 * col_of(sz, i) their columns. */
static void copy_heads(float *out, const attn_plan *pl, const float *src, size_t ld, size_t rows,
                       size_t (*col_of)(const attn_sizes *, size_t)) {
    const attn_sizes *sz = &pl->sz;
    for (size_t j = 0; j < sz->hs; j++)
        attn_copy_block(out + j * rows * sz->dh, sz->dh, src + col_of(sz, pl->in->heads[j]), ld,
                        rows, sz->dh);
}

int attn_project_whole(const attn_plan *pl, const attn_call *c) {
    const unsigned all = ATTN_PART_Q | ATTN_PART_K | ATTN_PART_V;
    return pl->stage == ATTN_STAGE_DELTA || (c->distinct == pl->sz.h && pl->parts == all) ||
           (pl->parts && attn_norm_needs_whole(pl->in->weights));
}

size_t attn_project_tiles(const attn_plan *pl, attn_call *c, attn_proj pr[2]) {
    size_t nproj = proj_make(pr, pl, c), count = 0;
    for (size_t x = 0; x < nproj; x++)
        count += pr[x].tiles.nr * pr[x].tiles.nc;
    c->proj = pr;
    return count;
}

void attn_project_rest(const attn_plan *pl, attn_call *c) {
    const attn_sizes *sz = &pl->sz;
    const attn_output *out = &pl->out;
    const int rope = pl->bytes[WS_ROPE] != 0, whole = attn_project_whole(pl, c);
    attn_proj pr[2];
    proj_make(pr, pl, c);
    if (!whole) listed_blocks(pl, c, pr, block_project);
    /* qk_norm, and the temperature without RoPE (norm.c): before q_raw, k_raw */
    if (whole) {
        if (pl->parts & ATTN_PART_Q) attn_qk_step(pl, c->q, sz->ldq, sz->h, ATTN_PART_Q);
        if (pl->parts & ATTN_PART_K) attn_qk_step(pl, c->kv, sz->ldkv, sz->g, ATTN_PART_K);
    } else {
        listed_blocks(pl, c, pr, block_qk);
    }

    if (out->q_raw) copy_heads(out->q_raw, pl, c->q, sz->ldq, sz->n, attn_col_q);
    if (out->k_raw) copy_heads(out->k_raw, pl, c->kv, sz->ldkv, sz->m, attn_col_k);
    if (rope && !c->rotated) {
        if (whole) /* Q's h heads and K's g heads are side by side */
            rope_rotate(c, c->qkv, sz->ld, 0, sz->n, sz->h + sz->g);
        else
            listed_blocks(pl, c, pr, block_rotate);
        c->rotated = 1;
    }
    if (sz->rope && (pl->parts & ATTN_PART_Q)) { /* the temperature after RoPE (norm.c) */
        if (whole)
            attn_temperature_step(pl, c->q, sz->ldq, sz->h);
        else
            listed_blocks(pl, c, pr, block_temperature);
    }

    if (out->q) copy_heads(out->q, pl, c->q, sz->ldq, sz->n, attn_col_q);
    if (out->k) copy_heads(out->k, pl, c->kv, sz->ldkv, sz->m, attn_col_k);
    if (out->v) copy_heads(out->v, pl, c->kv, sz->ldkv, sz->m, attn_col_v);
}
