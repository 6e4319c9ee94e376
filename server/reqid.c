/*
 * reqid.c — sanitising and generating request ids.
 *
 * New ids are "<16 hex digits of process prefix>-<counter in hex>": the
 * prefix is drawn once from getrandom() (the time and pid if that fails), so
 * ids from restarts and from several replicas do not collide; the counter is
 * a relaxed atomic, so any I/O thread may draw one without a lock.
 */
#include "server/reqid.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t reqid_once = PTHREAD_ONCE_INIT;
static uint64_t reqid_prefix;
static atomic_uint_fast64_t reqid_counter;

static void reqid_init(void) {
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
    }
    reqid_prefix = r;
}

int srv_reqid_is_sane(const char *id) {
    if (!id) return 0;
    size_t n = 0;
    for (const char *c = id; *c; c++, n++) {
        if (n >= SRV_REQID_MAX) return 0;
        unsigned char ch = (unsigned char)*c;
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == ':' || ch == '-';
        if (!ok) return 0;
    }
    return n > 0;
}

size_t srv_reqid_new(char *buf, size_t cap) {
    pthread_once(&reqid_once, reqid_init);
    uint64_t n = atomic_fetch_add_explicit(&reqid_counter, 1, memory_order_relaxed) + 1;
    int len =
        snprintf(buf, cap, "%016llx-%llx", (unsigned long long)reqid_prefix, (unsigned long long)n);
    return len < 0 ? 0 : (size_t)len < cap ? (size_t)len : cap ? cap - 1 : 0;
}

char *srv_reqid_choose(const char *client) {
    if (srv_reqid_is_sane(client)) return strdup(client);
    char buf[48];
    srv_reqid_new(buf, sizeof buf);
    return strdup(buf);
}
