/*
 * model_norm.c — a layer's norms and query temperature in a model file
 * (model_norm.h; models/README.md, "Norms and temperature").
 *
 * A norm is on when its `<norm>_type` key is given (`layer` or `rms`), and
 * takes its eps, offset (rms: 0 or 1), weight and bias (layer) from the
 * keys and tensors beside it; qk_norm is on with `qk_norm_scope` (`head`
 * or `all`), always rms; the temperature with both its keys. A key or a
 * tensor of a norm that is off, a bias of an rms norm, a wrong length, an
 * eps ≤ 0, an offset other than 0 or 1, a floor_scale ≤ 0 or a
 * temperature beside RoPE is refused, naming the key or tensor, as the
 * request's fields are (api/request_norm.c). model.c calls the check with
 * the layer's sizes, then the bind once the tensors' values are read.
 */
#include "store/model_norm.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/error.h"
#include "store/model.h"

const char *const store_norm_keys[STORE_NORM_KEYS] = {"norm_type",
                                                      "norm_eps",
                                                      "norm_offset",
                                                      "post_norm_type",
                                                      "post_norm_eps",
                                                      "post_norm_offset",
                                                      "qk_norm_scope",
                                                      "qk_norm_eps",
                                                      "qk_norm_offset",
                                                      "temperature_floor_scale",
                                                      "temperature_attn_scale"};

#define KEY_MAX 96

typedef struct norm_meta {
    const store_file *f;
    const char *prefix, *path;
    attn_error *err;
} norm_meta;

static const char *get(const norm_meta *nm, const char *key, char full[KEY_MAX]) {
    snprintf(full, KEY_MAX, "%s%s", nm->prefix, key);
    return store_file_metadata(nm->f, full);
}

/* eps: a number > 0 (absent: *eps kept). */
static int eps_of(const norm_meta *nm, const char *key, double *eps) {
    char full[KEY_MAX];
    const char *text = get(nm, key, full);
    if (!text) return 0;
    if (store_positive_parse(text, eps) != 0 || !(*eps <= FLT_MAX))
        return store_error_set(nm->err, nm->path, "metadata '%s' is '%s', not a finite number > 0",
                               full, text);
    return 0;
}

/* offset: 0 or 1 (absent: 0). */
static int offset_of(const norm_meta *nm, const char *key, double *offset) {
    char full[KEY_MAX];
    const char *text = get(nm, key, full);
    if (!text) return 0;
    if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0)
        return store_error_set(nm->err, nm->path, "metadata '%s' is '%s', expected '0' or '1'",
                               full, text);
    *offset = text[0] == '1';
    return 0;
}

/* A tensor of one dimension, len long. */
static int length_check(const norm_meta *nm, const store_tensor *t, size_t len, const char *what) {
    if (!t || (t->rank == 1 && t->shape[0] == len)) return 0;
    return store_error_set(nm->err, nm->path, "tensor '%s' must have shape [%zu] (%s)", t->name,
                           len, what);
}

/* A key or tensor of something that is off. */
static int stray(const norm_meta *nm, const char *const *keys, size_t n_keys,
                 const store_tensor *const *t, size_t n_t, const char *on_key) {
    char full[KEY_MAX], on[KEY_MAX];
    snprintf(on, sizeof on, "%s%s", nm->prefix, on_key);
    for (size_t i = 0; i < n_keys; i++)
        if (get(nm, keys[i], full))
            return store_error_set(nm->err, nm->path, "metadata '%s' without '%s'", full, on);
    for (size_t i = 0; i < n_t; i++)
        if (t[i])
            return store_error_set(nm->err, nm->path, "tensor '%s' without metadata '%s'",
                                   t[i]->name, on);
    return 0;
}

/* norm_* or post_norm_* (`name`), tensors t[0] (weight) and t[1] (bias). */
static int norm_check(const norm_meta *nm, const char *name, const store_tensor *const *t,
                      size_t dm, attn_norm *out) {
    char key[3][40], full[KEY_MAX];
    snprintf(key[0], sizeof key[0], "%s_type", name);
    snprintf(key[1], sizeof key[1], "%s_eps", name);
    snprintf(key[2], sizeof key[2], "%s_offset", name);
    const char *type = get(nm, key[0], full);
    if (!type) {
        const char *const rest[2] = {key[1], key[2]};
        return stray(nm, rest, 2, t, 2, key[0]);
    }
    if (strcmp(type, "layer") == 0)
        *out = (attn_norm){.type = ATTN_NORM_LAYER, .eps = 1e-5};
    else if (strcmp(type, "rms") == 0)
        *out = (attn_norm){.type = ATTN_NORM_RMS, .eps = 1e-6};
    else
        return store_error_set(nm->err, nm->path,
                               "metadata '%s' is '%s', expected 'layer' or 'rms'", full, type);
    if (out->type == ATTN_NORM_LAYER && get(nm, key[2], full))
        return store_error_set(nm->err, nm->path, "metadata '%s': a layer norm has no offset",
                               full);
    if (out->type == ATTN_NORM_RMS && t[1])
        return store_error_set(nm->err, nm->path, "tensor '%s': an rms norm has no bias",
                               t[1]->name);
    if (eps_of(nm, key[1], &out->eps) || offset_of(nm, key[2], &out->offset) ||
        length_check(nm, t[0], dm, "d_model") || length_check(nm, t[1], dm, "d_model"))
        return -1;
    return 0;
}

int store_norms_check(attn_weights *w, const store_file *f, const char *prefix,
                      const store_tensor *const *t, size_t dm, size_t h, size_t g, size_t dh,
                      size_t rope_dims, const char *path, attn_error *err) {
    const norm_meta nm = {f, prefix, path, err};
    char full[KEY_MAX];
    if (norm_check(&nm, "norm", t + STORE_NORM_WEIGHT, dm, &w->norm) ||
        norm_check(&nm, "post_norm", t + STORE_POST_NORM_WEIGHT, dm, &w->post_norm))
        return -1;
    const char *scope = get(&nm, "qk_norm_scope", full);
    if (!scope) {
        const char *const rest[2] = {"qk_norm_eps", "qk_norm_offset"};
        if (stray(&nm, rest, 2, t + STORE_Q_NORM_WEIGHT, 2, "qk_norm_scope")) return -1;
    } else {
        if (strcmp(scope, "head") != 0 && strcmp(scope, "all") != 0)
            return store_error_set(err, path, "metadata '%s' is '%s', expected 'head' or 'all'",
                                   full, scope);
        const int all = scope[0] == 'a';
        attn_norm base = {.type = ATTN_NORM_RMS, .eps = 1e-6};
        if (eps_of(&nm, "qk_norm_eps", &base.eps) ||
            offset_of(&nm, "qk_norm_offset", &base.offset) ||
            length_check(&nm, t[STORE_Q_NORM_WEIGHT], all ? h * dh : dh,
                         all ? "n_heads·d_head" : "d_head") ||
            length_check(&nm, t[STORE_K_NORM_WEIGHT], all ? g * dh : dh,
                         all ? "n_kv_heads·d_head" : "d_head"))
            return -1;
        w->qk_norm = (attn_qk_norm){.q = base, .k = base, .all = all};
    }
    const char *fs = get(&nm, "temperature_floor_scale", full);
    char full_a[KEY_MAX];
    const char *as = get(&nm, "temperature_attn_scale", full_a);
    if (!fs && !as) return 0;
    if (!fs || !as)
        return store_error_set(err, path, "metadata '%s' without '%stemperature_%s'",
                               fs ? full : full_a, prefix, fs ? "attn_scale" : "floor_scale");
    if (eps_of(&nm, "temperature_floor_scale", &w->temperature.floor_scale)) return -1;
    char *end;
    double a = strtod(as, &end);
    if (end == as || *end || !(fabs(a) <= FLT_MAX))
        return store_error_set(err, path, "metadata '%s' is '%s', not a finite number", full_a, as);
    w->temperature.attn_scale = a;
    if (rope_dims)
        return store_error_set(err, path,
                               "metadata '%s' beside RoPE: the temperature is for a layer "
                               "without it",
                               full);
    return 0;
}

void store_norms_bind(attn_weights *w, const attn_weights *checked, const float *const *p) {
    w->norm = checked->norm;
    w->norm.weight = p[STORE_NORM_WEIGHT];
    w->norm.bias = p[STORE_NORM_BIAS];
    w->post_norm = checked->post_norm;
    w->post_norm.weight = p[STORE_POST_NORM_WEIGHT];
    w->post_norm.bias = p[STORE_POST_NORM_BIAS];
    w->qk_norm = checked->qk_norm;
    w->qk_norm.q.weight = p[STORE_Q_NORM_WEIGHT];
    w->qk_norm.k.weight = p[STORE_K_NORM_WEIGHT];
    w->temperature = checked->temperature;
}
