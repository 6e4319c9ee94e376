/*
 * body.h — a request body's copy, and the server-wide budget it draws from.
 *
 * Request bodies held at once, over every connection, are bounded by
 * --max-inflight-bytes: a srv_budget, an atomic count of reserved bytes.
 * A body reserves its copy as the copy grows (a first piece of
 * SRV_BODY_FIRST_PIECE, then doubling, capped by Content-Length and the
 * body limit), never what Content-Length announces, so that headers
 * announcing 64 MiB each cannot hold the budget with nothing sent.
 *
 * A body that goes over its limit, or finds the budget or memory short, is
 * dropped (its copy freed, its reservation returned) and only counted out
 * from then on: libmicrohttpd cannot answer in the middle of an upload, so
 * the answer (413 or 503) comes at its end. srv_body_free returns what is
 * reserved and zeroes it, so each byte is returned exactly once.
 */
#ifndef SRV_BODY_H
#define SRV_BODY_H

#include <stdatomic.h>
#include <stddef.h>

/* A body's copy starts at this size and doubles. */
#define SRV_BODY_FIRST_PIECE ((size_t)65536)

typedef struct srv_budget {
    atomic_size_t used; /* reserved by every body, <= max */
    size_t max;
} srv_budget;

/* Bytes left in the budget now (a snapshot). */
size_t srv_budget_room(srv_budget *b);

typedef enum srv_body_state {
    SRV_BODY_OK,
    SRV_BODY_TOO_LARGE, /* over the limit: 413 at the end */
    SRV_BODY_NO_MEMORY, /* 503 out_of_memory */
    SRV_BODY_OVERLOADED /* the budget could not grow it: 503 overloaded */
} srv_body_state;

typedef struct srv_body {
    char *data; /* malloc'd copy, not NUL-terminated; NULL until a byte came */
    size_t len, cap;
    size_t declared; /* Content-Length, or 0 */
    size_t max;      /* --max-body-bytes */
    size_t reserved; /* of budget->used */
    srv_body_state state;
    srv_budget *budget;
} srv_body;

/* The first piece a body of `declared` bytes (0: unknown) reserves. */
size_t srv_body_first_piece(size_t declared);

/* An empty body drawing on `budget`, of at most max bytes. */
void srv_body_init(srv_body *b, srv_budget *budget, size_t max, size_t declared);

/* Appends a piece (see the top comment for what happens past a limit). */
void srv_body_append(srv_body *b, const char *data, size_t n);

/* Frees the copy and returns its reservation; safe to call again. */
void srv_body_free(srv_body *b);

#endif
