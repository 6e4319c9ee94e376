/*
 * server_pool.h — the engine run as the server runs it: on a worker of a
 * pool (server/pool.c), each worker with its own workspace, a large
 * computation split over the idle workers by server/split.c's runner.
 *
 * The rule for splitting is the server's (server/job.c): attn_compute_with
 * and the pool runner when attn_input_flops (the key blocks really
 * computed) reaches SRV_JOB_SPLIT_FLOPS,
 * attn_compute otherwise. OpenBLAS's thread count is process-global and
 * the caller's to set, between calls only.
 */
#ifndef BENCH_SERVER_POOL_H
#define BENCH_SERVER_POOL_H

#include <stddef.h>

#include "attention/attention.h"

typedef struct server_pool server_pool;

/* How a computation may use the pool: never split (one worker does all),
 * or as the server does. */
typedef enum server_split { SPLIT_NEVER, SPLIT_AS_SERVER } server_split;

/* A pool of `workers` threads; exits the process when it cannot start one. */
server_pool *server_pool_create(size_t workers);
void server_pool_destroy(server_pool *sp);

/*
 * Latency: `calls` computations of `in` into `out`, one after the other, as
 * one job on one worker while the others are idle. Returns seconds per
 * call, timed inside the job (the computation alone, as the server's
 * compute_ms); adds the helpers the pool accepted to *helpers (may be NULL).
 * Exits the process when a computation fails.
 */
double server_pool_time(server_pool *sp, const attn_input *in, const attn_output *out,
                        server_split split, int calls, size_t *helpers);

/* Latency of a batch: attn_compute_batch of `count` inputs into outs[0 …
 * count), as one job, split over the idle workers when attn_batch_flops
 * reaches the server's threshold (SPLIT_AS_SERVER). As server_pool_time
 * otherwise. */
double server_pool_time_batch(server_pool *sp, const attn_input *ins, const attn_output *outs,
                              size_t count, server_split split, int calls, size_t *helpers);

/* A stack's call, as attn_compute_stack takes it (attention.h). */
typedef struct server_stack {
    const attn_output *const *layer_outs; /* or NULL */
    const attn_stack_output *outs;        /* or NULL */
    const attn_input *ins;
    size_t count;
    const attn_stack *stack;
} server_stack;

/* Latency of stacks: `count` calls of attn_compute_stack, stacks[0 …
 * count) one after the other, as one job; each split over the idle workers
 * when its attn_stack_flops reaches the server's threshold
 * (SPLIT_AS_SERVER), as server/job.c does. Returns the seconds of all
 * `count` calls (not per call); otherwise as server_pool_time. */
double server_pool_time_stacks(server_pool *sp, const server_stack *stacks, size_t count,
                               server_split split, size_t *helpers);

/*
 * Throughput: `requests` computations of `in` queued at once, one job each;
 * the worker with index w writes into outs[w] (one output set per worker,
 * as each request has its own). Returns requests per second from the first
 * submit to the last finish, and the mean seconds a request spent
 * computing in *compute.
 */
double server_pool_stream(server_pool *sp, const attn_input *in, const attn_output *outs,
                          int requests, server_split split, double *compute);

#endif
