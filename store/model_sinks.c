/*
 * model_sinks.c — a model layer's attention sinks and chunk (model_sinks.h).
 *
 * Called by model.c's layer check, after the variants' metadata and before
 * the shapes' values are read: the sinks tensor's shape (its values are
 * bound, converted and checked finite with the layer's other tensors) and
 * the chunk key.
 */
#include "store/model_sinks.h"

#include <stdio.h>

#include "store/model.h"
#include "store/tensor.h"

/* The largest chunk: positions are below 2^31. */
#define CHUNK_MAX ((size_t)1 << 31)

int store_layer_sinks_check(const store_file *f, const char *prefix, const store_tensor *sinks,
                            size_t n_heads, int cross, size_t *chunk, const char *path,
                            attn_error *err) {
    char key[96], got[160];
    snprintf(key, sizeof key, "%schunk", prefix);
    const char *text = store_file_metadata(f, key);
    *chunk = 0;
    if (text && (store_size_parse(text, CHUNK_MAX, chunk) != 0 || *chunk == 0))
        return store_error_set(err, path, "metadata '%s' is '%s', not a decimal integer in 1 … %zu",
                               key, text, CHUNK_MAX);
    if (*chunk && cross)
        return store_error_set(err, path,
                               "'%s' in a cross-attention model (w_q, w_kv): chunks compare "
                               "positions of one sequence",
                               key);
    if (sinks && !(sinks->rank == 1 && sinks->shape[0] == n_heads))
        return store_error_set(err, path, "tensor '%s' has shape %s, expected [n_heads] = [%zu]",
                               sinks->name, store_tensor_shape_text(sinks, got, sizeof got),
                               n_heads);
    return 0;
}
