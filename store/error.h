/*
 * error.h — the error value of store/.
 *
 * Every function of store/ that can fail returns 0 / -1 (or NULL) and fills
 * a caller-owned store_error with one sentence for a person, which always
 * starts with the file (or directory) at fault: "models/x.safetensors:
 * tensor 'w_o' has shape [4, 3], expected [4, 4]". The server logs it; no
 * part of it goes to an HTTP client, so it needs no code or status.
 */
#ifndef STORE_ERROR_H
#define STORE_ERROR_H

typedef struct store_error {
    char message[1024];
} store_error;

/* Sets err->message to "<path>: <printf text>" (just the text when path is
 * NULL); over-long texts are cut. err may be NULL. Returns -1, so that a
 * caller can write `return store_error_set(...)`. */
int store_error_set(store_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
