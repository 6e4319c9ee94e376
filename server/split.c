/*
 * split.c — the tasks of one computation over the idle workers.
 *
 * One run: the calling thread allocates a shared state (the task, its
 * argument, the count, an atomic next-task index and a done counter) and
 * offers a helper job to the pool for each task beyond the first, until the
 * pool says no worker is idle (pool_try_help never queues, so a helper
 * never takes a request's place). Then it claims tasks itself by
 * atomic_fetch_add on `next` until the index passes the count, and waits on
 * the condition variable until `done` (tasks returned, counted under the
 * mutex) reaches the count. A helper does the same claiming on its own
 * worker's workspace, adds what it ran to `done` and signals when it made
 * the count; a helper that starts after every task was claimed, or whose
 * worker has no workspace, adds nothing and leaves. Every task therefore
 * runs on a workspace, never NULL.
 *
 * Lifetime: the state is reference-counted under its mutex, one reference
 * for the caller and one for each accepted helper; whoever drops the last
 * frees it. A helper may start long after the caller returned (its worker
 * took a request first): it then finds `next` past the count and never
 * touches the task or its argument, which lived on the caller's side.
 *
 * Waiting: the caller, its claims done, watches `finished` (done, as
 * stored under the mutex) for up to SPLIT_SPIN_NS before it sleeps on the
 * condition variable: a phase's last task usually ends within microseconds
 * of the caller's, and a thread woken from the condition variable may wait
 * for its core far longer (on a VM, 0.1 ms and more; bench/README.md (a)),
 * as the pool's idle workers watch for work (server/pool.c).
 *
 * Memory order: a task's writes happen before its `done` update under the
 * mutex, which the caller reads under the same mutex before it returns
 * (`finished` only tells it when to look).
 */
#include "server/split.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "server/job.h"

/* How long the caller watches for the last task to end before it sleeps. */
#define SPLIT_SPIN_NS 200000

typedef struct split_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* done reached count */
    size_t refs;            /* under mu: the caller and each accepted helper */
    size_t done;            /* under mu: tasks that returned */
    atomic_size_t finished; /* done, stored under mu: read without it while watching */
    atomic_size_t next;     /* the next task to claim */
    size_t count;
    attn_task_fn task; /* with arg: valid while a task is unclaimed */
    void *arg;
} split_state;

/* Drops one reference, with the mutex held; unlocks it; frees on the last. */
static void split_drop_unlock(split_state *st) {
    int last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last) return;
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Runs tasks until none is left to claim; returns how many it ran. */
static size_t split_claim(split_state *st, attn_workspace *ws) {
    size_t ran = 0;
    for (;;) {
        size_t t = atomic_fetch_add(&st->next, 1);
        if (t >= st->count) return ran;
        st->task(st->arg, t, ws);
        ran++;
    }
}

/* pool_fn: a helper, on an idle worker. A task needs a workspace of the
 * thread that runs it (attn_runner), so a worker without one (a pool with
 * no contexts) claims nothing: the caller runs what is left. */
static void split_help(void *arg, void *worker_ctx) {
    split_state *st = arg;
    srv_worker *w = worker_ctx;
    size_t ran = w && w->ws ? split_claim(st, w->ws) : 0;
    pthread_mutex_lock(&st->mu);
    st->done += ran;
    atomic_store_explicit(&st->finished, st->done, memory_order_relaxed);
    if (ran && st->done == st->count) pthread_cond_signal(&st->cv);
    split_drop_unlock(st);
}

/* Watches st->finished until it reaches the count, for up to SPLIT_SPIN_NS. */
static void split_watch(split_state *st) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; atomic_load_explicit(&st->finished, memory_order_relaxed) < st->count; k++) {
        if (k % 64) continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > SPLIT_SPIN_NS) return;
    }
}

static void split_run(void *ctx, attn_task_fn task, void *arg, size_t count) {
    srv_split *s = ctx;
    split_state *st = malloc(sizeof *st);
    if (!st) { /* no memory for sharing: the caller alone */
        for (size_t t = 0; t < count; t++)
            task(arg, t, s->ws);
        return;
    }
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->refs = 1;
    st->done = 0;
    atomic_init(&st->finished, 0);
    atomic_init(&st->next, 0);
    st->count = count;
    st->task = task;
    st->arg = arg;

    for (size_t k = 1; k < count; k++) {
        pthread_mutex_lock(&st->mu); /* before the offer: the helper may finish at once */
        st->refs++;
        pthread_mutex_unlock(&st->mu);
        if (pool_try_help(s->pool, split_help, st) != POOL_OK) {
            pthread_mutex_lock(&st->mu);
            st->refs--; /* never the last: the caller's is held */
            pthread_mutex_unlock(&st->mu);
            break;
        }
        s->helpers++;
    }

    size_t ran = split_claim(st, s->ws);
    pthread_mutex_lock(&st->mu);
    st->done += ran;
    atomic_store_explicit(&st->finished, st->done, memory_order_relaxed);
    if (st->done < st->count) { /* a helper's task is still running: watch, then sleep */
        pthread_mutex_unlock(&st->mu);
        split_watch(st);
        pthread_mutex_lock(&st->mu);
    }
    while (st->done < st->count)
        pthread_cond_wait(&st->cv, &st->mu);
    split_drop_unlock(st);
}

static int split_stop(void *ctx) {
    const srv_split *s = ctx;
    return s->stop(s->stop_ctx);
}

attn_runner srv_split_runner(srv_split *s) {
    return (attn_runner){.run = split_run, .ctx = s, .stop = s->stop ? split_stop : NULL};
}
