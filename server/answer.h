/*
 * answer.h — an answer's body on its way out, and the server-wide count of
 * the bytes of answers built and not yet sent.
 *
 * libmicrohttpd reads every body through a callback (answer.c), for two
 * things a response made from a buffer would hide (a /v2 answer of binary
 * tensors is no body but is read from its outputs, through the same
 * callback):
 *  - the bytes it has really taken, for the access log: an answer cut
 *    short (its client stopped reading, or left) is logged with its status
 *    and what went out, not as nothing;
 *  - the moment it lets the body go: until then the body's bytes count in
 *    a srv_budget (body.h) bounded by --max-unsent-bytes. The count may
 *    pass the bound (an answer already built is never thrown away); while
 *    it is over, new work is refused with 503 (post.c, dispatch.c), so that
 *    clients that send requests and never read the answers cannot hold
 *    the server's memory.
 */
#ifndef SRV_ANSWER_H
#define SRV_ANSWER_H

#include <microhttpd.h>
#include <stddef.h>

#include "api/call.h"
#include "server/body.h"

/*
 * A response of `len` bytes of `body`. When `owned`, the response takes
 * the malloc'd body and frees it with itself (and on failure, here). When
 * `unsent` is not NULL, len is added to it until the response is let go.
 * *handed (may be NULL) is kept at the bytes libmicrohttpd has taken, on
 * the connection's thread, until the request completes: it must outlive
 * that. Returns NULL when out of memory.
 */
struct MHD_Response *srv_answer_response(char *body, size_t len, int owned, srv_budget *unsent,
                                         size_t *handed);

/*
 * The same for an answer read as it is sent (api/call.h: a /v2 answer of
 * binary tensors read from the outputs they were computed into), which the
 * response takes and destroys with itself (on failure, here); counted in
 * `unsent` at its length, as a body is.
 */
struct MHD_Response *srv_answer_response_read(api_answer *from, srv_budget *unsent, size_t *handed);

/* A job's answer counted in `unsent` from the moment its worker made it,
 * before its connection makes the response (which counts it again):
 * returns what was added, for srv_answer_unhold. */
size_t srv_answer_hold(srv_budget *unsent, size_t len);
void srv_answer_unhold(srv_budget *unsent, size_t *held);

/* Whether the unsent answers are at or over their bound (a snapshot). */
int srv_answer_budget_full(srv_budget *unsent);

#endif
