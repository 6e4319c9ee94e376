/*
 * bench_decode.c — how fast request bodies of megabytes are decoded.
 *
 * Two GPT-2-shaped bodies, numbers written as clients write float32 (the
 * shortest text that reads back, as our own responses are written):
 *
 *   embeddings  n = 1024 × d_model 768 embeddings and a named model
 *               (about 9 MB)
 *   weights     n = 128 embeddings and inline weights of 12 heads of 64,
 *               w_q, w_k, w_v, biases and w_o (about 30 MB)
 *
 * For each, interleaved run by run, medians of RUNS:
 *   request     api_request_decode, the server's whole decode: arrays
 *               lifted from the text (api/arrays.c), jansson for the
 *               rest, every check, the numbers copied into the request
 *   lift        api_arrays_lift alone
 *   jansson     json_loadb of the whole body into a tree, then every number
 *               read out of it as a float32: what decoding cost before
 *   strtof      a bare strtof loop over the same number texts, from a
 *               list of their offsets (no grammar, no structure): a floor
 * in MB/s of body text, and the peak heap the jansson tree takes.
 *
 * A third body holds the same embeddings as a base64 tensor object (about
 * 4 MB): api_request_decode against jansson's json_loadb alone and against
 * api_base64_decode alone, the two things it must at least do.
 *
 * Usage: bench_decode [--quick]
 */
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/arrays.h"
#include "api/base64.h"
#include "api/call.h"
#include "api/error.h"
#include "api/float_format.h"
#include "problem.h"

/* The arrays POST /v1/attention lifts from the text. */
static int attention_rank(const char *path) {
    return api_call_array_rank(API_CALL_ATTENTION, path);
}

static uint64_t rng_state = 42;

static float rnd(float amp) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return amp * ((float)(rng_state >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

/* A growing text, and the offsets of the numbers written into it. */
typedef struct text {
    char *buf;
    size_t len, cap;
    size_t *at;
    size_t count, at_cap;
} text;

static void put(text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf) abort();
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void puts_(text *t, const char *s) {
    put(t, s, strlen(s));
}

static void put_number(text *t, float f) {
    char b[32];
    size_t n = api_float_format(b, f);
    if (t->count == t->at_cap) {
        t->at_cap = t->at_cap ? 2 * t->at_cap : 1024;
        t->at = realloc(t->at, t->at_cap * sizeof *t->at);
        if (!t->at) abort();
    }
    t->at[t->count++] = t->len;
    put(t, b, n);
}

static void put_matrix(text *t, size_t rows, size_t cols, float amp) {
    puts_(t, "[");
    for (size_t r = 0; r < rows; r++) {
        puts_(t, r ? ",[" : "[");
        for (size_t c = 0; c < cols; c++) {
            if (c) puts_(t, ",");
            put_number(t, rnd(amp));
        }
        puts_(t, "]");
    }
    puts_(t, "]");
}

static void put_vector(text *t, size_t n, float amp) {
    puts_(t, "[");
    for (size_t c = 0; c < n; c++) {
        if (c) puts_(t, ",");
        put_number(t, rnd(amp));
    }
    puts_(t, "]");
}

enum { DM = 768, H = 12, DH = 64 };

static void body_embeddings(text *t) {
    puts_(t, "{\"model\":\"gpt2-small-shape\",\"embeddings\":");
    put_matrix(t, 1024, DM, 1.0f);
    puts_(t, "}");
}

static void body_weights(text *t) {
    puts_(t, "{\"embeddings\":");
    put_matrix(t, 128, DM, 1.0f);
    puts_(t, ",\"weights\":{\"heads\":[");
    for (int h = 0; h < H; h++) {
        puts_(t, h ? ",{" : "{");
        const char *m[] = {"w_q", "w_k", "w_v"}, *b[] = {"b_q", "b_k", "b_v"};
        for (int p = 0; p < 3; p++) {
            puts_(t, p ? ",\"" : "\"");
            puts_(t, m[p]);
            puts_(t, "\":");
            put_matrix(t, DM, DH, 0.036f);
            puts_(t, ",\"");
            puts_(t, b[p]);
            puts_(t, "\":");
            put_vector(t, DH, 0.1f);
        }
        puts_(t, "}");
    }
    puts_(t, "],\"w_o\":");
    put_matrix(t, H * DH, DM, 0.036f);
    puts_(t, ",\"b_o\":");
    put_vector(t, DM, 0.1f);
    puts_(t, "},\"return\":[\"embeddings\"]}");
}

/* ---- the old way: a jansson tree, every number read out of it ------------- */

static size_t numbers_in(const json_t *v, float *sink) {
    size_t n = 0;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            n += numbers_in(json_array_get(v, i), sink);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
            n += numbers_in(x, sink);
    } else if (json_is_number(v)) {
        *sink += (float)json_number_value(v);
        n = 1;
    }
    return n;
}

static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static const api_limits limits = {.max_tokens = 8192,
                                  .max_heads = 128,
                                  .max_d_model = 16384,
                                  .max_flops = 1e13,
                                  .max_response_bytes = (size_t)1 << 32,
                                  .max_workspace_bytes = (size_t)1 << 32};

enum { M_REQUEST, M_LIFT, M_JANSSON, M_STRTOF, M_COUNT };
static const char *const m_name[M_COUNT] = {
    "api_request_decode (lifted arrays + jansson for the rest)", "api_arrays_lift alone",
    "jansson json_loadb + reading every number", "strtof loop over the numbers alone"};

static void run(const char *name, text *t, int runs) {
    double sec[M_COUNT][16];
    float sink = 0;
    size_t tree_bytes = 0;
    for (int r = 0; r < runs; r++) {
        for (int m = 0; m < M_COUNT; m++) {
            double t0 = bench_now();
            if (m == M_REQUEST) {
                api_call *req;
                attn_error err;
                if (api_call_decode_json(API_CALL_ATTENTION, t->buf, t->len, &limits, &req, &err) !=
                    0) {
                    fprintf(stderr, "bench_decode: %s refused: %s\n", name, err.message);
                    exit(1);
                }
                api_call_free(req);
            } else if (m == M_LIFT) {
                api_arrays *a;
                if (api_arrays_lift(&a, t->buf, t->len, attention_rank) != 0) exit(1);
                sink += (float)api_arrays_numbers(a);
                api_arrays_free(a);
            } else if (m == M_JANSSON) {
                size_t before = heap_in_use();
                json_t *root = json_loadb(t->buf, t->len, JSON_DECODE_INT_AS_REAL, NULL);
                if (!root) exit(1);
                size_t after = heap_in_use();
                if (after > before && after - before > tree_bytes) tree_bytes = after - before;
                if (numbers_in(root, &sink) != t->count) exit(1);
                json_decref(root);
            } else {
                for (size_t i = 0; i < t->count; i++)
                    sink += strtof(t->buf + t->at[i], NULL);
            }
            sec[m][r] = bench_now() - t0;
        }
        malloc_trim(0);
    }
    double mb = (double)t->len / 1e6, base = bench_median(sec[M_JANSSON], runs);
    printf("\n%s: %.1f MB of JSON, %zu numbers (%.1f bytes a number); median of %d runs\n\n", name,
           mb, t->count, (double)t->len / (double)t->count, runs);
    printf("| method | ms | MB/s | vs jansson |\n|---|---|---|---|\n");
    for (int m = 0; m < M_COUNT; m++) {
        double s = bench_median(sec[m], runs);
        printf("| %s | %.1f | %.0f | %.2f× |\n", m_name[m], s * 1e3, mb / s, base / s);
    }
    printf("\njansson's tree: %.0f MB of heap for %.1f MB of text (%.0f×); the lifted numbers "
           "take 4 bytes each (%.0f MB)%s\n",
           (double)tree_bytes / 1e6, mb, (double)tree_bytes / (double)t->len,
           4.0 * (double)t->count / 1e6, sink == 12345.0f ? " " : "");
}

/* The embeddings of body_embeddings as {"dtype","shape","data"}; the
 * floats in *values (caller frees). */
static void body_base64(text *t, float **values) {
    size_t n = (size_t)1024 * DM, len = 0;
    float *v = malloc(n * sizeof *v);
    if (!v || api_base64_encoded_length(n * sizeof *v, &len) != 0) exit(1);
    for (size_t i = 0; i < n; i++)
        v[i] = rnd(1.0f);
    char *b64 = malloc(len);
    if (!b64) exit(1);
    api_base64_encode(b64, v, n * sizeof *v);
    puts_(t, "{\"model\":\"gpt2-small-shape\",\"embeddings\":{\"dtype\":\"float32\",\"shape\":["
             "1024,768],\"data\":\"");
    put(t, b64, len);
    puts_(t, "\"}}");
    free(b64);
    *values = v;
}

static void run_base64(text *t, int runs) {
    enum { B_REQUEST, B_JANSSON, B_BASE64, B_COUNT };
    static const char *const names[B_COUNT] = {"api_request_decode",
                                               "jansson json_loadb alone (no number to read)",
                                               "api_base64_decode of the data alone"};
    double sec[B_COUNT][16];
    const char *data = strstr(t->buf, "\"data\":\"") + 8;
    size_t data_len = (size_t)(strrchr(t->buf, '"') - data);
    float *out = malloc((size_t)1024 * DM * sizeof *out);
    if (!out) exit(1);
    for (int r = 0; r < runs; r++) {
        for (int m = 0; m < B_COUNT; m++) {
            double t0 = bench_now();
            if (m == B_REQUEST) {
                api_call *req;
                attn_error err;
                if (api_call_decode_json(API_CALL_ATTENTION, t->buf, t->len, &limits, &req, &err) !=
                    0) {
                    fprintf(stderr, "bench_decode: base64 refused: %s\n", err.message);
                    exit(1);
                }
                api_call_free(req);
            } else if (m == B_JANSSON) {
                json_t *root = json_loadb(t->buf, t->len, 0, NULL);
                if (!root) exit(1);
                json_decref(root);
            } else {
                size_t bad;
                if (api_base64_decode(out, data, data_len, &bad) != 0) exit(1);
            }
            sec[m][r] = bench_now() - t0;
        }
        malloc_trim(0);
    }
    double mb = (double)t->len / 1e6, base = bench_median(sec[B_JANSSON], runs);
    printf("\nembeddings as a base64 tensor (GPT-2, n = 1024, model by name): %.1f MB of JSON; "
           "median of %d runs\n\n",
           mb, runs);
    printf("| method | ms | MB/s | vs jansson |\n|---|---|---|---|\n");
    for (int m = 0; m < B_COUNT; m++) {
        double s = bench_median(sec[m], runs);
        printf("| %s | %.1f | %.0f | %.2f× |\n", names[m], s * 1e3, mb / s, base / s);
    }
    free(out);
}

int main(int argc, char **argv) {
    int runs = argc > 1 && !strcmp(argv[1], "--quick") ? 3 : 7;
    text e = {0}, w = {0};
    body_embeddings(&e);
    body_weights(&w);
    printf("## JSON decoding of large bodies\n");
    run("embeddings (GPT-2, n = 1024, model by name)", &e, runs);
    run("inline weights (GPT-2 shape, 12 heads, n = 128)", &w, runs);
    text b = {0};
    float *values;
    body_base64(&b, &values);
    run_base64(&b, runs);
    free(values), free(b.buf), free(b.at);
    free(e.buf), free(e.at), free(w.buf), free(w.at);
    return 0;
}
