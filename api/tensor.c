/*
 * tensor.c — tensor objects ({"dtype", "shape", "data"}) to float32 buffers.
 *
 * The object is checked like the rest of a request, types before values
 * (see the order in tensor.h). Decoding writes straight into the caller's
 * buffer when its rows are contiguous (ld == cols, or a vector): on a
 * little-endian host the decoded bytes already are the floats. A matrix
 * that lands in columns of a wider buffer (a head's w_q inside the packed
 * w_qkv) is decoded in parts of CHUNK_FLOATS values through a small stack
 * buffer and scattered; a part is a whole number of base64 groups and of
 * floats, so the parts decode exactly as the whole text would.
 *
 * Only the jansson tree (or the body's text, for a lifted base64 string)
 * and the caller's buffer are touched: nothing is allocated here.
 */
#include "api/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/base64.h"
#include "api/json_path.h"
#include "api/matrix.h"

_Static_assert(sizeof(float) == sizeof(uint32_t), "float32 is 4 bytes");
#if !defined(__BYTE_ORDER__) ||                                                                    \
    (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ && __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__)
#error "tensor.c needs to know the byte order (__BYTE_ORDER__)"
#endif

/* 768 floats: 3072 bytes, 1024 base64 groups of 3 bytes. */
#define CHUNK_FLOATS 768
#define CHUNK_CHARS  (CHUNK_FLOATS * 4 / 3 * 4)

_Static_assert(CHUNK_FLOATS * 4 % 3 == 0, "a part is whole base64 groups");

static const char *const tensor_fields[] = {"dtype", "shape", "data"};

int api_tensor_is(const json_t *v) {
    return json_is_object(v);
}

/* The wire is little-endian; on a big-endian host each value is swapped. */
static void from_little_endian(float *x, size_t n) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&x[i], &u, 4);
    }
#else
    (void)x, (void)n;
#endif
}

static int parse_shape(const json_t *shape, size_t rank, const char *name, const char *path,
                       api_tensor *t, attn_error *err) {
    char p[API_PATH_MAX], q[API_PATH_MAX];
    size_t n;

    api_path_key(p, sizeof p, path, "shape");
    if (!json_is_array(shape))
        return attn_error_set(err, 400, "wrong_type", p,
                              "%s.shape is %s, expected an array of non-negative integers", name,
                              api_json_type_name(shape));
    n = json_array_size(shape);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(shape, i);
        double d = json_is_number(e) ? json_number_value(e) : -1;
        if (!(d >= 0) || floor(d) != d) {
            api_path_index(q, sizeof q, p, i);
            return attn_error_set(
                err, 400, "wrong_type", q, "%s.shape[%zu] is %s, expected a non-negative integer",
                name, i, json_is_number(e) ? "not a non-negative integer" : api_json_type_name(e));
        }
        if (i < 2) t->shape[i] = d >= (double)SIZE_MAX ? SIZE_MAX : (size_t)d;
    }
    if (n != rank)
        return attn_error_set(err, 400, "wrong_type", p,
                              rank == 2 ? "%s.shape has %zu dimensions; a matrix needs 2 "
                                          "([rows, columns])"
                                        : "%s.shape has %zu dimensions; a vector needs 1 ([n])",
                              name, n);
    t->rank = rank;
    if (rank == 1) t->shape[1] = 1;
    return 0;
}

int api_tensor_parse(const json_t *v, size_t rank, const char *name, const char *path,
                     api_tensor *t, attn_error *err) {
    char p[API_PATH_MAX];
    const char *key;
    json_t *value;
    const json_t *dtype, *data;
    size_t bytes;

    if (!json_is_object(v))
        return attn_error_set(err, 400, "wrong_type", path, "%s is %s, expected a tensor object",
                              name, api_json_type_name(v));
    json_object_foreach((json_t *)v, key, value) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 && strcmp(key, "data") != 0) {
            api_path_key(p, sizeof p, path, key);
            return attn_error_set(err, 400, "unknown_field", p,
                                  "unknown field \"%s\" in %s; a tensor object has exactly dtype, "
                                  "shape and data",
                                  key, name);
        }
    }
    for (size_t i = 0; i < 3; i++) {
        if (json_object_get(v, tensor_fields[i]) == NULL) {
            api_path_key(p, sizeof p, path, tensor_fields[i]);
            return attn_error_set(err, 400, "missing_field", p,
                                  "%s has no %s; a tensor object has exactly dtype, shape and "
                                  "data",
                                  name, tensor_fields[i]);
        }
    }
    dtype = json_object_get(v, "dtype");
    data = json_object_get(v, "data");
    if (!json_is_string(dtype)) {
        api_path_key(p, sizeof p, path, "dtype");
        return attn_error_set(err, 400, "wrong_type", p, "%s.dtype is %s, expected \"float32\"",
                              name, api_json_type_name(dtype));
    }
    if (parse_shape(json_object_get(v, "shape"), rank, name, path, t, err) < 0) return -1;
    if (!json_is_string(data)) {
        api_path_key(p, sizeof p, path, "data");
        return attn_error_set(err, 400, "wrong_type", p, "%s.data is %s, expected a base64 string",
                              name, api_json_type_name(data));
    }
    if (json_string_length(dtype) != 7 || memcmp(json_string_value(dtype), "float32", 7) != 0) {
        api_path_key(p, sizeof p, path, "dtype");
        return attn_error_set(err, 422, "invalid_tensor", p,
                              "%s.dtype is not supported; the only dtype is \"float32\"", name);
    }
    if (__builtin_mul_overflow(t->shape[0], t->shape[1], &bytes) ||
        __builtin_mul_overflow(bytes, sizeof(float), &bytes)) {
        api_path_key(p, sizeof p, path, "shape");
        return attn_error_set(err, 422, "dimension_mismatch", p,
                              "%s.shape describes more bytes than any data can hold", name);
    }
    t->data = json_string_value(data);
    t->data_len = json_string_length(data);
    return 0;
}

/* Index of the first value that is NaN or ±inf, or n. The scan ORs a flag
 * per value so the common case is one pass without a branch per value. */
static size_t first_nonfinite(const float *x, size_t n) {
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        any |= (u & 0x7f800000u) == 0x7f800000u;
    }
    if (!any) return n;
    size_t i = 0;
    while (i < n && isfinite(x[i]))
        i++;
    return i;
}

static int refuse_nonfinite(const api_tensor *t, const char *name, const char *path, float x,
                            size_t index, attn_error *err) {
    const char *what = isnan(x) ? "NaN" : x > 0 ? "+Infinity" : "-Infinity";
    if (t->rank == 1)
        return attn_error_set(err, 422, "non_finite_number", path,
                              "%s element [%zu] is %s; values must be finite float32", name, index,
                              what);
    return attn_error_set(err, 422, "non_finite_number", path,
                          "%s element [%zu][%zu] (value %zu of the data) is %s; values must be "
                          "finite float32",
                          name, index / t->shape[1], index % t->shape[1], index, what);
}

static int refuse_base64(const api_tensor *t, const char *name, const char *path, size_t at,
                         attn_error *err) {
    char p[API_PATH_MAX];
    unsigned char c = at < t->data_len ? (unsigned char)t->data[at] : 0;

    api_path_key(p, sizeof p, path, "data");
    if (c >= 0x21 && c < 0x7f)
        return attn_error_set(err, 422, "invalid_tensor", p,
                              "%s.data is not valid base64: '%c' at offset %zu (standard "
                              "alphabet, '=' padding only at the end, canonical last group, "
                              "no whitespace)",
                              name, c, at);
    return attn_error_set(err, 422, "invalid_tensor", p,
                          "%s.data is not valid base64: byte 0x%02x at offset %zu (standard "
                          "alphabet, '=' padding only at the end, no whitespace)",
                          name, c, at);
}

/* Decodes into contiguous dst (count values). */
static int read_contiguous(const api_tensor *t, const char *name, const char *path, float *dst,
                           size_t count, attn_error *err) {
    size_t bad;

    if (api_base64_decode(dst, t->data, t->data_len, &bad) < 0)
        return refuse_base64(t, name, path, bad, err);
    from_little_endian(dst, count);
    bad = first_nonfinite(dst, count);
    if (bad < count) return refuse_nonfinite(t, name, path, dst[bad], bad, err);
    return 0;
}

/* Decodes into dst[r * ld + c] part by part (see the top of the file). */
static int read_strided(const api_tensor *t, const char *name, const char *path, float *dst,
                        size_t ld, attn_error *err) {
    float part[CHUNK_FLOATS];
    size_t cols = t->shape[1], r = 0, c = 0, done = 0;

    for (size_t at = 0; at < t->data_len; at += CHUNK_CHARS) {
        size_t len = t->data_len - at < CHUNK_CHARS ? t->data_len - at : CHUNK_CHARS;
        int final = at + len == t->data_len;
        size_t bytes = len / 4 * 3, bad, n;
        if (final) (void)api_base64_decoded_length(t->data + at, len, &bytes); /* len % 4 == 0 */
        if (api_base64_decode_part(part, t->data + at, len, final, &bad) < 0)
            return refuse_base64(t, name, path, at + bad, err);
        n = bytes / sizeof(float);
        from_little_endian(part, n);
        bad = first_nonfinite(part, n);
        if (bad < n) return refuse_nonfinite(t, name, path, part[bad], done + bad, err);
        for (size_t i = 0; i < n; i++) {
            dst[r * ld + c] = part[i];
            if (++c == cols) c = 0, r++;
        }
        done += n;
    }
    return 0;
}

int api_tensor_read(const api_tensor *t, const char *name, const char *path, float *dst, size_t ld,
                    attn_error *err) {
    char p[API_PATH_MAX];
    size_t count = t->shape[0] * t->shape[1], bytes; /* checked by api_tensor_parse */

    api_path_key(p, sizeof p, path, "data");
    if (api_base64_decoded_length(t->data, t->data_len, &bytes) < 0 ||
        bytes != count * sizeof(float)) {
        /* a bad character explains a wrong length best (a trailing newline);
         * finding it costs a scan, on this error path only */
        size_t bad = api_base64_first_invalid(t->data, t->data_len);
        if (bad < t->data_len) return refuse_base64(t, name, path, bad, err);
        if (t->data_len % 4 != 0)
            return attn_error_set(err, 422, "invalid_tensor", p,
                                  "%s.data is not valid base64: its length %zu is not a multiple "
                                  "of 4 (padding with '=' is required)",
                                  name, t->data_len);
        if (t->rank == 1)
            return attn_error_set(err, 422, "dimension_mismatch", p,
                                  "%s.data decodes to %zu bytes; shape [%zu] needs %zu (4 bytes "
                                  "a float32)",
                                  name, bytes, t->shape[0], count * sizeof(float));
        return attn_error_set(err, 422, "dimension_mismatch", p,
                              "%s.data decodes to %zu bytes; shape [%zu, %zu] needs %zu (4 bytes "
                              "a float32)",
                              name, bytes, t->shape[0], t->shape[1], count * sizeof(float));
    }
    if (t->rank == 1 || ld == t->shape[1]) return read_contiguous(t, name, path, dst, count, err);
    return read_strided(t, name, path, dst, ld, err);
}
