/*
 * batch.c — decoding, binding and encoding POST /v1/attention/batch.
 *
 * A batch is a head request (`shared`), which holds what the sequences
 * share — the model's name or the inline weights, the options read by
 * api_request_decode_options — and one api_request per sequence, whose
 * per-sequence fields api_request_decode_sequence reads under
 * /sequences/i, with the shared options copied in. Every check, path and
 * answer of a sequence is therefore the single request's code.
 *
 * As for a single request, the body's text is scanned first (arrays.h):
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
#include "api/batch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_path.h"
#include "api/json_write.h"
#include "api/matrix.h"
#include "api/request_internal.h"

#define PARSE_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

struct api_batch {
    api_request *shared; /* model or inline weights, options; never bound */
    api_request **seqs;  /* count sequences */
    size_t count;
    attn_input *ins; /* copies of each sequence's input and output, in order */
    attn_output *outs;
    double flops;
};

static const char *const top_fields[] = {"model",        "weights",  "scale", "return",
                                         "select_heads", "encoding", "mask",  "sequences"};
static const char *const seq_fields[] = {"embeddings", "tokens",  "mask",
                                         "positions",  "context", "context_tokens"};

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

int api_batch_array_rank(const char *path) {
    const char *rest = sequence_rest(path);
    if (rest) {
        if (!strcmp(rest, "/embeddings") || !strcmp(rest, "/context")) return 2;
        if (!strcmp(rest, "/mask")) return API_ARRAYS_MASK;
        return 0;
    }
    if (!strcmp(path, "/mask")) return API_ARRAYS_MASK;
    if (!strncmp(path, "/weights/", 9)) return api_request_array_rank(path);
    return 0;
}

/* The arrays the scan bounds by their length (as request.c's): the
 * sequences by max_batch, each sequence's labels and positions by
 * max_tokens, the head lists by max_heads, return by its names. */
static size_t array_max_elements(const void *ctx, const char *path, int *strings) {
    const api_limits *limits = ctx;
    const char *rest = sequence_rest(path);
    *strings = 0;
    if (rest) {
        if (!strcmp(rest, "/tokens") || !strcmp(rest, "/context_tokens")) {
            *strings = 1;
            return limits->max_tokens;
        }
        return !strcmp(rest, "/positions") ? limits->max_tokens : 0;
    }
    if (!strcmp(path, "/sequences")) return limits->max_batch;
    if (!strcmp(path, "/select_heads") || !strcmp(path, "/weights/heads") ||
        !strcmp(path, "/weights/kv_heads"))
        return limits->max_heads;
    if (!strcmp(path, "/return")) return 10;
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
static size_t values_max(const api_limits *limits) {
    size_t per_heads, per_tokens, per_seq, total;
    if (api_size_mul(limits->max_heads, 72, &per_heads) < 0 ||
        api_size_mul(limits->max_tokens, 3, &per_tokens) < 0 ||
        api_size_mul(limits->max_batch, 32, &per_seq) < 0 ||
        api_size_add(per_heads, per_tokens, &total) < 0 ||
        api_size_add(total, per_seq, &total) < 0 || api_size_add(total, 128, &total) < 0)
        return SIZE_MAX;
    return total;
}

static int decode_violation(const api_arrays *arrays, const api_limits *limits, attn_error *err) {
    const char *where;
    int strings;
    const api_arrays_limit v = api_arrays_violation(arrays, &where);
    switch (v) {
    case API_ARRAYS_TOO_DEEP:
    case API_ARRAYS_STRING_LONG: return api_scan_limit_error(v, where, limits, err);
    case API_ARRAYS_NOT_STRING:
        return attn_error_set(err, 400, "wrong_type", where, "%s is %s, expected a string", where,
                              api_arrays_violation_value(arrays));
    case API_ARRAYS_TOO_LONG: {
        size_t most = array_max_elements(limits, where, &strings);
        const char *rest = sequence_rest(where);
        if (!strcmp(where, "/sequences"))
            return attn_error_set(err, 422, "limit_exceeded", where,
                                  "the batch has more than %zu sequences, over the limit "
                                  "max_batch = %zu",
                                  most, limits->max_batch);
        if (rest)
            return attn_error_set(err, 422, "limit_exceeded", where,
                                  "%s has more than %zu entries, over the limit max_tokens = %zu "
                                  "(one per row)",
                                  where, most, limits->max_tokens);
        if (!strcmp(where, "/return"))
            return attn_error_set(err, 422, "limit_exceeded", where,
                                  "return has more than %zu names; there are %zu outputs, each "
                                  "named once",
                                  most, most);
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "%s has more than %zu heads, over the limit max_heads = %zu",
                              where + 1, most, limits->max_heads);
    }
    case API_ARRAYS_TOO_MANY:
        return attn_error_set(err, 422, "limit_exceeded", where,
                              "the body holds more than %zu JSON values besides its number "
                              "arrays, more than a batch within the limits max_batch = %zu, "
                              "max_tokens = %zu and max_heads = %zu can have",
                              values_max(limits), limits->max_batch, limits->max_tokens,
                              limits->max_heads);
    case API_ARRAYS_WITHIN: break;
    }
    return 0;
}

/* Refuses a key of `obj` not in `known`, at base + "/" + key. */
static int check_fields(const json_t *obj, const char *const *known, size_t n_known,
                        const char *base, const char *list, attn_error *err) {
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        size_t i;
        for (i = 0; i < n_known && strcmp(key, known[i]) != 0; i++)
            continue;
        if (i == n_known) {
            char path[API_PATH_MAX];
            api_path_key(path, sizeof path, base, key);
            return attn_error_set(err, 400, "unknown_field", path,
                                  "unknown field \"%s\"; the fields are %s", key, list);
        }
    }
    return 0;
}

/* A sequence's request, with the shared options copied from `shared`. */
static api_request *sequence_new(const api_request *shared, size_t i, const api_arrays *arrays) {
    api_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->at, sizeof r->at, "/sequences/%zu", i);
    r->in_batch = 1;
    r->arrays = arrays;
    r->returns = shared->returns;
    r->base64 = shared->base64;
    r->scale_given = shared->scale_given;
    r->scale = shared->scale;
    if (shared->model) {
        r->model = json_incref(shared->model);
        r->model_json_bytes = shared->model_json_bytes;
    }
    if (shared->select_given) {
        size_t n = shared->n_select;
        r->select = malloc((n ? n : 1) * sizeof *r->select);
        if (!r->select) {
            api_request_free(r);
            return NULL;
        }
        if (n) memcpy(r->select, shared->select, n * sizeof *r->select);
        r->n_select = n;
        r->select_given = 1;
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

static int decode_sequences(api_batch *b, const json_t *seqs, const json_t *mask,
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
    b->seqs = calloc(count, sizeof *b->seqs);
    b->ins = calloc(count, sizeof *b->ins);
    b->outs = calloc(count, sizeof *b->outs);
    if (!b->seqs || !b->ins || !b->outs)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the batch");
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_array_get(seqs, i);
        api_request *r = sequence_new(b->shared, i, b->shared->arrays);
        if (!r) return attn_error_set(err, 503, "out_of_memory", "", "no memory for the batch");
        b->seqs[b->count++] = r;
        if (check_fields(s, seq_fields, 6, r->at,
                         "embeddings, tokens, mask, positions, context, context_tokens", err) < 0)
            return -1;
        if (api_request_decode_sequence(r, s, mask, limits, err) < 0)
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

/* Inline weights, read against sequence 0's widths (see the top). */
static int decode_weights(api_batch *b, const json_t *weights, const api_limits *limits,
                          attn_error *err) {
    api_request *sh = b->shared, *first = b->seqs[0];
    sh->d_model = first->d_model;
    /* api_weights_decode asks only whether there is a context, and its
     * width: lent for the call, never owned by the head request. */
    sh->context = first->context;
    sh->d_context = first->d_context;
    int rc = api_weights_decode(sh, weights, limits, err);
    sh->context = NULL;
    sh->d_context = 0;
    if (rc < 0) return -1;
    return api_batch_bind(b, &sh->inline_weights, ATTN_MASK_CAUSAL, limits, err);
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

static int decode_fields(api_batch *b, const json_t *root, const api_limits *limits,
                         attn_error *err) {
    const json_t *model = json_object_get(root, "model");
    const json_t *weights = json_object_get(root, "weights");

    if (check_fields(root, top_fields, 8, "",
                     "model, weights, scale, return, select_heads, encoding, mask, sequences",
                     err) < 0)
        return -1;
    if (model && weights)
        return attn_error_set(err, 400, "invalid_value", "",
                              "the request gives both model and weights; give one of them");
    if (!model && !weights)
        return attn_error_set(err, 400, "missing_field", "",
                              "the request needs model (a preloaded model's name) or weights "
                              "(an inline weight set)");
    if (model && api_request_decode_model(b->shared, model, err) < 0) return -1;
    if (weights && !json_is_object(weights))
        return attn_error_set(err, 400, "wrong_type", "/weights",
                              "weights is %s, expected an object with heads, w_o, b_o",
                              api_json_type_name(weights));
    if (check_mask(json_object_get(root, "mask"), err) < 0 ||
        api_request_decode_options(b->shared, root, err) < 0 ||
        decode_sequences(b, json_object_get(root, "sequences"), json_object_get(root, "mask"),
                         limits, err) < 0)
        return -1;
    if (weights == NULL) return 0; /* the server binds the named model */
    return decode_weights(b, weights, limits, err);
}

int api_batch_decode(const char *body, size_t len, const api_limits *limits, api_batch **out,
                     attn_error *err) {
    json_error_t jerr;
    api_arrays *arrays;
    size_t text_len;

    *out = NULL;
    api_arrays_rules rules = {0};
    if (limits)
        rules = (api_arrays_rules){limits->max_json_depth, limits->max_string_bytes,
                                   values_max(limits), array_max_elements, limits};
    if (api_arrays_lift_rules(&arrays, body, len, api_batch_array_rank, &rules) < 0)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory to parse the body");
    if (limits && decode_violation(arrays, limits, err) < 0) {
        api_arrays_free(arrays);
        return -1;
    }
    const char *text = api_arrays_text(arrays, &text_len);
    json_t *root = json_loadb(text, text_len, PARSE_FLAGS, &jerr);
    if (root == NULL) {
        api_arrays_fix_error(arrays, body, len, &jerr);
        api_arrays_free(arrays);
        return api_decode_parse_error(body, len, &jerr, err);
    }
    if (!json_is_object(root)) {
        attn_error_set(err, 400, "invalid_json", "", "the body must be a JSON object, not %s",
                       api_json_type_name(root));
        json_decref(root);
        api_arrays_free(arrays);
        return -1;
    }
    api_batch *b = calloc(1, sizeof *b);
    if (b) b->shared = calloc(1, sizeof *b->shared);
    if (!b || !b->shared) {
        free(b);
        json_decref(root);
        api_arrays_free(arrays);
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    }
    b->shared->arrays = arrays;
    int rc = decode_fields(b, root, limits, err);
    b->shared->arrays = NULL;
    for (size_t i = 0; i < b->count; i++)
        b->seqs[i]->arrays = NULL;
    api_arrays_free(arrays);
    json_decref(root);
    if (rc != 0) {
        api_batch_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

const char *api_batch_model(const api_batch *b) {
    return api_request_model(b->shared);
}

size_t api_batch_model_length(const api_batch *b) {
    return api_request_model_length(b->shared);
}

/* The most bytes api_batch_encode writes: {shared,"sequences":[s0,s1,…]}. */
static int batch_bytes(const api_batch *b, size_t *bytes) {
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

static int batch_limits(api_batch *b, const api_limits *limits, attn_error *err) {
    size_t total;
    b->flops = attn_batch_flops(b->ins, b->count);
    if (limits == NULL) return 0;
    if (b->flops > limits->max_flops)
        return attn_error_set(err, 422, "limit_exceeded", "",
                              "this batch needs %.4g floating-point operations, over the limit "
                              "max_flops = %.4g",
                              b->flops, limits->max_flops);
    size_t scratch = attn_batch_workspace_need(b->ins, b->count);
    for (size_t i = 0; i < b->count; i++)
        if (__builtin_add_overflow(scratch, api_request_made_bytes(b->seqs[i]), &scratch))
            scratch = SIZE_MAX;
    if (scratch > limits->max_workspace_bytes)
        return attn_error_set(err, 422, "limit_exceeded", "",
                              "this batch needs %zu bytes of scratch memory, over the limit "
                              "max_workspace_bytes = %zu",
                              scratch, limits->max_workspace_bytes);
    if (batch_bytes(b, &total) < 0) total = SIZE_MAX;
    if (total > limits->max_response_bytes)
        return attn_error_set(err, 422, "limit_exceeded", "/return",
                              "the outputs asked for need up to %zu bytes of JSON, over the limit "
                              "max_response_bytes = %zu; ask for fewer outputs, heads or "
                              "sequences",
                              total, limits->max_response_bytes);
    return 0;
}

int api_batch_bind(api_batch *b, const attn_weights *weights, attn_mask_kind default_mask,
                   const api_limits *limits, attn_error *err) {
    return api_batch_bind_vocab(b, weights, default_mask, NULL, limits, err);
}

int api_batch_bind_vocab(api_batch *b, const attn_weights *weights, attn_mask_kind default_mask,
                         const api_vocabulary *vocab, const api_limits *limits, attn_error *err) {
    for (size_t i = 0; i < b->count; i++) {
        if (api_request_bind_vocab(b->seqs[i], weights, default_mask, vocab, limits, err) < 0)
            return -1;
        b->ins[i] = *api_request_input(b->seqs[i]);
    }
    if (batch_limits(b, limits, err) < 0) return -1;
    /* Sequences of tokens get their embeddings once the batch's limits hold. */
    for (size_t i = 0; i < b->count; i++) {
        if (api_request_make_embeddings(b->seqs[i], vocab, err) < 0) return -1;
        b->ins[i].embeddings = api_request_input(b->seqs[i])->embeddings;
    }
    return 0;
}

double api_batch_cost(const api_batch *b) {
    return b->flops;
}

/* Sequences' blocks start at multiples of this, as the outputs within one. */
#define SEQ_ALIGN 64

int api_batch_alloc_outputs(api_batch *b, attn_workspace *outputs, attn_error *err) {
    size_t total = 0, each;
    unsigned char *block = NULL;

    if (outputs) {
        for (size_t i = 0; i < b->count; i++) {
            if (api_request_outputs_bytes(b->seqs[i], &each, err) < 0 ||
                api_size_add(total, (each + SEQ_ALIGN - 1) / SEQ_ALIGN * SEQ_ALIGN, &total) < 0)
                return attn_error_set(err, 503, "out_of_memory", "", "the outputs are too large");
        }
        if (total > 0) {
            /* The worker's block, as for a single request (request_bind.c):
             * its pages are mapped already; zeroed as calloc's would be. */
            block = attn_workspace_reserve(outputs, total);
            if (block == NULL)
                return attn_error_set(err, 503, "out_of_memory", "", "no memory for the outputs");
            api_advise_huge_pages(block, total);
            memset(block, 0, total);
        }
    }
    for (size_t i = 0; i < b->count; i++) {
        if (block) {
            if (api_request_outputs_bytes(b->seqs[i], &each, err) < 0 ||
                api_request_outputs_place(b->seqs[i], outputs, block, err) < 0)
                return -1;
            block += (each + SEQ_ALIGN - 1) / SEQ_ALIGN * SEQ_ALIGN;
        } else if (api_request_alloc_outputs(b->seqs[i], NULL, err) < 0) {
            return -1;
        }
        b->outs[i] = *api_request_output(b->seqs[i]);
    }
    return 0;
}

size_t api_batch_count(const api_batch *b) {
    return b->count;
}

const attn_input *api_batch_inputs(const api_batch *b) {
    return b->ins;
}

const attn_output *api_batch_outputs(const api_batch *b) {
    return b->outs;
}

void api_batch_name_sequence(size_t i, attn_error *err) {
    char message[sizeof err->message];
    snprintf(err->path, sizeof err->path, "/sequences/%zu", i);
    snprintf(message, sizeof message, "sequences[%zu]: %.*s", i, (int)sizeof message - 32,
             err->message);
    memcpy(err->message, message, sizeof message);
}

char *api_batch_encode(const api_batch *b, size_t *len, attn_error *err) {
    api_buffer buf;
    size_t hint = 256;
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
            api_batch_name_sequence(i, err);
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

void api_batch_free(api_batch *b) {
    if (!b) return;
    for (size_t i = 0; i < b->count; i++)
        api_request_free(b->seqs[i]);
    free(b->seqs);
    free(b->ins);
    free(b->outs);
    api_request_free(b->shared);
    free(b);
}
