/*
 * stories.h — demo-stories, the built-in model whose weights are designed
 * rather than drawn (stories.c gives every rule): 16 named dimensions, a
 * vocabulary of 40 lowercase words with a position table of 16, and five
 * heads of width 4, each telling one story of attention (adjective → noun,
 * context → meaning, fiction, royalty, previous token). models/README.md
 * explains each head for a student.
 */
#ifndef STORE_STORIES_H
#define STORE_STORIES_H

#include <stddef.h>

#include "attention/error.h"
#include "store/safetensors.h"

#define STORIES_D_MODEL   16
#define STORIES_HEADS     5
#define STORIES_D_HEAD    4
#define STORIES_POSITIONS 16

/* Bytes of its tensor data (all F32), without the header. */
size_t store_stories_data_bytes(void);

/* Writes the model to `path` (replacing it atomically) with the n_meta
 * entries of `meta` (name, description, n_heads, mask, source) and its own
 * `vocabulary` and `dimensions`. Returns 0 and, when not NULL,
 * *file_bytes; or -1 with err set. */
int store_stories_write(const char *path, const store_metadata *meta, size_t n_meta,
                        size_t *file_bytes, attn_error *err);

#endif
