/*
 * job.h — the work a worker does for one request: a computation (a call,
 * api/call.h, in any of its wire formats: POST /v1/attention, its batch,
 * /v2's infer), or a model's weights for GET /v1/models/{name}?weights=true.
 *
 * The job knows nothing of sockets: it reads its inputs and leaves a status
 * and a complete response body. The HTTP layer owns the srv_job (inside its
 * per-request state), fills the inputs, queues it on the pool and reads the
 * result after the worker is done with it.
 *
 * A computation takes one road, whatever its wire format (job.c): the
 * store's current set → decode → one model lookup → bind → outputs from
 * the worker's block → compute → encode → one failure path → one release.
 * It is decoded (srv_job_decode) either by the worker that runs it or, for
 * a small body, on the polling thread first, which asks the decoded call's
 * cost (srv_job_cost) to choose where it runs: the body is decoded once
 * either way.
 *
 * A job whose client has gone (client_gone) is not run, or stops within
 * a task of its computation (one head's block of query rows), split or
 * not, and comes back `dropped`.
 *
 * Model sets. A job takes the store's current set when it is decoded (one
 * uncontended lock) and runs start to end on those weights, whatever a
 * SIGHUP reload does meanwhile. When it has run, the set passes to the
 * worker, which lets it go when told it is idle (srv_worker_idle), after
 * the answer is on its way. A worker waiting for work holds no set, so a
 * replaced one is destroyed (its files unmapped, converted weights freed)
 * as soon as the last job using it is answered.
 *
 * A large computation (at least split_flops) is split over the pool's idle
 * workers (split.h): its projection and ΔE by tiles, its heads by blocks
 * of query rows; a worker helping runs tasks on its own workspace. Smaller
 * ones, and any when no worker is idle, stay on the worker that took the
 * request.
 */
#ifndef SRV_JOB_H
#define SRV_JOB_H

#include "api/call.h"
#include "attention/attention.h"
#include "server/pool.h"
#include "store/store.h"
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef enum srv_job_kind {
    SRV_JOB_CALL,         /* body → the answer of a computation, in its wire format */
    SRV_JOB_MODEL_WEIGHTS /* model → the model with its weights or vocabulary */
} srv_job_kind;

typedef struct srv_job {
    /* inputs, not owned by the job */
    srv_job_kind kind;
    api_call_kind call_kind; /* SRV_JOB_CALL: the wire format */
    const char *body;        /* SRV_JOB_CALL */
    size_t body_len;
    long long header_len; /* SRV_JOB_CALL: the body's JSON part (/v2), -1: all of it */
    /* The model the URL names (a valid name, NUL-terminated), or "": the
     * body names it, or the call has inline weights. */
    char model[STORE_MODEL_NAME_MAX + 1];
    unsigned model_parts; /* SRV_JOB_MODEL_WEIGHTS: API_MODEL_WEIGHTS, API_MODEL_VOCABULARY */
    const api_limits *limits;
    struct timespec submitted; /* CLOCK_MONOTONIC, when queued */
    /* The client, asked before the job runs and then between the tasks
     * of its computation (at most every 2 ms, from any thread running
     * one): client_gone(client) returns 1 once it has left, and the job
     * then stops (dropped). NULL: never asked. */
    int (*client_gone)(void *client);
    void *client;

    /* set by srv_job_decode, owned by the job until it has run */
    api_call *call; /* decoded and bound, its outputs not yet made */
    store_set *set; /* the set its weights come from, one reference */

    /* results, written by srv_job_run */
    int status;     /* HTTP status of the answer */
    char *response; /* malloc'd body; the reader frees it */
    /* Or, for an answer of binary tensors (/v2), the answer read from the
     * outputs as it is sent (api/call.h): the reader takes it, and
     * srv_job_discard destroys one never sent. response_len is its length. */
    api_answer *answer;
    size_t response_len;
    const char *content_type; /* static; NULL: application/json */
    size_t json_len;          /* the JSON part when binary data follows (/v2), else 0 */
    double queue_ms, decode_ms, compute_ms, encode_ms;
    int dropped; /* 1: its client had gone, so it was not run or not finished (no response) */
} srv_job;

/* After a body larger than this, the worker returns freed heap pages to the
 * system (malloc_trim); a workspace larger than the other is freed after
 * its job. */
#define SRV_JOB_TRIM_BODY_BYTES      ((size_t)1 << 20)
#define SRV_JOB_KEEP_WORKSPACE_BYTES ((size_t)64 << 20)

/* A computation is offered to idle workers when its work (attn_input_flops:
 * the key blocks it really computes) reaches this: ~1 ms on one core, against tens of µs to
 * hand helpers the phases' tasks (three; four with RoPE's table). GPT-2's shape reaches it
 * from n = 21 (below one block of 128 query rows, causal skips nothing), the teaching
 * sizes never do. bench/server_pool.c applies the same rule. */
#define SRV_JOB_SPLIT_FLOPS 1e8

/* One worker's own state. */
typedef struct srv_worker {
    attn_workspace *ws;
    attn_workspace *outputs;     /* the output buffers' block, kept between jobs */
    size_t keep_workspace_bytes; /* trimmed above this after a job (tests lower it) */
    pool *pool;                  /* the worker's pool, for helpers; NULL: never split */
    double split_flops;          /* SRV_JOB_SPLIT_FLOPS (tests lower it) */
    uint64_t splits;             /* computations split so far (tests read it) */
    store *models;               /* the server's store, or NULL for none */
    store_set *set;              /* held while a job runs: the set it computes with, or NULL */
} srv_worker;

/* A worker over `models` (may be NULL) in `workers` (may be NULL: it never
 * asks for help); NULL when out of memory. */
srv_worker *srv_worker_create(store *models, pool *workers);
void srv_worker_destroy(srv_worker *w);

/*
 * Decodes a computation's body and binds a named model from the store's
 * current set (404 unknown_model when absent), on any thread: `w` lends
 * its store. Returns 0 with job->call and job->set, or -1 with the job's
 * answer (status and error body, in the call's wire format) already
 * written.
 */
int srv_job_decode(srv_job *job, srv_worker *w);

/* The work of a decoded job's computation, in floating-point operations. */
double srv_job_cost(const srv_job *job);

/*
 * Runs the job on the worker: a computation is decoded unless
 * srv_job_decode did, computed with the worker's workspace and encoded.
 * Always leaves a status and a body (or an answer) — the wire format's
 * error body on failure — unless it is dropped. `response` and `answer` are
 * NULL only when even the error body could not be allocated (status is
 * then 503).
 */
void srv_job_run(srv_job *job, srv_worker *w);

/* Frees what a job that will not run holds (its decoded call and set),
 * and an answer it holds that was never sent. */
void srv_job_discard(srv_job *job);

/* The worker's last job is answered: it lets its model set go (which may
 * destroy a set a reload replaced, hence after the answer, not in it). */
void srv_worker_idle(srv_worker *w);

/* Pool worker context hooks (pool.h): `ctx` is the server's store (or NULL);
 * each worker makes its srv_worker on start and destroys it on stop. */
void *srv_job_worker_init(pool *p, void *ctx);
void srv_job_worker_fini(void *worker_ctx, void *ctx);

/* Milliseconds from a to b (CLOCK_MONOTONIC). */
double srv_ms_between(const struct timespec *a, const struct timespec *b);

#endif
