/*
 * fuzz_http.c — libFuzzer target over whole HTTP exchanges with the real
 * server (make fuzz).
 *
 * LLVMFuzzerInitialize starts, once, the server server/main.c runs
 * (services.h: the configuration from flags, the store, the worker pool,
 * the libmicrohttpd daemon) inside this process, on 127.0.0.1 and a free
 * port, so that its code is under the fuzzer's coverage and the
 * sanitizers. Its models are the built-in ones (store/builtin.h but those
 * written on demand only), written into a new temporary directory, mapped
 * (--map-models: LeakSanitizer's scans then skip their weights) and
 * unlinked again before the first input. Its limits are small, so that no
 * input computes for long, and its connection timeout is the least there
 * is, 1 s. Its log goes nowhere (FUZZ_HTTP_LOG=1 keeps it on stderr); the
 * sanitizers' reports and libFuzzer's own lines still reach stderr.
 *
 * An input is a mode byte, then the bytes a client writes on a new
 * connection: anything — request lines, headers, chunked bodies, /v2
 * bodies with binary tails, several requests in a row. The mode (the
 * byte's value modulo 3):
 *
 *   0  write, shut the write side, read until the server closes;
 *   1  write, keep the connection open, read until the server closes or
 *      is quiet for a moment (a request cut short is then left unfinished);
 *   2  write, then close at once with a reset, reading nothing: a client
 *      that leaves while its request is read, queued or computed.
 *
 * Reads end after at most a second in all; the connection is then closed.
 *
 * The server treats a client that shut its write side as gone once its
 * request is handed to a worker (499, unanswered; what is answered on the
 * polling thread is answered): mode 1 is the one that reads a worker's
 * answers. Mode 1's quiet moment is 20 ms, 2 ms once what came holds
 * whole answers (a header block with a Content-Length, and its body).
 *
 * Checked on every input, besides the sanitizers (a crash, a leak or
 * undefined behaviour in any of the server's threads ends the run):
 *
 *   - the server still serves: GET /healthz on a fresh connection answers
 *     200 within 10 s (else abort());
 *   - no answer names the models directory (unless the input did).
 *
 * And at the end of a run (libFuzzer's exit(), not a crash), the server is
 * drained and stopped as main.c stops it, within 30 s (else abort()), so
 * that LeakSanitizer's check at exit finds anything the stopped server
 * did not free.
 */
#include <arpa/inet.h>
#include <cblas.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/config.h"
#include "server/services.h"
#include "store/builtin.h"

static cfg_config cfg; /* the daemon borrows it for its whole life */
static srv_services services;
static unsigned port;
static char models_dir[64];
static FILE *out; /* libFuzzer's stderr, when the server's log goes nowhere */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(const char *what) {
    fprintf(out, "fuzz_http: %s\n", what);
    fflush(out);
    abort();
}

/* Writes the built-in models into a new directory of /tmp. */
static void models_write(void) {
    strcpy(models_dir, "/tmp/attn-fuzz-http-XXXXXX");
    if (!mkdtemp(models_dir)) fail("no temporary directory for the models");
    for (size_t i = 0; i < store_builtin_count(); i++) {
        const store_builtin *b = store_builtin_at(i);
        attn_error err;
        if (b->on_demand) continue;
        if (store_builtin_write(b, models_dir, NULL, &err) != 0) fail(err.message);
    }
}

/* The files are mapped: the mappings outlive the names. */
static void models_unlink(void) {
    for (size_t i = 0; i < store_builtin_count(); i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.safetensors", models_dir, store_builtin_at(i)->name);
        unlink(path);
    }
    rmdir(models_dir);
}

/* abort()s the process unless server_stop has stopped the server in 30 s. */
static void *stop_watchdog(void *arg) {
    (void)arg;
    sleep(30);
    fail("the server did not drain and stop within 30 s");
    return NULL;
}

/* At exit: the drain and stop of server/main.c. */
static void server_stop(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, stop_watchdog, NULL) == 0) pthread_detach(t);
    srv_http_drain(services.http);
    srv_services_stop(&services);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    out = stderr;
    if (!getenv("FUZZ_HTTP_LOG")) {
        /* glibc's stderr is a variable; the server writes its lines
         * through it, libFuzzer through the copy it took at start, the
         * sanitizers to descriptor 2 */
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) stderr = devnull;
    }
    signal(SIGPIPE, SIG_IGN);
    openblas_set_num_threads(1); /* as the server (server/main.c) */
    models_write();
    char *args[] = {"fuzz_http",
                    "--bind=127.0.0.1",
                    "--port=0",
                    models_dir,
                    "--map-models",
                    "--workers=2",
                    "--io-threads=2",
                    "--queue-depth=8",
                    "--connection-timeout=1",
                    "--max-body-bytes=64k",
                    "--max-inflight-bytes=1m",
                    "--max-tokens=64",
                    "--max-batch=8",
                    "--max-flops=1e8",
                    "--max-response-bytes=4m",
                    "--max-workspace-bytes=64m",
                    NULL};
    char models_arg[96];
    snprintf(models_arg, sizeof models_arg, "--models-dir=%s", models_dir);
    args[3] = models_arg;
    attn_error err;
    if (cfg_load(&cfg, (int)(sizeof args / sizeof args[0]) - 1, args, NULL, &err) != 0)
        fail(err.message);
    if (srv_services_start(&services, &cfg, &err) != 0) fail(err.message);
    models_unlink();
    port = srv_http_port(services.http);
    atexit(server_stop);
    return 0;
}

/* ---- a client ---- */

/* A connected socket, or -1. libFuzzer's timer interrupts system calls
 * (SIGALRM); an interrupted connect goes on, and is waited for. */
static int client_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    if (errno == EINTR) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n, e = 0;
        socklen_t len = sizeof e;
        while ((n = poll(&p, 1, 10000)) < 0 && errno == EINTR)
            ;
        if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == 0) return fd;
        errno = e ? e : ETIMEDOUT;
    }
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* client_connect, tried again for up to 10 s: the server must take a new
 * connection. */
static int client_open(void) {
    double deadline = now_s() + 10;
    for (;;) {
        int fd = client_connect();
        if (fd >= 0) return fd;
        if (now_s() > deadline) {
            char why[128];
            snprintf(why, sizeof why, "the server takes no new connection: %s", strerror(errno));
            fail(why);
        }
        usleep(10000);
    }
}

/* Sends what the server takes; it may close before the end. */
static void client_send(int fd, const uint8_t *data, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += (size_t)w;
    }
}

typedef struct answer {
    char buf[1 << 16]; /* the first bytes of the answer */
    size_t len;
} answer;

/* 1 when a holds whole answers and nothing more: each a header block with
 * a Content-Length, and that many bytes. */
static int answers_whole(const answer *a) {
    size_t at = 0;
    while (at < a->len) {
        const char *p = a->buf + at, *end = memmem(p, a->len - at, "\r\n\r\n", 4);
        if (!end) return 0;
        const char *cl = memmem(p, (size_t)(end - p), "\r\nContent-Length: ", 18);
        if (!cl) return 0;
        size_t body = strtoul(cl + 18, NULL, 10), head = (size_t)(end + 4 - p);
        if (body > a->len - at - head) return 0;
        at += head + body;
    }
    return at > 0;
}

/* Reads into a until the server closes, `quiet_s` pass without a byte (0:
 * no such limit; a tenth of it once the answers so far are whole) or
 * `total_s` pass. */
static void client_read(int fd, answer *a, double quiet_s, double total_s) {
    double start = now_s(), last = start;
    a->len = 0;
    for (;;) {
        double t = now_s(), left = start + total_s - t;
        double quiet = answers_whole(a) ? quiet_s / 10 : quiet_s;
        if (quiet > 0 && last + quiet - t < left) left = last + quiet - t;
        if (left <= 0) return;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        char chunk[16384];
        ssize_t r = recv(fd, chunk, sizeof chunk, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;
        size_t keep = (size_t)r < sizeof a->buf - a->len ? (size_t)r : sizeof a->buf - a->len;
        memcpy(a->buf + a->len, chunk, keep);
        a->len += keep;
        last = now_s();
    }
}

static void close_reset(int fd) {
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* 1 when `needle` is in the len bytes at hay. A plain loop: memmem's
 * interceptor would hand the needle to the fuzzer's mutations. */
static int holds(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; n && i + n <= len; i++) {
        size_t j = 0;
        while (j < n && hay[i + j] == needle[j])
            j++;
        if (j == n) return 1;
    }
    return 0;
}

/* GET /healthz on a fresh connection answers 200, within 10 s: the
 * server is still serving. */
static void assert_serving(void) {
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static answer a;
    double deadline = now_s() + 10;
    while (now_s() < deadline) {
        int fd = client_open();
        client_send(fd, (const uint8_t *)probe, sizeof probe - 1);
        client_read(fd, &a, 0, deadline - now_s());
        close(fd);
        if (a.len >= 12 && memcmp(a.buf, "HTTP/1.1 200", 12) == 0) return;
        usleep(10000);
    }
    fail("the server no longer answers GET /healthz");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static answer a;
    int mode = data[0] % 3;
    int fd = client_open();
    client_send(fd, data + 1, size - 1);
    a.len = 0;
    if (mode == 0) {
        shutdown(fd, SHUT_WR);
        client_read(fd, &a, 0, 1.0);
        close(fd);
    } else if (mode == 1) {
        client_read(fd, &a, 0.02, 1.0);
        close(fd);
    } else {
        close_reset(fd);
    }
    if (holds(a.buf, a.len, models_dir) && !holds((const char *)data, size, models_dir))
        fail("an answer names the models directory");
    assert_serving();
    return 0;
}
