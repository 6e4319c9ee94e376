/*
 * error.h — the one error value of every layer.
 *
 * A function that can fail returns 0 / -1 (or NULL) and fills a
 * caller-owned attn_error: a stable code (a static string clients and
 * callers may compare), the HTTP status where one applies (api/ and
 * server/ set it; the engine and the store, which know nothing of HTTP,
 * leave 0 and their caller decides), a sentence for a person, and the JSON
 * Pointer of the offending request value ("" when none applies). Only api/
 * turns it into the contract's JSON error body (api/error.h).
 *
 * It lives in attention/ because that is the layer every other one builds
 * on; it holds no state and allocates nothing.
 */
#ifndef ATTN_ERROR_H
#define ATTN_ERROR_H

typedef struct attn_error {
    int status;       /* HTTP status, e.g. 422; 0 where HTTP does not apply */
    const char *code; /* static string, e.g. "dimension_mismatch" */
    char message[1024];
    char path[256]; /* JSON Pointer, RFC 6901; "" for none */
} attn_error;

/* Fills *err (a no-op when err is NULL). `path` may be NULL or "" for none;
 * the message is printf-style. Over-long texts are cut (at a UTF-8
 * character boundary). Returns -1, so a caller can write
 * `return attn_error_set(...)`. */
int attn_error_set(attn_error *err, int status, const char *code, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/* Makes message and path NUL-terminated valid UTF-8, for a value that
 * may have been filled by hand. */
void attn_error_sanitize(attn_error *err);

#endif
