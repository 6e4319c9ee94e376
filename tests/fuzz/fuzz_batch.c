/*
 * fuzz_batch.c — libFuzzer target over POST /v1/attention/batch's decoder,
 * binding, engine and encoder (make fuzz).
 *
 * Each input is a batch body. The whole path a worker runs — the call's
 * decode, bind (a batch naming a model gets a small built-in one, with a
 * vocabulary: fuzz_vocab.h), its outputs, attn_compute_batch, its
 * encode — ends in an answer or an error, never a crash, a leak or undefined behaviour
 * (ASan, UBSan); and an error of the engine that names a sequence names one of the batch's.
 *
 * Limits are small so that one input cannot take long.
 */
#include <stdint.h>
#include <stdlib.h>

#include "api/call.h"
#include "api/error.h"
#include "attention/attention.h"
#include "tests/fuzz/fuzz_vocab.h"

/* A model of 4 dimensions, 2 heads of 2, with w_o and biases. */
static float w_qkv[4 * 12], b_qkv[12], w_o[4 * 4], b_o[4];
static const attn_weights model = {.d_model = 4,
                                   .n_heads = 2,
                                   .d_head = 2,
                                   .w_qkv = w_qkv,
                                   .b_qkv = b_qkv,
                                   .w_o = w_o,
                                   .b_o = b_o};

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 8,
                                  .max_d_model = 64,
                                  .max_flops = 1e7,
                                  .max_response_bytes = 1 << 20,
                                  .max_workspace_bytes = 1 << 24,
                                  .max_json_depth = 12,
                                  .max_string_bytes = 512,
                                  .max_batch = 16};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static attn_workspace *ws, *outputs;
    if (!ws) {
        for (size_t i = 0; i < sizeof w_qkv / sizeof w_qkv[0]; i++)
            w_qkv[i] = (float)((int)(i % 7) - 3) / 4.0f;
        for (size_t i = 0; i < 16; i++)
            w_o[i] = (float)((int)(i % 5) - 2) / 2.0f;
        ws = attn_workspace_create();
        outputs = attn_workspace_create();
        if (!ws || !outputs) abort();
    }
    api_call *b = NULL;
    attn_error err;
    if (api_call_decode_json(API_CALL_BATCH, (const char *)data, size, &limits, &b, &err) != 0)
        return 0;
    if (api_call_model(b, NULL) &&
        api_call_bind(b,
                      &(api_model_ref){NULL, &model, ATTN_MASK_CAUSAL,
                                       fuzz_vocab_for(api_call_model(b, NULL))},
                      &limits, &err) != 0) {
        api_call_free(b);
        return 0;
    }
    /* both ways of making the outputs, by the input's parity */
    if (api_call_alloc_outputs(b, size % 2 ? outputs : NULL, &err) != 0) {
        api_call_free(b);
        return 0;
    }
    size_t failed = 0, len;
    if (attn_compute_batch(api_call_outputs(b), ws, api_call_inputs(b), api_call_count(b), NULL,
                           &err, &failed) == 0) {
        free(api_call_encode(b, &len, NULL, &err));
    } else if (err.code == ATTN_ERR_NONFINITE && failed >= api_call_count(b)) {
        abort();
    }
    api_call_free(b);
    return 0;
}
