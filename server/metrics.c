/*
 * metrics.c — fixed arrays of relaxed atomics, rendered on demand.
 *
 * Every series lives in an array indexed by (route, status slot) or
 * (route, bucket), allocated once; observing is a few atomic additions and
 * never allocates. Histogram buckets are stored per bucket and made
 * cumulative only when rendering. Durations are summed in nanoseconds as
 * integers so that the sums are exact and atomic.
 */
#include "server/metrics.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Statuses the service sends, and the two it logs for exchanges that end
 * without an answer (408: timed out, 499: client closed, as nginx);
 * anything else is counted as "other". */
static const int metrics_statuses[] = {200, 204, 304, 400, 401, 404, 405, 408, 413,
                                       414, 415, 422, 431, 499, 500, 501, 503, 505};
#define N_STATUS     (sizeof metrics_statuses / sizeof metrics_statuses[0])
#define STATUS_OTHER N_STATUS

/* Upper bounds of the latency buckets, in seconds. */
static const double metrics_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_BUCKET (sizeof metrics_buckets / sizeof metrics_buckets[0])

static const char *const metrics_phases[SRV_PHASE_COUNT] = {"queue", "decode", "compute", "encode"};

struct srv_metrics {
    atomic_uint_fast64_t requests[SRV_ROUTE_COUNT][N_STATUS + 1];
    atomic_uint_fast64_t buckets[SRV_ROUTE_COUNT][N_BUCKET + 1]; /* last: +Inf only */
    atomic_uint_fast64_t duration_ns[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t phase_ns[SRV_PHASE_COUNT];
    atomic_uint_fast64_t events[SRV_EVENT_COUNT];
    double start_time; /* Unix seconds */
};

srv_metrics *srv_metrics_create(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->start_time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    return m;
}

void srv_metrics_destroy(srv_metrics *m) {
    free(m);
}

static uint64_t metrics_ns(double seconds) {
    return seconds > 0 ? (uint64_t)(seconds * 1e9 + 0.5) : 0;
}

void srv_metrics_observe(srv_metrics *m, srv_route route, int status, double seconds) {
    if (route >= SRV_ROUTE_COUNT) route = SRV_ROUTE_OTHER;
    size_t s = STATUS_OTHER;
    for (size_t i = 0; i < N_STATUS; i++)
        if (metrics_statuses[i] == status) s = i;
    size_t b = 0;
    while (b < N_BUCKET && seconds > metrics_buckets[b])
        b++;
    atomic_fetch_add_explicit(&m->requests[route][s], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->buckets[route][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->duration_ns[route], metrics_ns(seconds), memory_order_relaxed);
}

void srv_metrics_count(srv_metrics *m, srv_event event) {
    if (event < SRV_EVENT_COUNT)
        atomic_fetch_add_explicit(&m->events[event], 1, memory_order_relaxed);
}

void srv_metrics_add_phase(srv_metrics *m, srv_phase phase, double seconds) {
    if (phase >= SRV_PHASE_COUNT) return;
    atomic_fetch_add_explicit(&m->phase_ns[phase], metrics_ns(seconds), memory_order_relaxed);
}

static uint64_t metrics_get(const atomic_uint_fast64_t *a) {
    return atomic_load_explicit((atomic_uint_fast64_t *)a, memory_order_relaxed);
}

char *srv_metrics_render(const srv_metrics *m, const srv_metrics_gauges *g, size_t *len) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return NULL;

    fputs("# HELP attn_http_requests_total HTTP requests answered, by route and status.\n"
          "# TYPE attn_http_requests_total counter\n",
          f);
    for (int r = 0; r < SRV_ROUTE_COUNT; r++)
        for (size_t s = 0; s <= N_STATUS; s++) {
            uint64_t v = metrics_get(&m->requests[r][s]);
            if (!v) continue;
            if (s == STATUS_OTHER)
                fprintf(f, "attn_http_requests_total{route=\"%s\",code=\"other\"} %llu\n",
                        srv_route_name((srv_route)r), (unsigned long long)v);
            else
                fprintf(f, "attn_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                        srv_route_name((srv_route)r), metrics_statuses[s], (unsigned long long)v);
        }

    fputs("# HELP attn_http_request_duration_seconds Time from request headers to response "
          "sent, by route.\n"
          "# TYPE attn_http_request_duration_seconds histogram\n",
          f);
    for (int r = 0; r < SRV_ROUTE_COUNT; r++) {
        const char *name = srv_route_name((srv_route)r);
        uint64_t cum = 0;
        for (size_t b = 0; b < N_BUCKET; b++) {
            cum += metrics_get(&m->buckets[r][b]);
            fprintf(f, "attn_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                    name, metrics_buckets[b], (unsigned long long)cum);
        }
        cum += metrics_get(&m->buckets[r][N_BUCKET]);
        fprintf(f, "attn_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                name, (unsigned long long)cum);
        fprintf(f, "attn_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n", name,
                metrics_get(&m->duration_ns[r]) / 1e9);
        fprintf(f, "attn_http_request_duration_seconds_count{route=\"%s\"} %llu\n", name,
                (unsigned long long)cum);
    }

    fputs("# HELP attn_phase_seconds_total Time computed requests spent in each phase.\n"
          "# TYPE attn_phase_seconds_total counter\n",
          f);
    for (int p = 0; p < SRV_PHASE_COUNT; p++)
        fprintf(f, "attn_phase_seconds_total{phase=\"%s\"} %.9f\n", metrics_phases[p],
                metrics_get(&m->phase_ns[p]) / 1e9);

    fprintf(f,
            "# HELP attn_jobs_dropped_total Jobs not run, or stopped, because their client had "
            "gone.\n"
            "# TYPE attn_jobs_dropped_total counter\n"
            "attn_jobs_dropped_total %llu\n"
            "# HELP attn_inline_total Computations answered on the polling thread that read "
            "them, under --inline-max-flops.\n"
            "# TYPE attn_inline_total counter\n"
            "attn_inline_total %llu\n"
            "# HELP attn_answers_cut_total Answers not sent whole: their client stopped reading "
            "for --connection-timeout, or left.\n"
            "# TYPE attn_answers_cut_total counter\n"
            "attn_answers_cut_total %llu\n"
            "# HELP attn_connections_refused_total Connections closed at accept: "
            "--max-connections were open.\n"
            "# TYPE attn_connections_refused_total counter\n"
            "attn_connections_refused_total %llu\n"
            "# HELP attn_connections_timed_out_total Connections closed because a request's "
            "headers or body took longer than --connection-timeout.\n"
            "# TYPE attn_connections_timed_out_total counter\n"
            "attn_connections_timed_out_total %zu\n"
            "# HELP attn_connections Open connections.\n"
            "# TYPE attn_connections gauge\n"
            "attn_connections %zu\n"
            "# HELP attn_connections_capacity Connections that may be open at once.\n"
            "# TYPE attn_connections_capacity gauge\n"
            "attn_connections_capacity %zu\n",
            (unsigned long long)metrics_get(&m->events[SRV_EVENT_JOB_DROPPED]),
            (unsigned long long)metrics_get(&m->events[SRV_EVENT_INLINE]),
            (unsigned long long)metrics_get(&m->events[SRV_EVENT_ANSWER_CUT]),
            (unsigned long long)metrics_get(&m->events[SRV_EVENT_CONNECTION_REFUSED]),
            g->connections_timed_out, g->connections, g->connections_capacity);
    fprintf(f,
            "# HELP attn_queue_depth Jobs waiting for a worker.\n"
            "# TYPE attn_queue_depth gauge\n"
            "attn_queue_depth %zu\n"
            "# HELP attn_queue_capacity Jobs that may wait before 503 overloaded.\n"
            "# TYPE attn_queue_capacity gauge\n"
            "attn_queue_capacity %zu\n"
            "# HELP attn_workers_busy Workers computing a request.\n"
            "# TYPE attn_workers_busy gauge\n"
            "attn_workers_busy %zu\n"
            "# HELP attn_workers Worker threads.\n"
            "# TYPE attn_workers gauge\n"
            "attn_workers %zu\n"
            "# HELP attn_http_requests_in_flight Requests received and not yet answered.\n"
            "# TYPE attn_http_requests_in_flight gauge\n"
            "attn_http_requests_in_flight %zu\n"
            "# HELP attn_body_bytes_reserved Request-body bytes held (reserved) right now.\n"
            "# TYPE attn_body_bytes_reserved gauge\n"
            "attn_body_bytes_reserved %zu\n"
            "# HELP attn_body_bytes_capacity Request-body bytes that may be held before 503 "
            "overloaded.\n"
            "# TYPE attn_body_bytes_capacity gauge\n"
            "attn_body_bytes_capacity %zu\n"
            "# HELP attn_answer_bytes_unsent Bytes of answers built and not yet sent.\n"
            "# TYPE attn_answer_bytes_unsent gauge\n"
            "attn_answer_bytes_unsent %zu\n"
            "# HELP attn_answer_bytes_capacity Bytes of unsent answers over which new work is "
            "refused (503 overloaded).\n"
            "# TYPE attn_answer_bytes_capacity gauge\n"
            "attn_answer_bytes_capacity %zu\n"
            "# HELP attn_draining 1 while shutting down.\n"
            "# TYPE attn_draining gauge\n"
            "attn_draining %d\n"
            "# HELP process_start_time_seconds Start time of the process since the Unix epoch.\n"
            "# TYPE process_start_time_seconds gauge\n"
            "process_start_time_seconds %.3f\n",
            g->queued, g->queue_capacity, g->busy_workers, g->workers, g->in_flight, g->body_bytes,
            g->body_bytes_capacity, g->unsent_bytes, g->unsent_bytes_capacity, g->draining ? 1 : 0,
            m->start_time);

    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len) *len = size;
    return buf;
}
