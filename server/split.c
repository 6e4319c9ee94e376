/*
 * split.c — the tasks of one computation over the idle workers.
 *
 * A computation (one srv_split, from its first run to srv_split_end) has a
 * session; each run of tasks (one phase of the engine) has a run state.
 *
 * One run: the calling thread allocates the run's state (the task, its
 * argument, the count, an atomic next-task index and a done counter) and
 * publishes it as the session's current run. Then it offers a helper job
 * to the pool for each task beyond the first that no helper already
 * attached to the session will take, until the pool says no worker is idle
 * (pool_try_help never queues, so a helper never takes a request's place).
 * Then it claims tasks itself by atomic_fetch_add on `next` until the index
 * passes the count, waits until `done` (tasks returned, counted under the
 * run's mutex) reaches the count, and takes the run down from the session.
 *
 * A helper is a job on the session, not on a run: when it starts, it
 * works on whatever run is current (claiming as the caller does, on its
 * own worker's workspace, then adding what it ran to `done`), and when that
 * run is done it stays attached, watching for the session's next run for
 * up to SPLIT_LINGER_NS, and works on that one too. It leaves when none
 * comes in that time, when the pool has other work waiting (a request, or
 * another computation's offer), or when the session ends. So:
 *  - a helper that starts late (its worker was asleep: on a VM the host
 *    takes up to milliseconds to run an idle vCPU again) joins the phase
 *    current when it starts, where a helper of one run would find its run
 *    over and leave, its place in the pool having refused the next run's
 *    offer meanwhile: RoPE's short table then the projection on one thread,
 *    1.3 × the Llama-3-8B layer's time in most samples (bench/README.md (a));
 *  - phase after phase, the helper of the last is already there, with no
 *    offer and no hand-off through the pool's queue.
 * A helper that left after a helped run is still counted busy by the pool
 * until it is back in pool_worker's loop, so the first offer of the next
 * run is made again while refused for want of an idle worker, for up to
 * SPLIT_REOFFER_NS: the helper is microseconds away. A worker taken by a
 * request in the meantime costs that moment once.
 *
 * A helper whose worker has no workspace attaches to nothing and leaves:
 * every task runs on a workspace, never NULL.
 *
 * Lifetime: the session is reference-counted under its mutex, one
 * reference for the computation (dropped by srv_split_end) and one for each
 * accepted helper; a run's state, under its own mutex, one for the caller
 * and one for each helper working on it. Whoever drops the last frees it. A
 * helper takes a run's reference under the session's mutex while the run is
 * current; the caller takes it down under the same mutex before it drops
 * its own, so a run is never joined after its end. A helper may start long
 * after the computation ended (its worker took a request first): it finds
 * the session ended and never touches a task or its argument, which lived
 * on the caller's side. Lock order: the session's mutex, then a run's.
 *
 * Waiting: the caller, its claims done, watches `finished` (done, as
 * stored under the mutex) for up to SPLIT_SPIN_NS before it sleeps on the
 * condition variable: a phase's last task usually ends within microseconds
 * of the caller's, and a thread woken from the condition variable may wait
 * for its core far longer (on a VM, 0.1 ms and more), as the pool's idle
 * workers watch for work (server/pool.c).
 *
 * Memory order: a task's writes happen before its `done` update under the
 * run's mutex, which the caller reads under the same mutex before it
 * returns (`finished` only tells it when to look). A run's fields are
 * written before it is published under the session's mutex, which a helper
 * holds when it takes the run.
 */
#include "server/split.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "server/job.h"

/* How long the caller watches for the last task to end before it sleeps. */
#define SPLIT_SPIN_NS 200000
/* How long a helper stays attached to a session with no run to work on:
 * the caller's own steps between two phases, as long as an idle worker
 * watches for work (server/pool.c). */
#define SPLIT_LINGER_NS 200000
/* How long a run after a helped one offers its first helper again, and
 * the gap between offers: back to back, they would keep the pool's mutex
 * from the very helper that must take it to be idle. */
#define SPLIT_REOFFER_NS     50000
#define SPLIT_REOFFER_GAP_NS 2000

typedef struct split_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* done reached count */
    size_t refs;            /* under mu: the caller and each helper working on it */
    size_t done;            /* under mu: tasks that returned */
    atomic_size_t finished; /* done, stored under mu: read without it while watching */
    atomic_size_t next;     /* the next task to claim */
    size_t count;
    attn_task_fn task; /* with arg: valid while a task is unclaimed */
    void *arg;
} split_state;

struct split_session {
    pthread_mutex_t mu;
    pool *pool;
    size_t refs;        /* under mu: the computation until srv_split_end, and each helper */
    size_t attached;    /* under mu: helpers accepted and not gone */
    split_state *run;   /* under mu: the run being worked on, or NULL */
    atomic_ulong epoch; /* changed under mu by each run and by the end: watched by helpers */
    int ended;          /* under mu */
};

static long elapsed_ns(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Drops one reference of a run, with its mutex held; unlocks it; frees on
 * the last. */
static void run_drop_unlock(split_state *st) {
    int last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last) return;
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* The same for the session. */
static void session_drop_unlock(split_session *se) {
    int last = --se->refs == 0;
    pthread_mutex_unlock(&se->mu);
    if (!last) return;
    pthread_mutex_destroy(&se->mu);
    free(se);
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

/* A helper's part of one run, whose reference it holds: claims, reports,
 * drops the reference. */
static void split_work(split_state *st, attn_workspace *ws) {
    size_t ran = split_claim(st, ws);
    pthread_mutex_lock(&st->mu);
    st->done += ran;
    atomic_store_explicit(&st->finished, st->done, memory_order_relaxed);
    if (ran && st->done == st->count) pthread_cond_signal(&st->cv);
    run_drop_unlock(st);
}

/* Watches the session's epoch for a change from `seen`, for up to
 * SPLIT_LINGER_NS, or until the pool has other work waiting. */
static void split_linger(split_session *se, unsigned long seen) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; atomic_load_explicit(&se->epoch, memory_order_relaxed) == seen; k++)
        if (k % 64 == 0 && (pool_has_waiting(se->pool) || elapsed_ns(&t0) > SPLIT_LINGER_NS))
            return;
}

/* pool_fn: a helper, on an idle worker, attached to a session (above). */
static void split_help(void *arg, void *worker_ctx) {
    split_session *se = arg;
    srv_worker *w = worker_ctx;
    attn_workspace *ws = w ? w->ws : NULL;
    unsigned long seen = 0; /* the epoch of the last run worked on */
    pthread_mutex_lock(&se->mu);
    while (ws && !se->ended) {
        unsigned long epoch = atomic_load_explicit(&se->epoch, memory_order_relaxed);
        split_state *st = se->run;
        if (!st || epoch == seen) {
            pthread_mutex_unlock(&se->mu);
            split_linger(se, epoch);
            pthread_mutex_lock(&se->mu);
            /* nothing new in that time: leave, under the mutex, so that a
             * run published from now on does not count on this helper */
            if (atomic_load_explicit(&se->epoch, memory_order_relaxed) == epoch) break;
            continue;
        }
        pthread_mutex_lock(&st->mu);
        st->refs++;
        pthread_mutex_unlock(&st->mu);
        pthread_mutex_unlock(&se->mu);
        split_work(st, ws);
        seen = epoch;
        pthread_mutex_lock(&se->mu);
    }
    se->attached--;
    session_drop_unlock(se);
}

/* Offers one helper; with `again`, again while refused for want of an idle
 * worker, up to SPLIT_REOFFER_NS (the last run's helper coming back). */
static int split_offer(split_session *se, int again) {
    struct timespec t0, gap;
    int rc = pool_try_help(se->pool, split_help, se);
    if (rc != POOL_FULL || !again) return rc;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (rc == POOL_FULL && elapsed_ns(&t0) <= SPLIT_REOFFER_NS) {
        clock_gettime(CLOCK_MONOTONIC, &gap);
        while (elapsed_ns(&gap) < SPLIT_REOFFER_GAP_NS)
            ;
        rc = pool_try_help(se->pool, split_help, se);
    }
    return rc;
}

/* The computation's session, made on its first run; NULL without memory. */
static split_session *split_session_get(srv_split *s) {
    if (s->session) return s->session;
    split_session *se = calloc(1, sizeof *se);
    if (!se) return NULL;
    pthread_mutex_init(&se->mu, NULL);
    se->pool = s->pool;
    se->refs = 1;
    atomic_init(&se->epoch, 0);
    return s->session = se;
}

/* Waits until every task of the run has returned: watches, then sleeps. */
static void split_wait(split_state *st) {
    pthread_mutex_lock(&st->mu);
    if (st->done < st->count) { /* a helper's task is still running */
        pthread_mutex_unlock(&st->mu);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; atomic_load_explicit(&st->finished, memory_order_relaxed) < st->count; k++)
            if (k % 64 == 0 && elapsed_ns(&t0) > SPLIT_SPIN_NS) break;
        pthread_mutex_lock(&st->mu);
    }
    while (st->done < st->count)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

static void split_run(void *ctx, attn_task_fn task, void *arg, size_t count) {
    srv_split *s = ctx;
    split_session *se = split_session_get(s);
    split_state *st = se ? malloc(sizeof *st) : NULL;
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

    pthread_mutex_lock(&se->mu);
    se->run = st;
    atomic_fetch_add_explicit(&se->epoch, 1, memory_order_relaxed);
    size_t attached = se->attached;
    pthread_mutex_unlock(&se->mu);

    /* The last run's helper, gone back to the pool, is worth waiting for. */
    int again = s->helped && attached == 0;
    s->helped = attached > 0;
    for (size_t k = 1 + attached; k < count; k++) {
        pthread_mutex_lock(&se->mu); /* before the offer: the helper may start at once */
        se->refs++;
        se->attached++;
        pthread_mutex_unlock(&se->mu);
        if (split_offer(se, again && k == 1) != POOL_OK) {
            pthread_mutex_lock(&se->mu);
            se->refs--; /* never the last: the computation's is held */
            se->attached--;
            pthread_mutex_unlock(&se->mu);
            break;
        }
        s->helpers++;
        s->helped = 1;
    }

    size_t ran = split_claim(st, s->ws);
    pthread_mutex_lock(&st->mu);
    st->done += ran;
    atomic_store_explicit(&st->finished, st->done, memory_order_relaxed);
    pthread_mutex_unlock(&st->mu);
    split_wait(st);

    pthread_mutex_lock(&se->mu);
    se->run = NULL; /* no helper takes it from now on */
    pthread_mutex_unlock(&se->mu);
    pthread_mutex_lock(&st->mu);
    run_drop_unlock(st);
}

static int split_stop(void *ctx) {
    const srv_split *s = ctx;
    return s->stop(s->stop_ctx);
}

attn_runner srv_split_runner(srv_split *s) {
    return (attn_runner){.run = split_run, .ctx = s, .stop = s->stop ? split_stop : NULL};
}

void srv_split_end(srv_split *s) {
    split_session *se = s->session;
    if (!se) return;
    s->session = NULL;
    pthread_mutex_lock(&se->mu);
    se->ended = 1;
    atomic_fetch_add_explicit(&se->epoch, 1, memory_order_relaxed);
    session_drop_unlock(se);
}
