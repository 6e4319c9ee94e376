/*
 * matrix.c — nested JSON arrays, or tensor objects, to float32 buffers.
 *
 * Shape errors come before cell errors: the whole outline of a matrix is
 * checked first (rows are arrays, all as wide as row 0), then the cells.
 * A JSON object is the binary form of the contract, handed to tensor.c
 * with the rank the field needs (2 for a matrix, 1 for a vector); its
 * sizes are held to the same rules as nested arrays (at least one row and
 * one column). Only jansson's tree is read; nothing is allocated here.
 */
#include "api/matrix.h"

#include <stdio.h>
#include <string.h>

#include "api/float32.h"
#include "api/json_path.h"
#include "api/tensor.h"

const char *api_json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "a value";
}

int api_number_read(const json_t *v, const char *name, const char *path, float *dst,
                    attn_error *err) {
    double d;

    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected a number", name,
                              api_json_type_name(v));
    d = json_number_value(v);
    if (!api_double_fits_float32(d))
        return attn_error_set(err, 422, "non_finite_number", path,
                              "%s = %g is not finite as a float32 (largest is 3.4028235e38)", name,
                              d);
    *dst = (float)d;
    return 0;
}

/* A tensor's base64 lifted from the text (api/arrays.h) in place of the
 * "" jansson read there. */
static void tensor_data_lifted(api_tensor *t, const api_arrays *lifted, const char *path) {
    char data_path[API_PATH_MAX];
    size_t len;
    if (t->data_len) return;
    api_path_key(data_path, sizeof data_path, path, "data");
    const char *text = api_arrays_find_string(lifted, data_path, &len);
    if (text) t->data = text, t->data_len = len;
}

/* The shape of a tensor object standing for a matrix: two dimensions >= 1. */
static int tensor_matrix_shape(const json_t *v, const api_arrays *lifted, const char *name,
                               const char *path, api_tensor *t, attn_error *err) {
    if (api_tensor_parse(v, 2, name, path, t, err) < 0) return -1;
    tensor_data_lifted(t, lifted, path);
    if (t->shape[0] == 0)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has no rows (shape [0, %zu])", name, t->shape[1]);
    if (t->shape[1] == 0)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has rows of no numbers (shape [%zu, 0]); rows need at least "
                              "one number",
                              name, t->shape[0]);
    return 0;
}

/* The array lifted at path with this rank, or NULL. */
static const api_array *lifted_at(const api_arrays *lifted, const char *path, int rank) {
    const api_array *a = api_arrays_find(lifted, path);
    return a && a->rank == rank ? a : NULL;
}

int api_matrix_shape(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                     size_t *rows, size_t *cols, attn_error *err) {
    char row_path[API_PATH_MAX];
    size_t n, width = 0;
    const api_array *a = lifted_at(lifted, path, 2);

    if (a) {
        *rows = a->rows;
        *cols = a->cols;
        return 0;
    }

    if (api_tensor_is(v)) {
        api_tensor t;
        if (tensor_matrix_shape(v, lifted, name, path, &t, err) < 0) return -1;
        *rows = t.shape[0];
        *cols = t.shape[1];
        return 0;
    }
    if (!json_is_array(v))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s is %s, expected an array of rows (nested arrays of numbers) or "
                              "a tensor object",
                              name, api_json_type_name(v));
    n = json_array_size(v);
    if (n == 0) return attn_error_set(err, 422, "dimension_mismatch", path, "%s has no rows", name);
    for (size_t r = 0; r < n; r++) {
        const json_t *row = json_array_get(v, r);
        api_path_index(row_path, sizeof row_path, path, r);
        if (!json_is_array(row))
            return attn_error_set(err, 400, "wrong_type", row_path,
                                  "%s[%zu] is %s, expected an array of numbers", name, r,
                                  api_json_type_name(row));
        if (r == 0) {
            width = json_array_size(row);
            if (width == 0)
                return attn_error_set(err, 422, "dimension_mismatch", row_path,
                                      "%s[0] is empty; rows need at least one number", name);
        } else if (json_array_size(row) != width) {
            return attn_error_set(err, 422, "dimension_mismatch", row_path,
                                  "%s[%zu] has %zu numbers, expected %zu like row 0 (ragged rows)",
                                  name, r, json_array_size(row), width);
        }
    }
    *rows = n;
    *cols = width;
    return 0;
}

int api_matrix_read(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                    float *dst, size_t ld, attn_error *err) {
    char row_path[API_PATH_MAX], cell_path[API_PATH_MAX], cell_name[300];
    size_t n = json_array_size(v);
    const api_array *a = lifted_at(lifted, path, 2);

    if (a) { /* checked when lifted: every number finite */
        for (size_t r = 0; r < a->rows; r++)
            memcpy(dst + r * ld, a->data + r * a->cols, a->cols * sizeof(float));
        return 0;
    }

    if (api_tensor_is(v)) {
        api_tensor t;
        if (tensor_matrix_shape(v, lifted, name, path, &t, err) < 0) return -1;
        return api_tensor_read(&t, name, path, dst, ld, err);
    }
    for (size_t r = 0; r < n; r++) {
        const json_t *row = json_array_get(v, r);
        size_t width = json_array_size(row);
        for (size_t c = 0; c < width; c++) {
            const json_t *cell = json_array_get(row, c);
            double d;
            if (json_is_real(cell) && api_double_fits_float32(d = json_real_value(cell))) {
                dst[r * ld + c] = (float)d; /* the fast path: every cell of a good matrix */
                continue;
            }
            api_path_index(row_path, sizeof row_path, path, r);
            api_path_index(cell_path, sizeof cell_path, row_path, c);
            snprintf(cell_name, sizeof cell_name, "%s[%zu][%zu]", name, r, c);
            if (api_number_read(cell, cell_name, cell_path, &dst[r * ld + c], err) < 0) return -1;
        }
    }
    return 0;
}

int api_vector_read(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                    size_t expect, const char *expect_what, float *dst, attn_error *err) {
    char cell_path[API_PATH_MAX], cell_name[300];
    size_t n;
    const api_array *a = lifted_at(lifted, path, 1);

    if (a) {
        if (a->cols != expect)
            return attn_error_set(err, 422, "dimension_mismatch", path,
                                  "%s has %zu numbers, expected %s = %zu", name, a->cols,
                                  expect_what, expect);
        memcpy(dst, a->data, expect * sizeof(float));
        return 0;
    }

    if (api_tensor_is(v)) {
        api_tensor t;
        if (api_tensor_parse(v, 1, name, path, &t, err) < 0) return -1;
        tensor_data_lifted(&t, lifted, path);
        if (t.shape[0] != expect)
            return attn_error_set(err, 422, "dimension_mismatch", path,
                                  "%s has shape [%zu], expected %s = %zu", name, t.shape[0],
                                  expect_what, expect);
        return api_tensor_read(&t, name, path, dst, 1, err);
    }
    if (!json_is_array(v))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s is %s, expected an array of numbers or a tensor object", name,
                              api_json_type_name(v));
    n = json_array_size(v);
    for (size_t i = 0; i < n; i++) {
        const json_t *cell = json_array_get(v, i);
        if (!json_is_number(cell)) {
            api_path_index(cell_path, sizeof cell_path, path, i);
            return attn_error_set(err, 400, "wrong_type", cell_path,
                                  "%s[%zu] is %s, expected a number", name, i,
                                  api_json_type_name(cell));
        }
    }
    if (n != expect)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has %zu numbers, expected %s = %zu", name, n, expect_what,
                              expect);
    for (size_t i = 0; i < n; i++) {
        api_path_index(cell_path, sizeof cell_path, path, i);
        snprintf(cell_name, sizeof cell_name, "%s[%zu]", name, i);
        if (api_number_read(json_array_get(v, i), cell_name, cell_path, &dst[i], err) < 0)
            return -1;
    }
    return 0;
}
