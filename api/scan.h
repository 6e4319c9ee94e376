/*
 * scan.h — a body's text scanned and parsed within the limits, for every
 * wire format: each format's rules on its arrays (a path pattern and the
 * limit its length is held to) in one table, and one message per limit.
 *
 * The scan (arrays.h) lifts the large arrays of numbers out of the text
 * and refuses, before jansson builds a node, a body whose rest could not
 * be a call within the limits: too deep, a string too long, an array
 * longer than its rule allows, more values than values_max. A tree of
 * many small values costs up to 80 times their text.
 */
#ifndef API_SCAN_H
#define API_SCAN_H

#include <jansson.h>
#include <stddef.h>

#include "api/arrays.h"
#include "api/call.h"

/* The limit an array's length is held to. */
typedef enum api_scan_limit {
    API_SCAN_TOKENS,    /* one entry per row: max_tokens */
    API_SCAN_HEADS,     /* one per head: max_heads */
    API_SCAN_RETURN,    /* each output named once */
    API_SCAN_SEQUENCES, /* max_batch */
} api_scan_limit;

typedef struct api_scan_rule {
    const char *pattern; /* a JSON Pointer; "#" stands for any array index */
    api_scan_limit limit;
    int strings; /* 1: every element must be a string */
} api_scan_rule;

typedef struct api_scan_table {
    const char *what; /* the text, in messages: "body", "JSON header" */
    const api_scan_rule *rules;
    size_t n_rules;
    /* The most JSON values besides the lifted arrays an accepted text has. */
    size_t (*values_max)(const api_limits *limits);
    api_arrays_rank_fn rank; /* the arrays lifted */
} api_scan_table;

/*
 * Scans and parses `len` bytes of `body` under `t` and `limits` (NULL: no
 * limits): 0 with jansson's tree in *root and the lifted arrays in
 * *arrays (both the caller's), or -1 with *err — 422 limit_exceeded at the
 * offending path, 422 non_finite_number, 400 invalid_json, 503 without
 * memory — and nothing to free.
 */
int api_scan_parse(const char *body, size_t len, const api_scan_table *t, const api_limits *limits,
                   json_t **root, api_arrays **arrays, attn_error *err);

/* api_scan_parse, and a text that is not a JSON object refused (400
 * invalid_json). */
int api_scan_parse_object(const char *body, size_t len, const api_scan_table *t,
                          const api_limits *limits, json_t **root, api_arrays **arrays,
                          attn_error *err);

/* Checked size arithmetic: 0, or -1 when the result does not fit size_t. */
static inline int api_size_mul(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int api_size_add(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

#endif
