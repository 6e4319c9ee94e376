/*
 * ep_v2.c — the Open Inference Protocol's metadata and health
 * (kserve/open-inference-protocol, REST): GET /v2 (server metadata),
 * GET /v2/health/live, GET /v2/health/ready, GET /v2/models/{name} (its
 * inputs and outputs) and GET /v2/models/{name}/ready. All cheap, answered
 * on the polling thread from the store's current set. Readiness follows
 * /readyz: 503 once draining; health and readiness answer by status, with
 * {"live": true} / {"ready": true} bodies. Errors are the protocol's
 * {"error": "..."} (reply.c chooses the form by route).
 */
#include "server/endpoint.h"

#include <stdlib.h>
#include <string.h>

#include "api/oip.h"
#include "server/model_view.h"
#include "server/reply.h"
#include "store/model.h"

static enum MHD_Result v2_server_answer(srv_exchange *x) {
    size_t len = 0;
    char *text = api_oip_server_metadata(&len);
    if (!text) return srv_reply_oom(x);
    return srv_reply_new(x, 200, text, len, "application/json");
}

static enum MHD_Result v2_live_answer(srv_exchange *x) {
    return srv_reply_json(x, 200, "{\"live\":true}");
}

static enum MHD_Result v2_ready_answer(srv_exchange *x) {
    if (atomic_load(&x->h->draining)) return srv_reply_shutting_down(x);
    return srv_reply_json(x, 200, "{\"ready\":true}");
}

/* The path's model in the current set (the set in *set, to release), or
 * NULL after a 404 has been queued. */
static const store_model *path_model(srv_exchange *x, store_set **set, enum MHD_Result *ret) {
    size_t len;
    const char *name = srv_route_v2_model_name(x->path, &len);
    attn_error err;
    *set = x->h->models ? store_current(x->h->models) : NULL;
    const store_model *m = srv_model_find(*set, name, len, NULL, &err);
    if (!m) {
        store_set_release(*set);
        *set = NULL;
        *ret = srv_reply_error(x, &err);
    }
    return m;
}

static enum MHD_Result v2_model_answer(srv_exchange *x) {
    store_set *set;
    enum MHD_Result ret = MHD_NO;
    const store_model *m = path_model(x, &set, &ret);
    if (!m) return ret;
    api_oip_model om = {m->name, &m->weights, m->mask, m->n_layers};
    size_t len = 0;
    char *text = api_oip_model_metadata(&om, &len);
    store_set_release(set);
    if (!text) return srv_reply_oom(x);
    return srv_reply_new(x, 200, text, len, "application/json");
}

static enum MHD_Result v2_model_ready_answer(srv_exchange *x) {
    store_set *set;
    enum MHD_Result ret = MHD_NO;
    const store_model *m = path_model(x, &set, &ret);
    if (!m) return ret;
    size_t len = 0;
    char *text = api_oip_model_ready(m->name, &len);
    store_set_release(set);
    if (atomic_load(&x->h->draining)) {
        free(text);
        return srv_reply_shutting_down(x);
    }
    if (!text) return srv_reply_oom(x);
    return srv_reply_new(x, 200, text, len, "application/json");
}

const srv_endpoint srv_ep_v2_server = {NULL, v2_server_answer, NULL};
const srv_endpoint srv_ep_v2_live = {NULL, v2_live_answer, NULL};
const srv_endpoint srv_ep_v2_ready = {NULL, v2_ready_answer, NULL};
const srv_endpoint srv_ep_v2_model = {NULL, v2_model_answer, NULL};
const srv_endpoint srv_ep_v2_model_ready = {NULL, v2_model_ready_answer, NULL};
