/*
 * models.c — the models endpoints' JSON.
 *
 * A model's weights are stored packed (attn_weights: w_qkv is dm × 3hd);
 * the inline form a client sends splits them per head, so head i's w_q is
 * the dm × dh block of w_qkv at column i·dh, read with stride 3hd: nothing
 * is copied, the writer walks the packed matrix.
 */
#include "api/models.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/json_write.h"

/* Bytes one float takes at most in the JSON, its comma included; rows and
 * keys are counted apart. */
#define FLOAT_JSON_MAX 16

static const char *mask_word(attn_mask_kind kind) {
    return kind == ATTN_MASK_NONE ? "none" : "causal";
}

static void write_summary(api_buffer *b, const api_model_info *m) {
    const attn_weights *w = m->weights;
    api_buffer_append_str(b, "{\"name\":");
    api_write_string(b, m->name);
    api_buffer_append_str(b, ",\"d_model\":");
    api_write_size(b, w->d_model);
    api_buffer_append_str(b, ",\"n_heads\":");
    api_write_size(b, w->n_heads);
    api_buffer_append_str(b, ",\"d_head\":");
    api_write_size(b, w->d_head);
    api_buffer_append_str(b, ",\"mask\":\"");
    api_buffer_append_str(b, mask_word(m->mask));
    api_buffer_append_str(b, "\",\"description\":");
    api_write_string(b, m->description ? m->description : "");
}

char *api_models_encode_list(const api_model_info *models, size_t count, size_t *len) {
    api_buffer b;
    api_buffer_init(&b, 64 + count * 160);
    api_buffer_append_str(&b, "{\"models\":[");
    for (size_t i = 0; i < count; i++) {
        if (i) api_buffer_append(&b, ",", 1);
        write_summary(&b, &models[i]);
        api_buffer_append(&b, "}", 1);
    }
    api_buffer_append_str(&b, "]}");
    return api_buffer_finish(&b, len);
}

/* An upper bound of the weights' JSON text; SIZE_MAX when it overflows. */
static size_t weights_json_bound(const attn_weights *w) {
    size_t hd = w->n_heads * w->d_head, rows = 3 * hd + w->d_model + 2 * hd + w->d_model + 64;
    size_t floats = 3 * hd * w->d_model + 3 * hd + hd * w->d_model + w->d_model, bytes;
    if (__builtin_mul_overflow(floats, (size_t)FLOAT_JSON_MAX, &bytes) ||
        __builtin_add_overflow(bytes, rows * 3 + w->n_heads * 64 + 64, &bytes))
        return SIZE_MAX;
    return bytes;
}

static void write_weights(api_buffer *b, const attn_weights *w, api_nonfinite *bad) {
    static const char *const w_keys[3] = {"\"w_q\":", "\"w_k\":", "\"w_v\":"};
    static const char *const b_keys[3] = {",\"b_q\":", ",\"b_k\":", ",\"b_v\":"};
    size_t dm = w->d_model, dh = w->d_head, hd = w->n_heads * dh, ld = 3 * hd;

    api_buffer_append_str(b, "{\"heads\":[");
    for (size_t i = 0; i < w->n_heads; i++) {
        api_buffer_append_str(b, i ? ",{" : "{");
        for (size_t p = 0; p < 3; p++) { /* q, k, v: column block p·hd + i·dh */
            if (p) api_buffer_append(b, ",", 1);
            api_buffer_append_str(b, w_keys[p]);
            api_write_matrix(b, w->w_qkv + p * hd + i * dh, dm, dh, ld, 0, bad);
        }
        for (size_t p = 0; w->b_qkv && p < 3; p++) {
            api_buffer_append_str(b, b_keys[p]);
            api_write_vector(b, w->b_qkv + p * hd + i * dh, dh, bad);
        }
        api_buffer_append(b, "}", 1);
    }
    api_buffer_append(b, "]", 1);
    if (w->w_o) {
        api_buffer_append_str(b, ",\"w_o\":");
        api_write_matrix(b, w->w_o, hd, dm, dm, 0, bad);
    }
    if (w->b_o) {
        api_buffer_append_str(b, ",\"b_o\":");
        api_write_vector(b, w->b_o, dm, bad);
    }
    api_buffer_append(b, "}", 1);
}

char *api_model_encode(const api_model_info *model, int with_weights, size_t max_response_bytes,
                       size_t *len, attn_error *err) {
    api_nonfinite bad = {0, 0, 0};
    api_buffer b;

    if (with_weights) {
        size_t bound = weights_json_bound(model->weights);
        if (bound > max_response_bytes) {
            attn_error_set(err, 422, "limit_exceeded", "",
                           "the weights of %s need up to %zu bytes of JSON, over the limit "
                           "max_response_bytes = %zu",
                           model->name, bound, max_response_bytes);
            return NULL;
        }
        api_buffer_init(&b, bound / 2 + 256);
    } else {
        api_buffer_init(&b, 256);
    }
    write_summary(&b, model);
    if (with_weights) {
        /* The store refuses non-finite weights at load, so `bad` stays 0. */
        api_buffer_append_str(&b, ",\"weights\":");
        write_weights(&b, model->weights, &bad);
    }
    api_buffer_append(&b, "}", 1);
    char *text = api_buffer_finish(&b, len);
    if (!text || bad.found) {
        free(text);
        attn_error_set(err, bad.found ? 500 : 503, bad.found ? "internal_error" : "out_of_memory",
                       "",
                       bad.found ? "a stored weight is not finite" : "no memory for the answer");
        return NULL;
    }
    return text;
}

int api_model_weights_flag(const char *value, int *weights, attn_error *err) {
    *weights = value && (strcmp(value, "true") == 0 || strcmp(value, "1") == 0);
    if (*weights || value == NULL || strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
        return 0;
    return attn_error_set(err, 400, "invalid_value", NULL,
                          "the query parameter weights must be true or false");
}
