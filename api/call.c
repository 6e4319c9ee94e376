/*
 * call.c — the container every computation goes through (call.h): the
 * wire format's codec decodes into it and encodes from it; binding, the
 * limits, the outputs and the engine's view are here, once for all.
 *
 * Binding (api_call_bind), for inline weights at decode and for a named
 * model after it, in this order: the wire format's own rules on the model
 * (codec->check_model), the weights against the limits, the heads the
 * call selects, each sequence against the weights (request_bind.c), then
 * the limits over the whole call — work (attn_batch_flops), scratch
 * (attn_batch_workspace_need and the embeddings to be made from a
 * vocabulary) and the answer's size (codec->answer_bytes_max) — and only
 * then the embeddings of sequences that sent tokens alone. Nothing the
 * limits bound is allocated before they hold.
 */
#include "api/call_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_path.h"

static const api_codec *const codecs[API_CALL_KINDS] = {
    [API_CALL_ATTENTION] = &api_codec_attention,
    [API_CALL_BATCH] = &api_codec_batch,
    [API_CALL_OIP] = &api_codec_oip,
};

int api_call_reserve(api_call *c, size_t count, attn_error *err) {
    size_t n = count ? count : 1;
    if (n == 1) {
        c->seqs = &c->one_seq;
        c->ins = &c->one_in;
        c->outs = &c->one_out;
        return 0;
    }
    c->seqs = calloc(n, sizeof *c->seqs);
    c->ins = calloc(n, sizeof *c->ins);
    c->outs = calloc(n, sizeof *c->outs);
    if (!c->seqs || !c->ins || !c->outs)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    return 0;
}

int api_call_decode(api_call_kind kind, const api_call_body *body, const api_limits *limits,
                    api_call **out, attn_error *err) {
    *out = NULL;
    if ((unsigned)kind >= API_CALL_KINDS)
        return attn_error_set(err, 500, "internal_error", "", "no such wire format");
    api_call *c = calloc(1, sizeof *c);
    if (!c) return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    c->codec = codecs[kind];
    if (c->codec->decode(c, body, limits, err) < 0) {
        api_call_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int api_call_decode_json(api_call_kind kind, const char *body, size_t len, const api_limits *limits,
                         api_call **out, attn_error *err) {
    api_call_body b = {.data = body, .len = len, .header_len = -1};
    return api_call_decode(kind, &b, limits, out, err);
}

int api_call_array_rank(api_call_kind kind, const char *path) {
    return (unsigned)kind < API_CALL_KINDS ? codecs[kind]->array_rank(path) : 0;
}

const char *api_call_model(const api_call *c, size_t *len) {
    const json_t *m = c->shared ? c->shared->model : NULL;
    if (len) *len = m ? json_string_length(m) : 0;
    return m ? json_string_value(m) : NULL;
}

const char *api_call_model_path(const api_call *c) {
    return c->codec->model_in_url ? NULL : "/model";
}

/* The weights against the limits on heads and d_head. */
static int weights_limits(const api_call *c, const attn_weights *w, const api_limits *limits,
                          attn_error *err) {
    const char *where = c->shared->model ? "/model" : "/weights/heads";
    if (limits == NULL) return 0;
    if (w->n_heads > limits->max_heads)
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the weights have %zu heads, over the limit max_heads = %zu",
                              w->n_heads, limits->max_heads);
    if (w->d_head > limits->max_d_model)
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the weights have d_head = %zu, over the limit max_d_model = %zu",
                              w->d_head, limits->max_d_model);
    return 0;
}

/* The limits over the whole bound call. */
static int call_limits(api_call *c, const api_limits *limits, attn_error *err) {
    const api_codec *k = c->codec;
    if (c->flops > limits->max_flops)
        return attn_error_set(err, 422, "limit_exceeded", "",
                              "this %s needs %.4g floating-point operations, over the limit "
                              "max_flops = %.4g",
                              k->noun, c->flops, limits->max_flops);
    /* Few heads of a tiny d_model can still make a huge n × 3hd scratch:
     * the work limit alone does not bound memory. */
    const attn_stack *stack = api_call_stack(c);
    size_t scratch = stack ? attn_stack_workspace_need(c->ins, c->count, stack)
                           : attn_batch_workspace_need(c->ins, c->count);
    for (size_t i = 0; i < c->count; i++)
        if (__builtin_add_overflow(scratch, api_request_made_bytes(c->seqs[i]), &scratch))
            scratch = SIZE_MAX;
    if (scratch > limits->max_workspace_bytes)
        return attn_error_set(err, 422, "limit_exceeded", "",
                              "this %s needs %zu bytes of scratch memory, over the limit "
                              "max_workspace_bytes = %zu",
                              k->noun, scratch, limits->max_workspace_bytes);
    size_t total;
    if (k->answer_bytes_max(c, &total) < 0) total = SIZE_MAX;
    if (total > limits->max_response_bytes)
        return attn_error_set(err, 422, "limit_exceeded", k->answer_path,
                              "the outputs asked for need up to %zu %s, over the limit "
                              "max_response_bytes = %zu; ask for fewer %s",
                              total, k->answer_unit, limits->max_response_bytes, k->answer_advice);
    return 0;
}

int api_call_bind(api_call *c, const api_model_ref *m, const api_limits *limits, attn_error *err) {
    const attn_weights *w = m->weights;
    if (c->weights)
        return attn_error_set(err, 500, "internal_error", "", "the request is already bound");
    if (c->codec->check_model && c->codec->check_model(c, m, err) < 0) return -1;
    if (weights_limits(c, w, limits, err) < 0) return -1;
    if (api_request_bind_heads(c->shared, w, err) < 0) return -1;
    for (size_t i = 0; i < c->count; i++) {
        api_request *r = c->seqs[i];
        if (api_request_bind(r, w, m->mask, m->vocab, c->shared, limits, err) < 0) return -1;
        c->ins[i] = r->input;
    }
    /* A stack: its layers, list and each sequence's view. */
    if (api_request_bind_layers(c->shared, m, c->seqs, c->count, err) < 0) return -1;
    c->weights = w;
    const attn_stack *stack = api_call_stack(c);
    c->flops =
        stack ? attn_stack_flops(c->ins, c->count, stack) : attn_batch_flops(c->ins, c->count);
    if (limits && call_limits(c, limits, err) < 0) return -1;
    /* Sequences of tokens get their embeddings once the limits hold. */
    for (size_t i = 0; i < c->count; i++) {
        if (api_request_make_embeddings(c->seqs[i], m->vocab, err) < 0) return -1;
        c->ins[i].embeddings = c->seqs[i]->input.embeddings;
    }
    return 0;
}

double api_call_cost(const api_call *c) {
    return c->flops;
}

/* The engine's view of a stack's outputs and hidden states, from the
 * sequences' records (api_call's layer_outs, finals, hidden). */
static int stack_view(api_call *c, attn_error *err) {
    const attn_stack *st = api_call_stack(c);
    if (!st || c->count == 0) return 0; /* /v2 rows all padding: nothing to compute */
    const size_t L = st->n_layers, n = c->count;
    const int hidden = c->seqs[0]->n_hidden != 0; /* in all or none (bind) */
    c->layer_outs = calloc(L, sizeof *c->layer_outs);
    c->layer_outs_all = calloc(L * n, sizeof *c->layer_outs_all);
    c->finals = calloc(n, sizeof *c->finals);
    c->hidden = hidden ? calloc(n * L, sizeof *c->hidden) : NULL;
    if (!c->layer_outs || !c->layer_outs_all || !c->finals || (hidden && !c->hidden))
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    for (size_t i = 0; i < n; i++) {
        const api_request *r = c->seqs[i];
        const api_layers *ly = r->layers;
        for (size_t l = 0; l < L; l++) {
            if (!ly->outs[l]) continue;
            c->layer_outs_all[l * n + i] = *ly->outs[l];
            c->layer_outs[l] = &c->layer_outs_all[l * n];
        }
        /* one layer answered as before writes its own delta and embeddings */
        c->finals[i] = (attn_stack_output){NULL, NULL, r->rollout};
        if (api_request_is_stack(r))
            c->finals[i].delta = r->output.delta, c->finals[i].embeddings = r->output.embeddings;
        for (size_t l = 0; hidden && l < L; l++)
            c->hidden[i * L + l] = r->hidden[l];
    }
    c->shared->layers->stack.hidden_states = c->hidden;
    return 0;
}

/* Sequences' outputs start at multiples of this, as the outputs within one. */
#define SEQ_ALIGN 64

int api_call_alloc_outputs(api_call *c, attn_workspace *block, attn_error *err) {
    size_t total = 0, each;
    unsigned char *at = NULL;

    if (!c->weights)
        return attn_error_set(err, 500, "internal_error", "", "outputs are made for a bound call");
    if (block) {
        for (size_t i = 0; i < c->count; i++)
            if (api_request_outputs_bytes(c->seqs[i], &each, err) < 0 ||
                api_size_add(total, (each + SEQ_ALIGN - 1) / SEQ_ALIGN * SEQ_ALIGN, &total) < 0)
                return attn_error_set(err, 503, "out_of_memory", "", "the outputs are too large");
        if (total > 0) {
            /* The caller's block, kept between calls: its pages are
             * mapped already. Zeroed, as calloc's would be, so that
             * nothing of an earlier call can show. */
            at = attn_workspace_reserve(block, total);
            if (at == NULL)
                return attn_error_set(err, 503, "out_of_memory", "", "no memory for the outputs");
            api_advise_huge_pages(at, total);
            memset(at, 0, total);
        }
    }
    for (size_t i = 0; i < c->count; i++) {
        if (api_request_outputs_place(c->seqs[i], at ? block : NULL, at, err) < 0) return -1;
        if (at) {
            if (api_request_outputs_bytes(c->seqs[i], &each, err) < 0) return -1;
            at += (each + SEQ_ALIGN - 1) / SEQ_ALIGN * SEQ_ALIGN;
        }
        c->outs[i] = c->seqs[i]->output;
    }
    return stack_view(c, err);
}

/* A one-layer weight set answered as before (no `layers`, no hidden
 * states) is no stack: attn_compute_batch writes the outputs the answer
 * reads, which a one-layer stack would leave in its layer's. Unless it
 * asks for a rollout: then the one layer's outputs are the answer's own. */
const attn_stack *api_call_stack(const api_call *c) {
    return c->shared && api_request_computes_stack(c->shared) && c->shared->layers->weights
               ? &c->shared->layers->stack
               : NULL;
}

int api_call_compute(const api_call *c, attn_workspace *ws, const attn_runner *runner,
                     attn_error *err, size_t *failed) {
    const attn_stack *stack = api_call_stack(c);
    if (!stack) return attn_compute_batch(c->outs, ws, c->ins, c->count, runner, err, failed);
    size_t layer;
    int rc = attn_compute_stack(c->layer_outs, c->finals, ws, c->ins, c->count, stack, runner, err,
                                failed, &layer);
    if (rc != 0 && err->code == ATTN_ERR_NONFINITE && stack->n_layers > 1) {
        char message[sizeof err->message];
        snprintf(message, sizeof message, "layer %zu: %.*s", layer, (int)sizeof message - 32,
                 err->message);
        memcpy(err->message, message, sizeof message);
    }
    return rc;
}

size_t api_call_count(const api_call *c) {
    return c->count;
}

const attn_input *api_call_inputs(const api_call *c) {
    return c->ins;
}

const attn_output *api_call_outputs(const api_call *c) {
    return c->outs;
}

void api_call_name_failure(const api_call *c, size_t i, attn_error *err) {
    if (c->codec->name_failure && i < c->count) c->codec->name_failure(i, err);
}

char *api_call_encode(const api_call *c, size_t *len, size_t *json_len, attn_error *err) {
    size_t json = 0;
    if (!c->weights) {
        attn_error_set(err, 500, "internal_error", "", "a call is encoded once bound");
        return NULL;
    }
    char *text = c->codec->encode(c, len, &json, err);
    if (json_len) *json_len = json;
    return text;
}

int api_call_streams(const api_call *c) {
    return c->codec->streams && c->codec->streams(c);
}

api_answer *api_answer_create(api_call *c, attn_workspace *block, attn_error *err) {
    size_t bytes;
    int own = c->weights && api_call_streams(c);
    /* The outputs must be the block's: the answer outlives the call. */
    for (size_t i = 0; own && i < c->count; i++)
        own = api_request_outputs_bytes(c->seqs[i], &bytes, err) == 0 &&
              (bytes == 0 || c->seqs[i]->out_ws == block);
    if (!own) {
        attn_workspace_destroy(block);
        attn_error_set(err, 500, "internal_error", "",
                       "an answer is read from the outputs' block of a computed call");
        return NULL;
    }
    return c->codec->answer(c, block, err);
}

const char *api_call_content_type(const api_call *c, size_t json_len) {
    (void)c;
    /* Triton's answer: octet-stream when binary data follows the JSON. */
    return json_len ? "application/octet-stream" : "application/json";
}

char *api_call_error_body(api_call_kind kind, const attn_error *err, size_t *len) {
    const api_codec *k = (unsigned)kind < API_CALL_KINDS ? codecs[kind] : &api_codec_attention;
    return k->error_body(err, len);
}

void api_call_free(api_call *c) {
    if (!c) return;
    for (size_t i = 0; i < c->count; i++)
        if (c->seqs[i] != c->shared) api_request_free(c->seqs[i]);
    api_request_free(c->shared);
    if (c->seqs != &c->one_seq) {
        free(c->seqs);
        free(c->ins);
        free(c->outs);
    }
    if (c->wire) c->codec->free_wire(c->wire);
    free(c->layer_outs);
    free(c->layer_outs_all);
    free(c->finals);
    free(c->hidden);
    free(c);
}
