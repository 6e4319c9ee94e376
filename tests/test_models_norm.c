/*
 * test_models_norm.c — a model file's norms and temperature
 * (models/README.md, "Norms and temperature"; store/model_norm.c) and how
 * the models endpoints show them (api/models_norm.c): a stack of two
 * layers whose keys and tensors load into each layer's attn_weights; the
 * summary shows their settings (types, eps, offset, scope, temperature),
 * not their arrays; ?weights=true gives them inline, and sent back the
 * inline form answers as the model does by name, to the byte. Then the
 * faults a loader names.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/call.h"
#include "api/models.h"
#include "store/model.h"
#include "store/safetensors.h"

static const api_limits limits = {.max_tokens = 64,
                                  .max_heads = 16,
                                  .max_d_model = 64,
                                  .max_flops = 1e12,
                                  .max_batch = 8,
                                  .max_response_bytes = (size_t)1 << 28,
                                  .max_workspace_bytes = (size_t)1 << 28};

static char dir[64];

static const char *tpath(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

typedef struct tspec {
    const char *name;
    size_t rank;
    size_t shape[2];
} tspec;

/* A model file: meta is key, value, …, NULL; then the tensors, their
 * values a fixed pseudo-random pattern. */
static void write_model(const char *path, const char *const *meta, const tspec *ts, size_t nt) {
    store_metadata md[48];
    size_t nm = 0;
    for (; meta[2 * nm]; nm++)
        md[nm] = (store_metadata){meta[2 * nm], meta[2 * nm + 1]};
    store_write_tensor w[24];
    float *bufs[24];
    for (size_t i = 0; i < nt; i++) {
        size_t count = ts[i].rank == 1 ? ts[i].shape[0] : ts[i].shape[0] * ts[i].shape[1];
        bufs[i] = malloc(count * sizeof(float));
        for (size_t k = 0; k < count; k++)
            bufs[i][k] = (float)((int)((k * 37 + i * 11) % 17) - 8) / 16.0f + 0.25f;
        w[i] = (store_write_tensor){
            ts[i].name, STORE_DTYPE_F32, ts[i].rank, ts[i].shape, bufs[i], NULL, NULL};
    }
    attn_error err;
    int rc = store_file_write(path, md, nm, w, nt, NULL, &err);
    for (size_t i = 0; i < nt; i++)
        free(bufs[i]);
    ck_assert_msg(rc == 0, "%s", err.message);
}

/* d_model 8, 4 heads of 2, 2 K/V heads: w_qkv [8, 16]. */
static const char *const stack_meta[] = {"n_heads",
                                         "4",
                                         "n_kv_heads",
                                         "2",
                                         "n_layers",
                                         "2",
                                         "name",
                                         "normed",
                                         "layers.0.rope_theta",
                                         "10000",
                                         "layers.0.norm_type",
                                         "rms",
                                         "layers.0.norm_offset",
                                         "1",
                                         "layers.0.post_norm_type",
                                         "rms",
                                         "layers.0.post_norm_eps",
                                         "0.001",
                                         "layers.0.qk_norm_scope",
                                         "head",
                                         "layers.1.norm_type",
                                         "layer",
                                         "layers.1.qk_norm_scope",
                                         "all",
                                         "layers.1.qk_norm_offset",
                                         "1",
                                         "layers.1.temperature_floor_scale",
                                         "2",
                                         "layers.1.temperature_attn_scale",
                                         "0.5",
                                         NULL};
static const tspec stack_tensors[] = {
    {"layers.0.w_qkv", 2, {8, 16}},     {"layers.0.w_o", 2, {8, 8}},
    {"layers.0.norm.weight", 1, {8}},   {"layers.0.post_norm.weight", 1, {8}},
    {"layers.0.q_norm.weight", 1, {2}}, {"layers.0.k_norm.weight", 1, {2}},
    {"layers.1.w_qkv", 2, {8, 16}},     {"layers.1.b_qkv", 1, {16}},
    {"layers.1.norm.weight", 1, {8}},   {"layers.1.norm.bias", 1, {8}},
    {"layers.1.q_norm.weight", 1, {8}}, {"layers.1.k_norm.weight", 1, {4}},
};

static store_model *load_stack(void) {
    write_model(tpath("normed.safetensors"), stack_meta, stack_tensors,
                sizeof stack_tensors / sizeof stack_tensors[0]);
    store_model *m = NULL;
    attn_error err;
    ck_assert_msg(store_model_load(&m, tpath("normed.safetensors"), &err) == 0, "%s", err.message);
    return m;
}

START_TEST(test_load) {
    store_model *m = load_stack();
    ck_assert_uint_eq(m->n_layers, 2);
    const attn_weights *a = m->layers[0], *b = m->layers[1];
    ck_assert_int_eq(a->norm.type, ATTN_NORM_RMS);
    ck_assert(a->norm.offset == 1.0 && a->norm.eps == 1e-6 && a->norm.weight && !a->norm.bias);
    ck_assert_int_eq(a->post_norm.type, ATTN_NORM_RMS);
    ck_assert(a->post_norm.eps == 0.001 && a->post_norm.weight);
    ck_assert_int_eq(a->qk_norm.q.type, ATTN_NORM_RMS);
    ck_assert(!a->qk_norm.all && a->qk_norm.q.weight && a->qk_norm.k.weight);
    ck_assert(a->temperature.floor_scale == 0.0);
    ck_assert_int_eq(b->norm.type, ATTN_NORM_LAYER);
    ck_assert(b->norm.eps == 1e-5 && b->norm.weight && b->norm.bias);
    ck_assert_int_eq(b->post_norm.type, ATTN_NORM_NONE);
    ck_assert(b->qk_norm.all && b->qk_norm.q.offset == 1.0 && b->qk_norm.k.weight);
    ck_assert(b->temperature.floor_scale == 2.0 && b->temperature.attn_scale == 0.5);
    store_model_destroy(m);
}
END_TEST

static api_call *decode(const char *text) {
    api_call *c = NULL;
    attn_error err;
    ck_assert_msg(api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &limits, &c, &err) ==
                      0,
                  "decode: %s at %s", err.message, err.path);
    return c;
}

static char *answer(api_call *c) {
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    size_t len;
    ck_assert_int_eq(api_call_alloc_outputs(c, NULL, &err), 0);
    ck_assert_msg(api_call_compute(c, ws, NULL, &err, NULL) == 0, "%s", err.message);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(c, &len, NULL, &err);
    ck_assert_ptr_nonnull(text);
    return text;
}

START_TEST(test_shown_and_round_trip) {
    store_model *m = load_stack();
    api_model_info info = {"normed", "", ATTN_MASK_CAUSAL, m->layers[0], NULL, NULL, m->layers, 2};
    attn_error err;
    size_t len;
    char *text = api_model_encode(&info, 0, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(text);
    json_t *model = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_ptr_nonnull(model);
    free(text);
    json_t *l0 = json_array_get(json_object_get(model, "layers"), 0);
    json_t *l1 = json_array_get(json_object_get(model, "layers"), 1);
    json_t *want0 = json_loads("{\"type\":\"rms\",\"eps\":1e-06,\"offset\":1}", 0, NULL);
    ck_assert(json_equal(json_object_get(l0, "norm"), want0));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(l0, "qk_norm"), "scope")),
                     "head");
    ck_assert_ptr_null(json_object_get(json_object_get(l0, "qk_norm"), "q_weight"));
    ck_assert_ptr_null(json_object_get(json_object_get(l1, "norm"), "weight"));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(l1, "norm"), "type")),
                     "layer");
    ck_assert_ptr_null(json_object_get(l1, "post_norm"));
    json_t *temp = json_loads("{\"floor_scale\":2,\"attn_scale\":0.5}", 0, NULL);
    ck_assert(json_equal(json_object_get(l1, "temperature"), temp));
    json_decref(want0), json_decref(temp), json_decref(model);

    text = api_model_encode(&info, API_MODEL_WEIGHTS, 1 << 20, &len, &err);
    ck_assert_ptr_nonnull(text);
    model = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    json_t *wl = json_object_get(json_object_get(model, "weights"), "layers");
    ck_assert_uint_eq(json_array_size(json_object_get(
                          json_object_get(json_array_get(wl, 1), "qk_norm"), "q_weight")),
                      8);
    ck_assert_uint_eq(
        json_array_size(json_object_get(json_object_get(json_array_get(wl, 1), "norm"), "bias")),
        8);
    char *weights = json_dumps(json_object_get(model, "weights"), JSON_COMPACT);
    const char *rest = "\"embeddings\":[[0.1,-0.2,0.3,0.1,1,0,2,-1],[1,2,3,4,0,0,1,1],"
                       "[0,0,1,-1,0.5,0.5,0.5,0.5]],\"positions\":[3,9,40],"
                       "\"return\":[\"patterns\",\"normed\",\"q_raw\",\"delta\",\"embeddings\"]";
    char by_name[1024], *inline_again = malloc(strlen(weights) + 2048);
    snprintf(by_name, sizeof by_name, "{\"model\":\"normed\",%s}", rest);
    sprintf(inline_again, "{\"weights\":%s,%s}", weights, rest);
    api_call *named = decode(by_name), *back = decode(inline_again);
    ck_assert_int_eq(
        api_call_bind(named,
                      &(api_model_ref){NULL, m->layers[0], ATTN_MASK_CAUSAL, NULL, m->layers, 2},
                      &limits, &err),
        0);
    char *x = answer(named), *y = answer(back);
    ck_assert_ptr_nonnull(strstr(x, "\"normed\""));
    ck_assert_str_eq(strstr(x, "\"n_tokens\""), strstr(y, "\"n_tokens\""));
    free(x), free(y), free(weights), free(inline_again);
    api_call_free(named), api_call_free(back);
    json_decref(model);
    store_model_destroy(m);
}
END_TEST

/* One layer's file with `meta` and the tensors, expected refused with a
 * message holding `want`. */
static void expect_fault(const char *const *meta, const tspec *ts, size_t nt, const char *want) {
    write_model(tpath("fault.safetensors"), meta, ts, nt);
    store_model *m = NULL;
    attn_error err;
    ck_assert_int_eq(store_model_load(&m, tpath("fault.safetensors"), &err), -1);
    ck_assert_msg(strstr(err.message, want) != NULL, "message does not say '%s': %s", want,
                  err.message);
}

START_TEST(test_faults) {
    const tspec qkv[] = {{"w_qkv", 2, {8, 24}}, {"norm.weight", 1, {8}}};
    const tspec qkv_bias[] = {{"w_qkv", 2, {8, 24}}, {"norm.bias", 1, {8}}};
    const tspec qkv_qn[] = {{"w_qkv", 2, {8, 24}}, {"q_norm.weight", 1, {8}}};
    const char *none[] = {"n_heads", "4", NULL};
    expect_fault(none, qkv, 2, "tensor 'norm.weight' without metadata 'norm_type'");
    const char *offset[] = {"n_heads", "4", "norm_type", "rms", "norm_offset", "2", NULL};
    expect_fault(offset, qkv, 2, "metadata 'norm_offset' is '2', expected '0' or '1'");
    const char *type[] = {"n_heads", "4", "norm_type", "batch", NULL};
    expect_fault(type, qkv, 2, "expected 'layer' or 'rms'");
    const char *rms[] = {"n_heads", "4", "norm_type", "rms", NULL};
    expect_fault(rms, qkv_bias, 2, "tensor 'norm.bias': an rms norm has no bias");
    const char *eps[] = {"n_heads", "4", "post_norm_type", "layer", "post_norm_eps", "0", NULL};
    expect_fault(eps, qkv, 1, "metadata 'post_norm_eps' is '0'");
    const char *head[] = {"n_heads", "4", "qk_norm_scope", "head", NULL};
    expect_fault(head, qkv_qn, 2, "tensor 'q_norm.weight' must have shape [2] (d_head)");
    const char *temp[] = {"n_heads",
                          "4",
                          "rope_theta",
                          "10000",
                          "temperature_floor_scale",
                          "8",
                          "temperature_attn_scale",
                          "0.1",
                          NULL};
    expect_fault(temp, qkv, 1, "beside RoPE");
    const char *half[] = {"n_heads", "4", "temperature_floor_scale", "8", NULL};
    expect_fault(half, qkv, 1, "without 'temperature_attn_scale'");
}
END_TEST

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/attn-models-norm-XXXXXX");
    if (!mkdtemp(dir)) return EXIT_FAILURE;
    Suite *s = suite_create("models_norm");
    TCase *tc = tcase_create("models_norm");
    tcase_add_test(tc, test_load);
    tcase_add_test(tc, test_shown_and_round_trip);
    tcase_add_test(tc, test_faults);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    unlink(tpath("normed.safetensors"));
    unlink(tpath("fault.safetensors"));
    rmdir(dir);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
