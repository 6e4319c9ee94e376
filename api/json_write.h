/*
 * json_write.h — writing numbers and matrices of JSON into an api_buffer,
 * without a jansson node per number (responses can hold millions), as
 * nested arrays or as base64 tensor objects.
 */
#ifndef API_JSON_WRITE_H
#define API_JSON_WRITE_H

#include <stddef.h>

#include "api/buffer.h"

/* Where the first number JSON cannot carry (NaN, ±inf) was met. */
typedef struct api_nonfinite {
    int found;
    size_t row, col;
} api_nonfinite;

/* Appends v as a decimal integer. */
void api_write_size(api_buffer *b, size_t v);

/*
 * Appends rows × cols floats read with row stride `ld` as [[…],[…]], each
 * the shortest text that reads back as the same float32. With
 * `null_masked`, −∞ is written null (a masked score). Any other non-finite
 * value is recorded in *bad and writing stops there (the buffer then holds
 * a partial text the caller discards).
 */
void api_write_matrix(api_buffer *b, const float *m, size_t rows, size_t cols, size_t ld,
                      int null_masked, api_nonfinite *bad);

/* Appends n floats as […]; non-finite values as in api_write_matrix. */
void api_write_vector(api_buffer *b, const float *v, size_t n, api_nonfinite *bad);

/*
 * Appends the tensor object {"dtype":"float32","shape":[…],"data":"…"} of
 * the shape[0]·…·shape[rank-1] floats at m (row-major; m may be NULL when
 * there are none): their little-endian bytes, base64 with padding. Every
 * value is written as it is, NaN and ±inf included; what may be sent is
 * the caller's to check.
 */
void api_write_tensor(api_buffer *b, const float *m, const size_t *shape, size_t rank);

/* Appends s as a JSON string (escaped by jansson). */
void api_write_string(api_buffer *b, const char *s);

/* Appends any jansson value, compact, exactly as jansson writes it
 * ("\u0000" kept). */
struct json_t;
void api_write_json(api_buffer *b, const struct json_t *value);

/* The bytes api_write_json writes for value; 0 when jansson runs out of
 * memory counting them. */
size_t api_json_bytes(const struct json_t *value);

#endif
