/*
 * main.c — start, wait for a signal, drain, exit.
 *
 * Signals (signals.h) wake the main thread; the threads we create
 * (libmicrohttpd's and the workers) are started with TERM, INT and HUP
 * blocked, so that their system calls are not interrupted.
 *
 * Models. The store (store/store.h) is loaded from --models-dir before the
 * server listens, each file read into memory (or mapped, with
 * --map-models); a file that fails refuses the start unless
 * --skip-bad-models. SIGHUP reloads the directory on the main thread: a new
 * set that loads replaces the old one atomically (workers pick it up
 * between jobs, requests already running finish on the weights they
 * started with); a directory that fails to load leaves the old set serving
 * and the reason in the log. The same SIGHUP reloads --api-keys-file
 * (keys.h), with the same rule: a file that fails leaves the old keys.
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

#include "api/call.h"
#include "server/config.h"
#include "server/http.h"
#include "server/job.h"
#include "server/keys.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "server/route.h"
#include "server/signals.h"
#include "store/store.h"

extern char **environ;

static void log_skipped_model(void *ctx, const char *file, const char *message) {
    (void)ctx;
    (void)file; /* the message names the file */
    srv_log_info("models: skipped %s", message);
}

/* Loads the models directory into *out (an empty set when there is none).
 * Returns 0, or -1 with the reason in err. */
static int models_load(const cfg_config *cfg, store_set **out, attn_error *err) {
    if (!cfg->models_dir[0]) {
        *out = store_set_create_empty();
        return *out ? 0 : store_error_set(err, "models", "out of memory");
    }
    store_load_options opt = {cfg->skip_bad_models, log_skipped_model, NULL, cfg->map_models};
    return store_set_load(out, cfg->models_dir, &opt, err);
}

static void models_log(const char *what, const store_set *set) {
    size_t mapped = 0, owned = 0;
    store_set_bytes(set, &mapped, &owned);
    srv_log_info("models: %s %zu model(s), %zu bytes mapped, %zu bytes in memory", what,
                 store_set_count(set), mapped, owned);
}

/* SIGHUP: the key file's keys replace the set only when the whole file
 * reads; the log gives their count, never a key. */
static void keys_reload(const cfg_config *cfg, srv_keys *keys) {
    attn_error err;
    long n = srv_keys_load(keys, cfg->api_keys_file, &err);
    if (n < 0)
        srv_log_info("api keys: reload failed, the keys before stay in force: %s", err.message);
    else
        srv_log_info("api keys: reloaded, %ld key%s", n, n == 1 ? "" : "s");
}

/* SIGHUP: a new set replaces the old one only when it loads. */
static void models_reload(const cfg_config *cfg, store *models) {
    if (!cfg->models_dir[0]) {
        srv_log_info("signal %d: no --models-dir; nothing to reload", SIGHUP);
        return;
    }
    store_set *set = NULL;
    attn_error err;
    if (models_load(cfg, &set, &err) != 0) {
        srv_log_info("models: reload failed, the old set keeps serving: %s", err.message);
        return;
    }
    models_log("reloaded", set);
    store_replace(models, set);
}

/* What main() starts, stopped in reverse by services_stop: each part NULL
 * until started, so one function unwinds any failed start. */
typedef struct services {
    store *models;
    srv_metrics *metrics;
    pool *workers;
    srv_keys *keys;
    srv_http *http;
} services;

static void services_stop(services *s) {
    srv_http_stop(s->http);
    pool_destroy(s->workers);
    srv_metrics_destroy(s->metrics);
    store_destroy(s->models);
    srv_keys_destroy(s->keys);
}

/* Starts every part. Returns 0, or -1 with the reason in err and whatever
 * had started stopped again. */
static int services_start(services *s, const cfg_config *cfg, const api_limits *limits,
                          long *n_keys, attn_error *err) {
    *s = (services){0};
    store_set *initial = NULL;
    if (models_load(cfg, &initial, err) != 0) return -1;
    models_log("loaded", initial);
    if (!(s->models = store_create(initial))) goto out_of_memory;
    s->metrics = srv_metrics_create();
    s->workers = pool_create(cfg->workers, cfg->queue_depth, srv_job_worker_init,
                             srv_job_worker_fini, s->models);
    if (!s->metrics || !s->workers) {
        attn_error_set(err, 0, "server_start_failed", NULL, "could not start %zu workers",
                       cfg->workers);
        goto fail;
    }
    if (!(s->keys = srv_keys_create())) goto out_of_memory;
    if (cfg->api_keys_file[0] && (*n_keys = srv_keys_load(s->keys, cfg->api_keys_file, err)) < 0)
        goto fail;
    if (!(s->http = srv_http_start(cfg, limits, s->workers, s->models, s->metrics, s->keys, err)))
        goto fail;
    return 0;
out_of_memory:
    attn_error_set(err, 0, "server_start_failed", NULL, "out of memory");
fail:
    services_stop(s);
    return -1;
}

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

    api_limits limits = {
        .max_tokens = cfg.max_tokens,
        .max_batch = cfg.max_batch,
        .max_heads = cfg.max_heads,
        .max_d_model = cfg.max_d_model,
        .max_flops = cfg.max_flops,
        .max_json_depth = cfg.max_json_depth,
        .max_string_bytes = cfg.max_string_bytes,
        .max_response_bytes = cfg.max_response_bytes,
        .max_workspace_bytes = cfg.max_workspace_bytes,
    };

    /* Threads made from here on inherit the mask (see the top comment). */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);

    services s;
    long n_keys = 0;
    if (services_start(&s, &cfg, &limits, &n_keys, &err) != 0) {
        fprintf(stderr, "attention-server: %s\n", err.message);
        return 1;
    }
    if (cfg.api_keys_file[0]) {
        char open[256];
        srv_route_open_paths(open, sizeof open);
        srv_log_info("api keys: %ld loaded; required on every route but %s", n_keys, open);
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
        if (srv_signals_take_reload() && !srv_signals_stop()) {
            models_reload(&cfg, s.models);
            if (cfg.api_keys_file[0]) keys_reload(&cfg, s.keys);
        }
    }
    srv_log_info("signal %d: draining", srv_signals_stop());
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int watching = srv_signals_watch_start();
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    srv_http_drain(s.http);
    services_stop(&s);
    if (watching) srv_signals_watch_stop();
    srv_log_info("drained; exiting");
    return 0;
}
