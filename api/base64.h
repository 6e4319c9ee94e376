/*
 * base64.h — RFC 4648 base64 (standard alphabet A–Z a–z 0–9 + /), strict.
 *
 * The text form of binary tensors (api/tensor.h, the response's
 * "encoding": "base64"). Encoding always pads with '='. Decoding accepts
 * exactly what encoding produces and nothing else:
 *
 *   - the length is a multiple of 4 (padding is required);
 *   - '=' only as the last one or two characters;
 *   - no whitespace, no line breaks, no URL-safe '-' or '_';
 *   - the bits a padded last group leaves over are zero (the canonical
 *     form, RFC 4648 section 3.5), so every byte string has one text.
 *
 * Both directions run over whole groups without a branch per byte (a
 * table lookup per character, 8 characters <-> 6 bytes a step); validity is
 * accumulated and checked once, and only a bad text is scanned again to
 * find its first bad character. Nothing here allocates.
 */
#ifndef API_BASE64_H
#define API_BASE64_H

#include <stddef.h>

/* The padded text length of n bytes, 4·ceil(n/3), in *len; 0, or -1 when it
 * does not fit size_t. */
int api_base64_encoded_length(size_t n, size_t *len);

/* Writes the padded text of src[0..n) to dst, which has room for
 * api_base64_encoded_length(n) characters (no NUL is written). Returns the
 * number of characters written. */
size_t api_base64_encode(char *dst, const void *src, size_t n);

/* The number of bytes a text of `len` characters decodes to, from its length
 * and padding alone, in *n; 0, or -1 when len is not a multiple of 4 (the
 * characters themselves are checked by api_base64_decode). */
int api_base64_decoded_length(const char *text, size_t len, size_t *n);

/*
 * Decodes `len` characters (a multiple of 4) into dst, which has room for
 * api_base64_decoded_length bytes. With `final` 0 the text is a middle
 * part of a longer one and may hold no '=' at all. Returns 0, or -1 with
 * the offset of the first character that is not valid there in *bad_at
 * (dst then holds garbage).
 */
int api_base64_decode_part(void *dst, const char *text, size_t len, int final, size_t *bad_at);

/* The offset of the first character that makes a text invalid, or len when
 * the text is valid but for its length: the longest multiple of 4 is
 * checked as a whole text, the characters left over for the alphabet and
 * '='. For messages about a text that does not decode to the size
 * expected; nothing is written. */
size_t api_base64_first_invalid(const char *text, size_t len);

/* api_base64_decode_part of a whole text. */
int api_base64_decode(void *dst, const char *text, size_t len, size_t *bad_at);

#endif
