/*
 * model_view.h — what api/ is shown of a loaded model: api/ knows nothing
 * of the store, so the server lends it views of a store_model (pointers
 * into the model, valid while the caller holds the model's set).
 */
#ifndef SRV_MODEL_VIEW_H
#define SRV_MODEL_VIEW_H

#include "api/error.h"
#include "api/models.h"
#include "api/vocabulary.h"
#include "store/model.h"
#include "store/store.h"

/* m's vocabulary in *out, and out; NULL (out untouched) when m has none. */
const api_vocabulary *srv_model_vocabulary(const store_model *m, api_vocabulary *out);

/* m as the models endpoints show it; its vocabulary, if any, described in
 * *vocab, which must live as long as the result. */
api_model_info srv_model_info(const store_model *m, api_vocabulary *vocab);

/*
 * The model `name` (len bytes, not NUL-terminated) of `set` (may be NULL),
 * or NULL with the error in *err: 404 unknown_model at `path`, the field
 * of a body that named it, or, when the URL named it (path NULL), without
 * a path and without echoing the name (it is whatever the client put in
 * the path). A name no model can have (store_model_name_valid) is a 400
 * invalid_value at `path`, or from the URL the same 404.
 */
const store_model *srv_model_find(const store_set *set, const char *name, size_t len,
                                  const char *path, attn_error *err);

/* The 404 of a model the URL names that is not loaded, in *err; -1. */
int srv_model_unknown(attn_error *err);

#endif
