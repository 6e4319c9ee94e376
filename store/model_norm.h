/*
 * model_norm.h — a layer's norms and query temperature in a model file
 * (models/README.md, "Norms and temperature"): the metadata keys and
 * tensors model.c takes beside its own, checked and bound here.
 */
#ifndef STORE_MODEL_NORM_H
#define STORE_MODEL_NORM_H

#include <stddef.h>

#include "attention/attention.h"
#include "store/safetensors.h"

/* The tensors, in this order: a layer's slots in model.c follow it. */
enum {
    STORE_NORM_WEIGHT,      /* norm.weight       [dm] */
    STORE_NORM_BIAS,        /* norm.bias         [dm], norm_type layer */
    STORE_POST_NORM_WEIGHT, /* post_norm.weight  [dm] */
    STORE_POST_NORM_BIAS,   /* post_norm.bias    [dm], post_norm_type layer */
    STORE_Q_NORM_WEIGHT,    /* q_norm.weight     [dh] (scope head) or [hd] (all) */
    STORE_K_NORM_WEIGHT,    /* k_norm.weight     [dh] or [gd] */
    STORE_NORM_TENSORS
};

/* The per-layer metadata keys: norm_type, norm_eps, norm_offset, the same
 * for post_norm, qk_norm_scope, qk_norm_eps, qk_norm_offset,
 * temperature_floor_scale, temperature_attn_scale. */
#define STORE_NORM_KEYS 11
extern const char *const store_norm_keys[STORE_NORM_KEYS];

/*
 * The layer's norm keys (each `prefix` + key of f's metadata) and tensors
 * t[STORE_NORM_TENSORS] (NULL when absent) against its sizes (dm, h, g, dh)
 * and its RoPE (rope.dims; temperature is for a layer without it): *w's
 * norm, post_norm, qk_norm and temperature set but for their arrays, which
 * store_norms_bind points at the tensors' values. 0, or -1 with err set
 * (status 0, path `path`, a message naming the key or tensor).
 */
int store_norms_check(attn_weights *w, const store_file *f, const char *prefix,
                      const store_tensor *const *t, size_t dm, size_t h, size_t g, size_t dh,
                      size_t rope_dims, const char *path, attn_error *err);
void store_norms_bind(attn_weights *w, const attn_weights *checked, const float *const *p);

#endif
