/*
 * test_api.c — the check suite of api/: decoding and validating requests,
 * encoding responses and errors (float formatting: test_float_format.c).
 *
 * Requests are built as jansson trees from one small valid request
 * (base_request: 3 tokens, d_model 4, 2 heads of width 2, no w_o) and
 * broken one field at a time; each failure is checked for its status, its
 * code AND its JSON path. Responses are computed with attn_compute, parsed
 * back with jansson and checked for the presence and shape of every field
 * and against numbers recomputed here in double.
 *
 * Data-driven cases live in tests/cases/<name>/{request.json,expected.json}
 * (see tests/cases/README); the folder is found from $ATTN_TESTS_DIR (the
 * tests folder or the cases folder itself), else relative to the working
 * directory (the repository root under `make check-all`).
 */
#include <check.h>
#include <dirent.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/buffer.h"
#include "api/call.h"
#include "api/error.h"
#include "api/float_format.h"
#include "api/json_path.h"
#include "api/json_write.h"
#include "attention/attention.h"
#include "attention/naive.h"
#include "tests/fixtures.h"
#include "tests/json_build.h"
#include "tests/json_edit.h"

/* ---- helpers ------------------------------------------------------------- */

static const api_limits big_limits = {.max_tokens = 4096,
                                      .max_heads = 64,
                                      .max_d_model = 4096,
                                      .max_flops = 1e12,
                                      .max_response_bytes = (size_t)1 << 30,
                                      .max_workspace_bytes = (size_t)1 << 30};

static json_t *head(size_t dm, size_t dh, size_t seed) {
    return json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(dm, dh, seed), "w_k",
                     tj_matrix(dm, dh, seed + 100), "w_v", tj_matrix(dm, dh, seed + 200));
}

/* n tokens, d_model dm, h heads of width dh; no w_o (so h·dh should be dm). */
static json_t *request_with(size_t n, size_t dm, size_t h, size_t dh) {
    json_t *heads = json_array();
    for (size_t i = 0; i < h; i++)
        json_array_append_new(heads, head(dm, dh, 1000 * (i + 1)));
    return json_pack("{s:o, s:{s:o}}", "embeddings", tj_matrix(n, dm, 7), "weights", "heads",
                     heads);
}

static json_t *base_request(void) {
    return request_with(3, 4, 2, 2);
}

static char *dump(const json_t *j);

/* The base request (inline weights) as text. */
static char *dump_base_request(void) {
    json_t *r = base_request();
    char *text = dump(r);
    json_decref(r);
    return text;
}

static char *dump(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Decodes text (length len) and expects the error status/code/path. */
static void expect_error_len(const char *text, size_t len, const api_limits *limits, int status,
                             const char *code, const char *path, attn_error *out) {
    api_call *req = (api_call *)1;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, len, limits, &req, &err);
    ck_assert_msg(rc == -1, "expected %s at %s, but decode succeeded: %.200s", code, path, text);
    ck_assert_ptr_null(req);
    ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                      strcmp(err.path, path) == 0,
                  "expected %d %s at \"%s\", got %d %s at \"%s\" (%s) for %.300s", status, code,
                  path, err.status, err.code, err.path, err.message, text);
    if (out) *out = err;
}

static void expect_error_text(const char *text, int status, const char *code, const char *path) {
    expect_error_len(text, strlen(text), &big_limits, status, code, path, NULL);
}

/* Takes the tree (decref'd here). */
static void expect_error(json_t *body, const api_limits *limits, int status, const char *code,
                         const char *path, attn_error *out) {
    char *text = dump(body);
    expect_error_len(text, strlen(text), limits ? limits : &big_limits, status, code, path, out);
    free(text);
    json_decref(body);
}

static api_call *decode_ok_limits(json_t *body, const api_limits *limits) {
    api_call *req = NULL;
    attn_error err;
    char *text = dump(body);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), limits, &req, &err);
    ck_assert_msg(rc == 0, "decode failed: %d %s at \"%s\": %s", err.status, err.code, err.path,
                  err.message);
    ck_assert_ptr_nonnull(req);
    free(text);
    json_decref(body);
    return req;
}

static api_call *decode_ok(json_t *body) {
    return decode_ok_limits(body, &big_limits);
}

/* Computes a bound request and returns its parsed response; *raw gets the
 * text when asked (caller frees). */
static json_t *respond(api_call *req, char **raw) {
    attn_workspace *ws = attn_workspace_create();
    size_t len = 0;
    char *text;
    json_error_t jerr;
    json_t *resp;

    attn_error err;
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(api_call_compute(req, ws, NULL, &err, NULL), 0);
    attn_workspace_destroy(ws);
    text = api_call_encode(req, &len, NULL, &err);
    ck_assert_msg(text != NULL, "encode failed: %s", err.message);
    ck_assert_uint_eq(strlen(text), len);
    resp = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(resp != NULL, "response is not JSON: %s: %.300s", jerr.text, text);
    if (raw)
        *raw = text;
    else
        free(text);
    return resp;
}

/* Checks v is a rows × cols nested array of numbers (nulls allowed when null_ok). */
static void check_matrix_shape(const json_t *v, size_t rows, size_t cols, int null_ok) {
    ck_assert(json_is_array(v));
    ck_assert_uint_eq(json_array_size(v), rows);
    for (size_t r = 0; r < rows; r++) {
        const json_t *row = json_array_get(v, r);
        ck_assert(json_is_array(row));
        ck_assert_uint_eq(json_array_size(row), cols);
        for (size_t c = 0; c < cols; c++) {
            const json_t *x = json_array_get(row, c);
            ck_assert(json_is_number(x) || (null_ok && json_is_null(x)));
        }
    }
}

static void check_per_head_shape(const json_t *v, size_t hs, size_t rows, size_t cols,
                                 int null_ok) {
    ck_assert(json_is_array(v));
    ck_assert_uint_eq(json_array_size(v), hs);
    for (size_t i = 0; i < hs; i++)
        check_matrix_shape(json_array_get(v, i), rows, cols, null_ok);
}

static const char *const output_names[] = {
    "q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"};

/* ---- error values -------------------------------------------------------- */

START_TEST(test_error_to_json) {
    attn_error err;
    size_t len = 0;
    char *text;
    json_t *j;

    ck_assert_int_eq(attn_error_set(&err, 422, "dimension_mismatch", "/weights/heads/1/w_k",
                                    "weights.heads[%d].w_k has %d rows, expected d_model = %d", 1,
                                    3, 4),
                     -1);
    text = api_error_to_json(&err, &len);
    ck_assert_str_eq(text,
                     "{\"error\":{\"code\":\"dimension_mismatch\",\"message\":\"weights.heads[1]"
                     ".w_k has 3 rows, expected d_model = 4\",\"path\":\"/weights/heads/1/w_k\"}}");
    ck_assert_uint_eq(len, strlen(text));
    free(text);

    /* no path: "" always present; quotes and control characters escaped */
    attn_error_set(&err, 400, "invalid_json", NULL, "bad \"quote\"\n\ttab \\ back");
    text = api_error_to_json(&err, &len);
    j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(tj_at(j, "error/path")), "");
    ck_assert_str_eq(json_string_value(tj_at(j, "error/code")), "invalid_json");
    ck_assert_str_eq(json_string_value(tj_at(j, "error/message")), "bad \"quote\"\n\ttab \\ back");
    json_decref(j);
    free(text);
}
END_TEST

/* api_write_json writes every value byte for byte as jansson's compact
 * dump does, its own fast path for strings and arrays of strings included,
 * and api_json_bytes counts exactly what it writes: every single byte from
 * 0x01 to 0x7f, UTF-8 of every length (U+2028 and U+2029 too), NUL
 * inside, and arrays that mix plain and escaped strings or hold a number. */
static void expect_as_jansson(json_t *v) {
    char *want = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    ck_assert_ptr_nonnull(want);
    api_buffer b;
    api_buffer_init(&b, 16);
    api_write_json(&b, v);
    ck_assert(!b.failed);
    ck_assert_uint_eq(b.len, strlen(want));
    ck_assert_msg(memcmp(b.data, want, b.len) == 0, "wrote %.*s, jansson %s", (int)b.len, b.data,
                  want);
    ck_assert_uint_eq(api_json_bytes(v), strlen(want));
    free(b.data);
    free(want);
    json_decref(v);
}

START_TEST(test_write_json_as_jansson) {
    char text[8];
    for (int c = 1; c < 0x80; c++) {
        snprintf(text, sizeof text, "a%cb", c);
        expect_as_jansson(json_string(text));
        expect_as_jansson(json_pack("[s,s]", "x", text));
    }
    static const char *const utf8[] = {
        "\xc3\xa9", "\xe6\x88\x91", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xf0\x9f\x98\x80", "", "\x7f"};
    for (size_t i = 0; i < sizeof utf8 / sizeof utf8[0]; i++) {
        expect_as_jansson(json_string(utf8[i]));
        expect_as_jansson(json_pack("[s,s,s]", utf8[i], "tab\there", utf8[i]));
    }
    expect_as_jansson(json_stringn("a\0b", 3));
    expect_as_jansson(json_pack("[s,i]", "x", 1));
    expect_as_jansson(json_array());
    expect_as_jansson(json_pack("[s]", "gpt2-small-shape"));
}
END_TEST

START_TEST(test_error_utf8) {
    attn_error err;
    char long_text[3000] = "";
    char *text;
    json_t *j;

    /* many 2-byte characters: the cut at the message's last byte (odd)
     * falls inside one */
    while (strlen(long_text) < 2500)
        strcat(long_text, "\xc3\xa9");
    attn_error_set(&err, 400, "wrong_type", "", "%s", long_text);
    ck_assert_uint_eq(strlen(err.message), sizeof err.message - 2);
    ck_assert_str_eq(err.message + sizeof err.message - 4, "\xc3\xa9");
    /* an invalid byte quoted from a body becomes '?' */
    attn_error_set(&err, 400, "invalid_json", "/a\xff", "near '\xff\xfe' \xe6\x88\x91");
    ck_assert_str_eq(err.message, "near '\?\?' \xe6\x88\x91");
    ck_assert_str_eq(err.path, "/a?");
    text = api_error_to_json(&err, NULL);
    ck_assert_ptr_nonnull(text);
    j = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_decref(j);
    free(text);
    /* hand-filled with invalid bytes: still encodes */
    err.message[0] = (char)0xC3;
    err.message[1] = '\0';
    text = api_error_to_json(&err, NULL);
    ck_assert_ptr_nonnull(text);
    free(text);
}
END_TEST

/* A number's text found by its JSON Pointer, as a message quotes it: keys
 * escaped in the pointer (~0, ~1) and in the text (\u0065), digits and
 * brackets inside strings passed over, a key of the same name elsewhere
 * not taken for the one asked. */
START_TEST(test_path_number_text) {
    static const char text[] =
        "{\"a\": [1, {\"b\": [2, 3e5, -4]}], \"s\": \"[1,2]\", \"c~/d\": 9223372036854775807,"
        " \"e\\u0065\": 12345678901234567890, \"n\": [0, {\"k\": \"a,b\", \"b\": 5}, 7],"
        " \"b\": -0.5e-3, \"t\": [true, null, 8]}";
    static const struct {
        const char *path, *want; /* want NULL: no number there */
    } cases[] = {
        {"/a/0", "1"},
        {"/a/1/b/0", "2"},
        {"/a/1/b/1", "3e5"},
        {"/a/1/b/2", "-4"},
        {"/c~0~1d", "9223372036854775807"},
        {"/ee", "12345678901234567890"},
        {"/n/0", "0"},
        {"/n/1/b", "5"},
        {"/n/2", "7"},
        {"/b", "-0.5e-3"},
        {"/t/2", "8"},
        {"/a/1/b/3", NULL},
        {"/a/1/b", NULL},
        {"/a/01", NULL},
        {"/s", NULL},
        {"/t/0", NULL},
        {"/x", NULL},
        {"/n/1/k", NULL},
        {"", NULL},
        {"a", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = 0;
        const char *at = api_path_number_text(text, sizeof text - 1, cases[i].path, &n);
        if (!cases[i].want) {
            ck_assert_msg(at == NULL, "%s: found %.*s", cases[i].path, (int)n, at ? at : "");
            continue;
        }
        ck_assert_msg(at && n == strlen(cases[i].want) && memcmp(at, cases[i].want, n) == 0,
                      "%s: %.*s, want %s", cases[i].path, (int)n, at ? at : "", cases[i].want);
    }
    size_t n = 0;
    const char *at = api_path_number_text("42", 2, "", &n);
    ck_assert(at && n == 2);
}
END_TEST

/* ---- invalid_json -------------------------------------------------------- */

START_TEST(test_invalid_json) {
    attn_error err;
    const char utf8_bad[] = "{\"embeddings\":[[1]],\"tokens\":[\"\xff\"]}";

    expect_error_text("{\"model\":\"a\",\"model\":\"b\",\"embeddings\":[[1]]}", 400, "invalid_json",
                      "");
    expect_error_len(utf8_bad, sizeof utf8_bad - 1, &big_limits, 400, "invalid_json", "", &err);
    ck_assert_msg(strstr(err.message, "line 1") && strstr(err.message, "column"), "%s",
                  err.message);
    expect_error_text("{\"model\":\"a\",\"embeddings\":[[1]]} x", 400, "invalid_json", "");
    expect_error_text("[{\"model\":\"a\"}]", 400, "invalid_json", "");
    expect_error_text("\"model\"", 400, "invalid_json", "");
    expect_error_text("42", 400, "invalid_json", "");
    expect_error_text("", 400, "invalid_json", "");
    expect_error_text("{\"embeddings\": [[1, 2]", 400, "invalid_json", "");
    expect_error_text("{'a': 1}", 400, "invalid_json", "");
    expect_error_text("{\"embeddings\":[[NaN]]}", 400, "invalid_json", "");
    /* a duplicate deep inside is caught too, with jansson's text */
    expect_error_len("{\"weights\":{\"heads\":[{\"w_q\":1,\"w_q\":2}]}}", 40, &big_limits, 400,
                     "invalid_json", "", &err);
    ck_assert_msg(strstr(err.message, "duplicate"), "%s", err.message);
    /* a NUL byte in the body outside a string is not JSON */
    expect_error_len("{\"model\":\"a\"}\0", 14, &big_limits, 400, "invalid_json", "", NULL);
}
END_TEST

/* ---- unknown_field, missing_field, both/neither ------------------------- */

START_TEST(test_unknown_fields) {
    json_t *r = base_request();
    tj_put(r, "/colour", json_string("red"));
    expect_error(r, NULL, 400, "unknown_field", "/colour", NULL);

    r = base_request();
    json_object_set_new(r, "a~b/c", json_true()); /* escaped in the pointer */
    expect_error(r, NULL, 400, "unknown_field", "/a~0b~1c", NULL);

    r = base_request();
    json_t *h0 = tj_at(r, "weights/heads/0");
    json_object_set(h0, "W_q", json_object_get(h0, "w_q"));
    expect_error(r, NULL, 400, "unknown_field", "/weights/heads/0/W_q", NULL);

    r = base_request();
    tj_put(r, "/weights/bias", json_true());
    expect_error(r, NULL, 400, "unknown_field", "/weights/bias", NULL);
}
END_TEST

START_TEST(test_missing_and_both) {
    json_t *r = base_request();
    tj_del(r, "/embeddings");
    expect_error(r, NULL, 400, "missing_field", "/embeddings", NULL);

    r = base_request();
    tj_del(r, "/weights");
    expect_error(r, NULL, 400, "missing_field", "", NULL);

    r = base_request();
    tj_put(r, "/model", json_string("tiny"));
    expect_error(r, NULL, 400, "invalid_value", "", NULL);

    r = base_request();
    tj_del(r, "/weights/heads/1/w_k");
    expect_error(r, NULL, 400, "missing_field", "/weights/heads/1/w_k", NULL);

    r = base_request();
    tj_del(r, "/weights/heads");
    expect_error(r, NULL, 400, "missing_field", "/weights/heads", NULL);
}
END_TEST

/* ---- wrong_type ---------------------------------------------------------- */

START_TEST(test_wrong_types) {
    attn_error err;
    json_t *r;

    struct {
        const char *path;
        json_t *value;
        const char *expect_path;
    } cases[] = {
        {"/embeddings", json_string("E"), "/embeddings"},
        {"/embeddings/1", json_real(1), "/embeddings/1"},
        {"/embeddings/1/2", json_string("0.5"), "/embeddings/1/2"},
        {"/embeddings/2/0", json_null(), "/embeddings/2/0"},
        {"/embeddings/0/3", json_true(), "/embeddings/0/3"},
        {"/tokens", json_string("a b c"), "/tokens"},
        {"/scale", json_string("0.5"), "/scale"},
        {"/return", json_string("patterns"), "/return"},
        {"/return", json_pack("[s,i]", "q", 1), "/return/1"},
        {"/select_heads", json_pack("[i,f]", 0, 1.5), "/select_heads/1"},
        {"/select_heads", json_pack("[s]", "0"), "/select_heads/0"},
        {"/select_heads", json_integer(0), "/select_heads"},
        {"/mask", json_integer(1), "/mask"},
        {"/mask", json_pack("[[i,i,i],[i,f,i],[i,i,i]]", 1, 0, 0, 1, 0.5, 0, 1, 1, 1), "/mask/1/1"},
        {"/mask", json_pack("[[i,i,i],[i,i,i],[i,i,s]]", 1, 0, 0, 1, 1, 0, 1, 1, "1"), "/mask/2/2"},
        {"/mask", json_pack("[[i,i,i],[i,i,i],[i,i,i]]", 1, 0, 0, 1, 2, 0, 1, 1, 1), "/mask/1/1"},
        {"/mask", json_pack("[[i,i,i],i,[i,i,i]]", 1, 0, 0, 1, 1, 1, 1), "/mask/1"},
        /* a flat mask is a wrong type whatever its length (n is 3) */
        {"/mask", json_pack("[i,i,i,i]", 1, 0, 1, 1), "/mask/0"},
        {"/mask", json_pack("[i,i,i]", 1, 0, 1), "/mask/0"},
        {"/encoding", json_integer(1), "/encoding"},
        {"/model", json_integer(1), "/model"},
        {"/weights", json_pack("[]"), "/weights"},
        {"/weights/heads", json_object(), "/weights/heads"},
        {"/weights/heads/1", json_string("head"), "/weights/heads/1"},
        {"/weights/heads/1/w_v/0/1", json_string("x"), "/weights/heads/1/w_v/0/1"},
        {"/weights/heads/0/b_q", json_pack("[f,s]", 1.0, "x"), "/weights/heads/0/b_q/1"},
        {"/weights/heads/0/b_q", json_real(1), "/weights/heads/0/b_q"},
        {"/weights/b_o", json_pack("[[f,f,f,f]]", 1.0, 1.0, 1.0, 1.0), "/weights/b_o/0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = base_request();
        tj_put(r, cases[i].path, cases[i].value);
        if (strcmp(cases[i].path, "/model") == 0) tj_del(r, "/weights");
        expect_error(r, NULL, 400, "wrong_type", cases[i].expect_path, NULL);
    }

    r = base_request();
    tj_put(r, "/tokens", json_pack("[s,i,s]", "a", 1, "c"));
    expect_error(r, NULL, 400, "wrong_type", "/tokens/1", NULL);

    /* a matrix of the wrong type says both forms it may take (tensor objects:
     * tests/test_binary.c) */
    r = base_request();
    tj_put(r, "/embeddings", json_string("E"));
    expect_error(r, NULL, 400, "wrong_type", "/embeddings", &err);
    ck_assert_msg(strstr(err.message, "nested arrays") && strstr(err.message, "tensor object"),
                  "%s", err.message);
}
END_TEST

/* ---- invalid_value ------------------------------------------------------- */

START_TEST(test_invalid_values) {
    attn_error err;
    json_t *r = base_request();
    tj_put(r, "/return", json_pack("[s,s]", "q", "attention"));
    expect_error(r, NULL, 400, "invalid_value", "/return/1", NULL);

    r = base_request(); /* a NUL inside a name does not sneak through */
    json_object_set_new(r, "return", json_pack("[o]", json_stringn("q\0x", 3)));
    expect_error(r, NULL, 400, "invalid_value", "/return/0", NULL);

    r = base_request();
    tj_put(r, "/mask", json_string("diagonal"));
    expect_error(r, NULL, 400, "invalid_value", "/mask", NULL);

    r = base_request(); /* only the exact words: not "Base64", not "base64\0" */
    tj_put(r, "/encoding", json_string("Base64"));
    expect_error(r, NULL, 400, "invalid_value", "/encoding", &err);
    ck_assert_msg(strstr(err.message, "\"base64\""), "%s", err.message);
    r = base_request();
    tj_put(r, "/encoding", json_stringn("base64\0", 7));
    expect_error(r, NULL, 400, "invalid_value", "/encoding", NULL);

    r = base_request();
    tj_put(r, "/encoding", json_string("xml"));
    expect_error(r, NULL, 400, "invalid_value", "/encoding", NULL);
}
END_TEST

/* ---- dimension_mismatch -------------------------------------------------- */

START_TEST(test_dimension_mismatch) {
    attn_error err;
    json_t *r = base_request();

    json_array_append_new(tj_at(r, "embeddings/1"), json_real(1));
    expect_error(r, NULL, 422, "dimension_mismatch", "/embeddings/1", NULL);

    r = base_request();
    tj_put(r, "/embeddings", json_array());
    expect_error(r, NULL, 422, "dimension_mismatch", "/embeddings", NULL);

    r = base_request();
    tj_put(r, "/embeddings", json_pack("[[]]"));
    expect_error(r, NULL, 422, "dimension_mismatch", "/embeddings/0", NULL);

    /* the contract's own example */
    r = base_request();
    json_array_remove(tj_at(r, "weights/heads/1/w_k"), 3);
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/heads/1/w_k", &err);
    ck_assert_str_eq(err.message, "weights.heads[1].w_k has 3 rows, expected d_model = 4");

    r = base_request(); /* d_head differs between heads */
    tj_put(r, "/weights/heads/1/w_v", tj_matrix(4, 3, 5));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/heads/1/w_v", NULL);

    r = base_request(); /* … and within a head */
    tj_put(r, "/weights/heads/0/w_k", tj_matrix(4, 1, 5));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/heads/0/w_k", NULL);

    r = request_with(3, 4, 1, 2); /* no w_o and h·dh = 2 != 4 */
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights", &err);
    ck_assert_msg(strstr(err.message, "identity"), "%s", err.message);

    r = request_with(3, 4, 1, 2); /* w_o with the wrong rows, then columns */
    tj_put(r, "/weights/w_o", tj_matrix(4, 4, 3));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/w_o", NULL);
    r = request_with(3, 4, 1, 2);
    tj_put(r, "/weights/w_o", tj_matrix(2, 3, 3));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/w_o", NULL);
    r = request_with(3, 4, 1, 2);
    tj_put(r, "/weights/w_o", tj_matrix(2, 4, 3));
    tj_put(r, "/weights/b_o", tj_vector(3, 3));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/b_o", NULL);

    r = base_request();
    tj_put(r, "/weights/heads/1/b_k", tj_vector(3, 1));
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/heads/1/b_k", NULL);

    r = base_request();
    tj_put(r, "/weights/heads", json_array());
    expect_error(r, NULL, 422, "dimension_mismatch", "/weights/heads", NULL);

    r = base_request();
    tj_put(r, "/mask", tj_matrix(2, 3, 0));
    expect_error(r, NULL, 422, "dimension_mismatch", "/mask", NULL);
    r = base_request();
    tj_put(r, "/mask", json_pack("[[b,b,b],[b,b],[b,b,b]]", 1, 0, 0, 1, 1, 1, 1, 1));
    expect_error(r, NULL, 422, "dimension_mismatch", "/mask/1", NULL);

    r = base_request();
    tj_put(r, "/tokens", json_pack("[s,s]", "a", "b"));
    expect_error(r, NULL, 422, "dimension_mismatch", "/tokens", NULL);
}
END_TEST

/* ---- non_finite_number --------------------------------------------------- */

START_TEST(test_non_finite) {
    static const struct {
        const char *text, *path;
    } cases[] = {
        {"{\"embeddings\":[[1,1e39]],\"model\":\"m\"}", "/embeddings/0/1"},
        {"{\"embeddings\":[[1,1e999]],\"model\":\"m\"}", "/embeddings/0/1"},
        {"{\"model\":\"m\",\"embeddings\":[[0.5, 2],\n [3, -1e999 ]]}", "/embeddings/1/1"},
        {"{\"embeddings\":[[1]],\"scale\":1e39,\"model\":\"m\"}", "/scale"},
        {"{\"embeddings\":[[1]],\"scale\":-1E+999,\"model\":\"m\"}", "/scale"},
        {"{\"embeddings\":[[1]],\"model\":\"m\",\"x\\/y~\\u00e9\":[{\"a\":[\"[{,\\\"\",1e400]}]}",
         "/x~1y~0\xc3\xa9/0/a/1"},
        {"{\"embeddings\":[[3.5e38]],\"model\":\"m\"}", "/embeddings/0/0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error_text(cases[i].text, 422, "non_finite_number", cases[i].path);

    /* a 400-digit integer overflows a double, a 41-digit one only a float */
    char big[600];
    strcpy(big, "{\"model\":\"m\",\"embeddings\":[[1],[");
    for (int i = 0; i < 400; i++)
        strcat(big, "9");
    strcat(big, "]]}");
    expect_error_text(big, 422, "non_finite_number", "/embeddings/1/0");
    expect_error_text(
        "{\"model\":\"m\",\"embeddings\":[[100000000000000000000000000000000000000000]]}", 422,
        "non_finite_number", "/embeddings/0/0");

    /* in the weights */
    json_t *r = base_request();
    tj_put(r, "/weights/heads/1/w_v/2/0", json_real(-1e39));
    expect_error(r, NULL, 422, "non_finite_number", "/weights/heads/1/w_v/2/0", NULL);
    r = base_request();
    tj_put(r, "/weights/heads/0/b_v", json_pack("[f,f]", 0.0, 1e300));
    expect_error(r, NULL, 422, "non_finite_number", "/weights/heads/0/b_v/1", NULL);
    char *text = dump(r = base_request());
    json_decref(r);
    char *weights = strstr(text, "\"w_k\":[[") + 8;
    char patched[8192];
    snprintf(patched, sizeof patched, "%.*s1e999,%s", (int)(weights - text), text, weights);
    free(text);
    expect_error_text(patched, 422, "non_finite_number", "/weights/heads/0/w_k/0/0");
}
END_TEST

/* A decoded request tells its cost (the server schedules by it) and has no
 * outputs until they are made, once. */
START_TEST(test_request_cost_and_outputs) {
    char *text = dump_base_request();
    api_call *req = NULL;
    attn_error err;
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &big_limits, &req, &err), 0);
    /* the engine's count for this input: causal, so only the blocks it computes */
    ck_assert(api_call_cost(req) == attn_input_flops(api_call_inputs(req)));
    /* causal: fewer pairs than none, each costing more than its GEMMs */
    ck_assert(api_call_cost(req) > attn_flops(3, 4, 2, 2, 0));
    ck_assert_ptr_null(api_call_outputs(req)->embeddings);
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_ptr_nonnull(api_call_outputs(req)->embeddings);
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), -1);
    ck_assert_str_eq(err.code, "internal_error");
    api_call_free(req);
    free(text);
}
END_TEST

START_TEST(test_tiny_and_edge_numbers) {
    /* 1e-50 reads as 0; FLT_MAX itself and 1e-45 (a subnormal) are fine */
    json_t *r = base_request();
    tj_put(r, "/embeddings/0/0", json_real(1e-50));
    tj_put(r, "/embeddings/0/1", json_real(3.4028234e38));
    tj_put(r, "/embeddings/0/2", json_real(1e-45));
    api_call *req = decode_ok(r);
    const attn_input *in = api_call_inputs(req);
    ck_assert(in->embeddings[0] == 0.0f);
    ck_assert(in->embeddings[1] == FLT_MAX);
    ck_assert(in->embeddings[2] == FLT_TRUE_MIN);
    api_call_free(req);

    req = NULL;
    attn_error err;
    const char *t = "{\"embeddings\":[[1e-400, -0.0, 1E2, 2e+0]],\"model\":\"m\"}";
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, t, strlen(t), &big_limits, &req, &err), 0);
    api_call_free(req);

    /* Numbers in an array read straight from the text (api/arrays.c) are
     * jansson's, to the bit: strtod's double cast to float32, even where
     * that rounds twice; this one, just below the float32 overflow
     * midpoint, rounds up to infinity through the double and is refused
     * the same way in either path. */
    static const char *const twice[] = {"1.0000000596046447", "0.30000001192092896",
                                        "8.340712987038313e+23", "5.223202460911125e-04"};
    r = base_request();
    char *text = dump(r);
    json_decref(r);
    char *first = strstr(text, "\"embeddings\":[[") + 15;
    for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
        char body[8192];
        snprintf(body, sizeof body, "%.*s%s%s", (int)(first - text), text, twice[i],
                 first + strcspn(first, ",]")); /* in place of the first number */
        req = NULL;
        ck_assert_int_eq(
            api_call_decode_json(API_CALL_ATTENTION, body, strlen(body), &big_limits, &req, &err),
            0);
        ck_assert_msg(api_call_inputs(req)->embeddings[0] == (float)strtod(twice[i], NULL), "%s",
                      twice[i]);
        api_call_free(req);
    }
    char body[8192];
    snprintf(body, sizeof body, "%.*s%s%s", (int)(first - text), text,
             "340282356779733661637539395458142568447", first + strcspn(first, ",]"));
    expect_error_text(body, 422, "non_finite_number", "/embeddings/0/0");
    free(text);
}
END_TEST

/* ---- out_of_range -------------------------------------------------------- */

START_TEST(test_out_of_range) {
    json_t *r;
    struct {
        json_t *value;
        const char *field, *path;
    } cases[] = {
        {json_real(0), "/scale", "/scale"},
        {json_real(-1), "/scale", "/scale"},
        {json_real(-0.0), "/scale", "/scale"},
        {json_real(1e-50), "/scale", "/scale"}, /* 0 as a float32 */
        {json_pack("[i]", 2), "/select_heads", "/select_heads/0"},
        {json_pack("[i,i]", 1, -1), "/select_heads", "/select_heads/1"},
        {json_pack("[i,i,i]", 1, 0, 1), "/select_heads", "/select_heads/2"},
        {json_pack("[f]", 1e300), "/select_heads", "/select_heads/0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = base_request();
        tj_put(r, cases[i].field, cases[i].value);
        expect_error(r, NULL, 422, "out_of_range", cases[i].path, NULL);
    }
}
END_TEST

/* ---- limit_exceeded: each limit at its value passes, one over fails ------ */

static void limit_pair(json_t *body, api_limits at_limit, api_limits over, const char *path) {
    attn_error err;
    api_call_free(decode_ok_limits(json_deep_copy(body), &at_limit));
    expect_error(body, &over, 422, "limit_exceeded", path, &err);
    ck_assert_msg(strstr(err.message, "max_"), "the message names the limit: %s", err.message);
}

/* The response limit is checked against a bound of the body's length: at the
 * bound the request passes and its real body fits; one byte less fails. The
 * bound is read from the message of a request refused under a tiny limit. */
static void response_limit_pair(json_t *body) {
    api_limits tiny = big_limits, at = big_limits, over = big_limits;
    attn_error err;
    size_t bound = 0, len = 0;

    tiny.max_response_bytes = 1;
    expect_error(json_deep_copy(body), &tiny, 422, "limit_exceeded", "/return", &err);
    const char *need = strstr(err.message, "need up to ");
    ck_assert_ptr_nonnull(need);
    ck_assert_int_eq(sscanf(need, "need up to %zu", &bound), 1);
    at.max_response_bytes = bound, over.max_response_bytes = bound - 1;
    api_call *req = decode_ok_limits(json_deep_copy(body), &at);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(api_call_compute(req, ws, NULL, &err, NULL), 0);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, &len, NULL, &err);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(len <= bound, "the body (%zu bytes) exceeds its bound %zu", len, bound);
    free(text);
    api_call_free(req);
    limit_pair(body, at, over, "/return");
}

START_TEST(test_limits) {
    api_limits at, over;
    api_call *bound = decode_ok(base_request());
    /* the work of the bound input, as the engine counts it */
    double flops = attn_input_flops(api_call_inputs(bound));
    size_t scratch = attn_input_workspace_need(api_call_inputs(bound));
    api_call_free(bound);

    at = over = big_limits;
    at.max_tokens = 3, over.max_tokens = 2;
    limit_pair(base_request(), at, over, "/embeddings");

    at = over = big_limits;
    at.max_heads = 2, over.max_heads = 1;
    limit_pair(base_request(), at, over, "/weights/heads");

    at = over = big_limits;
    at.max_d_model = 4, over.max_d_model = 3;
    limit_pair(base_request(), at, over, "/embeddings");

    /* d_head over the d_model limit on its own: one head of width 5 with w_o */
    json_t *r = request_with(3, 4, 1, 5);
    tj_put(r, "/weights/w_o", tj_matrix(5, 4, 9));
    at = over = big_limits;
    at.max_d_model = 5, over.max_d_model = 4;
    limit_pair(r, at, over, "/weights/heads/0/w_q");

    at = over = big_limits;
    at.max_flops = flops, over.max_flops = nextafter(flops, 0);
    limit_pair(base_request(), at, over, "");

    /* scratch: n 3, 2 heads of 2 */
    ck_assert(scratch > 0 && scratch <= attn_workspace_need(3, 4, 2, 2) + 4096);
    at = over = big_limits;
    at.max_workspace_bytes = scratch, over.max_workspace_bytes = scratch - 1;
    limit_pair(base_request(), at, over, "");

    /* response size: the default return; every output with one head; long tokens
     * of control characters (escaped as \u00XX). */
    r = base_request();
    response_limit_pair(r);
    r = base_request();
    tj_put(r, "/return",
           json_pack("[s,s,s,s,s,s,s,s]", "q", "k", "v", "scores", "patterns", "head_outputs",
                     "delta", "embeddings"));
    tj_put(r, "/select_heads", json_pack("[i]", 1));
    response_limit_pair(r);
    r = base_request();
    char ctl[301];
    memset(ctl, 1, 300), ctl[300] = '\0';
    tj_put(r, "/tokens", json_pack("[s,s,s]", ctl, ctl, "x"));
    response_limit_pair(r);

    /* NULL limits: none */
    api_call_free(decode_ok_limits(base_request(), NULL));
}
END_TEST

/* ---- the response limit at the byte -------------------------------------- */

/* n × cols of one value. */
static json_t *filled(size_t rows, size_t cols, double v) {
    json_t *m = json_array();
    for (size_t r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++)
            json_array_append_new(row, json_real(v));
        json_array_append_new(m, row);
    }
    return m;
}

static json_t *filled_vector(size_t n, double a, double b) {
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, json_real(i % 2 ? a : b));
    return v;
}

/* Decodes under `limits`, computes, encodes: the body's length. */
static size_t response_length(json_t *body, const api_limits *limits, char **text_out) {
    api_call *req = decode_ok_limits(body, limits);
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    size_t len = 0;
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(api_call_compute(req, ws, NULL, &err, NULL), 0);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, &len, NULL, &err);
    ck_assert_msg(text != NULL, "encode failed: %s", err.message);
    api_call_free(req);
    if (text_out)
        *text_out = text;
    else
        free(text);
    return len;
}

/*
 * A request whose outputs are all of the widest text a float32 gets (16
 * characters: -123456790000000 and a 9-digit -0.0000ddddddddd): zero
 * embeddings and projections, so q, k, v are their biases and delta and
 * the new embeddings are b_o. Its body's length must be the bound itself:
 * accepted with max_response_bytes at that length, the body within it,
 * and refused one byte below. Likewise as base64 (exact by construction),
 * and with the nulls of masked scores (shorter than the widest number, so
 * the body may only be shorter than the bound).
 */
START_TEST(test_response_limit_exact) {
    const size_t n = 16, dm = 32, dh = 32;
    float small = -1.23456789e-5f;
    char buf[64];
    while (api_float_format(buf, small) != 16) /* API_FLOAT_TEXT_WIDEST */
        small = nextafterf(small, -1.0f);
    const double wide = -123456790000000.0, narrow = small;
    api_float_format(buf, (float)wide);
    ck_assert_str_eq(buf, "-123456790000000");

    for (int form = 0; form < 3; form++) {
        json_t *head = json_pack(
            "{s:o,s:o,s:o,s:o,s:o,s:o}", "w_q", filled(dm, dh, 0), "w_k", filled(dm, dh, 0), "w_v",
            filled(dm, dh, 0), "b_q", filled_vector(dh, wide, narrow), "b_k",
            filled_vector(dh, narrow, wide), "b_v", filled_vector(dh, wide, wide));
        json_t *r =
            json_pack("{s:o,s:{s:[o],s:o,s:o}}", "embeddings", filled(n, dm, 0), "weights", "heads",
                      head, "w_o", filled(dh, dm, 0), "b_o", filled_vector(dm, narrow, wide));
        json_t *tokens = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(tokens, json_string(i % 2 ? "\x01\"\\\xc3\xa9/" : "t"));
        tj_put(r, "/tokens", tokens);
        if (form == 2)
            tj_put(r, "/return",
                   json_pack("[s,s,s,s,s]", "q", "scores", "v", "delta", "embeddings"));
        else
            tj_put(r, "/return", json_pack("[s,s,s,s,s]", "q", "k", "v", "delta", "embeddings"));
        if (form == 1) tj_put(r, "/encoding", json_string("base64"));

        api_limits at = big_limits, over = big_limits;
        char *text;
        size_t len = response_length(json_deep_copy(r), &big_limits, &text);
        if (form == 2) {
            ck_assert_ptr_nonnull(strstr(text, "null")); /* masked scores */
            /* the bound, from the message of a refusal */
            api_limits tiny = big_limits;
            attn_error err;
            size_t bound = 0;
            tiny.max_response_bytes = 1;
            expect_error(json_deep_copy(r), &tiny, 422, "limit_exceeded", "/return", &err);
            ck_assert_int_eq(sscanf(strstr(err.message, "need up to "), "need up to %zu", &bound),
                             1);
            ck_assert_uint_le(len, bound);
            len = bound;
        } else {
            ck_assert_ptr_null(strstr(text, "e-")); /* every number plain, none shortened */
        }
        free(text);
        at.max_response_bytes = len, over.max_response_bytes = len - 1;
        size_t got = response_length(json_deep_copy(r), &at, NULL);
        ck_assert_msg(got <= at.max_response_bytes,
                      "form %d: a body of %zu bytes under a limit of %zu", form, got,
                      at.max_response_bytes);
        if (form < 2) ck_assert_uint_eq(got, len);
        expect_error(r, &over, 422, "limit_exceeded", "/return", NULL);
    }
}
END_TEST

/* ---- bodies of many small values: refused on the text --------------------- */

/* server/config.c's defaults */
static const api_limits default_limits = {.max_tokens = 8192,
                                          .max_heads = 128,
                                          .max_d_model = 16384,
                                          .max_flops = 1e12,
                                          .max_response_bytes = (size_t)256 << 20,
                                          .max_workspace_bytes = (size_t)1 << 30,
                                          .max_json_depth = 32,
                                          .max_string_bytes = 64 << 10};

/* jansson's heap, through json_set_alloc_funcs: in use now, and its peak. */
static size_t tree_now, tree_peak;

static void *tree_malloc(size_t n) {
    size_t *p = malloc(n + sizeof(size_t) * 2);
    if (!p) return NULL;
    p[0] = n;
    tree_now += n;
    if (tree_now > tree_peak) tree_peak = tree_now;
    return p + 2;
}

static void tree_free(void *q) {
    if (!q) return;
    size_t *p = (size_t *)q - 2;
    tree_now -= p[0];
    free(p);
}

/* `head`, `item` joined by commas up to `size` bytes, `tail`. */
static char *repeat_body(const char *head, const char *item, const char *tail, size_t size) {
    size_t hl = strlen(head), il = strlen(item), tl = strlen(tail), len = hl;
    char *b = malloc(size + il + tl + 2);
    memcpy(b, head, hl);
    for (int first = 1; len + il + 1 + tl <= size; first = 0) {
        if (!first) b[len++] = ',';
        memcpy(b + len, item, il), len += il;
    }
    memcpy(b + len, tail, tl + 1);
    return b;
}

/*
 * Each shape that leaves many small values to jansson, as a 4 MiB body:
 * refused under the default limits with its status, code and path, and
 * jansson's tree never over the body's size and a few MiB (the values a
 * request within the limits can have), where it was 14 to 79 times the
 * body before any of them was looked at on the text.
 */
START_TEST(test_small_values_refused) {
    const size_t size = 4 << 20;
    /* 33920 values in all under the defaults (128 heads · 72, 3 · 8192
     * tokens, 128): root, model, embeddings and its [], x, then 1130 items
     * of 30 and 15 of the next */
    const char *nested_at = "/x/1130/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0";
    static const struct {
        const char *head, *item, *tail;
        int status;
        const char *code, *path;
    } shapes[] = {
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"tokens\":[", "{}", "]}", 400, "wrong_type",
         "/tokens/0"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"tokens\":[\"a\",", "[]", "]}", 400, "wrong_type",
         "/tokens/1"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"tok\\u0065ns\":[", "{}", "]}", 400, "wrong_type",
         "/tokens/0"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"tokens\":[", "\"\"", "]}", 422, "limit_exceeded",
         "/tokens"},
        {"{\"embeddings\":[[0]],\"weights\":{\"heads\":[", "{}", "]}}", 422, "limit_exceeded",
         "/weights/heads"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"select_heads\":[", "0", "]}", 422,
         "limit_exceeded", "/select_heads"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"return\":[", "\"q\"", "]}", 422, "limit_exceeded",
         "/return"},
        {"{\"embeddings\":[[0]],\"weights\":{\"heads\":[{", "\"a\":{}", "}]}}", 422,
         "limit_exceeded", "/weights/heads/0"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"x\":[", "[]", "]}", 422, "limit_exceeded", "/x"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"x\":[",
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "]}", 422,
         "limit_exceeded", NULL},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"scale\":[", "\"\"", "]}", 422, "limit_exceeded",
         "/scale"},
        {"{\"model\":\"m\",\"embeddings\":[[", "0", "],[0]]}", 422, "limit_exceeded",
         "/embeddings/0"},
        {"{\"model\":\"m\",\"embeddings\":[[", "0,null", "]]}", 422, "limit_exceeded",
         "/embeddings/0"},
        {"{\"model\":\"m\",\"embeddings\":[[0]],\"mask\":[", "[1,0,2]", "]}", 422, "limit_exceeded",
         "/mask"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char *body = repeat_body(shapes[i].head, shapes[i].item, shapes[i].tail, size);
        attn_error err;
        tree_now = tree_peak = 0;
        json_set_alloc_funcs(tree_malloc, tree_free);
        expect_error_len(body, strlen(body), &default_limits, shapes[i].status, shapes[i].code,
                         shapes[i].path ? shapes[i].path : nested_at, &err);
        json_set_alloc_funcs(malloc, free);
        ck_assert_msg(tree_peak <= size + ((size_t)4 << 20),
                      "%s…: jansson's tree took %zu bytes for a body of %zu", shapes[i].head,
                      tree_peak, strlen(body));
        ck_assert_msg(strstr(err.message, "max_") || strstr(err.message, "outputs") ||
                          !strcmp(err.code, "wrong_type"),
                      "%s", err.message);
        free(body);
    }
}
END_TEST

/* The largest request the contract accepts of max_tokens tokens and
 * max_heads heads passes the scan: every head's six matrices as tensor
 * objects, select_heads of every head, return of 11 names (three repeated). */
START_TEST(test_largest_accepted) {
    const size_t n = default_limits.max_tokens, h = default_limits.max_heads, dm = h, dh = 1;
    json_t *heads = json_array(), *tokens = json_array(), *sel = json_array();
    static const char *const fields[] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v"};
    for (size_t i = 0; i < h; i++) {
        json_t *hd = json_object();
        for (int f = 0; f < 6; f++) {
            size_t count = f < 3 ? dm * dh : dh;
            char *zeros = calloc(count * 4, 1), *b64 = malloc(count * 8 + 8);
            static const char alphabet[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            size_t k = 0;
            for (size_t at = 0; at < count * 4; at += 3) { /* zeros: all 'A', '=' padded */
                size_t left = count * 4 - at;
                b64[k++] = alphabet[0], b64[k++] = alphabet[0];
                b64[k++] = left > 1 ? 'A' : '=';
                b64[k++] = left > 2 ? 'A' : '=';
            }
            b64[k] = '\0';
            json_object_set_new(hd, fields[f],
                                f < 3 ? json_pack("{s:s,s:[I,I],s:s}", "dtype", "float32", "shape",
                                                  (json_int_t)dm, (json_int_t)dh, "data", b64)
                                      : json_pack("{s:s,s:[I],s:s}", "dtype", "float32", "shape",
                                                  (json_int_t)dh, "data", b64));
            free(zeros), free(b64);
        }
        json_array_append_new(heads, hd);
        json_array_append_new(sel, json_integer((json_int_t)(h - 1 - i)));
    }
    for (size_t i = 0; i < n; i++) {
        char t[32];
        snprintf(t, sizeof t, "t%zu", i);
        json_array_append_new(tokens, json_string(t));
    }
    json_t *r = json_pack("{s:o,s:o,s:o,s:[s,s,s,s,s,s,s,s,s,s,s],s:s,s:{s:o}}", "embeddings",
                          filled(n, dm, 0.5), "tokens", tokens, "select_heads", sel, "return", "q",
                          "k", "v", "head_outputs", "delta", "embeddings", "q", "k", "q_raw",
                          "k_raw", "v", "mask", "causal", "weights", "heads", heads);
    api_call *req = decode_ok_limits(json_deep_copy(r), &default_limits);
    ck_assert_uint_eq(api_call_inputs(req)->n_tokens, n);
    ck_assert_uint_eq(api_call_inputs(req)->weights->n_heads, h);
    api_call_free(req);
    /* one more token, head, selected head or name is refused on the text */
    json_t *over = json_deep_copy(r);
    json_array_append_new(json_object_get(over, "tokens"), json_string("x"));
    expect_error(over, &default_limits, 422, "limit_exceeded", "/tokens", NULL);
    over = json_deep_copy(r);
    json_array_append_new(json_object_get(over, "return"), json_string("q"));
    expect_error(over, &default_limits, 422, "limit_exceeded", "/return", NULL);
    over = json_deep_copy(r);
    json_array_append_new(json_object_get(over, "select_heads"), json_integer(0));
    expect_error(over, &default_limits, 422, "limit_exceeded", "/select_heads", NULL);
    json_t *wh = tj_at(r, "weights/heads");
    json_array_append(wh, json_array_get(wh, 0));
    expect_error(r, &default_limits, 422, "limit_exceeded", "/weights/heads", NULL);
}
END_TEST

/* ---- packing of inline weights ------------------------------------------ */

START_TEST(test_weights_packing) {
    json_t *r = base_request();
    json_t *copy = json_deep_copy(r);
    tj_put(r, "/weights/heads/1/b_k", tj_vector(2, 50));
    api_call *req = decode_ok(r);
    const attn_weights *w = api_call_inputs(req)->weights;
    size_t dm = 4, dh = 2, h = 2, hd = 4;
    static const char *const names[] = {"w_q", "w_k", "w_v"};

    ck_assert_uint_eq(w->d_model, dm);
    ck_assert_uint_eq(w->n_heads, h);
    ck_assert_uint_eq(w->d_head, dh);
    ck_assert_ptr_null(w->w_o);
    ck_assert_ptr_null(w->b_o);
    for (size_t i = 0; i < h; i++)
        for (size_t p = 0; p < 3; p++) {
            char path[64];
            snprintf(path, sizeof path, "weights/heads/%zu/%s", i, names[p]);
            json_t *m = tj_at(copy, path);
            for (size_t r_ = 0; r_ < dm; r_++)
                for (size_t c = 0; c < dh; c++)
                    ck_assert(w->w_qkv[r_ * 3 * hd + p * hd + i * dh + c] ==
                              (float)tf_num(json_array_get(json_array_get(m, r_), c)));
        }
    ck_assert_ptr_nonnull(w->b_qkv);
    for (size_t c = 0; c < 3 * hd; c++) {
        float expect = (c == hd + dh || c == hd + dh + 1) ? (float)tj_val(50 + c - hd - dh) : 0.0f;
        ck_assert(w->b_qkv[c] == expect);
    }
    api_call_free(req);

    req = decode_ok(copy);
    ck_assert_ptr_null(api_call_inputs(req)->weights->b_qkv);
    /* defaults: causal, 1/sqrt(d_head), every head in order */
    ck_assert_int_eq(api_call_inputs(req)->mask.kind, ATTN_MASK_CAUSAL);
    ck_assert(api_call_inputs(req)->scale == (float)(1 / sqrt(2.0)));
    ck_assert_uint_eq(api_call_inputs(req)->n_heads_out, 2);
    ck_assert_uint_eq(api_call_inputs(req)->heads[0], 0);
    ck_assert_uint_eq(api_call_inputs(req)->heads[1], 1);
    ck_assert_ptr_null(api_call_model(req, NULL));
    api_call_free(req);
}
END_TEST

/* ---- model requests: decode leaves them unbound, bind does the rest ----- */

START_TEST(test_model_bind) {
    api_call *inline_req = decode_ok(base_request());
    const attn_weights *w = api_call_inputs(inline_req)->weights;
    attn_error err;
    json_t *resp;

    api_call *req = decode_ok(json_pack("{s:s, s:o, s:[i,i]}", "model", "tiny-2.v1_x", "embeddings",
                                        tj_matrix(3, 4, 7), "select_heads", 1, 0));
    ck_assert_str_eq(api_call_model(req, NULL), "tiny-2.v1_x");
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_NONE, NULL, NULL, 0},
                                   &big_limits, &err),
                     0);
    ck_assert_int_eq(api_call_inputs(req)->mask.kind, ATTN_MASK_NONE);
    resp = respond(req, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "model")), "tiny-2.v1_x");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "none");
    json_decref(resp);
    /* bound once only */
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_NONE, NULL, NULL, 0},
                                   &big_limits, &err),
                     -1);
    ck_assert_int_eq(err.status, 500);
    api_call_free(req);

    /* a request's mask overrides the model's */
    req = decode_ok(json_pack("{s:s, s:o, s:s}", "model", "m", "embeddings", tj_matrix(3, 4, 7),
                              "mask", "causal"));
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_NONE, NULL, NULL, 0},
                                   &big_limits, &err),
                     0);
    ck_assert_int_eq(api_call_inputs(req)->mask.kind, ATTN_MASK_CAUSAL);
    api_call_free(req);

    /* checks that need the model's weights */
    req = decode_ok(json_pack("{s:s, s:o}", "model", "m", "embeddings", tj_matrix(3, 5, 7)));
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &big_limits, &err),
                     -1);
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "dimension_mismatch");
    ck_assert_str_eq(err.path, "/embeddings");
    api_call_free(req);

    req = decode_ok(json_pack("{s:s, s:o, s:[i]}", "model", "m", "embeddings", tj_matrix(3, 4, 7),
                              "select_heads", 2));
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &big_limits, &err),
                     -1);
    ck_assert_str_eq(err.code, "out_of_range");
    ck_assert_str_eq(err.path, "/select_heads/0");
    api_call_free(req);

    /* a name is any string to decode: what a model's name may be is the
     * store's rule, which the server applies (tests/test_http.c); the echo
     * escapes what it must, NUL bytes included */
    req = decode_ok(json_pack("{s:o, s:o}", "model", json_stringn("a \"b\"\0c", 7), "embeddings",
                              tj_matrix(3, 4, 7)));
    size_t name_len = 0;
    ck_assert_ptr_nonnull(api_call_model(req, &name_len));
    ck_assert_uint_eq(name_len, 7);
    ck_assert_int_eq(api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0},
                                   &big_limits, &err),
                     0);
    resp = respond(req, NULL);
    ck_assert_uint_eq(json_string_length(json_object_get(resp, "model")), 7);
    ck_assert(memcmp(json_string_value(json_object_get(resp, "model")), "a \"b\"\0c", 7) == 0);
    json_decref(resp);
    api_call_free(req);

    api_limits few = big_limits;
    few.max_heads = 1;
    req = decode_ok(json_pack("{s:s, s:o}", "model", "m", "embeddings", tj_matrix(3, 4, 7)));
    ck_assert_int_eq(
        api_call_bind(req, &(api_model_ref){NULL, w, ATTN_MASK_CAUSAL, NULL, NULL, 0}, &few, &err),
        -1);
    ck_assert_str_eq(err.code, "limit_exceeded");
    ck_assert_str_eq(err.path, "/model");
    api_call_free(req);

    api_call_free(inline_req);
}
END_TEST

/* ---- responses ----------------------------------------------------------- */

/* Row t, column c of E · W for W = weights.heads[i].<w> of a base_request body,
 * in double. */
static double ref_proj(json_t *body, size_t head_i, const char *w, size_t t, size_t c) {
    char path[64];
    double s = 0;
    json_t *e = json_array_get(json_object_get(body, "embeddings"), t);
    snprintf(path, sizeof path, "weights/heads/%zu/%s", head_i, w);
    for (size_t j = 0; j < 4; j++)
        s += tf_num(json_array_get(e, j)) *
             tf_num(json_array_get(json_array_get(tj_at(body, path), j), c));
    return s;
}

/* Decodes, computes, encodes and parses back; frees the request. */
static json_t *respond_body(json_t *body, char **raw) {
    api_call *req = decode_ok(body);
    json_t *resp = respond(req, raw);
    api_call_free(req);
    return resp;
}

/* The compact text of v equals `text`. */
static void dump_eq(const json_t *v, const char *text) {
    char *got;
    ck_assert_ptr_nonnull(v);
    got = dump(v);
    ck_assert_str_eq(got, text);
    free(got);
}

START_TEST(test_return_each_alone) {
    for (size_t o = 0; o < 8; o++) {
        json_t *r = base_request();
        tj_put(r, "/return", json_pack("[s]", output_names[o]));
        json_t *resp = respond_body(r, NULL);
        for (size_t k = 0; k < 8; k++)
            ck_assert_msg((json_object_get(resp, output_names[k]) != NULL) == (k == o),
                          "return [%s]: field %s", output_names[o], output_names[k]);
        json_t *v = json_object_get(resp, output_names[o]);
        if (o <= 2 || o == 5)
            check_per_head_shape(v, 2, 3, 2, 0);
        else if (o == 3)
            check_per_head_shape(v, 2, 3, 3, 1);
        else if (o == 4)
            check_per_head_shape(v, 2, 3, 3, 0);
        else
            check_matrix_shape(v, 3, 4, 0);
        ck_assert_ptr_null(json_object_get(resp, "tokens"));
        json_decref(resp);
    }
}
END_TEST

/* ---- a stack of inline layers ------------------------------------------ */

/* A matrix of rows × cols numbers in [-1, 1) from *seed. */
static json_t *stack_matrix(size_t rows, size_t cols, unsigned *seed) {
    json_t *m = json_array();
    for (size_t r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++) {
            *seed = *seed * 1103515245u + 12345u;
            json_array_append_new(row, json_real((double)(*seed >> 8 & 0xffff) / 32768.0 - 1.0));
        }
        json_array_append_new(m, row);
    }
    return m;
}

/* Largest |got − want| over a JSON matrix (rows × cols) against doubles. */
static double stack_diff(const json_t *got, const double *want, size_t rows, size_t cols) {
    double worst = 0;
    ck_assert_uint_eq(json_array_size(got), rows);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double d = fabs(json_number_value(json_array_get(json_array_get(got, r), c)) -
                            want[r * cols + c]);
            if (d > worst) worst = d;
        }
    return worst;
}

/* How a stack's answer is asked for: from the embeddings, or from hidden
 * states (with the embeddings sent beside them, or without). */
enum { STACK_EMBEDDINGS, STACK_HIDDEN_WITH_E, STACK_HIDDEN_ALONE };

static void check_stack_input(size_t L, const char *layers_field, int from);

static void check_stack_answer(size_t L, const char *layers_field) {
    check_stack_input(L, layers_field, STACK_EMBEDDINGS);
}

/* An inline stack of L layers (a scale on layer 1, biases and w_o on some)
 * over HTTP's decoder and encoder, every listed layer's patterns, delta
 * and embeddings and the stack's own against the float64 reference. */
static void check_stack_input(size_t L, const char *layers_field, int from) {
    const size_t n = 5, dm = 4, h = 2, dh = 2;
    unsigned seed = 7 + (unsigned)L;
    json_t *body = json_object(), *sets = json_array();
    if (from != STACK_HIDDEN_ALONE)
        json_object_set_new(body, "embeddings", stack_matrix(n, dm, &seed));
    if (from != STACK_EMBEDDINGS) {
        json_t *hidden = json_array();
        for (size_t l = 0; l < L; l++)
            json_array_append_new(hidden, stack_matrix(n, dm, &seed));
        json_object_set_new(body, "hidden_states", hidden);
    }
    for (size_t l = 0; l < L; l++) {
        json_t *set = json_object(), *heads = json_array();
        for (size_t i = 0; i < h; i++) {
            json_t *head = json_object();
            json_object_set_new(head, "w_q", stack_matrix(dm, dh, &seed));
            json_object_set_new(head, "w_k", stack_matrix(dm, dh, &seed));
            json_object_set_new(head, "w_v", stack_matrix(dm, dh, &seed));
            json_array_append_new(heads, head);
        }
        json_object_set_new(set, "heads", heads);
        if (l % 2 == 0) json_object_set_new(set, "w_o", stack_matrix(h * dh, dm, &seed));
        if (l == 1) json_object_set_new(set, "scale", json_real(0.25));
        json_array_append_new(sets, set);
    }
    json_object_set_new(body, "weights", json_pack("{s:o}", "layers", sets));
    json_object_set_new(body, "return",
                        json_pack("[s,s,s,s]", "patterns", "delta", "rollout", "embeddings"));
    if (layers_field) json_object_set_new(body, "layers", json_loads(layers_field, 0, NULL));
    size_t want_listed = layers_field ? json_array_size(json_object_get(body, "layers")) : L;
    api_call *c = decode_ok(body); /* takes body */
    const attn_stack *st = api_call_stack(c);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->n_layers, L);
    json_t *resp = respond(c, NULL);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_layers")), (double)L);

    const attn_input *in = api_call_inputs(c);
    attn_naive_layer lay[4] = {{0}};
    double *final = calloc(n * dm, sizeof(double));
    double *scratch = calloc(attn_stack_naive_scratch(in, st), sizeof(double));
    for (size_t l = 0; l < L; l++)
        lay[l] = (attn_naive_layer){.patterns = calloc(h * n * n, sizeof(double)),
                                    .delta = calloc(n * dm, sizeof(double)),
                                    .embeddings = calloc(n * dm, sizeof(double))};
    if (from != STACK_EMBEDDINGS) ck_assert_ptr_nonnull(st->hidden_states);
    attn_stack_naive(lay, from == STACK_EMBEDDINGS ? final : NULL, scratch, in, 0, st);

    const json_t *got_layers = json_object_get(resp, "layers");
    size_t listed = json_array_size(got_layers);
    ck_assert_uint_eq(listed, want_listed);
    for (size_t i = 0; i < listed; i++) {
        const json_t *e = json_array_get(got_layers, i);
        size_t l = (size_t)tf_num(json_object_get(e, "layer"));
        ck_assert_uint_lt(l, L);
        float want_scale = l == 1 ? 0.25f : (float)(1 / sqrt((double)dh));
        ck_assert((float)tf_num(json_object_get(e, "scale")) == want_scale);
        dump_eq(json_object_get(e, "heads"), "[0,1]");
        for (size_t k = 0; k < h; k++)
            ck_assert_double_lt(stack_diff(json_array_get(json_object_get(e, "patterns"), k),
                                           lay[l].patterns + k * n * n, n, n),
                                1e-5);
        ck_assert_double_lt(stack_diff(json_object_get(e, "delta"), lay[l].delta, n, dm), 1e-4);
        ck_assert_double_lt(stack_diff(json_object_get(e, "embeddings"), lay[l].embeddings, n, dm),
                            1e-4);
    }
    ck_assert_ptr_null(json_object_get(resp, "patterns"));
    if (from == STACK_EMBEDDINGS) {
        ck_assert_double_lt(stack_diff(json_object_get(resp, "embeddings"), final, n, dm), 1e-4);
        for (size_t i = 0; i < n * dm; i++) /* E_L − E_0 */
            final[i] -= in->embeddings[i];
        ck_assert_double_lt(stack_diff(json_object_get(resp, "delta"), final, n, dm), 1e-4);
    } else { /* no residual stream: nothing at the top */
        ck_assert_ptr_null(json_object_get(resp, "embeddings"));
        ck_assert_ptr_null(json_object_get(resp, "delta"));
    }
    /* the rollout, at the top, of every layer whatever the listed ones */
    const double *pats[4];
    for (size_t l = 0; l < L; l++)
        pats[l] = lay[l].patterns;
    double *R = calloc(n * n, sizeof(double)), *rs = calloc(2 * n * n, sizeof(double));
    attn_rollout_naive(R, rs, pats, n, h, L);
    ck_assert_double_lt(stack_diff(json_object_get(resp, "rollout"), R, n, n), 1e-5);
    free(R), free(rs);
    /* the top-level scale is layer 0's */
    ck_assert((float)tf_num(json_object_get(resp, "scale")) == (float)(1 / sqrt((double)dh)));

    for (size_t l = 0; l < L; l++) {
        free(lay[l].patterns);
        free(lay[l].delta);
        free(lay[l].embeddings);
    }
    free(final);
    free(scratch);
    json_decref(resp);
    api_call_free(c);
}

START_TEST(test_stack_two_layers) {
    check_stack_answer(2, NULL);
}
END_TEST

/* hidden_states: layer l reads hidden_states[l], its embeddings are
 * hidden_states[l] + ΔE_l; with or without embeddings, and for one layer
 * the stack's form too. */
START_TEST(test_stack_hidden_states) {
    check_stack_input(2, NULL, STACK_HIDDEN_WITH_E);
    check_stack_input(2, NULL, STACK_HIDDEN_ALONE);
    check_stack_input(3, "[2, 0]", STACK_HIDDEN_ALONE);
    check_stack_input(1, NULL, STACK_HIDDEN_ALONE);
}
END_TEST

START_TEST(test_stack_three_layers_listed) {
    check_stack_answer(3, NULL);
    check_stack_answer(3, "[2, 0]");
}
END_TEST

/* A weight set given as a list of one layer, with no `layers` field, is one
 * layer answered as before: the same answer, numbers and all, as the
 * weight set alone (and no stack is computed). */
START_TEST(test_one_layer_list_as_before) {
    unsigned seed = 11;
    json_t *e = stack_matrix(4, 4, &seed), *head = json_object();
    json_object_set_new(head, "w_q", stack_matrix(4, 2, &seed));
    json_object_set_new(head, "w_k", stack_matrix(4, 2, &seed));
    json_object_set_new(head, "w_v", stack_matrix(4, 2, &seed));
    json_t *set = json_pack("{s:[o],s:o}", "heads", head, "w_o", stack_matrix(2, 4, &seed));
    json_t *ret = json_pack("[s,s,s]", "patterns", "head_outputs", "delta");
    json_t *plain = json_pack("{s:O,s:O,s:O}", "embeddings", e, "weights", set, "return", ret);
    json_t *listed =
        json_pack("{s:o,s:{s:[o]},s:o}", "embeddings", e, "weights", "layers", set, "return", ret);
    json_t *want = respond_body(plain, NULL);
    api_call *c = decode_ok(listed);
    ck_assert_ptr_null(api_call_stack(c));
    json_t *got = respond(c, NULL);
    api_call_free(c);
    char *a = json_dumps(want, JSON_SORT_KEYS), *b = json_dumps(got, JSON_SORT_KEYS);
    ck_assert_str_eq(b, a);
    free(a), free(b);
    json_decref(want), json_decref(got);
}
END_TEST

/* One layer asks for its rollout and lists one head: the answer is as
 * before (that head's patterns, no "layers") with the rollout beside it,
 * Â_0 of the mean of both heads' patterns, and n_layers 1. */
START_TEST(test_rollout_one_layer) {
    unsigned seed = 19;
    const size_t n = 4, dm = 4, h = 2, dh = 2;
    json_t *heads = json_array();
    for (size_t i = 0; i < h; i++)
        json_array_append_new(heads, json_pack("{s:o,s:o,s:o}", "w_q", stack_matrix(dm, dh, &seed),
                                               "w_k", stack_matrix(dm, dh, &seed), "w_v",
                                               stack_matrix(dm, dh, &seed)));
    json_t *body = json_pack("{s:o,s:{s:o},s:[i],s:[s,s],s:s}", "embeddings",
                             stack_matrix(n, dm, &seed), "weights", "heads", heads, "select_heads",
                             1, "return", "rollout", "patterns", "mask", "none");
    api_call *c = decode_ok(body); /* takes body */
    ck_assert_ptr_nonnull(api_call_stack(c));
    json_t *resp = respond(c, NULL);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_layers")), 1);
    ck_assert_ptr_null(json_object_get(resp, "layers"));
    ck_assert_uint_eq(json_array_size(json_object_get(resp, "patterns")), 1);

    const attn_input *in = api_call_inputs(c);
    attn_stack one = {.layers = &in->weights, .n_layers = 1};
    attn_naive_layer lay = {.patterns = calloc(h * n * n, sizeof(double))};
    double *scratch = calloc(attn_stack_naive_scratch(in, &one), sizeof(double));
    attn_stack_naive(&lay, NULL, scratch, in, 0, &one);
    ck_assert_double_lt(stack_diff(json_array_get(json_object_get(resp, "patterns"), 0),
                                   lay.patterns + n * n, n, n),
                        1e-5);
    const double *pats[1] = {lay.patterns};
    double *R = calloc(n * n, sizeof(double)), *rs = calloc(2 * n * n, sizeof(double));
    attn_rollout_naive(R, rs, pats, n, h, 1);
    ck_assert_double_lt(stack_diff(json_object_get(resp, "rollout"), R, n, n), 1e-6);
    free(R), free(rs), free(lay.patterns), free(scratch);
    json_decref(resp);
    api_call_free(c);
}
END_TEST

/* A layer's fault is named at its path, and its message says which layer
 * (the weight-set decoder's words name the fields weights.…). */
START_TEST(test_stack_error_names_layer) {
    const char *text = "{\"embeddings\":[[1,0],[0,1]],\"weights\":{\"layers\":["
                       "{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[1,0],[0,1]],"
                       "\"w_v\":[[1,0],[0,1]]}]},"
                       "{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[1,0]],"
                       "\"w_v\":[[1,0],[0,1]]}]}]}}";
    attn_error err;
    expect_error_len(text, strlen(text), &big_limits, 422, "dimension_mismatch",
                     "/weights/layers/1/heads/0/w_k", &err);
    ck_assert_msg(!strncmp(err.message, "layer 1: ", 9), "%s", err.message);
}
END_TEST

/* Scores that overflow in a later layer: the engine's non-finite error
 * names that layer. */
START_TEST(test_stack_nonfinite_names_layer) {
    unsigned seed = 23;
    json_t *sets = json_array();
    for (size_t l = 0; l < 2; l++) {
        json_t *wq = stack_matrix(4, 2, &seed), *wk = stack_matrix(4, 2, &seed);
        if (l == 1) /* Q·K past float32 */
            for (size_t r = 0; r < 4; r++)
                for (size_t c = 0; c < 2; c++) {
                    json_array_set_new(json_array_get(wq, r), c, json_real(1e30));
                    json_array_set_new(json_array_get(wk, r), c, json_real(1e30));
                }
        json_array_append_new(sets, json_pack("{s:[{s:o,s:o,s:o}],s:o}", "heads", "w_q", wq, "w_k",
                                              wk, "w_v", stack_matrix(4, 2, &seed), "w_o",
                                              stack_matrix(2, 4, &seed)));
    }
    json_t *body = json_pack("{s:o,s:{s:o},s:[s]}", "embeddings", stack_matrix(3, 4, &seed),
                             "weights", "layers", sets, "return", "embeddings");
    api_call *c = decode_ok(body); /* takes body */
    ck_assert_int_eq(api_call_alloc_outputs(c, NULL, NULL), 0);
    attn_workspace *ws = attn_workspace_create();
    attn_error err = {0};
    size_t failed;
    ck_assert_int_eq(api_call_compute(c, ws, NULL, &err, &failed), -1);
    ck_assert_ptr_eq(err.code, ATTN_ERR_NONFINITE);
    ck_assert_msg(!strncmp(err.message, "layer 1: ", 9), "%s", err.message);
    attn_workspace_destroy(ws);
    api_call_free(c);
}
END_TEST

/* The limits count every layer: the work of a stack is its layers'. */
START_TEST(test_stack_limits_every_layer) {
    unsigned seed = 3;
    json_t *body = json_object(), *sets = json_array();
    json_object_set_new(body, "embeddings", stack_matrix(3, 4, &seed));
    for (size_t l = 0; l < 3; l++) {
        json_t *head = json_object();
        json_object_set_new(head, "w_q", stack_matrix(4, 4, &seed));
        json_object_set_new(head, "w_k", stack_matrix(4, 4, &seed));
        json_object_set_new(head, "w_v", stack_matrix(4, 4, &seed));
        json_array_append_new(sets, json_pack("{s:[o]}", "heads", head));
    }
    json_object_set_new(body, "weights", json_pack("{s:o}", "layers", sets));
    api_call *c = decode_ok(body); /* takes body */
    const attn_stack *st = api_call_stack(c);
    ck_assert(api_call_cost(c) == attn_stack_flops(api_call_inputs(c), 1, st));
    attn_input one = api_call_inputs(c)[0];
    ck_assert(api_call_cost(c) == 3 * attn_batch_flops(&one, 1));
    api_call_free(c);
}
END_TEST

START_TEST(test_response_defaults) {
    char *raw;
    json_t *resp = respond_body(base_request(), &raw);
    static const char *const order[] = {
        "\"model\":",      "\"n_tokens\":", "\"d_model\":",  "\"n_heads\":",
        "\"n_kv_heads\":", "\"d_head\":",   "\"n_layers\":", "\"mask\":",
        "\"scale\":",      "\"heads\":",    "\"patterns\":", "\"embeddings\":"};
    const char *prev = raw;

    ck_assert(json_is_null(json_object_get(resp, "model")));
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_tokens")), 3);
    ck_assert_int_eq(tf_num(json_object_get(resp, "d_model")), 4);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_heads")), 2);
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_kv_heads")), 2); /* h without kv_heads */
    ck_assert_int_eq(tf_num(json_object_get(resp, "d_head")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "causal");
    ck_assert((float)tf_num(json_object_get(resp, "scale")) == (float)(1 / sqrt(2.0)));
    dump_eq(json_object_get(resp, "heads"), "[0,1]");
    ck_assert_int_eq(tf_num(json_object_get(resp, "n_layers")), 1); /* one layer, as before */
    ck_assert_uint_eq(json_object_size(resp), 12);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *p = strstr(raw, order[i]);
        ck_assert_msg(p && p >= prev, "field order at %s", order[i]);
        prev = p;
    }
    /* causal patterns: rows sum to 1, masked entries exactly 0 */
    for (size_t i = 0; i < 2; i++)
        for (size_t q = 0; q < 3; q++) {
            double s = 0;
            for (size_t k = 0; k < 3; k++) {
                double p = tf_num(json_array_get(
                    json_array_get(json_array_get(json_object_get(resp, "patterns"), i), q), k));
                if (k > q) ck_assert(p == 0);
                s += p;
            }
            ck_assert(fabs(s - 1) < 1e-6);
        }
    free(raw);
    json_decref(resp);

    /* an empty return list: no outputs at all */
    json_t *r = base_request();
    tj_put(r, "/return", json_array());
    resp = respond_body(r, NULL);
    for (size_t k = 0; k < 8; k++)
        ck_assert_ptr_null(json_object_get(resp, output_names[k]));
    json_decref(resp);
}
END_TEST

START_TEST(test_response_numbers) {
    json_t *r = base_request();
    json_t *body = json_deep_copy(r);
    tj_put(r, "/return",
           json_pack("[s,s,s,s,s,s]", "q", "k", "scores", "patterns", "delta", "embeddings"));
    tj_put(r, "/scale", json_real(0.75));
    json_t *resp = respond_body(r, NULL);
    json_t *q = json_object_get(resp, "q"), *k = json_object_get(resp, "k");
    json_t *scores = json_object_get(resp, "scores");

    ck_assert(tf_num(json_object_get(resp, "scale")) == 0.75);
    for (size_t i = 0; i < 2; i++)
        for (size_t t = 0; t < 3; t++)
            for (size_t c = 0; c < 2; c++) {
                ck_assert(fabs(tf_num(json_array_get(json_array_get(json_array_get(q, i), t), c)) -
                               ref_proj(body, i, "w_q", t, c)) < 1e-5);
                ck_assert(fabs(tf_num(json_array_get(json_array_get(json_array_get(k, i), t), c)) -
                               ref_proj(body, i, "w_k", t, c)) < 1e-5);
            }
    /* scores: 0.75 · q · kᵀ where allowed, null where masked (causal) */
    for (size_t i = 0; i < 2; i++)
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 3; b++) {
                json_t *s = json_array_get(json_array_get(json_array_get(scores, i), a), b);
                if (b > a) {
                    ck_assert(json_is_null(s));
                    continue;
                }
                double ref = 0;
                for (size_t c = 0; c < 2; c++)
                    ref += ref_proj(body, i, "w_q", a, c) * ref_proj(body, i, "w_k", b, c);
                ck_assert(fabs(tf_num(s) - 0.75 * ref) < 1e-5);
            }
    /* E' = E + ΔE */
    for (size_t t = 0; t < 3; t++)
        for (size_t c = 0; c < 4; c++)
            ck_assert(
                fabs(tf_num(json_array_get(json_array_get(json_object_get(resp, "embeddings"), t),
                                           c)) -
                     tf_num(json_array_get(json_array_get(json_object_get(resp, "delta"), t), c)) -
                     tf_num(json_array_get(json_array_get(json_object_get(body, "embeddings"), t),
                                           c))) < 1e-5);
    json_decref(resp);
    json_decref(body);
}
END_TEST

START_TEST(test_select_heads_order) {
    json_t *r = base_request();
    tj_put(r, "/return", json_pack("[s,s]", "q", "patterns"));
    json_t *all = respond_body(json_deep_copy(r), NULL);
    tj_put(r, "/select_heads", json_pack("[i,i]", 1, 0));
    json_t *swapped = respond_body(json_deep_copy(r), NULL);
    tj_put(r, "/select_heads", json_array());
    json_t *none = respond_body(r, NULL);

    dump_eq(json_object_get(swapped, "heads"), "[1,0]");
    ck_assert(json_equal(json_array_get(json_object_get(swapped, "q"), 0),
                         json_array_get(json_object_get(all, "q"), 1)));
    ck_assert(json_equal(json_array_get(json_object_get(swapped, "q"), 1),
                         json_array_get(json_object_get(all, "q"), 0)));
    ck_assert(json_equal(json_array_get(json_object_get(swapped, "patterns"), 0),
                         json_array_get(json_object_get(all, "patterns"), 1)));
    dump_eq(json_object_get(none, "heads"), "[]");
    dump_eq(json_object_get(none, "q"), "[]");
    dump_eq(json_object_get(none, "patterns"), "[]");
    json_decref(all);
    json_decref(swapped);
    json_decref(none);
}
END_TEST

START_TEST(test_tokens_echo) {
    /* "\u0000", non-ASCII as escapes and as raw UTF-8, a surrogate pair, quotes */
    const char *text = "{\"tokens\":[\"a\\u0000b\",\"\xe6\x88\x91\\u00e9\",\"\\ud83d\\ude00\\\"\"],"
                       "\"embeddings\":[[1,0],[0,1],[1,1]],"
                       "\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],\"w_k\":[[1],[0]],"
                       "\"w_v\":[[1],[0]]}],\"w_o\":[[1,0]]},\"return\":[]}";
    api_call *req = NULL;
    attn_error err;
    char *raw;

    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &big_limits, &req, &err), 0);
    json_t *resp = respond(req, &raw);
    json_t *tokens = json_object_get(resp, "tokens");
    ck_assert_uint_eq(json_array_size(tokens), 3);
    ck_assert_uint_eq(json_string_length(json_array_get(tokens, 0)), 3);
    ck_assert(memcmp(json_string_value(json_array_get(tokens, 0)), "a\0b", 3) == 0);
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 1)), "\xe6\x88\x91\xc3\xa9");
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 2)), "\xf0\x9f\x98\x80\"");
    ck_assert_ptr_nonnull(strstr(raw, "\"a\\u0000b\""));
    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "causal");
    /* "tokens" comes right after "scale" and before "heads" */
    ck_assert(strstr(raw, "\"scale\":") < strstr(raw, "\"tokens\":"));
    ck_assert(strstr(raw, "\"tokens\":") < strstr(raw, "\"heads\":"));
    free(raw);
    json_decref(resp);
    api_call_free(req);
}
END_TEST

START_TEST(test_custom_mask) {
    json_t *r = base_request();
    /* booleans and 0/1 mixed; row 1 allows nothing: all zeros, not NaN */
    tj_put(r, "/mask", json_pack("[[b,i,b],[i,b,i],[f,b,b]]", 1, 0, 0, 0, 0, 0, 1.0, 1, 1));
    tj_put(r, "/return", json_pack("[s,s]", "scores", "patterns"));
    json_t *resp = respond_body(r, NULL);
    json_t *p = json_array_get(json_object_get(resp, "patterns"), 0);
    json_t *s = json_array_get(json_object_get(resp, "scores"), 1);

    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "custom");
    dump_eq(json_array_get(p, 1), "[0,0,0]");
    ck_assert(tf_num(json_array_get(json_array_get(p, 0), 0)) == 1);
    ck_assert(json_is_null(json_array_get(json_array_get(s, 1), 0)));
    ck_assert(json_is_null(json_array_get(json_array_get(s, 0), 1)));
    ck_assert(json_is_number(json_array_get(json_array_get(s, 2), 1)));
    json_decref(resp);

    r = base_request();
    tj_put(r, "/mask", json_string("none"));
    tj_put(r, "/return", json_pack("[s]", "scores"));
    resp = respond_body(r, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "mask")), "none");
    check_per_head_shape(json_object_get(resp, "scores"), 2, 3, 3, 0);
    json_decref(resp);
}
END_TEST

/* Finite inputs whose results overflow float32 where the engine does not
 * look (values, outputs): the answer is a 422 naming the output, never a NaN
 * or an Infinity in the JSON. (Overflowing scores are the engine's
 * ATTN_ERR_NONFINITE, tested in test_attention.) */
static void expect_overflow(const char *w_q, const char *w_v, const char *returns,
                            const char *output_in_message) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"embeddings\":[[1e20,0],[0,1e20]],\"mask\":\"none\",\"return\":%s,"
             "\"weights\":{\"heads\":[{\"w_q\":%s,\"w_k\":[[0,0],[0,0]],\"w_v\":%s}]}}",
             returns, w_q, w_v);
    api_call *req = NULL;
    attn_error err;
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &big_limits, &req, &err), 0);
    attn_workspace *ws = attn_workspace_create();
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(api_call_compute(req, ws, NULL, &err, NULL), 0);
    attn_workspace_destroy(ws);
    size_t len = 0;
    ck_assert_ptr_null(api_call_encode(req, &len, NULL, &err));
    ck_assert_int_eq(err.status, 422);
    ck_assert_str_eq(err.code, "non_finite_number");
    ck_assert_msg(strstr(err.message, output_in_message) != NULL, "message: %s", err.message);
    api_call_free(req);
}

START_TEST(test_overflow_in_result) {
    const char *small = "[[1,0],[0,1]]", *huge = "[[1e20,0],[0,1e20]]";
    expect_overflow(small, huge, "[\"v\"]", "v of head 0, row 0, column 0");
    expect_overflow(small, huge, "[\"head_outputs\"]", "head_outputs of head 0");
    expect_overflow(small, huge, "[\"embeddings\"]", "embeddings row 0, column 0");
    expect_overflow(huge, small, "[\"q\"]", "q of head 0, row 0");
    /* the same overflow, not asked for: the answer is fine (scores are 0) */
    const char *ok = "{\"embeddings\":[[1e20,0],[0,1e20]],\"return\":[\"q\",\"patterns\"],"
                     "\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[0,0],[0,0]],"
                     "\"w_v\":[[1e20,0],[0,1e20]]}]}}";
    api_call *req = NULL;
    attn_error err;
    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, ok, strlen(ok), &big_limits, &req, &err), 0);
    json_t *resp = respond(req, NULL);
    json_t *q00 =
        json_array_get(json_array_get(json_array_get(json_object_get(resp, "q"), 0), 0), 0);
    ck_assert((float)tf_num(q00) == 1e20f);
    json_decref(resp);
    api_call_free(req);
}
END_TEST

START_TEST(test_biases_and_w_o) {
    /* one head with biases and w_o: checked against a double reference */
    const char *text = "{\"embeddings\":[[1,2],[3,-1]],"
                       "\"weights\":{\"heads\":[{\"w_q\":[[1],[0]],\"w_k\":[[0],[1]],"
                       "\"w_v\":[[1],[1]],\"b_q\":[0.5],\"b_v\":[-1]}],"
                       "\"w_o\":[[2,-1]],\"b_o\":[0.25,0]},"
                       "\"mask\":\"none\",\"return\":[\"q\",\"v\",\"delta\"]}";
    api_call *req = NULL;
    attn_error err;

    ck_assert_int_eq(
        api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), &big_limits, &req, &err), 0);
    json_t *resp = respond(req, NULL);
    dump_eq(json_object_get(resp, "q"), "[[[1.5],[3.5]]]");
    dump_eq(json_object_get(resp, "v"), "[[[2],[1]]]");
    /* k = [2, -1]; scores = q·k / sqrt(1): row 0 [3, -1.5], row 1 [7, -3.5] */
    double p00 = 1 / (1 + exp(-4.5)), p10 = 1 / (1 + exp(-10.5));
    double z0 = p00 * 2 + (1 - p00) * 1, z1 = p10 * 2 + (1 - p10) * 1;
    json_t *d = json_object_get(resp, "delta");
    ck_assert(fabs(tf_num(tj_at(d, "0/0")) - (2 * z0 + 0.25)) < 1e-5);
    ck_assert(fabs(tf_num(tj_at(d, "0/1")) - (-z0)) < 1e-5);
    ck_assert(fabs(tf_num(tj_at(d, "1/0")) - (2 * z1 + 0.25)) < 1e-5);
    json_decref(resp);
    api_call_free(req);
}
END_TEST

/* ---- data-driven cases --------------------------------------------------- */

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *cases_dir(char *buf, size_t cap) {
    const char *env = getenv("ATTN_TESTS_DIR");
    const char *tries[] = {"tests/cases", "cases", "../tests/cases", "../../tests/cases"};
    if (env && *env) {
        snprintf(buf, cap, "%s/cases", env);
        if (is_dir(buf)) return buf;
        snprintf(buf, cap, "%s", env);
        if (is_dir(buf)) return buf;
    }
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++)
        if (is_dir(tries[i])) return snprintf(buf, cap, "%s", tries[i]), buf;
    return NULL;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *data;
    long size;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size + 1);
    ck_assert_uint_eq(fread(data, 1, (size_t)size, f), (size_t)size);
    data[size] = '\0';
    fclose(f);
    *len = (size_t)size;
    return data;
}

static void run_case(const char *dir, const char *name) {
    char path[4096];
    size_t len, elen;
    api_limits limits = big_limits;
    api_call *req = NULL;
    attn_error err;
    json_t *expected, *lim;
    char *body, *etext;

    snprintf(path, sizeof path, "%s/%s/expected.json", dir, name);
    etext = read_file(path, &elen);
    expected = json_loadb(etext, elen, 0, NULL);
    ck_assert_msg(expected != NULL, "%s: expected.json is not JSON", name);
    free(etext);
    snprintf(path, sizeof path, "%s/%s/request.json", dir, name);
    body = read_file(path, &len);
    if ((lim = json_object_get(expected, "limits")) != NULL) {
        json_t *v;
        if ((v = json_object_get(lim, "max_tokens"))) limits.max_tokens = (size_t)tf_num(v);
        if ((v = json_object_get(lim, "max_heads"))) limits.max_heads = (size_t)tf_num(v);
        if ((v = json_object_get(lim, "max_d_model"))) limits.max_d_model = (size_t)tf_num(v);
        if ((v = json_object_get(lim, "max_flops"))) limits.max_flops = tf_num(v);
        if ((v = json_object_get(lim, "max_response_bytes")))
            limits.max_response_bytes = (size_t)tf_num(v);
    }
    int status = (int)tf_num(json_object_get(expected, "status"));
    int rc = api_call_decode_json(API_CALL_ATTENTION, body, len, &limits, &req, &err);
    if (status != 200) {
        const char *code = json_string_value(json_object_get(expected, "code"));
        const char *epath = json_string_value(json_object_get(expected, "path"));
        ck_assert_msg(rc == -1, "case %s: expected %d, decode succeeded", name, status);
        ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                          strcmp(err.path, epath) == 0,
                      "case %s: expected %d %s at \"%s\", got %d %s at \"%s\" (%s)", name, status,
                      code, epath, err.status, err.code, err.path, err.message);
    } else {
        ck_assert_msg(rc == 0, "case %s: %d %s at \"%s\": %s", name, err.status, err.code, err.path,
                      err.message);
        json_t *resp = respond(req, NULL), *fields, *v;
        const char *key;
        size_t i;
        json_array_foreach(json_object_get(expected, "present"), i, v)
            ck_assert_msg(json_object_get(resp, json_string_value(v)), "case %s: no %s", name,
                          json_string_value(v));
        json_array_foreach(json_object_get(expected, "absent"), i, v)
            ck_assert_msg(!json_object_get(resp, json_string_value(v)), "case %s: has %s", name,
                          json_string_value(v));
        fields = json_object_get(expected, "fields");
        json_object_foreach(fields, key, v) {
            json_t *got = json_object_get(resp, key);
            ck_assert_msg(got && json_equal(got, v), "case %s: field %s is %s", name, key,
                          got ? dump(got) : "absent");
        }
        json_decref(resp);
        api_call_free(req);
    }
    free(body);
    json_decref(expected);
}

START_TEST(test_cases_dir) {
    char dir[1024];
    DIR *d;
    struct dirent *e;
    int count = 0;

    ck_assert_msg(cases_dir(dir, sizeof dir) != NULL,
                  "tests/cases not found (run from the repository root or set ATTN_TESTS_DIR)");
    d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        char sub[4096];
        if (e->d_name[0] == '.') continue;
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (!is_dir(sub)) continue;
        run_case(dir, e->d_name);
        count++;
    }
    closedir(d);
    ck_assert_msg(count >= 10, "only %d cases in %s", count, dir);
}
END_TEST

/* ---- the suite ----------------------------------------------------------- */

static Suite *api_suite(void) {
    Suite *s = suite_create("api");
    TCase *errors = tcase_create("errors");
    TCase *decode = tcase_create("decode");
    /* test_largest_accepted decodes a body at every default limit: seconds
     * under the sanitizers */
    tcase_set_timeout(decode, 120);
    TCase *encode = tcase_create("encode");
    TCase *cases = tcase_create("cases");

    tcase_add_test(errors, test_error_to_json);
    tcase_add_test(errors, test_error_utf8);
    tcase_add_test(errors, test_path_number_text);
    tcase_add_test(errors, test_write_json_as_jansson);
    tcase_add_test(decode, test_invalid_json);
    tcase_add_test(decode, test_unknown_fields);
    tcase_add_test(decode, test_missing_and_both);
    tcase_add_test(decode, test_wrong_types);
    tcase_add_test(decode, test_invalid_values);
    tcase_add_test(decode, test_dimension_mismatch);
    tcase_add_test(decode, test_non_finite);
    tcase_add_test(decode, test_request_cost_and_outputs);
    tcase_add_test(decode, test_tiny_and_edge_numbers);
    tcase_add_test(decode, test_out_of_range);
    tcase_add_test(decode, test_limits);
    tcase_add_test(decode, test_response_limit_exact);
    tcase_add_test(decode, test_small_values_refused);
    tcase_add_test(decode, test_largest_accepted);
    tcase_add_test(decode, test_weights_packing);
    tcase_add_test(decode, test_model_bind);
    tcase_add_test(encode, test_return_each_alone);
    tcase_add_test(encode, test_response_defaults);
    tcase_add_test(encode, test_stack_two_layers);
    tcase_add_test(encode, test_stack_hidden_states);
    tcase_add_test(encode, test_stack_three_layers_listed);
    tcase_add_test(encode, test_stack_limits_every_layer);
    tcase_add_test(encode, test_one_layer_list_as_before);
    tcase_add_test(encode, test_rollout_one_layer);
    tcase_add_test(encode, test_stack_nonfinite_names_layer);
    tcase_add_test(encode, test_stack_error_names_layer);
    tcase_add_test(encode, test_response_numbers);
    tcase_add_test(encode, test_select_heads_order);
    tcase_add_test(encode, test_tokens_echo);
    tcase_add_test(encode, test_custom_mask);
    tcase_add_test(encode, test_biases_and_w_o);
    tcase_add_test(encode, test_overflow_in_result);
    tcase_add_test(cases, test_cases_dir);
    suite_add_tcase(s, errors);
    suite_add_tcase(s, decode);
    suite_add_tcase(s, encode);
    suite_add_tcase(s, cases);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(api_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
