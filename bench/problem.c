/*
 * problem.c — inputs, outputs and the raw GEMMs of one benchmark problem.
 *
 * The random values come from a 64-bit LCG seeded with a constant, so that
 * the engine and the GEMMs see the same data in every configuration and
 * every process (bench_attention --rss runs in a process of its own).
 * Weights are scaled by 1/√width so that scores stay of order one, as the
 * built-in models are.
 */
#include "bench/problem.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int count) {
    qsort(v, (size_t)count, sizeof(double), cmp_double);
    return count % 2 ? v[count / 2] : 0.5 * (v[count / 2 - 1] + v[count / 2]);
}

void *bench_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

float *bench_floats(size_t count) {
    size_t bytes = (count * sizeof(float) + 127) / 128 * 128;
    float *p = aligned_alloc(128, bytes ? bytes : 128);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static void fill(float *x, size_t count, float amp, uint64_t *st) {
    for (size_t i = 0; i < count; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = amp * ((float)(*st >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
}

void problem_make(problem *p, bench_shape s) {
    uint64_t st = 42;
    if (!s.g) s.g = s.h;
    size_t hd = s.h * s.dh, ld = hd + 2 * s.g * s.dh;
    memset(p, 0, sizeof(*p));
    p->s = s;
    p->w_qkv = bench_alloc(s.dm * ld * sizeof(float));
    p->b_qkv = bench_alloc(ld * sizeof(float));
    p->b_o = bench_alloc(s.dm * sizeof(float));
    p->E = bench_alloc(s.n * s.dm * sizeof(float));
    fill(p->w_qkv, s.dm * ld, 1.0f / sqrtf((float)s.dm), &st);
    fill(p->b_qkv, ld, 0.1f, &st);
    fill(p->b_o, s.dm, 0.1f, &st);
    fill(p->E, s.n * s.dm, 1.0f, &st);
    if (s.w_o) {
        p->w_o = bench_alloc(hd * s.dm * sizeof(float));
        fill(p->w_o, hd * s.dm, 1.0f / sqrtf((float)hd), &st);
    }
    p->heads = bench_alloc(s.h * sizeof(size_t));
    for (size_t i = 0; i < s.h; i++)
        p->heads[i] = i;
    p->w = (attn_weights){.d_model = s.dm,
                          .n_heads = s.h,
                          .d_head = s.dh,
                          .n_kv_heads = s.g,
                          .w_qkv = p->w_qkv,
                          .b_qkv = p->b_qkv,
                          .w_o = p->w_o,
                          .b_o = p->b_o,
                          .rope = {.dims = s.rope, .theta = s.theta, .style = ATTN_ROPE_HALF},
                          .window = s.window};
    p->in = (attn_input){.weights = &p->w,
                         .embeddings = p->E,
                         .n_tokens = s.n,
                         .mask = {.kind = ATTN_MASK_CAUSAL},
                         .scale = 1.0f / sqrtf((float)s.dh),
                         .heads = p->heads,
                         .n_heads_out = s.h};
}

void problem_free(problem *p) {
    free(p->w_qkv), free(p->b_qkv), free(p->w_o), free(p->b_o), free(p->E), free(p->heads);
}

size_t problem_input_bytes(const problem *p) {
    size_t hd = p->s.h * p->s.dh, ld = hd + 2 * p->s.g * p->s.dh;
    size_t floats = p->s.n * p->s.dm + p->s.dm * ld + ld + p->s.dm;
    if (p->w_o) floats += hd * p->s.dm;
    return floats * sizeof(float);
}

double problem_flops(const problem *p) {
    return attn_flops_grouped(p->s.n, p->s.dm, p->s.h, p->s.g, p->s.dh, p->s.w_o);
}

size_t problem_patterns_bytes(const problem *p) {
    return p->s.h * p->s.n * p->s.n * sizeof(float);
}

void problem_outputs_make(attn_output *out, const problem *p, int patterns) {
    memset(out, 0, sizeof(*out));
    if (patterns) out->patterns = bench_floats(p->s.h * p->s.n * p->s.n);
    out->embeddings = bench_floats(p->s.n * p->s.dm);
}

void problem_outputs_free(attn_output *out) {
    free(out->patterns), free(out->embeddings);
}

void problem_gemms_make(problem_gemms *g, const problem *p) {
    size_t n = p->s.n, hd = p->s.h * p->s.dh, ld = hd + 2 * p->s.g * p->s.dh;
    *g = (problem_gemms){bench_floats(n * ld), bench_floats(n * n), bench_floats(n * hd),
                         bench_floats(n * p->s.dm)};
}

void problem_gemms_free(problem_gemms *g) {
    free(g->qkv), free(g->s), free(g->z), free(g->d);
}

void problem_gemms_run(problem_gemms *g, const problem *p) {
    const int n = (int)p->s.n, dm = (int)p->s.dm, dh = (int)p->s.dh;
    const int hd = (int)(p->s.h * p->s.dh), gd = (int)(p->s.g * p->s.dh), ld = hd + 2 * gd;
    const int group = (int)(p->s.h / p->s.g);
    /* (m, n, k) = (n, hd + 2gd, dm) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, ld, dm, 1.0f, p->E, dm, p->w_qkv, ld,
                0.0f, g->qkv, ld);
    for (int i = 0; i < (int)p->s.h; i++) {
        const int u = i / group; /* the K/V head of head i */
        /* (m, n, k) = (n, n, dh) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dh, p->in.scale, g->qkv + i * dh,
                    ld, g->qkv + hd + u * dh, ld, 0.0f, g->s, n);
        /* (m, n, k) = (n, dh, n) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, n, 1.0f, g->s, n,
                    g->qkv + hd + gd + u * dh, ld, 0.0f, g->z + i * dh, hd);
    }
    if (p->w_o) /* (m, n, k) = (n, dm, hd) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dm, hd, 1.0f, g->z, hd, p->w_o,
                    dm, 0.0f, g->d, dm);
}

double bench_sgemm_square(float *c, const float *a, const float *b, size_t m) {
    const int k = (int)m;
    double t0 = bench_now();
    /* (m, n, k) = (m, m, m) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, k, k, 1.0f, a, k, b, k, 0.0f, c, k);
    return bench_now() - t0;
}
