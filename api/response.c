/*
 * response.c — the 200 body of POST /v1/attention.
 *
 * The body is written straight into one growable buffer: matrices can hold
 * millions of numbers, and a jansson tree would cost a node per number. Only
 * the echoed `tokens` go through jansson (json_dump_callback into the same
 * buffer), so that their escaping — "\u0000" included — is jansson's.
 *
 * Field order: model, n_tokens, d_model, n_heads, d_head, mask, scale,
 * tokens (when given), heads, then the outputs asked for in the order of
 * the contract's table. Per-head outputs are hs × rows × cols for the
 * selected heads, in the order of `heads`; a masked score (−∞) is null.
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
#include "api/response.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
                            size_t rows, size_t cols, int null_masked, overflow_at *bad)
{
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
static size_t first_unsendable(const float *m, size_t count, int masked_ok)
{
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
                          int per_head, size_t rows, size_t cols, int masked_ok,
                          overflow_at *bad)
{
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

static const char *mask_word(attn_mask_kind kind)
{
    switch (kind) {
    case ATTN_MASK_CAUSAL: return "causal";
    case ATTN_MASK_NONE: return "none";
    case ATTN_MASK_CUSTOM: return "custom";
    }
    return "custom";
}

char *api_response_encode(const api_request *req, size_t *len, api_error *err)
{
    const attn_weights *w = req->input.weights;
    const attn_output *o = &req->output;
    size_t n = req->n_tokens, dm = req->d_model, hs = req->input.n_heads_out;
    size_t dh = w ? w->d_head : 0, h = w ? w->n_heads : 0;
    char num[API_FLOAT_TEXT_MAX];
    overflow_at bad = {{0, 0, 0}, NULL, SIZE_MAX};
    api_buffer b;
    const struct {
        unsigned bit;
        const char *key;
        const float *data;
        int per_head;
        size_t cols;
    } outputs[] = {
        {API_RETURN_Q, ",\"q\":", o->q, 1, dh},
        {API_RETURN_K, ",\"k\":", o->k, 1, dh},
        {API_RETURN_V, ",\"v\":", o->v, 1, dh},
        {API_RETURN_SCORES, ",\"scores\":", o->scores, 1, n},
        {API_RETURN_PATTERNS, ",\"patterns\":", o->patterns, 1, n},
        {API_RETURN_HEAD_OUTPUTS, ",\"head_outputs\":", o->head_outputs, 1, dh},
        {API_RETURN_DELTA, ",\"delta\":", o->delta, 0, dm},
        {API_RETURN_EMBEDDINGS, ",\"embeddings\":", o->embeddings, 0, dm},
    };

    /* a first guess of the size; the buffer grows as needed */
    api_buffer_init(&b, n < 4096 && dm < 4096 ? 256 + n * dm * 12 : 1 << 20);
    api_buffer_append_str(&b, "{\"model\":");
    if (req->model) {
        /* a model name is [A-Za-z0-9._-]{1,64}: nothing to escape */
        api_buffer_append_str(&b, "\"");
        api_buffer_append_str(&b, req->model);
        api_buffer_append_str(&b, "\"");
    } else {
        api_buffer_append_str(&b, "null");
    }
    api_buffer_append_str(&b, ",\"n_tokens\":");
    api_write_size(&b, n);
    api_buffer_append_str(&b, ",\"d_model\":");
    api_write_size(&b, dm);
    api_buffer_append_str(&b, ",\"n_heads\":");
    api_write_size(&b, h);
    api_buffer_append_str(&b, ",\"d_head\":");
    api_write_size(&b, dh);
    api_buffer_append_str(&b, ",\"mask\":\"");
    api_buffer_append_str(&b, mask_word(req->mask_kind));
    api_buffer_append_str(&b, "\",\"scale\":");
    api_buffer_append(&b, num, api_float_format(num, req->scale));
    if (req->tokens) {
        api_buffer_append_str(&b, ",\"tokens\":");
        api_write_json(&b, req->tokens);
    }
    api_buffer_append_str(&b, ",\"heads\":[");
    for (size_t i = 0; i < hs; i++) {
        if (i) api_buffer_append(&b, ",", 1);
        api_write_size(&b, req->heads[i]);
    }
    api_buffer_append_str(&b, "]");

    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0] && !bad.at.found; i++) {
        if (!(req->returns & outputs[i].bit)) continue;
        api_buffer_append_str(&b, outputs[i].key);
        bad.output = outputs[i].key + 2; /* past ,\" */
        bad.head = SIZE_MAX;
        if (req->base64)
            append_tensor(&b, outputs[i].data, req->heads, hs, outputs[i].per_head, n,
                          outputs[i].cols, outputs[i].bit == API_RETURN_SCORES, &bad);
        else if (outputs[i].per_head)
            append_per_head(&b, outputs[i].data, req->heads, hs, n, outputs[i].cols,
                            outputs[i].bit == API_RETURN_SCORES, &bad);
        else
            api_write_matrix(&b, outputs[i].data, n, outputs[i].cols, outputs[i].cols, 0,
                             &bad.at);
    }
    api_buffer_append_str(&b, "}");
    char *text = api_buffer_finish(&b, len);
    if (!text) {
        api_error_set(err, 503, "out_of_memory", "",
                      "memory for the response could not be had; retry later");
        return NULL;
    }
    if (bad.at.found) {
        free(text);
        int name_len = (int)strcspn(bad.output, "\"");
        if (bad.head != SIZE_MAX)
            api_error_set(err, 422, "non_finite_number", "",
                          "the result overflows float32: %.*s of head %zu, row %zu, column "
                          "%zu is not finite; the embeddings or weights are too large",
                          name_len, bad.output, bad.head, bad.at.row, bad.at.col);
        else
            api_error_set(err, 422, "non_finite_number", "",
                          "the result overflows float32: %.*s row %zu, column %zu is not "
                          "finite; the embeddings or weights are too large",
                          name_len, bad.output, bad.at.row, bad.at.col);
        return NULL;
    }
    return text;
}
