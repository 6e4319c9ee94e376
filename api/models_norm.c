/*
 * models_norm.c — a model's norms and temperature in GET /v1/models (their
 * settings) and with ?weights=true (the inline form of
 * api/request_norm.c, arrays included), so that a model sent back inline
 * answers as it does. docs/API.md, "Attention of 2025–2026 models".
 */
#include "api/models_norm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* v as the shortest %g text that reads back as v (eps, the temperature's
 * parameters: doubles), an integer as one. */
static void write_number(api_buffer *b, double v) {
    char text[40];
    if (floor(v) == v && fabs(v) < 1e15) {
        snprintf(text, sizeof text, "%.0f", v);
    } else {
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(text, sizeof text, "%.*g", digits, v);
            if (strtod(text, NULL) == v) break;
        }
    }
    api_buffer_append_str(b, text);
}

static void write_vector(api_buffer *b, const char *key, const float *v, size_t n, int arrays,
                         api_nonfinite *bad) {
    if (!arrays || !v) return;
    api_buffer_append_str(b, key);
    api_write_vector(b, v, n, bad);
}

/* ,"<key>":{"type":…,"eps":…[,"offset":…][,"weight":…][,"bias":…]} */
static void write_norm(api_buffer *b, const char *key, const attn_norm *nm, size_t dm, int arrays,
                       api_nonfinite *bad) {
    if (nm->type == ATTN_NORM_NONE) return;
    api_buffer_append_str(b, key);
    api_buffer_append_str(b, nm->type == ATTN_NORM_LAYER ? "{\"type\":\"layer\",\"eps\":"
                                                         : "{\"type\":\"rms\",\"eps\":");
    write_number(b, nm->eps);
    if (nm->type == ATTN_NORM_RMS) {
        api_buffer_append_str(b, ",\"offset\":");
        write_number(b, nm->offset);
    }
    write_vector(b, ",\"weight\":", nm->weight, dm, arrays, bad);
    write_vector(b, ",\"bias\":", nm->bias, dm, arrays, bad);
    api_buffer_append(b, "}", 1);
}

void api_norms_write(api_buffer *b, const attn_weights *w, int arrays, api_nonfinite *bad) {
    const size_t dm = w->d_model, dh = w->d_head;
    const size_t g = w->n_kv_heads ? w->n_kv_heads : w->n_heads;
    write_norm(b, ",\"norm\":", &w->norm, dm, arrays, bad);
    write_norm(b, ",\"post_norm\":", &w->post_norm, dm, arrays, bad);
    const attn_qk_norm *qk = &w->qk_norm;
    if (qk->q.type != ATTN_NORM_NONE) {
        api_buffer_append_str(
            b, qk->all ? ",\"qk_norm\":{\"type\":\"rms\",\"scope\":\"all\",\"eps\":"
                       : ",\"qk_norm\":{\"type\":\"rms\",\"scope\":\"head\",\"eps\":");
        write_number(b, qk->q.eps);
        api_buffer_append_str(b, ",\"offset\":");
        write_number(b, qk->q.offset);
        write_vector(b, ",\"q_weight\":", qk->q.weight, qk->all ? w->n_heads * dh : dh, arrays,
                     bad);
        write_vector(b, ",\"k_weight\":", qk->k.weight, qk->all ? g * dh : dh, arrays, bad);
        api_buffer_append(b, "}", 1);
    }
    if (w->temperature.floor_scale > 0.0) {
        api_buffer_append_str(b, ",\"temperature\":{\"floor_scale\":");
        write_number(b, w->temperature.floor_scale);
        api_buffer_append_str(b, ",\"attn_scale\":");
        write_number(b, w->temperature.attn_scale);
        api_buffer_append(b, "}", 1);
    }
}

size_t api_norms_json_bound(const attn_weights *w, size_t float_max) {
    const size_t g = w->n_kv_heads ? w->n_kv_heads : w->n_heads;
    const size_t floats = 4 * w->d_model + (w->n_heads + g) * w->d_head;
    return floats * float_max + 512;
}
