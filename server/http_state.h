/*
 * http_state.h — what the files of the HTTP side share: the server's state
 * (struct srv_http, opaque to everyone else through http.h) and the
 * exchange, one request's state. Not for files outside the HTTP side:
 * http.c, exchange.c, post.c, reply.c, dispatch.c, inline.c, the endpoints
 * (ep_*.c) and route.c, which names them (both through endpoint.h).
 */
#ifndef SRV_HTTP_STATE_H
#define SRV_HTTP_STATE_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "server/body.h"
#include "server/http.h"
#include "server/job.h"
#include "server/route.h"
#include "server/watch.h"

struct srv_http {
    struct MHD_Daemon *daemon;
    const cfg_config *cfg;
    const api_limits *limits;
    pool *workers;
    srv_metrics *metrics;
    store *models;    /* may be NULL: no models */
    srv_watch *watch; /* deadlines on every connection */
    srv_keys *keys;   /* may be NULL: no key needed */
    unsigned port;
    MHD_socket listen_fd; /* returned by MHD_quiesce_daemon; closed after stop */

    pthread_key_t inline_key; /* each polling thread's srv_worker (inline.c) */
    int inline_key_made;

    srv_budget bodies; /* request bodies held at once (body.h) */
    srv_budget unsent; /* answers built and not yet sent (answer.h) */
    atomic_int draining;
    atomic_size_t connections; /* open, counted by on_connection */
    pthread_mutex_t mu;
    pthread_cond_t idle; /* in_flight reached 0 */
    size_t in_flight;    /* exchanges not yet completed */
};

/* An exchange's states; exchange.c holds the transitions. */
typedef enum srv_x_state {
    X_NEW,      /* its request line is in (URI log); the handler not yet called */
    X_DEFERRED, /* routed; answered once the (empty) request is complete */
    X_READING,  /* reading a body */
    X_WAITING,  /* suspended, job queued or running */
    X_DONE,     /* job result ready to send */
    X_GONE,     /* its client left while its job waited or ran: closed unanswered */
    X_REPLIED   /* a response is queued */
} srv_x_state;

typedef struct srv_exchange {
    srv_http *h;
    struct MHD_Connection *conn;
    srv_route route;
    srv_x_state state;
    char *request_id;
    char *method, *path;    /* copies, for the access log */
    char *origin;           /* the Origin header when --cors-origin allows it, else NULL */
    int preflight;          /* a CORS preflight (OPTIONS) from an allowed origin */
    int unauthorized;       /* an API key is needed and was not given */
    int late;               /* made after draining began: never suspended */
    int gone;               /* its job was dropped: the client had left */
    int close;              /* answer with Connection: close (a framing error) */
    int nul_in_path;        /* the request target held %00 in its path */
    int nul_in_query;       /* ... or in its query */
    int authorization_cut;  /* its Authorization held a NUL: no key in force */
    const char *raw_target; /* in libmicrohttpd's buffer, for the 1st call's checks */
    int line_cut;           /* a NUL byte in the request line (framing.h) */
    int fd;                 /* the connection's socket, to see whether its client left */
    srv_watched *watched;   /* the connection's deadline entry (watch.h), or NULL */
    struct timespec start;
    int status;   /* of the answer queued, for the log */
    size_t bytes; /* its body's length */
    size_t sent;  /* of its body, the bytes libmicrohttpd has taken (answer.h) */
    size_t held;  /* its job's answer, counted in unsent until its response is made */

    srv_body body;
    srv_job job;
} srv_exchange;

#endif
