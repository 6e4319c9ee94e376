/*
 * main.c — start, wait for a signal, drain, exit.
 *
 * Signals (signals.h) wake the main thread; the threads we create
 * (libmicrohttpd's and the workers) are started with TERM, INT and HUP
 * blocked, so that their system calls are not interrupted.
 *
 * Models and keys. srv_services_start (services.h) loads --models-dir and
 * --api-keys-file, then starts the workers and the daemon; a model file
 * that fails refuses the start unless --skip-bad-models. SIGHUP reloads
 * both on the main thread (srv_services_reload): a new set replaces the
 * old one only when it loads whole.
 *
 * Order. The main thread:
 *
 *   1. waits for the first TERM or INT, reloading once for each burst of
 *      HUPs (a TERM that comes during a reload is acted on right after it);
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/config.h"
#include "server/http.h"
#include "server/log.h"
#include "server/route.h"
#include "server/services.h"
#include "server/signals.h"

extern char **environ;

int main(int argc, char **argv) {
    /* Whole lines per write, so log readers never see half a line. */
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (srv_signals_install() != 0) {
        fprintf(stderr, "attention-server: cannot install signal handlers: %s\n", strerror(errno));
        return 1;
    }
    cfg_config cfg;
    attn_error err;
    if (cfg_load(&cfg, argc, argv, environ, &err) != 0) {
        fprintf(stderr, "attention-server: %s\n", err.message);
        return 2;
    }
    if (cfg.help) {
        cfg_print_help(stdout, argv[0]);
        return 0;
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
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);

    srv_services s;
    if (srv_services_start(&s, &cfg, &err) != 0) {
        fprintf(stderr, "attention-server: %s\n", err.message);
        return 1;
    }
    if (cfg.api_keys_file[0]) {
        char open[256];
        srv_route_open_paths(open, sizeof open);
        srv_log_info("api keys: %ld loaded; required on every route but %s", s.n_keys, open);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    srv_log_info("listening bind=%s port=%u workers=%zu io_threads=%zu queue_depth=%zu", cfg.bind,
                 srv_http_port(s.http), cfg.workers, cfg.io_threads, cfg.queue_depth);
    /* Where a person on this machine opens the page (`make run` prints it). */
    const char *host = strcmp(cfg.bind, "0.0.0.0") == 0 ? "127.0.0.1"
                       : strcmp(cfg.bind, "::") == 0    ? "::1"
                                                        : cfg.bind;
    int v6 = strchr(host, ':') != NULL;
    srv_log_info("the teaching page: http://%s%s%s:%u/", v6 ? "[" : "", host, v6 ? "]" : "",
                 srv_http_port(s.http));

    /* Until TERM or INT: one reload for however many HUPs came meanwhile. */
    while (!srv_signals_stop()) {
        srv_signals_wait();
        if (srv_signals_take_reload() && !srv_signals_stop()) srv_services_reload(&s, &cfg);
    }
    srv_log_info("signal %d: draining", srv_signals_stop());
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int watching = srv_signals_watch_start();
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    srv_http_drain(s.http);
    srv_services_stop(&s);
    if (watching) srv_signals_watch_stop();
    srv_log_info("drained; exiting");
    return 0;
}
