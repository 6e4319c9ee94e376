/*
 * pool.h — a fixed set of worker threads fed from one bounded queue.
 *
 * Each worker owns a context for its whole life (the server gives each an
 * attention workspace), made by `init` on the worker's own thread and freed
 * by `fini` when it stops. A job is a function and an argument; the pool
 * never looks at the argument and never frees it.
 *
 * Besides queued jobs, a job may ask for help: pool_try_help hands a helper
 * job to a worker that is idle right now, or refuses at once. Helpers
 * never wait in the queue, so they never delay a request.
 */
#ifndef SRV_POOL_H
#define SRV_POOL_H

#include <stddef.h>

typedef struct pool pool;

/* Runs on a worker thread; `worker_ctx` is that worker's context. */
typedef void (*pool_fn)(void *arg, void *worker_ctx);
/* Makes a worker's context, on the worker's thread; `p` is the pool the
 * worker belongs to (its jobs may call pool_try_help on it). NULL means
 * failure (pool_create then fails). */
typedef void *(*pool_init_fn)(pool *p, void *ctx);
typedef void (*pool_fini_fn)(void *worker_ctx, void *ctx);

/* Results of pool_submit. */
enum { POOL_OK = 0, POOL_FULL = -1, POOL_STOPPED = -2, POOL_NOMEM = -3 };

/*
 * Starts n_workers threads; at most max_queued jobs may wait for one.
 * init and fini may be NULL (the context is then NULL). Returns NULL when a
 * thread or a context could not be made; nothing is left running then.
 * Free with pool_destroy.
 */
pool *pool_create(size_t n_workers, size_t max_queued, pool_init_fn init, pool_fini_fn fini,
                  void *ctx);

/*
 * Queues fn(arg) and returns POOL_OK, or refuses at once: POOL_FULL when
 * max_queued jobs already wait, POOL_STOPPED after pool_destroy began,
 * POOL_NOMEM. When refused, fn will never run and arg is the caller's.
 */
int pool_submit(pool *p, pool_fn fn, void *arg);

/*
 * Hands fn(arg) to a worker that is idle now, and returns POOL_OK; or
 * refuses at once: POOL_FULL when no worker is idle (every one busy, or a
 * job queued or a helper already promised to each idle one), POOL_STOPPED
 * after pool_destroy began, POOL_NOMEM. When refused, fn will never run.
 * A helper job, once accepted, runs exactly once, before any queued job
 * that came after it only if a worker was idle for it; pool_destroy runs
 * the helpers accepted before it, like queued jobs.
 */
int pool_try_help(pool *p, pool_fn fn, void *arg);

/*
 * Takes out of the queue every job for which gone(arg) returns 1 and calls
 * drop(arg) for each, in queue order, after the queue's lock is let go;
 * returns how many. For a full queue whose jobs' clients may have left:
 * their places go to new jobs. `gone` runs under the queue's lock, so it
 * must be quick and must not call the pool.
 */
size_t pool_evict(pool *p, int (*gone)(void *arg), void (*drop)(void *arg));

/* 1 when a queued job or an accepted helper waits for a worker right now,
 * else 0; read without the lock, so a hint (for a helper deciding whether
 * to give its worker back). */
int pool_has_waiting(pool *p);

/* Jobs waiting and workers running a job (a helper counts), right now. */
void pool_stats(pool *p, size_t *queued, size_t *busy);

/* Refuses new jobs, runs every job already queued, joins the workers, frees
 * their contexts and the pool. */
void pool_destroy(pool *p);

#endif
