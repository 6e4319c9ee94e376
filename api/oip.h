/*
 * oip.h — the Open Inference Protocol (KServe v2, REST) for the attention
 * computation: model and server metadata, the infer request decoded into
 * engine inputs, and its answer encoded, with Triton's binary tensor data
 * extension both ways. No sockets: the server hands bytes in and sends the
 * bytes that come out.
 *
 * Sources of the wire format (what each rule below follows):
 *   - kserve/open-inference-protocol, REST: GET v2, v2/health/live|ready,
 *     v2/models/<name>[/ready], POST v2/models/<name>/infer; the request
 *     {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype",
 *     "parameters"?, "data"}], "outputs"?: [{"name", "parameters"?}]}, the
 *     response {"model_name", "id"?, "outputs": [{"name", "shape",
 *     "datatype", "parameters"?, "data"}]}, errors {"error": "<message>"};
 *     model metadata {"name", "versions"?, "platform", "inputs", "outputs"}
 *     with {"name", "datatype", "shape"} and -1 for a varying size.
 *   - Triton's docs/protocol/extension_binary_data.md: tensor bytes
 *     little-endian, row-major, unpadded, BOOL one byte; an input whose
 *     parameters hold "binary_data_size" has its bytes after the JSON, in
 *     the order of the inputs; the JSON's length is the header
 *     Inference-Header-Content-Length; outputs go as bytes when asked with
 *     "binary_data": true or the request's "binary_data_output": true, each
 *     with its "binary_data_size", in the order of the outputs.
 *   - tritonclient.http (triton-inference-server/client,
 *     src/python/library/tritonclient/http/_utils.py, _infer_input.py,
 *     _requested_output.py, _infer_result.py): without `outputs` it sends
 *     "binary_data_output": true; a requested output carries
 *     "binary_data": true by default; it sets no Content-Type; it reads the
 *     answer's JSON by the response's Inference-Header-Content-Length and
 *     the bytes by each output's binary_data_size.
 *
 * An infer request is a call (call.h) of the kind API_CALL_OIP, decoded
 * by codec_oip.c and encoded by codec_oip_encode.c; this header has what
 * the other /v2 endpoints answer.
 *
 * The computation (docs/API.md, "Open Inference Protocol"): embeddings
 * [B, n, d_model] are B padded sequences (or [n, d_model]: one, outputs
 * without the batch axis); attention_mask [B, n] says which tokens are real.
 * Each row's real tokens are compacted into an unpadded sequence, all of
 * them computed as one attn_compute_batch, and the results scattered back
 * into padded tensors: a padded token's rows are 0 in every output, and in
 * scores a real query's entry for a padded key is masked (−∞, which JSON
 * writes −3.4028235e38). So a padded sequence answers, bit for bit, what it
 * answers unpadded.
 *
 * Errors are attn_error (status, code, message, path); api_oip_error_json
 * writes the protocol's body.
 */
#ifndef API_OIP_H
#define API_OIP_H

#include <stddef.h>

#include "api/error.h"
#include "attention/attention.h"

/* The model an endpoint speaks for: not owned, outlives the call. */
typedef struct api_oip_model {
    const char *name;
    const attn_weights *weights;
    attn_mask_kind mask; /* its default: causal or none */
    size_t n_layers;     /* L (0 is 1): a stack's per-head outputs gain a layer axis */
} api_oip_model;

/* {"error": message}: the protocol's error body, malloc'd, NUL-terminated;
 * NULL when out of memory. */
char *api_oip_error_json(const attn_error *err, size_t *len);

/* GET /v2: {"name", "version", "extensions": ["binary_tensor_data"]}. */
char *api_oip_server_metadata(size_t *len);

/* GET /v2/models/{name}/ready: {"name": name, "ready": true}, malloc'd;
 * NULL when out of memory. */
char *api_oip_model_ready(const char *name, size_t *len);

/* GET /v2/models/{name}: the model's inputs and outputs. NULL when out of
 * memory. */
char *api_oip_model_metadata(const api_oip_model *m, size_t *len);

#endif
