/*
 * store.c — the model set and its holder (store.h).
 *
 * Loading: readdir, keep the "*.safetensors" names not starting with '.'
 * (a directory or other non-file by that name is a bad file), sort them
 * bytewise, load each model in that order. Then the models
 * are sorted by (name, file index) so that duplicates sit side by side with
 * the earlier file first; the later one is the fault. Lookups are binary
 * searches on the sorted array, which never changes after the load.
 *
 * Lifetime: a set's reference count is atomic; retain is a relaxed
 * increment, release an acq_rel decrement (the thread that drops the last
 * reference must see every other thread's last use of the set before it
 * frees it).
 *
 * The holder: a mutex guards the pointer to the current set while
 * store_current retains it and store_replace swaps it; the old set is
 * released outside the mutex (destroying a set frees gigabytes or unmaps
 * files, which is not work to do under a lock).
 */
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct store_set {
    atomic_size_t refs;
    store_model **models; /* sorted by name */
    size_t count;
};

struct store {
    pthread_mutex_t lock;
    store_set *current; /* guarded by lock */
};

/* ---- the set ------------------------------------------------------------- */

store_set *store_set_create_empty(void) {
    store_set *s = calloc(1, sizeof *s);
    if (s) atomic_init(&s->refs, 1);
    return s;
}

static void set_destroy(store_set *s) {
    for (size_t i = 0; i < s->count; i++)
        store_model_destroy(s->models[i]);
    free(s->models);
    free(s);
}

store_set *store_set_retain(store_set *s) {
    if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void store_set_release(store_set *s) {
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) set_destroy(s);
}

size_t store_set_count(const store_set *s) {
    return s->count;
}

const store_model *store_set_at(const store_set *s, size_t index) {
    return index < s->count ? s->models[index] : NULL;
}

static int model_cmp_name(const void *key, const void *elem) {
    return strcmp(key, (*(store_model *const *)elem)->name);
}

const store_model *store_set_find(const store_set *s, const char *name) {
    if (s->count == 0) return NULL; /* bsearch wants a non-null base even for 0 elements */
    store_model *const *m = bsearch(name, s->models, s->count, sizeof *s->models, model_cmp_name);
    return m ? *m : NULL;
}

void store_set_bytes(const store_set *s, size_t *mapped, size_t *owned) {
    size_t a = 0, b = 0;
    for (size_t i = 0; i < s->count; i++) {
        a += s->models[i]->bytes_mapped;
        b += s->models[i]->bytes_owned;
    }
    if (mapped) *mapped = a;
    if (owned) *owned = b;
}

/* ---- loading ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The paths "<dir>/<name>" of the directory's model files, sorted. */
static int dir_list(const char *dir, char ***out, size_t *count, attn_error *err) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return store_error_set(err, dir, "cannot open the models directory: %s", strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    size_t dir_len = strlen(dir);
    errno = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".safetensors")) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) goto oom;
            names = grown;
        }
        size_t len = dir_len + 1 + strlen(de->d_name) + 1;
        if (!(names[n] = malloc(len))) goto oom;
        memcpy(names[n], dir, dir_len);
        names[n][dir_len] = '/';
        strcpy(names[n] + dir_len + 1, de->d_name);
        n++;
        errno = 0;
    }
    if (errno != 0) {
        store_error_set(err, dir, "cannot read the models directory: %s", strerror(errno));
        goto fail;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    *count = n;
    return 0;

oom:
    store_error_set(err, dir, "out of memory");
fail:
    closedir(d);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return -1;
}

/* A model with the index of its file, for the duplicate check. */
typedef struct loaded {
    store_model *model;
    size_t file;
} loaded;

static int loaded_cmp(const void *a, const void *b) {
    const loaded *x = a, *y = b;
    int c = strcmp(x->model->name, y->model->name);
    if (c) return c;
    return x->file < y->file ? -1 : x->file > y->file;
}

static void skip(const store_load_options *opt, const char *file, const attn_error *e) {
    if (opt->on_skip) opt->on_skip(opt->ctx, file, e->message);
}

int store_set_load(store_set **out, const char *dir, const store_load_options *opt,
                   attn_error *err) {
    static const store_load_options strict = {0, NULL, NULL, 0};
    if (!opt) opt = &strict;
    *out = NULL;

    char **files;
    size_t n_files;
    if (dir_list(dir, &files, &n_files, err) != 0) return -1;

    int rc = -1;
    loaded *models = calloc(n_files ? n_files : 1, sizeof *models);
    store_set *s = store_set_create_empty();
    size_t n = 0;
    if (!models || !s) {
        store_error_set(err, dir, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_files; i++) {
        attn_error e;
        store_read_mode mode = opt->map_files ? STORE_READ_MAP : STORE_READ_COPY;
        if (store_model_load_mode(&models[n].model, files[i], mode, &e) == 0) {
            models[n++].file = i;
            continue;
        }
        if (!opt->skip_bad) {
            if (err) *err = e;
            goto done;
        }
        skip(opt, files[i], &e);
    }

    if (n) qsort(models, n, sizeof *models, loaded_cmp);
    s->models = calloc(n ? n : 1, sizeof *s->models);
    if (!s->models) {
        store_error_set(err, dir, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (s->count > 0 && strcmp(s->models[s->count - 1]->name, models[i].model->name) == 0) {
            attn_error e;
            const char *file = files[models[i].file];
            store_error_set(&e, file, "model name '%s' is already defined by %s",
                            models[i].model->name, s->models[s->count - 1]->path);
            if (!opt->skip_bad) {
                if (err) *err = e;
                goto done;
            }
            skip(opt, file, &e);
            store_model_destroy(models[i].model);
            models[i].model = NULL;
            continue;
        }
        s->models[s->count++] = models[i].model;
        models[i].model = NULL;
    }
    *out = s;
    s = NULL;
    rc = 0;

done:
    for (size_t i = 0; i < n; i++)
        store_model_destroy(models[i].model);
    free(models);
    store_set_release(s);
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    return rc;
}

/* ---- the holder ------------------------------------------------------------ */

store *store_create(store_set *initial) {
    store *st = calloc(1, sizeof *st);
    if (!st || pthread_mutex_init(&st->lock, NULL) != 0) {
        free(st);
        store_set_release(initial);
        return NULL;
    }
    st->current = initial;
    return st;
}

void store_destroy(store *st) {
    if (!st) return;
    store_set_release(st->current);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

store_set *store_current(store *st) {
    pthread_mutex_lock(&st->lock);
    store_set *s = store_set_retain(st->current);
    pthread_mutex_unlock(&st->lock);
    return s;
}

void store_replace(store *st, store_set *new_set) {
    pthread_mutex_lock(&st->lock);
    store_set *old = st->current;
    st->current = new_set;
    pthread_mutex_unlock(&st->lock);
    store_set_release(old);
}
