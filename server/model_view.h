/*
 * model_view.h — what api/ is shown of a loaded model: api/ knows nothing
 * of the store, so the server lends it views of a store_model (pointers
 * into the model, valid while the caller holds the model's set).
 */
#ifndef SRV_MODEL_VIEW_H
#define SRV_MODEL_VIEW_H

#include "api/models.h"
#include "api/vocabulary.h"
#include "store/model.h"

/* m's vocabulary in *out, and out; NULL (out untouched) when m has none. */
const api_vocabulary *srv_model_vocabulary(const store_model *m, api_vocabulary *out);

/* m as the models endpoints show it; its vocabulary, if any, described in
 * *vocab, which must live as long as the result. */
api_model_info srv_model_info(const store_model *m, api_vocabulary *vocab);

#endif
