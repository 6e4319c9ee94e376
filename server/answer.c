/*
 * answer.c — an answer's body read by libmicrohttpd through a callback
 * (answer.h).
 */
#include "server/answer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libmicrohttpd copies a callback's body into a buffer of this size (or of
 * the body's, when smaller), one send at a time: large enough that a large
 * answer costs few system calls, small enough to be nothing beside one. */
#define ANSWER_BLOCK ((size_t)256 * 1024)

typedef struct answer {
    char *body;
    size_t len;
    int owned;
    srv_budget *unsent; /* or NULL */
    size_t *handed;     /* or NULL */
} answer;

static ssize_t answer_read(void *cls, uint64_t pos, char *buf, size_t max) {
    answer *a = cls;
    if (pos >= a->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = a->len - (size_t)pos < max ? a->len - (size_t)pos : max;
    memcpy(buf, a->body + pos, n);
    if (a->handed) *a->handed = (size_t)pos + n;
    return (ssize_t)n;
}

static void answer_free(void *cls) {
    answer *a = cls;
    if (a->unsent) atomic_fetch_sub(&a->unsent->used, a->len);
    if (a->owned) free(a->body);
    free(a);
}

struct MHD_Response *srv_answer_response(char *body, size_t len, int owned, srv_budget *unsent,
                                         size_t *handed) {
    answer *a = malloc(sizeof *a);
    if (!a) {
        if (owned) free(body);
        return NULL;
    }
    *a = (answer){.body = body, .len = len, .owned = owned, .unsent = unsent, .handed = handed};
    if (unsent) atomic_fetch_add(&unsent->used, len);
    size_t block = len < ANSWER_BLOCK ? (len ? len : 1) : ANSWER_BLOCK;
    struct MHD_Response *r =
        MHD_create_response_from_callback(len, block, answer_read, a, answer_free);
    if (!r) answer_free(a);
    return r;
}

int srv_answer_budget_full(srv_budget *unsent) {
    return atomic_load(&unsent->used) >= unsent->max;
}
