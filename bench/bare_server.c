/*
 * bare_server.c — the floor for request overhead: a libmicrohttpd server
 * with the same threading as ours (internal polling thread pool, epoll)
 * that reads a POST body into memory and answers a fixed JSON body, with
 * no decoding, no computing and no worker pool.
 *
 *   bare_server PORT [IO_THREADS]
 *
 * bench/http.sh runs wrk against it and against attention-server in the
 * same run; the ratio of their requests/s is what our decode, queue,
 * compute, encode and suspend/resume cost per request.
 */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char answer[] = "{\"ok\":true}";

typedef struct body {
    size_t len;
} body;

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    body *b = *con_cls;
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b) return MHD_NO;
        *con_cls = b;
        return MHD_YES;
    }
    if (*upload_size) {
        b->len += *upload_size; /* read and counted, as a real server must */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof answer - 1, (void *)answer, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)conn, (void)toe;
    free(*con_cls);
    *con_cls = NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [IO_THREADS]\n", argv[0]);
        return 2;
    }
    unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)atoi(argv[1]),
                         NULL, NULL, on_access, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "bare_server: cannot listen on port %s\n", argv[1]);
        return 1;
    }
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    return 0;
}
