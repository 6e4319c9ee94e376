/*
 * main.c — start, wait for a signal, drain, exit.
 *
 * Order matters. SIGTERM and SIGINT are blocked before any thread exists,
 * so every thread inherits the mask and the signals stay pending until the
 * main thread takes them with sigwait(): no handler runs, so none can do
 * unsafe work. The main thread then:
 *
 *   1. drains the HTTP side (srv_http_drain): stop accepting, readyz 503,
 *      wait until every received request is answered;
 *   2. stops the daemon;
 *   3. destroys the pool, which runs anything still queued (nothing, after
 *      the drain) and joins the workers;
 *   4. returns 0.
 *
 * This is the only place the process exits: 2 for a bad configuration,
 * 1 when it cannot start, 0 after a clean drain.
 */
#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "api/request.h"
#include "server/config.h"
#include "server/http.h"
#include "server/job.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/pool.h"

extern char **environ;

int main(int argc, char **argv) {
    /* Whole lines per write, so log readers never see half a line. */
    setvbuf(stderr, NULL, _IOLBF, 0);
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

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

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
    srv_log_info("listening bind=%s port=%u workers=%zu io_threads=%zu queue_depth=%zu", cfg.bind,
                 srv_http_port(http), cfg.workers, cfg.io_threads, cfg.queue_depth);

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    srv_log_info("signal %d: draining", sig);
    srv_http_drain(http);
    srv_http_stop(http);
    pool_destroy(workers);
    srv_metrics_destroy(metrics);
    srv_log_info("drained; exiting");
    return 0;
}
