/*
 * alloc_count.c — the counting wrappers of the allocator (alloc_count.h).
 *
 * The linker's --wrap=malloc sends every call of malloc made by the
 * objects it links to __wrap_malloc, and __real_malloc to the allocator
 * itself; likewise for the others. Large blocks are kept in a small table
 * of (address, size), under one mutex; a table too small for the blocks
 * held at once is a fault of the test, which aborts.
 */
#include "tests/alloc_count.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);

enum { AC_SLOTS = 1024 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t size;
} held[AC_SLOTS];
static size_t n_held, current, peak;

static void track(void *p, size_t size) {
    if (!p || size < AC_LARGE) return;
    pthread_mutex_lock(&mu);
    if (n_held == AC_SLOTS) {
        fputs("alloc_count: too many large blocks held at once\n", stderr);
        abort();
    }
    held[n_held].p = p;
    held[n_held++].size = size;
    current += size;
    if (current > peak) peak = current;
    pthread_mutex_unlock(&mu);
}

static void untrack(void *p) {
    if (!p) return;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n_held; i++)
        if (held[i].p == p) {
            current -= held[i].size;
            held[i] = held[--n_held];
            break;
        }
    pthread_mutex_unlock(&mu);
}

void *__wrap_malloc(size_t size) {
    void *p = __real_malloc(size);
    track(p, size);
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    void *p = __real_calloc(n, size);
    track(p, n * size); /* calloc refused an overflowing product */
    return p;
}

void *__wrap_realloc(void *p, size_t size) {
    void *q = __real_realloc(p, size);
    if (q || size == 0) untrack(p);
    track(q, size);
    return q;
}

void __wrap_free(void *p) {
    untrack(p);
    __real_free(p);
}

int __wrap_posix_memalign(void **p, size_t align, size_t size) {
    int rc = __real_posix_memalign(p, align, size);
    if (rc == 0) track(*p, size);
    return rc;
}

void *__wrap_aligned_alloc(size_t align, size_t size) {
    void *p = __real_aligned_alloc(align, size);
    track(p, size);
    return p;
}

size_t ac_current(void) {
    pthread_mutex_lock(&mu);
    size_t c = current;
    pthread_mutex_unlock(&mu);
    return c;
}

size_t ac_peak(void) {
    pthread_mutex_lock(&mu);
    size_t c = peak;
    pthread_mutex_unlock(&mu);
    return c;
}

void ac_reset_peak(void) {
    pthread_mutex_lock(&mu);
    peak = current;
    pthread_mutex_unlock(&mu);
}
