/*
 * call_internal.h — the inside of an api_call, and what a wire format
 * (a codec) gives it: shared by call.c and the codecs (codec_*.c). Not
 * for other folders.
 *
 * A call is a head record (`shared`: the model's name or the inline
 * weights, the options its sequences share, the heads once bound) and
 * `count` sequence records (api_request, request_internal.h), each with
 * its embeddings, positions, context, mask, labels and outputs. For
 * POST /v1/attention the head record is the one sequence itself.
 *
 * Ownership: the call owns the records (shared freed once, also when it is
 * seqs[0]), the arrays ins and outs, and the codec's state (`wire`, freed
 * by codec->free_wire).
 */
#ifndef API_CALL_INTERNAL_H
#define API_CALL_INTERNAL_H

#include "api/call.h"
#include "api/request_internal.h"

typedef struct api_codec {
    /* Fills c->shared, c->seqs, c->count from the body (c->seqs and the
     * arrays ins, outs allocated with api_call_reserve), and binds inline
     * weights with api_call_bind. 0, or -1 with *err. */
    int (*decode)(api_call *c, const api_call_body *body, const api_limits *limits,
                  attn_error *err);
    api_arrays_rank_fn array_rank;
    /* Rules of the wire format on the model, before the sequences are
     * bound; NULL: none. */
    int (*check_model)(const api_call *c, const api_model_ref *m, attn_error *err);
    /* The most bytes encode writes for the bound call; -1 past size_t. */
    int (*answer_bytes_max)(const api_call *c, size_t *bytes);
    char *(*encode)(const api_call *c, size_t *len, size_t *json_len, attn_error *err);
    /* Whether the answer carries binary tensors, and that answer read from
     * the outputs' block (api_answer_create); NULL: never. */
    int (*streams)(const api_call *c);
    api_answer *(*answer)(api_call *c, attn_workspace *block, attn_error *err);
    char *(*error_body)(const attn_error *err, size_t *len);
    /* Names sequence i in an engine error; NULL: the format has one. */
    void (*name_failure)(size_t i, attn_error *err);
    void (*free_wire)(void *wire);
    /* In the limits' messages: "this request needs …", the field the
     * answer's size is reported at, its unit, and what to ask for less
     * of. */
    const char *noun, *answer_path, *answer_unit, *answer_advice;
    /* 1: the model is named by the URL, not the body's "/model". */
    int model_in_url;
} api_codec;

struct api_call {
    const api_codec *codec;
    api_request *shared; /* never bound as a sequence, unless it is seqs[0] */
    api_request **seqs;
    size_t count;
    attn_input *ins; /* each sequence's input and output, in order */
    attn_output *outs;
    const attn_weights *weights; /* once bound */
    double flops;
    void *wire; /* the codec's own state, or NULL */
    /* A stack's engine view (call.c), once its outputs are made: each
     * listed layer's outputs of every sequence (L pointers to count
     * outputs, NULL for a layer not listed), the final outputs, the
     * hidden states (count × L, or NULL). */
    const attn_output **layer_outs;
    attn_output *layer_outs_all; /* L × count */
    attn_stack_output *finals;   /* count */
    const float **hidden;
    /* The arrays of a call of one sequence (most of them), in place of
     * three allocations: seqs, ins and outs point here then. */
    api_request *one_seq;
    attn_input one_in;
    attn_output one_out;
};

/* The codecs (codec_attention.c, codec_batch.c, codec_oip.c). */
extern const api_codec api_codec_attention;
extern const api_codec api_codec_batch;
extern const api_codec api_codec_oip;

/* Room for `count` sequences: c->seqs, c->ins, c->outs. 0, or -1 (503). */
int api_call_reserve(api_call *c, size_t count, attn_error *err);

#endif
