/*
 * codec_oip_encode.c — what the Open Inference Protocol endpoints answer:
 * the error body, server and model metadata, and an infer call's outputs
 * (oip.h says what the wire format follows).
 *
 * An output is scattered from its sequences' compact results into the
 * padded tensor: zeros first, then each real token's rows at its place;
 * in scores, a real query's entries for padded keys are −∞ (masked), which
 * JSON writes as −3.4028235e38 (−FLT_MAX) since it has no infinity. A
 * binary output is scattered straight into the answer's bytes, after the
 * JSON header, in the order of the outputs; a JSON one into a scratch
 * tensor whose numbers are then written as text.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/float_format.h"
#include "api/oip_internal.h"

/* Binary tensors are little-endian on the wire and copied as they are. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Open Inference Protocol's binary tensors are copied as little-endian floats"
#endif

char *api_oip_error_json(const attn_error *err, size_t *len) {
    /* A message cut at its buffer's end may end inside a UTF-8 sequence,
     * which jansson would refuse. */
    attn_error clean = *err;
    attn_error_sanitize(&clean);
    json_t *o = json_pack("{s:s}", "error", clean.message);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

char *api_oip_server_metadata(size_t *len) {
    static const char text[] =
        "{\"name\":\"attention-server\",\"version\":\"1\",\"extensions\":[\"binary_tensor_data\"]}";
    char *s = malloc(sizeof text);
    if (s) {
        memcpy(s, text, sizeof text);
        *len = sizeof text - 1;
    }
    return s;
}

char *api_oip_model_ready(const char *name, size_t *len) {
    json_t *o = json_pack("{s:s,s:b}", "name", name, "ready", 1);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

/* {"name", "datatype", "shape": [...]}; -1 for a size that varies. */
static json_t *tensor_meta(const char *name, const char *dt, const long long *shape, size_t rank) {
    json_t *s = json_array();
    for (size_t i = 0; i < rank; i++)
        json_array_append_new(s, json_integer(shape[i]));
    return json_pack("{s:s,s:s,s:o}", "name", name, "datatype", dt, "shape", s);
}

char *api_oip_model_metadata(const api_oip_model *m, size_t *len) {
    const attn_weights *w = m->weights;
    long long dm = (long long)w->d_model, dh = (long long)w->d_head;
    json_t *in = json_array(), *out = json_array();
    json_array_append_new(in, tensor_meta("embeddings", "FP32", (long long[]){-1, -1, dm}, 3));
    json_array_append_new(in, tensor_meta("attention_mask", "INT32", (long long[]){-1, -1}, 2));
    json_array_append_new(in, tensor_meta("positions", "INT64", (long long[]){-1, -1}, 2));
    if (w->w_kv) {
        long long dc = (long long)w->d_context;
        json_array_append_new(in, tensor_meta("context", "FP32", (long long[]){-1, -1, dc}, 3));
        json_array_append_new(in, tensor_meta("context_mask", "INT32", (long long[]){-1, -1}, 2));
    }
    /* The head axis varies with select_heads. */
    const long long per_head_dh[] = {-1, -1, -1, dh}, square[] = {-1, -1, -1, -1},
                    rows[] = {-1, -1, dm};
    for (int k = 0; k < OIP_OUTPUTS; k++) {
        const long long *shape = k == OIP_PATTERNS || k == OIP_SCORES    ? square
                                 : k == OIP_EMBEDDINGS || k == OIP_DELTA ? rows
                                                                         : per_head_dh;
        json_array_append_new(
            out, tensor_meta(api_oip_output_names[k], "FP32", shape, shape == rows ? 3 : 4));
    }
    json_t *o = json_pack("{s:s,s:[s],s:s,s:o,s:o}", "name", m->name, "versions", "1", "platform",
                          "attention", "inputs", in, "outputs", out);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) *len = strlen(text);
    return text;
}

/* The compact result of sequence s for output kind. */
static const float *result_of(const api_oip_request *r, size_t s, int kind) {
    const attn_output *o = &r->outs[s];
    switch (kind) {
    case OIP_PATTERNS: return o->patterns;
    case OIP_EMBEDDINGS: return o->embeddings;
    case OIP_DELTA: return o->delta;
    case OIP_Q: return o->q;
    case OIP_K: return o->k;
    case OIP_V: return o->v;
    case OIP_SCORES: return o->scores;
    default: return o->head_outputs;
    }
}

/* The padded tensor of output kind into dst (its api_oip_padded_count
 * floats). */
static void scatter(const api_oip_request *r, int kind, float *dst) {
    size_t n = r->n, m = r->m, hs = r->hs, dh = r->dh, dm = r->dm;
    size_t per_row = api_oip_compact_count(r, kind, n, m);
    memset(dst, 0, r->B * per_row * sizeof *dst);
    for (size_t s = 0; s < r->count; s++) {
        size_t b = r->seq[s], rt = r->ntok[b], mr = r->nctx[b];
        const size_t *tok = r->tok + b * n, *key = r->ctok + b * m;
        const float *src = result_of(r, s, kind);
        float *row = dst + b * per_row;
        if (!src) continue;
        switch (kind) {
        case OIP_Q:
        case OIP_HEAD_OUTPUTS:
            for (size_t hh = 0; hh < hs; hh++)
                for (size_t i = 0; i < rt; i++)
                    memcpy(row + (hh * n + tok[i]) * dh, src + (hh * rt + i) * dh,
                           dh * sizeof *dst);
            break;
        case OIP_K:
        case OIP_V:
            for (size_t hh = 0; hh < hs; hh++)
                for (size_t j = 0; j < mr; j++)
                    memcpy(row + (hh * m + key[j]) * dh, src + (hh * mr + j) * dh,
                           dh * sizeof *dst);
            break;
        case OIP_SCORES:
        case OIP_PATTERNS:
            for (size_t hh = 0; hh < hs; hh++)
                for (size_t i = 0; i < rt; i++) {
                    float *q = row + (hh * n + tok[i]) * m;
                    if (kind == OIP_SCORES)
                        for (size_t j = 0; j < m; j++)
                            q[j] = -INFINITY; /* padded keys: masked */
                    for (size_t j = 0; j < mr; j++)
                        q[key[j]] = src[(hh * rt + i) * mr + j];
                }
            break;
        default:
            for (size_t i = 0; i < rt; i++)
                memcpy(row + tok[i] * dm, src + i * dm, dm * sizeof *dst);
        }
    }
}

/* The shape of output kind, as JSON text. */
static void append_shape(api_buffer *b, const api_oip_request *r, int kind) {
    size_t dims[4], k = 0;
    if (r->batch_axis) dims[k++] = r->B;
    switch (kind) {
    case OIP_Q:
    case OIP_HEAD_OUTPUTS: dims[k++] = r->hs, dims[k++] = r->n, dims[k++] = r->dh; break;
    case OIP_K:
    case OIP_V: dims[k++] = r->hs, dims[k++] = r->m, dims[k++] = r->dh; break;
    case OIP_SCORES:
    case OIP_PATTERNS: dims[k++] = r->hs, dims[k++] = r->n, dims[k++] = r->m; break;
    default: dims[k++] = r->n, dims[k++] = r->dm;
    }
    char t[32];
    api_buffer_append_str(b, "[");
    for (size_t i = 0; i < k; i++) {
        snprintf(t, sizeof t, "%s%zu", i ? "," : "", dims[i]);
        api_buffer_append_str(b, t);
    }
    api_buffer_append_str(b, "]");
}

static void append_floats(api_buffer *b, const float *v, size_t count) {
    char t[API_FLOAT_TEXT_MAX + 1];
    if (api_buffer_reserve(b, count * (API_FLOAT_TEXT_WIDEST + 1) + 2) < 0) return;
    api_buffer_append_str(b, "[");
    for (size_t i = 0; i < count; i++) {
        float f = v[i] == -INFINITY ? -FLT_MAX : v[i];
        size_t k = api_float_format(t + 1, f);
        t[0] = ',';
        api_buffer_append(b, i ? t : t + 1, i ? k + 1 : k);
    }
    api_buffer_append_str(b, "]");
}

char *api_oip_encode(const api_oip_request *r, size_t *len, size_t *json_len, attn_error *err) {
    api_buffer b;
    size_t bin_bytes = 0, most = 0;
    for (size_t k = 0; k < r->n_out; k++) {
        size_t c = api_oip_padded_count(r, r->out_kind[k]);
        if (r->out_binary[k])
            bin_bytes += c * sizeof(float);
        else if (c > most)
            most = c;
    }
    float *scratch = most ? malloc(most * sizeof *scratch) : NULL;
    if (most && !scratch) goto oom;
    api_buffer_init(&b, 256 + bin_bytes);
    api_buffer_append_str(&b, "{\"model_name\":");
    json_t *jname = json_string(r->model_name);
    char *name = jname ? json_dumps(jname, JSON_ENCODE_ANY) : NULL;
    json_decref(jname);
    if (!name) goto oom_buffer;
    api_buffer_append_str(&b, name);
    free(name);
    api_buffer_append_str(&b, ",\"model_version\":\"1\"");
    if (r->id) {
        char *id = json_dumps(r->id, JSON_ENCODE_ANY);
        if (!id) goto oom_buffer;
        api_buffer_append_str(&b, ",\"id\":");
        api_buffer_append_str(&b, id);
        free(id);
    }
    api_buffer_append_str(&b, ",\"outputs\":[");
    for (size_t k = 0; k < r->n_out; k++) {
        int kind = r->out_kind[k];
        char t[64];
        api_buffer_append_str(&b, k ? ",{\"name\":\"" : "{\"name\":\"");
        api_buffer_append_str(&b, api_oip_output_names[kind]);
        api_buffer_append_str(&b, "\",\"datatype\":\"FP32\",\"shape\":");
        append_shape(&b, r, kind);
        size_t c = api_oip_padded_count(r, kind);
        if (r->out_binary[k]) {
            snprintf(t, sizeof t, ",\"parameters\":{\"binary_data_size\":%zu}}", c * sizeof(float));
            api_buffer_append_str(&b, t);
        } else {
            scatter(r, kind, scratch);
            api_buffer_append_str(&b, ",\"data\":");
            append_floats(&b, scratch, c);
            api_buffer_append_str(&b, "}");
        }
    }
    api_buffer_append_str(&b, "]}");
    free(scratch);
    scratch = NULL;
    size_t header = b.len;
    if (bin_bytes && api_buffer_reserve(&b, bin_bytes + 1) == 0) {
        for (size_t k = 0; k < r->n_out; k++) {
            if (!r->out_binary[k]) continue;
            size_t c = api_oip_padded_count(r, r->out_kind[k]);
            /* Little-endian float32 on every host this builds for (x86-64,
             * aarch64): the floats' own bytes. */
            float *dst = (float *)(void *)(b.data + b.len);
            if (((uintptr_t)dst % sizeof(float)) == 0) {
                scatter(r, r->out_kind[k], dst);
            } else {
                float *tmp = malloc((c ? c : 1) * sizeof *tmp);
                if (!tmp) goto oom_buffer;
                scatter(r, r->out_kind[k], tmp);
                memcpy(dst, tmp, c * sizeof *tmp);
                free(tmp);
            }
            b.len += c * sizeof(float);
        }
        b.data[b.len] = '\0';
    }
    char *text = api_buffer_finish(&b, len);
    if (!text) goto oom;
    *json_len = bin_bytes ? header : 0;
    return text;
oom_buffer:
    free(api_buffer_finish(&b, len));
oom:
    free(scratch);
    attn_error_set(err, 503, "out_of_memory", "", "no memory for the answer");
    return NULL;
}
