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
#include "server/cors.h"
#include "server/endpoint.h"

/* The body used when even an error body cannot be allocated. */
static const char oom_body[] =
    "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"the server is out of memory\","
    "\"path\":\"\"}}";

/* The Open Inference Protocol's form of it, for the /v2 paths. */
static const char oom_body_oip[] = "{\"error\":\"the server is out of memory\"}";

enum MHD_Result srv_reply(srv_exchange *x, unsigned status, char *body, size_t len, int must_free,
                          const char *content_type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (must_free) free(body);
        return MHD_NO;
    }
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
    if (x->origin)
        srv_cors_headers(r, h->cfg->cors_origin, x->origin, x->preflight,
                         srv_route_allow(x->route));
    if (atomic_load(&h->draining) || x->close)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(x->conn, status, r);
    MHD_destroy_response(r);
    x->status = (int)status;
    x->bytes = len;
    x->state = X_REPLIED;
    return ret;
}

enum MHD_Result srv_reply_json(srv_exchange *x, unsigned status, const char *text) {
    return srv_reply(x, status, (char *)text, strlen(text), 0, "application/json");
}

enum MHD_Result srv_reply_oom(srv_exchange *x) {
    if (srv_route_oip(x->route, x->path))
        return srv_reply(x, 503, (char *)oom_body_oip, sizeof oom_body_oip - 1, 0,
                         "application/json");
    return srv_reply(x, 503, (char *)oom_body, sizeof oom_body - 1, 0, "application/json");
}

char *srv_reply_error_body(const srv_exchange *x, const attn_error *err, size_t *len) {
    if (srv_route_oip(x->route, x->path)) return api_oip_error_json(err, len);
    return api_error_to_json(err, len);
}

enum MHD_Result srv_reply_error(srv_exchange *x, const attn_error *err) {
    size_t len = 0;
    char *body = srv_reply_error_body(x, err, &len);
    if (!body) return srv_reply_oom(x);
    return srv_reply(x, (unsigned)err->status, body, len, 1, "application/json");
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
