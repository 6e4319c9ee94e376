/*
 * import_source.c — the checkpoint's files (import_internal.h): a
 * directory's config.json (jansson) and its safetensors (model.safetensors,
 * or every shard that model.safetensors.index.json's weight_map names), or
 * one file; and config.json's fields, read by type.
 *
 * Each file is opened with store_open_regular (open.h), so that a FIFO or a
 * directory in a file's place is refused by name, never waited on. The
 * safetensors stay mapped (read-only, STORE_READ_MAP) until
 * import_src_close, since one layer is a small part of files that may be
 * larger than memory.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/import_internal.h"
#include "store/open.h"

void import_src_close(import_src *s) {
    for (size_t i = 0; i < s->n_files; i++)
        store_file_close(s->files[i]);
    s->n_files = 0;
    json_decref(s->config);
    s->config = NULL;
}

const store_tensor *import_src_find(const import_src *s, const char *name) {
    for (size_t i = 0; i < s->n_files; i++) {
        const store_tensor *t = store_file_find(s->files[i], name);
        if (t) return t;
    }
    return NULL;
}

static int src_add(import_src *s, const char *path, attn_error *err) {
    if (s->n_files == IMPORT_SHARDS_MAX)
        return store_error_set(err, path, "more than %d shards", IMPORT_SHARDS_MAX);
    if (store_file_open_mode(&s->files[s->n_files], path, STORE_READ_MAP, err) != 0) return -1;
    s->n_files++;
    return 0;
}

/* The JSON value of the file at path: a regular file (a FIFO named
 * config.json would otherwise block the import for good: open.h). NULL
 * with err set when it cannot be opened or is not JSON. */
static json_t *json_file_load(const char *path, attn_error *err) {
    int fd = store_open_regular(path, NULL, err);
    if (fd < 0) return NULL;
    json_error_t jerr;
    json_t *v = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
    close(fd);
    if (!v) store_error_set(err, path, "not JSON: %s (line %d)", jerr.text, jerr.line);
    return v;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int import_src_open(import_src *s, const char *path, attn_error *err) {
    memset(s, 0, sizeof *s);
    if (!is_dir(path)) return src_add(s, path, err);
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", path);
    if (exists(p)) {
        if (!(s->config = json_file_load(p, err))) return -1;
        if (!json_is_object(s->config)) return store_error_set(err, p, "not a JSON object");
    }
    snprintf(p, sizeof p, "%s/model.safetensors", path);
    if (exists(p)) return src_add(s, p, err);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
    if (!exists(p))
        return store_error_set(err, path,
                               "a checkpoint directory holds model.safetensors or "
                               "model.safetensors.index.json, and this one neither");
    json_t *index = json_file_load(p, err);
    if (!index) return -1;
    json_t *map = json_object_get(index, "weight_map");
    if (!json_is_object(map)) {
        json_decref(index);
        return store_error_set(err, p, "no \"weight_map\" object");
    }
    /* Each shard once, in the order first named. */
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(map, key, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/')) {
            rc = store_error_set(err, p, "weight_map's \"%s\" is not a file name of the directory",
                                 key);
            break;
        }
        char shard[4096];
        snprintf(shard, sizeof shard, "%s/%s", path, file);
        int seen = 0;
        for (size_t i = 0; i < s->n_files && !seen; i++)
            seen = strcmp(store_file_path(s->files[i]), shard) == 0;
        if (!seen && (rc = src_add(s, shard, err)) != 0) break;
    }
    json_decref(index);
    if (rc == 0 && s->n_files == 0) rc = store_error_set(err, p, "an empty weight_map");
    return rc;
}

/* ---- config.json ------------------------------------------------------------ */

json_t *import_cfg_get(const json_t *cfg, const char *const *keys, const char **which) {
    for (; cfg && *keys; keys++) {
        json_t *v = json_object_get(cfg, *keys);
        if (v && !json_is_null(v)) {
            *which = *keys;
            return v;
        }
    }
    return NULL;
}

int import_cfg_count(const json_t *cfg, const char *const *keys, size_t *out, const char *path,
                     attn_error *err) {
    const char *which;
    json_t *v = import_cfg_get(cfg, keys, &which);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return store_error_set(err, path, "config.json's \"%s\" is not a positive integer", which);
    *out = (size_t)json_integer_value(v);
    return 1;
}

int import_cfg_number(const json_t *cfg, const char *const *keys, double *out, const char *path,
                      attn_error *err) {
    const char *which;
    json_t *v = import_cfg_get(cfg, keys, &which);
    if (!v) return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0))
        return store_error_set(err, path, "config.json's \"%s\" is not a number > 0", which);
    *out = json_number_value(v);
    return 1;
}
