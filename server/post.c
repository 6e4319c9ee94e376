/*
 * post.c — the checks around a request body that every POST endpoint
 * makes (post.h).
 */
#include "server/post.h"

#include <stdio.h>
#include <stdlib.h>

#include "server/answer.h"
#include "server/endpoint.h"
#include "server/reply.h"
#include "server/route.h"
#include "server/watch.h"

static enum MHD_Result fail_overloaded(srv_exchange *x) {
    return srv_reply_fail(x, 503, "overloaded",
                          "the server holds too many request bodies (%zu bytes at most); retry "
                          "later",
                          x->h->cfg->max_inflight_bytes);
}

static enum MHD_Result fail_too_large(srv_exchange *x) {
    return srv_reply_fail(x, 413, "body_too_large",
                          "the body is larger than the limit of %zu bytes",
                          x->h->cfg->max_body_bytes);
}

enum MHD_Result srv_post_accept(srv_exchange *x, int (*type_ok)(const char *content_type),
                                const char *type_rule) {
    srv_http *h = x->h;
    if (atomic_load(&h->draining)) return srv_reply_shutting_down(x);
    if (srv_answer_budget_full(&h->unsent)) return srv_reply_unsent_full(x);
    const char *ct =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type_ok(ct)) return srv_reply_fail(x, 415, "unsupported_media_type", "%s", type_rule);
    size_t declared = x->body.declared;
    if (declared > h->cfg->max_body_bytes) return fail_too_large(x);
    /* A budget already too full for the body's first piece is refused
     * now, before a byte of it is read. */
    if (srv_body_first_piece(declared) > srv_budget_room(&h->bodies)) return fail_overloaded(x);
    /* A body too slow to arrive is answered in the route's error form: the
     * watch's own 408 body is /v1's, so only the protocol's routes set one.
     * A connection kept alive carries the body from request to request, so
     * every other route sets the default back. */
    if (srv_route_oip(x->route, x->path)) {
        attn_error late;
        attn_error_set(&late, 408, "request_timeout", NULL,
                       "the request did not arrive within --connection-timeout");
        size_t late_len = 0;
        char *late_body = srv_reply_error_body(x, &late, &late_len);
        if (late_body) srv_watch_timeout_body(h->watch, x->watched, late_body, late_len);
        free(late_body);
    } else {
        srv_watch_timeout_body(h->watch, x->watched, NULL, 0);
    }
    return srv_exchange_read_body(x);
}

int srv_post_body_failed(srv_exchange *x, enum MHD_Result *ret) {
    switch (x->body.state) {
    case SRV_BODY_TOO_LARGE: *ret = fail_too_large(x); return 1;
    case SRV_BODY_NO_MEMORY:
        *ret = srv_reply_fail(x, 503, "out_of_memory", "memory for the body could not be had");
        return 1;
    case SRV_BODY_OVERLOADED: *ret = fail_overloaded(x); return 1;
    case SRV_BODY_OK: break;
    }
    return 0;
}

int srv_post_timing_headers(const srv_exchange *x, struct MHD_Response *r, unsigned status) {
    (void)status;
    char timing[192];
    snprintf(timing, sizeof timing,
             "queue;dur=%.3f, decode;dur=%.3f, compute;dur=%.3f, encode;dur=%.3f", x->job.queue_ms,
             x->job.decode_ms, x->job.compute_ms, x->job.encode_ms);
    MHD_add_response_header(r, "Server-Timing", timing);
    return 0;
}
