/*
 * compute.c — attn_compute: the attention block as a handful of GEMMs.
 *
 * Data flow of one call (letters as in attention.h, ld = 3hd, B = ATTN_BLOCK_Q
 * query rows, K = ATTN_BLOCK_K keys):
 *
 *   QKV = E · w_qkv + b_qkv          n × 3hd   sgemm by tiles (see below)
 *   per head i and block of B query rows r0 … r1, reading Q_i, K_i, V_i in
 *   place out of QKV (stride 3hd), one of two paths:
 *
 *   full (scores or patterns are shown: then every head, so that ΔE does
 *        not depend on which heads are listed)
 *     S_i[r0:r1, 0:kend] = scale · Q_i[r0:r1] · K_i[0:kend]ᵀ    sgemm, straight
 *         into the caller's scores/patterns rows (kend = r1 when causal:
 *         the blocks above the diagonal are all masked, never computed)
 *     mask (−inf), fused row softmax (vexp.c) into patterns or a B × n scratch
 *     Z[r0:r1] = P_i[r0:r1, 0:kend] · V_i[0:kend]                sgemm
 *
 *   online (neither scores nor patterns: only Z is needed)
 *     per key block k0 … k1 (causal: only blocks with k0 < r1):
 *       T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ    B × K tile, sgemm
 *       mask; online softmax: running row max m and sum l; when m grows,
 *       l and the row of Z already accumulated are rescaled by exp(m_old − m),
 *       also when that underflows to 0 (a jump past exp's range)
 *       Z[r0:r1] += T · V_i[k0:k1]                             sgemm, beta 1
 *     Z stays the average so far (T holds weights over l): no final
 *     division; rows with nothing allowed stay exactly 0
 *     Scratch: one B × K tile, never n × n: memory is linear in n.
 *
 *   ΔE  = Z · w_o + b_o              n × dm    sgemm by tiles (w_o NULL: ΔE = Z)
 *   E'  = E + ΔE                               in the same tiles
 *
 * Work not asked for is not done. A plan (attn_plan) is derived from which
 * outputs are non-NULL: without delta/embeddings only the listed heads are
 * projected and attended (each needed Q/K/V block by its own sgemm, reading
 * the block's columns of w_qkv in place); with only q/k/v nothing past the
 * projection runs; without patterns and head outputs nothing past the
 * scores runs. When w_o is NULL, Z is written directly into delta (or
 * embeddings) and no Z scratch exists.
 *
 * Memory: everything lives in the caller's workspace, one block carved by a
 * table of slice sizes (WS_*), each size computed with overflow checks.
 * No slice is n × n. A head listed twice in in->heads is computed once and
 * copied.
 *
 * Threads: no globals, no static state. OpenBLAS's own thread count is the
 * server's business (see bench/README.md); this file never sets it.
 *
 * Tasks: a call runs in three phases, each a set of independent tasks:
 * the tiles of the projection, then (head, block of B query rows) pairs,
 * then the tiles of ΔE. attn_compute runs every phase's tasks in turn;
 * attn_compute_with hands each phase to the caller's runner, which returns
 * only when the phase is done. The tiling (tiling_make) and the blocks
 * depend on the shape alone, so both make the very same sgemm calls on the
 * very same data, and the results are bit for bit equal whatever the
 * threads. A task writes only its own tile, or its head's rows of Z and of
 * its output slots, so tasks need no lock; a head task's B × n rows and
 * B × K tile are carved from the workspace of the thread that runs it (the
 * caller's slices on the calling thread). A failing task stores its code
 * in one atomic int (the first stored wins) and the tasks after it skip
 * their work. Heads come in a fixed order (the listed heads as listed,
 * then the others); repeated heads are copied after the head phase.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/kernels.h"
#include "attention/workspace.h"

/* Query rows per block (both paths) and keys per tile (online path). The
 * tile (B × K floats, 128 KiB) and the Z rows it updates (B × dh) stay in
 * L2; tuned on the GPT-2 shape (bench/README.md). */
#ifndef ATTN_BLOCK_Q
#define ATTN_BLOCK_Q 128
#endif
#ifndef ATTN_BLOCK_K
#define ATTN_BLOCK_K 256
#endif

/* The slices of one call's scratch, carved in this order. */
enum {
    WS_QKV,  /* n × 3hd floats: Q, K, V of every head side by side */
    WS_ROWS, /* B × n floats: P rows of a head whose scores (only) are shown */
    WS_TILE, /* B × K + 2B floats: online tile, running max and sum */
    WS_Z,    /* n × hd floats: [Z_1 … Z_h], only when w_o is applied */
    WS_SLOT, /* 2h size_t: slot[i], the first position of head i in in->heads
              * (or SIZE_MAX); then order[t], the head of task t */
    WS_COUNT
};

/* What one call must compute, from which outputs are non-NULL. */
typedef struct attn_plan {
    int ph_q, ph_k, ph_v, ph_s, ph_p, ph_z; /* per-head outputs wanted (and hs > 0) */
    int want_all;                           /* delta or embeddings: every head, and ΔE */
    int want_s, want_p, want_z;             /* scores, softmax, P·V needed at all */
    int full;                               /* every head on the full path, else online */
    int need_q, need_k, need_v;             /* projections needed */
    size_t bytes[WS_COUNT];                 /* slice sizes; 0 = slice not needed */
} attn_plan;

/* The sizes and pointers every per-head step needs. */
typedef struct attn_ctx {
    const attn_input *in;
    const attn_weights *w;
    size_t n, dm, h, dh, hd, ld; /* ld = 3hd, the stride of QKV and w_qkv */
    int causal;
    float *qkv;                  /* n × 3hd */
    float *rows;                 /* B × n, or NULL */
    float *tile;                 /* B × K, then m: B, l: B; or NULL */
} attn_ctx;

/* ---- sizes, overflow-checked ------------------------------------------ */

static int size_mul(size_t *r, size_t a, size_t b) {
    if (b != 0 && a > SIZE_MAX / b) return -1;
    *r = a * b;
    return 0;
}

static int size_add(size_t *r, size_t a, size_t b) {
    if (a > SIZE_MAX - b) return -1;
    *r = a + b;
    return 0;
}

/* *bytes = rows · cols floats */
static int floats_bytes(size_t *bytes, size_t rows, size_t cols) {
    size_t count;
    if (size_mul(&count, rows, cols)) return -1;
    return size_mul(bytes, count, sizeof(float));
}

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

/* Fills the slice table for the slices switched on; -1 on overflow. Blocks
 * are clamped to n so that a tiny call carves a tiny workspace. */
static int slice_sizes(size_t bytes[WS_COUNT], size_t n, size_t h, size_t dh, int qkv, int rows,
                       int tile, int z, int slot) {
    size_t hd, ld, bq = min_size(ATTN_BLOCK_Q, n), bk = min_size(ATTN_BLOCK_K, n);
    if (size_mul(&hd, h, dh) || size_mul(&ld, hd, 3)) return -1;
    for (int s = 0; s < WS_COUNT; s++)
        bytes[s] = 0;
    if (qkv && floats_bytes(&bytes[WS_QKV], n, ld)) return -1;
    if (rows && floats_bytes(&bytes[WS_ROWS], bq, n)) return -1;
    if (tile) bytes[WS_TILE] = (bq * bk + 2 * bq) * sizeof(float); /* small constants */
    if (z && floats_bytes(&bytes[WS_Z], n, hd)) return -1;
    if (slot && size_mul(&bytes[WS_SLOT], h, 2 * sizeof(size_t))) return -1;
    return 0;
}

/* bytes rounded up to ATTN_WS_ALIGN, for a slice slice_total accepted. */
static size_t slice_round(size_t bytes) {
    return (bytes + ATTN_WS_ALIGN - 1) / ATTN_WS_ALIGN * ATTN_WS_ALIGN;
}

/* Sum of the slices, each rounded up to ATTN_WS_ALIGN; -1 on overflow. */
static int slice_total(size_t *total, const size_t bytes[WS_COUNT]) {
    size_t t = 0;
    for (int s = 0; s < WS_COUNT; s++) {
        size_t b = bytes[s];
        if (size_add(&b, b, ATTN_WS_ALIGN - 1)) return -1;
        b -= b % ATTN_WS_ALIGN;
        if (size_add(&t, t, b)) return -1;
    }
    *total = t;
    return 0;
}

/* ---- the plan ---------------------------------------------------------- */

static int plan_make(attn_plan *pl, const attn_output *out, const attn_input *in) {
    const attn_weights *w = in->weights;
    int hs = in->n_heads_out > 0;
    pl->ph_q = hs && out->q;
    pl->ph_k = hs && out->k;
    pl->ph_v = hs && out->v;
    pl->ph_s = hs && out->scores;
    pl->ph_p = hs && out->patterns;
    pl->ph_z = hs && out->head_outputs;
    pl->want_all = out->delta || out->embeddings;
    pl->want_z = pl->ph_z || pl->want_all;
    pl->want_p = pl->ph_p || pl->want_z;
    pl->want_s = pl->ph_s || pl->want_p;
    pl->need_q = pl->ph_q || pl->want_s;
    pl->need_k = pl->ph_k || pl->want_s;
    pl->need_v = pl->ph_v || pl->want_z;
    /* When scores or patterns are shown, every head takes the full path, so
     * that ΔE is bit for bit the same whichever heads are listed; P needs
     * rows of scratch for a head whose patterns are not shown but whose Z
     * is needed. Otherwise every head takes the online path. */
    int full = pl->full = out->scores || out->patterns; /* even with no head listed */
    int rows = full && pl->want_z && (!pl->ph_p || pl->want_all);
    int tile = pl->want_z && !full;
    int z = pl->want_all && w->w_o != NULL;
    int qkv = pl->need_q || pl->need_k || pl->need_v;
    return slice_sizes(pl->bytes, in->n_tokens, w->n_heads, w->d_head, qkv, rows, tile, z,
                       hs || pl->want_s);
}

/* ---- the GEMMs ---------------------------------------------------------- */

/*
 * Rows r0 … r0+rb of head i on the full path. s: n × n (caller's scores)
 * or NULL, p: n × n (caller's patterns) or NULL; z: n × dh with stride ldz,
 * or NULL; all three the whole head's, written only in rows r0 … r0+rb.
 * S goes to s, else into p (softmax in place), else into c->rows (B × n);
 * P goes to p, else into c->rows. Reads Q_i = qkv[:, i·dh],
 * K_i = qkv[:, hd + i·dh], V_i = qkv[:, 2hd + i·dh], each n × dh (stride 3hd).
 */
static int head_full(float *s, float *p, float *z, size_t ldz, const attn_ctx *c, size_t i,
                     size_t r0, size_t rb) {
    const float *q = c->qkv + i * c->dh;
    const float *k = c->qkv + c->hd + i * c->dh;
    const float *v = c->qkv + 2 * c->hd + i * c->dh;
    const size_t n = c->n;
    size_t kend = c->causal ? r0 + rb : n; /* keys past kend: masked for all rb rows */
    float *sd = s ? s + r0 * n : p ? p + r0 * n : c->rows;
    /* S[r0:r1, 0:kend] = scale · Q_i[r0:r1] · K_i[0:kend]ᵀ;  (m, n, k) = (rb, kend, dh) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kend, (int)c->dh,
                c->in->scale, q + r0 * c->ld, (int)c->ld, k, (int)c->ld, 0.0f, sd, (int)n);
    /* The caller's rows get −inf up to n; scratch rows only need kend. */
    size_t scols = sd == c->rows ? kend : n;
    if (attn_mask_tile(sd, n, &c->in->mask, n, r0, rb, 0, scols)) return ATTN_ERR_NONFINITE;
    if (!p && !z) return 0;
    float *pd = p ? p + r0 * n : c->rows;
    attn_softmax_block(pd, n, sd, n, rb, p ? n : kend, r0, c->causal);
    if (!z) return 0;
    /* Z[r0:r1] = P[r0:r1, 0:kend] · V_i[0:kend];  (m, n, k) = (rb, dh, kend) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)c->dh, (int)kend, 1.0f,
                pd, (int)n, v, (int)c->ld, 0.0f, z + r0 * ldz, (int)ldz);
    return 0;
}

/*
 * Rows r0 … r0+rb of head i on the online path: z (n × dh, stride ldz, the
 * whole head's) gets Z_i in those rows, with one B × K tile of scratch
 * (c->tile) and the running max and sum of the block's rows.
 */
static int head_online(float *z, size_t ldz, const attn_ctx *c, size_t i, size_t r0, size_t rb) {
    const float *q = c->qkv + i * c->dh;
    const float *k = c->qkv + c->hd + i * c->dh;
    const float *v = c->qkv + 2 * c->hd + i * c->dh;
    const size_t n = c->n, ldt = min_size(ATTN_BLOCK_K, n);
    float *t = c->tile, *m = t + min_size(ATTN_BLOCK_Q, n) * ldt, *l = m + min_size(ATTN_BLOCK_Q, n);
    size_t kend = c->causal ? r0 + rb : n; /* key blocks past the diagonal: all masked */
    float *zr = z + r0 * ldz;
    for (size_t x = 0; x < rb; x++)
        m[x] = -INFINITY, l[x] = 0.0f;
    for (size_t k0 = 0; k0 < kend; k0 += ATTN_BLOCK_K) {
        size_t kb = min_size(ATTN_BLOCK_K, kend - k0);
        /* T = scale · Q_i[r0:r1] · K_i[k0:k1]ᵀ;  (m, n, k) = (rb, kb, dh) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rb, (int)kb, (int)c->dh,
                    c->in->scale, q + r0 * c->ld, (int)c->ld, k + k0 * c->ld, (int)c->ld, 0.0f, t,
                    (int)ldt);
        if (attn_mask_tile(t, ldt, &c->in->mask, n, r0, rb, k0, kb)) return ATTN_ERR_NONFINITE;
        /* Turns T into weights over the running sum and rescales zr to it,
         * before T·V adds to it. */
        attn_softmax_online(t, ldt, m, l, zr, ldz, c->dh, rb, kb, r0, k0, c->causal);
        /* Z[r0:r1] (+)= T · V_i[k0:k1];  (m, n, k) = (rb, dh, kb); the first
         * key block overwrites what the caller's buffer held. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)c->dh, (int)kb, 1.0f,
                    t, (int)ldt, v + k0 * c->ld, (int)c->ld, k0 == 0 ? 0.0f : 1.0f, zr, (int)ldz);
    }
    return 0;
}

/* buf: slots of `size` floats; slot `to` ← slot `from` */
static void copy_slot(float *buf, size_t to, size_t from, size_t size) {
    memcpy(buf + to * size, buf + from * size, size * sizeof(float));
}

/* ---- tasks ----------------------------------------------------------------- */

/*
 * A rows × cols result cut into tiles, each one task. The cut depends on
 * the shape alone, so attn_compute and every runner make the very same
 * sgemm calls. Tiles start at ATTN_TILE × ATTN_TILE and are halved
 * (columns first, down to ATTN_TILE_MIN) until there are ATTN_TILES_MIN of
 * them, enough to keep two to four threads busy to the end; tiny results
 * stay one tile.
 */
#ifndef ATTN_TILE
#define ATTN_TILE 256
#endif
#ifndef ATTN_TILE_MIN
#define ATTN_TILE_MIN 64
#endif
#ifndef ATTN_TILES_MIN
#define ATTN_TILES_MIN 12
#endif

typedef struct attn_tiling {
    size_t rows, cols; /* the whole result */
    size_t rb, cb;     /* rows and columns of a tile (the last ones smaller) */
    size_t nr, nc;     /* tiles down and across */
} attn_tiling;

static size_t div_up(size_t a, size_t b) {
    return a / b + (a % b != 0);
}

static attn_tiling tiling_make(size_t rows, size_t cols) {
    attn_tiling g = {rows, cols, min_size(rows, ATTN_TILE), min_size(cols, ATTN_TILE), 0, 0};
    for (;;) {
        g.nr = div_up(rows, g.rb), g.nc = div_up(cols, g.cb);
        if (g.nr * g.nc >= ATTN_TILES_MIN) break;
        if (g.cb >= 2 * ATTN_TILE_MIN && g.cb >= g.rb)
            g.cb = div_up(g.cb / 2, 16) * 16; /* a multiple of the kernels' widths */
        else if (g.rb >= 2 * ATTN_TILE_MIN)
            g.rb /= 2;
        else
            break;
    }
    return g;
}

/* Tile t of g: rows *r0 … *r0+*rb, columns *c0 … *c0+*cb. */
static void tiling_tile(const attn_tiling *g, size_t t, size_t *r0, size_t *rb, size_t *c0,
                        size_t *cb) {
    *r0 = t / g->nc * g->rb;
    *c0 = t % g->nc * g->cb;
    *rb = min_size(g->rb, g->rows - *r0);
    *cb = min_size(g->cb, g->cols - *c0);
}

/* What every task of one call shares; read-only but for rc. */
typedef struct attn_tasks {
    const attn_ctx *c;       /* rows and tile: the caller's slices */
    const attn_plan *pl;
    const attn_output *out;
    attn_workspace *ws;      /* the caller's */
    const size_t *slot;      /* head → first position in in->heads, or SIZE_MAX */
    const size_t *order;     /* the heads, in task order */
    size_t blocks;           /* blocks of B query rows per head */
    float *zall;             /* n × hd, [Z_1 … Z_h] when ΔE is wanted, or NULL */
    float *d;                /* n × dm: ΔE (delta, or embeddings finished in place) */
    attn_tiling tiles;       /* of the projection, or of ΔE */
    size_t rows_bytes;       /* B × n rows, rounded up to ATTN_WS_ALIGN; 0: none */
    size_t tile_bytes;       /* B × K tile and 2B; 0: none */
    atomic_int rc;           /* 0, or the first error a task stored */
} attn_tasks;

/* Runs task(arg, t, ws) for t in 0 … count-1: by the runner, or in turn. */
static void run_tasks(const attn_runner *runner, attn_task_fn task, attn_tasks *tp, size_t count) {
    if (runner && runner->stop && runner->stop(runner->ctx))
        atomic_store(&tp->rc, ATTN_ERR_STOPPED);
    if (atomic_load(&tp->rc)) return;
    if (runner && count > 1) {
        runner->run(runner->ctx, task, tp, count);
        return;
    }
    for (size_t t = 0; t < count && !atomic_load(&tp->rc); t++)
        task(tp, t, tp->ws);
}

/* attn_task_fn, tile t of QKV = E · w_qkv + b_qkv. */
static void project_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_tasks *tp = arg;
    const attn_ctx *c = tp->c;
    size_t r0, rb, c0, cb;
    tiling_tile(&tp->tiles, t, &r0, &rb, &c0, &cb);
    float *dst = c->qkv + r0 * c->ld + c0;
    /* (m, n, k) = (rb, cb, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)cb, (int)c->dm, 1.0f,
                c->in->embeddings + r0 * c->dm, (int)c->dm, c->w->w_qkv + c0, (int)c->ld, 0.0f,
                dst, (int)c->ld);
    if (c->w->b_qkv) attn_add_bias_rows(dst, c->w->b_qkv + c0, rb, cb, c->ld);
}

/* qkv[:, col … col+dh]: n × dh (stride 3hd)  ←  E: n × dm,
 * w_qkv[:, col … col+dh]: dm × dh (stride 3hd), b_qkv[col …]: dh */
static void project_block(const attn_ctx *c, size_t col) {
    /* (m, n, k) = (n, dh, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)c->n, (int)c->dh, (int)c->dm, 1.0f,
                c->in->embeddings, (int)c->dm, c->w->w_qkv + col, (int)c->ld, 0.0f, c->qkv + col,
                (int)c->ld);
    if (c->w->b_qkv) attn_add_bias_rows(c->qkv + col, c->w->b_qkv + col, c->n, c->dh, c->ld);
}

/* Head i, listed first at position j (SIZE_MAX: not listed, only feeds ΔE),
 * rows r0 … r0+rb, with the rows and tile of c. */
static int head_run(const attn_tasks *tp, const attn_ctx *c, size_t i, size_t j, size_t r0,
                    size_t rb) {
    const attn_plan *pl = tp->pl;
    const attn_output *out = tp->out;
    const size_t n = c->n, nsq = n * n, ndh = n * c->dh;
    const int listed = j != SIZE_MAX;
    float *z = NULL;
    size_t ldz = c->dh;
    if (tp->zall)
        z = tp->zall + i * c->dh, ldz = c->hd;
    else if (listed && pl->ph_z)
        z = out->head_outputs + j * ndh;
    int rc = 0;
    if (pl->full)
        rc = head_full(listed && pl->ph_s ? out->scores + j * nsq : NULL,
                       listed && pl->ph_p ? out->patterns + j * nsq : NULL, z, ldz, c, i, r0, rb);
    else if (z)
        rc = head_online(z, ldz, c, i, r0, rb);
    if (rc) return rc;
    if (tp->zall && listed && pl->ph_z)
        attn_copy_block(out->head_outputs + j * ndh + r0 * c->dh, c->dh, z + r0 * ldz, c->hd, rb,
                        c->dh);
    return 0;
}

/* attn_task_fn, task t: block t % blocks of head order[t / blocks]. */
static void head_task(void *arg, size_t t, attn_workspace *ws) {
    attn_tasks *tp = arg;
    if (atomic_load_explicit(&tp->rc, memory_order_relaxed)) return; /* the call fails anyway */
    attn_ctx c = *tp->c;
    int rc = 0;
    if (ws != tp->ws && tp->rows_bytes + tp->tile_bytes > 0) {
        /* Another thread's workspace: only its own rows and tile live there. */
        unsigned char *block = attn_workspace_reserve(ws, tp->rows_bytes + tp->tile_bytes);
        if (!block) rc = ATTN_ERR_NOMEM;
        c.rows = block && tp->rows_bytes ? (float *)(void *)block : NULL;
        c.tile = block && tp->tile_bytes ? (float *)(void *)(block + tp->rows_bytes) : NULL;
    }
    size_t i = tp->order[t / tp->blocks], r0 = t % tp->blocks * ATTN_BLOCK_Q;
    if (!rc) rc = head_run(tp, &c, i, tp->slot[i], r0, min_size(ATTN_BLOCK_Q, c.n - r0));
    int none = 0;
    if (rc) atomic_compare_exchange_strong(&tp->rc, &none, rc);
}

/* attn_task_fn, tile t of ΔE = Z · w_o + b_o (Z already in d without w_o),
 * then E' = E + ΔE. */
static void out_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    const attn_tasks *tp = arg;
    const attn_ctx *c = tp->c;
    size_t r0, rb, c0, cb;
    tiling_tile(&tp->tiles, t, &r0, &rb, &c0, &cb);
    float *d = tp->d + r0 * c->dm + c0;
    if (c->w->w_o) /* (m, n, k) = (rb, cb, hd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rb, (int)cb, (int)c->hd, 1.0f,
                    tp->zall + r0 * c->hd, (int)c->hd, c->w->w_o + c0, (int)c->dm, 0.0f, d,
                    (int)c->dm);
    if (c->w->b_o) attn_add_bias_rows(d, c->w->b_o + c0, rb, cb, c->dm);
    float *e = tp->out->embeddings;
    if (!e) return;
    for (size_t r = r0; r < r0 + rb; r++)
        attn_add(e + r * c->dm + c0, c->in->embeddings + r * c->dm + c0, tp->d + r * c->dm + c0,
                 cb);
}

/* ---- the call ------------------------------------------------------------ */

int attn_compute(const attn_output *out, attn_workspace *ws, const attn_input *in) {
    return attn_compute_with(out, ws, in, NULL);
}

int attn_compute_with(const attn_output *out, attn_workspace *ws, const attn_input *in,
                      const attn_runner *runner) {
    const attn_weights *w = in->weights;
    attn_ctx c = {.in = in,
                  .w = w,
                  .n = in->n_tokens,
                  .dm = w->d_model,
                  .h = w->n_heads,
                  .dh = w->d_head,
                  .causal = in->mask.kind == ATTN_MASK_CAUSAL};
    const size_t n = c.n, hs = in->n_heads_out;
    attn_plan pl;
    size_t total;

    if (plan_make(&pl, out, in) || slice_total(&total, pl.bytes)) return ATTN_ERR_NOMEM;
    c.hd = c.h * c.dh; /* cannot overflow: slice_sizes checked 3hd */
    c.ld = 3 * c.hd;
    if (!pl.need_q && !pl.need_k && !pl.need_v) return 0; /* nothing asked for */
    /* cblas takes int sizes. */
    if (n > INT_MAX || c.dm > INT_MAX || c.ld > INT_MAX) return ATTN_ERR_NOMEM;

    unsigned char *block = attn_workspace_reserve(ws, total);
    if (!block) return ATTN_ERR_NOMEM;
    float *slice[WS_COUNT];
    size_t off = 0; /* the same rounding as slice_total, so within total */
    for (int s = 0; s < WS_COUNT; s++) {
        slice[s] = pl.bytes[s] ? (float *)(void *)(block + off) : NULL;
        off += slice_round(pl.bytes[s]);
    }
    c.qkv = slice[WS_QKV];
    c.rows = slice[WS_ROWS];
    c.tile = slice[WS_TILE];
    size_t *slot = (size_t *)(void *)slice[WS_SLOT];
    const size_t ndh = n * c.dh;

    /* slot[i]: first position of head i in the list; later ones copy it. */
    size_t distinct = 0;
    if (slot) {
        for (size_t i = 0; i < c.h; i++)
            slot[i] = SIZE_MAX;
        for (size_t j = 0; j < hs; j++)
            if (slot[in->heads[j]] == SIZE_MAX) slot[in->heads[j]] = j, distinct++;
    }

    attn_tasks tp = {.c = &c,
                     .pl = &pl,
                     .out = out,
                     .ws = ws,
                     .slot = slot,
                     .order = slot ? slot + c.h : NULL,
                     .blocks = div_up(n, ATTN_BLOCK_Q),
                     .rows_bytes = slice_round(pl.bytes[WS_ROWS]),
                     .tile_bytes = slice_round(pl.bytes[WS_TILE])};
    atomic_init(&tp.rc, 0);

    /* Projection: all of it in tiles when (nearly) all of it is used, else
     * only the blocks of the listed heads. */
    if (pl.want_all || (distinct == c.h && pl.need_q && pl.need_k && pl.need_v)) {
        tp.tiles = tiling_make(n, c.ld);
        run_tasks(runner, project_task, &tp, tp.tiles.nr * tp.tiles.nc);
        if (atomic_load(&tp.rc)) return atomic_load(&tp.rc);
    } else {
        for (size_t j = 0; j < hs; j++) {
            size_t i = in->heads[j];
            if (slot[i] != j) continue;
            if (pl.need_q) project_block(&c, i * c.dh);
            if (pl.need_k) project_block(&c, c.hd + i * c.dh);
            if (pl.need_v) project_block(&c, 2 * c.hd + i * c.dh);
        }
    }
    for (size_t j = 0; j < hs; j++) {
        const float *qi = c.qkv + in->heads[j] * c.dh;
        if (pl.ph_q) attn_copy_block(out->q + j * ndh, c.dh, qi, c.ld, n, c.dh);
        if (pl.ph_k) attn_copy_block(out->k + j * ndh, c.dh, qi + c.hd, c.ld, n, c.dh);
        if (pl.ph_v) attn_copy_block(out->v + j * ndh, c.dh, qi + 2 * c.hd, c.ld, n, c.dh);
    }
    if (!pl.want_s) return 0;

    /* Where [Z_1 … Z_h] goes when ΔE is wanted: with no w_o, ΔE = Z, so
     * straight into the caller's delta (or embeddings, finished in place). */
    if (pl.want_all) {
        tp.d = out->delta ? out->delta : out->embeddings;
        tp.zall = w->w_o ? slice[WS_Z] : tp.d;
    }

    /* The head tasks: the listed heads as listed, their outputs straight in
     * the caller's buffers; then, when ΔE is wanted, the heads nobody asked
     * to see, by the same path; each head by blocks of query rows. */
    size_t *order = slot + c.h, heads = 0;
    for (size_t j = 0; j < hs; j++)
        if (slot[in->heads[j]] == j) order[heads++] = in->heads[j];
    for (size_t i = 0; pl.want_all && i < c.h; i++)
        if (slot[i] == SIZE_MAX) order[heads++] = i;
    run_tasks(runner, head_task, &tp, heads * tp.blocks);
    int rc = atomic_load(&tp.rc);
    if (rc) return rc;

    /* A head listed again: a copy of what its first position shows. */
    for (size_t j = 0; j < hs; j++) {
        size_t first = slot[in->heads[j]];
        const size_t nsq = n * n; /* fits: scores/patterns of that size exist when used */
        if (first == j) continue;
        if (pl.ph_s) copy_slot(out->scores, j, first, nsq);
        if (pl.ph_p) copy_slot(out->patterns, j, first, nsq);
        if (pl.ph_z) copy_slot(out->head_outputs, j, first, ndh);
    }
    if (!pl.want_all) return 0;

    tp.tiles = tiling_make(n, c.dm);
    run_tasks(runner, out_task, &tp, tp.tiles.nr * tp.tiles.nc);
    return atomic_load(&tp.rc);
}

/* ---- sizes for limits, metrics and benchmarks ---------------------------- */

double attn_flops(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head, int has_w_o) {
    double n = (double)n_tokens, dm = (double)d_model, h = (double)n_heads;
    double dh = (double)d_head, hd = h * dh;
    double f = 2.0 * n * (3.0 * hd) * dm; /* E · w_qkv */
    f += h * 2.0 * n * n * dh;            /* Q_i · K_iᵀ */
    f += h * 2.0 * n * dh * n;            /* P_i · V_i */
    if (has_w_o) f += 2.0 * n * dm * hd;  /* Z · w_o */
    return f;
}

/* Every slice at once: an upper bound for any output set. Linear in n:
 * no path keeps an n × n buffer (the caller's scores/patterns excepted). */
size_t attn_workspace_need(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head) {
    (void)d_model; /* ΔE is written into the caller's buffer, never scratch */
    size_t bytes[WS_COUNT], total;
    if (slice_sizes(bytes, n_tokens, n_heads, d_head, 1, 1, 1, 1, 1)) return SIZE_MAX;
    if (slice_total(&total, bytes)) return SIZE_MAX;
    return total;
}
