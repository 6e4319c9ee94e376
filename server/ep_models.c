/*
 * ep_models.c — GET /v1/models and GET /v1/models/{name}.
 *
 * The list and a model's summary are cheap and answered on the polling
 * thread, from the store's current set; a model with its weights
 * (?weights=true) or its vocabulary (?vocabulary=true), which can be tens
 * of megabytes of JSON, is written by a worker (SRV_JOB_MODEL_WEIGHTS).
 */
#include "server/endpoint.h"

#include <stdlib.h>
#include <string.h>

#include "api/models.h"
#include "server/dispatch.h"
#include "server/model_view.h"
#include "server/reply.h"

static enum MHD_Result models_answer(srv_exchange *x) {
    store_set *set = x->h->models ? store_current(x->h->models) : NULL;
    size_t count = set ? store_set_count(set) : 0, len = 0;
    api_model_info *infos = calloc(count ? count : 1, sizeof *infos);
    api_vocabulary *vocabs = calloc(count ? count : 1, sizeof *vocabs);
    char *text = NULL;
    if (infos && vocabs) {
        for (size_t i = 0; i < count; i++) {
            infos[i] = srv_model_info(store_set_at(set, i), &vocabs[i]);
        }
        text = api_models_encode_list(infos, count, &len);
    }
    free(infos);
    free(vocabs);
    store_set_release(set);
    if (!text) return srv_reply_oom(x);
    return srv_reply_new(x, 200, text, len, "application/json");
}

static enum MHD_Result model_answer(srv_exchange *x) {
    const char *name = srv_route_model_name(x->path);
    attn_error err;
    int weights, vocabulary;
    if (api_model_flag("weights",
                       MHD_lookup_connection_value(x->conn, MHD_GET_ARGUMENT_KIND, "weights"),
                       &weights, &err) != 0 ||
        api_model_flag("vocabulary",
                       MHD_lookup_connection_value(x->conn, MHD_GET_ARGUMENT_KIND, "vocabulary"),
                       &vocabulary, &err) != 0)
        return srv_reply_error(x, &err);
    size_t name_len = strlen(name);
    if ((weights || vocabulary) && name_len < sizeof x->job.model) {
        x->job.kind = SRV_JOB_MODEL_WEIGHTS;
        memcpy(x->job.model, name, name_len + 1);
        x->job.model_parts =
            (weights ? API_MODEL_WEIGHTS : 0u) | (vocabulary ? API_MODEL_VOCABULARY : 0u);
        return srv_dispatch(x);
    }
    store_set *set = x->h->models ? store_current(x->h->models) : NULL;
    const store_model *m = srv_model_find(set, name, name_len, NULL, &err);
    char *text = NULL;
    size_t len = 0;
    if (m) {
        api_vocabulary vocab;
        api_model_info info = srv_model_info(m, &vocab);
        text = api_model_encode(&info, 0, x->h->limits->max_response_bytes, &len, &err);
    }
    store_set_release(set);
    if (!text) return srv_reply_error(x, &err);
    return srv_reply_new(x, 200, text, len, "application/json");
}

const srv_endpoint srv_ep_models = {NULL, models_answer, NULL};
const srv_endpoint srv_ep_model = {NULL, model_answer, NULL};
