/*
 * job_oip.c — POST /v2/models/{name}/infer on a worker: the model from the
 * store's current set, the body decoded (api/oip.h) into one batch of
 * sequences, computed by attn_compute_batch — through the pool's split
 * runner (split.h) when its work reaches the worker's split threshold, as
 * a single request's does — and encoded.
 *
 * The set is held by the worker from the model's lookup until it is told
 * it is idle (srv_worker_idle), after the answer is on its way: the
 * weights and the model's name outlive the encoding. A job whose client
 * has gone stops between the phases of a split computation (dropped).
 * Every failure answers the protocol's {"error": "..."} body.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "api/oip.h"
#include "server/job.h"

static void oip_fail(srv_job *job, const attn_error *err) {
    job->status = err->status;
    job->response = api_oip_error_json(err, &job->response_len);
    job->json_len = 0;
    if (!job->response) {
        job->status = 503; /* the HTTP layer answers with its static out_of_memory body */
        job->response_len = 0;
    }
}

static int oip_compute(srv_job *job, srv_worker *w, const api_oip_request *r, attn_error *err) {
    return srv_job_compute(job, w, api_oip_cost(r), api_oip_outputs(r), api_oip_inputs(r),
                           api_oip_count(r), err, NULL);
}

void srv_job_oip_run(srv_job *job, srv_worker *w) {
    struct timespec t0, t1, t2, t3;
    attn_error err = {0};
    api_oip_request *r = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job->json_len = 0;
    job->content_type = NULL;
    srv_worker_idle(w); /* a set still held from the job before */
    w->set = w->models ? store_current(w->models) : NULL;
    const store_model *m = w->set ? store_set_find(w->set, job->oip_model) : NULL;
    if (!m) {
        attn_error_set(&err, 404, "unknown_model", NULL,
                       "no model of this name is loaded; GET /v1/models lists them");
        oip_fail(job, &err);
        return;
    }
    api_oip_model model = {m->name, &m->weights, m->mask};
    size_t max_batch = job->limits ? job->limits->max_batch : (size_t)-1;
    int rc = api_oip_decode(job->body, job->body_len, job->oip_header_len, &model, job->limits,
                            max_batch, &r, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->decode_ms = srv_ms_between(&t0, &t1);
    if (rc == 0) {
        rc = oip_compute(job, w, r, &err);
        if (rc != 0) err.status = err.code == ATTN_ERR_NONFINITE ? 422 : 503;
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);
    job->compute_ms = srv_ms_between(&t1, &t2);
    if (rc != 0 && err.code == ATTN_ERR_STOPPED) {
        job->dropped = 1;
        api_oip_free(r);
        attn_workspace_trim(w->ws, w->keep_workspace_bytes);
        if (job->body_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
        return;
    }
    if (rc == 0) {
        job->response = api_oip_encode(r, &job->response_len, &job->json_len, &err);
        clock_gettime(CLOCK_MONOTONIC, &t3);
        job->encode_ms = srv_ms_between(&t2, &t3);
    }
    api_oip_free(r);
    attn_workspace_trim(w->ws, w->keep_workspace_bytes);
    if (job->body_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
    if (!job->response) {
        oip_fail(job, &err);
        return;
    }
    job->status = 200;
    /* Triton's answer: application/octet-stream when bytes follow the
     * JSON, else application/json. */
    job->content_type = job->json_len ? "application/octet-stream" : "application/json";
}
