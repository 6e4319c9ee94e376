/*
 * float_format.h — the shortest decimal text of a float32.
 */
#ifndef API_FLOAT_FORMAT_H
#define API_FLOAT_FORMAT_H

#include <stddef.h>

/* Room api_float_format needs, the NUL included. */
#define API_FLOAT_TEXT_MAX 32

/*
 * The longest text api_float_format writes: 16 characters. Of its three
 * layouts (float_format.c), with at most 9 significant digits and a sign:
 *   - plain integers, 1 to 15 digits (x < 15): "-123456790000000", 16;
 *   - 0.000ddd for x from -5 to -1: "0." and 4 zeros, then up to 9 digits:
 *     "-0.0000123456789", 16;
 *   - d.ddd with a point, at most 9 digits: 11;
 *   - d.dddddddde-xx: 1 + 1 + 8 + 'e' + '-' + 2 exponent digits (float32's
 *     decimal exponents are -45 to 38), and the sign: 15;
 *   - "null" (NaN, ±inf), "-0": 4 and 2.
 * Response size bounds count this, and a comma, for every number.
 */
#define API_FLOAT_TEXT_WIDEST 16

/*
 * Writes into buf (API_FLOAT_TEXT_MAX bytes, caller-owned) a JSON number
 * that strtof reads back as exactly f, with at most 9 significant digits
 * and as few as possible (1 → "1", 0.5 → "0.5", 1e-7 → "1e-7").
 * −0 is written "-0". A NaN or an infinity, which JSON cannot carry, is
 * written "null". Returns the length of the text, without the NUL.
 */
size_t api_float_format(char *buf, float f);

/*
 * The slow reference kept beside the fast path, for tests and benchmarks:
 * the same contract and layout, found by snprintf and strtof (about 20
 * times slower), and now and then one digit longer than api_float_format.
 */
size_t api_float_format_naive(char *buf, float f);

#endif
