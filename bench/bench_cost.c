/*
 * bench_cost.c — does attn_input_flops follow time? The server limits and
 * schedules a computation by that count (--max-flops, the split), so a
 * shape that takes far longer per counted flop than GPT-2's would hold a
 * worker far longer than its count admits. Each row is one computation on
 * one thread with no runner, timed by the thread's CPU time (median of
 * `reps`); its "cost" is seconds × the machine's sgemm rate measured in
 * the same run (a square sgemm of side 512, one thread), i.e. the flops
 * the same time would have bought in a GEMM; "cost / count" is that over
 * attn_input_flops. GPT-2's shape is the yardstick; the rows after it are
 * made so that the per-(query, key) and per-row work dominates (heads one
 * wide, few model dimensions) with each score rule, where the GEMMs are
 * nothing and the exp, tanh and ALiBi terms are everything.
 *
 * Also prints the per-pair and per-row costs in flop units that the rows
 * imply (attention/compute.c charges them): pair_cost = (cost − GEMMs of
 * the projections) / pairs − 4 · dh, for the dh = 1 rows.
 *
 * Usage: bench_cost [--reps R] [--n N]   (defaults 5, 1024)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attention.h"
#include "bench/problem.h"

enum { MAXREP = 101 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The flops one CPU second buys in a square sgemm on this thread. */
static double sgemm_rate(int reps) {
    const size_t m = 512;
    float *a = bench_floats(m * m), *b = bench_floats(m * m), *c = bench_floats(m * m);
    for (size_t i = 0; i < m * m; i++)
        a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double t[MAXREP];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)m, (int)m, 1.0f, a,
                    (int)m, b, (int)m, 0.0f, c, (int)m);
        t[r] = cpu_now() - t0;
    }
    free(a), free(b), free(c);
    return 2.0 * (double)m * m * m / bench_median(t, reps);
}

typedef struct variant {
    const char *name;
    size_t n, dm, h, dh;
    int w_o;
    int causal;    /* else no mask */
    float softcap; /* or 0 */
    int alibi;     /* slopes */
    size_t window; /* or 0 */
    size_t rope;   /* dims, or 0 */
    int patterns;  /* patterns asked, besides the embeddings */
    int custom;    /* a custom mask allowing every other key (causal ignored) */
} variant;

/* The (query, key) pairs a row's mask and window allow, per head. */
static double allowed_pairs(const variant *v) {
    double pairs = 0.0;
    for (size_t q = 0; q < v->n; q++) {
        size_t lo = 0, hi = v->causal ? q + 1 : v->n;
        if (v->window) {
            lo = q + 1 > v->window ? q + 1 - v->window : 0;
            if (!v->causal && q + v->window < hi) hi = q + v->window;
        }
        pairs += (double)(hi - lo);
    }
    return v->custom ? pairs / 2 : pairs;
}

typedef struct row {
    double seconds, count, pairs;
} row;

static row run(const variant *v, int reps) {
    bench_shape s = {.name = v->name,
                     .n = v->n,
                     .dm = v->dm,
                     .h = v->h,
                     .dh = v->dh,
                     .w_o = v->w_o,
                     .reps = reps,
                     .rope = v->rope,
                     .theta = 10000.0,
                     .window = v->window};
    problem p;
    problem_make(&p, s);
    float *slopes = NULL;
    if (v->alibi) {
        slopes = bench_alloc(v->h * sizeof(float));
        attn_alibi_slopes(slopes, v->h);
        p.w.alibi = slopes;
    }
    p.w.softcap = v->softcap;
    if (!v->causal) p.in.mask.kind = ATTN_MASK_NONE;
    unsigned char *allowed = NULL;
    if (v->custom) {
        allowed = bench_alloc(v->n * v->n);
        for (size_t i = 0; i < v->n * v->n; i++)
            allowed[i] = (unsigned char)(i % 2 == 0);
        p.in.mask = (attn_mask){.kind = ATTN_MASK_CUSTOM, .allowed = allowed};
    }
    attn_output out;
    problem_outputs_make(&out, &p, v->patterns);
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    double t[MAXREP];
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        if (attn_compute(&out, ws, &p.in, &err) < 0) {
            fprintf(stderr, "bench_cost: %s: %s\n", v->name, err.message);
            exit(1);
        }
        t[r] = cpu_now() - t0;
    }
    row res = {.seconds = bench_median(t, reps), .count = attn_input_flops(&p.in)};
    res.pairs = (double)v->h * (double)allowed_pairs(v);
    attn_workspace_destroy(ws);
    problem_outputs_free(&out);
    free(slopes);
    free(allowed);
    problem_free(&p);
    return res;
}

int main(int argc, char **argv) {
    int reps = 5;
    size_t n = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            n = (size_t)atol(argv[i + 1]);
    }
    if (reps < 1 || reps > MAXREP || n < 16) {
        fprintf(stderr, "usage: bench_cost [--reps 1..%d] [--n N ≥ 16]\n", MAXREP);
        return 2;
    }
    openblas_set_num_threads(1);
    const double rate = sgemm_rate(reps * 4);
    const variant vs[] = {
        {"gpt2 (768, 12 × 64, causal, w_o)", n, 768, 12, 64, 1, 1, 0, 0, 0, 0, 0, 0},
        {"gpt2 + patterns", n, 768, 12, 64, 1, 1, 0, 0, 0, 0, 1, 0},
        {"64 × 1, no mask", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {"64 × 1, causal", n, 64, 64, 1, 0, 1, 0, 0, 0, 0, 0, 0},
        {"64 × 1, no mask, patterns", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 1, 0},
        {"64 × 1, no mask, softcap", n, 64, 64, 1, 0, 0, 30.0f, 0, 0, 0, 0, 0},
        {"64 × 1, no mask, alibi", n, 64, 64, 1, 0, 0, 0, 1, 0, 0, 0, 0},
        {"64 × 1, no mask, softcap + alibi", n, 64, 64, 1, 0, 0, 30.0f, 1, 0, 0, 0, 0},
        {"64 × 1, custom mask", n, 64, 64, 1, 0, 0, 0, 0, 0, 0, 0, 1},
        {"64 × 1, window 16", n, 64, 64, 1, 0, 0, 0, 0, 16, 0, 0, 0},
        {"64 × 1, window n/2", n, 64, 64, 1, 0, 0, 0, 0, n / 2, 0, 0, 0},
        {"64 × 1, softcap + alibi + window", n, 64, 64, 1, 0, 0, 30.0f, 1, n / 2, 0, 0, 0},
        {"64 × 8, no mask, softcap + alibi", n, 512, 64, 8, 0, 0, 30.0f, 1, 0, 0, 0, 0},
        {"64 × 2, rope, no mask", n, 128, 64, 2, 0, 0, 0, 0, 0, 2, 0, 0},
    };
    printf("## Cost per counted flop (n = %zu, one thread, CPU time, median of %d)\n\n", n, reps);
    printf("sgemm 512³ on one thread: %.2f GFLOP/s\n\n", rate / 1e9);
    printf("| computation | pairs | ns / pair | count (GFLOP) | seconds | cost / count |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        row r = run(&vs[i], reps);
        printf("| %s | %.3g | %.2f | %.3f | %.4f | %.2f |\n", vs[i].name, r.pairs,
               1e9 * r.seconds / r.pairs, r.count / 1e9, r.seconds, r.seconds * rate / r.count);
        fflush(stdout);
    }
    return 0;
}
