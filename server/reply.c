/*
 * reply.c — an answer and its headers (reply.h).
 */
#include "server/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/error.h"
#include "api/oip.h"
#include "server/answer.h"
#include "server/cors.h"
#include "server/endpoint.h"

/* The body used when even an error body cannot be allocated. */
static const char oom_body[] =
    "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"the server is out of memory\","
    "\"path\":\"\"}}";

/* The Open Inference Protocol's form of it, for the /v2 paths. */
static const char oom_body_oip[] = "{\"error\":\"the server is out of memory\"}";

/* Adds the headers and queues r; the exchange is replied from then on. */
static enum MHD_Result reply_queue(srv_exchange *x, unsigned status, struct MHD_Response *r,
                                   size_t len, const char *content_type) {
    srv_http *h = x->h;
    const srv_endpoint *ep = srv_route_endpoint(x->route);
    if (content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, "X-Request-Id", x->request_id);
    /* An endpoint that sets its own caching says so in its headers hook. */
    if (!(ep && ep->headers && ep->headers(x, r, status)))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, srv_route_allow(x->route));
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (x->origin) {
        srv_cors_headers(r, h->cfg->cors_origin, x->origin);
        if (x->preflight) srv_cors_preflight_headers(r, srv_route_allow(x->route));
    }
    if (atomic_load(&h->draining) || x->close)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(x->conn, status, r);
    MHD_destroy_response(r);
    x->status = (int)status;
    x->bytes = len;
    x->state = X_REPLIED;
    return ret;
}

enum MHD_Result srv_reply_new(srv_exchange *x, unsigned status, char *body, size_t len,
                              const char *content_type) {
    struct MHD_Response *r = srv_answer_response(body, len, 1, &x->h->unsent, &x->sent);
    if (!r) return MHD_NO;
    return reply_queue(x, status, r, len, content_type);
}

enum MHD_Result srv_reply_static(srv_exchange *x, unsigned status, const char *body, size_t len,
                                 const char *content_type) {
    /* not owned, so only read: the one place the const goes */
    struct MHD_Response *r = srv_answer_response((char *)body, len, 0, NULL, &x->sent);
    if (!r) return MHD_NO;
    return reply_queue(x, status, r, len, content_type);
}

enum MHD_Result srv_reply_json(srv_exchange *x, unsigned status, const char *text) {
    return srv_reply_static(x, status, text, strlen(text), "application/json");
}

enum MHD_Result srv_reply_oom(srv_exchange *x) {
    if (srv_route_oip(x->route, x->path))
        return srv_reply_static(x, 503, oom_body_oip, sizeof oom_body_oip - 1, "application/json");
    return srv_reply_static(x, 503, oom_body, sizeof oom_body - 1, "application/json");
}

char *srv_reply_error_body(const srv_exchange *x, const attn_error *err, size_t *len) {
    if (srv_route_oip(x->route, x->path)) return api_oip_error_json(err, len);
    return api_error_to_json(err, len);
}

enum MHD_Result srv_reply_error(srv_exchange *x, const attn_error *err) {
    size_t len = 0;
    char *body = srv_reply_error_body(x, err, &len);
    if (!body) return srv_reply_oom(x);
    return srv_reply_new(x, (unsigned)err->status, body, len, "application/json");
}

enum MHD_Result srv_reply_fail(srv_exchange *x, int status, const char *code, const char *fmt,
                               ...) {
    attn_error err;
    char msg[sizeof err.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    attn_error_set(&err, status, code, NULL, "%s", msg);
    return srv_reply_error(x, &err);
}

int srv_error_shutting_down(attn_error *err) {
    return attn_error_set(err, 503, "shutting_down", NULL,
                          "the server is shutting down; retry elsewhere");
}

enum MHD_Result srv_reply_shutting_down(srv_exchange *x) {
    attn_error err;
    srv_error_shutting_down(&err);
    return srv_reply_error(x, &err);
}

int srv_error_unsent_full(const srv_http *h, attn_error *err) {
    return attn_error_set(err, 503, "overloaded", NULL,
                          "the server holds too many answers their clients have not read (%zu "
                          "bytes at most); retry later",
                          h->cfg->max_unsent_bytes);
}

enum MHD_Result srv_reply_unsent_full(srv_exchange *x) {
    attn_error err;
    srv_error_unsent_full(x->h, &err);
    return srv_reply_error(x, &err);
}

enum MHD_Result srv_reply_answer(srv_exchange *x, unsigned status, api_answer *a,
                                 const char *content_type) {
    size_t len = api_answer_length(a);
    struct MHD_Response *r = srv_answer_response_read(a, &x->h->unsent, &x->sent);
    if (!r) return MHD_NO;
    return reply_queue(x, status, r, len, content_type);
}
