/*
 * job.c — the one road of every computation, whatever its wire format:
 * the store's current set → decode → one model lookup → bind → outputs
 * from the worker's block → compute → encode → one failure path → one
 * release; and the model-weights job beside it.
 *
 * Every heavy step of a request happens here: on a worker, or for a tiny
 * request on its polling thread (inline.h), which may also decode a small
 * body (srv_job_decode) before handing the job to a worker. The decoded
 * call belongs to the job until srv_job_run has encoded the answer and
 * freed it; the only thing that leaves is the response buffer, or the
 * answer read from the outputs. Each phase is timed for Server-Timing.
 *
 * Output buffers come from a block of the worker's (w->outputs), kept
 * between jobs like the workspace: a large output would otherwise pay for
 * fresh pages on every request, which on a VM costs more than computing
 * it. Both blocks are trimmed above keep_workspace_bytes. An answer of
 * binary tensors (/v2) is the exception: it is sent from its outputs
 * (api_answer), so they get a block of their own, which the answer takes
 * and frees once sent; the job leaves it instead of a body.
 *
 * Memory after a job. A decoded body is many small jansson nodes, which
 * glibc keeps in the worker's arena after they are freed: after a large
 * body (over SRV_JOB_TRIM_BODY_BYTES) the worker calls malloc_trim(0) to
 * give those pages back. The workspace only grows; once it is larger than
 * SRV_JOB_KEEP_WORKSPACE_BYTES it is freed after the job, so one huge
 * request does not pin its scratch for the worker's whole life.
 *
 * A client that has gone. A job asks job->client_gone before it starts
 * and, through the runner's stop, before each task of its computation
 * (job_stop); a dropped job leaves no response, and the HTTP layer closes
 * the connection.
 *
 * Splitting (job_compute): a large computation
 * goes through the pool runner of split.c, which borrows only the workers
 * idle at that moment; everything else runs on this worker alone. The
 * results are bit for bit the same either way.
 */
#include "server/job.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/error.h"
#include "api/models.h"
#include "server/model_view.h"
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

/* The failure's answer, in the wire format of the job's call. */
static void job_fail(srv_job *job, const attn_error *err) {
    job->status = err->status;
    job->json_len = 0;
    job->content_type = NULL;
    job->response = job->kind == SRV_JOB_CALL
                        ? api_call_error_body(job->call_kind, err, &job->response_len)
                        : api_error_to_json(err, &job->response_len);
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
    srv_worker_idle(w); /* a set still held from the job before */
    w->set = w->models ? store_current(w->models) : NULL;
    const store_model *m = srv_model_find(w->set, job->model, strlen(job->model), NULL, &err);
    if (m) {
        api_vocabulary vocab;
        api_model_info info = srv_model_info(m, &vocab);
        job->response = api_model_encode(&info, job->model_parts, job->limits->max_response_bytes,
                                         &job->response_len, &err);
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

/*
 * The engine's stop (attention.h): asked before every task of a
 * computation, on whichever thread runs it, so that one whose client has
 * gone ends within a task (a head's block of 128 query rows), split or
 * not, however small its work was counted. Asking the socket is a system
 * call, so it is asked at most once per STOP_CHECK_NS and by one thread at
 * a time; between checks the answer is the last one.
 */
#define STOP_CHECK_NS 2000000LL

typedef struct job_watch {
    const srv_job *job;
    atomic_llong next_check_ns; /* CLOCK_MONOTONIC_COARSE */
    atomic_int gone;
} job_watch;

static long long coarse_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int job_stop(void *ctx) {
    job_watch *jw = ctx;
    if (atomic_load_explicit(&jw->gone, memory_order_relaxed)) return 1;
    long long now = coarse_now_ns();
    long long next = atomic_load_explicit(&jw->next_check_ns, memory_order_relaxed);
    if (now < next ||
        !atomic_compare_exchange_strong(&jw->next_check_ns, &next, now + STOP_CHECK_NS))
        return 0;
    if (!job_client_gone(jw->job)) return 0;
    atomic_store_explicit(&jw->gone, 1, memory_order_relaxed);
    return 1;
}

/* Computes the call's sequences (api_call_compute: one batch, or a stack
 * of layers) on the worker's
 * workspace: split over the pool's idle workers (split.h) when its work
 * reaches w->split_flops, else on this thread alone; either way stopping
 * once the job's client has gone (ATTN_ERR_STOPPED). Returns the engine's
 * 0 / -1, with *err and *failed as it fills them. */
static int job_compute(const srv_job *job, srv_worker *w, attn_error *err, size_t *failed) {
    const api_call *c = job->call;
    job_watch watch = {.job = job};
    atomic_init(&watch.next_check_ns, 0);
    atomic_init(&watch.gone, 0);
    if (!w->pool || api_call_cost(c) < w->split_flops) {
        attn_runner alone = {.run = NULL, .ctx = &watch, .stop = job_stop};
        return api_call_compute(c, w->ws, &alone, err, failed);
    }
    srv_split split = {.pool = w->pool, .ws = w->ws, .stop = job_stop, .stop_ctx = &watch};
    attn_runner runner = srv_split_runner(&split);
    int rc = api_call_compute(c, w->ws, &runner, err, failed);
    srv_split_end(&split);
    if (split.helpers) w->splits++;
    return rc;
}

/* Frees the job's call and gives large memory back (see the top
 * comment); the set its weights came from passes to the worker, which lets
 * it go once the answer is on its way (srv_worker_idle). */
static void job_release(srv_job *job, srv_worker *w) {
    api_call_free(job->call);
    job->call = NULL;
    store_set_release(w->set);
    w->set = job->set;
    job->set = NULL;
    attn_workspace_trim(w->ws, w->keep_workspace_bytes);
    attn_workspace_trim(w->outputs, w->keep_workspace_bytes);
    if (job->body_len > SRV_JOB_TRIM_BODY_BYTES) malloc_trim(0);
}

void srv_worker_idle(srv_worker *w) {
    store_set_release(w->set);
    w->set = NULL;
}

void srv_job_discard(srv_job *job) {
    api_call_free(job->call);
    job->call = NULL;
    store_set_release(job->set);
    job->set = NULL;
    api_answer_destroy(job->answer);
    job->answer = NULL;
}

/* Binds model m of the job's set to its call. */
static int job_bind(srv_job *job, const store_model *m, attn_error *err) {
    api_vocabulary vocab;
    api_model_ref ref = {m->name,   &m->weights, m->mask, srv_model_vocabulary(m, &vocab),
                         m->layers, m->n_layers};
    return api_call_bind(job->call, &ref, job->limits, err);
}

int srv_job_decode(srv_job *job, srv_worker *w) {
    struct timespec t0, t1;
    attn_error err = {0};
    const store_model *m = NULL;
    int rc = 0;
    size_t len;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job->set = w->models ? store_current(w->models) : NULL;
    /* A model the URL names is looked up first: not loaded, it is a 404
     * whatever the body holds. One the body names, once it is decoded. */
    if (job->model[0] &&
        !(m = srv_model_find(job->set, job->model, strlen(job->model), NULL, &err)))
        rc = -1;
    api_call_body body = {job->body, job->body_len, job->header_len,
                          job->model[0] ? job->model : NULL};
    if (rc == 0) rc = api_call_decode(job->call_kind, &body, job->limits, &job->call, &err);
    const char *name = rc == 0 && !m ? api_call_model(job->call, &len) : NULL;
    if (name && !(m = srv_model_find(job->set, name, len, api_call_model_path(job->call), &err)))
        rc = -1;
    if (rc == 0 && m) rc = job_bind(job, m, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->decode_ms = srv_ms_between(&t0, &t1);
    if (rc == 0) return 0;
    srv_job_discard(job);
    job_fail(job, &err);
    return -1;
}

double srv_job_cost(const srv_job *job) {
    return api_call_cost(job->call);
}

/* The answer of a computed call: one body, or one read from the outputs
 * as it is sent, which takes their block (`block`, set to NULL). */
static void job_encode(srv_job *job, attn_workspace **block, attn_error *err) {
    api_call *c = job->call;
    if (!*block) {
        job->response = api_call_encode(c, &job->response_len, &job->json_len, err);
    } else {
        job->answer = api_answer_create(c, *block, err);
        *block = NULL;
        if (job->answer) {
            job->response_len = api_answer_length(job->answer);
            job->json_len = api_answer_json_length(job->answer);
        }
    }
    job->content_type = api_call_content_type(c, job->json_len);
}

/* Computes and encodes a decoded job. */
static void job_call(srv_job *job, srv_worker *w) {
    struct timespec t1, t2, t3;
    attn_error err = {0};
    size_t failed = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    api_call *c = job->call;
    /* An answer of binary tensors is sent from its outputs, which live as
     * long as it does: in a block of their own, not the worker's, which its
     * next job reuses. */
    int streams = api_call_streams(c);
    attn_workspace *own = streams ? attn_workspace_create() : NULL;
    /* A failure to make the outputs keeps its own error (503, the outputs'
     * message); the engine's has its code and message, and the status is
     * HTTP's, so ours. */
    int rc = streams && !own
                 ? attn_error_set(&err, 503, "out_of_memory", "", "no memory for the outputs")
                 : api_call_alloc_outputs(c, streams ? own : w->outputs, &err);
    if (rc == 0) {
        rc = job_compute(job, w, &err, &failed);
        if (rc != 0) err.status = err.code == ATTN_ERR_NONFINITE ? 422 : 503;
        if (rc != 0 && err.code == ATTN_ERR_NONFINITE) api_call_name_failure(c, failed, &err);
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);
    job->compute_ms = srv_ms_between(&t1, &t2);
    if (rc != 0 && err.code == ATTN_ERR_STOPPED) job->dropped = 1;
    if (rc == 0) {
        job_encode(job, &own, &err);
        clock_gettime(CLOCK_MONOTONIC, &t3);
        job->encode_ms = srv_ms_between(&t2, &t3);
    }
    job_release(job, w);
    attn_workspace_destroy(own); /* not taken by an answer */
    if (job->dropped) return;
    if (job->response || job->answer)
        job->status = 200;
    else
        job_fail(job, &err);
}

void srv_job_run(srv_job *job, srv_worker *w) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job->queue_ms = srv_ms_between(&job->submitted, &t0);
    job->compute_ms = job->encode_ms = 0;
    job->dropped = 0;
    job->response = NULL;
    job->answer = NULL;
    job->response_len = 0;
    job->json_len = 0;
    job->content_type = NULL;
    if (job_client_gone(job)) {
        srv_job_discard(job);
        job->dropped = 1;
        return;
    }
    if (job->kind == SRV_JOB_MODEL_WEIGHTS) {
        job_model_weights(job, w);
        return;
    }
    if (!job->call && srv_job_decode(job, w) != 0) return;
    job_call(job, w);
}
