/*
 * route.h — the fixed set of paths the server answers.
 *
 * Routing is a table lookup on the exact path. The route is also the only
 * label metrics may carry for a path, so a client cannot create new time
 * series by inventing paths: every unknown path is SRV_ROUTE_OTHER.
 */
#ifndef SRV_ROUTE_H
#define SRV_ROUTE_H

#include <stddef.h>

typedef enum srv_route {
    SRV_ROUTE_ATTENTION,      /* POST /v1/attention */
    SRV_ROUTE_BATCH,          /* POST /v1/attention/batch */
    SRV_ROUTE_HEALTHZ,        /* GET  /healthz */
    SRV_ROUTE_READYZ,         /* GET  /readyz */
    SRV_ROUTE_METRICS,        /* GET  /metrics */
    SRV_ROUTE_OPENAPI,        /* GET  /v1/openapi.yaml */
    SRV_ROUTE_MODELS,         /* GET  /v1/models */
    SRV_ROUTE_MODEL,          /* GET  /v1/models/{name} */
    SRV_ROUTE_PAGE,           /* GET  /, the teaching page */
    SRV_ROUTE_V2,             /* GET  /v2: the Open Inference Protocol's server metadata */
    SRV_ROUTE_V2_LIVE,        /* GET  /v2/health/live */
    SRV_ROUTE_V2_READY,       /* GET  /v2/health/ready */
    SRV_ROUTE_V2_MODEL,       /* GET  /v2/models/{name} */
    SRV_ROUTE_V2_MODEL_READY, /* GET  /v2/models/{name}/ready */
    SRV_ROUTE_V2_INFER,       /* POST /v2/models/{name}/infer */
    SRV_ROUTE_OTHER,          /* anything else: 404 */
    SRV_ROUTE_COUNT
} srv_route;

/* The route of a request path (without query string). */
srv_route srv_route_find(const char *path);

/* The {name} of a SRV_ROUTE_MODEL path (a pointer into `path`). */
const char *srv_route_model_name(const char *path);

/* The {name} of a SRV_ROUTE_V2_MODEL, _MODEL_READY or _INFER path: a
 * pointer into `path` and its length (not NUL-terminated there). */
const char *srv_route_v2_model_name(const char *path, size_t *len);

/* 1 when errors on this route, or on the unknown path `path` (may be
 * NULL), take the Open Inference Protocol's form {"error": "..."}: the
 * /v2 paths. */
int srv_route_oip(srv_route r, const char *path);

/* The metrics label of a route: "attention", "healthz", ..., "other". */
const char *srv_route_name(srv_route r);

/* The methods a route accepts, as the Allow header lists them. */
const char *srv_route_allow(srv_route r);

/* 1 when the route is answered without an API key (--api-keys-file):
 * the probes and the page (srv_route_open_paths lists them). */
int srv_route_open(srv_route r);

/* The paths of the open routes, in the table's order, separated by ", "
 * ("/healthz, /readyz, /, ..."), written into buf as snprintf does (cut to
 * size - 1 bytes, always NUL-terminated when size > 0). Returns the length
 * of the whole list. */
size_t srv_route_open_paths(char *buf, size_t size);

/* 1 when `method` is allowed on the route. HEAD is allowed wherever GET is. */
int srv_route_allows(srv_route r, const char *method);

#endif
