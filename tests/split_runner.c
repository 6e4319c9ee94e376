/*
 * split_runner.c — see split_runner.h.
 */
#include "tests/split_runner.h"

#include <check.h>
#include <pthread.h>

static void split_claim(split_runner *r, attn_workspace *ws) {
    for (size_t t; (t = atomic_fetch_add(&r->next, 1)) < r->count;)
        r->task(r->arg, r->count - 1 - t, ws); /* last first */
}

static void *split_thread(void *arg) {
    split_runner *r = arg;
    split_claim(r, r->other_ws);
    return NULL;
}

void split_run(void *ctx, attn_task_fn task, void *arg, size_t count) {
    split_runner *r = ctx;
    r->task = task, r->arg = arg, r->count = count;
    atomic_store(&r->next, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, split_thread, r), 0);
    split_claim(r, r->caller_ws);
    pthread_join(th, NULL);
}
