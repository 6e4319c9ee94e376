/*
 * request_internal.h — one sequence of a call (call_internal.h): its
 * record, shared by the files of this module that decode (request.c,
 * request_weights.c), bind (request_bind.c) and encode (response.c) it.
 * Not for other folders.
 *
 * A record holds one sequence's fields (embeddings, tokens, positions,
 * context, mask, labels, outputs); a call's head record holds what its
 * sequences share (the model's name or the inline weights, the options,
 * the heads once bound), copied into each sequence where a sequence reads
 * it. For POST /v1/attention the one record is both.
 *
 * Ownership: every pointer below is owned by the record and freed by
 * api_request_free, except input.weights when bound to a model (the model
 * store owns those), `heads` (the head record's heads_owned), and the
 * buffers an attn_output points to, which are the record's own
 * out_buffers or the caller's block.
 */
#ifndef API_REQUEST_INTERNAL_H
#define API_REQUEST_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "api/arrays.h"
#include "api/buffer.h"
#include "api/call.h"
#include "api/scan.h"

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
    API_RETURN_ROLLOUT = 1 << 10, /* a stack's own, n × n (API.md, "Layers") */
    API_RETURN_NORMED = 1 << 11,  /* N(E), n × dm; absent for a layer without a norm */
};

/* The outputs of one layer: every name but the stack's own. */
#define API_RETURN_LAYER (~(unsigned)API_RETURN_ROLLOUT)

typedef struct api_request api_request;

/*
 * A stack of layers (API.md, "Layers"). The call's head record owns the
 * stack: the inline weights.layers (one record each, holding that layer's
 * weights), the layers the request lists (`layers`), and once bound the
 * engine's view. Each sequence's record has a view of its own (the head's
 * itself for a call of one sequence), borrowing the head's weights, scales
 * and list: layer l's outputs of that sequence, when l is listed, are in
 * its outs_rec[l] (a record of its own, only its outputs used).
 */
typedef struct api_layers {
    size_t n;                     /* L ≥ 1 */
    api_request **recs;           /* L records with inline weights, or NULL: the model's */
    const attn_weights **weights; /* L, for attn_stack */
    float *scales;                /* L zeros (each layer's own scale), for attn_stack */
    size_t *list, n_list;         /* the layers reported, in order */
    int borrowed;                 /* a sequence's view: weights, scales, list are the head's */
    int computed;                 /* the head's: the call is computed as a stack */
    api_request **outs_rec;       /* L: the listed layers' outputs, else NULL */
    const attn_output **outs;     /* L: &outs_rec[l]->output, else NULL */
    attn_stack stack;             /* the head's; its hidden states are the call's */
} api_layers;

/* One output buffer per API_RETURN_* bit. */
#define API_OUTPUTS 12

/* Room for a sequence's JSON Pointer: "/sequences/" and a size_t. */
#define API_AT_MAX 40

struct api_request {
    const api_arrays *arrays; /* during decode: the arrays read from the text */
    /* Where the per-sequence fields (embeddings, tokens, positions, context,
     * context_tokens, mask) sit in the body: "" for POST /v1/attention,
     * "/sequences/3" for a batch's sequence 3; every path of theirs starts
     * with it. */
    char at[API_AT_MAX];
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

    unsigned returns;         /* API_RETURN_* bits */
    size_t rollout_at;        /* the index of "rollout" in `return`, when asked */
    const char *return_field; /* where the outputs are named: NULL is "/return" */
    float *rollout;           /* n × n, with API_RETURN_ROLLOUT (the head record's) */
    int base64;               /* "encoding": "base64": outputs as tensor objects */

    int layers_given;    /* the request field `layers` */
    double *layers_sent; /* as sent (integers), checked at bind */
    size_t n_layers_sent;
    api_layers *layers; /* the head record's, with weights.layers or `layers`, else NULL */

    /* The request field `hidden_states` (POST /v1/attention): n_hidden
     * matrices hidden_rows × hidden_cols as sent, each its own malloc,
     * layer l's input in place of E_l (checked against L at bind). */
    float **hidden;
    size_t n_hidden, hidden_rows, hidden_cols;

    int select_given; /* 0: every head, in order */
    double *select;   /* the select_heads values as sent (integers), checked at bind */
    size_t n_select;

    /* Inline weights: the packed buffers (see attn_weights) and their view. */
    float *w_qkv, *b_qkv, *w_o, *b_o, *w_kv, *b_kv, *alibi;
    float *rope_factors; /* longrope: short_factor, then long_factor (dims/2 each) */
    float *norms;        /* the norms' weights and biases, one block (request_norm.c) */
    float *sinks;        /* weights.sinks (request_sinks.c) */
    attn_weights inline_weights;

    /* Filled by api_request_bind (heads_owned by api_request_bind_heads, in
     * the head record), the outputs by api_request_outputs_place. */
    int bound;
    int outputs_made;
    size_t *heads_owned;             /* the head record's: n_heads indices */
    size_t n_heads;                  /* the head record's: heads selected (hs) */
    const size_t *heads;             /* hs indices: the head record's */
    long *token_rows;                /* tokens_only: each token's row of the vocabulary */
    float *out_buffers[API_OUTPUTS]; /* one per API_RETURN_* bit, NULL when not asked */
    attn_input input;
    attn_output output;
};

/*
 * Decoding (request.c). api_request_decode_options reads the fields a
 * call's sequences share (encoding, return, scale, select_heads) from
 * `obj`, at the top of the body. api_request_decode_sequence reads the
 * per-sequence fields from `obj`, every path under req->at; `default_mask`
 * (may be NULL), at the top of the body, is the mask when `obj` has none
 * (a batch's shared mask). api_request_decode_model keeps the model
 * field's name (its type checked: a string).
 */
int api_request_decode_options(api_request *req, const json_t *obj, attn_error *err);
int api_request_decode_sequence(api_request *req, const json_t *obj, const json_t *default_mask,
                                const api_limits *limits, attn_error *err);
int api_request_decode_model(api_request *req, const json_t *model, attn_error *err);

/* The top of a /v1 body names a model or carries weights, one of them:
 * the model's name kept in the head record (api_request_decode_model),
 * the weights' type checked (an object, read later by
 * api_weights_decode). 0, or -1 with *err. */
int api_request_decode_weight_source(api_request *head, const json_t *root, attn_error *err);

/* Reads the `weights` object into req->inline_weights and the buffers
 * behind it, against d_model and, with a context, its width d_context
 * (K and V then project its rows: w_kv). The limits on heads and d_head
 * are checked before the weights are allocated. */
int api_weights_decode(api_request *req, size_t d_model, size_t d_context, const json_t *weights,
                       const api_limits *limits, attn_error *err);

/* weights.rope.scaling of type "yarn" or "longrope" (request_rope.c), its
 * type already in rope->scaling and rope->dims known: the other fields,
 * checked, into *rope; longrope's lists into req->rope_factors, which
 * rope then points into. 0, or -1 with *err. */
int api_rope_scaling_decode_long(api_request *req, const json_t *scaling, attn_rope *rope,
                                 attn_error *err);

/* The weight set's norm, post_norm, qk_norm and temperature (request_norm.c)
 * into w, whose sizes and rope are read already; their arrays in req->norms.
 * 400 for a wrong type, an unknown field or word, a missing type, scope or
 * temperature field; 422 for a length, an eps ≤ 0, an offset other than 0 or
 * 1, a floor_scale ≤ 0, a temperature beside rope. */
int api_norms_decode(api_request *req, const json_t *weights, attn_weights *w, attn_error *err);

/* The weight set's sinks and chunk (request_sinks.c) into w, its n_heads
 * known: 0, or -1 with *err at /weights/sinks or /weights/chunk. */
int api_weights_decode_sinks(api_request *req, const json_t *weights, attn_weights *w,
                             attn_error *err);

/* A field of indices (select_heads, layers) at /<name>: an array of
 * integers, only type-checked (400 at /<name>/i), as doubles into *out
 * (malloc'd, the caller's even on failure) and *count. */
int api_decode_indices(const json_t *list, const char *name, const char *what, double **out,
                       size_t *count, attn_error *err);

/* The request field `layers` (type-checked; an empty list is a 422 at
 * /layers), and the inline weights.layers of POST /v1/attention: each a
 * weight set read by api_weights_decode into a record of its own, errors
 * named under /weights/layers/l, all sharing d_model, h, d_head and
 * n_kv_heads (422 at the first that differs). `arrays` is the body's
 * (its alias is set while a layer is read). */
int api_request_decode_layers_field(api_request *req, const json_t *layers, attn_error *err);
/* An error of a weight set's field, at /weights/..., moved to the place of
 * layer l's in a stack: /weights/layers/l/.... */
void api_error_in_layer(attn_error *err, size_t l);

/* weights = {"layers": [weight set, …]}, each set read against d_model and
 * d_context (0: none) into req->layers. */
int api_layers_decode_weights(api_request *req, api_arrays *arrays, const json_t *weights,
                              size_t d_model, size_t d_context, const api_limits *limits,
                              attn_error *err);

/* The request field `hidden_states` of POST /v1/attention: each matrix
 * read (400 at its place for its type, 422 past max_tokens rows or
 * max_d_model columns), all of one shape, that of hidden_states[0] (422
 * dimension_mismatch at /hidden_states/l); an empty list is a 422 at
 * /hidden_states. Decoded before the sequence, which then takes n and
 * d_model from it when embeddings are left out; api_request_check_hidden
 * then holds the matrices to the sequence's n × d_model. */
int api_request_decode_hidden(api_request *req, const json_t *hidden, const api_limits *limits,
                              attn_error *err);
int api_request_check_hidden(const api_request *req, attn_error *err);
/* At bind, once the embeddings fit the weights: the hidden states' width
 * against their d_model (422 at hidden_states/0). */
int api_request_check_hidden_width(const api_request *req, size_t d_model, attn_error *err);

/* Whether the answer takes the stack's form: L > 1, `layers` or
 * `hidden_states` sent. */
static inline int api_request_is_stack(const api_request *req) {
    return req->layers && (req->layers->n > 1 || req->layers_given || req->n_hidden);
}

/* Whether the call whose head this is is computed as a stack: a stack's
 * form, or a rollout (which one layer answered as before may ask for). */
static inline int api_request_computes_stack(const api_request *head) {
    return head->layers && head->layers->computed;
}

/* The outputs a stack's answer carries at its top: delta (E_L − E_0) and
 * embeddings (E_L), none with hidden states (no residual stream). */
static inline unsigned api_request_stack_returns(const api_request *req) {
    return (req->n_hidden ? 0 : req->returns & (API_RETURN_DELTA | API_RETURN_EMBEDDINGS)) |
           (req->returns & API_RETURN_ROLLOUT);
}

/* Refuses a key of `obj` not in `known` (n_known of them), at path + "/" +
 * key: 400 unknown_field, naming the object (`name`) and the fields
 * expected. */
int api_check_fields(const json_t *obj, const char *const *known, size_t n_known, const char *name,
                     const char *path, const char *expected, attn_error *err);

/* The rows of `rows` (at `at`) are `numbers` wide, their `width` held to
 * max_d_model: 0, or -1 with a 422 limit_exceeded. */
int api_check_width(const char *at, const char *rows, const char *width, size_t numbers,
                    const api_limits *limits, attn_error *err);

/* dst = req->at + "/" + field: the path of one of the request's
 * per-sequence fields. */
void api_request_path(const api_request *req, const char *field, char *dst, size_t cap);

/*
 * Binding (request_bind.c). api_request_bind_heads resolves the head
 * record's select_heads against the weights (every head when absent):
 * req->heads_owned, 422 out_of_range at /select_heads/i. api_request_bind
 * checks one sequence against the weights — d_model, the identity rule
 * for a missing w_o, its context, its tokens in `vocab` when it sent
 * tokens alone — takes the heads of `head`, applies the default mask and
 * the scale, and fills req->input. `weights` is not copied and must
 * outlive the record.
 */
int api_request_bind_heads(api_request *head, const attn_weights *weights, attn_error *err);
int api_request_bind(api_request *req, const attn_weights *weights, attn_mask_kind default_mask,
                     const api_vocabulary *vocab, const api_request *head, const api_limits *limits,
                     attn_error *err);

/* The stack of the head record, once its sequences are bound against
 * layer 0 (the model's or the inline weights'), for the model's layers,
 * the inline weights.layers, `layers`, hidden states or a rollout: the
 * sequences against every layer, their hidden states (in all or none, L
 * each), the list of layers reported (422 at /layers/i), each sequence's
 * view and the engine's stack. 0 when none of these is asked for. */
int api_request_bind_layers(api_request *head, const api_model_ref *m, api_request *const *seqs,
                            size_t count, attn_error *err);

/* Bytes of the embeddings a tokens_only record will make from the
 * vocabulary (0 for any other): scratch memory besides the engine's,
 * counted against max_workspace_bytes with it. */
size_t api_request_made_bytes(const api_request *req);

/* The embeddings of a bound tokens_only record, from the vocabulary rows
 * bind found, once the limits have held; req->input.embeddings points at
 * them. 0, or -1 with a 503 in *err. Nothing to do for other records. */
int api_request_make_embeddings(api_request *req, const api_vocabulary *vocab, attn_error *err);

/* The bytes a bound record's outputs take in one block (a stack's
 * sequence's: its listed layers' too), and their place: in `block`
 * (zeroed, that many bytes, owned by `owner`, the caller's
 * attn_workspace), or one calloc each when owner is NULL. */
int api_request_outputs_bytes(const api_request *req, size_t *total, attn_error *err);
int api_request_outputs_place(api_request *req, attn_workspace *owner, unsigned char *block,
                              attn_error *err);

void api_request_free(api_request *req);

/* The rows of K and V: the context's, or the tokens'. */
static inline size_t api_request_kv_rows(const api_request *req) {
    return req->context ? req->n_context : req->n_tokens;
}

/*
 * /v1's JSON answer (response.c), from bound records. api_response_encode
 * is a single answer; a batch's is the fields its sequences share
 * ("model":… to "heads":[…], without braces) and one object per sequence
 * {"n_tokens":…, outputs}. The bounds count every byte as it will be
 * written, each number at API_FLOAT_TEXT_WIDEST characters, so they are
 * exact when all numbers are that wide; -1 past size_t. Appending a
 * sequence returns -1 with a 422 in *err (path "") when an output holds a
 * number JSON cannot carry, having appended part of the object.
 */
char *api_response_encode(const api_request *req, size_t *len, attn_error *err);
int api_response_bytes_max(const api_request *req, size_t *bytes);
int api_response_shared_bytes_max(const api_request *req, size_t *bytes);
int api_response_sequence_bytes_max(const api_request *req, size_t *bytes);
int api_response_append_shared(api_buffer *b, const api_request *req);
int api_response_append_sequence(api_buffer *b, const api_request *req, attn_error *err);

#endif
