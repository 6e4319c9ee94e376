/*
 * services.c — start, reload and stop the server's parts (services.h).
 *
 * Models. The store (store/store.h) is loaded from --models-dir before the
 * daemon listens, each file read into memory (or mapped, with
 * --map-models); a file that fails refuses the start unless
 * --skip-bad-models. A reload loads the whole directory again: a new set
 * that loads replaces the old one atomically (workers pick it up between
 * jobs, requests already running finish on the weights they started
 * with); a directory that fails to load leaves the old set serving and the
 * reason in the log. The key file (keys.h) follows the same rule.
 */
#include "server/services.h"

#include <signal.h>

#include "server/job.h"
#include "server/log.h"

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

/* The key file's keys replace the set only when the whole file reads; the
 * log gives their count, never a key. */
static void keys_reload(const cfg_config *cfg, srv_keys *keys) {
    attn_error err;
    long n = srv_keys_load(keys, cfg->api_keys_file, &err);
    if (n < 0)
        srv_log_info("api keys: reload failed, the keys before stay in force: %s", err.message);
    else
        srv_log_info("api keys: reloaded, %ld key%s", n, n == 1 ? "" : "s");
}

/* A new set replaces the old one only when it loads. */
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

void srv_services_reload(srv_services *s, const cfg_config *cfg) {
    models_reload(cfg, s->models);
    if (cfg->api_keys_file[0]) keys_reload(cfg, s->keys);
}

void srv_services_stop(srv_services *s) {
    srv_http_stop(s->http);
    pool_destroy(s->workers);
    srv_metrics_destroy(s->metrics);
    store_destroy(s->models);
    srv_keys_destroy(s->keys);
    *s = (srv_services){0};
}

int srv_services_start(srv_services *s, const cfg_config *cfg, attn_error *err) {
    *s = (srv_services){0};
    s->limits = (api_limits){
        .max_tokens = cfg->max_tokens,
        .max_batch = cfg->max_batch,
        .max_heads = cfg->max_heads,
        .max_d_model = cfg->max_d_model,
        .max_flops = cfg->max_flops,
        .max_json_depth = cfg->max_json_depth,
        .max_string_bytes = cfg->max_string_bytes,
        .max_response_bytes = cfg->max_response_bytes,
        .max_workspace_bytes = cfg->max_workspace_bytes,
    };
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
    if (cfg->api_keys_file[0] && (s->n_keys = srv_keys_load(s->keys, cfg->api_keys_file, err)) < 0)
        goto fail;
    s->http = srv_http_start(cfg, &s->limits, s->workers, s->models, s->metrics, s->keys, err);
    if (!s->http) goto fail;
    return 0;
out_of_memory:
    attn_error_set(err, 0, "server_start_failed", NULL, "out of memory");
fail:
    srv_services_stop(s);
    return -1;
}
