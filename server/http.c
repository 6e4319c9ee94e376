/*
 * http.c — the daemon: libmicrohttpd's callbacks, start, drain, stop.
 *
 * Threads. libmicrohttpd runs --io-threads polling threads (its internal
 * thread pool, poll(2)); each connection stays on one of them. They
 * parse, route, copy bodies and send answers; decoding and computing
 * happen on the worker pool (dispatch.h), but for tiny requests
 * (inline.h). A request's path through the files:
 *
 *   on_uri → exchange.c (its state machine) → route.c (the table) →
 *   an endpoint, ep_*.c → reply.c, or dispatch.c → job.c on a worker →
 *   dispatch.c resumes → reply.c; on_completed → exchange.c frees it.
 *
 * Connections. on_connection counts them and registers each with the
 * watch (watch.h: deadlines, and the 408 of a slow client); on_accept
 * closes one over --max-connections at once, which bounds the state held
 * per connection (suspended ones count).
 *
 * A client that hangs up while its connection is suspended: libmicrohttpd
 * neither notices nor times it out, and must not be stopped while one is
 * suspended; dispatch.h says how its job is dropped and its connection
 * closed.
 *
 * Drain. srv_http_drain marks the server draining (new POSTs and /readyz
 * answer 503 from then on), stops accepting connections with
 * MHD_quiesce_daemon, and waits on a condition variable until the count of
 * exchanges — incremented when one is made, decremented when it completes
 * — is zero. No connection is suspended then, so MHD_stop_daemon is
 * allowed.
 */
#include "server/http.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/exchange.h"
#include "server/framing.h"
#include "server/http_state.h"
#include "server/inline.h"
#include "server/log.h"

/* The URI-log callback: the request line is in, the headers are not. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    return srv_exchange_create(cls, uri, conn); /* NULL: made again on the 1st call */
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
    srv_exchange *x = *con_cls;
    if (!x) { /* the URI-log callback could not make it */
        x = srv_exchange_create(cls, url, conn);
        if (!x) return MHD_NO; /* out of memory: drop the connection */
        x->raw_target = NULL;  /* url is unescaped already: not the raw line */
        x->line_cut = 0;
        *con_cls = x;
    }
    return srv_exchange_step(x, url, method, version, upload_data, upload_data_size);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    srv_exchange *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    srv_exchange_complete(x, conn, toe);
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
            ci ? srv_watch_add(h->watch, ci->connect_fd, (double)h->cfg->connection_timeout) : NULL;
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
    if (srv_framing_supported(MHD_VERSION, MHD_get_version(), err) != 0) return NULL;
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
    h->bodies.max = cfg->max_inflight_bytes;
    h->unsent.max = cfg->max_unsent_bytes;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->idle, NULL);
    if (srv_inline_start(h) != 0) {
        attn_error_set(err, 0, "server_start_failed", NULL,
                       "no thread-specific key for the polling threads");
        srv_http_stop(h);
        return NULL;
    }
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
    /* poll, not epoll: libmicrohttpd 0.9.75's epoll is edge-triggered and
     * takes a read shorter than its buffer for a drained socket, so the end
     * of stream of a client that sent its last bytes and closed at once
     * (both seen in one wakeup) is never read: the connection, and its
     * body's share of --max-inflight-bytes, stayed until the idle timeout.
     * poll is level-triggered and sees it. Measured against epoll with
     * bench/ab_http.sh (wrk on 我爱你, 8 alternating rounds, 2026-12-01): 0.99 ×
     * the requests/s, 1.01 × the CPU per request, within the rounds' noise. */
    flags |= MHD_is_feature_supported(MHD_FEATURE_POLL) == MHD_YES ? MHD_USE_POLL : MHD_USE_AUTO;
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
        attn_error_set(err, 0, "server_start_failed", NULL, "--bind: %s is not a numeric address",
                       cfg->bind);
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
        attn_error_set(err, 0, "server_start_failed", NULL,
                       "could not listen on %s port %zu (address in use or not local?)", cfg->bind,
                       cfg->port);
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
     * it is late (srv_exchange_create). */
    pthread_mutex_lock(&h->mu);
    atomic_store(&h->draining, 1);
    pthread_mutex_unlock(&h->mu);
    srv_log_info("new work refused from now on");
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
    srv_inline_stop(h);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
