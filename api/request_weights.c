/*
 * request_weights.c — an inline weight set, from JSON to attn_weights.
 *
 * Two passes over `weights`. The first checks its outline without
 * allocating: known fields only (a typo like "W_q" is refused, not
 * ignored), every head with w_q of d_model rows and d_head columns (d_head
 * is head 0's w_q width), w_k and w_v beside it, or, with kv_heads, in g
 * K/V heads instead (g dividing h); w_o of (h·d_head) × d_model, or no w_o
 * and h·d_head == d_model; the limits on heads and d_head; and the
 * variants (rope, alibi, window, softcap, scale), read at once since they
 * are small. The second allocates the packed buffers and copies the
 * numbers, in the layout attention.h describes (gd = g·dh, K/V head u is
 * kv_heads[u], or heads[u] without kv_heads):
 *
 *   self-attention (no request context):
 *     w_qkv   dm × (hd + 2gd)   head i's w_q at column i·dh, K/V head u's
 *                               w_k at hd + u·dh, w_v at hd + gd + u·dh
 *     b_qkv   hd + 2gd          same columns; zeros for a missing bias;
 *                               NULL when there is none at all
 *   cross-attention (a context of width dc): K and V project its rows
 *     w_qkv   dm × hd           Q alone; b_qkv hd, or NULL without b_q
 *     w_kv    dc × 2gd          w_k at u·dh, w_v at gd + u·dh
 *     b_kv    2gd               or NULL without b_k and b_v
 *
 * The buffers belong to the request (freed by api_request_free).
 */
#include "api/float32.h"
#include "api/request_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/json_path.h"
#include "api/matrix.h"

static const char *const weights_fields[] = {"heads", "kv_heads", "w_o", "b_o", "rope", "alibi",
                                             "window", "softcap", "scale",
                                             /* request_norm.c */
                                             "norm", "post_norm", "qk_norm", "temperature",
                                             /* request_sinks.c */
                                             "sinks", "chunk"};
static const char *const head_fields[] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v"};
static const char *const kv_fields[] = {"w_k", "w_v", "b_k", "b_v"};
static const char *const rope_fields[] = {"theta", "dims", "style", "scaling"};
static const char *const linear_fields[] = {"type", "factor"};
static const char *const llama3_fields[] = {"type", "factor", "low_freq_factor", "high_freq_factor",
                                            "original_max_position_embeddings"};

/* Integers a double holds exactly: window's largest. */
#define EXACT_INTEGER_MAX 9007199254740992.0 /* 2^53 */

/* Names and paths of one field of an element of a list of heads:
 * "weights.heads[1].w_k", "/weights/heads/1/w_k". */
static void head_field_names(const char *list, size_t i, const char *field, char *name,
                             size_t name_cap, char *path, size_t path_cap) {
    snprintf(name, name_cap, "weights.%s[%zu].%s", list, i, field);
    snprintf(path, path_cap, "/weights/%s/%zu/%s", list, i, field);
}

/* The shape of one projection: `rows` rows (d_model, or d_context: `rows_what`)
 * and d_head columns; *dh is 0 for the first, which fixes it. */
static int check_projection(const api_arrays *lifted, const json_t *obj, const char *list, size_t i,
                            const char *field, size_t rows_want, const char *rows_what, size_t *dh,
                            const api_limits *limits, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *m = json_object_get(obj, field);
    size_t rows, cols;

    head_field_names(list, i, field, name, sizeof name, path, sizeof path);
    if (m == NULL) return attn_error_set(err, 400, "missing_field", path, "%s is required", name);
    if (api_matrix_shape(m, lifted, name, path, &rows, &cols, err) < 0) return -1;
    if (rows != rows_want)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has %zu rows, expected %s = %zu", name, rows, rows_what,
                              rows_want);
    if (*dh == 0) {
        if (limits && cols > limits->max_d_model)
            return attn_error_set(err, 422, "limit_exceeded", path,
                                  "%s has %zu columns (d_head), over the limit max_d_model = %zu",
                                  name, cols, limits->max_d_model);
        *dh = cols;
    } else if (cols != *dh) {
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has %zu columns, expected d_head = %zu (the width of "
                              "weights.heads[0].w_q; all heads share d_head)",
                              name, cols, *dh);
    }
    return 0;
}

/* What pass 1 learns of the outline. */
typedef struct outline {
    size_t dm, kv_rows; /* rows of w_q; of w_k and w_v (d_context with a context) */
    const char *kv_rows_what;
    size_t h, g, dh;
    int grouped;         /* kv_heads given */
    int q_bias, kv_bias; /* some b_q; some b_k or b_v */
    const api_limits *limits;
} outline;

/* Pass 1 for one head: its type, fields and shapes. */
static int check_head(const api_arrays *lifted, const json_t *head, size_t i, outline *o,
                      attn_error *err) {
    char name[96], path[API_PATH_MAX];

    snprintf(name, sizeof name, "weights.heads[%zu]", i);
    snprintf(path, sizeof path, "/weights/heads/%zu", i);
    if (!json_is_object(head))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected an object with %s",
                              name, api_json_type_name(head), o->grouped ? "w_q" : "w_q, w_k, w_v");
    if (o->grouped)
        for (size_t f = 0; f < 4; f++)
            if (json_object_get(head, kv_fields[f])) {
                head_field_names("heads", i, kv_fields[f], name, sizeof name, path, sizeof path);
                return attn_error_set(err, 400, "unknown_field", path,
                                      "%s is given beside weights.kv_heads; with kv_heads a head "
                                      "has only w_q and b_q, K and V are the K/V heads'",
                                      name);
            }
    if (api_check_fields(head, head_fields, 6, name, path, "w_q, w_k, w_v, b_q, b_k, b_v", err) < 0)
        return -1;
    if (check_projection(lifted, head, "heads", i, "w_q", o->dm, "d_model", &o->dh, o->limits,
                         err) < 0)
        return -1;
    if (!o->grouped)
        for (size_t p = 0; p < 2; p++)
            if (check_projection(lifted, head, "heads", i, kv_fields[p], o->kv_rows,
                                 o->kv_rows_what, &o->dh, o->limits, err) < 0)
                return -1;
    if (json_object_get(head, "b_q")) o->q_bias = 1;
    if (json_object_get(head, "b_k") || json_object_get(head, "b_v")) o->kv_bias = 1;
    return 0;
}

/* Pass 1 for kv_heads: g objects {w_k, w_v, b_k?, b_v?}, g dividing h. */
static int check_kv_heads(const api_arrays *lifted, const json_t *kv, outline *o, attn_error *err) {
    char name[96], path[API_PATH_MAX];

    if (!json_is_array(kv))
        return attn_error_set(err, 400, "wrong_type", "/weights/kv_heads",
                              "weights.kv_heads is %s, expected an array of K/V heads",
                              api_json_type_name(kv));
    o->g = json_array_size(kv);
    if (o->g == 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/kv_heads",
                              "weights.kv_heads is empty; at least one K/V head is needed");
    for (size_t u = 0; u < o->g; u++) {
        const json_t *head = json_array_get(kv, u);
        snprintf(name, sizeof name, "weights.kv_heads[%zu]", u);
        snprintf(path, sizeof path, "/weights/kv_heads/%zu", u);
        if (!json_is_object(head))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "%s is %s, expected an object with w_k, w_v", name,
                                  api_json_type_name(head));
        if (api_check_fields(head, kv_fields, 4, name, path, "w_k, w_v, b_k, b_v", err) < 0)
            return -1;
    }
    /* Each K/V head serves h/g consecutive query heads. */
    if (o->h % o->g != 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/kv_heads",
                              "weights.kv_heads has %zu K/V heads, which does not divide "
                              "n_heads = %zu",
                              o->g, o->h);
    for (size_t u = 0; u < o->g; u++) {
        const json_t *head = json_array_get(kv, u);
        for (size_t p = 0; p < 2; p++)
            if (check_projection(lifted, head, "kv_heads", u, kv_fields[p], o->kv_rows,
                                 o->kv_rows_what, &o->dh, o->limits, err) < 0)
                return -1;
        if (json_object_get(head, "b_k") || json_object_get(head, "b_v")) o->kv_bias = 1;
    }
    return 0;
}

static int check_w_o(const api_arrays *lifted, const json_t *w_o, size_t h, size_t dh, size_t dm,
                     attn_error *err) {
    size_t rows, cols, hd = h * dh; /* bounded by the limits, or by memory: checked by caller */

    if (w_o == NULL) {
        if (hd != dm)
            return attn_error_set(err, 422, "dimension_mismatch", "/weights",
                                  "weights has no w_o, so w_o is the identity, which needs "
                                  "n_heads · d_head = d_model; here %zu · %zu = %zu, d_model = %zu",
                                  h, dh, hd, dm);
        return 0;
    }
    if (api_matrix_shape(w_o, lifted, "weights.w_o", "/weights/w_o", &rows, &cols, err) < 0)
        return -1;
    if (rows != hd)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/w_o",
                              "weights.w_o has %zu rows, expected n_heads · d_head = %zu · %zu = "
                              "%zu",
                              rows, h, dh, hd);
    if (cols != dm)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/w_o",
                              "weights.w_o has %zu columns, expected d_model = %zu", cols, dm);
    return 0;
}

/* ---- the variants ---------------------------------------------------------- */

/* A number > 0, kept as a double (RoPE's frequencies are computed in
 * double), but like every number of the contract finite as a float32. */
static int positive_number(const json_t *v, const char *name, const char *path, double *out,
                           attn_error *err) {
    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected a number > 0", name,
                              api_json_type_name(v));
    *out = json_number_value(v);
    if (!api_double_fits_float32(*out))
        return attn_error_set(err, 422, "non_finite_number", path,
                              "%s = %.17g is too large for a finite float32", name, *out);
    if (!(*out > 0))
        return attn_error_set(err, 422, "out_of_range", path, "%s must be > 0, got %g", name, *out);
    return 0;
}

/* An integer in [least, most]; a fraction is not an integer, a wrong
 * type (400) as in select_heads and positions. */
static int integer_in(const json_t *v, const char *name, const char *path, double least,
                      double most, double *out, attn_error *err) {
    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected an integer", name,
                              api_json_type_name(v));
    if (floor(json_number_value(v)) != json_number_value(v))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s = %.16g is not an integer, expected an integer", name,
                              json_number_value(v));
    *out = json_number_value(v);
    if (!(*out >= least && *out <= most))
        return attn_error_set(err, 422, "out_of_range", path,
                              "%s must be an integer from %.0f to %.0f, got %.16g", name, least,
                              most, *out);
    return 0;
}

/* A word of `words` into *index: 400 wrong_type or invalid_value otherwise,
 * as for mask and encoding. */
static int word_of(const json_t *v, const char *name, const char *path, const char *const *words,
                   size_t n_words, const char *expected, int *index, attn_error *err) {
    if (!json_is_string(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected %s", name,
                              api_json_type_name(v), expected);
    for (size_t i = 0; i < n_words; i++)
        if (json_string_length(v) == strlen(words[i]) &&
            memcmp(json_string_value(v), words[i], strlen(words[i])) == 0) {
            *index = (int)i;
            return 0;
        }
    return attn_error_set(err, 400, "invalid_value", path, "%s must be %s", name, expected);
}

static int decode_scaling(api_request *req, const json_t *s, attn_rope *rope, attn_error *err) {
    static const char *const types[] = {"linear", "llama3", "yarn", "longrope"};
    const char *path = "/weights/rope/scaling";
    int type;

    if (!json_is_object(s))
        return attn_error_set(err, 400, "wrong_type", path,
                              "weights.rope.scaling is %s, expected an object with type and "
                              "factor",
                              api_json_type_name(s));
    const json_t *t = json_object_get(s, "type");
    if (t == NULL)
        return attn_error_set(err, 400, "missing_field", "/weights/rope/scaling/type",
                              "weights.rope.scaling.type (\"linear\", \"llama3\", \"yarn\" or "
                              "\"longrope\") is required");
    if (word_of(t, "weights.rope.scaling.type", "/weights/rope/scaling/type", types, 4,
                "\"linear\", \"llama3\", \"yarn\" or \"longrope\"", &type, err) < 0)
        return -1;
    if (type >= 2) { /* request_rope.c */
        rope->scaling = type == 2 ? ATTN_ROPE_SCALING_YARN : ATTN_ROPE_SCALING_LONGROPE;
        return api_rope_scaling_decode_long(req, s, rope, err);
    }
    if (type == 0 ? api_check_fields(s, linear_fields, 2, "weights.rope.scaling", path,
                                     "type, factor (for \"linear\")", err)
                  : api_check_fields(s, llama3_fields, 5, "weights.rope.scaling", path,
                                     "type, factor, low_freq_factor, high_freq_factor, "
                                     "original_max_position_embeddings (for \"llama3\")",
                                     err))
        return -1;
    rope->scaling = type == 0 ? ATTN_ROPE_SCALING_LINEAR : ATTN_ROPE_SCALING_LLAMA3;
    static const struct {
        const char *key;
        size_t offset;
    } params[] = {
        {"factor", offsetof(attn_rope, factor)},
        {"low_freq_factor", offsetof(attn_rope, low_freq_factor)},
        {"high_freq_factor", offsetof(attn_rope, high_freq_factor)},
        {"original_max_position_embeddings", offsetof(attn_rope, original_max_position)},
    };
    for (size_t i = 0; i < (type == 0 ? 1u : 4u); i++) {
        char name[96], p[API_PATH_MAX];
        const json_t *v = json_object_get(s, params[i].key);
        snprintf(name, sizeof name, "weights.rope.scaling.%s", params[i].key);
        api_path_key(p, sizeof p, path, params[i].key);
        if (v == NULL) return attn_error_set(err, 400, "missing_field", p, "%s is required", name);
        if (positive_number(v, name, p, (double *)(void *)((char *)rope + params[i].offset), err) <
            0)
            return -1;
    }
    /* The band in between is L/u ≤ λ ≤ L/l: u = l leaves none (Llama 4
     * Scout), u < l would turn it inside out. */
    if (type == 1 && rope->high_freq_factor < rope->low_freq_factor)
        return attn_error_set(err, 422, "out_of_range", "/weights/rope/scaling/high_freq_factor",
                              "weights.rope.scaling.high_freq_factor (%g) must not be below "
                              "low_freq_factor (%g)",
                              rope->high_freq_factor, rope->low_freq_factor);
    return 0;
}

static int decode_rope(api_request *req, const json_t *r, size_t dh, attn_rope *rope,
                       attn_error *err) {
    static const char *const styles[] = {"half", "interleaved"};
    const json_t *v;
    double d;

    if (!json_is_object(r))
        return attn_error_set(err, 400, "wrong_type", "/weights/rope",
                              "weights.rope is %s, expected an object (theta, dims, style, "
                              "scaling)",
                              api_json_type_name(r));
    if (api_check_fields(r, rope_fields, 4, "weights.rope", "/weights/rope",
                         "theta, dims, style, scaling", err) < 0)
        return -1;
    *rope = (attn_rope){.dims = dh, .theta = 10000.0, .style = ATTN_ROPE_HALF};
    if ((v = json_object_get(r, "theta")) &&
        positive_number(v, "weights.rope.theta", "/weights/rope/theta", &rope->theta, err) < 0)
        return -1;
    if ((v = json_object_get(r, "dims"))) {
        if (integer_in(v, "weights.rope.dims", "/weights/rope/dims", 2, (double)dh, &d, err) < 0)
            return -1;
        if ((size_t)d % 2 != 0)
            return attn_error_set(err, 422, "out_of_range", "/weights/rope/dims",
                                  "weights.rope.dims must be even (coordinates rotate in pairs), "
                                  "got %.0f",
                                  d);
        rope->dims = (size_t)d;
    } else if (dh % 2 != 0) {
        return attn_error_set(err, 422, "out_of_range", "/weights/rope",
                              "d_head = %zu is odd, so weights.rope needs dims: an even number of "
                              "coordinates to rotate, at most d_head",
                              dh);
    }
    if ((v = json_object_get(r, "style"))) {
        int style;
        if (word_of(v, "weights.rope.style", "/weights/rope/style", styles, 2,
                    "\"half\" or \"interleaved\"", &style, err) < 0)
            return -1;
        rope->style = style ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALF;
    }
    if ((v = json_object_get(r, "scaling")) && decode_scaling(req, v, rope, err) < 0) return -1;
    return 0;
}

/* rope, alibi, window, softcap, scale, then sinks and chunk (request_sinks.c),
 * into w (d_head and n_heads known). */
static int decode_variants(api_request *req, const json_t *weights, attn_weights *w,
                           attn_error *err) {
    const json_t *v;
    double d;

    if ((v = json_object_get(weights, "rope")) && decode_rope(req, v, w->d_head, &w->rope, err) < 0)
        return -1;
    if ((v = json_object_get(weights, "alibi")) && !json_is_false(v)) {
        if (!json_is_true(v) && !json_is_array(v) && !json_is_object(v))
            return attn_error_set(err, 400, "wrong_type", "/weights/alibi",
                                  "weights.alibi is %s, expected true, false or n_heads slopes",
                                  api_json_type_name(v));
        req->alibi = malloc(w->n_heads * sizeof(float));
        if (req->alibi == NULL)
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
        if (json_is_true(v))
            attn_alibi_slopes(req->alibi, w->n_heads);
        else if (api_vector_read(v, req->arrays, "weights.alibi", "/weights/alibi", w->n_heads,
                                 "n_heads", req->alibi, err) < 0)
            return -1;
        w->alibi = req->alibi;
    }
    if ((v = json_object_get(weights, "window"))) {
        if (integer_in(v, "weights.window", "/weights/window", 1, EXACT_INTEGER_MAX, &d, err) < 0)
            return -1;
        w->window = (size_t)d;
    }
    if ((v = json_object_get(weights, "softcap"))) {
        if (api_number_read(v, "weights.softcap", "/weights/softcap", &w->softcap, err) < 0)
            return -1;
        if (!(w->softcap > 0.0f))
            return attn_error_set(err, 422, "out_of_range", "/weights/softcap",
                                  "weights.softcap must be > 0 (as a float32), got %g",
                                  json_number_value(v));
    }
    if ((v = json_object_get(weights, "scale"))) {
        if (api_number_read(v, "weights.scale", "/weights/scale", &w->scale, err) < 0) return -1;
        if (!(w->scale > 0.0f))
            return attn_error_set(err, 422, "out_of_range", "/weights/scale",
                                  "weights.scale must be > 0 (as a float32), got %g",
                                  json_number_value(v));
    }
    if (api_norms_decode(req, weights, w, err) < 0) /* norm, post_norm, qk_norm, temperature */
        return -1;
    return api_weights_decode_sinks(req, weights, w, err);
}

/* ---- pass 2 ------------------------------------------------------------------ */

/* Copies obj's matrix `field` to dst (row stride ld) and its bias `bias`, when
 * given, to bias_dst. */
static int read_projection(api_request *req, const json_t *obj, const char *list, size_t i,
                           const char *field, const char *bias, float *dst, size_t ld,
                           float *bias_dst, size_t dh, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *b = json_object_get(obj, bias);

    head_field_names(list, i, field, name, sizeof name, path, sizeof path);
    if (api_matrix_read(json_object_get(obj, field), req->arrays, name, path, dst, ld, err) < 0)
        return -1;
    if (b == NULL) return 0;
    head_field_names(list, i, bias, name, sizeof name, path, sizeof path);
    return api_vector_read(b, req->arrays, name, path, dh, "d_head", bias_dst, err);
}

int api_weights_decode(api_request *req, size_t d_model, size_t d_context, const json_t *weights,
                       const api_limits *limits, attn_error *err) {
    const json_t *heads = json_object_get(weights, "heads");
    const json_t *kv = json_object_get(weights, "kv_heads");
    const json_t *w_o = json_object_get(weights, "w_o");
    const json_t *b_o = json_object_get(weights, "b_o");
    size_t hd, gd, q_cols, kv_cols, qkv_cols, qkv_count, kv_count = 0, o_count;
    int cross = d_context != 0;
    outline o = {.dm = d_model,
                 .kv_rows = cross ? d_context : d_model,
                 .kv_rows_what = cross ? "d_context (the width of context)" : "d_model",
                 .grouped = kv != NULL,
                 .limits = limits};

    if (api_check_fields(weights, weights_fields, sizeof weights_fields / sizeof *weights_fields,
                         "weights", "/weights",
                         "heads, kv_heads, w_o, b_o, rope, alibi, window, softcap, scale, norm, "
                         "post_norm, qk_norm, temperature, sinks, chunk",
                         err) < 0)
        return -1;
    if (heads == NULL)
        return attn_error_set(err, 400, "missing_field", "/weights/heads",
                              "weights.heads (an array of heads) is required");
    if (!json_is_array(heads))
        return attn_error_set(err, 400, "wrong_type", "/weights/heads",
                              "weights.heads is %s, expected an array of heads",
                              api_json_type_name(heads));
    o.h = json_array_size(heads);
    if (o.h == 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/heads",
                              "weights.heads is empty; at least one head is needed");
    if (limits && o.h > limits->max_heads)
        return attn_error_set(err, 422, "limit_exceeded", "/weights/heads",
                              "weights.heads has %zu heads, over the limit max_heads = %zu", o.h,
                              limits->max_heads);
    o.g = o.h;
    /* kv_heads' own type first: it decides what a head may hold */
    if (kv && !json_is_array(kv))
        return attn_error_set(err, 400, "wrong_type", "/weights/kv_heads",
                              "weights.kv_heads is %s, expected an array of K/V heads",
                              api_json_type_name(kv));
    for (size_t i = 0; i < o.h; i++)
        if (check_head(req->arrays, json_array_get(heads, i), i, &o, err) < 0) return -1;
    if (kv && check_kv_heads(req->arrays, kv, &o, err) < 0) return -1;
    size_t h = o.h, g = o.g, dh = o.dh, dm = o.dm, dc = o.kv_rows;
    if (api_size_mul(h, dh, &hd) < 0 || api_size_mul(g, dh, &gd) < 0 ||
        api_size_mul(gd, 2, &kv_cols) < 0 || api_size_add(hd, cross ? 0 : kv_cols, &q_cols) < 0 ||
        api_size_mul(dm, q_cols, &qkv_count) < 0 ||
        (cross && api_size_mul(dc, kv_cols, &kv_count) < 0) || api_size_mul(hd, dm, &o_count) < 0 ||
        qkv_count > SIZE_MAX / sizeof(float) || kv_count > SIZE_MAX / sizeof(float) ||
        o_count > SIZE_MAX / sizeof(float))
        return attn_error_set(err, 503, "out_of_memory", "/weights",
                              "the weights are too large to hold in memory");
    qkv_cols = q_cols;
    if (check_w_o(req->arrays, w_o, h, dh, dm, err) < 0) return -1;

    req->inline_weights =
        (attn_weights){.d_model = dm, .n_heads = h, .d_head = dh, .n_kv_heads = g};
    if (decode_variants(req, weights, &req->inline_weights, err) < 0) return -1;

    int q_bias = o.q_bias || (!cross && o.kv_bias), kv_bias = cross && o.kv_bias;
    req->w_qkv = malloc(qkv_count * sizeof(float));
    if (q_bias) req->b_qkv = calloc(qkv_cols, sizeof(float));
    if (cross) req->w_kv = malloc(kv_count * sizeof(float));
    if (kv_bias) req->b_kv = calloc(kv_cols, sizeof(float));
    if (w_o) req->w_o = malloc(o_count * sizeof(float));
    if (b_o) req->b_o = malloc(dm * sizeof(float));
    if (req->w_qkv == NULL || (q_bias && req->b_qkv == NULL) || (cross && req->w_kv == NULL) ||
        (kv_bias && req->b_kv == NULL) || (w_o && req->w_o == NULL) || (b_o && req->b_o == NULL))
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
    api_advise_huge_pages(req->w_qkv, qkv_count * sizeof(float));
    if (w_o) api_advise_huge_pages(req->w_o, o_count * sizeof(float));

    /* K and V: in w_qkv after Q, or in w_kv of their own. */
    float *kv_w = cross ? req->w_kv : req->w_qkv + hd;
    float *kv_b = cross ? req->b_kv : req->b_qkv ? req->b_qkv + hd : NULL;
    size_t kv_ld = cross ? kv_cols : qkv_cols;
    for (size_t i = 0; i < h; i++)
        if (read_projection(req, json_array_get(heads, i), "heads", i, "w_q", "b_q",
                            req->w_qkv + i * dh, qkv_cols, req->b_qkv ? req->b_qkv + i * dh : NULL,
                            dh, err) < 0)
            return -1;
    for (size_t u = 0; u < g; u++) {
        const json_t *src = kv ? json_array_get(kv, u) : json_array_get(heads, u);
        const char *list = kv ? "kv_heads" : "heads";
        if (read_projection(req, src, list, u, "w_k", "b_k", kv_w + u * dh, kv_ld,
                            kv_b ? kv_b + u * dh : NULL, dh, err) < 0 ||
            read_projection(req, src, list, u, "w_v", "b_v", kv_w + gd + u * dh, kv_ld,
                            kv_b ? kv_b + gd + u * dh : NULL, dh, err) < 0)
            return -1;
    }
    if (w_o &&
        api_matrix_read(w_o, req->arrays, "weights.w_o", "/weights/w_o", req->w_o, dm, err) < 0)
        return -1;
    if (b_o && api_vector_read(b_o, req->arrays, "weights.b_o", "/weights/b_o", dm, "d_model",
                               req->b_o, err) < 0)
        return -1;

    attn_weights *w = &req->inline_weights;
    w->w_qkv = req->w_qkv;
    w->b_qkv = req->b_qkv;
    w->w_o = req->w_o;
    w->b_o = req->b_o;
    w->d_context = dc;
    w->w_kv = req->w_kv;
    w->b_kv = req->b_kv;
    return 0;
}
