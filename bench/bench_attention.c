/*
 * bench_attention.c — how close the engine comes to the GEMMs it is made
 * of, in the server's threading; how the server should share the cores
 * between workers and OpenBLAS threads; and what one large computation
 * holds in memory.
 *
 * Latency (the default run, first table): for each shape, sample by
 * sample interleaved,
 *   - the engine as the server runs it: a pool of 2 workers × 1 OpenBLAS
 *     thread, the computation split over the idle worker by server/split.c
 *     when it reaches SRV_JOB_SPLIT_FLOPS (server_pool.c);
 *   - the engine on 1 worker (never split), for reference;
 *   - the block's GEMMs alone (problem.c) on 2 and on 1 OpenBLAS threads;
 *   - one 2048³ cblas_sgemm on 2 threads: the FLOP limit of this row is
 *     attn_flops / that sgemm's GFLOP/s, in the same samples.
 * Split results are compared bit for bit with the 1-worker ones.
 *
 * Throughput (second table): a queue of default requests served by W pool
 * workers with OpenBLAS at B threads, (W, B) = (2, 1), (1, 2), (2, 2), (1, 1),
 * interleaved run by run.
 *
 * Usage: bench_attention [--quick]           both tables (--quick: fewer samples)
 *        bench_attention --rss N patterns|emb  one GPT-2-shape computation of n = N
 *            on 1 worker, then its memory accounting on one line (for
 *            /usr/bin/time -v; bench/rss.sh)
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/vexp.h"
#include "bench/problem.h"
#include "bench/server_pool.h"

enum { MAXREP = 32, PEAK_M = 2048 };

/* Calls per timed sample, so that a sample lasts >= ~20 ms. */
/* Calls per sample: enough for 0.1 s. On a VM, a vCPU that was idle is
 * descheduled by the host, and the first hand-off to a worker on it waits
 * milliseconds for the host to run it again; a server under steady load
 * keeps its cores awake. A sample of many calls in a row measures that
 * steady state, on every configuration alike. */
static int inner_calls(double seconds_per_call) {
    double k = 0.1 / (seconds_per_call > 1e-9 ? seconds_per_call : 1e-9);
    return k < 1 ? 1 : k > 100000 ? 100000 : (int)k;
}

static void print_time(double seconds) {
    if (seconds < 1e-6)
        printf(" %.2f ns", seconds * 1e9);
    else if (seconds < 1e-3)
        printf(" %.2f µs", seconds * 1e6);
    else if (seconds < 10.0)
        printf(" %.2f ms", seconds * 1e3);
    else
        printf(" %.2f s", seconds);
}

/* ---- the sgemm peak -------------------------------------------------------------- */

typedef struct peak_bufs {
    float *a, *b, *c;
} peak_bufs;

static void peak_make(peak_bufs *pk) {
    size_t count = (size_t)PEAK_M * PEAK_M;
    pk->a = bench_floats(count), pk->b = bench_floats(count), pk->c = bench_floats(count);
    for (size_t i = 0; i < count; i++)
        pk->a[i] = (float)(i % 7) * 0.25f - 0.75f, pk->b[i] = (float)(i % 5) * 0.25f - 0.5f;
}

static double peak_gflops(peak_bufs *pk) {
    double s = bench_sgemm_square(pk->c, pk->a, pk->b, PEAK_M);
    return 2.0 * PEAK_M * PEAK_M * PEAK_M / s * 1e-9;
}

/* ---- latency ------------------------------------------------------------------------- */

/* Configurations of one latency row. */
enum { C_SERVER, C_ONE, C_GEMMS2, C_GEMMS1, C_COUNT };

typedef struct lat_shape {
    bench_shape s;
    int emb_only; /* the default output set is not measured: its patterns would be too large */
    int target;   /* one of the shapes the 15 % target is stated for */
} lat_shape;

typedef struct lat_row {
    const char *name;
    int patterns, target;
    double t[C_COUNT]; /* medians, seconds per call */
    double peak;       /* GFLOP/s of the 2048³ sgemm on 2 threads, same samples */
    double flops;
    double helpers; /* accepted per split call */
    int same;       /* split bits == 1-worker bits */
} lat_row;

/* Measures one shape: appends one row per output set to rows. */
static int latency_shape(lat_row *rows, const lat_shape *ls, server_pool *sp, peak_bufs *pk,
                         double *peaks, int *npeaks) {
    problem p;
    problem_make(&p, ls->s);
    int sets = ls->emb_only ? 1 : 2, reps = ls->s.reps;
    attn_output out[2][2]; /* [output set][C_SERVER, C_ONE] */
    problem_gemms g;
    problem_gemms_make(&g, &p);
    for (int o = 0; o < sets; o++)
        for (int c = 0; c < 2; c++)
            problem_outputs_make(&out[o][c], &p, !ls->emb_only && o == 0);

    /* Warm-up: workspaces grow and pages are touched; sizes the samples. */
    openblas_set_num_threads(1);
    int inner[2], inner_gemms;
    for (int o = 0; o < sets; o++) {
        server_pool_time(sp, &p.in, &out[o][C_SERVER], SPLIT_AS_SERVER, 1, NULL);
        inner[o] = inner_calls(server_pool_time(sp, &p.in, &out[o][C_ONE], SPLIT_NEVER, 1, NULL));
    }
    double t0 = bench_now();
    problem_gemms_run(&g, &p);
    inner_gemms = inner_calls(bench_now() - t0);

    double t[2][C_COUNT][MAXREP], pk_gf[MAXREP];
    size_t helpers[2] = {0, 0};
    /* Each round: first everything on 2 OpenBLAS threads, then the GEMMs on
     * 1 thread, then the pool's configurations. After a call on 2 threads,
     * OpenBLAS's other thread spins for work for about 0.1 s (its
     * THREAD_TIMEOUT, 2^28 cycles), holding a core: the 1-thread GEMMs
     * need only one and run meanwhile (followed by a busy wait to 0.15 s when
     * they are shorter), while the pool's two workers, timed after them,
     * find both cores free and awake. (On a VM a vCPU left
     * idle is descheduled by the host, and the first hand-off to a thread
     * on it waits milliseconds: a server under steady load keeps its cores
     * awake, and so does this order.) */
    for (int k = 0; k < reps; k++) {
        openblas_set_num_threads(2);
        t0 = bench_now();
        for (int i = 0; i < inner_gemms; i++)
            problem_gemms_run(&g, &p);
        t[0][C_GEMMS2][k] = (bench_now() - t0) / inner_gemms;
        pk_gf[k] = peaks[(*npeaks)++] = peak_gflops(pk);
        double two_threads_end = bench_now();
        openblas_set_num_threads(1);
        t0 = bench_now();
        for (int i = 0; i < inner_gemms; i++)
            problem_gemms_run(&g, &p);
        t[0][C_GEMMS1][k] = (bench_now() - t0) / inner_gemms;
        while (bench_now() - two_threads_end < 0.15) /* busy, not asleep: see above */
            ;
        for (int o = 0; o < sets; o++) {
            t[o][C_SERVER][k] = server_pool_time(sp, &p.in, &out[o][C_SERVER], SPLIT_AS_SERVER,
                                                 inner[o], &helpers[o]);
            t[o][C_ONE][k] =
                server_pool_time(sp, &p.in, &out[o][C_ONE], SPLIT_NEVER, inner[o], NULL);
        }
    }
    openblas_set_num_threads(1);

    double gemms1 = bench_median(t[0][C_GEMMS1], reps), gemms2 = bench_median(t[0][C_GEMMS2], reps);
    double peak = bench_median(pk_gf, reps);
    for (int o = 0; o < sets; o++) {
        lat_row *r = &rows[o];
        int pat = !ls->emb_only && o == 0;
        size_t emb = p.s.n * p.s.dm * sizeof(float);
        r->name = ls->s.name;
        r->patterns = pat;
        r->target = ls->target;
        r->t[C_SERVER] = bench_median(t[o][C_SERVER], reps);
        r->t[C_ONE] = bench_median(t[o][C_ONE], reps);
        r->t[C_GEMMS1] = gemms1, r->t[C_GEMMS2] = gemms2;
        r->peak = peak;
        r->flops = problem_flops(&p);
        r->helpers = (double)helpers[o] / ((double)reps * inner[o]);
        r->same = !memcmp(out[o][C_SERVER].embeddings, out[o][C_ONE].embeddings, emb) &&
                  (!pat || !memcmp(out[o][C_SERVER].patterns, out[o][C_ONE].patterns,
                                   problem_patterns_bytes(&p)));
        for (int c = 0; c < 2; c++)
            problem_outputs_free(&out[o][c]);
    }
    problem_gemms_free(&g);
    problem_free(&p);
    return sets;
}

static void print_latency(const lat_row *rows, int nrows, const lat_shape *shapes, int nshapes,
                          const double *peaks, int npeaks, double peak1, double peak2) {
    double all[1024];
    memcpy(all, peaks, (size_t)npeaks * sizeof(double));
    double lo = all[0], hi = all[0];
    for (int i = 1; i < npeaks; i++)
        lo = all[i] < lo ? all[i] : lo, hi = all[i] > hi ? all[i] : hi;
    printf("## (a) Latency: the engine against its GEMMs alone and the sgemm FLOP limit\n\n");
    printf("FLOP limit: one %d³ cblas_sgemm on 2 OpenBLAS threads, %.1f GFLOP/s (median of %d "
           "samples interleaved with the rows below, %.1f – %.1f); before them, 5 samples "
           "interleaved: %.1f GFLOP/s on 1 thread, %.1f on 2.\n"
           "Each row's limit is attn_flops / the median of the sgemm samples taken with that "
           "row's samples.\nSamples per row:",
           PEAK_M, bench_median(all, npeaks), npeaks, lo, hi, peak1, peak2);
    for (int s = 0; s < nshapes; s++)
        printf(" %s %d%s", shapes[s].s.name, shapes[s].s.reps, s + 1 < nshapes ? "," : ".\n\n");

    printf("Times (GFLOP/s = attn_flops, full n × n, / time):\n\n"
           "| shape n × d_model × heads | outputs | server: 2 workers × 1 BLAS thread, split | "
           "1 worker × 1 BLAS thread | GEMMs alone, 2 BLAS threads | GEMMs alone, 1 BLAS thread "
           "| FLOP limit (2 threads) |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        const lat_row *r = &rows[i];
        printf("| %s | %s |", r->name, r->patterns ? "default" : "emb");
        for (int c = 0; c < C_COUNT; c++) {
            print_time(r->t[c]);
            printf(" (%.1f) |", r->flops / r->t[c] * 1e-9);
        }
        print_time(r->flops / (r->peak * 1e9));
        printf(" (%.1f) |\n", r->peak);
    }

    printf("\nRatios of times (below 1: faster; the causal engine skips the blocks above the "
           "diagonal that the GEMMs alone compute):\n\n"
           "| shape | outputs | **server ÷ GEMMs alone, 2 threads** | server ÷ FLOP limit | "
           "GEMMs alone 2 threads ÷ FLOP limit | 1 worker ÷ GEMMs alone, 1 thread | "
           "1 worker ÷ server | helpers per call | split = 1 worker, bit for bit |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nrows; i++) {
        const lat_row *r = &rows[i];
        double limit = r->flops / (r->peak * 1e9);
        printf("| %s | %s | **%.2f** | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", r->name,
               r->patterns ? "default" : "emb", r->t[C_SERVER] / r->t[C_GEMMS2],
               r->t[C_SERVER] / limit, r->t[C_GEMMS2] / limit, r->t[C_ONE] / r->t[C_GEMMS1],
               r->t[C_ONE] / r->t[C_SERVER], r->helpers, r->same ? "yes" : "NO");
    }
    printf("\nTarget: server ÷ GEMMs alone (2 threads) ≤ 1.15 at GPT-2 n = 128, 1024, 4096:");
    int met = 1;
    const char *sep = " ";
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].target) continue;
        double ratio = rows[i].t[C_SERVER] / rows[i].t[C_GEMMS2];
        met = met && ratio <= 1.15;
        printf("%s%s %s %.2f%s", sep, rows[i].name, rows[i].patterns ? "default" : "emb", ratio,
               ratio <= 1.15 ? "" : " (over)");
        sep = "; ";
    }
    printf(" — **%s**.\n\n", met ? "met" : "not met");
}

/* ---- throughput ------------------------------------------------------------------------ */

static void throughput(const bench_shape *shapes, const int *requests, int nshapes, int runs,
                       server_pool *pools[2]) {
    static const int conf[][2] = {{2, 1}, {1, 2}, {2, 2}, {1, 1}}; /* workers, BLAS threads */
    enum { NCONF = sizeof conf / sizeof conf[0] };
    printf("## Workers × BLAS threads: a queue of default requests (median of %d runs)\n\n"
           "Requests queued at once on a pool of W workers (split as the server does, which a "
           "full queue leaves no room for), OpenBLAS at B threads; wall time from the first "
           "submit to the last finish.\n\n"
           "| shape | requests a run | W workers × B BLAS threads | requests/s | min – max | "
           "mean compute time |\n|---|---|---|---|---|---|\n",
           runs);
    for (int s = 0; s < nshapes; s++) {
        problem p;
        problem_make(&p, shapes[s]);
        attn_output outs[2];
        for (int w = 0; w < 2; w++)
            problem_outputs_make(&outs[w], &p, 1);
        double rate[NCONF][MAXREP], busy[NCONF][MAXREP], unused;
        for (int c = 0; c < NCONF; c++) { /* warm-up: workspaces, pages */
            openblas_set_num_threads(conf[c][1]);
            server_pool_stream(pools[conf[c][0] - 1], &p.in, outs, 2, SPLIT_AS_SERVER, &unused);
        }
        for (int run = 0; run < runs; run++)
            for (int c = 0; c < NCONF; c++) {
                openblas_set_num_threads(conf[c][1]);
                rate[c][run] = server_pool_stream(pools[conf[c][0] - 1], &p.in, outs, requests[s],
                                                  SPLIT_AS_SERVER, &busy[c][run]);
            }
        openblas_set_num_threads(1);
        for (int c = 0; c < NCONF; c++) {
            double lo = rate[c][0], hi = rate[c][0];
            for (int run = 1; run < runs; run++)
                lo = rate[c][run] < lo ? rate[c][run] : lo,
                hi = rate[c][run] > hi ? rate[c][run] : hi;
            printf("| %s | %d | %d × %d%s | %.1f | %.1f – %.1f |", shapes[s].name, requests[s],
                   conf[c][0], conf[c][1], c == 0 ? " (server)" : "", bench_median(rate[c], runs),
                   lo, hi);
            print_time(bench_median(busy[c], runs));
            printf(" |\n");
        }
        fflush(stdout);
        for (int w = 0; w < 2; w++)
            problem_outputs_free(&outs[w]);
        problem_free(&p);
    }
    printf("\n");
}

/* ---- memory of one computation ------------------------------------------------------- */

/* Resident set of this process now, in bytes (/proc/self/status), or 0. */
static size_t rss_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* One computation on 1 worker (this thread, 1 OpenBLAS thread); prints
 * its memory accounting as key=value pairs for bench/rss.sh. */
static int rss_mode(size_t n, int patterns) {
    openblas_set_num_threads(1);
    size_t before = rss_now();
    problem p;
    problem_make(&p, (bench_shape){"GPT-2", n, 768, 12, 64, 1, 1});
    attn_output out;
    problem_outputs_make(&out, &p, patterns);
    attn_workspace *ws = attn_workspace_create();
    if (!ws) return 1;
    double t0 = bench_now();
    int rc = attn_compute(&out, ws, &p.in, NULL);
    double secs = bench_now() - t0;
    printf("rss n=%zu outputs=%s status=%d seconds=%.2f rss_before=%zu inputs_weights=%zu "
           "embeddings=%zu patterns=%zu workspace=%zu workspace_need=%zu\n",
           n, patterns ? "patterns" : "emb", rc, secs, before, problem_input_bytes(&p),
           p.s.n * p.s.dm * sizeof(float), patterns ? problem_patterns_bytes(&p) : 0,
           attn_workspace_bytes(ws), attn_workspace_need(n, 768, 12, 64));
    attn_workspace_destroy(ws);
    problem_outputs_free(&out);
    problem_free(&p);
    return rc ? 1 : 0;
}

/* ---- main -------------------------------------------------------------------------------- */

static int usage(const char *argv0) {
    fprintf(stderr, "usage: %s [--quick]\n       %s --rss N patterns|emb\n", argv0, argv0);
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--rss")) {
        long n = strtol(argv[2], NULL, 10);
        int pat = !strcmp(argv[3], "patterns");
        if (n < 1 || (!pat && strcmp(argv[3], "emb"))) return usage(argv[0]);
        return rss_mode((size_t)n, pat);
    }
    int quick = argc == 2 && !strcmp(argv[1], "--quick");
    if (argc > 1 && !quick) return usage(argv[0]);

    lat_shape shapes[] = {
        {{"3×4×1", 3, 4, 1, 4, 0, 15}, 0, 0},
        {{"16×64×4", 16, 64, 4, 16, 1, 15}, 0, 0},
        {{"128×768×12 (GPT-2)", 128, 768, 12, 64, 1, 15}, 0, 1},
        {{"1024×768×12 (GPT-2)", 1024, 768, 12, 64, 1, 11}, 0, 1},
        {{"4096×768×12 (GPT-2)", 4096, 768, 12, 64, 1, 7}, 1, 1}, /* patterns: 805 MB */
        {{"128×12288×96 (GPT-3 width)", 128, 12288, 96, 128, 1, 5}, 0, 0},
    };
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    int nshapes = NSHAPES;
    if (quick) { /* the GPT-3-width weights alone take ~10 s to fill and 2.4 GB */
        nshapes = NSHAPES - 1;
        for (int s = 0; s < nshapes; s++)
            shapes[s].s.reps = s < 3 ? 3 : 1;
    }

    printf("OpenBLAS: %s; core %s; %d procs; softmax exp: SLEEF %s.\n", openblas_get_config(),
           openblas_get_corename(), openblas_get_num_procs(), attn_vexp_path());
    printf("Every computation: causal mask, b_qkv and b_o, every head; w_o except 3×4×1 (d_head "
           "= d_model / heads). Outputs: \"default\" = patterns + embeddings, \"emb\" = "
           "embeddings only.\nConfigurations are interleaved sample by sample, so that load "
           "from other processes falls on all of them alike; medians are shown.\n\n");
    fflush(stdout);

    server_pool *pools[2] = {server_pool_create(1), server_pool_create(2)};
    peak_bufs pk;
    peak_make(&pk);
    double peak1[MAXREP], peak2[MAXREP];
    for (int k = 0; k < 5; k++) { /* the 1-thread figure, for scale */
        openblas_set_num_threads(1);
        peak1[k] = peak_gflops(&pk);
        openblas_set_num_threads(2);
        peak2[k] = peak_gflops(&pk);
    }
    openblas_set_num_threads(1);

    lat_row rows[2 * NSHAPES];
    double peaks[NSHAPES * MAXREP];
    int nrows = 0, npeaks = 0;
    for (int s = 0; s < nshapes; s++) {
        double t0 = bench_now();
        nrows += latency_shape(rows + nrows, &shapes[s], pools[1], &pk, peaks, &npeaks);
        fprintf(stderr, "bench_attention: %s measured in %.0f s\n", shapes[s].s.name,
                bench_now() - t0);
    }
    print_latency(rows, nrows, shapes, nshapes, peaks, npeaks, bench_median(peak1, 5),
                  bench_median(peak2, 5));
    fflush(stdout);

    bench_shape tp[] = {shapes[2].s, shapes[3].s};
    int requests[] = {quick ? 16 : 60, quick ? 4 : 10};
    throughput(tp, requests, 2, quick ? 1 : 5, pools);

    int same = 1;
    for (int i = 0; i < nrows; i++)
        same = same && rows[i].same;
    server_pool_destroy(pools[0]);
    server_pool_destroy(pools[1]);
    free(pk.a), free(pk.b), free(pk.c);
    return same ? 0 : 1;
}
