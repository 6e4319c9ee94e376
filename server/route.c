/*
 * route.c — the routing table: one row per route, with its path, metrics
 * label, methods, whether it needs a key, and its endpoint (endpoint.h).
 * A new endpoint is a new ep_*.c file and a row here. The routes open
 * without a key are listed from this table (srv_route_open_paths) wherever
 * they are named: --help and the start-up log.
 */
#include "server/route.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "server/endpoint.h"

enum { M_GET = 1, M_HEAD = 2, M_POST = 4 };

typedef struct route_row {
    const char *path; /* exact; NULL for SRV_ROUTE_MODEL (MODEL_PREFIX + a name) */
    const char *label;
    unsigned methods; /* M_* bits */
    int open;         /* answered without an API key */
    const srv_endpoint *endpoint;
} route_row;

/* Indexed by srv_route. */
static const route_row route_table[SRV_ROUTE_COUNT] = {
    [SRV_ROUTE_ATTENTION] = {"/v1/attention", "attention", M_POST, 0, &srv_ep_attention},
    [SRV_ROUTE_BATCH] = {"/v1/attention/batch", "attention_batch", M_POST, 0, &srv_ep_batch},
    /* Probes carry no key; the page holds no secret and asks for the key
     * when the API does. */
    [SRV_ROUTE_HEALTHZ] = {"/healthz", "healthz", M_GET | M_HEAD, 1, &srv_ep_healthz},
    [SRV_ROUTE_READYZ] = {"/readyz", "readyz", M_GET | M_HEAD, 1, &srv_ep_readyz},
    [SRV_ROUTE_METRICS] = {"/metrics", "metrics", M_GET | M_HEAD, 0, &srv_ep_metrics},
    [SRV_ROUTE_OPENAPI] = {"/v1/openapi.yaml", "openapi", M_GET | M_HEAD, 0, &srv_ep_openapi},
    [SRV_ROUTE_MODELS] = {"/v1/models", "models", M_GET | M_HEAD, 0, &srv_ep_models},
    [SRV_ROUTE_MODEL] = {NULL, "model", M_GET | M_HEAD, 0, &srv_ep_model},
    [SRV_ROUTE_PAGE] = {"/", "page", M_GET | M_HEAD, 1, &srv_ep_page},
    /* The Open Inference Protocol; its health probes carry no key, as
     * /healthz and /readyz. */
    [SRV_ROUTE_V2] = {"/v2", "v2", M_GET | M_HEAD, 0, &srv_ep_v2_server},
    [SRV_ROUTE_V2_LIVE] = {"/v2/health/live", "v2_live", M_GET | M_HEAD, 1, &srv_ep_v2_live},
    [SRV_ROUTE_V2_READY] = {"/v2/health/ready", "v2_ready", M_GET | M_HEAD, 1, &srv_ep_v2_ready},
    [SRV_ROUTE_V2_MODEL] = {NULL, "v2_model", M_GET | M_HEAD, 0, &srv_ep_v2_model},
    [SRV_ROUTE_V2_MODEL_READY] = {NULL, "v2_model_ready", M_GET | M_HEAD, 0,
                                  &srv_ep_v2_model_ready},
    [SRV_ROUTE_V2_INFER] = {NULL, "v2_infer", M_POST, 0, &srv_ep_v2_infer},
    [SRV_ROUTE_OTHER] = {NULL, "other", 0, 0, NULL},
};

#define MODEL_PREFIX    "/v1/models/"
#define V2_MODEL_PREFIX "/v2/models/"

/* /v2/models/{name}[/ready|/infer]: one non-empty segment for the name. */
static srv_route find_v2_model(const char *path) {
    size_t p = sizeof V2_MODEL_PREFIX - 1;
    if (strncmp(path, V2_MODEL_PREFIX, p) != 0 || !path[p] || path[p] == '/')
        return SRV_ROUTE_OTHER;
    const char *rest = strchr(path + p, '/');
    if (!rest) return SRV_ROUTE_V2_MODEL;
    if (strcmp(rest, "/ready") == 0) return SRV_ROUTE_V2_MODEL_READY;
    if (strcmp(rest, "/infer") == 0) return SRV_ROUTE_V2_INFER;
    return SRV_ROUTE_OTHER;
}

srv_route srv_route_find(const char *path) {
    if (!path) return SRV_ROUTE_OTHER;
    for (int r = 0; r < SRV_ROUTE_OTHER; r++)
        if (route_table[r].path && strcmp(path, route_table[r].path) == 0) return (srv_route)r;
    /* One path segment after the prefix; whether it names a model is the
     * handler's question (404 unknown_model), not the router's. */
    size_t p = sizeof MODEL_PREFIX - 1;
    if (strncmp(path, MODEL_PREFIX, p) == 0 && path[p] && !strchr(path + p, '/'))
        return SRV_ROUTE_MODEL;
    return find_v2_model(path);
}

const char *srv_route_v2_model_name(const char *path, size_t *len) {
    const char *name = path + sizeof V2_MODEL_PREFIX - 1;
    *len = strcspn(name, "/");
    return name;
}

int srv_route_oip(srv_route r, const char *path) {
    if (r >= SRV_ROUTE_V2 && r <= SRV_ROUTE_V2_INFER) return 1;
    return r == SRV_ROUTE_OTHER && path && strncmp(path, "/v2", 3) == 0 &&
           (path[3] == '\0' || path[3] == '/' || path[3] == '?');
}

const char *srv_route_model_name(const char *path) {
    return path + sizeof MODEL_PREFIX - 1;
}

const char *srv_route_name(srv_route r) {
    return r < SRV_ROUTE_COUNT ? route_table[r].label : "other";
}

const char *srv_route_allow(srv_route r) {
    /* The Allow header's text of each set of methods, in one order. */
    static const char *const text[8] = {
        [0] = "",
        [M_GET] = "GET",
        [M_HEAD] = "HEAD",
        [M_GET | M_HEAD] = "GET, HEAD",
        [M_POST] = "POST",
        [M_GET | M_POST] = "GET, POST",
        [M_HEAD | M_POST] = "HEAD, POST",
        [M_GET | M_HEAD | M_POST] = "GET, HEAD, POST",
    };
    return r < SRV_ROUTE_COUNT ? text[route_table[r].methods] : "";
}

int srv_route_open(srv_route r) {
    return r < SRV_ROUTE_COUNT && route_table[r].open;
}

size_t srv_route_open_paths(char *buf, size_t size) {
    size_t len = 0;
    if (size) buf[0] = '\0';
    for (int r = 0; r < SRV_ROUTE_COUNT; r++) {
        if (!route_table[r].open || !route_table[r].path) continue;
        int fits = len < size;
        int n = snprintf(fits ? buf + len : NULL, fits ? size - len : 0, "%s%s", len ? ", " : "",
                         route_table[r].path);
        len += n > 0 ? (size_t)n : 0;
    }
    return len;
}

int srv_route_allows(srv_route r, const char *method) {
    if (r >= SRV_ROUTE_COUNT || !method) return 0;
    unsigned m = strcmp(method, "GET") == 0    ? M_GET
                 : strcmp(method, "HEAD") == 0 ? M_HEAD
                 : strcmp(method, "POST") == 0 ? M_POST
                                               : 0;
    return (route_table[r].methods & m) != 0;
}

const srv_endpoint *srv_route_endpoint(srv_route r) {
    return r < SRV_ROUTE_COUNT ? route_table[r].endpoint : NULL;
}
