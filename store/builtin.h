/*
 * builtin.h — the built-in models, written by tools/make_models (and by
 * tests, which call this directly).
 *
 *   demo-4d            the worked example 我爱你: d_model 4, one head of
 *                      width 4, mask none, fixed readable weights, W_v = I,
 *                      no biases, no w_o
 *   demo-stories       designed weights (stories.h): d_model 16 of named
 *                      dimensions, 5 heads of 4, causal, a vocabulary of
 *                      40 words and a position table of 16
 *   demo-layers        a stack of 2 layers, each 2 heads of 8 with w_o,
 *                      over demo-stories' 16 named dimensions and 40 words
 *                      (its token_embeddings, no position table), causal;
 *                      pseudo-random weights: a small model to try layers,
 *                      rollout and hidden states on
 *   gpt2-small-shape   d_model 768, 12 heads of 64, causal, with b_qkv, w_o
 *                      and b_o; pseudo-random weights
 *   gpt3-shape         d_model 12288, 96 heads of 128, causal, with w_o;
 *                      pseudo-random weights; ~2.4 GB, written on demand only
 *   llama-small-shape  d_model 2048, 32 heads of 64 sharing 8 K/V heads,
 *                      RoPE θ 500000 on all 64 coordinates (half), causal,
 *                      with w_o; pseudo-random weights
 *   llama3-8b-shape    d_model 4096, 32 heads of 128 sharing 8 K/V heads,
 *                      RoPE θ 500000 with Llama 3.1's scaling (factor 8,
 *                      low 1, high 4, original 8192), causal, with w_o;
 *                      ~168 MB, written on demand only
 *
 * Pseudo-random weights are the same on every machine: each tensor has its
 * own stream, splitmix64 seeded with STORE_BUILTIN_SEED ^ FNV-1a-64 of
 * "<model>/<tensor>" (the tensor's full name: "demo-layers/layers.1.w_o"); a value takes the top 24
 * bits x of a draw and is (float)(((x − 2^23) / 2^23) · amp), all steps exact but the last two IEEE
 * roundings. amp is 1/sqrt(d_model) for w_qkv and w_o, 0.02 for the biases. Everything is F32.
 */
#ifndef STORE_BUILTIN_H
#define STORE_BUILTIN_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attention.h"
#include "store/error.h"
#include "store/safetensors.h"

/* A model whose every tensor is spelled out by a rule (stories.h): it
 * writes its own tensors and metadata keys beside the common ones (name,
 * description, n_heads, mask, source). */
typedef struct store_design {
    const char *source; /* the metadata `source` */
    size_t (*data_bytes)(void);
    int (*write)(const char *path, const store_metadata *meta, size_t n_meta, size_t *file_bytes,
                 attn_error *err);
} store_design;

#define STORE_BUILTIN_SEED UINT64_C(0x617474656e74696f) /* "attentio" */

typedef struct store_builtin {
    const char *name; /* the file is <name>.safetensors */
    const char *description;
    size_t d_model, n_heads, d_head;
    attn_mask_kind mask;
    int has_b_qkv, has_w_o, has_b_o; /* the tensors the seeded streams fill */
    int on_demand;                   /* 1: too large to write by default */
    size_t n_kv_heads;               /* 0: n_heads (no n_kv_heads metadata written) */
    attn_rope rope;                  /* dims 0: none */
    const store_design *design;      /* NULL: pseudo-random weights from the seed */
    size_t n_layers;                 /* 0 or 1: one layer; else a stack of that many
                                        (at most STORE_BUILTIN_LAYERS_MAX), each layer
                                        the tensors above, named layers.<l>.<tensor> */
    int stories_vocabulary;          /* 1: demo-stories' words and dimension names,
                                        its token_embeddings, no position table */
} store_builtin;

#define STORE_BUILTIN_LAYERS_MAX 4

/* The table, in a fixed order; entries are static. */
size_t store_builtin_count(void);
const store_builtin *store_builtin_at(size_t index);
const store_builtin *store_builtin_find(const char *name);

/* Bytes of the tensor data of b (all F32), without the header. */
size_t store_builtin_data_bytes(const store_builtin *b);

/* Writes <dir>/<name>.safetensors (replacing it atomically). Returns 0 and,
 * when not NULL, *file_bytes; or -1 with err set. */
int store_builtin_write(const store_builtin *b, const char *dir, size_t *file_bytes,
                        attn_error *err);

/* demo-4d's matrices, row-major 4 × 4, as written into its w_qkv. */
extern const float store_builtin_demo_w_q[16];
extern const float store_builtin_demo_w_k[16];
extern const float store_builtin_demo_w_v[16];

#endif
