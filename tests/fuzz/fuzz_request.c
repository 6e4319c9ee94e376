/*
 * fuzz_request.c — libFuzzer target over the request decoder, validator,
 * engine and encoder (make fuzz).
 *
 * Each input is a request body. Two things are checked on every one:
 *
 *   - the arrays and tensor strings read straight from the text
 *     (api/arrays.c) change nothing jansson decides: jansson on the text
 *     with them lifted accepts exactly what it accepts on the original,
 *     with the same error, line, column and position, and each string
 *     lifted is the value jansson read (the differential test of
 *     tests/test_arrays.c, driven by the fuzzer's coverage instead of
 *     random mutations), and the scan's check of `tokens` (strings only,
 *     a bounded count) refuses exactly the element jansson's tree shows;
 *   - the whole path a worker runs — the call's decode, bind (a request
 *     naming a model gets a small built-in one, with a vocabulary:
 *     fuzz_vocab.h), attn_compute, its
 *     encode — ends in an answer or an error body, never a
 *     crash, a leak or undefined behaviour (ASan, UBSan).
 *
 * Limits are small so that one input cannot take long: a fuzzer's body is
 * at most a few kB anyway.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/arrays.h"
#include "api/call.h"
#include "api/error.h"
#include "api/matrix.h"
#include "attention/attention.h"
#include "tests/fuzz/fuzz_vocab.h"

#define FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL)

/* The value at a JSON Pointer without escapes, or NULL. */
static json_t *get_at(json_t *v, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *seg = strtok_r(buf, "/", &save); seg && v; seg = strtok_r(NULL, "/", &save))
        v = json_is_array(v) ? json_array_get(v, strtoul(seg, NULL, 10)) : json_object_get(v, seg);
    return v;
}

/* Every tensor string lifted is, to the byte, the value jansson read. */
static void strings_as_jansson_reads_them(const api_arrays *a, json_t *orig) {
    static const char *const fields[] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v"};
    char path[128];
    for (int k = -3; k < 8 * 6; k++) {
        if (k < 0)
            snprintf(path, sizeof path, "%s/data",
                     k == -3   ? "/embeddings"
                     : k == -2 ? "/weights/w_o"
                               : "/weights/b_o");
        else
            snprintf(path, sizeof path, "/weights/heads/%d/%s/data", k / 6, fields[k % 6]);
        size_t len;
        const char *got = api_arrays_find_string(a, path, &len);
        if (!got) continue;
        json_t *v = get_at(orig, path);
        if (!json_is_string(v) || json_string_length(v) != len ||
            memcmp(json_string_value(v), got, len) != 0)
            abort();
    }
}

/* The arrays POST /v1/attention lifts from the text. */
static int attention_rank(const char *path) {
    return api_call_array_rank(API_CALL_ATTENTION, path);
}

/* The tokens rule of the server's scan, with a small length. */
#define TOKENS_MAX 4
static size_t tokens_rule(const void *ctx, const char *path, int *strings) {
    (void)ctx;
    *strings = !strcmp(path, "/tokens");
    return *strings ? TOKENS_MAX : 0;
}

/* The scan's verdict on `tokens` (every element a string, at most
 * TOKENS_MAX of them) is jansson's, on every body jansson accepts: the
 * same first element refused, and what it is. */
static void tokens_as_jansson_reads_them(const char *body, size_t len, json_t *orig) {
    api_arrays_rules rules = {.max_depth = API_ARRAYS_DEPTH_MAX, .max_elements = tokens_rule};
    api_arrays *a;
    const char *where;
    if (api_arrays_lift_rules(&a, body, len, attention_rank, &rules) != 0) return;
    api_arrays_limit got = api_arrays_violation(a, &where);
    if (got != API_ARRAYS_TOO_DEEP) {
        json_t *t = json_is_object(orig) ? json_object_get(orig, "tokens") : NULL;
        api_arrays_limit want = API_ARRAYS_WITHIN;
        char path[64] = "";
        for (size_t i = 0; json_is_array(t) && i < json_array_size(t); i++) {
            if (i >= TOKENS_MAX) {
                want = API_ARRAYS_TOO_LONG, snprintf(path, sizeof path, "/tokens");
                break;
            }
            json_t *v = json_array_get(t, i);
            if (!json_is_string(v)) {
                want = API_ARRAYS_NOT_STRING, snprintf(path, sizeof path, "/tokens/%zu", i);
                if (strcmp(api_arrays_violation_value(a), api_json_type_name(v))) abort();
                break;
            }
        }
        if (got != want || strcmp(where, path)) abort();
    }
    api_arrays_free(a);
}

/* Without the limits the server scans for: a body over one is refused
 * before jansson runs, so it has nothing to compare. */
static void differential(const char *body, size_t len) {
    json_error_t e1, e2;
    api_arrays *a;
    if (api_arrays_lift(&a, body, len, attention_rank) != 0) return; /* no memory */
    size_t tlen;
    const char *text = api_arrays_text(a, &tlen);
    json_t *orig = json_loadb(body, len, FLAGS, &e1);
    json_t *lift = json_loadb(text, tlen, FLAGS, &e2);
    if (!orig != !lift) abort();
    if (orig) strings_as_jansson_reads_them(a, orig);
    if (orig) tokens_as_jansson_reads_them(body, len, orig);
    if (!orig) {
        api_arrays_fix_error(a, body, len, &e2);
        if (strcmp(e1.text, e2.text) || e1.line != e2.line || e1.column != e2.column ||
            e1.position != e2.position)
            abort();
    }
    json_decref(orig);
    json_decref(lift);
    api_arrays_free(a);
}

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
                                  .max_string_bytes = 512};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    static attn_workspace *ws;
    if (!ws) {
        for (size_t i = 0; i < sizeof w_qkv / sizeof w_qkv[0]; i++)
            w_qkv[i] = (float)((int)(i % 7) - 3) / 4.0f;
        for (size_t i = 0; i < 16; i++)
            w_o[i] = (float)((int)(i % 5) - 2) / 2.0f;
        ws = attn_workspace_create();
        if (!ws) abort();
    }

    differential(body, size);

    api_call *req = NULL;
    attn_error err;
    if (api_call_decode_json(API_CALL_ATTENTION, body, size, &limits, &req, &err) != 0) return 0;
    if (api_call_model(req, NULL) &&
        api_call_bind(req,
                      &(api_model_ref){NULL, &model, ATTN_MASK_CAUSAL,
                                       fuzz_vocab_for(api_call_model(req, NULL))},
                      &limits, &err) != 0) {
        api_call_free(req);
        return 0;
    }
    if (api_call_alloc_outputs(req, NULL, &err) != 0) {
        api_call_free(req);
        return 0;
    }
    if (attn_compute(api_call_outputs(req), ws, api_call_inputs(req), NULL) == 0) {
        size_t len;
        char *text = api_call_encode(req, &len, NULL, &err);
        free(text);
    }
    api_call_free(req);
    return 0;
}
