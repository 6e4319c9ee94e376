/*
 * test_api_models.c — the JSON of the models endpoints (api/models.c).
 *
 * The weights a model shows must be the ones a client can send back: the
 * test decodes an inline request, shows its packed weights as a model, puts
 * the shown "weights" into a new request and decodes that, and requires the
 * packed buffers to be bitwise equal.
 */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/call.h"
#include "api/models.h"

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 8,
                                  .max_d_model = 64,
                                  .max_flops = 1e9,
                                  .max_response_bytes = 1 << 20,
                                  .max_workspace_bytes = 1 << 24};

/* Two heads of width 2 over d_model 4, biases and w_o, awkward numbers. */
static const char *const inline_body =
    "{\"embeddings\":[[0.1,-0.2,0.3,0.1]],\"weights\":{\"heads\":["
    "{\"w_q\":[[1,2],[3,4],[5,6],[7,8]],\"w_k\":[[0.1,0.2],[0.3,0.4],[0.5,0.6],[0.7,0.8]],"
    "\"w_v\":[[-1,-2],[-3,-4],[-5,-6],[-7,-8]],\"b_q\":[1e-7,2],\"b_k\":[3,4],\"b_v\":[5,6]},"
    "{\"w_q\":[[11,12],[13,14],[15,16],[17,18]],\"w_k\":[[21,22],[23,24],[25,26],[27,28]],"
    "\"w_v\":[[31,32],[33,34],[35,36],[37,38]],\"b_q\":[0,0],\"b_k\":[0,0],\"b_v\":[0,0.5]}],"
    "\"w_o\":[[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,3.4028235e38]],\"b_o\":[1,2,3,-0.25]}}";

static api_call *decode(const char *text) {
    api_call *req = NULL;
    attn_error err;
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &req, &err);
    ck_assert_msg(rc == 0, "decode failed: %s at %s", err.message, err.path);
    return req;
}

static int floats_equal(const float *a, const float *b, size_t count) {
    if (!a || !b) return a == b;
    return memcmp(a, b, count * sizeof(float)) == 0;
}

START_TEST(test_weights_round_trip) {
    api_call *req = decode(inline_body);
    const attn_weights *w = api_call_inputs(req)->weights;
    api_model_info info = {"round-trip", "two heads", ATTN_MASK_CAUSAL, w, NULL, NULL, NULL, 0};
    attn_error err;
    size_t len;
    char *text = api_model_encode(&info, 1, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(strlen(text), len);

    json_error_t jerr;
    json_t *model = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(model != NULL, "not JSON: %s", jerr.text);
    ck_assert_str_eq(json_string_value(json_object_get(model, "name")), "round-trip");
    ck_assert_str_eq(json_string_value(json_object_get(model, "mask")), "causal");
    ck_assert_int_eq(json_integer_value(json_object_get(model, "d_model")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(model, "n_heads")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(model, "d_head")), 2);

    json_t *body = json_pack("{s:[[f,f,f,f]], s:O}", "embeddings", 0.1, -0.2, 0.3, 0.1, "weights",
                             json_object_get(model, "weights"));
    char *again = json_dumps(body, JSON_COMPACT);
    api_call *back = decode(again);
    const attn_weights *w2 = api_call_inputs(back)->weights;
    ck_assert_uint_eq(w2->n_heads, 2);
    ck_assert(floats_equal(w->w_qkv, w2->w_qkv, 4 * 12));
    ck_assert(floats_equal(w->b_qkv, w2->b_qkv, 12));
    ck_assert(floats_equal(w->w_o, w2->w_o, 16));
    ck_assert(floats_equal(w->b_o, w2->b_o, 4));

    free(again);
    json_decref(body);
    json_decref(model);
    free(text);
    api_call_free(back);
    api_call_free(req);
}
END_TEST

/* Computes a bound request; its answer's text. */
static char *answer(api_call *req) {
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    size_t len;
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(attn_compute(api_call_outputs(req), ws, api_call_inputs(req), &err), 0);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, &len, NULL, &err);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* Two ropes alike: every field, longrope's lists by value. */
static int rope_same(const attn_rope *a, const attn_rope *b) {
    attn_rope x = *a, y = *b;
    size_t half = a->short_factor ? a->dims / 2 : 0;
    if ((a->short_factor == NULL) != (b->short_factor == NULL)) return 0;
    if (half && (memcmp(a->short_factor, b->short_factor, half * sizeof(float)) ||
                 memcmp(a->long_factor, b->long_factor, half * sizeof(float))))
        return 0;
    x.short_factor = x.long_factor = y.short_factor = y.long_factor = NULL;
    return memcmp(&x, &y, sizeof x) == 0;
}

/* A model's inline form with everything today's attention adds: shown,
 * sent back inline, bound, and answering byte for byte as the model. */
static void variants_round_trip(const char *body_text, const char *request_rest,
                                size_t expect_fields) {
    api_call *req = decode(body_text);
    const attn_weights *w = api_call_inputs(req)->weights;
    api_model_info info = {"v", "", ATTN_MASK_CAUSAL, w, NULL, NULL, NULL, 0};
    attn_error err;
    size_t len;
    char *text = api_model_encode(&info, 1, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(text);
    json_t *model = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_ptr_nonnull(model);
    ck_assert_uint_eq(json_object_size(model), expect_fields);

    /* the same request, by name against the model and inline with the shown weights */
    char by_name[4096], inline_again[65536];
    char *weights = json_dumps(json_object_get(model, "weights"), JSON_COMPACT);
    snprintf(by_name, sizeof by_name, "{\"model\":\"v\",%s}", request_rest);
    snprintf(inline_again, sizeof inline_again, "{\"weights\":%s,%s}", weights, request_rest);
    api_call *named = decode(by_name), *back = decode(inline_again);
    ck_assert_int_eq(api_call_bind(named,
                                   &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     0);
    const attn_weights *w2 = api_call_inputs(back)->weights;
    ck_assert_uint_eq(w2->n_kv_heads ? w2->n_kv_heads : w2->n_heads,
                      w->n_kv_heads ? w->n_kv_heads : w->n_heads);
    ck_assert(rope_same(&w2->rope, &w->rope));
    ck_assert(w2->window == w->window && w2->softcap == w->softcap && w2->scale == w->scale);
    ck_assert((w2->alibi == NULL) == (w->alibi == NULL));
    if (w->alibi) ck_assert(floats_equal(w->alibi, w2->alibi, w->n_heads));
    ck_assert(w2->chunk == w->chunk && floats_equal(w->sinks, w2->sinks, w->n_heads));
    ck_assert((w2->w_kv == NULL) == (w->w_kv == NULL));
    char *a = answer(named), *b = answer(back);
    /* "model" differs: compare from n_tokens on */
    ck_assert_str_eq(strstr(a, "\"n_tokens\""), strstr(b, "\"n_tokens\""));
    free(a), free(b);
    free(weights);
    api_call_free(named);
    api_call_free(back);
    json_decref(model);
    free(text);
    api_call_free(req);
}

START_TEST(test_variants_round_trip) {
    /* 4 heads of width 1, 2 K/V heads with biases, w_o; RoPE with llama3
     * scaling, ALiBi slopes, a window, soft-capping and a scale */
    const char *gqa =
        "{\"embeddings\":[[0.1,-0.2,0.3,0.1,0,0,0,0]],\"weights\":{"
        "\"heads\":[{\"w_q\":[[1,2],[3,4],[5,6],[7,8],[1,0],[0,1],[1,1],[0,0]],\"b_q\":[0.5,0]},"
        "{\"w_q\":[[0.1,0.2],[0.3,0.4],[0.5,0.6],[0.7,0.8],[1,0],[0,1],[1,1],[0,0]]},"
        "{\"w_q\":[[-1,2],[-3,4],[5,-6],[7,8],[1,0],[0,1],[1,1],[0,2]]},"
        "{\"w_q\":[[5,6],[7,8],[9,10],[11,12],[1,0],[0,1],[1,1],[0,3]]}],"
        "\"kv_heads\":[{\"w_k\":[[1,0],[0,1],[0,0],[1,1],[1,0],[0,1],[1,1],[0,0]],"
        "\"w_v\":[[0.5,1],[0.25,1],[1,1],[2,1],[1,0],[0,1],[1,1],[0,0]],\"b_k\":[1e-7,0]},"
        "{\"w_k\":[[0.3,1],[0.7,1],[-1,1],[2,1],[1,0],[0,1],[1,1],[0,0]],"
        "\"w_v\":[[3,1],[1,1],[4,1],[1,1],[1,0],[0,1],[1,1],[0,0]],\"b_v\":[0.125,3]}],"
        "\"rope\":{\"theta\":500000,\"style\":\"interleaved\",\"scaling\":{\"type\":"
        "\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4,"
        "\"original_max_position_embeddings\":8192}},"
        "\"alibi\":[0.5,0.1,0.3,0.7],\"window\":3,\"softcap\":50,\"scale\":0.3}}";
    /* summary 8 fields + rope, alibi, window, softcap, scale + weights */
    variants_round_trip(gqa,
                        "\"embeddings\":[[0.1,-0.2,0.3,0.1,1,0,0,0],[1,2,3,4,5,6,7,8],"
                        "[0,0,1,0,0,0,-1,0]],\"positions\":[7,100,9000],\"return\":[\"q\",\"k\","
                        "\"v\",\"q_raw\",\"k_raw\",\"scores\",\"patterns\",\"embeddings\"]",
                        14);
    /* yarn (every field) and longrope (its lists), at positions past L */
    static const char *const long_ropes[] = {
        "{\"type\":\"yarn\",\"factor\":32,\"original_max_position_embeddings\":64,"
        "\"beta_fast\":16,\"beta_slow\":2,\"mscale\":0.5,\"mscale_all_dim\":1,"
        "\"attention_factor\":1.25,\"truncate\":false}",
        "{\"type\":\"yarn\",\"factor\":4.5,\"original_max_position_embeddings\":4096}",
        "{\"type\":\"longrope\",\"short_factor\":[1.25],\"long_factor\":[40.5],"
        "\"original_max_position_embeddings\":64,\"factor\":16}",
        "{\"type\":\"longrope\",\"short_factor\":[1],\"long_factor\":[3],"
        "\"original_max_position_embeddings\":10000,\"attention_factor\":0.5}"};
    for (size_t i = 0; i < sizeof long_ropes / sizeof long_ropes[0]; i++) {
        char body[8192];
        const char *at = strstr(gqa, "\"scaling\":"), *end = strstr(gqa, "}},\"alibi\"");
        snprintf(body, sizeof body, "%.*s\"scaling\":%s%s", (int)(at - gqa), gqa, long_ropes[i],
                 end + 1);
        variants_round_trip(body,
                            "\"embeddings\":[[0.1,-0.2,0.3,0.1,1,0,0,0],[1,2,3,4,5,6,7,8]],"
                            "\"positions\":[7,500000],\"return\":[\"q\",\"k\",\"scores\","
                            "\"patterns\",\"embeddings\"]",
                            14);
    }
    /* cross-attention: Q of d_model 4, K/V of a context of width 3; d_context shown */
    const char *cross = "{\"embeddings\":[[0.1,-0.2,0.3,0.1]],\"context\":[[1,2,3]],\"weights\":{"
                        "\"heads\":[{\"w_q\":[[1,2],[3,4],[5,6],[7,8]],\"w_k\":[[1,0],[0,1],[1,1]],"
                        "\"w_v\":[[0.5,1],[2,0],[1,-1]],\"b_k\":[1,2]},"
                        "{\"w_q\":[[1,0],[0,1],[0,0],[1,1]],\"w_k\":[[0.25,0],[0,4],[1,3]],"
                        "\"w_v\":[[1,1],[2,2],[3,-3]]}],\"scale\":0.125}}";
    variants_round_trip(cross,
                        "\"embeddings\":[[0.1,-0.2,0.3,0.1],[1,2,3,4]],\"context\":[[1,2,3],"
                        "[0,1,0],[-1,0.5,2]],\"return\":[\"k\",\"v\",\"patterns\",\"delta\"]",
                        11);
}
END_TEST

/* Sinks and a chunk (GPT-OSS's and Llama 4's): the summary shows the
 * chunk, not the sinks; ?weights=true gives both, and they read back. */
START_TEST(test_sinks_chunk) {
    const char *body =
        "{\"embeddings\":[[0.1,-0.2,0.3,0.1]],\"weights\":{\"heads\":["
        "{\"w_q\":[[1,2],[3,4],[5,6],[7,8]],\"w_k\":[[0.1,0.2],[0.3,0.4],[0.5,0.6],[0.7,0.8]],"
        "\"w_v\":[[-1,-2],[-3,-4],[-5,-6],[-7,-8]]},"
        "{\"w_q\":[[1,0],[0,1],[1,1],[0,0]],\"w_k\":[[0,1],[1,0],[1,1],[2,0]],"
        "\"w_v\":[[1,1],[2,2],[3,-3],[0,1]]}],"
        "\"sinks\":[0.75,-1e-7],\"chunk\":2,\"window\":3}}";
    api_call *req = decode(body);
    const attn_weights *w = api_call_inputs(req)->weights;
    ck_assert_uint_eq(w->chunk, 2);
    ck_assert(w->sinks && w->sinks[0] == 0.75f && w->sinks[1] == -1e-7f);
    api_model_info info = {"x", "", ATTN_MASK_CAUSAL, w, NULL, NULL, NULL, 0};
    size_t len;
    char *text = api_models_encode_list(&info, 1, &len);
    ck_assert_str_eq(text, "{\"models\":[{\"name\":\"x\",\"d_model\":4,\"n_heads\":2,"
                           "\"n_kv_heads\":2,\"d_head\":2,\"n_layers\":1,\"mask\":\"causal\","
                           "\"window\":3,\"chunk\":2,\"description\":\"\"}]}");
    free(text);
    api_call_free(req);
    /* summary 8 fields + window, chunk + weights; positions across chunks */
    variants_round_trip(
        body,
        "\"embeddings\":[[0.1,-0.2,0.3,0.1],[1,2,3,4],[0,0,1,0],[2,0,0,1]],"
        "\"positions\":[0,1,2,3],\"return\":[\"scores\",\"patterns\",\"embeddings\"]",
        11);
}
END_TEST

START_TEST(test_variants_summary) {
    const char *body = "{\"embeddings\":[[0.1,-0.2,0.3,0.1]],\"context\":[[1,2,3]],\"weights\":{"
                       "\"heads\":[{\"w_q\":[[1],[3],[5],[7]]},{\"w_q\":[[1],[0],[0],[1]]},"
                       "{\"w_q\":[[1],[3],[5],[7]]},{\"w_q\":[[1],[0],[0],[1]]}],"
                       "\"kv_heads\":[{\"w_k\":[[1],[0],[1]],\"w_v\":[[0.5],[2],[1]]}],"
                       "\"softcap\":30,\"scale\":0.0625}}";
    api_call *req = decode(body);
    api_model_info info = {"x",  "",   ATTN_MASK_NONE, api_call_inputs(req)->weights,
                           NULL, NULL, NULL,           0};
    size_t len;
    char *text = api_models_encode_list(&info, 1, &len);
    ck_assert_str_eq(text,
                     "{\"models\":[{\"name\":\"x\",\"d_model\":4,\"d_context\":3,"
                     "\"n_heads\":4,\"n_kv_heads\":1,\"d_head\":1,\"n_layers\":1,\"mask\":\"none\","
                     "\"softcap\":30,\"scale\":0.0625,\"description\":\"\"}]}");
    free(text);
    api_call_free(req);

    body = "{\"embeddings\":[[0.1,-0.2]],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],"
           "\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}],\"rope\":{\"scaling\":{\"type\":"
           "\"linear\",\"factor\":2.5}},\"alibi\":true,\"window\":4096}}";
    req = decode(body);
    info.weights = api_call_inputs(req)->weights;
    text = api_models_encode_list(&info, 1, &len);
    ck_assert_str_eq(text,
                     "{\"models\":[{\"name\":\"x\",\"d_model\":2,\"n_heads\":1,"
                     "\"n_kv_heads\":1,\"d_head\":2,\"n_layers\":1,\"mask\":\"none\",\"rope\":{"
                     "\"theta\":10000,\"dims\":2,\"style\":\"half\",\"scaling\":{"
                     "\"type\":\"linear\",\"factor\":2.5}},\"alibi\":[0.00390625],"
                     "\"window\":4096,\"description\":\"\"}]}");
    free(text);
    api_call_free(req);
}
END_TEST

/* Two layers over d_model 4, each two heads of 2: the first with RoPE,
 * the second with biases, w_o, a window and soft-capping. */
static const char *const stack_body =
    "{\"embeddings\":[[0.1,-0.2,0.3,0.1]],\"weights\":{\"layers\":["
    "{\"heads\":[{\"w_q\":[[1,2],[3,4],[5,6],[7,8]],\"w_k\":[[0.1,0.2],[0.3,0.4],[0.5,0.6],"
    "[0.7,0.8]],\"w_v\":[[-1,-2],[-3,-4],[-5,-6],[-7,-8]]},"
    "{\"w_q\":[[1,0],[0,1],[1,1],[0,0]],\"w_k\":[[1,0],[0,1],[0,0],[1,1]],"
    "\"w_v\":[[0.5,0],[0,0.5],[1,0],[0,1]]}],\"rope\":{\"theta\":100}},"
    "{\"heads\":[{\"w_q\":[[1,0],[0,1],[0,0],[0,0]],\"w_k\":[[0,1],[1,0],[0,0],[0,0]],"
    "\"w_v\":[[2,0],[0,2],[0,0],[0,0]],\"b_q\":[0.25,1e-7]},"
    "{\"w_q\":[[0,0],[0,0],[1,0],[0,1]],\"w_k\":[[0,0],[0,0],[0,1],[1,0]],"
    "\"w_v\":[[0,0],[0,0],[2,0],[0,2]],\"b_q\":[0,0]}],"
    "\"w_o\":[[0.5,0,0,0],[0,0.5,0,0],[0,0,0.5,0],[0,0,0,0.5]],\"window\":2,\"softcap\":20}]}}";

/* Computes a bound call (a stack or not); its answer's text. */
static char *answer_any(api_call *req) {
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    size_t len;
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_msg(api_call_compute(req, ws, NULL, &err, NULL) == 0, "%s", err.message);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, &len, NULL, &err);
    ck_assert_ptr_nonnull(text);
    return text;
}

START_TEST(test_stack_round_trip) {
    api_call *req = decode(stack_body);
    const attn_stack *st = api_call_stack(req);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->n_layers, 2);
    const attn_weights *const *layers = st->layers;
    api_model_info info = {"s", "", ATTN_MASK_CAUSAL, layers[0], NULL, NULL, layers, 2};
    attn_error err;
    size_t len;
    char *text = api_model_encode(&info, API_MODEL_WEIGHTS, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(text);
    json_t *model = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_ptr_nonnull(model);
    ck_assert_int_eq(json_integer_value(json_object_get(model, "n_layers")), 2);
    /* the summary's variants are each layer's */
    json_t *sl = json_object_get(model, "layers");
    ck_assert_uint_eq(json_array_size(sl), 2);
    ck_assert_ptr_null(json_object_get(model, "rope"));
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(sl, 0), "layer")), 0);
    ck_assert_ptr_nonnull(json_object_get(json_array_get(sl, 0), "rope"));
    ck_assert_ptr_null(json_object_get(json_array_get(sl, 0), "window"));
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(sl, 1), "window")), 2);
    json_t *wl = json_object_get(json_object_get(model, "weights"), "layers");
    ck_assert_uint_eq(json_array_size(wl), 2);
    ck_assert_uint_eq(json_object_size(json_object_get(model, "weights")), 1);

    /* sent back inline: the same packed weights, the same answer as by name */
    char *weights = json_dumps(json_object_get(model, "weights"), JSON_COMPACT);
    const char *rest = "\"embeddings\":[[0.1,-0.2,0.3,0.1],[1,2,3,4],[0,0,1,-1]],"
                       "\"return\":[\"patterns\",\"delta\",\"embeddings\"]";
    char by_name[512], inline_again[65536];
    snprintf(by_name, sizeof by_name, "{\"model\":\"s\",%s}", rest);
    snprintf(inline_again, sizeof inline_again, "{\"weights\":%s,%s}", weights, rest);
    api_call *named = decode(by_name), *back = decode(inline_again);
    ck_assert_int_eq(
        api_call_bind(named, &(api_model_ref){NULL, layers[0], ATTN_MASK_CAUSAL, NULL, layers, 2},
                      &limits, &err),
        0);
    const attn_stack *st2 = api_call_stack(back);
    ck_assert_ptr_nonnull(st2);
    ck_assert_uint_eq(st2->n_layers, 2);
    for (size_t l = 0; l < 2; l++) {
        const attn_weights *a = layers[l], *b = st2->layers[l];
        size_t cols = (a->n_heads + 2 * a->n_kv_heads) * a->d_head;
        ck_assert_uint_eq(a->n_heads, b->n_heads);
        ck_assert(floats_equal(a->w_qkv, b->w_qkv, a->d_model * cols));
        ck_assert(floats_equal(a->b_qkv, b->b_qkv, cols));
        ck_assert(floats_equal(a->w_o, b->w_o, a->d_model * a->d_model));
        ck_assert(rope_same(&a->rope, &b->rope));
        ck_assert(a->window == b->window && a->softcap == b->softcap);
    }
    char *x = answer_any(named), *y = answer_any(back);
    ck_assert_ptr_nonnull(strstr(x, "\"n_layers\":2"));
    ck_assert_str_eq(strstr(x, "\"n_tokens\""), strstr(y, "\"n_tokens\""));
    free(x), free(y);

    /* the bound counts every layer: a limit the first layer alone fits is
     * too small for both */
    api_model_info one = {"s", "", ATTN_MASK_CAUSAL, layers[0], NULL, NULL, NULL, 0};
    size_t lo = 0, hi = 1 << 20;
    while (lo < hi) { /* the least limit the first layer alone passes */
        size_t mid = lo + (hi - lo) / 2;
        char *t = api_model_encode(&one, API_MODEL_WEIGHTS, mid, &len, &err);
        if (t)
            hi = mid;
        else
            lo = mid + 1;
        free(t);
    }
    ck_assert_ptr_null(api_model_encode(&info, API_MODEL_WEIGHTS, lo, &len, &err));
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "limit_exceeded");

    free(weights);
    api_call_free(named);
    api_call_free(back);
    json_decref(model);
    free(text);
    api_call_free(req);
}
END_TEST

START_TEST(test_list_and_summary) {
    api_call *req = decode(inline_body);
    const attn_weights *w = api_call_inputs(req)->weights;
    api_model_info infos[2] = {{"a", "first \"quoted\"", ATTN_MASK_NONE, w, NULL, NULL, NULL, 0},
                               {"b.2", NULL, ATTN_MASK_CAUSAL, w, NULL, NULL, NULL, 0}};
    size_t len;
    char *text = api_models_encode_list(infos, 2, &len);
    ck_assert_ptr_nonnull(text);
    json_t *list = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(list);
    json_t *models = json_object_get(list, "models");
    ck_assert_uint_eq(json_array_size(models), 2);
    json_t *a = json_array_get(models, 0);
    ck_assert_str_eq(json_string_value(json_object_get(a, "description")), "first \"quoted\"");
    ck_assert_str_eq(json_string_value(json_object_get(a, "mask")), "none");
    ck_assert_uint_eq(json_object_size(a), 8); /* exactly the contract's fields */
    ck_assert_int_eq(json_integer_value(json_object_get(a, "n_layers")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "n_kv_heads")), 2);
    ck_assert_ptr_null(json_object_get(a, "weights"));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(models, 1), "description")),
                     "");
    json_decref(list);
    free(text);

    text = api_models_encode_list(NULL, 0, &len);
    ck_assert_str_eq(text, "{\"models\":[]}");
    free(text);

    /* without weights: the summary alone */
    attn_error err;
    text = api_model_encode(&infos[1], 0, 1 << 20, &len, &err);
    json_t *one = json_loads(text, 0, NULL);
    ck_assert_uint_eq(json_object_size(one), 8);
    json_decref(one);
    free(text);
    api_call_free(req);
}
END_TEST

START_TEST(test_weights_limit_and_flag) {
    api_call *req = decode(inline_body);
    api_model_info info = {"m",  "", ATTN_MASK_CAUSAL, api_call_inputs(req)->weights, NULL, NULL,
                           NULL, 0};
    attn_error err;
    size_t len;
    ck_assert_ptr_null(api_model_encode(&info, 1, 100, &len, &err));
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "limit_exceeded");
    char *text = api_model_encode(&info, 0, 100, &len, &err); /* the summary fits */
    ck_assert_ptr_nonnull(text);
    free(text);
    api_call_free(req);

    int flag = -1;
    ck_assert_int_eq(api_model_flag("weights", NULL, &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_flag("weights", "false", &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_flag("weights", "0", &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_flag("weights", "true", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(api_model_flag("weights", "1", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(api_model_flag("weights", "yes", &flag, &err), -1);
    ck_assert_str_eq(err.code, "invalid_value");
    ck_assert_int_eq(api_model_flag("weights", "", &flag, &err), -1);
    ck_assert_str_eq(err.code, "invalid_value");
}
END_TEST

/* A vocabulary of two tokens over d_model 2, with one position and the
 * dimensions' names; the lookup is a linear search written here. */
static const char *const voc_tokens[] = {"a", "q\"\n"};
static const float voc_tok[] = {0.5f, -1.0f, 0.1f, 3.0f}, voc_pos[] = {1.0f, 0.2f};
static const char *const voc_dims[] = {"x", "y"};

static long voc_lookup(const void *ctx, const char *s, size_t len) {
    (void)ctx;
    for (long t = 0; t < 2; t++)
        if (strlen(voc_tokens[t]) == len && memcmp(voc_tokens[t], s, len) == 0) return t;
    return -1;
}

static const api_vocabulary voc = {2, voc_tokens, voc_tok, 1, voc_pos, voc_lookup, NULL};

static const char *const two_d_body =
    "{\"embeddings\":[[1,2]],\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],"
    "\"w_k\":[[1,0],[0,1]],\"w_v\":[[1,0],[0,1]]}]}}";

START_TEST(test_vocabulary_encode) {
    api_call *req = decode(two_d_body);
    api_model_info info = {
        "v", "", ATTN_MASK_CAUSAL, api_call_inputs(req)->weights, &voc, voc_dims, NULL, 0};
    attn_error err;
    size_t len;
    static const char summary[] =
        "{\"name\":\"v\",\"d_model\":2,\"n_heads\":1,\"n_kv_heads\":1,"
        "\"d_head\":2,\"n_layers\":1,\"mask\":\"causal\",\"vocabulary_size\":2,"
        "\"n_positions\":1,\"dimensions\":[\"x\",\"y\"],"
        "\"description\":\"\"";
    char *text = api_models_encode_list(&info, 1, &len);
    char want[1024];
    snprintf(want, sizeof want, "{\"models\":[%s}]}", summary);
    ck_assert_str_eq(text, want);
    free(text);
    text = api_model_encode(&info, 0, 1 << 20, &len, &err);
    snprintf(want, sizeof want, "%s}", summary);
    ck_assert_str_eq(text, want);
    free(text);
    text = api_model_encode(&info, API_MODEL_VOCABULARY, 1 << 20, &len, &err);
    snprintf(want, sizeof want,
             "%s,\"vocabulary\":{\"tokens\":[\"a\",\"q\\\"\\n\"],\"embeddings\":[[0.5,-1],"
             "[0.1,3]],\"position_embeddings\":[[1,0.2]]}}",
             summary);
    ck_assert_str_eq(text, want);
    ck_assert_uint_eq(len, strlen(want));
    free(text);
    /* weights and vocabulary together, weights first */
    text = api_model_encode(&info, API_MODEL_WEIGHTS | API_MODEL_VOCABULARY, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(strstr(text, ",\"weights\":{\"heads\":"));
    ck_assert_ptr_nonnull(strstr(text, "]}]},\"vocabulary\":{\"tokens\""));
    free(text);
    /* without a position table, and without a vocabulary: fields absent */
    api_vocabulary no_pos = voc;
    no_pos.n_positions = 0;
    no_pos.position_embeddings = NULL;
    info.vocabulary = &no_pos;
    info.dimensions = NULL;
    text = api_model_encode(&info, API_MODEL_VOCABULARY, 1 << 20, &len, &err);
    ck_assert_str_eq(text, "{\"name\":\"v\",\"d_model\":2,\"n_heads\":1,\"n_kv_heads\":1,"
                           "\"d_head\":2,\"n_layers\":1,\"mask\":\"causal\",\"vocabulary_size\":2,"
                           "\"description\":\"\",\"vocabulary\":{\"tokens\":[\"a\",\"q\\\"\\n\"],"
                           "\"embeddings\":[[0.5,-1],[0.1,3]]}}");
    free(text);
    info.vocabulary = NULL;
    text = api_model_encode(&info, API_MODEL_VOCABULARY, 1 << 20, &len, &err);
    ck_assert_str_eq(text, "{\"name\":\"v\",\"d_model\":2,\"n_heads\":1,\"n_kv_heads\":1,"
                           "\"d_head\":2,\"n_layers\":1,\"mask\":\"causal\",\"description\":\"\"}");
    free(text);
    /* the response limit holds for the vocabulary as for the weights */
    info.vocabulary = &voc;
    ck_assert_ptr_null(api_model_encode(&info, API_MODEL_VOCABULARY, 300, &len, &err));
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "limit_exceeded");
    ck_assert_ptr_nonnull(strstr(err.message, "vocabulary"));
    api_call_free(req);

    int flag = -1;
    ck_assert_int_eq(api_model_flag("vocabulary", "true", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(api_model_flag("vocabulary", "maybe", &flag, &err), -1);
    ck_assert_str_eq(err.code, "invalid_value");
    ck_assert_ptr_nonnull(strstr(err.message, "vocabulary must be true or false"));
}
END_TEST

/* Tokens bound to a vocabulary: E = token row + position row in float32;
 * the refusals name the token, escaped and shortened. */
START_TEST(test_vocabulary_bind) {
    api_call *w_req = decode(two_d_body);
    const attn_weights *w = api_call_inputs(w_req)->weights;
    const char *body = "{\"model\":\"v\",\"tokens\":[\"q\\\"\\n\",\"a\"],\"positions\":[0,0]}";
    api_call *req = decode(body);
    attn_error err;
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &limits, &err),
                     0);
    const float *e = api_call_inputs(req)->embeddings;
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(api_call_inputs(req)->n_tokens, 2);
    for (int j = 0; j < 2; j++) {
        ck_assert_float_eq(e[j], (float)((double)voc_tok[2 + j] + (double)voc_pos[j]));
        ck_assert_float_eq(e[2 + j], (float)((double)voc_tok[j] + (double)voc_pos[j]));
    }
    api_call_free(req);

    req = decode("{\"model\":\"v\",\"tokens\":[\"a\",\"\\u0000\\\"\\u00e9\"]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &limits, &err),
                     -1);
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "unknown_token");
    ck_assert_str_eq(err.path, "/tokens/1");
    ck_assert_str_eq(err.message,
                     "tokens[1] = \"\\u0000\\\"\xc3\xa9\" is not in the vocabulary of model v");
    api_call_free(req);

    /* x and 40 é: cut to x and 15 é (31 bytes), on a character's boundary */
    char longer[256] = "{\"model\":\"v\",\"tokens\":[\"x";
    for (int i = 0; i < 40; i++)
        strcat(longer, "\xc3\xa9");
    strcat(longer, "\"]}");
    req = decode(longer);
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &limits, &err),
                     -1);
    char want[256] = "tokens[0] = \"x";
    for (int i = 0; i < 15; i++)
        strcat(want, "\xc3\xa9");
    strcat(want, "\"… is not in the vocabulary of model v");
    ck_assert_str_eq(err.message, want);
    api_call_free(req);

    /* a position table of 1: the second token is past it */
    req = decode("{\"model\":\"v\",\"tokens\":[\"a\",\"a\"]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &limits, &err),
                     -1);
    ck_assert_str_eq(err.code, "position_out_of_range");
    ck_assert_str_eq(err.path, "/tokens/1");
    api_call_free(req);
    /* no position table: E is the token rows as they are, at any position */
    api_vocabulary no_pos = voc;
    no_pos.n_positions = 0;
    no_pos.position_embeddings = NULL;
    req = decode("{\"model\":\"v\",\"tokens\":[\"a\",\"q\\\"\\n\"],\"positions\":[7,"
                 "2147483647]}");
    ck_assert_int_eq(api_call_bind(req,
                                   &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &no_pos, NULL, 0},
                                   &limits, &err),
                     0);
    e = api_call_inputs(req)->embeddings;
    for (int j = 0; j < 4; j++)
        ck_assert_float_eq(e[j], voc_tok[j]);
    api_call_free(req);
    /* no vocabulary: the same as NULL */
    req = decode("{\"model\":\"v\",\"tokens\":[\"a\"]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &limits, &err),
                     -1);
    ck_assert_str_eq(err.code, "no_vocabulary");
    ck_assert_str_eq(err.path, "/embeddings");
    ck_assert_str_eq(err.message, "model v has no vocabulary: send embeddings");
    api_call_free(req);

    /* The rows the tokens stand for count as scratch memory: the engine's
     * need (measured on the same request with its rows sent) plus 2 × 2
     * floats. */
    req = decode("{\"model\":\"v\",\"embeddings\":[[1,2],[3,4]]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &limits, &err),
                     0);
    size_t need = attn_input_workspace_need(api_call_inputs(req));
    api_call_free(req);
    api_limits tight = limits;
    tight.max_workspace_bytes = need + 4 * sizeof(float) - 1;
    req = decode("{\"model\":\"v\",\"tokens\":[\"a\",\"a\"],\"positions\":[0,0]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &tight, &err),
                     -1);
    ck_assert_str_eq(err.code, "limit_exceeded");
    ck_assert_ptr_nonnull(strstr(err.message, "max_workspace_bytes"));
    api_call_free(req);
    tight.max_workspace_bytes++;
    req = decode("{\"model\":\"v\",\"tokens\":[\"a\",\"a\"],\"positions\":[0,0]}");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, &voc, NULL, 0},
                                   &tight, &err),
                     0);
    api_call_free(req);
    api_call_free(w_req);
}
END_TEST

int main(void) {
    Suite *s = suite_create("api_models");
    TCase *tc = tcase_create("models");
    tcase_add_test(tc, test_weights_round_trip);
    tcase_add_test(tc, test_list_and_summary);
    tcase_add_test(tc, test_variants_round_trip);
    tcase_add_test(tc, test_variants_summary);
    tcase_add_test(tc, test_sinks_chunk);
    tcase_add_test(tc, test_stack_round_trip);
    tcase_add_test(tc, test_weights_limit_and_flag);
    tcase_add_test(tc, test_vocabulary_encode);
    tcase_add_test(tc, test_vocabulary_bind);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
