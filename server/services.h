/*
 * services.h — the running server as one value: the models' store, the
 * metrics, the worker pool, the API keys and the HTTP daemon, started from a
 * configuration in that order and stopped in reverse.
 *
 * server/main.c starts one and waits for signals around it;
 * tests/fuzz/fuzz_http.c starts the same one inside the fuzzer's process.
 * Signals, the signal mask and OpenBLAS's thread count are the caller's.
 */
#ifndef SRV_SERVICES_H
#define SRV_SERVICES_H

#include "api/call.h"
#include "server/config.h"
#include "server/http.h"
#include "server/keys.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "store/store.h"

typedef struct srv_services {
    api_limits limits; /* from the configuration; the daemon borrows it */
    store *models;
    srv_metrics *metrics;
    pool *workers;
    srv_keys *keys;
    srv_http *http;
    long n_keys; /* loaded from --api-keys-file at start; 0 without one */
} srv_services;

/*
 * Loads the models directory and the key file, starts the workers and
 * the daemon (which is serving on return). cfg is borrowed and must
 * outlive s; s must stay where it is until srv_services_stop (the daemon
 * holds &s->limits). Returns 0, or -1 with the reason in err and whatever
 * had started stopped again.
 */
int srv_services_start(srv_services *s, const cfg_config *cfg, attn_error *err);

/*
 * SIGHUP's work: the models directory loaded again, and the key file read
 * again. Each new set replaces the old one only when it loads whole;
 * otherwise the old one keeps serving and the log says why.
 */
void srv_services_reload(srv_services *s, const cfg_config *cfg);

/* Stops the daemon, the workers (running what is queued), and frees every
 * part. Drain first (srv_http_drain) to answer what is in flight. */
void srv_services_stop(srv_services *s);

#endif
