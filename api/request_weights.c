/*
 * request_weights.c — an inline weight set, from JSON to attn_weights.
 *
 * Two passes over `weights`. The first checks its outline without
 * allocating: known fields only (a typo like "W_q" is refused, not
 * ignored), every head with w_q, w_k, w_v of d_model rows and d_head
 * columns (d_head is head 0's w_q width), w_o of (h·d_head) × d_model, or
 * no w_o and h·d_head == d_model; and the limits on heads and d_head. The
 * second allocates the packed buffers and copies the numbers:
 *
 *   w_qkv   dm × 3hd   head i's w_q at columns i·dh, w_k at hd + i·dh,
 *                      w_v at 2hd + i·dh (the layout attention.h describes)
 *   b_qkv   3hd        same columns; zeros for a head without that bias;
 *                      NULL when no head has any bias
 *
 * The buffers belong to the request (freed by api_request_free).
 */
#include "api/request_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/json_path.h"
#include "api/matrix.h"

static const char *const weights_fields[] = {"heads", "w_o", "b_o"};
static const char *const head_fields[] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v"};

/* Refuses a key of `obj` not in `known`. */
static int check_fields(const json_t *obj, const char *const *known, size_t n_known,
                        const char *name, const char *path, const char *expected, attn_error *err) {
    const char *key;
    json_t *value;

    json_object_foreach((json_t *)obj, key, value) {
        size_t i;
        for (i = 0; i < n_known && strcmp(key, known[i]) != 0; i++)
            continue;
        if (i == n_known) {
            char p[API_PATH_MAX];
            api_path_key(p, sizeof p, path, key);
            return attn_error_set(err, 400, "unknown_field", p,
                                  "unknown field \"%s\" in %s; expected %s", key, name, expected);
        }
    }
    return 0;
}

/* Names and paths of one head's fields: "weights.heads[1].w_k", "/weights/heads/1/w_k". */
static void head_field_names(size_t i, const char *field, char *name, size_t name_cap, char *path,
                             size_t path_cap) {
    snprintf(name, name_cap, "weights.heads[%zu].%s", i, field);
    snprintf(path, path_cap, "/weights/heads/%zu/%s", i, field);
}

/* Pass 1 for one head: its type, fields and the shapes of w_q, w_k, w_v.
 * *dh is 0 on entry for head 0, which fixes it. */
static int check_head(const api_arrays *lifted, const json_t *head, size_t i, size_t dm, size_t *dh,
                      const api_limits *limits, int *has_bias, attn_error *err) {
    char name[96], path[API_PATH_MAX];
    static const char *const projections[] = {"w_q", "w_k", "w_v"};

    snprintf(name, sizeof name, "weights.heads[%zu]", i);
    snprintf(path, sizeof path, "/weights/heads/%zu", i);
    if (!json_is_object(head))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s is %s, expected an object with w_q, w_k, w_v", name,
                              api_json_type_name(head));
    if (check_fields(head, head_fields, 6, name, path, "w_q, w_k, w_v, b_q, b_k, b_v", err) < 0)
        return -1;
    for (size_t p = 0; p < 3; p++) {
        const json_t *m = json_object_get(head, projections[p]);
        size_t rows, cols;
        head_field_names(i, projections[p], name, sizeof name, path, sizeof path);
        if (m == NULL)
            return attn_error_set(err, 400, "missing_field", path, "%s is required", name);
        if (api_matrix_shape(m, lifted, name, path, &rows, &cols, err) < 0) return -1;
        if (rows != dm)
            return attn_error_set(err, 422, "dimension_mismatch", path,
                                  "%s has %zu rows, expected d_model = %zu", name, rows, dm);
        if (*dh == 0) {
            if (limits && cols > limits->max_d_model)
                return attn_error_set(err, 422, "limit_exceeded", path,
                                      "%s has %zu columns (d_head), over the limit "
                                      "max_d_model = %zu",
                                      name, cols, limits->max_d_model);
            *dh = cols;
        } else if (cols != *dh) {
            return attn_error_set(err, 422, "dimension_mismatch", path,
                                  "%s has %zu columns, expected d_head = %zu (the width of "
                                  "weights.heads[0].w_q; all heads share d_head)",
                                  name, cols, *dh);
        }
    }
    if (json_object_get(head, "b_q") || json_object_get(head, "b_k") ||
        json_object_get(head, "b_v"))
        *has_bias = 1;
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

/* Pass 2 for one head: copies its matrices and biases into the packed buffers. */
static int read_head(api_request *req, const json_t *head, size_t i, size_t hd, size_t dh,
                     attn_error *err) {
    static const char *const w[] = {"w_q", "w_k", "w_v"};
    static const char *const b[] = {"b_q", "b_k", "b_v"};
    char name[96], path[API_PATH_MAX];
    size_t ld = 3 * hd;

    for (size_t p = 0; p < 3; p++) {
        size_t col = p * hd + i * dh;
        const json_t *bias = json_object_get(head, b[p]);
        head_field_names(i, w[p], name, sizeof name, path, sizeof path);
        if (api_matrix_read(json_object_get(head, w[p]), req->arrays, name, path, req->w_qkv + col,
                            ld, err) < 0)
            return -1;
        if (bias == NULL) continue;
        head_field_names(i, b[p], name, sizeof name, path, sizeof path);
        if (api_vector_read(bias, req->arrays, name, path, dh, "d_head", req->b_qkv + col, err) < 0)
            return -1;
    }
    return 0;
}

int api_weights_decode(api_request *req, const json_t *weights, const api_limits *limits,
                       attn_error *err) {
    const json_t *heads = json_object_get(weights, "heads");
    const json_t *w_o = json_object_get(weights, "w_o");
    const json_t *b_o = json_object_get(weights, "b_o");
    size_t h, dh = 0, dm = req->d_model, hd, qkv_cols, qkv_count, o_count;
    int has_bias = 0;

    if (check_fields(weights, weights_fields, 3, "weights", "/weights", "heads, w_o, b_o", err) < 0)
        return -1;
    if (heads == NULL)
        return attn_error_set(err, 400, "missing_field", "/weights/heads",
                              "weights.heads (an array of heads) is required");
    if (!json_is_array(heads))
        return attn_error_set(err, 400, "wrong_type", "/weights/heads",
                              "weights.heads is %s, expected an array of heads",
                              api_json_type_name(heads));
    h = json_array_size(heads);
    if (h == 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/heads",
                              "weights.heads is empty; at least one head is needed");
    if (limits && h > limits->max_heads)
        return attn_error_set(err, 422, "limit_exceeded", "/weights/heads",
                              "weights.heads has %zu heads, over the limit max_heads = %zu", h,
                              limits->max_heads);
    for (size_t i = 0; i < h; i++)
        if (check_head(req->arrays, json_array_get(heads, i), i, dm, &dh, limits, &has_bias, err) <
            0)
            return -1;
    if (api_size_mul(h, dh, &hd) < 0 || api_size_mul(hd, 3, &qkv_cols) < 0 ||
        api_size_mul(dm, qkv_cols, &qkv_count) < 0 || api_size_mul(hd, dm, &o_count) < 0 ||
        qkv_count > SIZE_MAX / sizeof(float) || o_count > SIZE_MAX / sizeof(float))
        return attn_error_set(err, 503, "out_of_memory", "/weights",
                              "the weights are too large to hold in memory");
    if (check_w_o(req->arrays, w_o, h, dh, dm, err) < 0) return -1;

    req->w_qkv = malloc(qkv_count * sizeof(float));
    if (has_bias) req->b_qkv = calloc(qkv_cols, sizeof(float));
    if (w_o) req->w_o = malloc(o_count * sizeof(float));
    if (b_o) req->b_o = malloc(dm * sizeof(float));
    if (req->w_qkv == NULL || (has_bias && req->b_qkv == NULL) || (w_o && req->w_o == NULL) ||
        (b_o && req->b_o == NULL))
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
    api_advise_huge_pages(req->w_qkv, qkv_count * sizeof(float));
    if (w_o) api_advise_huge_pages(req->w_o, o_count * sizeof(float));

    for (size_t i = 0; i < h; i++)
        if (read_head(req, json_array_get(heads, i), i, hd, dh, err) < 0) return -1;
    if (w_o &&
        api_matrix_read(w_o, req->arrays, "weights.w_o", "/weights/w_o", req->w_o, dm, err) < 0)
        return -1;
    if (b_o && api_vector_read(b_o, req->arrays, "weights.b_o", "/weights/b_o", dm, "d_model",
                               req->b_o, err) < 0)
        return -1;

    req->inline_weights = (attn_weights){
        .d_model = dm,
        .n_heads = h,
        .d_head = dh,
        .w_qkv = req->w_qkv,
        .b_qkv = req->b_qkv,
        .w_o = req->w_o,
        .b_o = req->b_o,
    };
    return 0;
}
