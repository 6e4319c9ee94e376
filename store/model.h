/*
 * model.h — one attention model, loaded from one safetensors file.
 *
 * The file's tensors (models/README.md is the full description), with
 * h = n_heads, g = n_kv_heads, hd = h·d_head, gd = g·d_head:
 *
 *   w_qkv   dm × (hd + 2gd)   self-attention; columns [Q heads | K heads | V heads]
 *   b_qkv   hd + 2gd          optional
 *   w_q     dm × hd           cross-attention, instead of w_qkv: Q alone
 *   b_q     hd                optional
 *   w_kv    dc × 2gd          cross-attention: [K heads | V heads] of the context
 *   b_kv    2gd               optional
 *   w_o     hd × dm           optional; absent = identity, which needs hd == dm
 *   b_o     dm                optional
 *   alibi   h                 optional: explicit ALiBi slopes
 *   sinks   h                 optional: a sink logit per head (model_sinks.h)
 *   token_embeddings     V × dm   optional, with metadata vocabulary: row t
 *                                 is the embedding of vocabulary token t
 *   position_embeddings  P × dm   optional, only with a vocabulary: row p is
 *                                 added to a token's at position p (GPT-2's wpe)
 *
 * in F32, F16 or BF16, and its __metadata__: n_heads (required, decimal),
 * name (default: the file name without ".safetensors"), description
 * (default "", at most STORE_DESCRIPTION_MAX bytes), mask ("causal" or
 * "none", default "causal", "none" for a cross-attention model, where
 * "causal" is refused), n_kv_heads (g, default h, divides h), rope_theta /
 * rope_dims (either turns RoPE on), rope_style, rope_scaling, rope_factor,
 * rope_low_freq_factor, rope_high_freq_factor, rope_original_max_position,
 * alibi ("true": the standard slopes), window, softcap, scale, chunk, vocabulary
 * (a JSON array of V distinct, non-empty token strings without NUL;
 * present iff token_embeddings is), dimensions (a JSON array of d_model
 * distinct, non-empty names, with or without a vocabulary). Other metadata
 * keys are ignored; any other tensor name is refused.
 *
 * A stack of L layers (models/README.md, "Stacks") has metadata n_layers =
 * L (1 … STORE_LAYERS_MAX); each layer's tensors above (not the
 * vocabulary's) are named "layers.<l>.<name>" and its keys rope_*, alibi,
 * window, softcap, scale and chunk "layers.<l>.<key>", l = 0 … L−1 in decimal
 * without a leading zero. The layers share d_model, n_heads, d_head,
 * n_kv_heads, d_context and their kind (all self- or all cross-attention);
 * a prefix without n_layers, a weight or per-layer key without one in a
 * stack, a layer past L, a layer without its w_qkv (a gap) are refused.
 * Without n_layers, a file is one layer, read as it always was.
 *
 * store_model's weights (layer 0) fill every field of attn_weights: n_kv_heads is g
 * (never 0), d_context the rows of w_kv, or d_model for a self-attention
 * model (whose context, if a request gives one, w_qkv's K and V columns
 * project); alibi points to the file's slopes or to the standard ones,
 * which the model owns.
 *
 * Memory: the file is read whole into a buffer the model owns
 * (STORE_READ_COPY, the default), or mapped (STORE_READ_MAP; see
 * safetensors.h for what a mapping risks). F32 tensors whose bytes are
 * 4-byte aligned in the file are used in place, straight from that buffer
 * or mapping; unaligned F32 tensors are copied, and F16 / BF16 are
 * converted to F32 once, into heap buffers the model owns. When no tensor
 * is used in place the file's buffer or mapping is let go at the end of
 * the load. Every value is checked finite at load, so a request never
 * meets a NaN in a weight. A copied model never changes after the load,
 * whatever is done to its file; a mapped one is as its file is.
 *
 * A loaded model is immutable: any number of threads may read it at once
 * without a lock, until store_model_destroy.
 */
#ifndef STORE_MODEL_H
#define STORE_MODEL_H

#include <stddef.h>

#include "attention/attention.h"
#include "store/error.h"
#include "store/safetensors.h"

/* The most heads a model file may declare. */
#define STORE_HEADS_MAX 65536

/* The longest name of a dimension (metadata `dimensions`), in bytes. */
#define STORE_DIMENSION_NAME_MAX 64

/* The most layers a model file may stack (metadata n_layers). */
#define STORE_LAYERS_MAX 1024

/* The longest description (metadata `description`), in bytes. */
#define STORE_DESCRIPTION_MAX 4096

typedef struct store_model_memory store_model_memory;

typedef struct store_model {
    const char *name;                  /* matches [A-Za-z0-9._-]{1,64} */
    const char *description;           /* UTF-8, "" when none */
    const char *path;                  /* the file it was loaded from */
    attn_mask_kind mask;               /* the default mask: ATTN_MASK_CAUSAL or ATTN_MASK_NONE */
    attn_weights weights;              /* layer 0: pointers into the file or owned buffers */
    size_t n_layers;                   /* L ≥ 1 */
    const attn_weights *const *layers; /* L sets, [0] == &weights */
    size_t vocab_size;                 /* V, 0 when the model has no vocabulary */
    const char *const *vocabulary;     /* V NUL-terminated token strings, or NULL */
    const float *token_embeddings;     /* V × d_model, or NULL */
    size_t n_positions;                /* P, 0 when there is no position table */
    const float *position_embeddings;  /* P × d_model, or NULL */
    const char *const *dimensions;     /* d_model names, or NULL */
    size_t bytes_mapped;        /* bytes of the file kept mapped (0 unless mapped, and in use) */
    size_t bytes_owned;         /* bytes of heap buffers: the file's, when kept, and
                                   converted or copied tensors */
    store_model_memory *memory; /* private: what owns the above */
} store_model;

/* Loads the model in `path`, its file read as `mode` says. Returns 0 and
 * *out (free it with store_model_destroy), or -1 with *out NULL and err
 * "<path>: <fault>". */
int store_model_load_mode(store_model **out, const char *path, store_read_mode mode,
                          attn_error *err);

/* store_model_load_mode with STORE_READ_COPY. */
int store_model_load(store_model **out, const char *path, attn_error *err);

/* Frees the model (and unmaps its file); its weights die. NULL is a no-op. */
void store_model_destroy(store_model *m);

/* The row of the vocabulary token equal to the `len` bytes at s (which
 * may hold NUL, and then match none), or -1 when there is none or the model
 * has no vocabulary. O(log V): a binary search of a sorted index the model
 * owns. */
long store_model_token(const store_model *m, const char *s, size_t len);

/* 1 when the `len` bytes at `name` match [A-Za-z0-9._-]{1,64}, else 0: the
 * one rule for a model's name, whether it comes from a file, a command line
 * or a request (whose JSON string may hold NUL bytes, hence `len`). */
int store_model_name_valid(const char *name, size_t len);
#define STORE_MODEL_NAME_MAX 64

/* The numbers of a model file's metadata, and of the tools' options that
 * write them, as text: store_positive_parse takes a finite decimal
 * (strtod's syntax, the whole text, no leading space, no hex, no inf or
 * nan) > 0; store_size_parse decimal digits only, at most `max`. 0, or
 * -1 with *out untouched. */
int store_positive_parse(const char *s, double *out);
int store_size_parse(const char *s, size_t max, size_t *out);

/* The name of the model in the file at `path` when its metadata gives
 * none: the base name without ".safetensors", the *len bytes from the
 * pointer returned (into path). */
const char *store_model_default_name(const char *path, size_t *len);

#endif
