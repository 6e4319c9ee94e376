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

#include "store/builtin.h"

#define STORIES_D_MODEL   16
#define STORIES_HEADS     5
#define STORIES_D_HEAD    4
#define STORIES_POSITIONS 16

#define STORIES_WORDS 40

/* The vocabulary alone, for another built-in model that speaks the same
 * words (demo-layers): token_embeddings into tokens (STORIES_WORDS ×
 * STORIES_D_MODEL floats), and the metadata values `vocabulary` and
 * `dimensions` as malloc'd JSON text (the caller frees both). 0, or -1
 * when out of memory (nothing to free then). */
int store_stories_vocabulary(float *tokens, char **vocabulary, char **dimensions);

/* Its writer for the built-in table (builtin.h): the tensors, and the
 * metadata keys `vocabulary` and `dimensions` beside the common ones. */
extern const store_design store_stories_design;

#endif
