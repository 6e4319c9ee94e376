/*
 * oip_client.h — an Open Inference Protocol client for the tests, writing
 * and reading the bytes as tritonclient.http does
 * (triton-inference-server/client, src/python/library/tritonclient/http/:
 * _utils.py's _get_inference_request, _infer_input.py, _requested_output.py,
 * _infer_result.py): the JSON header, then each binary input's raw
 * little-endian bytes in input order, the header's length sent as
 * Inference-Header-Content-Length; with no outputs named, the request's
 * parameters carry "binary_data_output": true. An answer is split at its
 * Inference-Header-Content-Length and each output's bytes found by summing
 * the binary_data_size of the outputs before it.
 */
#ifndef TESTS_OIP_CLIENT_H
#define TESTS_OIP_CLIENT_H

#include <jansson.h>
#include <stddef.h>

typedef struct oc_input {
    const char *name;
    const char *datatype; /* "FP32", "INT32", "INT64", "BOOL" */
    size_t rank;
    long long shape[3];
    const void *values; /* float, int32_t, int64_t or uint8_t, row-major */
    int binary;         /* 1: bytes after the JSON; 0: JSON data */
} oc_input;

typedef struct oc_output {
    const char *name;
    int binary; /* 1: "binary_data": true, 0: false, -1: no parameters */
} oc_output;

typedef struct oc_body {
    char *data; /* malloc'd */
    size_t len;
    size_t json_len; /* the header's length when bytes follow, else 0 */
} oc_body;

/* The request body. `params` is a JSON object's text or NULL; `id` may be
 * NULL. With outputs NULL and triton_default set, adds
 * "binary_data_output": true to the parameters, as tritonclient does. */
void oc_build(oc_body *b, const char *id, const oc_input *ins, size_t n_in, const oc_output *outs,
              size_t n_out, const char *params, int triton_default);
void oc_body_free(oc_body *b);

typedef struct oc_result {
    json_t *json; /* the JSON part */
    const unsigned char *bin;
    size_t bin_len;
} oc_result;

/* Splits an answer (json_len: its Inference-Header-Content-Length, or -1
 * when it had none). 0, or -1 when the JSON does not parse. */
int oc_parse(oc_result *r, const char *body, size_t len, long long json_len);
void oc_result_free(oc_result *r);

/* Output `name`'s values as floats (malloc'd; *count of them), from its
 * bytes or its JSON data; its shape into shape/rank. NULL when absent. */
float *oc_output_values(const oc_result *r, const char *name, size_t *count, long long *shape,
                        size_t *rank, int *was_binary);

#endif
