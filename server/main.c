/*
 * main.c — start, wait for a signal, drain, exit.
 *
 * Signals. SIGTERM and SIGINT get a handler that only write()s the signal
 * number to a self-pipe (async-signal-safe, errno kept); the main thread
 * reads the pipe. A mask alone is not enough: OpenBLAS starts its thread
 * pool when the library is loaded, before main() runs, so those threads
 * never inherit a mask set here, and a signal the main thread was not
 * waiting for in sigwait() would be delivered to one of them with its
 * default action — ending the process in the middle of a drain. With a
 * handler installed for the whole process, whichever thread the kernel
 * picks only writes a byte. The threads we create (libmicrohttpd's and the
 * workers) are still started with both signals blocked, so that their
 * system calls are not interrupted; the main thread unblocks them again.
 * SIGPIPE is ignored: a client that hangs up is an error return, not death.
 *
 * Order. The main thread:
 *
 *   1. waits for the first byte on the pipe;
 *   2. starts a small watcher thread that logs any further signal and
 *      otherwise ignores it — a second SIGTERM during the drain must not
 *      cut the in-flight requests short;
 *   3. drains the HTTP side (srv_http_drain): stop accepting, readyz 503,
 *      wait until every received request is answered;
 *   4. stops the daemon;
 *   5. destroys the pool, which runs anything still queued (nothing, after
 *      the drain) and joins the workers;
 *   6. stops the watcher (a 0 byte on the pipe) and returns 0.
 *
 * This is the only place the process exits: 2 for a bad configuration,
 * 1 when it cannot start, 0 after a clean drain.
 */
#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/request.h"
#include "server/config.h"
#include "server/http.h"
#include "server/job.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/pool.h"

extern char **environ;

/* The self-pipe: [0] read by the main thread, [1] written by the handler. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    /* Non-blocking: with the pipe full, a signal is already pending. */
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
    errno = saved;
}

/* Installs on_signal for SIGTERM and SIGINT. Returns 0 or -1. */
static int sig_install(void) {
    if (pipe2(sig_pipe, O_CLOEXEC) != 0) return -1;
    if (fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK) != 0) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) return -1;
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The next signal number from the pipe (0: the watcher should stop). */
static int sig_next(void) {
    for (;;) {
        unsigned char b;
        ssize_t r = read(sig_pipe[0], &b, 1);
        if (r == 1) return b;
        if (r < 0 && errno == EINTR) continue;
        return 0; /* cannot happen: we hold the write end */
    }
}

/* Logs signals that arrive while draining; they change nothing. */
static void *sig_watch(void *arg) {
    (void)arg;
    int sig;
    while ((sig = sig_next()) != 0)
        srv_log_info("signal %d: already draining; ignored", sig);
    return NULL;
}

int main(int argc, char **argv) {
    /* Whole lines per write, so log readers never see half a line. */
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (sig_install() != 0) {
        fprintf(stderr, "attention-server: cannot install signal handlers: %s\n", strerror(errno));
        return 1;
    }
    cfg_config cfg;
    char err[512];
    int rc = cfg_load(&cfg, argc, argv, environ, err, sizeof err);
    if (rc == CFG_HELP) {
        cfg_print_help(stdout, argv[0]);
        return 0;
    }
    if (rc != CFG_OK) {
        fprintf(stderr, "attention-server: %s\n", err);
        return 2;
    }

    /* OpenBLAS threading: one BLAS thread per worker, since the workers
     * already use every core. The engine's measurements behind this choice
     * are in bench/README.md; change it here and only here. */
    openblas_set_num_threads(1);

    /* Threads made from here on inherit the mask (see the top comment). */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, &old);

    api_limits limits = {
        .max_tokens = cfg.max_tokens,
        .max_heads = cfg.max_heads,
        .max_d_model = cfg.max_d_model,
        .max_flops = cfg.max_flops,
        .max_response_bytes = cfg.max_response_bytes,
        .max_workspace_bytes = cfg.max_workspace_bytes,
    };

    srv_metrics *metrics = srv_metrics_create();
    pool *workers =
        pool_create(cfg.workers, cfg.queue_depth, srv_job_worker_init, srv_job_worker_fini, NULL);
    if (!metrics || !workers) {
        fprintf(stderr, "attention-server: could not start %zu workers\n", cfg.workers);
        pool_destroy(workers);
        srv_metrics_destroy(metrics);
        return 1;
    }
    srv_http *http = srv_http_start(&cfg, &limits, workers, metrics, err, sizeof err);
    if (!http) {
        fprintf(stderr, "attention-server: %s\n", err);
        pool_destroy(workers);
        srv_metrics_destroy(metrics);
        return 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    srv_log_info("listening bind=%s port=%u workers=%zu io_threads=%zu queue_depth=%zu", cfg.bind,
                 srv_http_port(http), cfg.workers, cfg.io_threads, cfg.queue_depth);

    int sig = sig_next();
    srv_log_info("signal %d: draining", sig);
    pthread_t watcher;
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int watching = pthread_create(&watcher, NULL, sig_watch, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    srv_http_drain(http);
    srv_http_stop(http);
    pool_destroy(workers);
    srv_metrics_destroy(metrics);
    if (watching) {
        unsigned char zero = 0;
        while (write(sig_pipe[1], &zero, 1) != 1 && (errno == EAGAIN || errno == EINTR))
            usleep(1000); /* a pipe full of signals: the watcher is emptying it */
        pthread_join(watcher, NULL);
    }
    srv_log_info("drained; exiting");
    return 0;
}
