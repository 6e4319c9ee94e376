/*
 * job_batch.c — a POST /v1/attention/batch job on a worker: decode, bind
 * the named model, compute every sequence, encode.
 *
 * As an attention job (job.c), but the whole of it runs on the worker
 * that took it: a batch is never answered on a polling thread, whatever
 * its size. The model set is taken at decode and passes to the worker
 * afterwards, as job.c does, so that a reload cannot free the weights
 * under the batch. The outputs of all sequences are one block of the
 * worker's (w->outputs).
 *
 * The computation is one attn_compute_batch call (srv_job_compute). When
 * the batch's work reaches the worker's split_flops, it goes through the
 * pool's split runner (split.h), which hands the engine's tasks — many sequences' —
 * to whatever workers are idle, and stops between phases once the client
 * has gone (the job then comes back dropped). A sequence whose result
 * overflows float32 fails the batch with a 422 naming it.
 */
#include <malloc.h>
#include <stdlib.h>

#include "api/batch.h"
#include "api/error.h"
#include "server/job.h"
#include "server/model_view.h"

static void batch_fail(srv_job *job, const attn_error *err) {
    job->status = err->status;
    job->response = api_error_to_json(err, &job->response_len);
    if (!job->response) {
        job->status = 503; /* the HTTP layer answers with its static out_of_memory body */
        job->response_len = 0;
    }
}

/* Decodes the body and binds the named model of the store's current set. */
static int batch_decode(srv_job *job, srv_worker *w, attn_error *err) {
    job->set = w->models ? store_current(w->models) : NULL;
    if (api_batch_decode(job->body, job->body_len, job->limits, &job->batch, err) < 0) return -1;
    const char *name = api_batch_model(job->batch);
    if (!name) return 0; /* inline weights: bound by the decode */
    if (!store_model_name_valid(name, api_batch_model_length(job->batch)))
        return attn_error_set(err, 400, "invalid_value", "/model",
                              "model name must match [A-Za-z0-9._-]{1,64}");
    const store_model *m = job->set ? store_set_find(job->set, name) : NULL;
    if (!m)
        return attn_error_set(err, 404, "unknown_model", "/model",
                              "no model named \"%s\" is loaded; GET /v1/models lists them", name);
    api_vocabulary vocab;
    return api_batch_bind_vocab(job->batch, &m->weights, m->mask, srv_model_vocabulary(m, &vocab),
                                job->limits, err);
}

static int batch_compute(srv_job *job, srv_worker *w, attn_error *err) {
    api_batch *b = job->batch;
    size_t failed = 0;
    if (api_batch_alloc_outputs(b, w->outputs, err) < 0) return -1;
    int rc = srv_job_compute(job, w, api_batch_cost(b), api_batch_outputs(b), api_batch_inputs(b),
                             api_batch_count(b), err, &failed);
    if (rc == 0) return 0;
    /* The engine's code and message; the status is HTTP's, so ours. */
    err->status = err->code == ATTN_ERR_NONFINITE ? 422 : 503;
    if (err->code == ATTN_ERR_NONFINITE && failed < api_batch_count(b))
        api_batch_name_sequence(failed, err);
    return -1;
}

/* The batch is freed and the set passes to the worker (job.c's rule). */
static void batch_release(srv_job *job, srv_worker *w) {
    api_batch_free(job->batch);
    job->batch = NULL;
    store_set_release(w->set);
    w->set = job->set;
    job->set = NULL;
    attn_workspace_trim(w->ws, w->keep_workspace_bytes);
    attn_workspace_trim(w->outputs, w->keep_workspace_bytes);
    if (job->body_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
}

void srv_job_batch_run(srv_job *job, srv_worker *w) {
    struct timespec t0, t1, t2, t3;
    attn_error err = {0};

    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = batch_decode(job, w, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->decode_ms = srv_ms_between(&t0, &t1);
    if (rc == 0) {
        rc = batch_compute(job, w, &err);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        job->compute_ms = srv_ms_between(&t1, &t2);
        if (rc != 0 && err.code == ATTN_ERR_STOPPED) {
            job->dropped = 1;
            batch_release(job, w);
            return;
        }
        if (rc == 0) {
            job->response = api_batch_encode(job->batch, &job->response_len, &err);
            clock_gettime(CLOCK_MONOTONIC, &t3);
            job->encode_ms = srv_ms_between(&t2, &t3);
        }
    }
    batch_release(job, w);
    if (job->response)
        job->status = 200;
    else
        batch_fail(job, &err);
}
