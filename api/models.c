/*
 * models.c — the models endpoints' JSON.
 *
 * A model's weights are stored packed (attn_weights: w_qkv is
 * dm × (hd + 2gd), or dm × hd beside a w_kv of dc × 2gd for
 * cross-attention); the inline form a client sends splits them per head,
 * so head i's w_q is the dm × dh block of w_qkv at column i·dh, read with
 * w_qkv's row stride: nothing is copied, the writer walks the packed
 * matrices. With g < h K/V heads the inline form has kv_heads, and the
 * heads only w_q and b_q; with g = h, w_k and w_v stay in the heads, the
 * form of multi-head attention. Either reads back (request_weights.c) into
 * the same packed buffers, so a model sent back inline answers as it does.
 */
#include "api/models.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/float_format.h"
#include "api/json_write.h"
#include "api/models_norm.h"

/* Bytes one float takes at most in the JSON, its comma included; rows and
 * keys are counted apart. */
#define FLOAT_JSON_MAX 16

static const char *mask_word(attn_mask_kind kind) {
    return kind == ATTN_MASK_NONE ? "none" : "causal";
}

static size_t kv_heads_of(const attn_weights *w) {
    return w->n_kv_heads ? w->n_kv_heads : w->n_heads;
}

/* v as it was likely written: an integer as one ("theta": 500000), else the
 * shortest %g text that reads back as v (RoPE's parameters are doubles). */
static void write_double(api_buffer *b, double v) {
    char text[40];
    if (floor(v) == v && fabs(v) < 1e15) {
        snprintf(text, sizeof text, "%.0f", v);
        api_buffer_append_str(b, text);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v) break;
    }
    api_buffer_append_str(b, text);
}

/* ,"key":v */
static void write_key_double(api_buffer *b, const char *key, double v) {
    api_buffer_append_str(b, ",\"");
    api_buffer_append_str(b, key);
    api_buffer_append_str(b, "\":");
    write_double(b, v);
}

/* yarn's and longrope's fields after "type", those given (a zero is the
 * default: attention.h), in the inline form request_rope.c reads. */
static void write_long_scaling(api_buffer *b, const attn_rope *r, api_nonfinite *bad) {
    if (r->scaling == ATTN_ROPE_SCALING_LONGROPE) {
        api_buffer_append_str(b, ",\"short_factor\":");
        api_write_vector(b, r->short_factor, r->dims / 2, bad);
        api_buffer_append_str(b, ",\"long_factor\":");
        api_write_vector(b, r->long_factor, r->dims / 2, bad);
    }
    if (r->factor > 0) write_key_double(b, "factor", r->factor);
    write_key_double(b, "original_max_position_embeddings", r->original_max_position);
    if (r->beta_fast > 0) write_key_double(b, "beta_fast", r->beta_fast);
    if (r->beta_slow > 0) write_key_double(b, "beta_slow", r->beta_slow);
    if (r->mscale != 0) write_key_double(b, "mscale", r->mscale);
    if (r->mscale_all_dim != 0) write_key_double(b, "mscale_all_dim", r->mscale_all_dim);
    if (r->attention_factor > 0) write_key_double(b, "attention_factor", r->attention_factor);
    if (r->untruncated) api_buffer_append_str(b, ",\"truncate\":false");
}

static void write_rope(api_buffer *b, const attn_rope *r, api_nonfinite *bad) {
    api_buffer_append_str(b, "{\"theta\":");
    write_double(b, r->theta);
    api_buffer_append_str(b, ",\"dims\":");
    api_write_size(b, r->dims);
    api_buffer_append_str(b, r->style == ATTN_ROPE_INTERLEAVED ? ",\"style\":\"interleaved\""
                                                               : ",\"style\":\"half\"");
    if (r->scaling == ATTN_ROPE_SCALING_YARN || r->scaling == ATTN_ROPE_SCALING_LONGROPE) {
        api_buffer_append_str(b, r->scaling == ATTN_ROPE_SCALING_YARN
                                     ? ",\"scaling\":{\"type\":\"yarn\""
                                     : ",\"scaling\":{\"type\":\"longrope\"");
        write_long_scaling(b, r, bad);
        api_buffer_append(b, "}", 1);
    } else if (r->scaling != ATTN_ROPE_SCALING_NONE) {
        api_buffer_append_str(b, r->scaling == ATTN_ROPE_SCALING_LINEAR
                                     ? ",\"scaling\":{\"type\":\"linear\",\"factor\":"
                                     : ",\"scaling\":{\"type\":\"llama3\",\"factor\":");
        write_double(b, r->factor);
        if (r->scaling == ATTN_ROPE_SCALING_LLAMA3) {
            api_buffer_append_str(b, ",\"low_freq_factor\":");
            write_double(b, r->low_freq_factor);
            api_buffer_append_str(b, ",\"high_freq_factor\":");
            write_double(b, r->high_freq_factor);
            api_buffer_append_str(b, ",\"original_max_position_embeddings\":");
            write_double(b, r->original_max_position);
        }
        api_buffer_append(b, "}", 1);
    }
    api_buffer_append(b, "}", 1);
}

/* ,"rope":…,"alibi":[…],"window":…,"softcap":…,"scale":…,"chunk":…, those the
 * weights set (the summary's and the inline form's; sinks are the inline
 * form's alone, with the weights). */
static void write_variants(api_buffer *b, const attn_weights *w, api_nonfinite *bad) {
    char num[API_FLOAT_TEXT_MAX];
    if (w->rope.dims) {
        api_buffer_append_str(b, ",\"rope\":");
        write_rope(b, &w->rope, bad);
    }
    if (w->alibi) {
        api_buffer_append_str(b, ",\"alibi\":");
        api_write_vector(b, w->alibi, w->n_heads, bad);
    }
    if (w->window) {
        api_buffer_append_str(b, ",\"window\":");
        api_write_size(b, w->window);
    }
    if (w->softcap > 0.0f) {
        api_buffer_append_str(b, ",\"softcap\":");
        api_buffer_append(b, num, api_float_format(num, w->softcap));
    }
    if (w->scale > 0.0f) {
        api_buffer_append_str(b, ",\"scale\":");
        api_buffer_append(b, num, api_float_format(num, w->scale));
    }
    if (w->chunk) {
        api_buffer_append_str(b, ",\"chunk\":");
        api_write_size(b, w->chunk);
    }
}

/* Shown when the weights are cross-attention, or say a width of their own. */
static int shows_d_context(const attn_weights *w) {
    return w->w_kv != NULL || (w->d_context != 0 && w->d_context != w->d_model);
}

/* L, and layer l's weights (layers[0] is `weights`; a model without
 * layers is one). */
static size_t layers_of(const api_model_info *m) {
    return m->layers && m->n_layers ? m->n_layers : 1;
}

static const attn_weights *layer_at(const api_model_info *m, size_t l) {
    return m->layers && m->n_layers ? m->layers[l] : m->weights;
}

/* The variants: a one-layer model's at the top, a stack's per layer in
 * "layers": [{…}, …], since each layer has its own. */
static void write_model_variants(api_buffer *b, const api_model_info *m, api_nonfinite *bad) {
    size_t n = layers_of(m);
    if (n == 1) {
        write_variants(b, m->weights, bad);
        api_norms_write(b, m->weights, 0, bad); /* their settings (models_norm.c) */
        return;
    }
    api_buffer_append_str(b, ",\"layers\":[");
    for (size_t l = 0; l < n; l++) {
        api_buffer_append_str(b, l ? ",{\"layer\":" : "{\"layer\":");
        api_write_size(b, l);
        write_variants(b, layer_at(m, l), bad);
        api_norms_write(b, layer_at(m, l), 0, bad); /* their settings (models_norm.c) */
        api_buffer_append(b, "}", 1);
    }
    api_buffer_append(b, "]", 1);
}

static void write_summary(api_buffer *b, const api_model_info *m, api_nonfinite *bad) {
    const attn_weights *w = m->weights;
    api_buffer_append_str(b, "{\"name\":");
    api_write_string(b, m->name);
    api_buffer_append_str(b, ",\"d_model\":");
    api_write_size(b, w->d_model);
    if (shows_d_context(w)) {
        api_buffer_append_str(b, ",\"d_context\":");
        api_write_size(b, w->d_context);
    }
    api_buffer_append_str(b, ",\"n_heads\":");
    api_write_size(b, w->n_heads);
    api_buffer_append_str(b, ",\"n_kv_heads\":");
    api_write_size(b, kv_heads_of(w));
    api_buffer_append_str(b, ",\"d_head\":");
    api_write_size(b, w->d_head);
    api_buffer_append_str(b, ",\"n_layers\":");
    api_write_size(b, layers_of(m));
    api_buffer_append_str(b, ",\"mask\":\"");
    api_buffer_append_str(b, mask_word(m->mask));
    api_buffer_append(b, "\"", 1);
    write_model_variants(b, m, bad);
    if (m->vocabulary) {
        api_buffer_append_str(b, ",\"vocabulary_size\":");
        api_write_size(b, m->vocabulary->size);
        if (m->vocabulary->position_embeddings) {
            api_buffer_append_str(b, ",\"n_positions\":");
            api_write_size(b, m->vocabulary->n_positions);
        }
    }
    if (m->dimensions) {
        api_buffer_append_str(b, ",\"dimensions\":[");
        for (size_t i = 0; i < w->d_model; i++) {
            if (i) api_buffer_append(b, ",", 1);
            api_write_string(b, m->dimensions[i]);
        }
        api_buffer_append(b, "]", 1);
    }
    api_buffer_append_str(b, ",\"description\":");
    api_write_string(b, m->description ? m->description : "");
}

char *api_models_encode_list(const api_model_info *models, size_t count, size_t *len) {
    api_buffer b;
    api_nonfinite bad = {0, 0, 0}; /* the store refuses non-finite weights at load */
    api_buffer_init(&b, 64 + count * 160);
    api_buffer_append_str(&b, "{\"models\":[");
    for (size_t i = 0; i < count; i++) {
        if (i) api_buffer_append(&b, ",", 1);
        write_summary(&b, &models[i], &bad);
        api_buffer_append(&b, "}", 1);
    }
    api_buffer_append_str(&b, "]}");
    char *text = api_buffer_finish(&b, len);
    if (text && bad.found) {
        free(text);
        return NULL;
    }
    return text;
}

/* An upper bound of the weights' JSON text; SIZE_MAX when it overflows.
 * The sizes are the store's, each far below SIZE_MAX^(1/2), so only the
 * products are checked. */
static size_t weights_json_bound(const attn_weights *w) {
    size_t h = w->n_heads, g = kv_heads_of(w), dh = w->d_head, dm = w->d_model;
    size_t kv_rows = w->w_kv ? w->d_context : dm, hd = h * dh, gd = g * dh;
    size_t rows = h * dm + 2 * g * kv_rows + hd + 3 * h + 2 * g + 64;
    size_t q, kv, o, floats, bytes;
    /* w_q, w_k and w_v, w_o, the biases, the slopes, longrope's lists (dims ≤ dh) and the sinks */
    if (__builtin_mul_overflow(dm, hd, &q) || __builtin_mul_overflow(kv_rows, 2 * gd, &kv) ||
        __builtin_mul_overflow(hd, dm, &o) || __builtin_add_overflow(q, kv, &floats) ||
        __builtin_add_overflow(floats, o, &floats) ||
        __builtin_add_overflow(floats, hd + 2 * gd + dm + 2 * h + dh, &floats) ||
        __builtin_mul_overflow(floats, (size_t)FLOAT_JSON_MAX, &bytes) ||
        __builtin_add_overflow(bytes, rows * 3 + (h + g) * 64 + 1024, &bytes) ||
        __builtin_add_overflow(bytes, api_norms_json_bound(w, FLOAT_JSON_MAX), &bytes))
        return SIZE_MAX;
    return bytes;
}

/* An upper bound of the vocabulary's JSON text ("tokens", "embeddings",
 * "position_embeddings"); SIZE_MAX when it overflows. A token's text is at
 * most 6 bytes a byte (\u00XX), its quotes and a comma. */
static size_t vocabulary_json_bound(const api_vocabulary *v, size_t dm) {
    size_t bytes = 256, part;
    for (size_t i = 0; i < v->size; i++)
        if (__builtin_mul_overflow(strlen(v->tokens[i]), (size_t)6, &part) ||
            __builtin_add_overflow(bytes, part + 3, &bytes))
            return SIZE_MAX;
    size_t rows = v->size + v->n_positions, floats;
    if (__builtin_mul_overflow(rows, dm, &floats) ||
        __builtin_mul_overflow(floats, (size_t)FLOAT_JSON_MAX, &part) ||
        __builtin_add_overflow(bytes, part, &bytes) ||
        __builtin_add_overflow(bytes, rows * 3, &bytes))
        return SIZE_MAX;
    return bytes;
}

static void write_vocabulary(api_buffer *b, const api_vocabulary *v, size_t dm,
                             api_nonfinite *bad) {
    api_buffer_append_str(b, "{\"tokens\":[");
    for (size_t i = 0; i < v->size; i++) {
        if (i) api_buffer_append(b, ",", 1);
        api_write_string(b, v->tokens[i]);
    }
    api_buffer_append_str(b, "],\"embeddings\":");
    api_write_matrix(b, v->token_embeddings, v->size, dm, dm, 0, bad);
    if (v->position_embeddings) {
        api_buffer_append_str(b, ",\"position_embeddings\":");
        api_write_matrix(b, v->position_embeddings, v->n_positions, dm, dm, 0, bad);
    }
    api_buffer_append(b, "}", 1);
}

/* One K/V head u's w_k, w_v (and b_k, b_v), from w_qkv after Q or from w_kv. */
static void write_kv(api_buffer *b, const attn_weights *w, size_t u, api_nonfinite *bad) {
    size_t dh = w->d_head, hd = w->n_heads * dh, gd = kv_heads_of(w) * dh;
    const float *m = w->w_kv ? w->w_kv : w->w_qkv + hd;
    const float *bias = w->w_kv ? w->b_kv : w->b_qkv ? w->b_qkv + hd : NULL;
    size_t rows = w->w_kv ? w->d_context : w->d_model, ld = w->w_kv ? 2 * gd : hd + 2 * gd;

    api_buffer_append_str(b, "\"w_k\":");
    api_write_matrix(b, m + u * dh, rows, dh, ld, 0, bad);
    api_buffer_append_str(b, ",\"w_v\":");
    api_write_matrix(b, m + gd + u * dh, rows, dh, ld, 0, bad);
    if (bias) {
        api_buffer_append_str(b, ",\"b_k\":");
        api_write_vector(b, bias + u * dh, dh, bad);
        api_buffer_append_str(b, ",\"b_v\":");
        api_write_vector(b, bias + gd + u * dh, dh, bad);
    }
}

static void write_weights(api_buffer *b, const attn_weights *w, api_nonfinite *bad) {
    size_t dm = w->d_model, dh = w->d_head, h = w->n_heads, g = kv_heads_of(w), hd = h * dh;
    size_t ld = w->w_kv ? hd : hd + 2 * g * dh;
    int grouped = g != h;

    api_buffer_append_str(b, "{\"heads\":[");
    for (size_t i = 0; i < h; i++) {
        api_buffer_append_str(b, i ? ",{\"w_q\":" : "{\"w_q\":");
        api_write_matrix(b, w->w_qkv + i * dh, dm, dh, ld, 0, bad);
        if (w->b_qkv) {
            api_buffer_append_str(b, ",\"b_q\":");
            api_write_vector(b, w->b_qkv + i * dh, dh, bad);
        }
        if (!grouped) {
            api_buffer_append(b, ",", 1);
            write_kv(b, w, i, bad);
        }
        api_buffer_append(b, "}", 1);
    }
    api_buffer_append(b, "]", 1);
    if (grouped) {
        api_buffer_append_str(b, ",\"kv_heads\":[");
        for (size_t u = 0; u < g; u++) {
            api_buffer_append_str(b, u ? ",{" : "{");
            write_kv(b, w, u, bad);
            api_buffer_append(b, "}", 1);
        }
        api_buffer_append(b, "]", 1);
    }
    if (w->w_o) {
        api_buffer_append_str(b, ",\"w_o\":");
        api_write_matrix(b, w->w_o, hd, dm, dm, 0, bad);
    }
    if (w->b_o) {
        api_buffer_append_str(b, ",\"b_o\":");
        api_write_vector(b, w->b_o, dm, bad);
    }
    if (w->sinks) {
        api_buffer_append_str(b, ",\"sinks\":");
        api_write_vector(b, w->sinks, h, bad);
    }
    write_variants(b, w, bad);
    api_norms_write(b, w, 1, bad); /* with their arrays (models_norm.c) */
    api_buffer_append(b, "}", 1);
}

/* One layer's weight set, or a stack's {"layers": [weight set, …]}: the
 * inline forms POST /v1/attention reads back. */
static void write_model_weights(api_buffer *b, const api_model_info *m, api_nonfinite *bad) {
    size_t n = layers_of(m);
    if (n == 1) {
        write_weights(b, m->weights, bad);
        return;
    }
    api_buffer_append_str(b, "{\"layers\":[");
    for (size_t l = 0; l < n; l++) {
        if (l) api_buffer_append(b, ",", 1);
        write_weights(b, layer_at(m, l), bad);
    }
    api_buffer_append_str(b, "]}");
}

char *api_model_encode(const api_model_info *model, unsigned parts, size_t max_response_bytes,
                       size_t *len, attn_error *err) {
    api_nonfinite bad = {0, 0, 0};
    api_buffer b;
    int with_weights = (parts & API_MODEL_WEIGHTS) != 0;
    const api_vocabulary *vocab = (parts & API_MODEL_VOCABULARY) ? model->vocabulary : NULL;
    size_t dm = model->weights->d_model;

    if (with_weights || vocab) {
        size_t bound = 1024, part;
        for (size_t l = 0; with_weights && l < layers_of(model); l++)
            if (__builtin_add_overflow(bound, weights_json_bound(layer_at(model, l)), &bound))
                bound = SIZE_MAX;
        if (vocab && __builtin_add_overflow(bound, vocabulary_json_bound(vocab, dm), &bound))
            bound = SIZE_MAX;
        /* the dimensions' names, at most 6 bytes a byte, in the summary */
        for (size_t i = 0; model->dimensions && i < dm; i++)
            if (__builtin_mul_overflow(strlen(model->dimensions[i]) + 1, (size_t)6, &part) ||
                __builtin_add_overflow(bound, part, &bound))
                bound = SIZE_MAX;
        if (bound > max_response_bytes) {
            attn_error_set(err, 422, "limit_exceeded", "",
                           "the %s of %s %s up to %zu bytes of JSON, over the limit "
                           "max_response_bytes = %zu",
                           with_weights && vocab ? "weights and vocabulary"
                           : with_weights        ? "weights"
                                                 : "vocabulary",
                           model->name, with_weights ? "take" : "takes", bound, max_response_bytes);
            return NULL;
        }
        api_buffer_init(&b, bound / 2 + 256);
    } else {
        api_buffer_init(&b, 256);
    }
    write_summary(&b, model, &bad);
    /* The store refuses non-finite values at load, so `bad` stays 0. */
    if (with_weights) {
        api_buffer_append_str(&b, ",\"weights\":");
        write_model_weights(&b, model, &bad);
    }
    if (vocab) {
        api_buffer_append_str(&b, ",\"vocabulary\":");
        write_vocabulary(&b, vocab, dm, &bad);
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

int api_model_flag(const char *name, const char *value, int *flag, attn_error *err) {
    *flag = value && (strcmp(value, "true") == 0 || strcmp(value, "1") == 0);
    if (*flag || value == NULL || strcmp(value, "false") == 0 || strcmp(value, "0") == 0) return 0;
    return attn_error_set(err, 400, "invalid_value", NULL,
                          "the query parameter %s must be true or false", name);
}
