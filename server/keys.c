/*
 * keys.c — the API key set (see keys.h).
 *
 * The set is an array of strings behind a read-write lock: every request
 * reads it, a reload (SIGHUP, rare) swaps in a new array under the write
 * lock and frees the old one.
 */
#include "server/keys.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "store/open.h"

#define SRV_KEY_MAX 256

struct srv_keys {
    pthread_rwlock_t lock;
    char **keys; /* NULL: none loaded */
    size_t count;
};

srv_keys *srv_keys_create(void) {
    srv_keys *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    if (pthread_rwlock_init(&k->lock, NULL) != 0) {
        free(k);
        return NULL;
    }
    return k;
}

static void keys_free(char **keys, size_t count) {
    for (size_t i = 0; i < count; i++)
        free(keys[i]);
    free(keys);
}

void srv_keys_destroy(srv_keys *k) {
    if (!k) return;
    keys_free(k->keys, k->count);
    pthread_rwlock_destroy(&k->lock);
    free(k);
}

/* A key's characters: printable ASCII, no space. */
static int key_char(unsigned char c) {
    return c > ' ' && c < 0x7f;
}

long srv_keys_load(srv_keys *k, const char *path, attn_error *err) {
    /* a FIFO would hold the start or a reload until a writer came */
    attn_error open_err;
    int fd = store_open_regular(path, NULL, &open_err);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (fd < 0) {
        attn_error_set(err, 0, "invalid_api_keys", NULL, "--api-keys-file %s", open_err.message);
        return -1;
    }
    if (!f) {
        attn_error_set(err, 0, "invalid_api_keys", NULL, "--api-keys-file %s: %s", path,
                       strerror(errno));
        close(fd);
        return -1;
    }
    char **keys = NULL, line[SRV_KEY_MAX + 64];
    size_t count = 0, cap = 0, lineno = 0;
    int bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            attn_error_set(err, 0, "invalid_api_keys", NULL,
                           "--api-keys-file %s: line %zu is longer than %d characters", path,
                           lineno, SRV_KEY_MAX);
            bad = 1;
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        for (size_t i = 0; i < len && !bad; i++)
            if (!key_char((unsigned char)line[i])) {
                attn_error_set(
                    err, 0, "invalid_api_keys", NULL,
                    "--api-keys-file %s: line %zu holds a character that is not printable "
                    "ASCII or is a space",
                    path, lineno);
                bad = 1;
            }
        if (bad) break;
        if (len > SRV_KEY_MAX) {
            attn_error_set(err, 0, "invalid_api_keys", NULL,
                           "--api-keys-file %s: line %zu is longer than %d characters", path,
                           lineno, SRV_KEY_MAX);
            bad = 1;
            break;
        }
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            char **grown = realloc(keys, ncap * sizeof *keys);
            if (!grown) {
                attn_error_set(err, 0, "invalid_api_keys", NULL,
                               "--api-keys-file %s: out of memory", path);
                bad = 1;
                break;
            }
            keys = grown, cap = ncap;
        }
        if (!(keys[count] = strdup(line))) {
            attn_error_set(err, 0, "invalid_api_keys", NULL, "--api-keys-file %s: out of memory",
                           path);
            bad = 1;
            break;
        }
        count++;
    }
    if (!bad && ferror(f)) {
        attn_error_set(err, 0, "invalid_api_keys", NULL, "--api-keys-file %s: %s", path,
                       strerror(errno));
        bad = 1;
    }
    fclose(f);
    memset(line, 0, sizeof line);
    if (!bad && count == 0) {
        attn_error_set(err, 0, "invalid_api_keys", NULL, "--api-keys-file %s: no key in the file",
                       path);
        bad = 1;
    }
    if (bad) {
        keys_free(keys, count);
        return -1;
    }
    pthread_rwlock_wrlock(&k->lock);
    char **old = k->keys;
    size_t old_count = k->count;
    k->keys = keys;
    k->count = count;
    pthread_rwlock_unlock(&k->lock);
    keys_free(old, old_count);
    return (long)count;
}

int srv_keys_required(srv_keys *k) {
    pthread_rwlock_rdlock(&k->lock);
    int required = k->keys != NULL;
    pthread_rwlock_unlock(&k->lock);
    return required;
}

/* 1 when the given bytes equal the key; reads every byte of the key. */
static int key_equal(const char *given, size_t given_len, const char *key) {
    size_t key_len = strlen(key);
    unsigned diff = given_len != key_len;
    for (size_t i = 0; i < key_len; i++)
        diff |= (unsigned char)(i < given_len ? given[i] : 0) ^ (unsigned char)key[i];
    return diff == 0;
}

int srv_keys_allow(srv_keys *k, const char *authorization) {
    static const char scheme[] = "Bearer ";
    if (!authorization || strncasecmp(authorization, scheme, sizeof scheme - 1) != 0) return 0;
    const char *given = authorization + sizeof scheme - 1;
    while (*given == ' ')
        given++;
    size_t len = strlen(given);
    while (len > 0 && given[len - 1] == ' ')
        len--;
    int found = 0;
    pthread_rwlock_rdlock(&k->lock);
    for (size_t i = 0; i < k->count; i++) /* no early exit: every key is compared */
        found |= key_equal(given, len, k->keys[i]);
    pthread_rwlock_unlock(&k->lock);
    return found;
}
