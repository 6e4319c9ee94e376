/*
 * plan.h — internal to attention/: the plan of one attn_compute call and
 * the phases that carry it out (batch.c drives them, for one call or many):
 *
 *   project   QKV = E · w_qkv + b_qkv            project.c
 *             (with a context: Q = E · Wq, KV = C · Wkv); RoPE on Q and K
 *   attend    Z_i = softmax(S_i + M) · V_i       attend.c, by one of two
 *             paths: attend_full.c (n × n S and P), attend_online.c (tiles)
 *   output    ΔE = Z · w_o + b_o,  E' = E + ΔE   output.c
 *
 * The plan (attn_plan) says what is computed, from the outputs asked for;
 * the call (attn_call) holds the buffers and the state its tasks share.
 * Each phase is a set of independent tasks, handed to the runner as one
 * run (tasks.c). Letters as in attention.h.
 */
#ifndef ATTENTION_PLAN_H
#define ATTENTION_PLAN_H

#include <stdatomic.h>
#include <stddef.h>

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

/* Query rows per sgemm within a causal block's keys on the diagonal (both
 * paths, attend_full.c and attend_online.c): the keys before the block's
 * first row are one rectangle, the square on the diagonal goes by
 * sub-blocks of ATTN_SUB_Q rows, each to its own last row's key. */
#ifndef ATTN_SUB_Q
#define ATTN_SUB_Q 32
#endif

/* The rows of every sgemm of the projection and of ΔE are a multiple of
 * ATTN_ROWS_QUANTUM, and each row sits in the half of a block of it that
 * its sequence alone decides (batch.c's packed rows): OpenBLAS's sgemm
 * kernels for Haswell and Zen compute a row by one of two instruction
 * orders, one for slots 0 … 5 of a block of 12 rows and one for 6 … 11,
 * and its remainders of fewer than 12 rows by others again. */
#define ATTN_ROWS_QUANTUM 12

/* Why a phase failed; 0 is success. Only attn_compute_with turns these into
 * an attn_error. */
enum { ATTN_FAIL_NOMEM = 1, ATTN_FAIL_NONFINITE, ATTN_FAIL_STOPPED };

/* How the attend phase computes Z_i. */
typedef enum attn_path {
    ATTN_PATH_FULL,  /* scores or patterns are shown: S_i and P_i by rows of n keys,
                      * into the caller's n × n outputs (or B × n of scratch) */
    ATTN_PATH_ONLINE /* only Z is needed: B × K tiles, online softmax, linear memory */
} attn_path;

/* How far a call goes; each stage needs every one before it. */
typedef enum attn_stage {
    ATTN_STAGE_NOTHING,  /* no output asked for: nothing runs */
    ATTN_STAGE_QKV,      /* q, k or v shown, nothing past the projection */
    ATTN_STAGE_SCORES,   /* S */
    ATTN_STAGE_PATTERNS, /* P = softmax(S + M) */
    ATTN_STAGE_Z,        /* Z = P · V */
    ATTN_STAGE_DELTA     /* every head, then ΔE and E' */
} attn_stage;

/* Parts of QKV a call needs: a set of these bits. */
enum { ATTN_PART_Q = 1, ATTN_PART_K = 2, ATTN_PART_V = 4 };

/* The sizes of one call (hd and ld known not to overflow). */
typedef struct attn_sizes {
    size_t n, dm, h, dh;
    size_t g;          /* K/V heads, dividing h */
    size_t hd;         /* h · dh */
    size_t gd;         /* g · dh */
    size_t ld;         /* hd + 2gd: the stride of QKV and w_qkv */
    size_t m;          /* keys: n, or the context's rows */
    size_t dc;         /* the width of the rows keys come from: dm, or the context's */
    int cross;         /* K and V come from a context */
    size_t ldq;        /* the stride of Q's rows: ld, or hd with a context */
    size_t ldkv;       /* the stride of K's and V's rows: ld, or 2gd with a context */
    size_t hs;         /* heads listed in in->heads */
    size_t bq;         /* ATTN_BLOCK_Q clamped to n */
    size_t bk;         /* ATTN_BLOCK_K clamped to m */
    size_t blocks;     /* blocks of B query rows per head */
    size_t rope;       /* coordinates RoPE rotates (dims), or 0 */
    size_t freqs;      /* RoPE's frequencies: attn_rope_tables · dims/2, or 0 */
    int own_positions; /* rules read positions the input does not give: 0 … n−1 made */
} attn_sizes;

/* The slices of one call's scratch, as the plan sizes them. batch.c carves
 * a call's WS_SLOT, WS_RANGE and WS_POS; the others tell which scratch the
 * call needs and how much (WS_ROWS, WS_TILE also on another thread's
 * workspace), while the batch lays out QKV, Z and RoPE's table over the
 * stacked rows of all its calls. */
enum {
    WS_QKV,   /* n × (hd + 2gd) floats: Q of every head, K and V of every K/V head;
               * with a context n × hd (Q) then m × 2gd (K, V) */
    WS_ROWS,  /* B × m floats: P rows of a head whose patterns are not shown */
    WS_TILE,  /* B × K + 2B floats: online tile, running max and sum */
    WS_Z,     /* n × hd floats: [Z_1 … Z_h], only when w_o is applied */
    WS_SLOT,  /* 2h size_t: slot[i], the first position of head i in in->heads
               * (or SIZE_MAX); then order[t], the head of task t */
    WS_RANGE, /* 2 · blocks size_t: the keys [kbeg, kend) of each block of query rows */
    WS_POS,   /* n unsigned: 0 … n−1, when a rule reads positions the input does not give */
    WS_ROPE,  /* freqs doubles (f_t, attn_rope_tables of dims/2), then n × dims floats:
               * per row, a·cos(p·f_t) for t < dims/2, then a·sin(p·f_t) */
    WS_COUNT
};

/* What one call computes, from which outputs are non-NULL. */
typedef struct attn_plan {
    const attn_input *in;
    attn_sizes sz;
    attn_output out;  /* the caller's; per-head outputs NULL when no head is listed */
    attn_stage stage; /* the last stage computed */
    attn_path path;
    unsigned parts;         /* ATTN_PART_*: the projections needed */
    int rope_in_tiles;      /* RoPE in the projection's tiles (no q_raw, k_raw to copy first) */
    size_t bytes[WS_COUNT]; /* slice sizes; 0 = slice not needed */
} attn_plan;

/* A rows × cols result cut into tiles, each one task (tasks.c). */
typedef struct attn_tiling {
    size_t rows, cols; /* the whole result */
    size_t rb, cb;     /* rows and columns of a tile (the last ones smaller) */
    size_t nr, nc;     /* tiles down and across */
} attn_tiling;

/* The scratch of one attend task: the caller's slices on the calling
 * thread, the helper's own workspace on another. */
typedef struct attn_scratch {
    float *rows; /* B × n, or NULL */
    float *tile; /* B × K, then m: B, l: B; or NULL */
} attn_scratch;

/* One head's block of query rows, as the attend paths see it. */
typedef struct attn_block {
    float *q;               /* Q_i: n × dh, stride ldq, in QKV; the block's rows are its
                             * task's alone (attn_rescale_block_q may scale them) */
    const float *k, *v;     /* K_u(i), V_u(i): m × dh each, stride ldkv, in QKV */
    size_t r0, rb;          /* query rows r0 … r0+rb */
    size_t kbeg, kend;      /* keys outside kbeg … kend are masked for every row */
    attn_score_rules rules; /* what the score pass applies, the head's ALiBi slope included */
    float sink;             /* the head's sink logit, or −INFINITY: none */
    float *s, *p;           /* the head's n × m scores and patterns (caller's), or NULL */
    float *z;               /* the head's Z: n × dh, stride ldz; or NULL */
    size_t ldz;
    attn_scratch scratch;
} attn_block;

/* A path's work on one block; 0 or ATTN_FAIL_*. */
typedef int (*attn_block_fn)(const attn_plan *pl, const attn_block *b);

/* One product of the projection: dst = x · w + b, rows × cols (project.c). */
typedef struct attn_proj {
    const float *x; /* rows × k, stride k */
    size_t rows, k;
    const float *w; /* k × cols, stride ldw */
    size_t ldw;
    const float *b; /* cols, or NULL */
    float *dst;     /* rows × cols, stride ldd */
    size_t ldd, cols;
    size_t rope_heads; /* heads of dh columns from column 0 that RoPE rotates: h + g, or 0 */
    attn_tiling tiles;
    /* Or NULL: rows x_from … rows of x are read from here instead, (rows − x_from) × k
     * (batch.c: a call alone's last row tile, its tail block packed; the rest of x is
     * the caller's E, read in place). x_from is a row tile's first row. */
    const float *x_last;
    size_t x_from;
} attn_proj;

/* One call's buffers and what its tasks share; read-only in the tasks but
 * for rc (and each task's own part of the outputs). */
typedef struct attn_call {
    const attn_plan *pl;
    const attn_runner *runner; /* or NULL: every task in turn */
    attn_workspace *ws;        /* the caller's */
    float *qkv;                /* n × (hd + 2gd), or with a context Q then KV */
    float *q;                  /* Q of head 0: n × hd, stride ldq */
    float *kv;                 /* K of K/V head 0: m × 2gd, stride ldkv (V at + gd) */
    const unsigned *pos;       /* n positions, or NULL when no rule reads them */
    size_t *range;             /* 2 · blocks: kbeg, kend of each block of query rows */
    double *freq;              /* dims/2: RoPE's f_t (the call's table), or NULL */
    float *angles;             /* n × dims: RoPE's cos, sin per row, or NULL */
    attn_scratch scratch;      /* the caller's slices */
    size_t *slot;              /* h: head → first position in in->heads, or SIZE_MAX */
    size_t *order;             /* h: the heads, in task order */
    size_t distinct;           /* distinct heads listed */
    float *zall;               /* n × hd, [Z_1 … Z_h] when ΔE is wanted, or NULL */
    float *d;                  /* n × dm: ΔE (delta, or embeddings finished in place) */
    float *d_last;             /* or NULL: rows d_from … n of ΔE go here, (n − d_from) × dm
                                * (batch.c, as attn_proj's x_last); d_from a row tile's first */
    size_t d_from;
    const attn_proj *proj; /* the projection's products (project.c), while it runs */
    int rotated;           /* RoPE already applied to QKV, in the projection's tiles */
    attn_block_fn block;   /* the attend path's */
    attn_tiling tiles;     /* of the phase running */
    atomic_int rc;         /* 0, or the first ATTN_FAIL_* a task stored */
    const float *normed_e; /* N(E), n × dm, that the listed heads' own sgemms read
                            * when the layer has a norm; else NULL (norm.c) */
} attn_call;

static inline size_t attn_min(size_t a, size_t b) {
    return a < b ? a : b;
}

static inline size_t attn_div_up(size_t a, size_t b) {
    return a / b + (a % b != 0);
}

/* The columns where head i's Q begins in Q (c->q, and its weights), and
 * where the K and V of its K/V head u(i) = ⌊i / (h/g)⌋ begin in KV (c->kv,
 * and its weights). A K/V head is projected once and read in place by
 * every head of its group. */
static inline size_t attn_col_q(const attn_sizes *sz, size_t i) {
    return i * sz->dh;
}
static inline size_t attn_kv_head(const attn_sizes *sz, size_t i) {
    return i / (sz->h / sz->g);
}
static inline size_t attn_col_k(const attn_sizes *sz, size_t i) {
    return attn_kv_head(sz, i) * sz->dh;
}
static inline size_t attn_col_v(const attn_sizes *sz, size_t i) {
    return sz->gd + attn_kv_head(sz, i) * sz->dh;
}

/* The keys [*kbeg, *kend) that block `blk` of query rows may attend to:
 * the causal mask ends them at the block's last row, a window keeps the
 * keys within w of some query's position, a chunk those in some query's
 * chunk (attend.c). Depends on the shape and positions alone. */
void attn_block_keys(const attn_plan *pl, const unsigned *pos, size_t blk, size_t *kbeg,
                     size_t *kend);

/* Zeroes `bytes` at p by the C library's memset (workspace.c). gcc -O2's
 * generic tuning clears a struct of a few hundred bytes, written as
 * `s = (T){...}` or memset(&s, 0, sizeof s), by `rep stosq`, which costs
 * ~20 ns on the AMD EPYC measured (bench/README.md (a)): the dozen such
 * clears of a call were a fifth of a 3 × 4 one. A size the compiler cannot
 * see is glibc's vector stores. For the plans, calls and layouts made per
 * call; small structs are left to the compiler. */
void attn_zero(void *p, size_t bytes);

/* bytes rounded up to ATTN_WS_ALIGN, for a slice the plan sized. */
static inline size_t attn_slice_round(size_t bytes) {
    return (bytes + ATTN_WS_ALIGN - 1) / ATTN_WS_ALIGN * ATTN_WS_ALIGN;
}

/* RoPE (rope.c). A rope has attn_rope_tables tables of dims/2 frequencies
 * (LONGROPE two: its short factors', then its long ones'); a sequence at
 * positions pos[0 … n) (NULL: 0 … n−1) uses table attn_rope_table_of, and
 * its cos and sin carry attn_rope_attention_factor (attention.h).
 * attn_rope_frequencies: freq[0 … tables · dims/2) ← f_t after the
 * scaling, table by table. attn_rope_angles: the table of `rows`
 * positions pos[0 …]: angles row r (stride ldangles) ← a·cos(pos[r]·f_t)
 * for t < dims/2, then a·sin(pos[r]·f_t), freq being one table. */
size_t attn_rope_tables(const attn_rope *rope);
size_t attn_rope_table_of(const attn_rope *rope, const unsigned *pos, size_t n);
void attn_rope_frequencies(double *freq, const attn_rope *rope);
void attn_rope_angles(float *angles, size_t ldangles, const double *freq, double a, size_t dims,
                      const unsigned *pos, size_t rows);

/* ---- the plan and the call (compute.c) ------------------------------------ */

/* The plan of `out` on `in`, its slices sized into pl->bytes and their sum
 * into *total; -1 when a size overflows. */
int attn_plan_make(attn_plan *pl, size_t *total, const attn_output *out, const attn_input *in);

/* The sizes of `in`'s call; -1 when a size overflows or g does not divide h. */
int attn_sizes_of(attn_sizes *sz, const attn_input *in);

/* *total = the sum of the slices `bytes`, each rounded up to ATTN_WS_ALIGN;
 * -1 on overflow. */
int attn_slice_total(size_t *total, const size_t bytes[WS_COUNT]);

/* *bytes = the size slice s would have for sz; -1 on overflow. */
int attn_slice_bytes(size_t *bytes, int s, const attn_sizes *sz);

/* The call of plan pl on the slices given (slice[s] NULL where pl->bytes[s]
 * is 0): the buffers, positions, key ranges, head slots, where Z and ΔE go
 * (compute.c's call_make on one block; batch.c on a batch's). */
void attn_call_init(attn_call *c, const attn_plan *pl, attn_workspace *ws,
                    const attn_runner *runner, float *const slice[WS_COUNT]);

/* Fills *err (may be NULL) for a phase's ATTN_FAIL_* rc; returns -1. */
int attn_fail_error(attn_error *err, int rc);

/* ---- the phases' steps, each 0 or ATTN_FAIL_* where it returns an int;
 * batch.c runs each step for all the calls of a batch at once, a batch of
 * one being attn_compute_with -------------------------------------------- */

/* Projection (project.c). RoPE's table: attn_angles_tasks tasks of
 * attn_angles_task (0 when the call needs no table). Then, when
 * attn_project_whole says all of QKV is computed, the tiles of its products
 * (attn_project_tiles fills pr, points c->proj at it and returns their
 * count) as tasks of attn_project_task, which rotate the tiles when
 * pl->rope_in_tiles (the caller then sets c->rotated). Then
 * attn_project_rest, on the calling thread: the listed heads' own blocks
 * when not whole, q_raw and k_raw, the rotation not yet done, q, k, v. */
size_t attn_angles_tasks(const attn_plan *pl);
void attn_angles_task(void *arg, size_t t, attn_workspace *ws);
int attn_project_whole(const attn_plan *pl, const attn_call *c);
size_t attn_project_tiles(const attn_plan *pl, attn_call *c, attn_proj pr[2]);
void attn_project_task(void *arg, size_t t, attn_workspace *ws);
void attn_project_rest(const attn_plan *pl, attn_call *c);

/* Attend (attend.c): attn_attend_prepare orders the heads, sets the path's
 * block function and returns the count of attn_attend_task's tasks; after
 * them attn_attend_finish copies the slots of heads listed again. The
 * paths' block functions are attn_full_block and attn_online_block. */
size_t attn_attend_prepare(const attn_plan *pl, attn_call *c, attn_block_fn block);
void attn_attend_task(void *arg, size_t t, attn_workspace *ws);
void attn_attend_finish(const attn_plan *pl, attn_call *c);
int attn_full_block(const attn_plan *pl, const attn_block *b);
int attn_online_block(const attn_plan *pl, const attn_block *b);

/* For a block whose allowed scores overflowed as alpha · (Q·Kᵀ): its rows
 * of Q_i multiplied by *alpha in place and *alpha set to 1, so that the
 * product computed again is (alpha·Q)·Kᵀ; returns 1. Returns 0 when that
 * cannot help: *alpha not below 1 (a scale ≥ 1, or the rows scaled
 * already). attend.c; the paths call it. */
int attn_rescale_block_q(const attn_plan *pl, const attn_block *b, float *alpha);

/* Output (output.c): attn_output_tiles sets c->tiles to ΔE's and returns
 * their count, each a task of attn_output_task; attn_delta_row is where row
 * r of ΔE is (in c->d, or from c->d_from on in c->d_last). */
size_t attn_output_tiles(const attn_plan *pl, attn_call *c);
float *attn_delta_row(const attn_call *c, size_t r);
void attn_output_task(void *arg, size_t t, attn_workspace *ws);

/* ---- shared by the phases ------------------------------------------------- */

/* The tiling of a rows × cols result (tasks.c). Its column tiles depend on
 * cols and quantum alone, never on rows, so that a row's products are the
 * same sgemm columns whatever rows surround it (batch.c).
 * attn_tiling_aligned's column tiles are multiples of `quantum` columns (so
 * that RoPE finds whole heads in one tile). */
attn_tiling attn_tiling_make(size_t rows, size_t cols);
attn_tiling attn_tiling_aligned(size_t rows, size_t cols, size_t quantum);

/* Tile t of g: rows *r0 … *r0+*rb, columns *c0 … *c0+*cb. */
static inline void attn_tiling_tile(const attn_tiling *g, size_t t, size_t *r0, size_t *rb,
                                    size_t *c0, size_t *cb) {
    *r0 = t / g->nc * g->rb;
    *c0 = t % g->nc * g->cb;
    *rb = attn_min(g->rb, g->rows - *r0);
    *cb = attn_min(g->cb, g->cols - *c0);
}

/* ---- batches within a stack (batch.c, for stack.c) ------------------------ */

/* attn_compute_batch of sequences that all take ins[0].weights, its block
 * carved `offset` bytes into the workspace's, so that the first offset
 * bytes (a stack's residual streams) are left alone: the workspace must
 * already hold offset + the batch's bytes (attn_batch_bytes_worst bounds
 * them; abort() otherwise, a broken invariant). Returns 0 or ATTN_FAIL_*,
 * *failed the failing sequence for ATTN_FAIL_NONFINITE, else count. */
int attn_batch_at(const attn_output *outs, attn_workspace *ws, size_t offset, const attn_input *ins,
                  size_t count, const attn_runner *runner, size_t *failed);

/* *bytes = the block attn_compute_batch takes at most for `ins` through the
 * weight set w (read instead of each ins[i].weights), whatever the outputs;
 * -1 on overflow. */
int attn_batch_bytes_worst(size_t *bytes, const attn_input *ins, size_t count,
                           const attn_weights *w);

/* ---- attention rollout within a stack (rollout.c, for stack.c) ---------- */

/* One sequence's rollout: its layer's input and outputs as the caller
 * listed them, and the scratch it is widened into. */
typedef struct attn_rollout_seq {
    attn_input listed;     /* the layer's input as listed (heads, n_heads_out) */
    attn_output wanted;    /* the layer's outputs as wanted */
    float *scratch;        /* attn_rollout_floats of it, carved by attn_rollout_widen */
    int widened;           /* computed over all heads, the listed ones copied out */
    const float *patterns; /* h × n × n: every head's pattern of the layer */
    float *mean;           /* n × n: Â */
    float *other;          /* n × n: R's buffer besides the caller's */
    float *from, *to;      /* this layer's step: R before and after */
    size_t n, h;
} attn_rollout_seq;

/* *floats = the scratch one sequence's rollout takes (attn_rollout_widen
 * carves it), or -1 on overflow. */
int attn_rollout_floats(size_t *floats, const attn_input *in, const attn_weights *w);

/* Makes a layer's input lin and outputs lout compute every head's pattern
 * (into s->scratch, unless lout has them for all heads), noting in *s what
 * the caller asked for. */
void attn_rollout_widen(attn_rollout_seq *s, attn_input *lin, attn_output *lout);

/* After the layer: the listed heads' outputs copied from the widened
 * outputs `wide`, when widened. */
void attn_rollout_pick(const attn_rollout_seq *s, const attn_output *wide);

/* Layer `layer`'s step of each sequence whose results[i] (n × n) is not
 * NULL: R ← Â_layer · R (R = Â_0 for layer 0), the last layer's into
 * results[i]. first: count + 1 size_t of room. 0 or ATTN_FAIL_STOPPED. */
int attn_rollout_step(attn_rollout_seq *seqs, size_t count, size_t layer, size_t n_layers,
                      float *const *results, size_t *first, const attn_runner *runner);

/* The floating-point operations of a rollout of n tokens, h heads, L
 * layers, beyond the layers' own. */
double attn_rollout_flops(size_t n, size_t h, size_t n_layers);

/* ---- norms and temperature (norm.c) --------------------------------------- */

/* dst (rows × d, stride ldd) ← N(x) row by row (x: stride ldx; dst may be x). */
void attn_norm_rows(float *dst, size_t ldd, const float *x, size_t ldx, size_t rows, size_t d,
                    const attn_norm *nm);

/* x (rows × cols, stride ldx): row r times the temperature of pos[r] (r when
 * pos is NULL). */
void attn_temperature_rows(float *x, size_t ldx, size_t cols, const unsigned *pos, size_t rows,
                           const attn_temperature *t);

/* Whether w has a qk_norm; whether it needs every head of Q and K projected
 * (scope all), so that a call projects them whole whatever heads it lists. */
int attn_has_qk_norm(const attn_weights *w);
int attn_norm_needs_whole(const attn_weights *w);

/* The projection's steps after the biases (attn_project_rest): qk_norm of
 * `heads` heads from x (stride ldx), Q (part ATTN_PART_Q, n rows) or K
 * (ATTN_PART_K, m rows), and Q's temperature when there is no RoPE; Q's
 * temperature after RoPE otherwise (attn_temperature_step). */
void attn_qk_step(const attn_plan *pl, float *x, size_t ldx, size_t heads, unsigned part);
void attn_temperature_step(const attn_plan *pl, float *x, size_t ldx, size_t heads);

/* Each outs[i].normed ← N(E) of ins[i], for a layer with a norm. */
void attn_norm_outputs(const attn_output *outs, const attn_input *ins, size_t count);

/* The flops the norms and the temperature add to attn_input_flops. */
double attn_norm_flops(const attn_input *in);

/* A task's failure: the first one stored wins. */
void attn_call_fail(attn_call *c, int rc);

#endif
