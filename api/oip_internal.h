/*
 * oip_internal.h — the inside of an api_oip_request, shared by the
 * decoder (oip.c) and the encoder (oip_encode.c). Not for other folders.
 *
 * Ownership: every pointer is the request's, freed by api_oip_free; the
 * model's weights and name are the caller's (the store's), alive until the
 * answer is encoded.
 */
#ifndef API_OIP_INTERNAL_H
#define API_OIP_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

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
    OIP_OUTPUTS
};

extern const char *const api_oip_output_names[OIP_OUTPUTS];

struct api_oip_request {
    api_oip_model model;
    json_t *id; /* the request's "id" (a string), or NULL */

    int batch_axis;    /* 0: embeddings were [n, d_model], outputs lose the B axis */
    size_t B, n, m;    /* rows, padded tokens, padded context rows (m = n without context) */
    size_t dm, dh, hs; /* d_model, d_head, heads listed */
    size_t *heads;     /* hs */

    /* Per row b: its real tokens' indices tok[b·n …] (ntok[b] of them), its
     * real context rows' ctok[b·m …] (nctx[b]; = the tokens without context). */
    size_t *tok, *ntok, *ctok, *nctx;
    int has_context;

    size_t count;   /* rows with a real token: the engine's sequences */
    size_t *seq;    /* count: the row of each sequence */
    float *cemb;    /* the sequences' embeddings, stacked */
    unsigned *cpos; /* their positions, or NULL: each sequence's 0 … r−1 */
    float *cctx;    /* their context rows, stacked, or NULL */
    attn_input *ins;
    attn_output *outs;
    float *block; /* every sequence's outputs */

    size_t n_out;              /* outputs asked for, in order */
    int out_kind[OIP_OUTPUTS]; /* OIP_* */
    int out_binary[OIP_OUTPUTS];
    double flops;
};

/* Elements of output `kind` for one sequence of r tokens and mr keys. */
size_t api_oip_compact_count(const api_oip_request *r, int kind, size_t rt, size_t mr);

/* Elements of the padded output `kind` (the whole tensor). */
size_t api_oip_padded_count(const api_oip_request *r, int kind);

#endif
