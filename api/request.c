/*
 * request.c — decoding one sequence of a call, and the options its
 * sequences share, from jansson's tree of a JSON body (the wire formats'
 * decoders, codec_*.c, parse the text and call these).
 *
 * The fields of one sequence (embeddings, tokens, positions, context,
 * context_tokens, mask) are read by api_request_decode_sequence under the
 * record's JSON Pointer prefix (req->at: "" for POST /v1/attention,
 * "/sequences/3" for a batch's sequence 3), and the options by
 * api_request_decode_options, so that every sequence of every /v1 format
 * is read by this same code. Checks go field by field, cheap checks
 * first. What needs the weights — their shapes, the default mask and
 * scale, the range of select_heads, the limits, the outputs — is the
 * bind's (request_bind.c, call.c).
 *
 * A call naming a model may send tokens without embeddings: decode then
 * keeps the tokens, their count for n and no width (d_model comes from
 * the model), and bind looks them up in its vocabulary (request_bind.c).
 * With inline weights tokens are only labels, and embeddings stay
 * required.
 *
 * The large arrays of numbers (embeddings, inline weights, a custom mask),
 * and the base64 of tensor objects, were read straight from the text by
 * the scan (scan.h, arrays.h): matrix.c finds them in req->arrays. The
 * tree lives only during decode, except the `tokens` array, which the
 * record keeps a reference to so that it is echoed exactly. Status and
 * code of every failure follow the catalogue in api/error.h: 400 for the
 * shape of the JSON, 422 for values that disagree. Every matrix or vector
 * may be nested arrays or a tensor object; matrix.c reads both, the
 * limits are checked from the shape before the data is decoded.
 */
#include "api/request_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/buffer.h"
#include "api/json_path.h"
#include "api/json_write.h"
#include "api/matrix.h"

static const struct {
    const char *name;
    unsigned bit;
} return_names[] = {
    {"q", API_RETURN_Q},
    {"k", API_RETURN_K},
    {"v", API_RETURN_V},
    {"scores", API_RETURN_SCORES},
    {"patterns", API_RETURN_PATTERNS},
    {"head_outputs", API_RETURN_HEAD_OUTPUTS},
    {"delta", API_RETURN_DELTA},
    {"embeddings", API_RETURN_EMBEDDINGS},
    {"q_raw", API_RETURN_Q_RAW},
    {"k_raw", API_RETURN_K_RAW},
    {"rollout", API_RETURN_ROLLOUT},
    {"normed", API_RETURN_NORMED},
};

int api_check_fields(const json_t *obj, const char *const *known, size_t n_known, const char *name,
                     const char *path, const char *expected, attn_error *err) {
    const char *key;
    json_t *value;

    json_object_foreach((json_t *)obj, key, value) {
        size_t i;
        for (i = 0; i < n_known && strcmp(key, known[i]) != 0; i++)
            continue;
        if (i == n_known) {
            char p[API_PATH_MAX];
            api_path_key(p, sizeof p, path, key);
            return attn_error_set(err, 400, "unknown_field", p,
                                  "unknown field \"%s\" in %s; expected %s", key, name, expected);
        }
    }
    return 0;
}

int api_check_width(const char *at, const char *rows, const char *width, size_t numbers,
                    const api_limits *limits, attn_error *err) {
    if (!limits || numbers <= limits->max_d_model) return 0;
    return attn_error_set(err, 422, "limit_exceeded", at,
                          "%s rows have %zu numbers (%s), over the limit max_d_model = %zu", rows,
                          numbers, width, limits->max_d_model);
}

/* Is v the string `word`, NUL bytes and all? */
static int json_string_is(const json_t *v, const char *word) {
    return json_is_string(v) && json_string_length(v) == strlen(word) &&
           memcmp(json_string_value(v), word, strlen(word)) == 0;
}

/* Only the type is checked here: what a model's name may be is the model
 * store's rule, which the server applies before it looks the name up. */
int api_request_decode_model(api_request *req, const json_t *model, attn_error *err) {
    if (!json_is_string(model))
        return attn_error_set(err, 400, "wrong_type", "/model", "model is %s, expected a string",
                              api_json_type_name(model));
    /* The echo's exact length, as for tokens (decode_tokens). */
    req->model_json_bytes = api_json_bytes(model);
    if (req->model_json_bytes == 0)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    req->model = json_incref((json_t *)model);
    return 0;
}

int api_request_decode_weight_source(api_request *head, const json_t *root, attn_error *err) {
    const json_t *model = json_object_get(root, "model");
    const json_t *weights = json_object_get(root, "weights");
    if (model && weights)
        return attn_error_set(err, 400, "invalid_value", "",
                              "the request gives both model and weights; give one of them");
    if (!model && !weights)
        return attn_error_set(err, 400, "missing_field", "",
                              "the request needs model (a preloaded model's name) or weights "
                              "(an inline weight set)");
    if (model && api_request_decode_model(head, model, err) < 0) return -1;
    if (weights && !json_is_object(weights))
        return attn_error_set(err, 400, "wrong_type", "/weights",
                              "weights is %s, expected an object with heads, w_o, b_o",
                              api_json_type_name(weights));
    return 0;
}

static int decode_encoding(api_request *req, const json_t *enc, attn_error *err) {
    if (enc == NULL || json_string_is(enc, "float")) return 0;
    if (!json_is_string(enc))
        return attn_error_set(err, 400, "wrong_type", "/encoding",
                              "encoding is %s, expected \"float\" or \"base64\"",
                              api_json_type_name(enc));
    if (json_string_is(enc, "base64")) {
        req->base64 = 1;
        return 0;
    }
    return attn_error_set(err, 400, "invalid_value", "/encoding",
                          "encoding must be \"float\" or \"base64\"");
}

static int decode_return(api_request *req, const json_t *ret, attn_error *err) {
    char path[API_PATH_MAX];
    size_t i, n = sizeof return_names / sizeof return_names[0];

    if (ret == NULL) {
        req->returns = API_RETURN_PATTERNS | API_RETURN_EMBEDDINGS;
        return 0;
    }
    if (!json_is_array(ret))
        return attn_error_set(err, 400, "wrong_type", "/return",
                              "return is %s, expected an array of names", api_json_type_name(ret));
    req->returns = 0;
    for (i = 0; i < json_array_size(ret); i++) {
        const json_t *name = json_array_get(ret, i);
        size_t k;
        api_path_index(path, sizeof path, "/return", i);
        if (!json_is_string(name))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "return[%zu] is %s, expected a name", i,
                                  api_json_type_name(name));
        for (k = 0; k < n && !json_string_is(name, return_names[k].name); k++)
            continue;
        if (k == n)
            return attn_error_set(err, 400, "invalid_value", path,
                                  "return[%zu] = \"%s\" is not an output; the outputs are q, k, "
                                  "v, q_raw, k_raw, scores, patterns, head_outputs, delta, "
                                  "embeddings, rollout, normed",
                                  i, json_string_value(name));
        req->returns |= return_names[k].bit;
        if (return_names[k].bit == API_RETURN_ROLLOUT) req->rollout_at = i;
    }
    return 0;
}

static int decode_scale(api_request *req, const json_t *scale, attn_error *err) {
    if (scale == NULL) return 0;
    if (api_number_read(scale, "scale", "/scale", &req->scale, err) < 0) return -1;
    if (!(req->scale > 0.0f))
        return attn_error_set(err, 422, "out_of_range", "/scale",
                              "scale must be > 0 (as a float32), got %g", json_number_value(scale));
    req->scale_given = 1;
    return 0;
}

int api_decode_indices(const json_t *list, const char *name, const char *what, double **out,
                       size_t *count, attn_error *err) {
    char path[API_PATH_MAX];
    api_path_key(path, sizeof path, "", name);
    if (!json_is_array(list))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s is %s, expected an array of %s indices", name,
                              api_json_type_name(list), what);
    size_t n = json_array_size(list);
    double *v = *out = malloc((n ? n : 1) * sizeof *v);
    if (v == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(list, i);
        double d = json_is_number(e) ? json_number_value(e) : 0.5;
        if (!isfinite(d) || floor(d) != d) {
            char at[API_PATH_MAX];
            api_path_index(at, sizeof at, path, i);
            return attn_error_set(
                err, 400, "wrong_type", at, "%s[%zu] is %s, expected a %s index (an integer)", name,
                i, json_is_number(e) ? "not an integer" : api_json_type_name(e), what);
        }
        v[i] = d;
    }
    *count = n;
    return 0;
}

/* The indices are only type-checked here; their range needs the weights. */
static int decode_select_heads(api_request *req, const json_t *sel, attn_error *err) {
    if (sel == NULL) return 0;
    if (api_decode_indices(sel, "select_heads", "head", &req->select, &req->n_select, err) < 0)
        return -1;
    req->select_given = 1;
    return 0;
}

void api_request_path(const api_request *req, const char *field, char *dst, size_t cap) {
    api_path_key(dst, cap, req->at, field);
}

static int decode_embeddings(api_request *req, const json_t *emb, const api_limits *limits,
                             attn_error *err) {
    char at[API_PATH_MAX];
    size_t n, dm, count;

    api_request_path(req, "embeddings", at, sizeof at);
    if (emb == NULL)
        return attn_error_set(err, 400, "missing_field", at,
                              "embeddings (n × d_model numbers) is required");
    if (api_matrix_shape(emb, req->arrays, "embeddings", at, &n, &dm, err) < 0) return -1;
    if (limits && n > limits->max_tokens)
        return attn_error_set(err, 422, "limit_exceeded", at,
                              "embeddings has %zu rows (tokens), over the limit max_tokens = %zu",
                              n, limits->max_tokens);
    if (api_check_width(at, "embeddings", "d_model", dm, limits, err) < 0) return -1;
    if (api_size_mul(n, dm, &count) < 0 ||
        (req->embeddings = malloc(count * sizeof(float))) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the embeddings");
    api_advise_huge_pages(req->embeddings, count * sizeof(float));
    req->n_tokens = n;
    req->d_model = dm;
    return api_matrix_read(emb, req->arrays, "embeddings", at, req->embeddings, dm, err);
}

/* Labels, one string per row of `rows` (`count` of them): tokens for the
 * embeddings, context_tokens for the context. */
static int decode_labels(const api_request *req, const json_t *labels, const char *field,
                         const char *rows, size_t count, json_t **keep, size_t *json_bytes,
                         attn_error *err) {
    char path[API_PATH_MAX];

    if (labels == NULL) return 0;
    api_request_path(req, field, path, sizeof path);
    if (!json_is_array(labels))
        return attn_error_set(err, 400, "wrong_type", path,
                              "%s is %s, expected an array of strings", field,
                              api_json_type_name(labels));
    for (size_t i = 0; i < json_array_size(labels); i++) {
        const json_t *t = json_array_get(labels, i);
        if (!json_is_string(t)) {
            char cell[API_PATH_MAX];
            api_path_index(cell, sizeof cell, path, i);
            return attn_error_set(err, 400, "wrong_type", cell, "%s[%zu] is %s, expected a string",
                                  field, i, api_json_type_name(t));
        }
    }
    if (json_array_size(labels) != count)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "%s has %zu labels, expected one per %s row (%zu)", field,
                              json_array_size(labels), rows, count);
    /* The echo's exact length, for the response bound. */
    *json_bytes = api_json_bytes(labels);
    if (*json_bytes == 0)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
    *keep = json_incref((json_t *)labels);
    return 0;
}

/* Positions below 2^31: the engine's rule (attention.h), and exact in a double. */
#define POSITION_LIMIT 2147483648.0

static int decode_positions(api_request *req, const json_t *pos, attn_error *err) {
    char at[API_PATH_MAX], path[API_PATH_MAX];
    size_t n = req->n_tokens;

    if (pos == NULL) return 0;
    api_request_path(req, "positions", at, sizeof at);
    if (!json_is_array(pos))
        return attn_error_set(err, 400, "wrong_type", at,
                              "positions is %s, expected an array of integers",
                              api_json_type_name(pos));
    /* Types before sizes, as for the mask. */
    for (size_t i = 0; i < json_array_size(pos); i++) {
        const json_t *v = json_array_get(pos, i);
        if (json_is_number(v)) continue;
        api_path_index(path, sizeof path, at, i);
        return attn_error_set(err, 400, "wrong_type", path,
                              "positions[%zu] is %s, expected an integer", i,
                              api_json_type_name(v));
    }
    if (json_array_size(pos) != n)
        return attn_error_set(err, 422, "dimension_mismatch", at,
                              "positions has %zu entries, expected one per %s (%zu)",
                              json_array_size(pos), req->tokens_only ? "token" : "embeddings row",
                              n);
    req->positions = malloc((n ? n : 1) * sizeof *req->positions);
    if (req->positions == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the positions");
    for (size_t i = 0; i < n; i++) {
        double d = json_number_value(json_array_get(pos, i));
        if (floor(d) != d) { /* not an integer: a wrong type, as in select_heads */
            api_path_index(path, sizeof path, at, i);
            return attn_error_set(err, 400, "wrong_type", path,
                                  "positions[%zu] = %.16g is not an integer, expected a position",
                                  i, d);
        }
        if (!(d >= 0 && d < POSITION_LIMIT)) {
            api_path_index(path, sizeof path, at, i);
            return attn_error_set(err, 422, "out_of_range", path,
                                  "positions[%zu] = %.16g is not a position: an integer from 0 to "
                                  "2147483647",
                                  i, d);
        }
        req->positions[i] = (unsigned)d;
    }
    return 0;
}

static int decode_context(api_request *req, const json_t *ctx, const api_limits *limits,
                          attn_error *err) {
    char at[API_PATH_MAX];
    size_t m, dc, count;

    if (ctx == NULL) return 0;
    api_request_path(req, "context", at, sizeof at);
    if (api_matrix_shape(ctx, req->arrays, "context", at, &m, &dc, err) < 0) return -1;
    /* The context's rows are keys, as many as tokens would be. */
    if (limits && m > limits->max_tokens)
        return attn_error_set(err, 422, "limit_exceeded", at,
                              "context has %zu rows, over the limit max_tokens = %zu", m,
                              limits->max_tokens);
    if (api_check_width(at, "context", "d_context", dc, limits, err) < 0) return -1;
    if (api_size_mul(m, dc, &count) < 0 || (req->context = malloc(count * sizeof(float))) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the context");
    req->n_context = m;
    req->d_context = dc;
    return api_matrix_read(ctx, req->arrays, "context", at, req->context, dc, err);
}

/* A mask cell is 0, 1, true or false. */
static int mask_cell(const json_t *v, unsigned char *dst) {
    if (json_is_boolean(v)) {
        *dst = json_is_true(v);
        return 0;
    }
    if (json_is_number(v) && (json_number_value(v) == 0.0 || json_number_value(v) == 1.0)) {
        *dst = json_number_value(v) == 1.0;
        return 0;
    }
    return -1;
}

/* The mask under `prefix`: the request's own (req->at), or the top of a
 * batch for its shared mask. */
static int decode_mask(api_request *req, const json_t *mask, const char *prefix, attn_error *err) {
    char at[API_PATH_MAX], row0[API_PATH_MAX], row_path[API_PATH_MAX], cell_path[API_PATH_MAX];
    size_t n = req->n_tokens, m = api_request_kv_rows(req), count;
    const char *m_what = req->context ? "n_context" : "n_tokens";

    if (mask == NULL) return 0;
    api_path_key(at, sizeof at, prefix, "mask");
    api_path_index(row0, sizeof row0, at, 0);
    req->mask_given = 1;
    if (json_string_is(mask, "causal")) {
        /* Context rows have no order relative to the tokens. */
        if (req->context)
            return attn_error_set(err, 422, "invalid_combination", at,
                                  "mask \"causal\" has no meaning with context (cross-attention); "
                                  "give \"none\" or an n_tokens × n_context matrix");
        req->mask_kind = ATTN_MASK_CAUSAL;
        return 0;
    }
    if (json_string_is(mask, "none")) {
        req->mask_kind = ATTN_MASK_NONE;
        return 0;
    }
    if (json_is_string(mask))
        return attn_error_set(err, 400, "invalid_value", at,
                              "mask must be \"causal\", \"none\" or an n × n matrix of 0/1 or "
                              "booleans");
    if (!json_is_array(mask))
        return attn_error_set(err, 400, "wrong_type", at,
                              "mask is %s, expected \"causal\", \"none\" or an n × n matrix",
                              api_json_type_name(mask));
    const api_array *lifted = api_arrays_find(req->arrays, at);
    if (lifted) { /* rows of valid cells, all as long as the first */
        if (lifted->rows != n)
            return attn_error_set(err, 422, "dimension_mismatch", at,
                                  "mask has %zu rows, expected n_tokens = %zu", lifted->rows, n);
        if (lifted->cols != m)
            return attn_error_set(err, 422, "dimension_mismatch", row0,
                                  "mask[0] has %zu entries, expected %s = %zu", lifted->cols,
                                  m_what, m);
        if (api_size_mul(n, m, &count) < 0 || (req->mask_allowed = malloc(count)) == NULL)
            return attn_error_set(err, 503, "out_of_memory", "", "no memory for the mask");
        for (size_t i = 0; i < count; i++)
            req->mask_allowed[i] = lifted->data[i] != 0.0f;
        req->mask_kind = ATTN_MASK_CUSTOM;
        return 0;
    }
    /* Types before sizes, as everywhere: a flat [1, 0, 1, 1] is a wrong type
     * whatever its length. */
    for (size_t q = 0; q < json_array_size(mask); q++) {
        const json_t *row = json_array_get(mask, q);
        api_path_index(row_path, sizeof row_path, at, q);
        if (!json_is_array(row))
            return attn_error_set(err, 400, "wrong_type", row_path,
                                  "mask[%zu] is %s, expected an array of 0/1 or booleans", q,
                                  api_json_type_name(row));
    }
    if (json_array_size(mask) != n)
        return attn_error_set(err, 422, "dimension_mismatch", at,
                              "mask has %zu rows, expected n_tokens = %zu", json_array_size(mask),
                              n);
    for (size_t q = 0; q < n; q++) {
        const json_t *row = json_array_get(mask, q);
        api_path_index(row_path, sizeof row_path, at, q);
        if (json_array_size(row) != m)
            return attn_error_set(err, 422, "dimension_mismatch", row_path,
                                  "mask[%zu] has %zu entries, expected %s = %zu", q,
                                  json_array_size(row), m_what, m);
    }
    if (api_size_mul(n, m, &count) < 0 || (req->mask_allowed = malloc(count)) == NULL)
        return attn_error_set(err, 503, "out_of_memory", "", "no memory for the mask");
    for (size_t q = 0; q < n; q++) {
        const json_t *row = json_array_get(mask, q);
        for (size_t k = 0; k < m; k++) {
            const json_t *cell = json_array_get(row, k);
            if (mask_cell(cell, &req->mask_allowed[q * m + k]) < 0) {
                api_path_index(row_path, sizeof row_path, at, q);
                api_path_index(cell_path, sizeof cell_path, row_path, k);
                return attn_error_set(err, 400, "wrong_type", cell_path,
                                      "mask[%zu][%zu] is %s, expected 0, 1, true or false", q, k,
                                      json_is_number(cell) ? "a number other than 0 and 1"
                                                           : api_json_type_name(cell));
            }
        }
    }
    req->mask_kind = ATTN_MASK_CUSTOM;
    return 0;
}

int api_request_decode_options(api_request *req, const json_t *obj, attn_error *err) {
    return decode_encoding(req, json_object_get(obj, "encoding"), err) < 0 ||
                   decode_return(req, json_object_get(obj, "return"), err) < 0 ||
                   decode_scale(req, json_object_get(obj, "scale"), err) < 0 ||
                   decode_select_heads(req, json_object_get(obj, "select_heads"), err) < 0
               ? -1
               : 0;
}

/* tokens without embeddings, for a named model: the tokens stand for the
 * rows of E, which bind makes from the model's vocabulary. Their count is
 * bounded and refused when 0 as embeddings rows are. */
static int decode_tokens_only(api_request *req, const json_t *tokens, const api_limits *limits,
                              attn_error *err) {
    char at[API_PATH_MAX];
    size_t n = json_is_array(tokens) ? json_array_size(tokens) : 0;
    if (json_is_array(tokens) && n == 0) {
        api_request_path(req, "embeddings", at, sizeof at);
        return attn_error_set(err, 422, "dimension_mismatch", at,
                              "embeddings has no rows (tokens, which stand for them, is empty)");
    }
    if (limits && n > limits->max_tokens) {
        api_request_path(req, "tokens", at, sizeof at);
        return attn_error_set(err, 422, "limit_exceeded", at,
                              "tokens has %zu entries, over the limit max_tokens = %zu", n,
                              limits->max_tokens);
    }
    if (decode_labels(req, tokens, "tokens", "tokens", n, &req->tokens, &req->tokens_json_bytes,
                      err) < 0)
        return -1;
    req->n_tokens = n;
    req->d_model = 0;
    req->tokens_only = 1;
    return 0;
}

int api_request_decode_sequence(api_request *req, const json_t *obj, const json_t *default_mask,
                                const api_limits *limits, attn_error *err) {
    char path[API_PATH_MAX];
    const json_t *emb = json_object_get(obj, "embeddings"),
                 *tokens = json_object_get(obj, "tokens");
    /* With inline weights tokens alone stay a missing embeddings: there is
     * no vocabulary to look them up in. */
    if (!emb && req->n_hidden) {
        /* hidden_states stand for every layer's input: n and d_model are
         * theirs, and E is never read. */
        req->n_tokens = req->hidden_rows;
        req->d_model = req->hidden_cols;
        if (decode_labels(req, tokens, "tokens", "hidden_states", req->n_tokens, &req->tokens,
                          &req->tokens_json_bytes, err) < 0)
            return -1;
    } else if (!emb && tokens && req->model) {
        if (decode_tokens_only(req, tokens, limits, err) < 0) return -1;
    } else if (decode_embeddings(req, emb, limits, err) < 0 ||
               decode_labels(req, tokens, "tokens", "embeddings", req->n_tokens, &req->tokens,
                             &req->tokens_json_bytes, err) < 0) {
        return -1;
    }
    if (decode_positions(req, json_object_get(obj, "positions"), err) < 0 ||
        decode_context(req, json_object_get(obj, "context"), limits, err) < 0)
        return -1;
    const json_t *ctx_tokens = json_object_get(obj, "context_tokens");
    if (ctx_tokens && !req->context) {
        api_request_path(req, "context_tokens", path, sizeof path);
        return attn_error_set(err, 422, "invalid_combination", path,
                              "context_tokens label the rows of context, which the request does "
                              "not have");
    }
    if (decode_labels(req, ctx_tokens, "context_tokens", "context", req->n_context,
                      &req->context_tokens, &req->context_tokens_json_bytes, err) < 0)
        return -1;
    const json_t *mask = json_object_get(obj, "mask");
    if (mask) return decode_mask(req, mask, req->at, err);
    return decode_mask(req, default_mask, "", err);
}
