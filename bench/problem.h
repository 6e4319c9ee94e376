/*
 * problem.h — one attention problem for the benchmarks: a shape, random
 * inputs and weights, the output buffers of an output set, and the block's
 * GEMMs alone at the same shapes (the floor every engine time is read
 * against). Also the clock, medians and allocation every benchmark uses.
 *
 * Letters as in attention/attention.h. Every problem is causal and lists
 * every head; all buffers are malloc'd and freed by the matching _free.
 */
#ifndef BENCH_PROBLEM_H
#define BENCH_PROBLEM_H

#include <stddef.h>

#include "attention/attention.h"

/* ---- clock, medians, memory ---------------------------------------------- */

double bench_now(void); /* seconds, CLOCK_MONOTONIC */
/* Sorts v and returns its median. */
double bench_median(double *v, int count);
/* malloc, or exit(1) with a message: a benchmark has no way to go on. */
void *bench_alloc(size_t bytes);
/* Floats on their own 128-byte lines, so that two workers' small outputs
 * never share one (false sharing would be the benchmark's own). */
float *bench_floats(size_t count);

/* ---- the problem ------------------------------------------------------------ */

typedef struct bench_shape {
    const char *name;
    size_t n, dm, h, dh;
    int w_o;       /* with w_o (else the identity: h · dh == dm) */
    int reps;      /* latency samples */
    size_t g;      /* K/V heads, or 0: h */
    size_t rope;   /* RoPE's dims (half style), or 0: none */
    double theta;  /* RoPE's θ */
    size_t window; /* w, or 0: none */
} bench_shape;

typedef struct problem {
    bench_shape s;
    attn_weights w;
    attn_input in;
    float *w_qkv, *b_qkv, *w_o, *b_o, *E;
    size_t *heads;
} problem;

/* Fills inputs and weights from a fixed seed: the same shape gives the same
 * problem in every run and every process. */
void problem_make(problem *p, bench_shape s);
void problem_free(problem *p);
/* Bytes of the inputs (E) and the weights (w_qkv, b_qkv, w_o, b_o). */
size_t problem_input_bytes(const problem *p);
/* attn_flops_grouped of the problem: the full n × n products, causal or
 * windowed or not. */
double problem_flops(const problem *p);

/* The API's output sets: default = patterns (h × n × n) + embeddings;
 * otherwise embeddings only. */
void problem_outputs_make(attn_output *out, const problem *p, int patterns);
void problem_outputs_free(attn_output *out);
size_t problem_patterns_bytes(const problem *p);

/* ---- the GEMMs alone ----------------------------------------------------------- */

/* Buffers of the raw GEMM sequence, with the engine's shapes and strides:
 * QKV n × (hd + 2gd), one S n × n, Z n × hd, D n × dm. */
typedef struct problem_gemms {
    float *qkv, *s, *z, *d;
} problem_gemms;

void problem_gemms_make(problem_gemms *g, const problem *p);
void problem_gemms_free(problem_gemms *g);
/* By raw cblas_sgemm, full n × n: E·w_qkv (K and V at g heads), per head
 * Q_i·K_u(i)ᵀ and P_i·V_u(i), then Z·w_o — exactly attn_flops_grouped of
 * work (no RoPE, no window), at OpenBLAS's current thread count. */
void problem_gemms_run(problem_gemms *g, const problem *p);

/* One square cblas_sgemm of side m on buffers of bench_floats(m · m) each:
 * the machine's practical FLOP limit at the current thread count. Returns
 * seconds; 2m³ floating-point operations. */
double bench_sgemm_square(float *c, const float *a, const float *b, size_t m);

#endif
