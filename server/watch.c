/*
 * watch.c — connection deadlines and hang-ups (see watch.h).
 *
 * The entries form a doubly linked list under one mutex. The thread wakes
 * every SRV_WATCH_TICK_MS and walks the list: a few hundred connections at
 * most (--max-connections), a few microseconds a walk, so no heap of
 * deadlines is needed. A deadline is therefore kept to within a tick.
 *
 * The 408 is written with one non-blocking send before the shutdown: the
 * connection is then reading (headers or a body), so libmicrohttpd is not
 * writing to it, and a client that is not reading simply loses it.
 */
#include "server/watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server/reqid.h"

#define SRV_WATCH_TICK_MS 100

struct srv_watched {
    int fd;
    struct timespec deadline; /* tv_sec 0: none */
    int expired;
    char *timeout_body; /* or NULL: SRV_WATCH_TIMEOUT_BODY */
    size_t timeout_len;
    srv_watched *prev, *next;
};

struct srv_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stopping was set */
    pthread_t thread;
    int stopping;
    srv_watched *head;
    size_t expired_total;
};

#define SRV_WATCH_TIMEOUT_BODY                                                                     \
    "{\"error\":{\"code\":\"request_timeout\",\"message\":\"the request did not arrive within "    \
    "--connection-timeout\",\"path\":\"\"}}"

/* Writes the 408 with a new request id: the contract's error (or the one
 * its route set), as far as a request that never arrived whole can have
 * one. */
static void send_timeout(const srv_watched *c) {
    char id[48], answer[1024];
    const char *body = c->timeout_body ? c->timeout_body : SRV_WATCH_TIMEOUT_BODY;
    size_t len = c->timeout_body ? c->timeout_len : sizeof SRV_WATCH_TIMEOUT_BODY - 1;
    srv_reqid_new(id, sizeof id);
    int n = snprintf(answer, sizeof answer,
                     "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\nX-Request-Id: %s\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%.*s",
                     id, len, (int)len, body);
    if (n > 0 && (size_t)n < sizeof answer)
        (void)!send(c->fd, answer, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void deadline_in(struct timespec *t, double seconds) {
    clock_gettime(CLOCK_MONOTONIC, t);
    double s = (double)t->tv_nsec / 1e9 + seconds;
    time_t whole = (time_t)s;
    t->tv_sec += whole;
    t->tv_nsec = (long)((s - (double)whole) * 1e9);
    if (t->tv_sec == 0) t->tv_sec = 1; /* 0 means none */
}

static int passed(const struct timespec *deadline, const struct timespec *now) {
    return deadline->tv_sec != 0 &&
           (now->tv_sec > deadline->tv_sec ||
            (now->tv_sec == deadline->tv_sec && now->tv_nsec >= deadline->tv_nsec));
}

static void *watch_thread(void *arg) {
    srv_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec wake;
        clock_gettime(CLOCK_REALTIME, &wake); /* the condition variable's clock */
        wake.tv_nsec += SRV_WATCH_TICK_MS * 1000000L;
        if (wake.tv_nsec >= 1000000000L) {
            wake.tv_sec++;
            wake.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &wake);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (srv_watched *c = w->head; c; c = c->next) {
            if (!passed(&c->deadline, &now)) continue;
            c->deadline.tv_sec = 0;
            c->expired = 1;
            w->expired_total++;
            send_timeout(c);
            shutdown(c->fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

srv_watch *srv_watch_start(void) {
    srv_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, watch_thread, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void srv_watch_stop(srv_watch *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

srv_watched *srv_watch_add(srv_watch *w, int fd, double seconds) {
    srv_watched *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    if (seconds > 0) deadline_in(&c->deadline, seconds);
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void srv_watch_remove(srv_watch *w, srv_watched *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&w->mu);
    free(c->timeout_body);
    free(c);
}

void srv_watch_timeout_body(srv_watch *w, srv_watched *c, const char *body, size_t len) {
    if (!c || len > 512) return; /* it has to fit the answer's buffer */
    char *copy = NULL;
    if (body) {
        if (!(copy = malloc(len + 1))) return;
        memcpy(copy, body, len);
        copy[len] = '\0';
    }
    pthread_mutex_lock(&w->mu);
    char *old = c->timeout_body;
    c->timeout_body = copy;
    c->timeout_len = len;
    pthread_mutex_unlock(&w->mu);
    free(old);
}

void srv_watch_deadline(srv_watch *w, srv_watched *c, double seconds) {
    if (!c) return;
    struct timespec t = {0};
    if (seconds > 0) deadline_in(&t, seconds);
    pthread_mutex_lock(&w->mu);
    if (!c->expired) c->deadline = t;
    pthread_mutex_unlock(&w->mu);
}

int srv_watch_expired(srv_watch *w, const srv_watched *c) {
    if (!c) return 0;
    pthread_mutex_lock(&w->mu);
    int e = c->expired;
    pthread_mutex_unlock(&w->mu);
    return e;
}

size_t srv_watch_expired_total(srv_watch *w) {
    pthread_mutex_lock(&w->mu);
    size_t n = w->expired_total;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int srv_watch_peer_gone(int fd) {
    char byte;
    ssize_t r = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) return 0;
    if (r == 0) return 1;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}
