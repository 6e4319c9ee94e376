/*
 * request_norm.c — a weight set's norms and query temperature, from JSON to
 * attn_weights (docs/API.md, "Attention of 2025–2026 models"):
 *
 *   norm, post_norm  {"type": "layer", "weight"?: d_model, "bias"?: d_model, "eps"?}
 *                    {"type": "rms", "weight"?: d_model, "eps"?, "offset"?: 0 or 1}
 *   qk_norm          {"type": "rms", "scope": "head" or "all", "q_weight"?, "k_weight"?,
 *                     "eps"?, "offset"?}: q_weight and k_weight d_head long (head), or
 *                    n_heads·d_head and n_kv_heads·d_head (all)
 *   temperature      {"floor_scale": F > 0, "attn_scale": a}; not beside rope
 *
 * eps defaults to 1e-5 (layer) and 1e-6 (rms, qk_norm). Called by
 * request_weights.c once the sizes and rope are known, so each error names
 * its own field (/weights/norm/eps; a stack's layer moves it under
 * /weights/layers/l). The arrays live in one block, req->norms, freed with
 * the record.
 */
#include "api/float32.h"
#include "api/request_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_path.h"
#include "api/matrix.h"

static const char *const layer_fields[] = {"type", "weight", "bias", "eps"};
static const char *const rms_fields[] = {"type", "weight", "eps", "offset"};
static const char *const qk_fields[] = {"type", "scope", "q_weight", "k_weight", "eps", "offset"};
static const char *const temperature_fields[] = {"floor_scale", "attn_scale"};

/* Is v the string `word`? */
static int is_word(const json_t *v, const char *word) {
    return json_is_string(v) && json_string_length(v) == strlen(word) &&
           memcmp(json_string_value(v), word, strlen(word)) == 0;
}

/* name = "weights.<field>.<key>", path = "/weights/<field>/<key>" */
static void names_of(char *name, size_t name_cap, char *path, size_t path_cap, const char *field,
                     const char *key) {
    snprintf(name, name_cap, "weights.%s.%s", field, key);
    snprintf(path, path_cap, "/weights/%s/%s", field, key);
}

/* A finite number into *out: 400 wrong_type, 422 non_finite_number. */
static int number_of(const json_t *v, const char *name, const char *path, double *out,
                     attn_error *err) {
    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected a number", name,
                              api_json_type_name(v));
    *out = json_number_value(v);
    if (!api_double_fits_float32(*out))
        return attn_error_set(err, 422, "non_finite_number", path,
                              "%s = %.17g is too large for a finite float32", name, *out);
    return 0;
}

/* eps, when given: a number > 0. */
static int eps_of(const json_t *obj, const char *field, double *eps, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *v = json_object_get(obj, "eps");
    if (!v) return 0;
    names_of(name, sizeof name, path, sizeof path, field, "eps");
    if (number_of(v, name, path, eps, err) < 0) return -1;
    if (!(*eps > 0.0))
        return attn_error_set(err, 422, "out_of_range", path, "%s must be > 0, got %g", name, *eps);
    return 0;
}

/* offset, when given: 0 or 1. */
static int offset_of(const json_t *obj, const char *field, double *offset, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *v = json_object_get(obj, "offset");
    if (!v) return 0;
    names_of(name, sizeof name, path, sizeof path, field, "offset");
    if (number_of(v, name, path, offset, err) < 0) return -1;
    if (*offset != 0.0 && *offset != 1.0)
        return attn_error_set(err, 422, "out_of_range", path, "%s must be 0 or 1, got %g", name,
                              *offset);
    return 0;
}

/* A vector `key` of obj, when given, `len` long, into *at (which moves past it). */
static int vector_of(api_request *req, const json_t *obj, const char *field, const char *key,
                     size_t len, const char *len_what, float **at, const float **out,
                     attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    names_of(name, sizeof name, path, sizeof path, field, key);
    if (api_vector_read(v, req->arrays, name, path, len, len_what, *at, err) < 0) return -1;
    *out = *at;
    *at += len;
    return 0;
}

/* The object of `field`, and its `type` among `types` (*type its index). */
static int object_type(const json_t *obj, const char *field, const char *const *types,
                       size_t n_types, const char *expected, int *type, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    snprintf(name, sizeof name, "weights.%s", field);
    snprintf(path, sizeof path, "/weights/%s", field);
    if (!json_is_object(obj))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected an object", name,
                              api_json_type_name(obj));
    const json_t *t = json_object_get(obj, "type");
    names_of(name, sizeof name, path, sizeof path, field, "type");
    if (!t)
        return attn_error_set(err, 400, "missing_field", path, "%s (%s) is required", name,
                              expected);
    if (!json_is_string(t))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected %s", name,
                              api_json_type_name(t), expected);
    for (size_t i = 0; i < n_types; i++)
        if (is_word(t, types[i])) return *type = (int)i, 0;
    return attn_error_set(err, 400, "invalid_value", path, "%s must be %s", name, expected);
}

/* norm or post_norm: `field` of the weights, over d_model. */
static int decode_norm(api_request *req, const json_t *obj, const char *field, size_t dm,
                       attn_norm *nm, float **at, attn_error *err) {
    static const char *const types[] = {"layer", "rms"};
    char name[96], path[API_PATH_MAX];
    int type;
    if (object_type(obj, field, types, 2, "\"layer\" or \"rms\"", &type, err) < 0) return -1;
    snprintf(name, sizeof name, "weights.%s", field);
    snprintf(path, sizeof path, "/weights/%s", field);
    if (type == 0 ? api_check_fields(obj, layer_fields, 4, name, path,
                                     "type, weight, bias, eps (for \"layer\")", err)
                  : api_check_fields(obj, rms_fields, 4, name, path,
                                     "type, weight, eps, offset (for \"rms\")", err))
        return -1;
    *nm = (attn_norm){.type = type == 0 ? ATTN_NORM_LAYER : ATTN_NORM_RMS,
                      .eps = type == 0 ? 1e-5 : 1e-6};
    if (vector_of(req, obj, field, "weight", dm, "d_model", at, &nm->weight, err) < 0 ||
        vector_of(req, obj, field, "bias", dm, "d_model", at, &nm->bias, err) < 0 ||
        eps_of(obj, field, &nm->eps, err) < 0 || offset_of(obj, field, &nm->offset, err) < 0)
        return -1;
    return 0;
}

static int decode_qk_norm(api_request *req, const json_t *obj, const attn_weights *w,
                          attn_qk_norm *qk, float **at, attn_error *err) {
    static const char *const types[] = {"rms"};
    static const char *const scopes[] = {"head", "all"};
    int type, scope = -1;
    if (object_type(obj, "qk_norm", types, 1, "\"rms\"", &type, err) < 0) return -1;
    if (api_check_fields(obj, qk_fields, 6, "weights.qk_norm", "/weights/qk_norm",
                         "type, scope, q_weight, k_weight, eps, offset", err) < 0)
        return -1;
    const json_t *s = json_object_get(obj, "scope");
    const char *sp = "/weights/qk_norm/scope";
    if (!s)
        return attn_error_set(err, 400, "missing_field", sp,
                              "weights.qk_norm.scope (\"head\" or \"all\") is required");
    if (!json_is_string(s))
        return attn_error_set(err, 400, "wrong_type", sp,
                              "weights.qk_norm.scope is %s, expected \"head\" or \"all\"",
                              api_json_type_name(s));
    for (int i = 0; i < 2; i++)
        if (is_word(s, scopes[i])) scope = i;
    if (scope < 0)
        return attn_error_set(err, 400, "invalid_value", sp,
                              "weights.qk_norm.scope must be \"head\" or \"all\"");
    const size_t dh = w->d_head, g = w->n_kv_heads ? w->n_kv_heads : w->n_heads;
    const size_t qlen = scope ? w->n_heads * dh : dh, klen = scope ? g * dh : dh;
    attn_norm base = {.type = ATTN_NORM_RMS, .eps = 1e-6};
    if (eps_of(obj, "qk_norm", &base.eps, err) < 0 ||
        offset_of(obj, "qk_norm", &base.offset, err) < 0)
        return -1;
    qk->q = qk->k = base;
    qk->all = scope;
    if (vector_of(req, obj, "qk_norm", "q_weight", qlen, scope ? "n_heads · d_head" : "d_head", at,
                  &qk->q.weight, err) < 0 ||
        vector_of(req, obj, "qk_norm", "k_weight", klen, scope ? "n_kv_heads · d_head" : "d_head",
                  at, &qk->k.weight, err) < 0)
        return -1;
    return 0;
}

static int decode_temperature(const json_t *obj, const attn_weights *w, attn_temperature *t,
                              attn_error *err) {
    const char *path = "/weights/temperature";
    if (!json_is_object(obj))
        return attn_error_set(err, 400, "wrong_type", path,
                              "weights.temperature is %s, expected an object with floor_scale "
                              "and attn_scale",
                              api_json_type_name(obj));
    if (api_check_fields(obj, temperature_fields, 2, "weights.temperature", path,
                         "floor_scale, attn_scale", err) < 0)
        return -1;
    double *dst[2] = {&t->floor_scale, &t->attn_scale};
    for (int i = 0; i < 2; i++) {
        char name[96], p[API_PATH_MAX];
        const json_t *v = json_object_get(obj, temperature_fields[i]);
        names_of(name, sizeof name, p, sizeof p, "temperature", temperature_fields[i]);
        if (!v) return attn_error_set(err, 400, "missing_field", p, "%s is required", name);
        if (number_of(v, name, p, dst[i], err) < 0) return -1;
    }
    if (!(t->floor_scale > 0.0))
        return attn_error_set(err, 422, "out_of_range", "/weights/temperature/floor_scale",
                              "weights.temperature.floor_scale must be > 0, got %g",
                              t->floor_scale);
    /* Llama 4 tunes the temperature on its layers without RoPE only */
    if (w->rope.dims)
        return attn_error_set(err, 422, "invalid_combination", path,
                              "weights.temperature is for a layer without rope; this weight set "
                              "has rope");
    return 0;
}

int api_norms_decode(api_request *req, const json_t *weights, attn_weights *w, attn_error *err) {
    const json_t *norm = json_object_get(weights, "norm");
    const json_t *post = json_object_get(weights, "post_norm");
    const json_t *qk = json_object_get(weights, "qk_norm");
    const json_t *temp = json_object_get(weights, "temperature");
    if (norm || post || qk) {
        /* every array at its longest: weight and bias of both norms, Q's and K's */
        const size_t g = w->n_kv_heads ? w->n_kv_heads : w->n_heads;
        size_t floats = 4 * w->d_model + (w->n_heads + g) * w->d_head; /* bounded by the limits */
        req->norms = malloc(floats * sizeof(float));
        if (!req->norms)
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
    }
    float *at = req->norms;
    if (norm && decode_norm(req, norm, "norm", w->d_model, &w->norm, &at, err) < 0) return -1;
    if (post && decode_norm(req, post, "post_norm", w->d_model, &w->post_norm, &at, err) < 0)
        return -1;
    if (qk && decode_qk_norm(req, qk, w, &w->qk_norm, &at, err) < 0) return -1;
    if (temp && decode_temperature(temp, w, &w->temperature, err) < 0) return -1;
    return 0;
}
