/*
 * test_import_config.c — import_layer_config_read (store/import_config.c):
 * what config.json says of one layer in the keys of the 2025–26 families
 * (store/IMPORT_FAMILIES.md), read from configs shaped as the Hub's and
 * transformers' own: Qwen3, Gemma 3 (older multimodal, and transformers 5's
 * rope_parameters per layer kind), OLMo 2, gpt-oss, Llama 4 and Phi-3. Then
 * the faults, each named with its key.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/import_internal.h"

static json_t *cfg_parse(const char *text) {
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON: %s", jerr.text);
    return v;
}

/* Layer L of text into *c; the JSON stays alive in *keep (c points into it). */
static void layer_read(const char *text, size_t layer, import_layer_config *c, json_t **keep) {
    attn_error err = {0};
    *keep = cfg_parse(text);
    ck_assert_msg(import_layer_config_read(*keep, layer, c, "ckpt", &err) == 0, "%s", err.message);
}

static void expect_fault(const char *text, size_t layer, const char *piece) {
    attn_error err = {0};
    import_layer_config c;
    json_t *cfg = cfg_parse(text);
    ck_assert_int_eq(import_layer_config_read(cfg, layer, &c, "ckpt", &err), -1);
    ck_assert_msg(strstr(err.message, piece) != NULL, "'%s' does not say '%s'", err.message, piece);
    ck_assert_msg(strncmp(err.message, "ckpt: ", 6) == 0, "'%s' does not name ckpt", err.message);
    json_decref(cfg);
}

static const char QWEN3[] =
    "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"head_dim\": 16, \"attention_bias\": false,"
    " \"rope_theta\": 1000000, \"sliding_window\": 32, \"use_sliding_window\": true,"
    " \"max_window_layers\": 1, \"layer_types\": [\"full_attention\", \"sliding_attention\"],"
    " \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0,"
    " \"original_max_position_embeddings\": 32768}}";

START_TEST(test_qwen3) {
    import_layer_config c;
    json_t *cfg;
    layer_read(QWEN3, 0, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_FULL);
    ck_assert_str_eq(c.kind_from, "layer_types");
    ck_assert_uint_eq(c.window, 0);
    ck_assert_uint_eq(c.sliding_window, 32);
    ck_assert_double_eq(c.rope_theta, 1e6);
    ck_assert_str_eq(c.rope_type, "yarn");
    ck_assert_ptr_eq(c.rope_params, json_object_get(cfg, "rope_scaling"));
    ck_assert_int_eq(c.attention_bias, 0);
    ck_assert_int_eq(c.rope, 1);
    ck_assert_int_eq(c.qk_norm, -1);
    json_decref(cfg);
    layer_read(QWEN3, 1, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_SLIDING);
    ck_assert_uint_eq(c.window, 32);
    json_decref(cfg);
}
END_TEST

/* Gemma 3 4B as the Hub has it: multimodal, the text part in text_config,
 * one layer in six global (sliding_window_pattern), local layers on their
 * own base and never scaled. */
static const char GEMMA3_HUB[] =
    "{\"model_type\": \"gemma3\", \"vision_config\": {\"hidden_size\": 1152},"
    " \"text_config\": {\"model_type\": \"gemma3_text\", \"hidden_size\": 2560,"
    " \"head_dim\": 256, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,"
    " \"query_pre_attn_scalar\": 256, \"sliding_window\": 1024, \"sliding_window_pattern\": 6,"
    " \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0,"
    " \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}}}";

START_TEST(test_gemma3_hub) {
    import_layer_config c;
    json_t *cfg;
    for (size_t l = 0; l < 12; l++) {
        layer_read(GEMMA3_HUB, l, &c, &cfg);
        int global = l == 5 || l == 11;
        ck_assert_str_eq(c.kind_from, "sliding_window_pattern");
        ck_assert_int_eq(c.kind, global ? IMPORT_LAYER_FULL : IMPORT_LAYER_SLIDING);
        ck_assert_uint_eq(c.window, global ? 0 : 1024);
        ck_assert_double_eq(c.rope_theta, global ? 1e6 : 1e4);
        if (global)
            ck_assert_str_eq(c.rope_type, "linear");
        else
            ck_assert_ptr_null(c.rope_type);
        ck_assert_double_eq(c.query_pre_attn_scalar, 256);
        json_decref(cfg);
    }
}
END_TEST

/* The same written by transformers 5: layer_types and rope_parameters per
 * layer kind. */
static const char GEMMA3_V5[] =
    "{\"model_type\": \"gemma3_text\", \"sliding_window\": 512,"
    " \"layer_types\": [\"sliding_attention\", \"full_attention\"],"
    " \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0,"
    " \"rope_theta\": 1000000.0}, \"sliding_attention\": {\"rope_type\": \"default\","
    " \"rope_theta\": 10000.0}}}";

START_TEST(test_gemma3_rope_parameters) {
    import_layer_config c;
    json_t *cfg;
    layer_read(GEMMA3_V5, 0, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_SLIDING);
    ck_assert_uint_eq(c.window, 512);
    ck_assert_double_eq(c.rope_theta, 1e4);
    ck_assert_str_eq(c.rope_type, "default");
    json_decref(cfg);
    layer_read(GEMMA3_V5, 1, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_FULL);
    ck_assert_double_eq(c.rope_theta, 1e6);
    ck_assert_str_eq(c.rope_type, "linear");
    ck_assert_double_eq(json_number_value(json_object_get(c.rope_params, "factor")), 8.0);
    json_decref(cfg);
}
END_TEST

/* OLMo 2 and Phi-3 say nothing per layer: the family's rule decides. */
START_TEST(test_olmo2_phi3_unsaid) {
    import_layer_config c;
    json_t *cfg;
    layer_read("{\"model_type\": \"olmo2\", \"rope_theta\": 500000, \"attention_bias\": false,"
               " \"rope_scaling\": null}",
               3, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_UNSAID);
    ck_assert_ptr_null(c.kind_from);
    ck_assert_double_eq(c.rope_theta, 5e5);
    ck_assert_ptr_null(c.rope_type);
    json_decref(cfg);
    layer_read("{\"model_type\": \"phi3\", \"partial_rotary_factor\": 0.75,"
               " \"sliding_window\": 262144, \"rope_theta\": 10000.0,"
               " \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1],"
               " \"long_factor\": [2, 2]}, \"original_max_position_embeddings\": 4096}",
               0, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_UNSAID);
    ck_assert_uint_eq(c.sliding_window, 262144);
    ck_assert_uint_eq(c.window, 0);
    ck_assert_double_eq(c.partial_rotary_factor, 0.75);
    ck_assert_str_eq(c.rope_type, "longrope");
    json_decref(cfg);
    layer_read("{}", 0, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_UNSAID);
    ck_assert_int_eq(c.rope, 1);
    json_decref(cfg);
    attn_error err = {0};
    ck_assert_int_eq(import_layer_config_read(NULL, 7, &c, "ckpt", &err), 0);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_UNSAID);
}
END_TEST

static const char GPT_OSS[] =
    "{\"model_type\": \"gpt_oss\", \"head_dim\": 64, \"num_attention_heads\": 64,"
    " \"num_key_value_heads\": 8, \"sliding_window\": 128, \"attention_bias\": true,"
    " \"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\"],"
    " \"rope_theta\": 150000, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 32.0,"
    " \"beta_fast\": 32.0, \"beta_slow\": 1.0, \"truncate\": false,"
    " \"original_max_position_embeddings\": 4096}}";

START_TEST(test_gpt_oss) {
    import_layer_config c;
    json_t *cfg;
    for (size_t l = 0; l < 3; l++) {
        layer_read(GPT_OSS, l, &c, &cfg);
        ck_assert_int_eq(c.kind, l == 1 ? IMPORT_LAYER_FULL : IMPORT_LAYER_SLIDING);
        ck_assert_uint_eq(c.window, l == 1 ? 0 : 128);
        ck_assert_double_eq(c.rope_theta, 150000);
        ck_assert_str_eq(c.rope_type, "yarn");
        ck_assert_int_eq(c.attention_bias, 1);
        json_decref(cfg);
    }
}
END_TEST

/* Llama 4 Scout's text part: three chunked RoPE layers, then a full one
 * without RoPE, whose queries the temperature tuning scales. */
static const char LLAMA4[] =
    "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\","
    " \"no_rope_layers\": [1, 1, 1, 0], \"attention_chunk_size\": 8192,"
    " \"attn_temperature_tuning\": true, \"floor_scale\": 8192, \"attn_scale\": 0.1,"
    " \"use_qk_norm\": true, \"rope_theta\": 500000.0,"
    " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 16.0, \"low_freq_factor\": 1.0,"
    " \"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192}}}";

START_TEST(test_llama4) {
    import_layer_config c;
    json_t *cfg;
    for (size_t l = 0; l < 4; l++) {
        layer_read(LLAMA4, l, &c, &cfg);
        int nope = l == 3;
        ck_assert_str_eq(c.kind_from, "no_rope_layers");
        ck_assert_int_eq(c.kind, nope ? IMPORT_LAYER_FULL : IMPORT_LAYER_CHUNKED);
        ck_assert_uint_eq(c.window, nope ? 0 : 8192);
        ck_assert_int_eq(c.rope, !nope);
        ck_assert_int_eq(c.qk_norm, 1);
        ck_assert_int_eq(c.temperature_tuning, 1);
        ck_assert_double_eq(c.floor_scale, 8192);
        ck_assert_double_eq(c.attn_scale, 0.1);
        ck_assert_str_eq(c.rope_type, "llama3");
        json_decref(cfg);
    }
    /* layer_types, when there, says the kind; no_rope_layers still says RoPE */
    layer_read("{\"layer_types\": [\"full_attention\", \"chunked_attention\"],"
               " \"no_rope_layers\": [0, 1], \"attention_chunk_size\": 16}",
               1, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_CHUNKED);
    ck_assert_str_eq(c.kind_from, "layer_types");
    ck_assert_uint_eq(c.window, 16);
    ck_assert_int_eq(c.rope, 1);
    json_decref(cfg);
    /* an empty no_rope_layers is none (the family's rule decides); the first
     * configs' attn_temperature_tuning 4 is true */
    layer_read("{\"no_rope_layers\": [], \"attention_chunk_size\": 16,"
               " \"attn_temperature_tuning\": 4}",
               3, &c, &cfg);
    ck_assert_int_eq(c.kind, IMPORT_LAYER_UNSAID);
    ck_assert_int_eq(c.rope, 1);
    ck_assert_int_eq(c.temperature_tuning, 1);
    json_decref(cfg);
}
END_TEST

START_TEST(test_faults) {
    expect_fault("{\"layer_types\": [\"full_attention\"]}", 1, "\"layer_types\" has no layer 1");
    expect_fault("{\"layer_types\": [\"linear_attention\"]}", 0,
                 "makes layer 0 'linear_attention', not one the importer reads");
    expect_fault("{\"layer_types\": [7]}", 0, "\"layer_types\" has a non-string for layer 0");
    expect_fault("{\"layer_types\": [\"sliding_attention\"]}", 0, "has no \"sliding_window\"");
    expect_fault("{\"layer_types\": [\"chunked_attention\"]}", 0,
                 "has no \"attention_chunk_size\"");
    expect_fault("{\"sliding_window_pattern\": 0, \"sliding_window\": 8}", 0,
                 "\"sliding_window_pattern\" is not a positive integer");
    expect_fault("{\"no_rope_layers\": [1, 2]}", 1, "has 2 for layer 1, not 0 (no RoPE) or 1");
    expect_fault("{\"no_rope_layers\": [1]}", 1, "\"no_rope_layers\" has no layer 1");
    expect_fault("{\"no_rope_layers\": [true]}", 0, "has a non-integer for layer 0");
    expect_fault("{\"sliding_window\": \"4096\"}", 0, "\"sliding_window\" is not a positive");
    expect_fault("{\"rope_parameters\": [1]}", 0, "\"rope_parameters\" is not an object");
    expect_fault("{\"layer_types\": [\"full_attention\"], \"rope_parameters\":"
                 " {\"sliding_attention\": {\"rope_theta\": 10}}}",
                 0, "\"rope_parameters\" has no \"full_attention\" object");
    expect_fault("{\"rope_parameters\": {\"rope_theta\": -1}}", 0,
                 "\"rope_theta\" is not a number");
    expect_fault("{\"rope_scaling\": 3}", 0, "\"rope_scaling\" is not an object");
    expect_fault("{\"rope_scaling\": {\"rope_type\": 3}}", 0,
                 "rope_scaling \"rope_type\" is not a string");
    expect_fault("{\"use_qk_norm\": 1}", 0, "\"use_qk_norm\" is not true or false");
    expect_fault("{\"attn_temperature_tuning\": \"yes\"}", 0, "\"attn_temperature_tuning\"");
    expect_fault("{\"floor_scale\": 0}", 0, "\"floor_scale\" is not a number > 0");
    expect_fault("{\"text_config\": {\"partial_rotary_factor\": \"0.5\"}}", 0,
                 "\"partial_rotary_factor\" is not a number > 0");
}
END_TEST

START_TEST(test_kind_names) {
    ck_assert_str_eq(import_layer_kind_name(IMPORT_LAYER_FULL), "full_attention");
    ck_assert_str_eq(import_layer_kind_name(IMPORT_LAYER_SLIDING), "sliding_attention");
    ck_assert_str_eq(import_layer_kind_name(IMPORT_LAYER_CHUNKED), "chunked_attention");
    ck_assert_str_eq(import_layer_kind_name(IMPORT_LAYER_UNSAID), "unsaid");
    json_t *plain = cfg_parse("{\"text_config\": 3}");
    ck_assert_ptr_eq(import_cfg_text(plain), plain);
    ck_assert_ptr_null(import_cfg_text(NULL));
    json_decref(plain);
}
END_TEST

static Suite *import_config_suite(void) {
    Suite *s = suite_create("import_config");
    TCase *tc = tcase_create("layer");
    tcase_add_test(tc, test_qwen3);
    tcase_add_test(tc, test_gemma3_hub);
    tcase_add_test(tc, test_gemma3_rope_parameters);
    tcase_add_test(tc, test_olmo2_phi3_unsaid);
    tcase_add_test(tc, test_gpt_oss);
    tcase_add_test(tc, test_llama4);
    tcase_add_test(tc, test_faults);
    tcase_add_test(tc, test_kind_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(import_config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
