/*
 * dispatch.c — suspend, queue, resume (dispatch.h).
 */
#include "server/dispatch.h"

#include <stdlib.h>

#include "api/error.h"
#include "server/answer.h"
#include "server/inline.h"
#include "server/reply.h"

void srv_dispatch_count_phases(const srv_exchange *x) {
    srv_metrics *m = x->h->metrics;
    srv_metrics_add_phase(m, SRV_PHASE_QUEUE, x->job.queue_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_DECODE, x->job.decode_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_COMPUTE, x->job.compute_ms / 1e3);
    srv_metrics_add_phase(m, SRV_PHASE_ENCODE, x->job.encode_ms / 1e3);
}

/* srv_job's client_gone, and pool_evict's predicate for a full queue: the
 * client has closed (or reset) its connection. */
static int client_gone(void *arg) {
    const srv_exchange *x = arg;
    return x->fd >= 0 && srv_watch_peer_gone(x->fd);
}

/* A job dropped because its client left, before it ran, while it ran, or
 * from a full queue (pool_evict's drop). Last touch of x on this thread. */
static void drop(void *arg) {
    srv_exchange *x = arg;
    srv_job_discard(&x->job); /* what a job evicted before it ran holds */
    srv_metrics_count(x->h->metrics, SRV_EVENT_JOB_DROPPED);
    x->gone = 1;
    x->state = X_GONE;
    MHD_resume_connection(x->conn);
}

/* A job's answer in place of its run: the error, in the route's form. */
static void fail_job(srv_exchange *x, const attn_error *err) {
    srv_job_discard(&x->job);
    x->job.status = err->status;
    x->job.response = srv_reply_error_body(x, err, &x->job.response_len);
}

static void run(void *arg, void *worker_ctx) {
    srv_exchange *x = arg;
    if (srv_answer_budget_full(&x->h->unsent)) {
        /* queued before the answers not yet sent filled their budget: not
         * run, so that only the answers the workers are making can pass it */
        attn_error err;
        srv_error_unsent_full(x->h, &err);
        fail_job(x, &err);
    } else {
        srv_job_run(&x->job, worker_ctx);
    }
    /* counted now, so that the next job this worker takes sees it */
    if (!x->job.dropped) x->held = srv_answer_hold(&x->h->unsent, x->job.response_len);
    if (x->job.dropped) {
        drop(x);
    } else {
        srv_dispatch_count_phases(x);
        x->state = X_DONE;
        /* Last touch of x on this thread: after resume the polling thread
         * may send the answer and free the exchange at any moment. */
        MHD_resume_connection(x->conn);
    }
    srv_worker_idle(worker_ctx);
}

enum MHD_Result srv_dispatch(srv_exchange *x) {
    srv_http *h = x->h;
    if (x->late) {
        srv_job_discard(&x->job);
        return srv_reply_shutting_down(x);
    }
    if (srv_answer_budget_full(&h->unsent)) {
        /* a body read, or a model's weights asked, while the answers filled */
        attn_error err;
        srv_error_unsent_full(h, &err);
        srv_job_discard(&x->job);
        return srv_reply_error(x, &err);
    }
    x->job.limits = h->limits;
    x->job.client_gone = client_gone;
    x->job.client = x;
    clock_gettime(CLOCK_MONOTONIC, &x->job.submitted);
    x->state = X_WAITING;

    MHD_suspend_connection(x->conn);
    int rc = pool_submit(h->workers, run, x);
    /* A full queue may hold jobs whose clients left: they go first. */
    if (rc == POOL_FULL && pool_evict(h->workers, client_gone, drop) > 0)
        rc = pool_submit(h->workers, run, x);
    if (rc != POOL_OK) {
        attn_error err;
        if (rc == POOL_FULL)
            attn_error_set(&err, 503, "overloaded", NULL,
                           "the work queue is full (%zu waiting); retry later",
                           h->cfg->queue_depth);
        else if (rc == POOL_STOPPED)
            srv_error_shutting_down(&err);
        else
            attn_error_set(&err, 503, "out_of_memory", NULL, "memory for the job could not be had");
        fail_job(x, &err);
        x->state = X_DONE;
        MHD_resume_connection(x->conn);
    }
    return MHD_YES;
}

enum MHD_Result srv_dispatch_call(srv_exchange *x, api_call_kind kind) {
    x->job.kind = SRV_JOB_CALL;
    x->job.call_kind = kind;
    x->job.body = x->body.data ? x->body.data : "";
    x->job.body_len = x->body.len;
    if (srv_inline_try(x) == SRV_INLINE_DONE) return srv_dispatch_reply(x);
    return srv_dispatch(x);
}

enum MHD_Result srv_dispatch_reply(srv_exchange *x) {
    srv_job *j = &x->job;
    srv_answer_unhold(&x->h->unsent, &x->held); /* the response counts it from here */
    srv_body_free(&x->body);
    j->body = NULL;
    if (j->answer) {
        api_answer *a = j->answer;
        j->answer = NULL; /* moved into libmicrohttpd */
        return srv_reply_answer(x, (unsigned)j->status, a, j->content_type);
    }
    if (!j->response) return srv_reply_oom(x);
    char *body = j->response;
    j->response = NULL; /* moved into libmicrohttpd */
    return srv_reply_new(x, (unsigned)j->status, body, j->response_len,
                         j->content_type ? j->content_type : "application/json");
}
