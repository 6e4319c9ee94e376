/*
 * codec_batch.c — POST /v1/attention/batch's wire format: many sequences
 * through one weight set.
 *
 * The call's head record (`shared`) holds what the sequences share — the
 * model's name or the inline weights, the options read by
 * api_request_decode_options — and each sequence is a record whose
 * per-sequence fields api_request_decode_sequence reads under
 * /sequences/i, with the shared options copied in. Every check, path and
 * answer of a sequence is therefore the single request's code.
 *
 * As for a single request, the body's text is scanned first (scan.h):
 * each sequence's embeddings, context and mask, the shared mask and the
 * inline weights are lifted out of the text, and the scan bounds the rest
 * by the batch's limits before jansson builds a tree (array_max_elements,
 * values_max below).
 *
 * Inline weights are read against the widths of sequence 0 (its d_model,
 * and its context's width when it has one: a cross-attention weight set);
 * every other sequence is then checked against those weights at bind, at
 * its own path. That is why an empty `sequences` is refused (422): with no
 * sequence there is nothing to compute, and an inline weight set would
 * have no width to be read against.
 *
 * A sequence may send tokens without embeddings when the batch names a
 * model with a vocabulary: each sequence checks its tokens at bind, and
 * their embeddings are made once the batch's limits hold.
 *
 * Limits per sequence are the single request's (max_tokens at its
 * embeddings); over the batch: max_batch sequences, max_tokens for the sum
 * of their tokens (at /sequences), and the work (attn_batch_flops), scratch
 * (attn_batch_workspace_need) and response size of all of it.
 */
#include "api/call_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/error.h"
#include "api/json_path.h"
#include "api/json_write.h"
#include "api/matrix.h"

static const char *const top_fields[] = {"model",  "weights",      "scale",
                                         "return", "select_heads", "encoding",
                                         "mask",   "sequences",    "layers"};
static const char *const seq_fields[] = {
    "embeddings", "tokens", "mask", "positions", "context", "context_tokens", "hidden_states"};

/* When `path` is /sequences/N/rest, the "/rest" part (N digits only), else NULL. */
static const char *sequence_rest(const char *path) {
    static const char prefix[] = "/sequences/";
    const char *p = path;
    if (strncmp(p, prefix, sizeof prefix - 1) != 0) return NULL;
    p += sizeof prefix - 1;
    if (*p < '0' || *p > '9') return NULL;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '/' ? p : NULL;
}

static int batch_array_rank(const char *path) {
    const char *rest = sequence_rest(path);
    if (rest) {
        if (!strcmp(rest, "/embeddings") || !strcmp(rest, "/context")) return 2;
        if (!strncmp(rest, "/hidden_states/", 15)) {
            const char *p = rest + 15;
            while (*p >= '0' && *p <= '9')
                p++;
            return p > rest + 15 && !*p ? 2 : 0;
        }
        if (!strcmp(rest, "/mask")) return API_ARRAYS_MASK;
        return 0;
    }
    if (!strcmp(path, "/mask")) return API_ARRAYS_MASK;
    if (!strncmp(path, "/weights/", 9)) return api_call_array_rank(API_CALL_ATTENTION, path);
    return 0;
}

/*
 * The most values an accepted body holds besides its lifted arrays: the
 * single request's count for the weights and options (72 a head, 128 for
 * the rest), 32 a sequence (its object, six fields, the tensor objects of
 * its embeddings and context, room to spare), and the labels and positions
 * of all sequences together, 3 × max_tokens: the tokens of all sequences
 * are within max_tokens, and so, for this count, are their context labels.
 */
static size_t batch_values_max(const api_limits *limits) {
    size_t per_heads, per_tokens, per_seq, total;
    if (api_size_mul(limits->max_heads, 72, &per_heads) < 0 ||
        api_size_mul(limits->max_tokens, 3, &per_tokens) < 0 ||
        api_size_mul(limits->max_batch, 32, &per_seq) < 0 ||
        api_size_add(per_heads, per_tokens, &total) < 0 ||
        api_size_add(total, per_seq, &total) < 0 || api_size_add(total, 128, &total) < 0)
        return SIZE_MAX;
    return total;
}

/* The arrays no accepted body has longer than a limit: the sequences by
 * max_batch, each sequence's labels and positions by max_tokens, the head
 * lists by max_heads, return by its names. */
static const api_scan_rule batch_rules[] = {
    {"/sequences", API_SCAN_SEQUENCES, 0},
    {"/sequences/#/tokens", API_SCAN_TOKENS, 1},
    {"/sequences/#/context_tokens", API_SCAN_TOKENS, 1},
    {"/sequences/#/positions", API_SCAN_TOKENS, 0},
    {"/sequences/#/hidden_states/#", API_SCAN_TOKENS, 0},
    {"/select_heads", API_SCAN_HEADS, 0},
    {"/weights/heads", API_SCAN_HEADS, 0},
    {"/weights/kv_heads", API_SCAN_HEADS, 0},
    {"/return", API_SCAN_RETURN, 0},
};

static const api_scan_table batch_scan = {"body", batch_rules,
                                          sizeof batch_rules / sizeof batch_rules[0],
                                          batch_values_max, batch_array_rank};

/* A sequence's record, with the shared options copied from `shared`. */
static api_request *sequence_new(const api_request *shared, size_t i, const api_arrays *arrays) {
    api_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->at, sizeof r->at, "/sequences/%zu", i);
    r->arrays = arrays;
    r->returns = shared->returns;
    r->base64 = shared->base64;
    r->scale_given = shared->scale_given;
    r->scale = shared->scale;
    if (shared->model) {
        r->model = json_incref(shared->model);
        r->model_json_bytes = shared->model_json_bytes;
    }
    return r;
}

/* A shared mask that does not fit sequence i is that sequence's fault as
 * much as the mask's: the error points into the sequence, and says so. */
static int shared_mask_error(const json_t *seq, const json_t *mask, const char *at, size_t i,
                             attn_error *err) {
    if (!err || !mask || json_object_get(seq, "mask") || err->status != 422 ||
        strncmp(err->path, "/mask", 5) != 0)
        return -1;
    char was[sizeof err->message];
    memcpy(was, err->message, sizeof was);
    return attn_error_set(err, 422, err->code, at,
                          "the request's mask does not fit sequences[%zu], which has no mask of "
                          "its own: %s",
                          i, was);
}

static int decode_sequences(api_call *c, const json_t *seqs, const json_t *mask,
                            const api_limits *limits, attn_error *err) {
    char path[API_PATH_MAX];
    size_t total = 0;

    if (seqs == NULL)
        return attn_error_set(err, 400, "missing_field", "/sequences",
                              "sequences (an array of sequences) is required");
    if (!json_is_array(seqs))
        return attn_error_set(err, 400, "wrong_type", "/sequences",
                              "sequences is %s, expected an array of objects",
                              api_json_type_name(seqs));
    size_t count = json_array_size(seqs);
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_array_get(seqs, i);
        if (json_is_object(s)) continue;
        api_path_index(path, sizeof path, "/sequences", i);
        return attn_error_set(err, 400, "wrong_type", path,
                              "sequences[%zu] is %s, expected an object with embeddings", i,
                              api_json_type_name(s));
    }
    if (count == 0)
        return attn_error_set(err, 422, "dimension_mismatch", "/sequences",
                              "sequences is empty; at least one sequence is needed");
    if (limits && count > limits->max_batch)
        return attn_error_set(err, 422, "limit_exceeded", "/sequences",
                              "the batch has %zu sequences, over the limit max_batch = %zu", count,
                              limits->max_batch);
    if (api_call_reserve(c, count, err) < 0) return -1;
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_array_get(seqs, i);
        api_request *r = sequence_new(c->shared, i, c->shared->arrays);
        if (!r) return attn_error_set(err, 503, "out_of_memory", "", "no memory for the batch");
        c->seqs[c->count++] = r;
        if (api_check_fields(s, seq_fields, 7, "a sequence", r->at,
                             "embeddings, tokens, mask, positions, context, context_tokens, "
                             "hidden_states",
                             err) < 0)
            return -1;
        r->arrays = c->shared->arrays;
        if (api_request_decode_hidden(r, json_object_get(s, "hidden_states"), limits, err) < 0)
            return -1;
        if (api_request_decode_sequence(r, s, mask, limits, err) < 0 ||
            api_request_check_hidden(r, err) < 0)
            return shared_mask_error(s, mask, r->at, i, err);
        r->arrays = NULL;
        total += r->n_tokens;
        if (limits && total > limits->max_tokens)
            return attn_error_set(err, 422, "limit_exceeded", "/sequences",
                                  "sequences 0 to %zu have %zu tokens in all, over the limit "
                                  "max_tokens = %zu",
                                  i, total, limits->max_tokens);
    }
    return 0;
}

/* Inline weights, one set or weights.layers, read against sequence 0's
 * widths (see the top). */
static int decode_weights(api_call *c, const json_t *weights, api_arrays *arrays,
                          const api_limits *limits, attn_error *err) {
    api_request *sh = c->shared, *first = c->seqs[0];
    const size_t dc = first->context ? first->d_context : 0;
    const json_t *layers = json_object_get(weights, "layers");
    if (layers ? api_layers_decode_weights(sh, arrays, weights, first->d_model, dc, limits, err) < 0
               : api_weights_decode(sh, first->d_model, dc, weights, limits, err) < 0)
        return -1;
    const attn_weights *w = layers ? &sh->layers->recs[0]->inline_weights : &sh->inline_weights;
    api_model_ref inline_model = {NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0};
    if (api_call_bind(c, &inline_model, limits, err) == 0) return 0;
    if (layers) api_error_in_layer(err, 0); /* the weights it names are layer 0's */
    return -1;
}

/* The shared mask's type, checked even when every sequence has its own;
 * its size is checked against each sequence that takes it. */
static int check_mask(const json_t *mask, attn_error *err) {
    if (mask == NULL || json_is_array(mask)) return 0;
    if (!json_is_string(mask))
        return attn_error_set(err, 400, "wrong_type", "/mask",
                              "mask is %s, expected \"causal\", \"none\" or an n × n matrix",
                              api_json_type_name(mask));
    const char *word = json_string_value(mask);
    size_t len = json_string_length(mask);
    if (!(len == 6 && !memcmp(word, "causal", 6)) && !(len == 4 && !memcmp(word, "none", 4)))
        return attn_error_set(err, 400, "invalid_value", "/mask",
                              "mask must be \"causal\", \"none\" or an n × n matrix of 0/1 or "
                              "booleans");
    return 0;
}

static int decode_fields(api_call *c, const json_t *root, api_arrays *arrays,
                         const api_limits *limits, attn_error *err) {
    const json_t *weights = json_object_get(root, "weights");

    if (api_check_fields(root, top_fields, 9, "the body", "",
                         "model, weights, scale, return, select_heads, encoding, mask, sequences, "
                         "layers",
                         err) < 0)
        return -1;
    if (api_request_decode_weight_source(c->shared, root, err) < 0) return -1;
    if (check_mask(json_object_get(root, "mask"), err) < 0 ||
        api_request_decode_options(c->shared, root, err) < 0 ||
        api_request_decode_layers_field(c->shared, json_object_get(root, "layers"), err) < 0 ||
        decode_sequences(c, json_object_get(root, "sequences"), json_object_get(root, "mask"),
                         limits, err) < 0)
        return -1;
    if (weights == NULL) return 0; /* the server binds the named model */
    return decode_weights(c, weights, arrays, limits, err);
}

static int batch_decode(api_call *c, const api_call_body *body, const api_limits *limits,
                        attn_error *err) {
    json_t *root;
    api_arrays *arrays;
    if (api_scan_parse_object(body->data, body->len, &batch_scan, limits, &root, &arrays, err) < 0)
        return -1;
    int rc = 0;
    if (!(c->shared = calloc(1, sizeof *c->shared)))
        rc = attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    if (rc == 0) {
        c->shared->arrays = arrays;
        rc = decode_fields(c, root, arrays, limits, err);
        c->shared->arrays = NULL;
        for (size_t i = 0; i < c->count; i++)
            c->seqs[i]->arrays = NULL;
    }
    api_arrays_free(arrays);
    json_decref(root);
    return rc;
}

/* The most bytes batch_encode writes: {shared,"sequences":[s0,s1,…]}. */
static int batch_answer_bytes_max(const api_call *b, size_t *bytes) {
    size_t total = strlen("{,\"sequences\":[]}") + (b->count - 1), part;
    if (api_response_shared_bytes_max(b->seqs[0], &part) < 0 ||
        api_size_add(total, part, &total) < 0)
        return -1;
    for (size_t i = 0; i < b->count; i++)
        if (api_response_sequence_bytes_max(b->seqs[i], &part) < 0 ||
            api_size_add(total, part, &total) < 0)
            return -1;
    *bytes = total;
    return 0;
}

static void batch_name_failure(size_t i, attn_error *err) {
    char message[sizeof err->message];
    snprintf(err->path, sizeof err->path, "/sequences/%zu", i);
    snprintf(message, sizeof message, "sequences[%zu]: %.*s", i, (int)sizeof message - 32,
             err->message);
    memcpy(err->message, message, sizeof message);
}

static char *batch_encode(const api_call *b, size_t *len, size_t *json_len, attn_error *err) {
    api_buffer buf;
    size_t hint = 256;
    *json_len = 0;
    for (size_t i = 0; i < b->count && hint < (1u << 20); i++)
        hint += b->seqs[i]->n_tokens * b->seqs[i]->d_model * 12;
    api_buffer_init(&buf, hint < (1u << 20) ? hint : 1u << 20);
    api_buffer_append_str(&buf, "{");
    api_response_append_shared(&buf, b->seqs[0]);
    api_buffer_append_str(&buf, ",\"sequences\":[");
    for (size_t i = 0; i < b->count; i++) {
        if (i) api_buffer_append(&buf, ",", 1);
        if (api_response_append_sequence(&buf, b->seqs[i], err) < 0) {
            free(api_buffer_finish(&buf, len));
            batch_name_failure(i, err);
            return NULL;
        }
    }
    api_buffer_append_str(&buf, "]}");
    char *text = api_buffer_finish(&buf, len);
    if (!text)
        attn_error_set(err, 503, "out_of_memory", "",
                       "memory for the response could not be had; retry later");
    return text;
}

const api_codec api_codec_batch = {
    .decode = batch_decode,
    .array_rank = batch_array_rank,
    .answer_bytes_max = batch_answer_bytes_max,
    .encode = batch_encode,
    .error_body = api_error_to_json,
    .name_failure = batch_name_failure,
    .noun = "batch",
    .answer_path = "/return",
    .answer_unit = "bytes of JSON",
    .answer_advice = "outputs, heads or sequences",
};
