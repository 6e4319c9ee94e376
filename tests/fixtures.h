/*
 * fixtures.h — what several suites set up alike: temporary directories
 * (empty, or holding built-in models) and their removal, numbers read from
 * a JSON answer, and heavy request bodies for the built-in
 * gpt2-small-shape model. Each function fails the calling check test on an
 * error it cannot go on from.
 */
#ifndef TESTS_FIXTURES_H
#define TESTS_FIXTURES_H

#include <jansson.h>
#include <stddef.h>

/* Makes a fresh directory $TMPDIR/attn-<tag>-XXXXXX (else under /tmp) and
 * writes its path into dir. */
void tf_temp_dir(char *dir, size_t size, const char *tag);

/* tf_temp_dir holding the named built-in models (store/builtin.h; names
 * is NULL-terminated). */
void tf_models_dir(char *dir, size_t size, const char *tag, const char *const *names);

/* Removes dir and everything under it, symbolic links not followed.
 * Returns 0, or -1 when something could not be removed. */
int tf_remove_dir(const char *dir);

/* The value of a JSON number (fails the test on anything else). */
double tf_num(const json_t *v);

/* A POST /v1/attention body for gpt2-small-shape with n tokens of zeros
 * (~n × 1.5 KiB, about a second of work at n = 2048 on one core), asking
 * back the embeddings only. malloc'd. */
char *tf_heavy_body(int n);

/* A body of work that the GEMMs are nothing of: 128 heads one wide over n
 * tokens of one dimension, inline, no mask; `fields` (JSON members, each
 * followed by a comma) go first in the body, `weight_fields` first in its
 * weights. Seconds to minutes of one core with softcap at n in the
 * thousands; malloc'd. */
char *tf_narrow_heads_body(int n, const char *fields, const char *weight_fields);

/* The POST /v1/attention/batch body of `seqs` such sequences of `rows`
 * tokens each; its length in *len. malloc'd. */
char *tf_heavy_batch(int seqs, int rows, size_t *len);

#endif
