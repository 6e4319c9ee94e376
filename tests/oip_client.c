/*
 * oip_client.c — the tests' Open Inference Protocol client (oip_client.h).
 */
#include "tests/oip_client.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t dt_size(const char *dt) {
    if (strcmp(dt, "BOOL") == 0) return 1;
    if (strcmp(dt, "INT64") == 0) return 8;
    return 4;
}

static json_t *value_json(const char *dt, const void *v, size_t i) {
    if (strcmp(dt, "FP32") == 0) return json_real((double)((const float *)v)[i]);
    if (strcmp(dt, "INT32") == 0) return json_integer(((const int32_t *)v)[i]);
    if (strcmp(dt, "INT64") == 0) return json_integer(((const int64_t *)v)[i]);
    return json_boolean(((const uint8_t *)v)[i]);
}

void oc_build(oc_body *b, const char *id, const oc_input *ins, size_t n_in, const oc_output *outs,
              size_t n_out, const char *params, int triton_default) {
    json_t *req = json_object(), *inputs = json_array();
    json_t *p = params ? json_loads(params, 0, NULL) : json_object();
    ck_assert_ptr_nonnull(p);
    size_t bin = 0;
    if (id) json_object_set_new(req, "id", json_string(id));
    for (size_t i = 0; i < n_in; i++) {
        const oc_input *in = &ins[i];
        json_t *shape = json_array();
        size_t count = 1;
        for (size_t d = 0; d < in->rank; d++) {
            json_array_append_new(shape, json_integer(in->shape[d]));
            count *= (size_t)in->shape[d];
        }
        json_t *t =
            json_pack("{s:s,s:o,s:s}", "name", in->name, "shape", shape, "datatype", in->datatype);
        if (in->binary) {
            size_t bytes = count * dt_size(in->datatype);
            json_object_set_new(t, "parameters",
                                json_pack("{s:I}", "binary_data_size", (json_int_t)bytes));
            bin += bytes;
        } else {
            json_t *data = json_array();
            for (size_t k = 0; k < count; k++)
                json_array_append_new(data, value_json(in->datatype, in->values, k));
            json_object_set_new(t, "data", data);
        }
        json_array_append_new(inputs, t);
    }
    json_object_set_new(req, "inputs", inputs);
    if (outs) {
        json_t *o = json_array();
        for (size_t i = 0; i < n_out; i++) {
            json_t *e = json_pack("{s:s}", "name", outs[i].name);
            if (outs[i].binary >= 0)
                json_object_set_new(e, "parameters",
                                    json_pack("{s:b}", "binary_data", outs[i].binary));
            json_array_append_new(o, e);
        }
        json_object_set_new(req, "outputs", o);
    } else if (triton_default) {
        json_object_set_new(p, "binary_data_output", json_true());
    }
    if (json_object_size(p)) json_object_set(req, "parameters", p);
    json_decref(p);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    size_t tl = strlen(text);
    b->data = malloc(tl + bin + 1);
    memcpy(b->data, text, tl);
    free(text);
    b->len = tl;
    for (size_t i = 0; i < n_in; i++) {
        const oc_input *in = &ins[i];
        if (!in->binary) continue;
        size_t count = 1;
        for (size_t d = 0; d < in->rank; d++)
            count *= (size_t)in->shape[d];
        /* little-endian, as numpy's tobytes() on the hosts we run */
        memcpy(b->data + b->len, in->values, count * dt_size(in->datatype));
        b->len += count * dt_size(in->datatype);
    }
    b->json_len = bin ? tl : 0;
}

void oc_body_free(oc_body *b) {
    free(b->data);
    b->data = NULL;
}

int oc_parse(oc_result *r, const char *body, size_t len, long long json_len) {
    size_t jl = json_len < 0 ? len : (size_t)json_len;
    ck_assert_uint_le(jl, len);
    r->json = json_loadb(body, jl, JSON_ALLOW_NUL, NULL);
    r->bin = (const unsigned char *)body + jl;
    r->bin_len = len - jl;
    return r->json ? 0 : -1;
}

void oc_result_free(oc_result *r) {
    json_decref(r->json);
    r->json = NULL;
}

static size_t flatten(const json_t *v, float *dst, size_t k) {
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
            k = flatten(e, dst, k);
        return k;
    }
    if (dst) dst[k] = (float)json_number_value(v);
    return k + 1;
}

float *oc_output_values(const oc_result *r, const char *name, size_t *count, long long *shape,
                        size_t *rank, int *was_binary) {
    size_t at = 0, i;
    const json_t *o;
    json_array_foreach(json_object_get(r->json, "outputs"), i, o) {
        const json_t *size = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        if (strcmp(json_string_value(json_object_get(o, "name")), name) != 0) {
            if (size) at += (size_t)json_integer_value(size);
            continue;
        }
        const json_t *s = json_object_get(o, "shape");
        size_t n = 1;
        *rank = json_array_size(s);
        for (size_t d = 0; d < *rank; d++) {
            shape[d] = json_integer_value(json_array_get(s, d));
            n *= (size_t)shape[d];
        }
        *count = n;
        float *v = malloc((n ? n : 1) * sizeof *v);
        *was_binary = size != NULL;
        if (size) {
            ck_assert_uint_eq((size_t)json_integer_value(size), n * sizeof(float));
            ck_assert_uint_le(at + n * sizeof(float), r->bin_len);
            memcpy(v, r->bin + at, n * sizeof(float));
        } else {
            ck_assert_uint_eq(flatten(json_object_get(o, "data"), NULL, 0), n);
            flatten(json_object_get(o, "data"), v, 0);
        }
        return v;
    }
    return NULL;
}
