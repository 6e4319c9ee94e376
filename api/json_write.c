/*
 * json_write.c — numbers and matrices straight into a response buffer.
 *
 * A row is written in place after reserving room for all of it at once:
 * a number, its NUL and a ',' fit in API_FLOAT_TEXT_MAX + 1 bytes.
 */
#include "api/json_write.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/float_format.h"

void api_write_size(api_buffer *b, size_t v)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%zu", v);
    api_buffer_append(b, text, (size_t)n);
}

/* Appends one row of `cols` floats as […]; 0, or -1 at a non-finite value
 * (its column in *bad_col) or when the buffer failed. */
static int write_row(api_buffer *b, const float *x, size_t cols, int null_masked,
                     size_t *bad_col)
{
    size_t room;
    if (__builtin_mul_overflow(cols, (size_t)API_FLOAT_TEXT_MAX + 1, &room) ||
        api_buffer_reserve(b, room + 4) < 0)
        return -1;
    b->data[b->len++] = '[';
    for (size_t c = 0; c < cols; c++) {
        if (c) b->data[b->len++] = ',';
        if (null_masked && isinf(x[c]) && x[c] < 0) {
            memcpy(b->data + b->len, "null", 4);
            b->len += 4;
        } else if (!isfinite(x[c])) {
            *bad_col = c;
            b->data[b->len] = '\0';
            return -1;
        } else {
            b->len += api_float_format(b->data + b->len, x[c]);
        }
    }
    b->data[b->len++] = ']';
    b->data[b->len] = '\0';
    return 0;
}

void api_write_matrix(api_buffer *b, const float *m, size_t rows, size_t cols, size_t ld,
                      int null_masked, api_nonfinite *bad)
{
    api_buffer_append(b, "[", 1);
    for (size_t r = 0; r < rows; r++) {
        size_t col = SIZE_MAX;
        if (r) api_buffer_append(b, ",", 1);
        if (write_row(b, m + r * ld, cols, null_masked, &col) < 0) {
            if (col != SIZE_MAX) *bad = (api_nonfinite){1, r, col};
            return;
        }
    }
    api_buffer_append(b, "]", 1);
}

void api_write_vector(api_buffer *b, const float *v, size_t n, api_nonfinite *bad)
{
    size_t col = SIZE_MAX;
    if (write_row(b, v, n, 0, &col) < 0 && col != SIZE_MAX) *bad = (api_nonfinite){1, 0, col};
}

static int dump_to_buffer(const char *text, size_t size, void *data)
{
    api_buffer *b = data;
    api_buffer_append(b, text, size);
    return b->failed ? -1 : 0;
}

void api_write_json(api_buffer *b, const json_t *value)
{
    if (json_dump_callback(value, dump_to_buffer, b, JSON_ENCODE_ANY | JSON_COMPACT) < 0)
        b->failed = 1;
}

void api_write_string(api_buffer *b, const char *s)
{
    json_t *str = json_string(s);
    if (!str) b->failed = 1;
    else api_write_json(b, str);
    json_decref(str);
}
