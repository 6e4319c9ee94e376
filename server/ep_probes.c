/*
 * ep_probes.c — what operators and orchestrators ask: GET /healthz (the
 * process answers), GET /readyz (it takes work: 503 once draining) and
 * GET /metrics (Prometheus text, metrics.h).
 */
#include "server/endpoint.h"

#include "server/reply.h"

static enum MHD_Result healthz_answer(srv_exchange *x) {
    return srv_reply_json(x, 200, "{\"status\":\"ok\"}");
}

static enum MHD_Result readyz_answer(srv_exchange *x) {
    if (atomic_load(&x->h->draining)) return srv_reply_shutting_down(x);
    return srv_reply_json(x, 200, "{\"status\":\"ready\"}");
}

static enum MHD_Result metrics_answer(srv_exchange *x) {
    srv_http *h = x->h;
    srv_metrics_gauges g = {0};
    pool_stats(h->workers, &g.queued, &g.busy_workers);
    g.queue_capacity = h->cfg->queue_depth;
    g.workers = h->cfg->workers;
    pthread_mutex_lock(&h->mu);
    g.in_flight = h->in_flight;
    pthread_mutex_unlock(&h->mu);
    g.body_bytes = atomic_load(&h->bodies.used);
    g.body_bytes_capacity = h->bodies.max;
    g.unsent_bytes = atomic_load(&h->unsent.used);
    g.unsent_bytes_capacity = h->unsent.max;
    g.connections = atomic_load(&h->connections);
    g.connections_capacity = h->cfg->max_connections;
    g.connections_timed_out = srv_watch_expired_total(h->watch);
    g.draining = atomic_load(&h->draining);
    size_t len = 0;
    char *text = srv_metrics_render(h->metrics, &g, &len);
    if (!text) return srv_reply_oom(x);
    return srv_reply_new(x, 200, text, len, SRV_METRICS_CONTENT_TYPE);
}

const srv_endpoint srv_ep_healthz = {NULL, healthz_answer, NULL};
const srv_endpoint srv_ep_readyz = {NULL, readyz_answer, NULL};
const srv_endpoint srv_ep_metrics = {NULL, metrics_answer, NULL};
