/*
 * attend.c — the attend phase's heads and blocks, common to both paths.
 *
 * One task per (head, block of B query rows): a single head is split too.
 * Heads come in a fixed order — the listed heads as listed (each once, at
 * its first position), then, when ΔE is wanted, the heads nobody asked to
 * see, by the same path — so that the tasks depend on the shape and the
 * list alone. Task t is block t % blocks of head order[t / blocks].
 *
 * For each task this file decides what the path sees (attn_block): where
 * head i's Q, and the K and V of its K/V head (shared by its group, never
 * copied), are in QKV, which keys its rows may attend to (kbeg … kend,
 * attn_block_keys, computed once per call), its ALiBi slope and sink,
 * where its S, P and Z go, and which scratch it uses. The path
 * (attend_full.c, attend_online.c) then computes that block alone.
 *
 * Z goes straight into the caller's head_outputs when ΔE is not wanted;
 * when it is, into [Z_1 … Z_h] (c->zall, read by output.c), and a listed
 * head's rows are copied to head_outputs after. A task on another thread
 * carves its B × n rows and B × K tile from that thread's workspace. A head
 * listed again gets a copy of its first position's S, P and Z once every
 * task is done.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention/kernels.h"
#include "attention/plan.h"
#include "attention/vexp.h"

/* The block of task t: head i (listed first at position j, SIZE_MAX when
 * only ΔE needs it), rows r0 … r0+rb, with the scratch given. */
static attn_block block_make(const attn_plan *pl, const attn_call *c, size_t i, size_t j, size_t r0,
                             attn_scratch scratch) {
    const attn_sizes *sz = &pl->sz;
    const attn_output *out = &pl->out;
    const size_t nm = sz->n * sz->m, ndh = sz->n * sz->dh;
    const int listed = j != SIZE_MAX;
    const size_t blk = r0 / ATTN_BLOCK_Q;
    const float *alibi = pl->in->weights->alibi, *sinks = pl->in->weights->sinks;
    attn_block b = {.q = c->q + attn_col_q(sz, i),
                    .k = c->kv + attn_col_k(sz, i),
                    .v = c->kv + attn_col_v(sz, i),
                    .r0 = r0,
                    .rb = attn_min(ATTN_BLOCK_Q, sz->n - r0),
                    .kbeg = c->range[2 * blk],
                    .kend = c->range[2 * blk + 1],
                    .rules = {.mask = &pl->in->mask,
                              .m = sz->m,
                              .pos = c->pos,
                              .window = pl->in->weights->window,
                              .chunk = pl->in->weights->chunk,
                              .softcap = pl->in->weights->softcap,
                              .slope = alibi ? alibi[i] : 0.0f},
                    .sink = sinks ? sinks[i] : -INFINITY,
                    .s = listed && out->scores ? out->scores + j * nm : NULL,
                    .p = listed && out->patterns ? out->patterns + j * nm : NULL,
                    .ldz = sz->dh,
                    .scratch = scratch};
    if (c->zall)
        b.z = c->zall + i * sz->dh, b.ldz = sz->hd;
    else if (listed && out->head_outputs)
        b.z = out->head_outputs + j * ndh;
    return b;
}

/* Position of token t: pos[t], or t when the input gives none. */
static unsigned long long pos_at(const unsigned *pos, size_t t) {
    return pos ? pos[t] : t;
}

/* What a block's queries may reach: the window w about their positions
 * pmin … pmax, and the chunks [clo, chi) they lie in (0: none). */
typedef struct reach {
    unsigned long long w, pmin, pmax, c, clo, chi;
} reach;

static int reached(const reach *r, unsigned long long p) {
    return (!r->w || (p + r->w > r->pmin && p < r->pmax + r->w)) &&
           (!r->c || (p >= r->clo && p < r->chi));
}

void attn_block_keys(const attn_plan *pl, const unsigned *pos, size_t blk, size_t *kbeg,
                     size_t *kend) {
    const attn_sizes *sz = &pl->sz;
    const size_t r0 = blk * ATTN_BLOCK_Q, r1 = r0 + attn_min(ATTN_BLOCK_Q, sz->n - r0);
    const unsigned long long w = pl->in->weights->window, c = pl->in->weights->chunk;
    /* Causal: the keys past the block's last row are masked for all its
     * rows, so neither path computes them. */
    *kbeg = 0;
    *kend = pl->in->mask.kind == ATTN_MASK_CAUSAL ? r1 : sz->m;
    if ((!w && !c) || sz->cross) return;
    /* A window: key k can be allowed only if |p_q − p_k| < w for some query
     * of the block, so only if pmin − w < p_k < pmax + w. A chunk: only if
     * p_k is in the chunk of some query, ⌊pmin / c⌋·c ≤ p_k < (⌊pmax / c⌋ + 1)·c.
     * The first and last such keys bound the block's keys (positions need
     * not increase: a key between them may still be masked, by the score
     * pass), so that a block's keys are at most w or c and its own rows
     * wide, for increasing positions, and the work is linear in n. */
    unsigned long long pmin = pos_at(pos, r0), pmax = pmin;
    for (size_t q = r0; q < r1; q++) {
        unsigned long long p = pos_at(pos, q);
        if (p < pmin) pmin = p;
        if (p > pmax) pmax = p;
    }
    const reach rr = {w, pmin, pmax, c, c ? pmin - pmin % c : 0, c ? pmax - pmax % c + c : 0};
    size_t a = 0, b = *kend;
    while (a < b && !reached(&rr, pos_at(pos, a)))
        a++;
    while (b > a && !reached(&rr, pos_at(pos, b - 1)))
        b--;
    *kbeg = a;
    *kend = b;
}

/* attn_task_fn, task t: block t % blocks of head order[t / blocks]. */
void attn_attend_task(void *arg, size_t t, attn_workspace *ws) {
    attn_call *c = arg;
    const attn_plan *pl = c->pl;
    const attn_sizes *sz = &pl->sz;
    if (atomic_load_explicit(&c->rc, memory_order_relaxed)) return; /* the call fails anyway */
    attn_scratch scratch = c->scratch;
    size_t rows_bytes = attn_slice_round(pl->bytes[WS_ROWS]);
    size_t tile_bytes = attn_slice_round(pl->bytes[WS_TILE]);
    if (ws != c->ws && rows_bytes + tile_bytes > 0) {
        /* Another thread's workspace: only its own rows and tile live there. */
        unsigned char *mem = attn_workspace_reserve(ws, rows_bytes + tile_bytes);
        if (!mem) {
            attn_call_fail(c, ATTN_FAIL_NOMEM);
            return;
        }
        scratch.rows = rows_bytes ? (float *)(void *)mem : NULL;
        scratch.tile = tile_bytes ? (float *)(void *)(mem + rows_bytes) : NULL;
    }
    size_t i = c->order[t / sz->blocks], j = c->slot[i];
    attn_block b = block_make(pl, c, i, j, t % sz->blocks * ATTN_BLOCK_Q, scratch);
    int rc = c->block(pl, &b);
    if (rc) {
        attn_call_fail(c, rc);
        return;
    }
    if (c->zall && j != SIZE_MAX && pl->out.head_outputs)
        attn_copy_block(pl->out.head_outputs + j * sz->n * sz->dh + b.r0 * sz->dh, sz->dh,
                        b.z + b.r0 * b.ldz, b.ldz, b.rb, sz->dh);
}

/* Q's rows of the block are read by its task alone, and q (or q_raw) was
 * copied out by the projection: nothing else sees them scaled. */
int attn_rescale_block_q(const attn_plan *pl, const attn_block *b, float *alpha) {
    if (!(*alpha < 1.0f)) return 0;
    for (size_t r = b->r0; r < b->r0 + b->rb; r++)
        attn_vscale(b->q + r * pl->sz.ldq, *alpha, pl->sz.dh);
    *alpha = 1.0f;
    return 1;
}

/* buf: slots of `size` floats; slot `to` ← slot `from` */
static void copy_slot(float *buf, size_t to, size_t from, size_t size) {
    memcpy(buf + to * size, buf + from * size, size * sizeof(float));
}

size_t attn_attend_prepare(const attn_plan *pl, attn_call *c, attn_block_fn block) {
    const attn_sizes *sz = &pl->sz;
    const size_t *heads = pl->in->heads, *slot = c->slot;
    size_t count = 0;
    for (size_t j = 0; j < sz->hs; j++)
        if (slot[heads[j]] == j) c->order[count++] = heads[j];
    for (size_t i = 0; pl->stage == ATTN_STAGE_DELTA && i < sz->h; i++)
        if (slot[i] == SIZE_MAX) c->order[count++] = i;
    c->block = block;
    return count * sz->blocks;
}

void attn_attend_finish(const attn_plan *pl, attn_call *c) {
    /* A head listed again: a copy of what its first position shows. */
    const attn_sizes *sz = &pl->sz;
    const size_t *heads = pl->in->heads, *slot = c->slot;
    const attn_output *out = &pl->out;
    const size_t nm = sz->n * sz->m; /* fits: scores/patterns of that size exist when used */
    const size_t ndh = sz->n * sz->dh;
    for (size_t j = 0; j < sz->hs; j++) {
        size_t first = slot[heads[j]];
        if (first == j) continue;
        if (out->scores) copy_slot(out->scores, j, first, nm);
        if (out->patterns) copy_slot(out->patterns, j, first, nm);
        if (out->head_outputs) copy_slot(out->head_outputs, j, first, ndh);
    }
}
