/*
 * bench_cpu.c — the engine on one thread against the same block's GEMMs
 * alone (problem.c's problem_gemms_run, as bench_attention times them), by
 * the thread's CPU time rather than the wall clock: on a machine other work
 * keeps busy, the time this thread was not running is left out, so the
 * ratio of one thread's work survives a load that makes bench_attention's
 * wall-clock rows spread by ±40 %. What it cannot leave out is the caches
 * the other work empties meanwhile.
 *
 * A sample: `inner` GEMMs-alone calls, then as many engine calls with the
 * default outputs (patterns + embeddings), then with embeddings only; the
 * ratio of each sample's engine time to its GEMMs' time, median of the
 * samples; and the ratio of each configuration's fastest sample. GPT-2's
 * shape (d_model 768, 12 heads of 64, causal, b_qkv, w_o, b_o), one
 * OpenBLAS thread, attn_compute with no runner.
 *
 * Usage: bench_cpu [--reps R] [--inner K] [--n N]   (defaults 21, 5, 128)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attention.h"
#include "bench/problem.h"

enum { MAXREP = 1000 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int reps = 21, inner = 5;
    size_t n = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inner"))
            inner = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--n"))
            n = (size_t)atol(argv[i + 1]);
    }
    if (reps < 1 || reps > MAXREP || inner < 1 || n < 1) {
        fprintf(stderr, "usage: bench_cpu [--reps 1..%d] [--inner K] [--n N]\n", MAXREP);
        return 2;
    }
    openblas_set_num_threads(1);
    problem p;
    problem_make(&p,
                 (bench_shape){.name = "GPT-2", .n = n, .dm = 768, .h = 12, .dh = 64, .w_o = 1});
    attn_output full, emb;
    problem_outputs_make(&full, &p, 1), problem_outputs_make(&emb, &p, 0);
    problem_gemms g;
    problem_gemms_make(&g, &p);
    attn_workspace *ws = attn_workspace_create();
    attn_error err;
    for (int i = 0; i < 3; i++) /* warm-up: the workspace grows, pages are touched */
        if (attn_compute(&full, ws, &p.in, &err) || attn_compute(&emb, ws, &p.in, &err)) {
            fprintf(stderr, "bench_cpu: %s\n", err.message);
            return 1;
        }
    static double tg[MAXREP], tf[MAXREP], te[MAXREP], rf[MAXREP], re[MAXREP];
    for (int k = 0; k < reps; k++) {
        double t0 = cpu_now();
        for (int i = 0; i < inner; i++)
            problem_gemms_run(&g, &p);
        double t1 = cpu_now();
        for (int i = 0; i < inner; i++)
            attn_compute(&full, ws, &p.in, &err);
        double t2 = cpu_now();
        for (int i = 0; i < inner; i++)
            attn_compute(&emb, ws, &p.in, &err);
        double t3 = cpu_now();
        tg[k] = (t1 - t0) / inner, tf[k] = (t2 - t1) / inner, te[k] = (t3 - t2) / inner;
        rf[k] = tf[k] / tg[k], re[k] = te[k] / tg[k];
    }
    /* the fastest sample of each: the one least disturbed by other work */
    double mg = tg[0], mf = tf[0], me = te[0];
    for (int k = 1; k < reps; k++)
        mg = tg[k] < mg ? tg[k] : mg, mf = tf[k] < mf ? tf[k] : mf, me = te[k] < me ? te[k] : me;
    printf("n %zu, %d samples of %d calls, thread CPU time: GEMMs alone %.3f ms, engine default "
           "%.3f ms, emb %.3f ms; engine ÷ GEMMs (median of the samples' ratios): default %.3f, "
           "emb %.3f; minima %.3f, %.3f, %.3f ms, ratio of the minima: default %.3f, emb %.3f\n",
           n, reps, inner, bench_median(tg, reps) * 1e3, bench_median(tf, reps) * 1e3,
           bench_median(te, reps) * 1e3, bench_median(rf, reps), bench_median(re, reps), mg * 1e3,
           mf * 1e3, me * 1e3, mf / mg, me / mg);
    problem_gemms_free(&g);
    problem_outputs_free(&full), problem_outputs_free(&emb);
    attn_workspace_destroy(ws);
    problem_free(&p);
    return 0;
}
