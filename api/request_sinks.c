/*
 * request_sinks.c — a weight set's attention sinks and chunk, from JSON
 * (docs/API.md, "Attention of 2025–2026 models"):
 *
 *   sinks   h numbers, a sink logit per head (GPT-OSS): a vector of h, or a
 *           tensor object of shape [h]; not h long is a 422
 *           dimension_mismatch, a number past float32 a 422
 *           non_finite_number, both at /weights/sinks
 *   chunk   an integer c ≥ 1 (Llama 4's chunked attention): a fraction or
 *           another type is a 400 wrong_type, 0 or less a 422
 *           out_of_range, at /weights/chunk
 *
 * With a context, a chunk is refused at bind as a window is (it compares
 * positions of one sequence). The sinks' buffer belongs to the request
 * (req->sinks, freed by api_request_free).
 */
#include "api/request_internal.h"

#include <math.h>
#include <stdlib.h>

#include "api/matrix.h"

/* Integers a double holds exactly: chunk's largest, as window's. */
#define CHUNK_MAX 9007199254740992.0 /* 2^53 */

static int decode_chunk(const json_t *v, attn_weights *w, attn_error *err) {
    const char *path = "/weights/chunk";
    if (!json_is_number(v))
        return attn_error_set(err, 400, "wrong_type", path,
                              "weights.chunk is %s, expected an integer ≥ 1",
                              api_json_type_name(v));
    double d = json_number_value(v);
    if (floor(d) != d)
        return attn_error_set(err, 400, "wrong_type", path,
                              "weights.chunk = %.16g is not an integer, expected an integer", d);
    if (!(d >= 1 && d <= CHUNK_MAX))
        return attn_error_set(err, 422, "out_of_range", path,
                              "weights.chunk must be an integer from 1 to %.0f, got %.16g",
                              CHUNK_MAX, d);
    w->chunk = (size_t)d;
    return 0;
}

int api_weights_decode_sinks(api_request *req, const json_t *weights, attn_weights *w,
                             attn_error *err) {
    const json_t *v;
    if ((v = json_object_get(weights, "chunk")) && decode_chunk(v, w, err) < 0) return -1;
    if (!(v = json_object_get(weights, "sinks"))) return 0;
    req->sinks = malloc(w->n_heads * sizeof(float));
    if (req->sinks == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the weights");
    if (api_vector_read(v, req->arrays, "weights.sinks", "/weights/sinks", w->n_heads, "n_heads",
                        req->sinks, err) < 0)
        return -1;
    w->sinks = req->sinks;
    return 0;
}
