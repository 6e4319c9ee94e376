/*
 * endpoint.h — what an endpoint gives the exchange (exchange.c), one
 * endpoint per file (ep_*.c), named by a row of the route table (route.c).
 *
 * The exchange routes, checks the key, the method and the framing, reads
 * the body, and calls:
 *
 *   accept   (endpoints that take a body; NULL for the others) on the 1st
 *            call, once the headers are in and the method is allowed, with
 *            x->body.declared the Content-Length (0: none or not a number): refuse
 *            what the headers already condemn (an answer, via reply.h), or
 *            start reading (srv_exchange_read_body) and return MHD_YES;
 *   answer   once the request is complete (its body copied in x->body):
 *            reply (reply.h), or hand a job to the pool (dispatch.h);
 *   headers  (may be NULL) adds the endpoint's own response headers to an
 *            answer of `status`; returns 1 when it set Cache-Control itself.
 */
#ifndef SRV_ENDPOINT_H
#define SRV_ENDPOINT_H

#include <microhttpd.h>

#include "server/http_state.h"

typedef struct srv_endpoint {
    enum MHD_Result (*accept)(srv_exchange *x);
    enum MHD_Result (*answer)(srv_exchange *x);
    int (*headers)(const srv_exchange *x, struct MHD_Response *r, unsigned status);
} srv_endpoint;

extern const srv_endpoint srv_ep_attention;      /* ep_attention.c */
extern const srv_endpoint srv_ep_batch;          /* ep_attention.c */
extern const srv_endpoint srv_ep_models;         /* ep_models.c: the list */
extern const srv_endpoint srv_ep_model;          /* ep_models.c: one model */
extern const srv_endpoint srv_ep_healthz;        /* ep_probes.c */
extern const srv_endpoint srv_ep_readyz;         /* ep_probes.c */
extern const srv_endpoint srv_ep_metrics;        /* ep_probes.c */
extern const srv_endpoint srv_ep_openapi;        /* ep_static.c */
extern const srv_endpoint srv_ep_page;           /* ep_static.c */
extern const srv_endpoint srv_ep_v2_server;      /* ep_v2.c: GET /v2 */
extern const srv_endpoint srv_ep_v2_live;        /* ep_v2.c */
extern const srv_endpoint srv_ep_v2_ready;       /* ep_v2.c */
extern const srv_endpoint srv_ep_v2_model;       /* ep_v2.c: a model's metadata */
extern const srv_endpoint srv_ep_v2_model_ready; /* ep_v2.c */
extern const srv_endpoint srv_ep_v2_infer;       /* ep_v2_infer.c */

/* The endpoint of a route; NULL for SRV_ROUTE_OTHER (route.c). */
const srv_endpoint *srv_route_endpoint(srv_route r);

/* For an accept: the exchange reads the body from now on, into x->body,
 * counted against --max-body-bytes and the body budget, due within
 * --connection-timeout. Returns MHD_YES. */
enum MHD_Result srv_exchange_read_body(srv_exchange *x);

#endif
