/*
 * store.h — the models the server serves: a set loaded from a directory,
 * and a holder that swaps sets on reload.
 *
 * A store_set is every "*.safetensors" file of one directory (hidden files
 * excepted), loaded in file-name order (bytewise), kept sorted by model
 * name. It is immutable once loaded and reference-counted (atomically):
 * any number of threads may look models up and compute with their weights
 * at once, with no lock and no copy. The last store_set_release destroys
 * every model (frees the buffers, unmaps mapped files). Each file is read
 * into memory unless the options ask for mapping (model.h).
 *
 * Loading fails as a whole on the first bad file (in file-name order), or,
 * with skip_bad, leaves bad files out and reports each one to a callback.
 * Two files that define the same model name are a fault of the second one
 * (in file-name order); the message names both files. An empty directory
 * is a valid empty set; a missing one is an error.
 *
 * The holder `store` publishes one set at a time, for SIGHUP reloads:
 *
 *   worker, per request:                       reloader:
 *     s = store_current(st)  (mutex, retains)    n = store_set_load(...)
 *     … compute with s, answer …                 store_replace(st, n)
 *     store_set_release(s)
 *
 * A replaced set lives on until its last holder releases it, so requests in
 * flight finish on the models they started with, and is destroyed by that
 * release.
 */
#ifndef STORE_STORE_H
#define STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "store/error.h"
#include "store/model.h"

/* ---- a set of models ----------------------------------------------------- */

typedef struct store_set store_set;

/* Called once per file left out under skip_bad: `file` is its path,
 * `message` the full error ("<file>: <fault>"); both valid for the call
 * only. */
typedef void (*store_skip_fn)(void *ctx, const char *file, const char *message);

typedef struct store_load_options {
    int skip_bad;          /* 0: the first bad file fails the load */
    store_skip_fn on_skip; /* may be NULL */
    void *ctx;             /* passed to on_skip */
    int map_files;         /* 0: read each file into memory (STORE_READ_COPY); 1: map it
                              (STORE_READ_MAP: files may then only be replaced by rename) */
} store_load_options;

/*
 * Loads every model of directory `dir`. opt may be NULL (fail on the first
 * bad file). Returns 0 and *out, a set with one reference that the caller
 * owns (give it back with store_set_release); or -1 with *out NULL and err
 * "<file or dir>: <fault>". Under skip_bad, a file that fails for any
 * reason (lack of memory included) is skipped; only the directory itself
 * (missing, unreadable) or memory for the set fails the load.
 */
int store_set_load(store_set **out, const char *dir, const store_load_options *opt,
                   attn_error *err);

/* A new empty set with one reference (for a server without a models
 * directory), or NULL when out of memory. */
store_set *store_set_create_empty(void);

/* Takes one more reference and returns s. NULL is returned as is. */
store_set *store_set_retain(store_set *s);

/* Gives back one reference; the last one destroys the set and its models.
 * NULL is a no-op. */
void store_set_release(store_set *s);

/* Number of models. */
size_t store_set_count(const store_set *s);

/* The index-th model in name order (bytewise), or NULL past the end. Owned
 * by the set: valid while the caller holds a reference. */
const store_model *store_set_at(const store_set *s, size_t index);

/* The model called `name`, or NULL (binary search; no lock). Owned by the
 * set, as above. */
const store_model *store_set_find(const store_set *s, const char *name);

/* Bytes the set's models take: mapped from files, and in owned buffers. */
void store_set_bytes(const store_set *s, size_t *mapped, size_t *owned);

/* ---- the holder ------------------------------------------------------------ */

typedef struct store store;

/* A holder publishing `initial`, whose reference it takes (even on failure;
 * NULL publishes no set). Returns NULL when out of memory. Free with
 * store_destroy. */
store *store_create(store_set *initial);

/* Releases the holder's reference to its current set and frees it. The
 * caller makes sure no thread uses the holder any more; sets retained from
 * it stay valid until released. */
void store_destroy(store *st);

/* The current set with one more reference (the caller releases it), or NULL
 * when none was published. Takes the holder's mutex briefly. */
store_set *store_current(store *st);

/* Publishes new_set, taking the caller's reference to it, and releases the
 * holder's reference to the old set (destroyed once nobody holds it). */
void store_replace(store *st, store_set *new_set);

#endif
