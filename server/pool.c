/*
 * pool.c — worker threads, one mutex, one condition variable, one queue.
 *
 * The shape of redis's bio.c: the submitter allocates a job node and links
 * it at the tail of a FIFO under the mutex, then signals the condition
 * variable; a worker takes the head under the mutex, unlocks, runs the job
 * and frees the node. The lock is never held while a job runs, so a slow
 * job blocks neither submitters nor the other workers.
 *
 * The queue is bounded: a submit that finds max_queued jobs waiting is
 * refused at once (the caller answers 503), rather than letting latency and
 * memory grow without limit. Jobs being run do not count against the bound.
 *
 * Helpers (pool_try_help) have a list of their own. One is accepted only
 * when the request queue is empty and a worker is idle that no earlier
 * helper was promised to (busy + helpers waiting < workers), so that a
 * helper takes a free core and never the place of a request. A worker that
 * wakes takes a queued request first, then a helper.
 *
 * pool_evict unlinks queued jobs a predicate picks (a request whose client
 * has gone) under the mutex and hands them back after it, so that their
 * places go to new requests.
 *
 * An idle worker watches for work for a moment (pool_watch) before it
 * sleeps, so that the next phase of a split computation finds it awake.
 *
 * Shutdown: pool_destroy sets `stopping` and broadcasts. Workers keep taking
 * jobs until the queue and the helper list are empty and only then leave,
 * so every accepted job runs exactly once. Each worker frees its own
 * context on its own thread.
 */
#include "server/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* How long an idle worker watches for new work before it sleeps. */
#define POOL_SPIN_NS 200000

typedef struct pool_job {
    pool_fn fn;
    void *arg;
    struct pool_job *next;
} pool_job;

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a job was queued, or stopping was set */
    pool_job *head, *tail;
    pool_job *helpers; /* accepted by pool_try_help, not started; LIFO */
    size_t queued, busy, max_queued, helping;
    int stopping;
    atomic_size_t pending; /* queued + helping, readable without the mutex */

    pool_init_fn init;
    pool_fini_fn fini;
    void *ctx;

    pthread_t *threads;
    size_t n_threads; /* started */

    /* start-up handshake: each worker reports whether init succeeded */
    pthread_cond_t started_cv;
    size_t n_started, n_failed;
};

/* Watches `pending` for up to POOL_SPIN_NS before the worker goes to sleep
 * on the condition variable. The phases of one split computation follow
 * each other within microseconds, and a thread woken from the condition
 * variable may wait for its core far longer: on a VM, the host deschedules
 * an idle vCPU and takes milliseconds to run it again, as long as a whole
 * phase of a GPT-2 request of 128 tokens. */
static void pool_watch(pool *p) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; !atomic_load_explicit(&p->pending, memory_order_relaxed); k++) {
        if (k % 64) continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > POOL_SPIN_NS) return;
    }
}

static void *pool_worker(void *arg) {
    pool *p = arg;
    void *wctx = p->init ? p->init(p, p->ctx) : NULL;
    int ok = !p->init || wctx != NULL;

    pthread_mutex_lock(&p->mu);
    p->n_started++;
    if (!ok) p->n_failed++;
    pthread_cond_broadcast(&p->started_cv);
    pthread_mutex_unlock(&p->mu);
    if (!ok) return NULL;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (!p->head && !p->helpers && !p->stopping) {
            pthread_mutex_unlock(&p->mu);
            pool_watch(p);
            pthread_mutex_lock(&p->mu);
        }
        while (!p->head && !p->helpers && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        pool_job *job = p->head;
        if (job) {
            p->head = job->next;
            if (!p->head) p->tail = NULL;
            p->queued--;
            atomic_fetch_sub(&p->pending, 1);
        } else if ((job = p->helpers) != NULL) {
            p->helpers = job->next;
            p->helping--;
            atomic_fetch_sub(&p->pending, 1);
        } else {
            break; /* stopping and drained */
        }
        p->busy++;
        pthread_mutex_unlock(&p->mu);

        job->fn(job->arg, wctx);
        free(job);

        pthread_mutex_lock(&p->mu);
        p->busy--;
    }
    pthread_mutex_unlock(&p->mu);

    if (p->fini) p->fini(wctx, p->ctx);
    return NULL;
}

/* Stops and joins the started threads, frees everything. */
static void pool_teardown(pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    /* Nothing can be queued here: submit refuses once stopping is set and
     * workers drain the queue before leaving. */
    pthread_cond_destroy(&p->started_cv);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

pool *pool_create(size_t n_workers, size_t max_queued, pool_init_fn init, pool_fini_fn fini,
                  void *ctx) {
    if (n_workers == 0 || max_queued == 0) return NULL;
    pool *p = calloc(1, sizeof *p);
    if (p) atomic_init(&p->pending, 0);
    if (!p) return NULL;
    p->threads = calloc(n_workers, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->started_cv, NULL);
    p->max_queued = max_queued;
    p->init = init;
    p->fini = fini;
    p->ctx = ctx;

    for (size_t i = 0; i < n_workers; i++) {
        if (pthread_create(&p->threads[i], NULL, pool_worker, p) != 0) break;
        p->n_threads++;
    }

    pthread_mutex_lock(&p->mu);
    while (p->n_started < p->n_threads)
        pthread_cond_wait(&p->started_cv, &p->mu);
    int failed = p->n_threads < n_workers || p->n_failed > 0;
    pthread_mutex_unlock(&p->mu);

    if (failed) {
        pool_teardown(p);
        return NULL;
    }
    return p;
}

int pool_submit(pool *p, pool_fn fn, void *arg) {
    pool_job *job = malloc(sizeof *job);
    if (!job) return POOL_NOMEM;
    job->fn = fn;
    job->arg = arg;
    job->next = NULL;

    pthread_mutex_lock(&p->mu);
    int rc = p->stopping ? POOL_STOPPED : p->queued >= p->max_queued ? POOL_FULL : POOL_OK;
    if (rc == POOL_OK) {
        if (p->tail)
            p->tail->next = job;
        else
            p->head = job;
        p->tail = job;
        p->queued++;
        atomic_fetch_add(&p->pending, 1);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);

    if (rc != POOL_OK) free(job);
    return rc;
}

int pool_try_help(pool *p, pool_fn fn, void *arg) {
    pool_job *job = malloc(sizeof *job);
    if (!job) return POOL_NOMEM;
    job->fn = fn;
    job->arg = arg;

    pthread_mutex_lock(&p->mu);
    int rc = p->stopping                                             ? POOL_STOPPED
             : p->queued == 0 && p->busy + p->helping < p->n_threads ? POOL_OK
                                                                     : POOL_FULL;
    if (rc == POOL_OK) {
        job->next = p->helpers;
        p->helpers = job;
        p->helping++;
        atomic_fetch_add(&p->pending, 1);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);

    if (rc != POOL_OK) free(job);
    return rc;
}

int pool_has_waiting(pool *p) {
    return atomic_load_explicit(&p->pending, memory_order_relaxed) != 0;
}

size_t pool_evict(pool *p, int (*gone)(void *arg), void (*drop)(void *arg)) {
    pool_job *evicted = NULL, **last = &evicted;
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    pool_job *prev = NULL;
    for (pool_job *job = p->head; job;) {
        pool_job *next = job->next;
        if (gone(job->arg)) {
            if (prev)
                prev->next = next;
            else
                p->head = next;
            if (p->tail == job) p->tail = prev;
            p->queued--;
            atomic_fetch_sub(&p->pending, 1);
            job->next = NULL;
            *last = job;
            last = &job->next;
            n++;
        } else {
            prev = job;
        }
        job = next;
    }
    pthread_mutex_unlock(&p->mu);
    while (evicted) {
        pool_job *next = evicted->next;
        drop(evicted->arg);
        free(evicted);
        evicted = next;
    }
    return n;
}

void pool_stats(pool *p, size_t *queued, size_t *busy) {
    pthread_mutex_lock(&p->mu);
    if (queued) *queued = p->queued;
    if (busy) *busy = p->busy;
    pthread_mutex_unlock(&p->mu);
}

void pool_destroy(pool *p) {
    if (p) pool_teardown(p);
}
