/*
 * request.h — a POST /v1/attention request, from JSON text to engine inputs.
 *
 * Life of a request object:
 *
 *   api_request_decode   parse and validate the body (shapes, types, every
 *                        rule of the contract that needs no model, but what
 *                        a model's name may be: the store's rule); inline
 *                        weights are bound at once
 *   api_request_model    the model name, when the body names one instead
 *                        (a string; the caller checks it is a model's name)
 *   api_request_bind     for a named model: check the request against the
 *                        model's weights and the limits (api_request_bind_vocab
 *                        also takes its vocabulary, for tokens without
 *                        embeddings)
 *   api_request_cost     the work of the bound request (the server schedules
 *                        by it)
 *   api_request_alloc_outputs  the output buffers, just before computing
 *   api_request_input    what attn_compute reads
 *   api_request_output   where attn_compute writes (owned by the request)
 *   api_response_encode  (response.h) the JSON answer
 *   api_request_free     frees everything the request owns
 *
 * The request owns its embeddings, positions, context, inline weights (and
 * their ALiBi slopes), mask, head list, token labels and output buffers. Weights bound from a model
 * stay owned by the model store; the caller keeps them alive until api_request_free.
 */
#ifndef API_REQUEST_H
#define API_REQUEST_H

#include "api/error.h"
#include "api/vocabulary.h"
#include "attention/attention.h"
#include <stddef.h>

/* Limits checked while decoding, before any allocation they bound. */
typedef struct api_limits {
    size_t max_tokens;          /* n */
    size_t max_heads;           /* h */
    size_t max_d_model;         /* dm, and dh */
    double max_flops;           /* attn_input_flops of one request */
    size_t max_response_bytes;  /* worst-case size of the 200 body: every number
                                   at its widest, 16 characters and a comma */
    size_t max_workspace_bytes; /* scratch one computation needs (attn_input_workspace_need) */
    size_t max_json_depth;      /* nesting of arrays and objects; 0: jansson's own */
    size_t max_string_bytes;    /* any string but a tensor's base64 "data"; 0: none */
    size_t max_batch;           /* sequences of a batch (api/batch.h) */
} api_limits;

typedef struct api_request api_request;

/*
 * Parses `len` bytes of `body` (need not be NUL-terminated). On success
 * returns 0 and a new request in *out, which the caller frees with
 * api_request_free. On failure returns -1, fills *err (status 400 or 422,
 * code, message, JSON path) and leaves *out NULL.
 */
int api_request_decode(const char *body, size_t len, const api_limits *limits, api_request **out,
                       attn_error *err);

/*
 * The rank of the matrix (2) or vector (1) a request holds at the JSON
 * Pointer `path` ("/embeddings", "/weights/heads/3/w_q", "/weights/b_o", …),
 * or 0: the arrays api_request_decode reads straight from the text
 * (api/arrays.h). An api_arrays_rank_fn.
 */
int api_request_array_rank(const char *path);

/* The model the request names, or NULL when it carries inline weights.
 * Valid until api_request_free. Only its type is checked: it is any JSON
 * string within max_string_bytes, NUL bytes included (its length is
 * api_request_model_length); whether it is a model's name is for the
 * caller to check before it binds one. */
const char *api_request_model(const api_request *req);
size_t api_request_model_length(const api_request *req);

/*
 * Binds a named model's weights: checks embeddings, context, mask and
 * select_heads against them and the limits (work, scratch and response
 * size included), and applies the model's default mask (none with a
 * context) and scale when the request gave none. Nothing
 * the limits bound is allocated yet. `weights` is not copied and must
 * outlive the request. Returns 0, or -1 with *err filled.
 */
int api_request_bind(api_request *req, const attn_weights *weights, attn_mask_kind default_mask,
                     const api_limits *limits, attn_error *err);

/*
 * api_request_bind for a model that may have a vocabulary (`vocab`, NULL
 * when it has none): a request that sends tokens without embeddings
 * (docs/API.md, "Vocabularies") gets its embeddings from it, the rows of
 * its tokens plus the position rows of their positions, in float32. An
 * unknown token is a 422 unknown_token at /tokens/i, a position past the
 * table a 422 position_out_of_range (at /positions/i when positions were
 * given, else /tokens/i), tokens alone without a vocabulary a 422
 * no_vocabulary at /embeddings. The embeddings are made after every limit
 * has held. `vocab` is read during the call only.
 */
int api_request_bind_vocab(api_request *req, const attn_weights *weights,
                           attn_mask_kind default_mask, const api_vocabulary *vocab,
                           const api_limits *limits, attn_error *err);

/* The floating-point operations a bound request's computation takes
 * (attn_input_flops of its input). */
double api_request_cost(const api_request *req);

/*
 * Allocates a bound request's output buffers, zeroed: carved from
 * `outputs`, a block the caller keeps between requests so that large
 * outputs do not pay for fresh pages each time (it must not be used for
 * anything else until api_request_free), or, when `outputs` is NULL, one
 * calloc each. Returns 0, or -1 with a 503 out_of_memory in *err.
 */
int api_request_alloc_outputs(api_request *req, attn_workspace *outputs, attn_error *err);

/* Engine inputs and outputs of a bound request. */
const attn_input *api_request_input(const api_request *req);
const attn_output *api_request_output(const api_request *req);

void api_request_free(api_request *req);

#endif
