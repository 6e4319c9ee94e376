/*
 * server_pool.c — pool jobs that time the engine in the server's threading.
 *
 * Each worker's context starts with a srv_worker (server/job.h), because
 * split.c's helpers read their workspace from it; the index after it picks
 * the worker's output buffers in a stream. The bench links pool.c and
 * split.c only (no api, store or job objects), so the split rule of job.c
 * is repeated here: attn_input_flops against the same SRV_JOB_SPLIT_FLOPS.
 *
 * Completion: the main thread waits on a condition variable that the job
 * (latency) or the last request of a stream signals, so a worker that has
 * finished is idle again — ready to help — when the next sample starts.
 */
#include "bench/server_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/problem.h"
#include "server/job.h"
#include "server/pool.h"
#include "server/split.h"

enum { STREAM_QUEUE = 4096 }; /* jobs one stream may queue at once */

struct server_pool {
    pool *pool;
    size_t workers;
    atomic_size_t next_index; /* handed to workers as they start */
};

typedef struct bench_worker {
    srv_worker sw; /* first: split.c reads a worker's context as a srv_worker */
    size_t index;
} bench_worker;

static void *worker_init(pool *p, void *ctx) {
    server_pool *sp = ctx;
    bench_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->sw.ws = attn_workspace_create();
    if (!w->sw.ws) {
        free(w);
        return NULL;
    }
    w->sw.pool = p;
    w->sw.split_flops = SRV_JOB_SPLIT_FLOPS;
    w->index = atomic_fetch_add(&sp->next_index, 1);
    return w;
}

static void worker_fini(void *wctx, void *ctx) {
    (void)ctx;
    bench_worker *w = wctx;
    attn_workspace_destroy(w->sw.ws);
    free(w);
}

server_pool *server_pool_create(size_t workers) {
    server_pool *sp = bench_alloc(sizeof *sp);
    sp->workers = workers;
    atomic_init(&sp->next_index, 0);
    sp->pool = pool_create(workers, STREAM_QUEUE, worker_init, worker_fini, sp);
    if (!sp->pool) {
        fprintf(stderr, "bench: could not start a pool of %zu workers\n", workers);
        exit(1);
    }
    return sp;
}

void server_pool_destroy(server_pool *sp) {
    pool_destroy(sp->pool);
    free(sp);
}

/* job.c's job_compute: split when large enough and allowed. */
static void compute(bench_worker *w, const attn_output *out, const attn_input *in,
                    server_split split, size_t *helpers) {
    double flops = attn_input_flops(in);
    attn_error err;
    int rc;
    if (split == SPLIT_NEVER || flops < w->sw.split_flops) {
        rc = attn_compute(out, w->sw.ws, in, &err);
    } else {
        srv_split s = {.pool = w->sw.pool, .ws = w->sw.ws};
        attn_runner runner = srv_split_runner(&s);
        rc = attn_compute_with(out, w->sw.ws, in, &runner, &err);
        srv_split_end(&s);
        *helpers += s.helpers;
    }
    if (rc) {
        fprintf(stderr, "bench: attn_compute failed (%s: %s)\n", err.code, err.message);
        exit(1);
    }
}

/* As compute, for a batch: split when the batch's work reaches the
 * server's threshold. */
static void compute_batch(bench_worker *w, const attn_output *outs, const attn_input *ins,
                          size_t count, server_split split, size_t *helpers) {
    attn_error err;
    size_t failed;
    int rc;
    if (split == SPLIT_NEVER || attn_batch_flops(ins, count) < w->sw.split_flops) {
        rc = attn_compute_batch(outs, w->sw.ws, ins, count, NULL, &err, &failed);
    } else {
        srv_split s = {.pool = w->sw.pool, .ws = w->sw.ws};
        attn_runner runner = srv_split_runner(&s);
        rc = attn_compute_batch(outs, w->sw.ws, ins, count, &runner, &err, &failed);
        srv_split_end(&s);
        *helpers += s.helpers;
    }
    if (rc) {
        fprintf(stderr, "bench: attn_compute_batch failed (%s: %s)\n", err.code, err.message);
        exit(1);
    }
}

/* As compute, for a stack of layers (job.c through api_call_compute):
 * split when the stack's work, all layers, reaches the server's threshold. */
static void compute_stack(bench_worker *w, const server_stack *sk, server_split split,
                          size_t *helpers) {
    attn_error err;
    int rc;
    if (split == SPLIT_NEVER ||
        attn_stack_flops(sk->ins, sk->count, sk->stack) < w->sw.split_flops) {
        rc = attn_compute_stack(sk->layer_outs, sk->outs, w->sw.ws, sk->ins, sk->count, sk->stack,
                                NULL, &err, NULL, NULL);
    } else {
        srv_split s = {.pool = w->sw.pool, .ws = w->sw.ws};
        attn_runner runner = srv_split_runner(&s);
        rc = attn_compute_stack(sk->layer_outs, sk->outs, w->sw.ws, sk->ins, sk->count, sk->stack,
                                &runner, &err, NULL, NULL);
        srv_split_end(&s);
        *helpers += s.helpers;
    }
    if (rc) {
        fprintf(stderr, "bench: attn_compute_stack failed (%s: %s)\n", err.code, err.message);
        exit(1);
    }
}

/* ---- latency: one job, the other workers idle ----------------------------- */

typedef struct latency_job {
    const attn_input *in;
    const attn_output *out;
    size_t count;               /* a batch of count inputs, or 0: one computation of in */
    const server_stack *stacks; /* nstacks stack calls in a row, or NULL */
    size_t nstacks;
    server_split split;
    int calls;
    double seconds;
    size_t helpers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} latency_job;

static void latency_run(void *arg, void *wctx) {
    latency_job *j = arg;
    double t0 = bench_now();
    for (int k = 0; k < j->calls; k++)
        if (j->stacks)
            for (size_t c = 0; c < j->nstacks; c++)
                compute_stack(wctx, &j->stacks[c], j->split, &j->helpers);
        else if (j->count)
            compute_batch(wctx, j->out, j->in, j->count, j->split, &j->helpers);
        else
            compute(wctx, j->out, j->in, j->split, &j->helpers);
    j->seconds = (bench_now() - t0) / j->calls;
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static double latency(server_pool *sp, latency_job j, size_t *helpers) {
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    if (pool_submit(sp->pool, latency_run, &j) != POOL_OK) {
        fprintf(stderr, "bench: pool_submit failed\n");
        exit(1);
    }
    pthread_mutex_lock(&j.mu);
    while (!j.done)
        pthread_cond_wait(&j.cv, &j.mu);
    pthread_mutex_unlock(&j.mu);
    pthread_cond_destroy(&j.cv);
    pthread_mutex_destroy(&j.mu);
    if (helpers) *helpers += j.helpers;
    return j.seconds;
}

double server_pool_time(server_pool *sp, const attn_input *in, const attn_output *out,
                        server_split split, int calls, size_t *helpers) {
    return latency(sp, (latency_job){.in = in, .out = out, .split = split, .calls = calls},
                   helpers);
}

double server_pool_time_batch(server_pool *sp, const attn_input *ins, const attn_output *outs,
                              size_t count, server_split split, int calls, size_t *helpers) {
    return latency(
        sp, (latency_job){.in = ins, .out = outs, .count = count, .split = split, .calls = calls},
        helpers);
}

double server_pool_time_stacks(server_pool *sp, const server_stack *stacks, size_t count,
                               server_split split, size_t *helpers) {
    return latency(
        sp, (latency_job){.stacks = stacks, .nstacks = count, .split = split, .calls = 1}, helpers);
}

/* ---- throughput: a queue of requests ---------------------------------------- */

typedef struct stream {
    const attn_input *in;
    const attn_output *outs;
    server_split split;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* left reached 0 */
    int left;          /* under mu: requests not finished */
    double busy, last; /* under mu: seconds computing, latest finish */
} stream;

static void stream_run(void *arg, void *wctx) {
    stream *st = arg;
    bench_worker *w = wctx;
    size_t helpers = 0;
    double t0 = bench_now();
    compute(w, &st->outs[w->index], st->in, st->split, &helpers);
    double t1 = bench_now();
    pthread_mutex_lock(&st->mu);
    st->busy += t1 - t0;
    if (t1 > st->last) st->last = t1;
    if (--st->left == 0) pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

double server_pool_stream(server_pool *sp, const attn_input *in, const attn_output *outs,
                          int requests, server_split split, double *compute_seconds) {
    stream st = {.in = in, .outs = outs, .split = split, .left = requests};
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    double t0 = bench_now();
    for (int r = 0; r < requests; r++)
        if (pool_submit(sp->pool, stream_run, &st) != POOL_OK) {
            fprintf(stderr, "bench: pool_submit failed (more than %d requests?)\n", STREAM_QUEUE);
            exit(1);
        }
    pthread_mutex_lock(&st.mu);
    while (st.left > 0)
        pthread_cond_wait(&st.cv, &st.mu);
    pthread_mutex_unlock(&st.mu);
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
    *compute_seconds = st.busy / requests;
    return requests / (st.last - t0);
}
