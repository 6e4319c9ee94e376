/*
 * error.h — the one error value of the service.
 *
 * Every failure that reaches a client is an api_error: an HTTP status, a
 * stable machine-readable code, a sentence for a person, and the JSON
 * Pointer of the offending request value ("" when none applies). Functions
 * that can fail return 0 / -1 and fill a caller-owned api_error; only this
 * module turns it into the JSON error body of the contract.
 */
#ifndef API_ERROR_H
#define API_ERROR_H

#include <stddef.h>

typedef struct api_error {
    int status;           /* HTTP status, e.g. 422 */
    const char *code;     /* static string, e.g. "dimension_mismatch" */
    char message[512];
    char path[256];       /* JSON Pointer, RFC 6901; "" for none */
} api_error;

/* Fills *err. `path` may be NULL or "" for none; the message is printf-style.
 * Over-long texts are cut at a UTF-8 character boundary. Returns -1, so a
 * caller can write `return api_error_set(...)`. */
int api_error_set(api_error *err, int status, const char *code, const char *path,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The contract's body {"error": {"code", "message", "path"}}, NUL-terminated,
 * malloc'd: the caller frees it. *len gets its length without the NUL.
 * Returns NULL only when out of memory. */
char *api_error_to_json(const api_error *err, size_t *len);

#endif
