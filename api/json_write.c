/*
 * json_write.c — numbers and matrices straight into a response buffer.
 *
 * A row is written in place after reserving room for all of it at once:
 * a number, its NUL and a ',' fit in API_FLOAT_TEXT_MAX + 1 bytes. The
 * base64 text of a tensor is likewise encoded in place, straight from the
 * floats on a little-endian host (their bytes are the wire's).
 */
#include "api/json_write.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/base64.h"
#include "api/float_format.h"

void api_write_size(api_buffer *b, size_t v) {
    char text[32];
    int n = snprintf(text, sizeof text, "%zu", v);
    api_buffer_append(b, text, (size_t)n);
}

/* Appends one row of `cols` floats as […]; 0, or -1 at a non-finite value
 * (its column in *bad_col) or when the buffer failed. */
static int write_row(api_buffer *b, const float *x, size_t cols, int null_masked, size_t *bad_col) {
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
                      int null_masked, api_nonfinite *bad) {
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

void api_write_vector(api_buffer *b, const float *v, size_t n, api_nonfinite *bad) {
    size_t col = SIZE_MAX;
    if (write_row(b, v, n, 0, &col) < 0 && col != SIZE_MAX) *bad = (api_nonfinite){1, 0, col};
}

/* Base64 of n floats, in place; their bytes little-endian. */
static void write_base64_floats(api_buffer *b, const float *m, size_t count) {
    size_t n, len;
    if (__builtin_mul_overflow(count, sizeof(float), &n) ||
        api_base64_encoded_length(n, &len) < 0 || api_buffer_reserve(b, len) < 0) {
        b->failed = 1;
        return;
    }
    if (n == 0) return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    /* parts of 768 floats, 3072 bytes: whole base64 groups, so the parts'
     * texts put end to end are the text of the whole */
    for (size_t at = 0; at < n; at += 3072) {
        uint32_t part[768];
        size_t bytes = n - at < 3072 ? n - at : 3072;
        memcpy(part, (const char *)m + at, bytes);
        for (size_t i = 0; i < bytes / 4; i++)
            part[i] = __builtin_bswap32(part[i]);
        b->len += api_base64_encode(b->data + b->len, part, bytes);
    }
#else
    b->len += api_base64_encode(b->data + b->len, m, n);
#endif
    b->data[b->len] = '\0';
}

void api_write_tensor(api_buffer *b, const float *m, const size_t *shape, size_t rank) {
    size_t count = 1;

    api_buffer_append_str(b, "{\"dtype\":\"float32\",\"shape\":[");
    for (size_t i = 0; i < rank; i++) {
        if (i) api_buffer_append(b, ",", 1);
        api_write_size(b, shape[i]);
        if (__builtin_mul_overflow(count, shape[i], &count)) b->failed = 1;
    }
    api_buffer_append_str(b, "],\"data\":\"");
    if (!b->failed) write_base64_floats(b, m, count);
    api_buffer_append_str(b, "\"}");
}

static int dump_to_buffer(const char *text, size_t size, void *data) {
    api_buffer *b = data;
    api_buffer_append(b, text, size);
    return b->failed ? -1 : 0;
}

/* Strings, and arrays of strings (a model's name, the echoed tokens), are
 * most of what is echoed, and jansson's dump costs about 3,000
 * instructions for one short string (callgrind, on the 我爱你 request: a
 * tenth of the server's own work per request). When no byte needs an
 * escape they are written here, byte for byte as jansson writes them with
 * these flags: UTF-8 as it is (jansson validated it), escapes only for '"',
 * '\\' and the control characters below 0x20 (tests/test_api.c compares
 * the two on every byte). */
static int plain_string(const json_t *v) {
    if (!json_is_string(v)) return 0;
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    for (size_t i = 0, n = json_string_length(v); i < n; i++)
        if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

/* 1 when v is a plain string or an array of them. */
static int plain(const json_t *v) {
    if (!json_is_array(v)) return plain_string(v);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!plain_string(json_array_get(v, i))) return 0;
    return 1;
}

static void write_plain_string(api_buffer *b, const json_t *v) {
    api_buffer_append(b, "\"", 1);
    api_buffer_append(b, json_string_value(v), json_string_length(v));
    api_buffer_append(b, "\"", 1);
}

void api_write_json(api_buffer *b, const json_t *value) {
    if (plain(value)) {
        if (!json_is_array(value)) {
            write_plain_string(b, value);
            return;
        }
        api_buffer_append(b, "[", 1);
        for (size_t i = 0; i < json_array_size(value); i++) {
            if (i) api_buffer_append(b, ",", 1);
            write_plain_string(b, json_array_get(value, i));
        }
        api_buffer_append(b, "]", 1);
        return;
    }
    if (json_dump_callback(value, dump_to_buffer, b, JSON_ENCODE_ANY | JSON_COMPACT) < 0)
        b->failed = 1;
}

size_t api_json_bytes(const json_t *value) {
    if (!plain(value)) return json_dumpb(value, NULL, 0, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!json_is_array(value)) return json_string_length(value) + 2;
    size_t n = json_array_size(value), bytes = 2 + (n ? n - 1 : 0);
    for (size_t i = 0; i < n; i++)
        bytes += json_string_length(json_array_get(value, i)) + 2;
    return bytes;
}

void api_write_string(api_buffer *b, const char *s) {
    json_t *str = json_string(s);
    if (!str)
        b->failed = 1;
    else
        api_write_json(b, str);
    json_decref(str);
}
