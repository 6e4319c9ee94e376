/*
 * models.h — the JSON of GET /v1/models and GET /v1/models/{name}.
 *
 * The model store is not api/'s business: the server hands each model over
 * as an api_model_info, a view of what the store holds.
 */
#ifndef API_MODELS_H
#define API_MODELS_H

#include <stddef.h>

#include "api/error.h"
#include "api/vocabulary.h"
#include "attention/attention.h"

typedef struct api_model_info {
    const char *name;
    const char *description;
    attn_mask_kind mask; /* the default mask: causal or none */
    const attn_weights *weights;
    const api_vocabulary *vocabulary; /* NULL: none */
    const char *const *dimensions;    /* d_model names, or NULL */
    /* A stack (API.md, "Layers"): n_layers weight sets, layers[0] being
     * `weights`; n_layers 0 with layers NULL: one layer, `weights`. */
    const attn_weights *const *layers;
    size_t n_layers;
} api_model_info;

/* What api_model_encode adds to a model's summary. */
enum { API_MODEL_WEIGHTS = 1, API_MODEL_VOCABULARY = 2 };

/* {"models": [{"name", "d_model", "d_context"?, "n_heads", "n_kv_heads", "d_head",
 * "n_layers", "mask", "rope"?, "alibi"?, "window"?, "softcap"?, "scale"?,
 * "norm"?, "post_norm"?, "qk_norm"?, "temperature"? (settings, no arrays),
 * "vocabulary_size"?, "n_positions"?, "dimensions"?, "description"}, …]} in the order
 * given: d_context for cross-attention weights (w_kv) or when it differs
 * from d_model, n_layers (1 for one layer), the variants those the weights
 * set (alibi as its h slopes) — a stack's per layer instead, in
 * "layers": [{"layer": l, "rope"?, …}, …] —
 * vocabulary_size (V) with a vocabulary and n_positions (P) with a position
 * table, dimensions with the dimensions' names.
 * Returns a malloc'd body (caller frees) and its length in *len, or NULL
 * when out of memory. */
char *api_models_encode_list(const api_model_info *models, size_t count, size_t *len);

/*
 * One model's object; `parts` (API_MODEL_* bits) adds to it: with
 * API_MODEL_WEIGHTS "weights" in the inline form of POST /v1/attention (per
 * head w_q, w_k, w_v and the biases the model has, or with g < h K/V heads
 * w_q and b_q per head and kv_heads; then w_o, b_o and the variants; a
 * stack's as {"layers": [weight set, …]}), so that a client can send them
 * back; the bound on the answer counts every layer; with API_MODEL_VOCABULARY, for a model
 * with a vocabulary, "vocabulary": {"tokens": [V strings], "embeddings":
 * V × d_model, "position_embeddings"?: P × d_model}. Refuses with 422
 * limit_exceeded when that text could exceed max_response_bytes, 503
 * out_of_memory when memory runs out.
 */
char *api_model_encode(const api_model_info *model, unsigned parts, size_t max_response_bytes,
                       size_t *len, attn_error *err);

/* Reads the value of the query parameter `name` (NULL: absent) into *flag:
 * 1 for "true" or "1", 0 for "false", "0" or absent. Returns 0, or -1 with
 * the contract's 400 invalid_value in *err for anything else. */
int api_model_flag(const char *name, const char *value, int *flag, attn_error *err);

#endif
