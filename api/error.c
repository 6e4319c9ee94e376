/*
 * error.c — an attn_error as the contract's JSON body. The body is built
 * with jansson, which does the escaping, and can only fail for want of
 * memory.
 */
#include "api/error.h"

#include <jansson.h>
#include <string.h>

char *api_error_to_json(const attn_error *err, size_t *len) {
    attn_error clean;
    json_t *body;
    char *text;

    /* A caller may have filled the value by hand: make both texts valid
     * UTF-8 so that jansson cannot refuse them. */
    clean = *err;
    attn_error_sanitize(&clean);
    body = json_pack("{s:{s:s, s:s, s:s}}", "error", "code",
                     clean.code ? clean.code : "internal_error", "message", clean.message, "path",
                     clean.path);
    if (body == NULL) return NULL;
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text && len) *len = strlen(text);
    return text;
}
