/*
 * fuzz_vocab.h — the vocabulary the fuzz targets bind a named model with
 * (fuzz_request.c, fuzz_batch.c): four tokens of d_model 4 and a position
 * table of 8, so that `tokens` without `embeddings` reaches the lookup,
 * the position check and the embeddings' making. A request naming the
 * model "plain" binds without it (the no_vocabulary path).
 */
#ifndef FUZZ_VOCAB_H
#define FUZZ_VOCAB_H

#include <string.h>

#include "api/vocabulary.h"

static const char *const fuzz_vocab_tokens[] = {"a", "b", "\xe6\x88\x91", "c"};
static const float fuzz_vocab_tok[4 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0.5f, 0.5f, 0, -1};
static float fuzz_vocab_pos[8 * 4] = {0};

static long fuzz_vocab_lookup(const void *ctx, const char *s, size_t len) {
    (void)ctx;
    for (long t = 0; t < 4; t++)
        if (strlen(fuzz_vocab_tokens[t]) == len && memcmp(fuzz_vocab_tokens[t], s, len) == 0)
            return t;
    return -1;
}

static const api_vocabulary fuzz_vocab = {
    4, fuzz_vocab_tokens, fuzz_vocab_tok, 8, fuzz_vocab_pos, fuzz_vocab_lookup, NULL};

/* The vocabulary of the model `name` names (NULL: none). */
static const api_vocabulary *fuzz_vocab_for(const char *name) {
    return name && strcmp(name, "plain") == 0 ? NULL : &fuzz_vocab;
}

#endif
