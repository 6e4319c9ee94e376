/*
 * models_norm.h — internal to api/: a model's norms and temperature in the
 * models endpoints' JSON (models_norm.c, for models.c).
 */
#ifndef API_MODELS_NORM_H
#define API_MODELS_NORM_H

#include <stddef.h>

#include "api/buffer.h"
#include "api/json_write.h"
#include "attention/attention.h"

/* ,"norm":{…},"post_norm":{…},"qk_norm":{…},"temperature":{…}, those w has:
 * their settings (type, eps, offset, scope; floor_scale, attn_scale), and
 * with `arrays` their weights and biases too, the inline form a request
 * reads back. */
void api_norms_write(api_buffer *b, const attn_weights *w, int arrays, api_nonfinite *bad);

/* An upper bound of what api_norms_write writes with arrays (its floats at
 * most float_max bytes each); the sizes are the store's, far from overflow. */
size_t api_norms_json_bound(const attn_weights *w, size_t float_max);

#endif
