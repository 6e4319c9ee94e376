/*
 * error.c — filling a store_error.
 */
#include "store/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int store_error_set(store_error *err, const char *path, const char *fmt, ...) {
    if (!err) return -1;
    size_t used = 0;
    if (path) {
        int n = snprintf(err->message, sizeof err->message, "%s: ", path);
        used = n < 0 ? 0 : (size_t)n;
        if (used >= sizeof err->message) return -1; /* the path alone fills it */
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + used, sizeof err->message - used, fmt, ap);
    va_end(ap);
    return -1;
}
