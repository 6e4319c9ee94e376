/*
 * error.c — filling an attn_error.
 *
 * A message may quote client bytes (jansson's "near '...'" text does) or a
 * file name, so whatever lands in an attn_error is made valid UTF-8 here,
 * once: a text cut by its buffer loses its incomplete last character, and
 * any other invalid byte becomes '?'.
 */
#include "attention/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence starting at s (at most `left` bytes),
 * or 0 when the bytes there are not one. Rejects overlong forms, surrogates
 * and code points above U+10FFFF. */
static size_t utf8_sequence_length(const unsigned char *s, size_t left) {
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (left < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return need;
}

/* Drops an incomplete character at the end of s (left by a cut). */
static void utf8_cut_tail(char *s) {
    size_t len = strlen(s), start = len, back = 0;

    while (start > 0 && back < 4 && ((unsigned char)s[start - 1] & 0xC0) == 0x80) {
        start--;
        back++;
    }
    if (start == 0) return;
    start--; /* the lead byte, if any */
    if (utf8_sequence_length((const unsigned char *)s + start, len - start) == 0 &&
        ((unsigned char)s[start] & 0xC0) == 0xC0)
        s[start] = '\0';
}

/* Replaces every byte that does not start a valid sequence with '?'. */
static void utf8_sanitize(char *s) {
    size_t len = strlen(s);

    for (size_t i = 0; i < len;) {
        size_t k = utf8_sequence_length((const unsigned char *)s + i, len - i);
        if (k == 0) {
            s[i++] = '?';
        } else {
            i += k;
        }
    }
}

static void copy_text(char *dst, size_t cap, const char *src) {
    size_t len = strlen(src);

    if (len >= cap) {
        memcpy(dst, src, cap - 1);
        dst[cap - 1] = '\0';
        utf8_cut_tail(dst);
    } else {
        memcpy(dst, src, len + 1);
    }
    utf8_sanitize(dst);
}

int attn_error_set(attn_error *err, int status, const char *code, const char *path, const char *fmt,
                   ...) {
    va_list ap;
    int n;

    if (err == NULL) return -1;
    err->status = status;
    err->code = code;
    va_start(ap, fmt);
    n = vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    if (n < 0)
        err->message[0] = '\0';
    else if ((size_t)n >= sizeof err->message)
        utf8_cut_tail(err->message);
    utf8_sanitize(err->message);
    copy_text(err->path, sizeof err->path, path ? path : "");
    return -1;
}

void attn_error_sanitize(attn_error *err) {
    err->message[sizeof err->message - 1] = '\0';
    err->path[sizeof err->path - 1] = '\0';
    utf8_sanitize(err->message);
    utf8_sanitize(err->path);
}
