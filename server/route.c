/*
 * route.c — the routing table.
 */
#include "server/route.h"

#include <stddef.h>
#include <string.h>

typedef struct route_row {
    const char *path;
    const char *label;
    const char *allow;
    int open; /* answered without an API key */
} route_row;

/* Indexed by srv_route. */
static const route_row route_table[SRV_ROUTE_COUNT] = {
    [SRV_ROUTE_ATTENTION] = {"/v1/attention", "attention", "POST", 0},
    /* Probes carry no key; the page holds no secret and asks for the key
     * when the API does. */
    [SRV_ROUTE_HEALTHZ] = {"/healthz", "healthz", "GET, HEAD", 1},
    [SRV_ROUTE_READYZ] = {"/readyz", "readyz", "GET, HEAD", 1},
    [SRV_ROUTE_METRICS] = {"/metrics", "metrics", "GET, HEAD", 0},
    [SRV_ROUTE_OPENAPI] = {"/v1/openapi.yaml", "openapi", "GET, HEAD", 0},
    [SRV_ROUTE_MODELS] = {"/v1/models", "models", "GET, HEAD", 0},
    [SRV_ROUTE_MODEL] = {NULL, "model", "GET, HEAD", 0}, /* MODEL_PREFIX + name */
    [SRV_ROUTE_PAGE] = {"/", "page", "GET, HEAD", 1},
    [SRV_ROUTE_OTHER] = {NULL, "other", "", 0},
};

#define MODEL_PREFIX "/v1/models/"

srv_route srv_route_find(const char *path) {
    if (!path) return SRV_ROUTE_OTHER;
    for (int r = 0; r < SRV_ROUTE_OTHER; r++)
        if (route_table[r].path && strcmp(path, route_table[r].path) == 0) return (srv_route)r;
    /* One path segment after the prefix; whether it names a model is the
     * handler's question (404 unknown_model), not the router's. */
    size_t p = sizeof MODEL_PREFIX - 1;
    if (strncmp(path, MODEL_PREFIX, p) == 0 && path[p] && !strchr(path + p, '/'))
        return SRV_ROUTE_MODEL;
    return SRV_ROUTE_OTHER;
}

const char *srv_route_model_name(const char *path) {
    return path + sizeof MODEL_PREFIX - 1;
}

const char *srv_route_name(srv_route r) {
    return r < SRV_ROUTE_COUNT ? route_table[r].label : "other";
}

const char *srv_route_allow(srv_route r) {
    return r < SRV_ROUTE_COUNT ? route_table[r].allow : "";
}

int srv_route_open(srv_route r) {
    return r < SRV_ROUTE_COUNT && route_table[r].open;
}

int srv_route_allows(srv_route r, const char *method) {
    if (r >= SRV_ROUTE_OTHER || !method) return 0;
    if (r == SRV_ROUTE_ATTENTION) return strcmp(method, "POST") == 0;
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}
