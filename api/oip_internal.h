/*
 * oip_internal.h — the Open Inference Protocol's own state of a call (its
 * padding, the outputs asked for), shared by the decoder (codec_oip.c) and
 * the encoder (codec_oip_encode.c). Not for other folders.
 *
 * Ownership: tok, ntok, ctok, nctx, seq and id are the state's, freed by
 * api_oip_request_free (the call's free_wire, or an answer that took the
 * state). The fields marked "at encode" are a view of the bound call filled
 * in just before encoding (api_oip_view), not owned.
 */
#ifndef API_OIP_INTERNAL_H
#define API_OIP_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "api/call_internal.h"
#include "api/oip.h"

/* The outputs, in the order the model metadata lists them. */
enum {
    OIP_PATTERNS,
    OIP_EMBEDDINGS,
    OIP_DELTA,
    OIP_Q,
    OIP_K,
    OIP_V,
    OIP_SCORES,
    OIP_HEAD_OUTPUTS,
    OIP_ROLLOUT, /* a stack's own (API.md, "Layers"), [B, n, n] */
    OIP_OUTPUTS
};

/* Whether output `kind` is per head: in a stack, per listed layer too. */
static inline int api_oip_per_head(int kind) {
    return kind != OIP_EMBEDDINGS && kind != OIP_DELTA && kind != OIP_ROLLOUT;
}

extern const char *const api_oip_output_names[OIP_OUTPUTS];

typedef struct api_oip_request {
    json_t *id; /* the request's "id" (a string), or NULL */

    int batch_axis; /* 0: embeddings were [n, d_model], outputs lose the B axis */
    size_t B, n, m; /* rows, padded tokens, padded context rows (m = n without context) */
    size_t dm, dc;  /* the embeddings' and the context's widths */

    /* Per row b: its real tokens' indices tok[b·n …] (ntok[b] of them), its
     * real context rows' ctok[b·m …] (nctx[b]; = the tokens without context). */
    size_t *tok, *ntok, *ctok, *nctx;
    int has_context;
    /* Where the inputs the model decides on are ("inputs" indices, -1:
     * absent), and whether parameters asked for the causal mask. */
    size_t embeddings_at;
    long context_at, context_mask_at;
    int causal_asked;

    size_t count; /* rows with a real token: the call's sequences */
    size_t *seq;  /* count: the row of each sequence */

    size_t n_out;              /* outputs asked for, in order */
    int out_kind[OIP_OUTPUTS]; /* OIP_* */
    int out_binary[OIP_OUTPUTS];

    /* at encode */
    const json_t *model;                    /* the model's name (a string), as the call holds it */
    size_t model_json_bytes, id_json_bytes; /* their JSON text's lengths */
    size_t dh, hs;
    const attn_output *outs;
    /* a stack's: the listed layers (the layer axis, L' of them; 0: no
     * axis), each layer's outputs of every sequence (layer l's of sequence
     * s at [l · count + s]), and the final outputs (the rollout) */
    size_t n_listed, n_layers; /* L', and L: layer_outs holds L × count */
    const size_t *listed;
    const attn_output *layer_outs;
    const attn_stack_output *finals;
} api_oip_request;

/* Frees the state (NULL: nothing). */
void api_oip_request_free(api_oip_request *r);

/* The state of call `c` with the bound call's view filled in. */
void api_oip_view(const api_call *c, api_oip_request *view);

/* The answer (codec_oip_encode.c), from a view: as api_call_encode. */
char *api_oip_encode(const api_oip_request *r, size_t *len, size_t *json_len, attn_error *err);

/* The most bytes the answer takes: exact, but for the numbers of outputs
 * sent as JSON, counted at their widest; SIZE_MAX past size_t. */
size_t api_oip_answer_bytes_max(const api_oip_request *r);

/* The answer of a view as it is read (api_answer_create), taking `wire`
 * (the call's state the view is of) and `block` (where the view's outputs
 * are), even on failure. NULL with a 503 in *err. */
api_answer *api_oip_answer_create(const api_oip_request *view, api_oip_request *wire,
                                  attn_workspace *block, attn_error *err);

/* Elements of output `kind` for one sequence of r tokens and mr keys:
 * every listed layer's (api_oip_compact_count), or one layer's. */
size_t api_oip_compact_count(const api_oip_request *r, int kind, size_t rt, size_t mr);
size_t api_oip_layer_count(const api_oip_request *r, int kind, size_t rt, size_t mr);

/* Elements of the padded output `kind` (the whole tensor). */
size_t api_oip_padded_count(const api_oip_request *r, int kind);

#endif
