/*
 * model_view.c — views of a store_model for api/ (model_view.h).
 */
#include "server/model_view.h"

#include <string.h>

static long token_lookup(const void *ctx, const char *s, size_t len) {
    return store_model_token(ctx, s, len);
}

const api_vocabulary *srv_model_vocabulary(const store_model *m, api_vocabulary *out) {
    if (m->vocab_size == 0) return NULL;
    *out = (api_vocabulary){.size = m->vocab_size,
                            .tokens = m->vocabulary,
                            .token_embeddings = m->token_embeddings,
                            .n_positions = m->n_positions,
                            .position_embeddings = m->position_embeddings,
                            .lookup = token_lookup,
                            .lookup_ctx = m};
    return out;
}

api_model_info srv_model_info(const store_model *m, api_vocabulary *vocab) {
    return (api_model_info){.name = m->name,
                            .description = m->description,
                            .mask = m->mask,
                            .weights = &m->weights,
                            .vocabulary = srv_model_vocabulary(m, vocab),
                            .dimensions = m->dimensions,
                            .layers = m->layers,
                            .n_layers = m->n_layers};
}

int srv_model_unknown(attn_error *err) {
    return attn_error_set(err, 404, "unknown_model", NULL,
                          "no model of this name is loaded; GET /v1/models lists them");
}

const store_model *srv_model_find(const store_set *set, const char *name, size_t len,
                                  const char *path, attn_error *err) {
    char buf[STORE_MODEL_NAME_MAX + 1];
    if (!store_model_name_valid(name, len)) {
        if (path)
            attn_error_set(err, 400, "invalid_value", path,
                           "model name must match [A-Za-z0-9._-]{1,64}");
        else
            srv_model_unknown(err);
        return NULL;
    }
    memcpy(buf, name, len);
    buf[len] = '\0';
    const store_model *m = set ? store_set_find(set, buf) : NULL;
    if (!m && path)
        attn_error_set(err, 404, "unknown_model", path,
                       "no model named \"%s\" is loaded; GET /v1/models lists them", buf);
    else if (!m)
        srv_model_unknown(err);
    return m;
}
