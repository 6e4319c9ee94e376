/*
 * ep_attention.c — POST /v1/attention.
 *
 * Before and while the body is read, the checks of every POST (post.h).
 * Once the body is in: a tiny request is answered on the polling thread
 * (inline.h), any other is a job for the pool (dispatch.h).
 */
#include "server/endpoint.h"

#include "server/dispatch.h"
#include "server/headers.h"
#include "server/inline.h"
#include "server/post.h"

static enum MHD_Result attention_accept(srv_exchange *x) {
    return srv_post_accept(x, srv_headers_json_type,
                           "the body must be JSON (Content-Type: application/json)");
}

static enum MHD_Result attention_answer(srv_exchange *x) {
    enum MHD_Result ret;
    if (srv_post_body_failed(x, &ret)) return ret;
    x->job.kind = SRV_JOB_ATTENTION;
    x->job.body = x->body.data ? x->body.data : "";
    x->job.body_len = x->body.len;
    if (srv_inline_try(x) == SRV_INLINE_DONE) return srv_dispatch_reply(x);
    return srv_dispatch(x);
}

const srv_endpoint srv_ep_attention = {attention_accept, attention_answer, srv_post_timing_headers};
