/*
 * batch_build.h — random POST /v1/attention/batch bodies and the single
 * /v1/attention bodies of their sequences, and the text of the answers
 * taken apart without reformatting a byte, so that a batch's answer for a
 * sequence can be compared byte for byte with the single answer for it
 * (test_batch.c, test_batch_http.c).
 */
#ifndef TESTS_BATCH_BUILD_H
#define TESTS_BATCH_BUILD_H

#include <jansson.h>
#include <stddef.h>

/* What weights a random batch carries. */
typedef enum tb_kind {
    TB_INLINE, /* inline self-attention weights, with random variants */
    TB_CROSS,  /* inline cross-attention weights (w_k, w_v over d_context); contexts */
    TB_MODEL   /* "model": a named model of d_model dm, causal or not, no variants */
} tb_kind;

/* A random batch of 1 … max_seqs sequences of 1 … max_n tokens (new
 * reference). For TB_MODEL, `model` names it and dm is its d_model; for the
 * others both are chosen at random (model and dm ignored). */
json_t *tb_random_batch(unsigned *seed, tb_kind kind, const char *model, size_t dm, size_t max_seqs,
                        size_t max_n);

/* The single request of sequence i of `batch`: the shared fields and the
 * sequence's, its mask the shared one when it has none (new reference). */
json_t *tb_single(const json_t *batch, size_t i);

/* One member of a JSON object or element of an array, as text. */
typedef struct tb_part {
    const char *key; /* with its quotes; NULL for an array element */
    size_t key_len;
    const char *value;
    size_t value_len;
} tb_part;

/* The members (or elements) of the object (array) that text[0, len)
 * holds, at most max; returns how many, or -1 when the text is not one. */
long tb_parts(const char *text, size_t len, tb_part *parts, size_t max);

/* The answer's member `key` ("\"sequences\"" without quotes: give the bare
 * name), or NULL. */
const tb_part *tb_find(const tb_part *parts, long n, const char *key);

/* The single answer minus the fields a batch shares (model, d_model,
 * n_heads, n_kv_heads, d_head, scale, heads), malloc'd: what the batch's
 * answer must hold for that sequence, byte for byte. */
char *tb_strip_shared(const char *single, size_t len);

#endif
