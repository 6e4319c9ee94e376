/*
 * call.h — one computation asked for over HTTP, whatever its wire format:
 * count ≥ 1 sequences through one weight set, from the body's bytes to
 * engine inputs, and the engine's outputs back to the answer's bytes.
 *
 * Every endpoint that computes goes through this one container and one
 * life:
 *
 *   api_call_decode       parse and validate the body in its wire format
 *                         (shapes, types, every rule that needs no model);
 *                         inline weights are bound at once
 *   api_call_model       the model's name, when the call names one (in the
 *                         body, or for /v2 in the URL)
 *   api_call_bind         a named model's weights (and vocabulary): every
 *                         sequence checked against them, then the limits
 *                         over the whole call
 *   api_call_cost         the work (attn_batch_flops), for scheduling
 *   api_call_alloc_outputs  the outputs, carved from a caller's block
 *   api_call_count, _inputs, _outputs   what attn_compute_batch reads and
 *                         writes
 *   api_call_compute      the computation (a stack's too: api_call_stack)
 *   api_call_encode       the answer in the call's wire format, as one body
 *   api_answer_create     or, when it carries binary tensors
 *                         (api_call_streams), an answer read from the
 *                         outputs themselves as it is sent (/v2)
 *   api_call_error_body   a failure's body in a wire format
 *   api_call_free
 *
 * A wire format is a codec (call_internal.h): a decoder that fills the
 * container's sequences and options, an encoder that writes its answer,
 * its error body, and the bound on its answer's size. Everything between
 * — binding, limits, outputs, the computation — is the container's, the
 * same for all: a fourth protocol is a decoder and an encoder, nothing
 * else.
 *
 * Ownership: the call owns its sequences, their inputs and outputs (the
 * outputs' memory may be the caller's block, see api_call_alloc_outputs)
 * and inline weights; a named model's weights and vocabulary stay the
 * caller's (the model store's), alive until api_call_free.
 */
#ifndef API_CALL_H
#define API_CALL_H

#include <stddef.h>

#include "api/error.h"
#include "api/vocabulary.h"
#include "attention/attention.h"

/* Limits checked while decoding and binding, before any allocation they
 * bound. */
typedef struct api_limits {
    size_t max_tokens;          /* n, and the tokens of all sequences of a call */
    size_t max_heads;           /* h */
    size_t max_d_model;         /* dm, and dh */
    double max_flops;           /* attn_batch_flops of one call */
    size_t max_response_bytes;  /* worst-case size of the 200 body: every number
                                   at its widest */
    size_t max_workspace_bytes; /* scratch one computation needs */
    size_t max_json_depth;      /* nesting of arrays and objects; 0: jansson's own */
    size_t max_string_bytes;    /* any string but a tensor's base64 "data"; 0: none */
    size_t max_batch;           /* sequences of a call */
} api_limits;

/* The wire formats. */
typedef enum api_call_kind {
    API_CALL_ATTENTION, /* POST /v1/attention: one sequence, its fields at the top */
    API_CALL_BATCH,     /* POST /v1/attention/batch: "sequences" */
    API_CALL_OIP,       /* POST /v2/models/{name}/infer: the Open Inference Protocol */
    API_CALL_KINDS
} api_call_kind;

/* What a wire format brings besides the body. */
typedef struct api_call_body {
    const char *data; /* need not be NUL-terminated; not kept past decode */
    size_t len;
    /* API_CALL_OIP: the JSON header's length (Inference-Header-Content-Length),
     * -1 when the whole body is JSON; and the model the URL names. */
    long long header_len;
    const char *model;
} api_call_body;

/* What a model lends a call at bind (the caller's, alive until
 * api_call_free). */
typedef struct api_model_ref {
    const char *name;
    const attn_weights *weights;
    attn_mask_kind mask;         /* its default: causal or none */
    const api_vocabulary *vocab; /* NULL: none */
    /* A stack (API.md, "Layers"): n_layers weight sets, layers[0] being
     * `weights`; n_layers 0 with layers NULL: one layer, `weights`. */
    const attn_weights *const *layers;
    size_t n_layers;
} api_model_ref;

typedef struct api_call api_call;

/*
 * Decodes `body` in the wire format `kind`. On success returns 0 and a new
 * call in *out, which the caller frees with api_call_free. On failure
 * returns -1, fills *err (status 400 or 422, 503 without memory; code,
 * message, JSON path) and leaves *out NULL. `limits` may be NULL: none.
 */
int api_call_decode(api_call_kind kind, const api_call_body *body, const api_limits *limits,
                    api_call **out, attn_error *err);

/* api_call_decode of a JSON body that needs nothing else (the /v1 kinds,
 * and /v2 without binary data or a model). */
int api_call_decode_json(api_call_kind kind, const char *body, size_t len, const api_limits *limits,
                         api_call **out, attn_error *err);

/* The rank of the matrix (2), vector (1) or mask the wire format `kind`
 * lifts from the text at the JSON Pointer `path` (api/arrays.h), or 0. */
int api_call_array_rank(api_call_kind kind, const char *path);

/* The model the call names, or NULL for inline weights; valid until
 * api_call_free. Only its type is checked (any JSON string within
 * max_string_bytes, NUL bytes included: its length is *len); whether it
 * is a model's name is the caller's to check. */
const char *api_call_model(const api_call *c, size_t *len);

/* Where the model's name was given: "/model" in the body, or NULL when
 * the URL named it (an error then names no field and does not echo it). */
const char *api_call_model_path(const api_call *c);

/*
 * Binds a named model: each sequence is checked against its weights (and
 * takes its embeddings from the vocabulary when it sent tokens alone), the
 * model's default mask and scale apply where the call gave none, then the
 * limits on work, scratch and the answer's size hold over the whole call.
 * Returns 0, or -1 with *err.
 */
int api_call_bind(api_call *c, const api_model_ref *m, const api_limits *limits, attn_error *err);

/* The floating-point operations of a bound call. */
double api_call_cost(const api_call *c);

/*
 * The outputs of every sequence, zeroed, carved from `block`: a block the
 * caller keeps between calls so that large outputs do not pay for fresh
 * pages each time (not to be used for anything else until api_call_free);
 * NULL: one calloc each. Returns 0, or -1 with a 503 in *err.
 */
int api_call_alloc_outputs(api_call *c, attn_workspace *block, attn_error *err);

/* The sequences the engine computes (possibly 0 for /v2 rows all
 * padding), and arrays of their inputs and outputs, for
 * attn_compute_batch; valid until api_call_free. */
size_t api_call_count(const api_call *c);
const attn_input *api_call_inputs(const api_call *c);
const attn_output *api_call_outputs(const api_call *c);

/* The stack of layers the call computes (API.md, "Layers"), or NULL for
 * one layer without a rollout: then attn_compute_batch of the inputs and
 * outputs above. */
const attn_stack *api_call_stack(const api_call *c);

/* Computes a call whose outputs are made: attn_compute_batch, or
 * attn_compute_stack for a stack, with the engine's 0 / -1, *err and
 * *failed. */
int api_call_compute(const api_call *c, attn_workspace *ws, const attn_runner *runner,
                     attn_error *err, size_t *failed);

/* Makes an engine error of sequence `i` (attn_compute_batch's *failed)
 * name that sequence where the wire format has several. */
void api_call_name_failure(const api_call *c, size_t i, attn_error *err);

/*
 * The answer of a computed call, malloc'd, its length in *len. When
 * `json_len` is not NULL it receives the length of the JSON part when
 * binary data follows it (/v2's Inference-Header-Content-Length), else 0.
 * NULL with *err (422 for a result JSON cannot carry, 503 without memory).
 */
char *api_call_encode(const api_call *c, size_t *len, size_t *json_len, attn_error *err);

/*
 * An answer sent as it is read: the JSON header, then the binary tensors
 * read straight from the block the computation wrote the outputs into,
 * never copied into a body. Its memory is the outputs' block, the header,
 * and the call's padding's bookkeeping: a binary answer of any size holds
 * no second copy of its numbers.
 *
 * api_call_streams says whether a computed call's answer carries binary
 * tensors (only /v2's may; codec_oip_encode.c writes them), to make its
 * outputs in a block of their own (api_call_alloc_outputs) before it is
 * computed. api_answer_create then takes that block (freed with the
 * answer, or at once on failure) and what it needs of the call, which may
 * only be freed afterwards. The answer holds nothing of the model's; it
 * may outlive the call and be read on another thread, one at a time.
 */
typedef struct api_answer api_answer;

int api_call_streams(const api_call *c);

/* NULL with *err: 503 without memory, 500 for a call that does not stream
 * or whose outputs are not in `block`. */
api_answer *api_answer_create(api_call *c, attn_workspace *block, attn_error *err);

/* The answer's bytes, its JSON header's (Inference-Header-Content-Length)
 * among them. */
size_t api_answer_length(const api_answer *a);
size_t api_answer_json_length(const api_answer *a);

/* Copies the answer's bytes [pos, pos + max) into buf, as far as they go;
 * returns how many (0 at pos ≥ the length). */
size_t api_answer_read(const api_answer *a, size_t pos, char *buf, size_t max);

void api_answer_destroy(api_answer *a);

/* The answer's Content-Type: static. */
const char *api_call_content_type(const api_call *c, size_t json_len);

/* The error body of the wire format `kind`, malloc'd, its length in *len;
 * NULL when out of memory. */
char *api_call_error_body(api_call_kind kind, const attn_error *err, size_t *len);

void api_call_free(api_call *c);

#endif
