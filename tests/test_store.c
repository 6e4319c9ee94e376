/*
 * test_store.c — the check suite of store/: the safetensors reader and
 * writer, the model loader, the model set and its holder, the built-in
 * models.
 *
 * Every test works in its own temporary directory (the fixture makes it
 * under $TMPDIR or /tmp and removes it). Broken files are written byte by
 * byte here (raw header text + data), so that each fault is exactly the one
 * named; valid files go through store_file_write. A refusal is checked for
 * the file's path AND a distinguishing piece of the message.
 *
 * The generator is tested through store/builtin.h (what tools/make_models
 * calls); when build/tools/make_models exists (the tests run from the
 * repository root), the binary is run too and its files compared.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attention/attention.h"
#include "store/builtin.h"
#include "store/model.h"
#include "store/safetensors.h"
#include "store/store.h"
#include "store/tensor.h"
#include "tests/fixtures.h"

/* ---- fixture: one temporary directory per test --------------------------- */

static char tmpdir[256];

static void setup(void) {
    tf_temp_dir(tmpdir, sizeof tmpdir, "store");
}

static void teardown(void) {
    tf_remove_dir(tmpdir);
}

/* "<tmpdir>/<name>" in a static buffer (one of a few, rotating). */
static const char *tpath(const char *name) {
    static char bufs[4][512];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", tmpdir, name);
    return p;
}

/* A subdirectory of tmpdir, created; its path in a static buffer. */
static const char *tsubdir(const char *name) {
    const char *p = tpath(name);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    return p;
}

/* ---- writing files by hand ------------------------------------------------- */

static void write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A safetensors file with header length `len` (as written in the first 8
 * bytes, whatever the header's real length), the header text, then data. */
static void write_st_len(const char *path, uint64_t len, const char *header, const void *data,
                         size_t data_bytes) {
    size_t hlen = strlen(header);
    unsigned char *buf = malloc(8 + hlen + data_bytes + 1);
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (data_bytes) memcpy(buf + 8 + hlen, data, data_bytes);
    write_bytes(path, buf, 8 + hlen + data_bytes);
    free(buf);
}

static void write_st(const char *path, const char *header, const void *data, size_t data_bytes) {
    write_st_len(path, strlen(header), header, data, data_bytes);
}

/* 4096 small finite floats, for tensor data (filled once: the threads
 * test reads them from several threads). */
static float values_v[4096];
static pthread_once_t values_once = PTHREAD_ONCE_INIT;

static void values_fill(void) {
    for (int i = 0; i < 4096; i++)
        values_v[i] = (float)((i % 97) - 48) / 64.0f;
}

static const float *values(void) {
    pthread_once(&values_once, values_fill);
    return values_v;
}

/* The header of a valid one-head model of d_model 4 (w_qkv [4, 12], 192
 * bytes), with `meta` (the inside of __metadata__) and `more` (further
 * entries, starting with a comma, or ""). */
static const char *header_with(const char *meta, const char *more) {
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"__metadata__\":{%s},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[4,12],\"data_offsets\":[0,192]}%s}",
             meta, more);
    return buf;
}

/* ---- checking refusals ------------------------------------------------------ */

static void assert_message(const char *message, const char *path, const char *fault) {
    ck_assert_msg(strstr(message, path) != NULL, "message does not name %s: %s", path, message);
    ck_assert_msg(strstr(message, fault) != NULL, "message does not say '%s': %s", fault, message);
}

/* The file at path is refused by the reader with `fault` in the message. */
static void expect_file_fault(const char *path, const char *fault) {
    store_file *f = (store_file *)1;
    attn_error err = {0};
    ck_assert_int_eq(store_file_open(&f, path, &err), -1);
    ck_assert_ptr_null(f);
    assert_message(err.message, path, fault);
}

/* The file at path is refused by the model loader with `fault`. */
static void expect_model_fault(const char *path, const char *fault) {
    store_model *m = (store_model *)1;
    attn_error err = {0};
    ck_assert_int_eq(store_model_load(&m, path, &err), -1);
    ck_assert_ptr_null(m);
    assert_message(err.message, path, fault);
}

static store_model *load_ok(const char *path) {
    store_model *m = NULL;
    attn_error err = {0};
    ck_assert_msg(store_model_load(&m, path, &err) == 0, "load failed: %s", err.message);
    return m;
}

static store_model *load_mode_ok(const char *path, store_read_mode mode) {
    store_model *m = NULL;
    attn_error err = {0};
    ck_assert_msg(store_model_load_mode(&m, path, mode, &err) == 0, "load failed: %s", err.message);
    return m;
}

/* 1 when p lies in a mapping of the file at path (from /proc/self/maps). */
static int in_file_mapping(const void *p, const char *path) {
    char real[4096];
    ck_assert_ptr_nonnull(realpath(path, real));
    FILE *maps = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(maps);
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        line[strcspn(line, "\n")] = '\0';
        size_t len = strlen(line), rlen = strlen(real);
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || len < rlen ||
            strcmp(line + len - rlen, real) != 0)
            continue;
        found = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    }
    fclose(maps);
    return found;
}

/* ---- the reader's refusals ---------------------------------------------------- */

START_TEST(test_truncated) {
    const char *p = tpath("short.safetensors");
    write_bytes(p, "\x10\0\0\0\0", 5);
    expect_file_fault(p, "shorter than the 8-byte header length");
    write_bytes(p, "", 0);
    expect_file_fault(p, "file is 0 bytes, shorter than");
    /* Also refused by the model loader and the set, with the same words. */
    expect_model_fault(p, "shorter than");
}
END_TEST

START_TEST(test_header_past_end) {
    const char *p = tpath("past.safetensors");
    write_st_len(p, 1000, "{}", NULL, 0);
    expect_file_fault(p, "header length 1000 runs past the end of the file (10 bytes)");
    write_st_len(p, (uint64_t)1 << 40, "{}", NULL, 0);
    expect_file_fault(p, "absurdly large");
    write_st_len(p, UINT64_MAX, "{}", NULL, 0);
    expect_file_fault(p, "absurdly large");
}
END_TEST

START_TEST(test_header_not_json) {
    const char *p = tpath("notjson.safetensors");
    write_st(p, "{\"w_qkv\": oops}", NULL, 0);
    expect_file_fault(p, "header is not valid JSON");
    write_st(p, "[1, 2]", NULL, 0);
    expect_file_fault(p, "header is not a JSON object");
    write_st(p, "\"text\"", NULL, 0);
    expect_file_fault(p, "header is not valid JSON");
    write_st(p, "{\"a\": \"\xff\"}", NULL, 0);
    expect_file_fault(p, "header is not valid JSON");
}
END_TEST

START_TEST(test_header_duplicate_key) {
    const char *p = tpath("dup.safetensors");
    write_st(p,
             "{\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             values(), 4);
    expect_file_fault(p, "duplicate object key");
}
END_TEST

START_TEST(test_bad_dtype) {
    const char *p = tpath("dtype.safetensors");
    write_st(p, "{\"w_qkv\":{\"dtype\":\"F12\",\"shape\":[1],\"data_offsets\":[0,4]}}", values(),
             4);
    expect_file_fault(p, "tensor 'w_qkv': unsupported dtype 'F12'");
    write_st(p, "{\"w_qkv\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", values(),
             4);
    expect_file_fault(p, "unsupported dtype 'f32'");
    /* A dtype safetensors knows but a model cannot use. */
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"1\"},"
             "\"w_qkv\":{\"dtype\":\"I32\",\"shape\":[4,12],\"data_offsets\":[0,192]}}",
             values(), 192);
    expect_model_fault(p, "tensor 'w_qkv' has dtype I32; a model takes F32, F16 or BF16");
}
END_TEST

START_TEST(test_malformed_entries) {
    const char *p = tpath("entry.safetensors");
    static const struct {
        const char *entry, *fault;
    } cases[] = {
        {"\"x\":[1]", "tensor 'x': the entry is not a JSON object"},
        {"\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}", "tensor 'x': \"dtype\" is missing"},
        {"\"x\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}",
         "tensor 'x': \"dtype\" is not a string"},
        {"\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}", "tensor 'x': \"shape\" is missing"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}",
         "\"shape\" is not an array"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}",
         "\"shape\"[0] is not a non-negative integer"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}",
         "\"shape\"[0] is not a non-negative integer"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}",
         "9 dimensions, at most 8"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[1]}", "\"data_offsets\" is missing"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}",
         "\"data_offsets\" is not [begin, end]"},
        {"\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}",
         "\"data_offsets\" is not [begin, end]"},
        {"\"__metadata__\":[\"n_heads\"]", "\"__metadata__\" is not a JSON object"},
        {"\"__metadata__\":{\"n_heads\":1}", "\"__metadata__\" value of 'n_heads' is not a string"},
    };
    char header[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(header, sizeof header, "{%s}", cases[i].entry);
        write_st(p, header, values(), 16);
        expect_file_fault(p, cases[i].fault);
    }
}
END_TEST

START_TEST(test_offsets) {
    const char *p = tpath("offsets.safetensors");
    /* Overlap: b_qkv [100, 148) lies inside w_qkv [0, 192). */
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"b_qkv\":{\"dtype\":\"F32\",\"shape\":[12],"
                                              "\"data_offsets\":[100,148]}"),
             values(), 192);
    expect_file_fault(p, "tensors 'w_qkv' [0, 192] and 'b_qkv' [100, 148] overlap");
    /* Partial overlap, listed the other way round. */
    write_st(p,
             "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             values(), 16);
    expect_file_fault(p, "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    /* Empty tensors own no bytes: no overlap. */
    write_st(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
             values(), 8);
    store_file *f = NULL;
    attn_error err;
    ck_assert_msg(store_file_open(&f, p, &err) == 0, "%s", err.message);
    store_file_close(f);
    /* Past the data. */
    write_st(p, header_with("\"n_heads\":\"1\"", ""), values(), 188);
    expect_file_fault(p, "tensor 'w_qkv': data_offsets [0, 192] run past the end of the data "
                         "section (188 bytes)");
    /* Reversed. */
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", values(), 8);
    expect_file_fault(p, "tensor 'a': data_offsets [8, 4] are reversed");
}
END_TEST

START_TEST(test_shape_offset_disagree) {
    const char *p = tpath("size.safetensors");
    write_st(p, "{\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[4,12],\"data_offsets\":[0,188]}}",
             values(), 192);
    expect_file_fault(p, "make 48 elements = 192 bytes, but data_offsets [0, 188] span 188");
    write_st(p, "{\"w_qkv\":{\"dtype\":\"F16\",\"shape\":[4,12],\"data_offsets\":[0,192]}}",
             values(), 192);
    expect_file_fault(p, "F16 make 48 elements = 96 bytes");
    /* Element count × size overflows 64 bits. */
    write_st(p,
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
             "\"data_offsets\":[0,0]}}",
             NULL, 0);
    expect_file_fault(p, "tensor 'x': shape of 2 dimensions overflows a size");
    write_st(p,
             "{\"x\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
             "\"data_offsets\":[0,0]}}",
             NULL, 0);
    expect_file_fault(p, "overflows a size");
    /* A zero dimension makes the rest irrelevant. */
    write_st(p,
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],"
             "\"data_offsets\":[0,0]}}",
             NULL, 0);
    store_file *f = NULL;
    attn_error err;
    ck_assert_msg(store_file_open(&f, p, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_file_tensor(f, 0)->count, 0);
    store_file_close(f);
}
END_TEST

/* ---- the model's refusals ----------------------------------------------------- */

START_TEST(test_model_shapes_disagree) {
    const char *p = tpath("shapes.safetensors");
    /* 12 columns, 5 heads: 12 is not a multiple of 15. */
    write_st(p, header_with("\"n_heads\":\"5\"", ""), values(), 192);
    expect_model_fault(p, "tensor 'w_qkv' has 12 columns, not a multiple of 3·n_heads = 15");
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"1\"},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[48],\"data_offsets\":[0,192]}}",
             values(), 192);
    expect_model_fault(p, "tensor 'w_qkv' has shape [48], expected [d_model, 3·n_heads·d_head]");
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"1\"},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[0,12],\"data_offsets\":[0,0]}}",
             NULL, 0);
    expect_model_fault(p, "with both positive");
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"b_qkv\":{\"dtype\":\"F32\",\"shape\":[11],"
                                              "\"data_offsets\":[192,236]}"),
             values(), 236);
    expect_model_fault(p, "tensor 'b_qkv' has shape [11], expected [3·n_heads·d_head] = [12]");
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"w_o\":{\"dtype\":\"F32\",\"shape\":[4,3],"
                                              "\"data_offsets\":[192,240]}"),
             values(), 240);
    expect_model_fault(p, "tensor 'w_o' has shape [4, 3], expected [n_heads·d_head, d_model] = "
                          "[4, 4]");
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"b_o\":{\"dtype\":\"F32\",\"shape\":[2,2],"
                                              "\"data_offsets\":[192,208]}"),
             values(), 208);
    expect_model_fault(p, "tensor 'b_o' has shape [2, 2], expected [d_model] = [4]");
}
END_TEST

START_TEST(test_model_identity_rule) {
    const char *p = tpath("identity.safetensors");
    /* d_model 4, 2 heads of 4: hd = 8 needs a w_o. */
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"2\"},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[4,24],\"data_offsets\":[0,384]}}",
             values(), 384);
    expect_model_fault(p, "no tensor 'w_o', and the identity in its place needs n_heads·d_head "
                          "(8) == d_model (4)");
    /* With a w_o [8, 4] it loads. */
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"2\"},"
             "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[4,24],\"data_offsets\":[0,384]},"
             "\"w_o\":{\"dtype\":\"F32\",\"shape\":[8,4],\"data_offsets\":[384,512]}}",
             values(), 512);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(m->weights.d_head, 4);
    ck_assert_uint_eq(m->weights.n_heads, 2);
    ck_assert_ptr_nonnull(m->weights.w_o);
    store_model_destroy(m);
}
END_TEST

START_TEST(test_model_non_finite) {
    const char *p = tpath("nonfinite.safetensors");
    float data[52];
    memcpy(data, values(), sizeof data);
    data[5] = NAN;
    write_st(p, header_with("\"n_heads\":\"1\"", ""), data, 192);
    expect_model_fault(p, "tensor 'w_qkv' holds a non-finite value (NaN) at element 5");
    data[5] = 0.5f;
    data[48 + 2] = INFINITY; /* b_o[2] */
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"b_o\":{\"dtype\":\"F32\",\"shape\":[4],"
                                              "\"data_offsets\":[192,208]}"),
             data, 208);
    expect_model_fault(p, "tensor 'b_o' holds a non-finite value (inf) at element 2");
    data[48 + 2] = -INFINITY;
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"b_o\":{\"dtype\":\"F32\",\"shape\":[4],"
                                              "\"data_offsets\":[192,208]}"),
             data, 208);
    expect_model_fault(p, "(-inf) at element 2");
}
END_TEST

START_TEST(test_model_metadata) {
    const char *p = tpath("meta.safetensors");
    write_st(p, "{\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[4,12],\"data_offsets\":[0,192]}}",
             values(), 192);
    expect_model_fault(p, "metadata 'n_heads' is missing");
    write_st(p, header_with("\"name\":\"x\"", ""), values(), 192);
    expect_model_fault(p, "metadata 'n_heads' is missing");
    static const char *const bad_heads[] = {
        "0", "-1", "+1", " 1", "1 ", "one", "", "1.0", "99999999999999999999999"};
    char meta[128];
    for (size_t i = 0; i < sizeof bad_heads / sizeof *bad_heads; i++) {
        snprintf(meta, sizeof meta, "\"n_heads\":\"%s\"", bad_heads[i]);
        write_st(p, header_with(meta, ""), values(), 192);
        expect_model_fault(p, "not a decimal integer in 1");
    }
    write_st(p, header_with("\"n_heads\":\"1\",\"mask\":\"diagonal\"", ""), values(), 192);
    expect_model_fault(p, "metadata 'mask' is 'diagonal', expected 'causal' or 'none'");
    write_st(p, header_with("\"n_heads\":\"1\",\"mask\":\"Causal\"", ""), values(), 192);
    expect_model_fault(p, "metadata 'mask' is 'Causal'");

    /* Defaults: name from the file, description "", mask causal; unknown keys ignored. */
    write_st(p, header_with("\"n_heads\":\"1\",\"format\":\"pt\"", ""), values(), 192);
    store_model *m = load_ok(p);
    ck_assert_str_eq(m->name, "meta");
    ck_assert_str_eq(m->description, "");
    ck_assert_int_eq(m->mask, ATTN_MASK_CAUSAL);
    ck_assert_str_eq(m->path, p);
    store_model_destroy(m);
    write_st(p,
             header_with("\"n_heads\":\"1\",\"name\":\"Other_1.0-x\",\"mask\":\"none\","
                         "\"description\":\"我爱你\"",
                         ""),
             values(), 192);
    m = load_ok(p);
    ck_assert_str_eq(m->name, "Other_1.0-x");
    ck_assert_str_eq(m->description, "我爱你");
    ck_assert_int_eq(m->mask, ATTN_MASK_NONE);
    store_model_destroy(m);
}
END_TEST

START_TEST(test_model_bad_name) {
    const char *p = tpath("named.safetensors");
    write_st(p, header_with("\"n_heads\":\"1\",\"name\":\"a b\"", ""), values(), 192);
    expect_model_fault(p, "model name 'a b' (metadata 'name') does not match [A-Za-z0-9._-]{1,64}");
    write_st(p, header_with("\"n_heads\":\"1\",\"name\":\"\"", ""), values(), 192);
    expect_model_fault(p, "model name '' (metadata 'name') does not match");
    write_st(p, header_with("\"n_heads\":\"1\",\"name\":\"../etc\"", ""), values(), 192);
    expect_model_fault(p, "model name '../etc'");
    write_st(p, header_with("\"n_heads\":\"1\",\"name\":\"ünï\"", ""), values(), 192);
    expect_model_fault(p, "does not match");
    char meta[256], name[80];
    memset(name, 'a', 65);
    name[65] = '\0';
    snprintf(meta, sizeof meta, "\"n_heads\":\"1\",\"name\":\"%s\"", name);
    write_st(p, header_with(meta, ""), values(), 192);
    expect_model_fault(p, "does not match");
    name[64] = '\0'; /* 64 characters: fine */
    snprintf(meta, sizeof meta, "\"n_heads\":\"1\",\"name\":\"%s\"", name);
    write_st(p, header_with(meta, ""), values(), 192);
    store_model_destroy(load_ok(p));
    /* A name taken from a file name that does not fit. */
    const char *q = tpath("my model.safetensors");
    write_st(q, header_with("\"n_heads\":\"1\"", ""), values(), 192);
    expect_model_fault(q, "model name 'my model' (from the file name) does not match");
}
END_TEST

START_TEST(test_model_unknown_tensor) {
    const char *p = tpath("typo.safetensors");
    write_st(p,
             header_with("\"n_heads\":\"1\"", ",\"w_qvk\":{\"dtype\":\"F32\",\"shape\":[4],"
                                              "\"data_offsets\":[192,208]}"),
             values(), 208);
    expect_model_fault(
        p, "unknown tensor 'w_qvk' (a model holds w_qkv, b_qkv, w_o, b_o; or w_q, b_q, w_kv, "
           "b_kv; and alibi, rope_short_factor, rope_long_factor, sinks, token_embeddings, "
           "position_embeddings)");
    write_st(p,
             "{\"__metadata__\":{\"n_heads\":\"1\"},"
             "\"b_o\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             values(), 16);
    expect_model_fault(p, "no tensor 'w_qkv' (it is required)");
}
END_TEST

/* ---- today's variants: grouped heads, RoPE, ALiBi, windows, cross-attention ---- */

/* One tensor of a model written by write_model: values from values(). */
typedef struct tspec {
    const char *name;
    size_t rank;
    size_t shape[2];
} tspec;

/* A model file through the writer: meta is key, value, …, NULL; then the
 * tensors. Elements beyond values()' 4096 repeat them. */
static void write_model(const char *path, const char *const *meta, const tspec *ts, size_t nt) {
    store_metadata md[32];
    size_t nm = 0;
    for (; meta && meta[2 * nm]; nm++) {
        ck_assert_uint_lt(nm, 32);
        md[nm] = (store_metadata){meta[2 * nm], meta[2 * nm + 1]};
    }
    store_write_tensor w[16];
    float *bufs[16];
    for (size_t i = 0; i < nt; i++) {
        size_t count = ts[i].rank == 1 ? ts[i].shape[0] : ts[i].shape[0] * ts[i].shape[1];
        bufs[i] = malloc(count * sizeof(float) + 4);
        for (size_t k = 0; k < count; k++)
            bufs[i][k] = values()[(k + 7 * i) % 4096];
        w[i] = (store_write_tensor){
            ts[i].name, STORE_DTYPE_F32, ts[i].rank, ts[i].shape, bufs[i], NULL, NULL};
    }
    attn_error err;
    int rc = store_file_write(path, md, nm, w, nt, NULL, &err);
    for (size_t i = 0; i < nt; i++)
        free(bufs[i]);
    ck_assert_msg(rc == 0, "%s", err.message);
}

/* d_model 8, 4 heads of 2, 2 K/V heads: w_qkv [8, (4 + 2·2)·2]. */
static const tspec gqa_tensors[] = {
    {"w_qkv", 2, {8, 16}}, {"b_qkv", 1, {16}}, {"w_o", 2, {8, 8}}, {"b_o", 1, {8}}};

/* The same heads as cross-attention from a context of width 6. */
static const tspec cross_tensors[] = {
    {"w_q", 2, {8, 8}}, {"b_q", 1, {8}}, {"w_kv", 2, {6, 8}}, {"b_kv", 1, {8}}, {"w_o", 2, {8, 8}}};

START_TEST(test_model_variants) {
    const char *p = tpath("variants.safetensors");

    /* An old file: every new field at its "none". */
    write_st(p, header_with("\"n_heads\":\"1\"", ""), values(), 192);
    store_model *m = load_ok(p);
    const attn_weights *w = &m->weights;
    ck_assert_uint_eq(w->n_kv_heads, 1);
    ck_assert_uint_eq(w->d_context, 4);
    ck_assert_ptr_null(w->w_kv);
    ck_assert_ptr_null(w->b_kv);
    ck_assert_uint_eq(w->rope.dims, 0);
    ck_assert_ptr_null(w->alibi);
    ck_assert_uint_eq(w->window, 0);
    ck_assert(w->softcap == 0 && w->scale == 0);
    store_model_destroy(m);

    /* Every key at once. */
    const char *all[] = {"n_heads",
                         "4",
                         "n_kv_heads",
                         "2",
                         "rope_theta",
                         "500000",
                         "rope_dims",
                         "2",
                         "rope_style",
                         "interleaved",
                         "rope_scaling",
                         "llama3",
                         "rope_factor",
                         "8",
                         "rope_low_freq_factor",
                         "1",
                         "rope_high_freq_factor",
                         "4",
                         "rope_original_max_position",
                         "8192",
                         "alibi",
                         "true",
                         "window",
                         "3",
                         "softcap",
                         "50.5",
                         "scale",
                         "0.25",
                         NULL};
    write_model(p, all, gqa_tensors, 4);
    m = load_ok(p);
    w = &m->weights;
    ck_assert_uint_eq(w->d_model, 8);
    ck_assert_uint_eq(w->n_heads, 4);
    ck_assert_uint_eq(w->n_kv_heads, 2);
    ck_assert_uint_eq(w->d_head, 2);
    ck_assert_uint_eq(w->d_context, 8);
    ck_assert_ptr_null(w->w_kv);
    ck_assert_uint_eq(w->rope.dims, 2);
    ck_assert(w->rope.theta == 500000);
    ck_assert_int_eq(w->rope.style, ATTN_ROPE_INTERLEAVED);
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(w->rope.factor == 8 && w->rope.low_freq_factor == 1 &&
              w->rope.high_freq_factor == 4 && w->rope.original_max_position == 8192);
    ck_assert_ptr_nonnull(w->alibi);
    /* the standard slopes of 4 heads: 2^-2, 2^-4, 2^-6, 2^-8 */
    for (int i = 0; i < 4; i++)
        ck_assert(w->alibi[i] == (float)ldexp(1, -2 * (i + 1)));
    ck_assert_uint_eq(w->window, 3);
    ck_assert(w->softcap == 50.5f);
    ck_assert(w->scale == 0.25f);
    ck_assert_int_eq(m->mask, ATTN_MASK_CAUSAL);
    store_model_destroy(m);

    /* yarn, every key; longrope with its lists (one value each: dims 2) */
    const char *yarn[] = {"n_heads",
                          "4",
                          "n_kv_heads",
                          "2",
                          "rope_theta",
                          "150000",
                          "rope_scaling",
                          "yarn",
                          "rope_factor",
                          "32",
                          "rope_original_max_position",
                          "4096",
                          "rope_beta_fast",
                          "16",
                          "rope_beta_slow",
                          "2",
                          "rope_mscale",
                          "-0.5",
                          "rope_mscale_all_dim",
                          "1",
                          "rope_truncate",
                          "false",
                          "rope_attention_factor",
                          "1.25",
                          NULL};
    write_model(p, yarn, gqa_tensors, 4);
    m = load_ok(p);
    w = &m->weights;
    ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_YARN);
    ck_assert(w->rope.factor == 32 && w->rope.original_max_position == 4096 &&
              w->rope.beta_fast == 16 && w->rope.beta_slow == 2 && w->rope.mscale == -0.5 &&
              w->rope.mscale_all_dim == 1 && w->rope.untruncated == 1 &&
              w->rope.attention_factor == 1.25);
    store_model_destroy(m);
    {
        store_metadata md[] = {{"n_heads", "4"},
                               {"n_kv_heads", "2"},
                               {"rope_theta", "10000"},
                               {"rope_scaling", "longrope"},
                               {"rope_original_max_position", "4096"},
                               {"rope_factor", "32"}};
        float qkv[8 * 16] = {0}, shortf[1] = {1.5f}, longf[1] = {0.0f};
        size_t s_qkv[2] = {8, 16}, s_one[1] = {1};
        store_write_tensor ts[] = {
            {"w_qkv", STORE_DTYPE_F32, 2, s_qkv, qkv, NULL, NULL},
            {"rope_short_factor", STORE_DTYPE_F32, 1, s_one, shortf, NULL, NULL},
            {"rope_long_factor", STORE_DTYPE_F32, 1, s_one, longf, NULL, NULL}};
        attn_error werr;
        ck_assert_msg(store_file_write(p, md, 6, ts, 3, NULL, &werr) == 0, "%s", werr.message);
        expect_model_fault(p, "tensor 'rope_long_factor' [0] is 0: longrope divides f_t by it");
        longf[0] = 24.0f;
        ck_assert_msg(store_file_write(p, md, 6, ts, 3, NULL, &werr) == 0, "%s", werr.message);
        m = load_ok(p);
        w = &m->weights;
        ck_assert_int_eq(w->rope.scaling, ATTN_ROPE_SCALING_LONGROPE);
        ck_assert(w->rope.factor == 32 && w->rope.original_max_position == 4096);
        ck_assert(w->rope.short_factor[0] == 1.5f && w->rope.long_factor[0] == 24.0f);
        store_model_destroy(m);
    }

    /* llama3 with high = low (Llama 4 Scout's 1 and 1): no band in between */
    const char *scout[] = {"n_heads",
                           "4",
                           "n_kv_heads",
                           "2",
                           "rope_theta",
                           "500000",
                           "rope_scaling",
                           "llama3",
                           "rope_factor",
                           "16",
                           "rope_low_freq_factor",
                           "1",
                           "rope_high_freq_factor",
                           "1",
                           "rope_original_max_position",
                           "8192",
                           NULL};
    write_model(p, scout, gqa_tensors, 4);
    m = load_ok(p);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(m->weights.rope.factor == 16 && m->weights.rope.low_freq_factor == 1 &&
              m->weights.rope.high_freq_factor == 1);
    store_model_destroy(m);

    /* RoPE from rope_theta alone: every coordinate, half, no scaling;
     * from rope_dims alone: theta 10000; linear scaling; alibi false;
     * explicit slopes. */
    const char *theta_only[] = {"n_heads", "4", "n_kv_heads", "2", "rope_theta", "10000.5", NULL};
    write_model(p, theta_only, gqa_tensors, 4);
    m = load_ok(p);
    ck_assert_uint_eq(m->weights.rope.dims, 2);
    ck_assert(m->weights.rope.theta == 10000.5);
    ck_assert_int_eq(m->weights.rope.style, ATTN_ROPE_HALF);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_NONE);
    store_model_destroy(m);
    const char *linear[] = {
        "n_heads", "4",           "rope_dims", "2",     "rope_style", "half", "rope_scaling",
        "linear",  "rope_factor", "2.5",       "alibi", "false",      NULL};
    const tspec mha[] = {{"w_qkv", 2, {8, 24}}, {"w_o", 2, {8, 8}}};
    write_model(p, linear, mha, 2);
    m = load_ok(p);
    ck_assert_uint_eq(m->weights.n_kv_heads, 4);
    ck_assert(m->weights.rope.theta == 10000);
    ck_assert_int_eq(m->weights.rope.scaling, ATTN_ROPE_SCALING_LINEAR);
    ck_assert(m->weights.rope.factor == 2.5);
    ck_assert_ptr_null(m->weights.alibi);
    store_model_destroy(m);
    const tspec with_slopes[] = {{"w_qkv", 2, {8, 24}}, {"w_o", 2, {8, 8}}, {"alibi", 1, {4}}};
    const char *four[] = {"n_heads", "4", NULL};
    write_model(p, four, with_slopes, 3);
    m = load_ok(p);
    ck_assert_ptr_nonnull(m->weights.alibi);
    for (int i = 0; i < 4; i++)
        ck_assert(m->weights.alibi[i] == values()[(i + 14) % 4096]);
    store_model_destroy(m);

    /* Cross-attention: weights.w_qkv is w_q, w_kv [dc, 2gd], mask none. */
    const char *cross[] = {"n_heads", "4", "n_kv_heads", "2", "softcap", "30", NULL};
    write_model(p, cross, cross_tensors, 5);
    m = load_ok(p);
    w = &m->weights;
    ck_assert_uint_eq(w->d_model, 8);
    ck_assert_uint_eq(w->d_head, 2);
    ck_assert_uint_eq(w->n_kv_heads, 2);
    ck_assert_uint_eq(w->d_context, 6);
    ck_assert_int_eq(m->mask, ATTN_MASK_NONE);
    ck_assert(w->w_qkv[0] == values()[0] && w->w_qkv[63] == values()[63]);
    ck_assert(w->b_qkv[0] == values()[7]);
    ck_assert_ptr_nonnull(w->w_kv);
    ck_assert(w->w_kv[0] == values()[14] && w->w_kv[47] == values()[14 + 47]);
    ck_assert(w->b_kv[0] == values()[21]);
    ck_assert(w->softcap == 30);
    ck_assert_uint_eq(w->rope.dims, 0);
    store_model_destroy(m);
    const char *cross_none[] = {"n_heads", "4", "n_kv_heads", "2", "mask", "none", NULL};
    const tspec cross_bare[] = {{"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 8}}, {"w_o", 2, {8, 8}}};
    write_model(p, cross_none, cross_bare, 3);
    m = load_ok(p);
    ck_assert_ptr_null(m->weights.b_qkv);
    ck_assert_ptr_null(m->weights.b_kv);
    store_model_destroy(m);
}
END_TEST

/* The file written with `meta` (and the given tensors) is refused with fault. */
static void expect_meta_fault(const char *const *meta, const tspec *ts, size_t nt,
                              const char *fault) {
    const char *p = tpath("bad-variant.safetensors");
    write_model(p, meta, ts, nt);
    expect_model_fault(p, fault);
}

#define GQA(...)   ((const char *const[]){"n_heads", "4", "n_kv_heads", "2", __VA_ARGS__, NULL})
#define CROSS(...) ((const char *const[]){"n_heads", "4", "n_kv_heads", "2", __VA_ARGS__, NULL})

START_TEST(test_model_variant_faults) {
    const tspec *g = gqa_tensors, *c = cross_tensors;
    /* n_kv_heads */
    expect_meta_fault((const char *const[]){"n_heads", "4", "n_kv_heads", "3", NULL}, g, 4,
                      "metadata 'n_kv_heads' is 3, which does not divide n_heads (4)");
    static const char *const bad_counts[] = {"0", "-1", "2.0", "two", "", " 2", "99999999999"};
    for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++) {
        expect_meta_fault((const char *const[]){"n_heads", "4", "n_kv_heads", bad_counts[i], NULL},
                          g, 4, "metadata 'n_kv_heads' is");
        expect_meta_fault(GQA("window", bad_counts[i]), g, 4, "metadata 'window' is");
        expect_meta_fault(GQA("rope_dims", bad_counts[i]), g, 4, "metadata 'rope_dims' is");
    }
    /* w_qkv's columns against h + 2g, and b_qkv */
    expect_meta_fault(
        (const char *const[]){"n_heads", "4", "n_kv_heads", "1", NULL}, g, 4,
        "tensor 'w_qkv' has 16 columns, not a multiple of n_heads + 2·n_kv_heads = 6");
    const tspec bad_b[] = {{"w_qkv", 2, {8, 16}}, {"b_qkv", 1, {24}}, {"w_o", 2, {8, 8}}};
    expect_meta_fault(GQA("mask", "causal"), bad_b, 3,
                      "tensor 'b_qkv' has shape [24], expected [(n_heads + 2·n_kv_heads)·d_head] "
                      "= [16]");

    /* numbers */
    static const char *const bad_numbers[] = {
        "0",  "-1", "abc",  "1e999", "nan", "inf", "",
        " 1", "1 ", "0x10", "1,5",   "-0",  "1e39"}; /* 1e39: past float32, for RoPE too */
    for (size_t i = 0; i < sizeof bad_numbers / sizeof *bad_numbers; i++) {
        expect_meta_fault(GQA("softcap", bad_numbers[i]), g, 4, "metadata 'softcap' is");
        expect_meta_fault(GQA("scale", bad_numbers[i]), g, 4, "metadata 'scale' is");
        expect_meta_fault(GQA("rope_theta", bad_numbers[i]), g, 4, "metadata 'rope_theta' is");
        expect_meta_fault(
            GQA("rope_theta", "10", "rope_scaling", "linear", "rope_factor", bad_numbers[i]), g, 4,
            "metadata 'rope_factor' is");
    }
    expect_meta_fault(GQA("softcap", "1e39"), g, 4, "not a finite number > 0 (as float32)");
    expect_meta_fault(GQA("scale", "1e-50"), g, 4, "not a finite number > 0 (as float32)");

    /* RoPE */
    expect_meta_fault(GQA("rope_dims", "3"), g, 4,
                      "RoPE dims 3 (metadata 'rope_dims'): it must be even and at most d_head (2)");
    expect_meta_fault(GQA("rope_dims", "4"), g, 4, "at most d_head (2)");
    const tspec odd[] = {{"w_qkv", 2, {3, 9}}}; /* one head of 3 */
    expect_meta_fault((const char *const[]){"n_heads", "1", "rope_theta", "10000", NULL}, odd, 1,
                      "RoPE dims 3 (d_head, the default)");
    expect_meta_fault(GQA("rope_theta", "10", "rope_style", "Half"), g, 4,
                      "metadata 'rope_style' is 'Half', expected 'half' or 'interleaved'");
    expect_meta_fault(GQA("rope_style", "half"), g, 4,
                      "metadata 'rope_style' without RoPE (RoPE is on when 'rope_theta'");
    expect_meta_fault(GQA("rope_scaling", "linear", "rope_factor", "2"), g, 4,
                      "metadata 'rope_scaling' without RoPE");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "dynamic"), g, 4,
                      "metadata 'rope_scaling' is 'dynamic', expected 'linear', 'llama3', 'yarn' "
                      "or 'longrope'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "yarn", "rope_factor", "4"), g, 4,
                      "'yarn' needs 'rope_original_max_position'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "yarn", "rope_factor", "4",
                          "rope_original_max_position", "64", "rope_truncate", "no"),
                      g, 4, "metadata 'rope_truncate' is 'no', expected 'true' or 'false'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "yarn", "rope_factor", "4",
                          "rope_original_max_position", "64", "rope_beta_fast", "0"),
                      g, 4, "metadata 'rope_beta_fast' is '0', not a finite number > 0");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "yarn", "rope_factor", "4",
                          "rope_original_max_position", "64", "rope_mscale", "nan"),
                      g, 4, "metadata 'rope_mscale' is 'nan', not a finite number");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "linear", "rope_factor", "2",
                          "rope_beta_slow", "1"),
                      g, 4, "metadata 'rope_beta_slow' without a 'rope_scaling' that uses it");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "yarn", "rope_factor",
                          "22026.465794806718", "rope_original_max_position", "64", "rope_mscale",
                          "1", "rope_mscale_all_dim", "-1"),
                      g, 4, "gives an attention factor of inf");
    expect_meta_fault(
        GQA("rope_theta", "10", "rope_scaling", "longrope", "rope_original_max_position", "64"), g,
        4, "metadata 'rope_scaling' 'longrope' needs tensor 'rope_short_factor'");
    const tspec lists[] = {
        {"w_qkv", 2, {8, 16}}, {"rope_short_factor", 1, {1}}, {"rope_long_factor", 1, {2}}};
    expect_meta_fault(
        GQA("rope_theta", "10", "rope_scaling", "longrope", "rope_original_max_position", "64"),
        lists, 3, "tensor 'rope_long_factor' has shape [2], expected [rope dims/2]");
    expect_meta_fault(GQA("rope_theta", "10"), lists, 2,
                      "tensor 'rope_short_factor' without metadata 'rope_scaling' 'longrope'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "linear"), g, 4,
                      "metadata 'rope_scaling' 'linear' needs 'rope_factor'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_factor", "2"), g, 4,
                      "metadata 'rope_factor' without a 'rope_scaling' that uses it");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "linear", "rope_factor", "2",
                          "rope_low_freq_factor", "1"),
                      g, 4, "metadata 'rope_low_freq_factor' without a 'rope_scaling'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "llama3", "rope_factor", "8",
                          "rope_low_freq_factor", "1", "rope_high_freq_factor", "4"),
                      g, 4, "'llama3' needs 'rope_original_max_position'");
    expect_meta_fault(GQA("rope_theta", "10", "rope_scaling", "llama3", "rope_factor", "8",
                          "rope_low_freq_factor", "4", "rope_high_freq_factor", "2",
                          "rope_original_max_position", "8192"),
                      g, 4,
                      "'rope_high_freq_factor' (2) must not be below 'rope_low_freq_factor' (4)");

    /* ALiBi */
    expect_meta_fault(GQA("alibi", "yes"), g, 4,
                      "metadata 'alibi' is 'yes', expected 'true' or 'false'");
    const tspec slopes[] = {{"w_qkv", 2, {8, 16}}, {"w_o", 2, {8, 8}}, {"alibi", 1, {4}}};
    expect_meta_fault(GQA("alibi", "true"), slopes, 3, "one or the other");
    const tspec slopes3[] = {{"w_qkv", 2, {8, 16}}, {"w_o", 2, {8, 8}}, {"alibi", 1, {3}}};
    expect_meta_fault(GQA("mask", "causal"), slopes3, 3,
                      "tensor 'alibi' has shape [3], expected [n_heads] = [4]");
    {
        const char *p = tpath("nan-slope.safetensors");
        float data[8 * 16 + 4];
        memcpy(data, values(), sizeof data);
        data[8 * 16 + 2] = NAN;
        write_st(p,
                 "{\"__metadata__\":{\"n_heads\":\"4\",\"n_kv_heads\":\"2\"},"
                 "\"w_qkv\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[0,512]},"
                 "\"alibi\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[512,528]}}",
                 data, sizeof data);
        expect_model_fault(p, "tensor 'alibi' holds a non-finite value (NaN) at element 2");
    }

    /* cross-attention */
    expect_meta_fault(CROSS("rope_theta", "10000"), c, 5,
                      "'rope_theta' in a cross-attention model (w_q, w_kv)");
    expect_meta_fault(CROSS("rope_dims", "2"), c, 5, "'rope_dims' in a cross-attention model");
    expect_meta_fault(CROSS("alibi", "true"), c, 5, "'alibi' in a cross-attention model");
    expect_meta_fault(CROSS("window", "4"), c, 5, "'window' in a cross-attention model");
    expect_meta_fault(CROSS("rope_style", "half"), c, 5, "metadata 'rope_style' without RoPE");
    expect_meta_fault(CROSS("mask", "causal"), c, 5,
                      "metadata 'mask' is 'causal' in a cross-attention model");
    const tspec both[] = {{"w_qkv", 2, {8, 16}}, {"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 8}}};
    expect_meta_fault(CROSS("mask", "none"), both, 3, "holds both 'w_qkv' and 'w_q'");
    const tspec q_only[] = {{"w_q", 2, {8, 8}}, {"w_o", 2, {8, 8}}};
    expect_meta_fault(CROSS("mask", "none"), q_only, 2, "no tensor 'w_kv'");
    const tspec kv_only[] = {{"w_kv", 2, {6, 8}}, {"w_o", 2, {8, 8}}};
    expect_meta_fault(CROSS("mask", "none"), kv_only, 2, "no tensor 'w_q'");
    const tspec kv_wide[] = {{"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 16}}};
    expect_meta_fault(CROSS("mask", "none"), kv_wide, 2,
                      "tensor 'w_kv' has shape [6, 16], expected [d_context, 2·n_kv_heads·d_head] "
                      "= [d_context, 8]");
    const tspec q_odd[] = {{"w_q", 2, {8, 6}}, {"w_kv", 2, {6, 8}}};
    expect_meta_fault(CROSS("mask", "none"), q_odd, 2, "tensor 'w_q' has shape [8, 6]");
    const tspec bkv[] = {{"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 8}}, {"b_kv", 1, {6}}};
    expect_meta_fault(CROSS("mask", "none"), bkv, 3,
                      "tensor 'b_kv' has shape [6], expected [2·n_kv_heads·d_head] = [8]");
    const tspec bq[] = {{"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 8}}, {"b_q", 1, {16}}};
    expect_meta_fault(CROSS("mask", "none"), bq, 3,
                      "tensor 'b_q' has shape [16], expected [n_heads·d_head] = [8]");
}
END_TEST
#undef GQA
#undef CROSS

/* ---- stacks: a model of L layers ---------------------------------------------- */

#define STACK(...) ((const char *const[]){"n_heads", "4", "n_kv_heads", "2", __VA_ARGS__, NULL})

/* The values write_model gives tensor i of `count` elements. */
static void expect_values(const float *got, size_t i, size_t count) {
    for (size_t k = 0; k < count; k++)
        ck_assert_msg(got[k] == values()[(k + 7 * i) % 4096], "tensor %zu element %zu", i, k);
}

START_TEST(test_stack_load) {
    const char *p = tpath("stack.safetensors");
    static const tspec ts[] = {{"layers.0.w_qkv", 2, {8, 16}}, {"layers.0.b_qkv", 1, {16}},
                               {"layers.0.w_o", 2, {8, 8}},    {"layers.0.b_o", 1, {8}},
                               {"layers.1.w_qkv", 2, {8, 16}}, {"layers.2.w_qkv", 2, {8, 16}},
                               {"layers.2.w_o", 2, {8, 8}},    {"token_embeddings", 2, {2, 8}}};
    write_model(p,
                STACK("n_layers", "3", "layers.0.rope_theta", "500000", "layers.1.window", "3",
                      "layers.1.softcap", "30", "layers.2.alibi", "true", "layers.2.scale", "0.25",
                      "vocabulary", "[\"a\", \"b\"]", "mask", "none"),
                ts, 8);
    for (int mode = 0; mode < 2; mode++) {
        store_model *m = load_mode_ok(p, mode ? STORE_READ_MAP : STORE_READ_COPY);
        ck_assert_uint_eq(m->n_layers, 3);
        ck_assert_ptr_eq(m->layers[0], &m->weights);
        ck_assert_int_eq(m->mask, ATTN_MASK_NONE);
        ck_assert_uint_eq(m->vocab_size, 2);
        for (size_t l = 0; l < 3; l++) {
            const attn_weights *w = m->layers[l];
            ck_assert_uint_eq(w->d_model, 8);
            ck_assert_uint_eq(w->n_heads, 4);
            ck_assert_uint_eq(w->n_kv_heads, 2);
            ck_assert_uint_eq(w->d_head, 2);
            ck_assert_uint_eq(w->d_context, 8);
            /* written in place: each layer's F32 tensors are the file's */
            if (mode) ck_assert(in_file_mapping(w->w_qkv, p));
        }
        const attn_weights *w0 = m->layers[0], *w1 = m->layers[1], *w2 = m->layers[2];
        expect_values(w0->w_qkv, 0, 128);
        expect_values(w0->b_qkv, 1, 16);
        expect_values(w0->w_o, 2, 64);
        expect_values(w0->b_o, 3, 8);
        expect_values(w1->w_qkv, 4, 128);
        expect_values(w2->w_qkv, 5, 128);
        expect_values(w2->w_o, 6, 64);
        expect_values(m->token_embeddings, 7, 16);
        ck_assert_ptr_null(w1->w_o);
        ck_assert_ptr_null(w1->b_qkv);
        /* each layer's own variants */
        ck_assert_uint_eq(w0->rope.dims, 2);
        ck_assert(w0->rope.theta == 500000);
        ck_assert_uint_eq(w1->rope.dims, 0);
        ck_assert_uint_eq(w0->window, 0);
        ck_assert_uint_eq(w1->window, 3);
        ck_assert(w1->softcap == 30.0f && w0->softcap == 0);
        ck_assert_ptr_null(w0->alibi);
        ck_assert_ptr_nonnull(w2->alibi);
        ck_assert(w2->alibi[0] == 0.25f); /* 4 heads: 2^-2, … */
        ck_assert(w2->scale == 0.25f && w1->scale == 0);
        store_model_destroy(m);
    }

    /* A one-layer file, with or without the stack's form, is one layer. */
    write_model(p, STACK("window", "2"), gqa_tensors, 4);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(m->n_layers, 1);
    ck_assert_ptr_eq(m->layers[0], &m->weights);
    ck_assert_uint_eq(m->weights.window, 2);
    store_model_destroy(m);
    static const tspec one[] = {{"layers.0.w_qkv", 2, {8, 16}}};
    write_model(p, STACK("n_layers", "1", "layers.0.window", "2"), one, 1);
    m = load_ok(p);
    ck_assert_uint_eq(m->n_layers, 1);
    ck_assert_uint_eq(m->weights.window, 2);
    expect_values(m->weights.w_qkv, 0, 128);
    store_model_destroy(m);

    /* A stack of cross-attention layers, each its own w_q and w_kv. */
    static const tspec cross[] = {{"layers.0.w_q", 2, {8, 8}},
                                  {"layers.0.w_kv", 2, {6, 8}},
                                  {"layers.1.w_q", 2, {8, 8}},
                                  {"layers.1.w_kv", 2, {6, 8}},
                                  {"layers.1.b_kv", 1, {8}}};
    write_model(p, STACK("n_layers", "2"), cross, 5);
    m = load_ok(p);
    ck_assert_uint_eq(m->n_layers, 2);
    ck_assert_int_eq(m->mask, ATTN_MASK_NONE);
    ck_assert_uint_eq(m->layers[1]->d_context, 6);
    expect_values(m->layers[1]->w_kv, 3, 48);
    expect_values(m->layers[1]->b_kv, 4, 8);
    store_model_destroy(m);
}
END_TEST

/* A stacked file whose tensors are ts (nt of them) is refused with fault. */
#define STACK_FAULT(meta, fault, ...)                                                              \
    do {                                                                                           \
        static const tspec ts_[] = {__VA_ARGS__};                                                  \
        expect_meta_fault(meta, ts_, sizeof ts_ / sizeof ts_[0], fault);                           \
    } while (0)

#define W(l)                                                                                       \
    {                                                                                              \
        "layers." #l ".w_qkv", 2, {                                                                \
            8, 16                                                                                  \
        }                                                                                          \
    }
#define CQ(l)                                                                                      \
    {                                                                                              \
        "layers." #l ".w_q", 2, {                                                                  \
            8, 8                                                                                   \
        }                                                                                          \
    }
#define CK(l)                                                                                      \
    {                                                                                              \
        "layers." #l ".w_kv", 2, {                                                                 \
            6, 8                                                                                   \
        }                                                                                          \
    }

START_TEST(test_stack_faults) {
    /* n_layers itself */
    STACK_FAULT(STACK("n_layers", "0"),
                "metadata 'n_layers' is '0', not a decimal integer in 1 … 1024", W(0));
    STACK_FAULT(STACK("n_layers", "1025"),
                "metadata 'n_layers' is '1025', not a decimal integer in 1 … 1024", W(0));
    /* prefixes: absent, present without n_layers, malformed, past L */
    STACK_FAULT(STACK("window", "2"),
                "tensor 'layers.0.w_qkv' has a layer prefix and there is no metadata 'n_layers'",
                W(0));
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'w_qkv' has no layer prefix in a stack (metadata 'n_layers' 2): a "
                "layer's tensors are 'layers.<l>.w_qkv'",
                W(0), {"w_qkv", 2, {8, 16}});
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'layers.01.w_qkv': a layer's prefix is 'layers.<l>.'", W(0),
                {"layers.01.w_qkv", 2, {8, 16}});
    STACK_FAULT(STACK("n_layers", "2"), "tensor 'layers.x.w_o': a layer's prefix", W(0),
                {"layers.x.w_o", 2, {8, 8}});
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'layers.2.w_qkv' is of layer 2, and metadata 'n_layers' is 2 (layers 0 "
                "… 1)",
                W(0), W(1), W(2));
    STACK_FAULT(STACK("n_layers", "2"), "unknown tensor 'layers.1.token_embeddings'", W(0), W(1),
                {"layers.1.token_embeddings", 2, {2, 8}});
    STACK_FAULT(STACK("n_layers", "2"), "unknown tensor 'layers.1.w_qvk'", W(0), W(1),
                {"layers.1.w_qvk", 2, {8, 16}});
    /* a gap, a layer without its w_qkv */
    STACK_FAULT(STACK("n_layers", "3"), "no tensor 'layers.1.w_qkv' (it is required)", W(0), W(2));
    STACK_FAULT(STACK("n_layers", "2"), "no tensor 'layers.1.w_qkv' (it is required)", W(0),
                {"layers.1.w_o", 2, {8, 8}});
    /* kinds */
    STACK_FAULT(STACK("n_layers", "2"),
                "layer 1 is cross-attention (w_q, w_kv) and layer 0 self-attention: a stack's "
                "layers are all self-attention (w_qkv) or all cross-attention",
                W(0), CQ(1), CK(1));
    STACK_FAULT(STACK("n_layers", "2"), "holds both 'layers.1.w_qkv' and 'layers.1.w_q'", W(0),
                W(1), CQ(1), CK(1));
    STACK_FAULT(STACK("n_layers", "2"), "no tensor 'layers.1.w_kv'", CQ(0), CK(0), CQ(1));
    /* shared shapes */
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'layers.1.w_qkv' gives d_model 4 and d_head 2, and layer 0's d_model 8 "
                "and d_head 2: a stack's layers share d_model, n_heads, d_head and n_kv_heads",
                W(0), {"layers.1.w_qkv", 2, {4, 16}}, {"layers.1.w_o", 2, {8, 4}});
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'layers.1.w_qkv' gives d_model 8 and d_head 4, and layer 0's d_model 8 "
                "and d_head 2",
                W(0), {"layers.1.w_qkv", 2, {8, 32}}, {"layers.1.w_o", 2, {16, 8}});
    STACK_FAULT(STACK("n_layers", "2"),
                "tensor 'layers.1.w_kv' gives d_context 5, and layer 0's 6: a stack's layers "
                "read one context",
                CQ(0), CK(0), CQ(1), {"layers.1.w_kv", 2, {5, 8}});
    /* a layer's own shapes and keys, named with its prefix */
    STACK_FAULT(STACK("n_layers", "2"), "tensor 'layers.1.b_o' has shape [7], expected [d_model]",
                W(0), W(1), {"layers.1.b_o", 1, {7}});
    STACK_FAULT(STACK("n_layers", "2"), "tensor 'layers.1.w_qkv' has 15 columns", W(0),
                {"layers.1.w_qkv", 2, {8, 15}});
    STACK_FAULT(STACK("n_layers", "2", "layers.1.window", "0"),
                "metadata 'layers.1.window' is '0', not a decimal integer", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.1.rope_dims", "3"),
                "RoPE dims 3 (metadata 'layers.1.rope_dims'): it must be even", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.1.rope_style", "half"),
                "metadata 'layers.1.rope_style' without RoPE", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.0.alibi", "maybe"),
                "metadata 'layers.0.alibi' is 'maybe', expected 'true' or 'false'", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.1.rope_theta", "10000"),
                "'layers.1.rope_theta' in a cross-attention model", CQ(0), CK(0), CQ(1), CK(1));
    /* metadata keys and layers */
    STACK_FAULT(STACK("n_layers", "2", "window", "2"),
                "metadata 'window' without a layer prefix in a stack (metadata 'n_layers' 2): "
                "each layer's is 'layers.<l>.window'",
                W(0), W(1));
    STACK_FAULT(STACK("layers.0.window", "2"),
                "metadata 'layers.0.window' has a layer prefix and there is no metadata "
                "'n_layers'",
                {"w_qkv", 2, {8, 16}});
    STACK_FAULT(STACK("n_layers", "2", "layers.2.window", "2"),
                "metadata 'layers.2.window' is of layer 2, and metadata 'n_layers' is 2", W(0),
                W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.0.n_heads", "2"),
                "metadata 'layers.0.n_heads': 'n_heads' is not a layer's own", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "layers.00.scale", "2"),
                "metadata 'layers.00.scale': a layer's prefix", W(0), W(1));
}
END_TEST

/* Sinks and chunks (models/README.md): the tensor sinks [n_heads] and the
 * key chunk, a layer's own in a stack; their faults. */
START_TEST(test_sinks_chunk) {
    const char *p = tpath("sinks.safetensors");
    static const tspec one[] = {{"w_qkv", 2, {8, 16}}, {"sinks", 1, {4}}};
    write_model(p, STACK("chunk", "8192"), one, 2);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(m->weights.chunk, 8192);
    ck_assert_ptr_nonnull(m->weights.sinks);
    expect_values(m->weights.sinks, 1, 4);
    store_model_destroy(m);

    static const tspec two[] = {W(0), {"layers.0.sinks", 1, {4}}, W(1)};
    write_model(p, STACK("n_layers", "2", "layers.1.chunk", "3"), two, 3);
    m = load_ok(p);
    ck_assert_ptr_nonnull(m->layers[0]->sinks);
    ck_assert_ptr_null(m->layers[1]->sinks);
    ck_assert_uint_eq(m->layers[0]->chunk, 0);
    ck_assert_uint_eq(m->layers[1]->chunk, 3);
    store_model_destroy(m);

    STACK_FAULT(STACK("mask", "causal"), "tensor 'sinks' has shape [3], expected [n_heads] = [4]",
                {"w_qkv", 2, {8, 16}}, {"sinks", 1, {3}});
    STACK_FAULT(STACK("n_layers", "1"),
                "tensor 'layers.0.sinks' has shape [4, 1], expected [n_heads] = [4]", W(0),
                {"layers.0.sinks", 2, {4, 1}});
    static const char *const bad[] = {"0", "-1", "2.5", "x", "", "2147483649"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        STACK_FAULT(STACK("chunk", bad[i]), "metadata 'chunk' is", {"w_qkv", 2, {8, 16}});
    STACK_FAULT(STACK("n_layers", "2", "layers.1.chunk", "0"),
                "metadata 'layers.1.chunk' is '0', not a decimal integer", W(0), W(1));
    STACK_FAULT(STACK("n_layers", "2", "chunk", "2"),
                "metadata 'chunk' without a layer prefix in a stack", W(0), W(1));
    STACK_FAULT(STACK("chunk", "4", "mask", "none"), "'chunk' in a cross-attention model",
                {"w_q", 2, {8, 8}}, {"w_kv", 2, {6, 8}});
}
END_TEST

#undef W
#undef CQ
#undef CK

/* ---- dtypes ----------------------------------------------------------------- */

/* Independent reference: the value of a half's bit pattern in double. */
static double f16_ref(unsigned h) {
    int sign = h >> 15 ? -1 : 1;
    unsigned e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp((double)m, -24);
    return sign * ldexp((double)(1024 + m), (int)e - 25);
}

/* ck_ only on failure: a passing ck_assert records its location, a write to
 * check's runner, which 65536 times took seconds on a loaded machine. */
START_TEST(test_f16_all_values) {
    for (unsigned h = 0; h < 65536; h++) {
        float got = store_f16_to_f32((unsigned short)h);
        double want = f16_ref(h);
        if (isnan(want)) {
            if (!isnan(got)) ck_abort_msg("0x%04x: got %g, want NaN", h, (double)got);
        } else {
            if ((double)got != want)
                ck_abort_msg("0x%04x: got %.9g, want %.9g", h, (double)got, want);
            if ((signbit(got) != 0) != ((h >> 15) != 0)) /* -0 stays -0 */
                ck_abort_msg("0x%04x: got %g, of the wrong sign", h, (double)got);
        }
    }
    ck_assert(store_bf16_to_f32(0x3F80) == 1.0f);
    ck_assert(store_bf16_to_f32(0xC000) == -2.0f);
    ck_assert(signbit(store_bf16_to_f32(0x8000)) && store_bf16_to_f32(0x8000) == 0.0f);
    ck_assert(store_bf16_to_f32(0x0001) == ldexpf(1.0f, -133)); /* a float subnormal */
    ck_assert(isinf(store_bf16_to_f32(0x7F80)));
    ck_assert(isnan(store_bf16_to_f32(0x7FC0)));
}
END_TEST

/* A one-head model of d_model 4 whose w_qkv (48 values) is in `dtype`,
 * given as 16-bit patterns. */
static void write_half_model(const char *path, const char *dtype, const unsigned short *bits) {
    unsigned char data[96];
    for (int i = 0; i < 48; i++) {
        data[2 * i] = (unsigned char)(bits[i] & 0xFF);
        data[2 * i + 1] = (unsigned char)(bits[i] >> 8);
    }
    char header[256];
    snprintf(header, sizeof header,
             "{\"__metadata__\":{\"n_heads\":\"1\"},"
             "\"w_qkv\":{\"dtype\":\"%s\",\"shape\":[4,12],\"data_offsets\":[0,96]}}",
             dtype);
    write_st(path, header, data, sizeof data);
}

START_TEST(test_f16_model) {
    const char *p = tpath("half.safetensors");
    unsigned short bits[48];
    for (int i = 0; i < 48; i++)
        bits[i] = 0x3C00; /* 1.0 */
    bits[0] = 0x0001;     /* smallest subnormal 2^-24 */
    bits[1] = 0x03FF;     /* largest subnormal */
    bits[2] = 0x0400;     /* smallest normal 2^-14 */
    bits[3] = 0x8000;     /* -0 */
    bits[4] = 0x7BFF;     /* 65504 */
    bits[5] = 0xC000;     /* -2 */
    bits[6] = 0x3555;     /* 0.33325195 */
    bits[7] = 0x8001;     /* -2^-24 */
    write_half_model(p, "F16", bits);
    store_model *m = load_ok(p);
    const float *w = m->weights.w_qkv;
    ck_assert(w[0] == ldexpf(1.0f, -24));
    ck_assert(w[1] == ldexpf(1023.0f, -24));
    ck_assert(w[2] == ldexpf(1.0f, -14));
    ck_assert(w[3] == 0.0f && signbit(w[3]));
    ck_assert(w[4] == 65504.0f);
    ck_assert(w[5] == -2.0f);
    ck_assert(w[6] == 0.33325195f);
    ck_assert(w[7] == -ldexpf(1.0f, -24));
    for (int i = 8; i < 48; i++)
        ck_assert(w[i] == 1.0f);
    ck_assert_uint_eq((uintptr_t)w % 64, 0);
    ck_assert_uint_ge(m->bytes_owned, 48 * sizeof(float));
    ck_assert_uint_eq(m->bytes_mapped, 0); /* nothing in place: unmapped */
    store_model_destroy(m);

    bits[9] = 0x7C00; /* +inf */
    write_half_model(p, "F16", bits);
    expect_model_fault(p, "tensor 'w_qkv' holds a non-finite value (inf) at element 9");
    bits[9] = 0xFC00; /* -inf */
    write_half_model(p, "F16", bits);
    expect_model_fault(p, "(-inf) at element 9");
    bits[9] = 0x7E00; /* NaN */
    write_half_model(p, "F16", bits);
    expect_model_fault(p, "(NaN) at element 9");
}
END_TEST

START_TEST(test_bf16_model) {
    const char *p = tpath("bf16.safetensors");
    unsigned short bits[48];
    for (int i = 0; i < 48; i++)
        bits[i] = 0x3F80; /* 1.0 */
    bits[0] = 0xC000;     /* -2 */
    bits[1] = 0x8000;     /* -0 */
    bits[2] = 0x0001;     /* 2^-133, subnormal as a float too */
    bits[3] = 0x3EAB;     /* 0.333984375 */
    bits[4] = 0x7F7F;     /* the largest bf16 */
    write_half_model(p, "BF16", bits);
    store_model *m = load_ok(p);
    const float *w = m->weights.w_qkv;
    ck_assert(w[0] == -2.0f);
    ck_assert(w[1] == 0.0f && signbit(w[1]));
    ck_assert(w[2] == ldexpf(1.0f, -133));
    ck_assert(w[3] == 0.333984375f);
    ck_assert(w[4] == ldexpf(255.0f, 120)); /* 0x7F7F0000 = 1.9921875 · 2^127 */
    ck_assert(w[47] == 1.0f);
    store_model_destroy(m);
    bits[7] = 0xFF80; /* -inf */
    write_half_model(p, "BF16", bits);
    expect_model_fault(p, "(-inf) at element 7");
    bits[7] = 0x7FC1; /* NaN */
    write_half_model(p, "BF16", bits);
    expect_model_fault(p, "(NaN) at element 7");
}
END_TEST

START_TEST(test_f32_in_place) {
    const char *p = tpath("inplace.safetensors");
    /* A header padded with spaces to 8 bytes, as the format recommends:
     * w_qkv's bytes are then aligned in the file. */
    char header[2048 + 8];
    snprintf(header, sizeof header, "%s",
             header_with("\"n_heads\":\"1\"", ",\"b_o\":{\"dtype\":\"F16\",\"shape\":[4],"
                                              "\"data_offsets\":[192,200]}"));
    while (strlen(header) % 8 != 0)
        strcat(header, " ");
    write_st(p, header, values(), 200);
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    /* Mapped: w_qkv is read from the mapping, b_o (F16) was converted into
     * an owned buffer. */
    store_model *m = load_mode_ok(p, STORE_READ_MAP);
    ck_assert(in_file_mapping(m->weights.w_qkv, p));
    ck_assert_uint_eq(m->bytes_mapped, (size_t)sb.st_size);
    ck_assert(!in_file_mapping(m->weights.b_o, p));
    ck_assert_uint_gt(m->bytes_owned, 0);
    ck_assert_uint_lt(m->bytes_owned, 4096);
    ck_assert(memcmp(m->weights.w_qkv, values(), 192) == 0);
    store_model_destroy(m);
    /* Copied (the default): nothing is mapped; w_qkv is used in place in
     * the file's buffer, which the model owns beside b_o's. */
    m = load_ok(p);
    ck_assert(!in_file_mapping(m->weights.w_qkv, p));
    ck_assert_uint_eq(m->bytes_mapped, 0);
    ck_assert_uint_ge(m->bytes_owned, (size_t)sb.st_size + 4 * sizeof(float));
    ck_assert(memcmp(m->weights.w_qkv, values(), 192) == 0);
    store_model_destroy(m);

    /* Through the writer the layout is always aligned. */
    size_t shape[2] = {4, 12};
    store_write_tensor t = {"w_qkv", STORE_DTYPE_F32, 2, shape, values(), NULL, NULL};
    store_metadata meta = {"n_heads", "1"};
    attn_error err;
    ck_assert_int_eq(store_file_write(p, &meta, 1, &t, 1, NULL, &err), 0);
    m = load_mode_ok(p, STORE_READ_MAP);
    ck_assert(in_file_mapping(m->weights.w_qkv, p));
    ck_assert_uint_eq(m->bytes_owned, 0);
    ck_assert(memcmp(m->weights.w_qkv, values(), 192) == 0);
    store_model_destroy(m);
}
END_TEST

/* The bytes [at, at + n) of the file at path overwritten in place: the
 * same inode and size, as `cp` onto it or an editor saving in place. */
static void rewrite_in_place(const char *path, off_t at, const void *bytes, size_t n) {
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, bytes, n, at), (ssize_t)n);
    ck_assert_int_eq(close(fd), 0);
}

/* The offset in its file of w_qkv's bytes (read from the header). */
static off_t w_qkv_offset(const char *path) {
    store_file *f;
    attn_error err;
    ck_assert_msg(store_file_open(&f, path, &err) == 0, "%s", err.message);
    FILE *in = fopen(path, "rb");
    unsigned char len[8];
    ck_assert_uint_eq(fread(len, 1, 8, in), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len[i];
    char *header = malloc(n + 1);
    ck_assert_uint_eq(fread(header, 1, n, in), n);
    header[n] = '\0';
    fclose(in);
    const char *at = strstr(header, "\"w_qkv\"");
    ck_assert_ptr_nonnull(at);
    at = strstr(at, "\"data_offsets\":[");
    ck_assert_ptr_nonnull(at);
    off_t begin = (off_t)strtoull(at + strlen("\"data_offsets\":["), NULL, 10);
    free(header);
    store_file_close(f);
    return (off_t)(8 + n) + begin;
}

/* A model file of the writer's layout, w_qkv [4, 12] from values(). */
static void write_model_48(const char *p) {
    size_t shape[2] = {4, 12};
    store_write_tensor t = {"w_qkv", STORE_DTYPE_F32, 2, shape, values(), NULL, NULL};
    store_metadata meta = {"n_heads", "1"};
    attn_error err;
    ck_assert_msg(store_file_write(p, &meta, 1, &t, 1, NULL, &err) == 0, "%s", err.message);
}

/* A loaded model does not change when its file is rewritten in place (same
 * size, other bytes): by default the file was read into memory. Loading
 * again gives the new bytes. Mapped, the rewrite shows through: what
 * --map-models risks, and why it says "replace by rename". */
START_TEST(test_copy_ignores_rewrite) {
    const char *p = tpath("rewritten.safetensors");
    write_model_48(p);
    off_t at = w_qkv_offset(p);
    store_model *m = load_ok(p);
    store_model *mapped = load_mode_ok(p, STORE_READ_MAP);
    float twice[48];
    for (int i = 0; i < 48; i++)
        twice[i] = 2 * values()[i] + 1;
    rewrite_in_place(p, at, twice, sizeof twice);

    ck_assert(memcmp(m->weights.w_qkv, values(), sizeof twice) == 0);
    store_model_destroy(m);
    m = load_ok(p);
    ck_assert(memcmp(m->weights.w_qkv, twice, sizeof twice) == 0);
    store_model_destroy(m);

    ck_assert(memcmp(mapped->weights.w_qkv, twice, sizeof twice) == 0);
    store_model_destroy(mapped);
}
END_TEST

/* A loaded model keeps its weights, readable, when its file is truncated in
 * place (mapped, reading them would be SIGBUS); so does a whole set, and
 * computing with it gives the answer of before. */
START_TEST(test_copy_survives_truncate) {
    const char *dir = tsubdir("trunc");
    attn_error err;
    ck_assert_int_eq(store_builtin_write(store_builtin_find("gpt2-small-shape"), dir, NULL, &err),
                     0);
    char path[600];
    snprintf(path, sizeof path, "%s/gpt2-small-shape.safetensors", dir);
    store_set *s;
    ck_assert_msg(store_set_load(&s, dir, NULL, &err) == 0, "%s", err.message);
    const store_model *g = store_set_find(s, "gpt2-small-shape");
    ck_assert_ptr_nonnull(g);
    ck_assert_uint_eq(g->bytes_mapped, 0);

    enum { N = 4, DM = 768 };
    static float e[N * DM], before[N * DM], after[N * DM];
    for (size_t i = 0; i < N * DM; i++)
        e[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    size_t heads[12];
    for (size_t i = 0; i < 12; i++)
        heads[i] = i;
    attn_workspace *ws = attn_workspace_create();
    attn_output o1 = {.embeddings = before}, o2 = {.embeddings = after};
    attn_input in = {.weights = &g->weights,
                     .embeddings = e,
                     .n_tokens = N,
                     .mask = {ATTN_MASK_CAUSAL, NULL},
                     .scale = 0.125f,
                     .heads = heads,
                     .n_heads_out = 12};
    ck_assert_int_eq(attn_compute(&o1, ws, &in, NULL), 0);

    ck_assert_int_eq(truncate(path, 4096), 0); /* the header survives, the data does not */
    double sum = 0;
    for (size_t i = 0; i < DM * 3 * DM; i++)
        sum += g->weights.w_qkv[i];
    for (size_t i = 0; i < DM * DM; i++)
        sum += g->weights.w_o[i];
    ck_assert(isfinite(sum));
    ck_assert_int_eq(attn_compute(&o2, ws, &in, NULL), 0);
    ck_assert(memcmp(before, after, sizeof before) == 0);
    attn_workspace_destroy(ws);
    store_set_release(s);

    /* the truncated file is now refused, as any short file */
    ck_assert_int_eq(store_set_load(&s, dir, NULL, &err), -1);
    assert_message(err.message, path, "run past the end of the data section");
}
END_TEST

/* The set's option: map_files maps every file (the weights lie in the
 * files' mappings), the default maps none. Both serve the same weights. */
START_TEST(test_set_map_option) {
    const char *dir = tsubdir("mapopt");
    attn_error err;
    ck_assert_int_eq(store_builtin_write(store_builtin_find("gpt2-small-shape"), dir, NULL, &err),
                     0);
    char path[600];
    snprintf(path, sizeof path, "%s/gpt2-small-shape.safetensors", dir);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    store_load_options map = {0, NULL, NULL, 1};
    store_set *copied, *mapped;
    ck_assert_msg(store_set_load(&copied, dir, NULL, &err) == 0, "%s", err.message);
    ck_assert_msg(store_set_load(&mapped, dir, &map, &err) == 0, "%s", err.message);
    const store_model *c = store_set_at(copied, 0), *m = store_set_at(mapped, 0);
    ck_assert(!in_file_mapping(c->weights.w_qkv, path));
    ck_assert(in_file_mapping(m->weights.w_qkv, path));
    ck_assert(in_file_mapping(m->weights.w_o, path));
    size_t bytes_mapped, bytes_owned;
    store_set_bytes(copied, &bytes_mapped, &bytes_owned);
    ck_assert_uint_eq(bytes_mapped, 0);
    /* the file's buffer only (nothing converted), rounded to 2 MiB */
    ck_assert_uint_ge(bytes_owned, (size_t)sb.st_size);
    ck_assert_uint_lt(bytes_owned, (size_t)sb.st_size + ((size_t)2 << 20));
    ck_assert_uint_eq(bytes_owned % ((size_t)2 << 20), 0);
    store_set_bytes(mapped, &bytes_mapped, &bytes_owned);
    ck_assert_uint_eq(bytes_mapped, (size_t)sb.st_size);
    ck_assert_uint_eq(bytes_owned, 0);
    size_t n = 768 * 3 * 768;
    ck_assert(memcmp(c->weights.w_qkv, m->weights.w_qkv, n * sizeof(float)) == 0);
    ck_assert(memcmp(c->weights.b_o, m->weights.b_o, 768 * sizeof(float)) == 0);

    /* The buffer keeps each tensor's alignment in the file up to 2 MiB, as a
     * mapping keeps it up to a page. */
    off_t at = w_qkv_offset(path);
    ck_assert_uint_eq(((uintptr_t)c->weights.w_qkv - (uintptr_t)at) % ((size_t)2 << 20), 0);
    store_set_release(copied);
    store_set_release(mapped);
}
END_TEST

START_TEST(test_f32_unaligned) {
    /* d_model 3, one head of 3: b_o F16 [3] takes 6 bytes first, so w_qkv
     * F32 [3, 9] starts at data offset 6, never 4-aligned (the writer pads
     * the header to 8). */
    const char *p = tpath("unaligned.safetensors");
    unsigned short half[3] = {0x3C00, 0xC000, 0x3800}; /* 1, -2, 0.5 */
    size_t s_bo[1] = {3}, s_w[2] = {3, 9};
    store_write_tensor t[2] = {
        {"b_o", STORE_DTYPE_F16, 1, s_bo, half, NULL, NULL},
        {"w_qkv", STORE_DTYPE_F32, 2, s_w, values(), NULL, NULL},
    };
    store_metadata meta = {"n_heads", "1"};
    attn_error err;
    ck_assert_msg(store_file_write(p, &meta, 1, t, 2, NULL, &err) == 0, "%s", err.message);
    store_model *m = load_ok(p);
    ck_assert(!in_file_mapping(m->weights.w_qkv, p));
    ck_assert_uint_eq((uintptr_t)m->weights.w_qkv % 64, 0);
    ck_assert(memcmp(m->weights.w_qkv, values(), 27 * sizeof(float)) == 0);
    ck_assert(m->weights.b_o[0] == 1.0f && m->weights.b_o[1] == -2.0f && m->weights.b_o[2] == 0.5f);
    ck_assert_uint_eq(m->weights.d_model, 3);
    ck_assert_uint_eq(m->weights.d_head, 3);
    ck_assert_uint_eq(m->bytes_mapped, 0);
    store_model_destroy(m);
}
END_TEST

/* ---- the writer ---------------------------------------------------------------- */

static int fill_counting(void *ctx, void *buf, size_t first, size_t count) {
    (void)ctx;
    unsigned short *out = buf;
    for (size_t i = 0; i < count; i++)
        out[i] = (unsigned short)(first + i);
    return 0;
}

static int fill_failing(void *ctx, void *buf, size_t first, size_t count) {
    (void)ctx, (void)buf, (void)first, (void)count;
    return -1;
}

START_TEST(test_round_trip) {
    const char *p = tpath("round.safetensors");
    float a[6] = {1.5f, -0.0f, 1e-45f, 3.4028235e38f, -7.25f, 0.1f};
    double d[2] = {1.0 / 3.0, -1e300};
    float scalar = 42.0f;
    size_t s_a[2] = {2, 3}, s_d[1] = {2}, s_e[3] = {5, 0, 7}, s_big[1] = {1 << 20};
    store_write_tensor t[] = {
        {"z.matrix", STORE_DTYPE_F32, 2, s_a, a, NULL, NULL},
        {"a.double", STORE_DTYPE_F64, 1, s_d, d, NULL, NULL},
        {"m.empty", STORE_DTYPE_F32, 3, s_e, a, NULL, NULL},
        {"s.scalar", STORE_DTYPE_F32, 0, NULL, &scalar, NULL, NULL},
        {"b.streamed", STORE_DTYPE_U16, 1, s_big, NULL, fill_counting, NULL},
    };
    store_metadata meta[] = {{"name", "round"}, {"note", "我爱你 \"quoted\""}};
    attn_error err;
    size_t bytes = 0;
    ck_assert_msg(store_file_write(p, meta, 2, t, 5, &bytes, &err) == 0, "%s", err.message);

    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_uint_eq(bytes, (size_t)sb.st_size);

    store_file *f = NULL;
    ck_assert_msg(store_file_open(&f, p, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_file_bytes(f), bytes);
    ck_assert_str_eq(store_file_path(f), p);
    ck_assert_uint_eq(store_file_count(f), 5);
    /* Sorted by name. */
    ck_assert_str_eq(store_file_tensor(f, 0)->name, "a.double");
    ck_assert_str_eq(store_file_tensor(f, 1)->name, "b.streamed");
    ck_assert_str_eq(store_file_tensor(f, 4)->name, "z.matrix");
    ck_assert_ptr_null(store_file_tensor(f, 5));
    ck_assert_ptr_null(store_file_find(f, "nope"));

    const store_tensor *x = store_file_find(f, "z.matrix");
    ck_assert_int_eq(x->dtype, STORE_DTYPE_F32);
    ck_assert_uint_eq(x->rank, 2);
    ck_assert_uint_eq(x->shape[0], 2);
    ck_assert_uint_eq(x->shape[1], 3);
    ck_assert_uint_eq(x->count, 6);
    ck_assert_uint_eq(x->bytes, sizeof a);
    ck_assert(memcmp(x->data, a, sizeof a) == 0); /* bitwise: -0, the subnormal */
    x = store_file_find(f, "a.double");
    ck_assert_int_eq(x->dtype, STORE_DTYPE_F64);
    ck_assert(memcmp(x->data, d, sizeof d) == 0);
    x = store_file_find(f, "m.empty");
    ck_assert_uint_eq(x->count, 0);
    ck_assert_uint_eq(x->bytes, 0);
    ck_assert_uint_eq(x->shape[2], 7);
    x = store_file_find(f, "s.scalar");
    ck_assert_uint_eq(x->rank, 0);
    ck_assert_uint_eq(x->count, 1);
    ck_assert(memcmp(x->data, &scalar, 4) == 0);
    x = store_file_find(f, "b.streamed");
    ck_assert_uint_eq(x->bytes, (size_t)2 << 20);
    const unsigned short *u = x->data;
    for (size_t i = 0; i < (size_t)1 << 20; i += 4099)
        ck_assert_uint_eq(u[i], (unsigned short)i);
    ck_assert_uint_eq(u[(1 << 20) - 1], 0xFFFF);
    ck_assert_str_eq(store_file_metadata(f, "note"), "我爱你 \"quoted\"");
    ck_assert_str_eq(store_file_metadata(f, "name"), "round");
    ck_assert_ptr_null(store_file_metadata(f, "other"));
    store_file_close(f);

    /* The header: padded with spaces to a multiple of 8. */
    FILE *fp = fopen(p, "rb");
    unsigned char head[8];
    ck_assert_uint_eq(fread(head, 1, 8, fp), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | head[i];
    ck_assert_uint_eq(n % 8, 0);
    char *text = malloc(n);
    ck_assert_uint_eq(fread(text, 1, n, fp), n);
    ck_assert(text[n - 1] == '}' || text[n - 1] == ' ');
    fclose(fp);
    free(text);

    /* A failing source leaves the old file and no temporary behind. */
    t[4].fill = fill_failing;
    ck_assert_int_eq(store_file_write(p, meta, 2, t, 5, NULL, &err), -1);
    assert_message(err.message, p, "cannot write");
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_uint_eq((size_t)sb.st_size, bytes);
    DIR *dir = opendir(tmpdir);
    struct dirent *de;
    int entries = 0;
    while ((de = readdir(dir)))
        if (de->d_name[0] != '.') entries++;
    closedir(dir);
    ck_assert_int_eq(entries, 1);

    /* Repeated names are refused. */
    t[4] = t[0];
    ck_assert_int_eq(store_file_write(p, meta, 2, t, 5, NULL, &err), -1);
    assert_message(err.message, p, "repeated name");
}
END_TEST

/* A link planted at a temporary name anyone could guess beside the
 * output, "<path>.tmp-<pid>", must not redirect the write: the link's
 * target keeps its bytes, and the output is a new regular file holding
 * the model, with the permissions 0644 less the umask, as a plain
 * open(…, 0644) gives. */
START_TEST(test_write_temp_not_planted) {
    const char *victim = tpath("victim.txt");
    static const char precious[] = "not a model\n";
    write_bytes(victim, precious, sizeof precious - 1);
    const char *p = tpath("m.safetensors");
    char planted[600];
    snprintf(planted, sizeof planted, "%s.tmp-%ld", p, (long)getpid());
    ck_assert_int_eq(symlink(victim, planted), 0);

    size_t shape[2] = {4, 12};
    store_write_tensor t[] = {{"w_qkv", STORE_DTYPE_F32, 2, shape, values(), NULL, NULL}};
    store_metadata meta[] = {{"n_heads", "1"}};
    attn_error err;
    ck_assert_msg(store_file_write(p, meta, 1, t, 1, NULL, &err) == 0, "%s", err.message);

    char got[64] = {0};
    FILE *fp = fopen(victim, "rb");
    ck_assert_ptr_nonnull(fp);
    size_t n = fread(got, 1, sizeof got, fp);
    fclose(fp);
    ck_assert_msg(n == sizeof precious - 1 && memcmp(got, precious, n) == 0,
                  "the link's target was overwritten (%zu bytes now)", n);
    struct stat sb;
    ck_assert_int_eq(lstat(planted, &sb), 0); /* not the writer's to remove */
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_int_eq(lstat(p, &sb), 0);
    ck_assert_msg(S_ISREG(sb.st_mode), "the output is not a regular file");
    mode_t mask = umask(0);
    umask(mask);
    ck_assert_uint_eq(sb.st_mode & 0777, 0644 & ~mask);
    store_model *m;
    ck_assert_msg(store_model_load(&m, p, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(m->weights.d_model, 4);
    store_model_destroy(m);
}
END_TEST

/* ---- the set ---------------------------------------------------------------- */

/* A valid demo-like model file named `file` in dir, with model name `name`
 * (NULL: from the file name). */
static void write_good(const char *dir, const char *file, const char *name) {
    char path[600], meta[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (name)
        snprintf(meta, sizeof meta, "\"n_heads\":\"1\",\"name\":\"%s\"", name);
    else
        snprintf(meta, sizeof meta, "\"n_heads\":\"1\"");
    write_st(path, header_with(meta, ""), values(), 192);
}

START_TEST(test_set_load) {
    const char *dir = tsubdir("models");
    write_good(dir, "zeta.safetensors", NULL);
    write_good(dir, "b.safetensors", "alpha");
    write_good(dir, "c.safetensors", "Mid");
    write_good(dir, ".hidden.safetensors", "hidden"); /* ignored */
    write_good(dir, "notes.txt", "txt");              /* ignored */
    write_good(dir, "x.safetensors.tmp-12", "tmp");   /* ignored */
    store_set *s = NULL;
    attn_error err;
    ck_assert_msg(store_set_load(&s, dir, NULL, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_set_count(s), 3);
    ck_assert_str_eq(store_set_at(s, 0)->name, "Mid"); /* bytewise: 'M' < 'a' */
    ck_assert_str_eq(store_set_at(s, 1)->name, "alpha");
    ck_assert_str_eq(store_set_at(s, 2)->name, "zeta");
    ck_assert_ptr_null(store_set_at(s, 3));
    ck_assert_ptr_eq(store_set_find(s, "alpha"), store_set_at(s, 1));
    ck_assert_ptr_eq(store_set_find(s, "zeta"), store_set_at(s, 2));
    ck_assert_ptr_null(store_set_find(s, "hidden"));
    ck_assert_ptr_null(store_set_find(s, "mid"));
    ck_assert_ptr_null(store_set_find(s, ""));
    size_t mapped, owned;
    store_set_bytes(s, &mapped, &owned);
    /* Hand-written headers leave w_qkv wherever they end: in place or copied. */
    ck_assert_uint_ge(mapped + owned, 3 * 192);
    store_set_release(s);
}
END_TEST

START_TEST(test_set_empty_and_missing) {
    const char *dir = tsubdir("empty");
    store_set *s = NULL;
    attn_error err;
    ck_assert_msg(store_set_load(&s, dir, NULL, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_set_count(s), 0);
    ck_assert_ptr_null(store_set_find(s, "demo-4d"));
    ck_assert_ptr_null(store_set_at(s, 0));
    store_set_release(s);

    const char *missing = tpath("no-such-dir");
    s = (store_set *)1;
    ck_assert_int_eq(store_set_load(&s, missing, NULL, &err), -1);
    ck_assert_ptr_null(s);
    assert_message(err.message, missing, "cannot open the models directory");

    s = store_set_create_empty();
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(store_set_count(s), 0);
    ck_assert_ptr_null(store_set_find(s, "demo-4d")); /* no array behind it at all */
    store_set_release(s);
}
END_TEST

/* A FIFO named like a model is refused at once, not waited on: a load that
 * blocks would hold the main thread, and with it the handling of SIGTERM. */
START_TEST(test_fifo_refused) {
    const char *dir = tsubdir("fifo");
    char path[512];
    snprintf(path, sizeof path, "%s/pipe.safetensors", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    store_file *f = NULL;
    attn_error err;
    ck_assert_int_eq(store_file_open(&f, path, &err), -1);
    assert_message(err.message, path, "not a regular file");
    store_set *s = NULL;
    ck_assert_int_eq(store_set_load(&s, dir, NULL, &err), -1);
    unlink(path);
}
END_TEST

START_TEST(test_set_duplicate_names) {
    const char *dir = tsubdir("dups");
    write_good(dir, "a.safetensors", "same");
    write_good(dir, "b.safetensors", "same");
    store_set *s = NULL;
    attn_error err;
    ck_assert_int_eq(store_set_load(&s, dir, NULL, &err), -1);
    ck_assert_ptr_null(s);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    assert_message(err.message, b, "model name 'same' is already defined by");
    assert_message(err.message, a, "already defined");

    /* A file name and another file's metadata name may collide too. */
    tf_remove_dir(dir);
    dir = tsubdir("dups2");
    write_good(dir, "same.safetensors", NULL);
    write_good(dir, "other.safetensors", "same");
    ck_assert_int_eq(store_set_load(&s, dir, NULL, &err), -1);
    snprintf(a, sizeof a, "%s/other.safetensors", dir);
    snprintf(b, sizeof b, "%s/same.safetensors", dir);
    assert_message(err.message, b, "model name 'same' is already defined by");
    assert_message(err.message, a, "already defined");
}
END_TEST

typedef struct skips {
    int count;
    char file[4][600];
    char message[4][1024];
} skips;

static void on_skip(void *ctx, const char *file, const char *message) {
    skips *k = ctx;
    if (k->count < 4) {
        snprintf(k->file[k->count], sizeof k->file[0], "%s", file);
        snprintf(k->message[k->count], sizeof k->message[0], "%s", message);
    }
    k->count++;
}

START_TEST(test_set_skip_bad) {
    const char *dir = tsubdir("mixed");
    write_good(dir, "good.safetensors", NULL);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    write_st(bad, header_with("\"n_heads\":\"1\",\"mask\":\"diagonal\"", ""), values(), 192);

    /* By default the bad file fails the whole load, and is named. */
    store_set *s = NULL;
    attn_error err;
    ck_assert_int_eq(store_set_load(&s, dir, NULL, &err), -1);
    assert_message(err.message, bad, "metadata 'mask' is 'diagonal'");

    skips k = {0};
    store_load_options opt = {1, on_skip, &k, 0};
    ck_assert_msg(store_set_load(&s, dir, &opt, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_set_count(s), 1);
    ck_assert_str_eq(store_set_at(s, 0)->name, "good");
    ck_assert_int_eq(k.count, 1);
    ck_assert_str_eq(k.file[0], bad);
    assert_message(k.message[0], bad, "metadata 'mask' is 'diagonal'");
    store_set_release(s);

    /* Duplicates under skip_bad: the later file (by name) is skipped. */
    write_good(dir, "zz.safetensors", "good");
    memset(&k, 0, sizeof k);
    ck_assert_msg(store_set_load(&s, dir, &opt, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_set_count(s), 1);
    ck_assert(strstr(store_set_at(s, 0)->path, "/good.safetensors") != NULL);
    ck_assert_int_eq(k.count, 2);
    ck_assert(strstr(k.file[1], "/zz.safetensors") != NULL);
    assert_message(k.message[1], "/zz.safetensors", "already defined by");
    store_set_release(s);

    /* No callback: skipped silently. */
    opt.on_skip = NULL;
    ck_assert_int_eq(store_set_load(&s, dir, &opt, &err), 0);
    ck_assert_uint_eq(store_set_count(s), 1);
    store_set_release(s);
}
END_TEST

START_TEST(test_set_refcount_and_replace) {
    const char *d1 = tsubdir("one"), *d2 = tsubdir("two");
    write_good(d1, "first.safetensors", NULL);
    write_good(d2, "second.safetensors", NULL);
    store_set *s1, *s2;
    attn_error err;
    ck_assert_int_eq(store_set_load(&s1, d1, NULL, &err), 0);
    ck_assert_int_eq(store_set_load(&s2, d2, NULL, &err), 0);

    store *st = store_create(s1); /* takes s1's reference */
    ck_assert_ptr_nonnull(st);
    store_set *held = store_current(st);
    ck_assert_ptr_eq(held, s1);

    store_replace(st, s2);
    /* The old set lives on for its holder (ASan would catch a use after free). */
    const store_model *m = store_set_find(held, "first");
    ck_assert_ptr_nonnull(m);
    ck_assert(m->weights.w_qkv[0] == values()[0]);
    ck_assert(memcmp(m->weights.w_qkv, values(), 192) == 0);
    ck_assert_ptr_eq(store_set_retain(held), held);
    store_set_release(held);
    store_set_release(held); /* the last reference: s1 is destroyed here */

    store_set *now = store_current(st);
    ck_assert_ptr_eq(now, s2);
    ck_assert_ptr_nonnull(store_set_find(now, "second"));
    ck_assert_ptr_null(store_set_find(now, "first"));
    store_set_release(now);

    store_replace(st, NULL);
    ck_assert_ptr_null(store_current(st));
    store_destroy(st);

    st = store_create(NULL);
    ck_assert_ptr_null(store_current(st));
    store_destroy(st);
}
END_TEST

/* Workers follow the server's pattern while the main thread reloads. */
typedef struct worker_ctx {
    store *st;
    atomic_int stop;
    atomic_long lookups;
} worker_ctx;

static void *worker(void *arg) {
    worker_ctx *w = arg;
    long n = 0;
    while (!atomic_load(&w->stop) || n == 0) {
        store_set *held = store_current(w->st); /* a job's whole span */
        const store_model *m = store_set_find(held, "first");
        if (!m || memcmp(m->weights.w_qkv, values(), 192) != 0) abort();
        store_set_release(held);
        n++;
    }
    atomic_fetch_add(&w->lookups, n);
    return NULL;
}

START_TEST(test_store_threads) {
    const char *d = tsubdir("threads");
    write_good(d, "first.safetensors", NULL);
    store_set *s;
    attn_error err;
    ck_assert_int_eq(store_set_load(&s, d, NULL, &err), 0);
    worker_ctx w = {.st = store_create(s)};
    atomic_init(&w.stop, 0);
    atomic_init(&w.lookups, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &w), 0);
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(store_set_load(&s, d, NULL, &err), 0);
        store_replace(w.st, s);
    }
    atomic_store(&w.stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_ge(atomic_load(&w.lookups), 4);
    store_destroy(w.st);
}
END_TEST

/* ---- the built-in models ------------------------------------------------------- */

static const float demo_e[3][4] = {
    {0.1f, -0.2f, 0.3f, 0.1f}, {-0.1f, 0.2f, 0.2f, -0.3f}, {0.2f, 0.1f, -0.1f, 0.2f}};

/* 我爱你 in float64: patterns p[3][3] and updated embeddings e2[3][4],
 * from the README's matrices (row vectors; W_v = I, no W_o, mask none). */
static void demo_reference(double p[3][3], double e2[3][4]) {
    static const double wq[4][4] = {{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 0, 0, 1}, {0, 1, 1, 0}};
    static const double wk[4][4] = {{0, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 1, 0}, {1, 0, 0, 1}};
    double q[3][4] = {{0}}, k[3][4] = {{0}};
    for (int t = 0; t < 3; t++)
        for (int c = 0; c < 4; c++)
            for (int r = 0; r < 4; r++) {
                q[t][c] += (double)demo_e[t][r] * wq[r][c];
                k[t][c] += (double)demo_e[t][r] * wk[r][c];
            }
    for (int a = 0; a < 3; a++) {
        double s[3], max = -INFINITY, sum = 0;
        for (int b = 0; b < 3; b++) {
            s[b] = 0;
            for (int c = 0; c < 4; c++)
                s[b] += q[a][c] * k[b][c];
            s[b] *= 0.5; /* 1/sqrt(4) */
            if (s[b] > max) max = s[b];
        }
        for (int b = 0; b < 3; b++)
            sum += (p[a][b] = exp(s[b] - max));
        for (int b = 0; b < 3; b++)
            p[a][b] /= sum;
        for (int c = 0; c < 4; c++) {
            e2[a][c] = demo_e[a][c];
            for (int b = 0; b < 3; b++)
                e2[a][c] += p[a][b] * demo_e[b][c];
        }
    }
}

/* FNV-1a 64 of a file's bytes. */
static uint64_t file_hash(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    int c;
    while ((c = getc(f)) != EOF)
        h = (h ^ (unsigned)c) * UINT64_C(0x100000001b3);
    fclose(f);
    return h;
}

/* The hashes of the built-in files: the same on every machine. */
#define DEMO_4D_HASH UINT64_C(0x28ae2ce00052077e)
#define GPT2_HASH    UINT64_C(0x7e24817490589c75)
#define LLAMA_HASH   UINT64_C(0xeb3609a80c47a6c8)
#define STORIES_HASH UINT64_C(0x564832d3548700b2)
#define LAYERS_HASH  UINT64_C(0x299d5ec38d2b9903)

static void write_builtins(const char *dir) {
    attn_error err;
    for (size_t i = 0; i < store_builtin_count(); i++) {
        const store_builtin *b = store_builtin_at(i);
        if (b->on_demand) continue;
        size_t bytes;
        ck_assert_msg(store_builtin_write(b, dir, &bytes, &err) == 0, "%s", err.message);
        ck_assert_uint_gt(bytes, store_builtin_data_bytes(b));
    }
}

START_TEST(test_builtin_models) {
    const char *dir = tsubdir("builtin");
    write_builtins(dir);
    store_set *s;
    attn_error err;
    ck_assert_msg(store_set_load(&s, dir, NULL, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(store_set_count(s), 5);

    /* demo-layers: a stack of 2 over demo-stories' words */
    const store_model *dl = store_set_at(s, 1);
    ck_assert_str_eq(dl->name, "demo-layers");
    ck_assert_uint_eq(dl->n_layers, 2);
    ck_assert_ptr_eq(dl->layers[0], &dl->weights);
    ck_assert_int_eq(dl->mask, ATTN_MASK_CAUSAL);
    ck_assert_uint_eq(dl->vocab_size, 40);
    ck_assert_uint_eq(dl->n_positions, 0);
    ck_assert_str_eq(dl->dimensions[0], "noun");
    for (size_t l = 0; l < 2; l++) {
        const attn_weights *lw = dl->layers[l];
        ck_assert_uint_eq(lw->d_model, 16);
        ck_assert_uint_eq(lw->n_heads, 2);
        ck_assert_uint_eq(lw->d_head, 8);
        ck_assert_ptr_nonnull(lw->w_o);
        ck_assert_ptr_null(lw->b_qkv);
    }
    /* each layer its own stream */
    ck_assert(dl->layers[0]->w_qkv[0] != dl->layers[1]->w_qkv[0]);
    ck_assert_uint_eq(store_builtin_data_bytes(store_builtin_find("demo-layers")),
                      (size_t)4 * (2 * (16 * 48 + 16 * 16) + 40 * 16));

    const store_model *stories = store_set_at(s, 2);
    ck_assert_str_eq(stories->name, "demo-stories");
    ck_assert_int_eq(stories->mask, ATTN_MASK_CAUSAL);
    ck_assert_uint_eq(stories->vocab_size, 40);
    ck_assert_uint_eq(stories->n_positions, 16);
    ck_assert_str_eq(stories->dimensions[0], "noun");
    ck_assert_str_eq(stories->dimensions[15], "pos_sq");
    long mole = store_model_token(stories, "mole", 4);
    ck_assert_int_ge(mole, 0);
    /* mole is a noun and nothing else: its meaning comes from its neighbours. */
    for (size_t d = 0; d < 16; d++)
        ck_assert(stories->token_embeddings[(size_t)mole * 16 + d] == (d == 0 ? 1.0f : 0.0f));
    ck_assert(stories->position_embeddings[5 * 16 + 14] == 5.0f &&
              stories->position_embeddings[5 * 16 + 15] == 25.0f);
    ck_assert_uint_eq(stories->weights.n_heads, 5);
    ck_assert_uint_eq(stories->weights.d_head, 4);

    const store_model *demo = store_set_at(s, 0);
    ck_assert_str_eq(demo->name, "demo-4d");
    ck_assert(strstr(demo->description, "我爱你") != NULL);
    ck_assert_int_eq(demo->mask, ATTN_MASK_NONE);
    const attn_weights *w = &demo->weights;
    ck_assert_uint_eq(w->d_model, 4);
    ck_assert_uint_eq(w->n_heads, 1);
    ck_assert_uint_eq(w->d_head, 4);
    ck_assert_ptr_null(w->b_qkv);
    ck_assert_ptr_null(w->w_o);
    ck_assert_ptr_null(w->b_o);
    static const float want[4][12] = {
        {1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0},
        {0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0},
        {1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0},
        {0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1},
    };
    ck_assert(memcmp(w->w_qkv, want, sizeof want) == 0);

    /* 我爱你 through the engine with the loaded weights. */
    attn_workspace *ws = attn_workspace_create();
    float patterns[9], emb[12];
    attn_output out = {.patterns = patterns, .embeddings = emb};
    size_t head = 0;
    attn_input in = {.weights = w,
                     .embeddings = &demo_e[0][0],
                     .n_tokens = 3,
                     .mask = {ATTN_MASK_NONE, NULL},
                     .scale = 0.5f,
                     .heads = &head,
                     .n_heads_out = 1};
    ck_assert_int_eq(attn_compute(&out, ws, &in, NULL), 0);
    double p[3][3], e2[3][4];
    demo_reference(p, e2);
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 3; b++)
            ck_assert_msg(fabs(patterns[a * 3 + b] - p[a][b]) < 1e-6, "P[%d][%d] %.9g vs %.9g", a,
                          b, (double)patterns[a * 3 + b], p[a][b]);
        for (int c = 0; c < 4; c++)
            ck_assert_msg(fabs(emb[a * 4 + c] - e2[a][c]) < 1e-6, "E'[%d][%d] %.9g vs %.9g", a, c,
                          (double)emb[a * 4 + c], e2[a][c]);
    }
    /* The README's answer for the same request with inline weights. */
    ck_assert(fabs(patterns[0] - 0.3210508) < 1e-7);
    ck_assert(fabs(emb[0] - 0.17012407) < 1e-7);

    const store_model *g = store_set_at(s, 3);
    ck_assert_str_eq(g->name, "gpt2-small-shape");
    ck_assert_int_eq(g->mask, ATTN_MASK_CAUSAL);
    ck_assert_uint_eq(g->weights.d_model, 768);
    ck_assert_uint_eq(g->weights.n_heads, 12);
    ck_assert_uint_eq(g->weights.d_head, 64);
    ck_assert_ptr_nonnull(g->weights.b_qkv);
    ck_assert_ptr_nonnull(g->weights.w_o);
    ck_assert_ptr_nonnull(g->weights.b_o);
    /* all F32, in place in the file's buffer: nothing converted */
    ck_assert_uint_eq(g->bytes_mapped, 0);
    ck_assert_uint_lt(g->bytes_owned, 9450008 + ((size_t)2 << 20));

    /* Patterns of random unit-scale tokens: causal, and neither uniform nor
     * one-hot. */
    enum { N = 8, DM = 768, H = 12 };
    float *e = malloc(sizeof(float) * N * DM), *pat = malloc(sizeof(float) * H * N * N);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < N * DM; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        e[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
    }
    size_t heads[H];
    for (size_t i = 0; i < H; i++)
        heads[i] = i;
    attn_output out2 = {.patterns = pat};
    attn_input in2 = {.weights = &g->weights,
                      .embeddings = e,
                      .n_tokens = N,
                      .mask = {ATTN_MASK_CAUSAL, NULL},
                      .scale = 0.125f,
                      .heads = heads,
                      .n_heads_out = H};
    ck_assert_int_eq(attn_compute(&out2, ws, &in2, NULL), 0);
    double spread = 0;
    for (size_t h = 0; h < H; h++) {
        const float *last = pat + (h * N + N - 1) * N; /* the last query sees all keys */
        float lo = 1, hi = 0;
        for (size_t k = 0; k < N; k++) {
            lo = last[k] < lo ? last[k] : lo;
            hi = last[k] > hi ? last[k] : hi;
        }
        ck_assert(hi < 0.9f);
        spread += hi - lo;
        ck_assert(pat[(h * N + 0) * N + 1] == 0.0f); /* causal */
    }
    ck_assert_msg(spread / H > 0.02, "patterns nearly uniform: mean spread %g", spread / H);
    free(e);
    free(pat);

    /* llama-small-shape: grouped heads and RoPE in its metadata. */
    const store_model *l = store_set_at(s, 4);
    ck_assert_str_eq(l->name, "llama-small-shape");
    ck_assert_int_eq(l->mask, ATTN_MASK_CAUSAL);
    ck_assert_uint_eq(l->weights.d_model, 2048);
    ck_assert_uint_eq(l->weights.n_heads, 32);
    ck_assert_uint_eq(l->weights.n_kv_heads, 8);
    ck_assert_uint_eq(l->weights.d_head, 64);
    ck_assert_uint_eq(l->weights.rope.dims, 64);
    ck_assert(l->weights.rope.theta == 500000);
    ck_assert_int_eq(l->weights.rope.style, ATTN_ROPE_HALF);
    ck_assert_int_eq(l->weights.rope.scaling, ATTN_ROPE_SCALING_NONE);
    ck_assert_ptr_null(l->weights.b_qkv);
    ck_assert_ptr_nonnull(l->weights.w_o);
    ck_assert_ptr_null(l->weights.b_o);
    ck_assert_ptr_null(l->weights.alibi);
    /* w_qkv 2048 × (2048 + 2·512), w_o 2048 × 2048, in place */
    ck_assert_uint_eq(store_builtin_data_bytes(store_builtin_find("llama-small-shape")),
                      (size_t)4 * (2048 * 3072 + 2048 * 2048));
    ck_assert_uint_eq(l->bytes_mapped, 0);
    attn_workspace_destroy(ws);
    store_set_release(s);
}
END_TEST

START_TEST(test_builtin_deterministic) {
    const char *d1 = tsubdir("b1"), *d2 = tsubdir("b2");
    write_builtins(d1);
    write_builtins(d2);
    char a[600], b[600];
    for (size_t i = 0; i < store_builtin_count(); i++) {
        const store_builtin *bi = store_builtin_at(i);
        if (bi->on_demand) continue;
        snprintf(a, sizeof a, "%s/%s.safetensors", d1, bi->name);
        snprintf(b, sizeof b, "%s/%s.safetensors", d2, bi->name);
        ck_assert_uint_eq(file_hash(a), file_hash(b));
    }
    /* Pinned: the same bytes on every machine. */
    snprintf(a, sizeof a, "%s/demo-4d.safetensors", d1);
    snprintf(b, sizeof b, "%s/gpt2-small-shape.safetensors", d1);
    ck_assert_msg(file_hash(a) == DEMO_4D_HASH, "demo-4d hash 0x%016llx",
                  (unsigned long long)file_hash(a));
    ck_assert_msg(file_hash(b) == GPT2_HASH, "gpt2-small-shape hash 0x%016llx",
                  (unsigned long long)file_hash(b));
    snprintf(b, sizeof b, "%s/demo-stories.safetensors", d1);
    ck_assert_msg(file_hash(b) == STORIES_HASH, "demo-stories hash 0x%016llx",
                  (unsigned long long)file_hash(b));
    snprintf(b, sizeof b, "%s/demo-layers.safetensors", d1);
    ck_assert_msg(file_hash(b) == LAYERS_HASH, "demo-layers hash 0x%016llx",
                  (unsigned long long)file_hash(b));
    snprintf(b, sizeof b, "%s/llama-small-shape.safetensors", d1);
    ck_assert_msg(file_hash(b) == LLAMA_HASH, "llama-small-shape hash 0x%016llx",
                  (unsigned long long)file_hash(b));

    /* gpt3-shape's size, without writing it. */
    const store_builtin *g3 = store_builtin_find("gpt3-shape");
    ck_assert_ptr_nonnull(g3);
    ck_assert(g3->on_demand);
    ck_assert_uint_eq(store_builtin_data_bytes(g3), (size_t)2415919104u);
    ck_assert_ptr_null(store_builtin_find("gpt4"));

    /* llama3-8b-shape's size and RoPE scaling, without writing it. */
    const store_builtin *l3 = store_builtin_find("llama3-8b-shape");
    ck_assert_ptr_nonnull(l3);
    ck_assert(l3->on_demand);
    ck_assert_uint_eq(store_builtin_data_bytes(l3), (size_t)4 * (4096 * 6144 + 4096 * 4096));
    ck_assert_uint_eq(l3->n_kv_heads, 8);
    ck_assert_int_eq(l3->rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(l3->rope.factor == 8 && l3->rope.low_freq_factor == 1 &&
              l3->rope.high_freq_factor == 4 && l3->rope.original_max_position == 8192);
}
END_TEST

/* Runs a shell command, returns its exit status (or -1). */
static int run(const char *cmd) {
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

START_TEST(test_make_models_binary) {
    /* the tool of the build under test (make passes $ATTN_TOOLS_DIR) */
    char bin[4096] = "build/tools/make_models";
    if (getenv("ATTN_TOOLS_DIR"))
        snprintf(bin, sizeof bin, "%s/make_models", getenv("ATTN_TOOLS_DIR"));
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "test_make_models_binary: %s not built, skipped\n", bin);
        return;
    }
    const char *dir = tpath("out");
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null", bin, dir);
    ck_assert_int_eq(run(cmd), 0);
    const char *ref = tsubdir("ref");
    write_builtins(ref);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/demo-4d.safetensors", dir);
    snprintf(b, sizeof b, "%s/demo-4d.safetensors", ref);
    ck_assert_uint_eq(file_hash(a), file_hash(b));
    snprintf(a, sizeof a, "%s/gpt2-small-shape.safetensors", dir);
    snprintf(b, sizeof b, "%s/gpt2-small-shape.safetensors", ref);
    ck_assert_uint_eq(file_hash(a), file_hash(b));
    snprintf(a, sizeof a, "%s/llama-small-shape.safetensors", dir);
    snprintf(b, sizeof b, "%s/llama-small-shape.safetensors", ref);
    ck_assert_uint_eq(file_hash(a), file_hash(b));
    snprintf(a, sizeof a, "%s/demo-layers.safetensors", dir);
    snprintf(b, sizeof b, "%s/demo-layers.safetensors", ref);
    ck_assert_uint_eq(file_hash(a), file_hash(b));
    snprintf(a, sizeof a, "%s/gpt3-shape.safetensors", dir);
    ck_assert_int_ne(access(a, F_OK), 0); /* only with --gpt3 */
    snprintf(a, sizeof a, "%s/llama3-8b-shape.safetensors", dir);
    ck_assert_int_ne(access(a, F_OK), 0); /* only with --llama3 */

    /* --llama3 writes it, with its scaling in the metadata, and not gpt3-shape */
    snprintf(cmd, sizeof cmd, "%s --llama3 %s >/dev/null", bin, dir);
    ck_assert_int_eq(run(cmd), 0);
    snprintf(a, sizeof a, "%s/llama3-8b-shape.safetensors", dir);
    store_model *l3 = load_ok(a);
    ck_assert_uint_eq(l3->weights.d_model, 4096);
    ck_assert_uint_eq(l3->weights.n_kv_heads, 8);
    ck_assert_uint_eq(l3->weights.d_head, 128);
    ck_assert_uint_eq(l3->weights.rope.dims, 128);
    ck_assert(l3->weights.rope.theta == 500000);
    ck_assert_int_eq(l3->weights.rope.scaling, ATTN_ROPE_SCALING_LLAMA3);
    ck_assert(l3->weights.rope.factor == 8 && l3->weights.rope.original_max_position == 8192);
    store_model_destroy(l3);
    unlink(a);
    snprintf(a, sizeof a, "%s/gpt3-shape.safetensors", dir);
    ck_assert_int_ne(access(a, F_OK), 0);

    snprintf(cmd, sizeof cmd, "%s --help >/dev/null", bin);
    ck_assert_int_eq(run(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s 2>/dev/null", bin);
    ck_assert_int_eq(run(cmd), 2);
    snprintf(cmd, sizeof cmd, "%s --bogus %s 2>/dev/null", bin, dir);
    ck_assert_int_eq(run(cmd), 2);
    snprintf(cmd, sizeof cmd, "%s %s/missing/deeper >/dev/null 2>&1", bin, dir);
    ck_assert_int_eq(run(cmd), 1);
}
END_TEST

/* ---- vocabularies: token_embeddings, position_embeddings, dimensions ----------- */

/* One tensor of a vocabulary model: its shape and values (NULL: values()). */
typedef struct vspec {
    const char *name;
    size_t rank;
    size_t shape[2];
    const float *data;
} vspec;

/* A one-head model of d_model 4 (w_qkv [4, 12]) with metadata `meta`
 * (key, value, …, NULL; n_heads added) and the tensors `ts`. */
static void write_vocab_model(const char *path, const char *const *meta, const vspec *ts,
                              size_t nt) {
    store_metadata md[16] = {{"n_heads", "1"}};
    size_t nm = 1;
    for (; meta && meta[2 * (nm - 1)]; nm++) {
        ck_assert_uint_lt(nm, 16);
        md[nm] = (store_metadata){meta[2 * (nm - 1)], meta[2 * (nm - 1) + 1]};
    }
    static const size_t qkv_shape[2] = {4, 12};
    store_write_tensor w[8] = {{"w_qkv", STORE_DTYPE_F32, 2, qkv_shape, values(), NULL, NULL}};
    for (size_t i = 0; i < nt; i++) {
        ck_assert_uint_lt(i + 1, 8);
        w[i + 1] = (store_write_tensor){ts[i].name,
                                        STORE_DTYPE_F32,
                                        ts[i].rank,
                                        ts[i].shape,
                                        ts[i].data ? ts[i].data : values(),
                                        NULL,
                                        NULL};
    }
    attn_error err;
    ck_assert_msg(store_file_write(path, md, nm, w, nt + 1, NULL, &err) == 0, "%s", err.message);
}

static void expect_vocab_fault(const char *const *meta, const vspec *ts, size_t nt,
                               const char *fault) {
    const char *p = tpath("bad-vocab.safetensors");
    write_vocab_model(p, meta, ts, nt);
    expect_model_fault(p, fault);
}

#define META(...) ((const char *const[]){__VA_ARGS__, NULL})

/* token_embeddings [3, 4]. */
static const vspec tok3[] = {{"token_embeddings", 2, {3, 4}, NULL}};

START_TEST(test_vocab_load) {
    const char *p = tpath("vocab.safetensors");
    float tok[12], pos[20];
    for (int i = 0; i < 12; i++)
        tok[i] = 0.25f * (float)i - 1.0f;
    for (int i = 0; i < 20; i++)
        pos[i] = (float)i / 1024.0f;
    const vspec ts[] = {{"token_embeddings", 2, {3, 4}, tok},
                        {"position_embeddings", 2, {5, 4}, pos}};
    write_vocab_model(p,
                      META("vocabulary", "[\"b\", \"a\", \"我爱\"]", "dimensions",
                           "[\"x\", \"y\", \"z\", \"w\"]"),
                      ts, 2);
    static const store_read_mode modes[] = {STORE_READ_COPY, STORE_READ_MAP};
    for (size_t k = 0; k < 2; k++) {
        store_model *m = load_mode_ok(p, modes[k]);
        ck_assert_uint_eq(m->vocab_size, 3);
        ck_assert_str_eq(m->vocabulary[0], "b");
        ck_assert_str_eq(m->vocabulary[1], "a");
        ck_assert_str_eq(m->vocabulary[2], "我爱");
        ck_assert_uint_eq(m->n_positions, 5);
        for (int i = 0; i < 12; i++)
            ck_assert_float_eq(m->token_embeddings[i], tok[i]);
        for (int i = 0; i < 20; i++)
            ck_assert_float_eq(m->position_embeddings[i], pos[i]);
        ck_assert_ptr_nonnull(m->dimensions);
        ck_assert_str_eq(m->dimensions[0], "x");
        ck_assert_str_eq(m->dimensions[3], "w");
        ck_assert_int_eq(store_model_token(m, "b", 1), 0);
        ck_assert_int_eq(store_model_token(m, "a", 1), 1);
        ck_assert_int_eq(store_model_token(m, "我爱", strlen("我爱")), 2);
        ck_assert_int_eq(store_model_token(m, "我", strlen("我")), -1); /* a prefix */
        ck_assert_int_eq(store_model_token(m, "ab", 2), -1);
        ck_assert_int_eq(store_model_token(m, "a\0", 2), -1); /* NUL: length-aware */
        ck_assert_int_eq(store_model_token(m, "", 0), -1);
        ck_assert_int_eq(store_model_token(m, "c", 1), -1);
        store_model_destroy(m);
    }

    /* No vocabulary: every field at its none; dimensions alone are allowed. */
    write_vocab_model(p, META("dimensions", "[\"x\", \"y\", \"z\", \"w\"]"), NULL, 0);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(m->vocab_size, 0);
    ck_assert_ptr_null(m->vocabulary);
    ck_assert_ptr_null(m->token_embeddings);
    ck_assert_uint_eq(m->n_positions, 0);
    ck_assert_ptr_null(m->position_embeddings);
    ck_assert_str_eq(m->dimensions[2], "z");
    ck_assert_int_eq(store_model_token(m, "a", 1), -1);
    store_model_destroy(m);

    /* A vocabulary without a position table or names. */
    write_vocab_model(p, META("vocabulary", "[\"a\", \"b\", \"c\"]"), tok3, 1);
    m = load_ok(p);
    ck_assert_uint_eq(m->vocab_size, 3);
    ck_assert_uint_eq(m->n_positions, 0);
    ck_assert_ptr_null(m->position_embeddings);
    ck_assert_ptr_null(m->dimensions);
    ck_assert_int_eq(store_model_token(m, "c", 1), 2);
    store_model_destroy(m);
}
END_TEST

/* A larger vocabulary in shuffled order: every token found at its row,
 * against a linear search written here; near misses not found. */
START_TEST(test_vocab_lookup) {
    enum { V = 700 };
    static char tokens[V][16];
    char *json = malloc(V * 24 + 8);
    size_t used = (size_t)sprintf(json, "[");
    for (int i = 0; i < V; i++) {
        /* distinct: i's digits in a scrambled order, some sharing prefixes */
        snprintf(tokens[i], sizeof tokens[i], "t%d", (i * 337) % V);
        if (i % 7 == 0) snprintf(tokens[i], sizeof tokens[i], "t%dx", (i * 337) % V);
        used += (size_t)sprintf(json + used, "%s\"%s\"", i ? "," : "", tokens[i]);
    }
    sprintf(json + used, "]");
    float *tok = calloc(V * 4, sizeof(float));
    const vspec ts[] = {{"token_embeddings", 2, {V, 4}, tok}};
    const char *p = tpath("lookup.safetensors");
    write_vocab_model(p, META("vocabulary", json), ts, 1);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(m->vocab_size, V);
    for (int i = 0; i < V; i++)
        ck_assert_int_eq(store_model_token(m, tokens[i], strlen(tokens[i])), i);
    for (int i = 0; i < V; i++) {
        /* one byte more, one byte less, the last byte changed */
        char probe[3][24];
        size_t len = strlen(tokens[i]);
        snprintf(probe[0], sizeof probe[0], "%sy", tokens[i]);
        snprintf(probe[1], sizeof probe[1], "%.*s", (int)(len - 1), tokens[i]);
        snprintf(probe[2], sizeof probe[2], "%.*s~", (int)(len - 1), tokens[i]);
        for (int k = 0; k < 3; k++) {
            long want = -1;
            for (int j = 0; j < V; j++)
                if (strcmp(tokens[j], probe[k]) == 0) want = j;
            ck_assert_int_eq(store_model_token(m, probe[k], strlen(probe[k])), want);
        }
    }
    store_model_destroy(m);
    free(tok);
    free(json);
}
END_TEST

START_TEST(test_vocab_duplicate_token) {
    expect_vocab_fault(META("vocabulary", "[\"a\", \"dup\", \"dup\"]"), tok3, 1,
                       "metadata 'vocabulary' holds 'dup' twice (entries 1 and 2)");
    /* A long one is cut to 40 bytes, on a character's boundary: 20 é and
     * then x keep every é; x and then 20 é lose the one cut in half. */
    char json[256], want[256], twenty[64] = "";
    for (int i = 0; i < 20; i++)
        strcat(twenty, "\xc3\xa9");
    snprintf(json, sizeof json, "[\"a\", \"%sx\", \"%sx\"]", twenty, twenty);
    snprintf(want, sizeof want, "holds '%s…' twice (entries 1 and 2)", twenty);
    expect_vocab_fault(META("vocabulary", json), tok3, 1, want);
    snprintf(json, sizeof json, "[\"a\", \"x%s\", \"x%s\"]", twenty, twenty);
    snprintf(want, sizeof want, "holds 'x%.38s…' twice", twenty);
    expect_vocab_fault(META("vocabulary", json), tok3, 1, want);
}
END_TEST

START_TEST(test_vocab_empty_token) {
    expect_vocab_fault(META("vocabulary", "[\"a\", \"\", \"c\"]"), tok3, 1,
                       "metadata 'vocabulary' entry 1 is the empty string");
}
END_TEST

START_TEST(test_vocab_nul_token) {
    expect_vocab_fault(META("vocabulary", "[\"a\", \"b\", \"c\\u0000d\"]"), tok3, 1,
                       "metadata 'vocabulary' entry 2 holds a NUL character");
}
END_TEST

START_TEST(test_vocab_not_array) {
    static const char *const bad[] = {"a, b, c",
                                      "{\"a\": 1}",
                                      "\"abc\"",
                                      "[\"a\", 1, \"c\"]",
                                      "[\"a\", [\"b\"], \"c\"]",
                                      "[\"a\", \"b\", \"c\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_vocab_fault(META("vocabulary", bad[i]), tok3, 1, "metadata 'vocabulary' ");
    expect_vocab_fault(META("vocabulary", "a, b"), tok3, 1,
                       "metadata 'vocabulary' is not a JSON array of strings");
    expect_vocab_fault(META("vocabulary", "{}"), tok3, 1,
                       "metadata 'vocabulary' is not a JSON array of strings");
    expect_vocab_fault(META("vocabulary", "[\"a\", 1, \"c\"]"), tok3, 1,
                       "metadata 'vocabulary' entry 1 is not a string");
    expect_vocab_fault(META("vocabulary", "[]"), tok3, 1,
                       "metadata 'vocabulary' is an empty array");
}
END_TEST

START_TEST(test_vocab_length_rows) {
    expect_vocab_fault(META("vocabulary", "[\"a\", \"b\"]"), tok3, 1,
                       "metadata 'vocabulary' has 2 tokens and tensor 'token_embeddings' 3 rows");
    expect_vocab_fault(META("vocabulary", "[\"a\", \"b\", \"c\", \"d\"]"), tok3, 1,
                       "has 4 tokens and tensor 'token_embeddings' 3 rows");
}
END_TEST

START_TEST(test_vocab_table_shapes) {
    const char *const *v = META("vocabulary", "[\"a\", \"b\", \"c\"]");
    const vspec tok_1d[] = {{"token_embeddings", 1, {12}, NULL}};
    const vspec tok_wide[] = {{"token_embeddings", 2, {3, 5}, NULL}};
    const vspec tok_none[] = {{"token_embeddings", 2, {0, 4}, NULL}};
    expect_vocab_fault(v, tok_1d, 1,
                       "tensor 'token_embeddings' has shape [12], expected [V, "
                       "d_model] = [V, 4]");
    expect_vocab_fault(v, tok_wide, 1, "tensor 'token_embeddings' has shape [3, 5], expected");
    expect_vocab_fault(META("vocabulary", "[]"), tok_none, 1,
                       "tensor 'token_embeddings' has shape [0, 4], expected");
    const vspec pos_1d[] = {{"token_embeddings", 2, {3, 4}, NULL},
                            {"position_embeddings", 1, {20}, NULL}};
    const vspec pos_narrow[] = {{"token_embeddings", 2, {3, 4}, NULL},
                                {"position_embeddings", 2, {5, 3}, NULL}};
    const vspec pos_none[] = {{"token_embeddings", 2, {3, 4}, NULL},
                              {"position_embeddings", 2, {0, 4}, NULL}};
    expect_vocab_fault(v, pos_1d, 2,
                       "tensor 'position_embeddings' has shape [20], expected [P, d_model] = "
                       "[P, 4]");
    expect_vocab_fault(v, pos_narrow, 2, "tensor 'position_embeddings' has shape [5, 3]");
    expect_vocab_fault(v, pos_none, 2, "tensor 'position_embeddings' has shape [0, 4]");
}
END_TEST

START_TEST(test_vocab_positions_alone) {
    const vspec pos[] = {{"position_embeddings", 2, {5, 4}, NULL}};
    expect_vocab_fault(NULL, pos, 1, "tensor 'position_embeddings' without a vocabulary");
}
END_TEST

START_TEST(test_vocab_one_without_other) {
    expect_vocab_fault(NULL, tok3, 1, "tensor 'token_embeddings' without metadata 'vocabulary'");
    expect_vocab_fault(META("vocabulary", "[\"a\", \"b\", \"c\"]"), NULL, 0,
                       "metadata 'vocabulary' without tensor 'token_embeddings'");
}
END_TEST

START_TEST(test_vocab_dimensions) {
    expect_vocab_fault(META("dimensions", "[\"x\", \"y\", \"z\"]"), NULL, 0,
                       "metadata 'dimensions' has 3 names, expected d_model = 4");
    expect_vocab_fault(META("dimensions", "[\"x\", \"y\", \"z\", \"w\", \"v\"]"), NULL, 0,
                       "metadata 'dimensions' has 5 names, expected d_model = 4");
    expect_vocab_fault(META("dimensions", "[\"x\", \"y\", \"x\", \"w\"]"), NULL, 0,
                       "metadata 'dimensions' holds 'x' twice (entries 0 and 2)");
    expect_vocab_fault(META("dimensions", "[\"x\", \"\", \"z\", \"w\"]"), NULL, 0,
                       "metadata 'dimensions' entry 1 is the empty string");
    expect_vocab_fault(META("dimensions", "[\"x\", \"y\", \"z\", 4]"), NULL, 0,
                       "metadata 'dimensions' entry 3 is not a string");
    expect_vocab_fault(META("dimensions", "x y z w"), NULL, 0,
                       "metadata 'dimensions' is not a JSON array of strings");
    expect_vocab_fault(META("dimensions", "[\"x\", \"y\\u0000\", \"z\", \"w\"]"), NULL, 0,
                       "metadata 'dimensions' entry 1 holds a NUL character");
    /* 64 bytes is the longest name; 65 is refused. */
    char names[256];
    snprintf(names, sizeof names, "[\"x\", \"y\", \"z\", \"%s\"]",
             "0123456789012345678901234567890123456789012345678901234567890123");
    write_vocab_model(tpath("dims64.safetensors"), META("dimensions", names), NULL, 0);
    store_model *m;
    attn_error err;
    ck_assert_msg(store_model_load(&m, tpath("dims64.safetensors"), &err) == 0, "%s", err.message);
    store_model_destroy(m);
    snprintf(names, sizeof names, "[\"x\", \"y\", \"z\", \"%s\"]",
             "01234567890123456789012345678901234567890123456789012345678901234");
    expect_vocab_fault(META("dimensions", names), NULL, 0,
                       "metadata 'dimensions' entry 3 is 65 bytes long, over 64");
}
END_TEST

/* Every GET /v1/models shows each model's description: one over 4096
 * bytes (UTF-8 bytes, not characters) is refused at load, the message
 * naming the key and the bound; 4096 bytes load. */
START_TEST(test_model_description_bound) {
    size_t big = (size_t)1 << 20;
    char *d = malloc(big + 1);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < 4096; i += 2)
        memcpy(d + i, "\xc3\xa9", 2); /* é */
    d[4096] = '\0';
    const char *p = tpath("described.safetensors");
    write_vocab_model(p, META("description", d), NULL, 0);
    store_model *m = load_ok(p);
    ck_assert_uint_eq(strlen(m->description), 4096);
    store_model_destroy(m);
    d[4096] = 'x';
    d[4097] = '\0';
    write_vocab_model(p, META("description", d), NULL, 0);
    expect_model_fault(p, "metadata 'description' is 4097 bytes long, over 4096");
    memset(d, 'x', big);
    d[big] = '\0';
    write_vocab_model(p, META("description", d), NULL, 0);
    expect_model_fault(p, "metadata 'description' is 1048576 bytes long, over 4096");
    free(d);
}
END_TEST

START_TEST(test_vocab_non_finite) {
    float tok[12] = {0}, pos[20] = {0};
    const char *const *v = META("vocabulary", "[\"a\", \"b\", \"c\"]");
    const vspec ts[] = {{"token_embeddings", 2, {3, 4}, tok},
                        {"position_embeddings", 2, {5, 4}, pos}};
    tok[7] = NAN;
    expect_vocab_fault(v, ts, 2,
                       "tensor 'token_embeddings' holds a non-finite value (NaN) at element 7");
    tok[7] = 0;
    pos[19] = -INFINITY;
    expect_vocab_fault(v, ts, 2,
                       "tensor 'position_embeddings' holds a non-finite value (-inf) at element "
                       "19");
}
END_TEST

/* ---- the suite ----------------------------------------------------------------- */

static Suite *store_suite(void) {
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_header_past_end);
    tcase_add_test(tc, test_header_not_json);
    tcase_add_test(tc, test_header_duplicate_key);
    tcase_add_test(tc, test_bad_dtype);
    tcase_add_test(tc, test_malformed_entries);
    tcase_add_test(tc, test_offsets);
    tcase_add_test(tc, test_shape_offset_disagree);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_write_temp_not_planted);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_model_shapes_disagree);
    tcase_add_test(tc, test_model_identity_rule);
    tcase_add_test(tc, test_model_non_finite);
    tcase_add_test(tc, test_model_metadata);
    tcase_add_test(tc, test_model_bad_name);
    tcase_add_test(tc, test_model_unknown_tensor);
    tcase_add_test(tc, test_model_variants);
    tcase_add_test(tc, test_model_variant_faults);
    tcase_add_test(tc, test_stack_load);
    tcase_add_test(tc, test_stack_faults);
    tcase_add_test(tc, test_sinks_chunk);
    tcase_add_test(tc, test_f16_all_values);
    tcase_add_test(tc, test_f16_model);
    tcase_add_test(tc, test_bf16_model);
    tcase_add_test(tc, test_f32_in_place);
    tcase_add_test(tc, test_f32_unaligned);
    tcase_add_test(tc, test_copy_ignores_rewrite);
    tcase_add_test(tc, test_copy_survives_truncate);
    suite_add_tcase(s, tc);

    tc = tcase_create("vocabulary");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_vocab_load);
    tcase_add_test(tc, test_vocab_lookup);
    tcase_add_test(tc, test_vocab_duplicate_token);
    tcase_add_test(tc, test_vocab_empty_token);
    tcase_add_test(tc, test_vocab_nul_token);
    tcase_add_test(tc, test_vocab_not_array);
    tcase_add_test(tc, test_vocab_length_rows);
    tcase_add_test(tc, test_vocab_table_shapes);
    tcase_add_test(tc, test_vocab_positions_alone);
    tcase_add_test(tc, test_vocab_one_without_other);
    tcase_add_test(tc, test_vocab_dimensions);
    tcase_add_test(tc, test_model_description_bound);
    tcase_add_test(tc, test_vocab_non_finite);
    suite_add_tcase(s, tc);

    tc = tcase_create("set");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_set_load);
    tcase_add_test(tc, test_set_empty_and_missing);
    tcase_add_test(tc, test_fifo_refused);
    tcase_add_test(tc, test_set_duplicate_names);
    tcase_add_test(tc, test_set_skip_bad);
    tcase_add_test(tc, test_set_refcount_and_replace);
    tcase_add_test(tc, test_store_threads);
    tcase_add_test(tc, test_set_map_option);
    suite_add_tcase(s, tc);

    tc = tcase_create("builtin");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_builtin_models);
    tcase_add_test(tc, test_builtin_deterministic);
    tcase_add_test(tc, test_make_models_binary);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
