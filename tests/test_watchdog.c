/*
 * test_watchdog.c — every request ends: for each limit that makes a
 * request impossible to take, schedule or run, a server started with it
 * answers every request, on every route, with a whole response carrying
 * the contract's status and error body, within its deadline; never a
 * connection that stays open without an answer.
 *
 *   --max-flops, --max-workspace-bytes, --max-response-bytes, --max-tokens,
 *   --max-batch        422 limit_exceeded, before any work; what fits: 200
 *   --max-body-bytes   413 body_too_large, from Content-Length or as a
 *                      chunked body grows
 *   --max-inflight-bytes  503 overloaded (Retry-After) while other bodies
 *                      hold the budget; below --max-body-bytes, the server
 *                      does not start (a body could wait for ever)
 *   --workers 1 --queue-depth 1  503 overloaded at once while the worker
 *                      and the queue are taken; a request taken is answered
 *   --max-unsent-bytes 503 overloaded while answers not read hold more
 *                      than it; 200 once they are read
 *   --connection-timeout  408 request_timeout for headers or a body that
 *                      stall (the only deadline the server keeps: a
 *                      computation has none, so its deadline here is
 *                      ANSWER_TIMEOUT)
 *   SIGTERM            every request received is answered (the queued ones
 *                      computed, an upload finished during the drain
 *                      too), one sent on an open connection during the
 *                      drain gets 503 shutting_down, a stalled upload its
 *                      408, new connections are refused, and the process
 *                      exits 0, even with an answer its client never reads
 *                      (closed after --connection-timeout without progress)
 *
 * Requests go out together, from threads, each through hs_exchange (its
 * own connection, a socket receive timeout): a hang fails the request with
 * a timeout instead of blocking the suite. Nothing is timed against the
 * clock but those bounds, which are generous: a loaded machine, a
 * sanitizer build. Where an order matters (a request must find the worker
 * and the queue taken), the test waits for the server's metrics to say so.
 *
 * The routes: POST /v1/attention, /v1/attention/batch and
 * /v2/models/{name}/infer, on the built-in models ($ATTN_TEST_MODELS_DIR,
 * else build/models): demo-4d for small requests, gpt2-small-shape for
 * heavy ones.
 */
#include <check.h>
#include <jansson.h>
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

#include "tests/fixtures.h"
#include "tests/http_harness.h"
#include "tests/oip_client.h"

/* Seconds a computed answer may take: generous, for a loaded machine and
 * the sanitizer build. */
#define ANSWER_TIMEOUT 60.0
/* Added to the server's own deadlines (--connection-timeout). */
#define SLACK 15.0

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start(hs_server *s, const char *const *flags) {
    const char *dir = getenv("ATTN_TEST_MODELS_DIR");
    const char *args[24] = {"--models-dir", dir ? dir : "build/models"};
    size_t n = 2;
    for (; flags && *flags && n < 23; flags++)
        args[n++] = *flags;
    args[n] = NULL;
    ck_assert_msg(hs_start(s, args) == 0, "the server did not start");
}

static void finish(hs_server *s) {
    char why[2048];
    ck_assert_msg(hs_finish(s, why, sizeof why) == 0, "%s", why);
}

/* ---- requests ------------------------------------------------------------------- */

enum { V1, BATCH, V2, ROUTES };
static const char *const route_names[ROUTES] = {"/v1/attention", "/v1/attention/batch", "/v2"};

/* One request, sent from a thread of its own. */
typedef struct call {
    int route;
    const char *path;
    char *body; /* owned */
    size_t len;
    size_t json_len; /* /v2: Inference-Header-Content-Length when bytes follow, else 0 */
    double timeout;
    hs_response r;
    double end; /* now() when it ended */
} call;

/* A call of a body (taken). */
static call call_of(int route, char *body, size_t len, size_t json_len, double timeout) {
    static const char *const paths[ROUTES] = {"/v1/attention", "/v1/attention/batch", NULL};
    call c = {route, paths[route], body, len, json_len, timeout, {0}, 0};
    return c;
}

static void call_free(call *c) {
    free(c->body);
    hs_response_free(&c->r);
}

static void send_call(unsigned port, call *c) {
    char path[128], hl[64];
    const char *headers[3] = {NULL};
    if (c->route == V2) {
        snprintf(path, sizeof path, "/v2/models/%s/infer", c->path);
        if (c->json_len) {
            snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", c->json_len);
            headers[0] = "Content-Type:", headers[1] = hl;
        }
    } else {
        snprintf(path, sizeof path, "%s", c->path);
    }
    hs_exchange(port, "POST", path, headers, c->body, c->len, c->timeout, &c->r);
    c->end = now();
}

typedef struct caller {
    unsigned port;
    call *c;
} caller;

static void *call_thread(void *arg) {
    caller *k = arg;
    send_call(k->port, k->c);
    return NULL;
}

/* Sends every call at once and waits for them all. */
static void send_all(unsigned port, call *cs, size_t n) {
    pthread_t *t = malloc(n * sizeof *t);
    caller *k = malloc(n * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        k[i] = (caller){port, &cs[i]};
        ck_assert_int_eq(pthread_create(&t[i], NULL, call_thread, &k[i]), 0);
    }
    for (size_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    free(t);
    free(k);
}

/* The call ended with a whole answer of `status` and, but for 200, the
 * contract's error body (the protocol's {"error": "..."} under /v2) with
 * `code` where the body names one; a 503 with Retry-After. */
static void assert_ends(const call *c, long status, const char *code, const char *what) {
    const hs_response *r = &c->r;
    ck_assert_msg(r->rc == CURLE_OK, "%s on %s: no whole answer within %.0f s: %s (status %ld)",
                  what, route_names[c->route], c->timeout, curl_easy_strerror(r->rc), r->status);
    ck_assert_msg(r->status == status, "%s on %s: status %ld, want %ld: %.300s", what,
                  route_names[c->route], r->status, status, r->body);
    if (status == 200) return;
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    ck_assert_msg(j != NULL, "%s on %s: %ld with a body that is not JSON: %.300s", what,
                  route_names[c->route], status, r->body);
    const json_t *e = json_object_get(j, "error");
    if (c->route == V2) {
        ck_assert_msg(json_is_string(e) && json_object_size(j) == 1,
                      "%s on /v2: not the protocol's error body: %.300s", what, r->body);
    } else {
        const char *got = json_string_value(json_object_get(e, "code"));
        ck_assert_msg(got && json_is_string(json_object_get(e, "message")) &&
                          json_is_string(json_object_get(e, "path")),
                      "%s on %s: not the contract's error body: %.300s", what,
                      route_names[c->route], r->body);
        ck_assert_msg(!code || strcmp(got, code) == 0, "%s on %s: code %s, want %s", what,
                      route_names[c->route], got, code);
    }
    json_decref(j);
    if (status == 503) {
        char *ra = hs_header(r, "Retry-After");
        ck_assert_msg(ra != NULL, "%s on %s: 503 without Retry-After", what, route_names[c->route]);
        free(ra);
    }
}

/* ---- bodies ----------------------------------------------------------------------- */

/* "[[…4 numbers…], …]": n rows for demo-4d. */
static void rows4(FILE *f, size_t n, size_t seed) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s[%g,%g,%g,%g]", i ? "," : "", (double)((seed + i) % 7) / 8 - 0.375,
                (double)((seed + 3 * i) % 5) / 4 - 0.5, (double)(i % 3) / 2, -0.25);
    fputc(']', f);
}

/* A demo-4d request on `route`: `seqs` sequences of n tokens (/v1: one). */
static call small_call(int route, size_t seqs, size_t n) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    if (route == V1) {
        fputs("{\"model\":\"demo-4d\",\"embeddings\":", f);
        rows4(f, n, 1);
        fputs("}", f);
    } else if (route == BATCH) {
        fputs("{\"model\":\"demo-4d\",\"sequences\":[", f);
        for (size_t q = 0; q < seqs; q++) {
            fprintf(f, "%s{\"embeddings\":", q ? "," : "");
            rows4(f, n, q);
            fputc('}', f);
        }
        fputs("]}", f);
    } else {
        fprintf(f,
                "{\"inputs\":[{\"name\":\"embeddings\",\"datatype\":\"FP32\",\"shape\":[%zu,%zu,4],"
                "\"data\":[",
                seqs, n);
        for (size_t q = 0; q < seqs; q++) {
            if (q) fputc(',', f);
            rows4(f, n, q);
        }
        fputs("]}]}", f);
    }
    fclose(f);
    call c = call_of(route, b, len, 0, ANSWER_TIMEOUT);
    if (route == V2) c.path = "demo-4d";
    return c;
}

/* small_call's request of 2 tokens, led by spaces to `total` bytes. */
static call sized_call(int route, size_t total) {
    call c = small_call(route, 1, 2);
    ck_assert_uint_le(c.len, total);
    char *b = malloc(total);
    memset(b, ' ', total - c.len);
    memcpy(b + total - c.len, c.body, c.len);
    free(c.body);
    c.body = b, c.len = total;
    return c;
}

/* A gpt2-small-shape request of n tokens of zeros on `route`, a good
 * fraction of a second of work at n = 1536 (the embeddings answered). */
static call heavy_call(int route, int n) {
    if (route == V1) {
        char *b = tf_heavy_body(n);
        return call_of(V1, b, strlen(b), 0, ANSWER_TIMEOUT);
    }
    if (route == BATCH) {
        size_t len;
        char *b = tf_heavy_batch(1, n, &len);
        return call_of(BATCH, b, len, 0, ANSWER_TIMEOUT);
    }
    /* /v2 as tritonclient sends it: the zeros as binary data */
    float *zeros = calloc((size_t)n * 768, sizeof *zeros);
    oc_input in = {"embeddings", "FP32", 3, {1, n, 768}, zeros, 1};
    oc_output out = {"embeddings", 1};
    oc_body ob;
    oc_build(&ob, NULL, &in, 1, &out, 1, NULL, 0);
    free(zeros);
    call c = call_of(V2, ob.data, ob.len, ob.json_len, ANSWER_TIMEOUT);
    c.path = "gpt2-small-shape";
    return c;
}

/* ---- limits on one request -------------------------------------------------------- */

/* A limit flag; requests of n_ok tokens fit under it, requests of n_over
 * (in seqs_over sequences for the batch and /v2) do not on the routes of
 * `over` (a ROUTES-bit mask). */
typedef struct limit_case {
    const char *flag, *value;
    size_t n_ok, n_over, seqs_over;
    unsigned over;
} limit_case;

/* Each limit lies well between what the two sizes need (the server's own
 * estimates at the time of writing, in its 422 messages: some 1.1e3 and
 * 3.3e5 flops for 2 and 48 tokens, 3.4e3 for 4; 2.8 KB and 86 KB of
 * scratch for 2 and 96; 362 B and 43 KB of answer for 2 and 48), so that
 * a change in how they are counted does not move a case across it. */
static const limit_case limit_cases[] = {
    {"--max-flops", "20000", 2, 48, 1, 7},
    /* each sequence fits, the eight of them do not: the limit is the request's */
    {"--max-flops", "10000", 4, 4, 8, 1u << BATCH | 1u << V2},
    {"--max-workspace-bytes", "12k", 2, 96, 1, 7},
    {"--max-response-bytes", "4k", 2, 48, 1, 7},
    {"--max-tokens", "8", 2, 9, 1, 7},
    {"--max-batch", "2", 2, 2, 3, 1u << BATCH | 1u << V2},
};

START_TEST(limits_refuse_on_every_route) {
    const limit_case *lc = &limit_cases[_i];
    hs_server s;
    const char *flags[] = {"--workers", "2", lc->flag, lc->value, NULL};
    start(&s, flags);
    /* three of each route over the limit, one under it, all at once */
    enum { OVER = 3, N = ROUTES * (OVER + 1) };
    call cs[N];
    size_t k = 0;
    for (int route = 0; route < ROUTES; route++) {
        for (int i = 0; i < OVER; i++)
            cs[k++] = small_call(route, route == V1 ? 1 : lc->seqs_over, lc->n_over);
        cs[k++] = small_call(route, 1, lc->n_ok);
    }
    send_all(s.port, cs, N);
    char what[96];
    snprintf(what, sizeof what, "%s %s", lc->flag, lc->value);
    for (size_t i = 0; i < N; i++) {
        int over = i % (OVER + 1) != OVER && (lc->over & (1u << cs[i].route));
        assert_ends(&cs[i], over ? 422 : 200, over ? "limit_exceeded" : NULL, what);
        call_free(&cs[i]);
    }
    finish(&s);
}
END_TEST

/* ---- bodies too large -------------------------------------------------------------- */

/* A chunked POST of `total` bytes of spaces to `path`, raw. */
static char *chunked_request(const char *path, size_t total, size_t *len) {
    char *b = NULL;
    FILE *f = open_memstream(&b, len);
    fprintf(f,
            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
            path);
    for (size_t sent = 0; sent < total; sent += 1024) {
        fputs("400\r\n", f);
        for (int i = 0; i < 1024; i++)
            fputc(' ', f);
        fputs("\r\n", f);
    }
    fputs("0\r\n\r\n", f);
    fclose(f);
    return b;
}

/* The status of a raw answer, and that it came whole within the time. */
static long raw_status(const char *raw, const char *what) {
    ck_assert_msg(raw != NULL, "%s: no connection", what);
    ck_assert_msg(strncmp(raw, "HTTP/1.1 ", 9) == 0, "%s: no answer: %.200s", what, raw);
    const char *end = strstr(raw, "\r\n\r\n");
    ck_assert_msg(end != NULL, "%s: headers cut short: %.200s", what, raw);
    hs_response r = {.headers = (char *)raw};
    char *cl = hs_header(&r, "Content-Length");
    ck_assert_msg(cl && strlen(end + 4) == strtoul(cl, NULL, 10), "%s: body cut short: %.300s",
                  what, raw);
    free(cl);
    return strtol(raw + 9, NULL, 10);
}

START_TEST(bodies_too_large_on_every_route) {
    hs_server s;
    const char *flags[] = {"--workers", "2", "--max-body-bytes", "4k", NULL};
    start(&s, flags);
    /* every route, whole bodies over the limit and within it, at once */
    enum { N = 2 * ROUTES };
    call cs[N];
    for (int route = 0; route < ROUTES; route++) {
        cs[2 * route] = sized_call(route, 8192);
        cs[2 * route + 1] = sized_call(route, 3072);
    }
    send_all(s.port, cs, N);
    for (size_t i = 0; i < N; i++) {
        assert_ends(&cs[i], i % 2 ? 200 : 413, i % 2 ? NULL : "body_too_large",
                    "--max-body-bytes 4k");
        call_free(&cs[i]);
    }
    /* a Content-Length of a gigabyte with no body: refused from the headers */
    const char *paths[ROUTES] = {"/v1/attention", "/v1/attention/batch",
                                 "/v2/models/demo-4d/infer"};
    for (int route = 0; route < ROUTES; route++) {
        char req[256];
        snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Content-Length: 1000000000\r\n\r\n",
                 paths[route]);
        char *raw = hs_raw(s.port, req, strlen(req), ANSWER_TIMEOUT);
        ck_assert_int_eq(raw_status(raw, "a body of 1e9 bytes announced"), 413);
        free(raw);
        /* a chunked body, counted as it arrives */
        size_t len;
        char *chunked = chunked_request(paths[route], 16384, &len);
        raw = hs_raw(s.port, chunked, len, ANSWER_TIMEOUT);
        ck_assert_int_eq(raw_status(raw, "a chunked body of 16 KiB"), 413);
        free(raw);
        free(chunked);
    }
    finish(&s);
}
END_TEST

/* ---- the body budget ----------------------------------------------------------------- */

/* Opens a POST to /v1/attention of `total` bytes and sends all but the
 * last `held` of them: its body holds the budget until it is finished. */
static int open_upload(unsigned port, char *body, size_t total, size_t held) {
    int fd = hs_raw_open(port);
    ck_assert_int_ge(fd, 0);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Connection: close\r\nContent-Length: %zu\r\n\r\n",
             total);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, body, total - held), 0);
    return fd;
}

START_TEST(body_budget_on_every_route) {
    hs_server s;
    const char *flags[] = {"--workers", "2", "--max-body-bytes", "32k", "--max-inflight-bytes",
                           "48k",       NULL};
    start(&s, flags);
    /* an upload of 30 KiB left unfinished holds 30 of the 48 KiB */
    call held = sized_call(V1, 30 * 1024);
    int fd = open_upload(s.port, held.body, held.len, 10);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 30 * 1024, 20),
                     30 * 1024);

    /* so no body of 20 KiB fits: each refused from its headers */
    enum { N = 2 * ROUTES };
    call cs[N];
    for (size_t i = 0; i < N; i++)
        cs[i] = sized_call((int)(i % ROUTES), 20 * 1024);
    send_all(s.port, cs, N);
    for (size_t i = 0; i < N; i++) {
        assert_ends(&cs[i], 503, "overloaded", "a body over what the budget has left");
        hs_response_free(&cs[i].r);
    }

    /* the upload that holds it ends and is answered; then the budget is
     * whole and the same requests are */
    ck_assert_int_eq(hs_raw_send(fd, held.body + held.len - 10, 10), 0);
    char *raw = hs_raw_recv(fd, ANSWER_TIMEOUT);
    ck_assert_int_eq(raw_status(raw, "the upload holding the budget"), 200);
    free(raw);
    close(fd);
    call_free(&held);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_body_bytes_reserved ", 0, 20), 0);
    for (size_t i = 0; i < N; i++)
        send_call(s.port, &cs[i]); /* one at a time: 2 × 20 KiB fit, 3 would not */
    for (size_t i = 0; i < N; i++) {
        assert_ends(&cs[i], 200, NULL, "a body within the budget");
        call_free(&cs[i]);
    }
    finish(&s);
}
END_TEST

/* A budget below the largest body would leave such a body waiting for
 * room that never comes: the server refuses to start instead. */
START_TEST(budget_below_body_refused_at_start) {
    hs_server s;
    const char *dir = getenv("ATTN_TEST_MODELS_DIR");
    const char *args[] = {"--models-dir",
                          dir ? dir : "build/models",
                          "--max-body-bytes",
                          "64k",
                          "--max-inflight-bytes",
                          "32k",
                          NULL};
    ck_assert_int_eq(hs_start(&s, args), -1);
    char *log = hs_log(&s);
    ck_assert_msg(log && strstr(log, "--max-inflight-bytes"), "log: %s", log ? log : "");
    free(log);
    unlink(s.log_path);
}
END_TEST

/* ---- answers not read ------------------------------------------------------------------ */

/* A demo-4d request whose patterns make an answer of some 7 MB, sent on a
 * connection that reads nothing of it (a small receive buffer, so that the
 * answer cannot vanish into the sockets' buffers). */
static int send_unread(unsigned port) {
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    fputs("{\"model\":\"demo-4d\",\"return\":[\"patterns\"],\"embeddings\":", f);
    rows4(f, 800, 5);
    fputs("}", f);
    fclose(f);
    int fd = hs_raw_open_rcvbuf(port, 4096);
    ck_assert_int_ge(fd, 0);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Connection: close\r\nContent-Length: %zu\r\n\r\n",
             len);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, b, len), 0);
    free(b);
    return fd;
}

/* While answers not read hold more than --max-unsent-bytes, work is
 * refused at once on every route; once the answer is read, taken again. */
START_TEST(unsent_answers_refuse_on_every_route) {
    hs_server s;
    const char *flags[] = {"--workers", "2", "--max-unsent-bytes", "2m", "--connection-timeout",
                           "120",       NULL};
    start(&s, flags);
    int fd = send_unread(s.port);
    ck_assert_int_ge(
        hs_wait_metric_at_least(s.port, "\nattn_answer_bytes_unsent ", 2 << 20, ANSWER_TIMEOUT),
        2 << 20);
    enum { N = 2 * ROUTES };
    call cs[N];
    for (size_t i = 0; i < N; i++)
        cs[i] = small_call((int)(i % ROUTES), 1, 2);
    send_all(s.port, cs, N);
    for (size_t i = 0; i < N; i++) {
        assert_ends(&cs[i], 503, "overloaded", "a request while answers wait to be read");
        hs_response_free(&cs[i].r);
    }
    /* read at last, through a wider window: 4 KiB at a time is minutes
     * under a sanitizer */
    int wide = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &wide, sizeof wide);
    char *raw = hs_raw_recv(fd, ANSWER_TIMEOUT);
    ck_assert_int_eq(raw_status(raw, "the answer read at last"), 200);
    free(raw);
    close(fd);
    ck_assert_int_eq(hs_wait_metric(s.port, "\nattn_answer_bytes_unsent ", 0, 20), 0);
    send_all(s.port, cs, N);
    for (size_t i = 0; i < N; i++) {
        assert_ends(&cs[i], 200, NULL, "a request once the answer was read");
        call_free(&cs[i]);
    }
    finish(&s);
}
END_TEST

/* ---- a full queue -------------------------------------------------------------------- */

/* One worker and a queue of one, every request sent to them (no inline
 * answers): while a heavy request computes and another waits, whatever
 * comes is refused at once, on every route, and what was taken is
 * answered. */
START_TEST(full_queue_on_every_route) {
    hs_server s;
    const char *flags[] = {"--workers", "1", "--queue-depth", "1", "--inline-max-flops", "0", NULL};
    start(&s, flags);
    call a = heavy_call(V1, 1536), b = heavy_call(V2, 1536);
    caller ka = {s.port, &a}, kb = {s.port, &b};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, call_thread, &ka), 0);
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_workers_busy ", 1, 30), 1);
    ck_assert_int_eq(pthread_create(&tb, NULL, call_thread, &kb), 0);
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_queue_depth ", 1, 30), 1);

    enum { N = 3 * ROUTES };
    call cs[N];
    for (size_t i = 0; i < N; i++)
        cs[i] = i < 2 * ROUTES ? small_call((int)(i % ROUTES), 1, 3)
                               : heavy_call((int)(i % ROUTES), 64);
    send_all(s.port, cs, N);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_ends(&a, 200, NULL, "the request computing");
    assert_ends(&b, 200, NULL, "the request waiting");
    int refused = 0;
    for (size_t i = 0; i < N; i++) {
        /* Taken only once the worker and the queue were free again: after
         * the first heavy request ended (had this machine been too slow to
         * send them while it ran). */
        if (cs[i].r.rc == CURLE_OK && cs[i].r.status == 200) {
            ck_assert_msg(cs[i].end > a.end, "request %zu on %s answered while the queue was full",
                          i, route_names[cs[i].route]);
        } else {
            assert_ends(&cs[i], 503, "overloaded", "a request finding the queue full");
            refused++;
        }
        call_free(&cs[i]);
    }
    printf("full queue: %d of %d requests refused at once, the others taken once it emptied\n",
           refused, N);
    call_free(&a);
    call_free(&b);
    finish(&s);
}
END_TEST

/* ---- stalled requests ----------------------------------------------------------------- */

typedef struct staller {
    unsigned port;
    const char *path;
    int headers_only; /* stall in the headers; else in the body */
    char *raw;
    double seconds;
} staller;

static void *stall_thread(void *arg) {
    staller *st = arg;
    double t0 = now();
    int fd = hs_raw_open(st->port);
    char req[256];
    if (st->headers_only)
        snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty", st->path);
    else
        snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Content-Length: 100\r\n\r\n{\"model\":",
                 st->path);
    if (fd >= 0 && hs_raw_send(fd, req, strlen(req)) == 0) st->raw = hs_raw_recv(fd, 1.0 + SLACK);
    if (fd >= 0) close(fd);
    st->seconds = now() - t0;
    return NULL;
}

/* Headers or a body that stop coming: 408 after --connection-timeout, on
 * every route, many at once, and the server serves on. */
START_TEST(stalled_requests_time_out) {
    hs_server s;
    const char *flags[] = {"--workers", "2", "--connection-timeout", "1", NULL};
    start(&s, flags);
    static const char *const paths[ROUTES] = {"/v1/attention", "/v1/attention/batch",
                                              "/v2/models/demo-4d/infer"};
    enum { N = 2 * ROUTES };
    staller st[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        st[i] = (staller){s.port, paths[i % ROUTES], i >= ROUTES, NULL, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, stall_thread, &st[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s stalled in its %s", st[i].path,
                 st[i].headers_only ? "headers" : "body");
        ck_assert_msg(st[i].raw && *st[i].raw, "%s: no answer in %.1f s", what, st[i].seconds);
        ck_assert_int_eq(raw_status(st[i].raw, what), 408);
        /* the protocol's error body where the route was known */
        const char *body = strstr(st[i].raw, "\r\n\r\n") + 4;
        json_t *j = json_loads(body, 0, NULL);
        int v2 = i % ROUTES == V2 && !st[i].headers_only;
        ck_assert_msg(
            j && (v2 ? json_is_string(json_object_get(j, "error"))
                     : json_is_string(json_object_get(json_object_get(j, "error"), "code"))),
            "%s: 408 without its error body: %s", what, body);
        json_decref(j);
        free(st[i].raw);
    }
    for (int route = 0; route < ROUTES; route++) {
        call c = small_call(route, 1, 2);
        send_call(s.port, &c);
        assert_ends(&c, 200, NULL, "a request after the stalled ones");
        call_free(&c);
    }
    finish(&s);
}
END_TEST

/* ---- shutting down while requests wait ---------------------------------------------------- */

START_TEST(sigterm_while_requests_wait) {
    hs_server s;
    const char *flags[] = {
        "--workers", "1", "--queue-depth", "8", "--inline-max-flops", "0", "--connection-timeout",
        "3",         NULL};
    start(&s, flags);
    /* one computing, one of each route waiting */
    enum { N = 1 + ROUTES };
    call cs[N];
    caller k[N];
    pthread_t t[N];
    cs[0] = heavy_call(V1, 1536);
    for (int i = 1; i < N; i++)
        cs[i] = heavy_call((i - 1) % ROUTES, 256);
    k[0] = (caller){s.port, &cs[0]};
    ck_assert_int_eq(pthread_create(&t[0], NULL, call_thread, &k[0]), 0);
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_workers_busy ", 1, 30), 1);
    for (int i = 1; i < N; i++) {
        k[i] = (caller){s.port, &cs[i]};
        ck_assert_int_eq(pthread_create(&t[i], NULL, call_thread, &k[i]), 0);
    }
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_queue_depth ", ROUTES, 30), ROUTES);

    /* a connection open before the signal, its request sent during the
     * drain; an upload begun before it and never finished */
    int open_fd = hs_raw_open(s.port);
    ck_assert_int_ge(open_fd, 0);
    int stalled = hs_raw_open(s.port);
    ck_assert_int_ge(stalled, 0);
    const char *part = "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":";
    ck_assert_int_eq(hs_raw_send(stalled, part, strlen(part)), 0);
    /* and an upload begun before it and finished during the drain */
    call upload = small_call(V1, 1, 2);
    int finishing = open_upload(s.port, upload.body, upload.len, 10);
    ck_assert_int_ge(hs_wait_metric_at_least(s.port, "\nattn_http_requests_in_flight ", N + 3, 30),
                     N + 3);

    hs_signal(&s, SIGTERM);
    /* "draining" is logged as the signal is taken, a moment before the
     * server refuses new work; this line once it does */
    ck_assert(hs_wait_log(&s, "new work refused from now on", 30));
    call late = small_call(V1, 1, 2);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Connection: close\r\nContent-Length: %zu\r\n\r\n",
             late.len);
    ck_assert_int_eq(hs_raw_send(open_fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(open_fd, late.body, late.len), 0);
    char *raw = hs_raw_recv(open_fd, ANSWER_TIMEOUT);
    ck_assert_int_eq(raw_status(raw, "a request sent during the drain"), 503);
    ck_assert_msg(strstr(raw, "\"shutting_down\"") && strstr(raw, "Retry-After:"),
                  "not shutting_down with Retry-After: %.300s", raw);
    free(raw);
    close(open_fd);
    call_free(&late);

    ck_assert_int_eq(hs_raw_send(finishing, upload.body + upload.len - 10, 10), 0);
    raw = hs_raw_recv(finishing, ANSWER_TIMEOUT);
    /* received before the drain: computed, or refused as shutting down */
    long st = raw_status(raw, "an upload finished during the drain");
    ck_assert_msg(st == 200 || (st == 503 && strstr(raw, "\"shutting_down\"")),
                  "an upload finished during the drain: %.300s", raw);
    free(raw);
    close(finishing);
    call_free(&upload);

    /* a new connection is refused, not left open */
    hs_response r;
    CURLcode rc = hs_exchange(s.port, "GET", "/healthz", NULL, NULL, 0, ANSWER_TIMEOUT, &r);
    ck_assert_msg(rc != CURLE_OPERATION_TIMEDOUT, "a connection during the drain left hanging");
    hs_response_free(&r);

    /* the stalled upload gets its 408 */
    raw = hs_raw_recv(stalled, 3.0 + SLACK);
    ck_assert_int_eq(raw_status(raw, "an upload stalled across the drain"), 408);
    free(raw);
    close(stalled);

    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_ends(&cs[i], 200, NULL,
                    i ? "a request waiting at SIGTERM" : "the request computing");
        call_free(&cs[i]);
    }
    int status = hs_wait(&s, ANSWER_TIMEOUT);
    char *log = hs_log(&s);
    ck_assert_msg(status == 0, "exit status %d; log:\n%s", status, log ? log : "");
    ck_assert_ptr_null(hs_log_problem(log));
    free(log);
    finish(&s);
}
END_TEST

/* A client that never reads its (large) answer: its connection is closed
 * once it has made no progress for --connection-timeout, and the drain
 * does not wait for it longer. */
START_TEST(unread_answer_does_not_hold_the_drain) {
    hs_server s;
    const char *flags[] = {"--workers", "1", "--connection-timeout", "2", NULL};
    start(&s, flags);
    call c = heavy_call(V1, 1024); /* its embeddings: about 10 MB of JSON */
    int fd = hs_raw_open_rcvbuf(s.port, 4096);
    ck_assert_int_ge(fd, 0);
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/attention HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             c.len);
    ck_assert_int_eq(hs_raw_send(fd, head, strlen(head)), 0);
    ck_assert_int_eq(hs_raw_send(fd, c.body, c.len), 0);
    /* computed once its first bytes come; the rest stays in the sockets */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, (int)(ANSWER_TIMEOUT * 1000)), 1);
    double t0 = now();
    hs_signal(&s, SIGTERM);
    int status = hs_wait(&s, 2.0 + SLACK);
    printf("drain with an unread answer: exit %d after %.1f s\n", status, now() - t0);
    ck_assert_msg(status == 0, "exit status %d %.1f s after SIGTERM", status, now() - t0);
    close(fd);
    call_free(&c);
    finish(&s);
}
END_TEST

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    Suite *s = suite_create("watchdog");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, limits_refuse_on_every_route, 0,
                        (int)(sizeof limit_cases / sizeof limit_cases[0]));
    tcase_add_test(tc, bodies_too_large_on_every_route);
    tcase_add_test(tc, body_budget_on_every_route);
    tcase_add_test(tc, budget_below_body_refused_at_start);
    suite_add_tcase(s, tc);
    tc = tcase_create("waits");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, full_queue_on_every_route);
    tcase_add_test(tc, unsent_answers_refuse_on_every_route);
    tcase_add_test(tc, stalled_requests_time_out);
    tcase_add_test(tc, sigterm_while_requests_wait);
    tcase_add_test(tc, unread_answer_does_not_hold_the_drain);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
