/*
 * post.h — what every endpoint that takes a body checks around it, the
 * same way on each: from the headers alone, before a byte of the body is
 * read, 503 while draining, 415 for a Content-Type the endpoint does not
 * take, 413 from Content-Length, and 503 overloaded when the body budget
 * cannot hold a first piece or the answers not yet sent are over theirs
 * (answer.h); once the body is in, the failures of reading
 * it (413, 503). The answers take the route's error form (reply.h).
 */
#ifndef SRV_POST_H
#define SRV_POST_H

#include <microhttpd.h>

#include "server/http_state.h"

/* An endpoint's accept: the checks above, with `type_ok` saying whether a
 * Content-Type (NULL when absent) is one it takes and `type_rule` the 415's
 * sentence; then the body is read (srv_exchange_read_body). */
enum MHD_Result srv_post_accept(srv_exchange *x, int (*type_ok)(const char *content_type),
                                const char *type_rule);

/* At answer: 1 with *ret the answer when the body could not be read whole
 * (too large, no memory, over the budget); 0 when it is in x->body. */
int srv_post_body_failed(srv_exchange *x, enum MHD_Result *ret);

/* Server-Timing of a computation's answer: zero durations for answers given
 * before a job ran. An endpoint's headers hook. */
int srv_post_timing_headers(const srv_exchange *x, struct MHD_Response *r, unsigned status);

#endif
