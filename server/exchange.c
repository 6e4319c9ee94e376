/*
 * exchange.c — one request's life, as a state machine.
 *
 * libmicrohttpd calls the access handler several times for one request;
 * its state, an exchange, hangs on *con_cls. The transitions, all made by
 * srv_exchange_step on the connection's polling thread except the two a
 * worker makes (dispatch.h):
 *
 *   X_NEW       made at the URI log (the request line only), so that even
 *               a request libmicrohttpd refuses itself (431, a malformed
 *               chunk) reaches the completion callback and the log.
 *      → X_REPLIED   1st call: a framing fault (framing.h; the connection
 *                    closes after), or, for a request that announces a body
 *                    its route does not take, the route's answer (the body
 *                    is never read and the connection closes)
 *      → X_READING   1st call: a route that takes a body accepts it
 *                    (endpoint.h: accept)
 *      → X_DEFERRED  1st call, no body: answered on the 2nd call, which
 *                    keeps the connection alive
 *   X_DEFERRED → X_REPLIED (route checks, then the endpoint's answer)
 *   X_READING  → X_READING (a piece of the body, body.h)
 *              → X_REPLIED / X_WAITING / X_DONE at its end (answer)
 *   X_WAITING  → X_DONE | X_GONE (the worker, then it resumes the connection)
 *   X_DONE     → X_REPLIED (the job's answer)
 *   X_GONE     → closed unanswered (MHD_NO), logged 499
 *
 * Deadlines (watch.h): each connection's headers are due --connection-
 * timeout after its accept or its previous answer, a body as long after
 * its headers; the 1st call clears the headers' deadline, reading a body
 * sets one, its end clears it, and completion sets the next request's.
 *
 * Ownership. The exchange owns its body copy, request id, copies of method
 * and path, and the job's response or answer until it is handed to
 * libmicrohttpd (answer.h: the response takes it); until then its bytes
 * are held in the unsent answers' budget (x->held), given back here if
 * no response is ever made. While a worker runs its job the
 * connection is suspended, so libmicrohttpd cannot complete it and free
 * the exchange under the worker. srv_exchange_complete frees it, once.
 */
#include "server/exchange.h"

#include <stdlib.h>
#include <string.h>

#include "server/answer.h"
#include "server/cors.h"
#include "server/dispatch.h"
#include "server/endpoint.h"
#include "server/framing.h"
#include "server/headers.h"
#include "server/log.h"
#include "server/reply.h"
#include "server/reqid.h"

/* What the access log and the metrics call an exchange that ended without
 * its answer delivered: 408 when its headers or body took too long
 * (libmicrohttpd's idle timeout, or the watch's deadline), else 499
 * (nginx's "client closed request": the client hung up, or the connection
 * broke, before the whole answer was sent, or its job was dropped). */
#define SRV_STATUS_TIMEOUT       408
#define SRV_STATUS_CLIENT_CLOSED 499

/* 1 when the path (before any '?') of a raw request target holds %00,
 * which unescaping would turn into the end of the string; *in_query is set
 * when the query holds one. */
static int target_has_nul(const char *uri, int *in_query) {
    const char *q = strchr(uri, '?');
    *in_query = 0;
    for (const char *p = strstr(uri, "%00"); p; p = strstr(p + 1, "%00")) {
        if (q && p > q)
            *in_query = 1;
        else
            return 1;
    }
    return 0;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The path routed on: a raw request target's path (before any '?') with
 * its percent-escapes decoded, as libmicrohttpd decodes them, but for %2F
 * and %00, kept as sent. libmicrohttpd's decoded path turns an encoded
 * slash into a separator, so "/v2/models/demo-4d%2Fready" would route as
 * the model's readiness; kept, it is one segment, which names no model (a
 * model's name has no '%'). NULL when out of memory. */
static char *routing_path(const char *raw) {
    size_t n = strcspn(raw, "?");
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        int hi = raw[i] == '%' ? hex_digit(raw[i + 1]) : -1; /* then raw[i + 2] exists */
        int lo = hi >= 0 ? hex_digit(raw[i + 2]) : -1;
        int c = hi * 16 + lo;
        if (lo < 0 || c == '/' || c == 0) {
            *o++ = raw[i];
            continue;
        }
        *o++ = (char)c;
        i += 2;
    }
    *o = '\0';
    return out;
}

srv_exchange *srv_exchange_create(srv_http *h, const char *uri, struct MHD_Connection *conn) {
    srv_exchange *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->h = h;
    x->conn = conn;
    x->fd = -1;
    x->job.header_len = -1; /* the whole body is JSON unless /v2 says otherwise */
    x->state = X_NEW;
    clock_gettime(CLOCK_MONOTONIC, &x->start);
    if (uri) {
        x->nul_in_path = target_has_nul(uri, &x->nul_in_query);
        x->raw_target = uri;
        x->line_cut = srv_framing_target_cut(uri);
        x->path = strdup(uri); /* the raw target, until the handler knows the path */
    }
    srv_body_init(&x->body, &h->bodies, h->cfg->max_body_bytes, 0);
    /* Counted in flight, or marked late: the drain reads `draining` and
     * waits for the count under the same mutex, so an exchange either is
     * waited for or knows it came too late to be suspended. */
    pthread_mutex_lock(&h->mu);
    h->in_flight++;
    x->late = atomic_load(&h->draining);
    pthread_mutex_unlock(&h->mu);
    return x;
}

/* The request carries an API key in force. */
static int authorized(srv_keys *keys, struct MHD_Connection *conn) {
    return srv_keys_allow(
        keys, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
}

/* The 1st call's facts: route, request id, copies for the log, origin,
 * preflight, key. 0, or -1 when out of memory. */
static int learn_headers(srv_exchange *x, const char *url, const char *method) {
    srv_http *h = x->h;
    struct MHD_Connection *conn = x->conn;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    x->fd = ci ? ci->connect_fd : -1;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    x->watched = ci ? ci->socket_context : NULL;
    /* x->path holds the raw target still (srv_exchange_create); without
     * it (no URI-log call), only libmicrohttpd's decoded path is known. */
    char *path = x->raw_target && x->path ? routing_path(x->path) : strdup(url ? url : "");
    free(x->path);
    x->path = path;
    /* "%00" would end the unescaped path early: such a path names nothing */
    x->route = x->nul_in_path || !path ? SRV_ROUTE_OTHER : srv_route_find(path);
    x->request_id =
        srv_reqid_choose(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"));
    x->method = strdup(method ? method : "");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    int keep_origin = origin && srv_cors_allows(h->cfg->cors_origin, origin);
    if (keep_origin) x->origin = strdup(origin);
    if (!x->request_id || !x->method || !x->path || (keep_origin && !x->origin)) return -1;
    /* A preflight asks, before the real request, whether an allowed origin
     * may send it: answered without a key, as browsers send none. */
    x->preflight =
        x->origin && strcmp(method, "OPTIONS") == 0 &&
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    return 0;
}

/* A framing fault (framing.h), answered from the headers with the
 * connection closed after the answer: where the next request begins is not
 * known. MHD_YES with nothing sent when the framing is sound. */
static enum MHD_Result check_framing(srv_exchange *x, const char *method, const char *version) {
    srv_framing_fault f = srv_framing_check(x->conn, method, version, &x->authorization_cut);
    if (x->line_cut || (x->raw_target && srv_framing_method_cut(method, x->raw_target)))
        f = SRV_FRAMING_NUL_IN_REQUEST_LINE;
    if (f == SRV_FRAMING_OK) return MHD_YES;
    x->close = 1;
    return srv_reply_fail(x, srv_framing_status(f),
                          f == SRV_FRAMING_CODING ? "not_implemented" : "bad_request", "%s",
                          srv_framing_message(f));
}

/* Answers a request that takes no body: the route's checks, then its
 * endpoint. */
static enum MHD_Result answer(srv_exchange *x, const char *method) {
    if (x->route == SRV_ROUTE_OTHER) return srv_reply_fail(x, 404, "not_found", "no such path");
    if (x->preflight) return srv_reply_static(x, 204, "", 0, "text/plain");
    if (x->unauthorized)
        return srv_reply_fail(x, 401, "unauthorized",
                              "this server needs an API key: send it as Authorization: Bearer KEY");
    if (!srv_route_allows(x->route, method))
        return srv_reply_fail(x, 405, "method_not_allowed", "method not allowed; allowed: %s",
                              srv_route_allow(x->route));
    if (x->nul_in_query)
        return srv_reply_fail(x, 400, "invalid_value", "the query holds a NUL byte (%%00)");
    return srv_route_endpoint(x->route)->answer(x);
}

enum MHD_Result srv_exchange_read_body(srv_exchange *x) {
    srv_http *h = x->h;
    x->state = X_READING;
    /* Due within --connection-timeout of its headers, whether or not bytes
     * keep coming. */
    srv_watch_deadline(h->watch, x->watched, (double)h->cfg->connection_timeout);
    return MHD_YES;
}

/* The 1st call: the headers are in. */
static enum MHD_Result on_headers(srv_exchange *x, const char *url, const char *method,
                                  const char *version) {
    srv_http *h = x->h;
    if (learn_headers(x, url, method) != 0) return MHD_NO; /* out of memory: drop it */
    srv_watch_deadline(h->watch, x->watched, 0);           /* a body sets its own */
    enum MHD_Result framing = check_framing(x, method, version);
    if (x->state == X_REPLIED) return framing;
    x->unauthorized = !x->preflight && !srv_route_open(x->route) && h->keys &&
                      srv_keys_required(h->keys) &&
                      (x->authorization_cut || !authorized(h->keys, x->conn));
    const srv_endpoint *ep = srv_route_endpoint(x->route);
    if (ep && ep->accept && srv_route_allows(x->route, method) && !x->unauthorized) {
        x->body.declared = srv_headers_declared_length(x->conn);
        return ep->accept(x);
    }
    /* An answer queued on this first call makes libmicrohttpd close the
     * connection afterwards, which is right when a body we do not want is
     * coming (it is never read), but wasteful otherwise. */
    if (srv_headers_body(x->conn)) return answer(x, method);
    x->state = X_DEFERRED;
    return MHD_YES;
}

enum MHD_Result srv_exchange_step(srv_exchange *x, const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size) {
    switch (x->state) {
    case X_NEW: return on_headers(x, url, method, version);
    case X_DEFERRED:
        if (*upload_data_size) { /* a body after all; not wanted */
            *upload_data_size = 0;
            return MHD_YES;
        }
        return answer(x, method);
    case X_READING:
        if (*upload_data_size) {
            srv_body_append(&x->body, upload_data, *upload_data_size);
            *upload_data_size = 0;
            return MHD_YES;
        }
        srv_watch_deadline(x->h->watch, x->watched, 0); /* the body is in */
        return srv_route_endpoint(x->route)->answer(x);
    case X_DONE: return srv_dispatch_reply(x);
    case X_GONE: return MHD_NO; /* closes the connection: its client has left */
    case X_WAITING:
    case X_REPLIED: break;
    }
    /* Already answered (or, impossibly, suspended): drop further upload. */
    *upload_data_size = 0;
    return MHD_YES;
}

void srv_exchange_complete(srv_exchange *x, struct MHD_Connection *conn,
                           enum MHD_RequestTerminationCode toe) {
    srv_http *h = x->h;
    int status = x->status;
    size_t bytes = x->bytes;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_watched *watched = ci ? ci->socket_context : NULL;
    const char *cut = NULL;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && x->state == X_REPLIED && x->status) {
        /* its answer went out, not whole: logged with its status and the
         * bytes that went, and why */
        cut = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timeout" : "closed";
        bytes = x->sent;
        srv_metrics_count(h->metrics, SRV_EVENT_ANSWER_CUT);
    } else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        if (!x->status && !x->gone && ci && ci->http_status) {
            /* libmicrohttpd answered this request itself (a malformed
             * chunk, a header block over its buffer): count its status. */
            status = (int)ci->http_status;
        } else {
            status = !x->gone && (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ||
                                  srv_watch_expired(h->watch, watched))
                         ? SRV_STATUS_TIMEOUT
                         : SRV_STATUS_CLIENT_CLOSED;
        }
        bytes = 0;
    } else {
        /* what went: the whole body, or none of it for a HEAD */
        if (x->state == X_REPLIED) bytes = x->sent;
        /* The next request's headers are due within the timeout of this
         * answer, as the first one's were of the accept. */
        srv_watch_deadline(h->watch, watched, (double)h->cfg->connection_timeout);
    }
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ms = srv_ms_between(&x->start, &end);
    srv_metrics_observe(h->metrics, x->state == X_NEW ? SRV_ROUTE_OTHER : x->route, status,
                        ms / 1e3);
    srv_log_access(x->method ? x->method : "-", x->path ? x->path : "-", status, bytes, ms,
                   x->request_id ? x->request_id : "-", cut);

    srv_answer_unhold(&h->unsent, &x->held); /* an answer never made a response */
    srv_body_free(&x->body);
    srv_job_discard(&x->job);
    free(x->job.response); /* set only if never sent */
    free(x->request_id);
    free(x->origin);
    free(x->method);
    free(x->path);
    free(x);

    pthread_mutex_lock(&h->mu);
    if (--h->in_flight == 0) pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->mu);
}
