/*
 * model_view.c — views of a store_model for api/ (model_view.h).
 */
#include "server/model_view.h"

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
                            .dimensions = m->dimensions};
}
