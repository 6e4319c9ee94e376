/*
 * vocabulary.h — a model's vocabulary as api/ sees it: token strings, an
 * embedding per token, an optional position table, and the lookup of a
 * request's token. The model store is not api/'s business: the server
 * fills this view from what the store holds (as it does api_model_info),
 * and keeps the model alive while api/ reads it.
 */
#ifndef API_VOCABULARY_H
#define API_VOCABULARY_H

#include <stddef.h>

typedef struct api_vocabulary {
    size_t size;                      /* V ≥ 1 */
    const char *const *tokens;        /* V NUL-terminated strings */
    const float *token_embeddings;    /* V × d_model, row-major */
    size_t n_positions;               /* P, 0 when there is no position table */
    const float *position_embeddings; /* P × d_model, or NULL */
    /* The row of the token equal to the `len` bytes at s (which may hold
     * NUL), or -1 when there is none; safe to call from any thread. */
    long (*lookup)(const void *ctx, const char *s, size_t len);
    const void *lookup_ctx;
} api_vocabulary;

#endif
