/*
 * http.h — the HTTP front: libmicrohttpd daemon, routing, request state.
 *
 * srv_http_start binds and starts serving at once on libmicrohttpd's own
 * polling threads. POST /v1/attention bodies are read there and handed to
 * the worker pool (server/pool.h) as server/job.h jobs, and so are model
 * weights (GET /v1/models/{name}?weights=true); everything else is
 * answered on the polling thread. See http.c for the path of a request
 * through the files of the HTTP side.
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include "api/call.h"
#include "server/config.h"
#include "server/keys.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "store/store.h"
#include <stddef.h>

typedef struct srv_http srv_http;

/*
 * Starts serving. cfg, limits, workers, models (NULL: none), metrics and
 * keys (NULL, or a set that is empty: no key needed) are borrowed and must
 * outlive the srv_http. Returns NULL with a sentence in err when the
 * daemon could not start (bad address, port taken).
 */
srv_http *srv_http_start(const cfg_config *cfg, const api_limits *limits, pool *workers,
                         store *models, srv_metrics *metrics, srv_keys *keys, attn_error *err);

/* The port actually bound (useful with port 0). */
unsigned srv_http_port(const srv_http *h);

/*
 * Graceful shutdown, first half: stops accepting connections, makes
 * /readyz answer 503 and new POSTs 503 shutting_down, and waits until every
 * request already received has been answered. Call once, from one thread.
 */
void srv_http_drain(srv_http *h);

/* Stops the daemon (closing idle connections) and frees h. Call after
 * srv_http_drain, or on a daemon with nothing in flight. */
void srv_http_stop(srv_http *h);

#endif
