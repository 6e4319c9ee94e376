/*
 * error.h — how store/ fills an attn_error.
 *
 * Every function of store/ that can fail returns 0 / -1 (or NULL) and fills
 * a caller-owned attn_error (attention/error.h) whose message always starts
 * with the file (or directory) at fault: "models/x.safetensors: tensor
 * 'w_o' has shape [4, 3], expected [4, 4]". The server logs it; no part of
 * it goes to an HTTP client, so its status is 0 and its code always
 * STORE_ERROR_CODE.
 */
#ifndef STORE_ERROR_H
#define STORE_ERROR_H

#include "attention/error.h"

#define STORE_ERROR_CODE "model_load_failed"

/* Sets err's message to "<path>: <printf text>" (just the text when path
 * is NULL); over-long texts are cut. err may be NULL. Returns -1, so that
 * a caller can write `return store_error_set(...)`. */
int store_error_set(attn_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
