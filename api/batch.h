/*
 * batch.h — a POST /v1/attention/batch request: many sequences through one
 * weight set, from JSON text to engine inputs and back.
 *
 * The life of a batch follows a single request's (request.h):
 *
 *   api_batch_decode         parse and validate the body: the shared fields
 *                            (model | weights, scale, return, select_heads,
 *                            encoding, mask) once, and each sequence as a
 *                            single request's per-sequence fields, every path
 *                            under /sequences/i; inline weights are bound
 *   api_batch_model          the model name, when the body names one
 *   api_batch_bind           a named model's weights, for every sequence,
 *                            then the limits over the whole batch
 *   api_batch_cost           the work (attn_batch_flops)
 *   api_batch_alloc_outputs  every sequence's outputs, in one block
 *   api_batch_inputs, _outputs  what attn_compute_batch reads and writes
 *   api_batch_encode         the JSON answer
 *   api_batch_free
 *
 * Each sequence is an api_request of its own (its embeddings, positions,
 * context, mask, labels, outputs), sharing the batch's options and, once
 * bound, its weights; so every rule, and every answer, is the single
 * request's. The batch owns its sequences and inline weights; a named
 * model's weights stay the model store's, kept alive by the caller until
 * api_batch_free.
 *
 * Limits: api_limits.max_batch sequences (422 limit_exceeded at
 * /sequences), max_tokens for each sequence and for the sum of their
 * tokens, and the work, scratch and response limits over the whole batch.
 */
#ifndef API_BATCH_H
#define API_BATCH_H

#include <stddef.h>

#include "api/error.h"
#include "api/request.h"
#include "attention/attention.h"

typedef struct api_batch api_batch;

/* As api_request_decode: 0 and a new batch in *out (freed with
 * api_batch_free), or -1 with *err filled and *out NULL. */
int api_batch_decode(const char *body, size_t len, const api_limits *limits, api_batch **out,
                     attn_error *err);

/* The rank of the array lifted from the text at `path` (api/arrays.h): a
 * sequence's embeddings and context (2), its mask and the shared one, and
 * the inline weights' as for a single request; 0 for the rest. */
int api_batch_array_rank(const char *path);

/* The model named, or NULL for inline weights (as api_request_model). */
const char *api_batch_model(const api_batch *b);
size_t api_batch_model_length(const api_batch *b);

/* Binds every sequence to a named model's weights, then checks the limits
 * on work, scratch and response size for the whole batch. 0, or -1. */
int api_batch_bind(api_batch *b, const attn_weights *weights, attn_mask_kind default_mask,
                   const api_limits *limits, attn_error *err);

/* api_batch_bind with the model's vocabulary (NULL: none), for sequences
 * that send tokens without embeddings (api_request_bind_vocab); each
 * error's path is in its sequence (/sequences/j/tokens/i). */
int api_batch_bind_vocab(api_batch *b, const attn_weights *weights, attn_mask_kind default_mask,
                         const api_vocabulary *vocab, const api_limits *limits, attn_error *err);

/* The floating-point operations of a bound batch. */
double api_batch_cost(const api_batch *b);

/* Every sequence's outputs, zeroed, from one block carved of `outputs`
 * (as api_request_alloc_outputs; NULL: calloc each). 0, or -1 (503). */
int api_batch_alloc_outputs(api_batch *b, attn_workspace *outputs, attn_error *err);

/* The sequences, and arrays of their engine inputs and outputs (count
 * each), for attn_compute_batch; valid until api_batch_free. */
size_t api_batch_count(const api_batch *b);
const attn_input *api_batch_inputs(const api_batch *b);
const attn_output *api_batch_outputs(const api_batch *b);

/* Makes an engine error of sequence `i` (attn_compute_batch's *failed)
 * name that sequence: its path becomes /sequences/i. */
void api_batch_name_sequence(size_t i, attn_error *err);

/* The 200 body of a computed batch, malloc'd, its length in *len; NULL
 * with *err as api_response_encode (a non-finite result names its
 * sequence). */
char *api_batch_encode(const api_batch *b, size_t *len, attn_error *err);

void api_batch_free(api_batch *b);

#endif
