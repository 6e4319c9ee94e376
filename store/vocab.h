/*
 * vocab.h — the string lists of a model file's metadata (model.c's
 * `vocabulary` and `dimensions`, models/README.md): a JSON array of
 * strings inside one metadata string, parsed into a block the caller owns,
 * and a sorted index of it for exact, length-aware lookups.
 *
 * Internal to store/: store_model (model.h) is the public face.
 */
#ifndef STORE_VOCAB_H
#define STORE_VOCAB_H

#include <stddef.h>

#include "store/error.h"

/* One entry of a sorted index: a string, its length, its place in the list. */
typedef struct store_vocab_entry {
    const char *s;
    size_t len;
    size_t row;
} store_vocab_entry;

/* A parsed list: `n` NUL-terminated strings (`strings`, pointing into one
 * block) and, when asked for, the index sorted bytewise (shorter first on a
 * common prefix). Free with store_strings_free. */
typedef struct store_strings {
    size_t n;
    const char **strings;
    store_vocab_entry *index; /* NULL unless kept */
    size_t bytes;             /* heap bytes held */
    char *block;
} store_strings;

/*
 * Parses metadata `key`'s value `text` into *out: a JSON array of non-empty
 * strings without NUL, all distinct, at least one.
 * Keeps the sorted index when keep_index. Returns 0, or -1 with err
 * "<path>: metadata '<key>' …" naming the first fault (a duplicate is
 * quoted, shortened when long) and *out empty.
 */
int store_strings_parse(store_strings *out, const char *text, const char *key, int keep_index,
                        const char *path, attn_error *err);

void store_strings_free(store_strings *s);

/* The row of the `len` bytes at s in index[0 … n-1], or -1. */
long store_strings_find(const store_vocab_entry *index, size_t n, const char *s, size_t len);

#endif
