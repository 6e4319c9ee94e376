/*
 * float32.h — which JSON numbers a request may carry: those whose float32
 * rounding is finite. One test, for the numbers read from jansson's tree
 * (matrix.c) and those read straight from the text (arrays.c), so that
 * both paths accept exactly the same numbers.
 */
#ifndef API_FLOAT32_H
#define API_FLOAT32_H

#include <math.h>

/* 1 when d rounds to a finite float32, else 0 (NaN included). The bound is
 * the smallest magnitude whose float32 rounding is infinite: FLT_MAX plus
 * half an ulp (2^128 - 2^103). Compared in double, so no conversion of an
 * out-of-range value to float ever happens. */
static inline int api_double_fits_float32(double d) {
    return fabs(d) < 0x1.ffffffp+127;
}

#endif
