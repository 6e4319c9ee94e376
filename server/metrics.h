/*
 * metrics.h — counters and histograms for GET /metrics.
 *
 * Labels come only from fixed sets (route names of route.h, a fixed list
 * of status codes, the four phases of a job), so the number of series is
 * bounded whatever clients send. Recording is lock-free (relaxed atomics)
 * and may be done from any thread.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include "server/route.h"
#include <stddef.h>

typedef struct srv_metrics srv_metrics;

/* Phases of POST /v1/attention, as in the Server-Timing header. */
typedef enum srv_phase {
    SRV_PHASE_QUEUE,
    SRV_PHASE_DECODE,
    SRV_PHASE_COMPUTE,
    SRV_PHASE_ENCODE,
    SRV_PHASE_COUNT
} srv_phase;

/* Things that happen to connections and jobs rather than to a request's
 * answer, each a counter. */
typedef enum srv_event {
    SRV_EVENT_JOB_DROPPED,        /* a job whose client had gone: not run, or stopped */
    SRV_EVENT_CONNECTION_REFUSED, /* a connection over --max-connections, closed at accept */
    SRV_EVENT_INLINE,             /* a computation answered on its polling thread (inline.h) */
    SRV_EVENT_ANSWER_CUT,         /* an answer not sent whole: its client stopped reading or left */
    SRV_EVENT_COUNT
} srv_event;

/* Point-in-time values the caller samples when rendering. */
typedef struct srv_metrics_gauges {
    size_t queued, queue_capacity;
    size_t busy_workers, workers;
    size_t in_flight;
    size_t connections, connections_capacity; /* open / --max-connections */
    size_t connections_timed_out;           /* so far: headers or body not in within the timeout */
    size_t body_bytes, body_bytes_capacity; /* request bodies held / allowed */
    size_t unsent_bytes, unsent_bytes_capacity; /* answers built, not yet sent / allowed */
    int draining;
} srv_metrics_gauges;

/* New zeroed metrics, NULL when out of memory; free with srv_metrics_destroy. */
srv_metrics *srv_metrics_create(void);
void srv_metrics_destroy(srv_metrics *m);

/* One finished request: its route, status and duration in seconds. */
void srv_metrics_observe(srv_metrics *m, srv_route route, int status, double seconds);

/* One more of `event`. */
void srv_metrics_count(srv_metrics *m, srv_event event);

/* Time one computed request spent in a phase, in seconds. */
void srv_metrics_add_phase(srv_metrics *m, srv_phase phase, double seconds);

/* The Prometheus text exposition (format 0.0.4), malloc'd and
 * NUL-terminated, length in *len; the caller frees it. NULL when out of
 * memory. */
char *srv_metrics_render(const srv_metrics *m, const srv_metrics_gauges *g, size_t *len);

/* The Content-Type of srv_metrics_render's text. */
#define SRV_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
