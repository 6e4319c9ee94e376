/*
 * request_layers.c — a stack of layers in POST /v1/attention's body
 * (API.md, "Layers"): the inline "weights": {"layers": [weight set, …]}
 * and the request field `layers`.
 *
 * Each layer's weight set is read by the one weight-set decoder
 * (request_weights.c, api_weights_decode) into a record of its own, which
 * owns that layer's buffers. That decoder names its fields under
 * /weights; for layer l the body's lifted arrays are looked up under
 * /weights/layers/l instead (api_arrays_alias), and an error's path is
 * moved there too. The layers must agree on d_model, h, d_head and
 * n_kv_heads: the first that differs from layer 0 is a 422 at its place.
 * Binding (request_bind.c, api_request_bind_layers) checks the `layers`
 * indices against L and builds the engine's view.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_path.h"
#include "api/matrix.h"
#include "api/request_internal.h"

int api_request_decode_layers_field(api_request *req, const json_t *layers, attn_error *err) {
    if (layers == NULL) return 0;
    if (api_decode_indices(layers, "layers", "layer", &req->layers_sent, &req->n_layers_sent, err) <
        0)
        return -1;
    if (req->n_layers_sent == 0)
        return attn_error_set(err, 422, "out_of_range", "/layers",
                              "layers is empty; list the layers to report, or leave it out for "
                              "all of them");
    req->layers_given = 1;
    return 0;
}

/* Moves a path the weight-set decoder wrote under /weights to layer l's
 * place, /weights/layers/l (one already in a layer, /weights/layers/<i>,
 * stays; a layer's own field named "layers…" is moved like any other). */
void api_error_in_layer(attn_error *err, size_t l) {
    static const char top[] = "/weights", stack[] = "/weights/layers/";
    char moved[sizeof err->path];
    if (strncmp(err->path, top, sizeof top - 1) != 0 ||
        (err->path[sizeof top - 1] != '\0' && err->path[sizeof top - 1] != '/') ||
        (!strncmp(err->path, stack, sizeof stack - 1) && err->path[sizeof stack - 1] >= '0' &&
         err->path[sizeof stack - 1] <= '9'))
        return;
    snprintf(moved, sizeof moved, "/weights/layers/%zu%s", l, err->path + sizeof top - 1);
    memcpy(err->path, moved, sizeof moved);
    /* the message names the weight set's fields as weights.…: say which */
    char message[sizeof err->message];
    snprintf(message, sizeof message, "layer %zu: %.*s", l, (int)sizeof message - 32, err->message);
    memcpy(err->message, message, sizeof message);
}

/* Layer l against layer 0: d_model, h, d_head and n_kv_heads. */
static int check_agrees(const attn_weights *w0, const attn_weights *w, size_t l, attn_error *err) {
    char path[API_PATH_MAX];
    size_t g0 = w0->n_kv_heads ? w0->n_kv_heads : w0->n_heads;
    size_t g = w->n_kv_heads ? w->n_kv_heads : w->n_heads;
    const char *what = w->n_heads != w0->n_heads ? "n_heads"
                       : w->d_head != w0->d_head ? "d_head"
                       : g != g0                 ? "n_kv_heads"
                                                 : NULL;
    if (what == NULL) return 0;
    size_t a = w->n_heads != w0->n_heads ? w->n_heads : w->d_head != w0->d_head ? w->d_head : g;
    size_t b = w->n_heads != w0->n_heads ? w0->n_heads : w->d_head != w0->d_head ? w0->d_head : g0;
    snprintf(path, sizeof path, "/weights/layers/%zu", l);
    return attn_error_set(err, 422, "dimension_mismatch", path,
                          "layer %zu has %s = %zu, layer 0 %zu; all layers share d_model, "
                          "n_heads, d_head and n_kv_heads",
                          l, what, a, b);
}

int api_layers_decode_weights(api_request *req, api_arrays *arrays, const json_t *weights,
                              size_t d_model, size_t d_context, const api_limits *limits,
                              attn_error *err) {
    static const char *const stack_fields[] = {"layers"};
    char at[API_PATH_MAX];
    const json_t *layers = json_object_get(weights, "layers");
    /* A stack: every layer's weight set is in it, none beside it. */
    if (api_check_fields(weights, stack_fields, 1, "weights with layers", "/weights",
                         "only layers (each layer is a whole weight set)", err) < 0)
        return -1;
    if (!json_is_array(layers))
        return attn_error_set(err, 400, "wrong_type", "/weights/layers",
                              "weights.layers is %s, expected an array of weight sets",
                              api_json_type_name(layers));
    size_t L = json_array_size(layers);
    if (L == 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/weights/layers",
                              "weights.layers is empty; a stack has at least one layer");
    api_layers *ly = req->layers = calloc(1, sizeof *ly);
    if (ly == NULL || (ly->recs = calloc(L, sizeof *ly->recs)) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    ly->n = L;
    int rc = 0;
    for (size_t l = 0; l < L && rc == 0; l++) {
        const json_t *set = json_array_get(layers, l);
        snprintf(at, sizeof at, "/weights/layers/%zu", l);
        if (!json_is_object(set)) {
            rc = attn_error_set(err, 400, "wrong_type", at,
                                "weights.layers[%zu] is %s, expected a weight set (an object "
                                "with heads, w_o, b_o, …)",
                                l, api_json_type_name(set));
            break;
        }
        api_request *r = ly->recs[l] = calloc(1, sizeof *r);
        if (r == NULL) {
            rc = attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
            break;
        }
        r->arrays = arrays;
        api_arrays_alias(arrays, "/weights", at);
        rc = api_weights_decode(r, d_model, d_context, set, limits, err);
        api_arrays_alias(arrays, NULL, NULL);
        r->arrays = NULL;
        if (rc < 0)
            api_error_in_layer(err, l);
        else if (l > 0)
            rc = check_agrees(&ly->recs[0]->inline_weights, &r->inline_weights, l, err);
    }
    return rc;
}

int api_request_decode_hidden(api_request *req, const json_t *hidden, const api_limits *limits,
                              attn_error *err) {
    char top[API_PATH_MAX], at[API_PATH_MAX], name[48];
    if (hidden == NULL) return 0;
    api_request_path(req, "hidden_states", top, sizeof top);
    if (!json_is_array(hidden))
        return attn_error_set(err, 400, "wrong_type", top,
                              "hidden_states is %s, expected an array of n × d_model matrices, "
                              "one per layer",
                              api_json_type_name(hidden));
    size_t L = json_array_size(hidden);
    if (L == 0)
        return attn_error_set(err, 422, "dimension_mismatch", top,
                              "hidden_states is empty; send one n × d_model matrix per layer");
    if ((req->hidden = calloc(L, sizeof *req->hidden)) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the hidden states");
    for (size_t l = 0; l < L; l++) {
        const json_t *m = json_array_get(hidden, l);
        size_t n, dm, count;
        api_path_index(at, sizeof at, top, l);
        snprintf(name, sizeof name, "hidden_states[%zu]", l);
        if (api_matrix_shape(m, req->arrays, name, at, &n, &dm, err) < 0) return -1;
        if (limits && n > limits->max_tokens)
            return attn_error_set(err, 422, "limit_exceeded", at,
                                  "%s has %zu rows (tokens), over the limit max_tokens = %zu", name,
                                  n, limits->max_tokens);
        if (api_check_width(at, name, "d_model", dm, limits, err) < 0) return -1;
        if (l == 0) {
            req->hidden_rows = n;
            req->hidden_cols = dm;
        } else if (n != req->hidden_rows || dm != req->hidden_cols) {
            return attn_error_set(err, 422, "dimension_mismatch", at,
                                  "%s is %zu × %zu, hidden_states[0] %zu × %zu; every layer's "
                                  "is n × d_model",
                                  name, n, dm, req->hidden_rows, req->hidden_cols);
        }
        if (api_size_mul(n, dm, &count) < 0 ||
            (req->hidden[l] = malloc(count * sizeof(float))) == NULL)
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the hidden states");
        req->n_hidden = l + 1; /* freed by api_request_free from here on */
        if (api_matrix_read(m, req->arrays, name, at, req->hidden[l], dm, err) < 0) return -1;
    }
    return 0;
}

int api_request_check_hidden(const api_request *req, attn_error *err) {
    if (!req->n_hidden || !req->embeddings) return 0; /* else n × d_model are hidden_states[0]'s */
    /* Their width is held to the weights' d_model at bind
     * (api_request_check_hidden_width): whether the embeddings' or theirs is
     * wrong, a named model decides. All share hidden_states[0]'s shape. */
    if (req->hidden_rows == req->n_tokens) return 0;
    char top[API_PATH_MAX], at[API_PATH_MAX];
    api_request_path(req, "hidden_states", top, sizeof top);
    api_path_index(at, sizeof at, top, 0);
    return attn_error_set(err, 422, "dimension_mismatch", at,
                          "hidden_states[0] has %zu rows, the embeddings %zu; every layer's is n "
                          "× d_model",
                          req->hidden_rows, req->n_tokens);
}

int api_request_check_hidden_width(const api_request *req, size_t d_model, attn_error *err) {
    if (!req->n_hidden || req->hidden_cols == d_model) return 0;
    char top[API_PATH_MAX], at[API_PATH_MAX];
    api_request_path(req, "hidden_states", top, sizeof top);
    api_path_index(at, sizeof at, top, 0);
    return attn_error_set(err, 422, "dimension_mismatch", at,
                          "hidden_states[0] rows have %zu numbers, expected d_model = %zu",
                          req->hidden_cols, d_model);
}
