/*
 * request_internal.h — the inside of an api_request, shared by the files
 * of this module that decode (request.c, request_weights.c), bind
 * (request_bind.c) and encode (response.c) it. Not for other folders.
 *
 * Ownership: every pointer below is owned by the request and freed by
 * api_request_free, except input.weights when bound to a model (the model
 * store owns those) and the buffers an attn_output points to, which are
 * the request's own out_* fields.
 */
#ifndef API_REQUEST_INTERNAL_H
#define API_REQUEST_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "api/arrays.h"
#include "api/buffer.h"
#include "api/request.h"

/* The `return` names, one bit each, in the order of the response. */
enum {
    API_RETURN_Q = 1 << 0,
    API_RETURN_K = 1 << 1,
    API_RETURN_V = 1 << 2,
    API_RETURN_SCORES = 1 << 3,
    API_RETURN_PATTERNS = 1 << 4,
    API_RETURN_HEAD_OUTPUTS = 1 << 5,
    API_RETURN_DELTA = 1 << 6,
    API_RETURN_EMBEDDINGS = 1 << 7,
    API_RETURN_Q_RAW = 1 << 8, /* shown after v (response.c) */
    API_RETURN_K_RAW = 1 << 9,
};

/* One output buffer per API_RETURN_* bit. */
#define API_OUTPUTS 10

/* Room for a sequence's JSON Pointer: "/sequences/" and a size_t. */
#define API_AT_MAX 40

struct api_request {
    const api_arrays *arrays; /* during decode: the arrays read from the text */
    /* Where the per-sequence fields (embeddings, tokens, positions, context,
     * context_tokens, mask) sit in the body: "" for POST /v1/attention,
     * "/sequences/3" for a batch's sequence 3; every path of theirs starts
     * with it. */
    char at[API_AT_MAX];
    /* 1: one sequence of a batch, whose work, scratch and response limits
     * hold for the whole batch (batch.c), not for the sequence alone. */
    int in_batch;
    attn_workspace *out_ws;   /* the caller's block for the outputs, or NULL: calloc */
    json_t *model;            /* a reference to the name (a string), or NULL for inline
                                 weights; its rule is the model store's, not checked here */
    size_t model_json_bytes;  /* its echo's length, as jansson writes it */
    json_t *tokens;           /* a reference to the request's array, or NULL */
    size_t tokens_json_bytes; /* their echo's length, as jansson writes it */

    float *embeddings; /* n × dm; with tokens_only NULL until bound */
    size_t n_tokens, d_model;
    /* 1: tokens without embeddings, for a named model: n_tokens is the
     * tokens' count, d_model 0 until bind takes the model's, and bind
     * makes the embeddings from the model's vocabulary. */
    int tokens_only;
    unsigned *positions; /* n, or NULL: 0 … n−1 */

    float *context; /* m × dc, or NULL: self-attention */
    size_t n_context, d_context;
    json_t *context_tokens; /* a reference to the request's array, or NULL */
    size_t context_tokens_json_bytes;

    int mask_given; /* 0: the default is applied at bind */
    attn_mask_kind mask_kind;
    unsigned char *mask_allowed; /* n × m (m = n without context), CUSTOM only */

    int scale_given; /* 0: the weights' scale, else 1/sqrt(dh), at bind */
    float scale;

    unsigned returns; /* API_RETURN_* bits */
    int base64;       /* "encoding": "base64": outputs as tensor objects */

    int select_given; /* 0: every head, in order */
    double *select;   /* the select_heads values as sent (integers), checked at bind */
    size_t n_select;

    /* Inline weights: the packed buffers (see attn_weights) and their view. */
    float *w_qkv, *b_qkv, *w_o, *b_o, *w_kv, *b_kv, *alibi;
    attn_weights inline_weights;

    /* Filled by api_request_bind, and the outputs by api_request_alloc_outputs. */
    int bound;
    double flops; /* attn_input_flops of the bound input */
    int outputs_made;
    size_t *heads;                   /* hs indices */
    float *out_buffers[API_OUTPUTS]; /* one per API_RETURN_* bit, NULL when not asked */
    attn_input input;
    attn_output output;
};

/*
 * The two halves of decoding a body, shared by request.c and batch.c.
 * api_request_decode_options reads the fields a batch shares (encoding,
 * return, scale, select_heads) from `obj`, at the top of the body.
 * api_request_decode_sequence reads the per-sequence fields from `obj`,
 * every path under req->at; `default_mask` (may be NULL), at the top of the
 * body, is the mask when `obj` has none (a batch's shared mask).
 */
int api_request_decode_options(api_request *req, const json_t *obj, attn_error *err);
int api_request_decode_sequence(api_request *req, const json_t *obj, const json_t *default_mask,
                                const api_limits *limits, attn_error *err);

/* jansson's error on a body (after api_arrays_fix_error) as the contract's:
 * 503, 422 non_finite_number at the number's path, or 400 invalid_json. */
int api_decode_parse_error(const char *body, size_t len, const json_error_t *jerr, attn_error *err);

/* dst = req->at + "/" + field: the path of one of the request's
 * per-sequence fields. */
void api_request_path(const api_request *req, const char *field, char *dst, size_t cap);

/* Bytes of the embeddings a tokens_only request will make from the
 * vocabulary (0 for any other): scratch memory the request holds besides
 * the engine's, counted against max_workspace_bytes with it. */
size_t api_request_made_bytes(const api_request *req);

/*
 * The embeddings of a tokens_only request checked by
 * api_request_bind_vocab (its tokens known, its positions in the table),
 * made from `vocab` once the limits have held: by bind for a single
 * request, by the batch after its own limits for a sequence (in_batch).
 * Points req->input.embeddings at them. 0, or -1 with a 503 (no memory) or
 * a 500 (a token no longer found, which bind rules out) in *err.
 */
int api_request_make_embeddings(api_request *req, const api_vocabulary *vocab, attn_error *err);

/* Reads the `weights` object of a request whose embeddings and context are
 * decoded into req->inline_weights and the buffers behind it (with a
 * context, K and V project its rows: w_kv). The limits on heads and d_head
 * are checked before the weights are allocated. */
int api_weights_decode(api_request *req, const json_t *weights, const api_limits *limits,
                       attn_error *err);

/* The rows of K and V: the context's, or the tokens'. */
static inline size_t api_request_kv_rows(const api_request *req) {
    return req->context ? req->n_context : req->n_tokens;
}

/*
 * The most bytes api_response_encode (response.c) writes for `req` bound to
 * `w` with hs heads selected (req->heads), the mask and scale it will have:
 * every byte as it will be written, each number counted at
 * API_FLOAT_TEXT_WIDEST characters, so the bound is exact when all of them
 * are that wide. 0, or -1 when it does not fit size_t.
 */
int api_response_bytes_max(const api_request *req, const attn_weights *w, size_t hs,
                           attn_mask_kind mask, float scale, size_t *bytes);

/*
 * A batch's answer (batch.c) from the pieces of a single one, for bound
 * requests: the fields its sequences share, "model":… to "heads":[…]
 * without braces, and one sequence's object {"n_tokens":…, outputs}. The
 * bounds count as api_response_bytes_max does. api_response_append_sequence
 * returns -1 with a 422 in *err (path "") when an output holds a number
 * JSON cannot carry, having appended part of the object.
 */
int api_response_shared_bytes_max(const api_request *req, size_t *bytes);
int api_response_sequence_bytes_max(const api_request *req, size_t *bytes);
int api_response_append_shared(api_buffer *b, const api_request *req);
int api_response_append_sequence(api_buffer *b, const api_request *req, attn_error *err);

/*
 * A batch's outputs in one block (batch.c): api_request_outputs_bytes is
 * the bytes a bound request's outputs take there; api_request_outputs_place
 * points them into `block` (zeroed, that many bytes, owned by `owner`, the
 * caller's attn_workspace), or callocs each when owner is NULL.
 */
int api_request_outputs_bytes(const api_request *req, size_t *total, attn_error *err);
int api_request_outputs_place(api_request *req, attn_workspace *owner, unsigned char *block,
                              attn_error *err);

/* The model field's type (a string), kept as the request's name to bind. */
int api_request_decode_model(api_request *req, const json_t *model, attn_error *err);

/* Checked size arithmetic: 0, or -1 when the result does not fit size_t. */
static inline int api_size_mul(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int api_size_add(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* The error of a body the text scan (arrays.h) refused for one of the
 * limits every endpoint shares, the nesting (max_json_depth) or a string's
 * length (max_string_bytes): 422 limit_exceeded at `where`, -1; for any
 * other violation 0, the caller's to name. request.c; also batch.c's and
 * oip.c's. */
int api_scan_limit_error(api_arrays_limit v, const char *where, const api_limits *limits,
                         attn_error *err);

#endif
