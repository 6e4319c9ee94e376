/*
 * job.c — decode → model → compute → encode, on a worker thread.
 *
 * Every heavy step of a request happens here, never on an I/O thread. The
 * request object lives only inside srv_job_run: it is decoded, computed,
 * encoded and freed before the function returns, so the only thing that
 * leaves is the response buffer. Each phase is timed for Server-Timing.
 *
 * Output buffers come from a block of the worker's (w->outputs), kept
 * between jobs like the workspace: a large output would otherwise pay for
 * fresh pages on every request, which on a VM costs more than computing
 * it. Both blocks are trimmed above keep_workspace_bytes.
 *
 * Memory after a job. A decoded body is many small jansson nodes, which
 * glibc keeps in the worker's arena after they are freed: after a large
 * body (over SRV_JOB_TRIM_BODY_BYTES) the worker calls malloc_trim(0) to
 * give those pages back. The workspace only grows; once it is larger than
 * SRV_JOB_KEEP_WORKSPACE_BYTES it is freed after the job, so one huge
 * request does not pin its scratch for the worker's whole life.
 *
 * A client that has gone. A job asks job->client_gone before it starts
 * and, through the runner's stop, between the phases of a split
 * computation; a dropped job leaves no response, and the HTTP layer closes
 * the connection.
 *
 * Splitting: a large computation goes through attn_compute_with and the
 * pool runner of split.c, which borrows only the workers idle at that
 * moment; everything else is attn_compute on this worker. The results are
 * bit for bit the same either way.
 */
#include "server/job.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "api/error.h"
#include "api/models.h"
#include "api/response.h"
#include "server/split.h"

double srv_ms_between(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

srv_worker *srv_worker_create(store *models, pool *workers) {
    srv_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->ws = attn_workspace_create();
    w->outputs = attn_workspace_create();
    if (!w->ws || !w->outputs) {
        attn_workspace_destroy(w->ws);
        attn_workspace_destroy(w->outputs);
        free(w);
        return NULL;
    }
    w->models = models;
    w->keep_workspace_bytes = SRV_JOB_KEEP_WORKSPACE_BYTES;
    w->pool = workers;
    w->split_flops = SRV_JOB_SPLIT_FLOPS;
    return w;
}

void srv_worker_destroy(srv_worker *w) {
    if (!w) return;
    store_set_release(w->set);
    attn_workspace_destroy(w->ws);
    attn_workspace_destroy(w->outputs);
    free(w);
}

void *srv_job_worker_init(pool *p, void *ctx) {
    return srv_worker_create(ctx, p);
}

void srv_job_worker_fini(void *worker_ctx, void *ctx) {
    (void)ctx;
    srv_worker_destroy(worker_ctx);
}

/* The model `name` of the worker's set, or NULL with a 404 in *err: at
 * `path` of the request body, or with path "" (and the name not echoed)
 * when the name came from the URL. */
static const store_model *find_model(srv_worker *w, const char *name, const char *path,
                                     attn_error *err) {
    const store_model *m = w->set ? store_set_find(w->set, name) : NULL;
    if (!m && path)
        attn_error_set(err, 404, "unknown_model", path,
                      "no model named \"%s\" is loaded; GET /v1/models lists them", name);
    else if (!m)
        attn_error_set(err, 404, "unknown_model", NULL,
                      "no model of this name is loaded; GET /v1/models lists them");
    return m;
}

static void job_fail(srv_job *job, const attn_error *err) {
    job->status = err->status;
    job->response = api_error_to_json(err, &job->response_len);
    if (!job->response) {
        job->status = 503; /* the HTTP layer answers with its static out_of_memory body */
        job->response_len = 0;
    }
}

/* A model's weights, as GET /v1/models/{name}?weights=true shows them. */
static void job_model_weights(srv_job *job, srv_worker *w) {
    attn_error err;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job->queue_ms = srv_ms_between(&job->submitted, &t0);
    const store_model *m = find_model(w, job->model_name, NULL, &err);
    if (m) {
        api_model_info info = {m->name, m->description, m->mask, &m->weights};
        job->response =
            api_model_encode(&info, 1, job->limits->max_response_bytes, &job->response_len, &err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->encode_ms = srv_ms_between(&t0, &t1);
    if (job->response)
        job->status = 200;
    else
        job_fail(job, &err);
    if (job->response_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
}

static int job_client_gone(const srv_job *job) {
    return job->client_gone && job->client_gone(job->client);
}

/* A split computation's runner context: the split's, and the job whose
 * client the runner's stop asks about. `split` comes first, so the
 * runner's ctx (&split) is also this struct's address. */
typedef struct job_split {
    srv_split split;
    const srv_job *job;
} job_split;

/* attn_runner's stop: the phases of a split computation end once its
 * client has gone. A smaller one (~1 ms at most) runs to its end. */
static int job_stop(void *ctx) {
    return job_client_gone(((const job_split *)ctx)->job);
}

/* Computes `in` on the worker's workspace, split over idle workers when
 * it is large enough (see the top comment). */
static int job_compute(const srv_job *job, srv_worker *w, const attn_output *out,
                       const attn_input *in, attn_error *err) {
    const attn_weights *wt = in->weights;
    double flops = attn_flops(in->n_tokens, wt->d_model, wt->n_heads, wt->d_head, wt->w_o != NULL);
    if (!w->pool || flops < w->split_flops) return attn_compute(out, w->ws, in, err);
    job_split js = {.split = {.pool = w->pool, .ws = w->ws}, .job = job};
    attn_runner runner = srv_split_runner(&js.split);
    runner.stop = job_stop;
    int rc = attn_compute_with(out, w->ws, in, &runner, err);
    if (js.split.helpers) w->splits++;
    return rc;
}

/* Frees the request and gives large memory back (see the top comment). */
static void job_release(const srv_job *job, api_request *req, srv_worker *w) {
    api_request_free(req);
    attn_workspace_trim(w->ws, w->keep_workspace_bytes);
    attn_workspace_trim(w->outputs, w->keep_workspace_bytes);
    if (job->body_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
}

static void job_run(srv_job *job, srv_worker *w);

void srv_job_run(srv_job *job, srv_worker *w) {
    srv_worker_idle(w); /* a set still held from the job before */
    w->set = w->models ? store_current(w->models) : NULL;
    job_run(job, w);
}

void srv_worker_idle(srv_worker *w) {
    store_set_release(w->set);
    w->set = NULL;
}

static void job_run(srv_job *job, srv_worker *w) {
    struct timespec t0, t1, t2, t3;
    attn_error err;
    memset(&err, 0, sizeof err);
    api_request *req = NULL;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    job->queue_ms = srv_ms_between(&job->submitted, &t0);
    job->decode_ms = job->compute_ms = job->encode_ms = 0;
    job->deferred = 0;
    job->dropped = 0;
    job->response = NULL;
    job->response_len = 0;
    if (job_client_gone(job)) {
        job->dropped = 1;
        return;
    }
    if (job->kind == SRV_JOB_MODEL_WEIGHTS) {
        job_model_weights(job, w);
        return;
    }

    /* A cap on the work here (a tiny request on a polling thread): binding
     * stops short of a request over it, before its outputs exist. */
    api_limits capped;
    const api_limits *limits = job->limits;
    if (job->max_flops_here > 0) {
        capped = *job->limits;
        capped.defer_above_flops = job->max_flops_here;
        limits = &capped;
    }
    int rc = api_request_decode_with(job->body, job->body_len, limits, w->outputs, &req, &err);
    if (rc == 0 && api_request_model(req)) {
        /* The job holds its set to the end, so the weights outlive the
         * request. */
        const store_model *m = find_model(w, api_request_model(req), "/model", &err);
        rc = m ? api_request_bind(req, &m->weights, m->mask, limits, &err) : -1;
    }
    /* decode: the body to a bound request, its output buffers ready */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->decode_ms = srv_ms_between(&t0, &t1);
    if (rc == API_REQUEST_DEFERRED) {
        job->deferred = 1;
        job_release(job, req, w);
        return;
    }
    if (rc != 0) goto fail;

    rc = job_compute(job, w, api_request_output(req), api_request_input(req), &err);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    job->compute_ms = srv_ms_between(&t1, &t2);
    if (rc != 0 && err.code == ATTN_ERR_STOPPED) {
        job->dropped = 1;
        job_release(job, req, w);
        return;
    }
    if (rc != 0) { /* the engine's code and message; the status is HTTP's, so ours */
        err.status = err.code == ATTN_ERR_NONFINITE ? 422 : 503;
        goto fail;
    }

    job->response = api_response_encode(req, &job->response_len, &err);
    clock_gettime(CLOCK_MONOTONIC, &t3);
    job->encode_ms = srv_ms_between(&t2, &t3);
    if (!job->response) goto fail;
    job->status = 200;
    job_release(job, req, w);
    return;

fail:
    job_release(job, req, w);
    job_fail(job, &err);
}
