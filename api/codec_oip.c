/*
 * codec_oip.c — the Open Inference Protocol's infer request, from its
 * bytes to a call's sequences (oip.h says what the wire format follows),
 * and the protocol's rules on the model at bind.
 *
 * Steps: split the body at the JSON header's length; parse the header
 * (duplicate keys refused); read each input's description and find its
 * values, in JSON `data` (flat or nested, row-major) or in the bytes after
 * the header (each input with `binary_data_size` takes the next that many
 * bytes; every byte must be claimed exactly once); check shapes against
 * each other; compact every row's real tokens into a sequence record of
 * its own, with the parameters (mask, scale) and the outputs asked for.
 * Nothing here needs the model: which inputs the model takes is checked
 * at bind (oip_check_model), and its widths, the heads and the limits by
 * the call's own bind (call.c), as for every wire format.
 *
 * Statuses, as docs/API.md's table says: the body or the framing of the
 * binary part malformed, a wrong type or datatype, an unknown name: 400; a
 * shape that disagrees with its data, another input or the model, values
 * out of range, limits: 422. A size or a value a message shows is the one
 * sent, not the double it was read into (number_as_sent).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/arrays.h"
#include "api/float_format.h"
#include "api/json_path.h"
#include "api/json_write.h"
#include "api/oip_internal.h"

/* Binary tensors are little-endian on the wire and copied as they are. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Open Inference Protocol's binary tensors are copied as little-endian floats"
#endif

const char *const api_oip_output_names[OIP_OUTPUTS] = {
    [OIP_PATTERNS] = "patterns",
    [OIP_EMBEDDINGS] = "embeddings",
    [OIP_DELTA] = "delta",
    [OIP_Q] = "q",
    [OIP_K] = "k",
    [OIP_V] = "v",
    [OIP_SCORES] = "scores",
    [OIP_HEAD_OUTPUTS] = "head_outputs",
    [OIP_ROLLOUT] = "rollout",
};

typedef enum { DT_BOOL, DT_INT32, DT_INT64, DT_FP32, DT_OTHER } oip_dtype;

static const size_t dtype_size[] = {[DT_BOOL] = 1, [DT_INT32] = 4, [DT_INT64] = 8, [DT_FP32] = 4};

enum { IN_EMBEDDINGS, IN_MASK, IN_POSITIONS, IN_CONTEXT, IN_CONTEXT_MASK, IN_COUNT };
static const char *const input_names[IN_COUNT] = {"embeddings", "attention_mask", "positions",
                                                  "context", "context_mask"};

#define MAX_RANK 3

/* One input as the header describes it, and where its values are. */
typedef struct oip_tensor {
    int given;
    size_t index; /* in "inputs", for the error's path */
    oip_dtype dtype;
    const char *dtype_name;
    size_t rank, shape[MAX_RANK];
    size_t elements;
    const json_t *data;       /* or NULL: binary */
    const api_arrays *arrays; /* the rows of data read from the text */
    const unsigned char *bin; /* its bytes, when binary */
    size_t bin_len;
    const char *header; /* the JSON header's text, where messages quote numbers */
    size_t header_len;
} oip_tensor;

/* What the inputs are read from: the JSON header's text and the rows the
 * scan lifted from it, the bytes after it and how many are claimed. */
typedef struct oip_source {
    const char *header;
    size_t header_len;
    const api_arrays *arrays;
    const unsigned char *bin;
    size_t bin_len, bin_used;
} oip_source;

static int fail_oom(attn_error *err) {
    return attn_error_set(err, 503, "out_of_memory", "", "no memory for the request");
}

static oip_dtype dtype_of(const char *s) {
    if (strcmp(s, "BOOL") == 0) return DT_BOOL;
    if (strcmp(s, "INT32") == 0) return DT_INT32;
    if (strcmp(s, "INT64") == 0) return DT_INT64;
    if (strcmp(s, "FP32") == 0) return DT_FP32;
    return DT_OTHER;
}

/* The longest number a message quotes, in bytes. */
#define QUOTED_MAX 40

/* Room for a quoted number; for a shape of MAX_RANK of them. */
#define NUMBER_TEXT 48
#define SHAPE_TEXT  (MAX_RANK * (NUMBER_TEXT + 2) + 2)

/*
 * A whole number of the header, at `path` in t's header, as it was sent,
 * for a message: every number is read as a double (scan.c), which holds a
 * whole number below 2^53 exactly; a larger one it may round (2^63 − 1
 * reads as 2^63), and that one is quoted from the text instead.
 */
static const char *number_as_sent(char *buf, size_t size, double v, const oip_tensor *t,
                                  const char *path) {
    size_t n;
    const char *at = fabs(v) < 9007199254740992.0 || !t->header
                         ? NULL
                         : api_path_number_text(t->header, t->header_len, path, &n);
    if (!at)
        snprintf(buf, size, "%.0f", v);
    else if (n > QUOTED_MAX)
        snprintf(buf, size, "%.*s…", QUOTED_MAX, at);
    else
        snprintf(buf, size, "%.*s", (int)n, at);
    return buf;
}

/* Entry d of t's shape, as sent. */
static const char *dim_text(char *buf, size_t size, const oip_tensor *t, size_t d) {
    char path[API_PATH_MAX];
    snprintf(path, sizeof path, "/inputs/%zu/shape/%zu", t->index, d);
    return number_as_sent(buf, size, (double)t->shape[d], t, path);
}

/* The batch's size B of embeddings e, as sent: 1 without a batch axis. */
static const char *batch_text(char *buf, size_t size, const oip_tensor *e) {
    if (e->rank < 3) return "1";
    return dim_text(buf, size, e, 0);
}

/* "[2, 3, 4]" into buf (SHAPE_TEXT bytes), as sent. */
static const char *shape_text(char *buf, size_t size, const oip_tensor *t) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; i < t->rank && k < size; i++) {
        char dim[NUMBER_TEXT];
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ", " : "",
                              dim_text(dim, sizeof dim, t, i));
    }
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

/* A JSON number (a double, as scan.c parses) as a size: 1, or 0 when it is not
 * a whole number ≥ 0; *huge when it is one past SIZE_MAX. */
static int json_size(const json_t *v, size_t *out, int *huge) {
    *huge = 0;
    if (!json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!(d >= 0) || d != floor(d)) return 0;
    if (d >= 18446744073709551616.0) {
        *huge = 1;
        return 0;
    }
    *out = (size_t)d;
    return 1;
}

/* Walking a tensor's JSON data: its values in order, the rows the scan
 * lifted (api/arrays.h) read from the table, the rest from the tree. */
typedef struct data_walk {
    const oip_tensor *t;
    char path[API_PATH_MAX]; /* of the array at hand, as the scan names it */
    size_t path_len;
    double *dst; /* NULL: only checked and counted */
    size_t count;
} data_walk;

enum { WALK_TYPE = -1, WALK_SHAPE = -2 };

static int scalar_read(oip_dtype dt, const json_t *v, double *out) {
    if (json_is_boolean(v)) {
        if (dt != DT_BOOL) return WALK_TYPE;
        *out = json_is_true(v) ? 1.0 : 0.0;
        return 0;
    }
    if (!json_is_number(v)) return WALK_TYPE;
    double d = json_number_value(v);
    if (dt != DT_FP32 && d != floor(d)) return WALK_TYPE;
    *out = d;
    return 0;
}

static void walk_put(data_walk *w, double v) {
    if (w->dst && w->count < w->t->elements) w->dst[w->count] = v;
    w->count++;
}

/*
 * The array at w->path, `level` arrays deep in data. Flat data (level 0
 * holding numbers) may have any count, checked against the shape after;
 * nested data must follow the shape: the array at level l of an array of
 * arrays holds shape[l] of them, and an array of scalars holds all the
 * scalars of the dimensions from its level on.
 */
static int walk_array(data_walk *w, const json_t *a, size_t level) {
    const oip_tensor *t = w->t;
    size_t leaf = SIZE_MAX; /* the scalars an array of them must hold; any at level 0 */
    if (level > 0) {
        if (level >= t->rank) return WALK_SHAPE;
        leaf = 1;
        for (size_t d = level; d < t->rank; d++)
            leaf *= t->shape[d]; /* ≤ elements, which did not overflow */
    }
    const api_array *l = api_arrays_find(t->arrays, w->path);
    if (l) {
        size_t c = l->rows * l->cols;
        if (leaf != SIZE_MAX && c != leaf) return WALK_SHAPE;
        for (size_t i = 0; i < c; i++) {
            float f = l->data[i];
            if (t->dtype != DT_FP32 && f != floorf(f)) return WALK_TYPE;
            walk_put(w, (double)f);
        }
        return 0;
    }
    size_t n = json_array_size(a);
    if (n && json_is_array(json_array_get(a, 0))) {
        if (level + 1 >= t->rank || n != t->shape[level]) return WALK_SHAPE;
        size_t at = w->path_len;
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(a, i);
            if (!json_is_array(e)) return WALK_SHAPE;
            int k = snprintf(w->path + at, sizeof w->path - at, "/%zu", i);
            if (k < 0 || (size_t)k >= sizeof w->path - at) return WALK_SHAPE;
            w->path_len = at + (size_t)k;
            int rc = walk_array(w, e, level + 1);
            w->path_len = at;
            w->path[at] = '\0';
            if (rc < 0) return rc;
        }
        return 0;
    }
    if (leaf != SIZE_MAX && n != leaf) return WALK_SHAPE;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i);
        double d;
        if (json_is_array(e)) return WALK_SHAPE;
        if (scalar_read(t->dtype, e, &d) < 0) return WALK_TYPE;
        walk_put(w, d);
    }
    return 0;
}

/* t's JSON data walked (into dst when not NULL): 0, or -1 with *err when a
 * value is not of the datatype, the nesting does not follow the shape or
 * the count is not the shape's. Checked before anything is sized by the
 * shape. */
static int data_walk_all(const oip_tensor *t, double *dst, attn_error *err) {
    char shp[SHAPE_TEXT];
    data_walk w = {.t = t, .dst = dst};
    api_path_index(w.path, sizeof w.path, "/inputs", t->index);
    char path[API_PATH_MAX];
    memcpy(path, w.path, sizeof path);
    size_t pl = strlen(w.path);
    snprintf(w.path + pl, sizeof w.path - pl, "/data");
    w.path_len = strlen(w.path);
    int rc = walk_array(&w, t->data, 0);
    if (rc == WALK_TYPE)
        return attn_error_set(err, 400, "wrong_type", path,
                              "inputs[%zu].data holds a value that is not a %s", t->index,
                              t->dtype == DT_BOOL   ? "boolean"
                              : t->dtype == DT_FP32 ? "number"
                                                    : "integer");
    if (rc == WALK_SHAPE)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "inputs[%zu].data is nested, but not as its shape %s is; nest it "
                              "as the shape or give it flat",
                              t->index, shape_text(shp, sizeof shp, t));
    if (w.count != t->elements)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "inputs[%zu] has shape %s (%zu values), its data %zu values",
                              t->index, shape_text(shp, sizeof shp, t), t->elements, w.count);
    return 0;
}

/* The values of tensor t as doubles (t->elements of them), malloc'd: its
 * JSON data or its little-endian bytes. NULL with *err. */
static double *tensor_values(const oip_tensor *t, attn_error *err) {
    double *v = malloc((t->elements ? t->elements : 1) * sizeof *v);
    if (!v) {
        fail_oom(err);
        return NULL;
    }
    if (t->data) {
        if (data_walk_all(t, v, err) < 0) {
            free(v);
            return NULL;
        }
        return v;
    }
    const unsigned char *p = t->bin;
    for (size_t i = 0; i < t->elements; i++) {
        uint64_t u = 0;
        size_t s = dtype_size[t->dtype];
        for (size_t b = 0; b < s; b++)
            u |= (uint64_t)p[i * s + b] << (8 * b);
        switch (t->dtype) {
        case DT_BOOL: v[i] = (double)u; break;
        case DT_INT32: v[i] = (double)(int32_t)(uint32_t)u; break;
        case DT_INT64: v[i] = (double)(int64_t)u; break;
        default: {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, sizeof f);
            v[i] = (double)f;
        }
        }
    }
    return v;
}

/* inputs[i] names no input of the model, whose inputs are `list`. */
static int unknown_input(size_t i, const char *list, attn_error *err) {
    char path[API_PATH_MAX];
    api_path_index(path, sizeof path, "/inputs", i);
    return attn_error_set(err, 400, "unknown_input", path,
                          "inputs[%zu] is not an input of this model (%s); GET /v2/models/{name} "
                          "lists them",
                          i, list);
}

/* One entry of "inputs". */
static int read_input(const json_t *in, size_t i, oip_tensor *ts, oip_source *src,
                      attn_error *err) {
    char path[API_PATH_MAX];
    api_path_index(path, sizeof path, "/inputs", i);
    if (!json_is_object(in))
        return attn_error_set(err, 400, "wrong_type", path, "inputs[%zu] is not an object", i);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)in, key, v) {
        if (strcmp(key, "name") && strcmp(key, "shape") && strcmp(key, "datatype") &&
            strcmp(key, "parameters") && strcmp(key, "data"))
            return attn_error_set(err, 400, "unknown_field", path,
                                  "inputs[%zu] has an unknown field \"%s\"", i, key);
    }
    const json_t *name = json_object_get(in, "name"), *shape = json_object_get(in, "shape"),
                 *dt = json_object_get(in, "datatype"), *params = json_object_get(in, "parameters"),
                 *data = json_object_get(in, "data");
    if (!json_is_string(name) || !json_is_string(dt) || !json_is_array(shape))
        return attn_error_set(err, 400, "missing_field", path,
                              "inputs[%zu] needs a string name, a string datatype and an array "
                              "shape",
                              i);
    int which = -1;
    for (int k = 0; k < IN_COUNT; k++)
        if (strcmp(json_string_value(name), input_names[k]) == 0) which = k;
    if (which < 0)
        return unknown_input(i,
                             "embeddings, attention_mask, positions; a cross-attention model's "
                             "also context, context_mask",
                             err);
    oip_tensor *t = &ts[which];
    if (t->given)
        return attn_error_set(err, 400, "duplicate_input", path, "input \"%s\" is given twice",
                              input_names[which]);
    t->given = 1;
    t->index = i;
    t->header = src->header;
    t->header_len = src->header_len;
    t->dtype_name = json_string_value(dt);
    t->dtype = dtype_of(t->dtype_name);
    t->rank = json_array_size(shape);
    if (t->rank > MAX_RANK || t->rank == 0)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "inputs[%zu] (%s) has %zu dimensions; see GET /v2/models/{name}", i,
                              input_names[which], t->rank);
    t->elements = 1;
    for (size_t d = 0; d < t->rank; d++) {
        int huge;
        if (!json_size(json_array_get(shape, d), &t->shape[d], &huge) && !huge)
            return attn_error_set(err, 400, "wrong_type", path,
                                  "inputs[%zu].shape holds a value that is not a size", i);
        if (huge || __builtin_mul_overflow(t->elements, t->shape[d], &t->elements))
            return attn_error_set(err, 422, "limit_exceeded", path, "inputs[%zu] is too large", i);
    }
    const json_t *bsize = NULL;
    size_t want = 0;
    if (params) {
        if (!json_is_object(params))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "inputs[%zu].parameters is not an object", i);
        bsize = json_object_get(params, "binary_data_size");
        int huge = 0;
        if (bsize && !json_size(bsize, &want, &huge) && !huge)
            return attn_error_set(err, 400, "wrong_type", path,
                                  "inputs[%zu].parameters.binary_data_size is not a size", i);
        if (huge) want = SIZE_MAX;
    }
    if (!!bsize == !!data)
        return attn_error_set(err, 400, "missing_field", path,
                              "inputs[%zu] needs either data or parameters.binary_data_size", i);
    if (data && !json_is_array(data))
        return attn_error_set(err, 400, "wrong_type", path, "inputs[%zu].data is not an array", i);
    t->data = data;
    t->arrays = src->arrays;
    if (bsize) {
        size_t left = src->bin_len - src->bin_used;
        if (want > left) {
            char size_path[API_PATH_MAX], sent[NUMBER_TEXT];
            snprintf(size_path, sizeof size_path, "/inputs/%zu/parameters/binary_data_size", i);
            return attn_error_set(
                err, 400, "invalid_binary", path,
                "inputs[%zu] claims %s bytes of binary data; only %zu are left "
                "after the JSON header",
                i, number_as_sent(sent, sizeof sent, json_number_value(bsize), t, size_path), left);
        }
        t->bin = src->bin + src->bin_used;
        t->bin_len = want;
        src->bin_used += want;
    }
    return 0;
}

/* The datatype, shape and data size of an input whose rank is `rank`
 * (batch axis included) and whose leading sizes must be lead[0 … nlead). */
static int check_tensor(const oip_tensor *t, const char *what, oip_dtype want, oip_dtype alt,
                        size_t rank, const size_t *lead, size_t nlead, attn_error *err) {
    char path[API_PATH_MAX], shp[SHAPE_TEXT];
    api_path_index(path, sizeof path, "/inputs", t->index);
    if (t->dtype != want && t->dtype != alt)
        return attn_error_set(err, 400, "invalid_datatype", path,
                              "input %s has datatype %s; it takes %s%s%s", what, t->dtype_name,
                              want == DT_FP32    ? "FP32"
                              : want == DT_INT64 ? "INT64"
                                                 : "INT32",
                              alt != want ? " or " : "", alt != want ? "BOOL" : "");
    int ok = t->rank == rank;
    for (size_t d = 0; ok && d < nlead; d++)
        ok = t->shape[d] == lead[d];
    if (!ok)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "input %s has shape %s, which does not fit the embeddings' (see GET "
                              "/v2/models/{name})",
                              what, shape_text(shp, sizeof shp, t));
    size_t bytes;
    if (!t->data &&
        (__builtin_mul_overflow(t->elements, dtype_size[t->dtype], &bytes) || bytes != t->bin_len))
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "input %s has shape %s of %s: %zu bytes, but binary_data_size is "
                              "%zu",
                              what, shape_text(shp, sizeof shp, t), t->dtype_name,
                              t->elements > SIZE_MAX / dtype_size[t->dtype] ? SIZE_MAX : bytes,
                              t->bin_len);
    return 0;
}

/* A 0/1 mask's values into `real` (NULL tensor: every entry 1). */
static int read_mask(const oip_tensor *t, unsigned char *real, size_t count, const char *what,
                     attn_error *err) {
    if (!t->given) {
        memset(real, 1, count);
        return 0;
    }
    double *v = tensor_values(t, err);
    if (!v) return -1;
    for (size_t i = 0; i < count; i++) {
        if (v[i] != 0.0 && v[i] != 1.0) {
            char path[API_PATH_MAX];
            api_path_index(path, sizeof path, "/inputs", t->index);
            free(v);
            return attn_error_set(err, 422, "out_of_range", path,
                                  "%s[%zu] is neither 0 (padding) nor 1 (a real token)", what, i);
        }
        real[i] = v[i] == 1.0;
    }
    free(v);
    return 0;
}

/* Float32 values, finite. */
static float *read_floats(const oip_tensor *t, attn_error *err) {
    if (!t->data) {
        /* Binary FP32 is the floats' own bytes on the little-endian hosts
         * this builds for (x86-64, aarch64): one copy, no conversion. */
        float *f = malloc((t->elements ? t->elements : 1) * sizeof *f);
        if (!f) {
            fail_oom(err);
            return NULL;
        }
        memcpy(f, t->bin, t->elements * sizeof *f);
        for (size_t i = 0; i < t->elements; i++)
            if (!isfinite(f[i])) {
                char path[API_PATH_MAX];
                api_path_index(path, sizeof path, "/inputs", t->index);
                free(f);
                attn_error_set(err, 422, "non_finite_number", path,
                               "inputs[%zu] value %zu is not a finite float32", t->index, i);
                return NULL;
            }
        return f;
    }
    double *v = tensor_values(t, err);
    if (!v) return NULL;
    float *f = malloc((t->elements ? t->elements : 1) * sizeof *f);
    if (!f) {
        free(v);
        fail_oom(err);
        return NULL;
    }
    for (size_t i = 0; i < t->elements; i++) {
        f[i] = (float)v[i];
        if (!isfinite(f[i])) {
            char path[API_PATH_MAX];
            api_path_index(path, sizeof path, "/inputs", t->index);
            free(v);
            free(f);
            attn_error_set(err, 422, "non_finite_number", path,
                           "inputs[%zu] value %zu is not a finite float32", t->index, i);
            return NULL;
        }
    }
    free(v);
    return f;
}

/* The request's parameters: mask, scale, select_heads, layers,
 * binary_data_output, into the head record, *select and *layers; other keys
 * (Triton's priority, timeout, …) are the protocol's and ignored. */
static int read_parameters(const json_t *p, api_request *head, api_oip_request *r,
                           const json_t **select, const json_t **layers, int *bin_out,
                           attn_error *err) {
    if (!p) return 0;
    if (!json_is_object(p))
        return attn_error_set(err, 400, "wrong_type", "/parameters", "parameters is not an object");
    const json_t *v = json_object_get(p, "mask");
    if (v) {
        if (json_is_string(v) && strcmp(json_string_value(v), "causal") == 0)
            head->mask_kind = ATTN_MASK_CAUSAL;
        else if (json_is_string(v) && strcmp(json_string_value(v), "none") == 0)
            head->mask_kind = ATTN_MASK_NONE;
        else
            return attn_error_set(err, 400, "invalid_value", "/parameters/mask",
                                  "parameters.mask is \"causal\" or \"none\"");
        head->mask_given = 1;
        r->causal_asked = head->mask_kind == ATTN_MASK_CAUSAL;
    }
    v = json_object_get(p, "scale");
    if (v) {
        if (!json_is_number(v))
            return attn_error_set(err, 400, "wrong_type", "/parameters/scale",
                                  "parameters.scale is not a number");
        double d = json_number_value(v);
        if (!(d > 0) || (float)d > FLT_MAX || (float)d <= 0)
            return attn_error_set(err, 422, "out_of_range", "/parameters/scale",
                                  "parameters.scale must be a positive finite float32");
        head->scale = (float)d;
        head->scale_given = 1;
    }
    v = json_object_get(p, "binary_data_output");
    if (v) {
        if (!json_is_boolean(v))
            return attn_error_set(err, 400, "wrong_type", "/parameters/binary_data_output",
                                  "parameters.binary_data_output is not a boolean");
        *bin_out = json_is_true(v);
    }
    *select = json_object_get(p, "select_heads");
    *layers = json_object_get(p, "layers");
    return 0;
}

/* select_heads or layers (`name`): an array of integers, or a string
 * "0,2,5" (the protocol's parameters are scalars), into *out (malloc'd)
 * and *count; their range is the bind's (api_request_bind_heads,
 * api_request_bind_layers). */
static int read_indices(const char *name, const char *what, const json_t *sel, double **out,
                        size_t *count, attn_error *err) {
    char path[API_PATH_MAX];
    api_path_key(path, sizeof path, "/parameters", name);
    /* Parsed into long longs first, as many as the entries can be. */
    size_t cap_vals = 1;
    if (json_is_array(sel)) {
        cap_vals += json_array_size(sel);
    } else if (json_is_string(sel)) {
        for (const char *c = json_string_value(sel); *c; c++)
            cap_vals += *c == ',';
    }
    double *vals = malloc(cap_vals * sizeof *vals);
    if (!vals) return fail_oom(err);
    size_t nv = 0;
    int bad = 0;
    if (json_is_array(sel)) {
        size_t i;
        const json_t *e;
        json_array_foreach(sel, i, e) {
            double d = json_is_number(e) ? json_number_value(e) : 0.5;
            if (d != floor(d) || !isfinite(d)) bad = 1;
            vals[nv++] = bad ? 0 : d;
        }
    } else if (json_is_string(sel)) {
        const char *s = json_string_value(sel);
        size_t slen = json_string_length(sel);
        if (slen == 0 || strlen(s) != slen) bad = 1;
        while (!bad && *s) {
            char *end;
            while (*s == ' ')
                s++;
            /* signed, as the array's integers are: "-1" is a head out of range */
            const char *digits = *s == '-' || *s == '+' ? s + 1 : s;
            if (*digits < '0' || *digits > '9' || nv >= cap_vals) {
                bad = 1;
                break;
            }
            vals[nv++] = (double)strtoll(s, &end, 10);
            s = end;
            while (*s == ' ')
                s++;
            if (*s == ',') {
                s++;
                if (!*s) bad = 1;
            } else if (*s) {
                bad = 1;
            }
        }
    } else {
        bad = 1;
    }
    if (bad) {
        free(vals);
        return attn_error_set(err, 400, "wrong_type", path,
                              "parameters.%s is an array of %s indices or a string of "
                              "comma-separated ones (\"0,2\")",
                              name, what);
    }
    *out = vals;
    *count = nv;
    return 0;
}

/* select_heads, into the head record's select. */
static int read_heads(api_request *head, const json_t *sel, attn_error *err) {
    if (!sel) return 0;
    if (read_indices("select_heads", "head", sel, &head->select, &head->n_select, err) < 0)
        return -1;
    head->select_given = 1;
    return 0;
}

/* layers, into the head record's list of layers (an empty one is the
 * contract's 422, at /parameters/layers). */
static int read_layers(api_request *head, const json_t *layers, attn_error *err) {
    if (!layers) return 0;
    if (read_indices("layers", "layer", layers, &head->layers_sent, &head->n_layers_sent, err) < 0)
        return -1;
    if (head->n_layers_sent == 0)
        return attn_error_set(err, 422, "out_of_range", "/parameters/layers",
                              "parameters.layers is empty; list the layers to report, or leave "
                              "it out for all of them");
    head->layers_given = 1;
    return 0;
}

/* "outputs": names and binary_data; the default is patterns and
 * embeddings. */
static int read_outputs(api_oip_request *r, const json_t *outs, int bin_out, attn_error *err) {
    if (!outs) {
        r->n_out = 2;
        r->out_kind[0] = OIP_PATTERNS;
        r->out_kind[1] = OIP_EMBEDDINGS;
        r->out_binary[0] = r->out_binary[1] = bin_out;
        return 0;
    }
    if (!json_is_array(outs))
        return attn_error_set(err, 400, "wrong_type", "/outputs", "outputs is not an array");
    size_t i;
    const json_t *o;
    unsigned seen = 0;
    json_array_foreach(outs, i, o) {
        char path[API_PATH_MAX];
        api_path_index(path, sizeof path, "/outputs", i);
        const json_t *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
        if (!json_is_string(name))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "outputs[%zu] is not an object with a string name", i);
        int kind = -1;
        for (int k = 0; k < OIP_OUTPUTS; k++)
            if (strcmp(json_string_value(name), api_oip_output_names[k]) == 0) kind = k;
        if (kind < 0)
            return attn_error_set(err, 400, "unknown_output", path,
                                  "outputs[%zu] names no output of this model (patterns, "
                                  "embeddings, delta, q, k, v, scores, head_outputs, rollout)",
                                  i);
        if (seen & (1u << kind))
            return attn_error_set(err, 400, "duplicate_output", path,
                                  "output \"%s\" is asked for twice", api_oip_output_names[kind]);
        seen |= 1u << kind;
        int binary = bin_out;
        const json_t *p = json_object_get(o, "parameters");
        if (p && !json_is_object(p))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "outputs[%zu].parameters is not an object", i);
        const json_t *b = p ? json_object_get(p, "binary_data") : NULL;
        if (b && !json_is_boolean(b))
            return attn_error_set(err, 400, "wrong_type", path,
                                  "outputs[%zu].parameters.binary_data is not a boolean", i);
        if (b) binary = json_is_true(b);
        r->out_kind[r->n_out] = kind;
        r->out_binary[r->n_out] = binary;
        r->n_out++;
    }
    return 0;
}

size_t api_oip_compact_count(const api_oip_request *r, int kind, size_t rt, size_t mr) {
    /* r is a view (api_oip_view): dh, hs and the layers are the bound call's */
    if (api_oip_per_head(kind) && r->n_listed > 1)
        return r->n_listed * api_oip_layer_count(r, kind, rt, mr);
    return api_oip_layer_count(r, kind, rt, mr);
}

size_t api_oip_layer_count(const api_oip_request *r, int kind, size_t rt, size_t mr) {
    switch (kind) {
    case OIP_ROLLOUT: return rt * rt;
    case OIP_Q:
    case OIP_HEAD_OUTPUTS: return r->hs * rt * r->dh;
    case OIP_K:
    case OIP_V: return r->hs * mr * r->dh;
    case OIP_SCORES:
    case OIP_PATTERNS: return r->hs * rt * mr;
    default: return rt * r->dm;
    }
}

size_t api_oip_padded_count(const api_oip_request *r, int kind) {
    return r->B * api_oip_compact_count(r, kind, r->n, r->m);
}

/* The API_RETURN_* bit of each output. */
static const unsigned output_bit[OIP_OUTPUTS] = {
    [OIP_PATTERNS] = API_RETURN_PATTERNS,
    [OIP_EMBEDDINGS] = API_RETURN_EMBEDDINGS,
    [OIP_DELTA] = API_RETURN_DELTA,
    [OIP_Q] = API_RETURN_Q,
    [OIP_K] = API_RETURN_K,
    [OIP_V] = API_RETURN_V,
    [OIP_SCORES] = API_RETURN_SCORES,
    [OIP_HEAD_OUTPUTS] = API_RETURN_HEAD_OUTPUTS,
    [OIP_ROLLOUT] = API_RETURN_ROLLOUT,
};

/* A sequence's record: the head record's options, its own rows. */
static api_request *sequence_new(const api_request *head, const api_oip_request *r) {
    api_request *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->model = json_incref(head->model);
    q->model_json_bytes = head->model_json_bytes;
    q->mask_given = head->mask_given;
    q->mask_kind = head->mask_kind;
    q->scale_given = head->scale_given;
    q->scale = head->scale;
    for (size_t k = 0; k < r->n_out; k++)
        q->returns |= output_bit[r->out_kind[k]];
    return q;
}

/* The rows' real tokens (and context rows), and the sequences they make:
 * one record each, with its own embeddings, positions and context rows. */
static int compact(api_call *c, api_oip_request *r, const float *emb, const unsigned char *real,
                   const double *pos, const float *ctx, const unsigned char *ctx_real, size_t dc,
                   attn_error *err) {
    size_t B = r->B, n = r->n, m = r->m, dm = r->dm;
    r->tok = malloc(B * n * sizeof *r->tok);
    r->ntok = calloc(B, sizeof *r->ntok);
    r->ctok = malloc(B * m * sizeof *r->ctok);
    r->nctx = calloc(B, sizeof *r->nctx);
    r->seq = malloc(B * sizeof *r->seq);
    if (!r->tok || !r->ntok || !r->ctok || !r->nctx || !r->seq) return fail_oom(err);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < n; i++)
            if (real[b * n + i]) r->tok[b * n + r->ntok[b]++] = i;
        if (r->has_context) {
            for (size_t j = 0; j < m; j++)
                if (ctx_real[b * m + j]) r->ctok[b * m + r->nctx[b]++] = j;
            if (r->ntok[b] && !r->nctx[b])
                return attn_error_set(err, 422, "invalid_combination", "/inputs",
                                      "row %zu has real tokens but no real context row to attend "
                                      "to",
                                      b);
        } else {
            memcpy(r->ctok + b * m, r->tok + b * n, r->ntok[b] * sizeof *r->ctok);
            r->nctx[b] = r->ntok[b];
        }
        if (r->ntok[b]) r->seq[r->count++] = b;
    }
    if (api_call_reserve(c, r->count, err) < 0) return -1;
    for (size_t s = 0; s < r->count; s++) {
        size_t b = r->seq[s], rt = r->ntok[b], mr = r->nctx[b];
        api_request *q = sequence_new(c->shared, r);
        if (!q) return fail_oom(err);
        c->seqs[c->count++] = q;
        q->n_tokens = rt;
        q->d_model = dm;
        q->embeddings = malloc(rt * dm * sizeof *q->embeddings);
        if (pos) q->positions = malloc(rt * sizeof *q->positions);
        if (r->has_context) q->context = malloc(mr * dc * sizeof *q->context);
        if (!q->embeddings || (pos && !q->positions) || (r->has_context && !q->context))
            return fail_oom(err);
        for (size_t i = 0; i < rt; i++) {
            size_t t = r->tok[b * n + i];
            memcpy(q->embeddings + i * dm, emb + (b * n + t) * dm, dm * sizeof *emb);
            if (pos) q->positions[i] = (unsigned)pos[b * n + t];
        }
        if (r->has_context) {
            for (size_t j = 0; j < mr; j++)
                memcpy(q->context + j * dc, ctx + (b * m + r->ctok[b * m + j]) * dc,
                       dc * sizeof *ctx);
            q->n_context = mr;
            q->d_context = dc;
        }
    }
    return 0;
}

/* Value i of positions t (read as v), as sent: INT64 bytes as they are,
 * JSON data flat or nested by rows (walk_array) as number_as_sent has it. */
static const char *position_text(char *buf, size_t size, const oip_tensor *t, size_t i, double v) {
    if (!t->data) {
        uint64_t u = 0;
        for (size_t b = 0; b < 8; b++)
            u |= (uint64_t)t->bin[i * 8 + b] << (8 * b);
        snprintf(buf, size, "%lld", (long long)(int64_t)u);
        return buf;
    }
    char path[API_PATH_MAX];
    if (t->rank == 2 && json_is_array(json_array_get(t->data, 0)))
        snprintf(path, sizeof path, "/inputs/%zu/data/%zu/%zu", t->index, i / t->shape[1],
                 i % t->shape[1]);
    else
        snprintf(path, sizeof path, "/inputs/%zu/data/%zu", t->index, i);
    return number_as_sent(buf, size, v, t, path);
}

/* The inputs' shapes against each other; values read. */
static int decode_inputs(api_call *c, api_oip_request *r, oip_tensor *ts, const api_limits *lim,
                         attn_error *err) {
    size_t max_batch = lim ? lim->max_batch : SIZE_MAX;
    oip_tensor *e = &ts[IN_EMBEDDINGS];
    if (!e->given)
        return attn_error_set(err, 400, "missing_field", "/inputs",
                              "the request has no input named embeddings");
    if (e->dtype != DT_FP32)
        return check_tensor(e, "embeddings", DT_FP32, DT_FP32, 0, NULL, 0, err);
    char path[API_PATH_MAX];
    api_path_index(path, sizeof path, "/inputs", e->index);
    if (e->rank < 2)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "embeddings is [B, n, d_model] or [n, d_model]");
    r->batch_axis = e->rank == 3;
    r->B = r->batch_axis ? e->shape[0] : 1;
    r->n = e->shape[e->rank - 2];
    r->dm = e->shape[e->rank - 1];
    if (r->B == 0 || r->n == 0 || r->dm == 0)
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "embeddings has no rows, no tokens or no numbers in a row");
    /* the sizes in these messages are the shape's, as sent */
    char b_text[NUMBER_TEXT], x_text[NUMBER_TEXT];
    if (lim && r->dm > lim->max_d_model)
        return attn_error_set(err, 422, "limit_exceeded", path,
                              "embeddings rows have %s numbers (d_model), over the limit "
                              "max_d_model = %zu",
                              dim_text(x_text, sizeof x_text, e, e->rank - 1), lim->max_d_model);
    if (r->B > max_batch)
        return attn_error_set(err, 422, "limit_exceeded", path,
                              "the batch has %s rows, over the limit max_batch = %zu",
                              batch_text(b_text, sizeof b_text, e), max_batch);
    size_t bn;
    if (__builtin_mul_overflow(r->B, r->n, &bn) || (lim && bn > lim->max_tokens))
        return attn_error_set(err, 422, "limit_exceeded", path,
                              "the batch holds %s × %s tokens (padding included), over the limit "
                              "max_tokens = %zu",
                              batch_text(b_text, sizeof b_text, e),
                              dim_text(x_text, sizeof x_text, e, e->rank - 2),
                              lim ? lim->max_tokens : 0);
    size_t lead[2] = {r->B, r->n}, rk = r->batch_axis ? 2 : 1;
    const size_t *ld = r->batch_axis ? lead : lead + 1;
    if (check_tensor(e, "embeddings", DT_FP32, DT_FP32, e->rank, ld, rk, err) < 0) return -1;
    if (ts[IN_MASK].given &&
        check_tensor(&ts[IN_MASK], "attention_mask", DT_INT32, DT_BOOL, rk, ld, rk, err) < 0)
        return -1;
    if (ts[IN_POSITIONS].given &&
        check_tensor(&ts[IN_POSITIONS], "positions", DT_INT64, DT_INT64, rk, ld, rk, err) < 0)
        return -1;
    size_t dc = 0;
    r->has_context = ts[IN_CONTEXT].given;
    r->m = r->n;
    if (r->has_context) {
        oip_tensor *c = &ts[IN_CONTEXT];
        dc = r->dc = c->shape[c->rank - 1];
        if (c->rank != e->rank || (r->batch_axis && c->shape[0] != r->B) || dc == 0 ||
            c->shape[c->rank - 2] == 0 || (lim && dc > lim->max_d_model)) {
            if (c->dtype != DT_FP32)
                return check_tensor(c, "context", DT_FP32, DT_FP32, 0, NULL, 0, err);
            api_path_index(path, sizeof path, "/inputs", c->index);
            return attn_error_set(err, 422, "dimension_mismatch", path,
                                  "context is [B, m, d_context] (without a batch axis [m, "
                                  "d_context]), m ≥ 1 and d_context ≥ 1 within max_d_model, "
                                  "with the embeddings' B");
        }
        r->m = c->shape[c->rank - 2];
        size_t bm;
        if (__builtin_mul_overflow(r->B, r->m, &bm) || (lim && bm > lim->max_tokens)) {
            char m_text[NUMBER_TEXT];
            api_path_index(path, sizeof path, "/inputs", c->index);
            return attn_error_set(err, 422, "limit_exceeded", path,
                                  "context has %s × %s rows (padding included), over the limit "
                                  "max_tokens = %zu",
                                  batch_text(b_text, sizeof b_text, e),
                                  dim_text(m_text, sizeof m_text, c, c->rank - 2),
                                  lim ? lim->max_tokens : 0);
        }
        size_t cl[2] = {r->B, r->m};
        const size_t *cld = r->batch_axis ? cl : cl + 1;
        if (check_tensor(c, "context", DT_FP32, DT_FP32, c->rank, cld, rk, err) < 0) return -1;
        if (ts[IN_CONTEXT_MASK].given && check_tensor(&ts[IN_CONTEXT_MASK], "context_mask",
                                                      DT_INT32, DT_BOOL, rk, cld, rk, err) < 0)
            return -1;
    } else if (ts[IN_CONTEXT_MASK].given) {
        return attn_error_set(err, 400, "missing_field", "/inputs",
                              "context_mask is given without context");
    }
    /* Every shape against its data before anything is sized by a shape:
     * a declared shape alone allocates nothing. */
    for (int k = 0; k < IN_COUNT; k++)
        if (ts[k].given && ts[k].data && data_walk_all(&ts[k], NULL, err) < 0) return -1;
    int rc = -1;
    float *emb = NULL, *ctx = NULL;
    unsigned char *real = malloc(bn), *ctx_real = NULL;
    double *pos = NULL;
    if (!real) return fail_oom(err);
    if (r->has_context && !(ctx_real = malloc(r->B * r->m))) {
        fail_oom(err);
        goto out;
    }
    if (read_mask(&ts[IN_MASK], real, bn, "attention_mask", err) < 0) goto out;
    if (r->has_context &&
        read_mask(&ts[IN_CONTEXT_MASK], ctx_real, r->B * r->m, "context_mask", err) < 0)
        goto out;
    if (ts[IN_POSITIONS].given) {
        if (!(pos = tensor_values(&ts[IN_POSITIONS], err))) goto out;
        for (size_t i = 0; i < bn; i++)
            if (real[i] && !(pos[i] >= 0 && pos[i] <= 2147483647.0)) {
                char sent[NUMBER_TEXT];
                api_path_index(path, sizeof path, "/inputs", ts[IN_POSITIONS].index);
                attn_error_set(err, 422, "out_of_range", path,
                               "positions[%zu] = %s is not in 0 … 2^31 − 1", i,
                               position_text(sent, sizeof sent, &ts[IN_POSITIONS], i, pos[i]));
                goto out;
            }
    }
    if (!(emb = read_floats(e, err))) goto out;
    if (r->has_context && !(ctx = read_floats(&ts[IN_CONTEXT], err))) goto out;
    rc = compact(c, r, emb, real, pos, ctx, ctx_real, dc, err);
out:
    free(real);
    free(ctx_real);
    free(pos);
    free(emb);
    free(ctx);
    return rc;
}

/*
 * The JSON header is scanned before jansson builds its tree (api/arrays.h),
 * as /v1's body is: the rows of numbers of every input's data, flat or
 * nested, are read from the text, so jansson holds one empty array per row
 * instead of a node per number; and the scan holds the rest to the limits
 * (depth, string length, values in all) first.
 *
 * Bit i: input i's data is left to jansson. An integer tensor's lifted row
 * is float32, exact only below 2^24; one with larger values (positions up
 * to 2^31 − 1) is scanned again with its data left to the tree, which is
 * as small as the limits on its length (max_tokens) keep it.
 */
static _Thread_local uint64_t data_in_tree;

static int oip_array_rank(const char *path) {
    static const char pre[] = "/inputs/";
    if (strncmp(path, pre, sizeof pre - 1)) return 0;
    const char *p = path + sizeof pre - 1;
    size_t i = 0;
    if (*p < '0' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++)
        i = i < 1000 ? i * 10 + (size_t)(*p - '0') : i;
    if (strncmp(p, "/data", 5)) return 0;
    if (i < 64 && (data_in_tree >> i & 1)) return 0;
    p += 5;
    /* data itself, or an array nested in it (a tensor has three axes) */
    for (int level = 0;; level++) {
        if (!*p) return 1;
        if (level == 2 || *p != '/' || p[1] < '0' || p[1] > '9') return 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            continue;
    }
}

/* Does the data at `path` hold a lifted value a float32 may have rounded? */
static int lifted_inexact(const api_arrays *a, const json_t *v, char *path, size_t len) {
    const api_array *l = api_arrays_find(a, path);
    if (l) {
        for (size_t i = 0; i < l->rows * l->cols; i++)
            if (fabsf(l->data[i]) >= 16777216.0f) return 1;
        return 0;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_array(e)) continue;
        int k = snprintf(path + len, API_PATH_MAX - len, "/%zu", i);
        if (k < 0 || (size_t)k >= API_PATH_MAX - len) continue;
        if (lifted_inexact(a, e, path, len + (size_t)k)) return 1;
        path[len] = '\0';
    }
    path[len] = '\0';
    return 0;
}

/* Inputs (of the first 64) whose data is integers lifted inexactly. */
static uint64_t inexact_inputs(const api_arrays *a, const json_t *root) {
    const json_t *ins = json_object_get(root, "inputs");
    uint64_t bits = 0;
    for (size_t i = 0; i < json_array_size(ins) && i < 64; i++) {
        const json_t *in = json_array_get(ins, i), *dt = json_object_get(in, "datatype"),
                     *data = json_object_get(in, "data");
        if (!json_is_array(data) || !json_is_string(dt) || !strcmp(json_string_value(dt), "FP32"))
            continue;
        char path[API_PATH_MAX];
        int k = snprintf(path, sizeof path, "/inputs/%zu/data", i);
        if (k > 0 && (size_t)k < sizeof path && lifted_inexact(a, data, path, (size_t)k))
            bits |= (uint64_t)1 << i;
    }
    return bits;
}

/*
 * The most values an accepted header has, for jansson to build: per input
 * (five at most) its data's arrays, one per row of its last axis and one
 * per batch row, and its BOOL cells, none more than max_tokens (rows and
 * context rows both are bounded by it); select_heads within max_heads;
 * the object, its parameters, the inputs' descriptions and the outputs
 * (eight names and their parameters) within a 1024 to spare.
 */
static size_t oip_values_max(const api_limits *lim) {
    size_t per_tokens, per_heads, total;
    if (api_size_mul(lim->max_tokens, 10, &per_tokens) < 0 ||
        api_size_mul(lim->max_heads, 2, &per_heads) < 0 ||
        api_size_add(per_tokens, per_heads, &total) < 0 || api_size_add(total, 1024, &total) < 0)
        return SIZE_MAX;
    return total;
}

/* No array is held to a length by the scan: the shapes say the lengths. */
static const api_scan_table oip_scan = {"JSON header", NULL, 0, oip_values_max, oip_array_rank};

/* The header scanned and parsed: its tree in *root and the lifted rows in
 * *arrays (both the caller's), or -1 with *err. */
static int parse_header(const char *body, size_t hl, const api_limits *lim, json_t **root,
                        api_arrays **arrays, attn_error *err) {
    data_in_tree = 0;
    for (int pass = 0;; pass++) {
        if (api_scan_parse(body, hl, &oip_scan, lim, root, arrays, err) < 0) break;
        uint64_t bits = pass ? 0 : inexact_inputs(*arrays, *root);
        if (!bits) {
            data_in_tree = 0;
            return 0;
        }
        json_decref(*root);
        *root = NULL;
        api_arrays_free(*arrays);
        *arrays = NULL;
        data_in_tree = bits;
    }
    data_in_tree = 0;
    return -1;
}

static int oip_decode_header(api_call *c, api_oip_request *r, const json_t *root, oip_source *src,
                             const api_limits *limits, attn_error *err) {
    oip_tensor ts[IN_COUNT] = {0};
    int bin_out = 0;
    const json_t *select = NULL, *layers = NULL, *v;

    if (!json_is_object(root))
        return attn_error_set(err, 400, "wrong_type", "", "the JSON header is not an object");
    static const char *const fields[] = {"id",      "parameters", "inputs",
                                         "outputs", "model_name", "model_version"};
    if (api_check_fields(root, fields, 6, "the JSON header", "",
                         "id, parameters, inputs, outputs, model_name, model_version", err) < 0)
        return -1;
    v = json_object_get(root, "id");
    if (v && !json_is_string(v))
        return attn_error_set(err, 400, "wrong_type", "/id", "id is not a string");
    r->id = json_incref((json_t *)v);
    /* Triton's own examples name the model in the body too: it must be the
     * path's. Any version is the one this server has. */
    v = json_object_get(root, "model_name");
    if (v && !json_is_string(v))
        return attn_error_set(err, 400, "wrong_type", "/model_name", "model_name is not a string");
    if (v && !json_equal((json_t *)v, c->shared->model))
        return attn_error_set(err, 400, "invalid_value", "/model_name",
                              "model_name is not the model the path names");
    v = json_object_get(root, "model_version");
    if (v && !json_is_string(v))
        return attn_error_set(err, 400, "wrong_type", "/model_version",
                              "model_version is not a string");
    if (read_parameters(json_object_get(root, "parameters"), c->shared, r, &select, &layers,
                        &bin_out, err) < 0)
        return -1;
    v = json_object_get(root, "inputs");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return attn_error_set(err, 400, "missing_field", "/inputs",
                              "inputs is not a non-empty array");
    for (size_t i = 0; i < json_array_size(v); i++)
        if (read_input(json_array_get(v, i), i, ts, src, err) < 0) return -1;
    if (src->bin_used != src->bin_len)
        return attn_error_set(err, 400, "invalid_binary", "",
                              "%zu bytes follow the JSON header, but the inputs' binary_data_size "
                              "sum to %zu",
                              src->bin_len, src->bin_used);
    r->embeddings_at = ts[IN_EMBEDDINGS].index;
    r->context_at = ts[IN_CONTEXT].given ? (long)ts[IN_CONTEXT].index : -1;
    r->context_mask_at = ts[IN_CONTEXT_MASK].given ? (long)ts[IN_CONTEXT_MASK].index : -1;
    if (read_outputs(r, json_object_get(root, "outputs"), bin_out, err) < 0 ||
        read_heads(c->shared, select, err) < 0 || read_layers(c->shared, layers, err) < 0)
        return -1;
    /* what the head record binds by: a stack's rollout (named at its
     * place in outputs) */
    for (size_t k = 0; k < r->n_out; k++) {
        c->shared->returns |= output_bit[r->out_kind[k]];
        if (r->out_kind[k] == OIP_ROLLOUT) c->shared->rollout_at = k;
    }
    c->shared->return_field = "/outputs";
    return decode_inputs(c, r, ts, limits, err);
}

static int oip_decode(api_call *c, const api_call_body *body, const api_limits *limits,
                      attn_error *err) {
    size_t len = body->len, hl = len;
    if (body->header_len >= 0) {
        if ((unsigned long long)body->header_len > len)
            return attn_error_set(err, 400, "invalid_binary", "",
                                  "Inference-Header-Content-Length is %lld, past the body's %zu "
                                  "bytes",
                                  body->header_len, len);
        hl = (size_t)body->header_len;
    }
    api_oip_request *r = calloc(1, sizeof *r);
    if (!r) return fail_oom(err);
    c->wire = r;
    if (!(c->shared = calloc(1, sizeof *c->shared))) return fail_oom(err);
    /* The URL's name, kept as a body's would be (its echo's length too). */
    const char *name = body->model ? body->model : "";
    c->shared->model = json_stringn(name, strlen(name));
    if (!c->shared->model || !(c->shared->model_json_bytes = api_json_bytes(c->shared->model)))
        return fail_oom(err);
    json_t *root;
    api_arrays *arrays;
    if (parse_header(body->data, hl, limits, &root, &arrays, err) < 0) return -1;
    oip_source src = {body->data, hl, arrays, (const unsigned char *)body->data + hl, len - hl, 0};
    int rc = oip_decode_header(c, r, root, &src, limits, err);
    json_decref(root);
    api_arrays_free(arrays);
    return rc;
}

/* The inputs a model takes: the context and its mask are a
 * cross-attention model's, and it needs the context; its rows have no
 * order, so no causal mask. */
static int oip_check_model(const api_call *c, const api_model_ref *m, attn_error *err) {
    const api_oip_request *r = c->wire;
    int cross = m->weights->w_kv != NULL;
    if (!cross && (r->context_at >= 0 || r->context_mask_at >= 0)) {
        long at = r->context_at;
        if (at < 0 || (r->context_mask_at >= 0 && r->context_mask_at < at)) at = r->context_mask_at;
        return unknown_input((size_t)at, "embeddings, attention_mask, positions", err);
    }
    if (cross && !r->has_context)
        return attn_error_set(err, 400, "missing_field", "/inputs",
                              "the model is cross-attention: it needs an input named context");
    /* Here, not only in each sequence's bind: rows all padding make no
     * sequence, and their widths must fit the model all the same. */
    char path[API_PATH_MAX];
    if (r->dm != m->weights->d_model) {
        api_path_index(path, sizeof path, "/inputs", r->embeddings_at);
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "embeddings rows have %zu numbers, expected the model's d_model = "
                              "%zu",
                              r->dm, m->weights->d_model);
    }
    if (cross && r->dc != m->weights->d_context) {
        api_path_index(path, sizeof path, "/inputs", (size_t)r->context_at);
        return attn_error_set(err, 422, "dimension_mismatch", path,
                              "context rows have %zu numbers, expected the model's d_context = "
                              "%zu",
                              r->dc, m->weights->d_context);
    }
    if (cross && r->causal_asked)
        return attn_error_set(err, 422, "invalid_combination", "/parameters/mask",
                              "a cross-attention model's context rows have no order: the mask is "
                              "\"none\"");
    return 0;
}

void api_oip_view(const api_call *c, api_oip_request *view) {
    *view = *(const api_oip_request *)c->wire;
    view->model = c->shared->model;
    view->model_json_bytes = c->shared->model_json_bytes;
    /* jansson counts without allocating; were it ever to fail, the widest
     * escape of every byte (\u0000) */
    view->id_json_bytes = view->id ? api_json_bytes(view->id) : 0;
    if (view->id && !view->id_json_bytes)
        view->id_json_bytes = 2 + 6 * json_string_length(view->id);
    view->dh = c->weights->d_head;
    view->hs = c->shared->n_heads;
    view->outs = c->outs;
    /* a stack's layer axis: the sequences' form is the head's (no hidden
     * states under /v2) */
    const api_layers *ly = c->shared->layers;
    view->n_listed = ly && ly->computed && api_request_is_stack(c->shared) ? ly->n_list : 0;
    view->listed = ly ? ly->list : NULL;
    view->n_layers = ly && ly->computed ? ly->n : 0;
    view->layer_outs = c->layer_outs_all;
    view->finals = c->finals;
}

static int oip_answer_bytes_max(const api_call *c, size_t *bytes) {
    api_oip_request r;
    api_oip_view(c, &r);
    *bytes = api_oip_answer_bytes_max(&r);
    return *bytes == SIZE_MAX ? -1 : 0;
}

static char *oip_encode(const api_call *c, size_t *len, size_t *json_len, attn_error *err) {
    api_oip_request r;
    api_oip_view(c, &r);
    return api_oip_encode(&r, len, json_len, err);
}

/* Any output asked for as bytes. */
static int oip_streams(const api_call *c) {
    const api_oip_request *r = c->wire;
    for (size_t k = 0; r && k < r->n_out; k++)
        if (r->out_binary[k]) return 1;
    return 0;
}

/* The answer takes the state (its padding's arrays), leaving the call
 * without it: the call is only freed after this. */
static api_answer *oip_answer(api_call *c, attn_workspace *block, attn_error *err) {
    api_oip_request view;
    api_oip_view(c, &view);
    api_oip_request *wire = c->wire;
    c->wire = NULL;
    return api_oip_answer_create(&view, wire, block, err);
}

void api_oip_request_free(api_oip_request *r) {
    if (!r) return;
    json_decref(r->id);
    free(r->tok);
    free(r->ntok);
    free(r->ctok);
    free(r->nctx);
    free(r->seq);
    free(r);
}

static void oip_free_wire(void *wire) {
    api_oip_request_free(wire);
}

const api_codec api_codec_oip = {
    .decode = oip_decode,
    .array_rank = oip_array_rank,
    .check_model = oip_check_model,
    .answer_bytes_max = oip_answer_bytes_max,
    .encode = oip_encode,
    .streams = oip_streams,
    .answer = oip_answer,
    .error_body = api_oip_error_json,
    .free_wire = oip_free_wire,
    .noun = "request",
    .answer_path = "/outputs",
    .answer_unit = "bytes",
    .answer_advice = "outputs or heads",
    .model_in_url = 1,
};
