/*
 * matrix.h — reading matrices, vectors and numbers out of a jansson tree.
 *
 * A matrix is read in two steps so that limits can be checked between
 * them: api_matrix_shape walks the rows without allocating anything, the
 * caller checks the sizes against its limits and allocates, then
 * api_matrix_read copies the numbers. Every failure fills an attn_error
 * whose message names the value (`name`, e.g. "weights.heads[1].w_k") and
 * whose path points at it (`path`, e.g. "/weights/heads/1/w_k").
 *
 * Numbers are JSON numbers (the decoder reads integers as reals); one whose
 * float32 rounding is infinite is a 422 non_finite_number, one too small
 * becomes the nearest float32 (0 or a subnormal).
 *
 * Wherever a matrix or vector is read, a JSON object is taken as the
 * contract's binary form, a tensor object (api/tensor.h): the same two
 * steps, the shape from its `shape`, the values decoded from its `data`.
 *
 * `lifted` (may be NULL) holds the arrays read straight from the body text
 * (arrays.h): when it has one at `path`, that is the value, and `v` is only
 * the `[]` left in its place.
 */
#ifndef API_MATRIX_H
#define API_MATRIX_H

#include <jansson.h>
#include <stddef.h>

#include "api/arrays.h"
#include "api/error.h"

/* "a string", "an object", "null", … for messages. Static text. */
const char *api_json_type_name(const json_t *v);

/* Reads one number as float32. 400 wrong_type when v is not a number,
 * 422 non_finite_number when it does not fit a finite float32. */
int api_number_read(const json_t *v, const char *name, const char *path, float *dst,
                    attn_error *err);

/* Checks that v is an array of rows >= 1, each an array of the same width
 * >= 1, or a tensor object of shape [rows >= 1, cols >= 1]; sets *rows and
 * *cols. Does not look at the cells (or decode the data). */
int api_matrix_shape(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                     size_t *rows, size_t *cols, attn_error *err);

/* Copies the cells of a matrix api_matrix_shape accepted into
 * dst[r * ld + c] (dst caller-owned, ld >= cols); for a tensor object,
 * decodes its data there (checked against its shape, every value finite). */
int api_matrix_read(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                    float *dst, size_t ld, attn_error *err);

/* Reads a vector of exactly `expect` numbers, or a tensor object of shape
 * [expect], into dst (caller-owned); `expect_what` names the expected length
 * in the message ("d_head"). */
int api_vector_read(const json_t *v, const api_arrays *lifted, const char *name, const char *path,
                    size_t expect, const char *expect_what, float *dst, attn_error *err);

#endif
