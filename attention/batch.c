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
 *             is computed whole are stacked: their rows of E (and C) packed
 *             (below), at most three products — self-attention's E · w_qkv
 *             over all their rows, and with contexts E · Wq and C · Wkv —
 *             whose tiles are one run; each tile copies its rows to their
 *             sequence's own QKV (unless they are already there) and
 *             rotates Q and K there by the sequence's own table. Then, per
 *             sequence on this thread, what attn_project_rest does for one
 *             call: the listed heads' own blocks for a sequence that wants
 *             only some, q_raw and k_raw, the rotation not done in the
 *             tiles, q, k, v.
 *   attend    one run of the tasks per (sequence, head, block of 128 query
 *             rows), each attn_attend_task on the sequence's own call: its
 *             path, keys, rules and outputs as attn_compute would have them
 *   output    the sequences' Z packed; ΔE = Z · w_o + b_o over the packed
 *             rows of the sequences that want it, one run of its tiles;
 *             each tile then copies its rows to their sequence's delta and
 *             adds E for its embeddings.
 *
 * Packed rows. Each stacked product (S_SELF, S_Q, S_KV, S_D) computes rows
 * in blocks of 12, every block full. A sequence of n = 12q + t rows takes
 * q full blocks of its own, its rows in order (those of the sequences with
 * no tail first), then its t tail rows go to the tail blocks after all the
 * full ones: tail row j to half A (slots 0 … 5) when j is even, to half B
 * (slots 6 … 11) when odd, each half filled in the sequences' order; a slot
 * no row takes is a row of zeros. A product of rows ΣA in half A and ΣB
 * in half B is ⌈max(ΣA, ΣB)/6⌉ blocks, and a sequence's halves differ by at
 * most one row: 64 × 16 rows are 64 + 22 blocks (1032 rows), against 64 × 2
 * (1536) when every sequence was padded to 12 alone. A sequence alone is
 * the same: q blocks and one tail block (n rounded up to 12).
 *   The other phases read a sequence's rows in order, n rows at its own
 * stride: they are the packed rows themselves when its rows are all in
 * full blocks, or when it is the product's only sequence with a tail (then
 * its tail block, right after its full blocks, is put in row order after
 * the product and back before ΔE, tail_in_order: a call alone copies
 * nothing but its tail); otherwise its own copy (B_QKVO, B_QO, B_KVO,
 * B_ZO), which the tiles write row by row from the packed rows, and from
 * which its Z is packed. The copies cost a pass over the rows of the
 * sequences with tails (64 × 16: QKV 9 MiB, Z 3 MiB), well under the
 * 0.5 × of the products' work the padding cost; E and C are packed by a
 * copy unless they already are the packed rows (all in full blocks, one
 * after the other in memory). A call alone copies only the last row tile
 * of its E (the tile holding its tail block; the others read E in place,
 * attn_proj's x_last) and, with w_o, writes ΔE straight into its delta (or
 * embeddings) but for that tile's rows (attn_call's d_last): the same
 * sgemms on the same numbers, and 2 × n × d_model floats less (the Llama-3
 * layer at n = 4096: 173 MB instead of 307). RoPE rotates a row by its own sequence's
 * table, and ΔE's rows go to their sequence's delta and E + ΔE, by the
 * product's map of packed rows (B_MAP); the biases are the same for every
 * row (each tile starts as them).
 *
 * Memory, one block of the caller's workspace (B_*): the packed QKV (or
 * Q and KV), Z and ΔE of the whole batch and the sequences' own copies,
 * RoPE's table, packed copies of E and C, the maps, one B × m + tile
 * scratch shared by the tasks this thread runs (they run one at a time;
 * between the runs it holds a tail block put in order), and per sequence
 * its plan, call and small slices. Its size is batch_layout's, which
 * attn_batch_workspace_need computes for the worst outputs (every sequence
 * packed, wanting ΔE, copied): an exact upper bound, as a subset of the
 * sequences never takes more packed rows and the own rows of a sequence
 * outside the products are at most the packed rows it leaves.
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
 *    narrower kernels with orders of their own. Measured on this machine
 *    (OpenBLAS 0.3.21, calls of 12 … 276 rows, K × N from 8 × 8 to
 *    768 × 2304, beta 0 and 1): in a call of 12k rows a row has one value
 *    at slots 0 … 5 of any of its blocks and another at slots 6 … 11,
 *    whatever the block, the call's length and the other rows (both the
 *    same when K ≤ 12). So the rounding is a function of the half a row
 *    sits in, and each row has a half that is a function of its sequence
 *    alone (packed_row: its length and index); every product's rows are
 *    whole blocks and every row tile a multiple of 12 rows (tasks.c).
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
 * A layer's norms (norm.c): E's rows are normalised as they are packed
 * (with a norm every row is packed, a call alone's too), a sequence that
 * projects its listed heads alone reads N(E) from its normed output or
 * B_EN; with a post_norm, ΔE's column tiles are one run and its rows,
 * normalised whole, then go to their delta and E' in a run of row tasks.
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
#include <stdlib.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/kernels.h"
#include "attention/plan.h"

/* ---- sizes, overflow-checked ------------------------------------------- */

static int add_to(size_t *r, size_t b) {
    return __builtin_add_overflow(*r, b, r) ? -1 : 0;
}

/* *bytes = a · b · size (the overflow builtins, as compute.c's) */
static int mul3(size_t *bytes, size_t a, size_t b, size_t size) {
    size_t ab;
    return __builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, size, bytes) ? -1 : 0;
}

static size_t round_up(size_t bytes) {
    return bytes > SIZE_MAX - (ATTN_WS_ALIGN - 1) ? SIZE_MAX : attn_slice_round(bytes);
}

/* ---- the packed rows ------------------------------------------------------ */

#define ROWS_Q   ATTN_ROWS_QUANTUM
#define HALF     (ATTN_ROWS_QUANTUM / 2)
#define IN_PLACE SIZE_MAX
#define NO_SEQ   UINT32_MAX

/* The stacked products: self-attention's E · w_qkv, with contexts E · Wq
 * and C · Wkv, and ΔE = Z · w_o. */
enum { S_SELF, S_Q, S_KV, S_D, S_COUNT };

/* One product's packed rows: the full blocks of its sequences, those with
 * no tail first, then the tail blocks, halves A (slots 0 … 5) and B (6 …
 * 11) filled from the sequences' tails in order. */
typedef struct stack {
    size_t full;   /* rows of the full blocks: Σ 12·⌊n/12⌋ */
    size_t ta, tb; /* tail rows of half A, of half B */
    size_t tails;  /* sequences with a tail */
    size_t tail_n; /* their rows */
    size_t rest;   /* rows of the sequences outside the product (their own sgemms) */
    size_t own;    /* rows of the sequences' own copies */
    size_t rows;   /* packed rows: full + 12·⌈max(ta, tb)/6⌉ */
} stack;

/* A sequence's place in one product. */
typedef struct place {
    size_t full; /* the packed row of its first full block */
    size_t a, b; /* its first tail rows in half A's and half B's order */
    size_t own;  /* its first row in the own copy, or IN_PLACE: its rows are the packed
                  * full rows and then, when it is the only one with a tail, tail block 0 */
} place;

/* A packed row's sequence (NO_SEQ: a row of zeros) and row in it. */
typedef struct row_of {
    uint32_t seq, r; /* rows ≤ INT_MAX, checked before the map is made */
} row_of;

/* Counts a sequence of n rows into st, packed or with its own sgemms. */
static int stack_count(stack *st, size_t n, int packed) {
    if (!packed) return add_to(&st->rest, n);
    const size_t t = n % ROWS_Q;
    if (add_to(&st->full, n - t)) return -1;
    st->ta += (t + 1) / 2, st->tb += t / 2; /* ≤ the rows counted */
    if (t) st->tails++;
    return t ? add_to(&st->tail_n, n) : 0;
}

/* The packed rows and own rows, once every sequence is counted. */
static int stack_close(stack *st) {
    const size_t most = st->ta > st->tb ? st->ta : st->tb;
    st->rows = st->full;
    if (add_to(&st->rows, attn_div_up(most, HALF) * ROWS_Q)) return -1;
    st->own = st->rest;
    return st->tails > 1 ? add_to(&st->own, st->tail_n) : 0;
}

/* The packed row of row r of a sequence of n rows: its full blocks' rows in
 * order; tail row j in half A when j is even, B when odd (slots 0, 6, 1, 7,
 * …), so that a sequence's halves hold as many rows as each other, ± 1. */
static size_t packed_row(const stack *st, const place *p, size_t n, size_t r) {
    const size_t f = n - n % ROWS_Q;
    if (r < f) return p->full + r;
    const size_t j = r - f, k = (j % 2 ? p->b : p->a) + j / 2;
    return st->full + k / HALF * ROWS_Q + j % 2 * HALF + k % HALF;
}

/* The row r of a sequence as the other phases read it: in its own copy, or
 * in place (the tail block put in order after the product, tail_in_order). */
static float *own_row(float *packed, float *own, size_t ld, const place *p, size_t r) {
    return p->own == IN_PLACE ? packed + (p->full + r) * ld : own + (p->own + r) * ld;
}

/* The tail rows of the one in-place sequence with a tail: from their
 * packed slots to the rows after its full blocks (to_order), or back. */
static void tail_in_order(float *packed, size_t ld, const stack *st, const place *p, size_t n,
                          float *tmp, int to_order) {
    const size_t f = n - n % ROWS_Q, t = n - f;
    float *block = packed + st->full * ld;
    for (size_t j = 0; j < t; j++) {
        const float *src = to_order ? packed + packed_row(st, p, n, f + j) * ld : block + j * ld;
        memcpy(tmp + j * ld, src, ld * sizeof(float));
    }
    if (!to_order) memset(block, 0, ROWS_Q * ld * sizeof(float));
    for (size_t j = 0; j < t; j++) {
        float *dst = to_order ? block + j * ld : packed + packed_row(st, p, n, f + j) * ld;
        memcpy(dst, tmp + j * ld, ld * sizeof(float));
    }
}

/* ---- the batch's block ---------------------------------------------------- */

/* One sequence: its plan, its call and where its rows are stacked. */
typedef struct batch_seq {
    attn_plan pl;
    attn_call c;
    int active;        /* some output is asked for */
    int whole;         /* its QKV (or Q and KV) comes from the stacked products */
    place at[S_COUNT]; /* its rows in the products it takes part in */
    size_t angles;     /* self-attention: its first row in RoPE's table */
} batch_seq;

/* The slices of a batch's block, carved in this order. */
enum {
    B_SEQ,     /* count batch_seq */
    B_INDEX,   /* count + 1 size_t: a phase's first task of each sequence */
    B_MAP,     /* the products' packed rows' row_of, S_SELF's then S_Q's, S_KV's, S_D's */
    B_QKV,     /* S_SELF's packed rows × (hd + 2gd) floats */
    B_QKVO,    /* its own rows × (hd + 2gd) */
    B_Q,       /* S_Q's packed rows × hd */
    B_QO,      /* its own rows × hd */
    B_KV,      /* S_KV's packed rows × 2gd */
    B_KVO,     /* its own rows × 2gd */
    B_E,       /* S_SELF's packed E, when not already */
    B_EQ,      /* S_Q's, likewise */
    B_C,       /* S_KV's contexts, likewise */
    B_EN,      /* en_rows × dm: N(E) of the sequences that project their listed heads
                * alone, with a norm and no normed output to read it from (norm.c) */
    B_Z,       /* S_D's packed rows × hd, with w_o */
    B_ZO,      /* its own rows × hd: the sequences' Z, packed before ΔE */
    B_D,       /* S_D's packed rows × dm: ΔE */
    B_FREQ,    /* tables · dims/2 doubles: RoPE's f_t (attn_rope_tables) */
    B_ANGLES,  /* self rows × dims: RoPE's table, each sequence's rows in order */
    B_SCRATCH, /* the largest B × m rows + tile of a sequence, shared by this thread's tasks;
                * between the runs, 12 rows × max(hd + 2gd, dm) for tail_in_order */
    B_SMALL,   /* each sequence's slot, range and position slices */
    B_COUNT
};

/* The per-sequence slices carved from B_SMALL. */
static const int small_slices[] = {WS_SLOT, WS_RANGE, WS_POS};

typedef struct batch_layout {
    size_t ld, hd, gd, dm, dc, dims; /* of the weights */
    stack st[S_COUNT];
    size_t n_self;                  /* self-attention rows (RoPE's table) */
    size_t en_rows;                 /* B_EN's rows */
    int e_apart, eq_apart, c_apart; /* the whole sequences' E (or C) rows are not their
                                     * packed rows, one after the other in memory: copied */
    int rope, active, rope_tiles;   /* some sequence needs RoPE's table; some output is
                                     * asked for; every whole self sequence rotates in tiles */
    /* A call alone (a batch of one): E's packed rows and ΔE's are held from the first row
     * of their product's last row tile on (0: every row), the rest being the caller's E
     * read in place and the caller's delta (or embeddings) written in place. */
    size_t e_from, d_from;
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
           (pl->parts == all && heads_distinct(pl->in) == pl->sz.h) ||
           (pl->parts && attn_norm_needs_whole(pl->in->weights));
}

/* The first row of the last row tile of a rows × cols result (tasks.c). */
static size_t last_tile_from(size_t rows, size_t cols, size_t quantum) {
    if (!rows) return 0;
    attn_tiling g = attn_tiling_aligned(rows, cols, quantum);
    return (g.nr - 1) * g.rb;
}

/* The layout of a batch, from its sequences' plans; with outs NULL, of the
 * worst outputs (every sequence whole, wanting everything, by both paths,
 * its rows copied): an upper bound of every outs'. -1 on overflow. */
static int layout_make(batch_layout *lay, const attn_output *outs, const attn_input *ins,
                       size_t count, const attn_weights *w) {
    attn_zero(lay, sizeof *lay);
    attn_sizes sz0;
    attn_input in0 = ins[0];
    in0.weights = w;
    if (attn_sizes_of(&sz0, &in0)) return -1;
    lay->ld = sz0.ld, lay->hd = sz0.hd, lay->gd = sz0.gd, lay->dm = sz0.dm;
    lay->dims = w->rope.dims;
    lay->rope_tiles = 1;
    /* A norm: E's rows are normalised as they are packed, so all are packed (norm.c) */
    const int norm = w->norm.type != ATTN_NORM_NONE;
    const float *e_next = NULL, *eq_next = NULL, *c_next = NULL;
    size_t scratch = 0, small = 0;
    for (size_t i = 0; i < count; i++) {
        attn_plan pl;
        size_t total;
        attn_output every = {0};
        attn_input in = ins[i];
        in.weights = w;
        if (attn_plan_make(&pl, &total, outs ? &outs[i] : &every, &in)) return -1;
        const attn_sizes *sz = &pl.sz;
        if (!outs) {
            pl.stage = ATTN_STAGE_DELTA;
            for (int s = 0; s < WS_COUNT; s++)
                if (attn_slice_bytes(&pl.bytes[s], s, sz)) return -1;
        }
        if (pl.stage == ATTN_STAGE_NOTHING) continue;
        const int whole = !outs || plan_whole(&pl);
        lay->active = 1;
        if (norm && (!outs || (!whole && !pl.out.normed)) && add_to(&lay->en_rows, sz->n))
            return -1;
        if (sz->cross) {
            lay->dc = sz->dc;
            if (stack_count(&lay->st[S_Q], sz->n, whole) ||
                stack_count(&lay->st[S_KV], sz->m, whole))
                return -1;
            if (whole) {
                lay->eq_apart |=
                    !outs || norm || sz->n % ROWS_Q || (eq_next && ins[i].embeddings != eq_next);
                lay->c_apart |= !outs || sz->m % ROWS_Q || (c_next && ins[i].context != c_next);
                if (outs) {
                    eq_next = ins[i].embeddings + sz->n * sz->dm;
                    c_next = ins[i].context + sz->m * sz->dc;
                }
            }
        } else {
            if (stack_count(&lay->st[S_SELF], sz->n, whole) || add_to(&lay->n_self, sz->n))
                return -1;
            if (whole) {
                lay->e_apart |=
                    !outs || norm || sz->n % ROWS_Q || (e_next && ins[i].embeddings != e_next);
                if (outs) e_next = ins[i].embeddings + sz->n * sz->dm;
                lay->rope_tiles &= pl.rope_in_tiles || !sz->rope;
            }
        }
        if (pl.stage == ATTN_STAGE_DELTA && stack_count(&lay->st[S_D], sz->n, 1)) return -1;
        lay->rope |= pl.bytes[WS_ROPE] != 0;
        size_t need = round_up(pl.bytes[WS_ROWS]);
        if (add_to(&need, round_up(pl.bytes[WS_TILE]))) return -1;
        if (need > scratch) scratch = need;
        for (size_t x = 0; x < sizeof small_slices / sizeof small_slices[0]; x++)
            if (add_to(&small, round_up(pl.bytes[small_slices[x]]))) return -1;
    }
    size_t map = 0;
    for (int s = 0; s < S_COUNT; s++)
        if (stack_close(&lay->st[s]) || add_to(&map, lay->st[s].rows)) return -1;
    const size_t f = sizeof(float), dm = lay->dm, ld = lay->ld;
    const stack *st = lay->st;
    /* a tail block put in order: only where a product has one sequence with a tail */
    int tmp = 0;
    for (int s = 0; s < S_COUNT; s++)
        tmp |= st[s].tails == 1;
    /* A call alone reads E in place and writes ΔE in place but for the last row tile of
     * each product, which holds the tail block (the tiles are those of proj_make and
     * attn_output_tiles: the shape's alone). Without w_o, Z is written into ΔE's rows
     * by the attend phase: all of them are kept. */
    if (count == 1) {
        /* proj_make's quantum: whole heads with RoPE */
        lay->e_from = norm ? 0 : last_tile_from(st[S_SELF].rows, ld, lay->dims ? sz0.dh : 1);
        lay->d_from = w->w_o ? last_tile_from(st[S_D].rows, dm, 1) : 0;
    }
    size_t *b = lay->bytes;
    if (mul3(&b[B_SEQ], count, 1, sizeof(batch_seq)) ||
        mul3(&b[B_INDEX], count + 1, 1, sizeof(size_t)) ||
        mul3(&b[B_MAP], map, 1, sizeof(row_of)) || mul3(&b[B_QKV], st[S_SELF].rows, ld, f) ||
        mul3(&b[B_QKVO], st[S_SELF].own, ld, f) || mul3(&b[B_Q], st[S_Q].rows, lay->hd, f) ||
        mul3(&b[B_QO], st[S_Q].own, lay->hd, f) || mul3(&b[B_KV], st[S_KV].rows, 2 * lay->gd, f) ||
        mul3(&b[B_KVO], st[S_KV].own, 2 * lay->gd, f) ||
        mul3(&b[B_E], lay->e_apart ? st[S_SELF].rows - lay->e_from : 0, dm, f) ||
        mul3(&b[B_EQ], lay->eq_apart ? st[S_Q].rows : 0, dm, f) ||
        mul3(&b[B_C], lay->c_apart ? st[S_KV].rows : 0, lay->dc, f) ||
        mul3(&b[B_EN], lay->en_rows, dm, f) ||
        mul3(&b[B_Z], w->w_o || !outs ? st[S_D].rows : 0, lay->hd, f) ||
        mul3(&b[B_ZO], st[S_D].own, lay->hd, f) ||
        mul3(&b[B_D], st[S_D].rows - lay->d_from, dm, f) ||
        mul3(&b[B_FREQ], lay->rope ? lay->dims / 2 : 0, attn_rope_tables(&w->rope),
             sizeof(double)) ||
        mul3(&b[B_ANGLES], lay->rope ? lay->n_self : 0, lay->dims, f))
        return -1;
    /* the scratch holds a tail block put in order between the runs */
    size_t tmp_bytes;
    if (mul3(&tmp_bytes, tmp || !outs ? ROWS_Q : 0, ld > dm ? ld : dm, f)) return -1;
    b[B_SCRATCH] = scratch > tmp_bytes ? scratch : tmp_bytes;
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
    size_t *base;          /* count + 1: the first task of each sequence in the running phase */
    attn_task_fn task;     /* the running phase's task, on a sequence's call */
    attn_task_fn run_task; /* the running phase's task, behind the stop's check */
    atomic_int stopped;    /* the runner's stop said so during a phase */
    /* The stacked products' plans and calls: self-attention's QKV, Q and KV
     * with contexts, ΔE; their inputs name the packed rows. */
    attn_input in_self, in_cross, in_out;
    attn_plan pl_self, pl_cross, pl_out;
    attn_call c_self, c_cross, c_out;
    attn_proj pr_self[2], pr_cross[2];
    size_t tiles_self; /* the projection's first tiles are c_self's, then c_cross's */
    const batch_layout *lay;
    const row_of *map[S_COUNT]; /* each product's packed rows */
    float *own[S_COUNT];        /* the own copies of QKV, Q, KV, Z */
    float *tmp;                 /* the calling thread's scratch, between the runs */
    const float *e_last;        /* a call alone's packed E from lay->e_from on, or NULL */
    int rope_tiles;             /* the whole self sequences rotate in the tiles */
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

/* attn_task_fn: the stacked products' tiles, c_self's then c_cross's; then
 * each tile's rows to their sequence's own copy (RoPE rotating them there
 * by the sequence's own table), or rotated in place. */
static void stack_project_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    const attn_proj *p;
    int s;
    if (t < b->tiles_self) {
        attn_project_task(&b->c_self, t, ws);
        p = &b->pr_self[0], s = S_SELF;
    } else {
        t -= b->tiles_self;
        attn_project_task(&b->c_cross, t, ws);
        p = &b->pr_cross[0], s = S_Q;
        if (t >= p->tiles.nr * p->tiles.nc) t -= p->tiles.nr * p->tiles.nc, p++, s = S_KV;
    }
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&p->tiles, t, &r0, &rb, &c0, &cb);
    const attn_plan *pp = s == S_SELF ? &b->pl_self : &b->pl_cross; /* the product's */
    const attn_sizes *sz = &pp->sz;
    const size_t dh = sz->dh, e0 = c0 / dh;
    const size_t e1 = s == S_SELF && b->rope_tiles ? attn_min((c0 + cb) / dh, p->rope_heads) : 0;
    const attn_rope_style style = pp->in->weights->rope.style;
    for (size_t x = r0; x < r0 + rb; x++) {
        const row_of *ro = &b->map[s][x];
        if (ro->seq == NO_SEQ) continue;
        const batch_seq *q = &b->seq[ro->seq];
        float *row = p->dst + x * p->ldd;
        if (q->at[s].own != IN_PLACE) {
            float *to = b->own[s] + (q->at[s].own + ro->r) * p->ldd;
            memcpy(to + c0, row + c0, cb * sizeof(float));
            row = to;
        }
        if (e1 > e0)
            attn_rope_rows(row + e0 * dh, p->ldd, q->c.angles + ro->r * sz->rope, sz->rope, 1,
                           e1 - e0, dh, sz->rope, style);
    }
}

/* Rows r0 … r0+rb, columns c0 … c0+cb of the stacked ΔE to their rows'
 * delta and E'. */
static void rows_finish(const batch *b, size_t r0, size_t rb, size_t c0, size_t cb) {
    const size_t dm = b->pl_out.sz.dm;
    for (size_t x = r0; x < r0 + rb; x++) {
        const row_of *ro = &b->map[S_D][x];
        if (ro->seq == NO_SEQ) continue;
        const attn_plan *pl = &b->seq[ro->seq].pl;
        /* a call alone's rows before d_from are its own delta (or embeddings) already */
        const float *d = attn_delta_row(&b->c_out, x) + c0;
        const size_t at = ro->r * dm + c0;
        if (pl->out.delta && pl->out.delta + at != d)
            memcpy(pl->out.delta + at, d, cb * sizeof(float));
        if (pl->out.embeddings) attn_add(pl->out.embeddings + at, pl->in->embeddings + at, d, cb);
    }
}

/* attn_task_fn: a tile of the stacked ΔE, then its rows' delta and E' (with a
 * post_norm, post_norm_task's, once the rows are whole). */
static void stack_output_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    attn_output_task(&b->c_out, t, ws);
    if (b->pl_out.in->weights->post_norm.type != ATTN_NORM_NONE) return;
    size_t r0, rb, c0, cb;
    attn_tiling_tile(&b->c_out.tiles, t, &r0, &rb, &c0, &cb);
    rows_finish(b, r0, rb, c0, cb);
}

/* attn_task_fn: rows POST_ROWS·t … of the stacked ΔE through the layer's
 * post_norm (norm.c), then to their delta and E'. */
#define POST_ROWS 64
static void post_norm_task(void *arg, size_t t, attn_workspace *ws) {
    (void)ws;
    batch *b = arg;
    const size_t dm = b->pl_out.sz.dm, rows = b->lay->st[S_D].rows;
    const size_t r0 = t * POST_ROWS, rb = attn_min(POST_ROWS, rows - r0);
    for (size_t x = r0; x < r0 + rb; x++) {
        if (b->map[S_D][x].seq == NO_SEQ) continue;
        float *d = attn_delta_row(&b->c_out, x);
        attn_norm_rows(d, dm, d, dm, 1, dm, &b->pl_out.in->weights->post_norm);
    }
    rows_finish(b, r0, rb, 0, dm);
}

/* attn_task_fn: the running phase's task, unless the runner's stop says
 * the computation ends: asked before each task, so that a phase of many
 * (one per head and block of query rows) ends within a task of being told,
 * however its work was counted. The tasks after it do nothing. */
static void stoppable_task(void *arg, size_t t, attn_workspace *ws) {
    batch *b = arg;
    const attn_runner *r = b->runner;
    if (atomic_load_explicit(&b->stopped, memory_order_relaxed)) return;
    if (r->stop(r->ctx)) {
        atomic_store_explicit(&b->stopped, 1, memory_order_relaxed);
        return;
    }
    b->run_task(b, t, ws);
}

/* One run of `count` tasks: spread by the runner's run when it has one,
 * else in turn on this thread; each after asking the runner's stop. */
static int batch_run(batch *b, attn_task_fn task, size_t count) {
    const attn_runner *r = b->runner;
    if (r && r->stop) {
        if (r->stop(r->ctx)) return ATTN_FAIL_STOPPED;
        b->run_task = task;
        task = stoppable_task;
    }
    if (r && r->run && count > 1)
        r->run(r->ctx, task, b, count);
    else
        for (size_t t = 0; t < count; t++)
            task(b, t, b->ws);
    return atomic_load_explicit(&b->stopped, memory_order_relaxed) ? ATTN_FAIL_STOPPED : 0;
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

/* Places the sequences of product s (packed: those with no tail, then the
 * others; then the ones outside it) and fills its map. rows(i) of the
 * sequence i, or 0 when it is not in the product; in(i) 2 when packed. */
static void stack_place(batch *b, int s, row_of *map, size_t (*rows)(const batch_seq *, int),
                        int (*packed)(const batch_seq *, int)) {
    const stack *st = &b->lay->st[s];
    size_t full = 0, a = 0, bb = 0, own = 0;
    for (size_t i = 0; i < st->rows; i++)
        map[i] = (row_of){NO_SEQ, 0};
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < b->count; i++) {
            batch_seq *q = &b->seq[i];
            const size_t n = q->active ? rows(q, s) : 0;
            if (!n) continue;
            const int in = packed(q, s);
            const size_t t = n % ROWS_Q;
            if (pass == 2 ? in : !in || (pass == 0) != (t == 0)) continue;
            place *p = &q->at[s];
            if (!in) {
                p->own = own, own += n;
                continue;
            }
            p->full = full, full += n - t;
            p->a = a, p->b = bb;
            a += (t + 1) / 2, bb += t / 2;
            p->own = t && st->tails > 1 ? own : IN_PLACE;
            if (p->own != IN_PLACE) own += n;
            for (size_t r = 0; r < n; r++)
                map[packed_row(st, p, n, r)] = (row_of){(uint32_t)i, (uint32_t)r};
        }
}

static size_t rows_in(const batch_seq *q, int s) {
    const attn_sizes *sz = &q->pl.sz;
    switch (s) {
    case S_SELF: return sz->cross ? 0 : sz->n;
    case S_Q: return sz->cross ? sz->n : 0;
    case S_KV: return sz->cross ? sz->m : 0;
    default: return q->pl.stage == ATTN_STAGE_DELTA ? sz->n : 0;
    }
}

static int packed_in(const batch_seq *q, int s) {
    return s == S_D || q->whole;
}

/* The packed rows from..rows of `src` (stride cols) of product s: each
 * row's sequence's row, or zeros; row x at dst + (x − from) · cols. */
static void gather(float *dst, const batch *b, int s, size_t cols, size_t from,
                   const float *(*src)(const batch_seq *), const attn_norm *nm) {
    const stack *st = &b->lay->st[s];
    for (size_t x = from; x < st->rows; x++) {
        const row_of *ro = &b->map[s][x];
        float *to = dst + (x - from) * cols;
        const float *row = ro->seq == NO_SEQ ? NULL : src(&b->seq[ro->seq]) + ro->r * cols;
        if (!row)
            memset(to, 0, cols * sizeof(float));
        else if (nm) /* the layer's norm, in the packing's one pass (norm.c) */
            attn_norm_rows(to, cols, row, cols, 1, cols, nm);
        else
            memcpy(to, row, cols * sizeof(float));
    }
}

static const float *embeddings_of(const batch_seq *q) {
    return q->pl.in->embeddings;
}

static const float *context_of(const batch_seq *q) {
    return q->pl.in->context;
}

/* The first whole sequence of product s in index order (its rows are the
 * packed rows when they need no copy). */
static const float *first_rows(const batch *b, int s) {
    for (size_t i = 0; i < b->count; i++) {
        const batch_seq *q = &b->seq[i];
        if (q->active && q->whole && rows_in(q, s))
            return s == S_KV ? context_of(q) : embeddings_of(q);
    }
    return NULL;
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
    b->lay = lay;
    b->seq = (batch_seq *)(void *)slice[B_SEQ];
    b->base = (size_t *)(void *)slice[B_INDEX];
    float *qkv = (float *)(void *)slice[B_QKV], *q = (float *)(void *)slice[B_Q];
    float *kv = (float *)(void *)slice[B_KV], *z = (float *)(void *)slice[B_Z];
    float *d = (float *)(void *)slice[B_D], *angles = (float *)(void *)slice[B_ANGLES];
    float *e = (float *)(void *)slice[B_E], *eq = (float *)(void *)slice[B_EQ];
    float *cx = (float *)(void *)slice[B_C];
    float *zp = w->w_o ? z : d; /* the packed Z */
    b->own[S_SELF] = (float *)(void *)slice[B_QKVO];
    b->own[S_Q] = (float *)(void *)slice[B_QO];
    b->own[S_KV] = (float *)(void *)slice[B_KVO];
    b->own[S_D] = (float *)(void *)slice[B_ZO];
    b->tmp = (float *)(void *)slice[B_SCRATCH];
    double *freq = (double *)(void *)slice[B_FREQ];
    if (freq) attn_rope_frequencies(freq, &w->rope);
    unsigned char *small = slice[B_SMALL];
    size_t self = 0;
    for (size_t i = 0; i < count; i++) {
        batch_seq *s = &b->seq[i];
        size_t total;
        attn_plan_make(&s->pl, &total, &outs[i], &ins[i]); /* sized by layout_make */
        s->active = s->pl.stage != ATTN_STAGE_NOTHING;
        s->whole = s->active && plan_whole(&s->pl);
    }
    row_of *map = (row_of *)(void *)slice[B_MAP];
    for (int s = 0; s < S_COUNT; s++) {
        b->map[s] = map;
        if (!lay->st[s].rows && !lay->st[s].own) continue; /* no sequence takes part */
        stack_place(b, s, map, rows_in, packed_in);
        if (lay->st[s].rows) map += lay->st[s].rows; /* map is NULL when no product has rows */
    }
    for (size_t i = 0; i < count; i++) {
        batch_seq *s = &b->seq[i];
        if (!s->active) continue;
        const attn_plan *pl = &s->pl;
        const attn_sizes *sz = &pl->sz;
        float *ws_slice[WS_COUNT] = {0};
        unsigned char *scratch = slice[B_SCRATCH];
        if (pl->bytes[WS_ROWS]) ws_slice[WS_ROWS] = (float *)(void *)scratch;
        if (pl->bytes[WS_TILE])
            ws_slice[WS_TILE] = (float *)(void *)(scratch + attn_slice_round(pl->bytes[WS_ROWS]));
        for (size_t x = 0; x < sizeof small_slices / sizeof small_slices[0]; x++) {
            int k = small_slices[x];
            if (!pl->bytes[k]) continue;
            ws_slice[k] = (float *)(void *)small;
            small += attn_slice_round(pl->bytes[k]);
        }
        attn_call_init(&s->c, pl, b->ws, b->runner, ws_slice);
        attn_call *c = &s->c;
        if (sz->cross) {
            c->qkv = c->q = own_row(q, b->own[S_Q], hd, &s->at[S_Q], 0);
            c->kv = own_row(kv, b->own[S_KV], 2 * gd, &s->at[S_KV], 0);
        } else {
            c->qkv = c->q = own_row(qkv, b->own[S_SELF], ld, &s->at[S_SELF], 0);
            c->kv = c->qkv + hd;
            /* each sequence its own table (LONGROPE's by its own positions) */
            if (pl->bytes[WS_ROPE]) {
                c->freq = freq + dims / 2 * attn_rope_table_of(&w->rope, c->pos, sz->n);
                c->angles = angles + self * dims;
            }
            s->angles = self;
            self += sz->n;
        }
        if (pl->stage == ATTN_STAGE_DELTA) {
            c->zall = own_row(zp, b->own[S_D], w->w_o ? hd : dm, &s->at[S_D], 0);
            c->d = w->w_o ? NULL : c->zall;
        }
    }
    const attn_norm *nm = w->norm.type != ATTN_NORM_NONE ? &w->norm : NULL;
    if (e) gather(e, b, S_SELF, dm, lay->e_from, embeddings_of, nm);
    if (eq) gather(eq, b, S_Q, dm, 0, embeddings_of, nm);
    if (cx) gather(cx, b, S_KV, lay->dc, 0, context_of, NULL);
    /* The sequences that project their listed heads alone read N(E): their normed
     * output (attn_norm_outputs made it), else B_EN. */
    float *en = (float *)(void *)slice[B_EN];
    for (size_t i = 0; nm && i < count; i++) {
        batch_seq *s = &b->seq[i];
        if (!s->active || s->whole) continue;
        const size_t n = s->pl.sz.n;
        if (s->pl.out.normed) {
            s->c.normed_e = s->pl.out.normed;
        } else {
            attn_norm_rows(en, dm, ins[i].embeddings, dm, n, dm, nm);
            s->c.normed_e = en;
            en += n * dm;
        }
    }
    /* A call alone's E is read in place up to its last row tile (lay->e_from), which the
     * projection's tiles read from the packed copy (attn_proj's x_last). */
    const int e_split = e && lay->e_from;
    b->e_last = e_split ? e : NULL;

    /* The stacked products, as calls of their own over the packed rows. */
    const stack *st = lay->st;
    b->in_self = (attn_input){.weights = w,
                              .embeddings = e && !e_split ? e : first_rows(b, S_SELF),
                              .n_tokens = st[S_SELF].rows};
    b->in_cross = (attn_input){.weights = w,
                               .embeddings = eq ? eq : first_rows(b, S_Q),
                               .n_tokens = st[S_Q].rows,
                               .context = cx ? cx : first_rows(b, S_KV),
                               .n_context = st[S_KV].rows};
    b->in_out = (attn_input){.weights = w, .n_tokens = st[S_D].rows};
    const attn_input *vin[3] = {&b->in_self, &b->in_cross, &b->in_out};
    attn_plan *vpl[3] = {&b->pl_self, &b->pl_cross, &b->pl_out};
    attn_call *vc[3] = {&b->c_self, &b->c_cross, &b->c_out};
    const int used[3] = {st[S_SELF].rows != 0, st[S_Q].rows || st[S_KV].rows, st[S_D].rows != 0};
    for (int x = 0; x < 3; x++) {
        if (!used[x]) continue; /* left as b was made: zeros, n = 0 */
        attn_zero(vpl[x], sizeof *vpl[x]);
        vpl[x]->in = vin[x], vpl[x]->stage = ATTN_STAGE_DELTA;
        attn_sizes_of(&vpl[x]->sz, vin[x]); /* sizes of the sequences', which fit */
        attn_zero(vc[x], sizeof *vc[x]);
        vc[x]->pl = vpl[x], vc[x]->runner = b->runner, vc[x]->ws = b->ws;
        atomic_init(&vc[x]->rc, 0);
    }
    b->rope_tiles = lay->rope_tiles && b->pl_self.sz.rope;
    b->c_self.qkv = b->c_self.q = qkv, b->c_self.kv = qkv ? qkv + hd : NULL;
    b->c_cross.qkv = b->c_cross.q = q, b->c_cross.kv = kv;
    b->c_out.d = d;
    b->c_out.zall = zp;
    if (lay->d_from) { /* a call alone (count 1): ΔE's rows up to the last row tile in place */
        const attn_output *o = &b->seq[0].pl.out;
        b->c_out.d = o->delta ? o->delta : o->embeddings;
        b->c_out.d_last = d;
        b->c_out.d_from = lay->d_from;
    }
}

/* The one in-place sequence with a tail of product s, if any: its tail
 * block to its rows' order (or back). */
static void stack_in_order(batch *b, int s, float *packed, size_t ld, int to_order) {
    const stack *st = &b->lay->st[s];
    if (st->tails != 1) return;
    for (size_t i = 0; i < b->count; i++) {
        const batch_seq *q = &b->seq[i];
        const size_t n = q->active ? rows_in(q, s) : 0;
        if (n % ROWS_Q && packed_in(q, s)) {
            tail_in_order(packed, ld, st, &q->at[s], n, b->tmp, to_order);
            return;
        }
    }
}

/* The sequences' Z to the packed rows of ΔE's product. */
static void z_pack(batch *b) {
    const stack *st = &b->lay->st[S_D];
    const size_t hd = b->pl_out.sz.hd;
    float *zp = b->c_out.zall;
    for (size_t x = 0; x < st->rows; x++) {
        const row_of *ro = &b->map[S_D][x];
        if (ro->seq == NO_SEQ) {
            if (st->tails != 1) memset(zp + x * hd, 0, hd * sizeof(float));
            continue;
        }
        const place *p = &b->seq[ro->seq].at[S_D];
        if (p->own != IN_PLACE)
            memcpy(zp + x * hd, b->own[S_D] + (p->own + ro->r) * hd, hd * sizeof(float));
    }
    stack_in_order(b, S_D, zp, hd, 0);
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
    if (b->e_last) b->pr_self[0].x_last = b->e_last, b->pr_self[0].x_from = lay->e_from;
    size_t tiles =
        b->pl_cross.sz.n ? attn_project_tiles(&b->pl_cross, &b->c_cross, b->pr_cross) : 0;
    if ((rc = batch_run(b, stack_project_task, b->tiles_self + tiles))) return rc;
    stack_in_order(b, S_SELF, b->c_self.qkv, b->pl_self.sz.ld, 1);
    stack_in_order(b, S_Q, b->c_cross.q, b->pl_cross.sz.hd, 1);
    stack_in_order(b, S_KV, b->c_cross.kv, b->pl_cross.sz.ldkv, 1);
    for (size_t i = 0; i < count; i++) {
        batch_seq *s = &b->seq[i];
        if (!s->active) continue;
        if (s->whole && !s->pl.sz.cross) s->c.rotated = b->rope_tiles;
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
    if (!b->lay->st[S_D].rows) return 0;
    z_pack(b);
    if ((rc = batch_run(b, stack_output_task, attn_output_tiles(&b->pl_out, &b->c_out)))) return rc;
    if (b->pl_out.in->weights->post_norm.type == ATTN_NORM_NONE) return 0;
    return batch_run(b, post_norm_task, attn_div_up(b->lay->st[S_D].rows, POST_ROWS));
}

/* The batch of sequences sharing ins[0].weights, its block `offset` bytes
 * into the workspace's (attn_batch_at); 0 or ATTN_FAIL_*, *failed the
 * failing sequence. */
static int batch_compute(const attn_output *outs, attn_workspace *ws, size_t offset,
                         const attn_input *ins, size_t count, const attn_runner *runner,
                         size_t *failed) {
    batch_layout lay;
    if (layout_make(&lay, outs, ins, count, ins[0].weights)) return ATTN_FAIL_NOMEM;
    attn_norm_outputs(outs, ins, count); /* N(E), before the rows that read it (norm.c) */
    if (!lay.active) return 0;
    /* cblas takes int sizes, the stacked rows' counts included */
    for (int s = 0; s < S_COUNT; s++)
        if (lay.st[s].rows > INT_MAX || lay.st[s].own > INT_MAX) return ATTN_FAIL_NOMEM;
    if (lay.ld > INT_MAX || lay.dm > INT_MAX || lay.dc > INT_MAX) return ATTN_FAIL_NOMEM;
    size_t bytes = offset;
    if (add_to(&bytes, lay.total)) return ATTN_FAIL_NOMEM;
    /* a growth would lose the first offset bytes: the caller reserved them all */
    if (offset && attn_workspace_bytes(ws) < bytes) abort();
    unsigned char *block = attn_workspace_reserve(ws, bytes);
    if (!block) return ATTN_FAIL_NOMEM;
    batch b;
    attn_zero(&b, sizeof b);
    b.count = count, b.ws = ws, b.runner = runner;
    atomic_init(&b.stopped, 0);
    batch_make(&b, &lay, block + offset, outs, ins, count);
    size_t first = count;
    int rc = batch_phases(&b, &lay, &first);
    if (rc == ATTN_FAIL_NONFINITE) *failed = first;
    return rc;
}

int attn_compute_batch(const attn_output *outs, attn_workspace *ws, const attn_input *ins,
                       size_t count, const attn_runner *runner, attn_error *err, size_t *failed) {
    if (failed) *failed = count;
    if (count == 0) return 0;
    if (count >= UINT32_MAX) return attn_fail_error(err, ATTN_FAIL_NOMEM); /* row_of.seq */
    for (size_t i = 1; i < count; i++)
        if (ins[i].weights != ins[0].weights)
            return one_by_one(outs, ws, ins, count, runner, err, failed);
    size_t first = count;
    int rc = batch_compute(outs, ws, 0, ins, count, runner, &first);
    if (!rc) return 0;
    if (failed && rc == ATTN_FAIL_NONFINITE) *failed = first;
    return attn_fail_error(err, rc);
}

int attn_batch_at(const attn_output *outs, attn_workspace *ws, size_t offset, const attn_input *ins,
                  size_t count, const attn_runner *runner, size_t *failed) {
    *failed = count;
    if (count == 0) return 0;
    if (count >= UINT32_MAX) return ATTN_FAIL_NOMEM;
    for (size_t i = 1; i < count; i++)
        if (ins[i].weights != ins[0].weights) abort(); /* the stack's layer, for every one */
    return batch_compute(outs, ws, offset, ins, count, runner, failed);
}

int attn_batch_bytes_worst(size_t *bytes, const attn_input *ins, size_t count,
                           const attn_weights *w) {
    batch_layout lay;
    if (count == 0) return *bytes = 0, 0;
    if (layout_make(&lay, NULL, ins, count, w)) return -1;
    *bytes = lay.total;
    return 0;
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
    size_t bytes;
    return attn_batch_bytes_worst(&bytes, ins, count, ins[0].weights) ? SIZE_MAX : bytes;
}
