/*
 * ep_batch.c — POST /v1/attention/batch.
 *
 * The headers are checked as for POST /v1/attention (ep_attention.c): 503
 * while draining, 415 for a body that is not JSON, 413 from
 * Content-Length, 503 overloaded when the body budget cannot hold its
 * first piece. Once the body is in, it is always a job for the pool
 * (job_batch.c): a batch is never answered on the polling thread.
 */
#include "server/endpoint.h"

#include <stdio.h>

#include "server/dispatch.h"
#include "server/headers.h"
#include "server/reply.h"

static enum MHD_Result fail_overloaded(srv_exchange *x) {
    return srv_reply_fail(x, 503, "overloaded",
                          "the server holds too many request bodies (%zu bytes at most); retry "
                          "later",
                          x->h->cfg->max_inflight_bytes);
}

static enum MHD_Result fail_too_large(srv_exchange *x) {
    return srv_reply_fail(x, 413, "body_too_large",
                          "the body is larger than the limit of %zu bytes",
                          x->h->cfg->max_body_bytes);
}

static enum MHD_Result batch_accept(srv_exchange *x) {
    srv_http *h = x->h;
    if (atomic_load(&h->draining))
        return srv_reply_fail(x, 503, "shutting_down",
                              "the server is shutting down; retry elsewhere");
    const char *ct =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!srv_headers_json_type(ct))
        return srv_reply_fail(x, 415, "unsupported_media_type",
                              "the body must be JSON (Content-Type: application/json)");
    size_t declared = x->body.declared;
    if (declared > h->cfg->max_body_bytes) return fail_too_large(x);
    if (srv_body_first_piece(declared) > srv_budget_room(&h->bodies)) return fail_overloaded(x);
    return srv_exchange_read_body(x);
}

static enum MHD_Result batch_answer(srv_exchange *x) {
    switch (x->body.state) {
    case SRV_BODY_TOO_LARGE: return fail_too_large(x);
    case SRV_BODY_NO_MEMORY:
        return srv_reply_fail(x, 503, "out_of_memory", "memory for the body could not be had");
    case SRV_BODY_OVERLOADED: return fail_overloaded(x);
    case SRV_BODY_OK: break;
    }
    x->job.kind = SRV_JOB_BATCH;
    x->job.body = x->body.data ? x->body.data : "";
    x->job.body_len = x->body.len;
    return srv_dispatch(x);
}

/* Server-Timing, as POST /v1/attention's. */
static int batch_headers(const srv_exchange *x, struct MHD_Response *r, unsigned status) {
    (void)status;
    char timing[192];
    snprintf(timing, sizeof timing,
             "queue;dur=%.3f, decode;dur=%.3f, compute;dur=%.3f, encode;dur=%.3f", x->job.queue_ms,
             x->job.decode_ms, x->job.compute_ms, x->job.encode_ms);
    MHD_add_response_header(r, "Server-Timing", timing);
    return 0;
}

const srv_endpoint srv_ep_batch = {batch_accept, batch_answer, batch_headers};
