/*
 * ep_attention.c — POST /v1/attention and POST /v1/attention/batch.
 *
 * Before and while the body is read, the checks of every POST (post.h).
 * Once the body is in, a computation (dispatch.h): a tiny one is answered
 * on the polling thread, any other is a job for the pool. The two differ
 * only in their wire format (api/call.h).
 */
#include "server/endpoint.h"

#include "server/dispatch.h"
#include "server/headers.h"
#include "server/post.h"

static enum MHD_Result attention_accept(srv_exchange *x) {
    return srv_post_accept(x, srv_headers_json_type,
                           "the body must be JSON (Content-Type: application/json)");
}

static enum MHD_Result attention_answer(srv_exchange *x) {
    enum MHD_Result ret;
    if (srv_post_body_failed(x, &ret)) return ret;
    return srv_dispatch_call(x, API_CALL_ATTENTION);
}

static enum MHD_Result batch_answer(srv_exchange *x) {
    enum MHD_Result ret;
    if (srv_post_body_failed(x, &ret)) return ret;
    return srv_dispatch_call(x, API_CALL_BATCH);
}

const srv_endpoint srv_ep_attention = {attention_accept, attention_answer, srv_post_timing_headers};
const srv_endpoint srv_ep_batch = {attention_accept, batch_answer, srv_post_timing_headers};
