/*
 * response.c — the 200 body of POST /v1/attention.
 *
 * The body is written straight into one growable buffer: matrices can hold
 * millions of numbers, and a jansson tree would cost a node per number. Only
 * the echoed `model` and `tokens` go through jansson (json_dump_callback
 * into the same buffer), so that their escaping — "\u0000" included — is
 * jansson's.
 *
 * Field order: model, n_tokens, n_context (with a context), d_model,
 * n_heads, n_kv_heads, d_head, n_layers, mask, scale, tokens and context_tokens
 * (when given), heads, then the outputs asked for in the order of the
 * contract's table, q_raw and k_raw after v. Per-head outputs are hs ×
 * rows × cols for the selected heads, in the order of `heads`: rows are
 * the n tokens, or for k, v and k_raw the m keys (the context's rows with
 * a context), and scores and patterns are m wide; a masked score (−∞) is
 * null. A stack (API.md, "Layers") writes the per-head outputs, and
 * delta and embeddings when asked, per listed layer in "layers"
 * ({"layer", "scale", "heads", outputs}), then its own delta (E_L − E_0)
 * and embeddings (E_L).
 * Numbers use api_float_format: shortest float32 round-trip text.
 *
 * With "encoding": "base64" each output is instead one tensor object
 * (json_write.h) of shape [hs, n, width], or [n, d_model] for delta and
 * embeddings, encoded straight from the output buffer; a masked score is
 * −∞ there, its bit pattern.
 *
 * Finite inputs can still overflow float32 inside the computation (scores of
 * embeddings around 1e20); JSON cannot carry the NaN or infinity that
 * follows, so the first one met fails the whole answer with a 422 that
 * names the output and the cell. The base64 form could carry them but
 * keeps the same rule, so that both encodings answer alike: every output is
 * scanned before it is encoded.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/base64.h"
#include "api/buffer.h"
#include "api/float_format.h"
#include "api/json_write.h"
#include "api/request_internal.h"

/* Where the first number JSON cannot carry was met. */
typedef struct overflow_at {
    api_nonfinite at;
    const char *output;
    size_t head; /* SIZE_MAX for outputs that are not per head */
} overflow_at;

static void append_per_head(api_buffer *b, const float *m, const size_t *heads, size_t hs,
                            size_t rows, size_t cols, int null_masked, overflow_at *bad) {
    api_buffer_append(b, "[", 1);
    for (size_t i = 0; i < hs && !bad->at.found; i++) {
        if (i) api_buffer_append(b, ",", 1);
        bad->head = heads[i];
        api_write_matrix(b, m + i * rows * cols, rows, cols, cols, null_masked, &bad->at);
    }
    api_buffer_append(b, "]", 1);
}

/* Index of the first value of m[0..count) that is NaN or ±inf — other than
 * −∞ when `masked_ok` — or count. One branch-free pass in the common case. */
static size_t first_unsendable(const float *m, size_t count, int masked_ok) {
    const uint32_t masked = masked_ok ? 0xff800000u : 0; /* −∞; 0 is finite, never matches */
    uint32_t any = 0;
    size_t i;

    for (i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &m[i], sizeof u);
        any |= ((u & 0x7f800000u) == 0x7f800000u) & (u != masked);
    }
    if (!any) return count;
    for (i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &m[i], sizeof u);
        if ((u & 0x7f800000u) == 0x7f800000u && u != masked) break;
    }
    return i;
}

/* One output as a tensor object: [hs, rows, cols] per head, else [rows, cols]. */
static void append_tensor(api_buffer *b, const float *m, const size_t *heads, size_t hs,
                          int per_head, size_t rows, size_t cols, int masked_ok, overflow_at *bad) {
    size_t shape[3] = {hs, rows, cols}, count = rows * cols * (per_head ? hs : 1);
    size_t i = m ? first_unsendable(m, count, masked_ok) : count;

    if (i < count) {
        size_t per = rows * cols;
        bad->at = (api_nonfinite){1, i % per / cols, i % cols};
        bad->head = per_head ? heads[i / per] : SIZE_MAX;
        return;
    }
    api_write_tensor(b, m, per_head ? shape : shape + 1, per_head ? 3 : 2);
}

static const char *mask_word(attn_mask_kind kind) {
    switch (kind) {
    case ATTN_MASK_CAUSAL: return "causal";
    case ATTN_MASK_NONE: return "none";
    case ATTN_MASK_CUSTOM: return "custom";
    }
    return "custom";
}

/* ---- the size of the body, before it is written ------------------------------
 *
 * api_response_bytes_max follows api_response_encode field by field, so
 * that the two cannot drift apart: every byte is counted as it will be
 * written, but for the numbers, each counted at API_FLOAT_TEXT_WIDEST (a
 * null, 4, is shorter). The bound is therefore the body's length exactly
 * when every number is of the widest kind, and never below it.
 */

/* Characters of v in decimal. */
static size_t decimal_width(size_t v) {
    size_t n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

/* Sums into *total, refusing overflow: every term is added with this. */
static int size_add(size_t *total, size_t a) {
    return api_size_add(*total, a, total);
}

/* [r0,r1,…] of `rows` rows of `cols` widest numbers each: 2 brackets a row,
 * cols − 1 commas, rows − 1 commas, 2 brackets. */
static int matrix_bytes(size_t rows, size_t cols, size_t *bytes) {
    size_t row, all;
    if (api_size_mul(cols, API_FLOAT_TEXT_WIDEST + 1, &row) < 0 || api_size_add(row, 1, &row) < 0 ||
        (cols == 0 && api_size_add(row, 1, &row) < 0) || api_size_mul(rows, row + 1, &all) < 0 ||
        api_size_add(all, rows ? 1 : 2, &all) < 0)
        return -1;
    *bytes = all;
    return 0;
}

static size_t kv_heads_of(const attn_weights *w) {
    return w->n_kv_heads ? w->n_kv_heads : w->n_heads;
}

/* The fields a batch shares, as a single answer writes them:
 * "model":…,"d_model":…,"n_heads":…,"n_kv_heads":…,"d_head":…,"scale":…
 * and ,"heads":[…] (the opening brace not counted). */
static int shared_bytes(const api_request *req, const attn_weights *w, size_t hs, float scale,
                        size_t *total) {
    char num[API_FLOAT_TEXT_MAX];
    size_t t = strlen("\"model\":") + (req->model ? req->model_json_bytes : 4) +
               strlen(",\"d_model\":") + decimal_width(w->d_model) + strlen(",\"n_heads\":") +
               decimal_width(w->n_heads) + strlen(",\"n_kv_heads\":") +
               decimal_width(kv_heads_of(w)) + strlen(",\"d_head\":") + decimal_width(w->d_head) +
               strlen(",\"n_layers\":") + decimal_width(req->layers ? req->layers->n : 1) +
               strlen(",\"scale\":") + api_float_format(num, scale);
    /* ,"heads":[i,j,…] */
    if (size_add(&t, strlen(",\"heads\":[]") + (hs ? hs - 1 : 0)) < 0) return -1;
    for (size_t i = 0; i < hs; i++)
        if (size_add(&t, decimal_width(req->heads[i])) < 0) return -1;
    return size_add(total, t);
}

/* The fields of one sequence, each with its leading comma:
 * ,"n_tokens":…[,"n_context":…],"mask":"…"[,"tokens":…][,"context_tokens":…]
 * and the outputs. */
/* The outputs in `returns`, each with its leading comma, of hs heads of
 * w (delta and embeddings n × dm). */
static int outputs_bytes(const api_request *req, const attn_weights *w, size_t hs, unsigned returns,
                         size_t *total) {
    size_t n = req->n_tokens, m = api_request_kv_rows(req), dm = req->d_model, dh = w->d_head;
    size_t part;
    const struct {
        unsigned bit;
        const char *key;
        int per_head;
        size_t rows, cols;
    } outputs[] = {
        {API_RETURN_Q, ",\"q\":", 1, n, dh},
        {API_RETURN_K, ",\"k\":", 1, m, dh},
        {API_RETURN_V, ",\"v\":", 1, m, dh},
        {API_RETURN_Q_RAW, ",\"q_raw\":", 1, n, dh},
        {API_RETURN_K_RAW, ",\"k_raw\":", 1, m, dh},
        {API_RETURN_SCORES, ",\"scores\":", 1, n, m},
        {API_RETURN_PATTERNS, ",\"patterns\":", 1, n, m},
        {API_RETURN_HEAD_OUTPUTS, ",\"head_outputs\":", 1, n, dh},
        {API_RETURN_DELTA, ",\"delta\":", 0, n, dm},
        {API_RETURN_EMBEDDINGS, ",\"embeddings\":", 0, n, dm},
        {API_RETURN_ROLLOUT, ",\"rollout\":", 0, n, n},
        {API_RETURN_NORMED, ",\"normed\":", 0, n, dm},
    };
    if (w->norm.type == ATTN_NORM_NONE) returns &= ~(unsigned)API_RETURN_NORMED;

    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        size_t count, heads = outputs[i].per_head ? hs : 1;
        if (!(returns & outputs[i].bit)) continue;
        if (size_add(total, strlen(outputs[i].key)) < 0) return -1;
        if (req->base64) {
            /* {"dtype":"float32","shape":[hs,n,cols],"data":"…"} */
            part = strlen("{\"dtype\":\"float32\",\"shape\":[") + decimal_width(outputs[i].rows) +
                   1 + decimal_width(outputs[i].cols) + strlen("],\"data\":\"\"}");
            if (outputs[i].per_head) part += decimal_width(hs) + 1;
            if (size_add(total, part) < 0 || api_size_mul(heads, outputs[i].rows, &count) < 0 ||
                api_size_mul(count, outputs[i].cols, &count) < 0 ||
                api_size_mul(count, sizeof(float), &count) < 0 ||
                api_base64_encoded_length(count, &count) < 0 || size_add(total, count) < 0)
                return -1;
            continue;
        }
        if (matrix_bytes(outputs[i].rows, outputs[i].cols, &part) < 0) return -1;
        if (outputs[i].per_head) { /* [m0,m1,…] */
            if (api_size_mul(hs, part + 1, &part) < 0 || api_size_add(part, hs ? 1 : 2, &part) < 0)
                return -1;
        }
        if (size_add(total, part) < 0) return -1;
    }
    return 0;
}

/* The scale of layer l of a stack: the request's, else the layer's own. */
static float layer_scale(const api_request *req, size_t l) {
    return req->scale_given ? req->scale : attn_weights_scale(req->layers->weights[l]);
}

/* ,"layers":[{"layer":l,"scale":s,"heads":[…],outputs},…] of a stack. */
static int layers_bytes(const api_request *req, size_t hs, size_t *total) {
    const api_layers *ly = req->layers;
    char num[API_FLOAT_TEXT_MAX];
    if (size_add(total, strlen(",\"layers\":[]") + (ly->n_list ? ly->n_list - 1 : 0)) < 0)
        return -1;
    for (size_t i = 0; i < ly->n_list; i++) {
        size_t l = ly->list[i];
        size_t t = strlen("{\"layer\":") + decimal_width(l) + strlen(",\"scale\":") +
                   api_float_format(num, layer_scale(req, l)) + strlen(",\"heads\":[]}") +
                   (hs ? hs - 1 : 0);
        for (size_t k = 0; k < hs; k++)
            t += decimal_width(req->heads[k]);
        if (size_add(total, t) < 0 ||
            outputs_bytes(req, ly->weights[l], hs, req->returns & API_RETURN_LAYER, total) < 0)
            return -1;
    }
    return 0;
}

/* The fields of one sequence, each with its leading comma:
 * ,"n_tokens":…[,"n_context":…],"mask":"…"[,"tokens":…][,"context_tokens":…]
 * and the outputs (for a stack, "layers" and the stack's own). */
static int sequence_bytes(const api_request *req, const attn_weights *w, size_t hs,
                          attn_mask_kind mask, size_t *total) {
    size_t n = req->n_tokens, m = api_request_kv_rows(req);
    unsigned returns = req->returns;

    if (size_add(total, strlen(",\"n_tokens\":") + decimal_width(n) + strlen(",\"mask\":\"\"") +
                            strlen(mask_word(mask))) < 0)
        return -1;
    if (req->context && size_add(total, strlen(",\"n_context\":") + decimal_width(m)) < 0)
        return -1;
    if (req->tokens && (size_add(total, strlen(",\"tokens\":")) < 0 ||
                        size_add(total, req->tokens_json_bytes) < 0))
        return -1;
    if (req->context_tokens && (size_add(total, strlen(",\"context_tokens\":")) < 0 ||
                                size_add(total, req->context_tokens_json_bytes) < 0))
        return -1;
    if (api_request_is_stack(req)) {
        if (layers_bytes(req, hs, total) < 0) return -1;
        returns = api_request_stack_returns(req);
    }
    return outputs_bytes(req, w, hs, returns, total);
}

int api_response_bytes_max(const api_request *req, size_t *bytes) {
    const attn_input *in = &req->input;
    size_t total = strlen("{}");
    if (shared_bytes(req, in->weights, in->n_heads_out, in->scale, &total) < 0 ||
        sequence_bytes(req, in->weights, in->n_heads_out, in->mask.kind, &total) < 0)
        return -1;
    *bytes = total;
    return 0;
}

int api_response_sequence_bytes_max(const api_request *req, size_t *bytes) {
    /* {…}: the brace replaces the first field's comma */
    size_t total = strlen("}");
    if (sequence_bytes(req, req->input.weights, req->input.n_heads_out, req->input.mask.kind,
                       &total) < 0)
        return -1;
    *bytes = total;
    return 0;
}

int api_response_shared_bytes_max(const api_request *req, size_t *bytes) {
    size_t total = 0;
    if (shared_bytes(req, req->input.weights, req->input.n_heads_out, req->input.scale, &total) < 0)
        return -1;
    *bytes = total;
    return 0;
}

/* What a body holds of a request: a single answer (every field), the
 * fields a batch shares, or one sequence's. */
typedef enum { PART_ALL, PART_SHARED, PART_SEQUENCE } part_kind;

/* The outputs in `returns` of o (hs heads of w), each with its leading
 * comma; stops at the first number JSON cannot carry (*bad). */
static void write_outputs(api_buffer *b, const api_request *req, const attn_output *o,
                          const attn_weights *w, unsigned returns, overflow_at *bad) {
    size_t n = req->n_tokens, m = api_request_kv_rows(req), dm = req->d_model;
    size_t hs = req->input.n_heads_out, dh = w ? w->d_head : 0;
    const struct {
        unsigned bit;
        const char *key;
        const float *data;
        int per_head;
        size_t rows, cols;
    } outputs[] = {
        {API_RETURN_Q, ",\"q\":", o->q, 1, n, dh},
        {API_RETURN_K, ",\"k\":", o->k, 1, m, dh},
        {API_RETURN_V, ",\"v\":", o->v, 1, m, dh},
        {API_RETURN_Q_RAW, ",\"q_raw\":", o->q_raw, 1, n, dh},
        {API_RETURN_K_RAW, ",\"k_raw\":", o->k_raw, 1, m, dh},
        {API_RETURN_SCORES, ",\"scores\":", o->scores, 1, n, m},
        {API_RETURN_PATTERNS, ",\"patterns\":", o->patterns, 1, n, m},
        {API_RETURN_HEAD_OUTPUTS, ",\"head_outputs\":", o->head_outputs, 1, n, dh},
        {API_RETURN_DELTA, ",\"delta\":", o->delta, 0, n, dm},
        {API_RETURN_EMBEDDINGS, ",\"embeddings\":", o->embeddings, 0, n, dm},
        {API_RETURN_ROLLOUT, ",\"rollout\":", req->rollout, 0, n, n},
        {API_RETURN_NORMED, ",\"normed\":", o->normed, 0, n, dm},
    };
    if (!w || w->norm.type == ATTN_NORM_NONE) returns &= ~(unsigned)API_RETURN_NORMED;

    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0] && !bad->at.found; i++) {
        if (!(returns & outputs[i].bit)) continue;
        api_buffer_append_str(b, outputs[i].key);
        bad->output = outputs[i].key + 2; /* past ,\" */
        bad->head = SIZE_MAX;
        if (req->base64)
            append_tensor(b, outputs[i].data, req->heads, hs, outputs[i].per_head, outputs[i].rows,
                          outputs[i].cols, outputs[i].bit == API_RETURN_SCORES, bad);
        else if (outputs[i].per_head)
            append_per_head(b, outputs[i].data, req->heads, hs, outputs[i].rows, outputs[i].cols,
                            outputs[i].bit == API_RETURN_SCORES, bad);
        else
            api_write_matrix(b, outputs[i].data, n, outputs[i].cols, outputs[i].cols, 0, &bad->at);
    }
}

/* ,"layers":[{"layer":l,"scale":s,"heads":[…],outputs},…] of a stack,
 * in the order the request listed them. */
static void write_layers(api_buffer *b, const api_request *req, overflow_at *bad) {
    const api_layers *ly = req->layers;
    char num[API_FLOAT_TEXT_MAX];
    api_buffer_append_str(b, ",\"layers\":[");
    for (size_t i = 0; i < ly->n_list && !bad->at.found; i++) {
        size_t l = ly->list[i];
        api_buffer_append_str(b, i ? ",{\"layer\":" : "{\"layer\":");
        api_write_size(b, l);
        api_buffer_append_str(b, ",\"scale\":");
        api_buffer_append(b, num, api_float_format(num, layer_scale(req, l)));
        api_buffer_append_str(b, ",\"heads\":[");
        for (size_t k = 0; k < req->input.n_heads_out; k++) {
            if (k) api_buffer_append(b, ",", 1);
            api_write_size(b, req->heads[k]);
        }
        api_buffer_append_str(b, "]");
        write_outputs(b, req, ly->outs[l], ly->weights[l], req->returns & API_RETURN_LAYER, bad);
        api_buffer_append_str(b, "}");
    }
    api_buffer_append_str(b, "]");
}

/* Writes `part` of req's answer, the object's braces excluded; 0, or -1
 * with *bad where an output holds a number JSON cannot carry. */
static int write_fields(api_buffer *b, const api_request *req, part_kind part, overflow_at *bad) {
    const attn_weights *w = req->input.weights;
    size_t n = req->n_tokens, m = api_request_kv_rows(req), dm = req->d_model;
    size_t hs = req->input.n_heads_out;
    size_t dh = w ? w->d_head : 0, h = w ? w->n_heads : 0;
    int shared = part != PART_SEQUENCE, own = part != PART_SHARED;
    char num[API_FLOAT_TEXT_MAX];

    if (shared) {
        api_buffer_append_str(b, "\"model\":");
        if (req->model) {
            api_write_json(b, req->model);
        } else {
            api_buffer_append_str(b, "null");
        }
    }
    if (own) {
        api_buffer_append_str(b, shared ? ",\"n_tokens\":" : "\"n_tokens\":");
        api_write_size(b, n);
        if (req->context) {
            api_buffer_append_str(b, ",\"n_context\":");
            api_write_size(b, m);
        }
    }
    if (shared) {
        api_buffer_append_str(b, ",\"d_model\":");
        api_write_size(b, w ? w->d_model : dm);
        api_buffer_append_str(b, ",\"n_heads\":");
        api_write_size(b, h);
        api_buffer_append_str(b, ",\"n_kv_heads\":");
        api_write_size(b, w ? kv_heads_of(w) : 0);
        api_buffer_append_str(b, ",\"d_head\":");
        api_write_size(b, dh);
        api_buffer_append_str(b, ",\"n_layers\":");
        api_write_size(b, req->layers ? req->layers->n : 1);
    }
    if (own) {
        api_buffer_append_str(b, ",\"mask\":\"");
        api_buffer_append_str(b, mask_word(req->mask_kind));
        api_buffer_append_str(b, "\"");
    }
    if (shared) {
        api_buffer_append_str(b, ",\"scale\":");
        api_buffer_append(b, num, api_float_format(num, req->scale));
    }
    if (own && req->tokens) {
        api_buffer_append_str(b, ",\"tokens\":");
        api_write_json(b, req->tokens);
    }
    if (own && req->context_tokens) {
        api_buffer_append_str(b, ",\"context_tokens\":");
        api_write_json(b, req->context_tokens);
    }
    if (shared) {
        api_buffer_append_str(b, ",\"heads\":[");
        for (size_t i = 0; i < hs; i++) {
            if (i) api_buffer_append(b, ",", 1);
            api_write_size(b, req->heads[i]);
        }
        api_buffer_append_str(b, "]");
    }
    if (!own) return 0;

    unsigned returns = req->returns;
    if (api_request_is_stack(req)) {
        write_layers(b, req, bad);
        returns = api_request_stack_returns(req);
    }
    write_outputs(b, req, &req->output, w, returns, bad);
    return bad->at.found ? -1 : 0;
}

/* The 422 of an output that overflowed float32. */
static void overflow_error(const overflow_at *bad, attn_error *err) {
    int name_len = (int)strcspn(bad->output, "\"");
    if (bad->head != SIZE_MAX)
        attn_error_set(err, 422, "non_finite_number", "",
                       "the result overflows float32: %.*s of head %zu, row %zu, column "
                       "%zu is not finite; the embeddings or weights are too large",
                       name_len, bad->output, bad->head, bad->at.row, bad->at.col);
    else
        attn_error_set(err, 422, "non_finite_number", "",
                       "the result overflows float32: %.*s row %zu, column %zu is not "
                       "finite; the embeddings or weights are too large",
                       name_len, bad->output, bad->at.row, bad->at.col);
}

int api_response_append_shared(api_buffer *b, const api_request *req) {
    overflow_at bad = {{0, 0, 0}, NULL, SIZE_MAX};
    return write_fields(b, req, PART_SHARED, &bad);
}

int api_response_append_sequence(api_buffer *b, const api_request *req, attn_error *err) {
    overflow_at bad = {{0, 0, 0}, NULL, SIZE_MAX};
    api_buffer_append_str(b, "{");
    if (write_fields(b, req, PART_SEQUENCE, &bad) < 0) {
        overflow_error(&bad, err);
        return -1;
    }
    api_buffer_append_str(b, "}");
    return 0;
}

char *api_response_encode(const api_request *req, size_t *len, attn_error *err) {
    size_t n = req->n_tokens, dm = req->d_model;
    overflow_at bad = {{0, 0, 0}, NULL, SIZE_MAX};
    api_buffer b;

    /* a first guess of the size; the buffer grows as needed */
    api_buffer_init(&b, n < 4096 && dm < 4096 ? 256 + n * dm * 12 : 1 << 20);
    api_buffer_append_str(&b, "{");
    write_fields(&b, req, PART_ALL, &bad);
    api_buffer_append_str(&b, "}");
    char *text = api_buffer_finish(&b, len);
    if (!text) {
        attn_error_set(err, 503, "out_of_memory", "",
                       "memory for the response could not be had; retry later");
        return NULL;
    }
    if (bad.at.found) {
        free(text);
        overflow_error(&bad, err);
        return NULL;
    }
    return text;
}
