/*
 * ep_batch.c — POST /v1/attention/batch.
 *
 * Before and while the body is read, the checks of every POST (post.h),
 * as for POST /v1/attention. Once the body is in, it is always a job for
 * the pool (job_batch.c): a batch is never answered on the polling thread.
 */
#include "server/endpoint.h"

#include "server/dispatch.h"
#include "server/headers.h"
#include "server/post.h"

static enum MHD_Result batch_accept(srv_exchange *x) {
    return srv_post_accept(x, srv_headers_json_type,
                           "the body must be JSON (Content-Type: application/json)");
}

static enum MHD_Result batch_answer(srv_exchange *x) {
    enum MHD_Result ret;
    if (srv_post_body_failed(x, &ret)) return ret;
    x->job.kind = SRV_JOB_BATCH;
    x->job.body = x->body.data ? x->body.data : "";
    x->job.body_len = x->body.len;
    return srv_dispatch(x);
}

const srv_endpoint srv_ep_batch = {batch_accept, batch_answer, srv_post_timing_headers};
