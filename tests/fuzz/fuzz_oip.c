/*
 * fuzz_oip.c — libFuzzer target over the Open Inference Protocol's decoder
 * and encoder (api/oip.h; make fuzz).
 *
 * An input is one byte choosing the model (bit 0: a small cross-attention
 * one, else a self-attention one with ALiBi, so that positions matter),
 * four bytes of the Inference-Header-Content-Length (little-endian;
 * 0xffffffff: no such header), then the body: JSON header and binary
 * tensors. The call's decode and bind, attn_compute_batch and its encode must end
 * in an answer or an error, never a crash, a read past the body, a leak or
 * undefined behaviour (ASan, UBSan). Limits are small so that one input
 * cannot take long.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "api/oip.h"
#include "attention/attention.h"

enum { DM = 4, H = 2, DH = 2, DC = 3 };

static float w_qkv[DM * 3 * H * DH], w_q[DM * H * DH], w_kv[DC * 2 * H * DH], w_o[H * DH * DM];
static const float slopes[H] = {0.5f, 0.25f};

static const attn_weights self_w = {
    .d_model = DM, .n_heads = H, .d_head = DH, .w_qkv = w_qkv, .w_o = w_o, .alibi = slopes};
static const attn_weights cross_w = {.d_model = DM,
                                     .n_heads = H,
                                     .d_head = DH,
                                     .w_qkv = w_q,
                                     .w_o = w_o,
                                     .d_context = DC,
                                     .w_kv = w_kv};

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 8,
                                  .max_d_model = 16,
                                  .max_flops = 1e7,
                                  .max_response_bytes = 1 << 20,
                                  .max_workspace_bytes = 1 << 20,
                                  .max_batch = 16};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static attn_workspace *ws;
    if (!ws) {
        for (size_t i = 0; i < sizeof w_qkv / sizeof *w_qkv; i++)
            w_qkv[i] = (float)((int)(i % 7) - 3) / 4.0f;
        for (size_t i = 0; i < sizeof w_q / sizeof *w_q; i++)
            w_q[i] = (float)((int)(i % 5) - 2) / 4.0f;
        for (size_t i = 0; i < sizeof w_kv / sizeof *w_kv; i++)
            w_kv[i] = (float)((int)(i % 3) - 1) / 2.0f;
        for (size_t i = 0; i < sizeof w_o / sizeof *w_o; i++)
            w_o[i] = (float)((int)(i % 5) - 2) / 2.0f;
        ws = attn_workspace_create();
        if (!ws) abort();
    }
    if (size < 5) return 0;
    int cross = data[0] & 1;
    uint32_t hl = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
                  (uint32_t)data[4] << 24;
    /* The body in a buffer of its own size, so that ASan sees any read past it. */
    size_t len = size - 5;
    char *body = malloc(len ? len : 1);
    if (!body) return 0;
    memcpy(body, data + 5, len);
    api_oip_model m = {cross ? "cross" : "self", cross ? &cross_w : &self_w,
                       cross ? ATTN_MASK_NONE : ATTN_MASK_CAUSAL};
    api_call *r = NULL;
    attn_error err;
    api_call_body b = {body, len, hl == 0xffffffffu ? -1 : (long long)hl, m.name};
    api_model_ref ref = {m.name, m.weights, m.mask, NULL};
    int rc = api_call_decode(API_CALL_OIP, &b, &limits, &r, &err);
    if (rc == 0) rc = api_call_bind(r, &ref, &limits, &err);
    if (rc == 0) rc = api_call_alloc_outputs(r, NULL, &err);
    if (rc == 0) {
        size_t failed, out_len, json_len;
        if (attn_compute_batch(api_call_outputs(r), ws, api_call_inputs(r), api_call_count(r), NULL,
                               &err, &failed) == 0) {
            char *text = api_call_encode(r, &out_len, &json_len, &err);
            if (text && json_len > out_len) abort();
            free(text);
        }
    }
    api_call_free(r);
    if (rc != 0) {
        size_t elen;
        char *text = api_oip_error_json(&err, &elen);
        if (!text) abort(); /* every message must make a body */
        free(text);
    }
    free(body);
    return 0;
}
