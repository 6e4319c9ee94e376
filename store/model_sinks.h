/*
 * model_sinks.h — a model layer's attention sinks and chunk (model.c's
 * helper; models/README.md): tensor `sinks` of shape [n_heads] and
 * metadata `chunk`, a decimal integer 1 … 2^31 (positions are below
 * 2^31: a wider chunk is no chunk), each with a layer's prefix in a stack.
 * A cross-attention layer refuses a chunk, as it does a window.
 *
 * Internal to store/: store_model (model.h) is the public face.
 */
#ifndef STORE_MODEL_SINKS_H
#define STORE_MODEL_SINKS_H

#include <stddef.h>

#include "store/error.h"
#include "store/safetensors.h"

/* Checks the layer whose metadata keys carry `prefix` ("" or
 * "layers.<l>."): its sinks tensor (or NULL) against n_heads, and its
 * chunk into *chunk (0 when absent). 0, or -1 with err "<path>: <fault>". */
int store_layer_sinks_check(const store_file *f, const char *prefix, const store_tensor *sinks,
                            size_t n_heads, int cross, size_t *chunk, const char *path,
                            attn_error *err);

#endif
