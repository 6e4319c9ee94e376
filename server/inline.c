/*
 * inline.c — tiny requests on the polling thread (inline.h).
 */
#include "server/inline.h"

#include "server/dispatch.h"
#include "server/metrics.h"

static void worker_free(void *w) {
    srv_worker_destroy(w);
}

int srv_inline_start(srv_http *h) {
    if (pthread_key_create(&h->inline_key, worker_free) != 0) return -1;
    h->inline_key_made = 1;
    return 0;
}

void srv_inline_stop(srv_http *h) {
    if (h->inline_key_made) pthread_key_delete(h->inline_key);
    h->inline_key_made = 0;
}

/* This polling thread's srv_worker, made on first use (freed by the key's
 * destructor when the thread ends); NULL when it cannot be had. */
static srv_worker *thread_worker(srv_http *h) {
    srv_worker *w = pthread_getspecific(h->inline_key);
    if (w) return w;
    w = srv_worker_create(h->models, NULL); /* never splits: no pool */
    if (w && pthread_setspecific(h->inline_key, w) != 0) {
        srv_worker_destroy(w);
        w = NULL;
    }
    return w;
}

srv_inline_outcome srv_inline_try(srv_exchange *x) {
    srv_http *h = x->h;
    if (h->cfg->inline_max_flops <= 0 || x->job.body_len > SRV_INLINE_MAX_BODY)
        return SRV_INLINE_NO;
    srv_worker *w = thread_worker(h);
    if (!w) return SRV_INLINE_NO;
    x->job.limits = h->limits;
    if (srv_job_decode(&x->job, w) == 0) { /* else refused: the job holds the answer */
        if (srv_job_cost(&x->job) > h->cfg->inline_max_flops) return SRV_INLINE_TO_POOL;
        /* Taken now, after the decode: the job waits for nothing, and its
         * queue time must not count the decode a second time. */
        clock_gettime(CLOCK_MONOTONIC, &x->job.submitted);
        srv_job_run(&x->job, w);
        srv_worker_idle(w);
        srv_metrics_count(h->metrics, SRV_EVENT_INLINE);
    }
    srv_dispatch_count_phases(x);
    x->state = X_DONE;
    return SRV_INLINE_DONE;
}
