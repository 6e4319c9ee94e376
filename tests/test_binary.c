/*
 * test_binary.c — the check suite of the contract's binary tensors:
 * api/base64.c, api/tensor.c, and the tensor form of requests and responses.
 *
 * base64 is checked against a bit-by-bit reference written here (every
 * length 0–100, the RFC 4648 vectors, every way a text can be invalid).
 * Requests are built as jansson trees (3 tokens, d_model 4, 2 heads of 2,
 * and larger ones that cross the decoder's part size), then given again with
 * some or all matrices as tensor objects: the decoded engine inputs and the
 * whole response text must be bitwise the same. Responses with
 * "encoding": "base64" are decoded here and compared bitwise with the
 * float form of the same request, output by output. Every error the
 * contract names is checked for its status, code AND path.
 *
 * test_base64_speed prints the encode and decode speed in MB/s; it asserts
 * only that the codec round-trips, never a time.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/base64.h"
#include "api/call.h"
#include "api/error.h"
#include "attention/attention.h"
#include "tests/json_build.h"
#include "tests/json_edit.h"

/* ---- helpers ------------------------------------------------------------- */

static const api_limits big_limits = {.max_tokens = 4096,
                                      .max_heads = 64,
                                      .max_d_model = 4096,
                                      .max_flops = 1e12,
                                      .max_response_bytes = (size_t)1 << 30,
                                      .max_workspace_bytes = (size_t)1 << 30};

static const char *const output_names[] = {
    "q", "k", "v", "scores", "patterns", "head_outputs", "delta", "embeddings"};

/* Floats of every kind but non-finite: xorshift bits, exponents kept small
 * enough that results stay finite, subnormals and -0 included now and then. */
static float rnd_float(uint32_t *state) {
    uint32_t x = *state;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    *state = x;
    if (x % 97 == 0) return -0.0f;
    if (x % 89 == 0) return 1e-40f * (float)(x % 7);
    uint32_t bits = (x & 0x807fffffu) | ((uint32_t)(120 + x % 10) << 23); /* 2^-7 … 2^2 */
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static json_t *rnd_matrix(size_t rows, size_t cols, uint32_t *state) {
    json_t *m = json_array();
    for (size_t r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (size_t c = 0; c < cols; c++)
            json_array_append_new(row, json_real(rnd_float(state)));
        json_array_append_new(m, row);
    }
    return m;
}

/* n tokens, d_model dm, h heads of width dh; no w_o (so h·dh should be dm). */
static json_t *request_with(size_t n, size_t dm, size_t h, size_t dh) {
    json_t *heads = json_array();
    for (size_t i = 0; i < h; i++) {
        size_t seed = 1000 * (i + 1);
        json_array_append_new(heads, json_pack("{s:o, s:o, s:o}", "w_q", tj_matrix(dm, dh, seed),
                                               "w_k", tj_matrix(dm, dh, seed + 100), "w_v",
                                               tj_matrix(dm, dh, seed + 200)));
    }
    return json_pack("{s:o, s:{s:o}}", "embeddings", tj_matrix(n, dm, 7), "weights", "heads",
                     heads);
}

static json_t *base_request(void) {
    return request_with(3, 4, 2, 2);
}

/* Every weight of a request: biases, w_o and b_o too. */
static json_t *full_request(void) {
    json_t *r = base_request();
    json_t *heads = json_object_get(json_object_get(r, "weights"), "heads");
    static const char *const biases[] = {"b_q", "b_k", "b_v"};
    for (size_t i = 0; i < 2; i++)
        for (size_t b = 0; b < 3; b++)
            json_object_set_new(json_array_get(heads, i), biases[b], tj_vector(2, 40 + 10 * i + b));
    json_object_set_new(json_object_get(r, "weights"), "w_o", tj_matrix(4, 4, 300));
    json_object_set_new(json_object_get(r, "weights"), "b_o", tj_vector(4, 77));
    return r;
}

static char *dump(const json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* ---- a reference base64, one bit at a time -------------------------------- */

static const char ref_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* malloc'd, NUL-terminated. */
static char *ref_encode(const void *src, size_t n) {
    const unsigned char *s = src;
    size_t bits = n * 8, chars = (bits + 5) / 6, len = (chars + 3) / 4 * 4;
    char *out = malloc(len + 1);
    for (size_t i = 0; i < chars; i++) {
        unsigned v = 0;
        for (size_t b = 0; b < 6; b++) {
            size_t bit = i * 6 + b;
            unsigned one = bit < bits ? (s[bit / 8] >> (7 - bit % 8)) & 1 : 0;
            v = v << 1 | one;
        }
        out[i] = ref_alphabet[v];
    }
    for (size_t i = chars; i < len; i++)
        out[i] = '=';
    out[len] = '\0';
    return out;
}

/* The tensor object of `count` floats of the given shape. */
static json_t *tensor(const float *x, const size_t *shape, size_t rank) {
    size_t count = 1;
    json_t *sh = json_array();
    for (size_t i = 0; i < rank; i++) {
        json_array_append_new(sh, json_integer((json_int_t)shape[i]));
        count *= shape[i];
    }
    /* the little-endian bytes, whatever the host */
    unsigned char *bytes = malloc(count * 4 + 1);
    for (size_t i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (size_t b = 0; b < 4; b++)
            bytes[i * 4 + b] = (unsigned char)(u >> (8 * b));
    }
    char *text = ref_encode(bytes, count * 4);
    json_t *t = json_pack("{s:s, s:o, s:s}", "dtype", "float32", "shape", sh, "data", text);
    free(bytes);
    free(text);
    return t;
}

/* A nested-array matrix or vector of the request, as a tensor object of the
 * same float32 values (each number rounded as the decoder rounds it). */
static json_t *to_tensor(const json_t *nested) {
    size_t rows = json_array_size(nested), cols = 0, shape[2];
    int is_matrix = rows > 0 && json_is_array(json_array_get(nested, 0));
    float *x;

    if (is_matrix) cols = json_array_size(json_array_get(nested, 0));
    x = malloc((is_matrix ? rows * cols : rows) * sizeof *x + 1);
    for (size_t r = 0; r < rows; r++) {
        if (!is_matrix) {
            x[r] = (float)json_number_value(json_array_get(nested, r));
            continue;
        }
        for (size_t c = 0; c < cols; c++)
            x[r * cols + c] =
                (float)json_number_value(json_array_get(json_array_get(nested, r), c));
    }
    shape[0] = rows, shape[1] = cols;
    json_t *t = tensor(x, shape, is_matrix ? 2 : 1);
    free(x);
    return t;
}

/* Replaces the nested arrays at `path` by their tensor object. */
static void tensorize(json_t *r, const char *path) {
    json_t *nested = tj_at(r, path);
    ck_assert_msg(nested != NULL, "no %s", path);
    tj_put(r, path, to_tensor(nested));
}

/* The paths of every matrix and vector of a request. */
static size_t tensor_paths(json_t *r, char paths[][64], size_t cap) {
    static const char *const fields[] = {"w_q", "w_k", "w_v", "b_q", "b_k", "b_v"};
    json_t *heads = tj_at(r, "/weights/heads");
    size_t n = 0;
    snprintf(paths[n++], 64, "/embeddings");
    for (size_t i = 0; i < json_array_size(heads); i++)
        for (size_t f = 0; f < 6; f++)
            if (json_object_get(json_array_get(heads, i), fields[f]) && n < cap)
                snprintf(paths[n++], 64, "/weights/heads/%zu/%s", i, fields[f]);
    if (tj_at(r, "/weights/w_o") && n < cap) snprintf(paths[n++], 64, "/weights/w_o");
    if (tj_at(r, "/weights/b_o") && n < cap) snprintf(paths[n++], 64, "/weights/b_o");
    return n;
}

/* ---- decoding, computing, encoding ----------------------------------------- */

static api_call *decode_ok_limits(json_t *body, const api_limits *limits) {
    api_call *req = NULL;
    attn_error err;
    char *text = dump(body);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text), limits, &req, &err);
    ck_assert_msg(rc == 0, "decode failed: %d %s at \"%s\": %s", err.status, err.code, err.path,
                  err.message);
    free(text);
    json_decref(body);
    return req;
}

static api_call *decode_ok(json_t *body) {
    return decode_ok_limits(body, &big_limits);
}

/* Takes the tree (decref'd here); *out gets the error when asked. */
static void expect_error(json_t *body, const api_limits *limits, int status, const char *code,
                         const char *path, attn_error *out) {
    char *text = dump(body);
    api_call *req = (api_call *)1;
    attn_error err;
    memset(&err, 0, sizeof err);
    int rc = api_call_decode_json(API_CALL_ATTENTION, text, strlen(text),
                                  limits ? limits : &big_limits, &req, &err);
    ck_assert_msg(rc == -1, "expected %s at %s, but decode succeeded: %.300s", code, path, text);
    ck_assert_ptr_null(req);
    ck_assert_msg(err.status == status && strcmp(err.code, code) == 0 &&
                      strcmp(err.path, path) == 0,
                  "expected %d %s at \"%s\", got %d %s at \"%s\" (%s) for %.300s", status, code,
                  path, err.status, err.code, err.path, err.message, text);
    if (out) *out = err;
    free(text);
    json_decref(body);
}

/* The response text of a decoded request (caller frees); takes the request. */
static char *respond_text(api_call *req, size_t *len) {
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    ck_assert_ptr_nonnull(ws);
    ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
    ck_assert_int_eq(attn_compute(api_call_outputs(req), ws, api_call_inputs(req), NULL), 0);
    attn_workspace_destroy(ws);
    char *text = api_call_encode(req, len, NULL, &err);
    ck_assert_msg(text != NULL, "encode failed: %s", err.message);
    ck_assert_uint_eq(strlen(text), *len);
    api_call_free(req);
    return text;
}

static json_t *respond_json(json_t *body) {
    size_t len;
    json_error_t jerr;
    char *text = respond_text(decode_ok(body), &len);
    json_t *resp = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(resp != NULL, "response is not JSON: %s: %.300s", jerr.text, text);
    free(text);
    return resp;
}

/* The engine inputs of two requests hold bitwise the same numbers. */
static void same_inputs(const api_call *a, const api_call *b) {
    const attn_input *x = api_call_inputs(a), *y = api_call_inputs(b);
    const attn_weights *wx = x->weights, *wy = y->weights;
    size_t dm = wx->d_model, hd = wx->n_heads * wx->d_head;

    ck_assert_uint_eq(x->n_tokens, y->n_tokens);
    ck_assert_uint_eq(dm, wy->d_model);
    ck_assert_uint_eq(hd, wy->n_heads * wy->d_head);
    ck_assert(memcmp(x->embeddings, y->embeddings, x->n_tokens * dm * 4) == 0);
    ck_assert(memcmp(wx->w_qkv, wy->w_qkv, dm * 3 * hd * 4) == 0);
    ck_assert((wx->b_qkv == NULL) == (wy->b_qkv == NULL));
    if (wx->b_qkv) ck_assert(memcmp(wx->b_qkv, wy->b_qkv, 3 * hd * 4) == 0);
    ck_assert((wx->w_o == NULL) == (wy->w_o == NULL));
    if (wx->w_o) ck_assert(memcmp(wx->w_o, wy->w_o, hd * dm * 4) == 0);
    ck_assert((wx->b_o == NULL) == (wy->b_o == NULL));
    if (wx->b_o) ck_assert(memcmp(wx->b_o, wy->b_o, dm * 4) == 0);
}

/* ---- base64 ---------------------------------------------------------------- */

static size_t encoded_length(size_t n) {
    size_t len = 0;
    ck_assert_int_eq(api_base64_encoded_length(n, &len), 0);
    return len;
}

START_TEST(test_base64_rfc4648_vectors) {
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char out[16];
        unsigned char back[16];
        size_t n = strlen(plain[i]), len = api_base64_encode(out, plain[i], n), dn = 99, bad;
        ck_assert_uint_eq(len, strlen(coded[i]));
        ck_assert_uint_eq(len, encoded_length(n));
        ck_assert(memcmp(out, coded[i], len) == 0);
        ck_assert_int_eq(api_base64_decoded_length(coded[i], len, &dn), 0);
        ck_assert_uint_eq(dn, n);
        ck_assert_int_eq(api_base64_decode(back, coded[i], len, &bad), 0);
        ck_assert(memcmp(back, plain[i], n) == 0);
    }
    size_t len;
    ck_assert_int_eq(api_base64_encoded_length(SIZE_MAX, &len), -1);
    ck_assert_int_eq(api_base64_encoded_length(SIZE_MAX / 4 * 3, &len), 0);
    ck_assert_int_eq(api_base64_encoded_length(SIZE_MAX / 4 * 3 + 1, &len), -1);
}
END_TEST

/* Every length 0–100 (all residues mod 3 and 6, the fast loop's step), with
 * bytes of every value: the reference's text, and back. */
START_TEST(test_base64_round_trip_lengths) {
    unsigned char src[256], back[256];
    char out[400];
    uint32_t state = 12345;

    for (size_t n = 0; n <= 100; n++) {
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < n; i++) {
                state ^= state << 13, state ^= state >> 17, state ^= state << 5;
                src[i] = rep == 0 ? (unsigned char)(i * 7 + n) : (unsigned char)state;
            }
            if (rep == 3) memset(src, 0xff, n);
            char *ref = ref_encode(src, n);
            size_t len = api_base64_encode(out, src, n), dn, bad = 0;
            ck_assert_uint_eq(len, strlen(ref));
            ck_assert_uint_eq(len, encoded_length(n));
            ck_assert_msg(memcmp(out, ref, len) == 0, "n %zu: %.*s vs %s", n, (int)len, out, ref);
            ck_assert_int_eq(api_base64_decoded_length(out, len, &dn), 0);
            ck_assert_uint_eq(dn, n);
            memset(back, 0xAA, sizeof back);
            ck_assert_int_eq(api_base64_decode(back, out, len, &bad), 0);
            ck_assert(memcmp(back, src, n) == 0);
            ck_assert_uint_eq(back[n], 0xAA); /* no byte written past the end */
            free(ref);
        }
    }
}
END_TEST

/* Expects `text` to be refused, at offset `where`. */
static void refused_at(const char *text, size_t where) {
    unsigned char back[64];
    size_t len = strlen(text), bad = 999, dn;
    ck_assert_int_eq(api_base64_decoded_length(text, len, &dn), 0);
    ck_assert_msg(api_base64_decode(back, text, len, &bad) == -1, "\"%s\" accepted", text);
    ck_assert_msg(bad == where, "\"%s\": bad at %zu, expected %zu", text, bad, where);
}

START_TEST(test_base64_invalid) {
    size_t dn;
    unsigned char back[64];

    /* lengths 1, 2, 3 mod 4: padding is required */
    static const char *const lengths[] = {"A",       "AB", "ABC", "ABCDE", "ABCDEF",
                                          "ABCDEFG", "Zg", "Zg=", "Zm8",   "Zm9vYg="};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        ck_assert_int_eq(api_base64_decoded_length(lengths[i], strlen(lengths[i]), &dn), -1);
        size_t bad = 0;
        ck_assert_int_eq(api_base64_decode(back, lengths[i], strlen(lengths[i]), &bad), -1);
    }
    /* a bad character at every offset of a 24-character text (body and last
     * group, the 8-character step and the 4-character one) */
    const char *good = "QUJDREVGR0hJSktMTU5PUFFS";
    static const char bads[] = {'!', ' ', '\n', '\t', '-', '_', '.', '\0', '\x80', '\xff', '='};
    for (size_t b = 0; b < sizeof bads; b++) {
        for (size_t i = 0; i < 24; i++) {
            char t[25];
            memcpy(t, good, 25);
            t[i] = bads[b];
            size_t bad = 999;
            int rc = api_base64_decode(back, t, 24, &bad);
            /* '=' is padding in the last two places: then only canonical-bit rules apply */
            if (bads[b] == '=' && i >= 22) continue;
            ck_assert_msg(rc == -1 && bad == i, "0x%02x at %zu: rc %d bad %zu",
                          (unsigned char)bads[b], i, rc, bad);
        }
    }
    /* padding: only as the last one or two characters */
    refused_at("A===", 1);
    refused_at("====", 0);
    refused_at("Zg=A", 2);
    refused_at("Zg==Zg==", 2);
    refused_at("Zm8=Zm8=", 3);
    /* whitespace around or inside, even a final newline */
    refused_at("Zm9v\nYmF", 4);
    refused_at(" Zm9vYmF", 0);
    refused_at("Zm9vYmF\n", 7);
    /* non-canonical: the unused bits of a padded last group must be zero */
    refused_at("Zh==", 1); /* "f" is Zg== */
    refused_at("Zm9=", 2); /* "fo" is Zm8= */
    refused_at("AAAAZh==", 5);
    refused_at("//////9=", 6); /* five 0xff are "//////8=" */
    ck_assert_int_eq(api_base64_decode(back, "//////8=", 8, &dn), 0);
    ck_assert(memcmp(back, "\xff\xff\xff\xff\xff", 5) == 0);
    /* a middle part may hold no padding at all */
    ck_assert_int_eq(api_base64_decode_part(back, "Zm8=", 4, 0, &dn), -1);
    ck_assert_uint_eq(dn, 3);
    ck_assert_int_eq(api_base64_decode_part(back, "Zm9vYmFy", 8, 0, &dn), 0);
    ck_assert(memcmp(back, "foobar", 6) == 0);
    ck_assert_int_eq(api_base64_decode_part(back, "Zm9", 3, 0, &dn), -1);
    /* where a text goes wrong, for messages about a wrong length */
    ck_assert_uint_eq(api_base64_first_invalid("Zm9vYmFy\n", 9), 8);
    ck_assert_uint_eq(api_base64_first_invalid("Zg==A", 5), 5);
    ck_assert_uint_eq(api_base64_first_invalid("Zg==Zg==", 8), 2);
    ck_assert_uint_eq(api_base64_first_invalid("Zm9vYmFy", 8), 8);
    ck_assert_uint_eq(api_base64_first_invalid("", 0), 0);
}
END_TEST

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Prints MB/s of encoding (bytes in) and decoding (bytes out) of 32 MB of
 * float32 data, the best of 3 runs. A report, not an assertion. */
START_TEST(test_base64_speed) {
    size_t n = (size_t)32 << 20, len = encoded_length(n), bad;
    unsigned char *src = malloc(n), *back = malloc(n);
    char *text = malloc(len);
    uint32_t state = 99;
    double best_enc = 1e9, best_dec = 1e9;

    ck_assert(src && back && text);
    for (size_t i = 0; i < n / 4; i++) {
        float f = rnd_float(&state);
        memcpy(src + i * 4, &f, 4);
    }
    memset(back, 0, n);
    memset(text, 0, len);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_seconds();
        ck_assert_uint_eq(api_base64_encode(text, src, n), len);
        double t1 = now_seconds();
        ck_assert_int_eq(api_base64_decode(back, text, len, &bad), 0);
        double t2 = now_seconds();
        if (t1 - t0 < best_enc) best_enc = t1 - t0;
        if (t2 - t1 < best_dec) best_dec = t2 - t1;
    }
    ck_assert(memcmp(src, back, n) == 0);
    printf("base64 speed (32 MB, best of 3): encode %.0f MB/s of bytes in, decode %.0f MB/s "
           "of bytes out\n",
           (double)n / best_enc / 1e6, (double)n / best_dec / 1e6);
    free(src);
    free(back);
    free(text);
}
END_TEST

/* ---- requests: tensor objects read as nested arrays ------------------------- */

static const char *const all_returns = "[\"q\",\"k\",\"v\",\"scores\",\"patterns\","
                                       "\"head_outputs\",\"delta\",\"embeddings\"]";

/* `r` as is and with the matrices of `paths` as tensors: the same inputs,
 * bitwise, and the same response text, byte for byte. Takes r. */
static void same_as_nested(json_t *r, char paths[][64], size_t n_paths) {
    json_t *t = json_deep_copy(r);
    for (size_t i = 0; i < n_paths; i++)
        tensorize(t, paths[i]);
    api_call *a = decode_ok(json_deep_copy(r)), *b = decode_ok(json_deep_copy(t));
    same_inputs(a, b);
    size_t la, lb;
    char *ta = respond_text(a, &la), *tb = respond_text(b, &lb);
    ck_assert_msg(la == lb && memcmp(ta, tb, la) == 0, "responses differ:\n%.400s\n%.400s", ta, tb);
    free(ta);
    free(tb);
    json_decref(r);
    json_decref(t);
}

START_TEST(test_inputs_as_tensors) {
    char paths[32][64];
    json_t *r = full_request();
    json_object_set_new(r, "return", json_loads(all_returns, 0, NULL));
    size_t n = tensor_paths(r, paths, 32);
    ck_assert_uint_eq(n, 1 + 2 * 6 + 2);

    /* all at once, then each alone (mixed forms), then every other one */
    same_as_nested(json_deep_copy(r), paths, n);
    for (size_t i = 0; i < n; i++)
        same_as_nested(json_deep_copy(r), paths + i, 1);
    char some[16][64];
    size_t k = 0;
    for (size_t i = 0; i < n; i += 2)
        memcpy(some[k++], paths[i], 64);
    same_as_nested(json_deep_copy(r), some, k);
    json_decref(r);
}
END_TEST

/* Values of every kind (not multiples of 1/8: random float32 bits,
 * subnormals, -0), and matrices big enough that a head's w_q crosses the
 * decoder's parts of 768 values (64 × 32 = 2048) inside the packed w_qkv. */
START_TEST(test_inputs_random_and_large) {
    char paths[32][64];
    uint32_t state = 7;
    json_t *r = request_with(5, 64, 2, 32);
    json_t *heads = tj_at(r, "/weights/heads");
    static const char *const fields[] = {"w_q", "w_k", "w_v"};

    tj_put(r, "/embeddings", rnd_matrix(5, 64, &state));
    for (size_t i = 0; i < 2; i++)
        for (size_t f = 0; f < 3; f++)
            json_object_set_new(json_array_get(heads, i), fields[f], rnd_matrix(64, 32, &state));
    json_t *row = rnd_matrix(1, 32, &state);
    json_object_set_new(json_array_get(heads, 1), "b_v", json_incref(json_array_get(row, 0)));
    json_decref(row);
    json_object_set_new(tj_at(r, "/weights"), "w_o", rnd_matrix(64, 64, &state));
    json_object_set_new(r, "return", json_loads(all_returns, 0, NULL));
    size_t n = tensor_paths(r, paths, 32);
    same_as_nested(json_deep_copy(r), paths, n);
    same_as_nested(r, paths + 1, 1); /* a strided head matrix alone */
}
END_TEST

/* ---- responses: "encoding": "base64" ----------------------------------------- */

/* The floats of a tensor object of the response, checked for its form and
 * its shape (malloc'd; *count values). */
static float *tensor_floats(const json_t *t, const size_t *shape, size_t rank, size_t *count) {
    ck_assert_msg(json_is_object(t) && json_object_size(t) == 3, "not a tensor object");
    ck_assert_str_eq(json_string_value(json_object_get(t, "dtype")), "float32");
    const json_t *sh = json_object_get(t, "shape");
    ck_assert(json_is_array(sh));
    ck_assert_uint_eq(json_array_size(sh), rank);
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        ck_assert(json_is_integer(json_array_get(sh, i)));
        ck_assert_uint_eq((size_t)json_integer_value(json_array_get(sh, i)), shape[i]);
        n *= shape[i];
    }
    const json_t *data = json_object_get(t, "data");
    ck_assert(json_is_string(data));
    size_t len = json_string_length(data), bytes = 0, bad;
    ck_assert_uint_eq(len, encoded_length(n * 4));
    ck_assert_int_eq(api_base64_decoded_length(json_string_value(data), len, &bytes), 0);
    ck_assert_uint_eq(bytes, n * 4);
    unsigned char *raw = malloc(bytes + 1);
    ck_assert_int_eq(api_base64_decode(raw, json_string_value(data), len, &bad), 0);
    char *again = ref_encode(raw, bytes); /* the canonical text */
    ck_assert(strcmp(again, json_string_value(data)) == 0);
    free(again);
    float *x = malloc(n * sizeof *x + 1);
    for (size_t i = 0; i < n; i++) { /* little-endian, whatever the host */
        uint32_t u = (uint32_t)raw[i * 4] | (uint32_t)raw[i * 4 + 1] << 8 |
                     (uint32_t)raw[i * 4 + 2] << 16 | (uint32_t)raw[i * 4 + 3] << 24;
        memcpy(&x[i], &u, 4);
    }
    free(raw);
    *count = n;
    return x;
}

/* The numbers of a nested-array output in row-major order, null as −∞. */
static void flatten(const json_t *v, float *dst, size_t *k) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            flatten(json_array_get(v, i), dst, k);
        return;
    }
    dst[(*k)++] = json_is_null(v) ? -INFINITY : (float)json_number_value(v);
}

/* Same float32, bit for bit — but for the sign of zero, which the float
 * form's integer text "0" cannot carry back through a JSON parser. */
static int same_float(float a, float b) {
    if (a == 0 && b == 0) return 1;
    return memcmp(&a, &b, 4) == 0;
}

/* `body` answered in both encodings: every output asked for decodes from the
 * base64 form to the floats of the float form, with its shape; every other
 * field is the same JSON. Returns the base64 response (caller decrefs). */
static json_t *both_encodings(json_t *body) {
    json_t *b64 = json_deep_copy(body);
    json_object_set_new(b64, "encoding", json_string("base64"));
    json_t *f = respond_json(body), *t = respond_json(b64);
    size_t n = (size_t)json_integer_value(json_object_get(f, "n_tokens"));
    size_t dm = (size_t)json_integer_value(json_object_get(f, "d_model"));
    size_t dh = (size_t)json_integer_value(json_object_get(f, "d_head"));
    size_t hs = json_array_size(json_object_get(f, "heads"));

    for (size_t o = 0; o < 8; o++) {
        const json_t *fv = json_object_get(f, output_names[o]);
        const json_t *tv = json_object_get(t, output_names[o]);
        ck_assert((fv == NULL) == (tv == NULL));
        if (!fv) continue;
        size_t width = o == 3 || o == 4 ? n : o >= 6 ? dm : dh;
        size_t shape[3] = {hs, n, width}, count, k = 0;
        int per_head = o < 6;
        float *x = tensor_floats(tv, per_head ? shape : shape + 1, per_head ? 3 : 2, &count);
        float *y = malloc(count * sizeof *y + 1);
        flatten(fv, y, &k);
        ck_assert_uint_eq(k, count);
        for (size_t i = 0; i < count; i++)
            ck_assert_msg(same_float(x[i], y[i]), "%s[%zu]: %a vs %a", output_names[o], i,
                          (double)x[i], (double)y[i]);
        free(x);
        free(y);
        json_object_del(f, output_names[o]);
    }
    json_t *rest = json_deep_copy(t);
    for (size_t o = 0; o < 8; o++)
        json_object_del(rest, output_names[o]);
    ck_assert_msg(json_equal(f, rest), "other fields differ");
    json_decref(rest);
    json_decref(f);
    return t;
}

START_TEST(test_outputs_each_return) {
    for (size_t o = 0; o < 8; o++) {
        json_t *r = full_request();
        json_object_set_new(r, "return", json_pack("[s]", output_names[o]));
        json_t *t = both_encodings(r);
        ck_assert_ptr_nonnull(json_object_get(t, output_names[o]));
        ck_assert_uint_eq(json_object_size(t), 10 + 1); /* 10 fixed fields and the output */
        json_decref(t);
    }
    json_t *r = full_request();
    json_object_set_new(r, "return", json_loads(all_returns, 0, NULL));
    json_object_set_new(r, "tokens", json_pack("[s,s,s]", "我", "a\"b", ""));
    json_decref(both_encodings(r));
    r = full_request(); /* the default return */
    json_decref(both_encodings(r));
    r = full_request(); /* none */
    json_object_set_new(r, "return", json_array());
    json_decref(both_encodings(r));
}
END_TEST

START_TEST(test_outputs_select_heads) {
    static const char *const selections[] = {"[1]", "[1,0]", "[0]", "[]", "[2,0]"};
    for (size_t s = 0; s < sizeof selections / sizeof selections[0]; s++) {
        json_t *r = request_with(3, 6, 3, 2);
        json_object_set_new(r, "return", json_loads(all_returns, 0, NULL));
        json_object_set_new(r, "select_heads", json_loads(selections[s], 0, NULL));
        json_t *t = both_encodings(r);
        if (strcmp(selections[s], "[]") == 0) { /* shape [0, n, width], no data */
            const json_t *q = json_object_get(t, "q");
            ck_assert_str_eq(json_string_value(json_object_get(q, "data")), "");
            char *sh = dump(json_object_get(q, "shape"));
            ck_assert_str_eq(sh, "[0,3,2]");
            free(sh);
        }
        json_decref(t);
    }
}
END_TEST

/* Masked scores are −∞, bits 0xff800000; the base64 scores of a causal mask
 * and of a custom mask with a row that allows nothing. */
START_TEST(test_outputs_masked_scores) {
    static const char *const masks[] = {"\"causal\"", "[[1,0,0],[0,0,0],[1,1,1]]", "\"none\""};
    for (size_t m = 0; m < 3; m++) {
        json_t *r = base_request();
        json_object_set_new(r, "mask", json_loads(masks[m], JSON_DECODE_ANY, NULL));
        json_object_set_new(r, "return", json_pack("[s,s]", "scores", "patterns"));
        json_t *t = both_encodings(r);
        size_t shape[3] = {2, 3, 3}, count;
        float *s = tensor_floats(json_object_get(t, "scores"), shape, 3, &count);
        float *p = tensor_floats(json_object_get(t, "patterns"), shape, 3, &count);
        for (size_t h = 0; h < 2; h++)
            for (size_t q = 0; q < 3; q++)
                for (size_t k = 0; k < 3; k++) {
                    size_t i = h * 9 + q * 3 + k;
                    int allowed = m == 0 ? k <= q : m == 1 ? masks[1][2 + q * 8 + k * 2] == '1' : 1;
                    uint32_t bits;
                    memcpy(&bits, &s[i], 4);
                    if (allowed) {
                        ck_assert(isfinite(s[i]));
                    } else {
                        ck_assert_msg(bits == 0xff800000u, "score %zu: %08x", i, bits);
                        ck_assert(p[i] == 0);
                    }
                }
        free(s);
        free(p);
        json_decref(t);
    }
}
END_TEST

/* A result that overflows float32: the same 422 in both encodings. */
START_TEST(test_outputs_overflow) {
    const char *text = "{\"embeddings\":[[1e20,0],[0,1e20]],\"mask\":\"none\","
                       "\"return\":[\"v\"],\"encoding\":\"base64\","
                       "\"weights\":{\"heads\":[{\"w_q\":[[1,0],[0,1]],\"w_k\":[[0,0],[0,0]],"
                       "\"w_v\":[[1e20,0],[0,1e20]]}]}}";
    static const char *const returns[] = {"[\"v\"]", "[\"embeddings\"]", "[\"q\",\"v\"]"};
    static const char *const where[] = {"v of head 0, row 0, column 0",
                                        "embeddings row 0, column 0", "v of head 0, row 0"};
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_loads(text, 0, NULL);
        json_object_set_new(r, "return", json_loads(returns[i], 0, NULL));
        api_call *req = decode_ok(r);
        attn_workspace *ws = attn_workspace_create();
        attn_error err;
        ck_assert_int_eq(api_call_alloc_outputs(req, NULL, &err), 0);
        ck_assert_int_eq(attn_compute(api_call_outputs(req), ws, api_call_inputs(req), NULL), 0);
        attn_workspace_destroy(ws);
        size_t len = 0;
        ck_assert_ptr_null(api_call_encode(req, &len, NULL, &err));
        ck_assert_int_eq(err.status, 422);
        ck_assert_str_eq(err.code, "non_finite_number");
        ck_assert_msg(strstr(err.message, where[i]), "%s", err.message);
        api_call_free(req);
    }
}
END_TEST

/* The response size bound holds for the base64 form: at the bound the
 * request passes and its body fits, one byte less is refused; and it is
 * smaller than the float form's. */
static size_t response_bound(json_t *body) {
    api_limits tiny = big_limits;
    attn_error err;
    size_t bound = 0;
    tiny.max_response_bytes = 1;
    expect_error(body, &tiny, 422, "limit_exceeded", "/return", &err);
    const char *need = strstr(err.message, "need up to ");
    ck_assert_ptr_nonnull(need);
    ck_assert_int_eq(sscanf(need, "need up to %zu", &bound), 1);
    return bound;
}

START_TEST(test_outputs_size_bound) {
    static const char *const selections[] = {"[1]", "[1,0]", "[]"};
    for (size_t s = 0; s < 3; s++) {
        json_t *r = request_with(7, 6, 3, 2);
        json_object_set_new(r, "return", json_loads(all_returns, 0, NULL));
        json_object_set_new(r, "select_heads", json_loads(selections[s], 0, NULL));
        json_object_set_new(r, "tokens",
                            json_pack("[s,s,s,s,s,s,s]", "a", "b", "c", "d", "e", "f", "\x01\x02"));
        size_t float_bound = response_bound(json_deep_copy(r));
        json_object_set_new(r, "encoding", json_string("base64"));
        size_t bound = response_bound(json_deep_copy(r)), len;
        ck_assert_uint_lt(bound, float_bound);
        api_limits lim = big_limits;
        lim.max_response_bytes = bound;
        char *text = respond_text(decode_ok_limits(json_deep_copy(r), &lim), &len);
        ck_assert_msg(len <= bound, "body %zu over its bound %zu", len, bound);
        ck_assert_msg(bound - len < 2048, "a loose bound: %zu for %zu", bound, len);
        free(text);
        lim.max_response_bytes = bound - 1;
        expect_error(r, &lim, 422, "limit_exceeded", "/return", NULL);
    }
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

/* A tensor object with fields given as JSON text (NULL: absent). */
static json_t *tensor_obj(const char *dtype, const char *shape, const char *data) {
    json_t *t = json_object();
    if (dtype)
        json_object_set_new(t, "dtype", json_loads(dtype, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL));
    if (shape) json_object_set_new(t, "shape", json_loads(shape, JSON_DECODE_ANY, NULL));
    if (data) json_object_set_new(t, "data", json_loads(data, JSON_DECODE_ANY, NULL));
    return t;
}

/* 3 × 4 floats (0, 1, -2, 0.25, 3, 0.5, -1, 10, 0, 0, 0.125, 1): 48 bytes,
 * 64 characters, as a JSON string. */
static const char *const data12 =
    "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA/AACAvwAAIEEAAAAAAAAAAAAAAD4AAIA/\"";

START_TEST(test_malformed_tensors) {
    static const struct {
        const char *field, *dtype, *shape, *data;
        int status;
        const char *code, *path;
    } cases[] = {
        /* 400: the object itself */
        {"/embeddings", "\"float32\"", "[3,4]", NULL, 400, "missing_field", "/embeddings/data"},
        {"/embeddings", NULL, "[3,4]", data12, 400, "missing_field", "/embeddings/dtype"},
        {"/embeddings", "\"float32\"", NULL, data12, 400, "missing_field", "/embeddings/shape"},
        {"/embeddings", NULL, NULL, NULL, 400, "missing_field", "/embeddings/dtype"},
        {"/embeddings", "32", "[3,4]", data12, 400, "wrong_type", "/embeddings/dtype"},
        {"/embeddings", "null", "[3,4]", data12, 400, "wrong_type", "/embeddings/dtype"},
        {"/embeddings", "\"float32\"", "\"3x4\"", data12, 400, "wrong_type", "/embeddings/shape"},
        {"/embeddings", "\"float32\"", "{\"rows\":3}", data12, 400, "wrong_type",
         "/embeddings/shape"},
        {"/embeddings", "\"float32\"", "[3,-4]", data12, 400, "wrong_type", "/embeddings/shape/1"},
        {"/embeddings", "\"float32\"", "[3,4.5]", data12, 400, "wrong_type", "/embeddings/shape/1"},
        {"/embeddings", "\"float32\"", "[\"3\",4]", data12, 400, "wrong_type",
         "/embeddings/shape/0"},
        {"/embeddings", "\"float32\"", "[null,4]", data12, 400, "wrong_type",
         "/embeddings/shape/0"},
        {"/embeddings", "\"float32\"", "[12]", data12, 400, "wrong_type", "/embeddings/shape"},
        {"/embeddings", "\"float32\"", "[3,4,1]", data12, 400, "wrong_type", "/embeddings/shape"},
        {"/embeddings", "\"float32\"", "[]", data12, 400, "wrong_type", "/embeddings/shape"},
        {"/embeddings", "\"float32\"", "[3,4]", "12", 400, "wrong_type", "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]", "[0,1]", 400, "wrong_type", "/embeddings/data"},
        {"/weights/heads/0/w_q", "\"float32\"", "[8]", "\"\"", 400, "wrong_type",
         "/weights/heads/0/w_q/shape"},
        {"/weights/heads/1/b_k", "\"float32\"", "[1,2]", "\"AAAAAAAAAAA=\"", 400, "wrong_type",
         "/weights/heads/1/b_k/shape"},
        {"/weights/b_o", "\"float32\"", "[]", "\"\"", 400, "wrong_type", "/weights/b_o/shape"},
        {"/weights/w_o", "\"float32\"", "[4]", "\"\"", 400, "wrong_type", "/weights/w_o/shape"},
        /* types before values: a bad dtype word after a bad shape type is the 400 */
        {"/embeddings", "\"float64\"", "[3,\"4\"]", data12, 400, "wrong_type",
         "/embeddings/shape/1"},
        /* 422: dtype, sizes, data */
        {"/embeddings", "\"float64\"", "[3,4]", data12, 422, "invalid_tensor", "/embeddings/dtype"},
        {"/embeddings", "\"Float32\"", "[3,4]", data12, 422, "invalid_tensor", "/embeddings/dtype"},
        {"/embeddings", "\"float32 \"", "[3,4]", data12, 422, "invalid_tensor",
         "/embeddings/dtype"},
        {"/embeddings", "\"float32\\u0000\"", "[3,4]", data12, 422, "invalid_tensor",
         "/embeddings/dtype"},
        {"/embeddings", "\"float16\"", "[3,4]", data12, 422, "invalid_tensor", "/embeddings/dtype"},
        {"/embeddings", "\"float32\"", "[0,4]", "\"\"", 422, "dimension_mismatch", "/embeddings"},
        {"/embeddings", "\"float32\"", "[3,0]", "\"\"", 422, "dimension_mismatch", "/embeddings"},
        {"/embeddings", "\"float32\"", "[3,4]", "\"AAAA\"", 422, "dimension_mismatch",
         "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]", "\"\"", 422, "dimension_mismatch",
         "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]", "\"AAAAAAAAgD8AAADA\"", 422, "dimension_mismatch",
         "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]", "\"AAAAAAAAgD8AAADAA\"", 422, "invalid_tensor",
         "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]",
         "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA/AACAvwAAIEEAAAAAAAAAAAAAAD4AAIA\"", 422,
         "invalid_tensor", "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]",
         "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA/AACAvwAAIEEAAAAAAAAAAAAAAD4AAI!/\"", 422,
         "invalid_tensor", "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]",
         "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA/AACAvwAAIEEAAAAA AAAAAAAAD4AAIA/\"", 422,
         "invalid_tensor", "/embeddings/data"},
        {"/embeddings", "\"float32\"", "[3,4]",
         "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA_AACAvwAAIEEAAAAAAAAAAAAAAD4AAIA/\"", 422,
         "invalid_tensor", "/embeddings/data"},
        {"/weights/heads/0/w_q", "\"float32\"", "[3,2]", "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"",
         422, "dimension_mismatch", "/weights/heads/0/w_q"},
        {"/weights/heads/1/w_v", "\"float32\"", "[4,3]", data12, 422, "dimension_mismatch",
         "/weights/heads/1/w_v"},
        {"/weights/heads/0/b_q", "\"float32\"", "[3]", "\"AAAAAAAAAAAAAAAA\"", 422,
         "dimension_mismatch", "/weights/heads/0/b_q"},
        {"/weights/heads/0/b_q", "\"float32\"", "[2]", "\"AAAAAAAAAAAAAAAA\"", 422,
         "dimension_mismatch", "/weights/heads/0/b_q/data"},
        {"/weights/w_o", "\"float32\"", "[3,4]", data12, 422, "dimension_mismatch", "/weights/w_o"},
        {"/weights/b_o", "\"float32\"", "[4]", "\"AAAAAAAAAAAAAAAAAAAAAB==\"", 422,
         "invalid_tensor", "/weights/b_o/data"}, /* non-canonical last group (AA== is) */
        {"/weights/b_o", "\"float32\"", "[4]", "\"AAAAAAAAAAAAAAAAAAAAAA\"", 422, "invalid_tensor",
         "/weights/b_o/data"}, /* no padding */
        /* a shape too large for any data; with the limits, the limit speaks */
        {"/weights/heads/0/w_q", "\"float32\"", "[4,1e300]", "\"\"", 422, "dimension_mismatch",
         "/weights/heads/0/w_q/shape"},
        {"/weights/heads/0/w_q", "\"float32\"", "[4,4611686018427387904]", "\"\"", 422,
         "dimension_mismatch", "/weights/heads/0/w_q/shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *r = full_request();
        tj_put(r, cases[i].field, tensor_obj(cases[i].dtype, cases[i].shape, cases[i].data));
        expect_error(r, NULL, cases[i].status, cases[i].code, cases[i].path, NULL);
    }

    /* exactly three keys: a fourth is refused, whatever its name */
    static const char *const extra[] = {"Data", "byteorder", "", "shape "};
    for (size_t i = 0; i < 4; i++) {
        json_t *r = full_request(), *t = to_tensor(tj_at(r, "/weights/heads/1/w_k"));
        char path[64];
        json_object_set_new(t, extra[i], json_true());
        tj_put(r, "/weights/heads/1/w_k", t);
        snprintf(path, sizeof path, "/weights/heads/1/w_k/%s", extra[i]);
        expect_error(r, NULL, 400, "unknown_field", path, NULL);
    }
    /* a tensor where no matrix is read stays what it was: a mask, tokens */
    json_t *r = base_request();
    tj_put(r, "/mask", to_tensor(tj_at(r, "/embeddings")));
    expect_error(r, NULL, 400, "wrong_type", "/mask", NULL);
    r = base_request();
    tj_put(r, "/tokens", tensor_obj("\"float32\"", "[3]", "\"\""));
    expect_error(r, NULL, 400, "wrong_type", "/tokens", NULL);
}
END_TEST

/* The messages say what is wrong, where. */
START_TEST(test_error_messages) {
    attn_error err;
    json_t *r = base_request();
    tj_put(r, "/embeddings",
           tensor_obj("\"float32\"", "[3,4]",
                      "\"AAAAAAAAgD8AAADAAACAPgAAQEAAAAA/AACAvwAAIEEAA!AAAAAAAAAAAD4AAIA/\""));
    expect_error(r, NULL, 422, "invalid_tensor", "/embeddings/data", &err);
    ck_assert_msg(strstr(err.message, "'!' at offset 45"), "%s", err.message);

    /* a trailing newline (as the base64 tool writes) is named as such, not
     * as a length that disagrees with the shape */
    r = base_request();
    char nl[80];
    snprintf(nl, sizeof nl, "%.65s\\n\"", data12);
    tj_put(r, "/embeddings", tensor_obj("\"float32\"", "[3,4]", nl));
    expect_error(r, NULL, 422, "invalid_tensor", "/embeddings/data", &err);
    ck_assert_msg(strstr(err.message, "0x0a at offset 64"), "%s", err.message);

    r = base_request();
    tj_put(r, "/embeddings", tensor_obj("\"float32\"", "[3,4]", "\"AAAA\""));
    expect_error(r, NULL, 422, "dimension_mismatch", "/embeddings/data", &err);
    ck_assert_msg(strstr(err.message, "3 bytes") && strstr(err.message, "[3, 4] needs 48"), "%s",
                  err.message);

    r = base_request();
    tj_put(r, "/embeddings", tensor_obj("\"bfloat16\"", "[3,4]", data12));
    expect_error(r, NULL, 422, "invalid_tensor", "/embeddings/dtype", &err);
    ck_assert_msg(strstr(err.message, "float32"), "%s", err.message);

    r = base_request();
    tj_put(r, "/weights/heads/0/w_q", tensor_obj("\"float32\"", "[4,2,1]", "\"\""));
    expect_error(r, NULL, 400, "wrong_type", "/weights/heads/0/w_q/shape", &err);
    ck_assert_msg(strstr(err.message, "weights.heads[0].w_q") && strstr(err.message, "needs 2"),
                  "%s", err.message);
}
END_TEST

/* NaN and ±inf bit patterns in the data: 422 at the tensor, naming the element. */
START_TEST(test_non_finite_data) {
    static const uint32_t patterns[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u,
                                        0x7fffffffu, 0x7f800000u, 0xff800000u};
    static const char *const words[] = {"NaN", "NaN", "NaN", "NaN", "+Infinity", "-Infinity"};
    for (size_t p = 0; p < 6; p++) {
        /* embeddings (contiguous), element [2][1] */
        json_t *r = base_request();
        float e[12];
        size_t shape[2] = {3, 4};
        for (size_t i = 0; i < 12; i++)
            e[i] = (float)tj_val(i);
        memcpy(&e[9], &patterns[p], 4);
        tj_put(r, "/embeddings", tensor(e, shape, 2));
        attn_error err;
        expect_error(r, NULL, 422, "non_finite_number", "/embeddings", &err);
        ck_assert_msg(strstr(err.message, "[2][1]") && strstr(err.message, words[p]), "%s",
                      err.message);

        /* a bias (vector), element [1] */
        r = full_request();
        float b[2] = {0.5f, 0};
        size_t bshape[1] = {2};
        memcpy(&b[1], &patterns[p], 4);
        tj_put(r, "/weights/heads/1/b_v", tensor(b, bshape, 1));
        expect_error(r, NULL, 422, "non_finite_number", "/weights/heads/1/b_v", &err);
        ck_assert_msg(strstr(err.message, "[1]") && strstr(err.message, words[p]), "%s",
                      err.message);
    }

    /* a head's w_q inside the packed buffer, decoded in parts: the bad value
     * in the third part (values 1536 …) is still named by its place */
    json_t *r = request_with(2, 64, 2, 32);
    float *w = malloc(64 * 32 * sizeof *w);
    size_t shape[2] = {64, 32};
    for (size_t i = 0; i < 64 * 32; i++)
        w[i] = (float)tj_val(i);
    w[1600] = NAN; /* row 50, column 0 */
    tj_put(r, "/weights/heads/1/w_q", tensor(w, shape, 2));
    attn_error err;
    expect_error(r, NULL, 422, "non_finite_number", "/weights/heads/1/w_q", &err);
    ck_assert_msg(strstr(err.message, "[50][0]") && strstr(err.message, "1600"), "%s", err.message);

    /* and a bad character in its second part */
    r = request_with(2, 64, 2, 32);
    w[1600] = 0;
    json_t *t = tensor(w, shape, 2);
    char *text = strdup(json_string_value(json_object_get(t, "data")));
    text[5000] = '*';
    json_object_set_new(t, "data", json_string(text));
    tj_put(r, "/weights/heads/0/w_k", t);
    expect_error(r, NULL, 422, "invalid_tensor", "/weights/heads/0/w_k/data", &err);
    ck_assert_msg(strstr(err.message, "offset 5000"), "%s", err.message);
    /* and padding in the middle of it */
    r = request_with(2, 64, 2, 32);
    t = tensor(w, shape, 2);
    text[5000] = '=';
    json_object_set_new(t, "data", json_string(text));
    tj_put(r, "/weights/heads/0/w_v", t);
    expect_error(r, NULL, 422, "invalid_tensor", "/weights/heads/0/w_v/data", &err);
    ck_assert_msg(strstr(err.message, "offset 5000"), "%s", err.message);
    free(text);
    free(w);
}
END_TEST

/* The limits hold from the shape alone: the data (here none at all, or the
 * wrong length) is never looked at. */
START_TEST(test_limits_from_shape) {
    api_limits small = big_limits;
    small.max_tokens = 8, small.max_d_model = 16, small.max_heads = 2;
    static const struct {
        const char *field, *shape, *path;
    } cases[] = {
        {"/embeddings", "[9,4]", "/embeddings"},
        {"/embeddings", "[1000000000,4]", "/embeddings"},
        {"/embeddings", "[3,17]", "/embeddings"},
        {"/embeddings", "[3,1e15]", "/embeddings"},
        {"/weights/heads/0/w_q", "[4,17]", "/weights/heads/0/w_q"},
        {"/weights/heads/0/w_q", "[4,4000000000000]", "/weights/heads/0/w_q"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static const char *const datas[] = {"\"\"", "\"AAAA\"", "\"not base64!\"", data12};
        for (size_t d = 0; d < 4; d++) {
            json_t *r = base_request();
            tj_put(r, cases[i].field, tensor_obj("\"float32\"", cases[i].shape, datas[d]));
            attn_error err;
            expect_error(r, &small, 422, "limit_exceeded", cases[i].path, &err);
            ck_assert_msg(strstr(err.message, "max_"), "%s", err.message);
        }
    }
    /* at the limit, with the right data, it passes */
    json_t *r = request_with(8, 16, 2, 8);
    tensorize(r, "/embeddings");
    tensorize(r, "/weights/heads/1/w_v");
    api_call_free(decode_ok_limits(r, &small));
}
END_TEST

/* ---- the suite ------------------------------------------------------------- */

static Suite *binary_suite(void) {
    Suite *s = suite_create("binary");
    TCase *b64 = tcase_create("base64");
    TCase *in = tcase_create("requests");
    TCase *out = tcase_create("responses");
    TCase *errors = tcase_create("errors");

    tcase_add_test(b64, test_base64_rfc4648_vectors);
    tcase_add_test(b64, test_base64_round_trip_lengths);
    tcase_add_test(b64, test_base64_invalid);
    tcase_add_test(b64, test_base64_speed);
    tcase_set_timeout(b64, 60);
    tcase_add_test(in, test_inputs_as_tensors);
    tcase_add_test(in, test_inputs_random_and_large);
    tcase_add_test(out, test_outputs_each_return);
    tcase_add_test(out, test_outputs_select_heads);
    tcase_add_test(out, test_outputs_masked_scores);
    tcase_add_test(out, test_outputs_overflow);
    tcase_add_test(out, test_outputs_size_bound);
    tcase_add_test(errors, test_malformed_tensors);
    tcase_add_test(errors, test_error_messages);
    tcase_add_test(errors, test_non_finite_data);
    tcase_add_test(errors, test_limits_from_shape);
    suite_add_tcase(s, b64);
    suite_add_tcase(s, in);
    suite_add_tcase(s, out);
    suite_add_tcase(s, errors);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(binary_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
