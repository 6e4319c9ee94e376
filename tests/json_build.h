/*
 * json_build.h — small JSON requests for the suites that decode them: the
 * same pseudo-random values everywhere, exactly representable in float32
 * (multiples of 1/8 in [-1, 1)), so that an expected number is known
 * exactly.
 */
#ifndef TESTS_JSON_BUILD_H
#define TESTS_JSON_BUILD_H

#include <jansson.h>
#include <stddef.h>

/* Value i of the sequence: a multiple of 1/8 in [-1, 1). */
double tj_val(size_t i);

/* rows × cols of tj_val(seed + r·cols + c), as nested arrays (new reference). */
json_t *tj_matrix(size_t rows, size_t cols, size_t seed);

/* n values tj_val(seed + i) (new reference). */
json_t *tj_vector(size_t n, size_t seed);

#endif
