/*
 * tensor.h — the binary form of a matrix or vector in a request:
 *
 *   {"dtype": "float32", "shape": [rows, cols] or [n], "data": "<base64>"}
 *
 * `data` is the base64 (api/base64.h: strict, padded, no whitespace) of the
 * little-endian float32 values, row-major. Like a matrix of nested arrays
 * (api/matrix.h), a tensor is read in two steps so that limits can be
 * checked from its shape before anything is decoded or allocated:
 * api_tensor_parse checks the object and reads its shape, api_tensor_read
 * decodes the data into the caller's buffer.
 *
 * Errors, in the order they are checked (paths below the tensor's `path`):
 *
 *   400 unknown_field   a key other than dtype, shape, data     /<key>
 *   400 missing_field   one of the three absent                 /<key>
 *   400 wrong_type      dtype or data not a string, shape not   /dtype, /data,
 *                       an array of non-negative integers, or   /shape, /shape/i
 *                       of the wrong rank for the field
 *   422 invalid_tensor  a dtype other than "float32"            /dtype
 *   422 dimension_mismatch  a shape whose byte size overflows   /shape
 *   --- api_tensor_read ---
 *   422 invalid_tensor  a character that is not valid base64    /data
 *                       there (see base64.h; the message gives
 *                       its offset), or a length not a multiple
 *                       of 4
 *   422 dimension_mismatch  valid base64 that decodes to a      /data
 *                       length other than the shape's
 *   422 non_finite_number  a decoded NaN or ±inf; the message   (the tensor)
 *                       names the element
 */
#ifndef API_TENSOR_H
#define API_TENSOR_H

#include <jansson.h>
#include <stddef.h>

#include "api/error.h"

typedef struct api_tensor {
    size_t rank;      /* 1 or 2 */
    size_t shape[2];  /* rank 1: shape[0] only; a dimension over SIZE_MAX reads as SIZE_MAX */
    const char *data; /* the base64 text: the jansson tree's, or the request
                         body's when lifted from it (api/arrays.h) */
    size_t data_len;
} api_tensor;

/* Is v meant as a tensor (a JSON object)? The other forms are arrays. */
int api_tensor_is(const json_t *v);

/* Checks the tensor object v for a field of `rank` dimensions (1 or 2) and
 * fills *t; the 400s and the dtype 422 of the list above. Decodes nothing. */
int api_tensor_parse(const json_t *v, size_t rank, const char *name, const char *path,
                     api_tensor *t, attn_error *err);

/* Decodes a parsed tensor into dst[r * ld + c] (rank 1: dst[i]; dst is
 * caller-owned, ld >= cols), checking the data against the shape and every
 * value for finiteness. On failure dst holds garbage. */
int api_tensor_read(const api_tensor *t, const char *name, const char *path, float *dst, size_t ld,
                    attn_error *err);

#endif
