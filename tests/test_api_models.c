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

#include "api/models.h"
#include "api/request.h"

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

static api_request *decode(const char *text) {
    api_request *req = NULL;
    attn_error err;
    int rc = api_request_decode(text, strlen(text), &limits, &req, &err);
    ck_assert_msg(rc == 0, "decode failed: %s at %s", err.message, err.path);
    return req;
}

static int floats_equal(const float *a, const float *b, size_t count) {
    if (!a || !b) return a == b;
    return memcmp(a, b, count * sizeof(float)) == 0;
}

START_TEST(test_weights_round_trip) {
    api_request *req = decode(inline_body);
    const attn_weights *w = api_request_input(req)->weights;
    api_model_info info = {"round-trip", "two heads", ATTN_MASK_CAUSAL, w};
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
    api_request *back = decode(again);
    const attn_weights *w2 = api_request_input(back)->weights;
    ck_assert_uint_eq(w2->n_heads, 2);
    ck_assert(floats_equal(w->w_qkv, w2->w_qkv, 4 * 12));
    ck_assert(floats_equal(w->b_qkv, w2->b_qkv, 12));
    ck_assert(floats_equal(w->w_o, w2->w_o, 16));
    ck_assert(floats_equal(w->b_o, w2->b_o, 4));

    free(again);
    json_decref(body);
    json_decref(model);
    free(text);
    api_request_free(back);
    api_request_free(req);
}
END_TEST

START_TEST(test_list_and_summary) {
    api_request *req = decode(inline_body);
    const attn_weights *w = api_request_input(req)->weights;
    api_model_info infos[2] = {{"a", "first \"quoted\"", ATTN_MASK_NONE, w},
                               {"b.2", NULL, ATTN_MASK_CAUSAL, w}};
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
    ck_assert_uint_eq(json_object_size(a), 6); /* exactly the contract's fields */
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
    ck_assert_uint_eq(json_object_size(one), 6);
    json_decref(one);
    free(text);
    api_request_free(req);
}
END_TEST

START_TEST(test_weights_limit_and_flag) {
    api_request *req = decode(inline_body);
    api_model_info info = {"m", "", ATTN_MASK_CAUSAL, api_request_input(req)->weights};
    attn_error err;
    size_t len;
    ck_assert_ptr_null(api_model_encode(&info, 1, 100, &len, &err));
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "limit_exceeded");
    char *text = api_model_encode(&info, 0, 100, &len, &err); /* the summary fits */
    ck_assert_ptr_nonnull(text);
    free(text);
    api_request_free(req);

    int flag = -1;
    ck_assert_int_eq(api_model_weights_flag(NULL, &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_weights_flag("false", &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_weights_flag("0", &flag, &err), 0);
    ck_assert_int_eq(flag, 0);
    ck_assert_int_eq(api_model_weights_flag("true", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(api_model_weights_flag("1", &flag, &err), 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_int_eq(api_model_weights_flag("yes", &flag, &err), -1);
    ck_assert_str_eq(err.code, "invalid_value");
    ck_assert_int_eq(api_model_weights_flag("", &flag, &err), -1);
    ck_assert_str_eq(err.code, "invalid_value");
}
END_TEST

int main(void) {
    Suite *s = suite_create("api_models");
    TCase *tc = tcase_create("models");
    tcase_add_test(tc, test_weights_round_trip);
    tcase_add_test(tc, test_list_and_summary);
    tcase_add_test(tc, test_weights_limit_and_flag);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
