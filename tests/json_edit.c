/*
 * json_edit.c — see json_edit.h.
 */
#include "tests/json_edit.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *tj_at(json_t *root, const char *path) {
    char buf[256], *save = NULL;
    json_t *v = root;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok_r(buf, "/", &save); tok && v; tok = strtok_r(NULL, "/", &save)) {
        if (json_is_array(v))
            v = json_array_get(v, strtoul(tok, NULL, 10));
        else
            v = json_object_get(v, tok);
    }
    return v;
}

/* The parent of `path`'s last step, and that step. */
static json_t *parent_of(json_t *root, const char *path, const char **last) {
    char parent[256];
    *last = strrchr(path, '/');
    ck_assert_msg(*last != NULL, "not a path: %s", path);
    snprintf(parent, sizeof parent, "%.*s", (int)(*last - path), path);
    json_t *p = parent[0] ? tj_at(root, parent) : root;
    ck_assert_msg(p != NULL, "no parent for %s", path);
    (*last)++;
    return p;
}

void tj_put(json_t *root, const char *path, json_t *value) {
    const char *last;
    json_t *p = parent_of(root, path, &last);
    if (json_is_array(p))
        json_array_set_new(p, strtoul(last, NULL, 10), value);
    else
        json_object_set_new(p, last, value);
}

void tj_del(json_t *root, const char *path) {
    const char *last;
    json_t *p = parent_of(root, path, &last);
    if (json_is_array(p))
        json_array_remove(p, strtoul(last, NULL, 10));
    else
        json_object_del(p, last);
}
