/*
 * codec_attention.c — POST /v1/attention's wire format: one sequence, its
 * fields at the top of the body beside the model or the weights and the
 * options; the answer is one JSON object (response.c).
 *
 * The body's text is scanned first (scan.h): the embeddings, a custom
 * mask and the inline weights' arrays are lifted out of the text, and the
 * rest is held to the limits before jansson builds a tree. The one record
 * is the call's head record and its sequence at once.
 */
#include "api/call_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/error.h"
#include "api/json_path.h"
#include "api/matrix.h"

static const char *const top_fields[] = {"embeddings", "tokens",       "model",   "weights",
                                         "mask",       "scale",        "return",  "select_heads",
                                         "encoding",   "positions",    "context", "context_tokens",
                                         "layers",     "hidden_states"};

static int attention_array_rank(const char *path) {
    static const char heads[] = "/weights/heads/", kv[] = "/weights/kv_heads/",
                      layers[] = "/weights/layers/";
    const char *p;
    if (!strncmp(path, layers, sizeof layers - 1)) {
        /* a layer's weight set, as the weights at the top */
        char top[API_PATH_MAX];
        p = path + sizeof layers - 1;
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p != '/' || snprintf(top, sizeof top, "/weights%s", p) >= (int)sizeof top) return 0;
        return attention_array_rank(top);
    }
    if (!strncmp(path, "/hidden_states/", 15)) {
        /* one n × d_model matrix per layer, as the embeddings */
        for (p = path + 15; *p >= '0' && *p <= '9'; p++)
            ;
        return p > path + 15 && *p == '\0' ? 2 : 0;
    }
    if (!strcmp(path, "/mask")) return API_ARRAYS_MASK;
    if (!strcmp(path, "/embeddings") || !strcmp(path, "/context") || !strcmp(path, "/weights/w_o"))
        return 2;
    if (!strcmp(path, "/weights/b_o") || !strcmp(path, "/weights/alibi") ||
        !strcmp(path, "/weights/sinks"))
        return 1;
    if (!strncmp(path, heads, sizeof heads - 1))
        p = path + sizeof heads - 1;
    else if (!strncmp(path, kv, sizeof kv - 1))
        p = path + sizeof kv - 1;
    else
        return 0;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (!strcmp(p, "/w_q") || !strcmp(p, "/w_k") || !strcmp(p, "/w_v")) return 2;
    if (!strcmp(p, "/b_q") || !strcmp(p, "/b_k") || !strcmp(p, "/b_v")) return 1;
    return 0;
}

/*
 * The most values an accepted body has, for jansson to build: the top
 * object and its 12 fields, 10 return names, a tensor object of 6 values
 * (itself, dtype, shape and its 2 sizes, data) for embeddings, context,
 * w_o, b_o and alibi, weights and heads, rope and its scaling (12),
 * window, softcap, scale; max_tokens each of tokens, positions and
 * context_tokens; per head its object, 6 tensor objects and its
 * select_heads index (38), and per K/V head its object and 4 tensor
 * objects (25). Lifted arrays and strings count as the `[]` and `""` left
 * for them. 72 a head and 128 in all leave room. A stack (weights.layers)
 * repeats the weight set per layer, each head about 38 values with its
 * arrays lifted: its layers share that room, some 240 heads in all layers
 * under max_heads = 128; a larger inline stack is refused here, before
 * jansson builds its tree.
 */
static size_t attention_values_max(const api_limits *limits) {
    size_t per_heads, per_tokens, total;
    if (api_size_mul(limits->max_heads, 72, &per_heads) < 0 ||
        api_size_mul(limits->max_tokens, 3, &per_tokens) < 0 ||
        api_size_add(per_heads, per_tokens, &total) < 0 || api_size_add(total, 128, &total) < 0)
        return SIZE_MAX;
    return total;
}

/* The arrays no accepted body has longer than a limit: tokens are one per
 * embeddings row, and strings; select_heads names distinct heads of a
 * model; return names each output at most once; a hidden state has a
 * row per token. Each hidden state lifted counts one value (its `[]`),
 * L + 1 in all; its numbers, L × n × d_model, are bounded per layer as the
 * embeddings' are, by max_tokens × max_d_model (request_layers.c). */
static const api_scan_rule attention_rules[] = {
    {"/tokens", API_SCAN_TOKENS, 1},       {"/context_tokens", API_SCAN_TOKENS, 1},
    {"/positions", API_SCAN_TOKENS, 0},    {"/select_heads", API_SCAN_HEADS, 0},
    {"/weights/heads", API_SCAN_HEADS, 0}, {"/weights/kv_heads", API_SCAN_HEADS, 0},
    {"/return", API_SCAN_RETURN, 0},       {"/hidden_states/#", API_SCAN_TOKENS, 0},
};

static const api_scan_table attention_scan = {"body", attention_rules,
                                              sizeof attention_rules / sizeof attention_rules[0],
                                              attention_values_max, attention_array_rank};

static int decode_fields(api_call *c, const json_t *root, api_arrays *arrays,
                         const api_limits *limits, attn_error *err) {
    api_request *req = c->shared;
    const json_t *weights = json_object_get(root, "weights");

    if (api_check_fields(root, top_fields, sizeof top_fields / sizeof top_fields[0], "the body", "",
                         "embeddings, tokens, model, weights, mask, scale, return, "
                         "select_heads, encoding, positions, context, context_tokens, layers, "
                         "hidden_states",
                         err) < 0)
        return -1;
    if (api_request_decode_weight_source(req, root, err) < 0) return -1;
    if (api_request_decode_options(req, root, err) < 0 ||
        api_request_decode_hidden(req, json_object_get(root, "hidden_states"), limits, err) < 0 ||
        api_request_decode_sequence(req, root, NULL, limits, err) < 0 ||
        api_request_check_hidden(req, err) < 0 ||
        api_request_decode_layers_field(req, json_object_get(root, "layers"), err) < 0)
        return -1;
    if (weights == NULL) return 0; /* the caller binds the named model */
    const json_t *layers = json_object_get(weights, "layers");
    const size_t dc = req->context ? req->d_context : 0;
    if (layers ? api_layers_decode_weights(req, arrays, weights, req->d_model, dc, limits, err) < 0
               : api_weights_decode(req, req->d_model, dc, weights, limits, err) < 0)
        return -1;
    const attn_weights *w = layers ? &req->layers->recs[0]->inline_weights : &req->inline_weights;
    api_model_ref inline_model = {NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0};
    if (api_call_bind(c, &inline_model, limits, err) == 0) return 0;
    if (layers) api_error_in_layer(err, 0); /* the weights it names are layer 0's */
    return -1;
}

static int attention_decode(api_call *c, const api_call_body *body, const api_limits *limits,
                            attn_error *err) {
    json_t *root;
    api_arrays *arrays;
    if (api_scan_parse_object(body->data, body->len, &attention_scan, limits, &root, &arrays, err) <
        0)
        return -1;
    int rc = api_call_reserve(c, 1, err);
    if (rc == 0 && !(c->shared = calloc(1, sizeof *c->shared)))
        rc = attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    if (rc == 0) {
        c->seqs[0] = c->shared;
        c->count = 1;
        c->shared->arrays = arrays;
        rc = decode_fields(c, root, arrays, limits, err);
        c->shared->arrays = NULL;
    }
    api_arrays_free(arrays);
    json_decref(root);
    return rc;
}

static int attention_answer_bytes_max(const api_call *c, size_t *bytes) {
    return api_response_bytes_max(c->seqs[0], bytes);
}

static char *attention_encode(const api_call *c, size_t *len, size_t *json_len, attn_error *err) {
    *json_len = 0;
    return api_response_encode(c->seqs[0], len, err);
}

const api_codec api_codec_attention = {
    .decode = attention_decode,
    .array_rank = attention_array_rank,
    .answer_bytes_max = attention_answer_bytes_max,
    .encode = attention_encode,
    .error_body = api_error_to_json,
    .noun = "request",
    .answer_path = "/return",
    .answer_unit = "bytes of JSON",
    .answer_advice = "outputs or heads",
};
