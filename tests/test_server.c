/*
 * test_server.c — unit tests of server/: configuration, the worker pool,
 * metrics rendering, request ids, the small HTTP parsers and routing, the
 * pool runner that splits a computation (split.c), and the job's paths. No sockets; test_http.c
 * covers the running server.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server/config.h"
#include "server/framing.h"
#include "server/headers.h"
#include "server/http.h"
#include "server/job.h"
#include "server/keys.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "server/reqid.h"
#include "server/route.h"
#include "server/split.h"
#include "store/store.h"
#include "tests/alloc_count.h"
#include "tests/fixtures.h"
#include "tests/oip_client.h"

/* ---------------------------------------------------------------- config */

/* What load() found. */
enum { CFG_OK = 0, CFG_HELP = 1, CFG_ERROR = -1 };

/* cfg_load, its message copied into err (256 bytes). */
static int load(cfg_config *cfg, char **argv, char **envp, char *err) {
    int argc = 0;
    while (argv[argc])
        argc++;
    attn_error e = {0};
    int rc = cfg_load(cfg, argc, argv, envp, &e);
    snprintf(err, 256, "%.255s", e.message);
    if (rc == 0) return cfg->help ? CFG_HELP : CFG_OK;
    ck_assert_str_eq(e.code, "invalid_config");
    return CFG_ERROR;
}

START_TEST(config_defaults) {
    cfg_config c;
    char err[256] = "";
    char *argv[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv, NULL, err), CFG_OK);
    ck_assert_str_eq(c.bind, "0.0.0.0");
    ck_assert_uint_eq(c.port, 8080);
    ck_assert_uint_eq(c.max_body_bytes, 64u << 20);
    ck_assert_uint_eq(c.max_tokens, 8192);
    ck_assert_uint_eq(c.max_heads, 128);
    ck_assert_uint_eq(c.max_d_model, 16384);
    ck_assert(c.max_flops == 1e12);
    ck_assert_uint_eq(c.max_response_bytes, 256u << 20);
    ck_assert_uint_eq(c.connection_timeout, 30);
    ck_assert_uint_eq(c.max_inflight_bytes, 512u << 20);
    ck_assert_uint_eq(c.max_connections, 512);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_uint_eq(c.workers, (size_t)(cores > 0 ? cores : 1));
    ck_assert_uint_ge(c.queue_depth, 1);
    ck_assert_uint_ge(c.io_threads, 1);
}
END_TEST

START_TEST(config_env_then_flag_wins) {
    cfg_config c;
    char err[256] = "";
    char *envp[] = {"ATTN_PORT=9000", "ATTN_WORKERS=3", "ATTN_BIND=127.0.0.1",
                    "ATTN_PORTX=1",   "OTHER=2",        NULL};
    char *argv1[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv1, envp, err), CFG_OK);
    ck_assert_uint_eq(c.port, 9000);
    ck_assert_uint_eq(c.workers, 3);
    ck_assert_str_eq(c.bind, "127.0.0.1");

    char *argv2[] = {"srv", "--port", "9100", "--workers=5", "--bind", "::1", NULL};
    ck_assert_int_eq(load(&c, argv2, envp, err), CFG_OK);
    ck_assert_uint_eq(c.port, 9100);
    ck_assert_uint_eq(c.workers, 5);
    ck_assert_str_eq(c.bind, "::1");
}
END_TEST

START_TEST(config_suffixes_and_doubles) {
    cfg_config c;
    char err[256] = "";
    char *argv[] = {"srv",         "--max-body-bytes",
                    "2k",          "--max-response-bytes=3M",
                    "--max-flops", "2.5e9",
                    "--port",      "0",
                    NULL};
    ck_assert_int_eq(load(&c, argv, NULL, err), CFG_OK);
    ck_assert_uint_eq(c.max_body_bytes, 2048);
    ck_assert_uint_eq(c.max_response_bytes, 3u << 20);
    ck_assert(c.max_flops == 2.5e9);
    ck_assert_uint_eq(c.port, 0);
}
END_TEST

/* Paths and booleans: --models-dir, --skip-bad-models (a bare flag is true). */
START_TEST(config_models_options) {
    cfg_config c;
    char err[256] = "";
    char *argv0[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv0, NULL, err), CFG_OK);
    ck_assert_str_eq(c.models_dir, "");
    ck_assert_int_eq(c.skip_bad_models, 0);

    char *envp[] = {"ATTN_MODELS_DIR=/srv/models", "ATTN_SKIP_BAD_MODELS=yes", NULL};
    ck_assert_int_eq(load(&c, argv0, envp, err), CFG_OK);
    ck_assert_str_eq(c.models_dir, "/srv/models");
    ck_assert_int_eq(c.skip_bad_models, 1);

    char *argv1[] = {"srv", "--models-dir", "build/models", "--skip-bad-models=false", NULL};
    ck_assert_int_eq(load(&c, argv1, envp, err), CFG_OK);
    ck_assert_str_eq(c.models_dir, "build/models");
    ck_assert_int_eq(c.skip_bad_models, 0);

    char *argv2[] = {"srv", "--skip-bad-models", "--port", "1", NULL};
    ck_assert_int_eq(load(&c, argv2, NULL, err), CFG_OK);
    ck_assert_int_eq(c.skip_bad_models, 1);
    ck_assert_uint_eq(c.port, 1);

    /* --map-models: off by default, a bare flag or the environment turns it on */
    ck_assert_int_eq(load(&c, argv0, NULL, err), CFG_OK);
    ck_assert_int_eq(c.map_models, 0);
    char *argv_map[] = {"srv", "--map-models", NULL};
    ck_assert_int_eq(load(&c, argv_map, NULL, err), CFG_OK);
    ck_assert_int_eq(c.map_models, 1);
    char *envp_map[] = {"ATTN_MAP_MODELS=true", NULL};
    ck_assert_int_eq(load(&c, argv0, envp_map, err), CFG_OK);
    ck_assert_int_eq(c.map_models, 1);
    char *argv_nomap[] = {"srv", "--map-models=no", NULL};
    ck_assert_int_eq(load(&c, argv_nomap, envp_map, err), CFG_OK);
    ck_assert_int_eq(c.map_models, 0);

    char *argv3[] = {"srv", "--skip-bad-models=maybe", NULL};
    ck_assert_int_eq(load(&c, argv3, NULL, err), CFG_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--skip-bad-models"));

    char long_path[5000];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    char *argv4[] = {"srv", "--models-dir", long_path, NULL};
    ck_assert_int_eq(load(&c, argv4, NULL, err), CFG_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--models-dir"));
}
END_TEST

/* Every text option is checked against its own field: a value one byte
 * too long is refused with a message naming the option (from a flag and
 * from the environment), and one exactly at the limit is taken whole.
 * --bind's longest valid address is far below its limit, so at the limit
 * it gets past the length check and is refused as an address. */
static const struct {
    const char *flag, *env;
    size_t cap; /* sizeof the field */
    size_t offset;
    const char *prefix; /* the value: prefix, then 'a's to the length */
    int valid_at_limit;
} text_options[] = {
    {"--bind", "ATTN_BIND", sizeof(((cfg_config *)0)->bind), offsetof(cfg_config, bind), "", 0},
    {"--models-dir", "ATTN_MODELS_DIR", sizeof(((cfg_config *)0)->models_dir),
     offsetof(cfg_config, models_dir), "/", 1},
    {"--api-keys-file", "ATTN_API_KEYS_FILE", sizeof(((cfg_config *)0)->api_keys_file),
     offsetof(cfg_config, api_keys_file), "/", 1},
    {"--cors-origin", "ATTN_CORS_ORIGIN", sizeof(((cfg_config *)0)->cors_origin),
     offsetof(cfg_config, cors_origin), "https://", 1},
};

/* "<prefix>aaa…" of exactly len bytes, malloc'd. */
static char *text_of(const char *prefix, size_t len) {
    char *v = malloc(len + 1);
    size_t p = strlen(prefix);
    memcpy(v, prefix, p);
    memset(v + p, 'a', len - p);
    v[len] = '\0';
    return v;
}

START_TEST(config_text_limits) {
    cfg_config c;
    char err[256] = "";
    size_t cap = text_options[_i].cap;
    const char *flag = text_options[_i].flag;
    char *argv[] = {"srv", (char *)flag, NULL, NULL};

    char *over = text_of(text_options[_i].prefix, cap);
    argv[2] = over;
    ck_assert_int_eq(load(&c, argv, NULL, err), CFG_ERROR);
    ck_assert_msg(strstr(err, flag) && strstr(err, "longer than"), "%s: \"%s\"", flag, err);
    char *env = malloc(strlen(text_options[_i].env) + 1 + cap + 1);
    sprintf(env, "%s=%s", text_options[_i].env, over);
    char *envp[] = {env, NULL}, *argv0[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv0, envp, err), CFG_ERROR);
    ck_assert_msg(strstr(err, flag) && strstr(err, text_options[_i].env), "%s", err);
    free(env);
    free(over);

    char *at = text_of(text_options[_i].prefix, cap - 1);
    argv[2] = at;
    int rc = load(&c, argv, NULL, err);
    if (text_options[_i].valid_at_limit) {
        ck_assert_msg(rc == CFG_OK, "%s of %zu bytes: %s", flag, cap - 1, err);
        ck_assert_str_eq((const char *)&c + text_options[_i].offset, at);
    } else {
        ck_assert_int_eq(rc, CFG_ERROR);
        ck_assert_msg(strstr(err, flag) && !strstr(err, "longer than"), "%s", err);
    }
    free(at);
}
END_TEST

/* Each bad value must fail and the message must name the option. */
static const struct {
    const char *flag, *value, *name;
} bad_values[] = {
    {"--port", "65536", "--port"},
    {"--port", "-1", "--port"},
    {"--port", "80x", "--port"},
    {"--port", "", "--port"},
    {"--workers", "1025", "--workers"},
    {"--queue-depth", "0", "--queue-depth"},
    {"--io-threads", "0", "--io-threads"},
    {"--max-tokens", "abc", "--max-tokens"},
    {"--max-heads", "0", "--max-heads"},
    {"--max-d-model", " 5", "--max-d-model"},
    {"--max-flops", "inf", "--max-flops"},
    {"--max-flops", "nan", "--max-flops"},
    {"--max-flops", "0", "--max-flops"},
    {"--max-flops", "1e12x", "--max-flops"},
    {"--max-body-bytes", "99999999999999999999999", "--max-body-bytes"},
    {"--max-body-bytes", "5q", "--max-body-bytes"},
    {"--connection-timeout", "0", "--connection-timeout"},
    {"--max-inflight-bytes", "0", "--max-inflight-bytes"},
    {"--max-inflight-bytes", "1x", "--max-inflight-bytes"},
    {"--max-inflight-bytes", "1k", "--max-inflight-bytes"}, /* below --max-body-bytes */
    {"--max-connections", "0", "--max-connections"},
    {"--max-connections", "1000001", "--max-connections"},
    {"--max-connections", "1", "--max-connections"}, /* below --io-threads */
    {"--bind", "localhost", "--bind"},
    {"--bind", "1.2.3.4.5", "--bind"},
    {"--cors-origin", "ftp://a.example", "--cors-origin"},
    {"--cors-origin", "https://a.example/path", "--cors-origin"},
    {"--cors-origin", "https://a.example,", "--cors-origin"},
    {"--cors-origin", "https://", "--cors-origin"},
    {"--max-json-depth", "4", "--max-json-depth"},
    {"--max-string-bytes", "10", "--max-string-bytes"},
    {"--inline-max-flops", "-1", "--inline-max-flops"},
};

START_TEST(config_bad_values) {
    cfg_config c;
    char err[256] = "";
    char *argv[] = {"srv", (char *)bad_values[_i].flag, (char *)bad_values[_i].value, NULL};
    ck_assert_int_eq(load(&c, argv, NULL, err), CFG_ERROR);
    ck_assert_msg(strstr(err, bad_values[_i].name), "message \"%s\" lacks %s", err,
                  bad_values[_i].name);
}
END_TEST

START_TEST(config_memory_and_connections) {
    cfg_config c;
    char err[256] = "";
    char *envp[] = {"ATTN_MAX_INFLIGHT_BYTES=2g", "ATTN_MAX_CONNECTIONS=64", NULL};
    char *argv1[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv1, envp, err), CFG_OK);
    ck_assert_uint_eq(c.max_inflight_bytes, (size_t)2 << 30);
    ck_assert_uint_eq(c.max_connections, 64);

    char *argv2[] = {"srv",
                     "--max-inflight-bytes=100k",
                     "--max-body-bytes",
                     "100k",
                     "--max-connections",
                     "3",
                     "--io-threads",
                     "3",
                     NULL};
    ck_assert_int_eq(load(&c, argv2, envp, err), CFG_OK);
    ck_assert_uint_eq(c.max_inflight_bytes, 100 << 10);
    ck_assert_uint_eq(c.max_body_bytes, 100 << 10);
    ck_assert_uint_eq(c.max_connections, 3);

    /* the budget must hold one body of the largest size, and each polling
     * thread needs a connection; both names are in the message */
    char *argv3[] = {"srv", "--max-inflight-bytes=100k", "--max-body-bytes", "101k", NULL};
    ck_assert_int_eq(load(&c, argv3, NULL, err), CFG_ERROR);
    ck_assert_msg(strstr(err, "--max-inflight-bytes") && strstr(err, "--max-body-bytes"), "%s",
                  err);
    char *envp4[] = {"ATTN_IO_THREADS=8", NULL};
    char *argv4[] = {"srv", "--max-connections", "7", NULL};
    ck_assert_int_eq(load(&c, argv4, envp4, err), CFG_ERROR);
    ck_assert_msg(strstr(err, "--max-connections") && strstr(err, "--io-threads"), "%s", err);
}
END_TEST

START_TEST(config_bad_env_and_args) {
    cfg_config c;
    char err[256] = "";
    char *envp[] = {"ATTN_QUEUE_DEPTH=lots", NULL};
    char *argv[] = {"srv", NULL};
    ck_assert_int_eq(load(&c, argv, envp, err), CFG_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--queue-depth"));
    ck_assert_ptr_nonnull(strstr(err, "ATTN_QUEUE_DEPTH"));

    /* a flag does not hide a bad environment value: both are validated */
    char *argv_fix[] = {"srv", "--queue-depth", "4", NULL};
    ck_assert_int_eq(load(&c, argv_fix, envp, err), CFG_ERROR);

    char *argv_unknown[] = {"srv", "--frobnicate", "1", NULL};
    ck_assert_int_eq(load(&c, argv_unknown, NULL, err), CFG_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--frobnicate"));
    char *argv_missing[] = {"srv", "--port", NULL};
    ck_assert_int_eq(load(&c, argv_missing, NULL, err), CFG_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "--port"));
    char *argv_stray[] = {"srv", "8080", NULL};
    ck_assert_int_eq(load(&c, argv_stray, NULL, err), CFG_ERROR);
}
END_TEST

START_TEST(config_help) {
    cfg_config c;
    char err[256] = "";
    char *argv[] = {"srv", "--port", "1", "--help", NULL};
    ck_assert_int_eq(load(&c, argv, NULL, err), CFG_HELP);
    char *argv2[] = {"srv", "-h", NULL};
    ck_assert_int_eq(load(&c, argv2, NULL, err), CFG_HELP);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cfg_print_help(f, "attention-server");
    fclose(f);
    static const char *const expect[] = {
        "--bind",
        "ATTN_BIND",
        "0.0.0.0",
        "--port",
        "ATTN_PORT",
        "8080",
        "--io-threads",
        "ATTN_IO_THREADS",
        "--workers",
        "ATTN_WORKERS",
        "--queue-depth",
        "ATTN_QUEUE_DEPTH",
        "--max-body-bytes",
        "ATTN_MAX_BODY_BYTES",
        "64m",
        "--max-tokens",
        "ATTN_MAX_TOKENS",
        "8192",
        "--max-batch",
        "ATTN_MAX_BATCH",
        "256",
        "--max-heads",
        "ATTN_MAX_HEADS",
        "128",
        "--max-d-model",
        "ATTN_MAX_D_MODEL",
        "16384",
        "--max-flops",
        "ATTN_MAX_FLOPS",
        "1e12",
        "--max-response-bytes",
        "ATTN_MAX_RESPONSE_BYTES",
        "256m",
        "--connection-timeout",
        "ATTN_CONNECTION_TIMEOUT",
        "30",
        "--max-inflight-bytes",
        "ATTN_MAX_INFLIGHT_BYTES",
        "512m",
        "--max-connections",
        "ATTN_MAX_CONNECTIONS",
        "--map-models",
        "ATTN_MAP_MODELS",
        "rename",
        "SIGBUS",
        "--help",
        "answered without an API key: /healthz, /readyz, /, /v2/health/live, /v2/health/ready\n",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg(strstr(text, expect[i]), "help lacks %s", expect[i]);
    free(text);
}
END_TEST

/* ------------------------------------------------------------------ pool */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    atomic_int ran;
    atomic_int entered;
} gate;

static void gate_init(gate *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    atomic_init(&g->ran, 0);
    atomic_init(&g->entered, 0);
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A job that waits for the gate, then counts itself. */
static void gated_job(void *arg, void *wctx) {
    (void)wctx;
    gate *g = arg;
    atomic_fetch_add(&g->entered, 1);
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_add(&g->ran, 1);
}

/* Seconds on the monotonic clock. */
static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The deadline of every wait below, which only a failing test reaches. */
#define WAIT_S 10.0

static void wait_busy(pool *p, size_t want) {
    for (double end = mono_s() + WAIT_S; mono_s() < end; usleep(1000)) {
        size_t busy = 0;
        pool_stats(p, NULL, &busy);
        if (busy == want) return;
    }
    ck_abort_msg("workers never became busy");
}

START_TEST(pool_refuses_when_full) {
    gate g;
    gate_init(&g);
    pool *p = pool_create(1, 2, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    wait_busy(p, 1); /* the first job is running, not queued */
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    size_t queued = 0, busy = 0;
    pool_stats(p, &queued, &busy);
    ck_assert_uint_eq(queued, 2);
    ck_assert_uint_eq(busy, 1);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_FULL);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_FULL);
    gate_open(&g);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&g.ran), 3); /* the refused ones never ran */
}
END_TEST

/* Jobs of a full queue whose `gone` flag is set leave it, in order, and
 * their places are taken; the running job and the others stay. */
typedef struct evictable {
    gate *g;
    int gone;
    int dropped; /* order of drop(), from 1 */
} evictable;

static int evict_order;

static void evictable_job(void *arg, void *wctx) {
    gated_job(((evictable *)arg)->g, wctx);
}

static int evictable_gone(void *arg) {
    return ((evictable *)arg)->gone;
}

static void evictable_drop(void *arg) {
    ((evictable *)arg)->dropped = ++evict_order;
}

START_TEST(pool_evicts_gone_jobs) {
    gate g;
    gate_init(&g);
    evict_order = 0;
    pool *p = pool_create(1, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    evictable running = {.g = &g, .gone = 1}, q[4];
    ck_assert_int_eq(pool_submit(p, evictable_job, &running), POOL_OK);
    wait_busy(p, 1);
    for (int i = 0; i < 4; i++) {
        q[i] = (evictable){.g = &g, .gone = i != 2};
        ck_assert_int_eq(pool_submit(p, evictable_job, &q[i]), POOL_OK);
    }
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_FULL);
    ck_assert_uint_eq(pool_evict(p, evictable_gone, evictable_drop), 3);
    ck_assert_int_eq(q[0].dropped, 1);
    ck_assert_int_eq(q[1].dropped, 2);
    ck_assert_int_eq(q[2].dropped, 0);
    ck_assert_int_eq(q[3].dropped, 3);
    ck_assert_int_eq(running.dropped, 0); /* running, not queued */
    size_t queued = 0;
    pool_stats(p, &queued, NULL);
    ck_assert_uint_eq(queued, 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_FULL);
    ck_assert_uint_eq(pool_evict(p, evictable_gone, evictable_drop), 0);
    gate_open(&g);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&g.ran), 5); /* running, q[2] and the three */
}
END_TEST

static void count_job(void *arg, void *wctx) {
    (void)wctx;
    atomic_fetch_add((atomic_int *)arg, 1);
}

START_TEST(pool_runs_every_job) {
    atomic_int n;
    atomic_init(&n, 0);
    pool *p = pool_create(4, 1000, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    int accepted = 0;
    for (int i = 0; i < 5000; i++) {
        int rc = pool_submit(p, count_job, &n);
        if (rc == POOL_OK)
            accepted++;
        else {
            ck_assert_int_eq(rc, POOL_FULL);
            usleep(100);
        }
    }
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&n), accepted);
    ck_assert_int_gt(accepted, 1000);
}
END_TEST

typedef struct destroy_arg {
    pool *p;
    atomic_int done;
} destroy_arg;

static void *destroy_thread(void *arg) {
    destroy_arg *d = arg;
    pool_destroy(d->p);
    atomic_store(&d->done, 1);
    return NULL;
}

START_TEST(pool_drains_on_destroy) {
    gate g;
    gate_init(&g);
    pool *p = pool_create(2, 10, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    wait_busy(p, 2);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    destroy_arg d = {.p = p};
    atomic_init(&d.done, 0);
    pthread_t t;
    pthread_create(&t, NULL, destroy_thread, &d);
    /* time for a destroy that dropped the queued jobs to return: what is
     * checked is that nothing happens, which no event shows */
    usleep(50000);
    /* destroy waits for the queued jobs instead of dropping them */
    ck_assert_int_eq(atomic_load(&d.done), 0);
    ck_assert_int_eq(atomic_load(&g.ran), 0);
    gate_open(&g);
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&d.done), 1);
    ck_assert_int_eq(atomic_load(&g.ran), 12);
}
END_TEST

static atomic_int inits, finis;

static void *ctx_init(pool *p, void *ctx) {
    (void)p, (void)ctx;
    int *c = malloc(sizeof *c);
    *c = atomic_fetch_add(&inits, 1);
    return c;
}

static void ctx_fini(void *wctx, void *ctx) {
    (void)ctx;
    free(wctx);
    atomic_fetch_add(&finis, 1);
}

static void *failing_init(pool *p, void *ctx) {
    (void)p;
    atomic_int *n = ctx;
    return atomic_fetch_add(n, 1) == 2 ? NULL : malloc(1); /* the third worker fails */
}

static void free_fini(void *wctx, void *ctx) {
    (void)ctx;
    free(wctx);
}

static void ctx_job(void *arg, void *wctx) {
    ck_assert_ptr_nonnull(wctx);
    atomic_fetch_add((atomic_int *)arg, 1);
}

START_TEST(pool_worker_contexts) {
    atomic_init(&inits, 0);
    atomic_init(&finis, 0);
    atomic_int n;
    atomic_init(&n, 0);
    pool *p = pool_create(3, 10, ctx_init, ctx_fini, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(atomic_load(&inits), 3);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(pool_submit(p, ctx_job, &n), POOL_OK);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&n), 10);
    ck_assert_int_eq(atomic_load(&finis), 3);

    atomic_int calls;
    atomic_init(&calls, 0);
    ck_assert_ptr_null(pool_create(4, 10, failing_init, free_fini, &calls));
    ck_assert_ptr_null(pool_create(0, 10, NULL, NULL, NULL));
    ck_assert_ptr_null(pool_create(1, 0, NULL, NULL, NULL));
}
END_TEST

/* pool_try_help: accepted only for a worker idle right now, one helper per
 * idle worker; never when every worker is busy. */
START_TEST(pool_help_only_when_idle) {
    gate g;
    gate_init(&g);
    pool *p = pool_create(2, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g), POOL_OK);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g), POOL_OK);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g), POOL_FULL); /* both promised */
    wait_busy(p, 2);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g), POOL_FULL);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK); /* requests still queue */
    size_t queued = 0;
    pool_stats(p, &queued, NULL);
    ck_assert_uint_eq(queued, 1);
    gate_open(&g);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&g.ran), 3);

    /* one worker busy, one idle: one helper */
    gate g2;
    gate_init(&g2);
    p = pool_create(2, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(pool_submit(p, gated_job, &g2), POOL_OK);
    wait_busy(p, 1);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g2), POOL_OK);
    ck_assert_int_eq(pool_try_help(p, gated_job, &g2), POOL_FULL);
    gate_open(&g2);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&g2.ran), 2);
}
END_TEST

/* ----------------------------------------------------------------- split */

enum { SPLIT_TASKS = 24 };

typedef struct split_probe {
    atomic_int ran[SPLIT_TASKS];
    atomic_int on_caller;     /* tasks run with the caller's workspace */
    atomic_int caller_thread; /* ... and on the caller's thread */
    atomic_int null_ws;       /* tasks given no workspace: never */
    atomic_int on_helpers;    /* tasks run on a helper's workspace */
    pthread_t caller;
    attn_workspace *caller_ws;
    useconds_t sleep_us;
    int caller_waits; /* the caller's tasks wait until a helper has run one */
} split_probe;

static void probe_init(split_probe *pr, attn_workspace *ws, useconds_t sleep_us) {
    for (int t = 0; t < SPLIT_TASKS; t++)
        atomic_init(&pr->ran[t], 0);
    atomic_init(&pr->on_caller, 0);
    atomic_init(&pr->caller_thread, 0);
    atomic_init(&pr->null_ws, 0);
    atomic_init(&pr->on_helpers, 0);
    pr->caller = pthread_self();
    pr->caller_ws = ws;
    pr->sleep_us = sleep_us;
    pr->caller_waits = 0;
}

static void probe_task(void *arg, size_t index, attn_workspace *ws) {
    split_probe *pr = arg;
    ck_assert_uint_lt(index, SPLIT_TASKS);
    atomic_fetch_add(&pr->ran[index], 1);
    if (!ws) atomic_fetch_add(&pr->null_ws, 1);
    if (ws == pr->caller_ws) {
        atomic_fetch_add(&pr->on_caller, 1);
        if (pthread_equal(pthread_self(), pr->caller)) atomic_fetch_add(&pr->caller_thread, 1);
        for (double end = mono_s() + WAIT_S;
             pr->caller_waits && !atomic_load(&pr->on_helpers) && mono_s() < end;)
            usleep(100);
    } else if (ws) {
        atomic_fetch_add(&pr->on_helpers, 1);
    }
    if (pr->sleep_us) usleep(pr->sleep_us);
}

static void probe_check_once(split_probe *pr, int count) {
    for (int t = 0; t < SPLIT_TASKS; t++)
        ck_assert_int_eq(atomic_load(&pr->ran[t]), t < count);
    /* the caller's workspace only ever on the caller's thread */
    ck_assert_int_eq(atomic_load(&pr->on_caller), atomic_load(&pr->caller_thread));
    int null_ws = atomic_load(&pr->null_ws);
    ck_assert_int_eq(null_ws, 0);
}

/* Idle workers help: every task once, some on helpers (the caller's
 * tasks wait for the first of them, however late its worker wakes). */
START_TEST(split_idle_workers_help) {
    pool *p = pool_create(2, 4, srv_job_worker_init, srv_job_worker_fini, NULL);
    ck_assert_ptr_nonnull(p);
    attn_workspace *ws = attn_workspace_create();
    split_probe pr;
    probe_init(&pr, ws, 2000);
    pr.caller_waits = 1;
    srv_split split = {.pool = p, .ws = ws};
    attn_runner r = srv_split_runner(&split);
    r.run(r.ctx, probe_task, &pr, SPLIT_TASKS);
    srv_split_end(&split);
    probe_check_once(&pr, SPLIT_TASKS);
    ck_assert_uint_ge(split.helpers, 1);
    ck_assert_uint_le(split.helpers, 2);
    ck_assert_int_lt(atomic_load(&pr.on_caller), SPLIT_TASKS); /* helpers took some */
    ck_assert_int_gt(atomic_load(&pr.on_caller), 0);
    pool_destroy(p);
    attn_workspace_destroy(ws);
}
END_TEST

/* A helper is the computation's, not one run's. Each round below is one
 * computation on a pool of one worker besides this thread (a server of 2
 * workers running one request), begun with that worker asleep: a run of 2
 * instant tasks, which this thread finishes before the worker is up, then
 * relay runs back to back. In a relay run this thread's task waits until
 * the other is taken, and that one, on a helper, takes 100 µs (busy, so
 * that this thread watches, awake, and runs the next run the moment it
 * ends). The helper accepted in the first run must work in every relay
 * run: in the first one, though its own run was over before it started;
 * in the others, though its task ended last. */
typedef struct relay {
    attn_workspace *caller_ws;
    atomic_int started;   /* tasks started in this run */
    atomic_int on_helper; /* ... of them on a helper */
} relay;

static void instant_task(void *arg, size_t index, attn_workspace *ws) {
    (void)arg, (void)index, (void)ws;
}

static void relay_task(void *arg, size_t index, attn_workspace *ws) {
    relay *rl = arg;
    (void)index;
    atomic_fetch_add(&rl->started, 1);
    if (ws != rl->caller_ws) {
        atomic_fetch_add(&rl->on_helper, 1);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 100000);
        return;
    }
    /* until the other task is taken */
    for (double end = mono_s() + WAIT_S; atomic_load(&rl->started) < 2 && mono_s() < end;)
        usleep(10);
}

START_TEST(split_helper_stays_for_next_runs) {
    pool *p = pool_create(1, 4, srv_job_worker_init, srv_job_worker_fini, NULL);
    ck_assert_ptr_nonnull(p);
    attn_workspace *ws = attn_workspace_create();
    relay rl = {.caller_ws = ws};
    enum { ROUNDS = 8, RELAYS = 5 };
    for (int round = 0; round < ROUNDS; round++) {
        usleep(5000); /* the worker watches for work for 0.2 ms, then sleeps */
        srv_split split = {.pool = p, .ws = ws};
        attn_runner r = srv_split_runner(&split);
        r.run(r.ctx, instant_task, NULL, 2);
        for (int k = 0; k < RELAYS; k++) {
            atomic_init(&rl.started, 0);
            atomic_init(&rl.on_helper, 0);
            r.run(r.ctx, relay_task, &rl, 2);
            ck_assert_msg(atomic_load(&rl.on_helper) > 0, "round %d, relay %d: no helper", round,
                          k);
        }
        srv_split_end(&split);
        ck_assert_uint_ge(split.helpers, 1);
    }
    pool_destroy(p);
    attn_workspace_destroy(ws);
}
END_TEST

/* Workers with no context (a pool made without init) have no workspace to
 * give a task: they are accepted as helpers but take nothing, and the
 * caller runs every task on its own workspace. */
START_TEST(split_workers_without_context) {
    pool *p = pool_create(2, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    attn_workspace *ws = attn_workspace_create();
    split_probe pr;
    probe_init(&pr, ws, 2000);
    srv_split split = {.pool = p, .ws = ws};
    attn_runner r = srv_split_runner(&split);
    r.run(r.ctx, probe_task, &pr, SPLIT_TASKS);
    srv_split_end(&split);
    probe_check_once(&pr, SPLIT_TASKS);
    ck_assert_uint_ge(split.helpers, 1);
    ck_assert_int_eq(atomic_load(&pr.caller_thread), SPLIT_TASKS);
    pool_destroy(p);
    attn_workspace_destroy(ws);
}
END_TEST

/* Every worker busy: no helper, the caller runs every task. */
START_TEST(split_busy_pool_caller_does_all) {
    gate g;
    gate_init(&g);
    pool *p = pool_create(2, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    ck_assert_int_eq(pool_submit(p, gated_job, &g), POOL_OK);
    wait_busy(p, 2);
    attn_workspace *ws = attn_workspace_create();
    split_probe pr;
    probe_init(&pr, ws, 0);
    srv_split split = {.pool = p, .ws = ws};
    attn_runner r = srv_split_runner(&split);
    r.run(r.ctx, probe_task, &pr, SPLIT_TASKS);
    srv_split_end(&split);
    probe_check_once(&pr, SPLIT_TASKS);
    ck_assert_uint_eq(split.helpers, 0);
    ck_assert_int_eq(atomic_load(&pr.caller_thread), SPLIT_TASKS);
    gate_open(&g);
    pool_destroy(p);
    ck_assert_int_eq(atomic_load(&g.ran), 2);
    attn_workspace_destroy(ws);
}
END_TEST

/* The pool destroyed right after a run, helpers perhaps still in flight or
 * not yet started (they hold the shared state); and a run inside a pool job
 * while pool_destroy begins (helpers refused: the job does all). Leaks and
 * races show under the sanitizers. */
typedef struct split_in_job {
    pool *p;
    split_probe pr;
    atomic_int done;
} split_in_job;

static void split_job(void *arg, void *wctx) {
    split_in_job *sj = arg;
    srv_worker *w = wctx;
    probe_init(&sj->pr, w->ws, 100);
    srv_split split = {.pool = sj->p, .ws = w->ws};
    attn_runner r = srv_split_runner(&split);
    r.run(r.ctx, probe_task, &sj->pr, SPLIT_TASKS);
    srv_split_end(&split);
    atomic_store(&sj->done, 1);
}

START_TEST(split_shutdown_with_helpers) {
    for (int it = 0; it < 50; it++) {
        pool *p = pool_create(3, 4, srv_job_worker_init, srv_job_worker_fini, NULL);
        ck_assert_ptr_nonnull(p);
        attn_workspace *ws = attn_workspace_create();
        split_probe pr;
        probe_init(&pr, ws, it % 2 ? 0 : 50);
        srv_split split = {.pool = p, .ws = ws};
        attn_runner r = srv_split_runner(&split);
        int count = it % 3 ? SPLIT_TASKS : 2;
        r.run(r.ctx, probe_task, &pr, (size_t)count);
        srv_split_end(&split);
        pool_destroy(p);
        attn_workspace_destroy(ws);
        probe_check_once(&pr, count);
    }
    for (int it = 0; it < 20; it++) {
        split_in_job sj;
        atomic_init(&sj.done, 0);
        sj.p = pool_create(2, 4, srv_job_worker_init, srv_job_worker_fini, NULL);
        ck_assert_ptr_nonnull(sj.p);
        ck_assert_int_eq(pool_submit(sj.p, split_job, &sj), POOL_OK);
        if (it % 2) usleep(200);
        pool_destroy(sj.p);
        ck_assert_int_eq(atomic_load(&sj.done), 1);
        probe_check_once(&sj.pr, SPLIT_TASKS);
    }
}
END_TEST

/* --------------------------------------------------------------- metrics */

static char *render(srv_metrics *m, const srv_metrics_gauges *g) {
    size_t len = 0;
    char *text = srv_metrics_render(m, g, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), len);
    return text;
}

START_TEST(metrics_render) {
    srv_metrics *m = srv_metrics_create();
    ck_assert_ptr_nonnull(m);
    srv_metrics_observe(m, SRV_ROUTE_ATTENTION, 200, 0.003);
    srv_metrics_observe(m, SRV_ROUTE_ATTENTION, 200, 0.2);
    srv_metrics_observe(m, SRV_ROUTE_ATTENTION, 422, 0.0001);
    srv_metrics_observe(m, SRV_ROUTE_OTHER, 404, 0.0001);
    srv_metrics_observe(m, SRV_ROUTE_HEALTHZ, 299, 20.0);  /* odd status, beyond last bucket */
    srv_metrics_observe(m, SRV_ROUTE_ATTENTION, 499, 0.3); /* the client hung up */
    srv_metrics_add_phase(m, SRV_PHASE_COMPUTE, 0.5);
    srv_metrics_gauges g = {.queued = 3,
                            .queue_capacity = 8,
                            .busy_workers = 2,
                            .workers = 2,
                            .in_flight = 5,
                            .body_bytes = 4096,
                            .body_bytes_capacity = 65536,
                            .draining = 1};
    char *t = render(m, &g);

    static const char *const expect[] = {
        "# TYPE attn_http_requests_total counter\n",
        "attn_http_requests_total{route=\"attention\",code=\"200\"} 2\n",
        "attn_http_requests_total{route=\"attention\",code=\"422\"} 1\n",
        "attn_http_requests_total{route=\"attention\",code=\"499\"} 1\n",
        "attn_body_bytes_reserved 4096\n",
        "attn_body_bytes_capacity 65536\n",
        "attn_http_requests_total{route=\"other\",code=\"404\"} 1\n",
        "attn_http_requests_total{route=\"healthz\",code=\"other\"} 1\n",
        "# TYPE attn_http_request_duration_seconds histogram\n",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"0.0005\"} 1\n",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"0.005\"} 2\n",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"0.1\"} 2\n",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"0.25\"} 3\n",
        "attn_http_request_duration_seconds_bucket{route=\"attention\",le=\"+Inf\"} 4\n",
        "attn_http_request_duration_seconds_count{route=\"attention\"} 4\n",
        "attn_http_request_duration_seconds_sum{route=\"attention\"} 0.5031",
        "attn_http_request_duration_seconds_bucket{route=\"healthz\",le=\"10\"} 0\n",
        "attn_http_request_duration_seconds_bucket{route=\"healthz\",le=\"+Inf\"} 1\n",
        "attn_phase_seconds_total{phase=\"compute\"} 0.5",
        "attn_queue_depth 3\n",
        "attn_queue_capacity 8\n",
        "attn_workers_busy 2\n",
        "attn_workers 2\n",
        "attn_http_requests_in_flight 5\n",
        "attn_draining 1\n",
        "# TYPE attn_queue_depth gauge\n",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        ck_assert_msg(strstr(t, expect[i]), "metrics lack: %s\n--- got:\n%s", expect[i], t);
    /* no series for statuses never seen */
    ck_assert_ptr_null(strstr(t, "code=\"500\""));
    /* every non-comment line is "name{labels} value" or "name value" */
    for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        ck_assert_msg(strncmp(line, "attn_", 5) == 0 || strncmp(line, "process_", 8) == 0,
                      "odd line %s", line);
        ck_assert_ptr_nonnull(strrchr(line, ' '));
    }
    free(t);
    srv_metrics_destroy(m);
}
END_TEST

/* ------------------------------------------------------------ request ids */

START_TEST(reqid_sanitising) {
    ck_assert(srv_reqid_is_sane("abc-DEF_123.x:y"));
    ck_assert(srv_reqid_is_sane("a"));
    char long_ok[129], long_bad[130];
    memset(long_ok, 'a', 128);
    long_ok[128] = 0;
    memset(long_bad, 'a', 129);
    long_bad[129] = 0;
    ck_assert(srv_reqid_is_sane(long_ok));
    ck_assert(!srv_reqid_is_sane(long_bad));
    ck_assert(!srv_reqid_is_sane(NULL));
    ck_assert(!srv_reqid_is_sane(""));
    ck_assert(!srv_reqid_is_sane("a b"));
    ck_assert(!srv_reqid_is_sane("a\r\nSet-Cookie: x"));
    ck_assert(!srv_reqid_is_sane("a/b"));
    ck_assert(!srv_reqid_is_sane("caf\xc3\xa9"));
    ck_assert(!srv_reqid_is_sane("a\"b"));

    char *kept = srv_reqid_choose("client-42");
    ck_assert_str_eq(kept, "client-42");
    free(kept);
    char *fresh = srv_reqid_choose("bad id");
    ck_assert(srv_reqid_is_sane(fresh));
    ck_assert_str_ne(fresh, "bad id");
    char *fresh2 = srv_reqid_choose(NULL);
    ck_assert(srv_reqid_is_sane(fresh2));
    ck_assert_str_ne(fresh, fresh2);
    free(fresh);
    free(fresh2);

    char a[48], b[48];
    srv_reqid_new(a, sizeof a);
    srv_reqid_new(b, sizeof b);
    ck_assert(srv_reqid_is_sane(a));
    ck_assert_str_ne(a, b);
}
END_TEST

/* ------------------------------------------------- HTTP parsers, routing */

START_TEST(http_content_types) {
    ck_assert(srv_headers_json_type(NULL));
    ck_assert(srv_headers_json_type("application/json"));
    ck_assert(srv_headers_json_type("Application/JSON"));
    ck_assert(srv_headers_json_type("application/json; charset=utf-8"));
    ck_assert(srv_headers_json_type("application/json;charset=\"UTF-8\""));
    ck_assert(srv_headers_json_type("application/json; boundary=x; charset=utf8"));
    ck_assert(!srv_headers_json_type("application/json; charset=latin1"));
    ck_assert(!srv_headers_json_type("application/json; charset=\"utf-16\""));
    ck_assert(srv_headers_json_type("application/json; charset=utf-8"));
    ck_assert(srv_headers_json_type("  application/json ;charset=UTF-8"));
    ck_assert(srv_headers_json_type("application/vnd.attn+json"));
    ck_assert(srv_headers_json_type("application/problem+JSON; q=1"));
    ck_assert(!srv_headers_json_type(""));
    ck_assert(!srv_headers_json_type("text/plain"));
    ck_assert(!srv_headers_json_type("text/json"));
    ck_assert(!srv_headers_json_type("application/jsonx"));
    ck_assert(!srv_headers_json_type("application/x-www-form-urlencoded"));
    ck_assert(!srv_headers_json_type("application/+json"));
    ck_assert(!srv_headers_json_type("application/json/x"));
    ck_assert(!srv_headers_json_type("multipart/form-data; boundary=json"));
}
END_TEST

START_TEST(http_content_length) {
    size_t n = 7;
    ck_assert_int_eq(srv_headers_parse_length("0", &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(srv_headers_parse_length("1048576", &n), 0);
    ck_assert_uint_eq(n, 1048576);
    ck_assert_int_eq(srv_headers_parse_length("99999999999999999999999999", &n), 0);
    ck_assert_uint_eq(n, SIZE_MAX);
    ck_assert_int_eq(srv_headers_parse_length("", &n), -1);
    ck_assert_int_eq(srv_headers_parse_length("-1", &n), -1);
    ck_assert_int_eq(srv_headers_parse_length("12a", &n), -1);
    ck_assert_int_eq(srv_headers_parse_length(NULL, &n), -1);
}
END_TEST

/* ------------------------------------------------------------------ keys */

/* Writes `text` to a new temporary file; its path in `path` (unlink it). */
static void keys_file(char *path, const char *text) {
    strcpy(path, "/tmp/attn-keys-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

/* The file's refusals, each naming the line, and each leaving the keys
 * already in force. */
START_TEST(keys_file_refusals) {
    srv_keys *k = srv_keys_create();
    char path[32];
    attn_error e;
    const char *err = e.message;
    char key256[257], key257[258], long_line[1001];
    memset(key256, 'k', 256), key256[256] = 0;
    memset(key257, 'k', 257), key257[257] = 0;
    memset(long_line, 'x', 1000), long_line[1000] = 0;

    char text[1200];
    snprintf(text, sizeof text, "# comment\r\n\n  \nfirst\r\n%s\n", key256);
    keys_file(path, text);
    ck_assert_int_eq(srv_keys_load(k, path, &e), 2);
    unlink(path);
    ck_assert(srv_keys_allow(k, "Bearer first"));
    char bearer[300];
    snprintf(bearer, sizeof bearer, "Bearer %s", key256);
    ck_assert(srv_keys_allow(k, bearer));

    struct {
        const char *text, *want;
    } bad[] = {
        {"ok\n%s\n", "line 2 is longer than 256 characters"}, /* key257 */
        {"ok\n\n%s", "line 3 is longer than 256 characters"}, /* long_line, no newline */
        {"ok\nk\xc3\xa9y\n", "line 2 holds a character that is not printable ASCII"},
        {"ok\nin side\n", "line 2 holds a character that is not printable ASCII"},
        {"ok\ntab\there\n", "line 2 holds a character"},
        {"ok\nnul\x7f\n", "line 2 holds a character"},
        {"# only a comment\n\n", "no key in the file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, bad[i].text, i == 0 ? key257 : long_line);
        keys_file(path, text);
        e.message[0] = 0;
        ck_assert_int_eq(srv_keys_load(k, path, &e), -1);
        unlink(path);
        ck_assert_msg(strstr(err, bad[i].want), "case %zu: \"%s\"", i, err);
        /* the keys before stay, and no key of the refused file got in */
        ck_assert(srv_keys_allow(k, "Bearer first"));
        ck_assert(!srv_keys_allow(k, "Bearer ok"));
    }
    ck_assert_int_eq(srv_keys_load(k, "/nonexistent/keys", &e), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    /* a FIFO is refused at once, never waited on for a writer */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(srv_keys_load(k, path, &e), -1);
    unlink(path);
    ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
    ck_assert(srv_keys_allow(k, "Bearer first"));
    srv_keys_destroy(k);
}
END_TEST

START_TEST(routes) {
    ck_assert_int_eq(srv_route_find("/v1/attention"), SRV_ROUTE_ATTENTION);
    ck_assert_int_eq(srv_route_find("/healthz"), SRV_ROUTE_HEALTHZ);
    ck_assert_int_eq(srv_route_find("/readyz"), SRV_ROUTE_READYZ);
    ck_assert_int_eq(srv_route_find("/metrics"), SRV_ROUTE_METRICS);
    ck_assert_int_eq(srv_route_find("/v1/openapi.yaml"), SRV_ROUTE_OPENAPI);
    ck_assert_int_eq(srv_route_find("/v1/models"), SRV_ROUTE_MODELS);
    ck_assert_int_eq(srv_route_find("/v1/models/demo-4d"), SRV_ROUTE_MODEL);
    ck_assert_str_eq(srv_route_model_name("/v1/models/demo-4d"), "demo-4d");
    ck_assert_int_eq(srv_route_find("/v1/models/"), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("/v1/models/a/b"), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("/v1/attention/"), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("/v1/attention/batch"), SRV_ROUTE_BATCH);
    ck_assert_str_eq(srv_route_name(SRV_ROUTE_BATCH), "attention_batch");
    ck_assert_str_eq(srv_route_allow(SRV_ROUTE_BATCH), "POST");
    ck_assert(!srv_route_open(SRV_ROUTE_BATCH));
    ck_assert_int_eq(srv_route_find("/V1/attention"), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("/"), SRV_ROUTE_PAGE);
    ck_assert_int_eq(srv_route_find(""), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("//"), SRV_ROUTE_OTHER);
    ck_assert_int_eq(srv_route_find("/index.html"), SRV_ROUTE_OTHER);
    ck_assert(srv_route_allows(SRV_ROUTE_PAGE, "HEAD"));
    ck_assert(!srv_route_allows(SRV_ROUTE_PAGE, "POST"));
    ck_assert_str_eq(srv_route_name(SRV_ROUTE_PAGE), "page");
    ck_assert(srv_route_open(SRV_ROUTE_PAGE) && srv_route_open(SRV_ROUTE_HEALTHZ) &&
              srv_route_open(SRV_ROUTE_READYZ));
    ck_assert(!srv_route_open(SRV_ROUTE_ATTENTION) && !srv_route_open(SRV_ROUTE_MODELS) &&
              !srv_route_open(SRV_ROUTE_METRICS) && !srv_route_open(SRV_ROUTE_OTHER));
    ck_assert_int_eq(srv_route_find(NULL), SRV_ROUTE_OTHER);
    ck_assert(srv_route_allows(SRV_ROUTE_ATTENTION, "POST"));
    ck_assert(!srv_route_allows(SRV_ROUTE_ATTENTION, "GET"));
    ck_assert(srv_route_allows(SRV_ROUTE_HEALTHZ, "HEAD"));
    ck_assert(!srv_route_allows(SRV_ROUTE_METRICS, "POST"));
    ck_assert(!srv_route_allows(SRV_ROUTE_OTHER, "GET"));
    ck_assert_str_eq(srv_route_allow(SRV_ROUTE_ATTENTION), "POST");
    ck_assert_str_eq(srv_route_allow(SRV_ROUTE_READYZ), "GET, HEAD");
    ck_assert_str_eq(srv_route_name(SRV_ROUTE_OTHER), "other");
}
END_TEST

/* The framing checks read libmicrohttpd 0.9.75's private buffer: built
 * against, or running on, any other version, the server refuses to start
 * and says why. */
START_TEST(framing_needs_its_libmicrohttpd) {
    attn_error err;
    ck_assert_int_eq(srv_framing_supported(MHD_VERSION, MHD_get_version(), &err), 0);
    ck_assert_int_eq(srv_framing_supported(0x00097500, "0.9.75", &err), 0);

    static const struct {
        unsigned long built;
        const char *running, *named;
    } other[] = {
        {0x00097600, "0.9.76", "libmicrohttpd 0.9.76 (built against 0.9.76)"},
        {0x00097500, "0.9.77", "libmicrohttpd 0.9.77 (built against 0.9.75)"},
        {0x01000100, "0.9.75", "libmicrohttpd 0.9.75 (built against 1.0.1)"},
        {0x00097400, "0.9.74", "libmicrohttpd 0.9.74 (built against 0.9.74)"},
        {0x00097500, "0.9.75.1", "libmicrohttpd 0.9.75.1"},
        {0x00097500, NULL, "of unknown version"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(srv_framing_supported(other[i].built, other[i].running, &err), -1);
        ck_assert_str_eq(err.code, "server_start_failed");
        ck_assert_msg(strstr(err.message, other[i].named), "%s", err.message);
        ck_assert_msg(strstr(err.message, "0.9.75's private header buffer"), "%s", err.message);
    }
}
END_TEST

/* The list of open routes is the table's: each open route once, in order,
 * and each path in it finds an open route. */
START_TEST(open_routes_listed) {
    char list[256];
    size_t len = srv_route_open_paths(list, sizeof list);
    ck_assert_uint_eq(len, strlen(list));
    ck_assert_str_eq(list, "/healthz, /readyz, /, /v2/health/live, /v2/health/ready");
    int open = 0;
    for (int r = 0; r < SRV_ROUTE_COUNT; r++)
        open += srv_route_open((srv_route)r);
    int listed = 0;
    for (char *path = strtok(list, ", "); path; path = strtok(NULL, ", "), listed++)
        ck_assert_msg(srv_route_open(srv_route_find(path)), "%s is not open", path);
    ck_assert_int_eq(listed, open);
    /* cut as snprintf cuts, and measured whole */
    char small[9]; /* "/healthz" and its NUL */
    ck_assert_uint_eq(srv_route_open_paths(small, sizeof small), len);
    ck_assert_str_eq(small, "/healthz");
    ck_assert_uint_eq(srv_route_open_paths(NULL, 0), len);
}
END_TEST

/* ------------------------------------------------------------------- job */

/* Runs an attention job for `body` on worker w; its status and response
 * (the caller frees it). */
static void run_job_on(srv_worker *w, const api_limits *limits, const char *body, int *status,
                       char **response) {
    srv_job job;
    memset(&job, 0, sizeof job);
    job.body = body;
    job.body_len = strlen(body);
    job.limits = limits;
    clock_gettime(CLOCK_MONOTONIC, &job.submitted);
    srv_job_run(&job, w);
    ck_assert_ptr_nonnull(job.response);
    ck_assert_uint_eq(strlen(job.response), job.response_len);
    ck_assert(job.queue_ms >= 0 && job.decode_ms >= 0);
    *status = job.status;
    *response = job.response;
}

/* Limits for the jobs of these tests, small models all. */
static const api_limits job_limits = {.max_tokens = 256,
                                      .max_heads = 8,
                                      .max_d_model = 64,
                                      .max_flops = 1e10,
                                      .max_response_bytes = 1 << 24,
                                      .max_workspace_bytes = 1 << 26};

/* run_job_on a fresh worker without models. */
static void run_job(const char *body, int *status, char **response) {
    srv_worker *w = srv_worker_create(NULL, NULL);
    ck_assert_ptr_nonnull(w);
    run_job_on(w, &job_limits, body, status, response);
    srv_worker_destroy(w);
}

START_TEST(job_error_paths) {
    int status;
    char *r;
    run_job("{not json", &status, &r);
    ck_assert_int_eq(status, 400);
    ck_assert_ptr_nonnull(strstr(r, "\"invalid_json\""));
    free(r);

    run_job("{\"model\":\"gpt-2\",\"embeddings\":[[1,2]]}", &status, &r);
    ck_assert_int_eq(status, 404);
    ck_assert_ptr_nonnull(strstr(r, "\"unknown_model\""));
    ck_assert_ptr_nonnull(strstr(r, "\"/model\""));
    free(r);

    run_job("{\"embeddings\":[[1,0]],\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],"
            "\"w_k\":[[1],[0]],\"w_v\":[[1],[0]]}],\"w_o\":[[1,0]]},\"mask\":\"none\"}",
            &status, &r);
    ck_assert_msg(status == 200, "status %d: %s", status, r);
    ck_assert_ptr_nonnull(strstr(r, "\"embeddings\""));
    free(r);
}
END_TEST

/* Outputs that cannot be had (their patterns, 8192 heads of 65536² floats,
 * are 128 TiB: more than an address space holds) are answered 503
 * out_of_memory with the outputs' own message, not the computation's.
 * Not under AddressSanitizer, which aborts on such an allocation. */
START_TEST(job_outputs_out_of_memory) {
#if defined(__SANITIZE_ADDRESS__)
    return;
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    return;
#endif
#endif
    enum { N = 65536, H = 8192 };
    char *b = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&b, &len);
    fputs("{\"return\":[\"patterns\"],\"embeddings\":[", f);
    for (int t = 0; t < N; t++)
        fputs(t ? ",[0]" : "[0]", f);
    fputs("],\"weights\":{\"heads\":[", f);
    for (int h = 0; h < H; h++)
        fprintf(f, "%s{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}", h ? "," : "");
    fputs("],\"w_o\":[", f);
    for (int h = 0; h < H; h++)
        fputs(h ? ",[1]" : "[1]", f);
    fputs("]}}", f);
    fclose(f);
    api_limits limits = {.max_tokens = N,
                         .max_heads = H,
                         .max_d_model = 64,
                         .max_flops = 1e18,
                         .max_response_bytes = SIZE_MAX,
                         .max_workspace_bytes = SIZE_MAX};
    srv_worker *w = srv_worker_create(NULL, NULL);
    ck_assert_ptr_nonnull(w);
    int status;
    char *r;
    run_job_on(w, &limits, b, &status, &r);
    ck_assert_int_eq(status, 503);
    ck_assert_msg(strstr(r, "\"out_of_memory\"") && strstr(r, "no memory for the outputs"), "%s",
                  r);
    free(r);
    srv_worker_destroy(w);
    free(b);
}
END_TEST

/* A job decoded on one thread (srv_job_decode, as the polling thread does
 * for a small body) and run on another worker is not decoded again: its
 * body is gone by then and the answer still comes from the decoded
 * request. Its cost is the request's work; a refused body has its answer
 * at decode and nothing left to discard. */
START_TEST(job_decoded_once) {
    static const char body[] =
        "{\"embeddings\":[[1,0]],\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],"
        "\"w_k\":[[1],[0]],\"w_v\":[[1],[0]]}],\"w_o\":[[1,0]]},\"mask\":\"none\"}";
    srv_worker *reader = srv_worker_create(NULL, NULL), *runner = srv_worker_create(NULL, NULL);
    ck_assert(reader && runner);
    srv_job job;
    memset(&job, 0, sizeof job);
    char *copy = strdup(body);
    job.body = copy;
    job.body_len = strlen(copy);
    job.limits = &job_limits;
    ck_assert_int_eq(srv_job_decode(&job, reader), 0);
    ck_assert(srv_job_cost(&job) == attn_input_flops(api_call_inputs(job.call)));
    ck_assert(srv_job_cost(&job) > attn_flops(1, 2, 1, 1, 1));
    memset(copy, '!', job.body_len); /* no longer JSON: a second decode would answer 400 */
    clock_gettime(CLOCK_MONOTONIC, &job.submitted);
    srv_job_run(&job, runner);
    ck_assert_msg(job.status == 200, "status %d: %s", job.status, job.response);
    ck_assert_ptr_null(job.call);
    free(job.response);

    memset(&job, 0, sizeof job);
    job.body = "{not json";
    job.body_len = strlen(job.body);
    job.limits = &job_limits;
    ck_assert_int_eq(srv_job_decode(&job, reader), -1);
    ck_assert_int_eq(job.status, 400);
    ck_assert_ptr_null(job.call);
    srv_job_discard(&job);
    free(job.response);
    free(copy);
    srv_worker_destroy(reader);
    srv_worker_destroy(runner);
}
END_TEST

/* A job whose workspace grew past the worker's keep_workspace_bytes gives
 * it back when it ends; one within it is kept for the next job. The bound
 * is set here to what the small job needed, so that the large one (many
 * more tokens) crosses it. */
START_TEST(job_trims_large_workspace) {
    static const api_limits limits = {.max_tokens = 8192,
                                      .max_heads = 8,
                                      .max_d_model = 64,
                                      .max_flops = 1e12,
                                      .max_response_bytes = 1 << 24,
                                      .max_workspace_bytes = (size_t)1 << 30};
    enum { N = 4200 };
    char *big = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&big, &len);
    fputs("{\"embeddings\":[", f);
    for (int i = 0; i < N; i++)
        fprintf(f, i ? ",[%g]" : "[%g]", (i % 7) / 8.0);
    fputs("],\"weights\":{\"heads\":[{\"w_q\":[[1]],\"w_k\":[[1]],\"w_v\":[[1]]}]},"
          "\"mask\":\"none\",\"return\":[\"delta\"]}",
          f);
    fclose(f);
    const char *small = "{\"embeddings\":[[1,0]],\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],"
                        "\"w_k\":[[1],[0]],\"w_v\":[[1],[0]]}],\"w_o\":[[1,0]]}}";

    srv_worker *w = srv_worker_create(NULL, NULL);
    ck_assert_ptr_nonnull(w);
    const char *bodies[] = {small, small, big};
    for (int i = 0; i < 3; i++) {
        srv_job job;
        memset(&job, 0, sizeof job);
        job.body = bodies[i];
        job.body_len = strlen(bodies[i]);
        job.limits = &limits;
        clock_gettime(CLOCK_MONOTONIC, &job.submitted);
        srv_job_run(&job, w);
        ck_assert_msg(job.status == 200, "status %d: %.300s", job.status, job.response);
        free(job.response);
        if (i == 0) { /* within the default bound: kept; now the bound */
            ck_assert_uint_gt(attn_workspace_bytes(w->ws), 0);
            w->keep_workspace_bytes = attn_workspace_bytes(w->ws);
        } else if (i == 1) { /* the same size again: still kept */
            ck_assert_uint_eq(attn_workspace_bytes(w->ws), w->keep_workspace_bytes);
        } else { /* grew past the bound: given back */
            ck_assert_uint_eq(attn_workspace_bytes(w->ws), 0);
        }
    }
    srv_worker_destroy(w);
    free(big);
}
END_TEST

/* A request body of n tokens, d_model 4, 2 heads of 2, with w_o; `ret` is
 * the "return" list or NULL for the default. */
static char *two_head_body(int n, const char *ret) {
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    fputs("{\"embeddings\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s[%g,%g,%g,%g]", i ? "," : "", (i % 7) / 8.0, (i % 5) / -4.0, (i % 3) / 2.0,
                (i % 11) / 16.0);
    fputs("],\"weights\":{\"heads\":[", f);
    static const char *const names[] = {"w_q", "w_k", "w_v"};
    for (int h = 0; h < 2; h++) {
        fputs(h ? ",{" : "{", f);
        for (int m = 0; m < 3; m++) {
            fprintf(f, "%s\"%s\":[", m ? "," : "", names[m]);
            for (int r = 0; r < 4; r++)
                fprintf(f, "%s[%g,%g]", r ? "," : "", (r + m + h) % 3 - 0.75,
                        (r * m + h) % 4 / 3.0);
            fputs("]", f);
        }
        fputs("}", f);
    }
    fputs("],\"w_o\":[", f);
    for (int r = 0; r < 4; r++)
        fprintf(f, "%s[%g,%g,%g,%g]", r ? "," : "", r / 4.0, -0.5, (r % 2) * 0.25, 1.0);
    fputs("]}", f);
    if (ret) fprintf(f, ",\"return\":%s", ret);
    fputs("}", f);
    fclose(f);
    return body;
}

/* A job split over idle workers answers byte for byte what one worker
 * answers, on the full path (default outputs) and the online one. */
START_TEST(job_split_same_answer) {
    pool *p = pool_create(2, 4, srv_job_worker_init, srv_job_worker_fini, NULL);
    ck_assert_ptr_nonnull(p);
    srv_worker *alone = srv_worker_create(NULL, NULL);
    srv_worker *split = srv_worker_create(NULL, p);
    ck_assert_ptr_nonnull(alone);
    ck_assert_ptr_nonnull(split);
    split->split_flops = 0; /* every computation */
    const char *rets[] = {NULL, "[\"embeddings\"]", "[\"scores\",\"head_outputs\",\"delta\"]"};
    for (int k = 0; k < 3; k++) {
        char *body = two_head_body(200, rets[k]);
        char *answer[2];
        for (int s = 0; s < 2; s++) {
            int status;
            run_job_on(s ? split : alone, &job_limits, body, &status, &answer[s]);
            ck_assert_msg(status == 200, "status %d: %.300s", status, answer[s]);
        }
        ck_assert_str_eq(answer[0], answer[1]);
        free(answer[0]), free(answer[1]), free(body);
    }
    ck_assert_uint_eq(alone->splits, 0);
    ck_assert_uint_ge(split->splits, 1); /* the pool's two workers were idle */
    srv_worker_destroy(alone), srv_worker_destroy(split);
    pool_destroy(p);
}
END_TEST

/* A worker whose pool's workers have no context: its large jobs are still
 * split (helpers accepted) and answer what a worker alone answers; their
 * tasks, which carve scratch from the workspace they are given, all run on
 * the job's worker. */
START_TEST(job_split_workers_without_context) {
    pool *p = pool_create(2, 4, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    srv_worker *alone = srv_worker_create(NULL, NULL);
    srv_worker *split = srv_worker_create(NULL, p);
    ck_assert_ptr_nonnull(alone);
    ck_assert_ptr_nonnull(split);
    split->split_flops = 0; /* every computation */
    api_limits limits = job_limits;
    limits.max_tokens = 600, limits.max_response_bytes = 1 << 26;
    /* the online path (a tile per task), the full one (rows of scores) */
    const char *rets[] = {"[\"head_outputs\"]", "[\"scores\",\"delta\"]"};
    for (int k = 0; k < 2; k++) {
        char *body = two_head_body(600, rets[k]); /* 5 blocks of rows a head */
        char *answer[2];
        for (int s = 0; s < 2; s++) {
            int status;
            run_job_on(s ? split : alone, &limits, body, &status, &answer[s]);
            ck_assert_msg(status == 200, "status %d: %.300s", status, answer[s]);
        }
        ck_assert_str_eq(answer[0], answer[1]);
        free(answer[0]), free(answer[1]), free(body);
    }
    ck_assert_uint_ge(split->splits, 1);
    srv_worker_destroy(alone), srv_worker_destroy(split);
    pool_destroy(p);
}
END_TEST

/* The output buffers live in a block the worker keeps between jobs: a job
 * run after a larger one answers byte for byte what a fresh worker
 * answers (nothing of the earlier job shows), and the block is kept. */
START_TEST(job_outputs_block_reused) {
    srv_worker *used = srv_worker_create(NULL, NULL), *fresh = srv_worker_create(NULL, NULL);
    ck_assert_ptr_nonnull(used);
    ck_assert_ptr_nonnull(fresh);
    char *big = two_head_body(120, "[\"q\",\"k\",\"v\",\"scores\",\"patterns\",\"head_outputs\"]");
    char *small = two_head_body(40, "[\"scores\",\"patterns\",\"head_outputs\",\"delta\","
                                    "\"embeddings\"]");
    char *first, *answer[2];
    int status;
    run_job_on(used, &job_limits, big, &status, &first);
    ck_assert_msg(status == 200, "status %d: %.300s", status, first);
    free(first);
    for (int k = 0; k < 2; k++) {
        run_job_on(k ? fresh : used, &job_limits, small, &status, &answer[k]);
        ck_assert_msg(status == 200, "status %d: %.300s", status, answer[k]);
    }
    ck_assert_str_eq(answer[0], answer[1]);
    ck_assert_uint_gt(attn_workspace_bytes(used->outputs), 0);
    free(answer[0]), free(answer[1]), free(big), free(small);
    srv_worker_destroy(used), srv_worker_destroy(fresh);
}
END_TEST

/* A /v2 job of demo-4d's n tokens as one row, asking `patterns` as bytes
 * or as JSON; limits of the server's defaults. */
static const api_limits v2_limits = {.max_tokens = 8192,
                                     .max_heads = 128,
                                     .max_d_model = 16384,
                                     .max_flops = 1e12,
                                     .max_response_bytes = (size_t)256 << 20,
                                     .max_workspace_bytes = (size_t)1 << 30,
                                     .max_batch = 256};

static void v2_patterns_job(srv_job *job, oc_body *body, float *emb, size_t n, int binary) {
    for (size_t i = 0; i < n * 4; i++)
        emb[i] = (float)(i % 7) / 8.0f - 0.375f;
    oc_input in = {"embeddings", "FP32", 3, {1, (long long)n, 4}, emb, 1};
    oc_output out = {"patterns", binary};
    oc_build(body, "memory", &in, 1, &out, 1, NULL, 0);
    memset(job, 0, sizeof *job);
    job->kind = SRV_JOB_CALL;
    job->call_kind = API_CALL_OIP;
    job->body = body->data;
    job->body_len = body->len;
    job->header_len = (long long)body->json_len;
    strcpy(job->model, "demo-4d");
    job->limits = &v2_limits;
    clock_gettime(CLOCK_MONOTONIC, &job->submitted);
}

/* A binary /v2 answer is sent from the outputs the computation wrote, not
 * copied into a body: the job's large allocations peak at its outputs (n²
 * floats of patterns) and a little, where a body beside them took twice
 * that (three times, when each binary output was laid out in a scratch
 * tensor first). The job leaves the answer, which reads back whole, in
 * pieces that cut floats, without allocating. */
START_TEST(job_binary_answer_not_copied) {
    char dir[256];
    const char *names[] = {"demo-4d", NULL};
    tf_models_dir(dir, sizeof dir, "job-v2", names);
    store_set *set;
    attn_error err;
    ck_assert_int_eq(store_set_load(&set, dir, NULL, &err), 0);
    store *st = store_create(set);
    srv_worker *w = srv_worker_create(st, NULL);
    ck_assert(st && w);
    enum { N = 1500 };
    const size_t patterns = (size_t)N * N * sizeof(float);
    float *emb = malloc((size_t)N * 4 * sizeof *emb);
    srv_job job;
    oc_body body;
    v2_patterns_job(&job, &body, emb, N, 1);
    size_t before = ac_current();
    ac_reset_peak();
    srv_job_run(&job, w);
    size_t peak = ac_peak() - before;
    ck_assert_msg(job.status == 200, "status %d: %.300s", job.status, job.response);
    ck_assert_uint_ge(peak, patterns); /* the outputs themselves, counted */
    ck_assert_msg(peak < patterns + patterns / 8,
                  "the job held %zu bytes at its peak for %zu bytes of patterns (%.2f ×)", peak,
                  patterns, (double)peak / (double)patterns);
    ck_assert_ptr_null(job.response);
    ck_assert_ptr_nonnull(job.answer);
    ck_assert_uint_eq(job.response_len, job.json_len + patterns);
    ck_assert_uint_eq(job.json_len, api_answer_json_length(job.answer));
    ck_assert_str_eq(job.content_type, "application/octet-stream");
    /* every row of patterns sums to 1 */
    before = ac_current();
    ac_reset_peak();
    char piece[4093];
    unsigned char bytes[sizeof(float)];
    float v, sum = 0;
    size_t at = 0, got, floats = 0;
    while ((got = api_answer_read(job.answer, at, piece, sizeof piece)) > 0)
        for (size_t k = 0; k < got; k++, at++) {
            if (at < job.json_len) continue;
            size_t t = at - job.json_len;
            bytes[t % sizeof v] = (unsigned char)piece[k];
            if (t % sizeof v != sizeof v - 1) continue;
            memcpy(&v, bytes, sizeof v);
            sum += v;
            if (++floats % N) continue;
            if (sum < 0.999f || sum > 1.001f) /* ck_ only on failure: a hot loop */
                ck_abort_msg("row %zu of patterns sums to %g", floats / N - 1, sum);
            sum = 0;
        }
    ck_assert_uint_eq(at, job.response_len);
    ck_assert_uint_eq(floats, (size_t)N * N);
    ck_assert_uint_eq(ac_peak(), before);
    srv_job_discard(&job); /* the answer never handed over */
    ck_assert_ptr_null(job.answer);
    oc_body_free(&body);
    free(emb);
    srv_worker_destroy(w);
    store_destroy(st);
    ck_assert_int_eq(tf_remove_dir(dir), 0);
}
END_TEST

/* ----------------------------------------------------------------- suite */

static Suite *server_suite(void) {
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, config_defaults);
    tcase_add_test(tc, config_env_then_flag_wins);
    tcase_add_test(tc, config_suffixes_and_doubles);
    tcase_add_test(tc, config_models_options);
    tcase_add_loop_test(tc, config_bad_values, 0, sizeof bad_values / sizeof bad_values[0]);
    tcase_add_test(tc, config_bad_env_and_args);
    tcase_add_test(tc, config_memory_and_connections);
    tcase_add_test(tc, config_help);
    tcase_add_loop_test(tc, config_text_limits, 0, sizeof text_options / sizeof text_options[0]);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, pool_refuses_when_full);
    tcase_add_test(tc, pool_evicts_gone_jobs);
    tcase_add_test(tc, pool_runs_every_job);
    tcase_add_test(tc, pool_drains_on_destroy);
    tcase_add_test(tc, pool_worker_contexts);
    tcase_add_test(tc, pool_help_only_when_idle);
    tcase_add_test(tc, split_idle_workers_help);
    tcase_add_test(tc, split_helper_stays_for_next_runs);
    tcase_add_test(tc, split_workers_without_context);
    tcase_add_test(tc, split_busy_pool_caller_does_all);
    tcase_add_test(tc, split_shutdown_with_helpers);
    suite_add_tcase(s, tc);

    tc = tcase_create("metrics");
    tcase_add_test(tc, metrics_render);
    suite_add_tcase(s, tc);

    tc = tcase_create("parsing");
    tcase_add_test(tc, reqid_sanitising);
    tcase_add_test(tc, http_content_types);
    tcase_add_test(tc, http_content_length);
    tcase_add_test(tc, routes);
    tcase_add_test(tc, open_routes_listed);
    tcase_add_test(tc, framing_needs_its_libmicrohttpd);
    tcase_add_test(tc, keys_file_refusals);
    suite_add_tcase(s, tc);

    tc = tcase_create("job");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, job_error_paths);
    tcase_add_test(tc, job_decoded_once);
    tcase_add_test(tc, job_outputs_out_of_memory);
    tcase_add_test(tc, job_trims_large_workspace);
    tcase_add_test(tc, job_split_same_answer);
    tcase_add_test(tc, job_split_workers_without_context);
    tcase_add_test(tc, job_outputs_block_reused);
    tcase_add_test(tc, job_binary_answer_not_copied);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(server_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
