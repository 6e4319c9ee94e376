/*
 * json_edit.h — editing test requests by slash paths ("/weights/heads/1/w_k"),
 * for the suites that build a valid request and then break one value of it.
 * Paths are plain keys and array indices (no JSON Pointer escapes).
 */
#ifndef TESTS_JSON_EDIT_H
#define TESTS_JSON_EDIT_H

#include <jansson.h>

/* The value at `path` under root (borrowed), or NULL. */
json_t *tj_at(json_t *root, const char *path);

/* Replaces the value at `path` with `value` (stolen); the parent must exist. */
void tj_put(json_t *root, const char *path, json_t *value);

/* Removes the value at `path`. */
void tj_del(json_t *root, const char *path);

#endif
