/*
 * http.c — routing and connection handling on libmicrohttpd.
 *
 * Threads. libmicrohttpd runs --io-threads polling threads (its internal
 * thread pool, epoll on Linux); each connection stays on one of them. They
 * parse, route, copy bodies and send answers. Decoding and computing
 * happen on the worker pool (pool.c); so does writing a model's weights
 * (GET /v1/models/{name}?weights=true), which goes through the same
 * suspend / job / resume steps (x_submit) as a POST. The model list and a
 * model's summary are cheap and answered here.
 *
 * Tiny requests are the one exception: a body of at most
 * SRV_HTTP_INLINE_MAX_BODY bytes whose computation takes at most
 * --inline-max-flops (a teaching example: a few microseconds to decode,
 * compute and encode) is run on its polling thread (x_try_inline), with a
 * srv_worker of that thread's own, and answered at once. Handing it to a
 * worker would cost more than running it: a suspend and a resume, a queue
 * and two thread switches. A small body with more work than that is
 * decoded, found too large and then queued as any other, so a polling
 * thread never spends more than about the cap's worth of computation.
 *
 * The life of a request. The access handler is called several times for
 * one request; its state, an `exchange`, hangs on *con_cls:
 *
 *   URI log       the request line only (on_uri): the exchange is made, so
 *                 that even a request libmicrohttpd refuses itself reaches
 *                 the completion callback.
 *   1st call      headers only. The route is found, the request id chosen,
 *                 the framing checked (framing.h: a fault is answered with
 *                 the connection closed). For POST /v1/attention whatever
 *                 can be refused from the headers is refused now, before a
 *                 byte of the body is read: 415, 413 from Content-Length,
 *                 503 while draining, and 503 overloaded when the body
 *                 budget (below) cannot hold a first piece. Other requests
 *                 are answered now if they carry a body (it is then never
 *                 read and the connection closes), else on the 2nd call,
 *                 which keeps the connection alive.
 *   next calls    a piece of the body each; copied and counted against
 *                 --max-body-bytes (bodies without Content-Length too; an
 *                 over-long one is read to its end and discarded, because
 *                 libmicrohttpd cannot send an answer in the middle of an
 *                 upload, and then answered 413). The copy grows with what
 *                 arrives (doubling from 64 KiB, capped by Content-Length),
 *                 never allocated whole from the client's word. A body
 *                 still arriving --connection-timeout after its headers is
 *                 cut by the watch with a 408 (below).
 *   last upload   (upload_data_size 0) the connection is suspended FIRST
 *                 and the job queued SECOND, so the worker's resume always
 *                 follows the suspend. If the queue refuses the job, the
 *                 handler stores a 503 and resumes the connection itself.
 *   worker        srv_job_run fills the job's result, marks the exchange
 *                 done and calls MHD_resume_connection; it touches the
 *                 exchange no more after that call.
 *   resumed call  the handler sends the stored result.
 *   completed     the completion callback writes the access-log line,
 *                 counts the request in the metrics, returns the body
 *                 reservation and frees the exchange: the one place an
 *                 exchange is freed. It is told how the exchange ended: one
 *                 whose answer was not delivered (the client hung up while
 *                 its body was read, its job queued or running, or its
 *                 answer sent) is logged and counted 499, or 408 on a
 *                 timeout, never as the status it would have had.
 *
 * A client that hangs up while its connection is suspended. libmicrohttpd
 * does not watch a suspended connection: it neither notices the hang-up nor
 * times it out, and it must not be stopped while one is suspended. So the
 * job asks (x_client_gone: a peek at the socket) before it runs and between
 * the phases of a split computation, and a full queue gives up the places
 * of such jobs (pool_evict, x_drop). A dropped job resumes its
 * connection in X_GONE, and the handler then closes it (logged 499). A job
 * that ran to its end is resumed as usual; libmicrohttpd then finds the
 * socket dead and calls the completion callback once, with a termination
 * code other than COMPLETED_OK. Either way the exchange is freed once,
 * after the worker is done with it.
 *
 * Memory. Request bodies held at once, over every connection, are bounded
 * by --max-inflight-bytes: an atomic count of reserved bytes. A body
 * reserves its copy as the copy grows (a first piece of 64 KiB, then
 * doubling, capped by Content-Length), never what Content-Length announces;
 * a budget that cannot hold the first piece refuses the POST from its
 * headers (503 overloaded, unread), and a body that outgrows what is left
 * is read to its end, discarded and answered 503 overloaded, as for 413.
 * x_release gives the reservation back when the copy is dropped, when the
 * job's answer is queued, and in the completion callback; it zeroes what it
 * returned, so each byte is returned exactly once. --max-connections caps
 * the connections (suspended ones count), and so the per-connection state:
 * on_accept closes one over it at once.
 *
 * Deadlines (watch.h): each connection's headers are due --connection-
 * timeout after its accept or its previous answer, a body as long after
 * its headers; on_connection registers the connection, the 1st call and
 * the end of a body move or clear its deadline, on_completed sets the next.
 *
 * Ownership. The exchange owns the body copy, the request id and the
 * response buffer until it is handed to libmicrohttpd (MHD_RESPMEM_MUST_FREE
 * moves it). While the worker runs, the connection is suspended, so
 * libmicrohttpd cannot complete it and free the exchange under the worker.
 *
 * Drain. srv_http_drain marks the server draining (new POSTs and /readyz
 * answer 503 from then on), stops accepting connections with
 * MHD_quiesce_daemon, and waits on a condition variable until the count of
 * exchanges — incremented at the 1st call, decremented in the completion
 * callback — is zero. No connection is suspended then, so MHD_stop_daemon
 * is allowed.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/buffer.h"
#include "api/error.h"
#include "api/models.h"
#include "server/job.h"
#include "server/framing.h"
#include "server/log.h"
#include "server/openapi.h"
#include "server/page.h"
#include "server/reqid.h"
#include "server/route.h"
#include "server/watch.h"

/* The largest body x_try_inline considers: decoding it takes microseconds. */
#define SRV_HTTP_INLINE_MAX_BODY 4096

/* A body's copy starts at this size and doubles (x_append). */
#define SRV_HTTP_FIRST_PIECE 65536

struct srv_http {
    struct MHD_Daemon *daemon;
    const cfg_config *cfg;
    const api_limits *limits;
    pool *workers;
    srv_metrics *metrics;
    store *models; /* may be NULL: no models */
    srv_watch *watch; /* deadlines on every connection */
    srv_keys *keys; /* may be NULL: no key needed */
    unsigned port;
    MHD_socket listen_fd; /* returned by MHD_quiesce_daemon; closed after stop */

    char page_etag[24]; /* "<FNV-1a 64 of the page>", quotes included */

    pthread_key_t inline_key; /* each polling thread's srv_worker for tiny requests */
    int inline_key_made;

    atomic_int draining;
    atomic_size_t connections; /* open, counted by on_connection */
    atomic_size_t body_bytes; /* reserved by all exchanges, <= cfg->max_inflight_bytes */
    pthread_mutex_t mu;
    pthread_cond_t idle; /* in_flight reached 0 */
    size_t in_flight;
};

typedef enum {
    X_NEW,      /* its request line is in (uri_log); the handler not yet called */
    X_HEADERS,  /* 1st call not finished */
    X_DEFERRED, /* routed; answered once the (empty) request is complete */
    X_READING,  /* reading a POST body */
    X_WAITING,  /* suspended, job queued */
    X_DONE,     /* job result ready to send */
    X_GONE,     /* its client left while its job waited or ran: closed unanswered */
    X_REPLIED   /* a response is queued */
} x_state;

typedef struct exchange {
    srv_http *h;
    struct MHD_Connection *conn;
    srv_route route;
    x_state state;
    char *request_id;
    char *method, *path; /* copies, for the access log */
    char *origin;        /* the Origin header when --cors-origin allows it, else NULL */
    int preflight;       /* a CORS preflight (OPTIONS) from an allowed origin */
    int unauthorized;    /* an API key is needed and was not given */
    int late;            /* made after draining began: never suspended */
    int gone;            /* its job was dropped: the client had left */
    int close;           /* answer with Connection: close (a framing error) */
    int nul_in_path;     /* the request target held %00 in its path */
    int authorization_cut; /* its Authorization held a NUL: no key in force */
    int nul_in_query;    /* ... or in its query */
    const char *raw_target; /* in libmicrohttpd's buffer, for the 1st call's checks */
    int line_cut;        /* a NUL byte in the request line (framing.h) */
    int fd;              /* the connection's socket, to see whether its client left */
    srv_watched *watched; /* the connection's deadline entry (watch.h), or NULL */
    struct timespec start;
    int status;
    size_t bytes;

    char *body;
    size_t len, cap, declared; /* declared: Content-Length, or 0 */
    size_t reserved;           /* of h->body_bytes; returned by x_release, once */
    enum { BODY_OK, BODY_TOO_LARGE, BODY_NO_MEMORY, BODY_OVERLOADED } body_state;

    srv_job job;
} exchange;

/* The body used when even an error body cannot be allocated. */
static const char oom_body[] =
    "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"the server is out of memory\","
    "\"path\":\"\"}}";

/* ---- small parsers (exported for tests) ---- */

int srv_http_is_json_type(const char *ct) {
    if (!ct) return 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char app[] = "application/";
    size_t a = sizeof app - 1;
    if (n <= a || strncasecmp(ct, app, a) != 0) return 0;
    const char *sub = ct + a;
    size_t sn = n - a;
    if (memchr(sub, '/', sn) || memchr(sub, ' ', sn)) return 0;
    if (!(sn == 4 && strncasecmp(sub, "json", 4) == 0) &&
        !(sn > 5 && strncasecmp(sub + sn - 5, "+json", 5) == 0))
        return 0;
    /* The body is read as UTF-8, so a charset parameter naming another
     * encoding is refused rather than misread. */
    for (const char *p = strchr(ct, ';'); p; p = strchr(p + 1, ';')) {
        const char *v = p + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strncasecmp(v, "charset=", 8) != 0) continue;
        v += 8;
        int quoted = *v == '"';
        v += quoted;
        size_t vn = strcspn(v, quoted ? "\"" : "; \t");
        if (!((vn == 5 && strncasecmp(v, "utf-8", 5) == 0) ||
              (vn == 4 && strncasecmp(v, "utf8", 4) == 0)))
            return 0;
    }
    return 1;
}

int srv_http_parse_length(const char *v, size_t *out) {
    if (!v || *v < '0' || *v > '9') return -1;
    size_t n = 0;
    for (; *v >= '0' && *v <= '9'; v++) {
        size_t d = (size_t)(*v - '0');
        n = n > (SIZE_MAX - d) / 10 ? SIZE_MAX : n * 10 + d;
    }
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v) return -1;
    *out = n;
    return 0;
}

/* ---- CORS ---- */

/* 1 when `origin` is allowed by the --cors-origin list: "*", or one of the
 * origins separated by commas (compared without regard to case, as
 * schemes and host names are). */
static int cors_allows(const char *list, const char *origin) {
    if (!*list) return 0;
    if (strcmp(list, "*") == 0) return 1;
    size_t len = strlen(origin);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncasecmp(p, origin, n) == 0) return 1;
        p += n + (end != NULL);
    }
    return 0;
}

/* ---- sending ---- */

/* The page may be cached but must be revalidated (no-cache), so a new
 * server version is seen at once; its ETag makes that a 304. The policy
 * lets it run its own inline script and style and talk to this origin
 * only: no other script, frame, form target or connection. */
static void x_page_headers(exchange *x, struct MHD_Response *r) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, x->h->page_etag);
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; "
                            "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; "
                            "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}

/* Queues a response. `body` is moved into libmicrohttpd when must_free (and
 * freed here if that fails); status and size are kept for the access log. */
static enum MHD_Result x_send(exchange *x, unsigned status, char *body, size_t len, int must_free,
                              const char *content_type) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (must_free) free(body);
        return MHD_NO;
    }
    if (content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, "X-Request-Id", x->request_id);
    if (x->route == SRV_ROUTE_PAGE && (status == 200 || status == 304))
        x_page_headers(x, r);
    else
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, srv_route_allow(x->route));
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (x->origin) {
        int any = strcmp(x->h->cfg->cors_origin, "*") == 0;
        MHD_add_response_header(r, "Access-Control-Allow-Origin", any ? "*" : x->origin);
        if (!any) MHD_add_response_header(r, "Vary", "Origin");
        MHD_add_response_header(r, "Access-Control-Expose-Headers",
                                "X-Request-Id, Server-Timing, Retry-After");
    }
    if (x->preflight) {
        char methods[64];
        snprintf(methods, sizeof methods, "%s, OPTIONS", srv_route_allow(x->route));
        MHD_add_response_header(r, "Access-Control-Allow-Methods", methods);
        MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type, X-Request-Id");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    }
    if (x->route == SRV_ROUTE_ATTENTION) {
        /* Durations are zero for answers given before a job ran. */
        char timing[192];
        snprintf(timing, sizeof timing,
                 "queue;dur=%.3f, decode;dur=%.3f, compute;dur=%.3f, encode;dur=%.3f",
                 x->job.queue_ms, x->job.decode_ms, x->job.compute_ms, x->job.encode_ms);
        MHD_add_response_header(r, "Server-Timing", timing);
    }
    if (atomic_load(&x->h->draining) || x->close)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(x->conn, status, r);
    MHD_destroy_response(r);
    x->status = (int)status;
    x->bytes = len;
    x->state = X_REPLIED;
    return ret;
}

static enum MHD_Result x_send_json(exchange *x, unsigned status, const char *text) {
    return x_send(x, status, (char *)text, strlen(text), 0, "application/json");
}

/* Sends the contract's error body for err. */
static enum MHD_Result x_send_error(exchange *x, const attn_error *err) {
    size_t len = 0;
    char *body = api_error_to_json(err, &len);
    if (!body) return x_send(x, 503, (char *)oom_body, sizeof oom_body - 1, 0, "application/json");
    return x_send(x, (unsigned)err->status, body, len, 1, "application/json");
}

static enum MHD_Result x_fail(exchange *x, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum MHD_Result x_fail(exchange *x, int status, const char *code, const char *fmt, ...) {
    attn_error err;
    char msg[sizeof err.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    attn_error_set(&err, status, code, NULL, "%s", msg);
    return x_send_error(x, &err);
}

/* ---- the GET endpoints ---- */

static enum MHD_Result x_metrics(exchange *x) {
    srv_http *h = x->h;
    srv_metrics_gauges g = {0};
    pool_stats(h->workers, &g.queued, &g.busy_workers);
    g.queue_capacity = h->cfg->queue_depth;
    g.workers = h->cfg->workers;
    pthread_mutex_lock(&h->mu);
    g.in_flight = h->in_flight;
    pthread_mutex_unlock(&h->mu);
    g.body_bytes = atomic_load(&h->body_bytes);
    g.connections = atomic_load(&h->connections);
    g.connections_capacity = h->cfg->max_connections;
    g.connections_timed_out = srv_watch_expired_total(h->watch);
    g.body_bytes_capacity = h->cfg->max_inflight_bytes;
    g.draining = atomic_load(&h->draining);
    size_t len = 0;
    char *text = srv_metrics_render(h->metrics, &g, &len);
    if (!text) return x_send(x, 503, (char *)oom_body, sizeof oom_body - 1, 0, "application/json");
    return x_send(x, 200, text, len, 1, SRV_METRICS_CONTENT_TYPE);
}

static enum MHD_Result x_submit(exchange *x);

/* GET /v1/models: the current set's summaries, on the polling thread (cheap). */
static enum MHD_Result x_models(exchange *x) {
    store_set *set = x->h->models ? store_current(x->h->models) : NULL;
    size_t count = set ? store_set_count(set) : 0, len = 0;
    api_model_info *infos = calloc(count ? count : 1, sizeof *infos);
    char *text = NULL;
    if (infos) {
        for (size_t i = 0; i < count; i++) {
            const store_model *m = store_set_at(set, i);
            infos[i] = (api_model_info){m->name, m->description, m->mask, &m->weights};
        }
        text = api_models_encode_list(infos, count, &len);
    }
    free(infos);
    store_set_release(set);
    if (!text) return x_send(x, 503, (char *)oom_body, sizeof oom_body - 1, 0, "application/json");
    return x_send(x, 200, text, len, 1, "application/json");
}

/* GET /v1/models/{name}: the summary here; with ?weights=true the weights,
 * which can be tens of megabytes of JSON, are written by a worker. */
static enum MHD_Result x_model(exchange *x) {
    const char *name = srv_route_model_name(x->path);
    int weights = api_model_weights_flag(
        MHD_lookup_connection_value(x->conn, MHD_GET_ARGUMENT_KIND, "weights"));
    if (weights < 0)
        return x_fail(x, 400, "invalid_value", "the query parameter weights must be true or false");
    if (weights) {
        x->job.kind = SRV_JOB_MODEL_WEIGHTS;
        x->job.model_name = name;
        return x_submit(x);
    }
    store_set *set = x->h->models ? store_current(x->h->models) : NULL;
    const store_model *m = set ? store_set_find(set, name) : NULL;
    attn_error err;
    char *text = NULL;
    size_t len = 0;
    if (m) {
        api_model_info info = {m->name, m->description, m->mask, &m->weights};
        text = api_model_encode(&info, 0, x->h->limits->max_response_bytes, &len, &err);
    } else {
        /* The name is not echoed: it is whatever the client put in the path. */
        attn_error_set(&err, 404, "unknown_model", NULL,
                      "no model of this name is loaded; GET /v1/models lists them");
    }
    store_set_release(set);
    if (!text) return x_send_error(x, &err);
    return x_send(x, 200, text, len, 1, "application/json");
}

/* 1 when an If-None-Match value names `etag`: "*", or a list of tags,
 * compared weakly (a W/ prefix ignored), as RFC 9110 asks for GET. */
static int etag_matches(const char *list, const char *etag) {
    size_t len = strlen(etag);
    for (const char *p = list; *p;) {
        p += strspn(p, " \t,");
        if (*p == '*') return 1;
        if (strncmp(p, "W/", 2) == 0) p += 2;
        size_t n = strcspn(p, ",");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == len && memcmp(p, etag, n) == 0) return 1;
        p += strcspn(p, ",");
    }
    return 0;
}

/* GET /: the teaching page, a constant of the binary. */
static enum MHD_Result x_page(exchange *x) {
    const char *tags =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (tags && etag_matches(tags, x->h->page_etag)) return x_send(x, 304, (char *)"", 0, 0, NULL);
    return x_send(x, 200, (char *)web_index_html, web_index_html_len, 0,
                  "text/html; charset=utf-8");
}

static enum MHD_Result x_get(exchange *x) {
    switch (x->route) {
    case SRV_ROUTE_MODELS:
        return x_models(x);
    case SRV_ROUTE_MODEL:
        return x_model(x);
    case SRV_ROUTE_HEALTHZ:
        return x_send_json(x, 200, "{\"status\":\"ok\"}");
    case SRV_ROUTE_READYZ:
        if (atomic_load(&x->h->draining))
            return x_fail(x, 503, "shutting_down", "the server is shutting down");
        return x_send_json(x, 200, "{\"status\":\"ready\"}");
    case SRV_ROUTE_METRICS:
        return x_metrics(x);
    case SRV_ROUTE_OPENAPI:
        return x_send(x, 200, (char *)api_openapi_yaml, api_openapi_yaml_len, 0,
                      "application/yaml");
    case SRV_ROUTE_PAGE:
        return x_page(x);
    default:
        return x_fail(x, 500, "internal_error", "no handler for this route");
    }
}

/* ---- POST /v1/attention ---- */

/* Takes n more bytes of the server-wide body budget for x: 0, or -1 (and
 * nothing taken) when the budget cannot hold them. Lock-free: a CAS loop,
 * so that two connections can never both take the last bytes. */
static int x_reserve(exchange *x, size_t n) {
    srv_http *h = x->h;
    size_t max = h->cfg->max_inflight_bytes;
    size_t cur = atomic_load(&h->body_bytes);
    do {
        if (n > max - cur) return -1;
    } while (!atomic_compare_exchange_weak(&h->body_bytes, &cur, cur + n));
    x->reserved += n;
    return 0;
}

/* Gives x's reservation back. Safe to call more than once: only the first
 * call after a reservation returns anything. */
static void x_release(exchange *x) {
    if (x->reserved) atomic_fetch_sub(&x->h->body_bytes, x->reserved);
    x->reserved = 0;
}

static enum MHD_Result x_fail_overloaded(exchange *x) {
    return x_fail(x, 503, "overloaded",
                  "the server holds too many request bodies (%zu bytes at most); retry later",
                  x->h->cfg->max_inflight_bytes);
}

/* Checks what can be checked from the headers. Returns MHD_YES with
 * x->state X_READING to go on reading, or the result of sending an error. */
static enum MHD_Result x_attention_headers(exchange *x) {
    srv_http *h = x->h;
    if (atomic_load(&h->draining))
        return x_fail(x, 503, "shutting_down", "the server is shutting down; retry elsewhere");

    const char *ct =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!srv_http_is_json_type(ct))
        return x_fail(x, 415, "unsupported_media_type",
                      "the body must be JSON (Content-Type: application/json)");

    const char *cl =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t declared = 0;
    if (cl && srv_http_parse_length(cl, &declared) == 0 && declared > h->cfg->max_body_bytes)
        return x_fail(x, 413, "body_too_large", "the body is larger than the limit of %zu bytes",
                      h->cfg->max_body_bytes);
    /* Bytes are reserved as they arrive (x_append), not from the client's
     * word: eight headers announcing 64 MiB each must not hold the budget
     * with nothing sent. A budget already too full for the body's first
     * piece is refused now, before a byte of it is read. */
    size_t first = declared && declared < SRV_HTTP_FIRST_PIECE ? declared : SRV_HTTP_FIRST_PIECE;
    if (first > h->cfg->max_inflight_bytes - atomic_load(&h->body_bytes))
        return x_fail_overloaded(x);
    x->declared = declared;
    x->state = X_READING;
    /* The body is due within --connection-timeout of its headers, whether
     * or not bytes keep coming. */
    srv_watch_deadline(h->watch, x->watched, (double)h->cfg->connection_timeout);
    return MHD_YES;
}

/* Drops the body copied so far and its reservation; the rest of the upload
 * is discarded. */
static void x_drop_body(exchange *x, int why) {
    free(x->body);
    x->body = NULL;
    x->len = x->cap = 0;
    x->body_state = why;
    x_release(x);
}

/* Appends a piece of the body; once it is over the limit (or memory or
 * the budget runs out) the pieces are only counted out, and the answer
 * comes at the end. */
static void x_append(exchange *x, const char *data, size_t n) {
    size_t max = x->h->cfg->max_body_bytes;
    if (x->body_state != BODY_OK) return;
    if (n > max - x->len) {
        x_drop_body(x, BODY_TOO_LARGE);
        return;
    }
    if (x->len + n > x->cap) {
        /* The buffer grows with what arrives (doubling from 64 KiB, never
         * past the limit, nor past the declared length), so a client that
         * announces a large body and sends little costs little. */
        size_t need = x->len + n;
        size_t cap = x->cap ? x->cap : SRV_HTTP_FIRST_PIECE;
        while (cap < need)
            cap = cap > max / 2 ? max : cap * 2;
        if (x->declared >= need && cap > x->declared) cap = x->declared;
        /* Reserved as it grows, with or without Content-Length. */
        if (cap > x->reserved && x_reserve(x, cap - x->reserved) != 0) {
            x_drop_body(x, BODY_OVERLOADED);
            return;
        }
        char *b = realloc(x->body, cap);
        if (!b) {
            x_drop_body(x, BODY_NO_MEMORY);
            return;
        }
        api_advise_huge_pages(b, cap);
        x->body = b;
        x->cap = cap;
    }
    memcpy(x->body + x->len, data, n);
    x->len += n;
}

static void x_count_phases(const exchange *x) {
    srv_metrics *m = x->h->metrics;
    srv_metrics_add_phase(m, SRV_PHASE_QUEUE, x->job.queue_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_DECODE, x->job.decode_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_COMPUTE, x->job.compute_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_ENCODE, x->job.encode_ms / 1e3);
}

/* srv_job's client_gone, and pool_evict's predicate for a full queue: the
 * client has closed (or reset) its connection. */
static int x_client_gone(void *arg) {
    const exchange *x = arg;
    return x->fd >= 0 && srv_watch_peer_gone(x->fd);
}

/* A job dropped because its client left, before it ran, while it ran, or
 * from a full queue (pool_evict's drop): its connection is resumed to be
 * closed unanswered (logged 499). Last touch of x on this thread. */
static void x_drop(void *arg) {
    exchange *x = arg;
    srv_metrics_count(x->h->metrics, SRV_EVENT_JOB_DROPPED);
    x->gone = 1;
    x->state = X_GONE;
    MHD_resume_connection(x->conn);
}

static void x_run(void *arg, void *worker_ctx) {
    exchange *x = arg;
    srv_job_run(&x->job, worker_ctx);
    if (x->job.dropped) {
        x_drop(x);
        srv_worker_idle(worker_ctx);
        return;
    }
    x_count_phases(x);
    x->state = X_DONE;
    /* Last touch of x on this thread: after resume the polling thread may
     * send the answer and free the exchange at any moment. */
    MHD_resume_connection(x->conn);
    srv_worker_idle(worker_ctx);
}

/* Sends a finished job's answer. */
static enum MHD_Result x_job_reply(exchange *x) {
    srv_job *j = &x->job;
    /* The body has served its job: its share of the budget is given back
     * before the answer leaves, so that a client's next request never
     * finds it still held (the completion callback may run after the
     * client has the answer). */
    free(x->body);
    x->body = NULL;
    x->job.body = NULL;
    x_release(x);
    if (!j->response)
        return x_send(x, 503, (char *)oom_body, sizeof oom_body - 1, 0, "application/json");
    char *body = j->response;
    j->response = NULL; /* moved into libmicrohttpd */
    return x_send(x, (unsigned)j->status, body, j->response_len, 1, "application/json");
}

/* This polling thread's srv_worker for tiny requests, made on first use
 * (freed by the key's destructor when the thread ends); NULL when it
 * cannot be had, and the request then goes to the pool. */
static srv_worker *x_inline_worker(srv_http *h) {
    srv_worker *w = pthread_getspecific(h->inline_key);
    if (w) return w;
    w = srv_worker_create(h->models, NULL); /* never splits: no pool */
    if (w && pthread_setspecific(h->inline_key, w) != 0) {
        srv_worker_destroy(w);
        w = NULL;
    }
    return w;
}

static void x_inline_worker_free(void *w) {
    srv_worker_destroy(w);
}

/* A tiny request, run here: 1 when answered, 0 when its work is over the
 * cap (or no worker could be made) and it must go to the pool. */
static int x_try_inline(exchange *x) {
    srv_http *h = x->h;
    if (h->cfg->inline_max_flops <= 0 || x->len > SRV_HTTP_INLINE_MAX_BODY) return 0;
    srv_worker *w = x_inline_worker(h);
    if (!w) return 0;
    x->job.limits = h->limits;
    x->job.max_flops_here = h->cfg->inline_max_flops;
    clock_gettime(CLOCK_MONOTONIC, &x->job.submitted);
    srv_job_run(&x->job, w);
    srv_worker_idle(w);
    x->job.max_flops_here = 0;
    if (x->job.deferred) return 0;
    x_count_phases(x);
    x->state = X_DONE;
    return 1;
}

/* The whole body is here: answer a tiny request at once, else queue the
 * job and suspend. */
static enum MHD_Result x_attention_submit(exchange *x) {
    srv_http *h = x->h;
    if (x->body_state == BODY_TOO_LARGE)
        return x_fail(x, 413, "body_too_large", "the body is larger than the limit of %zu bytes",
                      h->cfg->max_body_bytes);
    if (x->body_state == BODY_NO_MEMORY)
        return x_fail(x, 503, "out_of_memory", "memory for the body could not be had");
    if (x->body_state == BODY_OVERLOADED) return x_fail_overloaded(x);

    x->job.kind = SRV_JOB_ATTENTION;
    x->job.body = x->body ? x->body : "";
    x->job.body_len = x->len;
    if (x_try_inline(x)) return x_job_reply(x);
    return x_submit(x);
}

/* Queues x's job and suspends the connection; the worker resumes it. */
static enum MHD_Result x_submit(exchange *x) {
    srv_http *h = x->h;
    /* An exchange that began after the drain's count of them may outlive
     * the drain: it must never be suspended when MHD_stop_daemon runs. */
    if (x->late) return x_fail(x, 503, "shutting_down", "the server is shutting down");
    x->job.limits = h->limits;
    x->job.client_gone = x_client_gone;
    x->job.client = x;
    clock_gettime(CLOCK_MONOTONIC, &x->job.submitted);
    x->state = X_WAITING;

    MHD_suspend_connection(x->conn);
    int rc = pool_submit(h->workers, x_run, x);
    /* A full queue may hold jobs whose clients left: they go first. */
    if (rc == POOL_FULL && pool_evict(h->workers, x_client_gone, x_drop) > 0)
        rc = pool_submit(h->workers, x_run, x);
    if (rc != POOL_OK) {
        attn_error err;
        if (rc == POOL_FULL)
            attn_error_set(&err, 503, "overloaded", NULL,
                          "the work queue is full (%zu waiting); retry later", h->cfg->queue_depth);
        else if (rc == POOL_STOPPED)
            attn_error_set(&err, 503, "shutting_down", NULL, "the server is shutting down");
        else
            attn_error_set(&err, 503, "out_of_memory", NULL, "memory for the job could not be had");
        x->job.status = err.status;
        x->job.response = api_error_to_json(&err, &x->job.response_len);
        x->state = X_DONE;
        MHD_resume_connection(x->conn);
    }
    return MHD_YES;
}

/* ---- libmicrohttpd callbacks ---- */

/* Counts an exchange in flight, or marks it late: the drain reads
 * `draining` and waits for the count under the same mutex, so an exchange
 * either is waited for or knows it came too late to be suspended. */
static void x_count_in(exchange *x) {
    srv_http *h = x->h;
    pthread_mutex_lock(&h->mu);
    h->in_flight++;
    x->late = atomic_load(&h->draining);
    pthread_mutex_unlock(&h->mu);
}

/* 1 when the path (before any '?') of a raw request target holds %00,
 * which unescaping would turn into the end of the string; *in_query is set
 * when the query holds one. */
static int target_has_nul(const char *uri, int *in_query) {
    const char *q = strchr(uri, '?');
    *in_query = 0;
    for (const char *p = strstr(uri, "%00"); p; p = strstr(p + 1, "%00")) {
        if (q && p > q) *in_query = 1;
        else return 1;
    }
    return 0;
}

/* The URI-log callback: the request line is in, the headers are not. The
 * exchange is made here rather than on the handler's 1st call, so that
 * every request libmicrohttpd parses, including one it refuses itself
 * (431, a malformed header or chunk), reaches on_completed and the log. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    srv_http *h = cls;
    exchange *x = calloc(1, sizeof *x);
    if (!x) return NULL; /* made again on the 1st call */
    x->h = h;
    x->conn = conn;
    x->fd = -1;
    x->state = X_NEW;
    clock_gettime(CLOCK_MONOTONIC, &x->start);
    x->nul_in_path = target_has_nul(uri, &x->nul_in_query);
    x->raw_target = uri;
    x->line_cut = srv_framing_target_cut(uri);
    x->path = strdup(uri); /* the raw target, until the handler knows the path */
    x_count_in(x);
    return x;
}

/* The 1st call of the handler: the headers are in. Fills what needs them. */
static int x_begin(exchange *x, struct MHD_Connection *conn, const char *url, const char *method) {
    srv_http *h = x->h;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    x->fd = ci ? ci->connect_fd : -1;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    x->watched = ci ? ci->socket_context : NULL;
    x->state = X_HEADERS;
    /* "%00" would end the unescaped path early: such a path names nothing */
    x->route = x->nul_in_path ? SRV_ROUTE_OTHER : srv_route_find(url);
    x->request_id =
        srv_reqid_choose(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"));
    free(x->path);
    x->method = strdup(method ? method : "");
    x->path = strdup(url ? url : "");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    int keep_origin = origin && cors_allows(h->cfg->cors_origin, origin);
    if (keep_origin) x->origin = strdup(origin);
    return x->request_id && x->method && x->path && (!keep_origin || x->origin) ? 0 : -1;
}

/* 1 when the request announces a body. */
static int x_has_body(struct MHD_Connection *conn) {
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    size_t n = 0;
    return te != NULL || (cl && (srv_http_parse_length(cl, &n) != 0 || n > 0));
}

/* Answers every request but a POST to /v1/attention. */
static enum MHD_Result x_route(exchange *x, const char *method) {
    if (x->route == SRV_ROUTE_OTHER) return x_fail(x, 404, "not_found", "no such path");
    if (x->preflight) return x_send(x, 204, (char *)"", 0, 0, "text/plain");
    if (x->unauthorized)
        return x_fail(x, 401, "unauthorized",
                      "this server needs an API key: send it as Authorization: Bearer KEY");
    if (!srv_route_allows(x->route, method))
        return x_fail(x, 405, "method_not_allowed", "method not allowed; allowed: %s",
                      srv_route_allow(x->route));
    if (x->nul_in_query)
        return x_fail(x, 400, "invalid_value", "the query holds a NUL byte (%%00)");
    return x_get(x);
}

/* A framing fault (framing.h), answered from the headers with the
 * connection closed after the answer: where the next request begins is not
 * known. MHD_YES with nothing sent when the framing is sound. */
static enum MHD_Result x_framing(exchange *x, const char *method, const char *version) {
    srv_framing_fault f = srv_framing_check(x->conn, method, version, &x->authorization_cut);
    if (x->line_cut || (x->raw_target && srv_framing_method_cut(method, x->raw_target)))
        f = SRV_FRAMING_NUL_IN_REQUEST_LINE;
    if (f == SRV_FRAMING_OK) return MHD_YES;
    x->close = 1;
    return x_fail(x, srv_framing_status(f), f == SRV_FRAMING_CODING ? "not_implemented" : "bad_request",
                  "%s", srv_framing_message(f));
}

/* The request carries an API key in force. */
static int x_authorized(srv_keys *keys, struct MHD_Connection *conn) {
    return srv_keys_allow(keys, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                            MHD_HTTP_HEADER_AUTHORIZATION));
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
    srv_http *h = cls;
    exchange *x = *con_cls;

    if (!x) { /* the URI-log callback could not make it */
        x = on_uri(h, url, conn);
        if (!x) return MHD_NO; /* out of memory: drop the connection */
        x->raw_target = NULL; /* url is unescaped already: not the raw line */
        x->line_cut = 0;
        *con_cls = x;
    }
    if (x->state == X_NEW) {
        if (x_begin(x, conn, url, method) != 0) return MHD_NO;
        /* The headers are in: the deadline that held them is done with.
         * A body sets its own (x_attention_headers). */
        srv_watch_deadline(h->watch, x->watched, 0);
        enum MHD_Result framing = x_framing(x, method, version);
        if (x->state == X_REPLIED) return framing;
        /* A preflight asks, before the real request, whether an allowed
         * origin may send it: answered without a key, as browsers send
         * none. */
        x->preflight = x->origin && strcmp(method, "OPTIONS") == 0 &&
                       MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   "Access-Control-Request-Method");
        x->unauthorized = !x->preflight && !srv_route_open(x->route) && h->keys &&
                          srv_keys_required(h->keys) &&
                          (x->authorization_cut || !x_authorized(h->keys, conn));
        if (x->route == SRV_ROUTE_ATTENTION && srv_route_allows(x->route, method) &&
            !x->unauthorized)
            return x_attention_headers(x);
        /* An answer queued on this first call makes libmicrohttpd close the
         * connection afterwards, which is right when a body we do not want
         * is coming (it is never read), but wasteful otherwise: requests
         * without a body are answered on the next call, keeping the
         * connection alive. */
        if (x_has_body(conn)) return x_route(x, method);
        x->state = X_DEFERRED;
        return MHD_YES;
    }

    switch (x->state) {
    case X_DEFERRED:
        if (*upload_data_size) { /* a body after all; not wanted */
            *upload_data_size = 0;
            return MHD_YES;
        }
        return x_route(x, method);
    case X_READING:
        if (*upload_data_size) {
            x_append(x, upload_data, *upload_data_size);
            *upload_data_size = 0;
            return MHD_YES;
        }
        srv_watch_deadline(h->watch, x->watched, 0); /* the body is in */
        return x_attention_submit(x);
    case X_DONE:
        return x_job_reply(x);
    case X_GONE:
        return MHD_NO; /* closes the connection: its client has left */
    default:
        /* Already answered (or, impossibly, suspended): drop further upload. */
        *upload_data_size = 0;
        return MHD_YES;
    }
}

/* What the access log and the metrics call an exchange that ended without
 * its answer delivered: 408 when its headers or body took too long
 * (libmicrohttpd's idle timeout, or the watch's deadline), else 499
 * (nginx's "client closed request": the client hung up, or the connection
 * broke, before the whole answer was sent, or its job was dropped). */
#define SRV_STATUS_TIMEOUT 408
#define SRV_STATUS_CLIENT_CLOSED 499

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv_http *h = cls;
    exchange *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;

    int status = x->status;
    size_t bytes = x->bytes;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_watched *watched = ci ? ci->socket_context : NULL;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
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
                   x->request_id ? x->request_id : "-");

    x_release(x);
    free(x->job.response); /* set only if never sent */
    free(x->body);
    free(x->request_id);
    free(x->origin);
    free(x->method);
    free(x->path);
    free(x);

    pthread_mutex_lock(&h->mu);
    if (--h->in_flight == 0) pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->mu);
}

/* Every connection: counted, and watched from its accept (watch.h). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&h->connections, 1);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context =
            ci ? srv_watch_add(h->watch, ci->connect_fd, (double)h->cfg->connection_timeout)
               : NULL;
    } else {
        atomic_fetch_sub(&h->connections, 1);
        srv_watch_remove(h->watch, *socket_context);
        *socket_context = NULL;
    }
}

/* The accept policy: a connection over --max-connections is closed at
 * once, not left waiting in the kernel's backlog, which is what
 * libmicrohttpd's own limit does (it stops accepting). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addr, (void)addrlen;
    srv_http *h = cls;
    if (atomic_load(&h->connections) < h->cfg->max_connections) return MHD_YES;
    srv_metrics_count(h->metrics, SRV_EVENT_CONNECTION_REFUSED);
    return MHD_NO;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    flockfile(stderr);
    fputs("mhd: ", stderr);
    vfprintf(stderr, fmt, ap);
    funlockfile(stderr);
}

/* ---- lifecycle ---- */

srv_http *srv_http_start(const cfg_config *cfg, const api_limits *limits, pool *workers,
                         store *models, srv_metrics *metrics, srv_keys *keys, attn_error *err) {
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        attn_error_set(err, 0, "server_start_failed", NULL, "out of memory");
        return NULL;
    }
    h->cfg = cfg;
    h->limits = limits;
    h->workers = workers;
    h->models = models;
    h->metrics = metrics;
    h->keys = keys;
    h->listen_fd = MHD_INVALID_SOCKET;
    uint64_t hash = 0xcbf29ce484222325u; /* FNV-1a 64: a validator, not a defence */
    for (size_t i = 0; i < web_index_html_len; i++)
        hash = (hash ^ (unsigned char)web_index_html[i]) * 0x100000001b3u;
    snprintf(h->page_etag, sizeof h->page_etag, "\"%016" PRIx64 "\"", hash);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->idle, NULL);
    if (pthread_key_create(&h->inline_key, x_inline_worker_free) != 0) {
        attn_error_set(err, 0, "server_start_failed", NULL, "no thread-specific key for the polling threads");
        srv_http_stop(h);
        return NULL;
    }
    h->inline_key_made = 1;
    h->watch = srv_watch_start();
    if (!h->watch) {
        attn_error_set(err, 0, "server_start_failed", NULL, "no thread to watch connections");
        srv_http_stop(h);
        return NULL;
    }

    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr *addr;
    unsigned int flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    flags |= MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_AUTO;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, cfg->bind, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)cfg->port);
        addr = (struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, cfg->bind, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)cfg->port);
        addr = (struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        attn_error_set(err, 0, "server_start_failed", NULL, "--bind: %s is not a numeric address", cfg->bind);
        srv_http_stop(h);
        return NULL;
    }

    /* on_accept enforces --max-connections; libmicrohttpd's own limit,
     * shared out among its polling threads, sits above it so that it
     * never stops accepting first (a few accepts may race on_accept's
     * count, one per polling thread). */
    size_t limit = cfg->max_connections + 2 * cfg->io_threads;
    unsigned int mhd_limit = limit > UINT_MAX ? UINT_MAX : (unsigned int)limit;
    /* libmicrohttpd's idle timeout is a backstop a second behind the
     * watch's deadlines, so that a late request gets the watch's 408 and
     * not a silent close. */
    unsigned int idle_timeout = (unsigned int)cfg->connection_timeout + 1;
    // clang-format off
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, on_accept, h, on_access, h,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, /* first, to catch every message */
        MHD_OPTION_SOCK_ADDR, addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->io_threads,
        MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout,
        MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, h,
        MHD_OPTION_END);
    // clang-format on
    if (!h->daemon) {
        attn_error_set(err, 0, "server_start_failed", NULL, "could not listen on %s port %zu (address in use or not local?)",
                 cfg->bind, cfg->port);
        srv_http_stop(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : (unsigned)cfg->port;
    return h;
}

unsigned srv_http_port(const srv_http *h) {
    return h->port;
}

void srv_http_drain(srv_http *h) {
    /* Under the mutex, so that an exchange counted after this point knows
     * it is late (x_count_in). */
    pthread_mutex_lock(&h->mu);
    atomic_store(&h->draining, 1);
    pthread_mutex_unlock(&h->mu);
    if (h->daemon) h->listen_fd = MHD_quiesce_daemon(h->daemon);
    /* A quiesced socket still completes handshakes into its backlog, and
     * those clients would wait for the whole drain and then be reset.
     * Shutting it down (not closing: the daemon's threads may still hold
     * the descriptor) makes the kernel refuse them at once instead. */
    if (h->listen_fd != MHD_INVALID_SOCKET) shutdown(h->listen_fd, SHUT_RDWR);
    pthread_mutex_lock(&h->mu);
    while (h->in_flight > 0)
        pthread_cond_wait(&h->idle, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    if (h->daemon) MHD_stop_daemon(h->daemon);
    srv_watch_stop(h->watch); /* every connection is closed, every entry removed */
    /* After a quiesce the listening socket is ours, and may be closed only
     * once the daemon's threads are gone. */
    if (h->listen_fd != MHD_INVALID_SOCKET) close(h->listen_fd);
    /* The polling threads have ended, each freeing its inline worker. */
    if (h->inline_key_made) pthread_key_delete(h->inline_key);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
