/*
 * answer.c — an answer's body read by libmicrohttpd through a callback
 * (answer.h): a body's bytes copied from it, or an api_answer's read from
 * the outputs it was computed into.
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
    char *body;       /* or NULL: read from `from` */
    api_answer *from; /* owned, when there is no body */
    size_t len;
    int owned;
    srv_budget *unsent; /* or NULL */
    size_t *handed;     /* or NULL */
} answer;

static ssize_t answer_read(void *cls, uint64_t pos, char *buf, size_t max) {
    answer *a = cls;
    if (pos >= a->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = a->len - (size_t)pos < max ? a->len - (size_t)pos : max;
    if (a->from)
        n = api_answer_read(a->from, (size_t)pos, buf, n);
    else
        memcpy(buf, a->body + pos, n);
    if (n == 0) return MHD_CONTENT_READER_END_WITH_ERROR; /* shorter than it said */
    if (a->handed) *a->handed = (size_t)pos + n;
    return (ssize_t)n;
}

static void answer_free(void *cls) {
    answer *a = cls;
    if (a->unsent) atomic_fetch_sub(&a->unsent->used, a->len);
    if (a->owned) free(a->body);
    api_answer_destroy(a->from);
    free(a);
}

/* The response of an answer whose fields are set but for the budget's. */
static struct MHD_Response *answer_response(answer *a) {
    if (a->unsent) atomic_fetch_add(&a->unsent->used, a->len);
    size_t block = a->len < ANSWER_BLOCK ? (a->len ? a->len : 1) : ANSWER_BLOCK;
    struct MHD_Response *r =
        MHD_create_response_from_callback(a->len, block, answer_read, a, answer_free);
    if (!r) answer_free(a);
    return r;
}

struct MHD_Response *srv_answer_response(char *body, size_t len, int owned, srv_budget *unsent,
                                         size_t *handed) {
    answer *a = malloc(sizeof *a);
    if (!a) {
        if (owned) free(body);
        return NULL;
    }
    *a = (answer){.body = body, .len = len, .owned = owned, .unsent = unsent, .handed = handed};
    return answer_response(a);
}

struct MHD_Response *srv_answer_response_read(api_answer *from, srv_budget *unsent,
                                              size_t *handed) {
    answer *a = malloc(sizeof *a);
    if (!a) {
        api_answer_destroy(from);
        return NULL;
    }
    *a = (answer){.from = from, .len = api_answer_length(from), .unsent = unsent, .handed = handed};
    return answer_response(a);
}

size_t srv_answer_hold(srv_budget *unsent, size_t len) {
    atomic_fetch_add(&unsent->used, len);
    return len;
}

void srv_answer_unhold(srv_budget *unsent, size_t *held) {
    if (*held) atomic_fetch_sub(&unsent->used, *held);
    *held = 0;
}

int srv_answer_budget_full(srv_budget *unsent) {
    return atomic_load(&unsent->used) >= unsent->max;
}
