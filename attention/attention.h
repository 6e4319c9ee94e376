/*
 * attention.h — multi-head masked attention on float32 buffers.
 *
 * The letters used in every shape comment of this module:
 *
 *   n        tokens (rows of E)
 *   dm       d_model, the embedding width
 *   h        heads (query heads)
 *   g        K/V heads: g divides h, g = h without grouping
 *   dh       d_head, the width of one head
 *   hd       h · dh, the width of all heads side by side
 *   gd       g · dh, the width of all K/V heads side by side
 *
 * Every matrix is row-major float32. A row vector convention is used
 * throughout: a token is a row e and a projection is e · W.
 *
 * Per K/V head u (u < g) and per head i, with u(i) = ⌊i / (h/g)⌋ the K/V
 * head of head i (consecutive heads share one, as Llama's repeat_kv):
 *   K_u = E · Wk_u + bk_u        n × dh
 *   V_u = E · Wv_u + bv_u        n × dh
 *   Q_i = E · Wq_i + bq_i        n × dh
 *   S_i = scale · Q_i · K_u(i)ᵀ  n × n
 *   P_i = row-softmax(S_i + M)   n × n, M = 0 where allowed, −∞ elsewhere
 *   Z_i = P_i · V_u(i)           n × dh
 * g = h is multi-head attention (u(i) = i), g = 1 multi-query attention.
 * then
 *   ΔE  = [Z_1 … Z_h] · Wo + bo  n × dm (Wo absent: identity, needs hd == dm)
 *   E'  = E + ΔE
 *
 * Today's variants, each optional (attn_weights and attn_input below), with
 * p the tokens' positions (0 … n−1 unless given):
 *   RoPE       Q_i, K_u rotated by position right after the projection
 *   softcap    S ← c · tanh(S / c)
 *   ALiBi      S[q][k] −= m_i · |p_q − p_k|
 *   window     key k allowed for query q only where |p_q − p_k| < w
 *   context    cross-attention: K_u, V_u = C · Wk_u + bk_u, C · Wv_u + bv_u
 *              from m context rows; S is n × m
 * applied in this order: S = scale · Q·Kᵀ, softcap, ALiBi, mask and
 * window (−∞), softmax.
 *
 * attn_compute runs these in three phases — project (QKV), attend (S, P, Z
 * per head, by a full or an online path), output (ΔE, E') — each a set of
 * tasks a caller's runner may spread over threads (compute.c), for one
 * sequence or, by attn_compute_batch, for many at once (batch.c).
 *
 * The module knows nothing of HTTP or JSON. It allocates nothing but the
 * workspace, holds no global state, and is reentrant: any number of threads
 * may call attn_compute at once, each with its own workspace.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stddef.h>

#include "attention/error.h"

/*
 * A weight set. The projection weights of all heads are packed side by side
 * in one matrix so that Q, K and V of every head come out of a single GEMM:
 *
 *   w_qkv   dm × (hd + 2gd)   columns [Q_0 … Q_{h-1} | K_0 … K_{g-1} | V_0 … V_{g-1}],
 *                             each block dh wide; with g = h that is dm × 3hd,
 *                             the layout of GPT-2's c_attn
 *   b_qkv   hd + 2gd          same column order, or NULL for no bias
 *   w_o     hd × dm           or NULL for the identity (then hd must equal dm)
 *   b_o     dm                or NULL for no bias
 *
 * n_kv_heads is g; 0 means h (so a weight set that does not name it is
 * multi-head, as before grouping existed). g must divide h: the caller
 * validates it (else attn_compute fails, as for a size that cannot be had,
 * with ATTN_ERR_NOMEM).
 *
 * Cross-attention weights keep K and V apart, since they project rows of
 * another width (d_context, dc):
 *
 *   w_kv    dc × 2gd          columns [K_0 … K_{g-1} | V_0 … V_{g-1}]
 *   b_kv    2gd               or NULL
 *
 * and then w_qkv is dm × hd and b_qkv hd: Q alone. Without w_kv, a context
 * is projected by w_qkv's K and V columns (dc = dm).
 *
 * The weight set does not own its buffers; whoever fills it does.
 */

/* RoPE: rotary position embedding of Q and K (attention.h's top comment). */
typedef enum attn_rope_style {
    ATTN_ROPE_HALF,       /* coordinate t pairs with t + dims/2 (Llama, GPT-NeoX) */
    ATTN_ROPE_INTERLEAVED /* 2t pairs with 2t + 1 (GPT-J, RoFormer) */
} attn_rope_style;

typedef enum attn_rope_scaling {
    ATTN_ROPE_SCALING_NONE,
    ATTN_ROPE_SCALING_LINEAR,  /* f_t / factor */
    ATTN_ROPE_SCALING_LLAMA3,  /* Llama 3.1's: by wavelength, see docs/API.md */
    ATTN_ROPE_SCALING_YARN,    /* YaRN's ramp between f_t / factor and f_t, cos and sin × a */
    ATTN_ROPE_SCALING_LONGROPE /* f_t / short or long factor[t] per sequence, cos and sin × a */
} attn_rope_scaling;

typedef struct attn_rope {
    size_t dims;  /* coordinates rotated: even, ≤ dh; 0 = no RoPE */
    double theta; /* f_t = theta^(−2t/dims) */
    attn_rope_style style;
    attn_rope_scaling scaling;
    double factor;                /* LINEAR, LLAMA3, YARN, LONGROPE (0: 1) */
    double low_freq_factor;       /* LLAMA3 */
    double high_freq_factor;      /* LLAMA3 */
    double original_max_position; /* LLAMA3, YARN, LONGROPE: original_max_position_embeddings */
    /* YARN and LONGROPE (rope.c): zero is each field's default */
    double beta_fast, beta_slow;   /* YARN: the ramp's ends in rotations; 0: 32 and 1 */
    double mscale, mscale_all_dim; /* YARN: a = mscale(s, m) / mscale(s, m') when both ≠ 0 */
    int untruncated;               /* YARN: 1 = "truncate": false (the ramp's ends not rounded) */
    double attention_factor;       /* YARN, LONGROPE: a given, > 0; 0: the default a */
    const float *short_factor;     /* LONGROPE: dims/2, for a sequence whose positions are < L */
    const float *long_factor;      /* LONGROPE: dims/2, for one reaching L */
} attn_rope;

/*
 * The norms of 2025–2026 layers (norm.c; docs/API.md, "Attention of
 * 2025–2026 models"), over a row x of width d:
 *   LAYER   (x − mean(x)) / sqrt(var(x) + eps) · w + b   (population variance)
 *   RMS     x / sqrt(mean(x²) + eps) · (offset + w)
 * weight NULL: the factor is 1 (whatever the offset); bias NULL: 0.
 */
typedef enum attn_norm_type { ATTN_NORM_NONE, ATTN_NORM_LAYER, ATTN_NORM_RMS } attn_norm_type;

typedef struct attn_norm {
    attn_norm_type type; /* NONE: no norm */
    const float *weight; /* d, or NULL */
    const float *bias;   /* d (LAYER), or NULL */
    double eps;          /* > 0 */
    double offset;       /* RMS: 0 or 1 */
} attn_norm;

/* qk_norm: RMS norms of Q and K after their projection and biases, before
 * RoPE; per head (weights dh, shared by the heads) or over all of Q's hd and
 * K's gd coordinates (weights that long). */
typedef struct attn_qk_norm {
    attn_norm q, k; /* both RMS, or both NONE: no qk_norm */
    int all;        /* scope "all" (else "head") */
} attn_qk_norm;

/* Llama 4's query temperature: row q of Q times log(⌊(p_q + 1) / F⌋ + 1) · a + 1. */
typedef struct attn_temperature {
    double floor_scale; /* F > 0, or 0: none */
    double attn_scale;  /* a */
} attn_temperature;

typedef struct attn_weights {
    size_t d_model;
    size_t n_heads;
    size_t d_head;
    size_t n_kv_heads; /* g; 0 = n_heads */
    const float *w_qkv;
    const float *b_qkv;
    const float *w_o;
    const float *b_o;
    size_t d_context;   /* dc: the rows of w_kv */
    const float *w_kv;  /* or NULL: K and V are w_qkv's columns */
    const float *b_kv;  /* or NULL */
    attn_rope rope;     /* dims 0: none */
    const float *alibi; /* h slopes m_i, or NULL */
    size_t window;      /* w ≥ 1, or 0: none */
    float softcap;      /* c > 0, or 0: none */
    float scale;        /* the weight set's default scale, or 0: 1/sqrt(dh); attn_compute
                           reads attn_input.scale: the caller chooses */
    /* Norms and temperature (norm.c), each optional, applied in this order:
     * norm of E's rows (with a context, the queries' only; E' = E + ΔE keeps E
     * unnormalised) → projection and biases → qk_norm → RoPE → temperature →
     * scores …; ΔE = post_norm(concat(Z) · w_o + b_o). */
    attn_norm norm;               /* dm */
    attn_norm post_norm;          /* dm */
    attn_qk_norm qk_norm;         /* the caller refuses temperature beside RoPE */
    attn_temperature temperature; /* reads the queries' positions */
    /* Chunked local attention (Llama 4) and attention sinks (GPT-OSS), applied
     * with the mask and window, and in the softmax:
     *   chunk   key k allowed for query q only where ⌊p_q / c⌋ = ⌊p_k / c⌋
     *   sinks   P_i[q][k] = exp(S[q][k]) / (Σ_k' exp(S[q][k']) + exp(s_i)),
     *           the sum over the allowed keys: a row sums to less than 1,
     *           and a row with no allowed key stays all zeros */
    const float *sinks; /* h sink logits s_i (finite), or NULL */
    size_t chunk;       /* c ≥ 1, or 0: none; ignored with a context, as window */
} attn_weights;

typedef enum attn_mask_kind {
    ATTN_MASK_CAUSAL, /* query q may attend to keys k <= q */
    ATTN_MASK_NONE,   /* every query attends to every key */
    ATTN_MASK_CUSTOM  /* allowed[q·n + k] != 0 where q may attend to k */
} attn_mask_kind;

typedef struct attn_mask {
    attn_mask_kind kind;
    const unsigned char *allowed; /* n × n, CUSTOM only; not owned */
} attn_mask;

/*
 * One computation's inputs. Per-head outputs (q, k, v, scores, patterns,
 * head_outputs) are produced only for the heads listed in `heads`, in that
 * order; delta and embeddings always use every head. Heads are query heads:
 * a listed head i's k and v are K_u(i) and V_u(i), those of its K/V head.
 */
typedef struct attn_input {
    const attn_weights *weights;
    const float *embeddings; /* n × dm */
    size_t n_tokens;
    attn_mask mask;
    float scale;               /* multiplies Q·Kᵀ; usually 1/sqrt(dh) */
    const size_t *heads;       /* indices into 0 … h-1; may be NULL when n_heads_out == 0 */
    size_t n_heads_out;        /* called hs below */
    const unsigned *positions; /* n positions (< 2^31), or NULL: 0 … n−1 */
    const float *context;      /* m × dc: cross-attention's keys and values come from
                                  it; or NULL (self-attention: m = n, C = E) */
    size_t n_context;          /* m */
} attn_input;

/*
 * The caller validates the variants: with a context, the mask is NONE or
 * CUSTOM (n × m) and there is no RoPE, ALiBi, window or chunk; a custom mask is
 * n × m (m = n without context); w_kv needs a context.
 */

/*
 * Where results go. Each buffer is caller-owned; NULL means "not wanted",
 * and work that only a NULL output needs is not done. No output overlaps
 * another or an input: ΔE may be written into delta or embeddings before
 * E' = E + ΔE is made of it.
 *
 *   q, k, v        hs × n × dh   (k, v: hs × m × dh with a context); q and k
 *                                after RoPE
 *   q_raw, k_raw   as q, k       before RoPE (equal to q, k without it)
 *   scores         hs × n × m    final scores (softcap, ALiBi), −INFINITY where
 *                                masked or outside the window
 *   patterns       hs × n × m    P_i; masked entries exactly 0
 *   head_outputs   hs × n × dh   Z_i
 *   delta          n × dm        ΔE
 *   embeddings     n × dm        E' = E + ΔE
 *   normed         n × dm        N(E), the layer's norm of E (left alone without one)
 *
 * q_raw and k_raw are after qk_norm (and, without RoPE, the temperature).
 */
typedef struct attn_output {
    float *q, *k, *v;
    float *q_raw, *k_raw;
    float *scores;
    float *patterns;
    float *head_outputs;
    float *delta;
    float *embeddings;
    float *normed;
} attn_output;

/* Scratch memory of one worker. It only grows; reuse it across calls. */
typedef struct attn_workspace attn_workspace;

/* Returns a new, empty workspace, or NULL when out of memory. Free with
 * attn_workspace_destroy. */
attn_workspace *attn_workspace_create(void);
void attn_workspace_destroy(attn_workspace *ws);

/* Bytes the workspace holds now (for metrics and tests). */
size_t attn_workspace_bytes(const attn_workspace *ws);

/* Frees the workspace's memory when it holds more than keep_bytes, so that
 * one huge request does not pin its scratch for the worker's lifetime; the
 * next call grows it again. */
void attn_workspace_trim(attn_workspace *ws, size_t keep_bytes);

/*
 * Returns the workspace's block, grown to at least `bytes` (contents not
 * kept across a growth; 64-byte aligned), or NULL when the allocation
 * fails, the workspace then unchanged, or when ws is NULL (so that
 * attn_compute on a NULL workspace fails with ATTN_ERR_NOMEM). The block
 * stays owned by the workspace, valid until the next reserve, trim or destroy. attn_compute
 * carves its scratch from it; a caller may also keep a workspace of its
 * own as a block of memory reused from call to call.
 */
void *attn_workspace_reserve(attn_workspace *ws, size_t bytes);

/*
 * The codes of the errors attn_compute fills in (attn_error's code, see
 * attention/error.h): static strings, so a caller may compare them by
 * pointer (err.code == ATTN_ERR_STOPPED). The engine knows nothing of
 * HTTP: its errors carry status 0 and path "", and the caller decides.
 */
extern const char ATTN_ERR_NOMEM[];     /* "out_of_memory": the workspace could not grow,
                                         * or a size overflows */
extern const char ATTN_ERR_NONFINITE[]; /* "non_finite_number": an allowed score
                                         * overflowed float32 (inf or NaN) */
extern const char ATTN_ERR_STOPPED[];   /* "stopped": the runner's stop said so
                                         * (attn_compute_with) */

/*
 * Computes everything `out` asks for. Returns 0, or -1 with *err filled
 * (err may be NULL) with one of the codes above; `out` is then
 * unspecified. Inputs must be consistent (the caller has validated shapes,
 * head indices and the mask). Masked scores are −INFINITY and only they
 * are: a finite input whose scores overflow is ATTN_ERR_NONFINITE, never a
 * silently masked key.
 */
int attn_compute(const attn_output *out, attn_workspace *ws, const attn_input *in, attn_error *err);

/*
 * An optional way to run independent tasks on several threads, given by the
 * caller (the server backs it with its worker pool). run(ctx, task, arg,
 * count) calls task(arg, index, ws) exactly once for every index in
 * 0 … count-1, on any threads, in any order, and returns only when all have
 * returned. `ws` is the workspace of the thread running the task: the
 * caller's own (the one given to attn_compute_with) on the calling thread,
 * another, not in use by anyone else meanwhile, on any other thread. A
 * runner that runs every task in turn on the calling thread with the
 * caller's workspace is valid; so is run == NULL, which means that.
 *
 * `stop` may be NULL; else it is asked before each phase, and before each
 * task on the thread about to run it, so it must be safe to call from
 * several threads at once and cheap (it is asked once per head and block
 * of query rows). Once it returns nonzero the computation ends: the tasks
 * not begun are skipped, attn_compute_with fails with ATTN_ERR_STOPPED and
 * the outputs are not complete. (The server stops the work of a client
 * that has gone, however its work was counted.)
 */
typedef void (*attn_task_fn)(void *arg, size_t index, attn_workspace *ws);
typedef struct attn_runner {
    void (*run)(void *ctx, attn_task_fn task, void *arg, size_t count);
    void *ctx;
    int (*stop)(void *ctx);
} attn_runner;

/*
 * attn_compute, with its work handed to `runner` as tasks, so that one
 * computation can use several threads: the projection's tiles, then one
 * task per (head, block of 128 query rows) — a single head is split too —
 * then ΔE's tiles, each phase one call of run. NULL runner: attn_compute.
 * The results are bit for bit those of attn_compute (the tasks depend on
 * the shape alone and each writes only its own part); the errors are the
 * same, except that when several tasks fail, which error is reported
 * is not fixed. Each other workspace a task runs on grows by at most one
 * block of query rows × n floats and one tile.
 */
int attn_compute_with(const attn_output *out, attn_workspace *ws, const attn_input *in,
                      const attn_runner *runner, attn_error *err);

/*
 * A batch: `count` computations through one weight set, as many sequences
 * of their own lengths, masks, positions, contexts, listed heads and
 * outputs. Every ins[i].weights is the same pointer (sequences of several
 * weight sets are computed one by one); outs[i] says what sequence i wants,
 * as for attn_compute, and its results land in outs[i]'s buffers. Each
 * sequence's results are bit for bit those of attn_compute_with(&outs[i],
 * ws, &ins[i], ...) alone, whatever it is batched with and whatever the
 * runner: batch invariance is a property of the engine, not of the batch's
 * make-up (batch.c says how; it holds with OpenBLAS's own thread count at
 * 1, as the server sets it). attn_compute_with is itself a batch of one.
 *
 * The work: the projections (E · W_qkv + b_qkv, with contexts C · W_kv)
 * and ΔE of all sequences in few GEMMs over their stacked rows, in whole
 * blocks of 12 rows: each sequence's full blocks, then its leftover rows
 * in blocks shared with the others' (batch.c says why and how); RoPE by each sequence's own
 * positions; the attention as tasks per (sequence, head, block of 128 query rows); each phase one
 * call of runner->run (NULL: run in turn on this thread), so that a pool spreads every sequence's
 * work over its workers.
 *
 * Returns 0, or -1 with *err filled as attn_compute_with does and, when
 * the error is one sequence's (ATTN_ERR_NONFINITE), *failed set to its
 * index — the lowest, when several fail — (else to count); failed may be
 * NULL. count 0 is a success. The workspace grows to at most
 * attn_batch_workspace_need(ins, count) bytes.
 */
int attn_compute_batch(const attn_output *outs, attn_workspace *ws, const attn_input *ins,
                       size_t count, const attn_runner *runner, attn_error *err, size_t *failed);

/* The work of a batch: the sum of attn_input_flops over its sequences. */
double attn_batch_flops(const attn_input *ins, size_t count);

/* Bytes of workspace attn_compute_batch takes for the batch, whatever the
 * outputs (saturating): an upper bound, checked by the tests. Linear
 * in the batch's rows: its stacked QKV, Z, ΔE and padded copies of E (and
 * C), RoPE's table, one block of query rows × m of the longest sequence,
 * and per sequence a few hundred bytes of its plan and small tables. */
size_t attn_batch_workspace_need(const attn_input *ins, size_t count);

/*
 * A stack of L attention layers on the residual stream (stack.c), as an
 * attention-only transformer:
 *
 *   E_0 = E,   E_{l+1} = E_l + ΔE_l,   ΔE_l = layer l's ΔE computed from E_l
 *
 * Each layer is a whole weight set (layers[l]); all share dm, h, dh and g
 * (the caller validates; else the call fails with ATTN_ERR_NOMEM, as for a
 * size that cannot be had, naming the first layer that differs). A
 * sequence's mask, positions, listed heads and context are those of its
 * attn_input for every layer; its weights are not read. The scale of layer
 * l: scales[l] for every sequence, 0 there meaning the layer's own
 * (attn_weights_scale); with scales NULL, each sequence's attn_input.scale
 * for every layer.
 *
 * With hidden_states, layer l of sequence i reads hidden_states[i·L + l]
 * (n × dm) instead of E_l, and its embeddings are that + ΔE_l: there is no
 * residual stream, the stack's final delta and embeddings are not
 * written, E (the inputs' embeddings) is not read, and a layer with no
 * outputs asked for is not computed (unless for a rollout).
 *
 * Rollout (Abnar & Zuidema, 2020), when a final output's rollout is not
 * NULL (and stack.rollout is set, so that the workspace has room for it):
 * R = Â_{L−1} · … · Â_0, Â_l the rows of Ā_l / 2 + I / 2 divided by their
 * sums, Ā_l the mean over all h heads of layer l's patterns (whatever the
 * heads listed). Every layer is then computed, over all heads. Only for
 * self-attention (no context).
 */
typedef struct attn_stack {
    const attn_weights *const *layers; /* L weight sets */
    size_t n_layers;                   /* L ≥ 1 */
    const float *scales;               /* L scales (0: the layer's own), or NULL */
    const float *const *hidden_states; /* count × L matrices n × dm, or NULL */
    int rollout; /* 1: the final outputs may ask for a rollout (self-attention only) */
} attn_stack;

/* The scale a weight set carries: its scale when > 0, else 1/sqrt(dh). */
float attn_weights_scale(const attn_weights *w);

/* The stack's own results for one sequence; each n × dm, or NULL. */
typedef struct attn_stack_output {
    float *delta;      /* E_L − E_0 (for L = 1, ΔE_0 as attn_compute_batch gives it) */
    float *embeddings; /* E_L */
    float *rollout;    /* n × n: attention rollout, with stack.rollout set */
} attn_stack_output;

/*
 * Computes the stack for `count` sequences: each layer one
 * attn_compute_batch of all the sequences, so everything it says holds per
 * layer (both paths, the runner's split, batch invariance: a sequence's
 * results are bit for bit those of its stack alone). layer_outs[l] is NULL
 * (layer l not reported) or count outputs, as attn_compute_batch's, where
 * delta is ΔE_l and embeddings E_{l+1}; outs is NULL or count final
 * outputs. A one-layer stack is attn_compute_batch bit for bit. Work not
 * asked for is not done: without final outputs the layers past the last
 * reported one are not computed. No output overlaps another or an input.
 *
 * The runner's stop is asked before each layer too. Returns 0, or -1 with
 * *err filled as attn_compute_batch does; *failed is then the failing
 * sequence for ATTN_ERR_NONFINITE (else count) and *failed_layer the layer
 * the error arose in (else L); either may be NULL. The outputs of the
 * layers before it are complete; the final outputs are not (the stack
 * keeps earlier layers' E_l in them). The workspace grows to at most
 * attn_stack_workspace_need(ins, count, stack) bytes: the largest layer's
 * batch, and two residual streams of the batch's rows whatever L, less
 * one n × dm stream for each final output (embeddings, delta) a sequence
 * asks for, whose buffer the layers before the last use instead.
 */
int attn_compute_stack(const attn_output *const *layer_outs, const attn_stack_output *outs,
                       attn_workspace *ws, const attn_input *ins, size_t count,
                       const attn_stack *stack, const attn_runner *runner, attn_error *err,
                       size_t *failed, size_t *failed_layer);

/* The work of a stack: the sum over its layers of attn_batch_flops of the
 * sequences through that layer. */
double attn_stack_flops(const attn_input *ins, size_t count, const attn_stack *stack);

/* Bytes of workspace attn_compute_stack takes, whatever the outputs
 * (saturating): an upper bound, checked by the tests. */
size_t attn_stack_workspace_need(const attn_input *ins, size_t count, const attn_stack *stack);

/*
 * Floating-point operations one computation of n tokens takes with these
 * dimensions (multiply-adds counted as 2), for limits and benchmarks.
 * A double, so that no size can overflow it. attn_flops is multi-head
 * (g = h); attn_flops_grouped takes g = n_kv_heads (0 = n_heads): only the
 * projection shrinks, each head's scores and Z cost the same.
 */
double attn_flops(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head, int has_w_o);
double attn_flops_grouped(size_t n_tokens, size_t d_model, size_t n_heads, size_t n_kv_heads,
                          size_t d_head, int has_w_o);

/* slopes[0 … h): the ALiBi paper's standard slopes for h ≥ 1 heads,
 * m_i = 2^(−8(i+1)/h) when h is a power of two, else the paper's
 * interleaving of the next powers (as BLOOM's build_alibi_tensor). */
void attn_alibi_slopes(float *slopes, size_t h);

/* The attention factor a that RoPE's cos and sin carry (rope.c): the
 * rope's attention_factor when given, else for YARN mscale(s, 1) or, when
 * mscale and mscale_all_dim are both ≠ 0, mscale(s, m) / mscale(s, m'),
 * mscale(s, x) = 0.1·x·ln s + 1 (1 for s ≤ 1); for LONGROPE
 * sqrt(1 + ln s / ln L) for s > 1, else 1; 1 for the other scalings. A
 * caller that accepts a rope checks that it is finite and > 0. */
double attn_rope_attention_factor(const attn_rope *rope);

/*
 * The floating-point operations attn_compute really does for `in` when
 * every output is asked for: only the key blocks it computes (a causal
 * mask's blocks above the diagonal and those wholly outside a window or
 * the query rows' chunks are skipped), the projection at g K/V heads (of the context's m rows with
 * one). The server schedules and limits by it. Reads the positions, so
 * costs O(n²/128) comparisons with a window.
 */
double attn_input_flops(const attn_input *in);

/* Bytes of workspace attn_compute needs for `in`, whatever the outputs
 * (saturating): attn_batch_workspace_need of the batch of one. */
size_t attn_input_workspace_need(const attn_input *in);

/* Bytes of workspace one computation of this size needs (saturating): an
 * upper bound for any set of outputs. Linear in n, over n padded to 12
 * rows: n × (hd + 2gd) (Q, K, V), n × hd (Z), n × dm twice (ΔE, and E's
 * padded copy), one block of query rows × n and a small tile; the n × n
 * scores and patterns live only in the caller's outputs.
 * attn_workspace_need is multi-head (g = h); attn_workspace_need_grouped
 * takes g = n_kv_heads (0 = n_heads). */
size_t attn_workspace_need(size_t n_tokens, size_t d_model, size_t n_heads, size_t d_head);
size_t attn_workspace_need_grouped(size_t n_tokens, size_t d_model, size_t n_heads,
                                   size_t n_kv_heads, size_t d_head);

#endif
