/*
 * tensor.h — what store/ reads out of one tensor of an open file
 * (safetensors.h): its shape as text for messages, and its values as
 * float32, checked finite. The model loader (model.c) and the checkpoint
 * importer (import_tensors.c) both read their tensors through these, so that a
 * value either would refuse is refused by both, with the same message.
 */
#ifndef STORE_TENSOR_H
#define STORE_TENSOR_H

#include <stddef.h>

#include "store/error.h"
#include "store/safetensors.h"

/* "[2, 3]" into buf (cut to len), for messages; returns buf. */
const char *store_tensor_shape_text(const store_tensor *t, char *buf, size_t len);

/* IEEE half and bfloat16 (bit patterns) to float, exactly: subnormal halfs
 * become normal floats, infinities stay infinite, NaNs stay NaN. */
float store_f16_to_f32(unsigned short h);
float store_bf16_to_f32(unsigned short b);

/*
 * t's t->count values into out, as float32: F32 copied (t->data need not
 * be aligned), F16 / BF16 converted exactly; then checked as
 * store_tensor_check_finite does. t's dtype is F32, F16 or BF16 (the
 * caller checked it). Returns 0, or -1 with err set.
 */
int store_tensor_read_f32(float *out, const store_tensor *t, const char *path, attn_error *err);

/* Checks the t->count floats at v (t's values, wherever they are) finite.
 * Returns 0, or -1 with err "<path>: tensor '<name>' holds a non-finite
 * value (NaN, inf or -inf) at element <i>" for the first one. */
int store_tensor_check_finite(const float *v, const store_tensor *t, const char *path,
                              attn_error *err);

#endif
