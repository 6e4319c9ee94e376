/*
 * batch.c — attn_compute_batch: many sequences through one weight set.
 *
 * A batch runs the phases of compute.c once for all its sequences, each
 * phase one run of tasks (so that a runner spreads every sequence's work
 * over its threads), by the very steps a single call takes (plan.h):
 *
 *   plan      each sequence's own plan (attn_plan_make), as attn_compute
 *             makes it; its call's small slices (head slots, key ranges,
 *             positions) carved from the batch's block
 *   project   RoPE's table: each sequence's rows by its own positions, one
 *             run of every sequence's tasks. Then the sequences whose QKV
 *             is computed whole are stacked: their rows of E (and C) side
 *             by side, at most three products — self-attention's E · w_qkv
 *             over all their rows, and with contexts E · Wq and C · Wkv —
 *             whose tiles are one run; the tiles rotate Q and K by the
 *             stacked table's rows. Then, per sequence on this thread, what
 *             attn_project_rest does for one call: the listed heads' own
 *             blocks for a sequence that wants only some, q_raw and k_raw,
 *             the rotation not done in the tiles, q, k, v.
 *   attend    one run of the tasks per (sequence, head, block of 128 query
 *             rows), each attn_attend_task on the sequence's own call: its
 *             path, keys, rules and outputs as attn_compute would have them
 *   output    ΔE = Z · w_o + b_o over the stacked rows of the sequences that
 *             want it, one run of its tiles; each tile then copies its rows
 *             to their sequence's delta and adds E for its embeddings.
 *
 * Memory, one block of the caller's workspace (B_*): the stacked QKV (or
 * Q and KV), Z and ΔE of the whole batch, RoPE's table, copies of E and C
 * padded to 12 rows each (unless their rows are already so, one after the
 * other in memory),
 * one B × m + tile scratch shared by the tasks this thread runs (they run
 * one at a time), and per sequence its plan, call and small slices. Its
 * size is batch_layout's, which attn_batch_workspace_need computes for the
 * worst outputs: an exact upper bound.
 *
 * Batch invariance: every number of sequence i is bit for bit what
 * attn_compute_with gives for sequence i alone, whatever the batch holds,
 * because a call alone is a batch of one and takes the same steps. The
 * attend phase makes the same sgemm calls on the same data (same plan,
 * same strides: Q, K, V keep their row strides hd + 2gd, or hd and 2gd,
 * in the stack). The element-wise steps (bias, RoPE, E + ΔE) compute each
 * element from that element's inputs alone. What needs an argument is the
 * stacked sgemm of the projection and of ΔE, whose rows sit among other
 * sequences' rows:
 *
 *  - The column tiles are the same: attn_tiling_aligned's columns depend
 *    on the columns and the quantum (dh whenever there is RoPE) alone,
 *    never on the rows (tasks.c), so an element is computed by an sgemm
 *    over the same columns of W alone and in the stack.
 *  - K is never split by us: every tile's sgemm runs over all of dm (or
 *    dc, or hd), and starts from the same C (the bias, beta 1; or beta 0).
 *    OpenBLAS's level-3 driver (driver/level3/level3.c, 0.3.21 as in
 *    Debian 12) cuts K into blocks by its ls loop, whose min_l depends on
 *    K and GEMM_Q alone, and adds the blocks to C in order.
 *  - Rows: a row's value is not a function of its row of A and K alone. The
 *    Haswell/Zen sgemm kernel computes rows (N, for row-major) in blocks of
 *    12 from the call's first row, with two instruction orders inside a
 *    block, and the last rows of a call that is not a multiple of 12 by
 *    narrower kernels with orders of their own (measured on this machine:
 *    a row takes one of two values in a call of 12k rows, by its place mod
 *    12, and others in calls of other lengths). So every sequence's rows
 *    are stacked from a multiple of ATTN_ROWS_QUANTUM (12) and padded to
 *    one, with rows of zeros (E, C, Z) that no output reads; every row tile
 *    is a multiple of 12 rows (tasks.c). A row then sits at the same place
 *    mod 12 of a call of 12k rows, alone or in any batch. The cost: a
 *    sequence of n rows takes ⌈n/12⌉·12 rows of the products (16 → 24).
 *  - OpenBLAS's own threads would split a call's rows at places of their
 *    own (its threaded driver splits M and N): the invariance holds with
 *    its thread count at 1, the server's setting (server/main.c).
 *  - interface/gemm.c of 0.3.21 forwards nothing to gemv (GEMM_GEMV_FORWARD
 *    came later, and is built for ARM64 and RISC-V only); its sgemm_direct
 *    path needs AVX-512 (SkylakeX) and its small-matrix path is permitted
 *    only by the SkylakeX kernels (sgemm_small_matrix_permit of the Haswell
 *    and Zen kernels returns 0, checked in the installed library). On an
 *    AVX-512 machine a small tile may take another kernel than a large one:
 *    tests/test_batch_engine.c checks the property bit for bit where it
 *    runs.
 *
 * A sequence that wants only some heads' q, k or v projects them by their
 * own sgemm, as attn_compute does, outside the stack. Errors: each
 * sequence's call keeps its own rc; after a run, the lowest sequence whose
 * call failed names the error (*failed, for ATTN_ERR_NONFINITE), so the
 * index does not depend on the threads. Sequences of different weight sets
 * (which the caller must not mix) are computed one by one.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/kernels.h"
#include "attention/plan.h"

/* ---- sizes, overflow-checked ------------------------------------------- */

static int add_to(size_t *r, size_t b) {
    if (*r > SIZE_MAX - b) return -1;
    *r += b;
    return 0;
}

/* *bytes = a · b · size */
static int mul3(size_t *bytes, size_t a, size_t b, size_t size) {
    if (b != 0 && a > SIZE_MAX / b) return -1;
    size_t ab = a * b;
    if (size != 0 && ab > SIZE_MAX / size) return -1;
    *bytes = ab * size;
    return 0;
}

static size_t round_up(size_t bytes) {
    return bytes > SIZE_MAX - (ATTN_WS_ALIGN - 1) ? SIZE_MAX : attn_slice_round(bytes);
}

/* The stacked rows of a sequence of n rows: n, rounded up to
 * ATTN_ROWS_QUANTUM (SIZE_MAX on overflow). */
static size_t rows_of(size_t n) {
    size_t q = ATTN_ROWS_QUANTUM;
    return n > SIZE_MAX - (q - 1) ? SIZE_MAX : (n + q - 1) / q * q;
}

/* rows × cols floats of x (stride cols) from src, then pad − rows rows of 0 */
static void copy_padded(float *x, const float *src, size_t rows, size_t pad, size_t cols) {
    memcpy(x, src, rows * cols * sizeof(float));
    memset(x + rows * cols, 0, (pad - rows) * cols * sizeof(float));
}

/* ---- the batch's block ---------------------------------------------------- */

/* One sequence: its plan, its call and where its rows are stacked. */
typedef struct batch_seq {
    attn_plan pl;
    attn_call c;
    int active; /* some output is asked for */
    int whole;  /* its QKV (or Q and KV) comes from the stacked products */
    size_t row; /* its first row in the stacked QKV, or Q with a context */
    size_t key; /* with a context: its first row in the stacked KV */
    size_t dz;  /* when it wants ΔE: its first row in the stacked Z and ΔE */
} batch_seq;

/* The slices of a batch's block, carved in this order. */
enum {
    B_SEQ,     /* count batch_seq */
    B_INDEX,   /* 3 · (count + 1) size_t: a phase's first task of each sequence; the
                * sequences that want ΔE, in order; their first rows */
    B_QKV,     /* self rows × (hd + 2gd) floats */
    B_Q,       /* rows with a context × hd */
    B_KV,      /* their keys × 2gd */
    B_E,       /* the whole self sequences' E, stacked, when not already */
    B_EQ,      /* the whole cross sequences' E, likewise */
    B_C,       /* their contexts, likewise */
    B_Z,       /* rows wanting ΔE × hd, with w_o */
    B_D,       /* rows wanting ΔE × dm: ΔE */
    B_FREQ,    /* dims/2 doubles: RoPE's f_t */
    B_ANGLES,  /* self rows × dims: RoPE's table */
    B_SCRATCH, /* the largest B × m rows + tile of a sequence, shared by this thread's tasks */
    B_SMALL,   /* each sequence's slot, range and position slices */
    B_COUNT
};

/* The per-sequence slices carved from B_SMALL. */
static const int small_slices[] = {WS_SLOT, WS_RANGE, WS_POS};

typedef struct batch_layout {
    size_t ld, hd, gd, dm, dc, dims; /* of the weights */
    size_t n_self, n_ws;             /* self-attention rows, those of whole sequences first */
    size_t n_cross, n_wc;            /* rows with a context, likewise */
    size_t m_cross, m_wc;            /* their context rows, likewise */
    size_t n_delta;                  /* rows that want ΔE */
    int e_apart, eq_apart, c_apart;  /* the whole sequences' E (or C) rows do not follow
                                      * one another in memory: copied */
    int rope, active, rope_tiles;    /* some sequence needs RoPE's table; some output is
                                      * asked for; every whole self sequence rotates in tiles */
    size_t bytes[B_COUNT];
    size_t total;
} batch_layout;

/* The number of distinct heads in->heads lists. */
static size_t heads_distinct(const attn_input *in) {
    size_t d = 0;
    for (size_t j = 0; j < in->n_heads_out; j++) {
        size_t e = 0;
        while (e < j && in->heads[e] != in->heads[j])
            e++;
        d += e == j;
    }
    return d;
}

/* Whether a plan's projection is whole (attn_project_whole, before its call exists). */
static int plan_whole(const attn_plan *pl) {
    const unsigned all = ATTN_PART_Q | ATTN_PART_K | ATTN_PART_V;
    return pl->stage == ATTN_STAGE_DELTA ||
           (pl->parts == all && heads_distinct(pl->in) == pl->sz.h);
}

/* The layout of a batch, from its sequences' plans; with outs NULL, of the
 * worst outputs (every sequence whole, wanting everything, by both paths,
 * its rows copied): an upper bound of every outs'. -1 on overflow. */
static int layout_make(batch_layout *lay, const attn_output *outs, const attn_input *ins,
                       size_t count) {
    memset(lay, 0, sizeof *lay);
    attn_sizes sz0;
    if (attn_sizes_of(&sz0, &ins[0])) return -1;
    lay->ld = sz0.ld, lay->hd = sz0.hd, lay->gd = sz0.gd, lay->dm = sz0.dm;
    lay->dims = ins[0].weights->rope.dims;
    lay->rope_tiles = 1;
    const float *e_next = NULL, *eq_next = NULL, *c_next = NULL;
    size_t scratch = 0, small = 0;
    for (int pass = 0; pass < 2; pass++) /* the whole sequences' rows, then the others' */
        for (size_t i = 0; i < count; i++) {
            attn_plan pl;
            size_t total;
            attn_output every = {0};
            if (attn_plan_make(&pl, &total, outs ? &outs[i] : &every, &ins[i])) return -1;
            const attn_sizes *sz = &pl.sz;
            if (!outs) {
                pl.stage = ATTN_STAGE_DELTA;
                for (int s = 0; s < WS_COUNT; s++)
                    if (attn_slice_bytes(&pl.bytes[s], s, sz)) return -1;
            }
            if (pl.stage == ATTN_STAGE_NOTHING) continue;
            const int whole = !outs || plan_whole(&pl);
            if (whole != (pass == 0)) continue;
            lay->active = 1;
            const size_t n = rows_of(sz->n), m = rows_of(sz->m);
            if (n == SIZE_MAX || m == SIZE_MAX) return -1;
            if (sz->cross) {
                lay->dc = sz->dc;
                if (add_to(&lay->n_cross, n) || add_to(&lay->m_cross, m)) return -1;
                if (whole) {
                    lay->n_wc = lay->n_cross, lay->m_wc = lay->m_cross;
                    lay->eq_apart |=
                        !outs || n != sz->n || (eq_next && ins[i].embeddings != eq_next);
                    lay->c_apart |= !outs || m != sz->m || (c_next && ins[i].context != c_next);
                    if (outs) {
                        eq_next = ins[i].embeddings + sz->n * sz->dm;
                        c_next = ins[i].context + sz->m * sz->dc;
                    }
                }
            } else {
                if (add_to(&lay->n_self, n)) return -1;
                if (whole) {
                    lay->n_ws = lay->n_self;
                    lay->e_apart |= !outs || n != sz->n || (e_next && ins[i].embeddings != e_next);
                    if (outs) e_next = ins[i].embeddings + sz->n * sz->dm;
                    lay->rope_tiles &= pl.rope_in_tiles || !sz->rope;
                }
            }
            if (pl.stage == ATTN_STAGE_DELTA && add_to(&lay->n_delta, n)) return -1;
            lay->rope |= pl.bytes[WS_ROPE] != 0;
            size_t need = round_up(pl.bytes[WS_ROWS]);
            if (add_to(&need, round_up(pl.bytes[WS_TILE]))) return -1;
            if (need > scratch) scratch = need;
            for (size_t x = 0; x < sizeof small_slices / sizeof small_slices[0]; x++)
                if (add_to(&small, round_up(pl.bytes[small_slices[x]]))) return -1;
        }
    const attn_weights *w = ins[0].weights;
    const size_t f = sizeof(float), dm = lay->dm;
    size_t *b = lay->bytes;
    if (mul3(&b[B_SEQ], count, 1, sizeof(batch_seq)) ||
        mul3(&b[B_INDEX], count + 1, 3, sizeof(size_t)) ||
        mul3(&b[B_QKV], lay->n_self, lay->ld, f) || mul3(&b[B_Q], lay->n_cross, lay->hd, f) ||
        mul3(&b[B_KV], lay->m_cross, 2 * lay->gd, f) ||
        mul3(&b[B_E], lay->e_apart ? lay->n_ws : 0, dm, f) ||
        mul3(&b[B_EQ], lay->eq_apart ? lay->n_wc : 0, dm, f) ||
        mul3(&b[B_C], lay->c_apart ? lay->m_wc : 0, lay->dc, f) ||
        mul3(&b[B_Z], w->w_o || !outs ? lay->n_delta : 0, lay->hd, f) ||
        mul3(&b[B_D], lay->n_delta, dm, f) ||
        mul3(&b[B_FREQ], lay->rope ? lay->dims / 2 : 0, 1, sizeof(double)) ||
        mul3(&b[B_ANGLES], lay->rope ? lay->n_self : 0, lay->dims, f))
        return -1;
    b[B_SCRATCH] = scratch;
    b[B_SMALL] = small;
    lay->total = 0;
    for (int s = 0; s < B_COUNT; s++)
        if (b[s] == SIZE_MAX || add_to(&lay->total, round_up(b[s]))) return -1;
    return 0;
}

/* ---- the runs --------------------------------------------------------------- */

typedef struct batch {
    batch_seq *seq;
    size_t count;
    attn_workspace *ws;
    const attn_runner *runner;
    size_t *base;      /* count + 1: the first task of each sequence in the running phase */
    attn_task_fn task; /* the running phase's task, on a sequence's call */
    /* The stacked products' plans and calls: self-attention's QKV, Q and KV
     * with contexts, ΔE; their inputs name the stacked rows. */
    attn_input in_self, in_cross, in_out;
    attn_plan pl_self, pl_cross, pl_out;
    attn_call c_self, c_cross, c_out;
    attn_proj pr_self[2], pr_cross[2];
    size_t tiles_self; /* the projection's first tiles are c_self's, then c_cross's */
    size_t *dseq;      /* the sequences that want ΔE, in order (n_dseq) */
    size_t *drow;      /* n_dseq + 1: their first rows in the stacked ΔE */
    size_t n_dseq;
} batch;

/* The largest x < n with a[x] <= t (a increasing, a[0] <= t). */
static size_t last_le(const size_t *a, size_t n, size_t t) {
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (a[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* attn_task_fn: task t of the phase is task t − base[i] of sequence i. */
static void seq_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    size_t i = last_le(b->base, b->count, t);
    b->task(&b->seq[i].c, t - b->base[i], ws);
}

/* attn_task_fn: the stacked products' tiles, c_self's then c_cross's. */
static void stack_project_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    if (t < b->tiles_self)
        attn_project_task(&b->c_self, t, ws);
    else
        attn_project_task(&b->c_cross, t - b->tiles_self, ws);
}

/* attn_task_fn: a tile of the stacked ΔE, then its rows' delta and E'. */
static void stack_output_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    attn_output_task(&b->c_out, t, ws);
    const size_t dm = b->pl_out.sz.dm;
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&b->c_out.tiles, t, &r0, &rb, &c0, &cb);
    for (size_t k = last_le(b->drow, b->n_dseq, r0); k < b->n_dseq && b->drow[k] < r0 + rb; k++) {
        const batch_seq *s = &b->seq[b->dseq[k]];
        const size_t a = r0 > b->drow[k] ? r0 : b->drow[k];
        const size_t z = attn_min(r0 + rb, b->drow[k] + s->pl.sz.n); /* not its padding */
        if (z <= a) continue;
        const float *d = b->c_out.d + a * dm + c0;
        const size_t local = a - b->drow[k];
        if (s->pl.out.delta)
            attn_copy_block(s->pl.out.delta + local * dm + c0, dm, d, dm, z - a, cb);
        float *e = s->pl.out.embeddings;
        if (!e) continue;
        const float *e0 = s->pl.in->embeddings;
        for (size_t r = 0; r < z - a; r++)
            attn_add(e + (local + r) * dm + c0, e0 + (local + r) * dm + c0, d + r * dm, cb);
    }
}

/* One run of `count` tasks, after asking the runner's stop. */
static int batch_run(batch *b, attn_task_fn task, size_t count) {
    const attn_runner *r = b->runner;
    if (r && r->stop && r->stop(r->ctx)) return ATTN_FAIL_STOPPED;
    if (r && count > 1)
        r->run(r->ctx, task, b, count);
    else
        for (size_t t = 0; t < count; t++)
            task(b, t, b->ws);
    return 0;
}

/* One run of each sequence's counts[i] tasks of `task`, then the first
 * failure in sequence order (*first its sequence). */
static int batch_run_seqs(batch *b, attn_task_fn task, size_t *first) {
    b->task = task;
    for (size_t i = 0; i < b->count; i++)
        b->base[i + 1] += b->base[i]; /* the counts, summed */
    int rc = batch_run(b, seq_task, b->base[b->count]);
    if (rc) return rc;
    for (size_t i = 0; i < b->count; i++)
        if (b->seq[i].active && (rc = atomic_load(&b->seq[i].c.rc))) {
            *first = i;
            return rc;
        }
    return 0;
}

/* The batch's calls carved from `block` as `lay` says. */
static void batch_make(batch *b, const batch_layout *lay, unsigned char *block,
                       const attn_output *outs, const attn_input *ins, size_t count) {
    unsigned char *slice[B_COUNT];
    size_t off = 0;
    for (int s = 0; s < B_COUNT; s++) {
        slice[s] = lay->bytes[s] ? block + off : NULL;
        off += attn_slice_round(lay->bytes[s]);
    }
    const attn_weights *w = ins[0].weights;
    const size_t dm = lay->dm, hd = lay->hd, ld = lay->ld, gd = lay->gd, dims = lay->dims;
    b->seq = (batch_seq *)(void *)slice[B_SEQ];
    b->base = (size_t *)(void *)slice[B_INDEX];
    b->dseq = b->base + count + 1;
    b->drow = b->dseq + count + 1;
    float *qkv = (float *)(void *)slice[B_QKV], *q = (float *)(void *)slice[B_Q];
    float *kv = (float *)(void *)slice[B_KV], *z = (float *)(void *)slice[B_Z];
    float *d = (float *)(void *)slice[B_D], *angles = (float *)(void *)slice[B_ANGLES];
    float *e = (float *)(void *)slice[B_E], *eq = (float *)(void *)slice[B_EQ];
    float *cx = (float *)(void *)slice[B_C];
    double *freq = (double *)(void *)slice[B_FREQ];
    if (freq) attn_rope_frequencies(freq, &w->rope);
    const float *e_stack = NULL, *eq_stack = NULL, *c_stack = NULL;
    unsigned char *small = slice[B_SMALL];
    size_t self = 0, cross = 0, key = 0, dz = 0;
    b->n_dseq = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < count; i++) {
            batch_seq *s = &b->seq[i];
            size_t total;
            if (pass == 0) {
                attn_plan_make(&s->pl, &total, &outs[i], &ins[i]); /* sized by layout_make */
                s->active = s->pl.stage != ATTN_STAGE_NOTHING;
                s->whole = s->active && plan_whole(&s->pl);
            }
            if (!s->active || s->whole != (pass == 0)) continue;
            const attn_plan *pl = &s->pl;
            const attn_sizes *sz = &pl->sz;
            float *ws_slice[WS_COUNT] = {0};
            unsigned char *scratch = slice[B_SCRATCH];
            if (pl->bytes[WS_ROWS]) ws_slice[WS_ROWS] = (float *)(void *)scratch;
            if (pl->bytes[WS_TILE])
                ws_slice[WS_TILE] =
                    (float *)(void *)(scratch + attn_slice_round(pl->bytes[WS_ROWS]));
            for (size_t x = 0; x < sizeof small_slices / sizeof small_slices[0]; x++) {
                int k = small_slices[x];
                if (!pl->bytes[k]) continue;
                ws_slice[k] = (float *)(void *)small;
                small += attn_slice_round(pl->bytes[k]);
            }
            attn_call_init(&s->c, pl, b->ws, b->runner, ws_slice);
            attn_call *c = &s->c;
            const attn_input *in = pl->in;
            const size_t n = rows_of(sz->n), m = rows_of(sz->m);
            if (sz->cross) {
                s->row = cross, s->key = key;
                c->qkv = c->q = q + cross * hd;
                c->kv = kv + key * 2 * gd;
                if (s->whole && eq) copy_padded(eq + cross * dm, in->embeddings, sz->n, n, dm);
                if (s->whole && cx) copy_padded(cx + key * lay->dc, in->context, sz->m, m, lay->dc);
                if (s->whole && !eq_stack) eq_stack = eq ? eq : in->embeddings;
                if (s->whole && !c_stack) c_stack = cx ? cx : in->context;
                cross += n, key += m;
            } else {
                s->row = self;
                c->qkv = c->q = qkv + self * ld;
                c->kv = c->qkv + hd;
                if (pl->bytes[WS_ROPE]) {
                    c->freq = freq, c->angles = angles + self * dims;
                    /* the padding rows' angles: rotated in the tiles, never read after */
                    memset(c->angles + sz->n * dims, 0, (n - sz->n) * dims * sizeof(float));
                }
                if (s->whole && e) copy_padded(e + self * dm, in->embeddings, sz->n, n, dm);
                if (s->whole && !e_stack) e_stack = e ? e : in->embeddings;
                self += n;
            }
            if (pl->stage == ATTN_STAGE_DELTA) {
                s->dz = dz;
                c->d = d + dz * dm;
                c->zall = w->w_o ? z + dz * hd : c->d;
                /* the padding rows of Z: read by ΔE's sgemm, whose rows they do not touch */
                memset(c->zall + sz->n * hd, 0, (n - sz->n) * hd * sizeof(float));
                b->dseq[b->n_dseq] = i;
                b->drow[b->n_dseq++] = dz;
                dz += n;
            }
        }
    /* (a sequence that wants ΔE is whole: the first pass gave them their
     * rows in index order) */
    b->drow[b->n_dseq] = dz;

    /* The stacked products, as calls of their own over the stacked rows. */
    b->in_self = (attn_input){.weights = w, .embeddings = e_stack, .n_tokens = lay->n_ws};
    b->in_cross = (attn_input){.weights = w,
                               .embeddings = eq_stack,
                               .n_tokens = lay->n_wc,
                               .context = c_stack,
                               .n_context = lay->m_wc};
    b->in_out = (attn_input){.weights = w, .n_tokens = lay->n_delta};
    const attn_input *vin[3] = {&b->in_self, &b->in_cross, &b->in_out};
    attn_plan *vpl[3] = {&b->pl_self, &b->pl_cross, &b->pl_out};
    attn_call *vc[3] = {&b->c_self, &b->c_cross, &b->c_out};
    for (int x = 0; x < 3; x++) {
        *vpl[x] = (attn_plan){.in = vin[x], .stage = ATTN_STAGE_DELTA};
        attn_sizes_of(&vpl[x]->sz, vin[x]); /* sizes of the sequences', which fit */
        *vc[x] = (attn_call){.pl = vpl[x], .runner = b->runner, .ws = b->ws};
        atomic_init(&vc[x]->rc, 0);
    }
    b->pl_self.rope_in_tiles = lay->rope_tiles && b->pl_self.sz.rope;
    b->c_self.qkv = b->c_self.q = qkv, b->c_self.kv = qkv ? qkv + hd : NULL;
    b->c_self.freq = freq, b->c_self.angles = angles;
    b->c_cross.qkv = b->c_cross.q = q, b->c_cross.kv = kv;
    b->c_out.d = d;
    b->c_out.zall = w->w_o ? z : d;
}

/* attn_compute_with for each sequence in turn: the batch of sequences that
 * do not share their weights. */
static int one_by_one(const attn_output *outs, attn_workspace *ws, const attn_input *ins,
                      size_t count, const attn_runner *runner, attn_error *err, size_t *failed) {
    for (size_t i = 0; i < count; i++) {
        if (attn_compute_with(&outs[i], ws, &ins[i], runner, err) < 0) {
            if (failed && err && err->code == ATTN_ERR_NONFINITE) *failed = i;
            return -1;
        }
    }
    return 0;
}

/* The phases of the batch; 0 or ATTN_FAIL_*, *first the failing sequence. */
static int batch_phases(batch *b, const batch_layout *lay, size_t *first) {
    const size_t count = b->count;
    int rc;
    /* project: RoPE's tables, the stacked products, each sequence's rest */
    if (lay->rope) {
        memset(b->base, 0, (count + 1) * sizeof(size_t));
        for (size_t i = 0; i < count; i++)
            if (b->seq[i].active) b->base[i + 1] = attn_angles_tasks(&b->seq[i].pl);
        if ((rc = batch_run_seqs(b, attn_angles_task, first))) return rc;
    }
    b->tiles_self = b->pl_self.sz.n ? attn_project_tiles(&b->pl_self, &b->c_self, b->pr_self) : 0;
    size_t tiles =
        b->pl_cross.sz.n ? attn_project_tiles(&b->pl_cross, &b->c_cross, b->pr_cross) : 0;
    if ((rc = batch_run(b, stack_project_task, b->tiles_self + tiles))) return rc;
    for (size_t i = 0; i < count; i++) {
        batch_seq *s = &b->seq[i];
        if (!s->active) continue;
        if (s->whole && !s->pl.sz.cross) s->c.rotated = b->pl_self.rope_in_tiles;
        attn_project_rest(&s->pl, &s->c);
    }

    /* attend */
    memset(b->base, 0, (count + 1) * sizeof(size_t));
    for (size_t i = 0; i < count; i++) {
        batch_seq *s = &b->seq[i];
        if (!s->active || s->pl.stage < ATTN_STAGE_SCORES) continue;
        attn_block_fn path = s->pl.path == ATTN_PATH_FULL ? attn_full_block : attn_online_block;
        b->base[i + 1] = attn_attend_prepare(&s->pl, &s->c, path);
    }
    if ((rc = batch_run_seqs(b, attn_attend_task, first))) return rc;
    for (size_t i = 0; i < count; i++)
        if (b->seq[i].active && b->seq[i].pl.stage >= ATTN_STAGE_SCORES)
            attn_attend_finish(&b->seq[i].pl, &b->seq[i].c);

    /* output */
    if (!b->n_dseq) return 0;
    return batch_run(b, stack_output_task, attn_output_tiles(&b->pl_out, &b->c_out));
}

int attn_compute_batch(const attn_output *outs, attn_workspace *ws, const attn_input *ins,
                       size_t count, const attn_runner *runner, attn_error *err, size_t *failed) {
    if (failed) *failed = count;
    if (count == 0) return 0;
    for (size_t i = 1; i < count; i++)
        if (ins[i].weights != ins[0].weights)
            return one_by_one(outs, ws, ins, count, runner, err, failed);
    batch_layout lay;
    if (layout_make(&lay, outs, ins, count)) return attn_fail_error(err, ATTN_FAIL_NOMEM);
    if (!lay.active) return 0;
    /* cblas takes int sizes, the stacked rows' counts included */
    if (lay.n_self > INT_MAX || lay.n_cross > INT_MAX || lay.m_cross > INT_MAX ||
        lay.n_delta > INT_MAX || lay.ld > INT_MAX || lay.dm > INT_MAX || lay.dc > INT_MAX)
        return attn_fail_error(err, ATTN_FAIL_NOMEM);
    unsigned char *block = attn_workspace_reserve(ws, lay.total);
    if (!block) return attn_fail_error(err, ATTN_FAIL_NOMEM);
    batch b = {.count = count, .ws = ws, .runner = runner};
    batch_make(&b, &lay, block, outs, ins, count);
    size_t first = count;
    int rc = batch_phases(&b, &lay, &first);
    if (!rc) return 0;
    if (failed && rc == ATTN_FAIL_NONFINITE) *failed = first;
    return attn_fail_error(err, rc);
}

double attn_batch_flops(const attn_input *ins, size_t count) {
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += attn_input_flops(&ins[i]);
    return sum;
}

size_t attn_batch_workspace_need(const attn_input *ins, size_t count) {
    if (count == 0) return 0;
    /* the layout of the worst outputs; weight sets mixed: one call at a time */
    for (size_t i = 1; i < count; i++)
        if (ins[i].weights != ins[0].weights) {
            size_t most = 0;
            for (size_t x = 0; x < count; x++) {
                size_t need = attn_input_workspace_need(&ins[x]);
                if (need > most) most = need;
            }
            return most;
        }
    batch_layout lay;
    return layout_make(&lay, NULL, ins, count) ? SIZE_MAX : lay.total;
}
