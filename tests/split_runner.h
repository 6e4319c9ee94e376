/*
 * split_runner.h — an attn_runner for the engine's tests: each run's tasks
 * shared between the calling thread and one other, each on a workspace of
 * its own, claimed last first, so that a test can hold a split computation
 * to the unsplit one bit for bit.
 */
#ifndef TESTS_SPLIT_RUNNER_H
#define TESTS_SPLIT_RUNNER_H

#include <stdatomic.h>
#include <stddef.h>

#include "attention/attention.h"

typedef struct split_runner {
    attn_workspace *caller_ws, *other_ws; /* the caller's, set before use */
    attn_task_fn task;
    void *arg;
    size_t count;
    atomic_size_t next;
} split_runner;

/* attn_runner.run, its ctx a split_runner. */
void split_run(void *ctx, attn_task_fn task, void *arg, size_t count);

#endif
