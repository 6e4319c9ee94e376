/*
 * error.c — filling an attn_error the store's way.
 */
#include "store/error.h"

#include <stdarg.h>
#include <stdio.h>

int store_error_set(attn_error *err, const char *path, const char *fmt, ...) {
    if (!err) return -1;
    char text[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (path) return attn_error_set(err, 0, STORE_ERROR_CODE, NULL, "%s: %s", path, text);
    return attn_error_set(err, 0, STORE_ERROR_CODE, NULL, "%s", text);
}
