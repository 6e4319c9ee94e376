/*
 * job.h — one POST /v1/attention computation, as a worker runs it.
 *
 * The job knows nothing of sockets: it reads a complete request body and
 * leaves a status and a complete response body. The HTTP layer owns the
 * srv_job (inside its per-request state), fills the inputs, queues it on
 * the pool and reads the result after the worker is done with it.
 */
#ifndef SRV_JOB_H
#define SRV_JOB_H

#include "api/request.h"
#include "attention/attention.h"
#include <stddef.h>
#include <time.h>

typedef struct srv_job {
    /* inputs, not owned by the job */
    const char *body;
    size_t body_len;
    const api_limits *limits;
    struct timespec submitted; /* CLOCK_MONOTONIC, when queued */

    /* results, written by srv_job_run */
    int status;     /* HTTP status of the answer */
    char *response; /* malloc'd body (JSON); the reader frees it */
    size_t response_len;
    double queue_ms, decode_ms, compute_ms, encode_ms;
} srv_job;

/* After a body larger than this, the worker returns freed heap pages to the
 * system (malloc_trim); a workspace larger than the other is freed after
 * its job. */
#define SRV_JOB_TRIM_BODY_BYTES ((size_t)1 << 20)
#define SRV_JOB_KEEP_WORKSPACE_BYTES ((size_t)64 << 20)

/*
 * Decodes the body, looks up the model (there is no model store yet: a
 * named model is 404 unknown_model at "/model"), computes with the
 * worker's workspace and encodes the answer. Always leaves a status and a
 * JSON body — the contract's error body on failure. `response` is NULL only
 * when even the error body could not be allocated (status is then 503).
 */
void srv_job_run(srv_job *job, attn_workspace *ws);

/* Pool worker context hooks (pool.h): each worker makes its own workspace
 * on start and destroys it on stop. `ctx` is unused. */
void *srv_job_worker_init(void *ctx);
void srv_job_worker_fini(void *worker_ctx, void *ctx);

/* Milliseconds from a to b (CLOCK_MONOTONIC). */
double srv_ms_between(const struct timespec *a, const struct timespec *b);

#endif
