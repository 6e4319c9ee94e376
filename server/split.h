/*
 * split.h — one computation spread over the pool's idle workers: an
 * attn_runner (attention.h) backed by pool_try_help.
 *
 * The worker running a large request calls attn_compute_with with this
 * runner; the engine hands it each phase's tasks (tiles of a GEMM, or
 * blocks of query rows of the heads). The runner asks the pool for helpers
 * only among the workers idle right now, then takes tasks itself until
 * none are left, and returns once every task has returned. A helper stays
 * with the computation from phase to phase while it has work and the pool
 * has no other (split.c).
 * With no idle worker it runs every task itself: a busy server computes
 * each request on one worker, as before.
 */
#ifndef SRV_SPLIT_H
#define SRV_SPLIT_H

#include "attention/attention.h"
#include "server/pool.h"
#include <stddef.h>

typedef struct split_session split_session;

/* One computation's runner context, the caller's (on its stack, say),
 * zeroed but for the fields below it sets; srv_split_end after its last run. */
typedef struct srv_split {
    pool *pool;         /* where helpers come from */
    attn_workspace *ws; /* the calling thread's workspace */
    size_t helpers;     /* out: helpers the pool accepted, summed over runs */
    /* May be NULL; else the runner's stop (attention.h): asked before
     * each phase and each task, on any thread; nonzero ends the
     * computation. */
    int (*stop)(void *stop_ctx);
    void *stop_ctx;
    /* split.c's: the helpers' shared state, from the first run on, and
     * whether the last run had a helper */
    split_session *session;
    int helped;
} srv_split;

/* The attn_runner over `s`, which must outlive the runner's use; s->ws
 * must not be NULL. Helpers run tasks on pool workers whose context is a
 * srv_worker (job.h), on that worker's workspace; a worker with a NULL
 * context takes no task (the caller does them): a task never gets a NULL
 * workspace. */
attn_runner srv_split_runner(srv_split *s);

/* Ends the computation: helpers still attached to it leave, and what its
 * runs shared is let go once they have. Once, after the last run; `s` may
 * then run again as a new computation. */
void srv_split_end(srv_split *s);

#endif
