/*
 * bench_norm.c — (m) what a layer's norms cost: a Qwen3-8B-shaped layer
 * with its input RMSNorm and per-head qk_norm against the same layer
 * without them (bench/README.md, (m)).
 *
 * The layer: d_model 4096, 32 query heads of 128, 8 K/V heads, w_o, no
 * biases (Qwen3's attention_bias is false), RoPE half style on all 128
 * coordinates, θ 1e6, causal, the final embeddings only (the online path).
 * "norms": norm RMS with a weight of 4096 (eps 1e-6), qk_norm RMS per head
 * with weights of 128 for Q and for K; "plain": the same weights, E and
 * positions without either. n = 1024 and 4096.
 *
 * One thread (openblas_set_num_threads(1)), attn_compute alone, no runner:
 * every flop is the calling thread's, so a sample is timed both by the wall
 * clock and by the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which other
 * processes on the machine do not add to. Rounds interleave the two layers,
 * their order alternating round by round; each row is the median of the
 * rounds, and the ratio is given both as median(norms) ÷ median(plain) and
 * as the median of the rounds' own ratios. Goal: ≤ 1.05.
 *
 * Then the phases the norms add, each timed alone on this thread over the
 * same sizes (median of 7): the input norm over n × dm (norm.c, as batch.c
 * applies it while packing E), the per-head qk_norm over Q's n × h and K's
 * n × g rows of dh, and RoPE as a pass of its own over Q and K (qk_norm
 * comes before RoPE, so with it RoPE is not applied in the projection's
 * tiles). The outputs are checked for being the same between rounds.
 *
 * Usage: bench_norm [--reps R] [--n N]   (defaults: 7 rounds at n = 1024 and
 *        5 at n = 4096; --n runs that size alone)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/kernels.h"
#include "attention/plan.h"
#include "bench/problem.h"

enum { MAX_REPS = 64, PHASE_REPS = 7 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct sample {
    double wall, cpu;
} sample;

static sample run_once(const attn_input *in, attn_output *out, attn_workspace *ws) {
    attn_error err;
    double w0 = bench_now(), c0 = cpu_now();
    if (attn_compute(out, ws, in, &err) != 0) {
        fprintf(stderr, "bench_norm: %s\n", err.message);
        exit(1);
    }
    return (sample){bench_now() - w0, cpu_now() - c0};
}

static void fill_weight(float *x, size_t count, unsigned seed) {
    for (size_t i = 0; i < count; i++)
        x[i] = 0.5f + (float)((i * 2654435761u + seed) % 1000) / 1000.0f; /* 0.5 … 1.5 */
}

/* The three phases the norms add, alone on this thread, seconds each. */
static void phases(double t[3], const problem *p, const attn_weights *wn) {
    const size_t n = p->s.n, dm = p->s.dm, dh = p->s.dh, h = p->s.h, g = p->s.g;
    const size_t ld = (h + 2 * g) * dh, dims = p->w.rope.dims;
    float *packed = bench_floats(n * dm), *qkv = bench_floats(n * ld);
    float *angles = bench_floats(n * dims);
    double *freq = bench_alloc(dims / 2 * sizeof(double));
    unsigned *pos = bench_alloc(n * sizeof(unsigned));
    for (size_t r = 0; r < n; r++)
        pos[r] = (unsigned)r;
    for (size_t i = 0; i < n * ld; i++)
        qkv[i] = (float)(i % 13) * 0.1f - 0.6f;
    double s[3][PHASE_REPS];
    for (int k = 0; k < PHASE_REPS; k++) {
        double t0 = cpu_now();
        attn_norm_rows(packed, dm, p->E, dm, n, dm, &wn->norm);
        double t1 = cpu_now();
        /* Q: n rows of h heads; K: n rows of g heads (norm.c's norm_groups) */
        for (size_t r = 0; r < n; r++) {
            attn_norm_rows(qkv + r * ld, dh, qkv + r * ld, dh, h, dh, &wn->qk_norm.q);
            attn_norm_rows(qkv + r * ld + h * dh, dh, qkv + r * ld + h * dh, dh, g, dh,
                           &wn->qk_norm.k);
        }
        double t2 = cpu_now();
        attn_rope_frequencies(freq, &p->w.rope);
        attn_rope_angles(angles, dims, freq, 1.0, dims, pos, n);
        attn_rope_rows(qkv, ld, angles, dims, n, h + g, dh, dims, p->w.rope.style);
        double t3 = cpu_now();
        s[0][k] = t1 - t0, s[1][k] = t2 - t1, s[2][k] = t3 - t2;
    }
    for (int i = 0; i < 3; i++)
        t[i] = bench_median(s[i], PHASE_REPS);
    free(packed), free(qkv), free(angles), free(freq), free(pos);
}

static int same_floats(const float *a, const float *b, size_t count) {
    return memcmp(a, b, count * sizeof(float)) == 0;
}

/* The phases of each size measured, for the second table. */
static struct {
    size_t n;
    double ph[3], plain_cpu;
} phase_rows[2];
static int n_phase_rows;

static void measure(size_t n, int reps) {
    bench_shape sh = {.name = "qwen3-8b",
                      .n = n,
                      .dm = 4096,
                      .h = 32,
                      .dh = 128,
                      .g = 8,
                      .w_o = 1,
                      .reps = reps,
                      .rope = 128,
                      .theta = 1e6};
    problem p;
    problem_make(&p, sh);
    p.w.b_qkv = NULL, p.w.b_o = NULL; /* Qwen3: no biases */
    float *wnorm = bench_floats(sh.dm), *wq = bench_floats(sh.dh), *wk = bench_floats(sh.dh);
    fill_weight(wnorm, sh.dm, 1), fill_weight(wq, sh.dh, 2), fill_weight(wk, sh.dh, 3);
    attn_weights wn = p.w; /* the same layer with its norms */
    wn.norm = (attn_norm){.type = ATTN_NORM_RMS, .weight = wnorm, .eps = 1e-6};
    wn.qk_norm.q = (attn_norm){.type = ATTN_NORM_RMS, .weight = wq, .eps = 1e-6};
    wn.qk_norm.k = (attn_norm){.type = ATTN_NORM_RMS, .weight = wk, .eps = 1e-6};
    attn_input in[2] = {p.in, p.in}; /* [0] plain, [1] norms */
    in[1].weights = &wn;
    attn_output out[2], first[2];
    problem_outputs_make(&out[0], &p, 0), problem_outputs_make(&out[1], &p, 0);
    problem_outputs_make(&first[0], &p, 0), problem_outputs_make(&first[1], &p, 0);
    attn_workspace *ws = attn_workspace_create();
    for (int c = 0; c < 2; c++) { /* warm: the workspace grown, the pages touched */
        run_once(&in[c], &first[c], ws);
    }
    sample s[2][MAX_REPS];
    double rw[MAX_REPS], rc[MAX_REPS];
    int same = 1;
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            const int c = (r + k) % 2; /* plain first in even rounds */
            s[c][r] = run_once(&in[c], &out[c], ws);
            same = same && same_floats(out[c].embeddings, first[c].embeddings, n * sh.dm);
        }
        rw[r] = s[1][r].wall / s[0][r].wall, rc[r] = s[1][r].cpu / s[0][r].cpu;
    }
    double w[2][MAX_REPS], cp[2][MAX_REPS], mw[2], mc[2];
    for (int c = 0; c < 2; c++) {
        for (int r = 0; r < reps; r++)
            w[c][r] = s[c][r].wall, cp[c][r] = s[c][r].cpu;
        mw[c] = bench_median(w[c], reps), mc[c] = bench_median(cp[c], reps);
    }
    const double flops[2] = {attn_input_flops(&in[0]), attn_input_flops(&in[1])};
    double ph[3];
    phases(ph, &p, &wn);
    printf("| %zu | %.1f | %.1f | **%.3f** | %.3f | %.1f | %.1f | **%.3f** | %.3f | %.4f | %s |\n",
           n, mw[0] * 1e3, mw[1] * 1e3, mw[1] / mw[0], bench_median(rw, reps), mc[0] * 1e3,
           mc[1] * 1e3, mc[1] / mc[0], bench_median(rc, reps), flops[1] / flops[0],
           same ? "yes" : "NO");
    fflush(stdout);
    phase_rows[n_phase_rows].n = n, phase_rows[n_phase_rows].plain_cpu = mc[0];
    memcpy(phase_rows[n_phase_rows++].ph, ph, sizeof ph);
    attn_workspace_destroy(ws);
    for (int c = 0; c < 2; c++)
        problem_outputs_free(&out[c]), problem_outputs_free(&first[c]);
    free(wnorm), free(wq), free(wk);
    problem_free(&p);
}

int main(int argc, char **argv) {
    int reps = 0;
    size_t only = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            only = (size_t)atol(argv[i + 1]);
    }
    if (reps < 0 || reps > MAX_REPS) {
        fprintf(stderr, "usage: bench_norm [--reps 1..%d] [--n N]\n", MAX_REPS);
        return 2;
    }
    openblas_set_num_threads(1);
    printf("| n | plain wall ms | norms wall ms | **wall ratio** | rounds' ratio | plain CPU ms "
           "| norms CPU ms | **CPU ratio** | rounds' ratio | count ratio | outputs steady |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    fflush(stdout);
    if (only) {
        measure(only, reps ? reps : 5);
    } else {
        measure(1024, reps ? reps : 7);
        measure(4096, reps ? reps : 5);
    }
    printf("\nThe phases the norms add, each alone on this thread (CPU ms, median of %d):\n\n",
           PHASE_REPS);
    printf("| n | input norm (n × dm) | qk_norm (n × (h + g) rows of dh) | RoPE as its own pass | "
           "sum | sum ÷ plain layer |\n|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n_phase_rows; i++) {
        const double *ph = phase_rows[i].ph, sum = ph[0] + ph[1] + ph[2];
        printf("| %zu | %.2f | %.2f | %.2f | %.2f | %.2f %% |\n", phase_rows[i].n, ph[0] * 1e3,
               ph[1] * 1e3, ph[2] * 1e3, sum * 1e3, 100.0 * sum / phase_rows[i].plain_cpu);
    }
    return 0;
}
