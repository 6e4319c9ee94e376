/*
 * request_rope.c — weights.rope.scaling of the long-context types, "yarn"
 * and "longrope" (docs/API.md, "Attention of 2025–2026 models"), from
 * JSON to attn_rope; request_weights.c reads the type and hands these two
 * here.
 *
 *   yarn      factor s > 0 and original_max_position_embeddings L > 0
 *             required; beta_fast, beta_slow > 0 (32 and 1 when absent),
 *             mscale and mscale_all_dim any numbers (used when both ≠ 0),
 *             attention_factor > 0, truncate a boolean (true)
 *   longrope  short_factor and long_factor, dims/2 numbers > 0 each (a
 *             list or a tensor object), L > 0 required; factor > 0 and
 *             attention_factor > 0 optional
 *
 * Whatever the fields, the attention factor the engine will use (the
 * given one or the default, attn_rope_attention_factor) must be finite
 * and > 0: an mscale_all_dim whose mscale is 0, or a longrope L ≤ 1 with
 * s > 1 (ln L in a denominator), is a 422 at /weights/rope/scaling.
 *
 * longrope's two lists live in req->rope_factors (dims floats: short,
 * then long), freed with the request like its other weight buffers.
 */
#include "api/float32.h"
#include "api/request_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/json_path.h"
#include "api/matrix.h"

#define SCALING      "/weights/rope/scaling"
#define SCALING_NAME "weights.rope.scaling"

static const char *const yarn_fields[] = {
    "type",           "factor",           "original_max_position_embeddings",
    "beta_fast",      "beta_slow",        "mscale",
    "mscale_all_dim", "attention_factor", "truncate"};
static const char *const longrope_fields[] = {"type",        "short_factor",
                                              "long_factor", "original_max_position_embeddings",
                                              "factor",      "attention_factor"};

/* Field `key` of s as a number into *out: absent is 0 (or a 400 when
 * `required`); a number finite as a float32, and > 0 when `positive`. */
static int number_field(const json_t *s, const char *key, int required, int positive, double *out,
                        attn_error *err) {
    char name[96], path[API_PATH_MAX];
    const json_t *v = json_object_get(s, key);
    snprintf(name, sizeof name, SCALING_NAME ".%s", key);
    api_path_key(path, sizeof path, SCALING, key);
    if (v == NULL)
        return required ? attn_error_set(err, 400, "missing_field", path, "%s is required", name)
                        : 0;
    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected a number%s", name,
                              api_json_type_name(v), positive ? " > 0" : "");
    *out = json_number_value(v);
    if (!api_double_fits_float32(*out))
        return attn_error_set(err, 422, "non_finite_number", path,
                              "%s = %.17g is too large for a finite float32", name, *out);
    if (positive && !(*out > 0))
        return attn_error_set(err, 422, "out_of_range", path, "%s must be > 0, got %g", name, *out);
    return 0;
}

/* A factor list: dims/2 numbers, each > 0, into dst. */
static int factor_list(api_request *req, const json_t *s, const char *key, size_t half, float *dst,
                       attn_error *err) {
    char name[96], path[API_PATH_MAX], at[API_PATH_MAX + 24];
    const json_t *v = json_object_get(s, key);
    snprintf(name, sizeof name, SCALING_NAME ".%s", key);
    api_path_key(path, sizeof path, SCALING, key);
    if (v == NULL) return attn_error_set(err, 400, "missing_field", path, "%s is required", name);
    if (api_vector_read(v, req->arrays, name, path, half, "rope dims/2", dst, err) < 0) return -1;
    for (size_t t = 0; t < half; t++)
        if (!(dst[t] > 0)) {
            snprintf(at, sizeof at, "%s/%zu", path, t);
            return attn_error_set(err, 422, "out_of_range", at,
                                  "%s[%zu] must be > 0 (f_t is divided by it), got %g", name, t,
                                  (double)dst[t]);
        }
    return 0;
}

static int decode_yarn(const json_t *s, attn_rope *rope, attn_error *err) {
    if (api_check_fields(s, yarn_fields, sizeof yarn_fields / sizeof yarn_fields[0], SCALING_NAME,
                         SCALING,
                         "type, factor, original_max_position_embeddings, beta_fast, beta_slow, "
                         "mscale, mscale_all_dim, attention_factor, truncate (for \"yarn\")",
                         err) < 0)
        return -1;
    if (number_field(s, "factor", 1, 1, &rope->factor, err) < 0 ||
        number_field(s, "original_max_position_embeddings", 1, 1, &rope->original_max_position,
                     err) < 0 ||
        number_field(s, "beta_fast", 0, 1, &rope->beta_fast, err) < 0 ||
        number_field(s, "beta_slow", 0, 1, &rope->beta_slow, err) < 0 ||
        number_field(s, "mscale", 0, 0, &rope->mscale, err) < 0 ||
        number_field(s, "mscale_all_dim", 0, 0, &rope->mscale_all_dim, err) < 0 ||
        number_field(s, "attention_factor", 0, 1, &rope->attention_factor, err) < 0)
        return -1;
    const json_t *t = json_object_get(s, "truncate");
    if (t != NULL && !json_is_boolean(t))
        return attn_error_set(err, 400, "wrong_type", SCALING "/truncate",
                              SCALING_NAME ".truncate is %s, expected true or false",
                              api_json_type_name(t));
    rope->untruncated = json_is_false(t);
    return 0;
}

static int decode_longrope(api_request *req, const json_t *s, attn_rope *rope, attn_error *err) {
    if (api_check_fields(s, longrope_fields, sizeof longrope_fields / sizeof longrope_fields[0],
                         SCALING_NAME, SCALING,
                         "type, short_factor, long_factor, original_max_position_embeddings, "
                         "factor, attention_factor (for \"longrope\")",
                         err) < 0)
        return -1;
    const size_t half = rope->dims / 2;
    free(req->rope_factors);
    req->rope_factors = malloc(2 * half * sizeof(float));
    if (req->rope_factors == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
    if (factor_list(req, s, "short_factor", half, req->rope_factors, err) < 0 ||
        factor_list(req, s, "long_factor", half, req->rope_factors + half, err) < 0 ||
        number_field(s, "original_max_position_embeddings", 1, 1, &rope->original_max_position,
                     err) < 0 ||
        number_field(s, "factor", 0, 1, &rope->factor, err) < 0 ||
        number_field(s, "attention_factor", 0, 1, &rope->attention_factor, err) < 0)
        return -1;
    rope->short_factor = req->rope_factors;
    rope->long_factor = req->rope_factors + half;
    return 0;
}

int api_rope_scaling_decode_long(api_request *req, const json_t *scaling, attn_rope *rope,
                                 attn_error *err) {
    int rc = rope->scaling == ATTN_ROPE_SCALING_YARN ? decode_yarn(scaling, rope, err)
                                                     : decode_longrope(req, scaling, rope, err);
    if (rc < 0) return -1;
    double a = attn_rope_attention_factor(rope);
    if (!(a > 0 && api_double_fits_float32(a)))
        return attn_error_set(err, 422, "out_of_range", SCALING,
                              SCALING_NAME "'s attention factor would be %g; it must be finite and "
                                           "> 0 (give attention_factor, or mscale and "
                                           "mscale_all_dim with 0.1·m·ln(factor) + 1 > 0, or "
                                           "original_max_position_embeddings > 1)",
                              a);
    return 0;
}
